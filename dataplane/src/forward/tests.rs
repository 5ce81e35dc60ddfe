//! Tests of the forwarder: byte fixtures through a small hand-built table.

use super::*;
use crate::fib::{FibBuilder, IpPrefix, Port, PortRole};
use crate::lb::{Algorithm, DestKey, LbConfig, LbRng, SwitchBalancer};
use crate::wire::fixtures::*;
use crate::wire::{checksum, EthernetFrame, Ipv4Packet, ParsedFrame};
use std::collections::HashSet;
use std::net::Ipv4Addr;

const HOST_MAC: MacAddr = [2, 0, 0, 0, 0xee, 0];
const UP_MACS: [MacAddr; 2] = [[2, 0, 0, 0, 0xaa, 1], [2, 0, 0, 0, 0xaa, 2]];

fn port_mac(port: u16) -> MacAddr {
    [2, 0, 0, 0, 0x50, port as u8]
}

fn prefix(text: &str) -> IpPrefix {
    text.parse().unwrap()
}

/// Which of the two Up ports and their neighbours are usable.
#[derive(Clone, Copy)]
struct UpState {
    oper_up: [bool; 2],
    resolved: [bool; 2],
}

const ALL_UP: UpState = UpState {
    oper_up: [true; 2],
    resolved: [true; 2],
};

/// Edge switch of pod 0 with three ports: 0 to the host subnet 10.0.0.0/24, 1 and 2 up
/// (positions 0 and 1) in one ECMP group.
fn fib(state: UpState) -> Fib {
    let mut builder = FibBuilder::new();
    builder.port(
        PortId(0),
        Port {
            ifindex: 10,
            mac: port_mac(0),
            role: PortRole::Host,
            up_position: None,
            oper_up: true,
        },
    );
    for position in 0..2u8 {
        builder.port(
            PortId(1 + u16::from(position)),
            Port {
                ifindex: 11 + u32::from(position),
                mac: port_mac(1 + u16::from(position)),
                role: PortRole::Up,
                up_position: Some(position),
                oper_up: state.oper_up[usize::from(position)],
            },
        );
    }
    let up = builder.group((0..2).map(|i| NextHop {
        port: PortId(1 + i as u16),
        gateway: IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1 + i as u8)),
        mac: state.resolved[i].then_some(UP_MACS[i]),
    }));
    let host = builder.group([NextHop {
        port: PortId(0),
        gateway: "10.0.0.2".parse().unwrap(),
        mac: Some(HOST_MAC),
    }]);
    let host6 = builder.group([NextHop {
        port: PortId(0),
        gateway: "fd00::2".parse().unwrap(),
        mac: Some(HOST_MAC),
    }]);
    builder
        .route(prefix("10.0.0.0/8"), RouteTarget::Group(up))
        .route(prefix("10.0.0.0/24"), RouteTarget::Group(host))
        .route(prefix("10.0.0.254/32"), RouteTarget::Local)
        .route(prefix("10.9.0.0/16"), RouteTarget::Unreachable)
        .route(prefix("fd00::/16"), RouteTarget::Group(up))
        .route(prefix("fd00::/64"), RouteTarget::Group(host6))
        .dest_key(prefix("10.0.1.0/24"), DestKey(0))
        .dest_key(prefix("10.0.2.0/24"), DestKey(1))
        .dest_key(prefix("10.1.0.0/16"), DestKey(2))
        .dest_key(prefix("fd00:0:0:1::/64"), DestKey(0))
        .dest_keys(3)
        .local_address("10.0.0.1".parse().unwrap())
        .local_address("fd00::1".parse().unwrap());
    builder.build().unwrap()
}

fn forwarder_with(algorithm: Algorithm, up_ports: u8, dest_keys: u32) -> Forwarder {
    let switch = SwitchBalancer::new(LbConfig {
        algorithm,
        up_ports,
        dest_keys,
        pipes: 1,
        buffer_bytes: 1 << 20,
        seed: 42,
    })
    .unwrap();
    Forwarder::new(switch.pipe(0).unwrap(), ForwarderConfig::default())
}

fn forwarder() -> Forwarder {
    forwarder_with(Algorithm::Ofan, 2, 3)
}

fn v4(src: [u8; 4], dst: [u8; 4], ttl: u8, payload: usize) -> Vec<u8> {
    ipv4_udp(src.into(), dst.into(), ttl, (40000, 4791), payload)
}

fn v6(src: &str, dst: &str, hop_limit: u8, payload: usize) -> Vec<u8> {
    ipv6_udp(
        src.parse().unwrap(),
        dst.parse().unwrap(),
        hop_limit,
        (40000, 4791),
        payload,
    )
}

/// Runs frames through the forwarder (ingress port 0) and returns the verdicts.
fn run(forwarder: &mut Forwarder, fib: &Fib, frames: &mut [Vec<u8>]) -> Vec<Verdict> {
    run_with_loads(forwarder, fib, frames, &mut [PortLoad::default(); 2])
}

/// [`run`] with the up ports' queue loads the worker passes (updated by the choices).
fn run_with_loads(
    forwarder: &mut Forwarder,
    fib: &Fib,
    frames: &mut [Vec<u8>],
    loads: &mut [PortLoad],
) -> Vec<Verdict> {
    let mut refs: Vec<FrameRef<'_>> = frames
        .iter_mut()
        .map(|data| FrameRef {
            ingress: PortId(0),
            data,
        })
        .collect();
    let mut verdicts = vec![Verdict::Drop(DropReason::NoRoute); refs.len()];
    forwarder.process_batch(fib, &mut refs, loads, &mut verdicts);
    verdicts
}

fn run_one(forwarder: &mut Forwarder, fib: &Fib, frame: Vec<u8>) -> (Verdict, Vec<u8>) {
    let mut frames = [frame];
    let verdict = run(forwarder, fib, &mut frames)[0];
    let [frame] = frames;
    (verdict, frame)
}

/// Checks the rewrite of a forwarded frame against its original: MACs, hop limit − 1,
/// IPv4 checksum equal to a full recomputation, nothing else changed.
fn assert_rewritten(
    before: &[u8],
    after: &[u8],
    src_mac: MacAddr,
    dst_mac: MacAddr,
) -> ParsedFrame {
    let eth = EthernetFrame::new_checked(after).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (src_mac, dst_mac));
    let old = wire::parse(before).unwrap();
    let new = wire::parse(after).unwrap();
    assert_eq!(new.hop_limit, old.hop_limit - 1);
    assert_eq!(
        (new.src, new.dst, new.ports, new.vlan),
        (old.src, old.dst, old.ports, old.vlan)
    );
    if new.version() == IpVersion::V4 {
        let header = &after[new.l3_offset..new.l3_offset + 20];
        let mut recomputed = header.to_vec();
        recomputed[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(
            Ipv4Packet::new_checked(&after[new.l3_offset..])
                .unwrap()
                .checksum(),
            checksum::checksum(&recomputed)
        );
    }
    // Only the MACs, the TTL/hop-limit byte and the checksum may differ.
    let ttl_at = new.l3_offset + if new.version() == IpVersion::V4 { 8 } else { 7 };
    for (i, (a, b)) in before.iter().zip(after).enumerate() {
        let allowed = i < 12
            || i == ttl_at
            || (new.version() == IpVersion::V4
                && (new.l3_offset + 10..new.l3_offset + 12).contains(&i));
        assert!(allowed || a == b, "byte {i} changed");
    }
    new
}

#[test]
fn northbound_frame_is_forwarded_up_and_rewritten() {
    let fib = fib(ALL_UP);
    let mut fwd = forwarder();
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let (verdict, out) = run_one(&mut fwd, &fib, frame.clone());
    let Verdict::Forward { port } = verdict else {
        panic!("{verdict:?}")
    };
    assert!(port == PortId(1) || port == PortId(2));
    let up = usize::from(port.0 - 1);
    assert_rewritten(&frame, &out, port_mac(port.0), UP_MACS[up]);
    let counters = fwd.counters();
    assert_eq!(
        (
            counters.frames,
            counters.forwarded,
            counters.northbound,
            counters.no_key
        ),
        (1, 1, 1, 0)
    );
}

#[test]
fn southbound_frame_goes_to_its_single_hop() {
    let fib = fib(ALL_UP);
    let mut fwd = forwarder();
    let frame = v4([10, 1, 0, 2], [10, 0, 0, 2], 7, 100);
    let (verdict, out) = run_one(&mut fwd, &fib, frame.clone());
    assert_eq!(verdict, Verdict::Forward { port: PortId(0) });
    assert_rewritten(&frame, &out, port_mac(0), HOST_MAC);
    assert_eq!(fwd.counters().northbound, 0);
}

#[test]
fn captured_frame_ttl_and_checksum_after_rewrite() {
    // The captured DNS response, routed to the host port by a /16 route.
    let mut builder = FibBuilder::new();
    builder.port(
        PortId(0),
        Port {
            ifindex: 1,
            mac: port_mac(0),
            role: PortRole::Host,
            up_position: None,
            oper_up: true,
        },
    );
    let host = builder.group([NextHop {
        port: PortId(0),
        gateway: "192.168.0.199".parse().unwrap(),
        mac: Some(HOST_MAC),
    }]);
    builder.route(prefix("192.168.0.0/16"), RouteTarget::Group(host));
    let fib = builder.build().unwrap();
    let frame = captured_ipv4_udp();
    let (verdict, out) = run_one(&mut forwarder(), &fib, frame.clone());
    assert_eq!(verdict, Verdict::Forward { port: PortId(0) });
    assert_rewritten(&frame, &out, port_mac(0), HOST_MAC);
    assert_eq!(out[22], 63);
    assert_eq!(&out[24..26], &[0xb9, 0x61]);
}

#[test]
fn ipv6_hop_limit_is_decremented() {
    let fib = fib(ALL_UP);
    let mut fwd = forwarder();
    let frame = v6("fd00::2", "fd00:0:0:1::5", 2, 500);
    let (verdict, out) = run_one(&mut fwd, &fib, frame.clone());
    let Verdict::Forward { port } = verdict else {
        panic!("{verdict:?}")
    };
    assert_rewritten(
        &frame,
        &out,
        port_mac(port.0),
        UP_MACS[usize::from(port.0 - 1)],
    );
    assert_eq!(fwd.counters().northbound, 1);
    let frame = v6("fd00:0:0:1::5", "fd00::2", 64, 500);
    let (verdict, out) = run_one(&mut fwd, &fib, frame.clone());
    assert_eq!(verdict, Verdict::Forward { port: PortId(0) });
    assert_eq!(
        assert_rewritten(&frame, &out, port_mac(0), HOST_MAC).hop_limit,
        63
    );
}

#[test]
fn vlan_tagged_frame_is_forwarded_with_its_tag() {
    let fib = fib(ALL_UP);
    let frame = tagged(&v4([10, 1, 0, 2], [10, 0, 0, 2], 64, 100), 0x2064);
    let (verdict, out) = run_one(&mut forwarder(), &fib, frame.clone());
    assert_eq!(verdict, Verdict::Forward { port: PortId(0) });
    let parsed = assert_rewritten(&frame, &out, port_mac(0), HOST_MAC);
    assert_eq!((parsed.l3_offset, parsed.vlan.unwrap().vid()), (18, 100));
    assert_eq!(out[18 + 8], 63);
}

/// Frames that reach every drop and kernel reason, with the reason they must reach.
fn one_frame_per_reason() -> Vec<(Vec<u8>, Verdict)> {
    let good = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 100);
    let fixed = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut frame = good.clone();
        edit(&mut frame);
        refill_ipv4_checksum(&mut frame, 14);
        frame
    };
    let parse = |error| Verdict::Drop(DropReason::Parse(error));
    let drop = Verdict::Drop;
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut bad_version = good.clone();
    bad_version[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut bad_checksum = good.clone();
    bad_checksum[24] ^= 0x40;
    let mut bad_v6 = v6("fd00::2", "fd00:0:0:1::5", 64, 10);
    bad_v6[19] = 200;
    vec![
        (good[..20].to_vec(), parse(ParseError::Truncated)),
        (arp, parse(ParseError::UnknownEtherType)),
        (
            tagged(&tagged(&good, 1), 2),
            parse(ParseError::UnsupportedVlan),
        ),
        (bad_version, parse(ParseError::BadVersion)),
        (fixed(&|f| f[14] = 0x44), parse(ParseError::BadIpv4Header)),
        (fixed(&|f| f[14] = 0x46), parse(ParseError::Ipv4Options)),
        (bad_checksum, parse(ParseError::BadIpv4Checksum)),
        (fixed(&|f| f[20] = 0x20), parse(ParseError::Fragment)),
        (bad_v6, parse(ParseError::BadIpv6Header)),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1500),
            drop(DropReason::FrameTooLarge),
        ),
        (
            v4([10, 0, 0, 2], [224, 0, 0, 5], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v4([10, 0, 0, 2], [255, 255, 255, 255], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v4([127, 0, 0, 1], [10, 0, 1, 5], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v6("fe80::2", "fd00:0:0:1::5", 64, 10),
            drop(DropReason::Martian),
        ),
        (v6("fd00::2", "ff02::1", 64, 10), drop(DropReason::Martian)),
        (
            v4([10, 0, 0, 2], [192, 0, 2, 1], 64, 10),
            drop(DropReason::NoRoute),
        ),
        (
            v6("fd00::2", "2001:db8::1", 64, 10),
            drop(DropReason::NoRoute),
        ),
        (
            v4([10, 0, 0, 2], [10, 9, 0, 1], 64, 10),
            drop(DropReason::Unreachable),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 1, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 0, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v6("fd00::2", "fd00:0:0:1::5", 1, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 0, 1], 1, 10),
            Verdict::Kernel(KernelReason::LocalAddress),
        ),
        (
            v6("fd00::2", "fd00::1", 64, 10),
            Verdict::Kernel(KernelReason::LocalAddress),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 0, 254], 64, 10),
            Verdict::Kernel(KernelReason::LocalRoute),
        ),
    ]
}

#[test]
fn every_drop_and_kernel_reason_is_reached_and_counted() {
    let mut cases = one_frame_per_reason();
    // Port-state reasons need their own tables; frames whose choice would be up.
    let down = fib(UpState {
        oper_up: [false; 2],
        resolved: [true; 2],
    });
    let unresolved = fib(UpState {
        oper_up: [true; 2],
        resolved: [false; 2],
    });
    let half = fib(UpState {
        oper_up: [false, true],
        resolved: [true, false],
    });
    let mut fwd = forwarder();
    for (table, reason) in [
        (&down, DropReason::PortDown),
        (&unresolved, DropReason::NeighborUnresolved),
        (&half, DropReason::NeighborUnresolved),
    ] {
        for frame in [
            v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 10),
            v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 10),
        ] {
            let (verdict, out) = run_one(&mut fwd, table, frame.clone());
            assert_eq!(verdict, Verdict::Drop(reason));
            assert_eq!(out, frame, "dropped frames are not touched");
        }
    }

    let table = fib(ALL_UP);
    let (mut frames, expected): (Vec<_>, Vec<_>) = cases.drain(..).unzip();
    let originals = frames.clone();
    let verdicts = run(&mut fwd, &table, &mut frames);
    assert_eq!(verdicts, expected);
    assert_eq!(frames, originals, "frames not forwarded are not touched");

    let seen: HashSet<Verdict> = verdicts
        .iter()
        .copied()
        .chain([DropReason::PortDown, DropReason::NeighborUnresolved].map(Verdict::Drop))
        .collect();
    for reason in DropReason::ALL {
        assert!(
            seen.contains(&Verdict::Drop(reason)),
            "{} never reached",
            reason.name()
        );
    }
    for reason in KernelReason::ALL {
        assert!(
            seen.contains(&Verdict::Kernel(reason)),
            "{} never reached",
            reason.name()
        );
    }
    let counters = fwd.counters();
    assert_eq!(counters.dropped(DropReason::Martian), 5);
    assert_eq!(counters.dropped(DropReason::TtlExpired), 3);
    assert_eq!(counters.dropped(DropReason::PortDown), 2);
    assert_eq!(counters.dropped(DropReason::NeighborUnresolved), 4);
    assert_eq!(counters.kernel(KernelReason::LocalAddress), 2);
    assert_eq!(counters.forwarded, 0);
    assert_eq!(
        counters.frames,
        counters.total_drops() + counters.to_kernel.iter().sum::<u64>()
    );
}

#[test]
fn reason_indices_and_names_are_distinct() {
    let mut names = HashSet::new();
    for (index, reason) in DropReason::ALL.into_iter().enumerate() {
        assert_eq!(reason.as_index(), index);
        assert!(names.insert(reason.name()), "{}", reason.name());
    }
    for (index, reason) in KernelReason::ALL.into_iter().enumerate() {
        assert_eq!(reason.as_index(), index);
        assert!(names.insert(reason.name()), "{}", reason.name());
    }
}

/// Sends `count` frames of one flow in batches of `batch` and counts the egress ports.
fn spread(
    fwd: &mut Forwarder,
    table: &Fib,
    frame: &[u8],
    count: usize,
    batch: usize,
) -> [usize; 3] {
    let mut ports = [0usize; 3];
    let mut sent = 0;
    while sent < count {
        let n = batch.min(count - sent);
        let mut frames = vec![frame.to_vec(); n];
        for verdict in run(fwd, table, &mut frames) {
            let Verdict::Forward { port } = verdict else {
                panic!("{verdict:?}")
            };
            ports[usize::from(port.0)] += 1;
        }
        sent += n;
    }
    ports
}

#[test]
fn ofan_splits_one_flow_exactly_evenly_over_the_up_ports() {
    let table = fib(ALL_UP);
    for batch in [1, 7, 64, 100] {
        let mut fwd = forwarder();
        let data = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
        assert_eq!(
            spread(&mut fwd, &table, &data, 1000, batch),
            [0, 500, 500],
            "batch {batch}"
        );
        // ACK-sized frames of the same destination use their own pointer, also even.
        let ack = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 20);
        assert_eq!(
            spread(&mut fwd, &table, &ack, 1000, batch),
            [0, 500, 500],
            "batch {batch}"
        );
        assert_eq!(fwd.counters().northbound, 2000);
    }
    // Two destinations interleaved in one batch: each pointer still alternates.
    let mut fwd = forwarder();
    let mut frames: Vec<_> = (0..64)
        .map(|i| v4([10, 0, 0, 2], [10, 0, 1 + (i % 2) as u8, 5], 64, 1000))
        .collect();
    let verdicts = run(&mut fwd, &table, &mut frames);
    for key in 0..2 {
        let ports: Vec<_> = verdicts.iter().skip(key).step_by(2).collect();
        assert!(
            ports.windows(2).all(|pair| pair[0] != pair[1]),
            "key {key}: {ports:?}"
        );
    }
}

#[test]
fn ecmp_keeps_a_flow_on_one_port() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder_with(Algorithm::Ecmp, 2, 3);
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let ports = spread(&mut fwd, &table, &frame, 100, 10);
    assert!(ports == [0, 100, 0] || ports == [0, 0, 100], "{ports:?}");
}

#[test]
fn unusable_up_ports_are_never_chosen() {
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let no_key = v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 1000);
    for (state, expected) in [
        (
            UpState {
                oper_up: [false, true],
                resolved: [true; 2],
            },
            [0, 0, 100],
        ),
        (
            UpState {
                oper_up: [true; 2],
                resolved: [false, true],
            },
            [0, 0, 100],
        ),
        (
            UpState {
                oper_up: [true, false],
                resolved: [true; 2],
            },
            [0, 100, 0],
        ),
        (
            UpState {
                oper_up: [true; 2],
                resolved: [true, false],
            },
            [0, 100, 0],
        ),
    ] {
        let table = fib(state);
        for algorithm in [
            Algorithm::Ofan,
            Algorithm::Pofan,
            Algorithm::Ecmp,
            Algorithm::Jsq,
            Algorithm::Drill,
        ] {
            let mut fwd = forwarder_with(algorithm, 2, 3);
            assert_eq!(
                spread(&mut fwd, &table, &frame, 100, 16),
                expected,
                "{algorithm}"
            );
            assert_eq!(
                spread(&mut fwd, &table, &no_key, 100, 16),
                expected,
                "{algorithm} without key"
            );
        }
    }
}

/// The queue-aware algorithms see the worker's `loads` by up position (position 0 is port 1,
/// position 1 port 2 in this table) and count each choice into them: JSQ and AR avoid the
/// longer queue whichever position it is at, and JSQ fills the shorter one until the two are
/// level, then alternates.
#[test]
fn queue_aware_choices_read_the_loads_by_up_position() {
    let table = fib(ALL_UP);
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let frame_len = frame.len() as u32;
    // 60 kB is AR's level 1 of the 1 MiB buffer (≥ 5 %); an empty queue is level 0.
    let long = PortLoad {
        packets: 40,
        bytes: 60_000,
    };
    for algorithm in [Algorithm::Jsq, Algorithm::Ar] {
        for long_at in 0..2 {
            let mut fwd = forwarder_with(algorithm, 2, 3);
            let mut loads = [PortLoad::default(); 2];
            loads[long_at] = long;
            let verdicts =
                run_with_loads(&mut fwd, &table, &mut vec![frame.clone(); 8], &mut loads);
            let short_port = PortId(1 + (1 - long_at as u16));
            assert!(
                verdicts
                    .iter()
                    .all(|v| *v == Verdict::Forward { port: short_port }),
                "{algorithm}, long queue at position {long_at}: {verdicts:?}"
            );
            assert_eq!(loads[long_at], long, "{algorithm}");
            assert_eq!(
                loads[1 - long_at],
                PortLoad {
                    packets: 8,
                    bytes: 8 * frame_len
                },
                "{algorithm}: each choice is counted into the chosen queue"
            );
        }
    }
    // JSQ from queues of 0 and 3 frames: the first three frames level them, then they
    // alternate (ties at random), so 9 frames end at 6 and 6.
    let mut fwd = forwarder_with(Algorithm::Jsq, 2, 3);
    let mut loads = [
        PortLoad::default(),
        PortLoad {
            packets: 3,
            bytes: 3 * frame_len,
        },
    ];
    let verdicts = run_with_loads(&mut fwd, &table, &mut vec![frame.clone(); 9], &mut loads);
    assert!(
        verdicts[..3]
            .iter()
            .all(|v| *v == Verdict::Forward { port: PortId(1) }),
        "{verdicts:?}"
    );
    assert_eq!(loads[0].packets, 6, "{loads:?}");
    assert_eq!(loads[1].packets, 6, "{loads:?}");
}

#[test]
fn destinations_without_key_fall_back_to_ecmp() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder();
    // One flow: one port.
    let frame = v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 1000);
    let ports = spread(&mut fwd, &table, &frame, 50, 10);
    assert!(ports == [0, 50, 0] || ports == [0, 0, 50], "{ports:?}");
    assert_eq!((fwd.counters().no_key, fwd.counters().northbound), (50, 0));
    // Many flows: both ports.
    let mut frames: Vec<_> = (0..64u16)
        .map(|i| {
            ipv4_udp(
                [10, 0, 0, 2].into(),
                [10, 0, 3, 5].into(),
                64,
                (i, 4791),
                100,
            )
        })
        .collect();
    let used: HashSet<_> = run(&mut fwd, &table, &mut frames).into_iter().collect();
    assert_eq!(used.len(), 2, "{used:?}");
}

#[test]
fn table_and_balancer_disagreeing_cannot_break_the_balancer() {
    let table = fib(ALL_UP);
    let frame = v4([10, 0, 0, 2], [10, 1, 0, 5], 64, 1000); // key 2
                                                            // The balancer knows 2 keys: key 2 falls back to ECMP.
    let mut fwd = forwarder_with(Algorithm::Ofan, 2, 2);
    spread(&mut fwd, &table, &frame, 10, 10);
    assert_eq!(
        (fwd.counters().key_out_of_range, fwd.counters().forwarded),
        (10, 10)
    );
    // The balancer has 1 up-port: only up-position 0 (port 1) is chosen.
    let mut fwd = forwarder_with(Algorithm::Ofan, 1, 3);
    assert_eq!(spread(&mut fwd, &table, &frame, 10, 10), [0, 10, 0]);
    // ... and when only up-position 1 is usable, the frame falls back to it.
    let half = fib(UpState {
        oper_up: [false, true],
        resolved: [true; 2],
    });
    assert_eq!(spread(&mut fwd, &half, &frame, 10, 10), [0, 0, 10]);
}

#[test]
fn batches_larger_than_max_batch_are_chunked() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder();
    let mut frames: Vec<_> = (0..150)
        .map(|i| {
            if i % 3 == 0 {
                v4([10, 0, 0, 2], [192, 0, 2, 1], 64, 10)
            } else {
                v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000)
            }
        })
        .collect();
    let verdicts = run(&mut fwd, &table, &mut frames);
    for (i, verdict) in verdicts.iter().enumerate() {
        assert_eq!(
            i % 3 == 0,
            *verdict == Verdict::Drop(DropReason::NoRoute),
            "{i}: {verdict:?}"
        );
    }
    let counters = fwd.counters();
    assert_eq!(
        (counters.frames, counters.forwarded, counters.northbound),
        (150, 100, 100)
    );
}

/// Frames for the random test: random bytes, or a valid frame with a few random bytes
/// changed, so that every stage of the pipeline sees input.
fn random_frame(rng: &mut LbRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 {
        let len = rng.below(160) as usize;
        return (0..len).map(|_| rng.next_u64() as u8).collect();
    }
    let mut frame = seeds[rng.below(seeds.len() as u32) as usize].clone();
    for _ in 0..rng.below(4) {
        let at = rng.below(frame.len() as u32) as usize;
        frame[at] = rng.next_u64() as u8;
    }
    if rng.below(8) == 0 {
        frame.truncate(rng.below(frame.len() as u32 + 1) as usize);
    }
    frame
}

/// The forwarding invariants of one processed batch, as the fuzz target checks them.
fn check_batch(before: &[Vec<u8>], after: &[Vec<u8>], verdicts: &[Verdict]) {
    for ((old, new), verdict) in before.iter().zip(after).zip(verdicts) {
        match verdict {
            Verdict::Forward { .. } => {
                let old = wire::parse(old).expect("a forwarded frame parsed");
                let new = wire::parse(new).expect("a forwarded frame still parses");
                assert_eq!(new.hop_limit, old.hop_limit - 1);
                assert_eq!((new.src, new.dst, new.ports), (old.src, old.dst, old.ports));
            }
            _ => assert_eq!(old, new, "frames not forwarded are not touched"),
        }
    }
}

#[test]
fn hundred_thousand_random_frames_never_panic() {
    let tables = [
        fib(ALL_UP),
        fib(UpState {
            oper_up: [true, false],
            resolved: [true, true],
        }),
        fib(UpState {
            oper_up: [true, true],
            resolved: [false, true],
        }),
    ];
    let mut seeds: Vec<Vec<u8>> = one_frame_per_reason()
        .into_iter()
        .map(|(frame, _)| frame)
        .collect();
    seeds.extend([
        v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000),
        v4([10, 0, 0, 2], [10, 0, 3, 5], 2, 60),
        v4([10, 1, 0, 2], [10, 0, 0, 2], 64, 10),
        v6("fd00::2", "fd00:0:0:1::5", 64, 10),
        v6("fd00:0:0:1::5", "fd00::2", 64, 10),
        tagged(&v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 100), 5),
        captured_ipv4_udp(),
        ipv6_tcp_syn(),
    ]);
    let mut rng = LbRng::new(0x0fa0_5eed);
    let mut fwds = [
        forwarder_with(Algorithm::Ofan, 2, 3),
        forwarder_with(Algorithm::Jsq, 2, 3),
        forwarder_with(Algorithm::Ofan, 1, 1),
    ];
    let mut total = 0u64;
    while total < 100_000 {
        let n = 1 + rng.below(80) as usize;
        let before: Vec<_> = (0..n).map(|_| random_frame(&mut rng, &seeds)).collect();
        let mut after = before.clone();
        let which = rng.below(3) as usize;
        let verdicts = run(&mut fwds[which], &tables[rng.below(3) as usize], &mut after);
        check_batch(&before, &after, &verdicts);
        total += n as u64;
    }
    let frames: u64 = fwds.iter().map(|f| f.counters().frames).sum();
    let forwarded: u64 = fwds.iter().map(|f| f.counters().forwarded).sum();
    assert_eq!(frames, total);
    assert!(
        forwarded > total / 10,
        "the random frames reach forwarding too ({forwarded})"
    );
    for fwd in &fwds {
        let c = fwd.counters();
        assert_eq!(
            c.frames,
            c.forwarded + c.total_drops() + c.to_kernel.iter().sum::<u64>()
        );
    }
}

/// The IPv4 martian test on address bits says what the standard library's predicates say.
#[test]
fn martian_bits_match_std_predicates() {
    let std_never =
        |a: Ipv4Addr| a.is_multicast() || a.is_broadcast() || a.is_loopback() || a.is_link_local();
    let edges = [
        0u32,
        1,
        0x7eff_ffff,
        0x7f00_0000,
        0x7fff_ffff,
        0x8000_0000,
        0xa9fd_ffff,
        0xa9fe_0000,
        0xa9fe_ffff,
        0xa9ff_0000,
        0xdfff_ffff,
        0xe000_0000,
        0xefff_ffff,
        0xf000_0000,
        0xffff_fffe,
        0xffff_ffff,
        0x0a00_0001,
    ];
    let mut rng = LbRng::new(5);
    let addresses: Vec<u32> = edges
        .into_iter()
        .chain((0..20_000).map(|_| rng.next_u64() as u32))
        .collect();
    for &src in &addresses {
        for dst in [0x0a00_0105u32, src, addresses[(src % 17) as usize]] {
            let (s, d) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let expected = std_never(s) || std_never(d) || s.is_unspecified() || d.is_unspecified();
            assert_eq!(
                is_martian(IpAddr::V4(s), IpAddr::V4(d)),
                expected,
                "{s} -> {d}"
            );
        }
    }
}
