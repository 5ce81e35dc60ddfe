//! The switch's dragonfly stage hop by hop: packets forwarded router to router by the stage
//! and the lab's static minimal routes (longest-prefix match on the address the stage chose),
//! with the path tag carried in DSCP between them — what the lab's switches do, without the
//! sockets.

use std::net::Ipv4Addr;

use ofan_topology::dragonfly::{GroupId, RouterId};
use ofan_topology::plan::{switch_routes, RouteTable};
use ofan_topology::{FailedLinks, Topology, TopologyKind};

use crate::lb::dragonfly::{
    dscp_tag, tag_dscp, DragonflyRole, DragonflyRouter, DragonflyScheme, PathTag, RoleError,
};
use crate::lb::PortLoad;

fn lab() -> Topology {
    Topology::new(TopologyKind::Dragonfly { p: 1, a: 4, h: 2 }).unwrap()
}

fn routers(topology: &Topology, scheme: DragonflyScheme) -> Vec<DragonflyRouter> {
    let shape = topology.dragonfly().unwrap().shape();
    (0..shape.routers())
        .map(|r| {
            let role = DragonflyRole {
                shape,
                router: RouterId(r),
                scheme,
            };
            DragonflyRouter::new(role, u64::from(r) + 11).unwrap()
        })
        .collect()
}

fn lookup(table: &RouteTable, address: Ipv4Addr) -> Option<u16> {
    table
        .iter()
        .filter(|((network, len), _)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
            u32::from(address) & mask == u32::from(*network)
        })
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, hops)| hops[0].port.0)
}

/// A packet's trip: the routers it visits, and whether its source router detoured it.
struct Trip {
    routers: Vec<RouterId>,
    detoured: bool,
}

/// Forwards one packet from host `src` to host `dst` (indices), `loads` being every router's
/// queues by up position.
fn trip(
    topology: &Topology,
    routers: &mut [DragonflyRouter],
    loads: &mut [Vec<PortLoad>],
    src: usize,
    dst: usize,
) -> Trip {
    let none = FailedLinks::new();
    let (from, to) = (&topology.hosts()[src], &topology.hosts()[dst]);
    let edge_index = |node| topology.edges().iter().position(|e| e.id == node).unwrap();
    let mut at = edge_index(topology.host_edge(from.id));
    let last = edge_index(topology.host_edge(to.id));
    let (mut dscp, mut detoured) = (0u8, false);
    let mut visited = vec![RouterId(at as u32)];
    loop {
        let route = routers[at].route(from.loopback, to.loopback, dscp, 1500, &mut loads[at]);
        detoured |= route.detoured;
        dscp = route.dscp;
        if at == last && route.lookup == to.loopback {
            assert_eq!(dscp, 0, "delivered with a tag");
            break;
        }
        let table = switch_routes(topology, &none, topology.edges()[at].id);
        let port = lookup(&table, route.lookup)
            .unwrap_or_else(|| panic!("no route at router {at} for {}", route.lookup));
        let peer = topology
            .port(topology.edges()[at].id, ofan_topology::PortIndex(port))
            .peer;
        at = edge_index(peer);
        visited.push(RouterId(at as u32));
        assert!(visited.len() <= 6, "a loop: {visited:?}");
    }
    Trip {
        routers: visited,
        detoured,
    }
}

fn empty_loads(topology: &Topology) -> Vec<Vec<PortLoad>> {
    vec![vec![PortLoad::default(); 5]; topology.edges().len()]
}

#[test]
fn tags_ride_in_dscp_and_a_value_naming_no_group_is_no_tag() {
    for group in 0..9 {
        let tag = PathTag {
            via: Some(GroupId(group)),
        };
        assert_eq!(dscp_tag(tag_dscp(tag), 9), tag);
    }
    assert_eq!(tag_dscp(PathTag::default()), 0);
    assert_eq!(dscp_tag(0, 9), PathTag::default());
    assert_eq!(
        dscp_tag(10, 9),
        PathTag::default(),
        "group 9 of 9 does not exist"
    );
}

#[test]
fn minimal_routing_follows_the_minimal_path_untagged() {
    let topology = lab();
    let dragonfly = topology.dragonfly().unwrap();
    let mut routers = routers(&topology, DragonflyScheme::Min);
    let mut loads = empty_loads(&topology);
    for src in 0..36 {
        for dst in (0..36).filter(|&d| d != src) {
            let trip = trip(&topology, &mut routers, &mut loads, src, dst);
            let path = dragonfly.minimal_path(RouterId(src as u32), RouterId(dst as u32));
            assert_eq!(trip.routers, path, "{src} -> {dst}");
            assert!(!trip.detoured);
        }
    }
}

#[test]
fn valiant_visits_a_third_group_and_arrives_untagged() {
    let topology = lab();
    let dragonfly = topology.dragonfly().unwrap();
    let mut routers = routers(&topology, DragonflyScheme::Valiant);
    let mut loads = empty_loads(&topology);
    let mut intermediates = std::collections::BTreeSet::new();
    for src in 0..36 {
        for dst in (0..36).filter(|&d| d != src) {
            let trip = trip(&topology, &mut routers, &mut loads, src, dst);
            let group = |r: &RouterId| dragonfly.group_of(*r);
            let (from, to) = (group(&RouterId(src as u32)), group(&RouterId(dst as u32)));
            let others: Vec<GroupId> = trip
                .routers
                .iter()
                .map(group)
                .filter(|g| *g != from && *g != to)
                .collect();
            if from == to {
                assert!(others.is_empty() && !trip.detoured, "{src} -> {dst}");
            } else {
                assert!(trip.detoured, "{src} -> {dst}");
                assert!(!others.is_empty(), "{src} -> {dst}: {:?}", trip.routers);
                intermediates.insert(others[0]);
            }
        }
    }
    assert_eq!(
        intermediates.len(),
        9,
        "every group serves as an intermediate"
    );
}

#[test]
fn ugal_l_detours_only_when_its_minimal_first_hop_is_the_longer_queue() {
    let topology = lab();
    let mut routers = routers(&topology, DragonflyScheme::UgalL);
    let mut loads = empty_loads(&topology);
    // Host 0 (router 0 of group 0) to host 4 (router 0 of group 1): minimal over router 0's
    // global port 0 (channel 0), router port 4 (up position 3 with p = 1).
    let quiet = trip(&topology, &mut routers, &mut loads, 0, 4);
    assert!(!quiet.detoured);
    let dragonfly = topology.dragonfly().unwrap();
    assert_eq!(
        quiet.routers,
        dragonfly.minimal_path(RouterId(0), RouterId(4))
    );
    let mut loads = empty_loads(&topology);
    loads[0][3].bytes = 64_000;
    let busy = trip(&topology, &mut routers, &mut loads, 0, 4);
    assert!(busy.detoured, "{:?}", busy.routers);
    // The choice is charged to the queue it took, as the balancer charges its own.
    assert!(loads[0].iter().map(|l| l.bytes).sum::<u32>() > 64_000);
}

#[test]
fn traffic_that_is_not_between_two_hosts_is_looked_up_as_it_is() {
    let topology = lab();
    let mut routers = routers(&topology, DragonflyScheme::Valiant);
    let host = topology.hosts()[0].loopback;
    let switch = topology.edges()[20].loopback;
    let route = routers[0].route(host, switch, 5, 100, &mut [PortLoad::default(); 5]);
    assert_eq!(
        (route.lookup, route.dscp, route.detoured),
        (switch, 5, false)
    );
}

#[test]
fn a_switch_refuses_the_schemes_it_cannot_run() {
    let topology = lab();
    let shape = topology.dragonfly().unwrap().shape();
    for scheme in [DragonflyScheme::UgalG, DragonflyScheme::ArfUgal] {
        let role = DragonflyRole {
            shape,
            router: RouterId(0),
            scheme,
        };
        assert!(matches!(role.check(), Err(RoleError::ModelOnly { .. })));
    }
    let role = DragonflyRole {
        shape,
        router: RouterId(36),
        scheme: DragonflyScheme::Min,
    };
    assert!(matches!(role.check(), Err(RoleError::NoSuchRouter { .. })));
    let big = ofan_topology::DragonflyShape::new(1, 8, 8).unwrap();
    let role = DragonflyRole {
        shape: big,
        router: RouterId(0),
        scheme: DragonflyScheme::Min,
    };
    assert!(matches!(
        role.check(),
        Err(RoleError::TooManyGroups { groups: 65 })
    ));
}
