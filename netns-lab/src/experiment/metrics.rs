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
    Census, Delivery, Details, Drops, Fidelity, LabRun, LabSetup, PacketCounts, QueueStats,
    RunReport, Stage, SCHEMA,
};
use ofan_topology::{
    BoundSystem, Forwarding, LinkParams, NodeId, PortDirection, Role, SendRate, Topology,
};

use super::kernel::KernelCounters;
use crate::agent::collective::Plan;
use crate::agent::report::{collective_cct_ns, AgentReport};

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
/// Shaper lateness p99, in packet times, above which a run is not faithful.
pub const FAITHFUL_LATENESS: f64 = 0.25;

/// A switch's telemetry before and after a repetition.
#[derive(Debug, Clone)]
pub struct SwitchSample {
    /// The switch.
    pub node: NodeId,
    /// Snapshot after the reset, before the agents started.
    pub before: SwitchSnapshot,
    /// Snapshot after every agent finished.
    pub after: SwitchSnapshot,
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
/// pace DATA at `load` × `link_rate_bps`, every link runs at `link_rate_bps`
/// (`ofan_topology::timing`).
///
/// # Errors
/// When a plan host is not a host of the topology.
pub fn lower_bound_ps(
    topology: &Topology,
    plan: &Plan,
    link_rate_bps: u64,
    load: f64,
    payload: u32,
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
    Ok(topology.collective_lower_bound_ps(&params, &system, &flows))
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
            let name = reason.name();
            let count = counter(&sample.after, name).saturating_sub(counter(&sample.before, name));
            drops.add(&format!("switch.{name}"), count);
        }
    }
    for sample in input.kernels {
        for (name, count) in sample.before.delta(&sample.after).0 {
            drops.add(name, count);
        }
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
        utilization: host_utilization(input.reports, cct_for_means),
    }];
    for (stage, ports) in &stages {
        queues.push(stage_queues(*stage, ports, cct_for_means, rate));
    }
    queues.sort_by_key(|queues| queues.stage);

    let (packets, delivery) = delivery(input.reports);
    let census = census(input.reports, &drops, frames_queued);
    let agent_rate_ratio_min = agent_rate_ratio(input.reports);
    let (utilization, receiver_window_ratio_min) =
        receiver_utilization(input.reports, full_frame, rate);
    let fidelity = Fidelity {
        faithful: worst.0 <= FAITHFUL_LATENESS
            && agent_rate_ratio_min >= 0.99
            && receiver_window_ratio_min >= 0.99,
        receiver_window_ratio_min,
        shaper_late_p99_packet_times: worst.0,
        worst_port: worst.1,
        agent_rate_ratio_min,
        agent_late_p99_ns_max: input
            .reports
            .iter()
            .map(|r| r.pacing.late_p99_ns)
            .max()
            .unwrap_or(0),
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
        details: Details::Lab(LabRun {
            setup: setup.clone(),
            delivery,
            census,
            fidelity,
        }),
    })
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
            xsk_rx_dropped: a.rx_dropped.saturating_sub(b.rx_dropped),
            xsk_rx_ring_full: a.rx_ring_full.saturating_sub(b.rx_ring_full),
            xsk_invalid_descs: a.invalid_descs.saturating_sub(b.invalid_descs),
        }
    }
}

fn find_port<'a>(snapshot: &'a SwitchSnapshot, ifname: &str) -> Option<&'a PortSnapshot> {
    snapshot.ports.iter().find(|port| port.name == ifname)
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
fn agent_rate_ratio(reports: &[AgentReport]) -> f64 {
    let ratio = reports
        .iter()
        .filter(|r| r.pacing.expected_link_bps > 0.0)
        .filter_map(|r| Some(r.pacing.link_bps? / r.pacing.expected_link_bps))
        .fold(f64::INFINITY, f64::min);
    if ratio.is_finite() {
        ratio
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::collective::{permutation, topology_hosts};
    use crate::agent::report::{EntropyReport, FlowReport, Ignored, PacingReport, SourceReport};
    use ofan_dataplane::telemetry::SocketDrops;

    const RATE: u64 = 1_000_000;
    const PAYLOAD: u32 = 1472;
    const BYTES: u64 = 64 << 10;

    fn setup() -> LabSetup {
        LabSetup {
            lab: "t".into(),
            collective: "permutation".into(),
            lb: "ofan".into(),
            host_lb: "none".into(),
            message_bytes: BYTES,
            load: 1.0,
            link_rate_bps: RATE,
            payload: PAYLOAD,
            buffer: "2MB".into(),
            catch_up: true,
            repetition: 0,
            seed: 1,
        }
    }

    /// A complete agent report: `packets` sent and received, first send at `t0`, last ACK at
    /// `t1`, `missing` of the incoming packets lost.
    fn agent(plan: &Plan, host: usize, t0: u64, t1: u64, missing: u64) -> AgentReport {
        let packets = BYTES.div_ceil(u64::from(PAYLOAD - AGENT_HEADER));
        let flow = plan
            .flows
            .iter()
            .position(|f| f.src as usize == host)
            .unwrap();
        let src = plan
            .flows
            .iter()
            .find(|f| f.dst as usize == host)
            .unwrap()
            .src;
        let wire = packets * (u64::from(PAYLOAD) + 46 + 20);
        AgentReport {
            host: plan.hosts[host].name.clone(),
            address: plan.hosts[host].address,
            collective: plan.collective,
            host_lb: "none".into(),
            payload: PAYLOAD,
            link_rate_bps: RATE,
            load: 1.0,
            start_ns: t0,
            ready_ns: t0 - 1,
            first_send_ns: Some(t0),
            last_ack_ns: Some(t1),
            complete: missing == 0,
            timed_out: missing > 0,
            flows: vec![FlowReport {
                flow: flow as u32,
                dst: plan.hosts[plan.flows[flow].dst as usize].name.clone(),
                bytes: BYTES,
                packets: packets as u32,
                acks: packets as u32,
                duplicate_acks: 0,
                ce_marks: 0,
                retransmits: 0,
                first_send_ns: Some(t0),
                last_send_ns: Some(t1 - 1_000_000),
                last_ack_ns: Some(t1),
            }],
            received: vec![SourceReport {
                src: plan.hosts[src as usize].name.clone(),
                flows: 1,
                expected: packets,
                packets: packets - missing,
                duplicates: 0,
                missing,
                ce_marks: 0,
                first_ns: Some(t0 + 20_000_000),
                last_ns: Some(t1 - 500_000),
            }],
            acks_sent: packets - missing,
            recovery: ofan_transport::RecoveryStats::default(),
            ignored: Ignored::default(),
            pacing: PacingReport {
                requested_bps: RATE as f64,
                achieved_bps: Some(RATE as f64 * 0.95),
                ack_wire_bytes: packets * 84,
                link_bps: Some(RATE as f64 * 0.999),
                expected_link_bps: RATE as f64,
                packets,
                wire_bytes: wire,
                first_send_ns: Some(t0),
                last_send_ns: Some(t1 - 1_000_000),
                late_p50_ns: 100,
                late_p99_ns: 5_000,
                late_max_ns: 9_000,
                spin_ns: 50_000,
                catch_up: false,
                realtime: true,
                send_retries: 0,
            },
            entropy: EntropyReport {
                pool: 1,
                ports: vec![40000],
                recycled: 0,
                fresh: 0,
            },
        }
    }

    fn port(name: &str) -> PortSnapshot {
        PortSnapshot {
            name: name.into(),
            rx_packets: 0,
            rx_bytes: 0,
            enqueued_packets: 0,
            tx_packets: 0,
            tx_bytes: 0,
            drops_buffer: 0,
            drops_handoff: 0,
            ecn_marked: 0,
            socket_drops: SocketDrops::default(),
            depth_packets: 0,
            depth_bytes: 0,
            max_depth_packets: 0,
            max_depth_bytes: 0,
            depth_packet_ns: 0,
            depth_byte_ns: 0,
            integrated_until_ns: 0,
            arrival_depth_histogram: Vec::new(),
            lateness_p50_ns: 0,
            lateness_p99_ns: 0,
            lateness_p999_ns: 0,
            max_lateness_ns: 0,
            lateness_histogram_ns: Vec::new(),
        }
    }

    fn idle(topology: &Topology, node: NodeId) -> SwitchSnapshot {
        SwitchSnapshot {
            time_ns: 0,
            ports: topology
                .node(node)
                .ports
                .iter()
                .map(|p| port(&p.ifname))
                .collect(),
            counters: vec![("forwarded".into(), 1000), ("no_route".into(), 3)],
        }
    }

    struct Scenario {
        topology: Topology,
        plan: Plan,
        reports: Vec<AgentReport>,
        switches: Vec<SwitchSample>,
    }

    /// Every switch idle except: the first edge switch's first up port (p2) sent 100 frames,
    /// queued up to 7 frames / 9 000 B, held 2 frames on average over 1 s, dropped 4 in its
    /// buffer; the first core sent 50 frames late by 6 ms p99 and counted 2 no-route drops.
    fn scenario(missing: u64) -> Scenario {
        let topology = Topology::fat_tree(4).unwrap();
        let plan = permutation(7, topology_hosts(&topology), BYTES, 3).unwrap();
        let t0 = 1_000_000_000;
        let reports = (0..plan.hosts.len())
            .map(|h| agent(&plan, h, t0 + h as u64, t0 + 1_000_000_000, missing))
            .collect();
        let edge = topology.edges()[0].id;
        let core = topology.cores()[0].id;
        let switches = topology
            .switches()
            .iter()
            .map(|switch| {
                let before = idle(&topology, switch.id);
                let mut after = before.clone();
                if switch.id == edge {
                    let p = after.ports.iter_mut().find(|p| p.name == "p2").unwrap();
                    p.tx_packets = 100;
                    p.tx_bytes = 100 * 1514;
                    p.max_depth_packets = 7;
                    p.max_depth_bytes = 9_000;
                    p.depth_packet_ns = 2_000_000_000;
                    p.drops_buffer = 4;
                }
                if switch.id == core {
                    let p = &mut after.ports[0];
                    p.tx_packets = 50;
                    p.tx_bytes = 50 * 1514;
                    p.lateness_p99_ns = 6_000_000;
                    after.counters[1].1 += 2;
                }
                SwitchSample {
                    node: switch.id,
                    before,
                    after,
                }
            })
            .collect();
        Scenario {
            topology,
            plan,
            reports,
            switches,
        }
    }

    fn evaluate_scenario(s: &Scenario) -> RunReport {
        evaluate(&RepInput {
            topology: &s.topology,
            plan: &s.plan,
            reports: &s.reports,
            switches: &s.switches,
            kernels: &[],
            setup: setup(),
        })
        .unwrap()
    }

    #[test]
    fn stages_queues_and_drops_come_from_the_right_ports() {
        let s = scenario(0);
        let report = evaluate_scenario(&s);
        // k = 4: 16 output ports in every switch stage, 16 hosts.
        let stages: Vec<_> = report.queues.iter().map(|q| (q.stage, q.ports)).collect();
        assert_eq!(
            stages,
            Stage::ALL
                .iter()
                .map(|&stage| (stage, 16))
                .collect::<Vec<_>>()
        );
        let edge_up = report.stage(Stage::EdgeUp).unwrap();
        assert_eq!((edge_up.max_packets, edge_up.max_bytes), (7, 9_000));
        // 2 frames on one of 16 ports over a CCT of 1 s.
        assert!(
            (edge_up.mean_packets - 2.0 / 16.0).abs() < 1e-3,
            "{edge_up:?}"
        );
        // One busy port among 16: overload = 100 / (100/16) − 1 = 15.
        assert!((edge_up.link_overload - 15.0).abs() < 1e-9);
        assert_eq!(report.stage(Stage::AggUp).unwrap().max_packets, 0);
        assert_eq!(report.max_queue_packets, 7);
        assert_eq!(report.drops.get("switch.buffer"), 4);
        assert_eq!(report.drops.get("switch.no_route"), 2);
        assert_eq!(report.drops.total, 6);
        // The core's port: 6 ms late at 1 Mbit/s and 1534 B frames = 0.489 packet times.
        let fidelity = &lab_of(&report).fidelity;
        assert_eq!(fidelity.worst_port, "c-0:p0");
        assert!((fidelity.shaper_late_p99_packet_times - 0.4889).abs() < 1e-3);
        assert!(!fidelity.faithful);
    }

    #[test]
    fn cct_and_bound_follow_the_reports_and_the_topology() {
        let s = scenario(0);
        let report = evaluate_scenario(&s);
        assert_eq!(report.cct_ps, Some(1_000_000_000 * 1000));
        let bound = lower_bound_ps(&s.topology, &s.plan, RATE, 1.0, PAYLOAD).unwrap();
        assert_eq!(report.lower_bound_ps, bound);
        // 46 packets of 1534 + 20 B at 1 Mbit/s: about 0.57 s.
        assert!((0.55e12..0.6e12).contains(&(bound as f64)), "{bound}");
        let increase = report.cct_increase.unwrap();
        assert!((increase - (1e12 / bound as f64 - 1.0)).abs() < 1e-12);
        let delivery = &lab_of(&report).delivery;
        assert!(delivery.exactly_once);
        assert_eq!(delivery.data_expected, 16 * 46);
        assert_eq!(delivery.late_agents, 0);
        assert_eq!(report.packets.data_delivered, 16 * 46);
        assert_eq!(report.packets.flows_complete, 16);
        assert!(report.utilization > 0.5 && report.utilization <= 1.0);
    }

    /// The lab's bound, by hand: 64 KiB flows at 1 Mbit/s are 45 frames of 1 534 B (12.272 ms)
    /// and one of 106 + 60 + 20 = 186 B (1.488 ms); ACKs are 80 B (0.64 ms). Frames leave the
    /// shapers at the start of their slots over veths, so hops add nothing; the agents pace
    /// DATA at ρ, the links run at line rate.
    #[test]
    fn the_lab_bound_is_paced_sending_or_line_rate_receiving() {
        let s = scenario(0);
        let bound = |load| lower_bound_ps(&s.topology, &s.plan, RATE, load, PAYLOAD).unwrap();
        const MS: u64 = 1_000_000_000;
        // ρ = 1: each host receives 46 DATA frames and 46 ACKs, 583.168 ms on its link, less a
        // full frame that may come last: 570.896 ms — more than its own sending (45 × 12.272 =
        // 552.24 ms). The store-and-forward bound at ρ·R said 565.008 ms.
        assert_eq!(bound(1.0), 570_896 * MS / 1000);
        // ρ < 1: the paced sending, 45 frame times at ρ, is the bound; hops still add nothing
        // (the store-and-forward bound at ρ·R said 1 130.016 ms at ρ = 0.5).
        assert_eq!(bound(0.5), 45 * 24_544 * MS / 1000);
        assert_eq!(bound(0.8), 45 * 15_340 * MS / 1000);
        // 12.272 ms / 0.3 = 40.906 666… ms per frame, rounded down to the picosecond.
        assert_eq!(bound(0.3), 45 * 40_906_666_666);
        // The lab's bound is not the model's: store-and-forward over 6 hops would add the last
        // frame and its ACK at every hop.
        let model = s.topology.collective_lower_bound_ps(
            &link_params(RATE, PAYLOAD),
            &BoundSystem {
                send_rate: SendRate::at_least(0.5),
                forwarding: Forwarding::StoreAndForward,
            },
            &s.plan
                .flows
                .iter()
                .map(|flow| (NodeId(flow.src), NodeId(flow.dst), flow.bytes))
                .collect::<Vec<_>>(),
        );
        assert_eq!(model - bound(0.5), 6 * (1_488 + 640) * MS / 1000);
    }

    #[test]
    fn a_lost_packet_voids_the_cct_and_exactly_once() {
        let s = scenario(1);
        let report = evaluate_scenario(&s);
        assert_eq!(report.cct_ps, None);
        assert_eq!(report.cct_increase, None);
        assert!(!lab_of(&report).delivery.exactly_once);
        assert_eq!(lab_of(&report).delivery.missing, 16);
        // Queue means still use the span the agents saw.
        assert!(report.stage(Stage::EdgeUp).unwrap().mean_packets > 0.0);
    }

    /// Scenario 0 without any switch drop, and one DATA packet of host 0's incoming flow lost
    /// on the way (never received, so never ACKed).
    fn one_loss() -> Scenario {
        let mut s = scenario(0);
        for sample in &mut s.switches {
            sample.after = sample.before.clone();
        }
        let receiver = &mut s.reports[0];
        receiver.received[0].packets -= 1;
        receiver.received[0].missing = 1;
        receiver.acks_sent -= 1;
        receiver.complete = false;
        let src = s
            .plan
            .host_index(&receiver.received[0].src.clone())
            .unwrap() as usize;
        s.reports[src].flows[0].acks -= 1;
        s
    }

    #[test]
    fn a_loss_no_counter_explains_is_unaccounted() {
        let s = one_loss();
        let report = evaluate_scenario(&s);
        let census = &lab_of(&report).census;
        assert_eq!(census.frames_sent, 16 * 46 * 2 - 1);
        assert_eq!(census.frames_lost, 1);
        assert_eq!(census.unaccounted, 1);
        assert_eq!(report.drops.total, 0);
    }

    #[test]
    fn a_loss_the_kernel_counted_is_accounted_for_by_name() {
        let s = one_loss();
        let before = KernelCounters::default();
        let mut after = KernelCounters::default();
        after.0.insert("host.udp_rcvbuf", 1);
        let report = evaluate(&RepInput {
            topology: &s.topology,
            plan: &s.plan,
            reports: &s.reports,
            switches: &s.switches,
            kernels: &[KernelSample { before, after }],
            setup: setup(),
        })
        .unwrap();
        assert_eq!(report.drops.get("host.udp_rcvbuf"), 1);
        assert_eq!(report.drops.total, 1);
        assert_eq!(lab_of(&report).census.unaccounted, 0);
        assert_eq!(lab_of(&report).census.frames_lost, 1);
    }

    #[test]
    fn duplicates_count_as_exactly_once_only_when_retransmissions_explain_them() {
        let mut s = scenario(0);
        s.reports[0].received[0].packets += 1;
        s.reports[0].received[0].duplicates = 1;
        assert!(!lab_of(&evaluate_scenario(&s)).delivery.exactly_once);
        let src = s
            .plan
            .host_index(&s.reports[0].received[0].src.clone())
            .unwrap() as usize;
        s.reports[src].flows[0].retransmits = 1;
        let report = evaluate_scenario(&s);
        assert!(lab_of(&report).delivery.exactly_once);
        assert_eq!(report.packets.retransmissions, 1);
        assert_eq!(report.packets.duplicate_data, 1);
        assert_eq!(report.packets.data_delivered, 16 * 46);
    }

    #[test]
    fn the_report_round_trips_through_json_with_its_schema_and_source() {
        let report = evaluate_scenario(&scenario(0));
        let json = serde_json::to_string(&report).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["schema"], "ofan.run/2");
        assert_eq!(value["source"], "lab");
        assert!(value["setup"].is_object() && value["census"].is_object());
        assert_eq!(RunReport::from_json(&json).unwrap(), report);
        let other = json.replace("ofan.run/2", "ofan.run/1");
        assert!(RunReport::from_json(&other).is_err());
    }

    #[test]
    fn the_longest_lossless_round_trip_fills_every_queue_of_the_longest_path() {
        let s = scenario(0);
        let rtt = max_round_trip_ns(&s.topology, &s.plan, RATE, PAYLOAD, 64 << 10).unwrap();
        // 6 links (a permutation of k = 4 crosses pods), each way a full 64 KiB queue at
        // 1 Mbit/s (524.288 ms) plus the frame: 1514 + 20 B one way, 60 + 20 B back.
        let way = |frame: f64| (65_536.0 + frame) * 8.0 / 1e6;
        let expected = 6.0 * (way(1534.0) + way(80.0));
        assert!(
            (rtt as f64 * 1e-9 - expected).abs() < 1e-6,
            "{rtt} ns vs {expected} s"
        );
        let small = max_round_trip_ns(&s.topology, &s.plan, RATE, PAYLOAD, 8 << 10).unwrap();
        assert!(small < rtt / 5);
    }

    #[test]
    fn a_plan_host_outside_the_topology_is_an_error() {
        let topology = Topology::fat_tree(4).unwrap();
        let mut hosts = topology_hosts(&topology);
        hosts[0].name = "stranger".into();
        let plan = permutation(1, hosts, BYTES, 1).unwrap();
        assert!(lower_bound_ps(&topology, &plan, RATE, 1.0, PAYLOAD)
            .unwrap_err()
            .contains("stranger"));
    }
}
