//! The dragonfly model: a collective on an [`ofan_topology::Dragonfly`] under one of the
//! routing schemes of [`ofan_dataplane::lb::dragonfly`], packet by packet.
//!
//! ## What is modelled
//! * Routers are output-queued and store-and-forward; every port has a FIFO of unlimited
//!   size, so nothing is dropped and no flow control runs: the longest queue is reported as
//!   what a buffer would have had to hold. Without credits there are no cyclic buffer
//!   dependencies, hence no deadlock and no need for virtual channels; the non-minimal route is
//!   carried in the packet as a [`PathTag`] (the intermediate group still to reach — the
//!   information a lossless network would encode in its VC class).
//! * The source router chooses the route once, when the packet arrives from its host, by
//!   [`DragonflyBalancer::choose`]; every later router follows the tag ([`next_hop`]).
//! * Hosts send their bytes back to back at line rate (no congestion control): a host's
//!   throughput is what the network lets through, and the collective's completion time (CCT)
//!   measures the routing's sustained throughput.
//! * The framework's notifications (`arf-ugal`): every `window`, each router holding a global
//!   link reports its queue to the routers of its group, which receive it `delay` later.
//! * All links have the same rate and propagation delay ([`LinkParams`]).
//!
//! ## Workloads
//! `uniform`: every packet goes to a host drawn uniformly among the others; `permutation`: a
//! seeded derangement of the hosts; `adversarial`: host `x` of group `G` sends to the host in
//! the same position of group `G + 1` — every group's traffic to the next group, the pattern
//! that puts all of a group's minimal traffic on one global link.
//!
//! Determinism: events are ordered by (time, insertion number), random draws come from
//! [`LbRng`] streams derived from the seed; the same configuration gives the same report.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::str::FromStr;

use ofan_dataplane::lb::dragonfly::{
    next_hop, Congestion, DragonflyBalancer, DragonflyScheme, PathTag,
};
use ofan_dataplane::lb::{mix64, LbRng};
use ofan_topology::dragonfly::{HostId, RouterId, RouterPort};
use ofan_topology::{Dragonfly, DragonflyShape, LinkParams};
use serde::{Deserialize, Serialize};

use crate::error::ModelError;
use crate::workload::permutation_destinations;

/// Default notification window of `arf-ugal` on a dragonfly, ps: 1 µs.
pub const DRAGONFLY_ARF_WINDOW_PS: u64 = 1_000_000;
/// Default notification delay of `arf-ugal` on a dragonfly, ps: 2 µs — an in-band message
/// across the group, not the fat-tree scenarios' 100 µs control plane (a whole 1 MiB
/// collective takes 11 µs at 800 Gb/s).
pub const DRAGONFLY_ARF_DELAY_PS: u64 = 2_000_000;

/// The traffic pattern of a dragonfly run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DragonflyWorkload {
    /// Every packet to a uniformly random other host.
    Uniform,
    /// A seeded derangement of the hosts.
    Permutation,
    /// Every host of group `G` to the host in the same position of group `G + 1`.
    Adversarial,
}

impl DragonflyWorkload {
    /// The name the CLI and the reports use.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Uniform => "uniform",
            Self::Permutation => "permutation",
            Self::Adversarial => "adversarial",
        }
    }
}

impl fmt::Display for DragonflyWorkload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DragonflyWorkload {
    type Err = ModelError;
    fn from_str(text: &str) -> Result<Self, ModelError> {
        [Self::Uniform, Self::Permutation, Self::Adversarial]
            .into_iter()
            .find(|w| w.name() == text)
            .ok_or(ModelError::InvalidConfig {
                field: "workload",
                value: text.to_owned(),
                reason: "a dragonfly runs uniform, permutation or adversarial",
            })
    }
}

/// Everything that shapes one dragonfly run.
#[derive(Debug, Clone, PartialEq)]
pub struct DragonflyConfig {
    /// p, a, h.
    pub shape: DragonflyShape,
    /// Every link's rate, delay and framing.
    pub link: LinkParams,
    /// The routing scheme.
    pub scheme: DragonflyScheme,
    /// The traffic pattern.
    pub workload: DragonflyWorkload,
    /// Bytes every host sends.
    pub message_bytes: u64,
    /// `arf-ugal`: how often a global link's router reports its queue, ps.
    pub arf_window_ps: u64,
    /// `arf-ugal`: how long a report takes to reach the routers of the group, ps.
    pub arf_delay_ps: u64,
    /// The run's seed.
    pub seed: u64,
}

impl DragonflyConfig {
    /// The small size of issue 45 (p = 2, a = 4, h = 2: 9 groups, 72 hosts), 800 Gb/s links,
    /// 1 MiB per host, minimal routing, the adversarial pattern.
    #[must_use]
    pub fn small() -> Self {
        Self {
            shape: DragonflyShape::new(2, 4, 2).expect("valid"),
            link: LinkParams::paper(),
            scheme: DragonflyScheme::Min,
            workload: DragonflyWorkload::Adversarial,
            message_bytes: 1 << 20,
            arf_window_ps: DRAGONFLY_ARF_WINDOW_PS,
            arf_delay_ps: DRAGONFLY_ARF_DELAY_PS,
            seed: 1,
        }
    }

    /// Checks the values the shape does not.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), ModelError> {
        let refuse = |field, value: u64, reason| {
            Err(ModelError::InvalidConfig {
                field,
                value: value.to_string(),
                reason,
            })
        };
        if self.message_bytes == 0 {
            return refuse("message_bytes", 0, "every host sends at least one byte");
        }
        if self.link.payload_bytes == 0 {
            return refuse("payload_bytes", 0, "packets need a payload");
        }
        if self.link.rate_bps == 0 {
            return refuse("rate_bps", 0, "links need a rate");
        }
        if self.scheme == DragonflyScheme::ArfUgal && self.arf_window_ps == 0 {
            return refuse("arf_window_ps", 0, "notifications need a window");
        }
        if self.workload == DragonflyWorkload::Permutation && self.shape.hosts() < 2 {
            return refuse(
                "workload",
                self.shape.hosts().into(),
                "a permutation needs two hosts",
            );
        }
        Ok(())
    }
}

/// What a dragonfly run measured (schema `ofan.dragonfly/1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DragonflyReport {
    /// `ofan.dragonfly/1`.
    pub schema: String,
    /// Hosts per router.
    pub p: u16,
    /// Routers per group.
    pub a: u16,
    /// Global links per router.
    pub h: u16,
    /// Groups.
    pub groups: u32,
    /// Hosts.
    pub hosts: u32,
    /// The scheme's name.
    pub scheme: String,
    /// The workload's name.
    pub workload: String,
    /// Bytes every host sent.
    pub message_bytes: u64,
    /// The seed.
    pub seed: u64,
    /// Collective completion time: the last packet's delivery, ps.
    pub cct_ps: u64,
    /// [`Dragonfly::collective_lower_bound_ps`] of the flows, ps.
    pub lower_bound_ps: u64,
    /// Delivered wire bytes per host per CCT, as a fraction of line rate.
    pub throughput: f64,
    /// Packets delivered.
    pub packets: u64,
    /// Of the packets between groups, the share routed minimally.
    pub minimal_share: f64,
    /// Mean router-to-router hops per packet.
    pub mean_hops: f64,
    /// Mean global hops per packet between groups.
    pub mean_global_hops: f64,
    /// Longest queue on a global port, bytes.
    pub max_global_queue_bytes: u64,
    /// Longest queue on a local (router-to-router, same group) port, bytes.
    pub max_local_queue_bytes: u64,
    /// Events processed.
    pub events: u64,
}

impl DragonflyReport {
    /// The schema tag.
    pub const SCHEMA: &'static str = "ofan.dragonfly/1";

    /// CCT over its lower bound.
    #[must_use]
    pub fn cct_increase(&self) -> f64 {
        self.cct_ps as f64 / self.lower_bound_ps.max(1) as f64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A port finished serializing its head packet.
    Sent { port: u32 },
    /// A packet arrives at a router from a link.
    Arrive { router: u32, packet: u32 },
    /// Global-link routers take a snapshot of their queues (`arf-ugal`).
    Snapshot,
    /// The oldest snapshot reaches the routers of each group.
    Notify,
}

#[derive(Debug, Clone, Copy)]
struct Packet {
    src: u32,
    dst: u32,
    wire: u32,
    tag: PathTag,
    decided: bool,
    hops: u8,
    global_hops: u8,
}

#[derive(Debug, Default)]
struct Port {
    queue: VecDeque<u32>,
    bytes: u64,
    max_bytes: u64,
}

/// What the deciding router sees.
struct View<'a> {
    ports: &'a [Port],
    radix: usize,
    router: RouterId,
    notified: &'a [u64],
}

impl Congestion for View<'_> {
    fn local(&self, port: RouterPort) -> u64 {
        self.anywhere(self.router, port)
    }
    fn notified(&self, channel: u32) -> u64 {
        self.notified.get(channel as usize).copied().unwrap_or(0)
    }
    fn anywhere(&self, router: RouterId, port: RouterPort) -> u64 {
        self.ports[router.index() * self.radix + port.index()].bytes
    }
}

struct Sim<'a> {
    config: &'a DragonflyConfig,
    dragonfly: Dragonfly,
    radix: usize,
    /// Router ports (`router · radix + port`), then one NIC port per host.
    ports: Vec<Port>,
    packets: Vec<Packet>,
    free: Vec<u32>,
    balancers: Vec<DragonflyBalancer>,
    router_rngs: Vec<LbRng>,
    host_rngs: Vec<LbRng>,
    /// Fixed destination per host (permutation, adversarial).
    destinations: Vec<u32>,
    remaining: Vec<u64>,
    events: BinaryHeap<Reverse<(u64, u64, Kind)>>,
    sequence: u64,
    /// `notified[group · (g − 1) + channel]`: the latest report each group received.
    notified: Vec<u64>,
    in_flight_snapshots: VecDeque<Vec<u64>>,
    undelivered: u64,
    // Measurements.
    last_delivery: u64,
    delivered_packets: u64,
    delivered_wire: u64,
    hops: u64,
    inter_group: u64,
    inter_minimal: u64,
    global_hops: u64,
    processed: u64,
}

/// Runs one collective on a dragonfly.
///
/// # Errors
/// [`ModelError::InvalidConfig`] for a configuration [`DragonflyConfig::validate`] refuses.
pub fn run_dragonfly(config: &DragonflyConfig) -> Result<DragonflyReport, ModelError> {
    config.validate()?;
    let dragonfly = Dragonfly::new(config.shape);
    let shape = config.shape;
    let (hosts, routers) = (shape.hosts(), shape.routers());
    let radix = usize::from(shape.radix());
    let destinations: Vec<u32> = match config.workload {
        DragonflyWorkload::Uniform => Vec::new(),
        DragonflyWorkload::Permutation => permutation_destinations(hosts, config.seed),
        DragonflyWorkload::Adversarial => {
            let per_group = u32::from(shape.a()) * u32::from(shape.p());
            (0..hosts).map(|x| (x + per_group) % hosts).collect()
        }
    };
    let mut seeds = LbRng::new(mix64(config.seed ^ 0x6472_6167_6f6e_666c));
    let mut router_rngs: Vec<LbRng> = (0..routers).map(|_| LbRng::new(seeds.next_u64())).collect();
    let balancers = (0..routers)
        .map(|r| {
            DragonflyBalancer::new(
                config.scheme,
                &dragonfly,
                RouterId(r),
                &mut router_rngs[r as usize],
            )
        })
        .collect();
    let host_rngs = (0..hosts).map(|_| LbRng::new(seeds.next_u64())).collect();
    let single_host = hosts < 2;
    let mut sim = Sim {
        config,
        radix,
        ports: (0..routers as usize * radix + hosts as usize)
            .map(|_| Port::default())
            .collect(),
        packets: Vec::new(),
        free: Vec::new(),
        balancers,
        router_rngs,
        host_rngs,
        destinations,
        remaining: vec![if single_host { 0 } else { config.message_bytes }; hosts as usize],
        events: BinaryHeap::new(),
        sequence: 0,
        notified: vec![0; (shape.groups() * (shape.groups() - 1)) as usize],
        in_flight_snapshots: VecDeque::new(),
        undelivered: 0,
        last_delivery: 0,
        delivered_packets: 0,
        delivered_wire: 0,
        hops: 0,
        inter_group: 0,
        inter_minimal: 0,
        global_hops: 0,
        processed: 0,
        dragonfly,
    };
    let flows = sim.flows();
    let lower_bound_ps = sim
        .dragonfly
        .collective_lower_bound_ps(&config.link, &flows);
    // Every host sends the same message (uniform draws a destination per packet).
    sim.undelivered = sim
        .remaining
        .iter()
        .map(|&bytes| bytes.div_ceil(u64::from(config.link.payload_bytes)))
        .sum();
    for host in 0..hosts {
        sim.send_next(0, host);
    }
    if config.scheme == DragonflyScheme::ArfUgal {
        sim.push(config.arf_window_ps, Kind::Snapshot);
    }
    while let Some(Reverse((time, _, kind))) = sim.events.pop() {
        sim.processed += 1;
        match kind {
            Kind::Sent { port } => sim.sent(time, port),
            Kind::Arrive { router, packet } => sim.arrive(time, router, packet),
            Kind::Snapshot => sim.snapshot(time),
            Kind::Notify => sim.notify(),
        }
    }
    debug_assert_eq!(sim.undelivered, 0, "every packet is delivered");
    let global_ports = |max: bool| {
        (0..routers as usize)
            .flat_map(|r| (0..radix).map(move |port| (r, port)))
            .filter(|&(r, port)| {
                let global = sim
                    .dragonfly
                    .channel_of_port(RouterId(r as u32), RouterPort(port as u16))
                    .is_some();
                port >= usize::from(shape.p()) && global == max
            })
            .map(|(r, port)| sim.ports[r * radix + port].max_bytes)
            .max()
            .unwrap_or(0)
    };
    let cct_ps = sim.last_delivery;
    let line = |ps: u64| ps as f64 * config.link.rate_bps as f64 / 8e12;
    Ok(DragonflyReport {
        schema: DragonflyReport::SCHEMA.into(),
        p: shape.p(),
        a: shape.a(),
        h: shape.h(),
        groups: shape.groups(),
        hosts,
        scheme: config.scheme.name().into(),
        workload: config.workload.name().into(),
        message_bytes: config.message_bytes,
        seed: config.seed,
        cct_ps,
        lower_bound_ps,
        throughput: sim.delivered_wire as f64 / f64::from(hosts) / line(cct_ps).max(1.0),
        packets: sim.delivered_packets,
        minimal_share: sim.inter_minimal as f64 / sim.inter_group.max(1) as f64,
        mean_hops: sim.hops as f64 / sim.delivered_packets.max(1) as f64,
        mean_global_hops: sim.global_hops as f64 / sim.inter_group.max(1) as f64,
        max_global_queue_bytes: global_ports(true),
        max_local_queue_bytes: global_ports(false),
        events: sim.processed,
    })
}

impl Sim<'_> {
    /// The flows of the collective, for the lower bound. Uniform: the expected matrix
    /// rounded to whole packets — packet `j` of host `x` to host `x + 1 + (j mod (N − 1))` —
    /// so that every host sends and receives its share in the packets it really sends.
    fn flows(&self) -> Vec<(HostId, HostId, u64)> {
        let hosts = self.config.shape.hosts();
        let bytes = self.config.message_bytes;
        if hosts < 2 {
            return Vec::new();
        }
        if !self.destinations.is_empty() {
            return self
                .destinations
                .iter()
                .enumerate()
                .map(|(src, &dst)| (HostId(src as u32), HostId(dst), bytes))
                .collect();
        }
        let payload = u64::from(self.config.link.payload_bytes);
        let packets = bytes.div_ceil(payload);
        let others = u64::from(hosts - 1);
        let short = packets * payload - bytes;
        let last_offset = (packets - 1) % others;
        let mut flows = Vec::new();
        for src in 0..hosts {
            for offset in 0..others.min(packets) {
                let count = packets / others + u64::from(offset < packets % others);
                let flow = count * payload - if offset == last_offset { short } else { 0 };
                let dst = (u64::from(src) + 1 + offset) % u64::from(hosts);
                flows.push((HostId(src), HostId(dst as u32), flow));
            }
        }
        flows
    }

    fn push(&mut self, time: u64, kind: Kind) {
        self.sequence += 1;
        self.events.push(Reverse((time, self.sequence, kind)));
    }

    fn nic_port(&self, host: u32) -> usize {
        self.config.shape.routers() as usize * self.radix + host as usize
    }

    /// The host puts its next packet on its link, if it has bytes left.
    fn send_next(&mut self, now: u64, host: u32) {
        let left = self.remaining[host as usize];
        if left == 0 {
            return;
        }
        let payload = left.min(u64::from(self.config.link.payload_bytes));
        self.remaining[host as usize] -= payload;
        let dst = if self.destinations.is_empty() {
            let hosts = self.config.shape.hosts();
            let draw = self.host_rngs[host as usize].below(hosts - 1);
            draw + u32::from(draw >= host)
        } else {
            self.destinations[host as usize]
        };
        let overhead = self.config.link.header_bytes + self.config.link.gap_bytes;
        let packet = Packet {
            src: host,
            dst,
            wire: payload as u32 + overhead,
            tag: PathTag::default(),
            decided: false,
            hops: 0,
            global_hops: 0,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.packets[id as usize] = packet;
                id
            }
            None => {
                self.packets.push(packet);
                (self.packets.len() - 1) as u32
            }
        };
        let port = self.nic_port(host);
        self.enqueue(now, port, id);
    }

    fn enqueue(&mut self, now: u64, port: usize, packet: u32) {
        let wire = u64::from(self.packets[packet as usize].wire);
        let state = &mut self.ports[port];
        state.queue.push_back(packet);
        state.bytes += wire;
        state.max_bytes = state.max_bytes.max(state.bytes);
        if state.queue.len() == 1 {
            let done = now + self.config.link.serialization_ps(wire);
            self.push(done, Kind::Sent { port: port as u32 });
        }
    }

    fn sent(&mut self, now: u64, port: u32) {
        let port = port as usize;
        let packet = self.ports[port]
            .queue
            .pop_front()
            .expect("a port sends its head");
        let wire = u64::from(self.packets[packet as usize].wire);
        self.ports[port].bytes -= wire;
        if let Some(&next) = self.ports[port].queue.front() {
            let next_wire = u64::from(self.packets[next as usize].wire);
            let done = now + self.config.link.serialization_ps(next_wire);
            self.push(done, Kind::Sent { port: port as u32 });
        }
        let arrival = now + self.config.link.propagation_ps;
        let routers = self.config.shape.routers() as usize;
        if port >= routers * self.radix {
            // A NIC: to its router; the host sends its next packet back to back.
            let host = (port - routers * self.radix) as u32;
            let router = self.dragonfly.router_of(HostId(host)).0;
            self.push(arrival, Kind::Arrive { router, packet });
            self.send_next(now, host);
            return;
        }
        let (router, index) = (RouterId((port / self.radix) as u32), port % self.radix);
        match self.dragonfly.far_end(router, RouterPort(index as u16)) {
            Some(end) => self.push(
                arrival,
                Kind::Arrive {
                    router: end.router.0,
                    packet,
                },
            ),
            None => self.deliver(arrival, packet),
        }
    }

    fn deliver(&mut self, time: u64, packet: u32) {
        let state = self.packets[packet as usize];
        self.last_delivery = self.last_delivery.max(time);
        self.delivered_packets += 1;
        self.delivered_wire += u64::from(state.wire);
        self.hops += u64::from(state.hops);
        let groups_differ = self.dragonfly.group_of_host(HostId(state.src))
            != self.dragonfly.group_of_host(HostId(state.dst));
        if groups_differ {
            self.inter_group += 1;
            self.inter_minimal += u64::from(state.global_hops == 1);
            self.global_hops += u64::from(state.global_hops);
        }
        self.undelivered -= 1;
        self.free.push(packet);
    }

    fn arrive(&mut self, now: u64, router: u32, packet: u32) {
        let router = RouterId(router);
        let mut state = self.packets[packet as usize];
        let dst_router = self.dragonfly.router_of(HostId(state.dst));
        if !state.decided {
            state.decided = true;
            let group = self.dragonfly.group_of(router).index();
            let channels = (self.config.shape.groups() - 1) as usize;
            let view = View {
                ports: &self.ports,
                radix: self.radix,
                router,
                notified: &self.notified[group * channels..(group + 1) * channels],
            };
            state.tag = self.balancers[router.index()].choose(
                &self.dragonfly,
                dst_router,
                u64::from(state.wire),
                &view,
                &mut self.router_rngs[router.index()],
            );
        }
        let port = match next_hop(&self.dragonfly, router, dst_router, &mut state.tag) {
            Some(port) => {
                state.hops += 1;
                if self.dragonfly.channel_of_port(router, port).is_some() {
                    state.global_hops += 1;
                }
                port
            }
            None => self.dragonfly.host_port(HostId(state.dst)),
        };
        self.packets[packet as usize] = state;
        self.enqueue(now, router.index() * self.radix + port.index(), packet);
    }

    /// Every global link's router reports its queue; the report arrives `delay` later.
    fn snapshot(&mut self, now: u64) {
        if self.undelivered == 0 {
            return;
        }
        let groups = self.config.shape.groups();
        let mut report = Vec::with_capacity(self.notified.len());
        for group in 0..groups {
            for channel in 0..groups - 1 {
                let end = self
                    .dragonfly
                    .channel_end(ofan_topology::dragonfly::GroupId(group), channel);
                report.push(self.ports[end.router.index() * self.radix + end.port.index()].bytes);
            }
        }
        self.in_flight_snapshots.push_back(report);
        self.push(now + self.config.arf_delay_ps, Kind::Notify);
        self.push(now + self.config.arf_window_ps, Kind::Snapshot);
    }

    fn notify(&mut self) {
        if let Some(report) = self.in_flight_snapshots.pop_front() {
            self.notified = report;
        }
    }
}
