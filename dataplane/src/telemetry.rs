//! Telemetry the workers publish and everything else reads: per-port traffic, queue depth and
//! shaper fidelity, per-worker forwarding counters.
//!
//! Workers keep their counters in plain local structs on the hot path and copy them into these
//! atomics between batches (relaxed stores of cumulative values: a reader sees each value as of
//! some recent batch, never a torn one). Readers take a [`SwitchSnapshot`], a plain serializable
//! copy, for JSON, Prometheus text or the lab.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

use serde::Serialize;

use crate::arf::flows::{FiveTuple, FlowSketch};
use crate::counters::named_counters;
use crate::egress::{EgressStats, Histogram, HISTOGRAM_BUCKETS};
use crate::forward::{Counters, DropReason, KernelReason};

/// A histogram published with atomics.
#[derive(Debug)]
pub struct AtomicHistogram([AtomicU64; HISTOGRAM_BUCKETS]);

impl Default for AtomicHistogram {
    fn default() -> Self {
        Self(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl AtomicHistogram {
    /// Stores the buckets changed since the histogram was last published.
    fn store(&self, histogram: &Histogram) {
        for bucket in histogram.dirty() {
            self.0[bucket].store(histogram.buckets[bucket], Relaxed);
        }
    }

    fn load(&self) -> Histogram {
        let mut histogram = Histogram::default();
        for (bucket, slot) in histogram.buckets.iter_mut().zip(self.0.iter()) {
            *bucket = slot.load(Relaxed);
        }
        histogram
    }
}

/// One port's published counters.
#[derive(Debug, Default)]
pub struct PortTelemetry {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    rx_spliced: AtomicU64,
    rx_host_link: AtomicU64,
    drops_host_link: AtomicU64,
    enqueued_packets: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    drops_buffer: AtomicU64,
    drops_handoff: AtomicU64,
    ecn_marked: AtomicU64,
    depth_packets: AtomicU64,
    depth_bytes: AtomicU64,
    max_depth_packets: AtomicU64,
    max_depth_bytes: AtomicU64,
    depth_packet_ns: AtomicU64,
    depth_byte_ns: AtomicU64,
    integrated_until_ns: AtomicU64,
    max_lateness_ns: AtomicU64,
    lost_link_ns: AtomicU64,
    busy_link_ns: AtomicU64,
    xsk_rx_dropped: AtomicU64,
    xsk_rx_ring_full: AtomicU64,
    xsk_fill_ring_empty: AtomicU64,
    xsk_invalid_descs: AtomicU64,
    arrival_depth: AtomicHistogram,
    lateness_ns: AtomicHistogram,
    /// The emulated link rate the port's shaper uses now, bit/s (0: unshaped).
    link_rate_bps: AtomicU64,
    /// Largest depth published since the adaptive-routing detector last took it, bytes.
    window_max_depth_bytes: AtomicU64,
    /// Frames the XDP fast path forwarded that came in on the port.
    fast_rx_packets: AtomicU64,
    /// Frames the XDP fast path sent out of the port.
    fast_tx_packets: AtomicU64,
}

/// What the adaptive-routing detector reads of a port each window ([`PortTelemetry::take_window`]):
/// cumulative counters (the caller differences them) and the window's largest queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowReading {
    /// Frames dropped (buffer full or hand-off full), cumulative.
    pub drops: u64,
    /// The largest depth since the last reading, bytes: the largest depth any publication
    /// showed (workers publish at most every millisecond while busy) or the queue's own peak when
    /// that grew since the last reading.
    pub max_depth_bytes: u64,
    /// The queue's peak since the last reset, bytes (to see it grow).
    pub peak_depth_bytes: u64,
}

impl PortTelemetry {
    /// Publishes the receive counters (cumulative) of the port's owner.
    /// (`spliced`: of the packets, those that came over an in-process link.)
    pub fn publish_rx(&self, packets: u64, bytes: u64, spliced: u64) {
        self.rx_packets.store(packets, Relaxed);
        self.rx_bytes.store(bytes, Relaxed);
        self.rx_spliced.store(spliced, Relaxed);
    }

    /// Publishes the XDP fast path's counters of the port (cumulative): frames it forwarded that
    /// came in here, and frames it sent out of here.
    pub fn publish_fast(&self, rx: u64, tx: u64) {
        self.fast_rx_packets.store(rx, Relaxed);
        self.fast_tx_packets.store(tx, Relaxed);
    }

    /// Publishes the host link's counters (cumulative): frames received over it, and frames
    /// lost on it ([`PortSnapshot::drops_host_link`]).
    pub fn publish_host_link(&self, received: u64, lost: u64) {
        self.rx_host_link.store(received, Relaxed);
        self.drops_host_link.store(lost, Relaxed);
    }

    /// Publishes the kernel's statistics of the port's AF_XDP sockets (summed over queues):
    /// frames the kernel dropped before the data path saw them.
    pub fn publish_socket_drops(&self, drops: &SocketDrops) {
        self.xsk_rx_dropped.store(drops.rx_dropped, Relaxed);
        self.xsk_rx_ring_full.store(drops.rx_ring_full, Relaxed);
        self.xsk_fill_ring_empty
            .store(drops.fill_ring_empty, Relaxed);
        self.xsk_invalid_descs.store(drops.invalid_descs, Relaxed);
    }

    /// Publishes frames that could not be handed to this port's owner (its inbox was full).
    pub fn add_handoff_drops(&self, drops: u64) {
        self.drops_handoff.fetch_add(drops, Relaxed);
    }

    /// Publishes the egress queue's state (cumulative counters and current depth).
    pub fn publish_egress(&self, stats: &EgressStats) {
        self.enqueued_packets.store(stats.enqueued_packets, Relaxed);
        self.tx_packets.store(stats.departed_packets, Relaxed);
        self.tx_bytes.store(stats.departed_bytes, Relaxed);
        self.drops_buffer.store(stats.drops_buffer, Relaxed);
        self.ecn_marked.store(stats.ecn_marked, Relaxed);
        self.depth_packets
            .store(u64::from(stats.depth_packets), Relaxed);
        self.depth_bytes
            .store(u64::from(stats.depth_bytes), Relaxed);
        self.window_max_depth_bytes
            .fetch_max(u64::from(stats.depth_bytes), Relaxed);
        self.max_depth_packets
            .store(u64::from(stats.max_depth_packets), Relaxed);
        self.max_depth_bytes
            .store(u64::from(stats.max_depth_bytes), Relaxed);
        self.depth_packet_ns
            .store(stats.depth_packet_ns as u64, Relaxed);
        self.depth_byte_ns
            .store(stats.depth_byte_ns as u64, Relaxed);
        self.integrated_until_ns
            .store(stats.last_change_ns, Relaxed);
        self.max_lateness_ns.store(stats.max_lateness_ns, Relaxed);
        self.lost_link_ns.store(stats.lost_link_ns, Relaxed);
        self.busy_link_ns.store(stats.busy_link_ns, Relaxed);
        self.arrival_depth.store(&stats.arrival_depth);
        self.lateness_ns.store(&stats.lateness_ns);
    }

    /// The emulated link rate the port's shaper uses (or is about to use), bit/s.
    pub fn link_rate_bps(&self) -> u64 {
        self.link_rate_bps.load(Relaxed)
    }

    /// Publishes only the current queue depth (what other pipes' queue-aware balancers read).
    #[inline]
    pub fn publish_depth(&self, packets: u32, bytes: u32) {
        self.depth_packets.store(u64::from(packets), Relaxed);
        self.depth_bytes.store(u64::from(bytes), Relaxed);
        self.window_max_depth_bytes
            .fetch_max(u64::from(bytes), Relaxed);
    }

    /// Reads the port for one detection window and starts the next: the window's largest depth
    /// is taken (reset to the current depth). `last_peak` is the previous reading's
    /// `peak_depth_bytes`.
    pub fn take_window(&self, last_peak: u64) -> WindowReading {
        let current = self.depth_bytes.load(Relaxed);
        let sampled = self.window_max_depth_bytes.swap(current, Relaxed);
        let peak = self.max_depth_bytes.load(Relaxed);
        WindowReading {
            drops: self.drops_buffer.load(Relaxed) + self.drops_handoff.load(Relaxed),
            max_depth_bytes: if peak > last_peak {
                sampled.max(peak)
            } else {
                sampled
            },
            peak_depth_bytes: peak,
        }
    }

    /// The current queue depth in frames and bytes (what queue-aware balancers read for ports
    /// owned by other workers).
    #[inline]
    pub fn depth(&self) -> (u32, u32) {
        (
            self.depth_packets.load(Relaxed) as u32,
            self.depth_bytes.load(Relaxed) as u32,
        )
    }

    /// This queue's own counters, for the per-queue breakdown.
    fn queue_snapshot(&self, queue: u32) -> QueueSnapshot {
        QueueSnapshot {
            queue,
            rx_packets: self.rx_packets.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            drops_buffer: self.drops_buffer.load(Relaxed),
            drops_handoff: self.drops_handoff.load(Relaxed),
            socket_rx_dropped: self.xsk_rx_dropped.load(Relaxed),
            depth_packets: self.depth_packets.load(Relaxed),
        }
    }
}

/// A port as one snapshot from its queues' telemetry (`slots[q]`: queue q; port-wide state —
/// link rate, the fast path's counters — in queue 0's): counters and histograms summed, maxima
/// the largest, and with several queues each queue's own counters too.
fn port_snapshot(name: &str, slots: &[PortTelemetry]) -> PortSnapshot {
    let sum = |field: fn(&PortTelemetry) -> &AtomicU64| -> u64 {
        slots.iter().map(|slot| field(slot).load(Relaxed)).sum()
    };
    let max = |field: fn(&PortTelemetry) -> &AtomicU64| -> u64 {
        slots
            .iter()
            .map(|slot| field(slot).load(Relaxed))
            .max()
            .unwrap_or(0)
    };
    let mut arrival_depth = Histogram::default();
    let mut lateness = Histogram::default();
    for slot in slots {
        for (total, count) in arrival_depth
            .buckets
            .iter_mut()
            .zip(slot.arrival_depth.load().buckets)
        {
            *total += count;
        }
        for (total, count) in lateness
            .buckets
            .iter_mut()
            .zip(slot.lateness_ns.load().buckets)
        {
            *total += count;
        }
    }
    let first = &slots[0];
    let fast_rx = first.fast_rx_packets.load(Relaxed);
    let fast_tx = first.fast_tx_packets.load(Relaxed);
    PortSnapshot {
        name: name.to_owned(),
        rx_packets: sum(|t| &t.rx_packets) + fast_rx,
        fast_rx_packets: fast_rx,
        rx_bytes: sum(|t| &t.rx_bytes),
        rx_spliced: sum(|t| &t.rx_spliced),
        rx_host_link: sum(|t| &t.rx_host_link),
        drops_host_link: sum(|t| &t.drops_host_link),
        enqueued_packets: sum(|t| &t.enqueued_packets),
        tx_packets: sum(|t| &t.tx_packets) + fast_tx,
        fast_tx_packets: fast_tx,
        tx_bytes: sum(|t| &t.tx_bytes),
        drops_buffer: sum(|t| &t.drops_buffer),
        drops_handoff: sum(|t| &t.drops_handoff),
        ecn_marked: sum(|t| &t.ecn_marked),
        socket_drops: SocketDrops {
            rx_dropped: sum(|t| &t.xsk_rx_dropped),
            rx_ring_full: sum(|t| &t.xsk_rx_ring_full),
            fill_ring_empty: sum(|t| &t.xsk_fill_ring_empty),
            invalid_descs: sum(|t| &t.xsk_invalid_descs),
        },
        depth_packets: sum(|t| &t.depth_packets),
        depth_bytes: sum(|t| &t.depth_bytes),
        max_depth_packets: max(|t| &t.max_depth_packets),
        max_depth_bytes: max(|t| &t.max_depth_bytes),
        depth_packet_ns: sum(|t| &t.depth_packet_ns),
        depth_byte_ns: sum(|t| &t.depth_byte_ns),
        integrated_until_ns: max(|t| &t.integrated_until_ns),
        arrival_depth_histogram: used_buckets(&arrival_depth),
        lateness_p50_ns: lateness.quantile_upper_bound(0.50),
        lateness_p99_ns: lateness.quantile_upper_bound(0.99),
        lateness_p999_ns: lateness.quantile_upper_bound(0.999),
        max_lateness_ns: max(|t| &t.max_lateness_ns),
        lost_link_ns: sum(|t| &t.lost_link_ns),
        busy_link_ns: max(|t| &t.busy_link_ns),
        lateness_histogram_ns: used_buckets(&lateness),
        link_rate_bps: first.link_rate_bps.load(Relaxed),
        queues: if slots.len() > 1 {
            (0u32..)
                .zip(slots)
                .map(|(queue, slot)| slot.queue_snapshot(queue))
                .collect()
        } else {
            Vec::new()
        },
    }
}

/// A histogram's buckets up to its last non-empty one (a port's snapshot carries two).
fn used_buckets(histogram: &Histogram) -> Vec<u64> {
    let used = histogram
        .buckets
        .iter()
        .rposition(|&count| count > 0)
        .map_or(0, |last| last + 1);
    histogram.buckets[..used].to_vec()
}

named_counters! {
    /// Why a worker dropped what an RX ring handed it, before the forwarder saw a frame. Each
    /// reason is one counter, published after the forwarder's as `drop_<name>`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum RxDropReason {
        /// A descriptor whose address and length do not lie inside one UMEM frame. Never
        /// expected from the kernel; the descriptor is not used.
        BadDescriptor = "bad_rx_descriptor",
        /// A multi-buffer packet of more UMEM frames than a packet may span (larger than the
        /// ports' MTU allows: a sender with segmentation offloads on); its frames are freed.
        TooManyFrames = "rx_too_many_frames",
    }
}

/// A worker's own drops, indexed by [`RxDropReason::as_index`].
pub type RxDrops = [u64; RxDropReason::COUNT];

/// Every counter a worker publishes, in order, as `(prefix, name, value)`: the forwarder's
/// totals, `drop_` and each [`DropReason`], `kernel_` and each [`KernelReason`], `drop_` and
/// each [`RxDropReason`]. The one list behind [`worker_counter_names`] and
/// [`worker_counter_values`].
fn for_each_worker_counter(
    forward: &Counters,
    rx_drops: &RxDrops,
    mut visit: impl FnMut(&'static str, &'static str, u64),
) {
    for (name, value) in forward.totals() {
        visit("", name, value);
    }
    for reason in DropReason::ALL {
        visit("drop_", reason.name(), forward.dropped(reason));
    }
    for reason in KernelReason::ALL {
        visit("kernel_", reason.name(), forward.kernel(reason));
    }
    for reason in RxDropReason::ALL {
        visit("drop_", reason.name(), rx_drops[reason.as_index()]);
    }
}

/// The names of the counters every worker publishes, in [`worker_counter_values`] order: what
/// [`SwitchSnapshot::counters`], the admin `stats` and Prometheus' `reason` label show.
pub fn worker_counter_names() -> &'static [&'static str] {
    static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = Vec::new();
        for_each_worker_counter(
            &Counters::default(),
            &RxDrops::default(),
            |prefix, name, _| {
                // Built once per process: the prefixed names live as long as the program.
                names.push(match prefix {
                    "" => name,
                    _ => Box::leak(format!("{prefix}{name}").into_boxed_str()),
                });
            },
        );
        names
    })
}

/// The name under which workers publish the drops of `reason` (`drop_neighbor_unresolved`).
pub fn drop_counter_name(reason: DropReason) -> &'static str {
    worker_counter_names()[Counters::default().totals().len() + reason.as_index()]
}

/// A worker's counter values into `out`, in [`worker_counter_names`] order.
pub fn worker_counter_values(forward: &Counters, rx_drops: &RxDrops, out: &mut Vec<u64>) {
    out.clear();
    for_each_worker_counter(forward, rx_drops, |_, _, value| out.push(value));
}

/// A named set of monotonic counters (a worker's forwarding counters, the steering program's).
#[derive(Debug)]
pub struct CounterSet {
    names: &'static [&'static str],
    values: Box<[AtomicU64]>,
}

impl CounterSet {
    /// Counters with these names, all zero.
    pub fn new(names: &'static [&'static str]) -> Self {
        Self {
            names,
            values: names.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Publishes cumulative values, in the order of the names.
    pub fn publish(&self, values: &[u64]) {
        for (slot, &value) in self.values.iter().zip(values) {
            slot.store(value, Relaxed);
        }
    }

    /// `(name, value)` pairs.
    pub fn read(&self) -> Vec<(&'static str, u64)> {
        self.names
            .iter()
            .zip(self.values.iter())
            .map(|(&name, value)| (name, value.load(Relaxed)))
            .collect()
    }
}

/// Where one worker's UMEM frames are, published with its counters (gauges, not counters): in
/// its cache, given to its ports' fill and TX rings and not yet back, in its egress queues.
/// Frames in a batch are not counted: a worker publishes between batches.
#[derive(Debug, Default)]
pub struct WorkerFrames {
    caches: AtomicU64,
    fill: AtomicU64,
    tx: AtomicU64,
    egress: AtomicU64,
}

impl WorkerFrames {
    /// Publishes the worker's frames by place.
    pub fn publish(&self, caches: u64, fill: u64, tx: u64, egress: u64) {
        self.caches.store(caches, Relaxed);
        self.fill.store(fill, Relaxed);
        self.tx.store(tx, Relaxed);
        self.egress.store(egress, Relaxed);
    }
}

/// Reads the frames of the shared places, `(free pool, worker inboxes)`, at snapshot time.
pub struct SharedFrames(pub Box<dyn Fn() -> (u64, u64) + Send + Sync>);

impl std::fmt::Debug for SharedFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedFrames")
    }
}

/// Where a UMEM's frames are, place by place: the runtime's census at stop (every worker's
/// share added) and, live, the places of [`UmemSnapshot`].
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct FrameCensus {
    /// In the shared free pool.
    pub pool: u64,
    /// In workers' caches (free, held locally).
    pub caches: u64,
    /// Given to fill rings and not yet received.
    pub fill: u64,
    /// Given to TX rings and not yet completed.
    pub tx: u64,
    /// In egress queues.
    pub egress: u64,
    /// In worker inboxes (handed to another port's owner).
    pub inbox: u64,
    /// Held by a worker between receive and decision (0 between batches, so 0 live).
    #[serde(default)]
    pub in_batch: u64,
}

impl FrameCensus {
    /// Each place by name, in field order: the one list behind [`total`](Self::total),
    /// [`add`](Self::add) and the metrics' `place` label.
    #[must_use]
    pub const fn places(&self) -> [(&'static str, u64); 7] {
        [
            ("pool", self.pool),
            ("caches", self.caches),
            ("fill", self.fill),
            ("tx", self.tx),
            ("egress", self.egress),
            ("inbox", self.inbox),
            ("in_batch", self.in_batch),
        ]
    }

    /// Frames accounted for.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.places().iter().map(|(_, frames)| frames).sum()
    }

    /// Adds another census (one worker's) into this one.
    pub fn add(&mut self, other: &Self) {
        self.pool += other.pool;
        self.caches += other.caches;
        self.fill += other.fill;
        self.tx += other.tx;
        self.egress += other.egress;
        self.inbox += other.inbox;
        self.in_batch += other.in_batch;
    }
}

/// The UMEM's frames and where they are, summed over workers (the runtime's stop census,
/// live). Exact when the switch is idle; under traffic the places are read one after another
/// while frames move, so the sum may be off by the frames in flight.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct UmemSnapshot {
    /// Frames in the UMEM(s).
    pub frames: u64,
    /// Where they are (flattened into this object in JSON).
    #[serde(flatten)]
    pub places: FrameCensus,
}

impl UmemSnapshot {
    /// Frames found in some place: equal to `frames` when none leaked (when idle).
    #[must_use]
    pub fn accounted(&self) -> u64 {
        self.places.total()
    }
}

/// Everything a switch publishes.
#[derive(Debug)]
pub struct SwitchTelemetry {
    port_names: Vec<String>,
    /// Queues per port.
    queues: usize,
    /// Per (port, queue), at `port · queues + queue`; port-wide state in queue 0's.
    ports: Vec<PortTelemetry>,
    workers: Vec<CounterSet>,
    worker_frames: Vec<WorkerFrames>,
    /// The UMEM's frame count and the reader of the shared places, set once by the runtime.
    umem: OnceLock<(u64, SharedFrames)>,
    /// Bumped by a reset request; workers then clear their maxima and histograms.
    reset_epoch: AtomicU64,
    /// Bumped by a link-rate change; workers then give their ports' shapers the new rates.
    rate_epoch: AtomicU64,
    /// Per port: the flows the workers sampled on their way out since the adaptive-routing
    /// detector last took them (`arf-flow`; [`crate::arf::flows`]).
    flows: Vec<std::sync::Mutex<FlowSketch<FiveTuple>>>,
}

impl SwitchTelemetry {
    /// Telemetry for these ports of `queues` queues each (at least 1) and `workers` workers
    /// whose counters have `counter_names`.
    pub fn new(
        port_names: Vec<String>,
        queues: usize,
        workers: usize,
        counter_names: &'static [&'static str],
    ) -> Self {
        let queues = queues.max(1);
        let port_names_len = port_names.len();
        Self {
            ports: (0..port_names.len() * queues)
                .map(|_| PortTelemetry::default())
                .collect(),
            port_names,
            queues,
            workers: (0..workers)
                .map(|_| CounterSet::new(counter_names))
                .collect(),
            worker_frames: (0..workers).map(|_| WorkerFrames::default()).collect(),
            umem: OnceLock::new(),
            reset_epoch: AtomicU64::new(0),
            rate_epoch: AtomicU64::new(0),
            flows: (0..port_names_len)
                .map(|_| std::sync::Mutex::new(FlowSketch::default()))
                .collect(),
        }
    }

    /// Number of switch ports.
    #[must_use]
    pub fn port_count(&self) -> usize {
        self.flows.len()
    }

    /// Adds a worker's sampled flows of port `index` (each count times `scale`) unless the
    /// detector holds them this instant; whether they were added (if not, the worker keeps
    /// them for its next try: the hot path never waits).
    pub fn merge_flows(&self, index: usize, sampled: &FlowSketch<FiveTuple>, scale: u64) -> bool {
        let Some(Ok(mut shared)) = self.flows.get(index).map(std::sync::Mutex::try_lock) else {
            return false;
        };
        for (flow, count) in sampled.flows() {
            shared.record(flow, count * scale);
        }
        true
    }

    /// The flows sampled on port `index` since the last call (empty for unknown ports).
    pub fn take_flows(&self, index: usize) -> FlowSketch<FiveTuple> {
        self.flows
            .get(index)
            .and_then(|slot| {
                slot.lock()
                    .ok()
                    .map(|mut shared| std::mem::take(&mut *shared))
            })
            .unwrap_or_default()
    }

    /// Records port `index`'s configured link rate (at start; no worker is told).
    pub fn init_link_rate(&self, index: usize, bps: u64) {
        for slot in self.slots(index) {
            slot.link_rate_bps.store(bps, Relaxed);
        }
    }

    /// Port `index`'s telemetry slots, one per queue.
    fn slots(&self, index: usize) -> &[PortTelemetry] {
        &self.ports[index * self.queues..(index + 1) * self.queues]
    }

    /// Asks the owner of port `index` to shape it at `bps` from now on (`link A B rate R`: a
    /// degraded link). Only a shaped port can change its rate: `bps` and the current rate must
    /// both be non-zero, else nothing changes and `false` is returned.
    pub fn request_link_rate(&self, index: usize, bps: u64) -> bool {
        if bps == 0 || self.port(index).link_rate_bps.load(Relaxed) == 0 {
            return false;
        }
        for slot in self.slots(index) {
            slot.link_rate_bps.store(bps, Relaxed);
        }
        self.rate_epoch.fetch_add(1, Relaxed);
        true
    }

    /// The current link-rate epoch.
    pub fn rate_epoch(&self) -> u64 {
        self.rate_epoch.load(Relaxed)
    }

    /// Port `index`'s telemetry: its queue 0's, which holds the port-wide state (link rate,
    /// the fast path's counters) and, with one queue per port, everything.
    pub fn port(&self, index: usize) -> &PortTelemetry {
        &self.ports[index * self.queues]
    }

    /// The telemetry of queue `queue` of port `index`, which the worker serving that queue
    /// publishes into.
    pub fn port_queue(&self, index: usize, queue: u32) -> &PortTelemetry {
        &self.ports[index * self.queues + queue as usize % self.queues]
    }

    /// Reads port `index` for one adaptive-routing detection window over all its queues (see
    /// [`PortTelemetry::take_window`]): drops summed, the largest queue of any.
    pub fn take_window(&self, index: usize, last_peak: u64) -> WindowReading {
        let mut reading = WindowReading::default();
        for slot in self.slots(index) {
            let queue = slot.take_window(last_peak);
            reading.drops += queue.drops;
            reading.max_depth_bytes = reading.max_depth_bytes.max(queue.max_depth_bytes);
            reading.peak_depth_bytes = reading.peak_depth_bytes.max(queue.peak_depth_bytes);
        }
        reading
    }

    /// Worker `index`'s counters.
    pub fn worker(&self, index: usize) -> &CounterSet {
        &self.workers[index]
    }

    /// Worker `index`'s frame places.
    pub fn worker_frames(&self, index: usize) -> &WorkerFrames {
        &self.worker_frames[index]
    }

    /// Sets the UMEM's frame count and how to read the shared places (once; later calls are
    /// ignored).
    pub fn set_umem(&self, frames: u64, shared: SharedFrames) {
        let _ = self.umem.set((frames, shared));
    }

    /// Asks the workers to clear maxima and histograms (counters stay monotonic).
    pub fn request_reset(&self) {
        self.reset_epoch.fetch_add(1, Relaxed);
    }

    /// The current reset epoch.
    pub fn reset_epoch(&self) -> u64 {
        self.reset_epoch.load(Relaxed)
    }

    /// A plain copy of everything.
    pub fn snapshot(&self, now_ns: u64) -> SwitchSnapshot {
        let mut counters: Vec<(String, u64)> = Vec::new();
        for worker in &self.workers {
            for (name, value) in worker.read() {
                match counters.iter_mut().find(|(n, _)| n == name) {
                    Some((_, total)) => *total += value,
                    None => counters.push((name.to_owned(), value)),
                }
            }
        }
        SwitchSnapshot {
            time_ns: now_ns,
            ports: self
                .port_names
                .iter()
                .enumerate()
                .map(|(index, name)| port_snapshot(name, self.slots(index)))
                .collect(),
            counters,
            umem: self.umem.get().map(|(frames, shared)| {
                let (pool, inbox) = (shared.0)();
                let mut places = FrameCensus {
                    pool,
                    inbox,
                    ..FrameCensus::default()
                };
                for worker in &self.worker_frames {
                    places.caches += worker.caches.load(Relaxed);
                    places.fill += worker.fill.load(Relaxed);
                    places.tx += worker.tx.load(Relaxed);
                    places.egress += worker.egress.load(Relaxed);
                }
                UmemSnapshot {
                    frames: *frames,
                    places,
                }
            }),
        }
    }
}

/// One port, as published.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PortSnapshot {
    /// Interface name.
    pub name: String,
    /// Frames received on the port and handed to the data path: the AF_XDP workers' and, with
    /// `--fast-path xdp`, those the XDP program forwarded itself.
    pub rx_packets: u64,
    /// Of `rx_packets`, those the XDP fast path forwarded (`rx_bytes` counts the others only).
    #[serde(default)]
    pub fast_rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Of `rx_packets`, frames that came over an in-process link from a switch of the same
    /// `ofan-switch group` (`--splice`), not through the port's veth.
    #[serde(default)]
    pub rx_spliced: u64,
    /// Of `rx_packets`, frames that came over the port's shared-memory link from the host's
    /// agent (`ofan-switch group --host-links`), not through the veth.
    #[serde(default)]
    pub rx_host_link: u64,
    /// Frames lost on the port's host link: to the agent with its ring full (it fell
    /// behind), or from it with no free frame — the emulation's, like a full socket.
    #[serde(default)]
    pub drops_host_link: u64,
    /// Frames accepted into the egress queue.
    pub enqueued_packets: u64,
    /// Frames sent: by the AF_XDP workers and, with `--fast-path xdp`, by the XDP program.
    pub tx_packets: u64,
    /// Of `tx_packets`, those the XDP fast path sent (`tx_bytes` counts the others only).
    #[serde(default)]
    pub fast_tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped because the egress buffer was full.
    pub drops_buffer: u64,
    /// Frames dropped because the hand-off ring to the port's worker was full.
    pub drops_handoff: u64,
    /// Frames marked ECN CE.
    pub ecn_marked: u64,
    /// Frames the kernel dropped at the port's AF_XDP sockets.
    pub socket_drops: SocketDrops,
    /// Frames queued now.
    pub depth_packets: u64,
    /// Bytes queued now.
    pub depth_bytes: u64,
    /// Largest depth since the last reset, frames.
    pub max_depth_packets: u64,
    /// Largest depth since the last reset, bytes.
    pub max_depth_bytes: u64,
    /// ∫ depth dt in frame·ns (difference of two snapshots ÷ elapsed = time-averaged depth).
    pub depth_packet_ns: u64,
    /// ∫ depth dt in byte·ns.
    pub depth_byte_ns: u64,
    /// Time up to which the integrals run (monotonic ns).
    pub integrated_until_ns: u64,
    /// Histogram of the depth (frames) each arriving frame found: counts per bucket of
    /// [`Histogram`] (exact below 16, then 8 per power of two), up to the last non-empty one.
    pub arrival_depth_histogram: Vec<u64>,
    /// Shaper lateness, median (upper edge of its bucket: at most 12.5 % above), ns.
    pub lateness_p50_ns: u64,
    /// Shaper lateness, 99th percentile, ns.
    pub lateness_p99_ns: u64,
    /// Shaper lateness, 99.9th percentile, ns.
    pub lateness_p999_ns: u64,
    /// Largest lateness since the last reset, ns.
    pub max_lateness_ns: u64,
    /// Link time the shaper lost to lateness, ns (a counter): a backlogged port carried
    /// `rate × (elapsed − lost)`.
    #[serde(default)]
    pub lost_link_ns: u64,
    /// Time the port had a frame queued or on the wire, ns (a counter, integrated like the
    /// depth up to `integrated_until_ns`): a shaped port carried `rate × (busy − lost)` in it.
    #[serde(default)]
    pub busy_link_ns: u64,
    /// Histogram of shaper lateness, ns: counts per bucket of [`Histogram`], up to the last
    /// non-empty one.
    pub lateness_histogram_ns: Vec<u64>,
    /// The emulated link rate the port's shaper uses, bit/s (0: unshaped).
    #[serde(default)]
    pub link_rate_bps: u64,
    /// With several queues per port: each queue's own counters (the fields above sum them;
    /// empty with one queue).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<QueueSnapshot>,
}

/// One queue of a port with several: what its worker received and sent on it.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct QueueSnapshot {
    /// The queue number (RX and TX).
    pub queue: u32,
    /// Frames received on the queue.
    pub rx_packets: u64,
    /// Frames sent on the queue.
    pub tx_packets: u64,
    /// Frames dropped because the queue's egress buffer was full.
    pub drops_buffer: u64,
    /// Frames dropped because the hand-off to the queue's worker was full.
    pub drops_handoff: u64,
    /// Frames the kernel dropped at the queue's AF_XDP socket.
    pub socket_rx_dropped: u64,
    /// Frames queued now.
    pub depth_packets: u64,
}

/// The kernel's drop counters of AF_XDP sockets (`XDP_STATISTICS`), summed over a port's
/// queues: frames the steering program redirected that never reached the data path.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SocketDrops {
    /// Dropped for any reason (`rx_dropped`).
    pub rx_dropped: u64,
    /// Dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub fill_ring_empty: u64,
    /// Invalid RX or TX descriptors.
    pub invalid_descs: u64,
}

/// Everything, as published.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SwitchSnapshot {
    /// When the snapshot was taken (monotonic ns).
    pub time_ns: u64,
    /// Every port.
    pub ports: Vec<PortSnapshot>,
    /// Forwarding counters summed over workers, by name.
    pub counters: Vec<(String, u64)>,
    /// The UMEM's frames by place (absent without a running data path).
    #[serde(default)]
    pub umem: Option<UmemSnapshot>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What every worker publishes, by name and in order: what the admin `stats`, Prometheus'
    /// `reason` label and the lab read. A rename or a reorder must fail here.
    #[test]
    fn published_counter_names_are_pinned() {
        assert_eq!(
            worker_counter_names(),
            [
                "frames",
                "forwarded",
                "northbound",
                "no_key",
                "key_out_of_range",
                "detoured",
                "drop_truncated",
                "drop_unknown_ether_type",
                "drop_unsupported_vlan",
                "drop_bad_version",
                "drop_bad_ipv4_header",
                "drop_ipv4_options",
                "drop_bad_ipv4_checksum",
                "drop_fragment",
                "drop_bad_ipv6_header",
                "drop_frame_too_large",
                "drop_martian",
                "drop_no_route",
                "drop_unreachable",
                "drop_ttl_expired",
                "drop_port_down",
                "drop_neighbor_unresolved",
                "kernel_local_address",
                "kernel_local_route",
                "drop_bad_rx_descriptor",
                "drop_rx_too_many_frames",
            ]
        );
    }

    #[test]
    fn drop_counters_are_named_from_the_list() {
        for reason in DropReason::ALL {
            assert_eq!(drop_counter_name(reason), format!("drop_{}", reason.name()));
        }
        assert_eq!(
            drop_counter_name(DropReason::NeighborUnresolved),
            "drop_neighbor_unresolved"
        );
    }

    #[test]
    fn published_values_follow_the_names() {
        let mut forward = Counters {
            frames: 7,
            key_out_of_range: 1,
            ..Counters::default()
        };
        forward.drops[DropReason::Martian.as_index()] = 2;
        forward.to_kernel[KernelReason::LocalRoute.as_index()] = 3;
        let mut rx_drops = RxDrops::default();
        rx_drops[RxDropReason::BadDescriptor.as_index()] = 4;
        let mut values = Vec::new();
        worker_counter_values(&forward, &rx_drops, &mut values);
        let nonzero: Vec<(&str, u64)> = worker_counter_names()
            .iter()
            .copied()
            .zip(values.iter().copied())
            .filter(|&(_, value)| value > 0)
            .collect();
        assert_eq!(values.len(), worker_counter_names().len());
        assert_eq!(
            nonzero,
            [
                ("frames", 7),
                ("key_out_of_range", 1),
                ("drop_martian", 2),
                ("kernel_local_route", 3),
                ("drop_bad_rx_descriptor", 4),
            ]
        );
    }

    #[test]
    fn the_umem_census_adds_the_workers_places_to_the_shared_ones() {
        let telemetry = SwitchTelemetry::new(vec!["p0".into()], 1, 2, &[]);
        assert_eq!(
            telemetry.snapshot(0).umem,
            None,
            "no UMEM until the runtime sets one"
        );
        telemetry.set_umem(100, SharedFrames(Box::new(|| (40, 3))));
        telemetry.worker_frames(0).publish(10, 20, 1, 2);
        telemetry.worker_frames(1).publish(5, 15, 0, 4);
        let umem = telemetry.snapshot(0).umem.unwrap();
        assert_eq!(
            umem,
            UmemSnapshot {
                frames: 100,
                places: FrameCensus {
                    pool: 40,
                    caches: 15,
                    fill: 35,
                    tx: 1,
                    egress: 6,
                    inbox: 3,
                    in_batch: 0,
                },
            }
        );
        assert_eq!(umem.accounted(), 100);
    }

    /// Publication copies only the buckets recorded since the last one: what readers load must
    /// still be the whole histogram, across publications and a clear.
    #[test]
    fn a_published_histogram_reads_back_whole() {
        let atomic = AtomicHistogram::default();
        let mut histogram = Histogram::default();
        histogram.record(5);
        histogram.record(70_000);
        atomic.store(&histogram);
        histogram.mark_published();
        histogram.record(3_000);
        histogram.record(70_000);
        atomic.store(&histogram);
        histogram.mark_published();
        assert_eq!(atomic.load().buckets, histogram.buckets);
        assert_eq!(
            used_buckets(&atomic.load()).len(),
            Histogram::bucket(70_000) + 1
        );

        let cleared = Histogram::default();
        atomic.store(&cleared);
        assert_eq!(atomic.load().count(), 0);
        assert!(used_buckets(&atomic.load()).is_empty());
    }
}
