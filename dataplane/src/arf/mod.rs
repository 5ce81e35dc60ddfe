//! The adaptive-routing framework's pure parts (draft "A Framework for Adaptive Routing"):
//! congestion [`detect`]ion on a port, the [`table`] of remote link states that notifications
//! keep, and the [`PathQuality`] view of both that the load-balancing core's `arf-*` modes read.
//!
//! Everything here takes measurements, events and times as arguments and does no I/O, so the
//! switch's control thread and the deterministic model run exactly this code; the wire format
//! and the UDP transport live in `ofan-control` (`notify`).
//!
//! **Remote path information.** For each destination key (the destination edge switch at an
//! edge, the destination pod at an aggregation switch) and each up-port, the routing plane
//! (BGP's path table, or the topology plan) names the neighbour behind the port and its next-next
//! hops ([`RemoteHop`]). The remote quality of that path is the quality of the neighbour's link to
//! its next-next hop, as the neighbour last notified it; with several next-next hops (the
//! neighbour itself has a choice, going up) it is the **best** of them, since the neighbour routes
//! around what it knows. A link nobody has reported is at its best.
//!
//! **Combination** ([`Combine`]). By default the quality of a path is `min(local, remote)`: a
//! path is as good as its worst link. The draft's `local(q) + remote(q)` ([`Combine::Sum`],
//! halved to stay on the 16-level scale) would rate a path through one dead link (0 + 15) like a
//! path through two half-loaded ones (7 + 8); the bottleneck rule does not. Both are
//! configurable so that the choice rests on a measurement (docs/adaptive-routing.md).
//!
//! **Failures.** A path whose every next-next link was reported *failed* (not merely at level
//! 0: a congested link still carries, a failed one loses everything) is **dead**: the modes
//! leave it out of the valid ports while another remains, until the routing plane withdraws it
//! or the failure clears. Without this a notified `arf-wcmp` switch kept weight 1 of 16 on a
//! dead path until BGP rerouted (measured in the model's scenario 2).

pub mod detect;
pub mod flows;
mod quality;
pub mod speaker;
pub mod table;
pub mod trust;

pub use quality::{Kind, Quality, QUALITY_LEVELS};
pub use table::{Applied, CongestionTable, LinkId, LinkState, Update};

use ofan_topology::{plan, DestKey, FailedLinks, NodeId, Role, Topology};

/// The routing plane's remote information for one (destination key, up-port): who is behind the
/// port and where it goes next.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RemoteHop {
    /// The neighbour's id (its ASN in the lab).
    pub neighbour: u32,
    /// The neighbour's next hops towards the destination (ids); empty when the neighbour is the
    /// destination's own switch or nothing is known.
    pub next_next: Vec<u32>,
}

/// Remote path information of one switch: a [`RemoteHop`] per (destination key, up-port), or
/// none where the routing plane says nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemotePaths {
    up_ports: u8,
    dest_keys: u32,
    hops: Vec<Option<RemoteHop>>,
}

impl RemotePaths {
    /// No information yet, for a switch of `up_ports` up-ports and `dest_keys` keys.
    #[must_use]
    pub fn new(up_ports: u8, dest_keys: u32) -> Self {
        Self {
            up_ports,
            dest_keys,
            hops: vec![None; dest_keys as usize * usize::from(up_ports)],
        }
    }

    /// Number of up-ports.
    #[must_use]
    pub const fn up_ports(&self) -> u8 {
        self.up_ports
    }

    /// Number of destination keys.
    #[must_use]
    pub const fn dest_keys(&self) -> u32 {
        self.dest_keys
    }

    /// Sets what is behind `port` towards `key`; out-of-range keys and ports are ignored.
    pub fn set(&mut self, key: DestKey, port: u8, hop: RemoteHop) {
        if let Some(slot) = self.index(key, port).and_then(|i| self.hops.get_mut(i)) {
            *slot = Some(hop);
        }
    }

    /// What is behind `port` towards `key`.
    #[must_use]
    pub fn get(&self, key: DestKey, port: u8) -> Option<&RemoteHop> {
        self.index(key, port)
            .and_then(|i| self.hops.get(i))
            .and_then(Option::as_ref)
    }

    /// Every hop known, in (key, port) order.
    pub fn hops(&self) -> impl Iterator<Item = &RemoteHop> {
        self.hops.iter().flatten()
    }

    fn index(&self, key: DestKey, port: u8) -> Option<usize> {
        (key.0 < self.dest_keys && port < self.up_ports)
            .then(|| key.0 as usize * usize::from(self.up_ports) + usize::from(port))
    }

    /// The remote path information the topology's routing plan gives balancing switch `node`
    /// under `failures` ([`plan::remote_paths`], the one function the switch's plan fallback
    /// uses too): per destination key and up-port position, the neighbour and its next hops,
    /// each switch named by `name` (node ids in the model, router IDs — loopbacks — for a
    /// lab's hosts, which rebuild their edge switch's view from what it passes on). Every
    /// prefix of one key has the same paths in a fat tree; where failures make them differ,
    /// the last prefix wins (as in the switch).
    #[must_use]
    pub fn from_plan(
        topology: &Topology,
        failures: &FailedLinks,
        node: NodeId,
        name: impl Fn(NodeId) -> u32,
    ) -> Self {
        let up = topology.up_ports(node);
        let mut paths = Self::new(up.len() as u8, topology.dest_key_count(node));
        // Each edge's prefix and its key here (any host below the edge gives it).
        let keys: Vec<_> = topology
            .edges()
            .iter()
            .filter_map(|edge| {
                let host = edge
                    .ports
                    .iter()
                    .find(|port| topology.node(port.peer).role == Role::Host)?;
                let key = topology.dest_key_for_host(node, host.peer)?;
                Some((topology.edge_prefix(edge.id), key))
            })
            .collect();
        for (prefix, hops) in plan::remote_paths(topology, failures, node) {
            let Some(&(_, key)) = keys.iter().find(|(known, _)| *known == prefix) else {
                continue;
            };
            for hop in hops {
                let Some(position) = up.iter().position(|port| port.index == hop.hop.port) else {
                    continue;
                };
                paths.set(
                    key,
                    position as u8,
                    RemoteHop {
                        neighbour: name(hop.neighbor),
                        next_next: hop.next_next.iter().map(|&id| name(id)).collect(),
                    },
                );
            }
        }
        paths
    }
}

/// How a path's local and remote levels make its quality ([`PathQuality::path`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Combine {
    /// `min(local, remote)`: a path is as good as its worst link (the default).
    #[default]
    Min,
    /// The draft's `local(q) + remote(q)`, halved (rounded down) to stay a level: the same
    /// order of paths as the sum, and weights `1 + level` in about the sum's proportions.
    Sum,
}

impl Combine {
    /// Every rule, in the order `--help` lists them.
    pub const ALL: [Self; 2] = [Self::Min, Self::Sum];

    /// The path level of a `local` and a `remote` level.
    #[inline]
    #[must_use]
    pub const fn apply(self, local: u8, remote: u8) -> u8 {
        match self {
            Self::Min => {
                if local < remote {
                    local
                } else {
                    remote
                }
            }
            Self::Sum => (local + remote) / 2,
        }
    }

    /// Its name (`min`, `sum`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Min => "min",
            Self::Sum => "sum",
        }
    }

    /// Whether this is the default rule (for `skip_serializing_if`).
    #[must_use]
    pub fn is_min(&self) -> bool {
        *self == Self::Min
    }
}

impl std::fmt::Display for Combine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Combine {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|rule| rule.name() == name)
            .ok_or_else(|| format!("'{name}' is not a combination rule (min or sum)"))
    }
}

/// When `arf-flow` moves a flow a neighbour named ([`flows`]): to a path the detector would not
/// call congested (its level above `at`, the configured `congested_at`), and not within
/// `hold_down_ns` of the flow's last move (the refresh interval T: the detectors and the
/// notifications need that long to show what the last move did, so a flow does not
/// oscillate). Derived from the configured detector settings, so the two cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redirect {
    /// A path at this level or below is congested: no target.
    pub at: u8,
    /// At most one move per this long per flow, ns.
    pub hold_down_ns: u64,
}

impl Redirect {
    /// The rule for detectors with `thresholds` and notifications refreshed every
    /// `refresh_ns`.
    #[must_use]
    pub fn of(thresholds: &detect::Thresholds, refresh_ns: u64) -> Self {
        Self {
            at: thresholds.congested_at.level(),
            hold_down_ns: refresh_ns,
        }
    }
}

impl Default for Redirect {
    /// The default detector settings, refreshed every 100 ms (the switch's defaults).
    fn default() -> Self {
        Self::of(&detect::Thresholds::default(), 100_000_000)
    }
}

/// The quality of every path of one switch, as the `arf-*` modes read it: a local level per
/// up-port (its detector's) and a remote level per (destination key, up-port). Immutable once
/// built; the control thread publishes a new one with an atomic swap, so the hot path never waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathQuality {
    up_ports: u8,
    dest_keys: u32,
    local: Box<[u8]>,
    remote: Box<[u8]>,
    /// Per (key, up-port): every next-next link of the path reported failed.
    dead: Box<[bool]>,
    /// Some path is dead (so the modes can skip the check otherwise).
    any_dead: bool,
    /// When `arf-flow` moves a pinned flow.
    pub redirect: Redirect,
    /// How [`PathQuality::path`] combines the local and the remote level.
    pub combine: Combine,
    /// Flows named congested by a neighbour, to move off the named ports ([`flows`]).
    pub redirects: Box<[flows::FlowRedirect]>,
    /// Incremented by the publisher on every change (0: nothing ever reported).
    pub generation: u64,
}

impl PathQuality {
    /// Every path at its best: what a switch starts from.
    #[must_use]
    pub fn uniform(up_ports: u8, dest_keys: u32) -> Self {
        let best = Quality::BEST.level();
        Self {
            up_ports,
            dest_keys,
            local: vec![best; usize::from(up_ports)].into_boxed_slice(),
            remote: vec![best; dest_keys as usize * usize::from(up_ports)].into_boxed_slice(),
            dead: vec![false; dest_keys as usize * usize::from(up_ports)].into_boxed_slice(),
            any_dead: false,
            redirect: Redirect::default(),
            combine: Combine::Min,
            redirects: Box::new([]),
            generation: 0,
        }
    }

    /// Builds the view from the local detectors' levels (one per up-port), the congestion table
    /// and the remote path information (see the module docs for the rules).
    #[must_use]
    pub fn build(
        local: &[Quality],
        table: &CongestionTable,
        paths: &RemotePaths,
        generation: u64,
    ) -> Self {
        let mut view = Self::uniform(paths.up_ports, paths.dest_keys);
        for (slot, level) in view.local.iter_mut().zip(local) {
            *slot = level.level();
        }
        for key in 0..paths.dest_keys {
            for port in 0..paths.up_ports {
                let Some(hop) = paths.get(DestKey(key), port) else {
                    continue;
                };
                let link = |far| LinkId {
                    near: hop.neighbour,
                    far,
                };
                let remote = hop
                    .next_next
                    .iter()
                    .map(|&far| table.quality(link(far)))
                    .max()
                    .unwrap_or(Quality::BEST);
                let index = key as usize * usize::from(paths.up_ports) + usize::from(port);
                view.remote[index] = remote.level();
                let dead = !hop.next_next.is_empty()
                    && hop.next_next.iter().all(|&far| table.failed(link(far)));
                view.dead[index] = dead;
                view.any_dead |= dead;
            }
        }
        view.generation = generation;
        view
    }

    /// Number of up-ports.
    #[must_use]
    pub const fn up_ports(&self) -> u8 {
        self.up_ports
    }

    /// The local level of `port` (best when out of range).
    #[inline]
    #[must_use]
    pub fn local(&self, port: u8) -> u8 {
        self.local
            .get(usize::from(port))
            .copied()
            .unwrap_or(QUALITY_LEVELS - 1)
    }

    /// The remote level of the path through `port` towards `key` (best when out of range).
    #[inline]
    #[must_use]
    pub fn remote(&self, key: DestKey, port: u8) -> u8 {
        if key.0 >= self.dest_keys || port >= self.up_ports {
            return QUALITY_LEVELS - 1;
        }
        self.remote[key.0 as usize * usize::from(self.up_ports) + usize::from(port)]
    }

    /// Whether the path through `port` towards `key` is dead: every next-next link of it was
    /// reported failed (false when out of range).
    #[inline]
    #[must_use]
    pub fn dead(&self, key: DestKey, port: u8) -> bool {
        self.any_dead
            && key.0 < self.dest_keys
            && port < self.up_ports
            && self.dead[key.0 as usize * usize::from(self.up_ports) + usize::from(port)]
    }

    /// Whether some path is dead.
    #[inline]
    #[must_use]
    pub const fn any_dead(&self) -> bool {
        self.any_dead
    }

    /// The quality of the path through `port` towards `key`: its local and remote levels
    /// combined by [`PathQuality::combine`].
    #[inline]
    #[must_use]
    pub fn path(&self, key: DestKey, port: u8) -> u8 {
        self.combine.apply(self.local(port), self.remote(key, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(level: u8) -> Quality {
        Quality::new(level).unwrap()
    }

    #[test]
    fn a_path_is_as_good_as_its_worst_link_and_the_neighbour_picks_its_best_next_hop() {
        // Two up-ports, two keys. Port 0's neighbour is 100, port 1's is 101.
        let mut paths = RemotePaths::new(2, 2);
        // Key 0: a fixed next-next hop (200) behind each neighbour.
        paths.set(
            DestKey(0),
            0,
            RemoteHop {
                neighbour: 100,
                next_next: vec![200],
            },
        );
        paths.set(
            DestKey(0),
            1,
            RemoteHop {
                neighbour: 101,
                next_next: vec![200],
            },
        );
        // Key 1: the neighbours choose among 300 and 301.
        paths.set(
            DestKey(1),
            0,
            RemoteHop {
                neighbour: 100,
                next_next: vec![300, 301],
            },
        );
        paths.set(
            DestKey(1),
            1,
            RemoteHop {
                neighbour: 101,
                next_next: vec![300, 301],
            },
        );
        let mut table = CongestionTable::default();
        let update = |near, far, level| Update {
            link: LinkId { near, far },
            kind: Kind::CongestionDetected,
            quality: q(level),
            hold_ns: 1_000_000,
            epoch: 0,
            sequence: 1,
        };
        table.apply(&update(100, 200, 2), 0);
        table.apply(&update(100, 300, 1), 0);
        table.apply(&update(101, 300, 3), 0);
        table.apply(&update(101, 301, 4), 0);
        let view = PathQuality::build(&[q(15), q(9)], &table, &paths, 7);
        assert_eq!(view.generation, 7);
        assert_eq!(view.remote(DestKey(0), 0), 2, "the reported link");
        assert_eq!(view.remote(DestKey(0), 1), 15, "nobody reported 101→200");
        assert_eq!(view.path(DestKey(0), 1), 9, "local 9 is the bottleneck");
        assert_eq!(view.remote(DestKey(1), 0), 15, "100 can still use 301");
        assert_eq!(view.remote(DestKey(1), 1), 4, "the better of 101's two");
        assert_eq!(view.path(DestKey(0), 0), 2);
        // Out of range: best, never a panic.
        assert_eq!(view.path(DestKey(9), 0), 15);
        assert_eq!(view.path(DestKey(0), 9), 15);
        assert!(!view.any_dead(), "congestion is not failure");
        // The draft's sum, halved: (local 15 + remote 2) / 2 and (9 + 15) / 2; the order of
        // the two paths is the same, their distance is not.
        let sum = PathQuality {
            combine: Combine::Sum,
            ..view.clone()
        };
        assert_eq!((sum.path(DestKey(0), 0), sum.path(DestKey(0), 1)), (8, 12));
        assert_eq!(sum.path(DestKey(9), 0), 15, "out of range stays best");
        assert_eq!("sum".parse(), Ok(Combine::Sum));
        assert!("max".parse::<Combine>().is_err());
        // 101 → 300 fails: key 1 through port 1 still has 301; then 301 fails too.
        let failure = |near, far| Update {
            link: LinkId { near, far },
            kind: Kind::FailureDetected,
            quality: q(9),
            hold_ns: 1_000_000,
            epoch: 0,
            sequence: 2,
        };
        table.apply(&failure(101, 300), 0);
        let one = PathQuality::build(&[q(15), q(15)], &table, &paths, 9);
        assert!(!one.dead(DestKey(1), 1), "101 routes around it over 301");
        assert_eq!(one.remote(DestKey(1), 1), 4);
        table.apply(&failure(101, 301), 0);
        let both = PathQuality::build(&[q(15), q(15)], &table, &paths, 10);
        assert!(both.dead(DestKey(1), 1) && both.any_dead());
        assert!(!both.dead(DestKey(1), 0) && !both.dead(DestKey(0), 1));
        assert!(!both.dead(DestKey(9), 1), "out of range: alive");
        // The state ages out after its hold time.
        table.expire(1_000_001);
        let aged = PathQuality::build(&[q(15), q(15)], &table, &paths, 8);
        assert_eq!(
            aged,
            PathQuality {
                generation: 8,
                ..PathQuality::uniform(2, 2)
            }
        );
    }
}
