//! `ofan-storm`: floods a switch port with malformed and hostile frames, for the storm test.
//!
//! ```text
//! ofan-storm --dev eth0 --switch-mac 02:..:.. --seconds 10
//! ```
//! Sends, round robin and as fast as the host can, one frame of each [`Kind`] through a raw
//! `AF_PACKET` socket bound to `--dev`, and prints one `KIND=SENT` line per kind (frames
//! handed to the kernel), `refused_KIND=N` for each kind the kernel refused some of (the send
//! failed: the device dropped the frame), then `seconds=S`. The addresses are those of the
//! storm lab in `tests/tests/switch/storm.rs`: the sender is 10.0.0.1 / fd00:0::1 behind the
//! switch's 10.0.0.0 / fd00:0::, the other hosts are 10.0.1.1 / fd00:1::1 and 10.0.2.1 /
//! fd00:2::1.

use std::process::ExitCode;
use std::time::{Duration, Instant};

const BROADCAST: [u8; 6] = [0xff; 6];
const SENDER_V4: [u8; 4] = [10, 0, 0, 1];
const SWITCH_V4: [u8; 4] = [10, 0, 0, 0];
const RECEIVER_V4: [u8; 4] = [10, 0, 1, 1];
const THIRD_V4: [u8; 4] = [10, 0, 2, 1];
const SENDER_V6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const THIRD_V6: [u8; 16] = [0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

/// What the storm sends, one frame of each per round. The comment names where the frame must
/// land (a steering counter `pass_*`, a data-path counter, or the kernel).
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// An IPv4 EtherType with 3 bytes after it → `pass_malformed`.
    TruncatedIpv4,
    /// IPv4 with IHL 4 → `pass_malformed`.
    Ihl4,
    /// IPv6 EtherType with 20 bytes after it → `pass_malformed`.
    TruncatedIpv6,
    /// IPv4 whose total length (1000) exceeds the frame → `drop_bad_ipv4_header`.
    BadTotalLength,
    /// IPv4 with a wrong header checksum → `drop_bad_ipv4_checksum`.
    BadChecksum,
    /// TTL 0 → `pass_ttl`.
    Ttl0,
    /// TTL 1 → `pass_ttl` (the kernel answers ICMP time exceeded).
    Ttl1,
    /// IPv6 with destination options → routing (type 253, 0 segments left) → no next header,
    /// to the third host → `forwarded`.
    Ipv6ExtensionChain,
    /// IPv6 with hop-by-hop → destination options → no next header → `pass_v6_hop_by_hop`.
    Ipv6HopByHop,
    /// 2000 bytes, above the switch port's MTU of 1500 (the sender's is raised): the veth
    /// drops it before XDP, counted in the sender's `tx_dropped`.
    Oversized,
    /// EtherType 0x88b5 (local experimental) → `pass_non_ip`.
    UnknownEtherType,
    /// UDP to the switch's own address → `pass_local`.
    ToSwitchAddress,
    /// ARP who-has 10.0.0.77 to the broadcast MAC → `pass_arp`.
    ArpBroadcast,
    /// UDP to 255.255.255.255 → `pass_multicast`.
    IpBroadcast,
    /// UDP from the receiver's address (10.0.1.1) to the third host's port 9003 → `forwarded`.
    SpoofedSource,
}

const KINDS: [Kind; 15] = [
    Kind::TruncatedIpv4,
    Kind::Ihl4,
    Kind::TruncatedIpv6,
    Kind::BadTotalLength,
    Kind::BadChecksum,
    Kind::Ttl0,
    Kind::Ttl1,
    Kind::Ipv6ExtensionChain,
    Kind::Ipv6HopByHop,
    Kind::Oversized,
    Kind::UnknownEtherType,
    Kind::ToSwitchAddress,
    Kind::ArpBroadcast,
    Kind::IpBroadcast,
    Kind::SpoofedSource,
];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::TruncatedIpv4 => "truncated_ipv4",
            Kind::Ihl4 => "ihl_4",
            Kind::TruncatedIpv6 => "truncated_ipv6",
            Kind::BadTotalLength => "bad_total_length",
            Kind::BadChecksum => "bad_checksum",
            Kind::Ttl0 => "ttl_0",
            Kind::Ttl1 => "ttl_1",
            Kind::Ipv6ExtensionChain => "ipv6_extension_chain",
            Kind::Ipv6HopByHop => "ipv6_hop_by_hop",
            Kind::Oversized => "oversized",
            Kind::UnknownEtherType => "unknown_ether_type",
            Kind::ToSwitchAddress => "to_switch_address",
            Kind::ArpBroadcast => "arp_broadcast",
            Kind::IpBroadcast => "ip_broadcast",
            Kind::SpoofedSource => "spoofed_source",
        }
    }

    /// The frame, given the switch port's and the sender's MAC addresses. `sequence` makes
    /// the spoofed datagrams distinct for the receiver's duplicate check.
    fn frame(self, switch: [u8; 6], own: [u8; 6], sequence: u64) -> Vec<u8> {
        let to_switch = |ether_type: u16| ethernet(switch, own, ether_type);
        match self {
            Kind::TruncatedIpv4 => [to_switch(0x0800), vec![0x45, 0, 0]].concat(),
            Kind::Ihl4 => {
                let mut frame = ipv4(switch, own, SENDER_V4, RECEIVER_V4, 64, &udp(9, 9, 20));
                frame[14] = 0x44;
                fix_ipv4_checksum(&mut frame);
                frame
            }
            Kind::TruncatedIpv6 => [to_switch(0x86dd), vec![0x60; 20]].concat(),
            Kind::BadTotalLength => {
                let mut frame = ipv4(switch, own, SENDER_V4, RECEIVER_V4, 64, &udp(9, 9, 20));
                frame[16..18].copy_from_slice(&1000u16.to_be_bytes());
                fix_ipv4_checksum(&mut frame);
                frame
            }
            Kind::BadChecksum => {
                let mut frame = ipv4(switch, own, SENDER_V4, RECEIVER_V4, 64, &udp(9, 9, 20));
                frame[24] ^= 0x5a;
                frame
            }
            Kind::Ttl0 => ipv4(switch, own, SENDER_V4, RECEIVER_V4, 0, &udp(9, 9, 20)),
            Kind::Ttl1 => ipv4(switch, own, SENDER_V4, RECEIVER_V4, 1, &udp(9, 9, 20)),
            Kind::Ipv6ExtensionChain => {
                // Destination options (8 bytes: PadN) → routing type 253, segments left 0 →
                // no next header (59).
                let destination_options = [43, 0, 1, 4, 0, 0, 0, 0];
                let routing = [59, 0, 253, 0, 0, 0, 0, 0];
                ipv6(
                    switch,
                    own,
                    60,
                    &[&destination_options[..], &routing[..]].concat(),
                )
            }
            Kind::Ipv6HopByHop => {
                let hop_by_hop = [60, 0, 1, 4, 0, 0, 0, 0];
                let destination_options = [59, 0, 1, 4, 0, 0, 0, 0];
                ipv6(
                    switch,
                    own,
                    0,
                    &[&hop_by_hop[..], &destination_options[..]].concat(),
                )
            }
            Kind::Oversized => ipv4(switch, own, SENDER_V4, THIRD_V4, 64, &udp(9, 9, 2000 - 42)),
            Kind::UnknownEtherType => [to_switch(0x88b5), vec![0x5a; 46]].concat(),
            Kind::ToSwitchAddress => ipv4(switch, own, SENDER_V4, SWITCH_V4, 64, &udp(9, 9, 20)),
            Kind::ArpBroadcast => {
                let mut frame = ethernet(BROADCAST, own, 0x0806);
                frame.extend([0, 1, 8, 0, 6, 4, 0, 1]); // Ethernet/IPv4, request
                frame.extend(own);
                frame.extend(SENDER_V4);
                frame.extend([0; 6]);
                frame.extend([10, 0, 0, 77]);
                frame.extend([0; 18]);
                frame
            }
            Kind::IpBroadcast => {
                let mut frame = ipv4(switch, own, SENDER_V4, [255; 4], 64, &udp(9, 9, 20));
                frame[..6].copy_from_slice(&BROADCAST);
                frame
            }
            Kind::SpoofedSource => {
                let mut datagram = udp(9003, 9003, 20);
                datagram[8..16].copy_from_slice(&sequence.to_be_bytes());
                ipv4(switch, own, RECEIVER_V4, THIRD_V4, 64, &datagram)
            }
        }
    }
}

fn ethernet(destination: [u8; 6], source: [u8; 6], ether_type: u16) -> Vec<u8> {
    let mut frame = Vec::with_capacity(64);
    frame.extend(destination);
    frame.extend(source);
    frame.extend(ether_type.to_be_bytes());
    frame
}

/// A UDP header (checksum 0: none, valid in IPv4) and `payload` zero bytes.
fn udp(source: u16, destination: u16, payload: usize) -> Vec<u8> {
    let mut datagram = Vec::with_capacity(8 + payload);
    datagram.extend(source.to_be_bytes());
    datagram.extend(destination.to_be_bytes());
    datagram.extend(((8 + payload) as u16).to_be_bytes());
    datagram.extend([0, 0]);
    datagram.resize(8 + payload, 0);
    datagram
}

/// An Ethernet + IPv4 (IHL 5, UDP) frame with a correct header checksum.
fn ipv4(
    switch: [u8; 6],
    own: [u8; 6],
    source: [u8; 4],
    destination: [u8; 4],
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut frame = ethernet(switch, own, 0x0800);
    frame.extend([0x45, 0]);
    frame.extend(((20 + payload.len()) as u16).to_be_bytes());
    frame.extend([0, 1, 0, 0, ttl, 17, 0, 0]);
    frame.extend(source);
    frame.extend(destination);
    frame.extend(payload);
    fix_ipv4_checksum(&mut frame);
    frame
}

/// Sets the IPv4 header checksum of an untagged frame (over the header IHL announces, at most
/// what the frame holds).
fn fix_ipv4_checksum(frame: &mut [u8]) {
    let header_len = (usize::from(frame[14] & 0x0f) * 4).min(frame.len() - 14);
    frame[24..26].copy_from_slice(&[0, 0]);
    let mut sum: u32 = frame[14..14 + header_len]
        .chunks(2)
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// An Ethernet + IPv6 frame from the sender to the third host, hop limit 64.
fn ipv6(switch: [u8; 6], own: [u8; 6], next_header: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = ethernet(switch, own, 0x86dd);
    frame.extend([0x60, 0, 0, 0]);
    frame.extend((payload.len() as u16).to_be_bytes());
    frame.extend([next_header, 64]);
    frame.extend(SENDER_V6);
    frame.extend(THIRD_V6);
    frame.extend(payload);
    frame
}

fn mac(text: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .map(|byte| u8::from_str_radix(byte, 16).ok())
        .collect::<Option<_>>()?;
    bytes.try_into().ok()
}

fn arg(args: &[String], name: &str) -> Option<String> {
    let index = args.iter().position(|a| a == name)?;
    args.get(index + 1).cloned()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dev), Some(switch), Some(seconds)) = (
        arg(&args, "--dev"),
        arg(&args, "--switch-mac").as_deref().and_then(mac),
        arg(&args, "--seconds").and_then(|s| s.parse::<f64>().ok()),
    ) else {
        eprintln!("usage: ofan-storm --dev IFNAME --switch-mac MAC --seconds S");
        return ExitCode::from(2);
    };
    let own = std::fs::read_to_string(format!("/sys/class/net/{dev}/address"))
        .ok()
        .as_deref()
        .and_then(mac);
    let Some(own) = own else {
        eprintln!("ofan-storm: cannot read the MAC address of {dev}");
        return ExitCode::from(2);
    };
    let socket = match raw::PacketSocket::bind(&dev) {
        Ok(socket) => socket,
        Err(error) => {
            eprintln!("ofan-storm: AF_PACKET socket on {dev}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut frames: Vec<Vec<u8>> = KINDS.iter().map(|k| k.frame(switch, own, 0)).collect();
    let mut sent = [0u64; KINDS.len()];
    let mut refused = [0u64; KINDS.len()];
    let start = Instant::now();
    let duration = Duration::from_secs_f64(seconds);
    let mut spoofed = 0u64;
    while start.elapsed() < duration {
        // 64 rounds between clock reads.
        for _ in 0..64 {
            for (index, kind) in KINDS.iter().enumerate() {
                if let Kind::SpoofedSource = kind {
                    frames[index] = kind.frame(switch, own, spoofed);
                    spoofed += 1;
                }
                sent[index] += 1;
                if socket.send(&frames[index]).is_err() {
                    refused[index] += 1;
                }
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    for (kind, count) in KINDS.iter().zip(sent) {
        println!("{}={count}", kind.name());
    }
    for (kind, count) in KINDS.iter().zip(refused) {
        if count > 0 {
            println!("refused_{}={count}", kind.name());
        }
    }
    println!("seconds={seconds:.3}");
    ExitCode::SUCCESS
}

/// The one place that calls into libc.
#[allow(unsafe_code)]
mod raw {
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// A raw `AF_PACKET` socket bound to one interface, send only (protocol 0 receives
    /// nothing).
    #[derive(Debug)]
    pub struct PacketSocket {
        fd: OwnedFd,
    }

    impl PacketSocket {
        pub fn bind(dev: &str) -> io::Result<Self> {
            let name = std::ffi::CString::new(dev).map_err(io::Error::other)?;
            // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
            let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
            if ifindex == 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: plain system call with constant arguments; the result is checked.
            let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // SAFETY: `sockaddr_ll` is plain old data; all zero is a valid value.
            let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            address.sll_family = libc::AF_PACKET as u16;
            address.sll_ifindex = ifindex as i32;
            // SAFETY: `address` is a valid `sockaddr_ll` and the length passed is its size.
            let bound = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    std::ptr::addr_of!(address).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as u32,
                )
            };
            if bound < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(Self { fd })
        }

        pub fn send(&self, frame: &[u8]) -> io::Result<()> {
            // SAFETY: the pointer and length describe `frame`, borrowed for the call.
            let written =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if written < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
    }
}
