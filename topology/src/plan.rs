//! The fabric's routing plan: up-then-down routes and the paths behind them (pure).
//!
//! A switch reaches the `/24` of a destination edge either by its unique down port (when the
//! edge is below it) or by every up port whose neighbour still reaches that edge over alive
//! links — an ECMP group. A dead link removes exactly the hops that would lead into it, the same
//! rule as [`Topology::valid_up_mask`]. The lab installs these routes under static routing and
//! checks a BGP fabric's converged FIB against them.
//!
//! [`remote_paths`] adds, per next hop, the next hop's own next hops (the *next-next hops*): the
//! remote path information of the adaptive-routing framework draft, which a switch learns from
//! BGP (the AS_PATHs of a fabric with one ASN per switch, or tags naming router IDs, see
//! [`AsnPlan`]) or, without BGP, from this plan.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::dragonfly::{GroupId, RouterId, RouterPort};
use crate::{Dragonfly, FailedLinks, Node, NodeId, PortIndex, Role, Topology};

/// The first private 4-byte ASN (RFC 6996): switch `n` of a BGP fabric is `ASN_BASE + n`, or
/// shares the ASN of the first switch of its group (see [`AsnPlan`]).
pub const ASN_BASE: u32 = 4_200_000_000;

/// How a BGP fabric numbers its switches' autonomous systems.
///
/// Under either plan an AS_PATH never crosses a tier twice (the valley-free routes of a Clos),
/// and loop detection is plain eBGP's. What differs is what an AS_PATH says: with
/// [`AsnPlan::Unique`] every ASN names one switch, so the second ASN of a route names the
/// neighbour's next hop; with [`AsnPlan::Rfc7938`] it names a tier (or a pod's tier), and a
/// switch learns its next-next hops by router ID from the routes' tags instead
/// (`ofan_control::nnh`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AsnPlan {
    /// One private ASN per switch: `ASN_BASE + node id`.
    #[default]
    Unique,
    /// RFC 7938 §5.2.1: every core (spine) shares one ASN, the aggregation switches of a pod
    /// share one ASN per pod, every edge (leaf) has its own. A shared ASN is that of the group's
    /// first switch (lowest node id), so an edge's ASN is the same under both plans. Loop
    /// detection alone then keeps routes valley-free: a route that went down through a tier
    /// cannot climb back into it.
    Rfc7938,
}

impl AsnPlan {
    /// Every plan, in the order the CLI lists them.
    pub const ALL: [Self; 2] = [Self::Unique, Self::Rfc7938];

    /// The name in flags, files and `state.json`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Unique => "unique",
            Self::Rfc7938 => "rfc7938",
        }
    }

    /// The ASN of switch `node` of `topology`.
    #[must_use]
    pub fn asn(self, topology: &Topology, node: &Node) -> u32 {
        let first = match (self, node.role) {
            (Self::Unique, _) | (Self::Rfc7938, Role::Host | Role::Edge) => None,
            (Self::Rfc7938, Role::Core) => topology.cores().first(),
            (Self::Rfc7938, Role::Aggregation) => node.pod.and_then(|pod| {
                topology
                    .aggregations()
                    .iter()
                    .find(|agg| agg.pod == Some(pod))
            }),
        };
        ASN_BASE + first.unwrap_or(node).id.0
    }

    /// The one switch of `topology` with ASN `asn`; `None` when no switch or several (a shared
    /// ASN names a tier, not a switch) have it.
    #[must_use]
    pub fn node_of_asn(self, topology: &Topology, asn: u32) -> Option<&Node> {
        let mut owners = topology
            .switches()
            .iter()
            .filter(|node| self.asn(topology, node) == asn);
        let node = owners.next()?;
        owners.next().is_none().then_some(node)
    }
}

impl std::fmt::Display for AsnPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`AsnPlan`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ASN plan `{0}` (unique or rfc7938)")]
pub struct UnknownAsnPlan(pub String);

impl std::str::FromStr for AsnPlan {
    type Err = UnknownAsnPlan;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|plan| plan.name() == name)
            .ok_or_else(|| UnknownAsnPlan(name.to_owned()))
    }
}

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
    if let Some(dragonfly) = topology.dragonfly() {
        return dragonfly_routes(topology, dragonfly, failures, switch);
    }
    // Planes are disjoint: a switch routes to the edges of its own plane only.
    let plane = topology.shape().plane_of(switch);
    topology
        .edges()
        .iter()
        .filter(|edge| edge.id != switch && topology.shape().plane_of(edge.id) == plane)
        .filter_map(|edge| {
            let hops = hops_towards(topology, failures, switch, edge);
            (!hops.is_empty()).then(|| (topology.edge_prefix(edge.id), hops))
        })
        .collect()
}

/// The minimal routes of dragonfly router `switch`: every other router of its group's `/24` by
/// the local link, every other group's `/16` by the global link to it or the local link to
/// the group's gateway router. One hop each (the canonical dragonfly has one minimal path);
/// a route whose link is in `failures` is left out — a dragonfly's static plan does not
/// reroute around failures (non-minimal paths are the switches' own choice).
fn dragonfly_routes(
    topology: &Topology,
    dragonfly: &Dragonfly,
    failures: &FailedLinks,
    switch: NodeId,
) -> RouteTable {
    let node = topology.node(switch);
    if node.role != Role::Edge {
        return RouteTable::new();
    }
    let router = RouterId(topology.shape().edge_number(switch));
    let group = dragonfly.group_of(router);
    let hop = |port: RouterPort| {
        let port = topology.port(switch, PortIndex(port.0));
        failures.is_alive(port.link).then(|| {
            vec![Hop {
                port: port.index,
                gateway: topology.port(port.peer, port.peer_port).address,
            }]
        })
    };
    let mut routes = RouteTable::new();
    for index in 0..u32::from(dragonfly.shape().a()) {
        let target = dragonfly.router(group, index);
        if target == router {
            continue;
        }
        if let Some(hops) = hop(dragonfly.local_port(router, target)) {
            routes.insert(dragonfly.router_prefix(target), hops);
        }
    }
    for other in (0..dragonfly.shape().groups()).map(GroupId) {
        if other == group {
            continue;
        }
        if let Some(hops) = hop(dragonfly.next_port_to_group(router, other)) {
            routes.insert(dragonfly.group_prefix(other), hops);
        }
    }
    routes
}

/// One next hop of a route with its next-next hops.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RemoteHop {
    /// The next hop.
    pub hop: Hop,
    /// The switch behind it.
    pub neighbor: NodeId,
    /// The neighbour's own next hops towards the prefix, in its port order; empty when the
    /// neighbour is the destination edge itself.
    pub next_next: Vec<NodeId>,
}

/// The routes of `switch` under `failures` with, for each next hop, the next hop's own next
/// hops: per destination prefix, the two first hops of every path the plan allows.
#[must_use]
pub fn remote_paths(
    topology: &Topology,
    failures: &FailedLinks,
    switch: NodeId,
) -> BTreeMap<Prefix, Vec<RemoteHop>> {
    let mut tables: BTreeMap<NodeId, RouteTable> = BTreeMap::new();
    let mut routes_of = |node: NodeId| -> RouteTable {
        tables
            .entry(node)
            .or_insert_with(|| switch_routes(topology, failures, node))
            .clone()
    };
    let own = routes_of(switch);
    own.into_iter()
        .map(|(prefix, hops)| {
            let remote = hops
                .into_iter()
                .map(|hop| {
                    let neighbor = topology.neighbor(switch, hop.port).0;
                    let next_next = routes_of(neighbor)
                        .get(&prefix)
                        .map(|hops| {
                            hops.iter()
                                .map(|h| topology.neighbor(neighbor, h.port).0)
                                .collect()
                        })
                        .unwrap_or_default();
                    RemoteHop {
                        hop,
                        neighbor,
                        next_next,
                    }
                })
                .collect();
            (prefix, remote)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DestKey;

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
    fn next_next_hops_are_the_neighbours_next_hops() {
        let topology = Topology::fat_tree(4).unwrap();
        let none = FailedLinks::new();
        let name = |id: NodeId| topology.node(id).name.clone();
        let edge = by_name(&topology, "e-p0-0");
        let paths = remote_paths(&topology, &none, edge.id);
        // Across pods: each aggregation of pod 0 with the two cores above it.
        let remote = &paths[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        let pairs: Vec<(String, Vec<String>)> = remote
            .iter()
            .map(|r| {
                (
                    name(r.neighbor),
                    r.next_next.iter().map(|&n| name(n)).collect(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("a-p0-0".into(), vec!["c-0".to_owned(), "c-1".into()]),
                ("a-p0-1".into(), vec!["c-2".to_owned(), "c-3".into()]),
            ]
        );
        // Within the pod: the aggregation's next hop is the destination edge.
        let remote = &paths[&(Ipv4Addr::new(10, 0, 1, 0), 24)];
        assert!(remote
            .iter()
            .all(|r| name(r.next_next[0]) == "e-p0-1" && r.next_next.len() == 1));
        // At the destination's aggregation, the next hop is the edge itself: nothing behind it.
        let agg = by_name(&topology, "a-p3-0");
        let remote = &remote_paths(&topology, &none, agg.id)[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        assert_eq!(remote.len(), 1);
        assert!(remote[0].next_next.is_empty());
        // A failed core link leaves a-p0-0 with one core.
        let (a, c) = (by_name(&topology, "a-p0-0"), by_name(&topology, "c-0"));
        let failures: FailedLinks = [topology.link_between(a.id, c.id).unwrap()]
            .into_iter()
            .collect();
        let remote =
            &remote_paths(&topology, &failures, edge.id)[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        assert_eq!(
            remote[0]
                .next_next
                .iter()
                .map(|&n| name(n))
                .collect::<Vec<_>>(),
            ["c-1"]
        );
    }

    #[test]
    fn unique_asns_name_one_switch_each() {
        let topology = Topology::fat_tree(4).unwrap();
        let plan = AsnPlan::Unique;
        let mut asns = std::collections::BTreeSet::new();
        for switch in topology.switches() {
            let asn = plan.asn(&topology, switch);
            assert_eq!(asn, ASN_BASE + switch.id.0);
            assert!(asns.insert(asn), "{} shares its ASN", switch.name);
            assert_eq!(plan.node_of_asn(&topology, asn), Some(switch));
        }
        assert!(plan.node_of_asn(&topology, 65000).is_none());
        assert!(
            plan.node_of_asn(&topology, ASN_BASE).is_none(),
            "node 0 is a host"
        );
        assert_eq!(AsnPlan::default(), AsnPlan::Unique);
    }

    #[test]
    fn rfc7938_shares_an_asn_per_tier_and_pod_and_keeps_edges_unique() {
        let topology = Topology::fat_tree(4).unwrap();
        let plan = AsnPlan::Rfc7938;
        let asn = |name: &str| plan.asn(&topology, by_name(&topology, name));
        // The cores: one ASN, the first core's.
        let core = asn("c-0");
        assert_eq!(core, ASN_BASE + by_name(&topology, "c-0").id.0);
        assert!(topology
            .cores()
            .iter()
            .all(|c| plan.asn(&topology, c) == core));
        // The aggregation switches: one ASN per pod, four pods, none a core's.
        let pods: std::collections::BTreeSet<u32> = topology
            .aggregations()
            .iter()
            .map(|agg| plan.asn(&topology, agg))
            .collect();
        assert_eq!(pods.len(), 4);
        assert!(!pods.contains(&core));
        assert_eq!(asn("a-p1-0"), asn("a-p1-1"));
        assert_ne!(asn("a-p1-0"), asn("a-p2-0"));
        // The edges: their own ASNs, as under the unique plan.
        for edge in topology.edges() {
            assert_eq!(
                plan.asn(&topology, edge),
                AsnPlan::Unique.asn(&topology, edge)
            );
            assert_eq!(
                plan.node_of_asn(&topology, plan.asn(&topology, edge)),
                Some(edge)
            );
        }
        // A shared ASN names no one switch.
        assert!(plan.node_of_asn(&topology, core).is_none());
        assert!(plan.node_of_asn(&topology, asn("a-p0-0")).is_none());
        // Leaf-spine: the spines share, the leaves do not.
        let leaf_spine = Topology::leaf_spine(4).unwrap();
        let spines: std::collections::BTreeSet<u32> = leaf_spine
            .cores()
            .iter()
            .map(|s| plan.asn(&leaf_spine, s))
            .collect();
        let leaves: std::collections::BTreeSet<u32> = leaf_spine
            .edges()
            .iter()
            .map(|l| plan.asn(&leaf_spine, l))
            .collect();
        assert_eq!((spines.len(), leaves.len()), (1, 4));
    }

    #[test]
    fn asn_plans_by_name() {
        for plan in AsnPlan::ALL {
            assert_eq!(plan.name().parse::<AsnPlan>(), Ok(plan));
            assert_eq!(plan.to_string(), plan.name());
        }
        let error = "rfc-7938".parse::<AsnPlan>().unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown ASN plan `rfc-7938` (unique or rfc7938)"
        );
        assert_eq!(
            serde_json::to_string(&AsnPlan::Rfc7938).unwrap(),
            "\"rfc7938\""
        );
    }
}
