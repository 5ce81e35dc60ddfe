//! IPv6 fixed headers.

use std::net::Ipv6Addr;

use super::{Ecn, IpProtocol, ParseError};

mod field {
    use std::ops::Range;

    pub const VER_TC_FLOW: Range<usize> = 0..4;
    /// The traffic class's low four bits (the ECN field in bits 4–5) and the flow label's top
    /// four.
    pub const TC_LOW_FLOW_HIGH: usize = 1;
    pub const PAYLOAD_LEN: Range<usize> = 4..6;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the IPv6 fixed header.
pub const HEADER_LEN: usize = 40;

/// A read/write view of an IPv6 packet (the fixed header; extension headers are payload).
///
/// [`new_checked`](Self::new_checked) verifies the version and that `40 + payload length` fits
/// in the buffer; after that no accessor panics.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer (which may carry link-layer padding after the packet) and checks it.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than 40 bytes,
    /// [`ParseError::BadVersion`] if the version is not 6, [`ParseError::BadIpv6Header`] if the
    /// payload length runs past the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let len = buffer.as_ref().len();
        Self::new_checked_in(buffer, len)
    }

    /// [`Ipv6Packet::new_checked`] for the first `buffer.len()` bytes of a packet of
    /// `packet_len` bytes (a multi-buffer packet's first buffer): the payload length is checked
    /// against `packet_len`; [`Ipv6Packet::payload`] must not be used (it would run past the
    /// buffer).
    ///
    /// # Errors
    /// As [`Ipv6Packet::new_checked`].
    pub fn new_checked_in(buffer: T, packet_len: usize) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        let len = packet_len.max(packet.buffer.as_ref().len());
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if packet.version() != 6 {
            return Err(ParseError::BadVersion);
        }
        if HEADER_LEN + usize::from(packet.payload_len()) > len {
            return Err(ParseError::BadIpv6Header);
        }
        Ok(packet)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    fn word(&self) -> u32 {
        let b = &self.bytes()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// IP version (6 for a checked packet).
    pub fn version(&self) -> u8 {
        (self.word() >> 28) as u8
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (self.word() >> 20) as u8
    }

    /// ECN field: the two low bits of the traffic class.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word() & 0x000F_FFFF
    }

    /// Payload length in bytes (extension headers included).
    pub fn payload_len(&self) -> u16 {
        let b = &self.bytes()[field::PAYLOAD_LEN];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Next header.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.bytes()[field::NEXT_HEADER])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.bytes()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.bytes()[field::SRC]);
        Ipv6Addr::from(octets)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut octets = [0; 16];
        octets.copy_from_slice(&self.bytes()[field::DST]);
        Ipv6Addr::from(octets)
    }

    /// The payload (link padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the ECN field, keeping the rest of the traffic class (IPv6 has no header checksum).
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let byte = &mut self.buffer.as_mut()[field::TC_LOW_FLOW_HIGH];
        *byte = (*byte & !0b0011_0000) | ecn.bits() << 4;
    }

    /// Decrements the hop limit (wrapping at 0; callers drop hop limit ≤ 1 first). IPv6 has no
    /// header checksum, and the hop limit is not in the L4 pseudo-header. Returns the new value.
    pub fn decrement_hop_limit(&mut self) -> u8 {
        let hop_limit = self.hop_limit().wrapping_sub(1);
        self.set_hop_limit(hop_limit);
        hop_limit
    }
}
