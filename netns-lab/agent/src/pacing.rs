//! Constant-rate pacing (paper §2.2): the departure schedule and how well it was kept — pure
//! arithmetic on times passed in, no clock.
//!
//! Packet k may leave at `t_k = max(t_{k−1} + wire_time(k−1), now)`, where `wire_time(b)` is the
//! time `b` wire bytes (frame plus gap) take at the paced rate ρ·R. So the source never sends
//! faster than ρ·R, and when it is late it continues from *now* at ρ·R instead of bursting to
//! catch up. Every send also records how late it was against its due time.
//!
//! The host's link also carries the ACKs this host sends for the DATA it receives. Like a NIC,
//! the link is one serial resource at line rate R: [`HostLink`] counts the ACK wire bytes the
//! receiver thread sends, and each DATA departure pushes the next one back by the time those
//! ACKs took on the link, less the idle time the pacing left (none at ρ = 1) — so DATA plus
//! ACKs never exceed R, where pacing DATA alone at R would offer the first switch more than its
//! port can carry. The ACKs are charged by count, not by the instant they left, so that a
//! sender's phase never locks onto its ACKs' (which follow other hosts' departures: agents
//! whose departures fall due together queue for the CPUs).
//!
//! Optionally ([`Pacer::with_catch_up`]) a late send shortens the next gap by its lateness, up
//! to half a wire time, as Linux's `sch_fq` pacing does ("packet might have been sent later
//! than its planned time; subtract the delay to be fair"): the average rate then survives
//! scheduling jitter, at the price of gaps down to half a wire time (a momentary rate of up to
//! 2·ρ·R).

/// The departure schedule of one sender.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// ρ·R in bits per second.
    paced_bps: f64,
    /// Earliest departure of the next packet, picoseconds (absolute, same clock as the ns
    /// times passed in).
    next_ps: u128,
    /// Shorten the gap after a late send (see the module documentation).
    catch_up: bool,
    /// What late sends cost the schedule: the lateness catch-up did not make up (all of it
    /// without catch-up), picoseconds, and the sends that cost any. A late first send is not
    /// counted: the rate is measured from the first departure.
    lost_ps: u128,
    lost_sends: u64,
    started: bool,
}

impl Pacer {
    /// A pacer at `paced_bps` (> 0) whose first packet is due at `start_ns`.
    #[must_use]
    pub fn new(paced_bps: f64, start_ns: u64) -> Self {
        assert!(paced_bps > 0.0, "pacing needs a positive rate");
        Self {
            paced_bps,
            next_ps: u128::from(start_ns) * 1000,
            catch_up: false,
            lost_ps: 0,
            lost_sends: 0,
            started: false,
        }
    }

    /// The same pacer, compensating lateness up to half a wire time per packet (`sch_fq`).
    #[must_use]
    pub fn with_catch_up(mut self, catch_up: bool) -> Self {
        self.catch_up = catch_up;
        self
    }

    /// When the next packet is due, nanoseconds (rounded up).
    #[must_use]
    pub fn due_ns(&self) -> u64 {
        u64::try_from(self.next_ps.div_ceil(1000)).unwrap_or(u64::MAX)
    }

    /// Picoseconds that `wire_bytes` take at the paced rate.
    #[must_use]
    pub fn wire_ps(&self, wire_bytes: u64) -> u128 {
        (wire_bytes as f64 * 8.0 * 1e12 / self.paced_bps).round() as u128
    }

    /// The sender had nothing to send until `now_ns` (it waited for a retransmission timer or
    /// an ACK): the schedule resumes from then, the wait is not lateness.
    pub fn resume(&mut self, now_ns: u64) {
        self.next_ps = self.next_ps.max(u128::from(now_ns) * 1000);
    }

    /// Like [`sent`](Self::sent), with the next departure pushed back by `extra_ps` more (the
    /// time ACKs took on the host link, see [`HostLink::ack_delay_ps`]).
    pub fn sent_with_acks(&mut self, sent_ns: u64, wire_bytes: u64, extra_ps: u128) {
        self.sent(sent_ns, wire_bytes);
        self.next_ps += extra_ps;
    }

    /// Records that a packet of `wire_bytes` left at `sent_ns` (at or after
    /// [`due_ns`](Self::due_ns)); the next one is due one wire time later.
    pub fn sent(&mut self, sent_ns: u64, wire_bytes: u64) {
        // A send within the due nanosecond is on time: keep the exact (sub-ns) schedule.
        let wire = self.wire_ps(wire_bytes);
        let started = std::mem::replace(&mut self.started, true);
        if sent_ns <= self.due_ns() {
            self.next_ps += wire;
            return;
        }
        let sent_ps = u128::from(sent_ns) * 1000;
        let late = sent_ps.saturating_sub(self.next_ps);
        let credit = if self.catch_up { late.min(wire / 2) } else { 0 };
        if late > credit && started {
            self.lost_ps += late - credit;
            self.lost_sends += 1;
        }
        self.next_ps = sent_ps + wire - credit;
    }

    /// What late sends cost the schedule so far: the time by which the departures fell behind
    /// the exact schedule (lateness catch-up did not make up), nanoseconds, and how many sends
    /// cost any. A sender's rate from its first departure falls short of ρ·R by this time over
    /// its duration (a late first departure delays the schedule but costs no rate: not
    /// counted).
    #[must_use]
    pub fn lost(&self) -> (u64, u64) {
        (
            u64::try_from(self.lost_ps / 1000).unwrap_or(u64::MAX),
            self.lost_sends,
        )
    }
}

/// The ACK side of the host link: the wire bytes of the ACKs this host sent, counted by the
/// receiver thread and read by the sender thread (lock-free).
#[derive(Debug)]
pub struct HostLink {
    /// Line rate R, bits per second.
    line_bps: f64,
    /// ACK wire bytes sent so far.
    ack_bytes: AtomicU64,
}

impl HostLink {
    /// A link of rate `line_bps` (> 0).
    #[must_use]
    pub fn new(line_bps: f64) -> Self {
        assert!(line_bps > 0.0, "a link needs a positive rate");
        Self {
            line_bps,
            ack_bytes: AtomicU64::new(0),
        }
    }

    /// Counts an ACK of `wire_bytes` sent.
    pub fn ack_sent(&self, wire_bytes: u64) {
        self.ack_bytes.fetch_add(wire_bytes, Ordering::Relaxed);
    }

    /// ACK wire bytes sent so far.
    #[must_use]
    pub fn ack_bytes(&self) -> u64 {
        self.ack_bytes.load(Ordering::Relaxed)
    }

    /// How much `ack_wire_bytes` of ACKs delay the DATA packet of `data_wire_bytes` that
    /// `pacer` schedules: their time at line rate less the idle time pacing at ρ·R leaves after
    /// the packet, picoseconds.
    #[must_use]
    pub fn ack_delay_ps(&self, ack_wire_bytes: u64, data_wire_bytes: u64, pacer: &Pacer) -> u128 {
        let at_line = |bytes: u64| (bytes as f64 * 8.0 * 1e12 / self.line_bps).round() as u128;
        let idle = pacer
            .wire_ps(data_wire_bytes)
            .saturating_sub(at_line(data_wire_bytes));
        at_line(ack_wire_bytes).saturating_sub(idle)
    }
}

/// Lateness of every send (ns after its due time), kept for percentiles. Reserve the packet
/// count up front and recording never allocates.
#[derive(Debug, Clone, Default)]
pub struct Lateness {
    samples: Vec<u32>,
    /// The latest send so far: its lateness and when it left (ns, the caller's clock).
    worst: Option<(u64, u64)>,
}

impl Lateness {
    /// Room for `packets` samples.
    #[must_use]
    pub fn with_capacity(packets: usize) -> Self {
        Self {
            samples: Vec::with_capacity(packets),
            worst: None,
        }
    }

    /// One send at `sent_ns`, `late_ns` after it was due (saturating at ~4.3 s).
    pub fn record(&mut self, late_ns: u64, sent_ns: u64) {
        self.samples
            .push(u32::try_from(late_ns).unwrap_or(u32::MAX));
        if self.worst.is_none_or(|(worst, _)| late_ns > worst) {
            self.worst = Some((late_ns, sent_ns));
        }
    }

    /// When the latest send left (the first of equals), on the clock of [`record`](Self::record).
    #[must_use]
    pub fn worst_at_ns(&self) -> Option<u64> {
        self.worst.map(|(_, at)| at)
    }

    /// Summary: p50, p99, max and mean, nanoseconds (zeros without samples). Nearest-rank
    /// percentiles.
    #[must_use]
    pub fn summary(&self) -> LatenessSummary {
        if self.samples.is_empty() {
            return LatenessSummary::default();
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let rank = |p: f64| {
            let index = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            u64::from(sorted[index])
        };
        LatenessSummary {
            p50_ns: rank(0.50),
            p99_ns: rank(0.99),
            max_ns: u64::from(*sorted.last().expect("not empty")),
            mean_ns: sorted.iter().map(|&late| u64::from(late)).sum::<u64>() / sorted.len() as u64,
        }
    }
}

/// Percentiles of [`Lateness`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LatenessSummary {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Maximum.
    pub max_ns: u64,
    /// Mean: what the sends lost on average (a strict pacer continues from a late send).
    pub mean_ns: u64,
}

/// The rate the departures achieved: wire bits of every packet but the last over the time from
/// the first departure to the last (the last packet's own wire time is not observed). `None`
/// with fewer than two packets.
#[must_use]
pub fn achieved_bps(first_ns: u64, last_ns: u64, wire_bytes_but_last: u64) -> Option<f64> {
    (last_ns > first_ns)
        .then(|| wire_bytes_but_last as f64 * 8.0 * 1e9 / (last_ns - first_ns) as f64)
}

use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_on_the_host_link_push_data_back() {
        // 8 Gbit/s: 1 ns per byte. At ρ = 1 a 10-byte ACK delays the next DATA by 10 ns.
        let link = HostLink::new(8e9);
        link.ack_sent(10);
        assert_eq!(link.ack_bytes(), 10);
        let mut pacer = Pacer::new(8e9, 0);
        pacer.sent_with_acks(0, 100, link.ack_delay_ps(10, 100, &pacer));
        assert_eq!(pacer.due_ns(), 110);
        // At ρ = 0.5 the 100-byte packet leaves 100 ns idle: ACKs up to that cost nothing.
        let mut half = Pacer::new(4e9, 0);
        assert_eq!(link.ack_delay_ps(60, 100, &half), 0);
        assert_eq!(link.ack_delay_ps(130, 100, &half), 30_000);
        half.sent_with_acks(0, 100, link.ack_delay_ps(130, 100, &half));
        assert_eq!(half.due_ns(), 230);
    }

    #[test]
    fn on_time_departures_are_exactly_one_wire_time_apart() {
        // 1538 wire bytes at 50 Mbit/s: 246.08 µs.
        let mut pacer = Pacer::new(50e6, 1_000);
        let mut departures = Vec::new();
        for _ in 0..5 {
            let due = pacer.due_ns();
            departures.push(due);
            pacer.sent(due, 1538);
        }
        assert_eq!(departures, [1_000, 247_080, 493_160, 739_240, 985_320]);
        let rate = achieved_bps(departures[0], departures[4], 4 * 1538).unwrap();
        assert!((rate / 50e6 - 1.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn a_late_send_continues_from_now_without_burst() {
        let mut pacer = Pacer::new(8e9, 0); // 1 ns per byte
        pacer.sent(0, 100);
        assert_eq!(pacer.lost(), (0, 0));
        assert_eq!(pacer.due_ns(), 100);
        pacer.sent(500, 100); // woke 400 ns late
        assert_eq!(
            pacer.due_ns(),
            600,
            "no catching up: one wire time after the late send"
        );
        pacer.sent(600, 50);
        assert_eq!(pacer.due_ns(), 650, "shorter packets take shorter");
        assert_eq!(pacer.lost(), (400, 1), "the 400 ns are lost for good");
    }

    #[test]
    fn catch_up_shortens_the_next_gap_by_at_most_half_a_wire_time() {
        let mut pacer = Pacer::new(8e9, 0).with_catch_up(true);
        pacer.sent(0, 100);
        pacer.sent(130, 100); // 30 ns late: the next gap is 70 ns
        assert_eq!(pacer.due_ns(), 200, "back on the original schedule");
        assert_eq!(pacer.lost(), (0, 0), "caught up entirely");
        pacer.sent(500, 100); // 300 ns late: at most 50 ns credit
        assert_eq!(pacer.due_ns(), 550);
        assert_eq!(pacer.lost(), (250, 1), "the schedule fell 250 ns behind");
    }

    #[test]
    fn a_late_first_send_costs_no_rate() {
        let mut pacer = Pacer::new(8e9, 0); // 1 ns per byte
        pacer.sent(700, 100); // started 700 ns late
        assert_eq!(pacer.due_ns(), 800);
        assert_eq!(
            pacer.lost(),
            (0, 0),
            "the rate counts from the first departure"
        );
        pacer.sent(900, 100); // 100 ns late, no catch-up
        assert_eq!(pacer.lost(), (100, 1));
    }

    #[test]
    fn resuming_after_an_idle_wait_is_on_time_and_never_early() {
        let mut pacer = Pacer::new(1e6, 0);
        pacer.sent(0, 125);
        // Idle until 5 ms: the next packet leaves then, on time, one wire time before the next.
        pacer.resume(5_000_000);
        assert_eq!(pacer.due_ns(), 5_000_000);
        pacer.sent(5_000_000, 125);
        assert_eq!(pacer.due_ns(), 6_000_000);
        // Resuming before the due time changes nothing.
        pacer.resume(5_500_000);
        assert_eq!(pacer.due_ns(), 6_000_000);
    }

    #[test]
    fn load_scales_the_spacing() {
        let mut pacer = Pacer::new(0.5 * 8e9, 0); // ρ = 0.5 of 8 Gbit/s
        pacer.sent(0, 100);
        assert_eq!(pacer.due_ns(), 200);
    }

    #[test]
    fn fractional_wire_times_do_not_drift() {
        // 3 bytes at 7 Gbit/s = 3.428571… ns; 7000 packets = 24 µs exactly.
        let mut pacer = Pacer::new(7e9, 0);
        for _ in 0..7000 {
            let due = pacer.due_ns();
            pacer.sent(due, 3);
        }
        // On-time sends keep the sub-nanosecond schedule (wire times round to whole ps).
        let due = pacer.due_ns();
        assert!((24_000..=24_004).contains(&due), "{due}");
    }

    #[test]
    fn lateness_percentiles_and_mean() {
        let mut late = Lateness::with_capacity(100);
        for ns in 1..=100 {
            // The worst (100 ns) leaves at 5,000; an equal one later does not replace it.
            late.record(ns, ns * 50);
        }
        late.record(100, 9_999);
        assert_eq!(late.worst_at_ns(), Some(5_000));
        assert_eq!(Lateness::default().worst_at_ns(), None);
        let mut late = Lateness::with_capacity(100);
        for ns in 1..=100 {
            late.record(ns, 0);
        }
        assert_eq!(
            late.summary(),
            LatenessSummary {
                p50_ns: 50,
                p99_ns: 99,
                max_ns: 100,
                mean_ns: 50,
            }
        );
        assert_eq!(Lateness::default().summary(), LatenessSummary::default());
        assert_eq!(achieved_bps(5, 5, 100), None);
    }
}
