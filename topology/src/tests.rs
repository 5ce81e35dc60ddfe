//! Tests of the contracts stated in the crate documentation.
//!
//! Expectations are derived from names, roles, pods and indices (the documented contract), not
//! from the internal id arithmetic, so that a wrong formula cannot agree with itself.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;

use proptest::prelude::*;

use crate::{
    BoundSystem, DestKey, FailedLinks, Forwarding, LinkId, LinkParams, Node, NodeId, PortDirection,
    PortIndex, Role, SendRate, Topology, TopologyError, TopologyKind, TrafficMatrix,
};

fn fat_tree(k: u16) -> Topology {
    Topology::fat_tree(k).unwrap()
}

fn leaf_spine(k: u16) -> Topology {
    Topology::leaf_spine(k).unwrap()
}

fn by_name(topology: &Topology, name: &str) -> NodeId {
    topology
        .nodes()
        .iter()
        .find(|node| node.name == name)
        .unwrap_or_else(|| panic!("no node named {name}"))
        .id
}

fn link(topology: &Topology, a: &str, b: &str) -> LinkId {
    topology
        .link_between(by_name(topology, a), by_name(topology, b))
        .unwrap_or_else(|| panic!("{a} and {b} are not adjacent"))
}

fn failed(topology: &Topology, pairs: &[(&str, &str)]) -> FailedLinks {
    pairs.iter().map(|(a, b)| link(topology, a, b)).collect()
}

fn even_radixes() -> impl Iterator<Item = u16> {
    (4..=64).step_by(2)
}

fn all_ones(width: usize) -> u64 {
    (1 << width) - 1
}

// ---------------------------------------------------------------------------------------------
// Shape and counts

#[test]
fn fat_tree_counts_for_every_even_k() {
    for k in even_radixes() {
        let t = fat_tree(k);
        let k = usize::from(k);
        assert_eq!(t.k(), u16::try_from(k).unwrap());
        assert_eq!(usize::from(t.num_pods()), k);
        assert_eq!(t.hosts().len(), k * k * k / 4, "k = {k}");
        assert_eq!(t.switches().len(), 5 * k * k / 4, "k = {k}");
        assert_eq!(t.edges().len(), k * k / 2, "k = {k}");
        assert_eq!(t.aggregations().len(), k * k / 2, "k = {k}");
        assert_eq!(t.cores().len(), k * k / 4, "k = {k}");
        assert_eq!(t.links().len(), 3 * k * k * k / 4, "k = {k}");
        assert_eq!(t.nodes().len(), t.hosts().len() + t.switches().len());
        assert!(t.hosts().iter().all(|n| n.role == Role::Host));
        assert!(t.edges().iter().all(|n| n.role == Role::Edge));
        assert!(t.aggregations().iter().all(|n| n.role == Role::Aggregation));
        assert!(t.cores().iter().all(|n| n.role == Role::Core));
        for node in t.switches() {
            assert_eq!(node.ports.len(), k, "{}", node.name);
            let up = if node.role == Role::Core { 0 } else { k / 2 };
            assert_eq!(t.up_ports(node.id).len(), up, "{}", node.name);
            assert_eq!(t.down_ports(node.id).len(), k - up, "{}", node.name);
        }
        for host in t.hosts() {
            assert_eq!(host.ports.len(), 1);
            assert_eq!(host.ports[0].direction, PortDirection::Up);
        }
    }
}

#[test]
fn leaf_spine_counts_for_every_even_k() {
    for k in even_radixes() {
        let t = leaf_spine(k);
        let k = usize::from(k);
        assert_eq!(t.num_pods(), 1);
        assert_eq!(t.hosts().len(), k * k / 2, "k = {k}");
        assert_eq!(t.edges().len(), k, "k = {k}");
        assert!(t.aggregations().is_empty());
        assert_eq!(t.cores().len(), k / 2, "k = {k}");
        assert_eq!(t.links().len(), k * k / 2 + k * (k / 2), "k = {k}");
        for node in t.switches() {
            assert_eq!(node.ports.len(), k, "{}", node.name);
            let up = if node.role == Role::Core { 0 } else { k / 2 };
            assert_eq!(t.up_ports(node.id).len(), up, "{}", node.name);
        }
    }
}

#[test]
fn odd_or_out_of_range_k_is_rejected() {
    for k in [0, 1, 2, 3, 5, 63, 65, 66, 128, u16::MAX] {
        assert!(
            matches!(Topology::fat_tree(k), Err(TopologyError::OddOrOutOfRangeK { k: e }) if e == k)
        );
        assert!(matches!(
            Topology::leaf_spine(k),
            Err(TopologyError::OddOrOutOfRangeK { .. })
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Port numbering, links and names

/// Checks the port table of the crate documentation against names, pods and indices.
fn check_fat_tree_port_contract(t: &Topology) {
    let w = usize::from(t.k() / 2);
    let peer = |node: &Node, port: usize| t.node(node.ports[port].peer);
    for edge in t.edges() {
        let pod = edge.pod.unwrap();
        for slot in 0..w {
            let host = peer(edge, slot);
            assert_eq!(host.name, format!("h-p{pod}-e{}-h{slot}", edge.index));
            assert_eq!(edge.ports[slot].direction, PortDirection::Down);
            assert_eq!(host.ports[0].peer, edge.id);
            assert_eq!(
                host.ports[0].peer_port,
                PortIndex(u16::try_from(slot).unwrap())
            );
        }
        for j in 0..w {
            assert_eq!(peer(edge, w + j).name, format!("a-p{pod}-{j}"));
            assert_eq!(edge.ports[w + j].direction, PortDirection::Up);
        }
    }
    for agg in t.aggregations() {
        let pod = agg.pod.unwrap();
        for e in 0..w {
            assert_eq!(peer(agg, e).name, format!("e-p{pod}-{e}"));
            assert_eq!(agg.ports[e].direction, PortDirection::Down);
        }
        for j in 0..w {
            let core = usize::from(agg.index) * w + j;
            assert_eq!(peer(agg, w + j).name, format!("c-{core}"));
            assert_eq!(agg.ports[w + j].direction, PortDirection::Up);
        }
    }
    for core in t.cores() {
        for pod in 0..2 * w {
            let agg = usize::from(core.index) / w;
            assert_eq!(peer(core, pod).name, format!("a-p{pod}-{agg}"));
            assert_eq!(core.ports[pod].direction, PortDirection::Down);
        }
    }
}

#[test]
fn fat_tree_port_numbering_contract() {
    for k in [4, 6, 8, 16] {
        check_fat_tree_port_contract(&fat_tree(k));
    }
}

#[test]
fn leaf_spine_port_numbering_contract() {
    for k in [4, 6, 8] {
        let t = leaf_spine(k);
        let w = usize::from(k / 2);
        for leaf in t.edges() {
            assert_eq!(leaf.name, format!("leaf-{}", leaf.index));
            assert_eq!(leaf.pod, Some(0));
            for slot in 0..w {
                let host = t.node(leaf.ports[slot].peer);
                assert_eq!(host.name, format!("h-l{}-h{slot}", leaf.index));
            }
            for s in 0..w {
                assert_eq!(t.node(leaf.ports[w + s].peer).name, format!("spine-{s}"));
            }
        }
        for spine in t.cores() {
            assert_eq!(spine.pod, None);
            for l in 0..usize::from(k) {
                assert_eq!(t.node(spine.ports[l].peer).name, format!("leaf-{l}"));
            }
        }
    }
}

#[test]
fn names_ids_and_addresses_examples() {
    let t = fat_tree(4);
    let names: Vec<&str> = t.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names[..5],
        [
            "h-p0-e0-h0",
            "h-p0-e0-h1",
            "h-p0-e1-h0",
            "h-p0-e1-h1",
            "h-p1-e0-h0"
        ]
    );
    assert_eq!(names[16..19], ["e-p0-0", "e-p0-1", "e-p1-0"]);
    assert_eq!(names[24..27], ["a-p0-0", "a-p0-1", "a-p1-0"]);
    assert_eq!(names[32..], ["c-0", "c-1", "c-2", "c-3"]);

    let h = t.node(by_name(&t, "h-p1-e1-h1"));
    assert_eq!((h.pod, h.index), (Some(1), 3));
    assert_eq!(h.loopback, Ipv4Addr::new(10, 1, 1, 3));
    assert_eq!(h.ports[0].address, Ipv4Addr::new(10, 1, 1, 3));
    assert_eq!(h.ports[0].prefix_len, 31);
    let edge = t.node(by_name(&t, "e-p1-1"));
    assert_eq!(edge.ports[1].address, Ipv4Addr::new(10, 1, 1, 2));
    assert_eq!(t.edge_prefix(edge.id), (Ipv4Addr::new(10, 1, 1, 0), 24));
    // Edges are switches 0.., so e-p1-1 is switch 3.
    assert_eq!(edge.loopback, Ipv4Addr::new(10, 255, 0, 3));
    assert_eq!(
        t.node(by_name(&t, "c-3")).loopback,
        Ipv4Addr::new(10, 255, 0, 19)
    );
    // The first switch link is e-p0-0 – a-p0-0; the last is a-p3-1 – c-3 (number 31).
    let first = t.node(by_name(&t, "e-p0-0"));
    assert_eq!(first.ports[2].address, Ipv4Addr::new(100, 64, 0, 0));
    assert_eq!(first.ports[2].ifname, "p2");
    let core = t.node(by_name(&t, "c-3"));
    assert_eq!(core.ports[3].address, Ipv4Addr::new(100, 64, 0, 63));

    let t = leaf_spine(8);
    let host = t.node(by_name(&t, "h-l3-h2"));
    assert_eq!(host.loopback, Ipv4Addr::new(10, 0, 3, 5));
    assert_eq!(host.pod, Some(0));
    assert_eq!(
        t.node(by_name(&t, "spine-1")).loopback,
        Ipv4Addr::new(10, 255, 0, 9)
    );
}

/// Symmetry, link ends, address pairing and uniqueness, for one topology. (Sorting rather than
/// hashing keeps this fast enough in debug builds for k = 64.)
fn check_structure(t: &Topology) {
    let mut addresses = Vec::new();
    let mut names: Vec<&str> = Vec::with_capacity(t.nodes().len());
    for node in t.nodes() {
        names.push(&node.name);
        assert_eq!(t.role(node.id), node.role);
        if node.role.is_switch() {
            addresses.push((u32::from(node.loopback), node.id));
        }
        for (position, port) in node.ports.iter().enumerate() {
            assert_eq!(port.index.index(), position);
            assert_eq!(port.ifname, format!("p{position}"));
            let (peer, peer_port) = t.neighbor(node.id, port.index);
            assert_eq!(t.neighbor(peer, peer_port), (node.id, port.index));
            let link = t.link(port.link);
            assert!(link.a == (node.id, port.index) || link.b == (node.id, port.index));
            addresses.push((u32::from(port.address), node.id));
            assert_eq!(port.prefix_len, 31);
        }
    }
    names.sort_unstable();
    assert!(
        names.windows(2).all(|pair| pair[0] != pair[1]),
        "names are unique"
    );
    // Every address is in 10.0.0.0/8 or 100.64.0.0/10, and none is used twice.
    let mut seen = vec![0_u64; (1 << 24 | 1 << 22) / 64];
    for &(address, _) in &addresses {
        let bit = match address >> 24 {
            10 => address & 0xff_ffff,
            100 if address >> 22 == u32::from(Ipv4Addr::new(100, 64, 0, 0)) >> 22 => {
                1 << 24 | address & 0x3f_ffff
            }
            _ => panic!("{} is outside the plan", Ipv4Addr::from(address)),
        } as usize;
        assert_eq!(
            seen[bit / 64] >> (bit % 64) & 1,
            0,
            "{} is used twice",
            Ipv4Addr::from(address)
        );
        seen[bit / 64] |= 1 << (bit % 64);
    }
    for (position, link) in t.links().iter().enumerate() {
        assert_eq!(link.id.index(), position);
        let (lower, upper) = (t.port(link.a.0, link.a.1), t.port(link.b.0, link.b.1));
        assert!(
            t.role(link.a.0) < t.role(link.b.0),
            "a must be the lower tier"
        );
        assert_eq!(lower.direction, PortDirection::Up);
        assert_eq!(upper.direction, PortDirection::Down);
        let (lower, upper) = (u32::from(lower.address), u32::from(upper.address));
        assert_eq!(lower >> 1, upper >> 1, "both ends share a /31");
        if t.role(link.a.0) == Role::Host {
            assert_eq!(upper % 2, 0, "the edge side of a host link is even");
        } else {
            assert_eq!(lower % 2, 0, "the lower end of a switch link is even");
            assert_eq!(lower >> 22, u32::from(Ipv4Addr::new(100, 64, 0, 0)) >> 22);
        }
    }
    for host in t.hosts() {
        let edge = t.host_edge(host.id);
        let (prefix, len) = t.edge_prefix(edge);
        assert_eq!(len, 24);
        assert_eq!(u32::from(host.loopback) >> 8, u32::from(prefix) >> 8);
        assert_eq!(host.ports[0].address, host.loopback);
        assert_eq!(t.node(edge).pod, host.pod);
    }
    for &(address, owner) in &addresses {
        let address = Ipv4Addr::from(address);
        assert_eq!(t.node_by_addr(address), Some(owner), "{address}");
    }
}

#[test]
fn fat_tree_structure_for_every_even_k() {
    for k in even_radixes() {
        check_structure(&fat_tree(k));
    }
}

#[test]
fn leaf_spine_structure_for_every_even_k() {
    for k in even_radixes() {
        check_structure(&leaf_spine(k));
    }
}

#[test]
fn unassigned_addresses_have_no_owner() {
    let t = fat_tree(4);
    for address in [
        Ipv4Addr::new(10, 4, 0, 1),
        Ipv4Addr::new(10, 0, 2, 1),
        Ipv4Addr::new(10, 0, 0, 4),
        Ipv4Addr::new(10, 255, 0, 20),
        Ipv4Addr::new(100, 64, 0, 64),
        Ipv4Addr::new(100, 63, 255, 255),
        Ipv4Addr::new(192, 168, 1, 1),
    ] {
        assert_eq!(t.node_by_addr(address), None, "{address}");
    }
}

// ---------------------------------------------------------------------------------------------
// Destination keys

fn check_dest_keys(t: &Topology) {
    let edge_position: HashMap<NodeId, u32> = t
        .edges()
        .iter()
        .zip(0..)
        .map(|(edge, position)| (edge.id, position))
        .collect();
    for switch in t.switches() {
        let count = t.dest_key_count(switch.id);
        let mut keys_by_edge: HashMap<NodeId, BTreeSet<Option<DestKey>>> = HashMap::new();
        let mut keys_by_pod: HashMap<Option<u16>, BTreeSet<Option<DestKey>>> = HashMap::new();
        for host in t.hosts() {
            let key = t.dest_key(switch.id, host.loopback);
            assert_eq!(key, t.dest_key_for_host(switch.id, host.id));
            assert_eq!(key.is_some(), t.is_northbound(switch.id, host.id));
            let dst_edge = t.host_edge(host.id);
            match switch.role {
                Role::Edge => {
                    let expected =
                        (dst_edge != switch.id).then(|| DestKey(edge_position[&dst_edge]));
                    assert_eq!(key, expected);
                }
                Role::Aggregation => {
                    let expected =
                        (host.pod != switch.pod).then(|| DestKey(u32::from(host.pod.unwrap())));
                    assert_eq!(key, expected);
                }
                Role::Core | Role::Host => assert_eq!(key, None),
            }
            if let Some(key) = key {
                assert!(key.0 < count);
            }
            keys_by_edge.entry(dst_edge).or_default().insert(key);
            keys_by_pod.entry(host.pod).or_default().insert(key);
        }
        // Consolidation: one key per destination edge at edges, per pod at aggregations.
        let per_group: Vec<usize> = match switch.role {
            Role::Edge => keys_by_edge.values().map(BTreeSet::len).collect(),
            _ => keys_by_pod.values().map(BTreeSet::len).collect(),
        };
        assert!(per_group.iter().all(|&n| n == 1));
        let distinct: BTreeSet<_> = keys_by_edge.values().flatten().flatten().collect();
        let expected_distinct = match switch.role {
            Role::Edge => t.edges().len() - 1,
            Role::Aggregation => usize::from(t.num_pods()) - 1,
            _ => 0,
        };
        assert_eq!(distinct.len(), expected_distinct, "{}", switch.name);
        assert!(!t.is_northbound(switch.id, t.hosts()[0].id) || switch.role != Role::Core);
    }
}

#[test]
fn dest_keys_consolidate_per_destination_edge_and_pod() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(6)] {
        check_dest_keys(&t);
    }
}

#[test]
fn dest_key_counts_and_non_host_destinations() {
    let t = fat_tree(8);
    let edge = by_name(&t, "e-p2-1");
    let agg = by_name(&t, "a-p2-1");
    let core = by_name(&t, "c-5");
    let host = by_name(&t, "h-p0-e0-h0");
    assert_eq!(t.dest_key_count(edge), 32);
    assert_eq!(t.dest_key_count(agg), 8);
    assert_eq!(t.dest_key_count(core), 0);
    assert_eq!(t.dest_key_count(host), 0);
    assert_eq!(t.dest_key_count(NodeId(1_000_000)), 0);
    // Loopbacks, link addresses and unassigned addresses are not destinations.
    for dst in [
        t.node(core).loopback,
        t.node(agg).ports[0].address,
        t.node(by_name(&t, "e-p0-0")).ports[0].address,
        Ipv4Addr::new(8, 8, 8, 8),
    ] {
        assert_eq!(t.dest_key(edge, dst), None, "{dst}");
    }
    assert_eq!(
        t.dest_key(edge, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        Some(DestKey(7 * 4 + 3))
    );
    assert_eq!(
        t.dest_key(agg, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        Some(DestKey(7))
    );
    assert_eq!(
        t.dest_key(host, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        None
    );
    assert!(t.is_northbound(host, by_name(&t, "h-p0-e0-h1")));
    assert!(!t.is_northbound(host, host));

    let t = leaf_spine(8);
    assert_eq!(t.dest_key_count(by_name(&t, "leaf-2")), 8);
    assert_eq!(t.dest_key_count(by_name(&t, "spine-2")), 0);
    let dst = t.node(by_name(&t, "h-l5-h1")).loopback;
    assert_eq!(t.dest_key(by_name(&t, "leaf-2"), dst), Some(DestKey(5)));
    assert_eq!(t.dest_key(by_name(&t, "leaf-5"), dst), None);
}

// ---------------------------------------------------------------------------------------------
// Shortest paths

fn check_shortest_paths(t: &Topology) {
    let w = usize::from(t.k() / 2);
    for src in t.hosts() {
        for dst in t.hosts() {
            let paths = t.shortest_paths(src.id, dst.id);
            let (src_edge, dst_edge) = (t.host_edge(src.id), t.host_edge(dst.id));
            let (count, hops) = if src.id == dst.id {
                (1, 0)
            } else if src_edge == dst_edge {
                (1, 2)
            } else if src.pod == dst.pod {
                (w, 4)
            } else {
                (w * w, 6)
            };
            assert_eq!(paths.len(), count, "{} -> {}", src.name, dst.name);
            assert_eq!(t.hop_count(src.id, dst.id), u32::try_from(hops).unwrap());
            let distinct: HashSet<_> = paths.iter().collect();
            assert_eq!(distinct.len(), count);
            for path in &paths {
                assert_eq!(path.len(), hops + 1);
                assert_eq!((path[0], path[hops]), (src.id, dst.id));
                assert!(path
                    .windows(2)
                    .all(|hop| t.link_between(hop[0], hop[1]).is_some()));
                let unique: HashSet<_> = path.iter().collect();
                assert_eq!(unique.len(), path.len(), "no node repeats");
                // Up then down: roles rise to the middle and fall after it.
                let roles: Vec<Role> = path.iter().map(|&n| t.role(n)).collect();
                assert!(roles[..=hops / 2].windows(2).all(|r| r[0] < r[1]));
                assert!(roles[hops / 2..].windows(2).all(|r| r[0] > r[1]));
            }
        }
    }
}

#[test]
fn shortest_paths_count_length_and_validity() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(6)] {
        check_shortest_paths(&t);
    }
}

// ---------------------------------------------------------------------------------------------
// Failures

/// Every (edge or aggregation switch, key) mask, for comparing whole-network effects.
fn all_masks(t: &Topology, failures: &FailedLinks) -> HashMap<(NodeId, DestKey), u64> {
    let mut masks = HashMap::new();
    for switch in t.switches() {
        for key in 0..t.dest_key_count(switch.id) {
            let key = DestKey(key);
            masks.insert((switch.id, key), t.valid_up_mask(failures, switch.id, key));
        }
    }
    masks
}

#[test]
fn without_failures_every_up_port_is_valid() {
    for t in [fat_tree(4), fat_tree(8), leaf_spine(4), leaf_spine(8)] {
        let w = usize::from(t.k() / 2);
        let none = FailedLinks::new();
        for ((switch, key), mask) in all_masks(&t, &none) {
            let node = t.node(switch);
            let own = match node.role {
                Role::Edge => t.edges()[key.0 as usize].id == switch,
                _ => node.pod == Some(u16::try_from(key.0).unwrap()),
            };
            assert_eq!(
                mask,
                if own { 0 } else { all_ones(w) },
                "{} {key:?}",
                node.name
            );
            let ports = t.valid_up_ports(&none, switch, key);
            assert_eq!(ports.len(), if own { 0 } else { w });
        }
        // Out-of-range keys, cores and hosts have no valid up port.
        let edge = t.edges()[0].id;
        assert_eq!(
            t.valid_up_mask(&none, edge, DestKey(t.dest_key_count(edge))),
            0
        );
        assert_eq!(t.valid_up_mask(&none, t.cores()[0].id, DestKey(0)), 0);
        assert_eq!(t.valid_up_mask(&none, t.hosts()[0].id, DestKey(0)), 0);
    }
}

/// Asserts that exactly the listed (switch, key) masks changed, to the listed values.
fn assert_mask_changes(t: &Topology, failures: &FailedLinks, expected: &[(&str, u32, u64)]) {
    let before = all_masks(t, &FailedLinks::new());
    let after = all_masks(t, failures);
    let changed: BTreeSet<(String, u32, u64)> = after
        .iter()
        .filter(|(entry, mask)| before[entry] != **mask)
        .map(|((switch, key), mask)| (t.node(*switch).name.clone(), key.0, *mask))
        .collect();
    let expected: BTreeSet<(String, u32, u64)> = expected
        .iter()
        .map(|&(name, key, mask)| (name.to_owned(), key, mask))
        .collect();
    assert_eq!(changed, expected);
}

#[test]
fn one_agg_core_failure_removes_exactly_the_right_ports() {
    let t = fat_tree(4);
    // a-p0-0's up port 0 goes to c-0; c-0 is aggregation 0's first core in every pod.
    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    assert_mask_changes(
        &t,
        &failures,
        &[
            // a-p0-0 reaches no pod through c-0 any more.
            ("a-p0-0", 1, 0b10),
            ("a-p0-0", 2, 0b10),
            ("a-p0-0", 3, 0b10),
            // Nobody reaches pod 0 through c-0.
            ("a-p1-0", 0, 0b10),
            ("a-p2-0", 0, 0b10),
            ("a-p3-0", 0, 0b10),
        ],
    );
    // Edges are unaffected: c-1 still joins every aggregation 0.
    let edge = by_name(&t, "e-p0-0");
    assert_eq!(
        t.valid_up_ports(&failures, edge, DestKey(4)),
        [PortIndex(2), PortIndex(3)]
    );
    let agg = by_name(&t, "a-p0-0");
    assert_eq!(t.valid_up_ports(&failures, agg, DestKey(2)), [PortIndex(3)]);
}

#[test]
fn both_cores_of_an_aggregation_failing_moves_edges_off_it() {
    let t = fat_tree(4);
    let failures = failed(&t, &[("a-p0-0", "c-0"), ("a-p0-0", "c-1")]);
    let mut expected = Vec::new();
    for pod in 1..4 {
        expected.push(("a-p0-0", pod, 0));
        // Edges of pod 0 can no longer leave the pod through a-p0-0 …
        for edge in 2 * pod..2 * pod + 2 {
            expected.push(("e-p0-0", edge, 0b10));
            expected.push(("e-p0-1", edge, 0b10));
        }
    }
    // … and no edge elsewhere can enter pod 0 through aggregation 0.
    let names: Vec<String> = (1..4)
        .flat_map(|pod| {
            [
                format!("e-p{pod}-0"),
                format!("e-p{pod}-1"),
                format!("a-p{pod}-0"),
            ]
        })
        .collect();
    for name in &names {
        if name.starts_with('a') {
            expected.push((name.as_str(), 0, 0));
        } else {
            expected.push((name.as_str(), 0, 0b10));
            expected.push((name.as_str(), 1, 0b10));
        }
    }
    assert_mask_changes(&t, &failures, &expected);
}

#[test]
fn edge_agg_failure_removes_exactly_the_right_ports() {
    let t = fat_tree(4);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let mut expected = Vec::new();
    // e-p0-0 (edge number 0) loses up port 0 for every key …
    for key in 1..8 {
        expected.push(("e-p0-0".to_owned(), key, 0b10));
    }
    // … and every other edge loses aggregation 0 for key 0 (a-p?-0 leads to a-p0-0, which no
    // longer reaches e-p0-0).
    for edge in t.edges().iter().skip(1) {
        expected.push((edge.name.clone(), 0, 0b10));
    }
    let expected: Vec<(&str, u32, u64)> = expected
        .iter()
        .map(|(n, k, m)| (n.as_str(), *k, *m))
        .collect();
    assert_mask_changes(&t, &failures, &expected);
}

#[test]
fn leaf_spine_failure_removes_the_spine_for_that_leaf() {
    let t = leaf_spine(4);
    let failures = failed(&t, &[("leaf-1", "spine-0")]);
    let mut expected = vec![
        ("leaf-1", 0, 0b10),
        ("leaf-1", 2, 0b10),
        ("leaf-1", 3, 0b10),
    ];
    expected.extend([
        ("leaf-0", 1, 0b10),
        ("leaf-2", 1, 0b10),
        ("leaf-3", 1, 0b10),
    ]);
    assert_mask_changes(&t, &failures, &expected);
}

/// The up positions at `switch` through which some path leaves, towards `next` on the path.
fn used_positions<'a>(
    t: &Topology,
    switch: NodeId,
    paths: impl IntoIterator<Item = &'a Vec<NodeId>>,
) -> u64 {
    let up = t.up_ports(switch);
    let mut mask = 0;
    for path in paths {
        if let Some(at) = path.iter().position(|&n| n == switch) {
            if let Some(position) = up.iter().position(|p| p.peer == path[at + 1]) {
                mask |= 1 << position;
            }
        }
    }
    mask
}

/// valid_up_mask agrees with valid_paths: at the source edge, a port is valid iff some valid
/// path leaves through it; at an aggregation switch on the way, likewise as soon as the rest of
/// the way down (which the per-pod key cannot see) is alive.
fn check_masks_match_paths(t: &Topology, failures: &FailedLinks) {
    let alive = |a: NodeId, b: NodeId| failures.is_alive(t.link_between(a, b).unwrap());
    for src in t.hosts() {
        for dst in t.hosts() {
            let (src_edge, dst_edge) = (t.host_edge(src.id), t.host_edge(dst.id));
            if src_edge == dst_edge || !alive(src.id, src_edge) || !alive(dst.id, dst_edge) {
                continue;
            }
            let paths = t.valid_paths(failures, src.id, dst.id);
            let key = t.dest_key_for_host(src_edge, dst.id).unwrap();
            let mask = t.valid_up_mask(failures, src_edge, key);
            assert_eq!(
                mask,
                used_positions(t, src_edge, &paths),
                "{} -> {}",
                src.name,
                dst.name
            );
            let ports: Vec<PortIndex> = t
                .up_ports(src_edge)
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, p)| p.index)
                .collect();
            assert_eq!(t.valid_up_ports(failures, src_edge, key), ports);
            if src.pod == dst.pod || t.aggregations().is_empty() {
                continue;
            }
            for (position, up) in t.up_ports(src_edge).iter().enumerate() {
                let agg = up.peer;
                let dst_agg = t.up_ports(dst_edge)[position].peer;
                if !alive(src_edge, agg) || !alive(dst_agg, dst_edge) {
                    continue;
                }
                let key = t.dest_key_for_host(agg, dst.id).unwrap();
                let through_agg = paths.iter().filter(|path| path[2] == agg);
                assert_eq!(
                    t.valid_up_mask(failures, agg, key),
                    used_positions(t, agg, through_agg),
                    "{} -> {} via {}",
                    src.name,
                    dst.name,
                    t.node(agg).name
                );
            }
        }
    }
}

fn failure_sets(topology: &Topology, max: usize) -> impl Strategy<Value = FailedLinks> {
    let links: Vec<LinkId> = topology.links().iter().map(|l| l.id).collect();
    proptest::sample::subsequence(links, 0..=max).prop_map(FailedLinks::from_iter)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn masks_match_valid_paths_fat_tree_4(failures in failure_sets(&fat_tree(4), 24)) {
        check_masks_match_paths(&fat_tree(4), &failures);
    }

    #[test]
    fn masks_match_valid_paths_fat_tree_6(failures in failure_sets(&fat_tree(6), 60)) {
        check_masks_match_paths(&fat_tree(6), &failures);
    }

    #[test]
    fn masks_match_valid_paths_leaf_spine(
        failures in failure_sets(&leaf_spine(6), 20),
    ) {
        check_masks_match_paths(&leaf_spine(6), &failures);
    }
}

// ---------------------------------------------------------------------------------------------
// ρ_max

/// Pairs every host with the host at the same (edge, slot) of pod `pod ^ 1`.
fn pod_swap(t: &Topology) -> TrafficMatrix {
    let pairs: Vec<(NodeId, NodeId)> = t
        .hosts()
        .iter()
        .map(|h| {
            let name = h.name.replacen(
                &format!("h-p{}-", h.pod.unwrap()),
                &format!("h-p{}-", h.pod.unwrap() ^ 1),
                1,
            );
            (h.id, by_name(t, &name))
        })
        .collect();
    TrafficMatrix::permutation(&pairs)
}

fn permutation_strategy(t: &Topology) -> impl Strategy<Value = TrafficMatrix> {
    let hosts: Vec<NodeId> = t.hosts().iter().map(|h| h.id).collect();
    Just(hosts.clone()).prop_shuffle().prop_map(move |dsts| {
        let pairs: Vec<_> = hosts.iter().copied().zip(dsts).collect();
        TrafficMatrix::permutation(&pairs)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn rho_is_exactly_one_for_permutations_without_failures(
        (k, leaf, matrix) in (prop_oneof![Just(4_u16), Just(6), Just(8)], any::<bool>())
            .prop_flat_map(|(k, leaf)| {
                let t = if leaf { leaf_spine(k) } else { fat_tree(k) };
                (Just(k), Just(leaf), permutation_strategy(&t))
            }),
    ) {
        let t = if leaf { leaf_spine(k) } else { fat_tree(k) };
        let none = FailedLinks::new();
        prop_assert_eq!(t.rho_max(&none, &matrix).unwrap(), 1.0);
        let loads = t.link_loads(&none, &matrix).unwrap();
        prop_assert!(loads.iter().all(|l| l.up <= 1.0 && l.down <= 1.0));
    }
}

#[test]
fn rho_hand_computed_edge_agg_failure_k4() {
    // Every host of pod 0 sends to its twin in pod 1 and back (likewise pods 2 and 3). With
    // e-p0-0 – a-p0-0 failed, e-p0-0 sends both its flows through a-p0-1 (load 2), and every
    // edge of pod 1 sends the flows for e-p0-0 through a-p1-1 only (load 2): ρ = 1/2.
    let t = fat_tree(4);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let matrix = pod_swap(&t);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 0.5);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    let load = |a, b| loads[link(&t, a, b).index()];
    assert_eq!(load("e-p0-0", "a-p0-1").up, 2.0);
    assert_eq!(load("e-p1-0", "a-p1-1").up, 2.0);
    assert_eq!(load("e-p1-0", "a-p1-0").up, 0.0);
    // a-p0-1 carries 2 (from e-p0-0) + 1 (half of e-p0-1's): 1.5 per core.
    assert_eq!(load("a-p0-1", "c-2").up, 1.5);
    assert_eq!(load("a-p0-0", "c-0").up, 0.5);
    // Down into e-p0-0 only from a-p0-1.
    assert_eq!(load("e-p0-0", "a-p0-1").down, 2.0);
    assert_eq!(load("h-p0-e0-h0", "e-p0-0").down, 1.0);
    // Without the failure everything is at exactly line rate.
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 1.0);
}

#[test]
fn rho_hand_computed_agg_core_failure_k4() {
    // a-p0-0 – c-0 failed: e-p0-0 and e-p0-1 each still send half of their 2 units through
    // a-p0-0 (c-1 is valid), which can only use c-1: load 2 on a-p0-0 → c-1, ρ = 1/2.
    let t = fat_tree(4);
    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    let matrix = pod_swap(&t);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    assert_eq!(loads[link(&t, "a-p0-0", "c-1").index()].up, 2.0);
    assert_eq!(loads[link(&t, "a-p0-0", "c-0").index()].up, 0.0);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 0.5);
}

#[test]
fn rho_hand_computed_edge_agg_failure_k6() {
    // k = 6, pods swapped as above, e-p0-0 – a-p0-0 failed. e-p0-0 splits its 3 units over 2
    // aggregations (1.5 each); e-p1-0 sends the 3 units for e-p0-0 through a-p1-1 and a-p1-2
    // (1.5 each). a-p1-1 gets 1.5 + 1 + 1 = 3.5 for pod 0, i.e. 7/6 per core. Max load 1.5:
    // ρ = 2/3.
    let t = fat_tree(6);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let matrix = pod_swap(&t);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    let load = |a, b| loads[link(&t, a, b).index()];
    assert_eq!(load("e-p0-0", "a-p0-1").up, 1.5);
    assert_eq!(load("e-p1-0", "a-p1-2").up, 1.5);
    assert_eq!(load("a-p1-1", "c-3").up, 7.0 / 6.0);
    assert_eq!(load("a-p0-1", "c-4").up, 7.0 / 6.0);
    assert_eq!(load("e-p0-1", "a-p0-1").up, 1.0);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 1.0 / 1.5);
}

#[test]
fn rho_counts_weights_and_host_links() {
    let t = fat_tree(4);
    let (a, b, c) = (
        by_name(&t, "h-p0-e0-h0"),
        by_name(&t, "h-p1-e0-h0"),
        by_name(&t, "h-p2-e0-h0"),
    );
    let mut matrix = TrafficMatrix::new();
    matrix.push(a, b, 0.5);
    matrix.push(a, c, 0.5);
    matrix.push(a, a, 7.0); // to itself: no load
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 1.0);
    matrix.push(a, b, 1.0);
    // Host link of a carries 2.
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 0.5);
    // Incast: three flows into b.
    let incast = TrafficMatrix::permutation(&[(a, b), (c, b), (by_name(&t, "h-p3-e1-h1"), b)]);
    assert_eq!(t.rho_max(&FailedLinks::new(), &incast).unwrap(), 1.0 / 3.0);
    assert_eq!(
        t.rho_max(&FailedLinks::new(), &TrafficMatrix::new())
            .unwrap(),
        1.0
    );
}

#[test]
fn rho_reports_disconnected_and_invalid_flows() {
    let t = fat_tree(4);
    let (src, dst) = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p1-e0-h0"));
    let matrix = TrafficMatrix::permutation(&[(dst, src), (src, dst)]);
    let cut = failed(&t, &[("e-p0-0", "a-p0-0"), ("e-p0-0", "a-p0-1")]);
    let error = t.rho_max(&cut, &matrix).unwrap_err();
    assert!(
        matches!(error, TopologyError::NoValidPath { src: s, dst: d } if (s, d) == (dst, src)),
        "{error}"
    );
    // A failed host link disconnects its host too.
    let cut = failed(&t, &[("h-p1-e0-h0", "e-p1-0")]);
    assert!(matches!(
        t.rho_max(&cut, &matrix),
        Err(TopologyError::NoValidPath { .. })
    ));
    // Cores 0 and 1 both lost towards pod 1: aggregation 0 of pod 0 cannot reach it, but
    // aggregation 1 can, so the flow survives.
    let partial = failed(&t, &[("a-p1-0", "c-0"), ("a-p1-0", "c-1")]);
    assert!(t.rho_max(&partial, &matrix).is_ok());

    let edge = by_name(&t, "e-p0-0");
    let bad_role = TrafficMatrix::permutation(&[(src, edge)]);
    assert!(matches!(
        t.rho_max(&FailedLinks::new(), &bad_role),
        Err(TopologyError::UnexpectedRole { node, expected: Role::Host, found: Role::Edge }) if node == edge
    ));
    let unknown = TrafficMatrix::permutation(&[(src, NodeId(999))]);
    assert!(matches!(
        t.rho_max(&FailedLinks::new(), &unknown),
        Err(TopologyError::UnknownNode { .. })
    ));
    for weight in [-1.0, f64::NAN, f64::INFINITY] {
        let mut matrix = TrafficMatrix::new();
        matrix.push(src, dst, weight);
        assert!(matches!(
            t.rho_max(&FailedLinks::new(), &matrix),
            Err(TopologyError::InvalidWeight { .. })
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// JSON

#[test]
fn json_round_trip() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(8)] {
        assert_eq!(Topology::from_json(&t.to_json()).unwrap(), t);
        assert_eq!(Topology::from_json(&t.to_json_pretty()).unwrap(), t);
        let via_serde: Topology = serde_json::from_str(&t.to_json()).unwrap();
        assert_eq!(via_serde, t);
        // The cached dimensions are rebuilt: queries work on the copy.
        assert_eq!(via_serde.hosts().len(), t.hosts().len());
    }
    let t = fat_tree(4);
    let json: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(json["kind"], serde_json::json!({ "fat_tree": { "k": 4 } }));
    assert_eq!(json["nodes"][0]["loopback"], "10.0.0.1");
    assert_eq!(json["nodes"][16]["role"], "edge");

    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    let text = serde_json::to_string(&failures).unwrap();
    assert_eq!(
        serde_json::from_str::<FailedLinks>(&text).unwrap(),
        failures
    );
    let matrix = pod_swap(&t);
    let text = serde_json::to_string(&matrix).unwrap();
    assert_eq!(
        serde_json::from_str::<TrafficMatrix>(&text).unwrap(),
        matrix
    );
}

/// Applies `edit` to the JSON of a k = 4 fat tree and parses the result.
fn corrupted(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Topology, TopologyError> {
    let mut json: serde_json::Value = serde_json::from_str(&fat_tree(4).to_json()).unwrap();
    edit(&mut json);
    Topology::from_json(&json.to_string())
}

#[test]
fn corrupted_json_is_rejected() {
    // A link end pointing at a port that does not exist.
    let error = corrupted(|j| j["links"][20]["b"][1] = 99.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink {
                link: LinkId(20),
                port: PortIndex(99),
                ..
            }
        ),
        "{error}"
    );
    // A link end pointing at a node that does not exist.
    let error = corrupted(|j| j["links"][3]["a"][0] = 5000.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink {
                link: LinkId(3),
                ..
            }
        ),
        "{error}"
    );
    // Two links swapped between ports: every link end is attached, but a port names the
    // wrong link.
    let error = corrupted(|j| {
        let ports = &mut j["nodes"][16]["ports"];
        let link0 = ports[0]["link"].clone();
        ports[0]["link"] = ports[1]["link"].clone();
        ports[1]["link"] = link0;
    })
    .unwrap_err();
    assert!(
        matches!(error, TopologyError::DanglingLink { .. }),
        "{error}"
    );
    // A peer that does not point back.
    let error = corrupted(|j| j["nodes"][16]["ports"][0]["peer_port"] = 1.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink { .. } | TopologyError::AsymmetricPeer { .. }
        ),
        "{error}"
    );
    // Ids that are not positions.
    let error = corrupted(|j| j["nodes"][7]["id"] = 8.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::NodeIdMismatch { position: 7, .. }),
        "{error}"
    );
    let error = corrupted(|j| j["links"][7]["id"] = 8.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::LinkIdMismatch { position: 7, .. }),
        "{error}"
    );
    // Consistent but not canonical: a changed address.
    let error = corrupted(|j| j["nodes"][33]["loopback"] = "10.255.9.9".into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::NonCanonical { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("loopback"), "{error}");
    // Wrong counts, wrong radix, not a topology at all.
    let error = corrupted(|j| {
        j["nodes"].as_array_mut().unwrap().pop();
    })
    .unwrap_err();
    assert!(
        matches!(error, TopologyError::CountMismatch { what: "nodes", .. }),
        "{error}"
    );
    let error = corrupted(|j| j["kind"]["fat_tree"]["k"] = 5.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::OddOrOutOfRangeK { k: 5 }),
        "{error}"
    );
    let error = corrupted(|j| j["kind"]["fat_tree"]["k"] = 6.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::CountMismatch { .. }),
        "{error}"
    );
    assert!(matches!(
        Topology::from_json("{"),
        Err(TopologyError::Parse { .. })
    ));
    assert!(matches!(
        Topology::from_json(r#"{"kind":{"fat_tree":{"k":4}},"nodes":[],"links":[],"x":1}"#),
        Err(TopologyError::Parse { .. })
    ));
    // serde's own entry point validates too.
    let mut json: serde_json::Value = serde_json::from_str(&fat_tree(4).to_json()).unwrap();
    json["links"][20]["b"][1] = 99.into();
    assert!(serde_json::from_value::<Topology>(json).is_err());
}

// ---------------------------------------------------------------------------------------------
// Timing

#[test]
fn serialization_rounds_up() {
    let paper = LinkParams::paper();
    // 4 178 B = 33 424 bit at 800 Gb/s = 41.78 ns.
    assert_eq!(paper.serialization_ps(4096 + 62 + 20), 41_780);
    // 84 B = 672 bit = 0.84 ns.
    assert_eq!(paper.serialization_ps(64 + 20), 840);
    assert_eq!(paper.serialization_ps(0), 0);
    // 1 B at 3 Gb/s = 8/3 ns = 2 666.67 ps, rounded up.
    let slow = LinkParams {
        rate_bps: 3_000_000_000,
        ..paper
    };
    assert_eq!(slow.serialization_ps(1), 2_667);
    assert_eq!(slow.serialization_ps(3), 8_000);
}

#[test]
fn cct_lower_bound_hand_computed() {
    // 115 000 ps per full frame, 25 000 ps per ACK, 1 000 ps propagation (see HAND_PARAMS).
    let params = crate::timing::HAND_PARAMS;
    let t = fat_tree(4);
    let bound = |flows: &[(NodeId, NodeId)], bytes| {
        t.cct_lower_bound_ps(
            &params,
            &BoundSystem::STORE_AND_FORWARD_AT_LINE_RATE,
            flows,
            bytes,
        )
    };
    let same_pod = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p0-e1-h0"));
    let other_pod = (by_name(&t, "h-p0-e0-h1"), by_name(&t, "h-p3-e1-h0"));
    // 250 B = 3 packets of 100, 100 and 50 B; the last frame is 65 B (65 000 ps).
    // Same pod, 4 hops: 2·115 000 (first two packets) + 65 000 (last packet) + 1 000
    // (propagation, hop 1) + 3·(65 000 + 1 000) (hops 2–4) + 4·(25 000 + 1 000) (ACK)
    // = 230 000 + 66 000 + 198 000 + 104 000 = 598 000.
    assert_eq!(bound(&[same_pod], 250), 598_000);
    // Between pods, 6 hops: 230 000 + 6·66 000 + 6·26 000 = 782 000; the bound is the max.
    assert_eq!(bound(&[same_pod, other_pod], 250), 782_000);
    // One packet under one edge (2 hops): 2·(65 000 + 1 000) + 2·26 000 = 184 000.
    let same_edge = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p0-e0-h1"));
    assert_eq!(bound(&[same_edge], 50), 184_000);
    assert_eq!(bound(&[same_edge], 0), 0);
    assert_eq!(bound(&[(same_edge.0, same_edge.0)], 250), 0);
    assert_eq!(bound(&[], 250), 0);
}

#[test]
fn cct_lower_bound_paper_worked_number() {
    // The numbers worked out in the `timing` module documentation.
    let t = fat_tree(12);
    let flow = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p11-e5-h5"));
    let bound = |send_rate| {
        let system = BoundSystem {
            send_rate,
            forwarding: Forwarding::StoreAndForward,
        };
        t.cct_lower_bound_ps(&LinkParams::paper(), &system, &[flow], 1 << 20)
    };
    assert_eq!(
        bound(SendRate::LINE),
        255 * 41_780 + 6 * (41_780 + 500_000) + 6 * (840 + 500_000)
    );
    assert_eq!(bound(SendRate::LINE), 16_909_620);
    assert_eq!(bound(SendRate::nearest(0.8)), 19_573_095);
}

#[test]
fn topology_kind_and_accessors() {
    let t = fat_tree(6);
    assert_eq!(t.kind(), TopologyKind::FatTree { k: 6 });
    assert_eq!(
        Topology::new(TopologyKind::LeafSpine { k: 6 }).unwrap(),
        leaf_spine(6)
    );
    let host = by_name(&t, "h-p2-e1-h2");
    assert_eq!(t.node(t.host_edge(host)).name, "e-p2-1");
    assert_eq!(t.get_node(NodeId(100_000)), None);
    assert_eq!(t.role(host), Role::Host);
    assert!(!Role::Host.is_switch() && Role::Core.is_switch());
}

#[test]
fn link_numbering_contract() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(6)] {
        let shape = t.shape();
        for host in t.hosts() {
            assert_eq!(shape.host_link(host.id), host.ports[0].link);
            assert_eq!(host.ports[0].link.index(), host.id.index());
        }
        for (number, edge) in (0..).zip(t.edges()) {
            for (up, port) in (0..).zip(t.up_ports(edge.id)) {
                assert_eq!(shape.edge_up_link(number, up), port.link, "{}", edge.name);
            }
        }
        for agg in t.aggregations() {
            let (pod, index) = (u32::from(agg.pod.unwrap()), u32::from(agg.index));
            for (up, port) in (0..).zip(t.up_ports(agg.id)) {
                assert_eq!(shape.agg_up_link(pod, index, up), port.link, "{}", agg.name);
            }
        }
        // Links are sorted by tier of their lower end.
        assert!(t
            .links()
            .windows(2)
            .all(|l| t.role(l[0].a.0) <= t.role(l[1].a.0)));
    }
}
