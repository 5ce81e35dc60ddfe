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

mod dragonfly;
mod dragonfly_topology;
mod multi_plane;
mod paths;
mod rho;
