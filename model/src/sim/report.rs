//! The report of a finished run: completion times and their lower bound, utilization, queues per
//! stage, packet accounting, drops by reason and Ofan's edge-uplink invariant.

use ofan_dataplane::lb::Algorithm;
use ofan_topology::{BoundSystem, FailedLinks, Forwarding, NodeId, SendRate, Topology};

use super::failure::Loss;
use super::port::{Port, StageStats};
use super::Sim;
use crate::config::{FlowSpec, ModelConfig, Scheme, Workload};
use crate::report::{
    DegradedPort, Details, Drops, EdgeUplinkInvariant, ModelRun, QueueStats, RunReport, Stage,
    SCHEMA,
};

impl Sim<'_> {
    pub(super) fn report(
        mut self,
        failures: &FailedLinks,
        specs: &[FlowSpec],
        send_rate: f64,
        rho_max: Option<f64>,
    ) -> RunReport {
        let end = self.now;
        let mut cct = Some(0u64);
        self.counts.pulls = self.credits.as_ref().map_or(0, |credits| credits.pulls);
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
                stage_report(&self.ports, stage, stats, window, &link)
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
            && self.config.switch_schemes.is_uniform()
            && failures.is_empty()
            && self.link_failures.is_none()
            && one_flow_each
            && !matches!(self.config.workload, Workload::AllToAll);
        let degraded = self.degraded_report();
        let arf = self.arf.as_ref().map(|arf| {
            let fabric_bytes = self
                .ports
                .iter()
                .filter(|port| !matches!(port.stage, Stage::HostUp | Stage::EdgeDown))
                .map(|port| port.carried_bytes)
                .sum();
            let moved = self.balancers.iter().map(|b| b.flows_moved()).sum();
            arf.report(fabric_bytes, moved)
        });
        let mut drops = Drops::default();
        drops.add("switch.buffer", self.drops_buffer);
        drops.add("switch.no_route", self.drops_no_route);
        let (link_failures, lost) = self.failures_report();
        for (reason, count) in Loss::REASONS.into_iter().zip(lost) {
            drops.add(reason, count);
        }
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
            reordering: self.reordering,
            phases: self.phase_report(),
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
                degraded,
                cc: self.cc_report(),
                arf,
                link_failures,
                planes: self.planes_report(),
            }),
        }
    }

    /// Every slow direction of a degraded link, what it carried, and how that compares with
    /// the other ports of its stage.
    fn degraded_report(&self) -> Vec<DegradedPort> {
        if self.port_ppm.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for node in self.topology.nodes() {
            let base = self.nodes[node.id.index()].port_base as usize;
            for (index, port) in node.ports.iter().enumerate() {
                let id = base + index;
                let ppm = self.port_ppm[id];
                if ppm == 1_000_000 {
                    continue;
                }
                let stage = self.ports[id].stage;
                let others: Vec<u64> = self
                    .ports
                    .iter()
                    .enumerate()
                    .filter(|(other, p)| *other != id && p.stage == stage)
                    .map(|(_, p)| p.carried_bytes)
                    .collect();
                let bytes = self.ports[id].carried_bytes;
                let mean = others.iter().sum::<u64>() as f64 / others.len().max(1) as f64;
                out.push(DegradedPort {
                    from: node.name.clone(),
                    to: self.topology.node(port.peer).name.clone(),
                    rate: f64::from(ppm) / 1e6,
                    bytes,
                    share_of_stage_mean: if mean > 0.0 { bytes as f64 / mean } else { 0.0 },
                });
            }
        }
        out
    }
}

fn stage_report(
    ports: &[Port],
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
    let of_stage = ports.iter().filter(|port| port.stage == stage);
    for port in of_stage {
        let (port_bytes, port_frames) = (port.carried_bytes, port.pushed);
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
/// shortest paths of the failure-free topology, and — for links degraded in both directions —
/// the pod boundary term at their rates (a link slowed one way only keeps its line rate in the
/// bound, which then stays a bound for both directions); for a workload whose flows wait for
/// single arrivals, the larger of that and the chain of its dependencies
/// ([`Topology::chain_lower_bound_ps`]); for the FSDP pass, the larger of that and the chain of
/// its windows ([`crate::fsdp::Fsdp::chain_bound_ps`]).
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
    let slowed: Vec<(ofan_topology::LinkId, u64)> = config
        .degraded
        .iter()
        .filter(|link| link.direction == crate::config::LinkDirection::Both)
        .filter_map(|link| {
            let find = |name: &str| {
                topology
                    .nodes()
                    .iter()
                    .find(|n| n.name == name)
                    .map(|n| n.id)
            };
            let id = topology.link_between(find(&link.from)?, find(&link.to)?)?;
            Some((id, (config.link.rate_bps as f64 * link.rate) as u64))
        })
        .collect();
    let rate_of = |id: ofan_topology::LinkId| {
        slowed
            .iter()
            .find(|(slow, _)| *slow == id)
            .map_or(config.link.rate_bps, |&(_, bps)| bps)
    };
    let bytes =
        topology.collective_lower_bound_at_rates_ps(&config.link, &system, &flows, &rate_of);
    // A workload whose flows wait for single arrivals (a ring collective's steps, an htsim
    // file of that form): the chain of its dependencies bounds it too.
    let chain = crate::workload::graph(
        topology,
        &config.workload,
        config.message_bytes,
        config.seed,
    )
    .ok()
    .flatten()
    .and_then(|graph| graph.arrival_predecessors().ok())
    .filter(|after| after.len() == flows.len())
    .map_or(0, |after| {
        topology.chain_lower_bound_ps(&config.link, &system, &flows, &after)
    });
    let bytes = bytes.max(chain);
    match &config.workload {
        // The waits of its dependencies bound the FSDP pass too (crate::fsdp).
        Workload::Fsdp { fsdp } => fsdp
            .chain_bound_ps(topology, &config.link, system.send_rate, config.seed)
            .map_or(bytes, |chain| chain.max(bytes)),
        _ => bytes,
    }
}
