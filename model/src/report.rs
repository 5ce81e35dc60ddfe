//! What a run measures, as serializable data (schema `ofan.run/1`, shared with the lab where
//! the two overlap: `cct_ps`, `lower_bound_ps`, `cct_increase`, `utilization`, `queues`).

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;

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

/// Queue statistics of the output ports of one stage.
///
/// A port's queue holds every frame enqueued and not yet fully transmitted (the frame being
/// serialized included); bytes are frame bytes without the inter-frame gap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Stage.
    pub stage: Option<Stage>,
    /// Number of output ports in the stage.
    pub ports: u32,
    /// Largest queue of any port, frames (data and ACKs).
    pub max_packets: u32,
    /// Largest number of data frames queued at any port.
    pub max_data_packets: u32,
    /// Largest queue of any port, bytes.
    pub max_bytes: u64,
    /// Time-averaged queue per port over the run, frames.
    pub mean_packets: f64,
    /// Time-averaged queue per port over the run, bytes.
    pub mean_bytes: f64,
    /// Worst link overload: data frames carried by the busiest port over the mean of the
    /// stage's ports, minus one (paper Fig. 3); 0 when the stage carried nothing.
    pub link_overload: f64,
}

/// Packet accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketCounts {
    /// Data frames the hosts sent: every transmission, retransmissions included.
    pub data_sent: u64,
    /// Data frames that reached their destination host, copies of a packet already received
    /// included.
    pub data_delivered: u64,
    /// ACKs the receivers sent.
    pub acks_sent: u64,
    /// ACKs that reached the data sender.
    pub acks_delivered: u64,
    /// Frames dropped at a full switch buffer.
    pub drops_buffer: u64,
    /// Frames dropped because no up-port was valid.
    pub drops_no_route: u64,
    /// Data frames marked CE.
    pub ecn_marks: u64,
    /// Flows whose every data packet was delivered (at least once: the receivers count
    /// distinct packets) and acknowledged.
    pub flows_complete: u64,
    /// Flows in the workload.
    pub flows: u64,
    /// Data frames sent again by the hosts' loss recovery (included in `data_sent`).
    #[serde(default)]
    pub retransmissions: u64,
    /// Retransmission timers that expired (each led to one retransmission, unless the packet
    /// was given up after 64).
    #[serde(default)]
    pub timeouts: u64,
    /// Data frames that reached their destination host when it already had that packet
    /// (included in `data_delivered`): the copies of spurious retransmissions, or of packets
    /// whose ACK was lost.
    #[serde(default)]
    pub duplicate_data: u64,
    /// ACKs that reached the data sender for a packet already acknowledged (included in
    /// `acks_delivered`).
    #[serde(default)]
    pub duplicate_acks: u64,
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

/// The result of one run. Fully determined by the [`ModelConfig`]: no wall-clock field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// `"ofan.run/1"`.
    pub schema: String,
    /// `"model"` (the lab writes `"lab"`).
    pub source: String,
    /// The configuration that produced this report.
    pub config: ModelConfig,
    /// Hosts in the topology.
    pub hosts: u32,
    /// Failed links (ids).
    pub failed_links: Vec<u32>,
    /// Fraction of line rate hosts were paced at (load × ρ_max or load).
    pub send_rate: f64,
    /// ρ_max of the workload under the failures (computed when failures or ρ_max pacing ask
    /// for it).
    pub rho_max: Option<f64>,
    /// Collective completion time: first frame sent (t = 0) to the first ACK of the last
    /// packet acknowledged, ps, lost frames recovered by the hosts' selective repeat; `None` if
    /// some flow never completed (a packet given up after 64 timeouts).
    pub cct_ps: Option<u64>,
    /// Lower bound on the CCT at full line rate without failures, ps (paper A; for workloads
    /// where hosts carry several flows, also the per-host serialization bound).
    pub lower_bound_ps: u64,
    /// `cct / lower_bound − 1`.
    pub cct_increase: Option<f64>,
    /// Data bits delivered (frames with their gap; each packet once, copies not counted) over line rate × the sum of the receivers'
    /// delivery windows, a receiver's window running from its first data arrival to its last
    /// plus one frame time: 1.0 when every receiver is fed back to back.
    pub utilization: f64,
    /// Largest queue at any switch port, bytes.
    pub max_queue_bytes: u64,
    /// Largest queue at any switch port, frames.
    pub max_queue_packets: u32,
    /// Per-stage queue statistics, from host to host.
    pub queues: Vec<QueueStats>,
    /// Packet accounting.
    pub packets: PacketCounts,
    /// Ofan's edge-uplink bound (paper F.4), checked at every enqueue.
    pub edge_uplink: EdgeUplinkInvariant,
    /// Events processed: frame arrivals and pacer departures (the retransmission timers' own
    /// events are not counted).
    pub events: u64,
    /// Simulated time of the last event, ps.
    pub end_ps: u64,
}

impl RunReport {
    /// The statistics of `stage`.
    ///
    /// # Panics
    /// Never for reports produced by [`crate::run`] (they list every stage).
    #[must_use]
    pub fn stage(&self, stage: Stage) -> &QueueStats {
        self.queues
            .iter()
            .find(|stats| stats.stage == Some(stage))
            .expect("every stage is reported")
    }
}
