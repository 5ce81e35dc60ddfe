//! The agent's JSON report from what the sender and the receiver measured.

use super::*;

pub(super) fn report(
    config: &AgentConfig,
    out_flows: &[OutFlow],
    ports: &[u16],
    sent: &SenderStats,
    received: &ReceiverStats,
) -> AgentReport {
    let plan = &config.plan;
    let me = config.host;
    let flows = out_flows
        .iter()
        .enumerate()
        .map(|(local, flow)| {
            let spec = plan.flows[flow.id as usize];
            FlowReport {
                flow: flow.id,
                dst: plan.hosts[spec.dst as usize].name.clone(),
                bytes: spec.bytes,
                packets: flow.packets,
                acks: received.acked[local].distinct(),
                duplicate_acks: received.acked[local].duplicates(),
                ce_marks: received.ack_ce[local],
                retransmits: sent.retransmits[local],
                first_send_ns: sent.first_send[local],
                last_send_ns: sent.last_send[local],
                last_ack_ns: received.last_ack[local],
            }
        })
        .collect();

    // Incoming flows, grouped by source host in host order.
    let incoming: Vec<u32> = plan
        .flows
        .iter()
        .filter(|flow| flow.dst == me)
        .map(|flow| flow.src)
        .collect();
    let mut sources: Vec<u32> = incoming.clone();
    sources.sort_unstable();
    sources.dedup();
    let received_report = sources
        .iter()
        .map(|&src| {
            let locals: Vec<usize> = incoming
                .iter()
                .enumerate()
                .filter(|(_, &s)| s == src)
                .map(|(local, _)| local)
                .collect();
            let sum = |f: &dyn Fn(usize) -> u64| locals.iter().map(|&l| f(l)).sum::<u64>();
            SourceReport {
                src: plan.hosts[src as usize].name.clone(),
                flows: locals.len() as u32,
                expected: sum(&|l| {
                    u64::from(received.received[l].distinct() + received.received[l].missing())
                }),
                packets: sum(&|l| received.arrivals[l]),
                duplicates: sum(&|l| received.received[l].duplicates()),
                missing: sum(&|l| u64::from(received.received[l].missing())),
                ce_marks: sum(&|l| received.data_ce[l]),
                first_ns: locals.iter().filter_map(|&l| received.first_data[l]).min(),
                last_ns: locals.iter().filter_map(|&l| received.last_data[l]).max(),
                reordering: locals.iter().fold(Reordering::default(), |mut all, &l| {
                    all.merge(&received.order[l].1);
                    all
                }),
            }
        })
        .collect();

    let lateness = sent.lateness.summary();
    // The paced phase without the time the windows held the host back: the rate the pacer
    // kept while it was allowed to send.
    let last_paced = sent
        .last_ns
        .map(|last| last.saturating_sub(sent.blocked_ns));
    let host = &plan.hosts[me as usize];
    // A multi-plane host's link is the ports it sent on (P under plane-spray, one for a
    // plane-hash host with one flow), each at the link rate.
    let ports_used = sent.planes.as_ref().map_or(1, |planes| {
        planes
            .packets
            .iter()
            .filter(|&&packets| packets > 0)
            .count()
            .max(1)
    });
    let host_bps = config.link_rate_bps as f64 * ports_used as f64;
    AgentReport {
        host: host.name.clone(),
        address: host.address,
        collective: plan.collective,
        host_lb: format!("{:?}", config.host_lb).to_lowercase(),
        payload: config.payload,
        link_rate_bps: config.link_rate_bps,
        load: config.load,
        start_ns: config.start_at_ns,
        ready_ns: 0,
        first_send_ns: sent.first_ns,
        last_ack_ns: received.last_ack.iter().flatten().copied().max(),
        complete: received.complete,
        timed_out: received.timed_out,
        flows,
        received: received_report,
        acks_sent: received.acks_sent,
        recovery: sent.recovery,
        cc: config.cc.map(|cc| CcReport {
            config: cc,
            mean_window_bytes: sent.mean_window.unwrap_or(0),
            blocked_ns: sent.blocked_ns,
            reordering: sent.reordering,
        }),
        ignored: received.ignored.clone(),
        pacing: PacingReport {
            requested_bps: config.load * host_bps,
            achieved_bps: match (sent.first_ns, last_paced) {
                (Some(first), Some(last)) => achieved_bps(first, last, sent.wire_bytes_but_last),
                _ => None,
            },
            ack_wire_bytes: 0,
            link_bps: match (sent.first_ns, last_paced, sent.ack_bytes_at_first) {
                (Some(first), Some(last), Some(acks)) => achieved_bps(
                    first,
                    last,
                    sent.wire_bytes_but_last
                        + (sent.ack_bytes_at_last - acks).saturating_sub(sent.blocked_ack_bytes),
                ),
                _ => None,
            },
            expected_link_bps: match (sent.first_ns, last_paced, sent.ack_bytes_at_first) {
                (Some(first), Some(last), Some(acks)) if last > first => {
                    let paced_acks =
                        (sent.ack_bytes_at_last - acks).saturating_sub(sent.blocked_ack_bytes);
                    let ack_bps = paced_acks as f64 * 8.0 * 1e9 / (last - first) as f64;
                    (config.load * host_bps + ack_bps).min(host_bps)
                }
                _ => config.load * host_bps,
            },
            packets: sent.packets,
            wire_bytes: sent.wire_bytes,
            first_send_ns: sent.first_ns,
            last_send_ns: sent.last_ns,
            late_p50_ns: lateness.p50_ns,
            late_p99_ns: lateness.p99_ns,
            late_max_ns: lateness.max_ns,
            late_max_at_ns: sent.lateness.worst_at_ns(),
            late_mean_ns: lateness.mean_ns,
            late_lost_ns: sent.lost_ns,
            late_lost_sends: sent.lost_sends,
            send_mean_ns: sent.send_ns.checked_div(sent.packets).unwrap_or(0),
            spin_ns: config.spin_ns,
            grid_ns: sender::departure_grid_ns(config),
            catch_up: config.catch_up,
            realtime: sent.realtime,
            send_retries: sent.send_retries,
            host_link_drops: sent.host_link_drops,
        },
        entropy: EntropyReport {
            pool: ports.len() as u16,
            ports: ports.to_vec(),
            recycled: sent.recycled,
            fresh: sent.fresh,
        },
        planes: sent.planes.clone().map(|mut planes| {
            planes.notifications.clone_from(&received.notifications);
            planes.notifications_rejected = received.notifications_rejected;
            planes
        }),
    }
}
