//! IPv4 headers.

use std::net::Ipv4Addr;

use super::{checksum, Ecn, IpProtocol, ParseError};

mod field {
    use std::ops::Range;

    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A read/write view of an IPv4 packet.
///
/// [`new_checked`](Self::new_checked) verifies the version, that the header length is at least
/// 20 bytes and that `header length ≤ total length ≤ buffer length`; after that no accessor
/// panics. Options, fragments and the header checksum are *not* policed here: they are
/// [`parse`](super::parse)'s fast-path policy, not facts about the packet's shape.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer (which may carry link-layer padding after the packet) and checks it.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if the buffer is shorter than 20 bytes,
    /// [`ParseError::BadVersion`] if the version is not 4, [`ParseError::BadIpv4Header`] if the
    /// IHL is below 5 or the total length is below the header length or beyond the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let len = buffer.as_ref().len();
        Self::new_checked_in(buffer, len)
    }

    /// [`Ipv4Packet::new_checked`] for the first `buffer.len()` bytes of a packet of
    /// `packet_len` bytes (a multi-buffer packet's first buffer): the total length is checked
    /// against `packet_len`; [`Ipv4Packet::payload`] must not be used (it would run past the
    /// buffer).
    ///
    /// # Errors
    /// As [`Ipv4Packet::new_checked`].
    pub fn new_checked_in(buffer: T, packet_len: usize) -> Result<Self, ParseError> {
        let packet = Self::new_unchecked(buffer);
        let len = packet_len.max(packet.buffer.as_ref().len());
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(ParseError::Truncated);
        }
        if packet.version() != 4 {
            return Err(ParseError::BadVersion);
        }
        let header_len = packet.header_len();
        let total_len = usize::from(packet.total_len());
        if header_len < HEADER_LEN || total_len < header_len || total_len > len {
            return Err(ParseError::BadIpv4Header);
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

    fn read_u16(&self, range: std::ops::Range<usize>) -> u16 {
        let bytes = &self.bytes()[range];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    /// IP version (4 for a checked packet).
    pub fn version(&self) -> u8 {
        self.bytes()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL · 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.bytes()[field::VER_IHL] & 0x0F) * 4
    }

    /// DSCP and ECN byte.
    pub fn dscp_ecn(&self) -> u8 {
        self.bytes()[field::DSCP_ECN]
    }

    /// ECN field: the two low bits of the DSCP/ECN byte.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.dscp_ecn())
    }

    /// Total length (header and payload) in bytes.
    pub fn total_len(&self) -> u16 {
        self.read_u16(field::TOTAL_LEN)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.read_u16(field::IDENT)
    }

    /// Don't-fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.read_u16(field::FLAGS_FRAG) & 0x4000 != 0
    }

    /// More-fragments flag.
    pub fn more_frags(&self) -> bool {
        self.read_u16(field::FLAGS_FRAG) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (self.read_u16(field::FLAGS_FRAG) & 0x1FFF) << 3
    }

    /// Whether the packet is a fragment (more fragments follow or the offset is not zero).
    pub fn is_fragment(&self) -> bool {
        self.read_u16(field::FLAGS_FRAG) & 0x3FFF != 0
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.bytes()[field::TTL]
    }

    /// Payload protocol.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.bytes()[field::PROTOCOL])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        self.read_u16(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.bytes()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.bytes()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Whether the header (options included) sums to `0xFFFF`.
    pub fn verify_checksum(&self) -> bool {
        checksum::verify(&self.bytes()[..self.header_len()])
    }

    /// The payload: from the end of the header to the total length (link padding excluded).
    pub fn payload(&self) -> &[u8] {
        &self.bytes()[self.header_len()..usize::from(self.total_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets the TTL without touching the checksum.
    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the ECN field, keeping the DSCP, and updates the header checksum incrementally
    /// (RFC 1624 eqn. 3) over the version/IHL/DSCP/ECN word.
    #[inline]
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let (ver_ihl, old) = (self.bytes()[field::VER_IHL], self.dscp_ecn());
        let new = (old & !0b11) | ecn.bits();
        let value = checksum::update(
            self.checksum(),
            u16::from_be_bytes([ver_ihl, old]),
            u16::from_be_bytes([ver_ihl, new]),
        );
        self.buffer.as_mut()[field::DSCP_ECN] = new;
        self.set_checksum(value);
    }

    /// Sets the DSCP (the top six bits of the DSCP/ECN byte; only the low six bits of `dscp`
    /// count), keeps the ECN bits, and updates the header checksum incrementally.
    pub fn set_dscp(&mut self, dscp: u8) {
        let (ver_ihl, old) = (self.bytes()[field::VER_IHL], self.dscp_ecn());
        let new = (dscp << 2) | (old & 0b11);
        let value = checksum::update(
            self.checksum(),
            u16::from_be_bytes([ver_ihl, old]),
            u16::from_be_bytes([ver_ihl, new]),
        );
        self.buffer.as_mut()[field::DSCP_ECN] = new;
        self.set_checksum(value);
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let value = checksum::checksum(&self.bytes()[..self.header_len()]);
        self.set_checksum(value);
    }

    /// Decrements the TTL (wrapping at 0; callers drop TTL ≤ 1 first) and updates the header
    /// checksum incrementally (RFC 1624 eqn. 3) over the TTL/protocol word. Returns the new TTL.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let ttl = self.ttl();
        let protocol = self.protocol().0;
        let new_ttl = ttl.wrapping_sub(1);
        let old_word = u16::from_be_bytes([ttl, protocol]);
        let new_word = u16::from_be_bytes([new_ttl, protocol]);
        let value = checksum::update(self.checksum(), old_word, new_word);
        self.set_ttl(new_ttl);
        self.set_checksum(value);
        new_ttl
    }
}
