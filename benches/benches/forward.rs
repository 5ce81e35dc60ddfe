//! The forwarder's decision path alone: parse, local-address check, route lookup, balancing and
//! rewrite of a batch of 64 frames that are already in the cache.
//!
//! This is the user-space work by which `ofan-switch` differs from its bare port-to-port mode
//! in `ofan-lab bench forward` (which also pays the kernel's copies, the rings and the cache
//! misses of frames written by another CPU). Each iteration restores a batch of 64 minimum-size
//! UDP frames from a template (forwarding rewrites them: TTL, checksum, MACs) and decides it
//! (`Throughput::Elements(64)`); `restore-only` is that copy alone, to subtract.
//!
//! The table is an edge switch of a k = 8 fat tree: 4 host ports (one /32 route each), 4
//! up-ports in one next-hop group for everything else, one destination key per edge switch
//! (32 /24 prefixes). Workloads:
//! - `northbound/<algorithm>`: frames to 8 remote edge switches (one in four an ACK-sized
//!   frame), a choice per frame;
//! - `southbound`: frames to the local hosts, single next hop, no choice;
//! - `parse-only`: the same frames with their TTL at 1, dropped after parse and lookup (what the
//!   decision costs before the rewrite).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ofan_dataplane::fib::{
    Fib, FibBuilder, IpPrefix, NextHop, Port, PortId, PortRole, RouteTarget,
};
use ofan_dataplane::forward::{DropReason, Forwarder, ForwarderConfig, FrameRef, Verdict};
use ofan_dataplane::lb::{Algorithm, DestKey, LbConfig, LbRng, PortLoad, SwitchBalancer};
use ofan_dataplane::wire::checksum;

const BATCH: usize = 64;
const HOSTS: u8 = 4;
const UP_PORTS: u8 = 4;
/// k = 8: 8 pods × 4 edge switches.
const EDGE_SWITCHES: u32 = 32;

fn prefix(text: &str) -> IpPrefix {
    text.parse().expect("valid prefix")
}

/// Edge switch 0 of pod 0: hosts 10.0.0.2–5 on ports 0–3, up-ports 4–7.
fn fib() -> Fib {
    let mut builder = FibBuilder::new();
    for port in 0..HOSTS + UP_PORTS {
        let up = port >= HOSTS;
        builder.port(
            PortId(u16::from(port)),
            Port {
                ifindex: 10 + u32::from(port),
                mac: [2, 0, 0, 0, 0x50, port],
                role: if up { PortRole::Up } else { PortRole::Host },
                up_position: up.then(|| port - HOSTS),
                oper_up: true,
            },
        );
    }
    let up = builder.group((0..UP_PORTS).map(|position| NextHop {
        port: PortId(u16::from(HOSTS + position)),
        gateway: IpAddr::V4(Ipv4Addr::new(10, 255, 0, position)),
        mac: Some([2, 0, 0, 0, 0xaa, position]),
    }));
    builder.route(prefix("0.0.0.0/0"), RouteTarget::Group(up));
    for host in 0..HOSTS {
        let group = builder.group([NextHop {
            port: PortId(u16::from(host)),
            gateway: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2 + host)),
            mac: Some([2, 0, 0, 0, 0xee, host]),
        }]);
        builder.route(
            prefix(&format!("10.0.0.{}/32", 2 + host)),
            RouteTarget::Group(group),
        );
    }
    builder.route(prefix("10.0.0.1/32"), RouteTarget::Local);
    for edge in 0..EDGE_SWITCHES {
        let (pod, index) = (edge / 4, edge % 4);
        builder.dest_key(prefix(&format!("10.{pod}.{index}.0/24")), DestKey(edge));
    }
    builder
        .dest_keys(EDGE_SWITCHES)
        .local_address("10.0.0.1".parse().expect("address"));
    builder.build().expect("valid table")
}

fn forwarder(algorithm: Algorithm) -> Forwarder {
    let switch = SwitchBalancer::new(LbConfig {
        algorithm,
        up_ports: UP_PORTS,
        dest_keys: EDGE_SWITCHES,
        pipes: 1,
        buffer_bytes: 1 << 20,
        seed: 1,
    })
    .expect("valid balancer");
    Forwarder::new(switch.pipe(0).expect("pipe 0"), ForwarderConfig::default())
}

/// A 60-byte (64 on the wire) UDP frame, correct IPv4 header checksum.
fn frame(src: Ipv4Addr, dst: Ipv4Addr, ttl: u8, source_port: u16) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0x50, 0, 2, 0, 0, 0, 0xee, 9, 0x08, 0x00];
    frame.extend([0x45, 0x00, 0x00, 46, 0x12, 0x34, 0x40, 0x00, ttl, 17, 0, 0]);
    frame.extend(src.octets());
    frame.extend(dst.octets());
    let sum = checksum::checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
    frame.extend(source_port.to_be_bytes());
    frame.extend(4791u16.to_be_bytes());
    frame.extend(26u16.to_be_bytes());
    frame.extend([0, 0]);
    frame.resize(60, 0x5a);
    frame
}

/// Bytes per frame slot of a batch buffer (one cache line, as a UMEM frame's header).
const SLOT: usize = 64;
/// Frame length in a slot (64 on the wire with the FCS).
const FRAME_LEN: usize = 60;

/// A batch to 8 remote edge switches, or to the local hosts; `ttl` 1 makes every frame expire.
/// Frame `i` is `buffer[i * SLOT..][..FRAME_LEN]`.
fn batch(northbound: bool, ttl: u8, seed: u64) -> Vec<u8> {
    let mut rng = LbRng::new(seed);
    let remotes: Vec<u32> = (0..8).map(|_| 1 + rng.below(EDGE_SWITCHES - 1)).collect();
    (0..BATCH)
        .flat_map(|_| {
            let dst = if northbound {
                let edge = remotes[rng.below(8) as usize];
                Ipv4Addr::new(
                    10,
                    (edge / 4) as u8,
                    (edge % 4) as u8,
                    2 + rng.below(4) as u8,
                )
            } else {
                Ipv4Addr::new(10, 0, 0, 2 + rng.below(u32::from(HOSTS)) as u8)
            };
            let src = Ipv4Addr::new(10, 7, 3, 2 + rng.below(4) as u8);
            let mut slot = frame(src, dst, ttl, 40_000 + rng.below(256) as u16);
            slot.resize(SLOT, 0);
            slot
        })
        .collect()
}

/// Copies the frames of `template` over those of `frames`, frame by frame: one 4 KB copy
/// (`rep movsb` in glibc) took longer than the decisions on this VM.
fn restore(frames: &mut [u8], template: &[u8]) {
    for (frame, original) in frames
        .chunks_exact_mut(SLOT)
        .zip(template.chunks_exact(SLOT))
    {
        frame[..FRAME_LEN].copy_from_slice(&original[..FRAME_LEN]);
    }
}

/// Decides one batch; returns how many frames were forwarded.
fn decide(forwarder: &mut Forwarder, fib: &Fib, frames: &mut [u8]) -> usize {
    let mut refs: [FrameRef<'_>; BATCH] =
        std::array::from_fn(|_| FrameRef::whole(PortId(0), &mut []));
    for (slot, data) in refs.iter_mut().zip(frames.chunks_exact_mut(SLOT)) {
        *slot = FrameRef::whole(PortId(0), &mut data[..FRAME_LEN]);
    }
    let mut verdicts = [Verdict::Drop(DropReason::NoRoute); BATCH];
    let mut loads = [PortLoad::default(); UP_PORTS as usize];
    forwarder.process_batch(fib, &mut refs, &mut loads, &mut verdicts);
    verdicts
        .iter()
        .filter(|verdict| matches!(verdict, Verdict::Forward { .. }))
        .count()
}

fn bench(c: &mut Criterion) {
    let fib = fib();
    let mut group = c.benchmark_group("forward");
    group.throughput(Throughput::Elements(BATCH as u64));
    let cases = [
        ("northbound/pofan", Algorithm::Pofan, true, 64, BATCH),
        ("northbound/ofan", Algorithm::Ofan, true, 64, BATCH),
        ("northbound/ecmp", Algorithm::Ecmp, true, 64, BATCH),
        ("southbound", Algorithm::Pofan, false, 64, BATCH),
        ("parse-only", Algorithm::Pofan, true, 1, 0),
    ];
    let template = batch(true, 64, 7);
    let mut frames = template.clone();
    group.bench_function("restore-only", |b| {
        b.iter(|| {
            restore(&mut frames, black_box(&template));
            black_box(&mut frames);
        })
    });
    for (name, algorithm, northbound, ttl, expect_forwarded) in cases {
        let mut forwarder = forwarder(algorithm);
        let template = batch(northbound, ttl, 7);
        let mut frames = template.clone();
        // The workload is what it says: every frame forwarded, or every frame expired.
        assert_eq!(
            decide(&mut forwarder, &fib, &mut frames),
            expect_forwarded,
            "{name}"
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                restore(&mut frames, black_box(&template));
                black_box(decide(&mut forwarder, &fib, &mut frames))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
