//! Selective repeat with per-packet retransmission timers (RFC 6298), for the flows one host
//! sends.
//!
//! # Contract
//! The caller owns time and the wire. It tells [`SelectiveRepeat`] when it (re)transmits a packet
//! ([`SelectiveRepeat::on_send`]) and when an ACK arrives ([`SelectiveRepeat::on_ack`]); before
//! each transmission it asks whether a packet is due again ([`SelectiveRepeat::next_lost`]) and
//! sends that one first; when it has nothing else to send it sleeps until
//! [`SelectiveRepeat::next_deadline`]. Flows are local indices `0..n`; sequence numbers are
//! `0..packets[flow]`. Calls about a flow or sequence number out of range are ignored
//! ([`on_send`](SelectiveRepeat::on_send)) or answered [`Ack::OutOfRange`]: nothing here panics
//! on what the network delivers.
//!
//! # Timers
//! A packet sent once expires at `sent + rto`, with `rto` the *current* retransmission timeout:
//! every first transmission shares it, so the oldest one expires first and a FIFO in send order
//! answers "which first transmission expires next" from its head. A packet sent again after
//! its `t`-th timeout expires at `sent + min(rto · 2^t, rto_max)` (exponential backoff per
//! packet), fixed when it is sent; those wait in a binary heap, which holds only the packets
//! being recovered. Entries of packets that were ACKed or sent again since are skipped when
//! they reach the front (lazy deletion), so an ACK costs O(1).
//!
//! `rto` starts at `rto_initial` and follows RFC 6298 §2 from the packets that were sent exactly
//! once (Karn's rule: the ACK of a retransmitted packet may answer either copy):
//! the first sample `R` sets `srtt = R`, `rttvar = R / 2`; each later one sets
//! `rttvar = 3/4 · rttvar + 1/4 · |srtt − R|`, then `srtt = 7/8 · srtt + 1/8 · R` (integer
//! arithmetic, rounded down); `rto = max(rto_min, srtt + 4 · rttvar)`, capped at `rto_max`.
//! A timeout also doubles every timer (RFC 6298 §5.5: `rto · 2^b` after `b` timeouts since the
//! last RTT sample, at most `rto_max`; a packet's own timer uses the larger of `b` and its own
//! timeouts) until a sample arrives: a sender whose round trip grew past its timeout all at
//! once (a burst of queueing, a stalled machine) then resends a handful of packets, not every
//! one of them several times over. ACKs that echo which copy they answer
//! ([`SelectiveRepeat::on_ack_echo`]) give samples from retransmitted packets too.
//!
//! With a reordering window ([`SelectiveRepeat::with_reordering_window`], the congestion-
//! controlled senders), an expired timer also declares lost the flow's first transmissions in
//! flight that left more than a smoothed RTT and the window before it (RFC 8985 §6.3): a flow
//! that lost a whole window at once is sent again after one timeout, not one backed-off timeout
//! per packet.
//!
//! # Example
//! ```
//! use ofan_transport::{Ack, RecoveryConfig, SelectiveRepeat};
//!
//! // One flow of two packets, a frame time of 10 (rto_min 160, rto_initial 640).
//! let mut recovery = SelectiveRepeat::new(RecoveryConfig::for_frame_time(10), &[2]);
//! recovery.on_send(0, 0, 0);
//! recovery.on_send(0, 1, 10); // lost
//! assert_eq!(recovery.on_ack(0, 0, 50), Ack::New); // RTT 50: rto = max(160, 50 + 4 · 25)
//! assert_eq!(recovery.next_lost(169), None);
//! assert_eq!(recovery.next_lost(170), Some((0, 1))); // sent at 10, rto 160
//! recovery.on_send(0, 1, 170);
//! assert_eq!(recovery.on_ack(0, 1, 220), Ack::New);
//! assert!(recovery.complete());
//! assert_eq!(recovery.stats().retransmissions, 1);
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use serde::{Deserialize, Serialize};

/// A point in time or a duration, in the caller's unit (ns in the lab agent, ps in the model).
pub type Time = u64;

/// First transmissions the FIFO has room for before it first grows.
const FIFO_CAPACITY: usize = 256;

/// The bits of a copy's number that an ACK echoes ([`SelectiveRepeat::on_ack_echo`]): 7, so
/// that the tag fits beside a flag in one byte.
pub const ECHO_MASK: u32 = 0x7f;

/// Retransmission-timer parameters (in the caller's time unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryConfig {
    /// Lower bound of the RTO computed from RTT samples.
    pub rto_min: Time,
    /// RTO before the first RTT sample.
    pub rto_initial: Time,
    /// Upper bound of the RTO and of every backed-off timeout.
    pub rto_max: Time,
}

/// Why a [`RecoveryConfig`] is not usable as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// The timeouts are not ordered `0 < rto_min <= rto_initial <= rto_max`.
    #[error(
        "retransmission timeouts must satisfy 0 < rto_min ({rto_min}) <= rto_initial \
         ({rto_initial}) <= rto_max ({rto_max})"
    )]
    InvalidTimeouts {
        /// The given `rto_min`.
        rto_min: Time,
        /// The given `rto_initial`.
        rto_initial: Time,
        /// The given `rto_max`.
        rto_max: Time,
    },
}

impl RecoveryConfig {
    /// `rto_min` in frame times: twice the unloaded round trip of the longest fat-tree path
    /// (6 store-and-forward hops of a DATA frame plus the ACK's way back ≈ 7–8 frame times), so
    /// that the timer of an unqueued packet never fires before its ACK can be back.
    pub const RTO_MIN_FRAMES: u64 = 16;
    /// `rto_initial` in frame times: before any sample, 8× the unloaded round trip (RFC 6298
    /// starts at 1 s, several times a typical RTT), which leaves room for the queues the first
    /// packets of a synchronous collective meet.
    pub const RTO_INITIAL_FRAMES: u64 = 64;
    /// `rto_max` in frame times: a backed-off timer waits at most this long (with 1 MB flows of
    /// ~700 frames at 1 472 B, a few messages' worth), so a lost packet at the end of a run is
    /// not left for minutes.
    pub const RTO_MAX_FRAMES: u64 = 4096;

    /// Defaults scaled to the wire time of one full DATA frame at line rate, `frame_time`
    /// (both the lab and the model call this, so they recover alike): `rto_min` =
    /// [`RTO_MIN_FRAMES`](Self::RTO_MIN_FRAMES) = 16 frame times, `rto_initial` =
    /// [`RTO_INITIAL_FRAMES`](Self::RTO_INITIAL_FRAMES) = 64, `rto_max` =
    /// [`RTO_MAX_FRAMES`](Self::RTO_MAX_FRAMES) = 4096. A `frame_time` of 0 counts as 1.
    #[must_use]
    pub fn for_frame_time(frame_time: Time) -> Self {
        let frame_time = frame_time.max(1);
        Self {
            rto_min: frame_time.saturating_mul(Self::RTO_MIN_FRAMES),
            rto_initial: frame_time.saturating_mul(Self::RTO_INITIAL_FRAMES),
            rto_max: frame_time.saturating_mul(Self::RTO_MAX_FRAMES),
        }
    }

    /// [`for_frame_time`](Self::for_frame_time) with `max_round_trip` added to each timeout,
    /// for networks whose round trip is not a few frame times: `max_round_trip` is the longest
    /// a DATA packet and its ACK can take without being lost — propagation both ways plus every
    /// queue on the way full (each switch buffer drained at line rate). A timer then fires only
    /// once the packet can no longer be sitting in a queue, so a network that loses nothing
    /// sees no spurious retransmission however its queues vary; [`RecoveryConfig::for_frame_time`]
    /// alone (16 frame times) fires spuriously as soon as the queues on a path hold ~10 frames
    /// while the RTT is steady (RFC 6298's `rttvar` then decays to nearly 0, and `rto_min` is
    /// the only margin). With `max_round_trip` = 0 this is `for_frame_time`.
    #[must_use]
    pub fn for_round_trip(frame_time: Time, max_round_trip: Time) -> Self {
        let frames = Self::for_frame_time(frame_time);
        Self {
            rto_min: frames.rto_min.saturating_add(max_round_trip),
            rto_initial: frames.rto_initial.saturating_add(max_round_trip),
            rto_max: frames.rto_max.saturating_add(max_round_trip),
        }
    }

    /// The longest round trip of a DATA packet and its ACK that loses nothing, for
    /// [`for_round_trip`](Self::for_round_trip): over each of `path_links` links a frame waits
    /// at most for a full queue (`queue`: a full buffer drained at line rate), then takes its own
    /// wire time (`data_wire` one way, `ack_wire` back) and the link's `propagation`. The lab
    /// and the model both compute their timers from it.
    #[must_use]
    pub fn max_round_trip(
        path_links: u64,
        queue: Time,
        data_wire: Time,
        ack_wire: Time,
        propagation: Time,
    ) -> Time {
        let data_way = queue.saturating_add(data_wire).saturating_add(propagation);
        let ack_way = queue.saturating_add(ack_wire).saturating_add(propagation);
        path_links.saturating_mul(data_way.saturating_add(ack_way))
    }

    /// Checks `0 < rto_min <= rto_initial <= rto_max`.
    ///
    /// # Errors
    /// [`RecoveryError::InvalidTimeouts`] otherwise.
    pub fn validate(&self) -> Result<(), RecoveryError> {
        if 0 < self.rto_min && self.rto_min <= self.rto_initial && self.rto_initial <= self.rto_max
        {
            Ok(())
        } else {
            Err(RecoveryError::InvalidTimeouts {
                rto_min: self.rto_min,
                rto_initial: self.rto_initial,
                rto_max: self.rto_max,
            })
        }
    }

    /// The closest valid configuration: `rto_max` at least 1, `rto_min` within `1..=rto_max`,
    /// `rto_initial` within `rto_min..=rto_max`. A valid configuration is returned unchanged.
    #[must_use]
    pub fn normalized(self) -> Self {
        let rto_max = self.rto_max.max(1);
        let rto_min = self.rto_min.clamp(1, rto_max);
        Self {
            rto_min,
            rto_initial: self.rto_initial.clamp(rto_min, rto_max),
            rto_max,
        }
    }
}

/// What an ACK meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ack {
    /// The first ACK of a packet that was sent: it is now acknowledged.
    New,
    /// The packet was already acknowledged (an ACK of a second copy, or a duplicated ACK).
    Duplicate,
    /// No such flow or sequence number, or a packet that was never sent.
    OutOfRange,
}

/// What the recovery did, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryStats {
    /// Transmissions of packets sent before (every [`SelectiveRepeat::on_send`] but the first
    /// of each packet).
    pub retransmissions: u64,
    /// Expired timers reported by [`SelectiveRepeat::next_lost`].
    pub timeouts: u64,
    /// Expired timers of packets that had already timed out the [`SelectiveRepeat::give_up_after`]
    /// limit: their packets are no longer offered for retransmission.
    pub abandoned: u64,
    /// RTT samples taken (ACKs of packets sent exactly once).
    pub rtt_samples: u64,
    /// Smoothed RTT; `None` before the first sample.
    pub srtt: Option<Time>,
    /// RTT variation; `None` before the first sample.
    pub rttvar: Option<Time>,
    /// ACKs of packets already acknowledged.
    pub duplicate_acks: u64,
    /// ACKs of no packet that was sent.
    pub out_of_range_acks: u64,
    /// Packets declared lost by the reordering window
    /// ([`SelectiveRepeat::with_reordering_window`]) before their timer.
    #[serde(default)]
    pub reorder_losses: u64,
    /// Packets declared lost together with an expired timer of their flow (RFC 8985 §6.3,
    /// [`SelectiveRepeat::with_reordering_window`] only): first transmissions still in flight
    /// that left more than a smoothed RTT and the reordering window before the expiry.
    #[serde(default)]
    pub timeout_flight_losses: u64,
    /// Packets declared lost by a NACK ([`SelectiveRepeat::on_nack`]: a switch trimmed them).
    #[serde(default)]
    pub nack_losses: u64,
}

/// How far out of order a host's ACKs came back, measured on every ACK that gives an RTT
/// sample ([`SelectiveRepeat::track_reordering`]): an ACK of a packet sent at `t` while a
/// packet of the same flow sent at `t' > t` was already ACKed is *reordered* by `t' − t`.
/// A reordering-tolerant loss rule must wait at least that long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReorderStats {
    /// ACKs that gave an RTT sample.
    pub samples: u64,
    /// Of those, reordered ones.
    pub reordered: u64,
    /// Largest reordering, time units.
    pub max: Time,
    /// Reordered ACKs by extent: `histogram[i]` counts extents with `i` significant bits
    /// (`[2^(i−1), 2^i)`), the last bucket everything longer.
    pub histogram: [u64; 32],
}

impl ReorderStats {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Self) {
        self.samples += other.samples;
        self.reordered += other.reordered;
        self.max = self.max.max(other.max);
        for (mine, theirs) in self.histogram.iter_mut().zip(other.histogram) {
            *mine += theirs;
        }
    }

    /// The smallest power of two that at least `fraction` of the reordered ACKs stay below
    /// (an upper bound of that quantile), `None` when nothing was reordered.
    #[must_use]
    pub fn quantile_bound(&self, fraction: f64) -> Option<Time> {
        if self.reordered == 0 {
            return None;
        }
        let wanted = (self.reordered as f64 * fraction).ceil() as u64;
        let mut seen = 0;
        for (bits, &count) in self.histogram.iter().enumerate() {
            seen += count;
            if seen >= wanted {
                return Some(1u64.checked_shl(bits as u32).unwrap_or(Time::MAX));
            }
        }
        Some(Time::MAX)
    }
}

/// What the first ACK of a packet told ([`SelectiveRepeat::on_ack_sample`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckSample {
    /// What the ACK meant.
    pub ack: Ack,
    /// The round trip of the copy it answers, when it answers the latest copy.
    pub rtt: Option<Time>,
    /// Packets of the same flow this ACK made the reordering window declare lost.
    pub newly_lost: u32,
}

/// The recovery state of one packet.
#[derive(Debug, Clone, Copy, Default)]
struct PacketState {
    /// When it was last sent.
    sent_at: Time,
    /// Times sent; also the generation that tells a current heap entry from a stale one.
    transmissions: u32,
    /// Times its timer expired (saturating; the backoff is capped long before).
    timeouts: u16,
    acked: bool,
    /// Counted in its flow's outstanding packets (sent, not ACKed, not declared lost since).
    counted: bool,
}

/// A first transmission in the FIFO. Its send time is kept here too, so that "has anything
/// expired" reads only the FIFO's front (a stale front is older than every live entry, so its
/// deadline is a lower bound).
#[derive(Debug, Clone, Copy)]
struct FirstSend {
    flow: u32,
    seq: u32,
    sent_at: Time,
}

/// A retransmitted packet's timer in the heap; ordered by deadline, then flow and sequence
/// number, so that ties resolve the same way in every run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timer {
    deadline: Time,
    flow: u32,
    seq: u32,
    /// The packet's `transmissions` when the timer was armed.
    generation: u32,
}

/// Where a flow's packets start in `SelectiveRepeat::packets`, how many are ACKed and how
/// many are outstanding.
#[derive(Debug, Clone, Copy)]
struct FlowState {
    first: usize,
    packets: u32,
    acked: u32,
    /// Packets sent and neither ACKed nor declared lost since.
    outstanding: u32,
    /// The reordering window's cursor: first transmissions before it were ACKed, declared
    /// lost or sent again.
    rack_next: u32,
    /// Latest send time of a packet of this flow whose ACK answered its latest copy.
    rack_xmit: Time,
}

/// Selective repeat for the flows one host sends. Flows are local indices 0..n.
// `repr(C)`: the fields every send and ACK touch come first, in two cache lines.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct SelectiveRepeat {
    /// Every packet of every flow, flow after flow.
    packets: Vec<PacketState>,
    flows: Vec<FlowState>,
    /// First transmissions in send order, possibly stale.
    fifo: VecDeque<FirstSend>,
    rto: Time,
    srtt: Option<Time>,
    rttvar: Time,
    rtt_samples: u64,
    /// Flows whose every packet is acknowledged.
    complete_flows: usize,
    /// Timers of retransmitted packets, possibly stale.
    heap: BinaryHeap<Reverse<Timer>>,
    config: RecoveryConfig,
    max_timeouts: u32,
    /// Timeouts since the last RTT sample: every timer runs `rto · 2^backoff` (RFC 6298 §5.5).
    backoff: u32,
    stats: RecoveryStats,
    /// The reordering window, per mille of the smoothed RTT (`None`: timers only).
    reorder_permille: Option<u32>,
    /// The window also spans the largest reordering measured so far, and 1/8 more
    /// ([`SelectiveRepeat::with_adaptive_reordering_window`]).
    adaptive_reordering: bool,
    /// Measure reordering ([`ReorderStats`]), implied by a reordering window.
    track_reordering: bool,
    /// Packets the reordering window declared lost, with when, oldest first.
    lost: VecDeque<(u32, u32, Time)>,
    reordering: ReorderStats,
}

/// Where the next expiry comes from.
#[derive(Debug, Clone, Copy)]
enum Expiry {
    Fifo,
    Heap,
}

impl SelectiveRepeat {
    /// `packets[f]` = DATA packets of local flow f. An invalid `config` is
    /// [`normalized`](RecoveryConfig::normalized) (check it with
    /// [`RecoveryConfig::validate`] where it is parsed).
    #[must_use]
    pub fn new(config: RecoveryConfig, packets: &[u32]) -> Self {
        let config = config.normalized();
        let mut flows = Vec::with_capacity(packets.len());
        let mut total = 0usize;
        for &count in packets {
            flows.push(FlowState {
                first: total,
                packets: count,
                acked: 0,
                outstanding: 0,
                rack_next: 0,
                rack_xmit: 0,
            });
            total += count as usize;
        }
        let complete_flows = packets.iter().filter(|&&count| count == 0).count();
        Self {
            packets: vec![PacketState::default(); total],
            flows,
            fifo: VecDeque::with_capacity(total.min(FIFO_CAPACITY)),
            rto: config.rto_initial,
            srtt: None,
            rttvar: 0,
            rtt_samples: 0,
            complete_flows,
            heap: BinaryHeap::new(),
            config,
            max_timeouts: u32::MAX,
            backoff: 0,
            stats: RecoveryStats::default(),
            reorder_permille: None,
            adaptive_reordering: false,
            track_reordering: false,
            lost: VecDeque::new(),
            reordering: ReorderStats::default(),
        }
    }

    /// Declares a first transmission lost, before its timer, once a packet of the same flow
    /// sent more than `permille`/1000 of the smoothed RTT after it has been ACKed (its ACK
    /// answering its latest copy): a time-based rule after RACK (RFC 8985 §6.2, the
    /// "sent sufficiently later was delivered" test, with the reordering window a fixed
    /// fraction of the smoothed RTT instead of RFC 8985's adaptive `min_RTT / 4` steps).
    /// Reordering shorter than the window never causes a retransmission; a loss costs about
    /// one RTT plus the window instead of a timeout. Retransmissions keep their timers only.
    /// Implies [`track_reordering`](Self::track_reordering).
    #[must_use]
    pub fn with_reordering_window(mut self, permille: u32) -> Self {
        self.reorder_permille = Some(permille);
        self.track_reordering = true;
        self
    }

    /// [`with_reordering_window`](Self::with_reordering_window) whose window also spans the
    /// largest reordering this sender has measured so far, and an eighth more: after RFC 8985
    /// §6.2.4, which widens its window when reordering shows up (there through DSACKs; here the
    /// ACK of a copy declared lost too early says itself how late it came, as every ACK echoes
    /// its copy). For networks whose queues are deep compared with their round trip — the lab,
    /// at a few Mbit/s a 6-hop round trip is ~6 frame times and one path's queue of ten frames
    /// reorders its packets by twice that — where a fixed fraction of the smoothed RTT resends
    /// packets that were only late. Each spurious loss widens the window, so they stop.
    #[must_use]
    pub fn with_adaptive_reordering_window(mut self, permille: u32) -> Self {
        self.adaptive_reordering = true;
        self.with_reordering_window(permille)
    }

    /// Measures how far out of order ACKs come back ([`reordering`](Self::reordering)),
    /// without changing what is sent.
    #[must_use]
    pub fn track_reordering(mut self) -> Self {
        self.track_reordering = true;
        self
    }

    /// The reordering measured so far ([`track_reordering`](Self::track_reordering)).
    #[must_use]
    pub fn reordering(&self) -> ReorderStats {
        self.reordering
    }

    /// Packets of `flow` sent and neither ACKed nor declared lost since (what a congestion
    /// window limits); 0 for a flow out of range.
    #[must_use]
    #[inline]
    pub fn outstanding(&self, flow: u32) -> u32 {
        self.flows
            .get(flow as usize)
            .map_or(0, |flow| flow.outstanding)
    }

    /// Gives a packet up after `timeouts` expiries: when its timer expires once more it is not
    /// offered for retransmission (counted in [`RecoveryStats::abandoned`]), so a flow that
    /// cannot get through ends incomplete instead of retrying forever. A late ACK still
    /// acknowledges it. Unlimited by default.
    #[must_use]
    pub fn give_up_after(mut self, timeouts: u32) -> Self {
        self.max_timeouts = timeouts;
        self
    }

    /// The configuration in force (normalized).
    #[must_use]
    pub fn config(&self) -> RecoveryConfig {
        self.config
    }

    /// Where the state of local flow `flow` lives, for callers that prefetch it ahead of a
    /// send or an ACK (the model, whose hosts do not fit in the cache). Reads nothing but this
    /// struct; the address is only ever prefetched.
    #[must_use]
    #[inline]
    pub fn flow_address(&self, flow: u32) -> *const u8 {
        self.flows.as_ptr().wrapping_add(flow as usize).cast()
    }

    /// Where a send or an ACK of `seq` of `flow` will read and write: the packet's state and
    /// both ends of the queue of first transmissions. Reads the flow's state (prefetch it
    /// first, [`flow_address`](Self::flow_address)); as that, for prefetching only.
    #[must_use]
    #[inline]
    pub fn packet_addresses(&self, flow: u32, seq: u32) -> [*const u8; 3] {
        let packets = self.packets.as_ptr();
        let packet = self
            .index(flow, seq)
            .map_or(packets, |index| packets.wrapping_add(index));
        let front = self
            .fifo
            .front()
            .map_or(packet.cast(), |first| std::ptr::from_ref(first).cast());
        let back = self
            .fifo
            .back()
            .map_or(packet.cast(), |last| std::ptr::from_ref(last).cast());
        [packet.cast(), front, back]
    }

    /// Index of `seq` of `flow` in `packets`.
    #[inline]
    fn index(&self, flow: u32, seq: u32) -> Option<usize> {
        let flow = self.flows.get(flow as usize)?;
        (seq < flow.packets).then(|| flow.first + seq as usize)
    }

    /// The packet's timeout after `timeouts` expiries: `rto · 2^timeouts`, at most `rto_max`.
    #[inline]
    fn backed_off(&self, timeouts: u16) -> Time {
        let factor = 1u64
            .checked_shl(self.backoff.max(u32::from(timeouts)))
            .unwrap_or(u64::MAX);
        self.rto.saturating_mul(factor).min(self.config.rto_max)
    }

    /// A (re)transmission of `seq` of `flow` left at `now`: arm its timer.
    #[inline]
    pub fn on_send(&mut self, flow: u32, seq: u32, now: Time) {
        let Some(index) = self.index(flow, seq) else {
            return;
        };
        let packet = &mut self.packets[index];
        packet.transmissions = packet.transmissions.wrapping_add(1);
        packet.sent_at = now;
        if !packet.counted && !packet.acked {
            packet.counted = true;
            self.flows[flow as usize].outstanding += 1;
        }
        if packet.transmissions == 1 {
            self.fifo.push_back(FirstSend {
                flow,
                seq,
                sent_at: now,
            });
            return;
        }
        self.stats.retransmissions += 1;
        if packet.acked {
            return;
        }
        let (generation, timeouts) = (packet.transmissions, packet.timeouts);
        let deadline = now.saturating_add(self.backed_off(timeouts));
        self.heap.push(Reverse(Timer {
            deadline,
            flow,
            seq,
            generation,
        }));
    }

    /// An ACK for `seq` of `flow` arrived at `now`. Updates the RTT estimate (RFC 6298:
    /// srtt, rttvar, rto = max(rto_min, srtt + 4·rttvar), capped at rto_max) from packets sent
    /// exactly once (Karn's rule).
    #[inline]
    pub fn on_ack(&mut self, flow: u32, seq: u32, now: Time) -> Ack {
        self.acknowledge(flow, seq, None, now).ack
    }

    /// How many times `seq` of `flow` was sent so far (0 for an unknown packet). A sender that
    /// can carry a tag in its packets sends `transmissions & ECHO_MASK` with each copy, and its
    /// receiver echoes it in the ACK ([`on_ack_echo`](Self::on_ack_echo)).
    #[must_use]
    #[inline]
    pub fn transmissions(&self, flow: u32, seq: u32) -> u32 {
        self.index(flow, seq)
            .map_or(0, |index| self.packets[index].transmissions)
    }

    /// Like [`on_ack`](Self::on_ack), for an ACK that echoes which copy it answers: `echo` is
    /// the copy's [`transmissions`](Self::transmissions) before it was sent, masked with
    /// [`ECHO_MASK`] (0 for the first copy). An ACK of the latest copy gives an RTT sample even
    /// when the packet was retransmitted (as TCP's timestamp echo does, RFC 7323 §4.1): without
    /// it, a sender whose every packet timed out once would never sample again (Karn's rule).
    #[inline]
    pub fn on_ack_echo(&mut self, flow: u32, seq: u32, echo: u32, now: Time) -> Ack {
        self.acknowledge(flow, seq, Some(echo & ECHO_MASK), now).ack
    }

    /// [`on_ack_echo`](Self::on_ack_echo), returning also the RTT of the copy the ACK
    /// answers (the delay signal of congestion control: the sender knows when it sent each
    /// copy, so an echoed copy number tells the same as an echoed send timestamp) and how
    /// many packets the reordering window declared lost ([`next_lost`](Self::next_lost)
    /// offers them first).
    #[inline]
    pub fn on_ack_sample(&mut self, flow: u32, seq: u32, echo: u32, now: Time) -> AckSample {
        self.acknowledge(flow, seq, Some(echo & ECHO_MASK), now)
    }

    #[inline]
    fn acknowledge(&mut self, flow: u32, seq: u32, echo: Option<u32>, now: Time) -> AckSample {
        let answer = |ack| AckSample {
            ack,
            rtt: None,
            newly_lost: 0,
        };
        let Some(index) = self.index(flow, seq) else {
            self.stats.out_of_range_acks += 1;
            return answer(Ack::OutOfRange);
        };
        let packet = &mut self.packets[index];
        if packet.transmissions == 0 {
            self.stats.out_of_range_acks += 1;
            return answer(Ack::OutOfRange);
        }
        if packet.acked {
            self.stats.duplicate_acks += 1;
            return answer(Ack::Duplicate);
        }
        packet.acked = true;
        let counted = std::mem::take(&mut packet.counted);
        let latest = match echo {
            Some(echo) => echo == packet.transmissions.wrapping_sub(1) & ECHO_MASK,
            None => packet.transmissions == 1,
        };
        let sent_at = packet.sent_at;
        let sample = latest.then(|| now.saturating_sub(sent_at));
        let state = &mut self.flows[flow as usize];
        state.acked += 1;
        state.outstanding -= u32::from(counted);
        if state.acked == state.packets {
            self.complete_flows += 1;
        }
        if let Some(rtt) = sample {
            self.sample(rtt);
        }
        let mut newly_lost = 0;
        if self.track_reordering && sample.is_some() {
            newly_lost = self.reorder(flow, sent_at, now);
        }
        self.skip_fifo();
        AckSample {
            ack: Ack::New,
            rtt: sample,
            newly_lost,
        }
    }

    /// A NACK for `seq` of `flow` arrived at `now`: a switch cut that copy to its header at a
    /// full buffer and the receiver said so (UEC's packet trimming). The packet is lost: it
    /// leaves the flight and [`next_lost`](Self::next_lost) offers it before any timer, as a
    /// packet the reordering window declared lost. `echo` is the copy's
    /// [`transmissions`](Self::transmissions) before it was sent, masked with [`ECHO_MASK`]; a
    /// NACK of an older copy than the latest, of a packet already ACKed or already declared
    /// lost, or of no packet sent changes nothing. Returns whether it declared the packet lost.
    pub fn on_nack(&mut self, flow: u32, seq: u32, echo: u32, now: Time) -> bool {
        let Some(index) = self.index(flow, seq) else {
            return false;
        };
        let packet = &mut self.packets[index];
        let latest = packet.transmissions.wrapping_sub(1) & ECHO_MASK;
        if packet.transmissions == 0 || packet.acked || !packet.counted || echo != latest {
            return false;
        }
        packet.counted = false;
        if packet.transmissions == 1 {
            // As the reordering window marks it: the FIFO's entry no longer times it.
            packet.timeouts = packet.timeouts.max(1);
        }
        self.flows[flow as usize].outstanding -= 1;
        self.lost.push_back((flow, seq, now));
        self.stats.nack_losses += 1;
        true
    }

    /// The ACK of a copy of `flow` sent at `sent_at` arrived at `now`: measure how far out of
    /// order it came, and apply the reordering window. Returns the packets declared lost.
    #[cold]
    fn reorder(&mut self, flow: u32, sent_at: Time, now: Time) -> u32 {
        let state = &mut self.flows[flow as usize];
        self.reordering.samples += 1;
        if state.rack_xmit > sent_at {
            let extent = state.rack_xmit - sent_at;
            self.reordering.reordered += 1;
            self.reordering.max = self.reordering.max.max(extent);
            let bits = (Time::BITS - extent.leading_zeros()) as usize;
            self.reordering.histogram[bits.min(self.reordering.histogram.len() - 1)] += 1;
            return 0;
        }
        state.rack_xmit = sent_at;
        let (Some(permille), Some(srtt)) = (self.reorder_permille, self.srtt) else {
            return 0;
        };
        let window = self.reorder_window(srtt, permille);
        let Some(horizon) = sent_at.checked_sub(window) else {
            return 0;
        };
        // First transmissions leave in sequence order, so the cursor stops at the first one
        // sent within the window (or not sent yet).
        let state = &self.flows[flow as usize];
        let (first, packets) = (state.first, state.packets);
        let mut seq = state.rack_next;
        let mut newly_lost = 0;
        while seq < packets {
            let packet = &mut self.packets[first + seq as usize];
            if packet.transmissions == 0 {
                break;
            }
            if packet.transmissions == 1 && !packet.acked && packet.timeouts == 0 {
                if packet.sent_at >= horizon {
                    break;
                }
                // Lost: offered by `next_lost` before any timer, and no longer in flight.
                packet.timeouts = 1;
                if std::mem::take(&mut packet.counted) {
                    self.flows[flow as usize].outstanding -= 1;
                }
                self.lost.push_back((flow, seq, now));
                self.stats.reorder_losses += 1;
                newly_lost += 1;
            }
            seq += 1;
        }
        self.flows[flow as usize].rack_next = seq;
        newly_lost
    }

    /// The reordering window for a smoothed RTT of `srtt`: `permille`/1000 of it, and with
    /// [`with_adaptive_reordering_window`](Self::with_adaptive_reordering_window) at least the
    /// largest reordering measured so far and an eighth more.
    fn reorder_window(&self, srtt: Time, permille: u32) -> Time {
        let window = (u128::from(srtt) * u128::from(permille) / 1000) as Time;
        if self.adaptive_reordering {
            let seen = self.reordering.max;
            window.max(seen.saturating_add(seen / 8))
        } else {
            window
        }
    }

    /// A timer of `flow` expired at `now`: its first transmissions still in flight that left
    /// more than a smoothed RTT and the reordering window before `now` are lost too (RFC 8985
    /// §6.3: their ACKs would have come). Without this, a flow whose whole window was lost at
    /// once (a link gone while routes moved) recovered a packet per expired timer, each backed
    /// off once more, and under a congestion window none could be sent again before the last of
    /// them expired: seven packets lost together held a lab flow silent for 2⁶ timeouts (32 s).
    #[cold]
    fn lose_flight(&mut self, flow: u32, now: Time) {
        let (Some(permille), Some(srtt)) = (self.reorder_permille, self.srtt) else {
            return;
        };
        let window = self.reorder_window(srtt, permille);
        let Some(horizon) = now.checked_sub(srtt.saturating_add(window)) else {
            return;
        };
        let state = &self.flows[flow as usize];
        let (first, packets) = (state.first, state.packets);
        let mut lost = 0;
        // Below `rack_next` the reordering window has already declared every first
        // transmission still in flight lost.
        for seq in state.rack_next..packets {
            let packet = &mut self.packets[first + seq as usize];
            if packet.transmissions == 0 {
                break;
            }
            if packet.transmissions != 1 || packet.acked || packet.timeouts != 0 {
                continue;
            }
            // First transmissions leave in sequence order: the rest left later still.
            if packet.sent_at > horizon {
                break;
            }
            packet.timeouts = 1;
            if std::mem::take(&mut packet.counted) {
                lost += 1;
            }
            self.lost.push_back((flow, seq, now));
            self.stats.timeout_flight_losses += 1;
        }
        self.flows[flow as usize].outstanding -= lost;
    }

    /// RFC 6298 §2.2–2.4 with `rto_min` for the clock granularity term, capped at `rto_max`.
    fn sample(&mut self, rtt: Time) {
        self.rtt_samples += 1;
        self.backoff = 0;
        let srtt = match self.srtt {
            None => {
                self.rttvar = rtt / 2;
                rtt
            }
            Some(srtt) => {
                // In u128 so that no sum overflows; each result is at most the largest input.
                let weighted = |old: Time, old_weight: u128, new: Time, shift: u32| {
                    ((u128::from(old) * old_weight + u128::from(new)) >> shift) as Time
                };
                self.rttvar = weighted(self.rttvar, 3, srtt.abs_diff(rtt), 2);
                weighted(srtt, 7, rtt, 3)
            }
        };
        self.srtt = Some(srtt);
        self.rto = srtt
            .saturating_add(self.rttvar.saturating_mul(4))
            .clamp(self.config.rto_min, self.config.rto_max);
    }

    /// Drops the FIFO's front entries that no longer time a first transmission.
    #[inline]
    fn skip_fifo(&mut self) {
        while let Some(&FirstSend { flow, seq, .. }) = self.fifo.front() {
            let packet = &self.packets[self.flows[flow as usize].first + seq as usize];
            if packet.acked || packet.transmissions != 1 || packet.timeouts != 0 {
                self.fifo.pop_front();
            } else {
                break;
            }
        }
    }

    /// Drops the heap's top entries that no longer time a retransmission: ACKed, sent again
    /// since, or out of the flight (a NACK declared it lost: it waits to be sent again).
    fn skip_heap(&mut self) {
        while let Some(Reverse(timer)) = self.heap.peek() {
            let packet = &self.packets[self.flows[timer.flow as usize].first + timer.seq as usize];
            if packet.acked || packet.transmissions != timer.generation || !packet.counted {
                self.heap.pop();
            } else {
                break;
            }
        }
    }

    /// The earliest armed timer and where it is (after skipping stale entries).
    #[inline]
    fn earliest(&mut self) -> Option<(Time, Expiry)> {
        self.skip_fifo();
        let fifo = self
            .fifo
            .front()
            .map(|first| first.sent_at.saturating_add(self.backed_off(0)));
        if self.heap.is_empty() {
            return fifo.map(|deadline| (deadline, Expiry::Fifo));
        }
        self.skip_heap();
        let heap = self.heap.peek().map(|Reverse(timer)| timer.deadline);
        match (fifo, heap) {
            (Some(f), Some(h)) if h < f => Some((h, Expiry::Heap)),
            (Some(f), _) => Some((f, Expiry::Fifo)),
            (None, Some(h)) => Some((h, Expiry::Heap)),
            (None, None) => None,
        }
    }

    /// The oldest unACKed packet whose timer expired by `now` (the caller retransmits it at once
    /// and calls `on_send`), with exponential backoff per packet (each timeout of the same packet
    /// doubles its timeout, up to rto_max). `None` when nothing has expired.
    ///
    /// The packet returned has no timer until [`on_send`](Self::on_send) re-arms it.
    #[inline]
    pub fn next_lost(&mut self, now: Time) -> Option<(u32, u32)> {
        if !self.lost.is_empty() {
            if let Some(lost) = self.pop_reorder_loss() {
                return Some(lost);
            }
        }
        // The loss-free path: the oldest first transmission, live or not, has not expired, and
        // no packet is being recovered.
        if self.heap.is_empty() {
            match self.fifo.front() {
                None => return None,
                Some(first) if first.sent_at.saturating_add(self.backed_off(0)) > now => {
                    return None
                }
                Some(_) => {}
            }
        }
        loop {
            let (deadline, from) = self.earliest()?;
            if deadline > now {
                return None;
            }
            let (flow, seq) = match from {
                Expiry::Fifo => self.fifo.pop_front().map(|first| (first.flow, first.seq))?,
                Expiry::Heap => {
                    let Reverse(timer) = self.heap.pop()?;
                    (timer.flow, timer.seq)
                }
            };
            let index = self.flows[flow as usize].first + seq as usize;
            let packet = &mut self.packets[index];
            if std::mem::take(&mut packet.counted) {
                self.flows[flow as usize].outstanding -= 1;
            }
            if u32::from(packet.timeouts) >= self.max_timeouts {
                self.stats.abandoned += 1;
                continue;
            }
            packet.timeouts = packet.timeouts.saturating_add(1);
            self.stats.timeouts += 1;
            // RFC 6298 §5.5: back off every timer until an RTT sample says how long the round
            // trip is now (at most to rto_max).
            if self.backed_off(0) < self.config.rto_max {
                self.backoff += 1;
            }
            if self.reorder_permille.is_some() {
                self.lose_flight(flow, now);
            }
            return Some((flow, seq));
        }
    }

    /// The oldest packet the reordering window declared lost that still needs sending.
    #[cold]
    fn pop_reorder_loss(&mut self) -> Option<(u32, u32)> {
        while let Some((flow, seq, _)) = self.lost.pop_front() {
            let packet = &self.packets[self.flows[flow as usize].first + seq as usize];
            if !packet.acked && !packet.counted {
                return Some((flow, seq));
            }
        }
        None
    }

    /// Gives back a packet [`next_lost`](Self::next_lost) returned and the caller could not send
    /// yet (a congestion window was full): it is offered first again, and counts as waiting to
    /// be sent for [`next_deadline`](Self::next_deadline) from `now`.
    pub fn defer_lost(&mut self, flow: u32, seq: u32, now: Time) {
        if self.index(flow, seq).is_some() {
            self.lost.push_front((flow, seq, now));
        }
    }

    /// When the earliest armed retransmission timer expires, leaving out the packets that
    /// wait to be sent again ([`next_deadline`](Self::next_deadline) includes them); `None`
    /// when no timer is armed.
    #[inline]
    pub fn next_timer(&mut self) -> Option<Time> {
        self.earliest().map(|(deadline, _)| deadline)
    }

    /// When the earliest armed timer expires (the caller sleeps until then when it has nothing
    /// else to send) — or when the reordering window declared a packet lost that waits to be
    /// sent again; `None` when nothing is outstanding.
    #[inline]
    pub fn next_deadline(&mut self) -> Option<Time> {
        let timer = self.earliest().map(|(deadline, _)| deadline);
        match self.lost.front() {
            Some(&(_, _, at)) => Some(timer.map_or(at, |timer| timer.min(at))),
            None => timer,
        }
    }

    /// Whether every packet of `flow` is ACKed (`false` for a flow out of range).
    #[must_use]
    pub fn flow_complete(&self, flow: u32) -> bool {
        self.flows
            .get(flow as usize)
            .is_some_and(|flow| flow.acked == flow.packets)
    }

    /// Every packet of every flow ACKed.
    #[must_use]
    pub fn complete(&self) -> bool {
        self.complete_flows == self.flows.len()
    }

    /// Current retransmission timeout.
    #[must_use]
    pub fn rto(&self) -> Time {
        self.rto
    }

    /// What the recovery did so far.
    #[must_use]
    pub fn stats(&self) -> RecoveryStats {
        RecoveryStats {
            rtt_samples: self.rtt_samples,
            srtt: self.srtt,
            rttvar: self.srtt.map(|_| self.rttvar),
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests;
