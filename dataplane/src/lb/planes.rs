//! # Host plane policies: which plane, and which entropy, a host sends each packet on
//!
//! In a multi-plane fabric ([`ofan_topology::TopologyKind::MultiPlane`]) every host has one
//! NIC port per plane, and the planes are disjoint: once a packet leaves on plane i it stays
//! there. Choosing the plane is the host's load-balancing decision — the *endpoint plane* of
//! the adaptive-routing framework draft (§ "Endpoint Plane", use case 3), which weighs the
//! planes by the congestion it learns from the network. This module is that decision, pure:
//! [`HostPlanes`] takes everything as arguments (the flow's state, what the host knows of
//! each plane's path to the destination) and does no I/O, so the same code can run in a NIC
//! and runs in the model (`ofan_model`'s `sim/planes.rs` feeds it), in the lab's traffic agent
//! (one UDP socket per plane) and in the unit tests below.
//!
//! The policies ([`PlanePolicy`]):
//!
//! * `plane-hash`: one plane per flow, from a hash of the flow — ECMP at the NIC. A host
//!   with one flow uses one of its P ports.
//! * `plane-spray`: per packet, round robin over the planes from a per-flow start: over any
//!   run of packets of a flow every plane is used equally often, within one packet.
//! * `plane-arf`: smooth weighted round robin over the planes, each plane weighted by what
//!   the host knows of its path to the destination — the path quality its edge switch in
//!   that plane tells it (the framework's notifications, [`PlaneView`]) times a per-plane
//!   weight that a CE-marked ACK halves, a loss quarters and an unmarked ACK grows back by
//!   [`ACK_INCREASE`] = 2/1024 of the full weight. This AIMD balance settles, on a plane on
//!   which a fraction m of the ACKs comes back marked, near `4(1 − m)/m` 1024ths. The
//!   constants come from the model's degraded-link scenario (docs/model.md, "Multi-plane
//!   fabrics"): switches that spray per destination (Ofan) spread a flow over the (k/2)²
//!   cores of its plane, so one slow core link marks at most m = 4/k² of the flow's ACKs
//!   however congested it is — 1/36 at k = 12 —, and the plane must then fall to about 1/8
//!   of the flow for a quarter-rate link to keep up: `4 · 35 = 140` 1024ths. Our first
//!   constants (−1/8 per mark, +1/1024 per ACK; then −1/2 and +8/1024) left 55 % of the
//!   weight there. The decrease is steep because a mark comes back only after the marked
//!   packet has waited in the queue it reports.
//!   A plane with no live path gets nothing while another plane has one.
//! * `entropy`: an entropy-value sprayer as the published multipath transports describe
//!   them. Per flow, a set of [`ENTROPIES_PER_PLANE`] entropy values on each plane, used in
//!   turn (interleaved across the planes); a loss retires its (plane, entropy) for the rest
//!   of the flow, and an ACK echoing a CE mark makes its path skip its next turn. This
//!   follows Ultra Ethernet's entropy-value packet spraying (Hoefler et al., *Ultra
//!   Ethernet's Design Principles and Architectural Innovations*, arXiv 2508.08906 §2: the
//!   endpoint varies the EV per packet, the choice algorithm is left open), the EV sets split
//!   across planes of OpenAI/Microsoft's MRC, where a dropped packet's EV is retired and not
//!   reused, and REPS (Bonato et al., arXiv 2407.21625), which reuses the entropies of
//!   unmarked ACKs and not those of marked ones; "skip one turn" is our reading of "use a
//!   marked path less". If every path of a flow is retired, the flow draws a fresh set.
//!
//! Units: weights in 1024ths ([`FULL_WEIGHT`]); path quality levels as the framework's,
//! 0–15, lower is poorer.

use std::fmt;
use std::str::FromStr;

use ofan_topology::MAX_PLANES;
use serde::{Deserialize, Serialize};

use super::{mix64, DestKey, LbError, LbRng};
use crate::arf::PathQuality;

/// Entropy values per plane and flow of the `entropy` policy.
pub const ENTROPIES_PER_PLANE: usize = 8;
/// A `plane-arf` plane's full weight.
pub const FULL_WEIGHT: u32 = 1024;
/// The least weight ECN and losses leave a plane (it keeps being probed).
pub const MIN_WEIGHT: u32 = 16;
/// What an unmarked ACK gives back to its plane's weight.
pub const ACK_INCREASE: u32 = 2;
/// Best path quality level (the framework's 15).
const BEST_LEVEL: u8 = 15;
/// Salt of the per-flow plane hash and entropies.
const PLANE_SALT: u64 = 0x706c_616e_6573;

/// How a host spreads its packets over its planes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanePolicy {
    /// One plane per flow, hashed.
    PlaneHash,
    /// Per packet, round robin over the planes.
    #[default]
    PlaneSpray,
    /// Per packet, weighted by the planes' notified path quality, CE marks and losses.
    PlaneArf,
    /// Per packet, an entropy-value set across the planes; losses retire, marks skip a turn.
    Entropy,
}

impl PlanePolicy {
    /// Every policy, in the order the CLI lists them.
    pub const ALL: [Self; 4] = [
        Self::PlaneHash,
        Self::PlaneSpray,
        Self::PlaneArf,
        Self::Entropy,
    ];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::PlaneHash => "plane-hash",
            Self::PlaneSpray => "plane-spray",
            Self::PlaneArf => "plane-arf",
            Self::Entropy => "entropy",
        }
    }

    /// Whether the default (`plane-spray`): single-plane configurations leave it out.
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl fmt::Display for PlanePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlanePolicy {
    type Err = LbError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|policy| policy.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| LbError::UnknownPlanePolicy {
                name: name.to_owned(),
            })
    }
}

/// What a host knows of each plane's paths to one destination, from the notifications its
/// edge switch in that plane passes on: a quality level per plane (0–15, the mean of the
/// paths' levels) and which planes have no live path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneView {
    /// Per plane: quality of its paths to the destination, 0–15.
    pub quality: [u8; MAX_PLANES as usize],
    /// Bit i: plane i has no live path to the destination.
    pub dead: u8,
}

impl PlaneView {
    /// Every plane at the best quality, none dead: what a host knows before any notification.
    pub const CLEAR: Self = Self {
        quality: [BEST_LEVEL; MAX_PLANES as usize],
        dead: 0,
    };

    /// Sets plane `plane` from the path quality of the host's edge switch in it towards the
    /// destination's key there: the mean of the path levels over the edge's up-ports, dead
    /// when every path is. One rule for the model's hosts and the lab's agents. A plane out
    /// of range is left as it is.
    pub fn set_edge_paths(&mut self, plane: u8, paths: &PathQuality, key: DestKey) {
        let Some(quality) = self.quality.get_mut(usize::from(plane)) else {
            return;
        };
        let ports = paths.up_ports();
        let (mut sum, mut dead) = (0u32, ports > 0);
        for port in 0..ports {
            sum += u32::from(paths.path(key, port));
            dead &= paths.dead(key, port);
        }
        *quality = (sum / u32::from(ports.max(1))) as u8;
        if dead {
            self.dead |= 1 << plane;
        } else {
            self.dead &= !(1 << plane);
        }
    }
}

/// One entropy value of the `entropy` policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntropyPath {
    plane: u8,
    entropy: u16,
    /// An ACK of this path came back CE-marked: it skips its next turn.
    skip: bool,
    /// A packet of this path was lost: never used again by this flow.
    retired: bool,
}

/// One flow's state under its host's policy.
#[derive(Debug, Clone)]
pub struct FlowPlanes {
    /// The flow's own generator (entropies); seeded from the flow's key.
    rng: LbRng,
    /// `plane-hash`: the flow's plane; `plane-spray`: the plane of its first packet.
    start: u8,
    /// Packets chosen so far (`plane-spray`), or the next path to try (`entropy`).
    cursor: u32,
    /// `plane-arf`: per plane, the weight ECN and losses leave (1024ths).
    weight: [u32; MAX_PLANES as usize],
    /// `plane-arf`: the smooth weighted round robin's credits.
    credit: [i64; MAX_PLANES as usize],
    /// `entropy`: the flow's paths.
    paths: Vec<EntropyPath>,
    /// Packets chosen per plane.
    pub sent: [u32; MAX_PLANES as usize],
}

/// A packet's plane and entropy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// The plane (the NIC port) it leaves on.
    pub plane: u8,
    /// The entropy it carries (what ECMP hashes; `entropy` policy only, else 0).
    pub entropy: u16,
}

/// A host's plane policy over P planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostPlanes {
    policy: PlanePolicy,
    planes: u8,
}

impl HostPlanes {
    /// The policy over `planes` planes.
    ///
    /// # Panics
    /// If `planes` is 0 or more than [`MAX_PLANES`].
    #[must_use]
    pub fn new(policy: PlanePolicy, planes: u8) -> Self {
        assert!(
            (1..=MAX_PLANES).contains(&planes),
            "a host has 1..={MAX_PLANES} planes"
        );
        Self { policy, planes }
    }

    /// The policy.
    #[must_use]
    pub const fn policy(&self) -> PlanePolicy {
        self.policy
    }

    /// The state of a new flow; `key` names the flow (its hash, plane, start and entropies
    /// derive from it).
    #[must_use]
    pub fn flow(&self, key: u64) -> FlowPlanes {
        let mut rng = LbRng::new(mix64(key ^ PLANE_SALT));
        let start = (mix64(key ^ !PLANE_SALT) % u64::from(self.planes)) as u8;
        let paths = if self.policy == PlanePolicy::Entropy {
            self.fresh_paths(&mut rng)
        } else {
            Vec::new()
        };
        FlowPlanes {
            rng,
            start,
            cursor: 0,
            weight: [FULL_WEIGHT; MAX_PLANES as usize],
            credit: [0; MAX_PLANES as usize],
            paths,
            sent: [0; MAX_PLANES as usize],
        }
    }

    /// A full set of entropy paths, interleaved across the planes.
    fn fresh_paths(&self, rng: &mut LbRng) -> Vec<EntropyPath> {
        (0..ENTROPIES_PER_PLANE * usize::from(self.planes))
            .map(|index| EntropyPath {
                plane: (index % usize::from(self.planes)) as u8,
                entropy: rng.next_u64() as u16,
                skip: false,
                retired: false,
            })
            .collect()
    }

    /// The plane and entropy of `flow`'s next packet, given what the host knows of each
    /// plane's paths to the flow's destination (`plane-arf` reads `view`; the others ignore
    /// it).
    pub fn choose(&self, flow: &mut FlowPlanes, view: &PlaneView) -> Choice {
        let choice = match self.policy {
            PlanePolicy::PlaneHash => Choice {
                plane: flow.start,
                entropy: 0,
            },
            PlanePolicy::PlaneSpray => {
                let plane = (u32::from(flow.start) + flow.cursor) % u32::from(self.planes);
                flow.cursor = flow.cursor.wrapping_add(1);
                Choice {
                    plane: plane as u8,
                    entropy: 0,
                }
            }
            PlanePolicy::PlaneArf => Choice {
                plane: self.weighted(flow, view),
                entropy: 0,
            },
            PlanePolicy::Entropy => self.next_path(flow),
        };
        flow.sent[usize::from(choice.plane)] += 1;
        choice
    }

    /// `plane-arf`: smooth weighted round robin (every plane's credit grows by its weight,
    /// the richest is chosen and pays the total) over `weight × (quality + 1) / 16`.
    fn weighted(&self, flow: &mut FlowPlanes, view: &PlaneView) -> u8 {
        let planes = usize::from(self.planes);
        let all_dead = (0..planes).all(|plane| view.dead >> plane & 1 == 1);
        let effective = |plane: usize| -> i64 {
            if !all_dead && view.dead >> plane & 1 == 1 {
                return 0;
            }
            let quality = u32::from(view.quality[plane].min(BEST_LEVEL)) + 1;
            i64::from((flow.weight[plane] * quality).div_ceil(16))
        };
        let mut total = 0;
        let mut best = 0;
        for plane in 0..planes {
            let weight = effective(plane);
            flow.credit[plane] += weight;
            total += weight;
            if flow.credit[plane] > flow.credit[best] {
                best = plane;
            }
        }
        flow.credit[best] -= total;
        best as u8
    }

    /// `entropy`: the next live path in turn; a path marked to skip clears its mark instead.
    fn next_path(&self, flow: &mut FlowPlanes) -> Choice {
        if flow.paths.iter().all(|path| path.retired) {
            flow.paths = self.fresh_paths(&mut flow.rng);
        }
        let count = flow.paths.len() as u32;
        // Two rounds reach a live path: the first clears every skip mark it passes.
        for _ in 0..2 * count {
            let index = (flow.cursor % count) as usize;
            flow.cursor = flow.cursor.wrapping_add(1);
            let path = &mut flow.paths[index];
            if path.retired {
                continue;
            }
            if path.skip {
                path.skip = false;
                continue;
            }
            return Choice {
                plane: path.plane,
                entropy: path.entropy,
            };
        }
        unreachable!("a flow has a live path")
    }

    /// An ACK of a packet sent on `plane` with `entropy` came back, `ce`: echoing a CE mark.
    pub fn on_ack(&self, flow: &mut FlowPlanes, plane: u8, entropy: u16, ce: bool) {
        match self.policy {
            PlanePolicy::PlaneArf => {
                let weight = &mut flow.weight[usize::from(plane)];
                *weight = if ce {
                    (*weight / 2).max(MIN_WEIGHT)
                } else {
                    (*weight + ACK_INCREASE).min(FULL_WEIGHT)
                };
            }
            PlanePolicy::Entropy if ce => {
                if let Some(path) = flow
                    .paths
                    .iter_mut()
                    .find(|path| !path.retired && path.plane == plane && path.entropy == entropy)
                {
                    path.skip = true;
                }
            }
            _ => {}
        }
    }

    /// A packet sent on `plane` with `entropy` was declared lost (its timer expired).
    pub fn on_loss(&self, flow: &mut FlowPlanes, plane: u8, entropy: u16) {
        match self.policy {
            PlanePolicy::PlaneArf => {
                let weight = &mut flow.weight[usize::from(plane)];
                *weight = (*weight / 4).max(MIN_WEIGHT);
            }
            PlanePolicy::Entropy => {
                for path in flow
                    .paths
                    .iter_mut()
                    .filter(|path| path.plane == plane && path.entropy == entropy)
                {
                    path.retired = true;
                }
            }
            PlanePolicy::PlaneHash | PlanePolicy::PlaneSpray => {}
        }
    }

    /// `entropy`: the flow's live paths per plane (tests and reports).
    #[must_use]
    pub fn live_paths(&self, flow: &FlowPlanes) -> Vec<usize> {
        (0..self.planes)
            .map(|plane| {
                flow.paths
                    .iter()
                    .filter(|path| path.plane == plane && !path.retired)
                    .count()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(planes: &HostPlanes, flow: &mut FlowPlanes, view: &PlaneView, n: u32) -> Vec<u32> {
        let mut counts = vec![0; usize::from(planes.planes)];
        for _ in 0..n {
            counts[usize::from(planes.choose(flow, view).plane)] += 1;
        }
        counts
    }

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for policy in PlanePolicy::ALL {
            assert_eq!(policy.name().parse::<PlanePolicy>().unwrap(), policy);
        }
        assert!("plane-random".parse::<PlanePolicy>().is_err());
    }

    #[test]
    fn hash_keeps_a_flow_on_one_plane_and_spreads_flows() {
        let planes = HostPlanes::new(PlanePolicy::PlaneHash, 4);
        let mut used = [0u32; 4];
        for key in 0..400 {
            let mut flow = planes.flow(key);
            let counts = send(&planes, &mut flow, &PlaneView::CLEAR, 10);
            assert_eq!(counts.iter().filter(|&&count| count > 0).count(), 1);
            used[counts.iter().position(|&count| count > 0).unwrap()] += 1;
        }
        assert!(used.iter().all(|&flows| flows > 60), "{used:?}");
    }

    #[test]
    fn spray_uses_every_plane_equally_within_one_packet() {
        for planes in 1..=MAX_PLANES {
            let policy = HostPlanes::new(PlanePolicy::PlaneSpray, planes);
            for n in [1, 7, 64, 255] {
                let mut flow = policy.flow(u64::from(n) * 31);
                let counts = send(&policy, &mut flow, &PlaneView::CLEAR, n);
                let (min, max) = (counts.iter().min(), counts.iter().max());
                assert!(max.unwrap() - min.unwrap() <= 1, "{counts:?}");
            }
        }
    }

    #[test]
    fn arf_follows_the_notified_quality_and_leaves_dead_planes_out() {
        let policy = HostPlanes::new(PlanePolicy::PlaneArf, 2);
        let mut flow = policy.flow(7);
        assert_eq!(send(&policy, &mut flow, &PlaneView::CLEAR, 100), [50, 50]);
        let mut view = PlaneView::CLEAR;
        view.quality[0] = 3; // (3 + 1) / 16 of plane 1's weight
        let counts = send(&policy, &mut flow, &view, 200);
        assert_eq!(counts, [40, 160]);
        view.dead = 0b01;
        assert_eq!(send(&policy, &mut flow, &view, 50), [0, 50]);
        view.dead = 0b11;
        let counts = send(&policy, &mut flow, &view, 100);
        assert!(
            counts[0] > 0 && counts[1] > 0,
            "all dead: still sends, {counts:?}"
        );
    }

    #[test]
    fn arf_moves_off_a_plane_whose_acks_are_marked_and_comes_back() {
        let policy = HostPlanes::new(PlanePolicy::PlaneArf, 2);
        let mut flow = policy.flow(1);
        // One ACK in 8 of plane 0 comes back marked, none of plane 1.
        let mut plane_0_acks = 0;
        for _ in 0..4000 {
            let choice = policy.choose(&mut flow, &PlaneView::CLEAR);
            let ce = choice.plane == 0 && {
                plane_0_acks += 1;
                plane_0_acks % 8 == 0
            };
            policy.on_ack(&mut flow, choice.plane, 0, ce);
        }
        assert!(flow.weight[0] < FULL_WEIGHT / 4, "{:?}", flow.weight);
        assert_eq!(flow.weight[1], FULL_WEIGHT);
        let counts = send(&policy, &mut flow, &PlaneView::CLEAR, 1000);
        assert!(counts[0] < counts[1] / 4, "{counts:?}");
        policy.on_loss(&mut flow, 1, 0);
        assert_eq!(flow.weight[1], FULL_WEIGHT / 4);
        for _ in 0..FULL_WEIGHT / ACK_INCREASE {
            policy.on_ack(&mut flow, 0, 0, false);
            policy.on_ack(&mut flow, 1, 0, false);
        }
        assert_eq!(flow.weight[..2], [FULL_WEIGHT; 2]);
    }

    #[test]
    fn entropy_retires_lost_paths_and_skips_marked_ones() {
        let policy = HostPlanes::new(PlanePolicy::Entropy, 2);
        let mut flow = policy.flow(3);
        let n = (2 * ENTROPIES_PER_PLANE) as u32;
        let round: Vec<Choice> = (0..n)
            .map(|_| policy.choose(&mut flow, &PlaneView::CLEAR))
            .collect();
        assert_eq!(
            flow.sent[..2],
            [n / 2, n / 2],
            "interleaved across the planes"
        );
        // Three of plane 0's paths lose a packet: plane 0 keeps five of eight.
        for lost in round.iter().filter(|choice| choice.plane == 0).take(3) {
            policy.on_loss(&mut flow, lost.plane, lost.entropy);
        }
        assert_eq!(
            policy.live_paths(&flow),
            [ENTROPIES_PER_PLANE - 3, ENTROPIES_PER_PLANE]
        );
        let counts = send(&policy, &mut flow, &PlaneView::CLEAR, 13 * 10);
        assert_eq!(counts, [50, 80]);
        // A marked path skips one turn, then is used again.
        let marked = round.iter().find(|choice| choice.plane == 1).unwrap();
        policy.on_ack(&mut flow, marked.plane, marked.entropy, true);
        let next: Vec<Choice> = (0..12)
            .map(|_| policy.choose(&mut flow, &PlaneView::CLEAR))
            .collect();
        assert!(!next.contains(marked), "skipped its turn");
        let again: Vec<Choice> = (0..13)
            .map(|_| policy.choose(&mut flow, &PlaneView::CLEAR))
            .collect();
        assert!(again.contains(marked), "then used again");
        // Every path lost: a fresh set.
        for choice in round.iter().chain(&next).chain(&again) {
            policy.on_loss(&mut flow, choice.plane, choice.entropy);
        }
        let _ = policy.choose(&mut flow, &PlaneView::CLEAR);
        assert_eq!(policy.live_paths(&flow), [ENTROPIES_PER_PLANE; 2]);
    }
}
