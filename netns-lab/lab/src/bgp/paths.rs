//! The lab's check of a switch's path table ([`ofan_control::paths::PathReport`]) against the
//! plan: the same rows from both, compared whole.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ofan_topology::plan::AsnPlan;
use ofan_topology::{FailedLinks, Node, NodeId, Topology};

/// One next hop of a route in comparable form: the neighbour and its own next hops, by ASN and
/// by router ID (sorted, each once: under RFC 7938's plan two next-next hops can share an ASN).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PathRow {
    /// The neighbour's address on the link.
    pub gateway: IpAddr,
    /// The neighbour's ASN.
    pub asn: Option<u32>,
    /// The neighbour's router ID.
    pub router_id: Option<Ipv4Addr>,
    /// The neighbour's next hops by ASN.
    pub next_next: Vec<u32>,
    /// The neighbour's next hops by router ID.
    pub next_next_ids: Vec<Ipv4Addr>,
}

/// A path table, comparable: prefix (`a.b.c.d/len`) → its next hops' rows, sorted.
pub type PathRows = BTreeMap<String, Vec<PathRow>>;

/// The path table switch `switch` should report under `failures` with the fabric's ASNs
/// numbered by `asns`: the plan's routes, each next hop with the neighbour's own next hops.
#[must_use]
pub fn expected_paths(
    topology: &Topology,
    asns: AsnPlan,
    failures: &FailedLinks,
    switch: &Node,
) -> PathRows {
    let asn = |id: NodeId| asns.asn(topology, topology.node(id));
    ofan_topology::plan::remote_paths(topology, failures, switch.id)
        .into_iter()
        .map(|((addr, len), hops)| {
            let mut rows: Vec<PathRow> = hops
                .iter()
                .map(|hop| PathRow {
                    gateway: IpAddr::V4(hop.hop.gateway),
                    asn: Some(asn(hop.neighbor)),
                    router_id: Some(topology.node(hop.neighbor).loopback),
                    next_next: sorted(hop.next_next.iter().map(|&id| asn(id))),
                    next_next_ids: sorted(
                        hop.next_next.iter().map(|&id| topology.node(id).loopback),
                    ),
                })
                .collect();
            rows.sort();
            (format!("{addr}/{len}"), rows)
        })
        .collect()
}

/// A switch's reported path table in the form of [`expected_paths`].
#[must_use]
pub fn reported_paths(report: &ofan_control::paths::PathReport) -> PathRows {
    report
        .routes
        .iter()
        .map(|route| {
            let mut rows: Vec<PathRow> = route
                .hops
                .iter()
                .map(|hop| PathRow {
                    gateway: hop.gateway,
                    asn: hop.asn,
                    router_id: hop.router_id,
                    next_next: sorted(hop.next_next.iter().copied()),
                    next_next_ids: sorted(hop.next_next_ids.iter().copied()),
                })
                .collect();
            rows.sort();
            (route.prefix.clone(), rows)
        })
        .collect()
}

/// `items` sorted, each once.
fn sorted<T: Ord>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut items: Vec<T> = items.collect();
    items.sort_unstable();
    items.dedup();
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_reported_by_a_switch_is_the_plan_expected() {
        use ofan_control::paths::{report, LearnedPaths, PathSource};
        use ofan_dataplane::fib::{Fib, IpPrefix, NextHop, Port, PortId, PortRole, RouteTarget};
        let topology = Topology::fat_tree(4).unwrap();
        let edge = &topology.edges()[0];
        let none = FailedLinks::new();
        for asns in AsnPlan::ALL {
            // e-p0-0's FIB as the plan has it: every remote /24 over both aggregation switches.
            let mut builder = Fib::builder();
            let up = topology.up_ports(edge.id);
            for port in &edge.ports {
                let up_position = up.iter().position(|p| p.index == port.index);
                builder.port(
                    PortId(port.index.0),
                    Port {
                        ifindex: u32::from(port.index.0) + 1,
                        mac: [2, 0, 0, 0, 0, port.index.0 as u8],
                        role: if up_position.is_some() {
                            PortRole::Up
                        } else {
                            PortRole::Host
                        },
                        up_position: up_position.map(|p| p as u8),
                        oper_up: true,
                    },
                );
            }
            let routes = ofan_topology::plan::switch_routes(&topology, &none, edge.id);
            for ((addr, len), hops) in &routes {
                let group = builder.group(hops.iter().map(|hop| NextHop {
                    port: PortId(hop.port.0),
                    gateway: IpAddr::V4(hop.gateway),
                    mac: Some([2, 0, 0, 0, 1, 1]),
                }));
                let prefix = IpPrefix::new(IpAddr::V4(*addr), *len).unwrap();
                builder.route(prefix, RouteTarget::Group(group));
            }
            let fib = builder.build().unwrap();
            let learned = LearnedPaths::from_plan(&topology, edge.id, asns);
            let names: Vec<String> = edge.ports.iter().map(|p| p.ifname.clone()).collect();
            let reported = reported_paths(&report(&fib, &learned, PathSource::Plan, &names));
            let expected = expected_paths(&topology, asns, &none, edge);
            assert_eq!(reported, expected, "{asns}");
            let towards_pod_3 = &expected["10.3.1.0/24"];
            assert!(towards_pod_3.iter().all(|row| row.next_next_ids.len() == 2));
            let core_asns = towards_pod_3[0].next_next.len();
            assert_eq!(core_asns, if asns == AsnPlan::Unique { 2 } else { 1 });
        }
    }
}
