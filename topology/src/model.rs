//! The plain-data vocabulary of a topology: identifiers, nodes, ports and links.
//!
//! Everything here is inert data with public fields, so that a topology can be written to a file
//! and read back by any tool. A [`crate::Topology`] only hands these out by shared reference, so
//! the invariants it checks at construction cannot be broken through them.

use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// Identifier of a node (host or switch): its position in [`crate::Topology::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

/// Identifier of a link: its position in [`crate::Topology::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkId(pub u32);

/// Index of a port within its node: its position in [`Node::ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PortIndex(pub u16);

impl NodeId {
    /// The id as an index into [`crate::Topology::nodes`].
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl LinkId {
    /// The id as an index into [`crate::Topology::links`].
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl PortIndex {
    /// The index as an index into [`Node::ports`].
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}", self.0)
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link {}", self.0)
    }
}

impl fmt::Display for PortIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port {}", self.0)
    }
}

/// The tier a node sits in.
///
/// In a leaf-spine topology the leaves are [`Role::Edge`] and the spines [`Role::Core`]; there is
/// no aggregation tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An end host (a GPU's NIC).
    Host,
    /// A top-of-rack switch (leaf in leaf-spine, router in a dragonfly).
    Edge,
    /// A pod's middle-tier switch (fat tree only).
    Aggregation,
    /// A top-tier switch (spine in leaf-spine).
    Core,
}

impl Role {
    /// Whether the node is a switch (anything but a host).
    #[must_use]
    pub const fn is_switch(self) -> bool {
        !matches!(self, Self::Host)
    }
}

/// Which way a port faces: towards the hosts (`Down`) or towards the cores (`Up`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PortDirection {
    /// Southbound: the peer is one tier lower.
    Down,
    /// Northbound: the peer is one tier higher.
    Up,
}

/// A host or a switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// Position of the node in [`crate::Topology::nodes`].
    pub id: NodeId,
    /// Tier of the node.
    pub role: Role,
    /// Human-readable unique name (`h-p0-e1-h0`, `e-p0-1`, `a-p0-1`, `c-3`, `leaf-3`, `spine-1`,
    /// `h-l3-h0`).
    pub name: String,
    /// Pod of the node: `None` for cores and spines; in leaf-spine, hosts and leaves are all in
    /// pod 0.
    pub pod: Option<u16>,
    /// Index of the node within its tier and pod: for edges and aggregations the position in the
    /// pod, for cores the global position, for hosts the position in the pod
    /// (`edge · hosts_per_edge + host`, so a host's slot under its edge is
    /// `index % hosts_per_edge`).
    pub index: u16,
    /// Switches: the `/32` loopback address. Hosts: their (only) interface address.
    pub loopback: Ipv4Addr,
    /// The node's ports, down ports first, then up ports (see the crate documentation for the
    /// exact numbering contract).
    pub ports: Vec<Port>,
}

/// One end of a point-to-point link, seen from the node that owns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    /// Position of the port in [`Node::ports`].
    pub index: PortIndex,
    /// Whether the peer is one tier lower or higher.
    pub direction: PortDirection,
    /// The link this port terminates.
    pub link: LinkId,
    /// The node at the other end of the link.
    pub peer: NodeId,
    /// The peer's port at the other end of the link.
    pub peer_port: PortIndex,
    /// The interface address on this side of the point-to-point link.
    pub address: Ipv4Addr,
    /// Prefix length of [`Port::address`] (31: both ends share one `/31`).
    pub prefix_len: u8,
    /// A Linux-valid interface name (`p0`, `p1`, …; at most 15 bytes).
    pub ifname: String,
}

/// A full-duplex point-to-point link between two ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// Position of the link in [`crate::Topology::links`].
    pub id: LinkId,
    /// The lower-tier end (host, edge or aggregation switch) and its port.
    pub a: (NodeId, PortIndex),
    /// The upper-tier end and its port.
    pub b: (NodeId, PortIndex),
}

/// Which family of Clos network a topology is, and its switch radix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopologyKind {
    /// A three-tier k-ary fat tree: k pods of k/2 edge and k/2 aggregation switches,
    /// (k/2)² cores and k³/4 hosts.
    FatTree {
        /// Switch radix (ports per switch); even, in `4..=64`.
        k: u16,
    },
    /// A two-tier leaf-spine of radix k: k leaves with k/2 hosts each and k/2 spines, every leaf
    /// linked to every spine.
    LeafSpine {
        /// Switch radix (ports per leaf and per spine); even, in `4..=64`.
        k: u16,
    },
    /// `planes` disjoint copies of a fat tree or leaf-spine of radix k that share the hosts
    /// (see the crate documentation, "Multi-plane fabrics"): every host has one port per plane.
    MultiPlane {
        /// What each plane is.
        plane: PlaneKind,
        /// Number of planes, `1..=8`.
        planes: u8,
        /// Switch radix of every plane's switches; even, in `4..=64`.
        k: u16,
    },
    /// A dragonfly ([`crate::Dragonfly`]): `a·h + 1` groups of `a` routers with `p` hosts and
    /// `h` global links each. Its groups are the topology's pods and its routers [`Role::Edge`]
    /// switches (each has hosts); every router-to-router port is an up port.
    Dragonfly {
        /// Hosts per router.
        p: u16,
        /// Routers per group.
        a: u16,
        /// Global links per router.
        h: u16,
    },
}

impl TopologyKind {
    /// The switch radix.
    #[must_use]
    pub const fn k(self) -> u16 {
        match self {
            Self::FatTree { k } | Self::LeafSpine { k } | Self::MultiPlane { k, .. } => k,
            Self::Dragonfly { p, a, h } => p.saturating_add(a).saturating_add(h).saturating_sub(1),
        }
    }

    /// The dragonfly's shape, if this is one.
    ///
    /// # Errors
    /// As [`crate::DragonflyShape::new`]; `Ok(None)` for the Clos families.
    pub fn dragonfly(self) -> Result<Option<crate::DragonflyShape>, crate::TopologyError> {
        match self {
            Self::Dragonfly { p, a, h } => crate::DragonflyShape::new(p, a, h).map(Some),
            Self::FatTree { .. } | Self::LeafSpine { .. } | Self::MultiPlane { .. } => Ok(None),
        }
    }

    /// Number of planes: `planes` of a [`TopologyKind::MultiPlane`], 1 for every other kind.
    #[must_use]
    pub const fn planes(self) -> u8 {
        match self {
            Self::MultiPlane { planes, .. } => planes,
            Self::FatTree { .. } | Self::LeafSpine { .. } | Self::Dragonfly { .. } => 1,
        }
    }

    /// The kind of one plane: a multi-plane fabric's plane, every other kind itself.
    #[must_use]
    pub const fn plane_kind(self) -> Self {
        match self {
            Self::MultiPlane {
                plane: PlaneKind::FatTree,
                k,
                ..
            } => Self::FatTree { k },
            Self::MultiPlane {
                plane: PlaneKind::LeafSpine,
                k,
                ..
            } => Self::LeafSpine { k },
            other => other,
        }
    }

    /// Whether a plane has an aggregation tier (a fat tree, or a multi-plane fabric of them).
    #[must_use]
    pub const fn is_fat_tree(self) -> bool {
        matches!(self.plane_kind(), Self::FatTree { .. })
    }
}

/// What each plane of a [`TopologyKind::MultiPlane`] fabric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlaneKind {
    /// A three-tier k-ary fat tree ([`TopologyKind::FatTree`]).
    FatTree,
    /// A two-tier leaf-spine ([`TopologyKind::LeafSpine`]).
    LeafSpine,
}
