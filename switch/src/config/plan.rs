//! The switch's place in a topology file (`--topology` with `--node`): the defaults for its
//! ports, roles, destination keys and adaptive-routing neighbours.

use std::path::Path;

use ofan_control::notify::speaker::{Identity, Neighbour};
use ofan_dataplane::fib::IpPrefix;
use ofan_dataplane::lb::DestKey;
use ofan_topology::dragonfly::RouterId;
use ofan_topology::plan::AsnPlan;
use ofan_topology::{DragonflyShape, NodeId, PortDirection, Role, Topology};

use super::file::{PortEntry, RoleName};
use super::{error, ConfigError};

/// The switch's place in a topology: the defaults for ports, roles and keys.
pub(super) struct Plan {
    pub(super) topology: Topology,
    pub(super) node: NodeId,
    /// How the fabric numbers its switches' ASNs (`bgp.asn_plan`).
    pub(super) asns: AsnPlan,
}

impl Plan {
    pub(super) fn load(path: &Path, node: &str, asns: AsnPlan) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error("topology", format!("cannot read {}: {e}", path.display())))?;
        let topology = Topology::from_json(&text)
            .map_err(|e| error("topology", format!("{}: {e}", path.display())))?;
        let node = topology
            .nodes()
            .iter()
            .find(|n| n.name == node)
            .ok_or_else(|| {
                error(
                    "node",
                    format!("no node named `{node}` in {}", path.display()),
                )
            })?;
        if node.role == Role::Host {
            return Err(error(
                "node",
                format!("`{}` is a host, not a switch", node.name),
            ));
        }
        Ok(Self {
            node: node.id,
            topology,
            asns,
        })
    }

    pub(super) fn ports(&self) -> Vec<PortEntry> {
        let node = self.topology.node(self.node);
        node.ports
            .iter()
            .map(|port| PortEntry {
                name: port.ifname.clone(),
                role: match (port.direction, self.topology.role(port.peer)) {
                    (_, Role::Host) => RoleName::Host,
                    (PortDirection::Up, _) => RoleName::Up,
                    (PortDirection::Down, _) => RoleName::Down,
                },
                queues: None,
                link_rate: None,
                buffer: None,
            })
            .collect()
    }

    /// Destination keys of every edge prefix as seen from this switch (edge switches: the
    /// destination edge; aggregation switches: the destination pod).
    pub(super) fn keys(&self) -> Vec<(IpPrefix, DestKey)> {
        let mut keys = Vec::new();
        for edge in self.topology.edges() {
            let (network, len) = self.topology.edge_prefix(edge.id);
            // Any host under that edge gives its key here.
            let Some(host) = edge
                .ports
                .iter()
                .find(|p| self.topology.role(p.peer) == Role::Host)
            else {
                continue;
            };
            let host_addr = self.topology.node(host.peer).loopback;
            if let Some(key) = self.topology.dest_key(self.node, host_addr) {
                let prefix =
                    IpPrefix::new(network.into(), len).expect("edge prefixes have no host bits");
                keys.push((prefix, key));
            }
        }
        keys
    }

    /// A switch's identity in notifications: its ASN under the plan's numbering and its
    /// loopback as router ID.
    pub(super) fn identity(&self, node: NodeId) -> Identity {
        let node = self.topology.node(node);
        Identity {
            asn: self.asns.asn(&self.topology, node),
            router_id: node.loopback,
        }
    }

    /// Every switch of the plan by ASN → router ID, leaving out an ASN that several switches
    /// share (it names no one switch).
    pub(super) fn router_ids(&self) -> std::collections::BTreeMap<u32, std::net::Ipv4Addr> {
        let mut by_asn: std::collections::BTreeMap<u32, Option<std::net::Ipv4Addr>> =
            std::collections::BTreeMap::new();
        for node in self.topology.switches() {
            let id = self.identity(node.id);
            by_asn
                .entry(id.asn)
                .and_modify(|shared| *shared = None)
                .or_insert(Some(id.router_id));
        }
        by_asn
            .into_iter()
            .filter_map(|(asn, id)| Some((asn, id?)))
            .collect()
    }

    /// The switches behind this switch's ports, by the port ids of `ports` (matched by
    /// interface name).
    pub(super) fn neighbours(&self, ports: &[PortEntry]) -> Vec<Neighbour> {
        let node = self.topology.node(self.node);
        node.ports
            .iter()
            .filter(|port| self.topology.role(port.peer).is_switch())
            .filter_map(|port| {
                let index = ports.iter().position(|p| p.name == port.ifname)?;
                let peer = self.topology.node(port.peer);
                let addr = peer
                    .ports
                    .iter()
                    .find(|p| p.index == port.peer_port)?
                    .address;
                Some(Neighbour {
                    port: index as u32,
                    addr,
                    id: self.identity(port.peer),
                })
            })
            .collect()
    }

    /// The hosts behind this switch's host ports among `ports` (matched by interface name),
    /// by their address on the link.
    pub(super) fn host_addresses(&self, ports: &[PortEntry]) -> Vec<std::net::Ipv4Addr> {
        let node = self.topology.node(self.node);
        node.ports
            .iter()
            .filter(|port| self.topology.role(port.peer) == Role::Host)
            .filter(|port| ports.iter().any(|p| p.name == port.ifname))
            .map(|port| self.topology.port(port.peer, port.peer_port).address)
            .collect()
    }

    /// The dragonfly and this switch's router in it, if the plan is a dragonfly.
    pub(super) fn dragonfly_router(&self) -> Option<(DragonflyShape, RouterId)> {
        let dragonfly = self.topology.dragonfly()?;
        let router = self
            .topology
            .edges()
            .iter()
            .position(|edge| edge.id == self.node)?;
        Some((dragonfly.shape(), RouterId(router as u32)))
    }

    pub(super) fn key_count(&self) -> u32 {
        self.topology.dest_key_count(self.node)
    }
}
