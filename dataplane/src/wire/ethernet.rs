//! Ethernet II frames with at most one 802.1Q tag.

use super::ParseError;

/// A MAC address.
pub type MacAddr = [u8; 6];

/// An Ethernet type (the 16-bit protocol field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// An 802.1Q VLAN tag follows.
    pub const VLAN: EtherType = EtherType(0x8100);
    /// An 802.1ad service tag (QinQ) follows.
    pub const QINQ: EtherType = EtherType(0x88A8);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86DD);
}

/// An 802.1Q tag control word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag(pub u16);

impl VlanTag {
    /// Priority code point (3 bits).
    pub const fn pcp(self) -> u8 {
        (self.0 >> 13) as u8
    }

    /// Drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.0 & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    pub const fn vid(self) -> u16 {
        self.0 & 0x0FFF
    }
}

mod field {
    use std::ops::Range;

    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const VLAN_TCI: Range<usize> = 14..16;
    pub const INNER_ETHERTYPE: Range<usize> = 16..18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of an Ethernet II header with one 802.1Q tag.
pub const TAGGED_HEADER_LEN: usize = 18;

/// A read/write view of an Ethernet II frame with an optional single 802.1Q tag.
///
/// [`new_checked`](Self::new_checked) verifies that the whole header, tag included, is present;
/// after that no accessor panics. A view made with [`new_unchecked`](Self::new_unchecked) may
/// panic on a short buffer.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer and checks that the header (and the 802.1Q tag, if the frame has one)
    /// fits.
    ///
    /// # Errors
    /// [`ParseError::Truncated`] if it does not.
    pub fn new_checked(buffer: T) -> Result<Self, ParseError> {
        let frame = Self::new_unchecked(buffer);
        let len = frame.buffer.as_ref().len();
        if len < HEADER_LEN || len < frame.header_len() {
            return Err(ParseError::Truncated);
        }
        Ok(frame)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn read_u16(&self, range: std::ops::Range<usize>) -> u16 {
        let bytes = &self.buffer.as_ref()[range];
        u16::from_be_bytes([bytes[0], bytes[1]])
    }

    /// Destination MAC address.
    pub fn dst_addr(&self) -> MacAddr {
        let mut mac = [0; 6];
        mac.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        mac
    }

    /// Source MAC address.
    pub fn src_addr(&self) -> MacAddr {
        let mut mac = [0; 6];
        mac.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        mac
    }

    /// The Ethernet type right after the source address (`VLAN` for a tagged frame).
    pub fn outer_ethertype(&self) -> EtherType {
        EtherType(self.read_u16(field::ETHERTYPE))
    }

    /// The 802.1Q tag, if the frame has one.
    pub fn vlan(&self) -> Option<VlanTag> {
        (self.outer_ethertype() == EtherType::VLAN).then(|| VlanTag(self.read_u16(field::VLAN_TCI)))
    }

    /// The Ethernet type of the payload (after the tag, if any).
    pub fn ethertype(&self) -> EtherType {
        if self.outer_ethertype() == EtherType::VLAN {
            EtherType(self.read_u16(field::INNER_ETHERTYPE))
        } else {
            self.outer_ethertype()
        }
    }

    /// Header length: 14, or 18 with a tag.
    pub fn header_len(&self) -> usize {
        if self.outer_ethertype() == EtherType::VLAN {
            TAGGED_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Everything after the header (the L3 packet and any padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst_addr(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&mac);
    }

    /// Sets the source MAC address.
    pub fn set_src_addr(&mut self, mac: MacAddr) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&mac);
    }

    /// Everything after the header, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}
