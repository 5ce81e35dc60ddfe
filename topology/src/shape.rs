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

/// The dimensions of a topology of a given kind, derived from the radix alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Switch radix.
    pub(crate) k: u32,
    /// Up ports per edge or aggregation switch, hosts per edge switch: `k / 2`.
    pub(crate) half: u32,
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
    /// Number of switch-to-switch links.
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
        let k = u32::from(k);
        let half = k / 2;
        Ok(match kind {
            TopologyKind::FatTree { .. } => Self {
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
            TopologyKind::Dragonfly { .. } => unreachable!("handled above"),
        })
    }

    /// Whether the topology has an aggregation tier.
    pub(crate) const fn is_fat_tree(&self) -> bool {
        self.aggs_per_pod > 0
    }

    pub(crate) const fn hosts_per_edge(&self) -> u32 {
        self.hosts_per_edge
    }

    pub(crate) const fn num_edges(&self) -> u32 {
        self.pods * self.edges_per_pod
    }

    pub(crate) const fn num_aggs(&self) -> u32 {
        self.pods * self.aggs_per_pod
    }

    pub(crate) const fn num_hosts(&self) -> u32 {
        self.num_edges() * self.hosts_per_edge()
    }

    pub(crate) const fn num_switches(&self) -> u32 {
        self.num_edges() + self.num_aggs() + self.cores
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

    /// Aggregation switch `agg` of pod `pod`.
    pub(crate) const fn agg(&self, pod: u32, agg: u32) -> NodeId {
        NodeId(self.first_agg() + pod * self.aggs_per_pod + agg)
    }

    /// Core switch (spine) number `core`.
    pub(crate) const fn core(&self, core: u32) -> NodeId {
        NodeId(self.first_core() + core)
    }

    /// The switch with sequential switch number `number` (edges, aggregations, cores).
    pub(crate) const fn switch(&self, number: u32) -> NodeId {
        NodeId(self.first_edge() + number)
    }

    /// Global edge number of an edge switch id (must be an edge).
    pub(crate) const fn edge_number(&self, edge: NodeId) -> u32 {
        edge.0 - self.first_edge()
    }

    /// Number of switch-to-switch links.
    pub(crate) const fn num_switch_links(&self) -> u32 {
        self.switch_links
    }

    pub(crate) const fn num_links(&self) -> u32 {
        self.num_hosts() + self.num_switch_links()
    }

    /// The link of host number `host` (its node id).
    #[cfg(test)]
    pub(crate) const fn host_link(&self, host: NodeId) -> LinkId {
        LinkId(host.0)
    }

    /// Up-link `up` (0..k/2) of the edge with global number `edge_number`.
    #[cfg(test)]
    pub(crate) const fn edge_up_link(&self, edge_number: u32, up: u32) -> LinkId {
        LinkId(self.num_hosts() + edge_number * self.half + up)
    }

    /// Up-link `up` (0..k/2) of aggregation switch `agg` of pod `pod`.
    #[cfg(test)]
    pub(crate) const fn agg_up_link(&self, pod: u32, agg: u32, up: u32) -> LinkId {
        LinkId(
            self.num_hosts()
                + self.num_edges() * self.half
                + (pod * self.aggs_per_pod + agg) * self.half
                + up,
        )
    }

    /// Number of the switch-to-switch link from its `/31` number.
    pub(crate) const fn switch_link(&self, number: u32) -> LinkId {
        LinkId(self.num_hosts() + number)
    }
}
