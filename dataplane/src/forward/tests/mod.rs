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
        .map(|data| FrameRef::whole(PortId(0), data))
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

mod balancing;
mod reasons;
mod robustness;
