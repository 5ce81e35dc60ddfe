//! Dimensions of a topology and the arithmetic that maps positions to ids.
//!
//! Node ids are laid out tier by tier — hosts, edges, aggregations, cores — each tier in
//! (pod, index) order; link ids are laid out as host links, then edge up-links, then aggregation
//! up-links, each in the order of their lower end and then of its up ports. Every query of
//! [`crate::Topology`] that needs a position-to-id mapping goes through [`Shape`], and validation
//! guarantees that a topology's data matches it.

use crate::dragonfly::DragonflyShape;
use crate::error::TopologyError;
use crate::model::{LinkId, NodeId, TopologyKind};

/// The most planes a multi-plane fabric has ([`TopologyKind::MultiPlane`]); fewer where
/// `planes × pods` would pass 256 (the addressing plan puts `plane · pods + pod` in one octet).
pub const MAX_PLANES: u8 = 8;

/// The dimensions of a topology of a given kind, derived from the radix alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Switch radix.
    pub(crate) k: u32,
    /// Up ports per edge or aggregation switch, hosts per edge switch: `k / 2`.
    pub(crate) half: u32,
    /// Number of planes (1 unless multi-plane). Every count below but `planes` is per plane,
    /// except where a method says otherwise.
    pub(crate) planes: u32,
    /// Number of pods (1 in leaf-spine).
    pub(crate) pods: u32,
    /// Edge switches (leaves) per pod.
    pub(crate) edges_per_pod: u32,
    /// Aggregation switches per pod (0 in leaf-spine).
    pub(crate) aggs_per_pod: u32,
    /// Core switches (spines).
    pub(crate) cores: u32,
    /// Hosts per edge switch (dragonfly router): `k / 2` in a Clos, `p` in a dragonfly.
    pub(crate) hosts_per_edge: u32,
    /// Number of switch-to-switch links of one plane.
    pub(crate) switch_links: u32,
    /// The dragonfly's shape: its groups are the pods, its routers the edges.
    pub(crate) dragonfly: Option<DragonflyShape>,
}

impl Shape {
    /// Checks the radix and derives the dimensions.
    pub(crate) fn new(kind: TopologyKind) -> Result<Self, TopologyError> {
        if let TopologyKind::Dragonfly { p, a, h } = kind {
            let dragonfly = DragonflyShape::new(p, a, h)?;
            let (groups, a) = (dragonfly.groups(), u32::from(a));
            return Ok(Self {
                planes: 1,
                k: u32::from(dragonfly.radix()),
                half: 0,
                pods: groups,
                edges_per_pod: a,
                aggs_per_pod: 0,
                cores: 0,
                hosts_per_edge: u32::from(p),
                // Every group's complete graph, and one global link per pair of groups.
                switch_links: groups * a * (a - 1) / 2 + groups * (groups - 1) / 2,
                dragonfly: Some(dragonfly),
            });
        }
        let k = kind.k();
        if k % 2 != 0 || !(4..=64).contains(&k) {
            return Err(TopologyError::OddOrOutOfRangeK { k });
        }
        if let TopologyKind::MultiPlane { planes, .. } = kind {
            let plane = Self::new(kind.plane_kind())?;
            let max = u32::from(MAX_PLANES).min(256 / plane.pods);
            if planes == 0 || u32::from(planes) > max {
                return Err(TopologyError::PlanesOutOfRange {
                    planes,
                    max: u8::try_from(max).expect("at most MAX_PLANES"),
                    k,
                });
            }
            return Ok(Self {
                planes: u32::from(planes),
                ..plane
            });
        }
        let k = u32::from(k);
        let half = k / 2;
        Ok(match kind {
            TopologyKind::FatTree { .. } => Self {
                planes: 1,
                k,
                half,
                pods: k,
                edges_per_pod: half,
                aggs_per_pod: half,
                cores: half * half,
                hosts_per_edge: half,
                switch_links: (k * half + k * half) * half,
                dragonfly: None,
            },
            TopologyKind::LeafSpine { .. } => Self {
                planes: 1,
                k,
                half,
                pods: 1,
                edges_per_pod: k,
                aggs_per_pod: 0,
                cores: half,
                hosts_per_edge: half,
                switch_links: k * half,
                dragonfly: None,
            },
            TopologyKind::Dragonfly { .. } | TopologyKind::MultiPlane { .. } => {
                unreachable!("handled above")
            }
        })
    }

    /// Whether the topology has an aggregation tier.
    pub(crate) const fn is_fat_tree(&self) -> bool {
        self.aggs_per_pod > 0
    }

    pub(crate) const fn hosts_per_edge(&self) -> u32 {
        self.hosts_per_edge
    }

    /// Edge switches of one plane (the destination keys of an edge).
    pub(crate) const fn plane_edges(&self) -> u32 {
        self.pods * self.edges_per_pod
    }

    /// Edge switches of every plane.
    pub(crate) const fn num_edges(&self) -> u32 {
        self.planes * self.plane_edges()
    }

    /// Aggregation switches of every plane.
    pub(crate) const fn num_aggs(&self) -> u32 {
        self.planes * self.pods * self.aggs_per_pod
    }

    /// Core switches of every plane.
    pub(crate) const fn num_cores(&self) -> u32 {
        self.planes * self.cores
    }

    /// Hosts, shared by the planes.
    pub(crate) const fn num_hosts(&self) -> u32 {
        self.plane_edges() * self.hosts_per_edge()
    }

    pub(crate) const fn num_switches(&self) -> u32 {
        self.num_edges() + self.num_aggs() + self.num_cores()
    }

    pub(crate) const fn num_nodes(&self) -> u32 {
        self.num_hosts() + self.num_switches()
    }

    pub(crate) const fn first_edge(&self) -> u32 {
        self.num_hosts()
    }

    pub(crate) const fn first_agg(&self) -> u32 {
        self.first_edge() + self.num_edges()
    }

    pub(crate) const fn first_core(&self) -> u32 {
        self.first_agg() + self.num_aggs()
    }

    /// Host `slot` under edge `edge` of pod `pod`.
    pub(crate) const fn host(&self, pod: u32, edge: u32, slot: u32) -> NodeId {
        NodeId((pod * self.edges_per_pod + edge) * self.hosts_per_edge() + slot)
    }

    /// Edge switch from its global edge number (`pod · edges_per_pod + index`).
    pub(crate) const fn edge(&self, edge_number: u32) -> NodeId {
        NodeId(self.first_edge() + edge_number)
    }

    /// Aggregation switch `agg` of pod `pod` of plane `plane`.
    pub(crate) const fn agg(&self, plane: u32, pod: u32, agg: u32) -> NodeId {
        NodeId(self.first_agg() + (plane * self.pods + pod) * self.aggs_per_pod + agg)
    }

    /// Core switch (spine) number `core` of plane `plane`.
    pub(crate) const fn core(&self, plane: u32, core: u32) -> NodeId {
        NodeId(self.first_core() + plane * self.cores + core)
    }

    /// The plane of switch `id` (0 for hosts, which are in every plane).
    pub(crate) const fn plane_of(&self, id: NodeId) -> u32 {
        let id = id.0;
        if id < self.first_edge() {
            0
        } else if id < self.first_agg() {
            (id - self.first_edge()) / self.plane_edges()
        } else if id < self.first_core() {
            (id - self.first_agg()) / (self.pods * self.aggs_per_pod)
        } else {
            (id - self.first_core()) / self.cores
        }
    }

    /// The switch with sequential switch number `number` (edges, aggregations, cores).
    pub(crate) const fn switch(&self, number: u32) -> NodeId {
        NodeId(self.first_edge() + number)
    }

    /// Global edge number of an edge switch id (must be an edge).
    pub(crate) const fn edge_number(&self, edge: NodeId) -> u32 {
        edge.0 - self.first_edge()
    }

    /// Number of switch-to-switch links of every plane.
    pub(crate) const fn num_switch_links(&self) -> u32 {
        self.planes * self.switch_links
    }

    /// Host links: one per host and plane.
    pub(crate) const fn num_host_links(&self) -> u32 {
        self.planes * self.num_hosts()
    }

    pub(crate) const fn num_links(&self) -> u32 {
        self.num_host_links() + self.num_switch_links()
    }

    /// The link of host number `host` (its node id).
    #[cfg(test)]
    pub(crate) const fn host_link(&self, host: NodeId) -> LinkId {
        LinkId(host.0)
    }

    /// Up-link `up` (0..k/2) of the edge with global number `edge_number`.
    #[cfg(test)]
    pub(crate) const fn edge_up_link(&self, edge_number: u32, up: u32) -> LinkId {
        LinkId(self.num_host_links() + edge_number * self.half + up)
    }

    /// Up-link `up` (0..k/2) of aggregation switch `agg` of pod `pod`.
    #[cfg(test)]
    pub(crate) const fn agg_up_link(&self, pod: u32, agg: u32, up: u32) -> LinkId {
        LinkId(
            self.num_host_links()
                + self.num_edges() * self.half
                + (pod * self.aggs_per_pod + agg) * self.half
                + up,
        )
    }

    /// Number of the switch-to-switch link from its `/31` number.
    pub(crate) const fn switch_link(&self, number: u32) -> LinkId {
        LinkId(self.num_host_links() + number)
    }
}
