//! The dragonfly's arithmetic against its own link list, and the paper's invariants.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use crate::dragonfly::{
    Dragonfly, DragonflyShape, GroupId, HostId, LinkClass, LinkEnd, PortPeer, RouterId, RouterPort,
};
use crate::{LinkParams, TopologyError};

fn shapes() -> impl Strategy<Value = DragonflyShape> {
    (1u16..=4, 1u16..=8, 1u16..=4).prop_map(|(p, a, h)| DragonflyShape::new(p, a, h).unwrap())
}

#[test]
fn small_and_large_sizes_have_the_issue_s_counts() {
    let small = DragonflyShape::new(2, 4, 2).unwrap();
    assert_eq!(
        (small.groups(), small.routers(), small.hosts()),
        (9, 36, 72)
    );
    assert_eq!(small.radix(), 2 + 3 + 2);
    let large = DragonflyShape::new(4, 8, 4).unwrap();
    assert_eq!((large.groups(), large.hosts()), (33, 1056));
    assert_eq!(DragonflyShape::balanced(4).unwrap(), large);
}

#[test]
fn bad_parameters_are_refused_by_name() {
    let name = |result: Result<DragonflyShape, TopologyError>| match result {
        Err(TopologyError::DragonflyParameter { name, .. }) => name,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(name(DragonflyShape::new(0, 4, 2)), "p");
    assert_eq!(name(DragonflyShape::new(129, 4, 2)), "p");
    assert_eq!(name(DragonflyShape::new(2, 0, 2)), "a");
    assert_eq!(name(DragonflyShape::new(2, 4, 0)), "h");
    // a·h + 1 = 257 groups do not fit 10.G.…
    assert_eq!(name(DragonflyShape::new(2, 16, 16)), "h");
    assert!(DragonflyShape::new(2, 127, 2).is_ok());
    let message = DragonflyShape::new(2, 4, 0).unwrap_err().to_string();
    assert!(message.contains("h = 0"), "{message}");
    // Deserializing validates too.
    let parsed: Result<DragonflyShape, _> = serde_json::from_str(r#"{"p":1,"a":0,"h":1}"#);
    assert!(parsed.is_err());
}

#[test]
fn valiant_refuses_an_end_group_as_intermediate() {
    let dragonfly = Dragonfly::new(DragonflyShape::new(1, 2, 1).unwrap());
    let (src, dst) = (RouterId(0), RouterId(2));
    assert!(dragonfly.valiant_path(src, dst, GroupId(0)).is_err());
    assert!(dragonfly.valiant_path(src, dst, GroupId(1)).is_err());
    assert!(dragonfly.valiant_path(src, dst, GroupId(3)).is_err());
    assert_eq!(
        dragonfly.valiant_path(src, dst, GroupId(2)).unwrap().len(),
        5
    );
}

#[test]
fn addresses_follow_the_plan_and_invert() {
    let dragonfly = Dragonfly::new(DragonflyShape::new(2, 4, 2).unwrap());
    let host = HostId(2 * (4 * 3 + 2) + 1); // group 3, router 2, slot 1
    assert_eq!(dragonfly.host_address(host).to_string(), "10.3.2.3");
    assert_eq!(dragonfly.host_gateway_address(host).to_string(), "10.3.2.2");
    assert_eq!(
        dragonfly.host_by_addr(dragonfly.host_address(host)),
        Some(host)
    );
    assert_eq!(dragonfly.host_by_addr("10.3.2.2".parse().unwrap()), None);
    assert_eq!(dragonfly.host_by_addr("10.9.0.1".parse().unwrap()), None);
    assert_eq!(dragonfly.loopback(RouterId(35)).to_string(), "10.255.0.35");
    assert_eq!(dragonfly.link_address(3, true).to_string(), "100.64.0.7");
    let addresses: BTreeSet<_> = (0..72).map(|x| dragonfly.host_address(HostId(x))).collect();
    assert_eq!(addresses.len(), 72);
}

#[test]
fn adversarial_neighbour_uses_channel_zero_everywhere() {
    let dragonfly = Dragonfly::new(DragonflyShape::new(2, 4, 2).unwrap());
    for group in 0..9 {
        let gateway = dragonfly.gateway(GroupId(group), GroupId((group + 1) % 9));
        assert_eq!(gateway.router, dragonfly.router(GroupId(group), 0));
        assert_eq!(gateway.port, RouterPort(2 + 3));
    }
}

proptest! {
    #[test]
    fn every_pair_of_groups_has_exactly_one_global_link(shape in shapes()) {
        let dragonfly = Dragonfly::new(shape);
        let mut pairs = BTreeMap::new();
        for link in dragonfly.links().iter().filter(|l| l.class == LinkClass::Global) {
            let (x, y) = (dragonfly.group_of(link.a.router), dragonfly.group_of(link.b.router));
            prop_assert_ne!(x, y);
            *pairs.entry((x.min(y), x.max(y))).or_insert(0) += 1;
        }
        let groups = shape.groups();
        prop_assert_eq!(pairs.len() as u32, groups * (groups - 1) / 2);
        prop_assert!(pairs.values().all(|&count| count == 1));
        // And every pair of routers of a group has exactly one local link.
        let locals = dragonfly.links().iter().filter(|l| l.class == LinkClass::Local).count();
        let a = u32::from(shape.a());
        prop_assert_eq!(locals as u32, groups * a * (a - 1) / 2);
    }

    #[test]
    fn ports_agree_with_the_link_list(shape in shapes()) {
        let dragonfly = Dragonfly::new(shape);
        let radix = shape.radix();
        let mut used: BTreeSet<(RouterId, RouterPort)> = BTreeSet::new();
        for link in dragonfly.links() {
            for (here, there) in [(link.a, link.b), (link.b, link.a)] {
                prop_assert!(here.port.0 >= shape.p() && here.port.0 < radix);
                prop_assert!(used.insert((here.router, here.port)), "port used twice");
                prop_assert_eq!(dragonfly.far_end(here.router, here.port), Some(there));
                let global = matches!(
                    dragonfly.peer(here.router, here.port),
                    Some(PortPeer::Global { .. })
                );
                prop_assert_eq!(global, link.class == LinkClass::Global);
            }
        }
        // Every router port but the p host ports terminates exactly one link.
        prop_assert_eq!(used.len() as u32, shape.routers() * u32::from(radix - shape.p()));
        for router in 0..shape.routers() {
            let router = RouterId(router);
            prop_assert_eq!(dragonfly.peer(router, RouterPort(radix)), None);
            for slot in 0..shape.p() {
                let Some(PortPeer::Host(host)) = dragonfly.peer(router, RouterPort(slot)) else {
                    return Err(TestCaseError::fail("a host port"));
                };
                prop_assert_eq!(dragonfly.router_of(host), router);
                prop_assert_eq!(dragonfly.host_port(host), RouterPort(slot));
            }
        }
    }

    #[test]
    fn minimal_paths_are_local_global_local(shape in shapes(), x in any::<u32>(), y in any::<u32>()) {
        let dragonfly = Dragonfly::new(shape);
        let (src, dst) = (RouterId(x % shape.routers()), RouterId(y % shape.routers()));
        let path = dragonfly.minimal_path(src, dst);
        prop_assert_eq!(path.first(), Some(&src));
        prop_assert_eq!(path.last(), Some(&dst));
        let hops = path.len() as u32 - 1;
        prop_assert!(hops <= 3);
        prop_assert_eq!(hops, dragonfly.minimal_hops(src, dst));
        let group_changes = path
            .windows(2)
            .filter(|w| dragonfly.group_of(w[0]) != dragonfly.group_of(w[1]))
            .count();
        let expected = usize::from(dragonfly.group_of(src) != dragonfly.group_of(dst));
        prop_assert_eq!(group_changes, expected);
        // Consecutive routers are linked.
        for w in path.windows(2) {
            let linked = (0..shape.radix()).any(|port| {
                dragonfly.far_end(w[0], RouterPort(port)).map(|end: LinkEnd| end.router) == Some(w[1])
            });
            prop_assert!(linked);
        }
    }

    #[test]
    fn valiant_paths_cross_the_intermediate_group(
        shape in shapes(), x in any::<u32>(), y in any::<u32>(), v in any::<u32>()
    ) {
        let dragonfly = Dragonfly::new(shape);
        let groups = shape.groups();
        prop_assume!(groups >= 3);
        let (src, dst) = (RouterId(x % shape.routers()), RouterId(y % shape.routers()));
        let (from, to) = (dragonfly.group_of(src), dragonfly.group_of(dst));
        let via = GroupId(v % groups);
        prop_assume!(via != from && via != to);
        let path = dragonfly.valiant_path(src, dst, via).unwrap();
        prop_assert!(path.len() - 1 <= 5);
        prop_assert_eq!(path.len() as u32 - 1, dragonfly.valiant_hops(src, dst, via));
        prop_assert!(path.iter().any(|&r| dragonfly.group_of(r) == via));
        let global = path
            .windows(2)
            .filter(|w| dragonfly.group_of(w[0]) != dragonfly.group_of(w[1]))
            .count();
        prop_assert_eq!(global, 2);
    }

    #[test]
    fn dest_keys_are_dense_and_per_group(shape in shapes(), r in any::<u32>()) {
        let dragonfly = Dragonfly::new(shape);
        let router = RouterId(r % shape.routers());
        let keys: BTreeSet<u32> = (0..shape.hosts())
            .map(|x| dragonfly.dest_key(router, HostId(x)).0)
            .collect();
        // The own group's a routers, the other g − 1 groups.
        prop_assert_eq!(keys.len() as u32, u32::from(shape.a()) + shape.groups() - 1);
        prop_assert!(keys.iter().all(|&k| k < dragonfly.dest_key_count()));
    }
}

#[test]
fn lower_bound_of_the_adversarial_pattern_is_the_group_cut_or_the_nic() {
    let params = LinkParams::paper();
    let dragonfly = Dragonfly::new(DragonflyShape::new(2, 4, 2).unwrap());
    let size = 1u64 << 20;
    let flows: Vec<_> = (0..72u32)
        .map(|x| (HostId(x), HostId((x + 8) % 72), size))
        .collect();
    let bound = dragonfly.collective_lower_bound_ps(&params, &flows);
    let wire = size + (size / 4096) * 82;
    let nic = params.serialization_ps(wire);
    // p = h: a group's 8 hosts have exactly its 8 global links, so the NIC bound binds.
    assert!(bound >= nic && bound < nic + 10_000_000, "{bound} vs {nic}");
    // With h = 1 the group cut (4 links for 8 hosts) doubles it.
    let thin = Dragonfly::new(DragonflyShape::new(2, 4, 1).unwrap());
    let flows: Vec<_> = (0..40u32)
        .map(|x| (HostId(x), HostId((x + 8) % 40), size))
        .collect();
    let bound = thin.collective_lower_bound_ps(&params, &flows);
    assert!(bound >= 2 * nic, "{bound} vs 2 × {nic}");
}
