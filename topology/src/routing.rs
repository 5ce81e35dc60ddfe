//! Destination keys, shortest paths and link failures (paper §4.1).
//!
//! Routing in a fat tree is up-then-down: a packet climbs until it reaches a switch whose
//! subtree holds the destination (the lowest common ancestor tier), then follows the unique
//! down path. Only the climb has choices, so load balancing is a choice among *up ports*, and a
//! switch only needs to know which of them still lead to the destination.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::model::{LinkId, Node, NodeId, PortIndex, Role};
use crate::topology::Topology;

/// A consolidated destination at a switch: the index of its round-robin pointer (paper §4.1).
///
/// At an edge switch the key of a destination host is the edge number of the host's edge
/// switch (`pod · k/2 + index`; the leaf index in leaf-spine) — in a multi-plane fabric, of its
/// edge in the switch's plane, numbered within the plane —, so every host under one
/// destination edge shares a pointer; at an aggregation switch it is the destination pod. Keys
/// are dense: `0..dest_key_count(switch)`, so a switch can keep a flat pointer array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DestKey(pub u32);

/// A set of failed links (both directions of a failed link are down).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FailedLinks {
    links: BTreeSet<LinkId>,
}

impl FailedLinks {
    /// No failures.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Marks `link` failed; returns whether it was alive before.
    pub fn insert(&mut self, link: LinkId) -> bool {
        self.links.insert(link)
    }

    /// Marks `link` alive again; returns whether it was failed.
    pub fn remove(&mut self, link: LinkId) -> bool {
        self.links.remove(&link)
    }

    /// Whether `link` is failed.
    #[must_use]
    pub fn contains(&self, link: LinkId) -> bool {
        self.links.contains(&link)
    }

    /// Whether `link` is alive (not failed).
    #[must_use]
    pub fn is_alive(&self, link: LinkId) -> bool {
        !self.contains(link)
    }

    /// Number of failed links.
    #[must_use]
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether no link is failed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The failed links in id order.
    pub fn iter(&self) -> impl Iterator<Item = LinkId> + '_ {
        self.links.iter().copied()
    }
}

impl FromIterator<LinkId> for FailedLinks {
    fn from_iter<I: IntoIterator<Item = LinkId>>(iter: I) -> Self {
        Self {
            links: iter.into_iter().collect(),
        }
    }
}

impl Extend<LinkId> for FailedLinks {
    fn extend<I: IntoIterator<Item = LinkId>>(&mut self, iter: I) {
        self.links.extend(iter);
    }
}

/// Where a climb is headed: a destination host, the destination edge switch (edge keys) or the
/// destination pod's aggregation tier (aggregation keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Host(NodeId),
    Edge(NodeId),
    Pod(u16),
}

impl Topology {
    /// The destination key of address `dst` at `switch`.
    ///
    /// `dst` must be a host's address. Returns `None` at cores and hosts, for addresses that are
    /// not a host's, and for destinations the switch reaches by going down (hosts under the
    /// same edge switch at an edge, hosts of the same pod at an aggregation switch).
    #[must_use]
    pub fn dest_key(&self, switch: NodeId, dst: Ipv4Addr) -> Option<DestKey> {
        self.dest_key_for_host(switch, self.node_by_addr(dst)?)
    }

    /// The destination key of host `dst_host` at `switch`; see [`Topology::dest_key`]. `None`
    /// also if either node does not exist or `dst_host` is not a host.
    #[must_use]
    pub fn dest_key_for_host(&self, switch: NodeId, dst_host: NodeId) -> Option<DestKey> {
        let node = self.get_node(switch)?;
        let dst = self.get_node(dst_host)?;
        if dst.role != Role::Host {
            return None;
        }
        match node.role {
            Role::Edge => {
                // The destination's edge in this switch's plane, numbered within the plane.
                let plane = self.shape().plane_of(switch);
                let dst_edge = dst.ports[plane as usize].peer;
                let local = self.shape().edge_number(dst_edge) % self.shape().plane_edges();
                (dst_edge != switch).then_some(DestKey(local))
            }
            Role::Aggregation => {
                let dst_pod = dst.pod.expect("hosts belong to a pod");
                (node.pod != Some(dst_pod)).then_some(DestKey(u32::from(dst_pod)))
            }
            Role::Host | Role::Core => None,
        }
    }

    /// Number of destination keys at `switch`: the number of edge switches at an edge switch,
    /// the number of pods at an aggregation switch, 0 elsewhere (and for unknown ids).
    #[must_use]
    pub fn dest_key_count(&self, switch: NodeId) -> u32 {
        match self.get_node(switch).map(|node| node.role) {
            Some(Role::Edge) => self.shape().plane_edges(),
            Some(Role::Aggregation) => self.shape().pods,
            _ => 0,
        }
    }

    /// Whether traffic at `switch` for host `dst_host` goes up: the destination is not in the
    /// switch's subtree. Always `false` at a core; at a host, `true` unless it is the
    /// destination.
    ///
    /// # Panics
    ///
    /// If `switch` does not exist or `dst_host` is not a host.
    #[must_use]
    pub fn is_northbound(&self, switch: NodeId, dst_host: NodeId) -> bool {
        self.expect_host(dst_host);
        match self.role(switch) {
            Role::Host => switch != dst_host,
            _ => !self.covers(switch, Target::Host(dst_host)),
        }
    }

    /// Every shortest path from host `src_host` to host `dst_host`, as node sequences from
    /// source to destination: one path under the same edge (or `[src]` to itself), k/2 within
    /// a pod or between leaves, (k/2)² between pods. Paths are ordered by the up ports taken,
    /// lowest first.
    ///
    /// # Panics
    ///
    /// If either node is not a host.
    #[must_use]
    pub fn shortest_paths(&self, src_host: NodeId, dst_host: NodeId) -> Vec<Vec<NodeId>> {
        self.expect_host(src_host);
        self.expect_host(dst_host);
        let mut paths = Vec::new();
        self.extend_paths(src_host, dst_host, &mut Vec::with_capacity(7), &mut paths);
        paths
    }

    fn extend_paths(
        &self,
        node: NodeId,
        dst: NodeId,
        prefix: &mut Vec<NodeId>,
        paths: &mut Vec<Vec<NodeId>>,
    ) {
        prefix.push(node);
        if node == dst {
            paths.push(prefix.clone());
        } else if self.covers(node, Target::Host(dst)) {
            let port = self.down_port_towards(node, Target::Host(dst));
            self.extend_paths(self.port(node, port).peer, dst, prefix, paths);
        } else {
            for port in self.up_ports(node) {
                self.extend_paths(port.peer, dst, prefix, paths);
            }
        }
        prefix.pop();
    }

    /// The shortest paths from `src_host` to `dst_host` whose links are all alive.
    ///
    /// # Panics
    ///
    /// If either node is not a host.
    #[must_use]
    pub fn valid_paths(
        &self,
        failures: &FailedLinks,
        src_host: NodeId,
        dst_host: NodeId,
    ) -> Vec<Vec<NodeId>> {
        let mut paths = self.shortest_paths(src_host, dst_host);
        paths.retain(|path| {
            path.windows(2).all(|hop| {
                let link = self
                    .link_between(hop[0], hop[1])
                    .expect("consecutive nodes of a path are adjacent");
                failures.is_alive(link)
            })
        });
        paths
    }

    /// The up ports of `switch` through which destination key `key` is still reachable by a
    /// shortest (up-then-down) path, as a mask: bit i stands for the i-th up port
    /// (`up_ports(switch)[i]`).
    ///
    /// * Edge E, key = destination edge F in another pod: position i is valid iff E–Aᵢ is
    ///   alive, A′ᵢ–F is alive (A′ᵢ: aggregation i of F's pod) and some core c above Aᵢ has
    ///   both Aᵢ–c and c–A′ᵢ alive.
    /// * Edge E, key = F in the same pod: position i is valid iff E–Aᵢ and Aᵢ–F are alive.
    /// * Aggregation A (position a), key = destination pod q: up port to core c is valid iff
    ///   A–c and c–A′(q, a) are alive.
    /// * Leaf L, key = leaf F: spine i is valid iff L–spineᵢ and spineᵢ–F are alive.
    ///
    /// Host links are not considered: they are per destination host, not per key. The mask is
    /// 0 at cores and hosts, for keys out of range, and for keys the switch reaches by going
    /// down (its own edge number, its own pod).
    #[must_use]
    pub fn valid_up_mask(&self, failures: &FailedLinks, switch: NodeId, key: DestKey) -> u64 {
        let Some(target) = self.key_waypoint(switch, key) else {
            return 0;
        };
        if self.covers(switch, target) {
            return 0;
        }
        self.up_ports(switch)
            .iter()
            .enumerate()
            .filter(|(_, port)| {
                failures.is_alive(port.link) && self.reaches(failures, port.peer, target)
            })
            .fold(0, |mask, (position, _)| mask | 1 << position)
    }

    /// The port indices selected by [`Topology::valid_up_mask`], in port order.
    #[must_use]
    pub fn valid_up_ports(
        &self,
        failures: &FailedLinks,
        switch: NodeId,
        key: DestKey,
    ) -> Vec<PortIndex> {
        let mask = self.valid_up_mask(failures, switch, key);
        self.up_ports(switch)
            .iter()
            .enumerate()
            .filter(|(position, _)| mask >> position & 1 == 1)
            .map(|(_, port)| port.index)
            .collect()
    }

    /// The waypoint `key` stands for at `switch`, if the key is in range there.
    fn key_waypoint(&self, switch: NodeId, key: DestKey) -> Option<Target> {
        if key.0 >= self.dest_key_count(switch) {
            return None;
        }
        match self.role(switch) {
            Role::Edge => {
                let plane = self.shape().plane_of(switch);
                Some(Target::Edge(
                    self.shape()
                        .edge(plane * self.shape().plane_edges() + key.0),
                ))
            }
            Role::Aggregation => Some(Target::Pod(u16::try_from(key.0).expect("pods fit in u16"))),
            Role::Host | Role::Core => None,
        }
    }

    /// Whether `target` is at or below `node`, i.e. reached from `node` by going down only.
    fn covers(&self, node: NodeId, target: Target) -> bool {
        let plane = self.shape().plane_of(node);
        let node = self.node(node);
        let edge_of = |target: Target| match target {
            Target::Host(host) => Some(self.expect_host(host).ports[plane as usize].peer),
            Target::Edge(edge) => Some(edge),
            Target::Pod(_) => None,
        };
        match (node.role, target) {
            (_, Target::Host(host)) if node.id == host => true,
            (Role::Host, _) => false,
            (Role::Edge, _) => edge_of(target) == Some(node.id),
            (Role::Aggregation, Target::Pod(pod)) => node.pod == Some(pod),
            (Role::Aggregation, _) => {
                edge_of(target).map(|edge| self.node(edge).pod) == Some(node.pod)
            }
            (Role::Core, _) => true,
        }
    }

    /// Whether `node` is `target` (for a pod: any aggregation switch of that pod).
    fn is_at(&self, node: &Node, target: Target) -> bool {
        match target {
            Target::Host(id) | Target::Edge(id) => node.id == id,
            Target::Pod(pod) => node.role == Role::Aggregation && node.pod == Some(pod),
        }
    }

    /// Whether `target` is reachable from `node` by a shortest path of alive links: climbing
    /// through any alive up port until a switch covers the target, then down.
    fn reaches(&self, failures: &FailedLinks, node: NodeId, target: Target) -> bool {
        if self.covers(node, target) {
            return self.down_alive(failures, node, target);
        }
        self.up_ports(node)
            .iter()
            .any(|port| failures.is_alive(port.link) && self.reaches(failures, port.peer, target))
    }

    /// Whether the unique down path from `node` to `target` (which `node` covers) is alive.
    fn down_alive(&self, failures: &FailedLinks, mut node: NodeId, target: Target) -> bool {
        while !self.is_at(self.node(node), target) {
            let port = self.port(node, self.down_port_towards(node, target));
            if !failures.is_alive(port.link) {
                return false;
            }
            node = port.peer;
        }
        true
    }

    /// The down port of `switch` on the unique down path to `target`, which it covers.
    pub(crate) fn down_port_towards(&self, switch: NodeId, target: Target) -> PortIndex {
        let (edge, host) = match target {
            // Every plane's edge of a host has the same pod and index.
            Target::Host(host) => (self.host_edge(host), Some(host)),
            Target::Edge(edge) => (edge, None),
            Target::Pod(pod) => {
                debug_assert_eq!(self.role(switch), Role::Core);
                return PortIndex(pod);
            }
        };
        let node = self.node(switch);
        let edge_node = self.node(edge);
        match node.role {
            Role::Edge => {
                let host = host.expect("an edge covers only its own hosts' targets");
                self.node(host).ports[0].peer_port
            }
            Role::Aggregation => PortIndex(edge_node.index),
            Role::Core if self.shape().is_fat_tree() => {
                PortIndex(edge_node.pod.expect("edges belong to a pod"))
            }
            Role::Core => PortIndex(edge_node.index),
            Role::Host => unreachable!("a host has no down port"),
        }
    }
}
