//! Egress queues with link emulation: a FIFO per output port, tail drop at a byte limit, ECN
//! marking above a threshold, and a shaper that serializes frames at the emulated link rate.
//!
//! The queue is pure: it holds opaque descriptors (`D`, a UMEM frame address in the data path)
//! and is told the time; it never reads a clock. That keeps it testable to the nanosecond and
//! lets the same code serve the AF_XDP worker and the tests.
//!
//! ## Shaping
//! A frame of `len` bytes occupies an emulated link of rate `R` for `(len + 20) · 8 / R`
//! seconds (20 bytes of preamble, start delimiter and inter-frame gap). The shaper keeps the
//! time the link becomes free (`next_free`). The head frame departs at
//! `scheduled = max(next_free, arrival)`; the worker calls [`EgressQueue::dequeue`] when that
//! time has come, usually somewhat late. A late shaper **never bursts**: the frame leaves *now*
//! and the link is busy until `now + serialization`, i.e. it continues at line rate from the
//! moment it woke up, exactly like a NIC that was starved. How late it was (`now − scheduled`)
//! is recorded: it is the fidelity of the emulation.
//!
//! A shaper that is late at every departure loses the lateness each time, so a backlogged port
//! carries less than its rate: on a VM whose timer wake-ups are 40–70 µs late, about 0.5 % of a
//! 1 Mbit/s link. Where the long-run rate matters more than the spacing of two frames (a link
//! loaded at exactly ρ = 1, whose queue would otherwise grow without bound),
//! [`Shaping::CatchUp`] makes the shaper behave like Linux's `sch_fq` pacing: a late
//! departure shortens the next gap by its lateness, by at most half a serialization time. The
//! rate then survives the jitter, at the price of gaps down to half a frame time (a momentary
//! rate of up to 2 R, never two frames at once).
//!
//! ## What the queue holds
//! A shaped port's queue holds every frame accepted and not yet fully transmitted: the frame
//! on the wire counts until its slot ends (`next_free`), as in an output-queued switch and in
//! the model (`ofan_model::report`: one definition of a queue for both). Depth, maxima, the
//! time-averaged depth and buffer admission all use this count.
//!
//! With a rate of 0 the queue does not shape: every queued frame may leave as soon as the
//! device takes it, and the device's own ring is the bottleneck.

use std::collections::VecDeque;

/// Bytes on the wire beyond the frame: 7 preamble, 1 start-of-frame delimiter, 12 inter-frame
/// gap.
pub const WIRE_OVERHEAD_BYTES: u64 = 20;

/// What a late shaper does with its lateness (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaping {
    /// A late departure restarts the link from now: never a gap shorter than a serialization
    /// time, and the lateness is lost.
    Strict,
    /// A late departure shortens the next gap by its lateness, at most half a serialization
    /// time (`sch_fq`-style catch-up), so the rate survives timer jitter.
    CatchUp,
}

/// The settings of one egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressConfig {
    /// Emulated link rate in bits per second; 0 = no shaping.
    pub link_rate_bps: u64,
    /// Queue limit in bytes; a frame that does not fit is dropped (tail drop).
    pub buffer_bytes: u32,
    /// Mark ECN-capable frames with CE when the queue holds more than this many bytes.
    pub ecn_threshold_bytes: Option<u32>,
    /// What a late departure does to the next one.
    pub shaping: Shaping,
}

impl EgressConfig {
    /// Time a frame of `frame_len` bytes occupies the link, in nanoseconds (0 when unshaped).
    #[inline]
    pub fn serialization_ns(&self, frame_len: u32) -> u64 {
        if self.link_rate_bps == 0 {
            return 0;
        }
        let bits = (u64::from(frame_len) + WIRE_OVERHEAD_BYTES) * 8;
        (u128::from(bits) * 1_000_000_000).div_ceil(u128::from(self.link_rate_bps)) as u64
    }
}

/// What happened to a frame offered to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued<D> {
    /// Queued; `mark_ce` says the caller must set the ECN CE codepoint
    /// ([`wire::mark_ce`](crate::wire::mark_ce); only for ECN-capable frames above the
    /// threshold).
    Queued {
        /// Set CE in the frame before it leaves.
        mark_ce: bool,
    },
    /// The buffer is full: the descriptor comes back to be freed.
    Dropped(D),
}

/// Whether a frame may join the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// It fits; mark it CE first if `mark_ce` ([`wire::mark_ce`](crate::wire::mark_ce)).
    Queue {
        /// Set the ECN CE codepoint before queueing.
        mark_ce: bool,
    },
    /// The buffer is full: tail drop.
    Drop,
}

/// A log-linear histogram: values below 16 exactly, then 8 buckets per power of two, each
/// spanning 1/8 of the octave's lower edge, up to 2⁴⁰ (the last bucket also holds everything
/// above, ≈ 18 minutes in nanoseconds).
///
/// Why not log₂ buckets: the lab judges a run faithful when the shaper's lateness p99 stays
/// within a quarter of a packet time, and a log₂ bucket's upper edge overstates a value by up to
/// 2× — at 5 Mbit/s the whole range 0.21–0.43 packet times reported as 0.43, so the bucket
/// edge, not the measurement, decided the verdict. Here a quantile is overstated by at most
/// 12.5 %.
///
/// Publishing copies only the buckets recorded since the last [`Histogram::mark_published`]
/// (a range of bucket indices), so a worker's millisecond publications cost a few stores, not
/// the whole array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    /// Bucket counts (see [`Histogram::bucket`] and [`Histogram::lower_bound`]).
    pub buckets: [u64; HISTOGRAM_BUCKETS],
    /// Buckets changed since the last publication: `dirty.0 ..= dirty.1` (empty when
    /// `dirty.0 > dirty.1`).
    dirty: (u16, u16),
}

/// Values below this are counted exactly.
const EXACT_BELOW: u64 = 16;
/// log₂ of the buckets per octave.
const SUB_BITS: u32 = 3;
/// The first octave (by its highest set bit) split into sub-buckets.
const FIRST_OCTAVE: u32 = 4;
/// One past the last octave with buckets of its own.
const END_OCTAVE: u32 = 40;

/// Buckets of a [`Histogram`].
pub const HISTOGRAM_BUCKETS: usize =
    EXACT_BELOW as usize + (((END_OCTAVE - FIRST_OCTAVE) as usize) << SUB_BITS);

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: [0; HISTOGRAM_BUCKETS],
            // Everything: a cleared histogram publishes its zeros.
            dirty: (0, HISTOGRAM_BUCKETS as u16 - 1),
        }
    }
}

impl Histogram {
    /// Counts one value.
    #[inline]
    pub fn record(&mut self, value: u64) {
        let bucket = Self::bucket(value);
        self.buckets[bucket] += 1;
        let bucket = bucket as u16;
        self.dirty = (self.dirty.0.min(bucket), self.dirty.1.max(bucket));
    }

    /// The bucket a value falls in.
    #[inline]
    pub const fn bucket(value: u64) -> usize {
        if value < EXACT_BELOW {
            return value as usize;
        }
        let octave = u64::BITS - 1 - value.leading_zeros();
        if octave >= END_OCTAVE {
            return HISTOGRAM_BUCKETS - 1;
        }
        let sub = (value >> (octave - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1);
        EXACT_BELOW as usize + (((octave - FIRST_OCTAVE) as usize) << SUB_BITS) + sub
    }

    /// The smallest value of bucket `bucket`.
    pub const fn lower_bound(bucket: usize) -> u64 {
        if bucket < EXACT_BELOW as usize {
            return bucket as u64;
        }
        let index = bucket - EXACT_BELOW as usize;
        let octave = (index >> SUB_BITS) as u32 + FIRST_OCTAVE;
        let sub = (index & ((1 << SUB_BITS) - 1)) as u64;
        ((1 << SUB_BITS) + sub) << (octave - SUB_BITS)
    }

    /// The largest value of bucket `bucket` (`u64::MAX` for the last).
    pub const fn upper_bound(bucket: usize) -> u64 {
        if bucket + 1 >= HISTOGRAM_BUCKETS {
            u64::MAX
        } else {
            Self::lower_bound(bucket + 1) - 1
        }
    }

    /// Total number of values.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// An upper bound for the `q`-quantile (0 ≤ q ≤ 1): the largest value of the bucket holding
    /// it (at most 12.5 % above the true quantile; exact below 16).
    pub fn quantile_upper_bound(&self, q: f64) -> u64 {
        let total = self.count();
        if total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (bucket, &count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Self::upper_bound(bucket);
            }
        }
        u64::MAX
    }

    /// The buckets changed since the last [`mark_published`](Self::mark_published).
    pub fn dirty(&self) -> std::ops::RangeInclusive<usize> {
        usize::from(self.dirty.0)..=usize::from(self.dirty.1)
    }

    /// Says that the dirty buckets were published.
    pub fn mark_published(&mut self) {
        self.dirty = (u16::MAX, 0);
    }
}

/// What an egress queue has seen since it was created (monotonic counters) and its state now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressStats {
    /// Frames accepted into the queue.
    pub enqueued_packets: u64,
    /// Bytes accepted into the queue.
    pub enqueued_bytes: u64,
    /// Frames that left the queue.
    pub departed_packets: u64,
    /// Bytes that left the queue.
    pub departed_bytes: u64,
    /// Frames dropped because the buffer was full.
    pub drops_buffer: u64,
    /// Frames marked CE.
    pub ecn_marked: u64,
    /// Frames queued now.
    pub depth_packets: u32,
    /// Bytes queued now.
    pub depth_bytes: u32,
    /// Largest depth seen, in frames.
    pub max_depth_packets: u32,
    /// Largest depth seen, in bytes.
    pub max_depth_bytes: u32,
    /// ∫ depth dt, in frame·nanoseconds (divide by elapsed time for the time average).
    pub depth_packet_ns: u128,
    /// ∫ depth dt, in byte·nanoseconds.
    pub depth_byte_ns: u128,
    /// Time of the last depth change (start of the current integration step), ns.
    pub last_change_ns: u64,
    /// Queue depth in frames seen by each arriving frame (before it joins).
    pub arrival_depth: Histogram,
    /// How late the shaper sent each frame, in nanoseconds.
    pub lateness_ns: Histogram,
    /// Largest lateness seen, ns.
    pub max_lateness_ns: u64,
    /// Link time lost to lateness, ns: Σ (lateness − catch-up credit) over departures. A
    /// backlogged port carries `rate × (elapsed − lost)`; this is the fidelity cost in rate.
    pub lost_link_ns: u64,
    /// Time the port had a frame queued or on the wire, ns (integrated with the depth). A
    /// shaped port carries `rate × (busy − lost)`: the link's own measure of its rate, whatever
    /// the load offered to it.
    pub busy_link_ns: u64,
}

#[derive(Debug, Clone, Copy)]
struct Queued<D> {
    desc: D,
    len: u32,
    arrival_ns: u64,
}

/// One output port's queue and shaper.
#[derive(Debug, Clone)]
pub struct EgressQueue<D> {
    config: EgressConfig,
    fifo: VecDeque<Queued<D>>,
    next_free_ns: u64,
    /// Bytes of the frame on the wire, 0 when none: it still counts in the depth until its
    /// slot ends at `next_free_ns`.
    on_wire: u32,
    stats: EgressStats,
}

impl<D> EgressQueue<D> {
    /// An empty queue; `capacity_hint` frames are preallocated so the hot path does not grow it.
    pub fn new(config: EgressConfig, capacity_hint: usize) -> Self {
        Self {
            config,
            fifo: VecDeque::with_capacity(capacity_hint),
            next_free_ns: 0,
            on_wire: 0,
            stats: EgressStats::default(),
        }
    }

    /// The port's settings.
    pub fn config(&self) -> &EgressConfig {
        &self.config
    }

    /// Changes the settings; frames already queued stay.
    pub fn set_config(&mut self, config: EgressConfig) {
        self.config = config;
    }

    /// Statistics so far.
    pub fn stats(&self) -> &EgressStats {
        &self.stats
    }

    /// Frames queued.
    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Whether a frame of `len` bytes would be accepted at `now_ns`, and marked CE if it is
    /// `ecn_capable`. Counts nothing (but lets the frame on the wire leave the depth if its
    /// slot has ended); [`push`](Self::push) or [`reject`](Self::reject) follows.
    #[inline]
    pub fn admit(&mut self, len: u32, ecn_capable: bool, now_ns: u64) -> Admission {
        self.settle(now_ns);
        let depth_bytes = self.stats.depth_bytes;
        if u64::from(depth_bytes) + u64::from(len) > u64::from(self.config.buffer_bytes) {
            return Admission::Drop;
        }
        let mark_ce = ecn_capable
            && self
                .config
                .ecn_threshold_bytes
                .is_some_and(|threshold| depth_bytes > threshold);
        Admission::Queue { mark_ce }
    }

    /// Counts a frame refused by [`admit`](Self::admit) (tail drop).
    #[inline]
    pub fn reject(&mut self) {
        self.stats
            .arrival_depth
            .record(u64::from(self.stats.depth_packets));
        self.stats.drops_buffer += 1;
    }

    /// Queues a frame accepted by [`admit`](Self::admit) (`marked`: it was marked CE).
    #[inline]
    pub fn push(&mut self, desc: D, len: u32, marked: bool, now_ns: u64) {
        self.integrate(now_ns);
        self.stats
            .arrival_depth
            .record(u64::from(self.stats.depth_packets));
        if marked {
            self.stats.ecn_marked += 1;
        }
        self.fifo.push_back(Queued {
            desc,
            len,
            arrival_ns: now_ns,
        });
        let stats = &mut self.stats;
        stats.enqueued_packets += 1;
        stats.enqueued_bytes += u64::from(len);
        stats.depth_packets += 1;
        stats.depth_bytes += len;
        stats.max_depth_packets = stats.max_depth_packets.max(stats.depth_packets);
        stats.max_depth_bytes = stats.max_depth_bytes.max(stats.depth_bytes);
    }

    /// Offers a frame of `len` bytes at time `now_ns`: [`admit`](Self::admit), then
    /// [`push`](Self::push) or [`reject`](Self::reject).
    #[inline]
    pub fn enqueue(&mut self, desc: D, len: u32, ecn_capable: bool, now_ns: u64) -> Enqueued<D> {
        match self.admit(len, ecn_capable, now_ns) {
            Admission::Drop => {
                self.reject();
                Enqueued::Dropped(desc)
            }
            Admission::Queue { mark_ce } => {
                self.push(desc, len, mark_ce, now_ns);
                Enqueued::Queued { mark_ce }
            }
        }
    }

    /// When the head frame is due to leave, if any (ns). `None` when the queue is empty.
    #[inline]
    pub fn next_departure_ns(&self) -> Option<u64> {
        self.fifo
            .front()
            .map(|head| head.arrival_ns.max(self.next_free_ns))
    }

    /// When the frame on the wire leaves the depth (the end of its slot), while one is counted.
    #[inline]
    pub fn on_wire_until_ns(&self) -> Option<u64> {
        (self.on_wire != 0).then_some(self.next_free_ns)
    }

    /// Takes the frames that may leave at `now_ns`, at most `max`, handing each to `send` as
    /// `(descriptor, length)`. Returns how many left.
    ///
    /// Shaped: at most one frame per call whose departure time has come (the next one is due a
    /// serialization time later). Unshaped: up to `max`.
    #[inline]
    pub fn dequeue(&mut self, now_ns: u64, max: usize, mut send: impl FnMut(D, u32)) -> usize {
        let mut sent = 0;
        while sent < max {
            let Some(scheduled) = self.next_departure_ns() else {
                break;
            };
            if now_ns < scheduled {
                break;
            }
            let head = self.fifo.pop_front().expect("next_departure_ns saw a head");
            self.integrate(now_ns);
            let stats = &mut self.stats;
            stats.departed_packets += 1;
            stats.departed_bytes += u64::from(head.len);
            if self.config.link_rate_bps == 0 {
                stats.depth_packets -= 1;
                stats.depth_bytes -= head.len;
            } else {
                // `integrate` settled the previous frame (its slot ended by `scheduled`); this
                // one stays in the depth until its own slot ends.
                debug_assert_eq!(self.on_wire, 0);
                self.on_wire = head.len;
                let late = now_ns - scheduled;
                self.stats.lateness_ns.record(late);
                self.stats.max_lateness_ns = self.stats.max_lateness_ns.max(late);
                // No burst: the link is busy from *now*, whatever the schedule said — less,
                // with catch-up, the lateness (at most half a frame time) so the rate survives.
                let serialization = self.config.serialization_ns(head.len);
                let credit = match self.config.shaping {
                    Shaping::Strict => 0,
                    Shaping::CatchUp => late.min(serialization / 2),
                };
                self.stats.lost_link_ns += late - credit;
                self.next_free_ns = now_ns + serialization - credit;
            }
            send(head.desc, head.len);
            sent += 1;
        }
        sent
    }

    /// Puts a frame that could not be handed to the device back at the head of the queue, as if
    /// it had never left (the departure is undone in the counters; lateness stays recorded).
    pub fn requeue_front(&mut self, desc: D, len: u32, now_ns: u64) {
        self.integrate(now_ns);
        self.fifo.push_front(Queued {
            desc,
            len,
            arrival_ns: now_ns,
        });
        let stats = &mut self.stats;
        stats.departed_packets -= 1;
        stats.departed_bytes -= u64::from(len);
        if self.config.link_rate_bps != 0 {
            // It never went on the wire, and it is still counted in the depth (`dequeue` made
            // it the frame on the wire).
            self.on_wire = 0;
        } else {
            stats.depth_packets += 1;
            stats.depth_bytes += len;
        }
        self.next_free_ns = now_ns;
    }

    /// Removes every queued frame (on shutdown), handing the descriptors to `free`.
    pub fn drain(&mut self, now_ns: u64, mut free: impl FnMut(D)) {
        self.integrate(now_ns);
        for queued in self.fifo.drain(..) {
            free(queued.desc);
        }
        self.on_wire = 0;
        self.stats.depth_packets = 0;
        self.stats.depth_bytes = 0;
    }

    /// Shapes at `bps` from the next departure on (the frame on the wire keeps its slot). Only
    /// between two shaped rates: a change to or from 0 (unshaped) is ignored, since the depth
    /// accounting differs.
    pub fn set_link_rate(&mut self, bps: u64) {
        if bps != 0 && self.config.link_rate_bps != 0 {
            self.config.link_rate_bps = bps;
        }
    }

    /// The rate the shaper uses, bit/s (0: unshaped).
    pub fn link_rate_bps(&self) -> u64 {
        self.config.link_rate_bps
    }

    /// Says that the histograms' changes were published (see [`Histogram::dirty`]).
    pub fn mark_published(&mut self) {
        self.stats.lateness_ns.mark_published();
        self.stats.arrival_depth.mark_published();
    }

    /// Clears the maxima and histograms (a new measurement period starts); counters stay.
    pub fn reset_peaks(&mut self) {
        let stats = &mut self.stats;
        stats.max_depth_packets = stats.depth_packets;
        stats.max_depth_bytes = stats.depth_bytes;
        stats.max_lateness_ns = 0;
        stats.lateness_ns = Histogram::default();
        stats.arrival_depth = Histogram::default();
    }

    /// Brings the time integrals of the depth up to `now_ns` (the frame on the wire leaves the
    /// depth at the end of its slot, if that came first).
    #[inline]
    pub fn integrate(&mut self, now_ns: u64) {
        self.settle(now_ns);
        self.integrate_to(now_ns);
    }

    /// Lets the frame on the wire leave the depth if its slot ended by `now_ns`.
    #[inline]
    fn settle(&mut self, now_ns: u64) {
        if self.on_wire != 0 && now_ns >= self.next_free_ns {
            self.integrate_to(self.next_free_ns);
            let stats = &mut self.stats;
            stats.depth_packets -= 1;
            stats.depth_bytes -= self.on_wire;
            self.on_wire = 0;
        }
    }

    #[inline]
    fn integrate_to(&mut self, now_ns: u64) {
        let stats = &mut self.stats;
        let elapsed = u128::from(now_ns.saturating_sub(stats.last_change_ns));
        stats.depth_packet_ns += u128::from(stats.depth_packets) * elapsed;
        stats.depth_byte_ns += u128::from(stats.depth_bytes) * elapsed;
        if stats.depth_packets != 0 {
            stats.busy_link_ns += elapsed as u64;
        }
        stats.last_change_ns = stats.last_change_ns.max(now_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;

    fn shaped(rate_bps: u64) -> EgressQueue<u32> {
        EgressQueue::new(
            EgressConfig {
                link_rate_bps: rate_bps,
                buffer_bytes: 10_000,
                ecn_threshold_bytes: Some(3_000),
                shaping: Shaping::Strict,
            },
            16,
        )
    }

    #[test]
    fn serialization_counts_preamble_and_gap() {
        let config = EgressConfig {
            link_rate_bps: 100 * MBIT,
            buffer_bytes: 0,
            ecn_threshold_bytes: None,
            shaping: Shaping::Strict,
        };
        // (1500 + 20) · 8 bits at 100 Mbit/s = 121.6 µs.
        assert_eq!(config.serialization_ns(1500), 121_600);
        // 84 bytes on the wire at 100 Mbit/s = 6.72 µs.
        assert_eq!(config.serialization_ns(64), 6_720);
        assert_eq!(
            EgressConfig {
                link_rate_bps: 0,
                ..config
            }
            .serialization_ns(1500),
            0
        );
    }

    #[test]
    fn a_new_rate_applies_from_the_next_departure_and_never_to_an_unshaped_port() {
        let mut queue = shaped(100 * MBIT);
        for desc in 0..3 {
            queue.enqueue(desc, 1500, false, 0);
        }
        let mut out = Vec::new();
        assert_eq!(queue.dequeue(0, 8, |d, _| out.push(d)), 1);
        // The frame on the wire keeps its 121.6 µs slot; the next one takes 4× as long.
        queue.set_link_rate(25 * MBIT);
        assert_eq!(queue.link_rate_bps(), 25 * MBIT);
        assert_eq!(queue.next_departure_ns(), Some(121_600));
        assert_eq!(queue.dequeue(121_600, 8, |d, _| out.push(d)), 1);
        assert_eq!(queue.next_departure_ns(), Some(121_600 + 486_400));
        assert_eq!(queue.dequeue(121_600 + 486_399, 8, |d, _| out.push(d)), 0);
        assert_eq!(queue.dequeue(121_600 + 486_400, 8, |d, _| out.push(d)), 1);
        assert_eq!(out, [0, 1, 2]);
        // To or from unshaped: ignored.
        queue.set_link_rate(0);
        assert_eq!(queue.link_rate_bps(), 25 * MBIT);
        let mut unshaped = shaped(0);
        unshaped.set_link_rate(MBIT);
        assert_eq!(unshaped.link_rate_bps(), 0);
    }

    #[test]
    fn shaper_spaces_frames_by_their_serialization_time() {
        let mut queue = shaped(100 * MBIT);
        for desc in 0..3 {
            assert_eq!(
                queue.enqueue(desc, 1500, false, 0),
                Enqueued::Queued { mark_ce: false }
            );
        }
        let mut out = Vec::new();
        // At t = 0 exactly one frame may leave.
        assert_eq!(queue.dequeue(0, 64, |d, _| out.push(d)), 1);
        assert_eq!(queue.next_departure_ns(), Some(121_600));
        assert_eq!(queue.dequeue(121_599, 64, |d, _| out.push(d)), 0);
        assert_eq!(queue.dequeue(121_600, 64, |d, _| out.push(d)), 1);
        assert_eq!(out, vec![0, 1]);
        assert_eq!(queue.stats().max_lateness_ns, 0);
    }

    #[test]
    fn catch_up_keeps_the_rate_of_a_late_shaper_but_never_sends_two_frames_at_once() {
        let mut queue = EgressQueue::new(
            EgressConfig {
                shaping: Shaping::CatchUp,
                ..*shaped(100 * MBIT).config()
            },
            16,
        );
        for desc in 0..4 {
            queue.enqueue(desc, 1500, false, 0);
        }
        // 121.6 µs per frame. The first leaves 10 µs late: the next is due 10 µs early.
        assert_eq!(queue.dequeue(10_000, 64, |_, _| {}), 1);
        assert_eq!(queue.next_departure_ns(), Some(121_600));
        // On time again: the schedule is the unshifted one, the rate is kept.
        assert_eq!(queue.dequeue(121_600, 64, |_, _| {}), 1);
        assert_eq!(queue.next_departure_ns(), Some(243_200));
        // 1 ms late: the credit is capped at half a frame time, and one frame leaves per call.
        assert_eq!(queue.dequeue(1_243_200, 64, |_, _| {}), 1);
        assert_eq!(queue.next_departure_ns(), Some(1_243_200 + 60_800));
        assert_eq!(queue.stats().max_lateness_ns, 1_000_000);
        // The first 10 µs were made up; of the 1 ms, all but the half-frame credit is lost.
        assert_eq!(queue.stats().lost_link_ns, 1_000_000 - 60_800);
    }

    #[test]
    fn a_late_shaper_never_bursts_and_records_its_lateness() {
        let mut queue = shaped(100 * MBIT);
        for desc in 0..3 {
            queue.enqueue(desc, 1500, false, 0);
        }
        // Woken 1 ms late: one frame leaves now, the next one a serialization time later.
        assert_eq!(queue.dequeue(1_000_000, 64, |_, _| {}), 1);
        assert_eq!(queue.stats().max_lateness_ns, 1_000_000);
        assert_eq!(queue.next_departure_ns(), Some(1_000_000 + 121_600));
        assert_eq!(queue.stats().lost_link_ns, 1_000_000);
        assert_eq!(queue.dequeue(1_000_000 + 121_600, 64, |_, _| {}), 1);
        assert_eq!(queue.stats().lateness_ns.count(), 2);
        // On time: no more link time lost; a reset of the peaks keeps the counter.
        queue.reset_peaks();
        assert_eq!(queue.stats().lost_link_ns, 1_000_000);
    }

    #[test]
    fn an_idle_link_sends_a_new_frame_at_its_arrival() {
        let mut queue = shaped(100 * MBIT);
        queue.enqueue(1, 1500, false, 0);
        queue.dequeue(0, 1, |_, _| {});
        // Arrives long after the link went idle: due at its arrival, not at next_free.
        queue.enqueue(2, 1500, false, 5_000_000);
        assert_eq!(queue.next_departure_ns(), Some(5_000_000));
        queue.dequeue(5_000_010, 1, |_, _| {});
        assert_eq!(queue.stats().max_lateness_ns, 10);
    }

    #[test]
    fn busy_time_less_lost_time_is_what_the_link_carried() {
        let mut queue = shaped(100 * MBIT);
        // Two frames at t = 0: the first on time, the second 50 µs late (lost).
        queue.enqueue(1, 1500, false, 0);
        queue.enqueue(2, 1500, false, 0);
        queue.dequeue(0, 1, |_, _| {});
        queue.dequeue(121_600 + 50_000, 1, |_, _| {});
        // Idle from the end of the second slot (293.2 µs) until a third frame at 1 ms, sent on
        // time; the queue is looked at again after its slot ended.
        queue.enqueue(3, 1500, false, 1_000_000);
        queue.dequeue(1_000_000, 1, |_, _| {});
        queue.integrate(2_000_000);
        let stats = queue.stats();
        assert_eq!(stats.lost_link_ns, 50_000);
        // Busy: 0 – 293.2 µs and 1 – 1.1216 ms; the idle 706.8 µs and the time after the last
        // slot are not.
        assert_eq!(stats.busy_link_ns, 293_200 + 121_600);
        assert_eq!(stats.busy_link_ns - stats.lost_link_ns, 3 * 121_600);
    }

    #[test]
    fn unshaped_queue_releases_everything_at_once() {
        let mut queue = shaped(0);
        for desc in 0..5 {
            queue.enqueue(desc, 100, false, 0);
        }
        assert_eq!(queue.dequeue(0, 3, |_, _| {}), 3);
        assert_eq!(queue.dequeue(0, 64, |_, _| {}), 2);
        assert!(queue.is_empty());
        assert_eq!(queue.stats().lateness_ns.count(), 0);
    }

    #[test]
    fn tail_drop_at_the_byte_limit() {
        let mut queue = shaped(MBIT);
        for desc in 0..6 {
            assert!(matches!(
                queue.enqueue(desc, 1500, false, 0),
                Enqueued::Queued { .. }
            ));
        }
        // 6 · 1500 = 9000 B queued; one more does not fit in 10,000 B.
        assert_eq!(queue.enqueue(6, 1500, false, 0), Enqueued::Dropped(6));
        assert!(matches!(
            queue.enqueue(7, 1000, false, 0),
            Enqueued::Queued { .. }
        ));
        let stats = queue.stats();
        assert_eq!(stats.drops_buffer, 1);
        assert_eq!((stats.depth_packets, stats.depth_bytes), (7, 10_000));
        assert_eq!(
            (stats.max_depth_packets, stats.max_depth_bytes),
            (7, 10_000)
        );
    }

    #[test]
    fn ecn_marks_capable_frames_above_the_threshold_only() {
        let mut queue = shaped(MBIT);
        assert_eq!(
            queue.enqueue(0, 1500, true, 0),
            Enqueued::Queued { mark_ce: false }
        );
        assert_eq!(
            queue.enqueue(1, 1500, true, 0),
            Enqueued::Queued { mark_ce: false }
        );
        // 3000 B queued: not above the 3000 B threshold yet.
        assert_eq!(
            queue.enqueue(2, 1500, true, 0),
            Enqueued::Queued { mark_ce: false }
        );
        assert_eq!(
            queue.enqueue(3, 1500, true, 0),
            Enqueued::Queued { mark_ce: true }
        );
        assert_eq!(
            queue.enqueue(4, 1500, false, 0),
            Enqueued::Queued { mark_ce: false }
        );
        assert_eq!(queue.stats().ecn_marked, 1);
    }

    #[test]
    fn time_average_depth_integrates_over_time() {
        let mut queue = shaped(0);
        queue.enqueue(0, 100, false, 0);
        queue.enqueue(1, 100, false, 0);
        // Two frames for 1000 ns, then one for 1000 ns, then none.
        queue.dequeue(1_000, 1, |_, _| {});
        queue.dequeue(2_000, 1, |_, _| {});
        queue.integrate(4_000);
        let stats = queue.stats();
        assert_eq!(stats.depth_packet_ns, 2 * 1_000 + 1_000);
        assert_eq!(stats.depth_byte_ns, 200 * 1_000 + 100 * 1_000);
        // Over 4 µs the time-averaged depth is 0.75 frames.
        assert_eq!(stats.depth_packet_ns as f64 / 4_000.0, 0.75);
    }

    #[test]
    fn the_frame_on_the_wire_counts_until_its_slot_ends() {
        // 1480 B + 20 B gap at 1 Mbit/s: a 12 ms slot.
        let mut queue = shaped(MBIT);
        let slot = queue.config().serialization_ns(1480);
        assert_eq!(slot, 12_000_000);
        queue.enqueue(0, 1480, false, 0);
        queue.enqueue(1, 1480, false, 0);
        assert_eq!(queue.dequeue(0, 1, |_, _| {}), 1);
        // Both still count: one on the wire, one waiting.
        assert_eq!(queue.stats().depth_packets, 2);
        queue.integrate(slot - 1);
        assert_eq!(queue.stats().depth_bytes, 2 * 1480);
        assert_eq!(queue.dequeue(slot, 1, |_, _| {}), 1);
        assert_eq!(queue.stats().depth_packets, 1);
        queue.integrate(3 * slot);
        assert_eq!(queue.stats().depth_packets, 0);
        // Two frames for one slot, one for the next, none after: 3 frame-slots.
        assert_eq!(queue.stats().depth_packet_ns, 3 * u128::from(slot));
        assert_eq!(
            (
                queue.stats().max_depth_packets,
                queue.stats().departed_packets
            ),
            (2, 2)
        );
    }

    #[test]
    fn the_end_of_the_slot_on_the_wire_is_known_until_it_is_settled() {
        let mut queue = shaped(MBIT);
        assert_eq!(queue.on_wire_until_ns(), None);
        queue.enqueue(0, 1480, false, 0);
        queue.dequeue(0, 1, |_, _| {});
        assert_eq!(queue.on_wire_until_ns(), Some(12_000_000));
        queue.integrate(12_000_000);
        assert_eq!(queue.on_wire_until_ns(), None);
        assert_eq!(queue.stats().depth_packets, 0);
    }

    #[test]
    fn buffer_admission_counts_the_frame_on_the_wire() {
        let mut queue = shaped(MBIT);
        for desc in 0..6 {
            queue.enqueue(desc, 1500, false, 0);
        }
        queue.dequeue(0, 1, |_, _| {});
        // 9000 B counted (one on the wire): 1500 more do not fit in 10,000 B…
        assert_eq!(queue.enqueue(6, 1500, false, 1), Enqueued::Dropped(6));
        // …until the slot of the frame on the wire has ended.
        let slot = queue.config().serialization_ns(1500);
        assert!(matches!(
            queue.enqueue(7, 1500, false, slot),
            Enqueued::Queued { .. }
        ));
    }

    #[test]
    fn requeue_puts_the_frame_back_first() {
        let mut queue = shaped(0);
        queue.enqueue(1, 100, false, 0);
        queue.enqueue(2, 100, false, 0);
        let mut taken = None;
        queue.dequeue(0, 1, |d, len| taken = Some((d, len)));
        let (desc, len) = taken.unwrap();
        queue.requeue_front(desc, len, 0);
        let mut order = Vec::new();
        queue.dequeue(0, 64, |d, _| order.push(d));
        assert_eq!(order, vec![1, 2]);
        assert_eq!(queue.stats().departed_packets, 2);
    }

    #[test]
    fn histogram_quantiles_are_bucket_upper_bounds() {
        let mut histogram = Histogram::default();
        for value in [0, 1, 2, 3, 100, 100, 100, 5_000] {
            histogram.record(value);
        }
        assert_eq!(histogram.count(), 8);
        assert_eq!(histogram.quantile_upper_bound(0.1), 0);
        assert_eq!(histogram.quantile_upper_bound(0.5), 3);
        // 100 lies in [96, 104): 64 · (1 + 4/8) … 64 · (1 + 5/8).
        assert_eq!(histogram.quantile_upper_bound(0.75), 103);
        // 5 000 lies in [4 608, 5 120).
        assert_eq!(histogram.quantile_upper_bound(1.0), 5_119);
    }

    #[test]
    fn histogram_buckets_tile_the_values_and_stay_within_an_eighth() {
        // Consecutive buckets meet: each one's upper bound is one below the next's lower.
        for bucket in 0..HISTOGRAM_BUCKETS - 1 {
            assert_eq!(
                Histogram::upper_bound(bucket) + 1,
                Histogram::lower_bound(bucket + 1),
                "bucket {bucket}"
            );
            let (low, high) = (
                Histogram::lower_bound(bucket),
                Histogram::upper_bound(bucket),
            );
            assert_eq!(Histogram::bucket(low), bucket);
            assert_eq!(Histogram::bucket(high), bucket);
            // The width is at most an eighth of the lower edge (exact buckets below 16).
            assert!(
                8 * (high - low + 1) <= low.max(8),
                "bucket {bucket}: {low}..={high}"
            );
        }
        assert_eq!(Histogram::bucket(u64::MAX), HISTOGRAM_BUCKETS - 1);
        assert_eq!(Histogram::bucket(1 << 40), HISTOGRAM_BUCKETS - 1);
        assert_eq!(Histogram::upper_bound(HISTOGRAM_BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn histogram_tracks_what_it_has_not_published() {
        let mut histogram = Histogram::default();
        // A new (or cleared) histogram publishes everything once.
        assert_eq!(histogram.dirty(), 0..=HISTOGRAM_BUCKETS - 1);
        histogram.mark_published();
        assert!(histogram.dirty().is_empty());
        histogram.record(1_000);
        histogram.record(20);
        assert_eq!(
            histogram.dirty(),
            Histogram::bucket(20)..=Histogram::bucket(1_000)
        );
    }
}
