//! The agent's result file (`--out`), and the collective completion time over all agents.
//!
//! All times are CLOCK_MONOTONIC nanoseconds, the clock every namespace of the machine shares,
//! so times of different agents compare directly.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// Everything one agent measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    /// This host's name in the plan.
    pub host: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// Collective id of the plan.
    pub collective: u32,
    /// `--host-lb`.
    pub host_lb: String,
    /// UDP payload bytes of a full DATA packet.
    pub payload: u32,
    /// `--link-rate`, bits per second.
    pub link_rate_bps: u64,
    /// `--load` (ρ).
    pub load: f64,
    /// `--start-at`: when the first packet was due.
    pub start_ns: u64,
    /// When the agent's sockets were bound: after `start_ns`, peers' first packets may have
    /// found no socket (the lab must start agents early enough).
    pub ready_ns: u64,
    /// First DATA packet sent (None without own flows).
    pub first_send_ns: Option<u64>,
    /// Last new ACK received (None without ACKs).
    pub last_ack_ns: Option<u64>,
    /// Every own flow fully ACKed and every incoming flow fully received.
    pub complete: bool,
    /// The agent stopped at `--timeout` before completing.
    pub timed_out: bool,
    /// This host's flows.
    pub flows: Vec<FlowReport>,
    /// DATA received, per source host.
    pub received: Vec<SourceReport>,
    /// ACKs sent (one per DATA arrival, duplicates included).
    #[serde(default)]
    pub acks_sent: u64,
    /// The sender's loss recovery: retransmissions, timeouts, RTT estimate (ns).
    #[serde(default)]
    pub recovery: ofan_transport::RecoveryStats,
    /// The sender's congestion control (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cc: Option<CcReport>,
    /// Packets that were not counted above.
    pub ignored: Ignored,
    /// How well the departure schedule was kept.
    pub pacing: PacingReport,
    /// Host-side load balancing.
    pub entropy: EntropyReport,
    /// A multi-plane host: what each plane carried (`None`: one plane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<PlanesReport>,
}

/// What a multi-plane host sent on each of its planes (index = plane).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanesReport {
    /// The host policy (`plane-hash`, `plane-spray`, `plane-arf`, `entropy`).
    pub policy: String,
    /// DATA packets sent per plane (retransmissions included).
    pub packets: Vec<u64>,
    /// DATA wire bytes sent per plane.
    pub wire_bytes: Vec<u64>,
    /// ACKs that came back CE-marked, per plane of the DATA they answer.
    pub ce_acks: Vec<u64>,
    /// Packets declared lost, per plane they were sent on.
    pub losses: Vec<u64>,
    /// `[n]`: own flows that sent on exactly n planes.
    pub flows_by_planes_used: Vec<u32>,
    /// `plane-arf` with notifications: per plane, the notifications the host took from its
    /// edge there (that changed or refreshed its table); empty without.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<u64>,
    /// Datagrams on the notification port that changed nothing (not from the edge, not
    /// entitled, stale, malformed).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub notifications_rejected: u64,
    /// Changed views of an edge's plane that reached the sender.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub views_delivered: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// What the sender's congestion control did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CcReport {
    /// The algorithm and its parameters (time in ns).
    pub config: ofan_transport::CcConfig,
    /// The flows' mean congestion window at the end, bytes.
    pub mean_window_bytes: u64,
    /// Time the windows held the host back while it had new packets to send, ns (the pacing
    /// report's rates leave it out: a window-limited host is not a late one).
    pub blocked_ns: u64,
    /// How far out of order the ACKs came back, ns (what the reordering window must span).
    pub reordering: ofan_transport::ReorderStats,
}

/// One own flow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowReport {
    /// Flow id (position in the plan).
    pub flow: u32,
    /// Destination host.
    pub dst: String,
    /// Message bytes.
    pub bytes: u64,
    /// DATA packets of the flow.
    pub packets: u32,
    /// Distinct packets ACKed.
    pub acks: u32,
    /// ACKs for packets already ACKed.
    pub duplicate_acks: u64,
    /// ACKs echoing CE (distinct packets).
    pub ce_marks: u64,
    /// Retransmissions (selective repeat: a packet whose ACK did not come within the
    /// retransmission timeout is sent again).
    pub retransmits: u64,
    /// First packet sent.
    pub first_send_ns: Option<u64>,
    /// Last packet sent.
    pub last_send_ns: Option<u64>,
    /// Last new ACK received.
    pub last_ack_ns: Option<u64>,
}

/// DATA received from one source host (over all its flows to this host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    /// Source host.
    pub src: String,
    /// Its flows to this host.
    pub flows: u32,
    /// Packets the plan says it sends.
    pub expected: u64,
    /// Packets that arrived (duplicates included).
    pub packets: u64,
    /// Arrivals of packets that had already arrived.
    pub duplicates: u64,
    /// Packets that never arrived.
    pub missing: u64,
    /// Packets that arrived CE-marked.
    pub ce_marks: u64,
    /// First arrival.
    pub first_ns: Option<u64>,
    /// Last arrival.
    pub last_ns: Option<u64>,
    /// How out of order its first transmissions arrived, over its flows.
    #[serde(default)]
    pub reordering: ofan_transport::Reordering,
}

/// Datagrams the agent received but did not count.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ignored {
    /// Not an agent header.
    pub malformed: u64,
    /// Another collective id (stale traffic of an earlier run).
    pub foreign_collective: u64,
    /// A flow id this host is not the destination (DATA) or source (ACK) of.
    pub unknown_flow: u64,
    /// DATA not from the flow's source host, or an ACK not from its destination host: neither
    /// ACKed nor recorded (a forged packet cannot fake delivery or completion).
    #[serde(default)]
    pub wrong_source: u64,
    /// A sequence number beyond the flow's packet count (e.g. another `--payload`).
    pub out_of_range: u64,
    /// ACKs that could not be sent.
    pub ack_send_errors: u64,
    /// Frames still in the socket when the agent stopped, read and discarded (so that the run's
    /// census counts them as received, not lost).
    #[serde(default)]
    pub drained: u64,
}

/// Pacing accuracy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacingReport {
    /// ρ × link rate, bits per second.
    pub requested_bps: f64,
    /// DATA wire bits of all packets but the last over first-to-last departure (None with < 2
    /// packets).
    pub achieved_bps: Option<f64>,
    /// Wire bytes of the ACKs this host sent (they share the host link with DATA).
    #[serde(default)]
    pub ack_wire_bytes: u64,
    /// DATA and ACK wire bits on the host link over first-to-last DATA departure: what the
    /// link carried.
    #[serde(default)]
    pub link_bps: Option<f64>,
    /// What the link should have carried over that window: ρ·R of DATA plus the ACKs, at most
    /// R. `link_bps / expected_link_bps` is the pacing accuracy.
    #[serde(default)]
    pub expected_link_bps: f64,
    /// DATA packets sent.
    pub packets: u64,
    /// Their wire bytes (frame incl. FCS, plus 20 bytes of preamble and gap).
    pub wire_bytes: u64,
    /// First departure.
    pub first_send_ns: Option<u64>,
    /// Last departure.
    pub last_send_ns: Option<u64>,
    /// Median lateness of a send against its due time.
    pub late_p50_ns: u64,
    /// 99th percentile lateness.
    pub late_p99_ns: u64,
    /// Largest lateness (includes a late start).
    pub late_max_ns: u64,
    /// When that send left (CLOCK_MONOTONIC, ns; the same clock as `first_send_ns`, in every
    /// agent): stalls that hit every agent at once show as one instant. Absent in reports from
    /// before 2026-12-07.
    #[serde(default)]
    pub late_max_at_ns: Option<u64>,
    /// Mean lateness: the time a strict pacer lost per send on average.
    #[serde(default)]
    pub late_mean_ns: u64,
    /// What late sends cost the schedule: the time the departures fell behind it, lateness
    /// catch-up did not make up (all lateness without catch-up), ns. The rate falls short of
    /// ρ·R by this over the sending time; a handful of stalls or many small delays —
    /// `late_lost_sends` tells which.
    #[serde(default)]
    pub late_lost_ns: u64,
    /// Sends that cost the schedule any time (late beyond catch-up's half a wire time).
    #[serde(default)]
    pub late_lost_sends: u64,
    /// Mean time a DATA send call took (`sendto`; for a veth it includes the peer's XDP
    /// program and the copy into a switch's UMEM, which run in the sender's softirq). A shared
    /// agent's one sender thread serves every host: hosts due closer together than this wait
    /// for each other, which `late_mean_ns` shows.
    #[serde(default)]
    pub send_mean_ns: u64,
    /// The spin window before each departure.
    pub spin_ns: u64,
    /// The step of the grid the sender's passes fall on (an eighth of a full frame's wire
    /// time with `--catch-up`; 0: a pass at each departure): each departure is up to one step
    /// late, which catch-up makes up.
    #[serde(default)]
    pub grid_ns: u64,
    /// Late sends were compensated (`--catch-up`).
    pub catch_up: bool,
    /// The sender thread ran SCHED_FIFO (`--rt-priority`).
    pub realtime: bool,
    /// Sends retried because the kernel had no buffer.
    pub send_retries: u64,
    /// DATA frames lost because the host's shared-memory link to its switch was full (the
    /// switch did not read it: stopped, or far behind): counted by the run as `host.link_full`.
    #[serde(default)]
    pub host_link_drops: u64,
}

/// Entropy (source port) use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntropyReport {
    /// Sockets in the pool.
    pub pool: u16,
    /// Their UDP source ports, entropy i = `ports[i]`.
    pub ports: Vec<u16>,
    /// Packets that reused a recycled entropy (REPS).
    pub recycled: u64,
    /// Packets with a freshly drawn entropy (spray, REPS).
    pub fresh: u64,
}

impl AgentReport {
    /// This agent's own completion time: last ACK − first send.
    #[must_use]
    pub fn own_cct_ns(&self) -> Option<u64> {
        Some(self.last_ack_ns?.saturating_sub(self.first_send_ns?))
    }
}

/// Collective completion time over all agents of a run: the last ACK received anywhere minus
/// the first DATA packet sent anywhere. `None` when nothing was sent or ACKed.
#[must_use]
pub fn collective_cct_ns(reports: &[AgentReport]) -> Option<u64> {
    let first = reports.iter().filter_map(|r| r.first_send_ns).min()?;
    let last = reports.iter().filter_map(|r| r.last_ack_ns).max()?;
    Some(last.saturating_sub(first))
}
