//! One host's flows under congestion control: the rules that tie a [`Controller`] per flow to
//! the host's [`SelectiveRepeat`] — which packet may leave, and what an ACK, a loss declared by
//! the reordering window and an expired timer tell the flow's controller.
//!
//! The lab agent calls these; the model keeps its own copy of the same rules in
//! `ofan-model`'s `sim/cc.rs`, because its controllers are indexed by global flow id in one
//! array for the whole fabric (its memory layout), where a host here has its own.
//! The rules, in both:
//! * a packet counts `mss` bytes in flight (every packet is charged as a full DATA frame: the
//!   last, shorter one of a flow too);
//! * a new packet leaves only if its flow's window has room beyond its outstanding packets
//!   (sent, not ACKed, not declared lost) — [`FlowWindows::first_open`] finds the first such
//!   flow in round-robin order;
//! * a packet declared lost is sent again under the same rule, before new ones; those that do
//!   not fit wait first in line ([`SelectiveRepeat::defer_lost`]), and every expired timer on
//!   the way tells its flow's controller ([`CongestionControl::on_timeout`]);
//! * the first ACK of a packet gives the controller its CE echo and the RTT of the copy it
//!   answers; the packets the reordering window declared lost with it, their bytes
//!   ([`CongestionControl::on_loss`]).

use super::{AckEvent, CcConfig, CongestionControl, Controller};
use crate::recovery::{Ack, AckSample, RecoveryConfig, SelectiveRepeat, Time};

/// The reordering window of loss detection under congestion control, per mille of the
/// smoothed RTT ([`SelectiveRepeat::with_reordering_window`]): a packet is declared lost once
/// a packet of its flow sent more than one smoothed RTT later has been ACKed. Chosen from the
/// reordering the model measures under every scheme (docs/model.md, "Congestion control": the
/// 99th percentile stays below one unloaded round trip); a loss then costs about two round
/// trips instead of a timeout.
pub const REORDER_WINDOW_PERMILLE: u32 = 1000;

/// The floor of the retransmission timeout under congestion control, in unloaded round trips
/// (plus 16 frame times, [`recovery_config`]): a timer is the fallback for a lost tail (the
/// reordering window finds the rest), and a spurious one cuts a window, so it waits four round
/// trips — RFC 6298's `srtt + 4·rttvar` of the measured RTTs above it. With two, REPS under
/// NSCC at k = 8 (4 MiB) timed out ~100 packets that were queued, not lost, as all hosts
/// started together (the model).
pub const RTO_FLOOR_RTTS: u64 = 4;

/// The retransmission timers of a sender under congestion control whose full DATA frame takes
/// `frame_time` on the wire and whose longest path's unloaded round trip is `base_rtt`: the
/// floor is [`RTO_FLOOR_RTTS`] round trips, not a full buffer's (the windows bound the
/// queues). Model and lab agent both take their timers from here.
#[must_use]
pub fn recovery_config(frame_time: Time, base_rtt: Time) -> RecoveryConfig {
    RecoveryConfig::for_round_trip(frame_time, RTO_FLOOR_RTTS.saturating_mul(base_rtt))
}

/// The congestion control of one host's flows (local indices `0..n`, as in its
/// [`SelectiveRepeat`]).
#[derive(Debug, Clone)]
pub struct FlowWindows {
    controllers: Vec<Controller>,
    mss: u64,
}

impl FlowWindows {
    /// `flows` fresh controllers of `config`.
    #[must_use]
    pub fn new(config: &CcConfig, flows: usize) -> Self {
        Self {
            controllers: vec![config.controller(); flows],
            mss: config.path.mss,
        }
    }

    /// Whether local `flow` may send a packet now (its window has room beyond its outstanding
    /// packets); `false` for a flow out of range.
    #[must_use]
    pub fn has_room(&self, recovery: &SelectiveRepeat, flow: u32) -> bool {
        self.controllers.get(flow as usize).is_some_and(|cc| {
            cc.can_send(u64::from(recovery.outstanding(flow)) * self.mss, self.mss)
        })
    }

    /// The position in `active` (local flows with new packets left) of the first flow, from
    /// `start` on and wrapping round, whose window has room; `None` when every window is full.
    #[must_use]
    pub fn first_open(
        &self,
        recovery: &SelectiveRepeat,
        active: &[usize],
        start: usize,
    ) -> Option<usize> {
        let count = active.len();
        let start = if start >= count { 0 } else { start };
        (0..count)
            .map(|step| (start + step) % count)
            .find(|&index| self.has_room(recovery, active[index] as u32))
    }

    /// The oldest packet to send again whose flow's window has room for it
    /// ([`SelectiveRepeat::next_lost`] under the windows; see the module documentation).
    pub fn next_lost(&mut self, recovery: &mut SelectiveRepeat, now: Time) -> Option<(u32, u32)> {
        let mut waiting = Vec::new();
        let mut found = None;
        loop {
            let timeouts = recovery.stats().timeouts;
            let Some((flow, seq)) = recovery.next_lost(now) else {
                break;
            };
            if recovery.stats().timeouts > timeouts {
                if let Some(cc) = self.controllers.get_mut(flow as usize) {
                    cc.on_timeout(now);
                }
            }
            if self.has_room(recovery, flow) {
                found = Some((flow, seq));
                break;
            }
            waiting.push((flow, seq));
        }
        for &(flow, seq) in waiting.iter().rev() {
            recovery.defer_lost(flow, seq, now);
        }
        found
    }

    /// An ACK of (`flow`, `seq`) echoing copy `echo` and, with `ecn`, a CE mark, at `now`:
    /// recovery first, then the flow's controller (see the module documentation).
    pub fn on_ack(
        &mut self,
        recovery: &mut SelectiveRepeat,
        flow: u32,
        seq: u32,
        echo: u32,
        ecn: bool,
        now: Time,
    ) -> AckSample {
        let sample = recovery.on_ack_sample(flow, seq, echo, now);
        if sample.ack == Ack::New {
            if let Some(cc) = self.controllers.get_mut(flow as usize) {
                cc.on_ack(AckEvent {
                    bytes: self.mss,
                    ecn,
                    rtt: sample.rtt,
                    now,
                });
                if sample.newly_lost > 0 {
                    cc.on_loss(now, u64::from(sample.newly_lost) * self.mss);
                }
            }
        }
        sample
    }

    /// Local `flow`'s window, bytes (0 for a flow out of range).
    #[must_use]
    pub fn window(&self, flow: u32) -> u64 {
        self.controllers
            .get(flow as usize)
            .map_or(0, CongestionControl::window)
    }

    /// The mean window over the flows, bytes (0 without flows).
    #[must_use]
    pub fn mean_window(&self) -> u64 {
        let sum: u64 = self.controllers.iter().map(CongestionControl::window).sum();
        sum / self.controllers.len().max(1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{CcKind, PathParams};
    use crate::RecoveryConfig;

    /// DCTCP with a window of two packets (1 000-byte packets, a BDP of 1 334 bytes in ns).
    fn two_packet_windows(flows: usize) -> FlowWindows {
        let path = PathParams {
            mss: 1_000,
            base_rtt: 1_000,
            rate_bps: 10_672_000_000,
        };
        let config = CcConfig::with_unit(CcKind::Dctcp, path, 1_000_000_000);
        assert_eq!(
            config.max_window, 2_001,
            "1.5 BDP: room for two packets, not three"
        );
        FlowWindows::new(&config, flows)
    }

    #[test]
    fn a_full_window_holds_a_flow_back_and_an_ack_opens_it() {
        let mut windows = two_packet_windows(2);
        let mut recovery = SelectiveRepeat::new(RecoveryConfig::for_frame_time(100), &[4, 4]);
        assert!(windows.has_room(&recovery, 0), "nothing in flight");
        recovery.on_send(0, 0, 0);
        assert!(windows.has_room(&recovery, 0), "1 000 + 1 000 <= 2 001");
        recovery.on_send(0, 1, 10);
        assert!(!windows.has_room(&recovery, 0), "2 000 + 1 000 > 2 001");
        assert_eq!(windows.first_open(&recovery, &[0, 1], 0), Some(1));
        recovery.on_send(1, 0, 20);
        recovery.on_send(1, 1, 30);
        assert_eq!(windows.first_open(&recovery, &[0, 1], 1), None);
        let sample = windows.on_ack(&mut recovery, 0, 0, 0, false, 1_000);
        assert_eq!((sample.ack, sample.rtt), (Ack::New, Some(1_000)));
        assert_eq!(windows.first_open(&recovery, &[0, 1], 1), Some(0));
        assert!(!windows.has_room(&recovery, 7), "out of range");
    }

    #[test]
    fn a_marked_ack_cuts_only_its_own_flow() {
        let mut windows = two_packet_windows(2);
        let mut recovery = SelectiveRepeat::new(RecoveryConfig::for_frame_time(100), &[4, 4]);
        let before = windows.window(1);
        recovery.on_send(1, 0, 0);
        windows.on_ack(&mut recovery, 1, 0, 0, true, 1_000);
        assert_eq!(windows.window(1), before - before / 2, "α = 1 halves it");
        assert_eq!(windows.window(0), before);
        // A duplicate ACK tells the controller nothing.
        let window = windows.window(1);
        let again = windows.on_ack(&mut recovery, 1, 0, 0, true, 2_000);
        assert_eq!(again.ack, Ack::Duplicate);
        assert_eq!(windows.window(1), window);
    }

    #[test]
    fn a_timeout_tells_the_controller_and_a_lost_packet_waits_for_room() {
        let mut windows = two_packet_windows(1);
        let config = RecoveryConfig::for_frame_time(100);
        let mut recovery = SelectiveRepeat::new(config, &[4]);
        recovery.on_send(0, 0, 0);
        recovery.on_send(0, 1, 10);
        // The first timer expires (the timeout backs the second's off): the window falls to
        // one packet, and the second still fills it — the first waits, first in line.
        let late = config.rto_initial + 5;
        assert_eq!(windows.next_lost(&mut recovery, late), None);
        assert_eq!(windows.window(0), 1_000, "a timeout: one packet");
        assert_eq!(recovery.stats().timeouts, 1);
        assert_eq!(recovery.next_deadline(), Some(late), "it waits to be sent");
        // The second's ACK empties the flight: the first may go.
        windows.on_ack(&mut recovery, 0, 1, 0, false, late + 500);
        assert_eq!(windows.next_lost(&mut recovery, late + 500), Some((0, 0)));
    }

    /// Packet 0 is ACKed at 1 000 (srtt 1 000, rto 3 000), packets 1 and 2 (sent at 1 000 and
    /// 1 010) are lost together; the windows and `recovery` at packet 1's expiry, 4 000.
    fn two_lost(recovery: SelectiveRepeat) -> (FlowWindows, SelectiveRepeat, Option<(u32, u32)>) {
        let mut windows = two_packet_windows(1);
        let mut recovery = recovery;
        recovery.on_send(0, 0, 0);
        windows.on_ack(&mut recovery, 0, 0, 0, false, 1_000);
        recovery.on_send(0, 1, 1_000);
        recovery.on_send(0, 2, 1_010);
        assert!(!windows.has_room(&recovery, 0));
        let sent = windows.next_lost(&mut recovery, 4_000);
        (windows, recovery, sent)
    }

    #[test]
    fn a_window_lost_at_once_is_sent_again_after_one_timeout() {
        let config = RecoveryConfig::for_frame_time(100);
        // With the reordering window (as every congestion-controlled sender has), packet 2
        // left more than srtt + window before the expiry: lost with packet 1, so the window
        // (one packet after the timeout) has room for packet 1 at once.
        let rack = SelectiveRepeat::new(config, &[3]).with_reordering_window(1_000);
        let (_, recovery, sent) = two_lost(rack);
        assert_eq!(sent, Some((0, 1)));
        assert_eq!(recovery.stats().timeout_flight_losses, 1);
        // Timers alone: packet 2 still fills the window until its own timer, backed off once
        // by packet 1's timeout, expires at 1 010 + 2 · 3 000 — nothing leaves before.
        let (mut windows, mut recovery, sent) = two_lost(SelectiveRepeat::new(config, &[3]));
        assert_eq!(sent, None);
        assert_eq!(windows.next_lost(&mut recovery, 7_009), None);
        assert_eq!(windows.next_lost(&mut recovery, 7_010), Some((0, 2)));
    }
}
