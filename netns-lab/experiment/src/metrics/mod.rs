//! What one repetition measured, computed from the agents' reports, the switches' telemetry
//! and the namespaces' kernel counters before and after it. Pure: no I/O, so every number here
//! is unit-tested.
//!
//! The report is the one schema of a run, [`RunReport`] (`ofan.run/2`, defined with the model
//! in `ofan_model::report`), with the lab's own section ([`LabRun`]: setup, delivery check,
//! loss census, fidelity).
//!
//! Drop reasons the lab reports (each only when it occurred): `switch.buffer` (egress tail
//! drop), `switch.handoff` (hand-off ring to another worker full), `switch.<reason>` (the
//! forwarding layer's named reasons, `DropReason`), `xsk.rx_dropped` / `xsk.rx_ring_full` /
//! `xsk.invalid_descs` (the kernel's counters of the switches' AF_XDP sockets), and the
//! namespaces' kernel counters of [`super::kernel::NAMES`] (interfaces and host UDP sockets).

use std::collections::BTreeMap;

use ofan_dataplane::forward::DropReason;
use ofan_dataplane::telemetry::{PortSnapshot, SwitchSnapshot};
pub use ofan_model::report::{
    Census, Delivery, Details, Drops, Fidelity, LabRun, LabSetup, PacketCounts, PhaseRun,
    QueueStats, RunReport, SlowedLink, Stage, SCHEMA,
};
use ofan_topology::{
    BoundSystem, FailedLinks, Forwarding, LinkParams, NodeId, PortDirection, Role, SendRate,
    Topology, TrafficMatrix,
};
use ofan_transport::Reordering;

use super::kernel::{KernelCounters, LATE_DATAGRAMS, NAMES as KERNEL_COUNTERS};
use ofan_lab_agent::collective::Plan;
use ofan_lab_agent::report::{collective_cct_ns, AgentReport};

/// Ethernet preamble, start delimiter and inter-frame gap: the bytes a frame occupies on the
/// wire beyond its own (the switch's shaper and the agent's pacing both count them).
pub const GAP_BYTES: u64 = 20;
/// Bytes of a DATA frame on a veth besides the UDP payload: UDP 8 + IPv4 20 + Ethernet 14
/// (veths carry no FCS).
pub const FRAME_OVERHEAD: u32 = 42;
/// The agent's header at the start of every UDP payload.
pub const AGENT_HEADER: u32 = 18;
/// Ports that sent fewer frames than this are left out of the shaper-fidelity verdict.
pub const LATENESS_MIN_PACKETS: u64 = 10;
/// Shaper lateness p99, in packet times, above which a run is not faithful (the limit `status`
/// judges a lab by).
pub use ofan_lab::status::FAITHFUL_LATENESS;
/// The lowest achieved / requested sending rate of a faithful run's agents.
pub const FAITHFUL_AGENT_RATE: f64 = 0.99;
/// The smallest receiver-window ratio of a faithful run (below: frames arrived faster than
/// their link carries them).
pub const FAITHFUL_RECEIVER_WINDOW: f64 = 0.99;

/// DATA frames an agent lost at its full shared-memory host link (the switch did not read it):
/// the agents' reports' `pacing.host_link_drops`.
pub const HOST_LINK_FULL: &str = "host.link_full";

/// Whether drops by report name `name` are ones the fabric under test would not have had, so
/// that a run with any of them is not faithful unless it injected a fault: the emulator fell
/// behind — a worker's inbox (`switch.handoff`), a host link either way (`switch.host_link`,
/// `host.link_full`) or an AF_XDP
/// socket's rings (`xsk.*`) full, a veth that
/// dropped (`kernel.*`), a host socket's receive buffer full or another UDP input error — or
/// the control plane failed the run: no route (`switch.no_route`), a next hop whose neighbour
/// was not resolved (`switch.neighbor_unresolved`: once, on a 2-CPU VM at k = 8, 726 of them
/// made a repetition last 200 s, and it was called faithful). Not here: buffer overflows
/// (`switch.buffer`, what the load balancing under test does), a blackhole or a link down
/// (faults a user sets up or `run --chaos` injects), and datagrams that reached a host after
/// its agent had finished (`host.udp_no_socket`).
#[must_use]
pub fn is_emulation_drop(name: &str) -> bool {
    matches!(
        name,
        "switch.handoff"
            | "switch.host_link"
            | HOST_LINK_FULL
            | "switch.no_route"
            | "switch.neighbor_unresolved"
    ) || name.starts_with("xsk.")
        || (KERNEL_COUNTERS.contains(&name) && name != LATE_DATAGRAMS)
}

/// The emulation drops of `drops` ([`is_emulation_drop`]), by name, the most frequent first.
#[must_use]
pub fn emulation_drops(drops: &Drops) -> Vec<(&str, u64)> {
    let mut found: Vec<(&str, u64)> = drops
        .by_reason
        .iter()
        .filter(|&(name, &count)| count > 0 && is_emulation_drop(name))
        .map(|(name, &count)| (name.as_str(), count))
        .collect();
    found.sort_by_key(|&(name, count)| (std::cmp::Reverse(count), name));
    found
}

/// A switch's telemetry before and after a repetition.
#[derive(Debug, Clone)]
pub struct SwitchSample {
    /// The switch.
    pub node: NodeId,
    /// Snapshot after the reset, before the agents started.
    pub before: SwitchSnapshot,
    /// Snapshot after every agent finished.
    pub after: SwitchSnapshot,
    /// How many times its routes changed between the two (its FIB mirror's `route_changes`).
    pub route_changes: u64,
}

/// A namespace's kernel counters before and after a repetition.
#[derive(Debug, Clone)]
pub struct KernelSample {
    /// Before the agents started.
    pub before: KernelCounters,
    /// After every agent finished.
    pub after: KernelCounters,
}

/// The lab section of a report the lab's experiments wrote.
///
/// # Panics
/// When `report` is a model report: experiments only ever hold the lab's own reports.
#[must_use]
pub fn lab_of(report: &RunReport) -> &LabRun {
    report
        .lab()
        .expect("the lab's experiments hold reports with a lab section")
}

/// The stage of a switch's output port.
#[must_use]
pub fn stage_of(role: Role, direction: PortDirection) -> Option<Stage> {
    Some(match (role, direction) {
        (Role::Host, _) => return None,
        (Role::Edge, PortDirection::Up) => Stage::EdgeUp,
        (Role::Edge, PortDirection::Down) => Stage::EdgeDown,
        (Role::Aggregation, PortDirection::Up) => Stage::AggUp,
        (Role::Aggregation, PortDirection::Down) => Stage::AggDown,
        (Role::Core, _) => Stage::CoreDown,
    })
}

/// The link parameters of a lab run for the topology's lower bound: veth frames (no FCS), the
/// agent's framing, no propagation delay (veths add none that the bound could count on).
#[must_use]
pub fn link_params(link_rate_bps: u64, payload: u32) -> LinkParams {
    LinkParams {
        rate_bps: link_rate_bps,
        propagation_ps: 0,
        payload_bytes: payload - AGENT_HEADER,
        header_bytes: AGENT_HEADER + FRAME_OVERHEAD,
        ack_bytes: AGENT_HEADER + FRAME_OVERHEAD,
        gap_bytes: GAP_BYTES as u32,
    }
}

/// The lower bound of `plan` on `topology` for the lab, ps: frames leave the switches' shapers
/// at the start of their slots over veths (no store-and-forward, no propagation), the agents
/// pace DATA at `load` × `link_rate_bps`, every link runs at `link_rate_bps` except the
/// `slowed` ones (`ofan_topology::timing`; a slowed link adds the pod boundary term).
/// A plan whose flows wait for others ([`ofan_lab_agent::collective::PlanFlow::after`]) is
/// also bounded by the chain of its waits ([`Topology::chain_lower_bound_ps`]).
///
/// # Errors
/// When a plan host is not a host of the topology.
pub fn lower_bound_ps(
    topology: &Topology,
    plan: &Plan,
    link_rate_bps: u64,
    load: f64,
    payload: u32,
    slowed: &[SlowedLink],
) -> Result<u64, String> {
    let ids = plan_ids(topology, plan)?;
    let flows: Vec<_> = plan
        .flows
        .iter()
        .map(|flow| (ids[flow.src as usize], ids[flow.dst as usize], flow.bytes))
        .collect();
    let system = BoundSystem {
        send_rate: SendRate::at_least(load),
        forwarding: Forwarding::AtSlotStart,
    };
    let params = link_params(link_rate_bps.max(1), payload);
    let rate_of = |link: ofan_topology::LinkId| {
        slowed
            .iter()
            .find(|slow| slow.link == link.0)
            .map_or(params.rate_bps, |slow| slow.rate_bps)
    };
    let bound = topology.collective_lower_bound_at_rates_ps(&params, &system, &flows, &rate_of);
    // Ring steps that wait for the previous chunk: the chain of waits bounds the run too.
    let chain = if plan.has_dependencies() {
        let after: Vec<Option<u32>> = plan.flows.iter().map(|flow| flow.after).collect();
        topology.chain_lower_bound_ps(&params, &system, &flows, &after)
    } else {
        0
    };
    Ok(bound.max(chain))
}

/// ρ_max of `plan`'s flows under `failures` (every flow weighs one: the plan's messages are
/// equal), the §6.2 pacing rate. An error names a flow the failures disconnect.
///
/// # Errors
/// A plan host not in the topology, or a flow without a valid path.
pub fn rho_max(topology: &Topology, failures: &FailedLinks, plan: &Plan) -> Result<f64, String> {
    let ids = plan_ids(topology, plan)?;
    let mut matrix = TrafficMatrix::new();
    for flow in plan.flows.iter().filter(|flow| flow.bytes > 0) {
        matrix.push(ids[flow.src as usize], ids[flow.dst as usize], 1.0);
    }
    topology
        .rho_max(failures, &matrix)
        .map_err(|e| format!("ρ_max under the lab's failures: {e}"))
}

/// The topology's node of every plan host.
fn plan_ids(topology: &Topology, plan: &Plan) -> Result<Vec<NodeId>, String> {
    plan.hosts
        .iter()
        .map(|host| {
            topology
                .hosts()
                .iter()
                .find(|node| node.name == host.name)
                .map(|node| node.id)
                .ok_or_else(|| format!("plan host {} is not in the lab's topology", host.name))
        })
        .collect()
}

/// The longest round trip a DATA packet and its ACK can take in the lab without being lost,
/// ns: over the plan's longest path, every switch queue full (`buffer_bytes` drained at the link
/// rate) both ways, plus the frames' own wire times
/// (`ofan_transport::RecoveryConfig::max_round_trip`, as the model computes it). The agents'
/// retransmission timers never fire sooner.
///
/// # Errors
/// When a plan host is not a host of the topology.
pub fn max_round_trip_ns(
    topology: &Topology,
    plan: &Plan,
    link_rate_bps: u64,
    payload: u32,
    buffer_bytes: u64,
) -> Result<u64, String> {
    let ids = plan_ids(topology, plan)?;
    let links = plan
        .flows
        .iter()
        .map(|flow| u64::from(topology.hop_count(ids[flow.src as usize], ids[flow.dst as usize])))
        .max()
        .unwrap_or(0);
    let ns = |bytes: u64| (bytes as f64 * 8.0 * 1e9 / link_rate_bps.max(1) as f64).ceil() as u64;
    Ok(ofan_transport::RecoveryConfig::max_round_trip(
        links,
        ns(buffer_bytes),
        ns(u64::from(payload + FRAME_OVERHEAD) + GAP_BYTES),
        ns(u64::from(AGENT_HEADER + FRAME_OVERHEAD) + GAP_BYTES),
        0,
    ))
}

/// The unloaded round trip of the plan's longest path in the lab, ns: a full DATA frame there
/// and its ACK back, store-and-forward at the link rate, no queue ([`max_round_trip_ns`] with
/// empty buffers) — what the hosts' congestion control scales its window and delay target to,
/// as the model does. The lab's own per-hop processing (tens of µs) is not in it: the
/// delay-based CCAs measure the queueing delay against the smallest RTT they saw when it is
/// smaller, not larger, so a few per cent of it shows as queueing.
///
/// # Errors
/// When a plan host is not a host of the topology.
pub fn base_rtt_ns(
    topology: &Topology,
    plan: &Plan,
    link_rate_bps: u64,
    payload: u32,
) -> Result<u64, String> {
    max_round_trip_ns(topology, plan, link_rate_bps, payload, 0)
}

/// Everything a repetition produced.
#[derive(Debug)]
pub struct RepInput<'a> {
    /// The lab's topology.
    pub topology: &'a Topology,
    /// The plan the agents ran.
    pub plan: &'a Plan,
    /// Every agent's report.
    pub reports: &'a [AgentReport],
    /// Every switch, before and after.
    pub switches: &'a [SwitchSample],
    /// Every namespace's kernel counters, before and after (may be empty: then the kernel's
    /// losses are not counted, and the census may call them unaccounted).
    pub kernels: &'a [KernelSample],
    /// How it was run.
    pub setup: LabSetup,
    /// A fault struck during the repetition (`run --chaos`): routes were meant to change, so
    /// changed routes do not make it unfaithful.
    pub fault_injected: bool,
}

/// Computes the report of one repetition.
///
/// # Errors
/// When the plan and the topology disagree (see [`lower_bound_ps`]).
pub fn evaluate(input: &RepInput<'_>) -> Result<RunReport, String> {
    let setup = &input.setup;
    let rate = setup.link_rate_bps as f64;
    let full_frame = u64::from(setup.payload + FRAME_OVERHEAD);
    let frame_ns = (full_frame + GAP_BYTES) as f64 * 8.0 / rate * 1e9;
    let cct_ns = collective_cct_ns(input.reports).filter(|_| complete(input.reports));
    let lower_bound = lower_bound_ps(
        input.topology,
        input.plan,
        setup.link_rate_bps,
        setup.load,
        setup.payload,
        &setup.slowed_links,
    )?;

    // Queues per stage, from the switches' port telemetry; drops by name.
    let mut stages: BTreeMap<Stage, Vec<PortDelta>> = BTreeMap::new();
    let mut drops = Drops::default();
    let mut frames_queued = 0;
    let mut worst = (0.0f64, String::new());
    for sample in input.switches {
        let node = input.topology.node(sample.node);
        for port in &node.ports {
            let Some(stage) = stage_of(node.role, port.direction) else {
                continue;
            };
            let (Some(before), Some(after)) = (
                find_port(&sample.before, &port.ifname),
                find_port(&sample.after, &port.ifname),
            ) else {
                continue;
            };
            let delta = PortDelta::new(before, after);
            drops.add("switch.buffer", delta.drops_buffer);
            drops.add("switch.handoff", delta.drops_handoff);
            drops.add("switch.host_link", delta.drops_host_link);
            drops.add("xsk.rx_dropped", delta.xsk_rx_dropped);
            drops.add("xsk.rx_ring_full", delta.xsk_rx_ring_full);
            drops.add("xsk.invalid_descs", delta.xsk_invalid_descs);
            frames_queued += after.depth_packets;
            if delta.tx_packets >= LATENESS_MIN_PACKETS {
                let late = after.lateness_p99_ns as f64 / frame_ns;
                if late > worst.0 || worst.1.is_empty() {
                    worst = (late, format!("{}:{}", node.name, port.ifname));
                }
            }
            stages.entry(stage).or_default().push(delta);
        }
        for reason in DropReason::ALL {
            let published = published_name(reason);
            let count = counter(&sample.after, &published)
                .saturating_sub(counter(&sample.before, &published));
            drops.add(&format!("switch.{}", reason.name()), count);
        }
        // The steering program's drops (`steering.drop_blackhole`), as the runner named them.
        for (name, after) in &sample.after.counters {
            if name.starts_with(STEERING_PREFIX) {
                drops.add(name, after.saturating_sub(counter(&sample.before, name)));
            }
        }
    }
    for sample in input.kernels {
        for (name, count) in sample.before.delta(&sample.after).0 {
            drops.add(name, count);
        }
    }
    for report in input.reports {
        drops.add(HOST_LINK_FULL, report.pacing.host_link_drops);
    }

    let cct_for_means = cct_ns.or_else(|| collective_cct_ns(input.reports));
    // The host NIC is the agent's pacer: it never queues.
    let mut queues = vec![QueueStats {
        stage: Stage::HostUp,
        ports: input.plan.hosts.len() as u32,
        max_packets: 0,
        max_data_packets: None,
        max_bytes: 0,
        mean_packets: 0.0,
        mean_bytes: 0.0,
        link_overload: 0.0,
        utilization: host_utilization(input.reports, cct_for_means)
            / f64::from(input.topology.planes()),
    }];
    for (stage, ports) in &stages {
        queues.push(stage_queues(*stage, ports, cct_for_means, rate));
    }
    queues.sort_by_key(|queues| queues.stage);

    let (packets, delivery) = delivery(input.reports);
    let census = census(input.reports, &drops, frames_queued);
    let (agent_rate_ratio_min, slowest_agent) = agent_rate_ratio(input.reports);
    // A multi-plane host receives on P ports.
    let host_rate = rate * f64::from(input.topology.planes());
    let (utilization, receiver_window_ratio_min) =
        receiver_utilization(input.reports, full_frame, host_rate);
    let rerouted: Vec<&SwitchSample> = input
        .switches
        .iter()
        .filter(|sample| sample.route_changes > 0)
        .collect();
    let route_changes = rerouted.iter().map(|sample| sample.route_changes).sum();
    let emulation_drops: u64 = emulation_drops(&drops).iter().map(|(_, n)| n).sum();
    let fidelity = Fidelity {
        faithful: worst.0 <= FAITHFUL_LATENESS
            && agent_rate_ratio_min >= FAITHFUL_AGENT_RATE
            && receiver_window_ratio_min >= FAITHFUL_RECEIVER_WINDOW
            && ((route_changes == 0 && emulation_drops == 0) || input.fault_injected),
        receiver_window_ratio_min,
        route_changes,
        emulation_drops,
        rerouted_switches: rerouted
            .iter()
            .map(|sample| input.topology.node(sample.node).name.clone())
            .collect(),
        shaper_late_p99_packet_times: worst.0,
        worst_port: worst.1,
        agent_rate_ratio_min,
        agent_late_p99_ns_max: input
            .reports
            .iter()
            .map(|r| r.pacing.late_p99_ns)
            .max()
            .unwrap_or(0),
        slowest_agent_lost_ns: slowest_agent.map_or(0, |r| r.pacing.late_lost_ns),
        slowest_agent_lost_sends: slowest_agent.map_or(0, |r| r.pacing.late_lost_sends),
        slowest_agent_worst_at_ms: slowest_agent
            .and_then(|r| r.pacing.late_max_at_ns)
            .zip(
                input
                    .reports
                    .iter()
                    .filter_map(|r| r.pacing.first_send_ns)
                    .min(),
            )
            .map(|(at, first)| at.saturating_sub(first) as f64 / 1e6),
    };
    let cct_ps = cct_ns.map(|ns| ns.saturating_mul(1000));
    let switch_queues = queues.iter().filter(|q| q.stage.is_switch());
    Ok(RunReport {
        schema: SCHEMA.to_owned(),
        hosts: input.plan.hosts.len() as u32,
        flows: input.plan.flows.len() as u32,
        cct_ps,
        lower_bound_ps: lower_bound,
        cct_increase: cct_ps.map(|cct| cct as f64 / lower_bound.max(1) as f64 - 1.0),
        utilization,
        max_queue_packets: switch_queues
            .clone()
            .map(|q| q.max_packets)
            .max()
            .unwrap_or(0),
        max_queue_bytes: switch_queues.map(|q| q.max_bytes).max().unwrap_or(0),
        queues,
        packets,
        drops,
        reordering: input
            .reports
            .iter()
            .flat_map(|report| &report.received)
            .fold(Reordering::default(), |mut all, source| {
                all.merge(&source.reordering);
                all
            }),
        phases: phases(input.plan, input.reports),
        details: Details::Lab(LabRun {
            setup: setup.clone(),
            delivery,
            census,
            fidelity,
            chaos: None,
            machine: None,
            planes: plane_totals(input.reports),
        }),
    })
}

/// What a multi-plane lab's hosts sent on each plane, summed over their reports (`None`: no
/// host has several planes).
fn plane_totals(reports: &[AgentReport]) -> Option<ofan_model::report::PlaneRun> {
    let mut hosts = reports.iter().filter_map(|report| report.planes.as_ref());
    let first = hosts.next()?;
    let planes = first.packets.len();
    let mut total = ofan_model::report::PlaneRun {
        policy: first.policy.parse().ok()?,
        data_sent: vec![0; planes],
        ce_acks: vec![0; planes],
        losses: vec![0; planes],
        views_delivered: 0,
        wire_bytes: vec![0; planes],
        flows_by_planes_used: vec![0; planes + 1],
        notifications: Vec::new(),
    };
    let add = |sum: &mut Vec<u64>, part: &[u64]| {
        for (sum, part) in sum.iter_mut().zip(part) {
            *sum += part;
        }
    };
    for host in std::iter::once(first).chain(hosts) {
        add(&mut total.data_sent, &host.packets);
        add(&mut total.ce_acks, &host.ce_acks);
        add(&mut total.losses, &host.losses);
        add(&mut total.wire_bytes, &host.wire_bytes);
        if !host.notifications.is_empty() {
            total.notifications.resize(planes, 0);
            add(&mut total.notifications, &host.notifications);
        }
        total.views_delivered += host.views_delivered;
        for (sum, &flows) in total
            .flows_by_planes_used
            .iter_mut()
            .zip(&host.flows_by_planes_used)
        {
            *sum += u64::from(flows);
        }
    }
    Some(total)
}

/// Each named phase of `plan` ([`Plan::phases`]) as the agents saw it, in ps from the first
/// DATA packet sent anywhere (the model's time 0): from the first packet its flows sent to the
/// last ACK they received; no end while a flow of it was not ACKed in full.
fn phases(plan: &Plan, reports: &[AgentReport]) -> Vec<PhaseRun> {
    let Some(origin) = reports.iter().filter_map(|r| r.first_send_ns).min() else {
        return Vec::new();
    };
    let ps = |ns: u64| ns.saturating_sub(origin).saturating_mul(1000);
    let flows = reports
        .iter()
        .flat_map(|report| &report.flows)
        .filter_map(|flow| {
            let phase = plan.flows.get(flow.flow as usize)?.phase;
            let done = flow.last_ack_ns.filter(|_| flow.acks == flow.packets);
            Some((phase, flow.first_send_ns.map(ps), done.map(ps)))
        });
    PhaseRun::collect(&plan.phases, flows)
}

/// One port's change over a repetition.
#[derive(Debug, Clone, Copy)]
struct PortDelta {
    tx_packets: u64,
    tx_bytes: u64,
    max_packets: u64,
    max_bytes: u64,
    depth_packet_ns: u64,
    depth_byte_ns: u64,
    drops_buffer: u64,
    drops_handoff: u64,
    drops_host_link: u64,
    xsk_rx_dropped: u64,
    xsk_rx_ring_full: u64,
    xsk_invalid_descs: u64,
}

impl PortDelta {
    fn new(before: &PortSnapshot, after: &PortSnapshot) -> Self {
        let (b, a) = (&before.socket_drops, &after.socket_drops);
        Self {
            tx_packets: after.tx_packets.saturating_sub(before.tx_packets),
            tx_bytes: after.tx_bytes.saturating_sub(before.tx_bytes),
            // The reset before the repetition cleared the maxima.
            max_packets: after.max_depth_packets,
            max_bytes: after.max_depth_bytes,
            depth_packet_ns: after.depth_packet_ns.saturating_sub(before.depth_packet_ns),
            depth_byte_ns: after.depth_byte_ns.saturating_sub(before.depth_byte_ns),
            drops_buffer: after.drops_buffer.saturating_sub(before.drops_buffer),
            drops_handoff: after.drops_handoff.saturating_sub(before.drops_handoff),
            drops_host_link: after.drops_host_link.saturating_sub(before.drops_host_link),
            xsk_rx_dropped: a.rx_dropped.saturating_sub(b.rx_dropped),
            xsk_rx_ring_full: a.rx_ring_full.saturating_sub(b.rx_ring_full),
            xsk_invalid_descs: a.invalid_descs.saturating_sub(b.invalid_descs),
        }
    }
}

fn find_port<'a>(snapshot: &'a SwitchSnapshot, ifname: &str) -> Option<&'a PortSnapshot> {
    snapshot.ports.iter().find(|port| port.name == ifname)
}

/// Prefix of the steering program's drop counters (`drop_blackhole`) in a run's switch
/// snapshots: the runner adds them to the workers' counters under this prefix, and they count
/// as drops by that name.
pub const STEERING_PREFIX: &str = "steering.";

/// The name under which a switch publishes the drops of `reason`
/// ([`ofan_dataplane::telemetry::worker_counter_names`]).
fn published_name(reason: DropReason) -> String {
    ofan_dataplane::telemetry::drop_counter_name(reason).to_owned()
}

fn counter(snapshot: &SwitchSnapshot, name: &str) -> u64 {
    snapshot
        .counters
        .iter()
        .filter(|(counter, _)| counter == name)
        .map(|(_, value)| *value)
        .sum()
}

fn stage_queues(stage: Stage, ports: &[PortDelta], cct_ns: Option<u64>, rate: f64) -> QueueStats {
    let n = ports.len().max(1) as f64;
    let window = cct_ns.unwrap_or(0) as f64;
    let per_port_mean = |integral: u64| {
        if window > 0.0 {
            integral as f64 / window
        } else {
            0.0
        }
    };
    let bytes: Vec<u64> = ports.iter().map(|p| p.tx_bytes).collect();
    let mean_bytes = bytes.iter().sum::<u64>() as f64 / n;
    let link_overload = if mean_bytes > 0.0 {
        *bytes.iter().max().unwrap_or(&0) as f64 / mean_bytes - 1.0
    } else {
        0.0
    };
    let utilization = if window > 0.0 {
        ports
            .iter()
            .map(|p| (p.tx_bytes + GAP_BYTES * p.tx_packets) as f64 * 8.0 / (rate * window * 1e-9))
            .sum::<f64>()
            / n
    } else {
        0.0
    };
    QueueStats {
        stage,
        ports: ports.len() as u32,
        max_packets: ports.iter().map(|p| p.max_packets).max().unwrap_or(0),
        max_data_packets: None,
        max_bytes: ports.iter().map(|p| p.max_bytes).max().unwrap_or(0),
        mean_packets: ports
            .iter()
            .map(|p| per_port_mean(p.depth_packet_ns))
            .sum::<f64>()
            / n,
        mean_bytes: ports
            .iter()
            .map(|p| per_port_mean(p.depth_byte_ns))
            .sum::<f64>()
            / n,
        link_overload,
        utilization,
    }
}

fn complete(reports: &[AgentReport]) -> bool {
    !reports.is_empty() && reports.iter().all(|r| r.complete)
}

/// The hosts' packet counts and the delivery check.
fn delivery(reports: &[AgentReport]) -> (PacketCounts, Delivery) {
    let sum = |f: &dyn Fn(&AgentReport) -> u64| reports.iter().map(f).sum::<u64>();
    let data_expected = sum(&|r| r.received.iter().map(|s| s.expected).sum());
    let duplicates = sum(&|r| r.received.iter().map(|s| s.duplicates).sum());
    let missing = sum(&|r| r.received.iter().map(|s| s.missing).sum());
    let arrivals = sum(&|r| r.received.iter().map(|s| s.packets).sum());
    let retransmissions = sum(&|r| r.flows.iter().map(|f| f.retransmits).sum());
    let acks = sum(&|r| r.flows.iter().map(|f| u64::from(f.acks)).sum());
    let duplicate_acks = sum(&|r| r.flows.iter().map(|f| f.duplicate_acks).sum());
    let complete = complete(reports);
    let packets = PacketCounts {
        data_sent: sum(&|r| r.pacing.packets),
        retransmissions,
        timeouts: sum(&|r| r.recovery.timeouts),
        data_delivered: arrivals - duplicates.min(arrivals),
        duplicate_data: duplicates,
        acks_sent: sum(&|r| r.acks_sent),
        acks_delivered: acks + duplicate_acks,
        duplicate_acks,
        ecn_marks: sum(&|r| r.received.iter().map(|s| s.ce_marks).sum()),
        flows_complete: reports
            .iter()
            .flat_map(|r| &r.flows)
            .filter(|f| f.acks == f.packets)
            .count() as u64,
        // The lab's switches drop at a full queue; they do not trim.
        trimmed: 0,
        nacks: 0,
        pulls: 0,
    };
    let delivery = Delivery {
        data_expected,
        missing,
        complete,
        exactly_once: complete && missing == 0 && duplicates <= retransmissions,
        late_agents: reports.iter().filter(|r| r.ready_ns > r.start_ns).count() as u32,
    };
    (packets, delivery)
}

/// Every frame the agents sent: received, dropped and counted, or still queued.
fn census(reports: &[AgentReport], drops: &Drops, frames_queued: u64) -> Census {
    let sum = |f: &dyn Fn(&AgentReport) -> u64| reports.iter().map(f).sum::<u64>();
    let frames_sent = sum(&|r| r.pacing.packets + r.acks_sent);
    let frames_received = sum(&|r| {
        r.received.iter().map(|s| s.packets).sum::<u64>()
            + r.flows
                .iter()
                .map(|f| u64::from(f.acks) + f.duplicate_acks)
                .sum::<u64>()
            + r.ignored.out_of_range
            + r.ignored.drained
    });
    let frames_lost = frames_sent.saturating_sub(frames_received);
    Census {
        frames_sent,
        frames_received,
        frames_lost,
        frames_queued,
        unaccounted: frames_lost.saturating_sub(drops.total + frames_queued),
    }
}

/// Mean over senders of their wire bits over rate × CCT.
fn host_utilization(reports: &[AgentReport], cct_ns: Option<u64>) -> f64 {
    let (Some(cct), false) = (cct_ns, reports.is_empty()) else {
        return 0.0;
    };
    let senders: Vec<_> = reports.iter().filter(|r| r.pacing.packets > 0).collect();
    if senders.is_empty() || cct == 0 {
        return 0.0;
    }
    senders
        .iter()
        .map(|r| {
            // The agent counts 4 bytes of FCS per frame that a veth does not carry.
            let wire = r.pacing.wire_bytes.saturating_sub(4 * r.pacing.packets);
            wire as f64 * 8.0 / (r.link_rate_bps as f64 * cct as f64 * 1e-9)
        })
        .sum::<f64>()
        / senders.len() as f64
}

/// The model's utilization: DATA wire bits delivered over line rate × the receivers' windows,
/// and the smallest ratio of a receiver's observed window to the time its link needs for what
/// it received.
///
/// A receiver's window runs from its first DATA arrival to its last plus one frame time, but
/// never shorter than its distinct frames take at line rate: no link delivers faster. A shorter
/// observed window is an artefact of the emulation, and the ratio reports it (measured at
/// 20 Mbit/s on a loaded machine: 0.55): a switch shaper that fell behind catches up with gaps
/// down to half a frame time (`--catch-up`, like `sch_fq`), so after a stall it delivers at up
/// to twice the rate while its schedule recovers, and a receiver whose first frame came late
/// sees the rest compressed. Without the floor such a run reported a utilization of 1.07.
fn receiver_utilization(reports: &[AgentReport], full_frame: u64, rate: f64) -> (f64, f64) {
    let frame_ns = (full_frame + GAP_BYTES) as f64 * 8.0 / rate * 1e9;
    let (mut bits, mut window_ns, mut ratio_min) = (0.0, 0.0, f64::INFINITY);
    for report in reports {
        let arrivals = report.received.iter().filter(|s| s.packets > 0);
        let first = arrivals.clone().filter_map(|s| s.first_ns).min();
        let last = arrivals.clone().filter_map(|s| s.last_ns).max();
        let (Some(first), Some(last)) = (first, last) else {
            continue;
        };
        let packets: u64 = arrivals.map(|s| s.packets - s.duplicates).sum();
        let observed = (last - first) as f64 + frame_ns;
        let needed = packets as f64 * frame_ns;
        ratio_min = f64::min(ratio_min, observed / needed);
        bits += (packets * (full_frame + GAP_BYTES)) as f64 * 8.0;
        window_ns += observed.max(needed);
    }
    let utilization = if window_ns > 0.0 {
        bits / (rate * window_ns * 1e-9)
    } else {
        0.0
    };
    (
        utilization,
        if ratio_min.is_finite() {
            ratio_min
        } else {
            1.0
        },
    )
}

/// The lowest link rate an agent achieved over what it should have (DATA at ρ·R plus its ACKs,
/// at most R).
fn agent_rate_ratio(reports: &[AgentReport]) -> (f64, Option<&AgentReport>) {
    reports
        .iter()
        .filter(|r| r.pacing.expected_link_bps > 0.0)
        .filter_map(|r| Some((r.pacing.link_bps? / r.pacing.expected_link_bps, r)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or((1.0, None), |(ratio, report)| (ratio, Some(report)))
}

#[cfg(test)]
mod tests;
