//! The frames a host's kernel would build and check for the agent's UDP sockets, for a host
//! whose agent talks to its edge switch over a shared-memory link
//! ([`ofan_hostlink`]): Ethernet, IPv4 and UDP headers on the way out, the
//! checks a host's IP stack makes on the way in.

use ofan_dataplane::wire::{self, EtherType, IpProtocol, MacAddr};

/// The addresses of a UDP datagram a host sends through its link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp4Addresses {
    /// The host's MAC.
    pub src_mac: MacAddr,
    /// The switch port's MAC.
    pub dst_mac: MacAddr,
    /// The host's address and port.
    pub src: std::net::SocketAddrV4,
    /// The destination's.
    pub dst: std::net::SocketAddrV4,
}

/// Ethernet, IPv4 and UDP headers before a datagram's payload.
pub const UDP4_HEADERS: usize = wire::ETHERNET_HEADER_LEN + wire::IPV4_HEADER_LEN + 8;

/// Writes the headers of a UDP datagram of `payload` bytes into `out[..UDP4_HEADERS]` (TTL 64,
/// DSCP and ECN `tos`, don't fragment, IPv4 header checksum; UDP checksum 0, which IPv4
/// allows — the kernel's UDP checks nothing then, as for a datagram whose NIC verified it).
///
/// # Panics
/// When `out` is shorter than the headers or the datagram would exceed 65 535 bytes.
pub fn write_udp4_headers(
    out: &mut [u8],
    addresses: &Udp4Addresses,
    tos: u8,
    ident: u16,
    payload: usize,
) {
    let ip_len = u16::try_from(wire::IPV4_HEADER_LEN + 8 + payload).expect("a datagram's size");
    let (eth, rest) = out[..UDP4_HEADERS].split_at_mut(wire::ETHERNET_HEADER_LEN);
    eth[..6].copy_from_slice(&addresses.dst_mac);
    eth[6..12].copy_from_slice(&addresses.src_mac);
    eth[12..14].copy_from_slice(&EtherType::IPV4.0.to_be_bytes());
    let (ip, udp) = rest.split_at_mut(wire::IPV4_HEADER_LEN);
    ip[0] = 0x45;
    ip[1] = tos;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = IpProtocol::UDP.0;
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&addresses.src.ip().octets());
    ip[16..20].copy_from_slice(&addresses.dst.ip().octets());
    let sum = wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    udp[0..2].copy_from_slice(&addresses.src.port().to_be_bytes());
    udp[2..4].copy_from_slice(&addresses.dst.port().to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - wire::IPV4_HEADER_LEN as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0, 0]);
}

/// A UDP datagram read from a host link's down ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Udp4Datagram {
    /// Where it came from.
    pub from: std::net::SocketAddrV4,
    /// Its IPv4 DSCP and ECN byte.
    pub tos: u8,
    /// Where its payload lies in the frame.
    pub payload: std::ops::Range<usize>,
}

/// Reads a frame from the down ring as the host's kernel would: an IPv4 UDP datagram with a
/// correct header checksum (`None` otherwise).
pub fn parse_udp4(frame: &[u8]) -> Option<Udp4Datagram> {
    let parsed = wire::parse(frame).ok()?;
    let (std::net::IpAddr::V4(src), Some(ports)) = (parsed.src, parsed.ports) else {
        return None;
    };
    if parsed.protocol != IpProtocol::UDP {
        return None;
    }
    let udp_len = usize::from(u16::from_be_bytes(
        frame
            .get(parsed.l4_offset + 4..parsed.l4_offset + 6)?
            .try_into()
            .ok()?,
    ));
    let start = parsed.l4_offset + 8;
    let end = (parsed.l4_offset + udp_len).min(parsed.l3_end);
    if udp_len < 8 || end < start {
        return None;
    }
    Some(Udp4Datagram {
        from: std::net::SocketAddrV4::new(src, ports.src),
        tos: frame[parsed.l3_offset + 1],
        payload: start..end,
    })
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddrV4};

    use super::*;

    #[test]
    fn a_datagram_written_for_the_link_parses_as_the_switch_and_the_host_read_it() {
        let addresses = Udp4Addresses {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 0xfe],
            src: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 40_000),
            dst: SocketAddrV4::new(Ipv4Addr::new(10, 3, 1, 2), 4791),
        };
        let mut frame = vec![0u8; UDP4_HEADERS + 100];
        write_udp4_headers(&mut frame, &addresses, 0x02, 7, 100);
        frame[UDP4_HEADERS..].fill(0x5a);
        assert!(ofan_hostlink::is_for_agent(&frame, 4791));
        assert!(!ofan_hostlink::is_for_agent(&frame, 4792));
        let parsed = wire::parse(&frame).expect("a valid frame");
        assert_eq!(parsed.hop_limit, 64);
        let datagram = parse_udp4(&frame).expect("a datagram");
        assert_eq!(datagram.from, addresses.src);
        assert_eq!(datagram.tos, 0x02);
        assert_eq!(datagram.payload, UDP4_HEADERS..UDP4_HEADERS + 100);
        // A corrupted header checksum: the host's kernel would drop it.
        frame[wire::ETHERNET_HEADER_LEN + 8] = 3;
        assert_eq!(parse_udp4(&frame), None);
    }
}
