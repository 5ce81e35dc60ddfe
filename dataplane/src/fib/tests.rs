//! Tests of the forwarding table.

use super::lpm::{Lpm, LpmBits};
use super::*;
use proptest::prelude::*;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

fn prefix(text: &str) -> IpPrefix {
    text.parse().unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn port(role: PortRole, up_position: Option<u8>, index: u8) -> Port {
    Port {
        ifindex: 10 + u32::from(index),
        mac: [2, 0, 0, 0, 0, index],
        role,
        up_position,
        oper_up: true,
    }
}

fn hop(port: u16, mac: Option<u8>) -> NextHop {
    NextHop {
        port: PortId(port),
        gateway: IpAddr::V4(Ipv4Addr::new(10, 255, 0, port as u8)),
        mac: mac.map(|last| [2, 0, 0, 0, 1, last]),
    }
}

/// Ports: 0 Host, 1 Up (position 1), 2 Up (position 0), 3 Down.
fn four_ports() -> FibBuilder {
    let mut builder = Fib::builder();
    builder
        .port(PortId(0), port(PortRole::Host, None, 0))
        .port(PortId(1), port(PortRole::Up, Some(1), 1))
        .port(PortId(2), port(PortRole::Up, Some(0), 2))
        .port(PortId(3), port(PortRole::Down, None, 3));
    builder
}

#[test]
fn longest_prefix_wins_for_routes_keys_and_locals() {
    let mut builder = four_ports();
    let up = builder.group([hop(1, Some(1)), hop(2, Some(2))]);
    let host = builder.group([hop(0, Some(0))]);
    builder
        .route(prefix("0.0.0.0/0"), RouteTarget::Group(up))
        .route(prefix("10.0.0.0/24"), RouteTarget::Group(host))
        .route(prefix("10.0.0.128/25"), RouteTarget::Unreachable)
        .route(prefix("10.0.0.1/32"), RouteTarget::Local)
        .route(prefix("fd00::/8"), RouteTarget::Group(up))
        .route(prefix("fd00:0:0:1::/64"), RouteTarget::Group(host))
        .dest_key(prefix("10.1.0.0/16"), DestKey(1))
        .dest_key(prefix("10.1.2.0/24"), DestKey(2))
        .dest_key(prefix("fd00:0:0:2::/64"), DestKey(0))
        .local_address(ip("10.0.0.1"))
        .local_address(ip("fd00::1"));
    let fib = builder.build().unwrap();
    assert_eq!(fib.route(ip("192.0.2.1")), Some(RouteTarget::Group(up)));
    assert_eq!(fib.route(ip("10.0.0.5")), Some(RouteTarget::Group(host)));
    assert_eq!(fib.route(ip("10.0.0.200")), Some(RouteTarget::Unreachable));
    assert_eq!(fib.route(ip("10.0.0.1")), Some(RouteTarget::Local));
    assert_eq!(
        fib.route(ip("fd00:0:0:1::9")),
        Some(RouteTarget::Group(host))
    );
    assert_eq!(fib.route(ip("fd01::9")), Some(RouteTarget::Group(up)));
    assert_eq!(fib.route(ip("2001:db8::1")), None);
    assert_eq!(fib.dest_key(ip("10.1.7.1")), Some(DestKey(1)));
    assert_eq!(fib.dest_key(ip("10.1.2.1")), Some(DestKey(2)));
    assert_eq!(fib.dest_key(ip("10.2.2.1")), None);
    assert_eq!(fib.dest_key(ip("fd00:0:0:2::1")), Some(DestKey(0)));
    assert_eq!(fib.dest_keys(), 3);
    assert!(fib.is_local(ip("10.0.0.1")) && fib.is_local(ip("fd00::1")));
    assert!(!fib.is_local(ip("10.0.0.2")) && !fib.is_local(ip("fd00::2")));
    assert_eq!(fib.route_count(), (4, 2));
    assert_eq!(
        fib.route_exact(prefix("10.0.0.0/24")),
        Some(RouteTarget::Group(host))
    );
    assert_eq!(fib.route_exact(prefix("10.0.0.0/23")), None);
    assert_eq!(fib.up_port_count(), 2);
    assert_eq!(fib.up_port(UpPort(0)), Some(PortId(2)));
    assert_eq!(fib.up_port(UpPort(1)), Some(PortId(1)));
    // The merged walk: a key prefix (10.1.2.0/24) longer than the route (0/0) that covers it,
    // a local address inside a shorter route, and an address under nothing but the default.
    assert_eq!(
        fib.destination(ip("10.1.2.1")),
        Destination {
            route: Some(RouteTarget::Group(up)),
            key: Some(DestKey(2)),
            local: false,
        }
    );
    assert_eq!(
        fib.destination(ip("10.0.0.1")),
        Destination {
            route: Some(RouteTarget::Local),
            key: None,
            local: true,
        }
    );
    assert_eq!(
        fib.destination(ip("fd00::1")),
        Destination {
            route: Some(RouteTarget::Group(up)),
            key: None,
            local: true,
        }
    );
    assert_eq!(fib.destination(ip("2001:db8::1")), Destination::default());
}

#[test]
fn groups_are_precomputed() {
    let mut builder = four_ports();
    let north = builder.group([hop(1, Some(1)), hop(2, Some(2))]);
    let unresolved = builder.group([hop(1, None), hop(2, Some(2))]);
    let mixed = builder.group([hop(1, Some(1)), hop(3, Some(3))]);
    let single_up = builder.group([hop(1, Some(1))]);
    builder.ports[2].1.oper_up = false; // port 2 (up-position 0) down
    let fib = builder.build().unwrap();

    let group = fib.group(north).unwrap();
    assert_eq!(group.kind(), GroupKind::Northbound);
    assert_eq!((group.usable_hops(), group.port_up_hops()), (0b01, 0b01));
    assert_eq!(group.up_mask(), PortMask(0b10));
    assert_eq!(group.hop_at_up(UpPort(1)).unwrap().port, PortId(1));
    assert_eq!(group.hop_at_up(UpPort(0)).unwrap().port, PortId(2));
    assert_eq!(group.hop_at_up(UpPort(2)), None);
    assert_eq!(group.hop_at_up(UpPort(200)), None);

    let group = fib.group(unresolved).unwrap();
    assert_eq!((group.usable_hops(), group.port_up_hops()), (0, 0b01));
    assert_eq!(group.up_mask(), PortMask::EMPTY);
    assert_eq!(group.hop_by_hash(7), None);

    let group = fib.group(mixed).unwrap();
    assert_eq!(group.kind(), GroupKind::Ecmp);
    assert_eq!(group.up_mask(), PortMask::EMPTY);
    assert_eq!(group.usable_hops(), 0b11);
    let mut seen = [0u32; 2];
    for hash in 0..1000u32 {
        let chosen = group.hop_by_hash(hash.wrapping_mul(0x9e37_79b9)).unwrap();
        seen[usize::from(chosen.port == PortId(3))] += 1;
    }
    assert!(seen.iter().all(|&n| n > 400), "{seen:?}");

    assert_eq!(fib.group(single_up).unwrap().kind(), GroupKind::Single);
    assert!(fib.group(GroupId(4)).is_none());
}

#[test]
fn build_errors_are_reported() {
    let err = |builder: &FibBuilder| builder.build().unwrap_err();

    let mut b = four_ports();
    b.port(PortId(1), port(PortRole::Host, None, 9));
    assert_eq!(err(&b), FibError::DuplicatePort { port: PortId(1) });

    let mut b = four_ports();
    b.port(PortId(7), port(PortRole::Host, None, 9));
    assert_eq!(
        err(&b),
        FibError::PortIdGap {
            missing: PortId(4),
            ports: 5
        }
    );

    let mut b = four_ports();
    b.ports[1].1.up_position = None;
    assert_eq!(err(&b), FibError::MissingUpPosition { port: PortId(1) });

    let mut b = four_ports();
    b.ports[0].1.up_position = Some(2);
    assert_eq!(
        err(&b),
        FibError::UnexpectedUpPosition {
            port: PortId(0),
            role: PortRole::Host
        }
    );

    let mut b = four_ports();
    b.ports[1].1.up_position = Some(0);
    assert_eq!(
        err(&b),
        FibError::DuplicateUpPosition {
            position: 0,
            first: PortId(1),
            second: PortId(2)
        }
    );

    let mut b = four_ports();
    b.ports[1].1.up_position = Some(2);
    assert_eq!(
        err(&b),
        FibError::UpPositionOutOfRange {
            port: PortId(1),
            position: 2,
            up_ports: 2
        }
    );

    let mut b = Fib::builder();
    for index in 0..65u16 {
        b.port(
            PortId(index),
            port(PortRole::Up, Some(index as u8), index as u8),
        );
    }
    assert_eq!(
        err(&b),
        FibError::TooManyUpPorts {
            up_ports: 65,
            max: 64
        }
    );

    let mut b = four_ports();
    let group = b.group([]);
    assert_eq!(err(&b), FibError::EmptyGroup { group });

    let mut b = four_ports();
    let group = b.group((0..65).map(|_| hop(0, Some(0))));
    assert_eq!(
        err(&b),
        FibError::GroupTooLarge {
            group,
            hops: 65,
            max: 64
        }
    );

    let mut b = four_ports();
    let group = b.group([hop(0, Some(0)), hop(9, Some(9))]);
    assert_eq!(
        err(&b),
        FibError::HopOnMissingPort {
            group,
            port: PortId(9)
        }
    );

    let mut b = four_ports();
    let mut second = hop(1, Some(7));
    second.gateway = ip("10.255.0.77");
    let group = b.group([hop(1, Some(1)), second]);
    assert_eq!(
        err(&b),
        FibError::RepeatedUpPort {
            group,
            position: 1,
            port: PortId(1)
        }
    );

    let mut b = four_ports();
    b.route(prefix("10.0.0.0/8"), RouteTarget::Group(GroupId(3)));
    assert_eq!(
        err(&b),
        FibError::MissingGroup {
            prefix: prefix("10.0.0.0/8"),
            group: GroupId(3)
        }
    );

    let mut b = four_ports();
    b.route(prefix("10.0.0.0/8"), RouteTarget::Local);
    b.route(prefix("10.0.0.0/8"), RouteTarget::Unreachable);
    assert_eq!(
        err(&b),
        FibError::DuplicateRoute {
            prefix: prefix("10.0.0.0/8")
        }
    );

    let mut b = four_ports();
    b.dest_key(prefix("10.0.0.0/8"), DestKey(0));
    b.dest_key(prefix("10.0.0.0/8"), DestKey(1));
    assert_eq!(
        err(&b),
        FibError::DuplicateKeyPrefix {
            prefix: prefix("10.0.0.0/8")
        }
    );

    let mut b = four_ports();
    b.dest_key(prefix("10.0.0.0/8"), DestKey(4)).dest_keys(4);
    assert_eq!(
        err(&b),
        FibError::KeyOutOfRange {
            prefix: prefix("10.0.0.0/8"),
            key: 4,
            dest_keys: 4
        }
    );
}

#[test]
fn prefixes_parse_validate_and_display() {
    assert_eq!(prefix("10.1.0.0/16").to_string(), "10.1.0.0/16");
    assert_eq!(prefix("10.1.2.3").prefix_len(), 32);
    assert_eq!(prefix("fd00::/8").to_string(), "fd00::/8");
    assert!(prefix("0.0.0.0/0").is_default());
    assert!(prefix("10.1.0.0/16").contains(ip("10.1.255.1")));
    assert!(!prefix("10.1.0.0/16").contains(ip("10.2.0.1")));
    assert!(!prefix("10.1.0.0/16").contains(ip("fd00::1")));
    assert_eq!(
        "10.1.0.1/16".parse::<IpPrefix>(),
        Err(PrefixError::HostBitsSet {
            addr: ip("10.1.0.1"),
            len: 16
        })
    );
    assert_eq!(
        "10.0.0.0/33".parse::<IpPrefix>(),
        Err(PrefixError::LengthTooLong { len: 33, max: 32 })
    );
    assert!(matches!(
        "ten/8".parse::<IpPrefix>(),
        Err(PrefixError::Syntax { .. })
    ));
    assert!(matches!(
        "10.0.0.0/x".parse::<IpPrefix>(),
        Err(PrefixError::Syntax { .. })
    ));
}

#[test]
fn empty_fib_routes_nothing() {
    let fib = Fib::default();
    assert_eq!(fib.route(ip("10.0.0.1")), None);
    assert_eq!(fib.dest_key(ip("fd00::1")), None);
    assert!(!fib.is_local(ip("10.0.0.1")));
    let shared = SharedFib::from_pointee(fib);
    assert_eq!(shared.load().dest_keys(), 0);
}

/// The reference: the longest matching prefix by a linear scan.
fn naive<A: LpmBits + std::hash::Hash>(table: &HashMap<(A, u8), u32>, addr: A) -> Option<u32> {
    table
        .iter()
        .filter(|((prefix, len), _)| addr & A::prefix_mask(*len) == *prefix)
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, value)| *value)
}

/// Random tables: lengths mostly from a fat tree's few, some anywhere; addresses drawn near
/// the prefixes so that most lookups hit several lengths.
fn check_against_naive<A>(raw: &[(A, u8, u32)], probes: &[(usize, A)], bits: u8)
where
    A: LpmBits + std::hash::Hash + std::ops::BitXor<Output = A> + std::ops::Not<Output = A>,
{
    let mut table = HashMap::new();
    for &(addr, len, value) in raw {
        let len = len % (bits + 1);
        table.insert((addr & A::prefix_mask(len), len), value);
    }
    let lpm = Lpm::build(
        table
            .iter()
            .map(|(&(prefix, len), &value)| (prefix, len, value)),
    );
    assert_eq!(lpm.len(), table.len());
    for &(index, noise) in probes {
        let base = raw
            .get(index % raw.len().max(1))
            .map_or(noise, |&(addr, _, _)| addr);
        // Flip a few low bits of a table address, or use the noise as is.
        for addr in [
            base,
            base ^ (noise & A::prefix_mask(bits) & !A::prefix_mask(bits - 8)),
            noise,
        ] {
            assert_eq!(lpm.lookup(addr), naive(&table, addr), "{addr:?}");
        }
    }
}

fn v4_len() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(8), Just(16), Just(24), Just(32), 0u8..=32]
}

fn v6_len() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(48), Just(64), Just(128), 0u8..=128]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_lpm_matches_linear_scan(
        raw in proptest::collection::vec((any::<u32>().prop_map(|a| a & 0x0a0f_ffff | 0x0a00_0000), v4_len(), any::<u32>()), 0..300),
        probes in proptest::collection::vec((any::<usize>(), any::<u32>()), 1..100),
    ) {
        check_against_naive(&raw, &probes, 32);
    }

    #[test]
    fn ipv6_lpm_matches_linear_scan(
        raw in proptest::collection::vec((any::<u128>().prop_map(|a| a & !(0xffffu128 << 112) | (0xfd00u128 << 112)), v6_len(), any::<u32>()), 0..300),
        probes in proptest::collection::vec((any::<usize>(), any::<u128>()), 1..100),
    ) {
        check_against_naive(&raw, &probes, 128);
    }
}

/// A table of random routes, keys and local addresses, nested in each other: every answer of the
/// merged walk ([`Fib::destination`], and so [`Fib::route`], [`Fib::dest_key`], [`Fib::is_local`])
/// must be the linear scan's over the builder's inputs.
fn check_destination(
    routes: &[(IpAddr, u8, u8)],
    keys: &[(IpAddr, u8, u32)],
    locals: &[IpAddr],
    probes: &[IpAddr],
) {
    let mut builder = four_ports();
    let group = builder.group([hop(0, Some(0))]);
    let mut route_list: Vec<(IpPrefix, RouteTarget)> = Vec::new();
    for &(addr, len, kind) in routes {
        let prefix = masked(addr, len);
        if route_list.iter().all(|(p, _)| *p != prefix) {
            let target = match kind % 3 {
                0 => RouteTarget::Group(group),
                1 => RouteTarget::Local,
                _ => RouteTarget::Unreachable,
            };
            builder.route(prefix, target);
            route_list.push((prefix, target));
        }
    }
    let mut key_list: Vec<(IpPrefix, DestKey)> = Vec::new();
    for &(addr, len, key) in keys {
        let prefix = masked(addr, len);
        if key_list.iter().all(|(p, _)| *p != prefix) {
            builder.dest_key(prefix, DestKey(key % 64));
            key_list.push((prefix, DestKey(key % 64)));
        }
    }
    for &addr in locals {
        builder.local_address(addr);
    }
    let fib = builder.dest_keys(64).build().unwrap();
    fn longest<V: Copy>(list: &[(IpPrefix, V)], addr: IpAddr) -> Option<V> {
        list.iter()
            .filter(|(prefix, _)| prefix.contains(addr))
            .max_by_key(|(prefix, _)| prefix.prefix_len())
            .map(|&(_, value)| value)
    }
    for &addr in probes.iter().chain(locals) {
        let expected = Destination {
            route: longest(&route_list, addr),
            key: longest(&key_list, addr),
            local: locals.contains(&addr),
        };
        assert_eq!(fib.destination(addr), expected, "{addr}");
        assert_eq!(
            (fib.route(addr), fib.dest_key(addr), fib.is_local(addr)),
            (expected.route, expected.key, expected.local),
            "{addr}"
        );
    }
}

/// The prefix of `len` bits (modulo the family's width) containing `addr`.
fn masked(addr: IpAddr, len: u8) -> IpPrefix {
    let network = match addr {
        IpAddr::V4(a) => {
            let len = len % 33;
            (
                IpAddr::V4(Ipv4Addr::from(a.to_bits() & u32::prefix_mask(len))),
                len,
            )
        }
        IpAddr::V6(a) => {
            let len = len % 129;
            (
                IpAddr::V6(Ipv6Addr::from(a.to_bits() & u128::prefix_mask(len))),
                len,
            )
        }
    };
    IpPrefix::new(network.0, network.1).unwrap()
}

/// Addresses in a small corner of the space (10.0.0.0/14 or fd00::/110), so that prefixes nest
/// and probes hit them.
fn near_v4() -> impl Strategy<Value = IpAddr> {
    any::<u32>().prop_map(|a| IpAddr::V4(Ipv4Addr::from(a & 0x0003_ffff | 0x0a00_0000)))
}

fn near_v6() -> impl Strategy<Value = IpAddr> {
    any::<u32>()
        .prop_map(|a| IpAddr::V6(Ipv6Addr::from(u128::from(a & 0x3_ffff) | 0xfd00u128 << 112)))
}

fn near() -> impl Strategy<Value = IpAddr> {
    prop_oneof![near_v4(), near_v6()]
}

fn near_len() -> impl Strategy<Value = u8> {
    prop_oneof![0u8..=32, 96u8..=128]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn one_destination_walk_answers_like_a_linear_scan(
        routes in proptest::collection::vec((near(), near_len(), any::<u8>()), 0..60),
        keys in proptest::collection::vec((near(), near_len(), any::<u32>()), 0..60),
        locals in proptest::collection::vec(near(), 0..8),
        probes in proptest::collection::vec(near(), 1..100),
    ) {
        check_destination(&routes, &keys, &locals, &probes);
    }
}

/// Lookup speed on a fat-tree-like table (k = 64 addressing: 2048 edge /24s, 64 pod /16s, a
/// default route). Not a test: run with
/// `cargo test -p ofan-dataplane --release -- --ignored --nocapture lookup_speed`.
#[test]
#[ignore = "micro-benchmark"]
fn lookup_speed() {
    let mut builder = four_ports();
    let up = builder.group([hop(1, Some(1)), hop(2, Some(2))]);
    let host = builder.group([hop(0, Some(0))]);
    builder.route(prefix("0.0.0.0/0"), RouteTarget::Group(up));
    for pod in 0..64u8 {
        builder.route(
            IpPrefix::new(ip(&format!("10.{pod}.0.0")), 16).unwrap(),
            RouteTarget::Group(up),
        );
        for edge in 0..32u8 {
            let net = IpPrefix::new(ip(&format!("10.{pod}.{edge}.0")), 24).unwrap();
            builder.route(net, RouteTarget::Group(host));
            builder.dest_key(net, DestKey(u32::from(pod) * 32 + u32::from(edge)));
            let net6 = IpPrefix::new(
                IpAddr::V6(Ipv6Addr::new(
                    0xfd00,
                    0,
                    u16::from(pod),
                    u16::from(edge),
                    0,
                    0,
                    0,
                    0,
                )),
                64,
            )
            .unwrap();
            builder.route(net6, RouteTarget::Group(host));
        }
    }
    let fib = builder.build().unwrap();
    let addrs4: Vec<IpAddr> = (0..4096u32)
        .map(|i| {
            IpAddr::V4(Ipv4Addr::from(
                0x0a00_0000 | (i.wrapping_mul(2_654_435_761) & 0x003f_1fff),
            ))
        })
        .collect();
    let addrs6: Vec<IpAddr> = (0..4096u32)
        .map(|i| {
            IpAddr::V6(Ipv6Addr::new(
                0xfd00,
                0,
                (i % 64) as u16,
                (i / 64 % 32) as u16,
                0,
                0,
                0,
                i as u16,
            ))
        })
        .collect();
    for (name, addrs) in [("ipv4 route+key", &addrs4), ("ipv6 route", &addrs6)] {
        let rounds = 500;
        let start = std::time::Instant::now();
        let mut hits = 0usize;
        for _ in 0..rounds {
            for &addr in addrs {
                hits += usize::from(
                    std::hint::black_box(fib.route(std::hint::black_box(addr))).is_some(),
                );
                hits += usize::from(fib.dest_key(addr).is_some());
            }
        }
        let per = start.elapsed().as_nanos() as f64 / (rounds * addrs.len()) as f64;
        println!("{name}: {per:.1} ns per route + key lookup ({hits} hits)");
    }
}
