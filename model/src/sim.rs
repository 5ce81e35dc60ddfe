//! The discrete-event loop: output-queued store-and-forward switches, paced hosts.
//!
//! # Time and queues
//! Time is integer picoseconds. Every output port is a FIFO served at line rate, and a frame
//! occupies the wire for the serialization time of its bytes plus the inter-frame gap. Because
//! a FIFO never reorders, a frame's departure is known the moment it is enqueued:
//! `start = max(now, port free)`, `finish = start + serialization`; it then arrives at the peer
//! (fully received, store-and-forward) at `finish + propagation`. So each hop costs one event
//! (the arrival), and the port keeps the finish times of its backlog to answer "how long is
//! this queue now" exactly (JSQ, AR, DRILL, drops, ECN, statistics) by discarding the frames
//! whose transmission ended. The time-averaged queue is exact too: each frame adds
//! `finish − enqueue time` to the port's queue-time area.
//!
//! Events are ordered by (time, sequence number of insertion), so ties resolve the same way in
//! every run.
//!
//! # Hosts
//! A host's NIC is an output port like any other, and its link carries the host's data and the
//! ACKs it sends (one per data frame received, at once). The pacer fixes when each data frame
//! leaves, taking the host's flows in round-robin order; `load` ρ means what it means for the
//! lab agent (`netns-lab/src/agent/pacing.rs`): data at ρ × the reference rate, and only the
//! ACK airtime that does not fit in the idle time this leaves pushes data back, so that at
//! ρ = 1 data and ACKs fill the link exactly and never overload it. Frame i + 1 is due
//! `gap_i` after frame i, with `paced = frame time / ρ`:
//!
//! * [`AckAirtime::Charged`] (the agent's rule): `gap_i = paced + max(0, A_i − (paced −
//!   frame time))`, where `A_i` is the airtime of the ACKs the host sent since frame i − 1
//!   left. The period follows the ACKs the host happens to send, and so does its phase.
//! * [`AckAirtime::Reserved`] (a rate limiter that leaves room for the ACKs):
//!   `gap_i = max(paced, frame time + a × ACK time)`, `a` = ACKs the host sends per data frame
//!   it sends, at most 1: data departures are strictly periodic.
//!
//! The NIC sends a data frame exactly when it is due: an ACK goes on the link at once only if
//! it ends by then, and otherwise waits for the room the pacer leaves after that frame (as in
//! the lab, where a host's ACKs never delay its paced data). Hosts start at t = 0
//! ([`StartPhase::Synchronous`]) or each at a seeded random time within one frame time of it
//! ([`StartPhase::Random`]), which keeps frames of different hosts from tying in time.
//!
//! # Loss recovery
//! Each host recovers the frames its flows lose with [`ofan_transport::SelectiveRepeat`], the
//! lab agent's own selective repeat (per-packet timers after RFC 6298, no NACK on gaps: packet
//! spraying reorders). Its timers are [`ModelConfig::recovery`] or, by default,
//! [`RecoveryConfig::for_round_trip`] of the full DATA frame's wire time at line rate and of
//! the longest round trip a packet can take without being lost (`default_recovery`): a timer
//! fires only once its packet can no longer be in a queue. At each paced departure the host
//! sends the oldest packet whose timer expired, else its next new packet; a retransmission
//! takes a paced slot like any data frame and, under spray, REPS and DRB, a fresh entropy or
//! waypoint. Once a host has sent every packet once, it arms a timer for its earliest deadline
//! (no earlier than its pacer allows); a timer that finds an expired packet sends it and
//! re-arms, one that finds none only re-arms, and one of a host with nothing outstanding is
//! dropped. Timer events are not counted in [`RunReport::events`] and only move the clock when
//! they act, so a run that loses nothing (and has no spurious timeout) is the same, event for
//! event, as without recovery. Receivers ACK every data frame they get, copies included, and
//! count distinct packets in a bitset; a flow is done at the first ACK of its last
//! unacknowledged packet.

use std::collections::VecDeque;

use ofan_dataplane::lb::{
    mix64, Algorithm, DestKey, LbConfig, LbRng, Northbound, PipeBalancer, PortLoad, PortMask,
    SizeClass, SwitchBalancer,
};
use ofan_topology::{
    switch_seed, BoundSystem, FailedLinks, Forwarding, NodeId, PortDirection, Role, SendRate,
    Topology, TopologyKind, TrafficMatrix,
};
use ofan_transport::{Ack, RecoveryConfig, SelectiveRepeat, ECHO_MASK};

use crate::config::{
    AckAirtime, BufferLimit, Failures, FlowSpec, ModelConfig, Pacing, Scheme, StartPhase, Workload,
};
use crate::error::ModelError;
use crate::queue::EventQueue;
use crate::report::{
    Details, Drops, EdgeUplinkInvariant, ModelRun, PacketCounts, QueueStats, RunReport, Stage,
    SCHEMA,
};
use crate::ring::Ring;
use crate::sys;
use crate::workload;

/// `via` of a packet that is not source-routed.
const NO_VIA: u16 = u16::MAX;
/// Salt of the per-host generators.
const HOST_SALT: u64 = 0x686f_7374;
/// Salt of the hosts' start phases.
const PHASE_SALT: u64 = 0x0070_6861_7365;
/// Salt of DRB pointer starts.
const DRB_SALT: u64 = 0x0064_7262;
/// How many events ahead [`Sim::prefetch_ahead`] prefetches the port line, the head frame and
/// the next hop's output port.
const PREFETCH_PORT: usize = 12;
const PREFETCH_FRAME: usize = 8;
const PREFETCH_NEXT_HOP: usize = 4;
/// How many events ahead [`Sim::prefetch_ahead`] prefetches the queue head and tail of the next
/// hop's output port (whose line it prefetched [`PREFETCH_NEXT_HOP`] events ahead).
const PREFETCH_NEXT_WIRE: usize = 2;
/// How many failure samples to draw before giving up on a connected one.
const FAILURE_ATTEMPTS: u32 = 1000;
/// Bit of a wake event's target that marks a host's retransmission timer (rather than its
/// pacer): host indices stay below it.
const TIMER_BIT: u32 = 1 << 30;
/// [`Host::timer_at`] when no timer is armed.
const NO_TIMER: u64 = u64::MAX;
/// Timeouts after which a host gives a packet up (its flow then never completes, `cct_ps` is
/// `None`): every run ends, even one whose packets can never get through (each timeout waits at
/// most `rto_max`).
const GIVE_UP_TIMEOUTS: u32 = 64;

/// Flag bits of [`Packet::seq_flags`].
const ACK_FLAG: u32 = 1 << 31;
const ECN_FLAG: u32 = 1 << 30;
/// The copy number of a data frame (its transmissions before it, modulo 128; echoed by its
/// ACK, as the lab agent's header does) in bits 23–29.
const COPY_SHIFT: u32 = 23;
/// Sequence numbers use the low 23 bits.
const SEQ_MASK: u32 = (1 << COPY_SHIFT) - 1;

/// A frame in flight: 16 bytes, `Copy`, stored inline in the ports' wire queues.
#[derive(Debug, Clone, Copy, Default)]
struct Packet {
    flow: u32,
    /// Sequence number (low 23 bits), copy number ([`COPY_SHIFT`]), [`ACK_FLAG`],
    /// [`ECN_FLAG`] (CE mark; echoed by ACKs).
    seq_flags: u32,
    /// Frame bytes (header + payload, or the ACK), without the inter-frame gap.
    frame: u32,
    /// Host-chosen entropy (spray, reps; echoed by ACKs), 0 otherwise.
    entropy: u16,
    /// DRB source route: low byte = edge up-port position, high byte = aggregation up-port
    /// position; [`NO_VIA`] when the switches decide.
    via: u16,
}

impl Packet {
    #[inline]
    const fn is_ack(&self) -> bool {
        self.seq_flags & ACK_FLAG != 0
    }

    #[inline]
    const fn ecn(&self) -> bool {
        self.seq_flags & ECN_FLAG != 0
    }

    #[inline]
    const fn seq(&self) -> u32 {
        self.seq_flags & SEQ_MASK
    }

    #[inline]
    const fn copy(&self) -> u32 {
        (self.seq_flags >> COPY_SHIFT) & ECHO_MASK
    }
}

/// A frame in an output port: queued, being transmitted, or propagating; it reaches the peer at
/// `arrival` and finished transmission at `arrival − propagation`.
#[derive(Debug, Clone, Copy, Default)]
struct Flight {
    arrival: u64,
    packet: Packet,
}

/// The state of an output port that every event touches: one cache line.
#[derive(Debug)]
#[repr(align(64))]
struct Port {
    /// Every frame enqueued and not yet arrived at the peer, in order; the first `sent` have
    /// finished transmission, the rest form the queue.
    wire: Ring<Flight>,
    sent: u32,
    /// Data frames in the queue.
    data: u32,
    /// Bytes in the queue.
    bytes: u64,
    /// When the last enqueued frame finishes transmission.
    free_at: u64,
    /// When the first frame of the queue (`wire[sent]`) finishes transmission, while the queue
    /// is not empty: [`Port::purge`] reads the wire only once that time has passed.
    head_finish: u64,
    peer: u32,
    peer_port: u16,
    stage: Stage,
}

const _: () = assert!(
    std::mem::size_of::<Port>() == 64,
    "a port is one cache line"
);

/// What the output ports of one stage measure. The report only needs maxima and sums over a
/// stage, so they are accumulated per stage (six entries that stay in cache) rather than per
/// port; only the frames carried are kept per port (the busiest link, utilization).
#[derive(Debug, Default, Clone, Copy)]
struct StageStats {
    max_packets: u32,
    max_data: u32,
    max_bytes: u64,
    area_packets: u128,
    area_bytes: u128,
}

impl Port {
    /// Moves the frames whose transmission ended by `now` out of the queue.
    #[inline]
    fn purge(&mut self, now: u64, propagation: u64) {
        // The last enqueued frame finishes at `free_at` and the first at `head_finish`, so
        // unless some but not all of the queue has finished, the answer needs no look at the
        // wire (which is rarely in cache).
        if self.free_at <= now {
            self.sent = self.wire.len();
            self.bytes = 0;
            self.data = 0;
            return;
        }
        // The last frame has not finished, so it follows every finished one in the queue.
        while self.head_finish <= now {
            let Some(finished) = self.wire.get(self.sent) else {
                break;
            };
            self.bytes -= u64::from(finished.packet.frame);
            self.data -= u32::from(!finished.packet.is_ack());
            self.sent += 1;
            let Some(head) = self.wire.get(self.sent) else {
                break;
            };
            self.head_finish = head.arrival - propagation;
        }
    }

    /// Frames in the queue (after [`Port::purge`]).
    #[inline]
    fn queued(&self) -> u32 {
        self.wire.len() - self.sent
    }
}

#[derive(Debug, Clone, Copy)]
struct NodeInfo {
    role: Role,
    pod: u16,
    port_base: u32,
    /// Port index of the first up-port.
    up_first: u16,
    up_count: u8,
    /// First pipe balancer of the switch in `Sim::balancers`.
    lb_base: u32,
    /// First valid mask of the switch in `Sim::masks`.
    mask_base: u32,
}

/// Where a host is attached, as the switches route to it: 16 bytes, kept apart from [`Host`]
/// so that the routing table of all hosts stays in cache.
#[derive(Debug, Clone, Copy)]
struct Place {
    edge: u32,
    edge_number: u32,
    edge_in_pod: u16,
    slot: u16,
    pod: u16,
}

#[derive(Debug)]
struct Host {
    /// Flows with data left to send, in round-robin order.
    active: Vec<u32>,
    cursor: usize,
    rng: LbRng,
    /// When the pacer lets the next data frame leave, ps; the NIC is free then (ACKs only
    /// take room that ends by it).
    due: u64,
    /// [`AckAirtime::Charged`]: airtime of the ACKs given to the NIC since the last data
    /// departure, ps.
    ack_airtime: u64,
    /// [`AckAirtime::Reserved`]: ACK airtime reserved after every data frame, ps.
    reserved: u64,
    /// ACKs that would have delayed the next data frame, oldest first: they leave in the room
    /// the pacer leaves after it.
    held_acks: VecDeque<Packet>,
    /// Loss recovery over the host's flows, by local index ([`Flow::local`]).
    recovery: SelectiveRepeat,
    /// The host's flows by local index.
    flows: Vec<u32>,
    /// When the armed retransmission timer fires ([`NO_TIMER`]: none); timer events at any
    /// other time are stale.
    timer_at: u64,
}

#[derive(Debug)]
struct Flow {
    src: u32,
    dst: u32,
    packets: u32,
    last_frame: u32,
    next_seq: u32,
    /// Distinct data packets received.
    received: u32,
    /// First bit of the flow's packets in [`Sim::delivered`].
    delivered_base: usize,
    /// Packets acknowledged (first ACK of each).
    acked: u32,
    /// Index of the flow among its source host's flows.
    local: u32,
    drb_data: u64,
    drb_ack: u64,
    done_at: Option<u64>,
    /// REPS: entropies whose ACKs came back unmarked, oldest first.
    recycled: VecDeque<u16>,
}

struct Sim<'a> {
    topology: &'a Topology,
    config: &'a ModelConfig,
    scheme: Scheme,
    uses_queues: bool,
    fat_tree: bool,
    w: u8,
    nodes: Vec<NodeInfo>,
    ports: Vec<Port>,
    /// Per [`Stage`] (by discriminant).
    stage_stats: [StageStats; Stage::ALL.len()],
    /// Per port: frame bytes and frames carried.
    carried: Vec<[u64; 2]>,
    /// Per port: its link id.
    port_links: Vec<u32>,
    hosts: Vec<Host>,
    places: Vec<Place>,
    flows: Vec<Flow>,
    /// Per flow: (source, destination) host, so that forwarding reads 8 bytes per frame.
    flow_ends: Vec<[u32; 2]>,
    balancers: Vec<PipeBalancer>,
    /// Valid up-port masks per (switch, key) under failures; empty without failures.
    masks: Vec<u64>,
    /// Per link id: failed.
    dead: Vec<bool>,
    failed: bool,
    queue: EventQueue,
    data_frame: u32,
    ack_frame: u32,
    ser_data: u64,
    ser_ack: u64,
    rate_ppm: u64,
    propagation: u64,
    buffer: u64,
    ecn: u64,
    pipe_ports: u16,
    counts: PacketCounts,
    /// Frames dropped at a full switch buffer.
    drops_buffer: u64,
    /// Frames dropped because no up-port was valid.
    drops_no_route: u64,
    edge_bound: u32,
    edge_violations: u64,
    edge_max_data: u32,
    /// Per host: first and last data arrival (first = `u64::MAX` before any).
    deliveries: Vec<(u64, u64)>,
    /// One bit per data packet of every flow: received at least once.
    delivered: Vec<u64>,
    delivered_wire_bytes: u64,
    events: u64,
    now: u64,
}

/// Runs one configuration to completion.
///
/// # Errors
/// As [`ModelConfig::validate`], plus topology, workload, failure and load-balancer setup
/// errors.
pub fn run(config: &ModelConfig) -> Result<RunReport, ModelError> {
    config.validate()?;
    let topology = Topology::new(config.topology)?;
    run_on(&topology, config)
}

/// Runs one configuration on an already built topology (which must be `config.topology`).
///
/// # Errors
/// As [`run`].
pub fn run_on(topology: &Topology, config: &ModelConfig) -> Result<RunReport, ModelError> {
    config.validate()?;
    let specs = workload::flows(
        topology,
        &config.workload,
        config.message_bytes,
        config.seed,
    )?;
    let matrix = host_weighted_matrix(topology, &specs);
    let (failures, rho_max) = choose_failures(topology, config, &matrix)?;
    let rho_max = match (config.pacing, rho_max) {
        (_, Some(rho)) => Some(rho),
        (Pacing::RhoMax, None) => Some(topology.rho_max(&failures, &matrix)?),
        (Pacing::Offered, None) => None,
    };
    let send_rate = match config.pacing {
        Pacing::Offered => config.load,
        Pacing::RhoMax => config.load * rho_max.unwrap_or(1.0),
    };
    let mut sim = Sim::new(topology, config, &failures, &specs, send_rate)?;
    sim.start();
    sim.run_loop();
    Ok(sim.report(&failures, &specs, send_rate, rho_max))
}

/// [`AckAirtime::Reserved`]: every sending host reserves, after each data frame, the airtime of
/// the ACKs it will send per data frame it sends — at most one ACK: a host receives at most
/// one frame per frame time, so while it sends, about one ACK falls into each of its slots
/// however much it receives in all (ACKs beyond the room wait for the next slot).
fn reserve_ack_airtime(hosts: &mut [Host], flows: &[Flow], ack_wire_ps: u64) {
    let mut counts = vec![(0u64, 0u64); hosts.len()];
    for flow in flows {
        counts[flow.src as usize].0 += u64::from(flow.packets);
        counts[flow.dst as usize].1 += u64::from(flow.packets);
    }
    for (host, (sent, acked)) in hosts.iter_mut().zip(counts) {
        if sent > 0 {
            host.reserved = (ack_wire_ps * acked.min(sent)).div_ceil(sent);
        }
    }
}

/// The hosts' retransmission timers when the configuration sets none: scaled to the full DATA
/// frame's wire time, plus the longest round trip a packet can take without being lost
/// ([`RecoveryConfig::for_round_trip`]), so that a run that loses nothing never retransmits.
/// The longest path crosses 6 links in a fat tree and 4 in a leaf-spine; on each, a frame (DATA
/// one way, its ACK back) waits at most for a full queue ahead of it, then its own wire time
/// and the propagation. A full queue is `buffer_bytes` when buffers drop, and under
/// [`BufferLimit::Unlimited`] (nothing is lost to buffers then) every DATA and ACK frame of the
/// workload — a bound no queue can pass. The hosts add at most a few frame times (a paced
/// departure, an ACK held for the room after the receiver's next data frame), which the 16
/// frame times of [`RecoveryConfig::for_frame_time`]'s `rto_min` cover.
fn default_recovery(
    config: &ModelConfig,
    fat_tree: bool,
    flows: &[Flow],
    data_wire_ps: u64,
) -> RecoveryConfig {
    let link = &config.link;
    let path_links: u64 = if fat_tree { 6 } else { 4 };
    let wire = |bytes: u64| link.serialization_ps(bytes + u64::from(link.gap_bytes));
    let queue_bytes = match config.buffer_limit {
        BufferLimit::Enforced => config.buffer_bytes,
        BufferLimit::Unlimited => {
            let frame = u64::from(link.payload_bytes + link.header_bytes + link.ack_bytes);
            let packets: u64 = flows.iter().map(|flow| u64::from(flow.packets)).sum();
            packets.saturating_mul(frame)
        }
    };
    let max_round_trip = RecoveryConfig::max_round_trip(
        path_links,
        link.serialization_ps(queue_bytes),
        data_wire_ps,
        wire(u64::from(link.ack_bytes)),
        link.propagation_ps,
    );
    RecoveryConfig::for_round_trip(data_wire_ps, max_round_trip)
}

/// Flows weighted so that every source host's flows sum to its line rate: ρ_max is then the
/// fraction of line rate a host can send at.
fn host_weighted_matrix(topology: &Topology, specs: &[FlowSpec]) -> TrafficMatrix {
    let mut per_host = vec![0u32; topology.hosts().len()];
    for spec in specs {
        per_host[spec.src as usize] += 1;
    }
    let mut matrix = TrafficMatrix::new();
    for spec in specs {
        matrix.push(
            NodeId(spec.src),
            NodeId(spec.dst),
            1.0 / f64::from(per_host[spec.src as usize]),
        );
    }
    matrix
}

fn choose_failures(
    topology: &Topology,
    config: &ModelConfig,
    matrix: &TrafficMatrix,
) -> Result<(FailedLinks, Option<f64>), ModelError> {
    match &config.failures {
        Failures::None => Ok((FailedLinks::new(), None)),
        Failures::Links { links } => {
            let failures = workload::explicit_failures(topology, links)?;
            let rho = topology.rho_max(&failures, matrix)?;
            Ok((failures, Some(rho)))
        }
        Failures::Random { probability } => {
            for attempt in 0..FAILURE_ATTEMPTS {
                let failures =
                    workload::sample_failures(topology, *probability, config.seed, attempt);
                match topology.rho_max(&failures, matrix) {
                    Ok(rho) => return Ok((failures, Some(rho))),
                    Err(ofan_topology::TopologyError::NoValidPath { .. }) => continue,
                    Err(other) => return Err(other.into()),
                }
            }
            Err(ModelError::Disconnected {
                probability: *probability,
                attempts: FAILURE_ATTEMPTS,
            })
        }
    }
}

impl<'a> Sim<'a> {
    fn new(
        topology: &'a Topology,
        config: &'a ModelConfig,
        failures: &FailedLinks,
        specs: &[FlowSpec],
        send_rate: f64,
    ) -> Result<Self, ModelError> {
        let k = topology.k();
        let w = u8::try_from(k / 2).expect("k <= 64");
        let fat_tree = matches!(topology.kind(), TopologyKind::FatTree { .. });
        let scheme = config.scheme;
        let algorithm = scheme.switch_algorithm();
        let pipes = k.div_ceil(config.pipe_ports);
        let first_edge = topology.edges()[0].id.0;

        let mut nodes = Vec::with_capacity(topology.nodes().len());
        let mut ports = Vec::new();
        let mut port_links = Vec::new();
        let mut balancers = Vec::new();
        let mut masks = Vec::new();
        for node in topology.nodes() {
            let up_first = node
                .ports
                .iter()
                .position(|port| port.direction == PortDirection::Up)
                .unwrap_or(node.ports.len());
            let balances = matches!(node.role, Role::Edge | Role::Aggregation);
            let lb_base = balancers.len() as u32;
            let mask_base = masks.len() as u32;
            if balances {
                let up_count = (node.ports.len() - up_first) as u8;
                let dest_keys = topology.dest_key_count(node.id);
                let lb = SwitchBalancer::new(LbConfig {
                    algorithm,
                    up_ports: up_count,
                    dest_keys,
                    pipes,
                    buffer_bytes: u32::try_from(config.buffer_bytes).unwrap_or(u32::MAX),
                    // As the lab's switches derive theirs: from the run seed and the name.
                    seed: switch_seed(config.seed, &node.name),
                })?;
                for pipe in 0..pipes {
                    balancers.push(lb.pipe(pipe)?);
                }
                if !failures.is_empty() {
                    for key in 0..dest_keys {
                        masks.push(topology.valid_up_mask(failures, node.id, DestKey(key)));
                    }
                }
            }
            nodes.push(NodeInfo {
                role: node.role,
                pod: node.pod.unwrap_or(0),
                port_base: ports.len() as u32,
                up_first: up_first as u16,
                up_count: (node.ports.len() - up_first) as u8,
                lb_base,
                mask_base,
            });
            for port in &node.ports {
                let stage = match (node.role, port.direction) {
                    (Role::Host, _) => Stage::HostUp,
                    (Role::Edge, PortDirection::Up) => Stage::EdgeUp,
                    (Role::Edge, PortDirection::Down) => Stage::EdgeDown,
                    (Role::Aggregation, PortDirection::Up) => Stage::AggUp,
                    (Role::Aggregation, PortDirection::Down) => Stage::AggDown,
                    (Role::Core, _) => Stage::CoreDown,
                };
                ports.push(Port {
                    wire: Ring::new(),
                    sent: 0,
                    data: 0,
                    bytes: 0,
                    free_at: 0,
                    head_finish: 0,
                    peer: port.peer.0,
                    peer_port: port.peer_port.0,
                    stage,
                });
                port_links.push(port.link.0);
            }
        }

        let places: Vec<Place> = topology
            .hosts()
            .iter()
            .map(|node| {
                let edge = topology.host_edge(node.id);
                let edge_node = topology.node(edge);
                Place {
                    edge: edge.0,
                    edge_number: edge.0 - first_edge,
                    edge_in_pod: edge_node.index,
                    slot: node.ports[0].peer_port.0,
                    pod: node.pod.unwrap_or(0),
                }
            })
            .collect();
        let mut hosts: Vec<Host> = topology
            .hosts()
            .iter()
            .map(|node| Host {
                active: Vec::new(),
                cursor: 0,
                rng: LbRng::new(mix64(config.seed ^ mix64(HOST_SALT ^ u64::from(node.id.0)))),
                due: 0,
                ack_airtime: 0,
                reserved: 0,
                held_acks: VecDeque::new(),
                // Replaced once the host's flows are known.
                recovery: SelectiveRepeat::new(RecoveryConfig::for_frame_time(1), &[]),
                flows: Vec::new(),
                timer_at: NO_TIMER,
            })
            .collect();

        let payload = u64::from(config.link.payload_bytes);
        let header = config.link.header_bytes;
        let data_frame = config.link.payload_bytes + header;
        let mut flows = Vec::with_capacity(specs.len());
        let mut delivered_bits = 0usize;
        for (index, spec) in specs.iter().enumerate() {
            let packets = spec.bytes.div_ceil(payload);
            let packets = u32::try_from(packets)
                .ok()
                .filter(|&packets| packets <= SEQ_MASK)
                .ok_or_else(|| ModelError::InvalidConfig {
                    field: "message_bytes",
                    value: spec.bytes.to_string(),
                    reason: "a flow holds at most 2^23 packets",
                })?;
            let last_payload = spec.bytes - (u64::from(packets) - 1) * payload;
            let start =
                |class: u64| mix64(config.seed ^ mix64(DRB_SALT ^ (index as u64) << 1 ^ class));
            flows.push(Flow {
                src: spec.src,
                dst: spec.dst,
                packets,
                last_frame: last_payload as u32 + header,
                next_seq: 0,
                received: 0,
                delivered_base: delivered_bits,
                acked: 0,
                local: hosts[spec.src as usize].flows.len() as u32,
                drb_data: start(0),
                drb_ack: start(1),
                done_at: None,
                recycled: VecDeque::new(),
            });
            delivered_bits += packets as usize;
            hosts[spec.src as usize].active.push(index as u32);
            hosts[spec.src as usize].flows.push(index as u32);
        }

        let mut dead = vec![false; topology.links().len()];
        for link in failures.iter() {
            dead[link.index()] = true;
        }
        let rate_ppm = u64::from(SendRate::nearest(send_rate).ppm());
        let wire = |frame: u32| {
            config
                .link
                .serialization_ps(u64::from(frame) + u64::from(config.link.gap_bytes))
        };
        if config.ack_airtime == AckAirtime::Reserved {
            reserve_ack_airtime(&mut hosts, &flows, wire(config.link.ack_bytes));
        }
        let recovery = config
            .recovery
            .unwrap_or_else(|| default_recovery(config, fat_tree, &flows, wire(data_frame)));
        for host in &mut hosts {
            let packets: Vec<u32> = host
                .flows
                .iter()
                .map(|&flow| flows[flow as usize].packets)
                .collect();
            host.recovery =
                SelectiveRepeat::new(recovery, &packets).give_up_after(GIVE_UP_TIMEOUTS);
        }
        let host_count = hosts.len();
        let flow_ends = flows.iter().map(|flow| [flow.src, flow.dst]).collect();
        let carried = vec![[0; 2]; ports.len()];
        Ok(Self {
            topology,
            config,
            scheme,
            uses_queues: algorithm.uses_queues(),
            fat_tree,
            w,
            nodes,
            ports,
            stage_stats: [StageStats::default(); Stage::ALL.len()],
            carried,
            port_links,
            hosts,
            places,
            flows,
            flow_ends,
            balancers,
            masks,
            dead,
            failed: !failures.is_empty(),
            queue: EventQueue::new(),
            data_frame,
            ack_frame: config.link.ack_bytes,
            ser_data: wire(data_frame),
            ser_ack: wire(config.link.ack_bytes),
            rate_ppm,
            propagation: config.link.propagation_ps,
            buffer: match config.buffer_limit {
                BufferLimit::Enforced => config.buffer_bytes,
                BufferLimit::Unlimited => u64::MAX,
            },
            ecn: config.ecn_threshold_bytes,
            pipe_ports: config.pipe_ports,
            counts: PacketCounts::default(),
            drops_buffer: 0,
            drops_no_route: 0,
            edge_bound: u32::from(w) + 1,
            edge_violations: 0,
            edge_max_data: 0,
            deliveries: vec![(u64::MAX, 0); host_count],
            delivered: vec![0; delivered_bits.div_ceil(64)],
            delivered_wire_bytes: 0,
            events: 0,
            now: 0,
        })
    }

    #[inline]
    fn push(&mut self, time: u64, target: u32, wake: bool) {
        self.queue.push(time, target, wake);
    }

    fn start(&mut self) {
        // Collectives are synchronous (paper §2.1): every host starts at t = 0, or within one
        // data frame time of it.
        for host in 0..self.hosts.len() as u32 {
            if self.hosts[host as usize].active.is_empty() {
                continue;
            }
            let phase = match self.config.start_phase {
                StartPhase::Synchronous => 0,
                StartPhase::Random => {
                    mix64(self.config.seed ^ mix64(PHASE_SALT ^ u64::from(host))) % self.ser_data
                }
            };
            self.hosts[host as usize].due = phase;
            self.push(phase, host, true);
        }
    }

    fn run_loop(&mut self) {
        while let Some(event) = self.queue.pop() {
            if event.wake && event.target & TIMER_BIT != 0 {
                self.timer(event.target & !TIMER_BIT, event.time);
                continue;
            }
            self.now = event.time;
            self.events += 1;
            self.prefetch_ahead();
            if event.wake {
                self.wake(event.target);
                continue;
            }
            let port = &mut self.ports[event.target as usize];
            let flight = port.wire.pop_front().expect("a wire event has a frame");
            debug_assert_eq!(flight.arrival, event.time);
            let next = port.wire.front().map(|next| next.arrival);
            if port.sent > 0 {
                port.sent -= 1;
            } else {
                // Not purged yet: it leaves the queue now, and the next frame heads it.
                port.bytes -= u64::from(flight.packet.frame);
                port.data -= u32::from(!flight.packet.is_ack());
                if let Some(next) = next {
                    port.head_finish = next - self.propagation;
                }
            }
            let packet = flight.packet;
            let (node, in_port) = (port.peer, port.peer_port);
            if let Some(next) = next {
                self.push(next, event.target, false);
            }
            if self.nodes[node as usize].role == Role::Host {
                self.receive(node, packet);
            } else {
                self.forward(node, in_port, packet);
            }
        }
    }

    /// Prefetches what the events a few places ahead will touch, in three stages, so that their
    /// cache misses overlap with the work on this one: the port line of the event
    /// [`PREFETCH_PORT`] places ahead, the head frame of the one [`PREFETCH_FRAME`] ahead (its
    /// port line is cached by now), and the output port that the one [`PREFETCH_NEXT_HOP`]
    /// ahead will enqueue on when that is known without a balancer decision (its frame is
    /// cached by now). Only events due at the current picosecond are looked at: those are final.
    // Always inlined: it runs for every event; once the hosts recovered losses the compiler
    // moved it out of line, which cost 4 % more instructions (cachegrind, k = 12).
    #[inline(always)]
    fn prefetch_ahead(&self) {
        if let Some(ahead) = self.queue.peek_due(PREFETCH_PORT) {
            if !ahead.wake {
                sys::prefetch(&self.ports[ahead.target as usize]);
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_FRAME) {
            if !ahead.wake {
                // The head frame and the next one, whose arrival is scheduled when the head
                // arrives (24-byte entries: often on the next line).
                let wire = &self.ports[ahead.target as usize].wire;
                if let Some(flight) = wire.front() {
                    sys::prefetch(flight);
                }
                if let Some(flight) = wire.get(1) {
                    sys::prefetch(flight);
                }
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_NEXT_HOP) {
            if !ahead.wake {
                let port = &self.ports[ahead.target as usize];
                if let Some(flight) = port.wire.front() {
                    for out in self.next_hop_ports(port.peer, &flight.packet) {
                        sys::prefetch(&self.ports[out]);
                    }
                    self.prefetch_balancer(port.peer, port.peer_port, &flight.packet);
                }
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_NEXT_WIRE) {
            if !ahead.wake {
                let port = &self.ports[ahead.target as usize];
                if let Some(flight) = port.wire.front() {
                    for out in self.next_hop_ports(port.peer, &flight.packet) {
                        // The queue head, which the purge reads, and the slot the frame goes to.
                        let wire = &self.ports[out].wire;
                        if let Some(head) = wire.get(self.ports[out].sent) {
                            sys::prefetch(head);
                        }
                        sys::prefetch(wire.next_slot());
                    }
                }
            }
        }
    }

    /// Prefetches the balancer state that switch `node` will read to send `packet`, received
    /// on `in_port`, up (nothing when it goes down or is source-routed).
    #[inline]
    fn prefetch_balancer(&self, node: u32, in_port: u16, packet: &Packet) {
        let info = &self.nodes[node as usize];
        if info.role == Role::Host || packet.via != NO_VIA {
            return;
        }
        let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
        let target = &self.places[dst as usize];
        if self.down_port(info, node, target).is_some() {
            return;
        }
        let key = if info.role == Role::Edge {
            target.edge_number
        } else {
            u32::from(target.pod)
        };
        let pipe = in_port / self.pipe_ports;
        let balancer = &self.balancers[(info.lb_base + u32::from(pipe)) as usize];
        for address in balancer.hot_addresses(DestKey(key), Self::size_class(packet)) {
            sys::prefetch(address);
        }
    }

    /// The size class a balancer sees for `packet`.
    #[inline]
    fn size_class(packet: &Packet) -> SizeClass {
        if packet.is_ack() {
            SizeClass::Ack
        } else {
            SizeClass::of_frame(packet.frame, SizeClass::DEFAULT_ACK_MAX_FRAME)
        }
    }

    /// The output ports that `node` may put `packet` on when it receives it: the one port when
    /// it follows from the destination, every up-port when a balancer decides.
    #[inline(always)]
    fn next_hop_ports(&self, node: u32, packet: &Packet) -> std::ops::Range<usize> {
        let info = &self.nodes[node as usize];
        let (first, count) = if info.role == Role::Host {
            (0, u16::from(!packet.is_ack()))
        } else {
            let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
            match self.down_port(info, node, &self.places[dst as usize]) {
                Some(out) => (out, 1),
                None => (info.up_first, u16::from(info.up_count)),
            }
        };
        let first = (info.port_base + u32::from(first)) as usize;
        first..first + usize::from(count)
    }

    #[inline]
    fn serialization(&self, frame: u32) -> u64 {
        if frame == self.data_frame {
            self.ser_data
        } else if frame == self.ack_frame {
            self.ser_ack
        } else {
            self.config
                .link
                .serialization_ps(u64::from(frame) + u64::from(self.config.link.gap_bytes))
        }
    }

    /// Time that data of `serialization` takes at the paced rate.
    #[inline]
    fn paced(&self, serialization: u64) -> u64 {
        if self.rate_ppm == 1_000_000 {
            serialization
        } else {
            (u128::from(serialization) * 1_000_000).div_ceil(u128::from(self.rate_ppm)) as u64
        }
    }

    /// The pacer of `host` after a data frame of `serialization` left: how much later than
    /// that frame the next one is due (see the module documentation, "Hosts").
    fn pacing_gap(&mut self, host: u32, serialization: u64) -> u64 {
        let paced = self.paced(serialization);
        let state = &mut self.hosts[host as usize];
        match self.config.ack_airtime {
            AckAirtime::Charged => {
                // The ACKs sent since the previous departure, less the idle time pacing leaves.
                let charge = state.ack_airtime.saturating_sub(paced - serialization);
                state.ack_airtime = 0;
                paced + charge
            }
            AckAirtime::Reserved => paced.max(serialization + state.reserved),
        }
    }

    /// A host's pacer fires: inject the next data frame — the oldest packet whose timer
    /// expired, else the next new one (the NIC is idle: ACKs only take room that ends by the
    /// due time; the check is a safety net).
    fn wake(&mut self, host: u32) {
        let now = self.now;
        let nic = self.nodes[host as usize].port_base as usize;
        let free_at = self.ports[nic].free_at;
        if free_at > now {
            self.push(free_at, host, true);
            return;
        }
        let state = &mut self.hosts[host as usize];
        if state.active.is_empty() && now < state.due {
            // A retry for the NIC that comes before the pacer allows: the timer decides.
            self.arm_timer(host);
            return;
        }
        let (flow_id, seq) = if let Some((local, seq)) = state.recovery.next_lost(now) {
            (state.flows[local as usize], seq)
        } else if !state.active.is_empty() {
            if state.cursor >= state.active.len() {
                state.cursor = 0;
            }
            let flow_id = state.active[state.cursor];
            let flow = &mut self.flows[flow_id as usize];
            let seq = flow.next_seq;
            flow.next_seq += 1;
            if flow.next_seq == flow.packets {
                state.active.remove(state.cursor);
            } else {
                state.cursor += 1;
            }
            (flow_id, seq)
        } else {
            // A pacer retry for a retransmission whose packet was ACKed meanwhile.
            self.arm_timer(host);
            return;
        };
        let flow = &mut self.flows[flow_id as usize];
        let frame = if seq + 1 == flow.packets {
            flow.last_frame
        } else {
            self.data_frame
        };
        let (entropy, drb) = match self.scheme {
            Scheme::Switch(_) => (0, None),
            Scheme::Spray => (state.rng.next_u64() as u16, None),
            Scheme::Reps => {
                let fresh = &mut state.rng;
                (
                    flow.recycled
                        .pop_front()
                        .unwrap_or_else(|| fresh.next_u64() as u16),
                    None,
                )
            }
            Scheme::Drb => {
                let n = flow.drb_data;
                flow.drb_data = n.wrapping_add(1);
                (0, Some((flow.src, flow.dst, n)))
            }
        };
        let copy = state.recovery.transmissions(flow.local, seq) & ECHO_MASK;
        state.recovery.on_send(flow.local, seq, now);
        let via = drb.map_or(NO_VIA, |(src, dst, n)| self.drb_waypoint(src, dst, n));
        let more = !self.hosts[host as usize].active.is_empty();
        self.counts.data_sent += 1;
        let packet = Packet {
            flow: flow_id,
            seq_flags: seq | copy << COPY_SHIFT,
            frame,
            entropy,
            via,
        };
        self.enqueue(nic, packet);
        let gap = self.pacing_gap(host, self.serialization(frame));
        let state = &mut self.hosts[host as usize];
        if more {
            state.due += gap;
            let due = state.due;
            self.release_acks(host, nic, due);
            self.push(due, host, true);
        } else {
            // No new data is left: ACKs go out at once, and only a timer brings the host back.
            state.due = state.due.max(now) + gap;
            self.release_acks(host, nic, u64::MAX);
            self.arm_timer(host);
        }
    }

    /// Arms `host`'s retransmission timer for its earliest deadline, but no earlier than its
    /// pacer lets the next frame leave; keeps an armed timer that fires earlier (it re-arms
    /// when it finds nothing expired).
    // Not inlined: it runs once per host at the end of its data and on losses.
    #[inline(never)]
    fn arm_timer(&mut self, host: u32) {
        let state = &mut self.hosts[host as usize];
        let Some(deadline) = state.recovery.next_deadline() else {
            return;
        };
        let at = deadline.max(state.due);
        if state.timer_at != NO_TIMER && state.timer_at <= at {
            return;
        }
        state.timer_at = at;
        self.push(at, host | TIMER_BIT, true);
    }

    /// `host`'s retransmission timer event at `time`: sends what expired (through the pacer's
    /// path), or re-arms. Stale timers, and timers of a host with nothing outstanding, are
    /// dropped without touching the clock.
    #[inline(never)]
    fn timer(&mut self, host: u32, time: u64) {
        let state = &mut self.hosts[host as usize];
        if state.timer_at != time {
            return;
        }
        state.timer_at = NO_TIMER;
        let Some(deadline) = state.recovery.next_deadline() else {
            return;
        };
        self.now = time;
        if deadline.max(state.due) > time {
            self.arm_timer(host);
        } else {
            self.wake(host);
        }
    }

    /// Puts the held ACKs of `host` on its NIC, oldest first, as long as they end by `until`.
    fn release_acks(&mut self, host: u32, nic: usize, until: u64) {
        while self.ports[nic].free_at.saturating_add(self.ser_ack) <= until {
            let Some(ack) = self.hosts[host as usize].held_acks.pop_front() else {
                break;
            };
            self.enqueue(nic, ack);
        }
    }

    /// `host` acknowledges a data frame: the NIC sends the ACK at once unless it would delay
    /// the host's next data frame, then it waits for the room after that frame.
    fn send_ack(&mut self, host: u32, ack: Packet) {
        self.counts.acks_sent += 1;
        let nic = self.nodes[host as usize].port_base as usize;
        let state = &mut self.hosts[host as usize];
        state.ack_airtime += self.ser_ack;
        let sending = !state.active.is_empty();
        let fits = state.held_acks.is_empty()
            && self.now.max(self.ports[nic].free_at) + self.ser_ack <= state.due;
        if sending && !fits {
            state.held_acks.push_back(ack);
        } else {
            self.enqueue(nic, ack);
        }
    }

    /// A frame reaches its destination host.
    fn receive(&mut self, host: u32, packet: Packet) {
        let now = self.now;
        let flow = &mut self.flows[packet.flow as usize];
        if packet.is_ack() {
            debug_assert_eq!(flow.src, host);
            self.counts.acks_delivered += 1;
            if self.scheme == Scheme::Reps && !packet.ecn() {
                flow.recycled.push_back(packet.entropy);
            }
            let state = &mut self.hosts[host as usize];
            match state
                .recovery
                .on_ack_echo(flow.local, packet.seq(), packet.copy(), now)
            {
                Ack::New => {
                    flow.acked += 1;
                    if flow.acked == flow.packets {
                        flow.done_at = Some(now);
                    }
                }
                Ack::Duplicate => self.counts.duplicate_acks += 1,
                Ack::OutOfRange => debug_assert!(false, "ACK of a packet never sent"),
            }
            // Once the host sends no new data its timer decides: a sample may have shortened
            // the RTO.
            if state.active.is_empty() && !state.recovery.complete() {
                self.arm_timer(host);
            }
            return;
        }
        debug_assert_eq!(flow.dst, host);
        let bit = flow.delivered_base + packet.seq() as usize;
        let (word, mask) = (&mut self.delivered[bit / 64], 1u64 << (bit % 64));
        if *word & mask == 0 {
            *word |= mask;
            flow.received += 1;
            self.counts.data_delivered += 1;
            self.delivered_wire_bytes +=
                u64::from(packet.frame) + u64::from(self.config.link.gap_bytes);
        } else {
            self.counts.duplicate_data += 1;
        }
        let n = flow.drb_ack;
        flow.drb_ack = n.wrapping_add(1);
        let src = flow.src;
        let window = &mut self.deliveries[host as usize];
        window.0 = window.0.min(now);
        window.1 = now;
        let via = if self.scheme == Scheme::Drb {
            self.drb_waypoint(host, src, n)
        } else {
            NO_VIA
        };
        let ack = Packet {
            flow: packet.flow,
            seq_flags: packet.seq_flags | ACK_FLAG,
            frame: self.ack_frame,
            entropy: packet.entropy,
            via,
        };
        self.send_ack(host, ack);
    }

    /// A switch forwards a frame it has fully received on `in_port`.
    fn forward(&mut self, node: u32, in_port: u16, packet: Packet) {
        let info = self.nodes[node as usize];
        let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
        let target = &self.places[dst as usize];
        let out = match self.down_port(&info, node, target) {
            Some(port) => port,
            None => {
                let key = if info.role == Role::Edge {
                    target.edge_number
                } else {
                    u32::from(target.pod)
                };
                match self.choose_up(info, in_port, key, &packet) {
                    Some(position) => info.up_first + u16::from(position),
                    None => {
                        self.drops_no_route += 1;
                        return;
                    }
                }
            }
        };
        self.enqueue((info.port_base + u32::from(out)) as usize, packet);
    }

    /// The port on which switch `node` sends a frame for `target` down (or across the core);
    /// `None` when the frame goes up.
    #[inline]
    fn down_port(&self, info: &NodeInfo, node: u32, target: &Place) -> Option<u16> {
        match info.role {
            Role::Edge => (target.edge == node).then_some(target.slot),
            Role::Aggregation => (target.pod == info.pod).then_some(target.edge_in_pod),
            Role::Core => Some(if self.fat_tree {
                target.pod
            } else {
                target.edge_number as u16
            }),
            Role::Host => unreachable!("hosts receive, they do not forward"),
        }
    }

    /// The northbound decision: the DRB source route, or the load-balancing core.
    #[inline]
    fn choose_up(&mut self, info: NodeInfo, in_port: u16, key: u32, packet: &Packet) -> Option<u8> {
        if packet.via != NO_VIA {
            return Some(if info.role == Role::Edge {
                packet.via as u8
            } else {
                (packet.via >> 8) as u8
            });
        }
        let valid = if self.failed {
            PortMask(self.masks[(info.mask_base + key) as usize])
        } else {
            PortMask::all(info.up_count)
        };
        let class = Self::size_class(packet);
        let kind_bit = u64::from(packet.is_ack());
        let flow_hash =
            mix64(u64::from(packet.flow) << 24 ^ kind_bit << 16 ^ u64::from(packet.entropy)) as u32;
        let northbound = Northbound {
            key: DestKey(key),
            class,
            valid,
            flow_hash,
            frame_len: packet.frame,
        };
        let mut loads = [PortLoad::default(); 64];
        let loads = if self.uses_queues {
            let (now, propagation) = (self.now, self.propagation);
            let first = (info.port_base + u32::from(info.up_first)) as usize;
            for (load, port) in loads
                .iter_mut()
                .zip(&mut self.ports[first..first + usize::from(info.up_count)])
            {
                port.purge(now, propagation);
                *load = PortLoad {
                    packets: port.queued(),
                    bytes: u32::try_from(port.bytes).unwrap_or(u32::MAX),
                };
            }
            &mut loads[..usize::from(info.up_count)]
        } else {
            &mut []
        };
        let pipe = in_port / self.pipe_ports;
        let balancer = &mut self.balancers[(info.lb_base + u32::from(pipe)) as usize];
        balancer.choose(&northbound, loads).map(|port| port.0)
    }

    /// DRB: the `n`-th waypoint of the (src, dst) pointer, in the interleaved order that
    /// visits every aggregation switch once per w packets and every core once per w² packets,
    /// skipping waypoints whose path has a failed link. [`NO_VIA`] when the hosts share an
    /// edge switch (no choice) or no waypoint is alive.
    fn drb_waypoint(&self, src: u32, dst: u32, n: u64) -> u16 {
        let (from, to) = (&self.places[src as usize], &self.places[dst as usize]);
        if from.edge == to.edge {
            return NO_VIA;
        }
        let w = u64::from(self.w);
        let inter_pod = self.fat_tree && from.pod != to.pod;
        let count = if inter_pod { w * w } else { w };
        let via_of = |i: u64| -> u16 {
            let agg = (i % w) as u16;
            let core_port = if inter_pod { (i / w) as u16 } else { 0xff };
            agg | core_port << 8
        };
        if !self.failed {
            return via_of(n % count);
        }
        let alive = |i: u64| self.drb_alive(from, to, (i % w) as u8, (i / w) as u8, inter_pod);
        let valid = (0..count).filter(|&i| alive(i)).count() as u64;
        if valid == 0 {
            return NO_VIA;
        }
        let rank = n % valid;
        (0..count)
            .filter(|&i| alive(i))
            .nth(rank as usize)
            .map_or(NO_VIA, via_of)
    }

    fn drb_alive(&self, from: &Place, to: &Place, agg: u8, core_port: u8, inter_pod: bool) -> bool {
        let up_link = |node: u32, position: u8| {
            let info = &self.nodes[node as usize];
            let port = info.port_base + u32::from(info.up_first) + u32::from(position);
            self.dead[self.port_links[port as usize] as usize]
        };
        if up_link(from.edge, agg) || up_link(to.edge, agg) {
            return false;
        }
        if !inter_pod {
            return true;
        }
        let w = u32::from(self.w);
        let first_agg = self.topology.aggregations()[0].id.0;
        let agg_of = |pod: u16| first_agg + u32::from(pod) * w + u32::from(agg);
        !(up_link(agg_of(from.pod), core_port) || up_link(agg_of(to.pod), core_port))
    }

    /// Puts `packet` on output port `port_id` at the current time (or drops it).
    #[inline]
    fn enqueue(&mut self, port_id: usize, mut packet: Packet) {
        let (now, propagation) = (self.now, self.propagation);
        let serialization = self.serialization(packet.frame);
        let port = &mut self.ports[port_id];
        port.purge(now, propagation);
        let frame = u64::from(packet.frame);
        let data = !packet.is_ack();
        if port.stage.is_switch() {
            if port.bytes.saturating_add(frame) > self.buffer {
                self.drops_buffer += 1;
                return;
            }
            if data && port.bytes >= self.ecn {
                packet.seq_flags |= ECN_FLAG;
                self.counts.ecn_marks += 1;
            }
        }
        let finish = now.max(port.free_at) + serialization;
        if port.queued() == 0 {
            port.head_finish = finish;
        }
        port.free_at = finish;
        port.bytes += frame;
        port.data += u32::from(data);
        let arrival = finish + propagation;
        let idle = port.wire.is_empty();
        port.wire.push_back(Flight { arrival, packet });
        let carried = &mut self.carried[port_id];
        carried[0] += frame;
        carried[1] += 1;
        let stats = &mut self.stage_stats[port.stage as usize];
        stats.max_packets = stats.max_packets.max(port.queued());
        stats.max_data = stats.max_data.max(port.data);
        stats.max_bytes = stats.max_bytes.max(port.bytes);
        let residence = u128::from(finish - now);
        stats.area_packets += residence;
        stats.area_bytes += residence * u128::from(frame);
        if data && port.stage == Stage::EdgeUp {
            self.edge_max_data = self.edge_max_data.max(port.data);
            if port.data > self.edge_bound {
                self.edge_violations += 1;
            }
        }
        if idle {
            self.push(arrival, port_id as u32, false);
        }
    }

    fn report(
        mut self,
        failures: &FailedLinks,
        specs: &[FlowSpec],
        send_rate: f64,
        rho_max: Option<f64>,
    ) -> RunReport {
        let end = self.now;
        let mut cct = Some(0u64);
        for host in &self.hosts {
            let stats = host.recovery.stats();
            self.counts.retransmissions += stats.retransmissions;
            self.counts.timeouts += stats.timeouts;
        }
        for flow in &self.flows {
            match flow.done_at {
                Some(done) if flow.received == flow.packets && flow.acked == flow.packets => {
                    self.counts.flows_complete += 1;
                    cct = cct.map(|cct| cct.max(done));
                }
                _ => cct = None,
            }
        }
        let lower_bound = lower_bound_ps(self.topology, self.config, specs, send_rate);
        // The run window: t = 0 (the first departure) to the CCT, or the last event.
        let window = cct.unwrap_or(end);
        let link = self.config.link;
        let queues: Vec<QueueStats> = Stage::ALL
            .iter()
            .map(|&stage| {
                let stats = &self.stage_stats[stage as usize];
                stage_report(&self.ports, &self.carried, stage, stats, window, &link)
            })
            .collect();
        let switch_stages = queues.iter().filter(|stats| stats.stage.is_switch());
        let max_queue_bytes = switch_stages
            .clone()
            .map(|s| s.max_bytes)
            .max()
            .unwrap_or(0);
        let max_queue_packets = switch_stages.map(|s| s.max_packets).max().unwrap_or(0);
        // Each receiver's window runs from its first data arrival to its last plus one frame
        // time, so that latency differences between near and far flows do not count.
        let window_ps: u64 = self
            .deliveries
            .iter()
            .filter(|(first, _)| *first != u64::MAX)
            .map(|(first, last)| last - first + self.ser_data)
            .sum();
        let utilization = if window_ps == 0 {
            0.0
        } else {
            let bits = self.delivered_wire_bytes as f64 * 8.0;
            bits / (self.config.link.rate_bps as f64 * window_ps as f64 * 1e-12)
        };
        let one_flow_each = {
            let mut sends = vec![0u8; self.hosts.len()];
            let mut recvs = vec![0u8; self.hosts.len()];
            specs.iter().all(|spec| {
                sends[spec.src as usize] += 1;
                recvs[spec.dst as usize] += 1;
                sends[spec.src as usize] == 1 && recvs[spec.dst as usize] == 1
            })
        };
        let applies = self.scheme == Scheme::Switch(Algorithm::Ofan)
            && failures.is_empty()
            && one_flow_each
            && !matches!(self.config.workload, Workload::AllToAll);
        let mut drops = Drops::default();
        drops.add("switch.buffer", self.drops_buffer);
        drops.add("switch.no_route", self.drops_no_route);
        RunReport {
            schema: SCHEMA.to_owned(),
            hosts: self.hosts.len() as u32,
            flows: specs.len() as u32,
            cct_ps: cct,
            lower_bound_ps: lower_bound,
            cct_increase: cct.map(|cct| cct as f64 / lower_bound as f64 - 1.0),
            utilization,
            max_queue_bytes,
            max_queue_packets,
            queues,
            packets: self.counts.clone(),
            drops,
            details: Details::Model(ModelRun {
                config: self.config.clone(),
                failed_links: failures.iter().map(|link| link.0).collect(),
                send_rate,
                rho_max,
                edge_uplink: EdgeUplinkInvariant {
                    applies,
                    bound_data_packets: self.edge_bound,
                    max_data_packets: self.edge_max_data,
                    violations: self.edge_violations,
                },
                events: self.events,
                end_ps: end,
            }),
        }
    }
}

fn stage_report(
    ports: &[Port],
    carried: &[[u64; 2]],
    stage: Stage,
    measured: &StageStats,
    window: u64,
    link: &ofan_topology::LinkParams,
) -> QueueStats {
    let mut stats = QueueStats {
        stage,
        ports: 0,
        max_packets: u64::from(measured.max_packets),
        max_data_packets: Some(u64::from(measured.max_data)),
        max_bytes: measured.max_bytes,
        mean_packets: 0.0,
        mean_bytes: 0.0,
        link_overload: 0.0,
        utilization: 0.0,
    };
    let (mut bytes, mut busiest, mut wire_bits) = (0u64, 0u64, 0.0f64);
    let of_stage = ports
        .iter()
        .zip(carried)
        .filter(|(port, _)| port.stage == stage);
    for (_, &[port_bytes, port_frames]) in of_stage {
        stats.ports += 1;
        bytes += port_bytes;
        busiest = busiest.max(port_bytes);
        wire_bits += (port_bytes + port_frames * u64::from(link.gap_bytes)) as f64 * 8.0;
    }
    if stats.ports > 0 && window > 0 {
        let span = f64::from(stats.ports) * window as f64;
        stats.mean_packets = measured.area_packets as f64 / span;
        stats.mean_bytes = measured.area_bytes as f64 / span;
        stats.utilization = wire_bits / (link.rate_bps as f64 * span * 1e-12);
    }
    if bytes > 0 {
        let mean = bytes as f64 / f64::from(stats.ports);
        stats.link_overload = busiest as f64 / mean - 1.0;
    }
    stats
}

/// The CCT lower bound for the model (`ofan_topology::timing`): store-and-forward, hosts
/// pacing their data at `send_rate` (the rate [`Sim`] paces at: `load`, or `load × ρ_max`),
/// shortest paths of the failure-free topology.
fn lower_bound_ps(
    topology: &Topology,
    config: &ModelConfig,
    specs: &[FlowSpec],
    send_rate: f64,
) -> u64 {
    let flows: Vec<_> = specs
        .iter()
        .map(|spec| (NodeId(spec.src), NodeId(spec.dst), spec.bytes))
        .collect();
    let system = BoundSystem {
        send_rate: SendRate::nearest(send_rate),
        forwarding: Forwarding::StoreAndForward,
    };
    topology.collective_lower_bound_ps(&config.link, &system, &flows)
}
