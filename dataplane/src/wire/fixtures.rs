//! Byte fixtures and frame builders shared by the tests of `wire` and `forward`.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::checksum;

/// A DNS response as captured on a LAN: 192.168.0.1:53 → 192.168.0.199:58273, UDP, TTL 64,
/// DF, the IPv4 header of the Wikipedia checksum example (checksum `0xb861`), 87 bytes of
/// payload.
pub fn captured_ipv4_udp() -> Vec<u8> {
    let mut frame = vec![
        0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x5d, // destination MAC
        0x00, 0x0c, 0x29, 0x88, 0x77, 0x66, // source MAC
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, // IPv4
        0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7, //
        0x00, 0x35, 0xe3, 0xa1, 0x00, 0x5f, 0x00, 0x00, // UDP
    ];
    frame.extend((0..87u8).map(|i| i.wrapping_mul(37)));
    frame
}

/// A TCP SYN over IPv6, 2001:db8::1:40000 → 2001:db8::2:5201, hop limit 64.
pub fn ipv6_tcp_syn() -> Vec<u8> {
    let mut frame = vec![
        0x02, 0, 0, 0, 0, 0x02, // destination MAC
        0x02, 0, 0, 0, 0, 0x01, // source MAC
        0x86, 0xdd, // IPv6
        0x60, 0x00, 0x00, 0x00, 0x00, 0x14, 0x06, 0x40, // ver, tc, flow, payload 20, TCP, 64
    ];
    frame.extend("2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    frame.extend("2001:db8::2".parse::<Ipv6Addr>().unwrap().octets());
    frame.extend([
        0x9c, 0x40, 0x14, 0x51, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    frame
}

/// Inserts an 802.1Q tag with `tci` after the MAC addresses.
pub fn tagged(frame: &[u8], tci: u16) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    out.extend([0x81, 0x00]);
    out.extend(tci.to_be_bytes());
    out.extend(&frame[12..]);
    out
}

/// An untagged IPv4 frame with a UDP header and `payload_len` payload bytes, correct header
/// checksum.
pub fn ipv4_udp(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ttl: u8,
    ports: (u16, u16),
    payload_len: usize,
) -> Vec<u8> {
    let total = 20 + 8 + payload_len;
    let mut frame = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0xbb, 0x08, 0x00];
    frame.extend([0x45, 0x00]);
    frame.extend((total as u16).to_be_bytes());
    frame.extend([0x12, 0x34, 0x40, 0x00, ttl, 17, 0, 0]);
    frame.extend(src.octets());
    frame.extend(dst.octets());
    let sum = checksum::checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    frame.extend(ports.0.to_be_bytes());
    frame.extend(ports.1.to_be_bytes());
    frame.extend(((8 + payload_len) as u16).to_be_bytes());
    frame.extend([0, 0]);
    frame.extend(std::iter::repeat_n(0x5a, payload_len));
    frame
}

/// An untagged IPv6 frame with a UDP header and `payload_len` payload bytes.
pub fn ipv6_udp(
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    ports: (u16, u16),
    payload_len: usize,
) -> Vec<u8> {
    let mut frame = vec![0x02, 0, 0, 0, 0, 0xaa, 0x02, 0, 0, 0, 0, 0xbb, 0x86, 0xdd];
    frame.extend([0x60, 0, 0, 0]);
    frame.extend(((8 + payload_len) as u16).to_be_bytes());
    frame.extend([17, hop_limit]);
    frame.extend(src.octets());
    frame.extend(dst.octets());
    frame.extend(ports.0.to_be_bytes());
    frame.extend(ports.1.to_be_bytes());
    frame.extend(((8 + payload_len) as u16).to_be_bytes());
    frame.extend([0, 0]);
    frame.extend(std::iter::repeat_n(0x5a, payload_len));
    frame
}

/// Recomputes the IPv4 header checksum of an untagged frame from scratch.
pub fn refill_ipv4_checksum(frame: &mut [u8], l3_offset: usize) {
    let header_len = usize::from(frame[l3_offset] & 0x0f) * 4;
    let header = &mut frame[l3_offset..l3_offset + header_len];
    header[10..12].copy_from_slice(&[0, 0]);
    let sum = checksum::checksum(header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
}
