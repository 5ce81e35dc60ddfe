//! `pingall`: every ordered host pair, with raw ICMP sockets opened inside each host namespace
//! (one thread per source host, all at once) instead of one `ping` process per pair.

use std::fs::File;
use std::io;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};

use super::sys;

/// The result of one ordered pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairResult {
    /// Whether an echo reply came back.
    pub ok: bool,
    /// Round-trip time of the first reply.
    pub rtt: Option<Duration>,
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn echo_request(id: u16, seq: u16) -> [u8; 16] {
    let mut packet = [0u8; 16];
    packet[0] = 8; // echo request
    packet[4..6].copy_from_slice(&id.to_be_bytes());
    packet[6..8].copy_from_slice(&seq.to_be_bytes());
    packet[8..16].copy_from_slice(b"ofan-lab");
    let sum = checksum(&packet);
    packet[2..4].copy_from_slice(&sum.to_be_bytes());
    packet
}

/// Pings every address in `targets` from namespace `namespace` (`attempts` rounds, waiting
/// `wait` for replies after each); `id` tags this source's echo requests.
fn ping_from(
    namespace: &File,
    id: u16,
    targets: &[Ipv4Addr],
    attempts: u32,
    wait: Duration,
) -> io::Result<Vec<PairResult>> {
    let socket = sys::in_netns(namespace, || {
        Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4))
    })??;
    socket.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut results = vec![
        PairResult {
            ok: false,
            rtt: None
        };
        targets.len()
    ];
    let mut sent_at = vec![Instant::now(); targets.len()];
    let mut buffer = [0u8; 1500];
    for _ in 0..attempts {
        for (index, target) in targets.iter().enumerate() {
            if results[index].ok {
                continue;
            }
            let address = SocketAddr::V4(SocketAddrV4::new(*target, 0));
            sent_at[index] = Instant::now();
            let _ = socket.send_to(&echo_request(id, index as u16), &address.into());
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && results.iter().any(|r| !r.ok) {
            let Ok(len) = (&socket).read(&mut buffer) else {
                continue;
            };
            let packet = &buffer[..len];
            let header_len = usize::from(packet.first().map_or(0, |b| b & 0x0f)) * 4;
            let Some(icmp) = packet.get(header_len..header_len + 8) else {
                continue;
            };
            if icmp[0] != 0 || u16::from_be_bytes([icmp[4], icmp[5]]) != id {
                continue;
            }
            let index = usize::from(u16::from_be_bytes([icmp[6], icmp[7]]));
            let source = Ipv4Addr::new(packet[12], packet[13], packet[14], packet[15]);
            if let Some(result) = results.get_mut(index) {
                if targets[index] == source && !result.ok {
                    *result = PairResult {
                        ok: true,
                        rtt: Some(sent_at[index].elapsed()),
                    };
                }
            }
        }
        if results.iter().all(|r| r.ok) {
            break;
        }
    }
    Ok(results)
}

/// Pings every ordered pair of `hosts` (namespace file, address); `matrix[i][j]` is the
/// result from host i to host j (i ≠ j; the diagonal is always ok).
///
/// # Errors
/// When a socket cannot be opened in a host namespace.
pub fn pingall(
    hosts: &[(&File, Ipv4Addr)],
    attempts: u32,
    wait: Duration,
) -> io::Result<Vec<Vec<PairResult>>> {
    let addresses: Vec<Ipv4Addr> = hosts.iter().map(|(_, addr)| *addr).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .enumerate()
            .map(|(source, (namespace, _))| {
                let addresses = &addresses;
                scope.spawn(move || {
                    let targets: Vec<Ipv4Addr> = addresses
                        .iter()
                        .enumerate()
                        .filter(|(index, _)| *index != source)
                        .map(|(_, addr)| *addr)
                        .collect();
                    let id = 0x4f00u16.wrapping_add(source as u16);
                    ping_from(namespace, id, &targets, attempts, wait).map(|mut results| {
                        results.insert(
                            source,
                            PairResult {
                                ok: true,
                                rtt: None,
                            },
                        );
                        results
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().expect("ping thread panicked"))
            .collect()
    })
}
