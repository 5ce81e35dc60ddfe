//! A dragonfly as a [`Topology`]: the lab's view of the same fabric as [`Dragonfly`].
//!
//! Expectations come from the dragonfly's own contract ([`Dragonfly::peer`], its addressing
//! plan and its minimal next hops), so that the topology's construction cannot agree with
//! itself by sharing a formula.

use std::collections::BTreeSet;

use crate::dragonfly::{GroupId, PortPeer, RouterId, RouterPort};
use crate::plan::switch_routes;
use crate::{FailedLinks, PortDirection, PortIndex, Role, Topology, TopologyKind};

fn lab_dragonfly() -> Topology {
    Topology::new(TopologyKind::Dragonfly { p: 1, a: 4, h: 2 }).unwrap()
}

#[test]
fn a_dragonfly_topology_has_the_dragonfly_s_nodes_links_and_names() {
    let topology = lab_dragonfly();
    assert_eq!(topology.hosts().len(), 36);
    assert_eq!(topology.switches().len(), 36);
    assert_eq!(topology.edges().len(), 36);
    // 36 host links, 9 groups × 6 local links, 9·8/2 global links.
    assert_eq!(topology.links().len(), 36 + 54 + 36);
    assert_eq!(topology.num_pods(), 9);
    assert_eq!(topology.k(), 6);
    assert_eq!(topology.edges()[5].name, "r-g1-1");
    assert_eq!(topology.hosts()[5].name, "h-g1-r1-h0");
    let dragonfly = topology.dragonfly().expect("a dragonfly");
    assert_eq!(dragonfly.links().len(), 54 + 36);
}

#[test]
fn every_router_port_is_the_dragonfly_s_port_with_its_peer_and_address() {
    let topology = lab_dragonfly();
    let dragonfly = topology.dragonfly().unwrap();
    for (r, router) in topology.edges().iter().enumerate() {
        let id = RouterId(r as u32);
        assert_eq!(usize::from(dragonfly.shape().radix()), router.ports.len());
        for port in &router.ports {
            let peer = topology.node(port.peer);
            match dragonfly.peer(id, RouterPort(port.index.0)).unwrap() {
                PortPeer::Host(host) => {
                    assert_eq!(port.direction, PortDirection::Down);
                    assert_eq!(peer.role, Role::Host);
                    assert_eq!(peer.loopback, dragonfly.host_address(host));
                    assert_eq!(port.address, dragonfly.host_gateway_address(host));
                }
                PortPeer::Local(other) | PortPeer::Global { router: other, .. } => {
                    assert_eq!(port.direction, PortDirection::Up);
                    assert_eq!(
                        peer.id,
                        topology.edges()[other.index()].id,
                        "{} {}",
                        router.name,
                        port.ifname
                    );
                    let back = topology.port(port.peer, port.peer_port);
                    assert_eq!((back.peer, back.peer_port), (router.id, port.index));
                }
            }
        }
    }
}

#[test]
fn a_dragonfly_topology_round_trips_and_addresses_name_their_owners() {
    let topology = lab_dragonfly();
    let back = Topology::from_json(&topology.to_json()).unwrap();
    assert_eq!(back, topology);
    assert!(back.dragonfly().is_some());
    for node in topology.nodes() {
        assert_eq!(
            topology.node_by_addr(node.loopback),
            Some(node.id),
            "{}",
            node.name
        );
        for port in &node.ports {
            assert_eq!(
                topology.node_by_addr(port.address),
                Some(node.id),
                "{} {}",
                node.name,
                port.ifname
            );
        }
    }
}

#[test]
fn static_routes_follow_the_minimal_next_hops() {
    let topology = lab_dragonfly();
    let dragonfly = topology.dragonfly().unwrap();
    let none = FailedLinks::new();
    for (r, router) in topology.edges().iter().enumerate() {
        let id = RouterId(r as u32);
        let routes = switch_routes(&topology, &none, router.id);
        // Three other routers of the group and eight other groups.
        assert_eq!(routes.len(), 3 + 8, "{}", router.name);
        for (prefix, hops) in &routes {
            assert_eq!(hops.len(), 1);
            let [_, group, index, _] = prefix.0.octets();
            let expected = if prefix.1 == 24 {
                dragonfly.next_port(id, dragonfly.router(GroupId(group.into()), index.into()))
            } else {
                assert_eq!(prefix.1, 16);
                Some(dragonfly.next_port_to_group(id, GroupId(group.into())))
            };
            assert_eq!(
                Some(RouterPort(hops[0].port.0)),
                expected,
                "{} {prefix:?}",
                router.name
            );
            let port = topology.port(router.id, hops[0].port);
            assert_eq!(
                hops[0].gateway,
                topology.port(port.peer, port.peer_port).address
            );
        }
    }
    // A failed link takes exactly its routes away.
    let failed = topology.port(topology.edges()[0].id, PortIndex(1)).link;
    let failures: FailedLinks = [failed].into_iter().collect();
    let before = switch_routes(&topology, &none, topology.edges()[0].id);
    let after = switch_routes(&topology, &failures, topology.edges()[0].id);
    let lost: BTreeSet<_> = before.keys().filter(|p| !after.contains_key(p)).collect();
    assert!(!lost.is_empty());
    assert!(before
        .iter()
        .all(|(p, hops)| lost.contains(&p) == (hops[0].port == PortIndex(1))));
}

#[test]
fn hop_counts_are_the_minimal_paths_plus_the_host_links() {
    let topology = lab_dragonfly();
    let hosts = topology.hosts();
    assert_eq!(topology.hop_count(hosts[0].id, hosts[0].id), 0);
    assert_eq!(topology.hop_count(hosts[0].id, hosts[1].id), 3);
    let counts: BTreeSet<u32> = hosts
        .iter()
        .map(|dst| topology.hop_count(hosts[0].id, dst.id))
        .collect();
    assert_eq!(counts, BTreeSet::from([0, 3, 4, 5]));
}

#[test]
fn bad_dragonfly_parameters_are_refused_by_name() {
    let error = Topology::new(TopologyKind::Dragonfly { p: 1, a: 0, h: 2 }).unwrap_err();
    assert!(error.to_string().contains("parameter a"), "{error}");
}
