//! The multi-plane contract of the crate documentation: ids, names, ports, links and
//! addresses of P disjoint planes that share the hosts, and the answers of the queries the
//! model uses.

use std::collections::BTreeSet;

use super::by_name;
use crate::{
    BoundSystem, DestKey, FailedLinks, LinkParams, PlaneKind, Role, Topology, TopologyError,
    TopologyKind, TrafficMatrix, MAX_PLANES,
};

fn multi(plane: PlaneKind, planes: u8, k: u16) -> Topology {
    Topology::new(TopologyKind::MultiPlane { plane, planes, k }).unwrap()
}

/// Counts: the hosts once, every switch and link once per plane, plus one host link per host
/// and plane; every host has one port per plane, up to the plane's edge at the host's slot.
#[test]
fn counts_ports_and_names() {
    for (plane, single) in [
        (PlaneKind::FatTree, Topology::fat_tree(4).unwrap()),
        (PlaneKind::LeafSpine, Topology::leaf_spine(4).unwrap()),
    ] {
        for planes in [2u8, 3] {
            let topology = multi(plane, planes, 4);
            let p = usize::from(planes);
            assert_eq!(topology.planes(), planes);
            assert_eq!(topology.hosts().len(), single.hosts().len());
            assert_eq!(topology.switches().len(), p * single.switches().len());
            assert_eq!(topology.edges().len(), p * single.edges().len());
            assert_eq!(topology.cores().len(), p * single.cores().len());
            assert_eq!(topology.links().len(), p * single.links().len());
            for (host, plain) in topology.hosts().iter().zip(single.hosts()) {
                assert_eq!(host.name, plain.name, "hosts keep their names");
                assert_eq!(host.ports.len(), p);
                for (index, port) in host.ports.iter().enumerate() {
                    let edge = topology.node(port.peer);
                    let plain_edge = single.node(plain.ports[0].peer);
                    assert_eq!(edge.role, Role::Edge);
                    assert_eq!(edge.name, format!("{}@{index}", plain_edge.name));
                    assert_eq!(topology.plane_of(edge.id), Some(index as u8));
                    assert_eq!(port.peer_port, plain.ports[0].peer_port, "same slot");
                    assert_eq!(topology.host_edge_in(host.id, index as u8), edge.id);
                }
            }
            for switch in topology.switches() {
                let (base, plane) = switch.name.rsplit_once('@').expect("a plane suffix");
                let plain = single.node(by_name(&single, base));
                assert_eq!(topology.plane_of(switch.id), Some(plane.parse().unwrap()));
                assert_eq!(
                    (switch.role, switch.pod, switch.index),
                    (plain.role, plain.pod, plain.index)
                );
                assert_eq!(switch.ports.len(), plain.ports.len());
            }
        }
    }
}

/// Disjoint planes: no link joins two switches of different planes, and every switch port of
/// plane i leads to a switch of plane i or to a host's port i.
#[test]
fn planes_are_disjoint() {
    let topology = multi(PlaneKind::FatTree, 3, 6);
    for link in topology.links() {
        let (a, b) = (link.a.0, link.b.0);
        let plane = topology.plane_of(b).expect("the upper end is a switch");
        match topology.plane_of(a) {
            Some(lower) => assert_eq!(lower, plane, "{link:?}"),
            None => assert_eq!(
                link.a.1 .0,
                u16::from(plane),
                "a host's port i is in plane i"
            ),
        }
    }
}

/// One plane is the plane itself, names and all; the JSON round trip keeps a multi-plane fabric;
/// planes out of range are refused.
#[test]
fn one_plane_is_the_plane_and_bad_counts_are_refused() {
    let one = multi(PlaneKind::FatTree, 1, 4);
    let plain = Topology::fat_tree(4).unwrap();
    assert_eq!(one.nodes(), plain.nodes());
    assert_eq!(one.links(), plain.links());
    let two = multi(PlaneKind::LeafSpine, 2, 6);
    assert_eq!(Topology::from_json(&two.to_json()).unwrap(), two);
    for planes in [0, MAX_PLANES + 1] {
        let refused = Topology::new(TopologyKind::MultiPlane {
            plane: PlaneKind::FatTree,
            planes,
            k: 4,
        });
        assert!(matches!(
            refused,
            Err(TopologyError::PlanesOutOfRange { .. })
        ));
    }
    // k = 64: 64 pods, so at most 4 planes fit the addressing plan.
    let refused = Topology::new(TopologyKind::MultiPlane {
        plane: PlaneKind::FatTree,
        planes: 5,
        k: 64,
    });
    assert!(matches!(
        refused,
        Err(TopologyError::PlanesOutOfRange { max: 4, .. })
    ));
}

/// Addresses are unique and invert: every port's and loopback's owner is its node.
#[test]
fn addresses_are_unique_and_invert() {
    let topology = multi(PlaneKind::FatTree, 2, 4);
    let mut seen = BTreeSet::new();
    for node in topology.nodes() {
        if node.role.is_switch() {
            assert!(seen.insert(node.loopback), "{}", node.name);
            assert_eq!(topology.node_by_addr(node.loopback), Some(node.id));
        }
        for port in &node.ports {
            assert!(seen.insert(port.address), "{} {}", node.name, port.ifname);
            assert_eq!(
                topology.node_by_addr(port.address),
                Some(node.id),
                "{}",
                node.name
            );
        }
    }
    let edge = by_name(&topology, "e-p1-0@1");
    let (prefix, len) = topology.edge_prefix(edge);
    assert_eq!(
        (prefix.octets(), len),
        ([10, 5, 0, 0], 24),
        "plane 1 · 4 pods + pod 1"
    );
}

/// Destination keys are per plane and dense; valid masks and paths stay in the switch's plane;
/// shortest paths from a host cross every plane, (k/2)² per plane between pods.
#[test]
fn keys_masks_and_paths_per_plane() {
    let topology = multi(PlaneKind::FatTree, 2, 4);
    let single = Topology::fat_tree(4).unwrap();
    let src = by_name(&topology, "h-p0-e0-h0");
    let dst = by_name(&topology, "h-p3-e1-h1");
    for plane in 0..2u8 {
        let edge = topology.host_edge_in(src, plane);
        assert_eq!(topology.dest_key_count(edge), 8);
        let key = topology.dest_key_for_host(edge, dst).unwrap();
        let plain_key = single
            .dest_key_for_host(single.host_edge(src), dst)
            .unwrap();
        assert_eq!(key, plain_key, "the same key in every plane");
        assert_eq!(topology.valid_up_mask(&FailedLinks::new(), edge, key), 0b11);
        assert_eq!(
            topology.dest_key(edge, topology.node(dst).loopback),
            Some(key)
        );
    }
    let paths = topology.shortest_paths(src, dst);
    assert_eq!(paths.len(), 2 * 4);
    for path in &paths {
        let planes: BTreeSet<_> = path[1..path.len() - 1]
            .iter()
            .map(|&node| topology.plane_of(node).unwrap())
            .collect();
        assert_eq!(planes.len(), 1, "a path stays in one plane");
    }
    assert_eq!(topology.hop_count(src, dst), 6);
    // A failed core link of plane 0 changes plane 0's masks only.
    let a = by_name(&topology, "a-p3-1@0");
    let c = topology.up_ports(a)[0].peer;
    let mut failures = FailedLinks::new();
    failures.insert(topology.link_between(a, c).unwrap());
    let key = DestKey(6); // e-p3-0's number in its plane: 3 · 2 + 0
    let at = |name| by_name(&topology, name);
    assert_eq!(topology.valid_up_mask(&failures, at("e-p0-0@0"), key), 0b11);
    assert_eq!(
        topology.valid_up_mask(&failures, at("a-p0-1@0"), DestKey(3)),
        0b10
    );
    assert_eq!(
        topology.valid_up_mask(&failures, at("a-p0-1@1"), DestKey(3)),
        0b11
    );
    assert_eq!(topology.valid_paths(&failures, src, dst).len(), 7);
}

/// ρ_max: a host splits over its planes, so a permutation at one line rate per port loads every
/// link with 1; a lower bound with P ports is below the one-plane bound of the same flows.
#[test]
fn rho_max_and_lower_bound_with_planes() {
    let topology = multi(PlaneKind::FatTree, 2, 4);
    let hosts = topology.hosts();
    let mut matrix = TrafficMatrix::new();
    for (index, host) in hosts.iter().enumerate() {
        matrix.push(host.id, hosts[(index + 5) % hosts.len()].id, 2.0);
    }
    assert_eq!(topology.rho_max(&FailedLinks::new(), &matrix).unwrap(), 1.0);
    let loads = topology.link_loads(&FailedLinks::new(), &matrix).unwrap();
    assert!(loads.iter().all(|load| load.up <= 1.0 && load.down <= 1.0));
    let flows: Vec<_> = (0..hosts.len())
        .map(|index| (hosts[index].id, hosts[(index + 5) % hosts.len()].id))
        .collect();
    let params = LinkParams::paper();
    let system = BoundSystem::STORE_AND_FORWARD_AT_LINE_RATE;
    let two = topology.cct_lower_bound_ps(&params, &system, &flows, 1 << 20);
    let one = Topology::fat_tree(4)
        .unwrap()
        .cct_lower_bound_ps(&params, &system, &flows, 1 << 20);
    // 256 frames over two ports: about half the one-port serialization, plus the same hops.
    assert!(two < one, "{two} vs {one}");
    assert!(two > one / 2, "{two} vs {one}");
}
