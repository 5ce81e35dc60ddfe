//! What a lab *should* look like, computed from the topology alone (pure, unit-tested): the
//! namespace of every node and the static routes of every switch under a set of failed links.
//!
//! The routes themselves are the topology's routing plan ([`ofan_topology::plan`]), which the
//! switch also uses for path information when no BGP daemon tells it.

use std::net::Ipv4Addr;

use ofan_topology::{FailedLinks, NodeId, Topology};

pub use ofan_topology::plan::{switch_routes, Hop, Prefix, RouteTable};

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

/// A host's gateway: its edge switch's address on the host link (in a multi-plane fabric, the
/// one of plane 0).
pub fn host_gateway(topology: &Topology, host: NodeId) -> Ipv4Addr {
    host_gateway_in(topology, host, 0)
}

/// A host's gateway in plane `plane`: its plane-`plane` edge switch's address on the link to
/// the host's port `plane`.
pub fn host_gateway_in(topology: &Topology, host: NodeId, plane: u8) -> Ipv4Addr {
    let port = &topology.node(host).ports[usize::from(plane)];
    topology.port(port.peer, port.peer_port).address
}

/// One route of a host: `prefix/len` through its port `plane` (interface `ifname`) to that
/// plane's gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRoute {
    /// Destination prefix.
    pub prefix: Ipv4Addr,
    /// Its length.
    pub len: u8,
    /// The host port (= plane) the route leaves on.
    pub plane: u8,
    /// The port's interface name.
    pub ifname: String,
    /// The plane's edge switch's address on the host link.
    pub gateway: Ipv4Addr,
}

/// The routes of host `host`: a default route through its port 0, and, in a multi-plane
/// fabric, every edge switch's prefix of plane i through port i.
///
/// Why this is enough: planes are disjoint and every address names its plane (the second
/// octet is `plane · pods + pod`), so a packet to a destination's plane-i address must leave
/// on the host's plane-i NIC, and these routes (longer than the default) send it there. The
/// kernel then takes the source address of that NIC, so the reply, addressed to it, comes back
/// through plane i too: choosing the destination *address* chooses the plane, both ways, with
/// no policy routing (`ip rule`) and no source-address tables. The traffic agent sends each
/// packet to the destination's address on the plane its host policy chose.
pub fn host_routes(topology: &Topology, host: NodeId) -> Vec<HostRoute> {
    let node = topology.node(host);
    let route = |prefix, len, plane: u8| HostRoute {
        prefix,
        len,
        plane,
        ifname: node.ports[usize::from(plane)].ifname.clone(),
        gateway: host_gateway_in(topology, host, plane),
    };
    let mut routes = vec![route(Ipv4Addr::UNSPECIFIED, 0, 0)];
    if topology.planes() > 1 {
        for edge in topology.edges() {
            let plane = topology
                .plane_of(edge.id)
                .expect("an edge switch is in a plane");
            let (prefix, len) = topology.edge_prefix(edge.id);
            routes.push(route(prefix, len, plane));
        }
    }
    routes
}

/// A host's address in every plane (one entry in a single-plane fabric): the address of its
/// port i, which the routes of [`host_routes`] lead to through plane i.
pub fn host_addresses(topology: &Topology, host: NodeId) -> Vec<Ipv4Addr> {
    topology
        .node(host)
        .ports
        .iter()
        .map(|port| port.address)
        .collect()
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

    use ofan_topology::{PlaneKind, TopologyKind};

    /// In a 2-plane fat tree every host reaches each plane's edge prefixes through that plane's
    /// port and gateway, and the addresses it is reached at are its ports', one per plane.
    #[test]
    fn host_routes_per_plane() {
        let topology = Topology::new(TopologyKind::MultiPlane {
            plane: PlaneKind::FatTree,
            planes: 2,
            k: 4,
        })
        .unwrap();
        let host = topology.hosts()[5].id;
        let routes = host_routes(&topology, host);
        assert_eq!(
            routes.len(),
            1 + 2 * 8,
            "a default and 8 edge prefixes per plane"
        );
        assert_eq!(
            (routes[0].prefix, routes[0].len, routes[0].plane),
            (Ipv4Addr::UNSPECIFIED, 0, 0)
        );
        let addresses = host_addresses(&topology, host);
        assert_eq!(addresses.len(), 2);
        for other in topology.hosts() {
            for (plane, &address) in host_addresses(&topology, other.id).iter().enumerate() {
                // The longest matching route leaves on the destination address's plane.
                let best = routes
                    .iter()
                    .filter(|route| {
                        let mask = u32::MAX.checked_shl(32 - u32::from(route.len)).unwrap_or(0);
                        u32::from(address) & mask == u32::from(route.prefix) & mask
                    })
                    .max_by_key(|route| route.len)
                    .unwrap();
                assert_eq!(
                    usize::from(best.plane),
                    plane,
                    "{} plane {plane}",
                    other.name
                );
                assert_eq!(best.ifname, topology.node(host).ports[plane].ifname);
                assert_eq!(best.gateway, host_gateway_in(&topology, host, plane as u8));
                let edge = topology.host_edge_in(host, plane as u8);
                assert_eq!(topology.node_by_addr(best.gateway), Some(edge));
            }
        }
        // One plane: the default route alone, as before planes existed.
        let single = Topology::fat_tree(4).unwrap();
        let routes = host_routes(&single, single.hosts()[0].id);
        assert_eq!(routes.len(), 1);
        assert_eq!(
            routes[0].gateway,
            host_gateway(&single, single.hosts()[0].id)
        );
    }

    #[test]
    fn names() {
        assert_eq!(namespace("lab", "e-p0-1"), "ofan-lab-e-p0-1");
        assert!(valid_lab_name("lab2"));
        assert!(!valid_lab_name("lab-2"));
        assert!(!valid_lab_name(""));
    }
}
