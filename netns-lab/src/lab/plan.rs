//! What a lab *should* look like, computed from the topology alone (pure, unit-tested): the
//! namespace of every node and the static routes of every switch under a set of failed links.
//!
//! Routes follow up-then-down routing: a switch reaches the `/24` of a destination edge either
//! by its unique down port (when the edge is below it) or by every up port whose neighbour still
//! reaches that edge over alive links — an ECMP group. A dead link removes exactly the hops that
//! would lead into it, the same rule as [`Topology::valid_up_mask`].

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ofan_topology::{FailedLinks, Node, NodeId, PortIndex, Role, Topology};

/// A destination prefix.
pub type Prefix = (Ipv4Addr, u8);

/// One next hop: the switch's own port and the gateway (the peer's address on that link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hop {
    /// The outgoing port.
    pub port: PortIndex,
    /// The neighbour's address on the link.
    pub gateway: Ipv4Addr,
}

/// The routes of one switch: destination prefix → next hops (one, or an ECMP group).
pub type RouteTable = BTreeMap<Prefix, Vec<Hop>>;

/// The namespace name of `node` in lab `lab`.
pub fn namespace(lab: &str, node: &str) -> String {
    format!("{}{node}", namespace_prefix(lab))
}

/// The prefix shared by every namespace of lab `lab`.
pub fn namespace_prefix(lab: &str) -> String {
    format!("ofan-{lab}-")
}

/// Whether `name` is a valid lab name: 1 to 16 lowercase letters and digits (so that
/// `ofan-<lab>-` prefixes of different labs never overlap).
pub fn valid_lab_name(name: &str) -> bool {
    (1..=16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `node` has `target` (an edge switch) at or below it.
fn covers(node: &Node, target: &Node) -> bool {
    match node.role {
        Role::Host => false,
        Role::Edge => node.id == target.id,
        Role::Aggregation => node.pod == target.pod,
        Role::Core => true,
    }
}

/// Whether edge `target` is reachable from `node` over alive links by an up-then-down path.
fn reaches(topology: &Topology, failures: &FailedLinks, node: NodeId, target: &Node) -> bool {
    !hops_towards(topology, failures, node, target).is_empty() || node == target.id
}

/// The alive ports of `switch` towards edge `target` (empty when unreachable or at the target).
fn hops_towards(
    topology: &Topology,
    failures: &FailedLinks,
    switch: NodeId,
    target: &Node,
) -> Vec<Hop> {
    let node = topology.node(switch);
    if node.id == target.id {
        return Vec::new();
    }
    let candidates: Vec<_> = if covers(node, target) {
        topology
            .down_ports(switch)
            .iter()
            .filter(|port| {
                let peer = topology.node(port.peer);
                peer.id == target.id || (peer.role.is_switch() && covers(peer, target))
            })
            .collect()
    } else {
        topology.up_ports(switch).iter().collect()
    };
    candidates
        .into_iter()
        .filter(|port| {
            failures.is_alive(port.link) && reaches(topology, failures, port.peer, target)
        })
        .map(|port| Hop {
            port: port.index,
            gateway: topology.port(port.peer, port.peer_port).address,
        })
        .collect()
}

/// The static routes of switch `switch` under `failures`: one entry per destination edge
/// `/24` it can still reach (its own edge's hosts are connected routes, not listed).
pub fn switch_routes(topology: &Topology, failures: &FailedLinks, switch: NodeId) -> RouteTable {
    topology
        .edges()
        .iter()
        .filter(|edge| edge.id != switch)
        .filter_map(|edge| {
            let hops = hops_towards(topology, failures, switch, edge);
            (!hops.is_empty()).then(|| (topology.edge_prefix(edge.id), hops))
        })
        .collect()
}

/// A host's gateway: its edge switch's address on the host link.
pub fn host_gateway(topology: &Topology, host: NodeId) -> Ipv4Addr {
    let port = &topology.node(host).ports[0];
    topology.port(port.peer, port.peer_port).address
}

/// Every failed link: the explicitly failed ones and every link of a stopped switch.
pub fn effective_failures(topology: &Topology, failed: &[u32], stopped: &[String]) -> FailedLinks {
    let mut failures: FailedLinks = failed.iter().map(|&id| ofan_topology::LinkId(id)).collect();
    for node in topology.nodes() {
        if stopped.contains(&node.name) {
            failures.extend(node.ports.iter().map(|port| port.link));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_topology::DestKey;

    fn by_name<'a>(topology: &'a Topology, name: &str) -> &'a Node {
        topology
            .nodes()
            .iter()
            .find(|node| node.name == name)
            .unwrap()
    }

    #[test]
    fn k4_without_failures() {
        let topology = Topology::fat_tree(4).unwrap();
        let none = FailedLinks::new();
        for edge in topology.edges() {
            let routes = switch_routes(&topology, &none, edge.id);
            assert_eq!(routes.len(), 7);
            assert!(routes.values().all(|hops| hops.len() == 2));
        }
        for agg in topology.aggregations() {
            let routes = switch_routes(&topology, &none, agg.id);
            assert_eq!(routes.len(), 8);
            assert_eq!(routes.values().filter(|hops| hops.len() == 1).count(), 2);
            assert_eq!(routes.values().filter(|hops| hops.len() == 2).count(), 6);
        }
        for core in topology.cores() {
            let routes = switch_routes(&topology, &none, core.id);
            assert_eq!(routes.len(), 8);
            assert!(routes.values().all(|hops| hops.len() == 1));
        }
        // e-p0-0 reaches 10.3.1.0/24 via both aggregations of pod 0, at their link addresses.
        let edge = by_name(&topology, "e-p0-0");
        let routes = switch_routes(&topology, &none, edge.id);
        let hops = &routes[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        assert_eq!(hops[0].port, PortIndex(2));
        assert_eq!(
            hops[0].gateway,
            topology
                .port(edge.ports[2].peer, edge.ports[2].peer_port)
                .address
        );
    }

    /// The routes agree with the topology's own valid-up-port rule under every single link
    /// failure, at every edge switch (leaf).
    #[test]
    fn up_hops_match_valid_up_ports_under_single_failures() {
        for topology in [
            Topology::fat_tree(4).unwrap(),
            Topology::leaf_spine(4).unwrap(),
        ] {
            for link in topology.links() {
                let failures: FailedLinks = [link.id].into_iter().collect();
                for switch in topology.switches() {
                    // Aggregation keys are per pod, routes per edge /24 (stricter: a dead
                    // edge link below removes one prefix, not the pod): compare edges only.
                    if switch.role != Role::Edge {
                        continue;
                    }
                    let routes = switch_routes(&topology, &failures, switch.id);
                    for (number, edge) in topology.edges().iter().enumerate() {
                        if edge.id == switch.id {
                            continue;
                        }
                        let prefix = topology.edge_prefix(edge.id);
                        let key = match switch.role {
                            Role::Edge => DestKey(number as u32),
                            _ => DestKey(u32::from(edge.pod.unwrap())),
                        };
                        let expected = topology.valid_up_ports(&failures, switch.id, key);
                        let got: Vec<PortIndex> = routes
                            .get(&prefix)
                            .map(|hops| hops.iter().map(|hop| hop.port).collect())
                            .unwrap_or_default();
                        let northbound = got.iter().all(|port| {
                            topology
                                .up_ports(switch.id)
                                .iter()
                                .any(|p| p.index == *port)
                        });
                        if northbound
                            && !(switch.role == Role::Aggregation && edge.pod == switch.pod)
                        {
                            assert_eq!(got, expected, "{} → {}", switch.name, edge.name);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_dead_edge_link_is_routed_around() {
        let topology = Topology::fat_tree(4).unwrap();
        let (edge, agg) = (by_name(&topology, "e-p0-0"), by_name(&topology, "a-p0-0"));
        let link = topology.link_between(edge.id, agg.id).unwrap();
        let failures: FailedLinks = [link].into_iter().collect();
        let prefix = topology.edge_prefix(edge.id);
        // The aggregation switch and the cores above it lose the prefix; so does a-p1-0.
        for name in ["a-p0-0", "c-0", "c-1", "a-p1-0"] {
            let routes = switch_routes(&topology, &failures, by_name(&topology, name).id);
            assert!(
                !routes.contains_key(&prefix),
                "{name} still routes to e-p0-0"
            );
        }
        // e-p1-0 climbs only through a-p1-1; e-p0-0 itself only through a-p0-1.
        let routes = switch_routes(&topology, &failures, by_name(&topology, "e-p1-0").id);
        assert_eq!(routes[&prefix].len(), 1);
        assert_eq!(routes[&prefix][0].port, PortIndex(3));
        let routes = switch_routes(&topology, &failures, edge.id);
        assert!(routes
            .values()
            .all(|hops| hops == &[routes.values().next().unwrap()[0]]));
        assert!(routes.values().all(|hops| hops[0].port == PortIndex(3)));
    }

    #[test]
    fn names() {
        assert_eq!(namespace("lab", "e-p0-1"), "ofan-lab-e-p0-1");
        assert!(valid_lab_name("lab2"));
        assert!(!valid_lab_name("lab-2"));
        assert!(!valid_lab_name(""));
    }
}
