//! From a configuration to the simulator's state at t = 0: the failures and the pacing rate
//! they allow, the ports, balancers and valid-port masks of every switch, the hosts with their
//! flows, their ACK reservation and their retransmission timers.

use std::collections::VecDeque;

use ofan_dataplane::lb::{mix64, DestKey, LbConfig, LbRng, SwitchBalancer};
use ofan_topology::{
    switch_seed, FailedLinks, NodeId, PortDirection, Role, SendRate, Topology, TrafficMatrix,
};
use ofan_transport::{FlowOrder, RecoveryConfig, Reordering, SelectiveRepeat};

use super::arf::{Arf, PortWindow};
use super::cc::HostCc;
use super::coalesce::Coalesce;
use super::credit::Credits;
use super::failure::LinkFailures;
use super::forward::{NodeInfo, Place};
use super::host::{Flow, Host, NO_TIMER};
use super::packet::SEQ_MASK;
use super::planes::Planes;
use super::port::{Port, StageStats};
use super::prefetch::Lookahead;
use super::Sim;
use crate::config::{
    AckAirtime, BufferLimit, EcnAt, Failures, FlowSpec, LinkDirection, ModelConfig,
};
use crate::error::ModelError;
use crate::queue::EventQueue;
use crate::report::{PacketCounts, Stage};
use crate::wires::{Layout, Wires};
use crate::workload;

/// Salt of the per-host generators.
const HOST_SALT: u64 = 0x686f_7374;
/// Salt of DRB pointer starts.
const DRB_SALT: u64 = 0x0064_7262;
/// How many failure samples to draw before giving up on a connected one.
const FAILURE_ATTEMPTS: u32 = 1000;
/// Timeouts after which a host gives a packet up (its flow then never completes, `cct_ps` is
/// `None`): every run ends, even one whose packets can never get through (each timeout waits at
/// most `rto_max`). With links failing during the run, a packet may also time out once per
/// `rto_min` until routing has reconverged, and the hosts allow for that on top.
const GIVE_UP_TIMEOUTS: u32 = 64;

fn host_count_of(hosts: &[Host]) -> usize {
    hosts.len()
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
    slowest_ppm: u32,
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
    // A degraded link drains its queue and sends its frames slower. An up-then-down path
    // crosses a link at most once, so a round trip crosses the slowest one at most twice (DATA
    // one way, its ACK back): add what a full queue and a DATA frame take longer there, twice.
    let slow_hop = link.serialization_ps(queue_bytes) + data_wire_ps;
    let extra = (u128::from(slow_hop) * 2 * u128::from(1_000_000 - slowest_ppm))
        .div_ceil(u128::from(slowest_ppm)) as u64;
    RecoveryConfig::for_round_trip(data_wire_ps, max_round_trip + extra)
}

/// Per port (in the order ports are built: nodes in order, each node's ports in order), its
/// rate in millionths of line rate: empty when no link is degraded.
fn degraded_ports(topology: &Topology, config: &ModelConfig) -> Result<Vec<u32>, ModelError> {
    if config.degraded.is_empty() {
        return Ok(Vec::new());
    }
    let mut bases = Vec::with_capacity(topology.nodes().len());
    let mut total = 0u32;
    for node in topology.nodes() {
        bases.push(total);
        total += node.ports.len() as u32;
    }
    let mut ppm = vec![1_000_000u32; total as usize];
    for link in &config.degraded {
        let no_such = || ModelError::NoSuchLink {
            from: link.from.clone(),
            to: link.to.clone(),
        };
        let by_name = |name: &str| topology.nodes().iter().find(|node| node.name == name);
        let (from, to) = by_name(&link.from)
            .zip(by_name(&link.to))
            .ok_or_else(no_such)?;
        let port_to = |a: &ofan_topology::Node, b: &ofan_topology::Node| {
            a.ports
                .iter()
                .find(|port| port.peer == b.id)
                .map(|port| (bases[a.id.index()] + u32::from(port.index.0)) as usize)
        };
        let forward = port_to(from, to).ok_or_else(no_such)?;
        let rate = (link.rate * 1e6).round().clamp(1.0, 1e6) as u32;
        ppm[forward] = ppm[forward].min(rate);
        if link.direction == LinkDirection::Both {
            let back = port_to(to, from).ok_or_else(no_such)?;
            ppm[back] = ppm[back].min(rate);
        }
    }
    Ok(ppm)
}

/// Flows weighted so that every source host's flows sum to its line rate — P line rates with
/// P planes, one per NIC port: ρ_max is then the fraction of line rate a host can send at on
/// each port.
pub(super) fn host_weighted_matrix(topology: &Topology, specs: &[FlowSpec]) -> TrafficMatrix {
    let mut per_host = vec![0u32; topology.hosts().len()];
    for spec in specs {
        per_host[spec.src as usize] += 1;
    }
    let mut matrix = TrafficMatrix::new();
    for spec in specs {
        matrix.push(
            NodeId(spec.src),
            NodeId(spec.dst),
            f64::from(topology.planes()) / f64::from(per_host[spec.src as usize]),
        );
    }
    matrix
}

pub(super) fn choose_failures(
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
    pub(super) fn new(
        topology: &'a Topology,
        config: &'a ModelConfig,
        failures: &FailedLinks,
        specs: &[FlowSpec],
        send_rate: f64,
    ) -> Result<Self, ModelError> {
        let k = topology.k();
        let w = u8::try_from(k / 2).expect("k <= 64");
        let fat_tree = topology.kind().is_fat_tree();
        let scheme = config.scheme;
        let algorithm = scheme.switch_algorithm();
        let algorithms = crate::mix::switch_algorithms(topology, config)?;
        let pipes = k.div_ceil(config.pipe_ports);
        let first_edge = topology.edges()[0].id.0;

        let port_ppm = degraded_ports(topology, config)?;
        let mut nodes = Vec::with_capacity(topology.nodes().len());
        let port_count: usize = topology.nodes().iter().map(|node| node.ports.len()).sum();
        let mut ports = Vec::with_capacity(port_count);
        let mut wire_layout = Layout::default();
        crate::sys::advise_huge_pages(ports.spare_capacity_mut());
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
                    algorithm: algorithms[node.id.index()],
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
                if !failures.is_empty() || !config.fail_at.is_empty() {
                    for key in 0..dest_keys {
                        masks.push(topology.valid_up_mask(failures, node.id, DestKey(key)));
                    }
                }
            }
            nodes.push(NodeInfo {
                role: node.role,
                plane: topology.plane_of(node.id).unwrap_or(0),
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
                ports.push(Port::new(
                    &mut wire_layout,
                    port.peer.0,
                    port.peer_port.0,
                    stage,
                ));
                port_links.push(port.link.0);
            }
        }

        let port_bases: Vec<u32> = nodes.iter().map(|info| info.port_base).collect();
        let link_failures =
            LinkFailures::new(topology, config, failures, &port_bases, ports.len())?;

        // Plane by plane; an edge's number is its destination key, counted within its plane.
        let planes = topology.planes();
        let plane_edges = (topology.edges().len() / usize::from(planes)) as u32;
        let places: Vec<Place> = (0..planes)
            .flat_map(|plane| {
                topology.hosts().iter().map(move |node| {
                    let edge = topology.host_edge_in(node.id, plane);
                    let edge_node = topology.node(edge);
                    Place {
                        edge: edge.0,
                        edge_number: (edge.0 - first_edge) % plane_edges,
                        edge_in_pod: edge_node.index,
                        slot: node.ports[usize::from(plane)].peer_port.0,
                        pod: node.pod.unwrap_or(0),
                    }
                })
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
                    reason: "a flow holds at most 2^22 - 1 packets",
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
                order: FlowOrder::default(),
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
            let per_frame = wire(config.link.ack_bytes).div_ceil(u64::from(config.ack_every));
            reserve_ack_airtime(&mut hosts, &flows, per_frame);
        }
        let slowest_ppm = port_ppm.iter().copied().min().unwrap_or(1_000_000);
        let cc = HostCc::new(config, fat_tree, flows.len(), host_count_of(&hosts));
        let coalesce = Coalesce::new(config.ack_every, flows.len());
        // A flow's initial credit is its CCA's initial window (htsim's `initRccc` speculates
        // one window).
        let credits = cc.as_ref().filter(|_| config.receiver_credit).map(|cc| {
            let initial = (cc.config.initial_window / cc.mss).max(1);
            Credits::new(
                u32::try_from(initial).unwrap_or(u32::MAX),
                flows.len(),
                host_count_of(&hosts),
                cc.recovery.rto_min,
            )
        });
        let recovery = match (&cc, config.recovery) {
            (_, Some(recovery)) => recovery,
            (Some(cc), None) => cc.recovery,
            (None, None) => {
                default_recovery(config, fat_tree, &flows, wire(data_frame), slowest_ppm)
            }
        };
        // A packet lost to a failed link may time out all the while routing reconverges; the
        // hosts give up only on what is still lost after that.
        let give_up = link_failures.as_ref().map_or(GIVE_UP_TIMEOUTS, |failing| {
            let waiting = failing.last_reroute_ps().div_ceil(recovery.rto_min.max(1));
            GIVE_UP_TIMEOUTS.saturating_add(u32::try_from(waiting).unwrap_or(u32::MAX))
        });
        for host in &mut hosts {
            let packets: Vec<u32> = host
                .flows
                .iter()
                .map(|&flow| flows[flow as usize].packets)
                .collect();
            host.recovery = SelectiveRepeat::new(recovery, &packets).give_up_after(give_up);
            if let Some(cc) = &cc {
                host.recovery =
                    std::mem::replace(&mut host.recovery, SelectiveRepeat::new(recovery, &[]))
                        .with_reordering_window(cc.reorder_permille);
            }
        }
        let cc = cc.map(|mut cc| {
            cc.recovery = recovery;
            Box::new(cc)
        });
        let host_count = hosts.len();
        let flow_ends: Vec<[u32; 2]> = flows.iter().map(|flow| [flow.src, flow.dst]).collect();
        let host_planes = (planes > 1).then(|| {
            let ends: Vec<(u32, u32)> = flow_ends.iter().map(|&[src, dst]| (src, dst)).collect();
            Box::new(Planes::new(
                topology,
                config.host_planes,
                config.seed,
                &ends,
                delivered_bits,
            ))
        });
        // The switches' control plane runs for the `arf-*` schemes, and for hosts that steer
        // by what their edges pass on (their balancers then take no view).
        let endpoint = host_planes
            .as_ref()
            .is_some_and(|planes| planes.wants_views());
        let (arf, arf_windows) = if scheme.uses_arf() || endpoint {
            let bases: Vec<(u32, Option<u32>)> = nodes
                .iter()
                .map(|info| {
                    let balances = matches!(info.role, Role::Edge | Role::Aggregation);
                    (info.port_base, balances.then_some(info.lb_base))
                })
                .collect();
            let mut arf = Arf::new(
                topology,
                failures,
                config.arf,
                &bases,
                scheme.uses_arf(),
                endpoint,
            );
            if algorithm == ofan_dataplane::lb::Algorithm::ArfFlow {
                arf.flows = vec![Default::default(); ports.len()];
            }
            (
                Some(Box::new(arf)),
                vec![PortWindow::default(); ports.len()],
            )
        } else {
            (None, Vec::new())
        };
        Ok(Self {
            topology,
            config,
            scheme,
            uses_queues: algorithms.iter().any(|algorithm| algorithm.uses_queues()),
            uses_flow_hash: algorithms
                .iter()
                .any(|algorithm| algorithm.uses_flow_hash()),
            fat_tree,
            w,
            nodes,
            ports,
            stage_stats: [StageStats::default(); Stage::ALL.len()],
            wires: Wires::new(&wire_layout),
            port_links,
            hosts,
            places,
            planes,
            host_count: host_count as u32,
            host_planes,
            flows,
            flow_ends,
            balancers,
            masks,
            dead,
            failed: !failures.is_empty() || link_failures.is_some(),
            queue: EventQueue::new(),
            data_frame,
            ack_frame: config.link.ack_bytes,
            trim_frame: if config.trim {
                config.link.header_bytes
            } else {
                0
            },
            ser_data: wire(data_frame),
            ser_ack: wire(config.link.ack_bytes),
            rate_ppm,
            propagation: config.link.propagation_ps,
            buffer: match config.buffer_limit {
                BufferLimit::Enforced => config.buffer_bytes,
                BufferLimit::Unlimited => u64::MAX,
            },
            ecn: match config.ecn_at {
                EcnAt::Enqueue => config.ecn_threshold_bytes,
                EcnAt::Dequeue => u64::MAX,
            },
            ecn_dequeue: match config.ecn_at {
                EcnAt::Enqueue => u64::MAX,
                EcnAt::Dequeue => config.ecn_threshold_bytes,
            },
            pipe_ports: config.pipe_ports,
            counts: PacketCounts::default(),
            reordering: Reordering::default(),
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
            flows_done: 0,
            arf,
            arf_windows,
            arf_flow: algorithm == ofan_dataplane::lb::Algorithm::ArfFlow,
            port_ppm,
            link_failures,
            ahead: Lookahead::new(host_count),
            cc,
            deps: None,
            coalesce,
            credits,
            conveyed: Vec::new(),
            #[cfg(test)]
            stop_after: u64::MAX,
        })
    }
}
