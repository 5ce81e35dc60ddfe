//! The kernel's forwarding state as the mirror reads it: one dump's links, addresses, routes of
//! the main and local tables, next-hop objects and neighbours, gathered from the messages the
//! codec ([`ofan_netlink`]) parses, and the hops of a route with its next-hop object expanded.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ofan_netlink::{
    parse_address, parse_link, parse_neighbor, parse_nexthop, parse_route, Address, Link, Message,
    NeighborKind, NexthopObject, Route, RouteHop, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEIGH,
    RTM_NEWNEXTHOP, RTM_NEWROUTE, RT_TABLE_LOCAL, RT_TABLE_MAIN,
};

/// Everything the mirror reads from the kernel, as of one dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelState {
    /// Interfaces by index.
    pub links: BTreeMap<u32, Link>,
    /// Addresses.
    pub addresses: Vec<Address>,
    /// Routes of the main and local tables.
    pub routes: Vec<Route>,
    /// Next-hop objects by id.
    pub nexthops: BTreeMap<u32, NexthopObject>,
    /// Neighbours by (interface, address).
    pub neighbors: BTreeMap<(u32, IpAddr), NeighborEntry>,
}

/// A neighbour as the kernel holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighborEntry {
    /// Its MAC address, when resolved.
    pub mac: Option<[u8; 6]>,
    /// Who keeps the entry.
    pub kind: NeighborKind,
}

impl KernelState {
    /// Adds one dumped message.
    pub fn absorb(&mut self, message: &Message<'_>) {
        match message.kind {
            RTM_NEWLINK => {
                if let Some(link) = parse_link(message.payload) {
                    self.links.insert(link.index, link);
                }
            }
            RTM_NEWADDR => self.addresses.extend(parse_address(message.payload)),
            RTM_NEWROUTE => {
                if let Some(route) = parse_route(message.payload) {
                    if route.table == RT_TABLE_MAIN || route.table == RT_TABLE_LOCAL {
                        self.routes.push(route);
                    }
                }
            }
            RTM_NEWNEXTHOP => {
                if let Some((id, object)) = parse_nexthop(message.payload) {
                    self.nexthops.insert(id, object);
                }
            }
            RTM_NEWNEIGH => {
                if let Some(neighbor) = parse_neighbor(message.payload) {
                    self.neighbors.insert(
                        (neighbor.ifindex, neighbor.addr),
                        NeighborEntry {
                            mac: neighbor.mac,
                            kind: neighbor.kind,
                        },
                    );
                }
            }
            _ => {}
        }
    }

    /// Whether `other` routes differently: its routes or next-hop objects differ from these
    /// (links, addresses and neighbours aside: a neighbour's entry ageing is no route change).
    #[must_use]
    pub fn routes_differ(&self, other: &Self) -> bool {
        self.routes != other.routes || self.nexthops != other.nexthops
    }

    /// The hops of a route, with next-hop objects expanded.
    pub fn hops_of(&self, hops: &[RouteHop], nh_id: Option<u32>) -> Option<Vec<RouteHop>> {
        let Some(id) = nh_id else {
            return Some(hops.to_vec());
        };
        match self.nexthops.get(&id)? {
            NexthopObject::Hop(hop) => Some(vec![*hop]),
            NexthopObject::Blackhole => None,
            NexthopObject::Group(members) => Some(
                members
                    .iter()
                    .filter_map(|member| match self.nexthops.get(member) {
                        Some(NexthopObject::Hop(hop)) => Some(*hop),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn hop(ifindex: u32, last: u8) -> RouteHop {
        RouteHop {
            ifindex,
            gateway: Some(IpAddr::V4(Ipv4Addr::new(100, 64, 0, last))),
        }
    }

    #[test]
    fn next_hop_objects_expand_to_their_hops() {
        let mut state = KernelState::default();
        state.nexthops.insert(1, NexthopObject::Hop(hop(5, 1)));
        state.nexthops.insert(2, NexthopObject::Hop(hop(6, 3)));
        state.nexthops.insert(3, NexthopObject::Blackhole);
        state
            .nexthops
            .insert(9, NexthopObject::Group(vec![1, 2, 3, 4]));
        // A group keeps its member hops (a blackhole or missing member adds none).
        assert_eq!(
            state.hops_of(&[], Some(9)),
            Some(vec![hop(5, 1), hop(6, 3)])
        );
        assert_eq!(state.hops_of(&[], Some(1)), Some(vec![hop(5, 1)]));
        assert_eq!(state.hops_of(&[], Some(3)), None);
        assert_eq!(state.hops_of(&[], Some(77)), None);
        // Without an object id, the route's own hops.
        assert_eq!(state.hops_of(&[hop(7, 9)], None), Some(vec![hop(7, 9)]));
    }

    #[test]
    fn routes_outside_the_main_and_local_tables_are_left_out() {
        // rtmsg: AF_INET, /0, table 100 (then main), proto static, scope universe, unicast.
        let mut state = KernelState::default();
        for table in [100u8, 254] {
            let payload = [2, 0, 0, 0, table, 4, 0, 1, 0, 0, 0, 0];
            state.absorb(&Message {
                kind: RTM_NEWROUTE,
                seq: 1,
                payload: &payload,
            });
        }
        assert_eq!(state.routes.len(), 1);
        assert_eq!(state.routes[0].table, RT_TABLE_MAIN);
    }

    #[test]
    fn only_routes_and_next_hop_objects_make_a_route_change() {
        let route = |last| Route {
            dst: IpAddr::V4(Ipv4Addr::new(10, 2, 0, 0)),
            prefix_len: 24,
            table: RT_TABLE_MAIN,
            metric: 20,
            kind: ofan_netlink::RouteKind::Unicast {
                hops: vec![hop(5, last)],
                nh_id: None,
            },
        };
        let mut before = KernelState::default();
        before.routes.push(route(1));
        before.nexthops.insert(1, NexthopObject::Hop(hop(5, 1)));

        // A neighbour learnt or forgotten, an address added: the same routes.
        let mut after = before.clone();
        after.neighbors.insert(
            (5, IpAddr::V4(Ipv4Addr::new(100, 64, 0, 1))),
            NeighborEntry {
                mac: None,
                kind: NeighborKind::Dynamic,
            },
        );
        after.addresses.push(Address {
            index: 5,
            addr: IpAddr::V4(Ipv4Addr::new(100, 64, 0, 0)),
            prefix_len: 31,
        });
        assert!(!after.routes_differ(&before));

        // Another hop, a route gone, a next-hop object replaced: a change each.
        let mut rerouted = before.clone();
        rerouted.routes[0] = route(3);
        assert!(rerouted.routes_differ(&before));
        let mut withdrawn = before.clone();
        withdrawn.routes.clear();
        assert!(withdrawn.routes_differ(&before));
        let mut renumbered = before.clone();
        renumbered.nexthops.insert(1, NexthopObject::Hop(hop(6, 3)));
        assert!(renumbered.routes_differ(&before));
    }
}
