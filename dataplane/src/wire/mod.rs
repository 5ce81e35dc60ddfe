//! Checked views of the frames the switch reads and rewrites.
//!
//! # Contract
//! - Views in the smoltcp style ([`EthernetFrame`], [`Ipv4Packet`], [`Ipv6Packet`]): a view
//!   wraps any `T: AsRef<[u8]>`; `new_checked` does every length check once, after which no
//!   accessor can panic (`new_unchecked` skips the checks and then may). Setters need
//!   `T: AsMut<[u8]>` too.
//! - [`parse`] applies the forwarding fast path's policy on top of the views and returns the
//!   few facts the forwarder needs as a [`ParsedFrame`] (offsets, addresses, hop limit,
//!   protocol, ports; the flow hash on demand), or the one [`ParseError`] that names why the
//!   frame is not for the fast path. It allocates nothing and reads each header once.
//! - Accepted: Ethernet II with at most one 802.1Q tag; IPv4 without options, not a fragment,
//!   with a correct header checksum (RFC 1812 §5.2.2: a router verifies it); IPv6 with any next
//!   header. Bytes after the IP packet (Ethernet padding) are allowed and ignored.
//! - L4 ports are read when the protocol (for IPv6: the next header itself, no extension
//!   header walk) is TCP or UDP and the minimal L4 header (20 and 8 bytes) is present.
//! - [`forward_rewrite`] is the forwarding rewrite: MACs, TTL with the IPv4 header checksum
//!   updated incrementally (RFC 1624), or the IPv6 hop limit.
//! - [`ecn`] reads a frame's ECN field and [`mark_ce`] marks it Congestion Experienced, the
//!   IPv4 header checksum updated the same way: the egress queues decide, `wire` edits the bits.

pub mod checksum;
mod ethernet;
mod ipv4;
mod ipv6;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::counters::named_counters;

pub use ethernet::{
    EtherType, EthernetFrame, MacAddr, VlanTag, HEADER_LEN as ETHERNET_HEADER_LEN,
    TAGGED_HEADER_LEN as ETHERNET_TAGGED_HEADER_LEN,
};
pub use ipv4::{Ipv4Packet, HEADER_LEN as IPV4_HEADER_LEN};
pub use ipv6::{Ipv6Packet, HEADER_LEN as IPV6_HEADER_LEN};

/// An IP protocol number (IPv4 protocol, IPv6 next header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// ICMP.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// ICMPv6.
    pub const ICMPV6: IpProtocol = IpProtocol(58);
}

/// The ECN field of an IP header (RFC 3168 §5): the low two bits of the IPv4 DSCP/ECN byte or
/// of the IPv6 traffic class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ecn {
    /// Not-ECT: the transport does not support ECN.
    NotEct,
    /// ECT(1): ECN-capable transport.
    Ect1,
    /// ECT(0): ECN-capable transport.
    Ect0,
    /// CE: congestion experienced, set by a queue on an ECN-capable packet.
    Ce,
}

impl Ecn {
    /// The codepoint of the two low bits of `bits`.
    #[inline]
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two bits of the codepoint.
    #[inline]
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// Whether the packet's transport is ECN-capable: ECT(0), ECT(1), or already marked CE.
    #[inline]
    pub const fn is_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

/// Minimal TCP header length.
pub const TCP_HEADER_LEN: usize = 20;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;

named_counters! {
    /// Why a frame is not for the forwarding fast path. Each variant is one counter
    /// ([`as_index`](Self::as_index) `< COUNT`, [`name`](Self::name) for metrics).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
    #[repr(u8)]
    pub enum ParseError {
        /// Shorter than its Ethernet header (tag included), or than the fixed IP header.
        #[error("frame truncated")]
        Truncated = "truncated",
        /// Neither IPv4 nor IPv6 (ARP, LLDP, …) after at most one 802.1Q tag.
        #[error("unknown Ethernet type")]
        UnknownEtherType = "unknown_ether_type",
        /// A second tag (QinQ) or an 802.1ad service tag.
        #[error("stacked or 802.1ad VLAN tag")]
        UnsupportedVlan = "unsupported_vlan",
        /// The IP version does not match the Ethernet type.
        #[error("IP version does not match the Ethernet type")]
        BadVersion = "bad_version",
        /// IHL below 5, or total length below the header length or beyond the frame.
        #[error("malformed IPv4 header")]
        BadIpv4Header = "bad_ipv4_header",
        /// IHL above 5: options are not forwarded on the fast path.
        #[error("IPv4 options")]
        Ipv4Options = "ipv4_options",
        /// The IPv4 header checksum is wrong.
        #[error("bad IPv4 header checksum")]
        BadIpv4Checksum = "bad_ipv4_checksum",
        /// More-fragments set or fragment offset not zero.
        #[error("IPv4 fragment")]
        Fragment = "fragment",
        /// The IPv6 payload length runs past the frame.
        #[error("malformed IPv6 header")]
        BadIpv6Header = "bad_ipv6_header",
    }
}

/// Source and destination ports of a TCP or UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct L4Ports {
    /// Source port.
    pub src: u16,
    /// Destination port.
    pub dst: u16,
}

/// IP version of a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// What the forwarder needs to know about a frame, from [`parse`].
///
/// Offsets are from the start of the frame; `src` and `dst` are of the same family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedFrame {
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// Ethernet type of the L3 packet (after the tag): `IPV4` or `IPV6`.
    pub ethertype: EtherType,
    /// Offset of the IP header (14 or 18).
    pub l3_offset: usize,
    /// Offset of the L4 header (the IPv6 payload, extension headers included).
    pub l4_offset: usize,
    /// End of the IP packet; bytes past it are link padding.
    pub l3_end: usize,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IPv4 TTL or IPv6 hop limit.
    pub hop_limit: u8,
    /// IPv4 protocol or IPv6 next header.
    pub protocol: IpProtocol,
    /// TCP or UDP ports, when the header is present.
    pub ports: Option<L4Ports>,
}

impl ParsedFrame {
    /// Hash of the 5-tuple (ports 0 when absent): [`flow_hash_v4`] or [`flow_hash_v6`].
    /// Computed when asked, since only frames with a choice of next hops need it.
    #[inline(always)]
    pub fn flow_hash(&self) -> u32 {
        match (self.src, self.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => flow_hash_v4(src, dst, self.protocol, self.ports),
            (IpAddr::V6(src), IpAddr::V6(dst)) => flow_hash_v6(src, dst, self.protocol, self.ports),
            // `parse` never mixes families; a hand-made frame that does is hashed as IPv6.
            (src, dst) => {
                let v6 = |addr: IpAddr| match addr {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                flow_hash_v6(v6(src), v6(dst), self.protocol, self.ports)
            }
        }
    }

    /// IP version.
    #[inline]
    pub fn version(&self) -> IpVersion {
        if self.ethertype == EtherType::IPV6 {
            IpVersion::V6
        } else {
            IpVersion::V4
        }
    }
}

impl fmt::Display for ParsedFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ports = self.ports.unwrap_or_default();
        write!(
            f,
            "{}:{} -> {}:{} proto {} hop limit {}",
            self.src, ports.src, self.dst, ports.dst, self.protocol.0, self.hop_limit
        )
    }
}

/// Parses a frame for the forwarding fast path.
///
/// # Errors
/// The [`ParseError`] that names why the frame is not for the fast path.
#[inline]
pub fn parse(frame: &[u8]) -> Result<ParsedFrame, ParseError> {
    parse_head(frame, frame.len())
}

/// The length of the packet whose first buffer is `head`: `frame_len`, or `head`'s own length
/// when `frame_len` is smaller (a whole frame passed with 0, as the single-buffer callers may).
#[inline]
fn packet_len(head: &[u8], frame_len: usize) -> usize {
    frame_len.max(head.len())
}

/// [`parse`] for a frame of `frame_len` bytes of which `head` holds the first (a multi-buffer
/// packet's first buffer, which holds the headers): lengths in the headers are checked against
/// `frame_len`, and only `head` is read.
///
/// # Errors
/// As [`parse`].
#[inline]
pub fn parse_head(head: &[u8], frame_len: usize) -> Result<ParsedFrame, ParseError> {
    let eth = EthernetFrame::new_checked(head)?;
    let vlan = eth.vlan();
    let l3_offset = eth.header_len();
    let ethertype = eth.ethertype();
    let l3_len = packet_len(head, frame_len) - l3_offset;
    match ethertype {
        EtherType::IPV4 => {
            let ip = Ipv4Packet::new_checked_in(eth.payload(), l3_len)?;
            if ip.header_len() != IPV4_HEADER_LEN {
                return Err(ParseError::Ipv4Options);
            }
            if !ip.verify_checksum() {
                return Err(ParseError::BadIpv4Checksum);
            }
            if ip.is_fragment() {
                return Err(ParseError::Fragment);
            }
            let (src, dst, protocol) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
            let l3_end = usize::from(ip.total_len());
            let ports = l4_ports(protocol, l4(eth.payload(), IPV4_HEADER_LEN, l3_end));
            Ok(ParsedFrame {
                vlan,
                ethertype,
                l3_offset,
                l4_offset: l3_offset + IPV4_HEADER_LEN,
                l3_end: l3_offset + usize::from(ip.total_len()),
                src: IpAddr::V4(src),
                dst: IpAddr::V4(dst),
                hop_limit: ip.ttl(),
                protocol,
                ports,
            })
        }
        EtherType::IPV6 => {
            let ip = Ipv6Packet::new_checked_in(eth.payload(), l3_len)?;
            let (src, dst, protocol) = (ip.src_addr(), ip.dst_addr(), ip.next_header());
            let l3_end = IPV6_HEADER_LEN + usize::from(ip.payload_len());
            let ports = l4_ports(protocol, l4(eth.payload(), IPV6_HEADER_LEN, l3_end));
            Ok(ParsedFrame {
                vlan,
                ethertype,
                l3_offset,
                l4_offset: l3_offset + IPV6_HEADER_LEN,
                l3_end: l3_offset + IPV6_HEADER_LEN + usize::from(ip.payload_len()),
                src: IpAddr::V6(src),
                dst: IpAddr::V6(dst),
                hop_limit: ip.hop_limit(),
                protocol,
                ports,
            })
        }
        EtherType::VLAN | EtherType::QINQ => Err(ParseError::UnsupportedVlan),
        _ => Err(ParseError::UnknownEtherType),
    }
}

/// The L4 part of `l3` (a packet's L3 bytes, or the part of them in its first buffer): from
/// `l4_offset` to the packet's end `l3_end` or the buffer's, whichever comes first.
#[inline]
fn l4(l3: &[u8], l4_offset: usize, l3_end: usize) -> &[u8] {
    l3.get(l4_offset..l3_end.min(l3.len())).unwrap_or_default()
}

/// The ports of a TCP or UDP header at the start of `l4`, if the protocol is one of them and
/// its minimal header is there.
#[inline]
fn l4_ports(protocol: IpProtocol, l4: &[u8]) -> Option<L4Ports> {
    let min_len = match protocol {
        IpProtocol::TCP => TCP_HEADER_LEN,
        IpProtocol::UDP => UDP_HEADER_LEN,
        _ => return None,
    };
    match l4 {
        [s0, s1, d0, d1, ..] if l4.len() >= min_len => Some(L4Ports {
            src: u16::from_be_bytes([*s0, *s1]),
            dst: u16::from_be_bytes([*d0, *d1]),
        }),
        _ => None,
    }
}

/// The SplitMix64 finalizer (same function as `lb::mix64`; repeated so that `wire` stays below
/// `lb`).
#[inline]
const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Ports and protocol in one word, plus a constant so that an all-zero tuple does not hash
/// to zero.
#[inline]
fn ports_word(protocol: IpProtocol, ports: Option<L4Ports>) -> u64 {
    let ports = ports.unwrap_or_default();
    (u64::from(ports.src) << 48 | u64::from(ports.dst) << 32 | u64::from(protocol.0))
        ^ 0x6f66_616e_0000_0100
}

/// Flow hash of an IPv4 5-tuple: two SplitMix64 rounds over the 104 bits.
#[inline]
pub fn flow_hash_v4(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    protocol: IpProtocol,
    ports: Option<L4Ports>,
) -> u32 {
    let addresses = u64::from(src.to_bits()) << 32 | u64::from(dst.to_bits());
    (mix64(addresses ^ mix64(ports_word(protocol, ports))) >> 32) as u32
}

/// Flow hash of an IPv6 5-tuple: each address folded to 64 bits, three SplitMix64 rounds.
#[inline]
pub fn flow_hash_v6(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    protocol: IpProtocol,
    ports: Option<L4Ports>,
) -> u32 {
    let fold = |addr: Ipv6Addr| {
        let bits = addr.to_bits();
        ((bits >> 64) as u64) ^ (bits as u64).rotate_left(32)
    };
    let h = mix64(fold(dst) ^ mix64(ports_word(protocol, ports)));
    (mix64(fold(src) ^ h) >> 32) as u32
}

/// The forwarding rewrite of a frame: source and destination MAC, then the IPv4 TTL (with the
/// header checksum updated incrementally, RFC 1624) or the IPv6 hop limit decremented by one.
///
/// `l3_offset` and `version` are [`parse`]'s [`ParsedFrame::l3_offset`] and
/// [`ParsedFrame::version`] for this very frame, unchanged since; the caller has already refused
/// hop limits ≤ 1. If the frame does not match them (a caller bug), the IP header is left alone
/// and the function does not panic. `frame` may be the first buffer of a packet of `frame_len`
/// bytes (as for [`parse_head`]; a `frame_len` up to `frame.len()` means the frame is whole):
/// only the headers are written.
#[inline]
pub fn forward_rewrite(
    frame: &mut [u8],
    frame_len: usize,
    l3_offset: usize,
    version: IpVersion,
    src_mac: MacAddr,
    dst_mac: MacAddr,
) {
    let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
        debug_assert!(false, "frame no longer parses as Ethernet");
        return;
    };
    eth.set_dst_addr(dst_mac);
    eth.set_src_addr(src_mac);
    let l3_len = packet_len(frame, frame_len).saturating_sub(l3_offset);
    let Some(l3) = frame.get_mut(l3_offset..) else {
        debug_assert!(false, "L3 offset past the frame");
        return;
    };
    match version {
        IpVersion::V4 => {
            if let Ok(mut ip) = Ipv4Packet::new_checked_in(l3, l3_len) {
                ip.decrement_ttl();
            }
        }
        IpVersion::V6 => {
            if let Ok(mut ip) = Ipv6Packet::new_checked_in(l3, l3_len) {
                ip.decrement_hop_limit();
            }
        }
    }
}

/// The ECN field of a frame's IP header (Ethernet II with at most one 802.1Q tag). `None` for a
/// frame that is not IPv4 or IPv6, or whose IP header does not pass
/// [`Ipv4Packet::new_checked_in`] or [`Ipv6Packet::new_checked_in`] for a packet of
/// `frame_len` bytes (`frame` may be its first buffer, as for [`parse_head`]).
#[inline]
pub fn ecn(frame: &[u8], frame_len: usize) -> Option<Ecn> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let l3_len = packet_len(frame, frame_len) - eth.header_len();
    match eth.ethertype() {
        EtherType::IPV4 => Some(
            Ipv4Packet::new_checked_in(eth.payload(), l3_len)
                .ok()?
                .ecn(),
        ),
        EtherType::IPV6 => Some(
            Ipv6Packet::new_checked_in(eth.payload(), l3_len)
                .ok()?
                .ecn(),
        ),
        _ => None,
    }
}

/// Marks an ECN-capable frame Congestion Experienced (RFC 3168 §5): ECT(0) or ECT(1) becomes CE,
/// with the IPv4 header checksum updated incrementally (RFC 1624). Returns whether the frame
/// changed: a Not-ECT or already marked frame, or one [`ecn`] cannot read, is left alone.
/// `frame` may be the first buffer of a packet of `frame_len` bytes.
#[inline]
pub fn mark_ce(frame: &mut [u8], frame_len: usize) -> bool {
    let total = packet_len(frame, frame_len);
    let Ok(mut eth) = EthernetFrame::new_checked(frame) else {
        return false;
    };
    let l3_len = total - eth.header_len();
    let ethertype = eth.ethertype();
    let l3 = eth.payload_mut();
    let markable = |ecn: Ecn| matches!(ecn, Ecn::Ect0 | Ecn::Ect1);
    match ethertype {
        EtherType::IPV4 => match Ipv4Packet::new_checked_in(l3, l3_len) {
            Ok(mut ip) if markable(ip.ecn()) => {
                ip.set_ecn(Ecn::Ce);
                true
            }
            _ => false,
        },
        EtherType::IPV6 => match Ipv6Packet::new_checked_in(l3, l3_len) {
            Ok(mut ip) if markable(ip.ecn()) => {
                ip.set_ecn(Ecn::Ce);
                true
            }
            _ => false,
        },
        _ => false,
    }
}

/// Sets the DSCP of the IPv4 packet at `l3_offset` (keeping ECN, updating the checksum);
/// anything that is not a whole IPv4 header is left alone.
pub fn set_dscp(frame: &mut [u8], frame_len: usize, l3_offset: usize, dscp: u8) {
    let l3_len = packet_len(frame, frame_len).saturating_sub(l3_offset);
    if let Some(l3) = frame.get_mut(l3_offset..) {
        if let Ok(mut ip) = Ipv4Packet::new_checked_in(l3, l3_len) {
            ip.set_dscp(dscp);
        }
    }
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
