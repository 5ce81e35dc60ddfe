//! Telemetry the workers publish and everything else reads: per-port traffic, queue depth and
//! shaper fidelity, per-worker forwarding counters.
//!
//! Workers keep their counters in plain local structs on the hot path and copy them into these
//! atomics between batches (relaxed stores of cumulative values: a reader sees each value as of
//! some recent batch, never a torn one). Readers take a [`SwitchSnapshot`], a plain serializable
//! copy, for JSON, Prometheus text or the lab.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use crate::egress::{EgressStats, Log2Histogram};

/// Number of buckets of the log₂ histograms.
pub const HISTOGRAM_BUCKETS: usize = 65;

/// A histogram published with atomics.
#[derive(Debug)]
pub struct AtomicHistogram([AtomicU64; HISTOGRAM_BUCKETS]);

impl Default for AtomicHistogram {
    fn default() -> Self {
        Self(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl AtomicHistogram {
    fn store(&self, histogram: &Log2Histogram) {
        for (slot, &count) in self.0.iter().zip(histogram.buckets.iter()) {
            slot.store(count, Relaxed);
        }
    }

    fn load(&self) -> Log2Histogram {
        let mut histogram = Log2Histogram::default();
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
    xsk_rx_dropped: AtomicU64,
    xsk_rx_ring_full: AtomicU64,
    xsk_fill_ring_empty: AtomicU64,
    xsk_invalid_descs: AtomicU64,
    arrival_depth: AtomicHistogram,
    lateness_ns: AtomicHistogram,
}

impl PortTelemetry {
    /// Publishes the receive counters (cumulative) of the port's owner.
    pub fn publish_rx(&self, packets: u64, bytes: u64) {
        self.rx_packets.store(packets, Relaxed);
        self.rx_bytes.store(bytes, Relaxed);
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
        self.arrival_depth.store(&stats.arrival_depth);
        self.lateness_ns.store(&stats.lateness_ns);
    }

    /// Publishes only the current queue depth (what other pipes' queue-aware balancers read).
    #[inline]
    pub fn publish_depth(&self, packets: u32, bytes: u32) {
        self.depth_packets.store(u64::from(packets), Relaxed);
        self.depth_bytes.store(u64::from(bytes), Relaxed);
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

    fn snapshot(&self, name: &str) -> PortSnapshot {
        let arrival_depth = self.arrival_depth.load();
        let lateness = self.lateness_ns.load();
        PortSnapshot {
            name: name.to_owned(),
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            enqueued_packets: self.enqueued_packets.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            drops_buffer: self.drops_buffer.load(Relaxed),
            drops_handoff: self.drops_handoff.load(Relaxed),
            ecn_marked: self.ecn_marked.load(Relaxed),
            socket_drops: SocketDrops {
                rx_dropped: self.xsk_rx_dropped.load(Relaxed),
                rx_ring_full: self.xsk_rx_ring_full.load(Relaxed),
                fill_ring_empty: self.xsk_fill_ring_empty.load(Relaxed),
                invalid_descs: self.xsk_invalid_descs.load(Relaxed),
            },
            depth_packets: self.depth_packets.load(Relaxed),
            depth_bytes: self.depth_bytes.load(Relaxed),
            max_depth_packets: self.max_depth_packets.load(Relaxed),
            max_depth_bytes: self.max_depth_bytes.load(Relaxed),
            depth_packet_ns: self.depth_packet_ns.load(Relaxed),
            depth_byte_ns: self.depth_byte_ns.load(Relaxed),
            integrated_until_ns: self.integrated_until_ns.load(Relaxed),
            arrival_depth_histogram: arrival_depth.buckets.to_vec(),
            lateness_p50_ns: lateness.quantile_upper_bound(0.50),
            lateness_p99_ns: lateness.quantile_upper_bound(0.99),
            lateness_p999_ns: lateness.quantile_upper_bound(0.999),
            max_lateness_ns: self.max_lateness_ns.load(Relaxed),
            lateness_histogram_ns: lateness.buckets.to_vec(),
        }
    }
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

/// Everything a switch publishes.
#[derive(Debug)]
pub struct SwitchTelemetry {
    port_names: Vec<String>,
    ports: Vec<PortTelemetry>,
    workers: Vec<CounterSet>,
    /// Bumped by a reset request; workers then clear their maxima and histograms.
    reset_epoch: AtomicU64,
}

impl SwitchTelemetry {
    /// Telemetry for these ports and `workers` workers whose counters have `counter_names`.
    pub fn new(
        port_names: Vec<String>,
        workers: usize,
        counter_names: &'static [&'static str],
    ) -> Self {
        Self {
            ports: port_names
                .iter()
                .map(|_| PortTelemetry::default())
                .collect(),
            port_names,
            workers: (0..workers)
                .map(|_| CounterSet::new(counter_names))
                .collect(),
            reset_epoch: AtomicU64::new(0),
        }
    }

    /// Port `index`'s telemetry.
    pub fn port(&self, index: usize) -> &PortTelemetry {
        &self.ports[index]
    }

    /// Worker `index`'s counters.
    pub fn worker(&self, index: usize) -> &CounterSet {
        &self.workers[index]
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
                .ports
                .iter()
                .zip(&self.port_names)
                .map(|(port, name)| port.snapshot(name))
                .collect(),
            counters,
        }
    }
}

/// One port, as published.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PortSnapshot {
    /// Interface name.
    pub name: String,
    /// Frames received on the port (handed to the data path).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames accepted into the egress queue.
    pub enqueued_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
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
    /// Log₂ histogram of the depth (frames) each arriving frame found.
    pub arrival_depth_histogram: Vec<u64>,
    /// Shaper lateness, median (upper bucket bound), ns.
    pub lateness_p50_ns: u64,
    /// Shaper lateness, 99th percentile, ns.
    pub lateness_p99_ns: u64,
    /// Shaper lateness, 99.9th percentile, ns.
    pub lateness_p999_ns: u64,
    /// Largest lateness since the last reset, ns.
    pub max_lateness_ns: u64,
    /// Log₂ histogram of shaper lateness, ns.
    pub lateness_histogram_ns: Vec<u64>,
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
}
