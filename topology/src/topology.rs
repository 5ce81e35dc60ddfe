//! [`Topology`]: construction, validation, (de)serialization and structural queries.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::addressing::{self, Owner, EDGE_PREFIX_LEN};
use crate::construct;
use crate::dragonfly::{Dragonfly, RouterId};
use crate::error::TopologyError;
use crate::model::{
    Link, LinkId, Node, NodeId, Port, PortDirection, PortIndex, Role, TopologyKind,
};
use crate::shape::Shape;

/// A fat-tree or leaf-spine network as plain data: nodes, their ports, links and addresses.
///
/// A `Topology` is always canonical for its [`TopologyKind`]: node ids, port numbering, names
/// and addresses follow the contract in the crate documentation. The constructors build it that
/// way and [`Topology::from_json`] rejects anything else, so every query can rely on it.
///
/// Only `kind`, `nodes` and `links` are serialized; the dimensions are recomputed on
/// deserialization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TopologyData")]
pub struct Topology {
    kind: TopologyKind,
    nodes: Vec<Node>,
    links: Vec<Link>,
    #[serde(skip)]
    shape: Shape,
    /// The dragonfly's structure, for a [`TopologyKind::Dragonfly`].
    #[serde(skip)]
    dragonfly: Option<Dragonfly>,
}

/// The serialized form of a [`Topology`], before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyData {
    kind: TopologyKind,
    nodes: Vec<Node>,
    links: Vec<Link>,
}

impl TryFrom<TopologyData> for Topology {
    type Error = TopologyError;

    fn try_from(data: TopologyData) -> Result<Self, Self::Error> {
        validate(data)
    }
}

impl Topology {
    /// Builds the three-tier k-ary fat tree: k pods of k/2 edge and k/2 aggregation switches,
    /// (k/2)² cores, k³/4 hosts and 3k³/4 links.
    ///
    /// # Errors
    ///
    /// [`TopologyError::OddOrOutOfRangeK`] unless `k` is even and in `4..=64`.
    pub fn fat_tree(k: u16) -> Result<Self, TopologyError> {
        Self::new(TopologyKind::FatTree { k })
    }

    /// Builds the two-tier leaf-spine of radix k: k leaves with k/2 hosts each, k/2 spines, and
    /// a link between every leaf and every spine.
    ///
    /// # Errors
    ///
    /// [`TopologyError::OddOrOutOfRangeK`] unless `k` is even and in `4..=64`.
    pub fn leaf_spine(k: u16) -> Result<Self, TopologyError> {
        Self::new(TopologyKind::LeafSpine { k })
    }

    /// Builds the canonical topology of `kind`.
    ///
    /// # Errors
    ///
    /// [`TopologyError::OddOrOutOfRangeK`] unless the radix is even and in `4..=64`.
    pub fn new(kind: TopologyKind) -> Result<Self, TopologyError> {
        let shape = Shape::new(kind)?;
        let (nodes, links) = construct::build(&shape);
        Ok(Self {
            kind,
            nodes,
            links,
            shape,
            dragonfly: shape.dragonfly.map(Dragonfly::new),
        })
    }

    /// Serializes the topology to compact JSON.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a topology always serializes: no maps, no floats")
    }

    /// Serializes the topology to indented JSON, for files meant to be read by people.
    #[must_use]
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a topology always serializes: no maps, no floats")
    }

    /// Reads a topology written by [`Topology::to_json`] and validates it.
    ///
    /// # Errors
    ///
    /// [`TopologyError::Parse`] if the text is not a topology document; otherwise the first
    /// inconsistency found: a bad radix, wrong node or link counts, ids that are not positions,
    /// a link end naming a missing port or a port not attached to it
    /// ([`TopologyError::DanglingLink`]), a peer that does not point back
    /// ([`TopologyError::AsymmetricPeer`]), or any difference from the canonical topology of
    /// the declared kind ([`TopologyError::NonCanonical`]).
    pub fn from_json(json: &str) -> Result<Self, TopologyError> {
        let data: TopologyData =
            serde_json::from_str(json).map_err(|source| TopologyError::Parse { source })?;
        validate(data)
    }

    /// The kind and radix of the topology.
    #[must_use]
    pub const fn kind(&self) -> TopologyKind {
        self.kind
    }

    /// The switch radix.
    #[must_use]
    pub const fn k(&self) -> u16 {
        self.kind.k()
    }

    /// Number of pods: k in a fat tree, 1 in leaf-spine (all leaves form pod 0), the groups in a
    /// dragonfly.
    #[must_use]
    pub fn num_pods(&self) -> u16 {
        u16::try_from(self.shape.pods).expect("at most 255 pods")
    }

    /// The dragonfly's structure (minimal and Valiant paths, channels), for a
    /// [`TopologyKind::Dragonfly`]: its routers are this topology's edges in the same order
    /// (router `r` is `edges()[r]`), its hosts this topology's hosts.
    #[must_use]
    pub const fn dragonfly(&self) -> Option<&Dragonfly> {
        self.dragonfly.as_ref()
    }

    pub(crate) const fn shape(&self) -> &Shape {
        &self.shape
    }

    /// All nodes, indexed by [`NodeId`]: hosts, then edges, aggregations and cores, each tier in
    /// (pod, index) order.
    #[must_use]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All links, indexed by [`LinkId`]: host links in host order, then edge up-links in
    /// (edge, up port) order, then aggregation up-links in (aggregation, up port) order.
    #[must_use]
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The node with id `id`, if it exists.
    #[must_use]
    pub fn get_node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.get(id.index())
    }

    /// The node with id `id`.
    ///
    /// # Panics
    ///
    /// If `id` is not a node of this topology.
    #[must_use]
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// The link with id `id`.
    ///
    /// # Panics
    ///
    /// If `id` is not a link of this topology.
    #[must_use]
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.index()]
    }

    /// The role of node `id`.
    ///
    /// # Panics
    ///
    /// If `id` is not a node of this topology.
    #[must_use]
    pub fn role(&self, id: NodeId) -> Role {
        self.node(id).role
    }

    /// All hosts, in id order (pod, edge, slot).
    #[must_use]
    pub fn hosts(&self) -> &[Node] {
        &self.nodes[..self.shape.first_edge() as usize]
    }

    /// All switches, in id order: edges, aggregations, cores. A switch's position in this slice
    /// is its switch number (see the addressing plan).
    #[must_use]
    pub fn switches(&self) -> &[Node] {
        &self.nodes[self.shape.first_edge() as usize..]
    }

    /// All edge switches (leaves), in id order. A switch's position in this slice is its global
    /// edge number `pod · edges_per_pod + index`, which is also the [`crate::DestKey`] that
    /// names it at other edge switches; in a multi-plane fabric the position is
    /// `plane · E + pod · edges_per_pod + index` (E edges per plane) and the key the position
    /// within the plane.
    #[must_use]
    pub fn edges(&self) -> &[Node] {
        &self.nodes[self.shape.first_edge() as usize..self.shape.first_agg() as usize]
    }

    /// All aggregation switches, in (pod, index) order; empty in leaf-spine.
    #[must_use]
    pub fn aggregations(&self) -> &[Node] {
        &self.nodes[self.shape.first_agg() as usize..self.shape.first_core() as usize]
    }

    /// All core switches (spines), in index order.
    #[must_use]
    pub fn cores(&self) -> &[Node] {
        &self.nodes[self.shape.first_core() as usize..]
    }

    /// The ports of `id` that face the cores, in port order (a suffix of the node's ports). The
    /// i-th entry is "up-port position i" in [`crate::Topology::valid_up_mask`].
    ///
    /// # Panics
    ///
    /// If `id` is not a node of this topology.
    #[must_use]
    pub fn up_ports(&self, id: NodeId) -> &[Port] {
        let ports = &self.node(id).ports;
        &ports[first_up(ports)..]
    }

    /// The ports of `id` that face the hosts, in port order (a prefix of the node's ports).
    ///
    /// # Panics
    ///
    /// If `id` is not a node of this topology.
    #[must_use]
    pub fn down_ports(&self, id: NodeId) -> &[Port] {
        let ports = &self.node(id).ports;
        &ports[..first_up(ports)]
    }

    /// Port `port` of node `node`.
    ///
    /// # Panics
    ///
    /// If the node or the port does not exist.
    #[must_use]
    pub fn port(&self, node: NodeId, port: PortIndex) -> &Port {
        &self.node(node).ports[port.index()]
    }

    /// The node and port at the other end of `port` of `node`.
    ///
    /// # Panics
    ///
    /// If the node or the port does not exist.
    #[must_use]
    pub fn neighbor(&self, node: NodeId, port: PortIndex) -> (NodeId, PortIndex) {
        let port = self.port(node, port);
        (port.peer, port.peer_port)
    }

    /// The link joining `a` and `b`, if they are adjacent.
    ///
    /// # Panics
    ///
    /// If `a` does not exist.
    #[must_use]
    pub fn link_between(&self, a: NodeId, b: NodeId) -> Option<LinkId> {
        self.node(a)
            .ports
            .iter()
            .find(|port| port.peer == b)
            .map(|port| port.link)
    }

    /// The edge switch (leaf) host `host` is attached to; in a multi-plane fabric, its edge in
    /// plane 0 (port 0's peer: [`Topology::host_edge_in`] names the others). Every plane has
    /// the same pod and index there, so what depends on the edge's position alone (hop counts,
    /// pods, leaf numbers) holds in every plane.
    ///
    /// # Panics
    ///
    /// If `host` is not a host of this topology.
    #[must_use]
    pub fn host_edge(&self, host: NodeId) -> NodeId {
        self.expect_host(host).ports[0].peer
    }

    /// The edge switch host `host` is attached to in plane `plane`: its port `plane`'s peer.
    ///
    /// # Panics
    ///
    /// If `host` is not a host, or `plane` is not a plane, of this topology.
    #[must_use]
    pub fn host_edge_in(&self, host: NodeId, plane: u8) -> NodeId {
        self.expect_host(host).ports[usize::from(plane)].peer
    }

    /// Number of planes: a host's ports (1 unless [`TopologyKind::MultiPlane`]).
    #[must_use]
    pub fn planes(&self) -> u8 {
        u8::try_from(self.shape.planes).expect("at most MAX_PLANES planes")
    }

    /// The plane of switch `id` (`None` for a host, which is in every plane).
    ///
    /// # Panics
    ///
    /// If `id` is not a node of this topology.
    #[must_use]
    pub fn plane_of(&self, id: NodeId) -> Option<u8> {
        (self.role(id) != Role::Host)
            .then(|| u8::try_from(self.shape.plane_of(id)).expect("at most MAX_PLANES planes"))
    }

    /// The destination-edge prefix of edge switch `edge`: `10.pod.index.0/24`, which holds the
    /// addresses of all its hosts and of its host-facing ports.
    ///
    /// # Panics
    ///
    /// If `edge` is not an edge switch of this topology.
    #[must_use]
    pub fn edge_prefix(&self, edge: NodeId) -> (Ipv4Addr, u8) {
        let node = self.node(edge);
        assert_eq!(node.role, Role::Edge, "{edge} is not an edge switch");
        let pod = u32::from(node.pod.expect("edges belong to a pod"));
        let pod_octet = self.shape.plane_of(edge) * self.shape.pods + pod;
        (
            addressing::edge_prefix(pod_octet, u32::from(node.index)),
            EDGE_PREFIX_LEN,
        )
    }

    /// The node owning `ip`: a host's address, either end of any link, or a switch loopback.
    #[must_use]
    pub fn node_by_addr(&self, ip: Ipv4Addr) -> Option<NodeId> {
        let shape = &self.shape;
        Some(match addressing::owner(shape, ip)? {
            Owner::HostLink {
                edge_number,
                slot,
                edge_side,
            } => {
                if edge_side {
                    shape.edge(edge_number)
                } else {
                    let local = edge_number % shape.plane_edges();
                    let pod = local / shape.edges_per_pod;
                    shape.host(pod, local % shape.edges_per_pod, slot)
                }
            }
            Owner::SwitchLink { number, upper_end } => {
                let link = self.link(shape.switch_link(number));
                if upper_end {
                    link.b.0
                } else {
                    link.a.0
                }
            }
            Owner::Loopback { number } => shape.switch(number),
        })
    }

    /// Number of links on a shortest path from host `src` to host `dst`: 0 to itself, 2 under
    /// the same edge, 4 within a pod (or between leaves), 6 between pods (in every plane of a
    /// multi-plane fabric alike); in a dragonfly 2 plus the router hops of the minimal path (at
    /// most 5).
    ///
    /// # Panics
    ///
    /// If either node is not a host.
    #[must_use]
    pub fn hop_count(&self, src: NodeId, dst: NodeId) -> u32 {
        let (src_edge, dst_edge) = (self.host_edge(src), self.host_edge(dst));
        if src == dst {
            0
        } else if let Some(dragonfly) = &self.dragonfly {
            let router = |edge| RouterId(self.shape.edge_number(edge));
            2 + dragonfly.minimal_hops(router(src_edge), router(dst_edge))
        } else if src_edge == dst_edge {
            2
        } else if self.node(src_edge).pod == self.node(dst_edge).pod {
            4
        } else {
            6
        }
    }

    /// The host node `host`, checked.
    pub(crate) fn expect_host(&self, host: NodeId) -> &Node {
        let node = self.node(host);
        assert_eq!(node.role, Role::Host, "{host} is not a host");
        node
    }

    /// The node `id` if it is a host.
    pub(crate) fn check_host(&self, id: NodeId) -> Result<&Node, TopologyError> {
        let node = self.get_node(id).ok_or(TopologyError::UnknownNode {
            node: id,
            count: self.nodes.len(),
        })?;
        if node.role == Role::Host {
            Ok(node)
        } else {
            Err(TopologyError::UnexpectedRole {
                node: id,
                expected: Role::Host,
                found: node.role,
            })
        }
    }
}

/// Position of the first up port; ports are sorted down-then-up.
fn first_up(ports: &[Port]) -> usize {
    ports.partition_point(|port| port.direction == PortDirection::Down)
}

/// Checks a deserialized document, cheapest and most specific checks first.
fn validate(data: TopologyData) -> Result<Topology, TopologyError> {
    let TopologyData { kind, nodes, links } = data;
    let shape = Shape::new(kind)?;
    for (what, expected, found) in [
        ("nodes", shape.num_nodes() as usize, nodes.len()),
        ("links", shape.num_links() as usize, links.len()),
    ] {
        if expected != found {
            return Err(TopologyError::CountMismatch {
                kind,
                what,
                expected,
                found,
            });
        }
    }
    for (position, node) in nodes.iter().enumerate() {
        if node.id.index() != position {
            return Err(TopologyError::NodeIdMismatch {
                position,
                found: node.id,
            });
        }
        for (position, port) in node.ports.iter().enumerate() {
            if port.index.index() != position {
                return Err(TopologyError::PortIndexMismatch {
                    node: node.id,
                    position,
                    found: port.index,
                });
            }
        }
    }
    let port_at = |(node, port): (NodeId, PortIndex)| -> Option<&Port> {
        nodes.get(node.index())?.ports.get(port.index())
    };
    for (position, link) in links.iter().enumerate() {
        if link.id.index() != position {
            return Err(TopologyError::LinkIdMismatch {
                position,
                found: link.id,
            });
        }
        let dangling = |(node, port)| TopologyError::DanglingLink {
            link: link.id,
            node,
            port,
        };
        for end in [link.a, link.b] {
            if port_at(end).is_none() {
                return Err(dangling(end));
            }
        }
        for (end, other) in [(link.a, link.b), (link.b, link.a)] {
            let attached = port_at(end)
                .is_some_and(|port| port.link == link.id && (port.peer, port.peer_port) == other);
            if !attached {
                return Err(dangling(end));
            }
        }
    }
    for node in &nodes {
        for port in &node.ports {
            let end = (node.id, port.index);
            let symmetric = links
                .get(port.link.index())
                .is_some_and(|link| link.a == end || link.b == end)
                && port_at((port.peer, port.peer_port))
                    .is_some_and(|back| (back.peer, back.peer_port) == end);
            if !symmetric {
                return Err(TopologyError::AsymmetricPeer {
                    node: node.id,
                    port: port.index,
                });
            }
        }
    }
    let canonical = Topology::new(kind)?;
    if let Some(item) = first_difference(&canonical, &nodes, &links) {
        return Err(TopologyError::NonCanonical { kind, item });
    }
    Ok(Topology {
        kind,
        nodes,
        links,
        shape,
        dragonfly: canonical.dragonfly,
    })
}

/// Describes the first node or link that differs from the canonical topology.
fn first_difference(canonical: &Topology, nodes: &[Node], links: &[Link]) -> Option<String> {
    for (expected, found) in canonical.nodes.iter().zip(nodes) {
        if expected == found {
            continue;
        }
        let field = if expected.role != found.role {
            "role".to_owned()
        } else if expected.name != found.name {
            "name".to_owned()
        } else if expected.pod != found.pod {
            "pod".to_owned()
        } else if expected.index != found.index {
            "index".to_owned()
        } else if expected.loopback != found.loopback {
            "loopback".to_owned()
        } else {
            let position = expected
                .ports
                .iter()
                .zip(&found.ports)
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| expected.ports.len().min(found.ports.len()));
            format!("port {position}")
        };
        return Some(format!("{} ({}): {field}", expected.id, expected.name));
    }
    canonical
        .links
        .iter()
        .zip(links)
        .find(|(expected, found)| expected != found)
        .map(|(expected, _)| expected.id.to_string())
}
