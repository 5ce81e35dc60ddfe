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

    #[test]
    fn names() {
        assert_eq!(namespace("lab", "e-p0-1"), "ofan-lab-e-p0-1");
        assert!(valid_lab_name("lab2"));
        assert!(!valid_lab_name("lab-2"));
        assert!(!valid_lab_name(""));
    }
}
