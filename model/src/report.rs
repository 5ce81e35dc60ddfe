//! What one run of a collective measured: the report schema `ofan.run/2`, one type for both
//! producers — the model (`source = "model"`) and the namespace lab (`source = "lab"`).
//!
//! Every field common to the two is defined once, here, with one meaning; what only one of them
//! can tell lives in its [`Details`] section (the model's configuration and its F.4 invariant;
//! the lab's setup, delivery check, loss census and emulation fidelity). A report read back
//! from JSON is the same value ([`RunReport::from_json`]).
//!
//! # Conventions
//! - Time is integer picoseconds. The *run window* of a report starts with the first DATA
//!   departure and ends at the CCT (the last ACK); for a run that did not complete, at the
//!   last thing the producer saw (the model's last event, the lab's last agent report).
//! - A port's *queue* holds every frame accepted and not yet fully transmitted: the frame on
//!   the wire counts until its last bit has left. Buffer admission uses the same count.
//! - *Wire bits* of a frame are its bytes plus the inter-frame gap ([`crate::config`]'s link
//!   parameters: preamble, delimiter, gap), times eight.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;

/// The schema name every report carries.
pub const SCHEMA: &str = "ofan.run/2";

/// The six queueing stages of a three-tier fat tree, by output port.
///
/// In leaf-spine, leaf→spine ports count as [`Stage::EdgeUp`] and spine→leaf ports as
/// [`Stage::CoreDown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Host NIC → edge (H→E).
    HostUp,
    /// Edge → aggregation (E→A).
    EdgeUp,
    /// Aggregation → core (A→C).
    AggUp,
    /// Core → aggregation (C→A).
    CoreDown,
    /// Aggregation → edge (A→E).
    AggDown,
    /// Edge → host (E→H).
    EdgeDown,
}

impl Stage {
    /// Every stage, from the sending host to the receiving host.
    pub const ALL: [Stage; 6] = [
        Stage::HostUp,
        Stage::EdgeUp,
        Stage::AggUp,
        Stage::CoreDown,
        Stage::AggDown,
        Stage::EdgeDown,
    ];

    /// The paper's arrow label (`E→A`, …).
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Stage::HostUp => "H→E",
            Stage::EdgeUp => "E→A",
            Stage::AggUp => "A→C",
            Stage::CoreDown => "C→A",
            Stage::AggDown => "A→E",
            Stage::EdgeDown => "E→H",
        }
    }

    /// Whether the stage's ports belong to switches (all but the host NIC).
    #[must_use]
    pub const fn is_switch(self) -> bool {
        !matches!(self, Stage::HostUp)
    }
}

/// Queue statistics of the output ports of one stage (queue as defined in the
/// [module documentation](self): the frame on the wire included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Stage.
    pub stage: Stage,
    /// Number of output ports in the stage.
    pub ports: u32,
    /// Largest queue of any port, frames (DATA and ACKs).
    pub max_packets: u64,
    /// Largest number of DATA frames queued at any port, where the producer tells DATA from
    /// ACKs (the model; the lab's switches do not).
    pub max_data_packets: Option<u64>,
    /// Largest queue of any port, bytes (frame bytes, no gap).
    pub max_bytes: u64,
    /// Time-averaged queue per port over the run window, frames.
    pub mean_packets: f64,
    /// Time-averaged queue per port over the run window, bytes.
    pub mean_bytes: f64,
    /// Frame bytes sent by the stage's busiest port over the mean of its ports, minus one
    /// (paper Fig. 3's link overload; DATA and ACK frames alike, DATA dominate); 0 when the
    /// stage sent nothing.
    pub link_overload: f64,
    /// Mean over the stage's ports of wire bits sent / (line rate × run window).
    pub utilization: f64,
}

/// Frames the hosts sent and received.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketCounts {
    /// DATA transmissions, retransmissions included.
    pub data_sent: u64,
    /// DATA transmissions that were retransmissions.
    pub retransmissions: u64,
    /// Retransmission timeouts that fired (each retransmits one packet).
    pub timeouts: u64,
    /// Distinct DATA packets that reached their destination.
    pub data_delivered: u64,
    /// DATA arrivals of a packet that had already arrived.
    pub duplicate_data: u64,
    /// ACKs the receivers sent (one per DATA arrival, duplicates included).
    pub acks_sent: u64,
    /// ACK arrivals at the DATA senders, duplicates included.
    pub acks_delivered: u64,
    /// ACK arrivals for a packet that was already ACKed.
    pub duplicate_acks: u64,
    /// DATA packets that arrived marked CE.
    pub ecn_marks: u64,
    /// Flows whose every DATA packet was delivered and ACKed.
    pub flows_complete: u64,
    /// DATA frames a switch cut to their header at a full buffer (`--trim`; absent when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub trimmed: u64,
    /// NACKs the receivers sent for trimmed frames (`--trim`; absent when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub nacks: u64,
    /// PULLs the receivers sent, one data frame of credit each (`--receiver-credit`; absent
    /// when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pulls: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
const fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Frames lost on the way, by reason (`switch.buffer`, `xsk.rx_ring_full`, …; only reasons
/// that occurred). The reasons each producer reports are listed where it fills them in
/// (`Sim::report` in the model, `experiment::metrics` in the lab).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// Sum over the reasons.
    pub total: u64,
    /// Count per reason.
    pub by_reason: BTreeMap<String, u64>,
}

impl Drops {
    /// Counts `count` frames lost for `reason` (nothing when `count` is 0).
    pub fn add(&mut self, reason: &str, count: u64) {
        if count > 0 {
            *self.by_reason.entry(reason.to_owned()).or_default() += count;
            self.total += count;
        }
    }

    /// The count of `reason` (0 when it never occurred).
    #[must_use]
    pub fn get(&self, reason: &str) -> u64 {
        self.by_reason.get(reason).copied().unwrap_or(0)
    }
}

/// A checked invariant: Ofan's edge-uplink queue never exceeds w + 1 data frames (paper F.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeUplinkInvariant {
    /// Whether the bound's conditions hold for this run (scheme `ofan`, a permutation in which
    /// every host sends and receives at most one flow, no failures, equal-size data frames but
    /// possibly a shorter last one, load ≤ 1). When false the numbers are still reported.
    pub applies: bool,
    /// w + 1.
    pub bound_data_packets: u32,
    /// Largest number of data frames seen in an edge-uplink queue (checked at every enqueue).
    pub max_data_packets: u32,
    /// Enqueues after which an edge-uplink queue held more than w + 1 data frames.
    pub violations: u64,
}

/// What only the model tells. Fully determined by its configuration: no wall-clock field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRun {
    /// The configuration that produced this report.
    pub config: ModelConfig,
    /// Failed links (ids).
    pub failed_links: Vec<u32>,
    /// Fraction of line rate hosts were paced at (load × ρ_max or load).
    pub send_rate: f64,
    /// ρ_max of the workload under the failures (computed when failures or ρ_max pacing ask
    /// for it).
    pub rho_max: Option<f64>,
    /// Ofan's edge-uplink bound (paper F.4), checked at every enqueue.
    pub edge_uplink: EdgeUplinkInvariant,
    /// Events processed: frame arrivals and pacer departures (the retransmission timers' own
    /// events are not counted).
    pub events: u64,
    /// Simulated time of the last event, ps.
    pub end_ps: u64,
    /// The degraded links' directions and what they carried (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub degraded: Vec<DegradedPort>,
    /// The adaptive-routing framework's control plane (`arf-*` schemes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arf: Option<ArfRun>,
    /// Links that failed during the run (absent when none): when, what they lost, who learned
    /// of them when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link_failures: Vec<LinkFailureRun>,
    /// The hosts' congestion control and loss detection (absent without congestion control).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<Box<CcRun>>,
    /// The hosts of a multi-plane fabric: per plane, what they sent and learned (absent with
    /// one plane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<PlaneRun>,
}

/// What the hosts of a multi-plane fabric did with their planes ([`crate::planes`]); every
/// list is per plane, in plane order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlaneRun {
    /// The hosts' policy.
    pub policy: crate::planes::PlanePolicy,
    /// DATA frames sent on each plane, retransmissions included.
    pub data_sent: Vec<u64>,
    /// ACKs that came back on each plane echoing a CE mark.
    pub ce_acks: Vec<u64>,
    /// Packets declared lost (timer expired) whose latest copy took each plane.
    pub losses: Vec<u64>,
    /// `plane-arf`: views of an edge switch's plane passed on to its hosts.
    pub views_delivered: u64,
    /// DATA wire bytes sent on each plane (the lab's agents count them; empty in the model's
    /// reports, whose frames are all `data_sent` × one size).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wire_bytes: Vec<u64>,
    /// `[n]`: flows that sent on exactly n planes (the lab's agents; empty in the model's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows_by_planes_used: Vec<u64>,
    /// `plane-arf` in the lab: per plane, the notifications the hosts took from their edges
    /// (the model passes views, counted by `views_delivered`; empty there and without
    /// notifications).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<u64>,
}

/// One phase of a workload with dependencies ([`crate::deps`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRun {
    /// The phase's name.
    pub name: String,
    /// Its flows.
    pub flows: u64,
    /// When its first flow started, ps (`None`: none did).
    pub start_ps: Option<u64>,
    /// When its last flow completed, ps (`None`: some flow did not).
    pub end_ps: Option<u64>,
    /// `end_ps − start_ps`: the phase's own completion time.
    pub cct_ps: Option<u64>,
}

impl PhaseRun {
    /// The phases called `names`, from every flow's phase index, start (`None`: it never
    /// started) and completion (`None`: it did not complete), ps: a phase runs from its first
    /// flow's start to its last flow's completion, and has no end while a flow of it did not
    /// complete (or when it has no flow). One rule for the model and the lab.
    pub fn collect(
        names: &[String],
        flows: impl IntoIterator<Item = (u16, Option<u64>, Option<u64>)>,
    ) -> Vec<Self> {
        let mut phases: Vec<Self> = names
            .iter()
            .map(|name| Self {
                name: name.clone(),
                flows: 0,
                start_ps: None,
                end_ps: Some(0),
                cct_ps: None,
            })
            .collect();
        for (phase, start, done) in flows {
            let Some(phase) = phases.get_mut(usize::from(phase)) else {
                continue;
            };
            phase.flows += 1;
            if let Some(start) = start {
                phase.start_ps = Some(phase.start_ps.map_or(start, |s| s.min(start)));
            }
            phase.end_ps = phase.end_ps.zip(done).map(|(end, done)| end.max(done));
        }
        for phase in &mut phases {
            if phase.flows == 0 {
                phase.end_ps = None;
            }
            phase.cct_ps = phase
                .start_ps
                .zip(phase.end_ps)
                .map(|(s, e)| e.saturating_sub(s));
        }
        phases
    }
}

/// What congestion control did in a run ([`crate::ModelConfig::cc`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CcRun {
    /// The algorithm and every parameter, as scaled to the fabric (times in ps).
    pub config: ofan_transport::CcConfig,
    /// The reordering window, per mille of the smoothed RTT.
    pub reorder_window_permille: u32,
    /// The retransmission timers in force (ps).
    pub recovery: ofan_transport::RecoveryConfig,
    /// Packets declared lost by the reordering window (before their timer).
    pub reorder_losses: u64,
    /// ACKs with an RTT sample, and of those the ones that came back after the ACK of a
    /// packet of the same flow sent later.
    pub rtt_samples: u64,
    /// See `rtt_samples`.
    pub reordered_acks: u64,
    /// Largest reordering (how much later the overtaking packet was sent), ps.
    pub max_reordering_ps: u64,
    /// Upper bound (a power of two, ps) of the 99th percentile of the reordering.
    pub reordering_p99_ps: Option<u64>,
    /// Mean congestion window at the end of the run over the flows, bytes.
    pub mean_final_window: u64,
}

/// A link that failed during the run ([`crate::ModelConfig::fail_at`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkFailureRun {
    /// The lower-tier end.
    pub from: String,
    /// The upper-tier end.
    pub to: String,
    /// Link id.
    pub link: u32,
    /// When it failed, ps.
    pub at_ps: u64,
    /// When both adjacent switches knew (local detection), ps.
    pub detected_ps: u64,
    /// When every switch routed around it (routing reconverged), ps.
    pub rerouted_ps: u64,
    /// Frames in its two ports' queues (being sent included) when it failed
    /// (`link.down.queued`).
    pub lost_queued: u64,
    /// Frames on its wire, sent and propagating, when it failed (`link.down.in_flight`).
    pub lost_in_flight: u64,
    /// Frames switches sent to its dead ports before they detected it (`link.down.unaware`).
    pub lost_unaware: u64,
    /// Frames a switch that knew dropped at its dead port, having no other way (a core towards
    /// the pod behind it, before routing reconverged; also in `switch.no_route`).
    pub no_route: u64,
    /// When the last frame was lost at this link (any of the above), ps.
    pub last_loss_ps: Option<u64>,
    /// The switches that learned of it before routing reconverged: the two adjacent ones by
    /// detection, and under `arf-*` every switch whose table the *failure detected*
    /// notification changed (the first time, `notified_ps`). Every other switch learned at
    /// `rerouted_ps`.
    pub learned: Vec<SwitchLearned>,
}

/// When one switch learned of a failed link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchLearned {
    /// The switch.
    pub switch: String,
    /// By local detection (an adjacent switch), ps.
    pub detected_ps: Option<u64>,
    /// By the adaptive-routing framework's *failure detected* notification, ps.
    pub notified_ps: Option<u64>,
}

/// One slow direction of a degraded link and what it carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DegradedPort {
    /// Sending switch.
    pub from: String,
    /// Receiving switch.
    pub to: String,
    /// Fraction of line rate.
    pub rate: f64,
    /// Frame bytes the direction carried (DATA and ACKs).
    pub bytes: u64,
    /// Frame bytes carried, over the mean of the other ports of its stage (1.0: its fair share).
    pub share_of_stage_mean: f64,
}

/// What the adaptive-routing framework's control plane did in a run: notifications, their
/// overhead, and how fast a detection reached the neighbours' tables.
///
/// Notifications travel out of band in the model (they take no room on the links); their bytes
/// are what they would cost on the wire: the 48-byte message (64 with a flow) plus [`ArfRun::HEADER_BYTES`] of
/// Ethernet, IPv4 and UDP headers each.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArfRun {
    /// Detection window, ps.
    pub window_ps: u64,
    /// Control-plane delay of a notification, ps.
    pub delay_ps: u64,
    /// Detector windows taken (fabric ports × windows).
    pub windows: u64,
    /// Congestion detected by a detector (state changes to congested).
    pub detections: u64,
    /// Congestion cleared.
    pub clears: u64,
    /// When the first congestion was detected, ps (`None`: never).
    pub first_detection_ps: Option<u64>,
    /// Notifications sent (one per recipient): state changes and refreshes.
    pub sent: u64,
    /// Of which refreshes.
    pub refreshes: u64,
    /// Notifications a recipient applied (changed or refreshed its table).
    pub applied: u64,
    /// Of which changed a link's level in the recipient's table.
    pub changed: u64,
    /// Notifications that were stale on arrival (older sequence number).
    pub stale: u64,
    /// Table entries that aged out (hold time without refresh).
    pub expired: u64,
    /// Path-quality views published to the balancers (local level or table changes).
    pub publications: u64,
    /// Bytes the notifications would take on the wire: `sent × (48 + HEADER_BYTES)` plus
    /// `flow_sent × (64 + HEADER_BYTES)`.
    pub bytes: u64,
    /// Frame bytes the fabric's switch-to-switch ports carried (DATA and ACKs).
    pub fabric_bytes: u64,
    /// `bytes / fabric_bytes`.
    pub overhead: f64,
    /// Reaction time: from a detection to the table change it caused at a neighbour, over every
    /// such change, ps: mean, min, max (`None`: no detection changed a table).
    pub reaction_mean_ps: Option<f64>,
    /// Minimum of the reaction time, ps.
    pub reaction_min_ps: Option<u64>,
    /// Maximum of the reaction time, ps.
    pub reaction_max_ps: Option<u64>,
    /// Flows `arf-flow` moved off a congested path (summed over pipes).
    pub flows_moved: u64,
    /// Flow-specific messages sent (`arf-flow`: a congested port's named flows, per
    /// neighbour told).
    #[serde(default)]
    pub flow_sent: u64,
    /// Flow messages that named a path of their recipient (a redirect request published).
    #[serde(default)]
    pub flow_applied: u64,
    /// Flows a switch named on one of its own congested up-ports (a local redirect request).
    #[serde(default)]
    pub flow_local: u64,
}

impl ArfRun {
    /// The notification message (`ofan-control`'s `notify::wire::HEADER_LEN`), bytes.
    pub const MESSAGE_BYTES: u64 = 48;
    /// A flow-specific notification (header and five-tuple), bytes.
    pub const FLOW_MESSAGE_BYTES: u64 = 64;
    /// Ethernet (14), IPv4 (20) and UDP (8) headers around it, bytes.
    pub const HEADER_BYTES: u64 = 42;
}

/// How a lab repetition was run (what the report must say besides the measurements).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabSetup {
    /// Lab name.
    pub lab: String,
    /// Collective (`permutation`, `all-to-all`, `ring`, `matrix`).
    pub collective: String,
    /// Switch load-balancing algorithm.
    pub lb: String,
    /// How `arf-*` switches combined a path's local and remote levels (absent: `min`).
    #[serde(default, skip_serializing_if = "ofan_dataplane::arf::Combine::is_min")]
    pub arf_combine: ofan_dataplane::arf::Combine,
    /// Host-side load balancing of the agents (`none`, `spray`, `reps`).
    pub host_lb: String,
    /// Bytes per flow (the largest, for a matrix).
    pub message_bytes: u64,
    /// ρ: the agents send at ρ × link rate.
    pub load: f64,
    /// Link rate of every link, bits per second.
    pub link_rate_bps: u64,
    /// UDP payload of a full DATA packet (agent header included).
    pub payload: u32,
    /// Egress buffer per switch port, as the switches were given it.
    pub buffer: String,
    /// Whether the switches' shapers made up for late departures (`up --catch-up`; whether
    /// the agents did is in their reports, `--agent-catch-up`).
    #[serde(default)]
    pub catch_up: bool,
    /// The hosts' congestion control and its parameters (time in ns; absent: none, the pacer
    /// alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<ofan_transport::CcConfig>,
    /// Repetition number, from 0.
    pub repetition: u32,
    /// Seed of the collective (permutation) of this repetition.
    pub seed: u64,
    /// Links the lab ran slower than `link_rate_bps` (`link A B rate R`); the lower bound
    /// counts them (pod boundary term).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowed_links: Vec<SlowedLink>,
}

/// A link slower than the rest of the lab (`ofan-lab link A B rate R`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowedLink {
    /// The topology's link id.
    pub link: u32,
    /// One end (node name).
    pub a: String,
    /// The other end.
    pub b: String,
    /// Its rate, bit/s.
    pub rate_bps: u64,
}

/// Did every packet arrive? (The counts themselves are in [`PacketCounts`].)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// DATA packets the plan's flows consist of.
    pub data_expected: u64,
    /// Packets that never arrived.
    pub missing: u64,
    /// Every agent completed (all own flows ACKed, all incoming flows received).
    pub complete: bool,
    /// Complete, nothing missing, and every duplicate explained by a retransmission (a packet
    /// the sender resent because its ACK was late or lost).
    pub exactly_once: bool,
    /// Agents that bound their sockets after the start time (peers' first packets may have
    /// found no socket): should be 0.
    pub late_agents: u32,
}

/// Every frame the agents sent, accounted for: delivered, counted as dropped by some counter,
/// or still queued in a switch when the run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Census {
    /// Frames the agents sent: DATA transmissions and ACKs.
    pub frames_sent: u64,
    /// Frames the agents received: DATA and ACK arrivals, duplicates included.
    pub frames_received: u64,
    /// Frames sent and never received.
    pub frames_lost: u64,
    /// Frames still queued at switch ports after the run.
    pub frames_queued: u64,
    /// Lost frames that neither a drop counter ([`RunReport::drops`]) nor a queue explains:
    /// should be 0. (Counters also count frames the agents did not send, such as neighbour
    /// discovery, so a positive value is certain, a zero one is a bound.)
    pub unaccounted: u64,
}

/// How faithfully the lab emulated the links.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// Worst port's shaper lateness p99 (upper bucket bound) in packet times of a full DATA
    /// frame, over ports that sent enough frames to tell.
    pub shaper_late_p99_packet_times: f64,
    /// That port, `switch:port`.
    pub worst_port: String,
    /// Lowest achieved / requested sending rate over the agents with at least two packets.
    pub agent_rate_ratio_min: f64,
    /// Largest p99 lateness of an agent's departures, ns.
    pub agent_late_p99_ns_max: u64,
    /// What lateness cost the agent of the lowest rate: the time its departures fell behind
    /// their schedule (lateness catch-up did not make up), ns, and the sends that cost it. A
    /// few sends and milliseconds each: the agents' sender was stalled (the machine, not the
    /// lab's load); many small ones: it could not keep up. Absent (0) in reports from before
    /// 2026-12-04.
    #[serde(default)]
    pub slowest_agent_lost_ns: u64,
    /// See [`slowest_agent_lost_ns`](Self::slowest_agent_lost_ns).
    #[serde(default)]
    pub slowest_agent_lost_sends: u64,
    /// When that agent's latest send left, ms after the repetition's first departure (of any
    /// agent): one instant for a stall of the machine, the start for a warm-up. Absent in
    /// reports from before 2026-12-07.
    #[serde(default)]
    pub slowest_agent_worst_at_ms: Option<f64>,
    /// Smallest ratio over the receivers of their observed delivery window to the time their
    /// link needs at line rate for what they received: below 1, frames arrived faster than the
    /// emulated link can carry them (a shaper catching up after a stall).
    #[serde(default = "one")]
    pub receiver_window_ratio_min: f64,
    /// Times a switch's routes changed while the repetition ran, summed over the switches
    /// (`ofan-switch stats`' `fib.route_changes`): a routing session that went down and came
    /// back — a routing daemon starved of CPU, say — reroutes and drops traffic the fabric
    /// under test would not have. Absent (0) in reports from before 2026-12-02.
    #[serde(default)]
    pub route_changes: u64,
    /// The switches whose routes changed (names, in topology order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rerouted_switches: Vec<String>,
    /// Frames lost where the fabric under test would not have lost them, summed over the
    /// lab's emulation drop counters (the report's `drops` names each): the emulator fell
    /// behind (an AF_XDP ring, a worker's inbox, a veth or a host's socket full) or the control
    /// plane failed the run (no route, a neighbour unresolved). Buffer overflows are the
    /// fabric's own and do not count. Absent (0) in reports from before 2026-12-03, which
    /// counted these drops but did not judge by them.
    #[serde(default)]
    pub emulation_drops: u64,
    /// Shaper lateness p99 within the lab's threshold, every agent within 1 % of its rate, no
    /// receiver window compressed by more than 1 %, and — unless the run injected a fault
    /// (`run --chaos`) that changes them — no route changed and no emulation drop.
    pub faithful: bool,
}

fn one() -> f64 {
    1.0
}

/// What only the lab tells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabRun {
    /// How it was run.
    pub setup: LabSetup,
    /// Delivery check.
    pub delivery: Delivery,
    /// Every frame accounted for.
    pub census: Census,
    /// Emulation fidelity.
    pub fidelity: Fidelity,
    /// The fault injected during the repetition (`run --chaos`), and what it did to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chaos: Option<ChaosRecord>,
    /// Stalls of the machine below its scheduler while the repetition ran (`None`: not
    /// watched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineStalls>,
    /// A multi-plane lab: what the hosts sent on each plane, summed over the agents (`None`:
    /// one plane). `views_delivered` is 0: the switches' notifications do not reach the hosts
    /// in the lab yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<PlaneRun>,
}

/// Stalls of the machine during a repetition that its scheduler did not see — a virtual CPU
/// held by the hypervisor, or interrupt work charged to the thread that ran — as one SCHED_IDLE
/// thread per CPU saw them in the CPUs' idle time (a lower bound: it sees only those that
/// strike while it runs). They make shapers and agents late whatever the lab does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineStalls {
    /// How long it watched, seconds.
    pub seconds: f64,
    /// CPUs watched.
    pub cpus: usize,
    /// The share of the CPUs' time it ran (and so could see a stall), 0–1.
    pub watched: f64,
    /// Stalls of a millisecond or more.
    pub hidden_stalls: u64,
    /// Their total length over all CPUs, ms.
    pub hidden_ms_total: f64,
    /// The longest, ms.
    pub hidden_ms_max: f64,
    /// The largest share of a CPU's time the hypervisor reported stolen (`/proc/stat`), 0–1.
    pub steal_max: f64,
    /// The share of the traffic's time (from the agents' common start to the last one's
    /// completion), in windows of 10 ms, in which the CPUs had no time to spare: on every CPU
    /// the watching thread (which gets only what nothing else wants) ran less than 5 % of the
    /// window, 0–1. Lateness in those windows is the lab's load — switches, agents, the
    /// kernel's per-frame work, and the switches' threads spinning to departures too near to
    /// sleep for — exceeding the machine, not a stall of it. `None` in records from before
    /// 2026-12-02 or a repetition shorter than two windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus_full: Option<f64>,
}

/// One fault injected into a running repetition (`ofan-lab run --chaos SEED`) and the
/// repetition's outcome: either every packet is accounted for — delivered exactly once (lost
/// ones recovered by retransmission) and every lost frame counted by name — or the record says
/// which fault voided it and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChaosRecord {
    /// The chaos seed of the run (each repetition draws its fault from it and its index).
    pub seed: u64,
    /// `link-flap`, `switch-kill` or `routing-restart`.
    pub kind: String,
    /// The fault in words, e.g. `link a-p0-0 c-1 down for 1.20 s`.
    pub fault: String,
    /// When it was applied, seconds after the traffic started (`None`: never, see `outcome`).
    pub applied_s: Option<f64>,
    /// When the fabric was whole again, seconds after the traffic started.
    pub restored_s: Option<f64>,
    /// `accounted` or `voided`.
    pub outcome: String,
    /// Why it was voided (missing packets, frames no counter explains, counters lost with a
    /// crashed switch, a fault that could not be applied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The producer's own section, tagged by `source` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "lowercase")]
pub enum Details {
    /// The deterministic model.
    Model(ModelRun),
    /// The namespace lab.
    Lab(LabRun),
}

/// One run of a collective (schema [`SCHEMA`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// Hosts in the topology (the model) or the plan (the lab).
    pub hosts: u32,
    /// Flows of the collective.
    pub flows: u32,
    /// Collective completion time: first DATA sent to last ACK received, ps; `None` when some
    /// flow never completed.
    pub cct_ps: Option<u64>,
    /// Lower bound for the system that produced the report: no run of it can finish sooner
    /// (`ofan_topology::timing`, one definition parameterized by the system): the larger over
    /// the hosts of their paced sending at ρ and their line-rate receiving, each followed by
    /// the last frames' trips — store and forward in the model, frames leaving at the start of
    /// their slot in the lab — ps.
    pub lower_bound_ps: u64,
    /// `cct / lower_bound − 1`.
    pub cct_increase: Option<f64>,
    /// DATA wire bits delivered (distinct packets) over line rate × the sum of the receivers'
    /// delivery windows, a receiver's window running from its first DATA arrival to its last
    /// plus one full-frame time, and never shorter than its frames take at line rate (so the
    /// value is at most 1; in the lab a shorter observed window is an emulation artefact,
    /// reported as `receiver_window_ratio_min`): 1.0 when every receiver is fed back to back.
    pub utilization: f64,
    /// Largest queue at any switch port, frames.
    pub max_queue_packets: u64,
    /// Largest queue at any switch port, bytes.
    pub max_queue_bytes: u64,
    /// Per-stage queue statistics, from host to host.
    pub queues: Vec<QueueStats>,
    /// Frames sent and received by the hosts.
    pub packets: PacketCounts,
    /// Frames lost, by reason.
    pub drops: Drops,
    /// How out of order the receivers got their packets (first transmissions only; absent in
    /// reports written before it was measured, read back as zero).
    #[serde(default)]
    pub reordering: ofan_transport::Reordering,
    /// Per phase of a workload with dependencies (a ring collective's reduce-scatter and
    /// all-gather, an htsim file's one phase `all`): absent for the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<PhaseRun>,
    /// The producer's own section (`"source": "model"` or `"lab"`).
    #[serde(flatten)]
    pub details: Details,
}

impl RunReport {
    /// The statistics of `stage`, if the topology has it.
    #[must_use]
    pub fn stage(&self, stage: Stage) -> Option<&QueueStats> {
        self.queues.iter().find(|stats| stats.stage == stage)
    }

    /// The model's section, when the model produced the report.
    #[must_use]
    pub fn model(&self) -> Option<&ModelRun> {
        match &self.details {
            Details::Model(model) => Some(model),
            Details::Lab(_) => None,
        }
    }

    /// The lab's section, when the lab produced the report.
    #[must_use]
    pub fn lab(&self) -> Option<&LabRun> {
        match &self.details {
            Details::Lab(lab) => Some(lab),
            Details::Model(_) => None,
        }
    }

    /// Reads a report written as JSON.
    ///
    /// # Errors
    /// When the text is not a report of schema [`SCHEMA`].
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        let report: Self = serde_json::from_str(text).map_err(ReportError::Json)?;
        if report.schema != SCHEMA {
            return Err(ReportError::Schema(report.schema));
        }
        Ok(report)
    }
}

/// A report that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Not JSON of this shape.
    #[error("not an {SCHEMA} report: {0}")]
    Json(serde_json::Error),
    /// Another schema.
    #[error("schema {0}, expected {SCHEMA}")]
    Schema(String),
}
