//! What to simulate: topology, link parameters, workload, load-balancing scheme, seed.
//!
//! A [`ModelConfig`] is plain data; [`ModelConfig::validate`] checks it once and
//! [`crate::run`] relies on it.

use std::fmt;
use std::str::FromStr;

use ofan_dataplane::arf::Combine;
use ofan_dataplane::lb::Algorithm;
use ofan_topology::{LinkParams, TopologyKind};
use ofan_transport::{CcKind, RecoveryConfig};
use serde::{Deserialize, Serialize};

use crate::collective::Collective;
use crate::deps::FlowGraph;
use crate::error::ModelError;
use crate::fsdp::Fsdp;
use crate::mix::SwitchSchemes;
use crate::moe::Moe;
use crate::planes::PlanePolicy;

/// Who balances northbound packets, and how.
///
/// The switch-based schemes run the dataplane's [`Algorithm`] at every edge and aggregation
/// switch. The host-based schemes run `ecmp` at the switches and steer from the host:
/// `spray` and `reps` pick a per-packet entropy that enters the ECMP hash, `drb` source-routes
/// each packet through a waypoint of the lowest common layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// A switch-based algorithm of the load-balancing core.
    Switch(Algorithm),
    /// Random packet spraying (RPS): a fresh random entropy per packet.
    Spray,
    /// REPS (recycled entropy packet spraying): reuse entropies whose ACKs came back unmarked.
    Reps,
    /// DRB: per-(destination, size class) round-robin over the lowest common layer, at the host.
    Drb,
}

impl Scheme {
    /// Every scheme: the switch algorithms in the core's order (the adaptive-routing
    /// framework's `arf-*` modes last), then spray, reps, drb.
    pub const ALL: [Scheme; 14] = [
        Scheme::Switch(Algorithm::Ecmp),
        Scheme::Switch(Algorithm::Rsq),
        Scheme::Switch(Algorithm::Rr),
        Scheme::Switch(Algorithm::Jsq),
        Scheme::Switch(Algorithm::Ar),
        Scheme::Switch(Algorithm::Drill),
        Scheme::Switch(Algorithm::Ofan),
        Scheme::Switch(Algorithm::Pofan),
        Scheme::Switch(Algorithm::ArfWcmp),
        Scheme::Switch(Algorithm::ArfFlow),
        Scheme::Switch(Algorithm::ArfPacket),
        Scheme::Spray,
        Scheme::Reps,
        Scheme::Drb,
    ];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Scheme::Switch(algorithm) => algorithm.name(),
            Scheme::Spray => "spray",
            Scheme::Reps => "reps",
            Scheme::Drb => "drb",
        }
    }

    /// The algorithm the switches run: the scheme's own, or `ecmp` under a host-based scheme.
    #[must_use]
    pub const fn switch_algorithm(self) -> Algorithm {
        match self {
            Scheme::Switch(algorithm) => algorithm,
            Scheme::Spray | Scheme::Reps | Scheme::Drb => Algorithm::Ecmp,
        }
    }

    /// Whether the switches run the adaptive-routing framework (detectors, notifications,
    /// path quality): the `arf-*` schemes.
    #[must_use]
    pub const fn uses_arf(self) -> bool {
        self.switch_algorithm().uses_path_quality()
    }
}

/// The control-plane delay of a congestion notification in the model: from the detecting
/// switch's decision to the neighbour's table update, ps: 100 µs, what the lab measures from a
/// notification's timestamp to the receiving switch's published view (send, UDP across one
/// link, receive, apply, publish): 109–111 µs on a quiet machine (the switch's root test), a
/// median of 0.2–0.3 ms with a k = 4 fabric forwarding a collective on the same two cores.
pub const ARF_CONTROL_DELAY_PS: u64 = 100_000_000;

/// The detection window of the adaptive-routing framework in the model, ps: 4 µs. At the
/// model's 800 Gb/s a window carries up to 96 full DATA frames, and
/// it is half the time the paper's 800 KB buffer takes to drain at line rate (8 µs), so a queue
/// that builds towards the buffer is seen in the window it starts in or the next.
pub const ARF_WINDOW_PS: u64 = 4_000_000;

/// The adaptive-routing framework's timing (used by the `arf-*` schemes only; see
/// [`crate::sim`], "Adaptive routing"). The detector thresholds are
/// [`ofan_dataplane::arf::detect::Thresholds::default`], as in the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfConfig {
    /// Every fabric port's detector takes one window of this length, ps.
    pub window_ps: u64,
    /// A switch refreshes every link state it reports every this many windows (T).
    pub refresh_windows: u32,
    /// A reported state holds this many refresh periods without a refresh (hold = 3T).
    pub hold_refreshes: u32,
    /// Control-plane delay of a notification, ps ([`ARF_CONTROL_DELAY_PS`]).
    pub delay_ps: u64,
    /// How a path's quality combines its local and remote levels (`--arf-combine`; absent
    /// from reports when it is the default, `min`).
    #[serde(default, skip_serializing_if = "Combine::is_min")]
    pub combine: Combine,
}

impl Default for ArfConfig {
    fn default() -> Self {
        Self {
            window_ps: ARF_WINDOW_PS,
            refresh_windows: 10,
            hold_refreshes: 3,
            delay_ps: ARF_CONTROL_DELAY_PS,
            combine: Combine::Min,
        }
    }
}

impl ArfConfig {
    /// The hold time a notification carries: `hold_refreshes × refresh_windows × window`, ps.
    #[must_use]
    pub const fn hold_ps(&self) -> u64 {
        self.window_ps * self.refresh_windows as u64 * self.hold_refreshes as u64
    }
}

/// Which directions of a degraded link are slow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkDirection {
    /// Both: `from → to` and `to → from`.
    Both,
    /// Only `from → to`.
    Forward,
}

/// A link that serializes slower than line rate for the whole run (a degraded optic, a
/// renegotiated lane count): its ports send at `rate` × line rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradedLink {
    /// One end, by switch name (`a-p0-0`, `c-3`, …).
    pub from: String,
    /// The other end.
    pub to: String,
    /// Which directions are slow.
    pub direction: LinkDirection,
    /// Fraction of line rate, in `(0, 1]`.
    pub rate: f64,
}

impl FromStr for DegradedLink {
    type Err = ModelError;

    /// `FROM/TO:RATE` (both directions) or `FROM>TO:RATE` (only FROM → TO), by switch name
    /// (names contain `-`, hence `/`): `a-p0-0/c-0:0.25`, `c-0>a-p1-0:0.25`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| ModelError::InvalidConfig {
            field: "degrade",
            value: text.to_owned(),
            reason,
        };
        let (ends, rate) = text
            .rsplit_once(':')
            .ok_or_else(|| invalid("expected FROM/TO:RATE or FROM>TO:RATE"))?;
        let rate: f64 = rate
            .parse()
            .map_err(|_| invalid("the rate is a fraction of line rate, e.g. 0.25"))?;
        let (from, to, direction) = if let Some((from, to)) = ends.split_once('>') {
            (from, to, LinkDirection::Forward)
        } else if let Some((from, to)) = ends.split_once('/') {
            (from, to, LinkDirection::Both)
        } else {
            return Err(invalid("expected FROM/TO:RATE or FROM>TO:RATE"));
        };
        Ok(Self {
            from: from.to_owned(),
            to: to.to_owned(),
            direction,
            rate,
        })
    }
}

/// The local detection delay of a failed link in the model, ps: 4 ms, what the lab measured
/// for BIRD with BFD from the link going down to the adjacent switch withdrawing its routes
/// (FRR on carrier loss alone took 74–77 ms). Control-plane times are real times that do not
/// shrink with the link rate, as [`ARF_CONTROL_DELAY_PS`] (see docs/model.md, "A link failing
/// during a collective").
pub const FAILURE_DETECT_PS: u64 = 4_000_000_000;

/// The time from a link failure to every switch routing around it in the model (BGP
/// reconverged), ps: 64 ms, what the lab measured for BIRD with BFD at a remote switch (FRR:
/// 124 ms).
pub const FAILURE_REROUTE_PS: u64 = 64_000_000_000;

/// A switch-to-switch link that fails, both directions, at a simulated time during the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkFailure {
    /// One end, by switch name (`a-p0-0`, `c-3`, …).
    pub from: String,
    /// The other end.
    pub to: String,
    /// When the link goes down, ps.
    pub at_ps: u64,
}

impl FromStr for LinkFailure {
    type Err = ModelError;

    /// `FROM/TO@TIME_US` by switch name, as `--degrade` names links, the time in µs since the
    /// collective started: `a-p0-0/c-0@45.5`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| ModelError::InvalidConfig {
            field: "fail-at",
            value: text.to_owned(),
            reason,
        };
        let (ends, time) = text
            .rsplit_once('@')
            .ok_or_else(|| invalid("expected FROM/TO@TIME_US"))?;
        let (from, to) = ends
            .split_once('/')
            .filter(|(from, to)| !from.is_empty() && !to.is_empty())
            .ok_or_else(|| invalid("expected FROM/TO@TIME_US"))?;
        let micros: f64 = time
            .parse()
            .map_err(|_| invalid("the time is in µs since the start, e.g. 45.5"))?;
        if !(micros >= 0.0 && micros.is_finite()) {
            return Err(invalid("the time must be 0 or later (µs since the start)"));
        }
        Ok(Self {
            from: from.to_owned(),
            to: to.to_owned(),
            at_ps: (micros * 1e6).round() as u64,
        })
    }
}

/// How the switches learn of a link that fails during the run ([`ModelConfig::fail_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureTiming {
    /// From the failure to the two adjacent switches knowing their port is down (and, under
    /// `arf-*`, sending their *failure detected* notifications), ps.
    pub detect_ps: u64,
    /// From the failure to every switch routing on the topology without the link (BGP has
    /// reconverged), ps; at least `detect_ps`.
    pub reroute_ps: u64,
}

impl Default for FailureTiming {
    fn default() -> Self {
        Self {
            detect_ps: FAILURE_DETECT_PS,
            reroute_ps: FAILURE_REROUTE_PS,
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scheme {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scheme::ALL
            .into_iter()
            .find(|scheme| scheme.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| ModelError::UnknownScheme { name: s.to_owned() })
    }
}

impl Serialize for Scheme {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Scheme {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// One flow of an explicit traffic matrix: host indices (positions in
/// [`ofan_topology::Topology::hosts`]) and a message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// Message size in bytes.
    pub bytes: u64,
}

/// The traffic matrix of the collective.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Workload {
    /// A random derangement: every host sends one message to a distinct other host.
    Permutation,
    /// A random permutation in which every flow crosses pods (crosses leaves in leaf-spine),
    /// as in paper Fig. 3.
    InterPodPermutation,
    /// Every host sends one message to every other host.
    AllToAll,
    /// Host `i` sends to host `(i + stride) mod n`, in host order.
    Ring {
        /// Distance to the next host of the ring.
        stride: u32,
    },
    /// Explicit flows, e.g. read from a file with [`crate::workload::parse_matrix`].
    Matrix {
        /// The flows (a pair listed twice is one flow carrying the sum).
        flows: Vec<FlowSpec>,
    },
    /// An htsim connection matrix ([`crate::htsim::parse`]): flows with start times and
    /// triggers; every flow stays a flow of its own.
    Htsim {
        /// `Nodes N` of the file's header.
        nodes: u32,
        /// Its flows and triggers.
        graph: FlowGraph,
    },
    /// A ring collective whose steps wait for the previous step's chunk
    /// ([`crate::collective`]); `message_bytes` is each host's buffer.
    Collective {
        /// Which collective, servers, ring order.
        collective: Collective,
    },
    /// Mixture-of-experts dispatch over servers ([`crate::moe`], paper §6.6).
    Moe {
        /// Token matrix and dispatch.
        moe: Moe,
    },
    /// The backward pass of FSDP2 with HSDP, layer by layer ([`crate::fsdp`], paper §6.7).
    Fsdp {
        /// Layers, flow size, servers, ring order.
        fsdp: Fsdp,
    },
}

impl Workload {
    /// Short name for reports.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Workload::Permutation => "permutation",
            Workload::InterPodPermutation => "inter_pod_permutation",
            Workload::AllToAll => "all_to_all",
            Workload::Ring { .. } => "ring",
            Workload::Matrix { .. } => "matrix",
            Workload::Htsim { .. } => "htsim",
            Workload::Collective { collective } => collective.kind.name(),
            Workload::Moe { .. } => "moe",
            Workload::Fsdp { .. } => "fsdp",
        }
    }
}

/// How fast hosts send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pacing {
    /// At `load` × line rate.
    Offered,
    /// At `load` × ρ_max, the highest rate every flow can sustain under the failures (paper
    /// §2.2, §6.2).
    RhoMax,
}

/// How a host's pacer makes room for the ACKs it sends: the host link carries both. Either way
/// `load` means what it means for the lab agent (`netns-lab/agent/src/pacing.rs`): data is
/// paced at `load` × the reference rate, and only the ACK airtime that does not fit in the idle
/// time this leaves pushes data back, so that at `load` 1 data plus ACKs fill the link exactly
/// and never overload it. The NIC sends each data frame when it is due and fits the ACKs into
/// the room the pacer leaves (see [`crate::sim`], "Hosts").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AckAirtime {
    /// Charged by count, as the lab agent's pacer does: each data departure pushes the next
    /// one back by the airtime of the ACKs the host sent since the previous departure, less the
    /// idle time of the paced gap. A sender's period then varies with the ACKs it happens to
    /// send, and its phase drifts with them.
    #[default]
    Charged,
    /// Reserved on a fixed schedule, as a rate limiter set to leave room for the ACKs would:
    /// data frame i is due at `start + i × period` with `period = max(frame time / load,
    /// frame time + a × ACK time)`, where `a` is the ACKs the host sends per data frame it
    /// sends, at most one (a host receives at most one frame per frame time). ACKs beyond the
    /// room wait for the next one; data departures are strictly periodic (paper §2.2's
    /// fixed-rate source, the premise of Thm. 2).
    Reserved,
}

/// When a switch port decides a DATA frame's CE mark ([`ModelConfig::ecn_at`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnAt {
    /// When the frame joins the queue: marked if the queue it joins already holds the
    /// threshold (the lab's switches; RED as RFC 3168 describes it).
    #[default]
    Enqueue,
    /// When the frame leaves: marked if the queue it leaves behind still holds the threshold,
    /// as htsim's queues decide it (`decide_ECN` on dequeue) — the signal of a queue that
    /// grew is a queue's drain time earlier. Measured when the frame reaches the next hop,
    /// a propagation delay after it finished leaving.
    Dequeue,
}

impl EcnAt {
    #[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
    const fn is_enqueue(&self) -> bool {
        matches!(self, Self::Enqueue)
    }
}

/// When each host sends its first data frame.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartPhase {
    /// Every host at t = 0 (paper §2.1: collectives are synchronous). Paced at the same rate,
    /// the hosts of an edge switch then deliver their frames to it in the same picosecond, and
    /// the order the switch handles them in is the order of the simulator's events (which
    /// frame preceded each on its wire), not a property of the switch.
    #[default]
    Synchronous,
    /// Every host at its own seeded random time within one data frame time of t = 0, as
    /// hosts that start together up to clock skew: no two hosts' frames tie, and periodic
    /// senders arrive in the same order every period (the premise of paper Thm. 2 and of the
    /// N·D/D/1 models of §3.4, periodic flows with random phases).
    Random,
}

/// Whether a full buffer drops frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BufferLimit {
    /// Drop-tail at `buffer_bytes` (paper §6).
    Enforced,
    /// Queues grow without limit (the analysis of paper §2.2, §3.3: "large buffers"); AR still
    /// quantizes against `buffer_bytes`.
    Unlimited,
}

/// Which switch-to-switch links are down.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Failures {
    /// None.
    None,
    /// Each edge–aggregation and aggregation–core link fails independently with this
    /// probability, drawn from the run's seed; a sample that disconnects a flow is redrawn.
    Random {
        /// Failure probability per link, in `[0, 1)`.
        probability: f64,
    },
    /// These link ids (positions in [`ofan_topology::Topology::links`]).
    Links {
        /// Failed link ids.
        links: Vec<u32>,
    },
}

/// The most data frames one ACK may acknowledge ([`ModelConfig::ack_every`]).
pub const MAX_ACK_EVERY: u32 = 64;

const fn one_frame() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
const fn is_one_frame(frames: &u32) -> bool {
    *frames == 1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
const fn is_false(flag: &bool) -> bool {
    !*flag
}

/// Everything one run depends on. Same config → bit-identical [`crate::RunReport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Fat tree or leaf-spine, and its radix.
    pub topology: TopologyKind,
    /// Line rate, propagation, packet framing.
    pub link: LinkParams,
    /// Per-output-port buffer of every switch port, bytes (frames without the inter-frame gap).
    pub buffer_bytes: u64,
    /// Whether the buffer drops when full.
    pub buffer_limit: BufferLimit,
    /// A data packet is marked CE when the queue it joins already holds at least this many
    /// bytes (REPS reacts to it; every scheme counts marks).
    pub ecn_threshold_bytes: u64,
    /// When the CE mark is decided (absent in older reports and when on enqueue).
    #[serde(default, skip_serializing_if = "EcnAt::is_enqueue")]
    pub ecn_at: EcnAt,
    /// Offered load as a fraction of the pacing reference, in `(0, 1]`.
    pub load: f64,
    /// The pacing reference (line rate or ρ_max).
    pub pacing: Pacing,
    /// How hosts pace around the ACKs they send (absent in older reports: charged).
    #[serde(default)]
    pub ack_airtime: AckAirtime,
    /// When hosts start (absent in older reports: synchronous).
    #[serde(default)]
    pub start_phase: StartPhase,
    /// Data frames a receiver acknowledges with one ACK (absent in older reports and when 1:
    /// one ACK per frame). Above 1, htsim's UEC sink: an ACK at once for a CE-marked frame, a
    /// duplicate, a flow's first and last frame and a frame its sender asked for (a
    /// retransmission, the last new frame, one that fills the window), otherwise once per this
    /// many frames, each telling everything received since the sender last heard (see
    /// [`crate::sim`], "Hosts").
    #[serde(default = "one_frame", skip_serializing_if = "is_one_frame")]
    pub ack_every: u32,
    /// UEC's packet trimming (absent in older reports and when off): a switch port whose buffer
    /// cannot take a DATA frame cuts it to its header (`link.header_bytes`) instead of dropping
    /// it, and the receiver answers the header with a NACK at once, which makes its sender
    /// send the packet again without waiting for a timer (see [`crate::sim`], "Loss
    /// recovery"). No effect with unlimited buffers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub trim: bool,
    /// Receiver credits beside the CCA (absent in older reports and when off), as htsim's UEC
    /// source runs by default: a sender sends a new packet only with credit and window; its
    /// receiver grants one data frame of credit per PULL, at most one per data frame time of
    /// its link (see `sim/credit.rs`). Only with a CCA: without one, no effect (a figure's
    /// `none` points run without).
    #[serde(default, skip_serializing_if = "is_false")]
    pub receiver_credit: bool,
    /// Message size of every generated flow, bytes.
    pub message_bytes: u64,
    /// The traffic matrix.
    pub workload: Workload,
    /// The load-balancing scheme.
    pub scheme: Scheme,
    /// Ports per pipe (pOfan's pipe size; every algorithm's state is per pipe, pipe = ingress
    /// port / pipe size).
    pub pipe_ports: u16,
    /// Failed links.
    pub failures: Failures,
    /// Seed of every random choice: workload, failures, switches, hosts.
    pub seed: u64,
    /// The hosts' retransmission timers, in picoseconds. `None` (the default, and absent in
    /// older reports): [`RecoveryConfig::for_round_trip`] of the full DATA frame's wire time at
    /// line rate and of the longest round trip a packet can take without being lost (every
    /// queue on the longest path full, both ways, plus propagation), so that a run that loses
    /// nothing never retransmits (see [`crate::sim`], "Loss recovery").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryConfig>,
    /// The adaptive-routing framework's timing (read by the `arf-*` schemes only; absent in
    /// older reports: the defaults).
    #[serde(default)]
    pub arf: ArfConfig,
    /// Links slower than line rate (absent in older reports: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<DegradedLink>,
    /// Links that fail during the run (absent in older reports: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fail_at: Vec<LinkFailure>,
    /// How the switches learn of [`ModelConfig::fail_at`] (absent in older reports: the
    /// defaults).
    #[serde(default)]
    pub failure_timing: FailureTiming,
    /// The hosts' congestion control (absent in older reports and when `none`: the pacer
    /// alone, today's hosts event for event). With a CCA the hosts also detect losses with a
    /// reordering window and their timers' floor is the unloaded round trip (see
    /// [`crate::sim`], "Congestion control").
    #[serde(default, skip_serializing_if = "CcKind::is_none")]
    pub cc: CcKind,
    /// With congestion control: the reordering window of loss detection, per mille of the
    /// smoothed RTT (`None`: the model's default, see [`crate::sim`], "Congestion control").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_window_permille: Option<u32>,
    /// Switches that run another scheme than [`ModelConfig::scheme`] (paper §6.4; absent in
    /// older reports and when every switch runs `scheme`).
    #[serde(default, skip_serializing_if = "SwitchSchemes::is_uniform")]
    pub switch_schemes: SwitchSchemes,
    /// How a host of a multi-plane fabric spreads its packets over its planes
    /// ([`crate::planes`]; absent in older reports and when the default, `plane-spray`; read
    /// only when the topology has several planes).
    #[serde(default, skip_serializing_if = "PlanePolicy::is_default")]
    pub host_planes: PlanePolicy,
}

impl ModelConfig {
    /// The paper's defaults (§6): k = 12 fat tree, [`LinkParams::paper`], 800 KB buffers, 80 KB
    /// ECN threshold, drop-tail, full line rate with ACK airtime charged as the lab agent does,
    /// every host starting at t = 0, 1 MiB permutation, `ofan`, pipes of 4 ports, no failures,
    /// retransmission timers from the frame time and the longest lossless round trip, no link
    /// failing during the run.
    #[must_use]
    pub fn paper() -> Self {
        Self {
            topology: TopologyKind::FatTree { k: 12 },
            link: LinkParams::paper(),
            buffer_bytes: 800_000,
            buffer_limit: BufferLimit::Enforced,
            ecn_threshold_bytes: 80_000,
            ecn_at: EcnAt::Enqueue,
            load: 1.0,
            pacing: Pacing::Offered,
            ack_airtime: AckAirtime::Charged,
            start_phase: StartPhase::Synchronous,
            ack_every: 1,
            trim: false,
            receiver_credit: false,
            message_bytes: 1 << 20,
            workload: Workload::Permutation,
            scheme: Scheme::Switch(Algorithm::Ofan),
            pipe_ports: 4,
            failures: Failures::None,
            seed: 1,
            recovery: None,
            arf: ArfConfig::default(),
            degraded: Vec::new(),
            fail_at: Vec::new(),
            failure_timing: FailureTiming::default(),
            cc: CcKind::None,
            reorder_window_permille: None,
            switch_schemes: SwitchSchemes::Uniform,
            host_planes: PlanePolicy::PlaneSpray,
        }
    }

    /// Checks every value once.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] naming the first field out of range.
    pub fn validate(&self) -> Result<(), ModelError> {
        let invalid = |field, value: String, reason| {
            Err(ModelError::InvalidConfig {
                field,
                value,
                reason,
            })
        };
        if !(self.load > 0.0 && self.load <= 1.0) {
            return invalid("load", self.load.to_string(), "expected 0 < load <= 1");
        }
        if self.link.rate_bps == 0 {
            return invalid("rate_bps", "0".into(), "links need a rate");
        }
        if self.link.payload_bytes == 0 {
            return invalid("payload_bytes", "0".into(), "packets need a payload");
        }
        let data_frame = u64::from(self.link.payload_bytes) + u64::from(self.link.header_bytes);
        if data_frame > u64::from(u32::MAX / 2) {
            return invalid(
                "payload_bytes",
                data_frame.to_string(),
                "frames are at most 2 GiB",
            );
        }
        if self.link.ack_bytes == 0 {
            return invalid("ack_bytes", "0".into(), "ACKs need a size");
        }
        if !(1..=MAX_ACK_EVERY).contains(&self.ack_every) {
            return invalid(
                "ack_every",
                self.ack_every.to_string(),
                "expected 1 to 64 data frames per ACK",
            );
        }
        if self.trim && self.link.header_bytes == 0 {
            return invalid(
                "trim",
                "true".into(),
                "a trimmed frame is its header: header_bytes must be at least 1",
            );
        }
        if self.buffer_bytes < data_frame {
            return invalid(
                "buffer_bytes",
                self.buffer_bytes.to_string(),
                "a buffer must hold one data frame",
            );
        }
        if self.message_bytes == 0 {
            return invalid("message_bytes", "0".into(), "messages need a size");
        }
        if self.pipe_ports == 0 {
            return invalid("pipe_ports", "0".into(), "pipes hold at least one port");
        }
        if let Workload::Ring { stride } = self.workload {
            if stride == 0 {
                return invalid("ring stride", "0".into(), "a ring needs a non-zero stride");
            }
        }
        if let Some(recovery) = self.recovery {
            if recovery.validate().is_err() {
                return invalid(
                    "recovery",
                    format!("{recovery:?}"),
                    "expected 0 < rto_min <= rto_initial <= rto_max",
                );
            }
        }
        if self.arf.window_ps == 0 || self.arf.refresh_windows == 0 || self.arf.hold_refreshes == 0
        {
            return invalid(
                "arf",
                format!("{:?}", self.arf),
                "windows, refresh and hold must be positive",
            );
        }
        if self.arf.delay_ps == 0 {
            return invalid(
                "arf delay",
                "0".into(),
                "a notification takes time (at least 1 ps)",
            );
        }
        for link in &self.degraded {
            if !(link.rate > 0.0 && link.rate <= 1.0) {
                return invalid(
                    "degraded rate",
                    link.rate.to_string(),
                    "expected 0 < rate <= 1",
                );
            }
        }
        if self.failure_timing.detect_ps > self.failure_timing.reroute_ps {
            return invalid(
                "failure timing",
                format!("{:?}", self.failure_timing),
                "routing cannot converge before the adjacent switches detect: detect <= reroute",
            );
        }
        if self.topology.planes() > 1 {
            if matches!(self.scheme, Scheme::Spray | Scheme::Reps | Scheme::Drb) {
                return invalid(
                    "scheme",
                    self.scheme.name().into(),
                    "on several planes the hosts steer with --host-planes; the switches run a switch scheme",
                );
            }
            if !self.cc.is_none() {
                return invalid(
                    "cc",
                    format!("{:?}", self.cc),
                    "congestion control is not modelled on several planes yet (hosts pace)",
                );
            }
        }
        if let Failures::Random { probability } = self.failures {
            if !(0.0..1.0).contains(&probability) {
                return invalid(
                    "failure probability",
                    probability.to_string(),
                    "expected 0 <= p < 1",
                );
            }
        }
        Ok(())
    }
}
