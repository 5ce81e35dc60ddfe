//! The switch's path table: per destination prefix, each next hop of the forwarding table with
//! its *next-next hops* — the remote path information of the adaptive-routing framework draft.
//!
//! Two sources fill it ([`PathSource`]):
//! - **BMP** ([`crate::bmp`]): the local BGP daemon mirrors every BGP message it receives to the
//!   switch's station. Each route carries a next-next-hop tag ([`crate::nnh`]) naming the
//!   neighbour's own next hop by router ID; with ADD-PATH the neighbour announces every path it
//!   has, so the tags of its paths are all its next hops. By ASN, the second ASN of each path
//!   names them too — one switch each only in a fabric with one ASN per switch
//!   ([`AsnPlan::Unique`]); under RFC 7938's shared ASNs ([`AsnPlan::Rfc7938`]) a tier.
//! - **The plan** ([`LearnedPaths::from_plan`]): without BMP (static routing, or BIRD 2.0, which
//!   has no BMP), the topology's routing plan says it, as the draft allows for statically
//!   specified remote paths. It does not follow remote failures.
//!
//! The forwarding state stays the kernel FIB's (the mirror): [`report`] joins the learned paths
//! onto the FIB's next hops, so a next hop the FIB no longer has is not shown and one BGP has not
//! (yet) described shows no next-next hops. Nothing here is on the hot path: the table is
//! replaced with one atomic swap and read by `stats` and by the adaptive-routing notifier
//! ([`remote_paths`]: the remote path information of the `arf-*` modes).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use ofan_dataplane::fib::{Fib, IpPrefix, RouteTarget};
use ofan_topology::plan::{self, AsnPlan};
use ofan_topology::{FailedLinks, NodeId, Topology};
use serde::{Deserialize, Serialize};

/// A destination prefix (IPv4 network address and length).
pub type Prefix = (Ipv4Addr, u8);

/// What one neighbour says about one prefix.
///
/// Switches are named two ways. The **ASNs** are what an AS_PATH says; they name one switch
/// only in a fabric with one ASN per switch (with RFC 7938's shared ASNs, a tier). The **router
/// IDs** (BGP identifiers) always name one switch: the adaptive-routing framework keys links by
/// them (the draft's neighbour ID), so they are what [`remote_paths`] gives the notifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighborPaths {
    /// The neighbour's ASN (the first of its AS_PATHs).
    pub asn: u32,
    /// The neighbour's router ID (its BGP identifier: BMP's per-peer header, or the plan's
    /// loopback); unspecified when unknown.
    pub router_id: Ipv4Addr,
    /// The neighbour's own next hops towards the prefix by ASN (the second ASN of each of its
    /// shortest paths, prepending removed); empty when the neighbour originates the prefix.
    pub next_next: BTreeSet<u32>,
    /// The same next hops by router ID, where the source names them (the plan; BGP when the
    /// route carries them); empty when unknown.
    pub next_next_ids: BTreeSet<Ipv4Addr>,
}

impl Default for NeighborPaths {
    fn default() -> Self {
        Self {
            asn: 0,
            router_id: Ipv4Addr::UNSPECIFIED,
            next_next: BTreeSet::new(),
            next_next_ids: BTreeSet::new(),
        }
    }
}

/// What the switch knows about the paths behind its next hops: prefix → neighbour address →
/// that neighbour's paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LearnedPaths {
    /// Per prefix, per neighbour address.
    pub routes: BTreeMap<Prefix, BTreeMap<Ipv4Addr, NeighborPaths>>,
}

impl LearnedPaths {
    /// The paths the topology's plan gives switch `node` with every link alive, with switches
    /// named by their ASN under `asns` (a shared ASN appears once in a set of next-next hops)
    /// and by their loopback as router ID.
    #[must_use]
    pub fn from_plan(topology: &Topology, node: NodeId, asns: AsnPlan) -> Self {
        let asn = |id: NodeId| asns.asn(topology, topology.node(id));
        let remote = plan::remote_paths(topology, &FailedLinks::new(), node);
        let routes = remote
            .into_iter()
            .map(|(prefix, hops)| {
                let neighbors = hops
                    .into_iter()
                    .map(|hop| {
                        let paths = NeighborPaths {
                            asn: asn(hop.neighbor),
                            router_id: topology.node(hop.neighbor).loopback,
                            next_next: hop.next_next.iter().map(|&id| asn(id)).collect(),
                            next_next_ids: hop
                                .next_next
                                .iter()
                                .map(|&id| topology.node(id).loopback)
                                .collect(),
                        };
                        (hop.hop.gateway, paths)
                    })
                    .collect();
                (prefix, neighbors)
            })
            .collect();
        Self { routes }
    }
}

/// Where the path table comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PathSource {
    /// Nothing: no BMP station and no topology plan.
    #[default]
    None,
    /// The topology's routing plan (static; no BMP station configured).
    Plan,
    /// The local BGP daemon over BMP.
    Bmp,
}

impl std::fmt::Display for PathSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "none",
            Self::Plan => "plan",
            Self::Bmp => "bmp",
        })
    }
}

/// One next hop of a route in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathHop {
    /// The egress port's name.
    pub port: String,
    /// The neighbour's address.
    pub gateway: IpAddr,
    /// The neighbour's ASN, when the source knows the neighbour.
    pub asn: Option<u32>,
    /// The neighbour's router ID, when the source knows the neighbour.
    #[serde(default)]
    pub router_id: Option<Ipv4Addr>,
    /// The neighbour's next hops (ASNs); empty when it originates the prefix or is unknown.
    pub next_next: Vec<u32>,
    /// The neighbour's next hops by router ID, where the source names them.
    #[serde(default)]
    pub next_next_ids: Vec<Ipv4Addr>,
}

/// One route of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathRoute {
    /// The prefix, as `a.b.c.d/len`.
    pub prefix: String,
    /// The FIB's next hops, each with what the source says about it.
    pub hops: Vec<PathHop>,
}

/// The path table as `stats` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathReport {
    /// Where the next-next hops come from.
    pub source: PathSource,
    /// The routes that leave through the switch's ports, in prefix order.
    pub routes: Vec<PathRoute>,
}

/// Joins `learned` onto the next hops of `fib`: one route per prefix that `learned` names and
/// `fib` routes through a next-hop group, each FIB next hop with the neighbour's paths.
/// `port_names` are the switch's interfaces in port-id order.
#[must_use]
pub fn report(
    fib: &Fib,
    learned: &LearnedPaths,
    source: PathSource,
    port_names: &[String],
) -> PathReport {
    let routes = learned
        .routes
        .iter()
        .filter_map(|(&(addr, len), neighbors)| {
            let prefix = IpPrefix::new(IpAddr::V4(addr), len).ok()?;
            let Some(RouteTarget::Group(group)) = fib.route_exact(prefix) else {
                return None;
            };
            let hops = fib
                .group(group)?
                .hops()
                .iter()
                .map(|hop| {
                    let known = match hop.gateway {
                        IpAddr::V4(gateway) => neighbors.get(&gateway),
                        IpAddr::V6(_) => None,
                    };
                    PathHop {
                        port: port_names
                            .get(usize::from(hop.port.0))
                            .cloned()
                            .unwrap_or_else(|| format!("#{}", hop.port.0)),
                        gateway: hop.gateway,
                        asn: known.map(|k| k.asn),
                        router_id: known.map(|k| k.router_id),
                        next_next: known
                            .map(|k| k.next_next.iter().copied().collect())
                            .unwrap_or_default(),
                        next_next_ids: known
                            .map(|k| k.next_next_ids.iter().copied().collect())
                            .unwrap_or_default(),
                    }
                })
                .collect();
            Some(PathRoute {
                prefix: format!("{addr}/{len}"),
                hops,
            })
        })
        .collect();
    PathReport { source, routes }
}

/// The remote path information the adaptive-routing view needs
/// ([`ofan_dataplane::arf::RemotePaths`]): for each prefix of `learned` that `fib` routes
/// through a next-hop group, its destination key, and for each of the group's next hops on an
/// up-port, the neighbour and its next-next hops **by router ID** (what notifications name).
/// Where the source named the next-next hops only by ASN, `resolve` maps an ASN to the one
/// switch it names (the topology plan's numbering, one ASN per switch); an ASN it cannot map
/// leaves that hop out, so a path whose next-next hops are all unknown has no remote
/// information (it reads as best). Every prefix of one key has the same paths in a fat tree;
/// where they differ the last prefix wins.
#[must_use]
pub fn remote_paths(
    fib: &Fib,
    learned: &LearnedPaths,
    up_ports: u8,
    dest_keys: u32,
    resolve: &dyn Fn(u32) -> Option<Ipv4Addr>,
) -> ofan_dataplane::arf::RemotePaths {
    use ofan_dataplane::arf::{RemoteHop, RemotePaths};
    let mut paths = RemotePaths::new(up_ports, dest_keys);
    for (&(addr, len), neighbours) in &learned.routes {
        let Ok(prefix) = IpPrefix::new(IpAddr::V4(addr), len) else {
            continue;
        };
        let (Some(key), Some(RouteTarget::Group(group))) =
            (fib.dest_key(IpAddr::V4(addr)), fib.route_exact(prefix))
        else {
            continue;
        };
        let Some(group) = fib.group(group) else {
            continue;
        };
        for hop in group.hops() {
            let IpAddr::V4(gateway) = hop.gateway else {
                continue;
            };
            let (Some(position), Some(neighbour)) = (
                fib.port(hop.port).and_then(|port| port.up_position),
                neighbours.get(&gateway),
            ) else {
                continue;
            };
            let next_next = if neighbour.next_next_ids.is_empty() {
                neighbour
                    .next_next
                    .iter()
                    .filter_map(|&asn| resolve(asn))
                    .map(u32::from)
                    .collect()
            } else {
                neighbour
                    .next_next_ids
                    .iter()
                    .map(|&id| u32::from(id))
                    .collect()
            };
            paths.set(
                key,
                position,
                RemoteHop {
                    neighbour: u32::from(neighbour.router_id),
                    next_next,
                },
            );
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_paths_join_the_fib_keys_and_up_ports_to_the_neighbours() {
        use ofan_dataplane::arf::RemoteHop;
        use ofan_dataplane::fib::{NextHop, Port, PortId, PortRole};
        use ofan_dataplane::lb::DestKey;
        let port = |role, up_position| Port {
            ifindex: 1,
            mac: [2, 0, 0, 0, 0, 1],
            role,
            up_position,
            oper_up: true,
        };
        let hop = |id: u16, last: u8| NextHop {
            port: PortId(id),
            gateway: IpAddr::V4(Ipv4Addr::new(100, 64, 0, last)),
            mac: Some([2, 0, 0, 0, 1, last]),
        };
        let prefix = |text: &str| text.parse::<IpPrefix>().unwrap();
        let mut builder = Fib::builder();
        builder
            .port(PortId(0), port(PortRole::Host, None))
            .port(PortId(1), port(PortRole::Up, Some(1)))
            .port(PortId(2), port(PortRole::Up, Some(0)));
        let up = builder.group([hop(1, 1), hop(2, 3)]);
        builder
            .route(prefix("10.1.0.0/24"), RouteTarget::Group(up))
            .dest_key(prefix("10.1.0.0/24"), DestKey(1))
            .dest_keys(2);
        let fib = builder.build().unwrap();
        let mut learned = LearnedPaths::default();
        let id = |last: u8| Ipv4Addr::new(10, 255, 0, last);
        // Neighbour 12 names its next hops by router ID; 13 only by ASN.
        let behind = |asn: u32, next: &[u8], by_id: bool| NeighborPaths {
            asn,
            router_id: id(asn as u8),
            next_next: next.iter().map(|&n| 100 + u32::from(n)).collect(),
            next_next_ids: if by_id {
                next.iter().map(|&n| id(n)).collect()
            } else {
                BTreeSet::new()
            },
        };
        learned.routes.insert(
            (Ipv4Addr::new(10, 1, 0, 0), 24),
            BTreeMap::from([
                (Ipv4Addr::new(100, 64, 0, 1), behind(12, &[20, 21], true)),
                (Ipv4Addr::new(100, 64, 0, 3), behind(13, &[22, 23], false)),
            ]),
        );
        // A prefix the FIB does not route: ignored.
        learned.routes.insert(
            (Ipv4Addr::new(10, 9, 0, 0), 24),
            BTreeMap::from([(Ipv4Addr::new(100, 64, 0, 1), behind(12, &[29], true))]),
        );
        // The resolver knows ASN 122 (→ 10.255.0.22) but not 123.
        let resolve = |asn: u32| (asn == 122).then(|| id(22));
        let paths = remote_paths(&fib, &learned, 2, 2, &resolve);
        let ids = |lasts: &[u8]| lasts.iter().map(|&n| u32::from(id(n))).collect::<Vec<_>>();
        // Port 1 is up-position 1, port 2 up-position 0.
        assert_eq!(
            paths.get(DestKey(1), 1),
            Some(&RemoteHop {
                neighbour: u32::from(id(12)),
                next_next: ids(&[20, 21])
            })
        );
        assert_eq!(
            paths.get(DestKey(1), 0),
            Some(&RemoteHop {
                neighbour: u32::from(id(13)),
                next_next: ids(&[22])
            }),
            "by ASN through the resolver; the unknown ASN left out"
        );
        assert_eq!(paths.get(DestKey(0), 0), None);
    }

    #[test]
    fn the_plan_names_neighbours_and_their_next_hops_by_asn_and_router_id() {
        let topology = Topology::fat_tree(4).unwrap();
        let edge = topology.edges()[0].id;
        let unique = AsnPlan::Unique;
        let learned = LearnedPaths::from_plan(&topology, edge, unique);
        assert_eq!(learned.routes.len(), 7);
        let name = |asn: u32| unique.node_of_asn(&topology, asn).unwrap().name.clone();
        let remote = &learned.routes[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        let named: Vec<(String, Vec<String>)> = remote
            .values()
            .map(|n| (name(n.asn), n.next_next.iter().map(|&a| name(a)).collect()))
            .collect();
        assert_eq!(
            named,
            [
                (
                    "a-p0-0".to_owned(),
                    vec!["c-0".to_owned(), "c-1".to_owned()]
                ),
                (
                    "a-p0-1".to_owned(),
                    vec!["c-2".to_owned(), "c-3".to_owned()]
                ),
            ]
        );
        for paths in remote.values() {
            let node = unique.node_of_asn(&topology, paths.asn).unwrap();
            assert_eq!(paths.router_id, node.loopback);
            let by_id: BTreeSet<Ipv4Addr> = paths
                .next_next
                .iter()
                .map(|&asn| unique.node_of_asn(&topology, asn).unwrap().loopback)
                .collect();
            assert_eq!(paths.next_next_ids, by_id);
        }
        // RFC 7938's plan: the two cores behind an aggregation switch are one ASN, two router
        // IDs; the aggregation switches of pod 0 one ASN.
        let shared = LearnedPaths::from_plan(&topology, edge, AsnPlan::Rfc7938);
        let remote = &shared.routes[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
        let core = AsnPlan::Rfc7938.asn(&topology, &topology.cores()[0]);
        assert!(remote.values().all(
            |paths| paths.next_next == BTreeSet::from([core]) && paths.next_next_ids.len() == 2
        ));
        let asns: BTreeSet<u32> = remote.values().map(|paths| paths.asn).collect();
        assert_eq!(asns.len(), 1);
    }
}
