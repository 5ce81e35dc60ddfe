//! `ofan-udp`: a small UDP traffic tool for the integration tests.
//!
//! ```text
//! ofan-udp send --to 10.0.1.1:9000 --count 100000 --size 200 --rate 50000 [--flows 4]
//!               [--src-port P] [--agent-data COLLECTIVE:FLOW]
//! ofan-udp recv --bind 0.0.0.0:9000 --count 100000 --timeout-ms 5000
//! ofan-udp notify --to 10.0.1.0:7415 --ttl 255 --near 10.255.0.1 --far 10.255.0.2
//!                 [--near-asn 65001 --far-asn 65002] --quality 3 --epoch 1 --seq 1
//!                 [--flow SRC,DST,SRC_PORT,DST_PORT]
//! ```
//! Datagrams carry a sequence number; the receiver reports `received=… unique=… duplicates=…`
//! so a test can check that every datagram arrived exactly once. With `--agent-data`, each
//! datagram is instead a host agent's DATA packet of that collective and flow, sequence
//! numbers 0, 1, … (`ofan_lab_agent::wire`): a forgery, for the agent's trust test.
//! `notify` sends one adaptive-routing congestion notification (`ofan_control::notify::wire`),
//! stamped now, with the IP TTL given: a neighbour switch, or a forgery.

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ofan_lab_agent::wire::{Flags, Header, Kind, HEADER_LEN};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: Option<T>) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .or(default)
        .unwrap_or_else(|| {
            eprintln!("ofan-udp: missing or bad {name}");
            std::process::exit(2)
        })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("send") => send(&args),
        Some("recv") => recv(&args),
        Some("notify") => notify(&args),
        _ => {
            eprintln!("usage: ofan-udp send --to ADDR:PORT --count N [--size B] [--rate PPS] [--flows F]\n       ofan-udp recv --bind ADDR:PORT --count N [--timeout-ms T]");
            ExitCode::from(2)
        }
    }
}

fn send(args: &[String]) -> ExitCode {
    let to: SocketAddr = arg(args, "--to", None);
    let count: u64 = arg(args, "--count", None);
    let size: usize = arg(args, "--size", Some(200));
    let rate: u64 = arg(args, "--rate", Some(0));
    let flows: usize = arg(args, "--flows", Some(1));
    // One flow from a given source port (`--flows` then ignored).
    let src_port: u16 = arg(args, "--src-port", Some(0));
    let agent_data: Option<(u32, u32)> = args
        .iter()
        .position(|a| a == "--agent-data")
        .map(|_| arg::<String>(args, "--agent-data", None))
        .map(|text| {
            text.split_once(':')
                .and_then(|(c, f)| Some((c.parse().ok()?, f.parse().ok()?)))
                .unwrap_or_else(|| {
                    eprintln!("ofan-udp: --agent-data wants COLLECTIVE:FLOW");
                    std::process::exit(2)
                })
        });
    let bind = if to.is_ipv4() { "0.0.0.0" } else { "[::]" };
    let bind = format!("{bind}:{src_port}");
    let flows = if src_port == 0 { flows.max(1) } else { 1 };
    let sockets: Vec<UdpSocket> = (0..flows)
        .map(|_| UdpSocket::bind(&bind).expect("bind"))
        .collect();
    let mut payload = vec![0u8; size.max(HEADER_LEN)];
    let start = Instant::now();
    let mut sent = 0u64;
    let mut errors = 0u64;
    for seq in 0..count {
        if let Some(offset) = (seq * 1_000_000_000).checked_div(rate) {
            let due = start + Duration::from_nanos(offset);
            // Sleep through long waits (other processes need the CPU), spin the last stretch.
            while let Some(wait) = due.checked_duration_since(Instant::now()) {
                if wait > Duration::from_micros(300) {
                    std::thread::sleep(wait - Duration::from_micros(200));
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        match agent_data {
            Some((collective, flow)) => Header {
                kind: Kind::Data,
                flags: Flags(0),
                collective,
                flow,
                sequence: seq as u32,
                entropy: 0,
            }
            .write(&mut payload),
            None => payload[..8].copy_from_slice(&seq.to_be_bytes()),
        }
        match sockets[(seq as usize) % sockets.len()].send_to(&payload, to) {
            Ok(_) => sent += 1,
            Err(_) => errors += 1,
        }
    }
    println!(
        "sent={sent} errors={errors} seconds={:.3}",
        start.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

fn recv(args: &[String]) -> ExitCode {
    let bind: SocketAddr = arg(args, "--bind", None);
    let count: u64 = arg(args, "--count", None);
    let timeout = Duration::from_millis(arg(args, "--timeout-ms", Some(5000)));
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(bind),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )
    .expect("socket");
    let _ = socket.set_recv_buffer_size(64 << 20);
    socket.bind(&bind.into()).expect("bind");
    let socket: UdpSocket = socket.into();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    println!("ready");
    let mut seen = HashSet::new();
    let (mut received, mut duplicates, mut bytes) = (0u64, 0u64, 0u64);
    let mut buffer = [0u8; 65536];
    let mut last = Instant::now();
    while received < count && last.elapsed() < timeout {
        if let Ok(len) = socket.recv(&mut buffer) {
            last = Instant::now();
            received += 1;
            bytes += len as u64;
            if len >= 8
                && !seen.insert(u64::from_be_bytes(buffer[..8].try_into().expect("8 bytes")))
            {
                duplicates += 1;
            }
        }
    }
    println!(
        "received={received} unique={} duplicates={duplicates} bytes={bytes}",
        seen.len()
    );
    ExitCode::SUCCESS
}

fn notify(args: &[String]) -> ExitCode {
    use ofan_control::notify::wire::{Kind as NotifyKind, LinkRef, Notification, Quality};
    let to: SocketAddr = arg(args, "--to", None);
    let ttl: u32 = arg(args, "--ttl", Some(255));
    let near: std::net::Ipv4Addr = arg(args, "--near", None);
    let far: std::net::Ipv4Addr = arg(args, "--far", None);
    let near_asn: u32 = arg(args, "--near-asn", Some(0));
    let far_asn: u32 = arg(args, "--far-asn", Some(0));
    let level: u8 = arg(args, "--quality", None);
    let epoch: u32 = arg(args, "--epoch", Some(1));
    // A flow message (the draft's second type): SRC,DST,SRC_PORT,DST_PORT of a UDP flow.
    let flow = args
        .iter()
        .position(|a| a == "--flow")
        .map(|_| arg::<String>(args, "--flow", None))
        .map(|text| {
            let parts: Vec<&str> = text.split(',').collect();
            let parsed = (parts.len() == 4).then(|| {
                Some(ofan_control::notify::wire::FiveTuple {
                    src: parts[0].parse().ok()?,
                    dst: parts[1].parse().ok()?,
                    src_port: parts[2].parse().ok()?,
                    dst_port: parts[3].parse().ok()?,
                    protocol: 17,
                })
            });
            parsed.flatten().unwrap_or_else(|| {
                eprintln!("ofan-udp: --flow wants SRC,DST,SRC_PORT,DST_PORT");
                std::process::exit(2)
            })
        });
    let sequence: u32 = arg(args, "--seq", Some(1));
    let Some(quality) = Quality::new(level) else {
        eprintln!("ofan-udp: --quality {level} is not a level");
        return ExitCode::from(2);
    };
    let timestamp_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let message = Notification {
        kind: NotifyKind::CongestionDetected,
        quality,
        hold_ms: 10_000,
        sequence,
        epoch,
        timestamp_ns,
        originator: near,
        link: LinkRef {
            near,
            far,
            near_asn,
            far_asn,
            port: 0,
        },
        flow,
    };
    let mut buffer = [0u8; 64];
    let Some(len) = message.emit(&mut buffer) else {
        return ExitCode::FAILURE;
    };
    let socket = UdpSocket::bind("0.0.0.0:0").expect("bind");
    socket.set_ttl(ttl).expect("IP_TTL");
    match socket.send_to(&buffer[..len], to) {
        Ok(_) => {
            println!("sent={len} ttl={ttl}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("ofan-udp: {error}");
            ExitCode::FAILURE
        }
    }
}
