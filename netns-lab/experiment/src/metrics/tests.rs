use super::*;
use ofan_lab_agent::collective::{permutation, topology_hosts};
use ofan_lab_agent::report::{EntropyReport, FlowReport, Ignored, PacingReport, SourceReport};

const RATE: u64 = 1_000_000;
const PAYLOAD: u32 = 1472;
const BYTES: u64 = 64 << 10;

fn setup() -> LabSetup {
    LabSetup {
        lab: "t".into(),
        collective: "permutation".into(),
        lb: "ofan".into(),
        arf_combine: Default::default(),
        host_lb: "none".into(),
        message_bytes: BYTES,
        load: 1.0,
        link_rate_bps: RATE,
        payload: PAYLOAD,
        buffer: "2MB".into(),
        catch_up: true,
        cc: None,
        repetition: 0,
        seed: 1,
        slowed_links: Vec::new(),
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
            reordering: ofan_transport::Reordering {
                arrivals: packets - missing,
                out_of_order: 3,
                max_distance: src % 4,
                distance_sum: 7,
            },
        }],
        acks_sent: packets - missing,
        recovery: ofan_transport::RecoveryStats::default(),
        cc: None,
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
            late_max_at_ns: None,
            late_mean_ns: 400,
            late_lost_ns: 0,
            late_lost_sends: 0,
            send_mean_ns: 20_000,
            spin_ns: 50_000,
            grid_ns: 0,
            catch_up: false,
            realtime: true,
            send_retries: 0,
            host_link_drops: 0,
        },
        entropy: EntropyReport {
            pool: 1,
            ports: vec![40000],
            recycled: 0,
            fresh: 0,
        },
        planes: None,
    }
}

fn port(name: &str) -> PortSnapshot {
    PortSnapshot {
        name: name.into(),
        ..PortSnapshot::default()
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
        counters: vec![("forwarded".into(), 1000), ("drop_no_route".into(), 3)],
        umem: None,
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
                route_changes: 0,
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

/// [`scenario`] with no switch counting anything and every agent at its rate: a faithful run.
fn quiet_scenario() -> Scenario {
    let mut s = scenario(0);
    for sample in &mut s.switches {
        sample.after = sample.before.clone();
    }
    for report in &mut s.reports {
        report.pacing.achieved_bps = Some(report.pacing.requested_bps);
    }
    s
}

fn evaluate_scenario(s: &Scenario) -> RunReport {
    evaluate_struck(s, false)
}

/// The scenario evaluated as a run with (`true`) or without a fault injected on purpose.
fn evaluate_struck(s: &Scenario, fault_injected: bool) -> RunReport {
    evaluate(&RepInput {
        topology: &s.topology,
        plan: &s.plan,
        reports: &s.reports,
        switches: &s.switches,
        kernels: &[],
        setup: setup(),
        fault_injected,
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

/// The agent of the lowest rate decides `agent_rate_ratio_min`, and what its late sends cost
/// is reported beside it — not another agent's.
#[test]
fn the_slowest_agents_lost_time_is_reported_with_its_rate() {
    let mut s = quiet_scenario();
    // Host 3: 0.978 of its rate after two stalls; host 5 lost more sends but kept its rate.
    s.reports[3].pacing.link_bps = Some(RATE as f64 * 0.978);
    s.reports[3].pacing.late_lost_ns = 25_600_000;
    s.reports[3].pacing.late_lost_sends = 2;
    let first = s
        .reports
        .iter()
        .filter_map(|r| r.pacing.first_send_ns)
        .min()
        .unwrap();
    s.reports[3].pacing.late_max_at_ns = Some(first + 212_500_000);
    s.reports[5].pacing.late_max_at_ns = Some(first + 1_000_000);
    s.reports[5].pacing.late_lost_ns = 900_000;
    s.reports[5].pacing.late_lost_sends = 40;
    let report = evaluate_scenario(&s);
    let fidelity = &lab_of(&report).fidelity;
    assert!((fidelity.agent_rate_ratio_min - 0.978).abs() < 1e-12);
    assert_eq!(fidelity.slowest_agent_lost_ns, 25_600_000);
    assert_eq!(fidelity.slowest_agent_lost_sends, 2);
    assert_eq!(fidelity.slowest_agent_worst_at_ms, Some(212.5));
    assert!(!fidelity.faithful);
    // Without agents' reports nothing is slow.
    s.reports.clear();
    let (ratio, slowest) = super::agent_rate_ratio(&s.reports);
    assert_eq!((ratio, slowest.is_none()), (1.0, true));
}

/// A run the links emulated faithfully is still not faithful when routes changed under it (a
/// routing session that flapped), unless a fault injected on purpose changed them.
#[test]
fn changed_routes_make_a_run_unfaithful_unless_a_fault_changed_them() {
    let mut s = quiet_scenario();
    let fidelity =
        |s: &Scenario, fault_injected| lab_of(&evaluate_struck(s, fault_injected)).fidelity.clone();
    let steady = fidelity(&s, false);
    assert!(steady.faithful, "{steady:?}");
    assert_eq!(
        (steady.route_changes, steady.rerouted_switches.len()),
        (0, 0)
    );

    let edge = s.topology.edges()[1].id;
    let core = s.topology.cores()[2].id;
    for sample in &mut s.switches {
        if sample.node == edge {
            sample.route_changes = 3;
        } else if sample.node == core {
            sample.route_changes = 1;
        }
    }
    let flapped = fidelity(&s, false);
    assert!(!flapped.faithful);
    assert_eq!(flapped.route_changes, 4);
    assert_eq!(
        flapped.rerouted_switches,
        [
            s.topology.node(edge).name.clone(),
            s.topology.node(core).name.clone()
        ]
    );
    // A link flapped or a switch killed on purpose: the routes were meant to change.
    let struck = fidelity(&s, true);
    assert!(struck.faithful);
    assert_eq!(struck.route_changes, 4);
}

/// Frames the lab lost where the fabric would not have — a neighbour unresolved, an AF_XDP
/// ring full, a host socket's buffer full — make a run unfaithful however well its links were
/// emulated, unless a fault was injected; the fabric's own buffer overflows do not.
#[test]
fn emulation_drops_make_a_run_unfaithful_and_buffer_drops_do_not() {
    let mut s = quiet_scenario();
    let edge = s.topology.edges()[0].id;
    let at_edge = s.switches.iter().position(|x| x.node == edge).unwrap();
    s.switches[at_edge].after.ports[0].drops_buffer = 40;
    let overflowed = evaluate_scenario(&s);
    let fidelity = &lab_of(&overflowed).fidelity;
    assert!(fidelity.faithful, "{fidelity:?}");
    assert_eq!(fidelity.emulation_drops, 0);
    assert_eq!(overflowed.drops.total, 40);

    let unresolved = published_name(DropReason::NeighborUnresolved);
    s.switches[at_edge].after.counters.push((unresolved, 726));
    s.switches[at_edge].after.ports[1].socket_drops.rx_ring_full += 3;
    let starved = evaluate_scenario(&s);
    let fidelity = &lab_of(&starved).fidelity;
    assert!(!fidelity.faithful, "{fidelity:?}");
    assert_eq!(fidelity.emulation_drops, 729);
    assert_eq!(
        emulation_drops(&starved.drops),
        [("switch.neighbor_unresolved", 726), ("xsk.rx_ring_full", 3)]
    );
    // A switch killed on purpose loses its neighbours and rings: judged by its chaos record.
    assert!(lab_of(&evaluate_struck(&s, true)).fidelity.faithful);

    // The hosts' kernels count too: a socket buffer that overflowed.
    let s = quiet_scenario();
    let before = KernelCounters(
        super::super::kernel::NAMES
            .iter()
            .map(|&n| (n, 0))
            .collect(),
    );
    let mut after = before.clone();
    *after.0.get_mut("host.udp_rcvbuf").unwrap() = 5;
    *after.0.get_mut("host.udp_no_socket").unwrap() = 9;
    let kernels = [KernelSample { before, after }];
    let report = evaluate(&RepInput {
        topology: &s.topology,
        plan: &s.plan,
        reports: &s.reports,
        switches: &s.switches,
        kernels: &kernels,
        setup: setup(),
        fault_injected: false,
    })
    .unwrap();
    let fidelity = &lab_of(&report).fidelity;
    assert!(!fidelity.faithful);
    assert_eq!(
        fidelity.emulation_drops, 5,
        "late datagrams are not the emulation's"
    );
}

/// Which of the names the lab counts drops under are the emulation's.
#[test]
fn the_emulations_drops_are_its_rings_veths_sockets_routes_and_neighbours() {
    let mut counted: Vec<String> = [
        "switch.buffer",
        "switch.handoff",
        "switch.host_link",
        "host.link_full",
        "xsk.rx_dropped",
        "xsk.rx_ring_full",
        "xsk.invalid_descs",
    ]
    .into_iter()
    .map(String::from)
    .chain(super::super::kernel::NAMES.iter().map(|n| (*n).to_owned()))
    .chain(
        DropReason::ALL
            .iter()
            .map(|r| format!("switch.{}", r.name())),
    )
    .chain([format!("{STEERING_PREFIX}drop_blackhole")])
    .collect();
    counted.retain(|name| is_emulation_drop(name));
    counted.sort();
    assert_eq!(
        counted,
        [
            "host.link_full",
            "host.udp_in_errors",
            "host.udp_rcvbuf",
            "kernel.rx_dropped",
            "kernel.rx_fifo",
            "kernel.tx_dropped",
            "kernel.tx_fifo",
            "switch.handoff",
            "switch.host_link",
            "switch.neighbor_unresolved",
            "switch.no_route",
            "xsk.invalid_descs",
            "xsk.rx_dropped",
            "xsk.rx_ring_full",
        ]
    );
}

#[test]
fn cct_and_bound_follow_the_reports_and_the_topology() {
    let s = scenario(0);
    let report = evaluate_scenario(&s);
    assert_eq!(report.cct_ps, Some(1_000_000_000 * 1000));
    let bound = lower_bound_ps(&s.topology, &s.plan, RATE, 1.0, PAYLOAD, &[]).unwrap();
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
    // Every receiver's reordering, added up: counts summed, the largest distance kept.
    let order = report.reordering;
    assert_eq!((order.arrivals, order.out_of_order), (16 * 46, 16 * 3));
    assert_eq!((order.max_distance, order.distance_sum), (3, 16 * 7));
}

/// The lab's bound, by hand: 64 KiB flows at 1 Mbit/s are 45 frames of 1 534 B (12.272 ms)
/// and one of 106 + 60 + 20 = 186 B (1.488 ms); ACKs are 80 B (0.64 ms). Frames leave the
/// shapers at the start of their slots over veths, so hops add nothing; the agents pace
/// DATA at ρ, the links run at line rate.
#[test]
fn the_lab_bound_is_paced_sending_or_line_rate_receiving() {
    let s = scenario(0);
    let bound = |load| lower_bound_ps(&s.topology, &s.plan, RATE, load, PAYLOAD, &[]).unwrap();
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
        fault_injected: false,
    })
    .unwrap();
    assert_eq!(report.drops.get("host.udp_rcvbuf"), 1);
    assert_eq!(report.drops.total, 1);
    assert_eq!(lab_of(&report).census.unaccounted, 0);
    assert_eq!(lab_of(&report).census.frames_lost, 1);
}

/// A frame a blackholed port dropped in the steering program (`drop_blackhole`, which the
/// runner adds to the snapshot under [`STEERING_PREFIX`]) accounts for the loss.
#[test]
fn a_loss_the_steering_program_counted_is_accounted_for_by_name() {
    let mut s = one_loss();
    let name = format!("{STEERING_PREFIX}drop_blackhole");
    let sample = &mut s.switches[3];
    sample.before.counters.push((name.clone(), 5));
    sample.after.counters.push((name.clone(), 6));
    let report = evaluate_scenario(&s);
    assert_eq!(report.drops.get(&name), 1);
    assert_eq!(report.drops.total, 1);
    assert_eq!(lab_of(&report).census.unaccounted, 0);
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
    assert!(lower_bound_ps(&topology, &plan, RATE, 1.0, PAYLOAD, &[])
        .unwrap_err()
        .contains("stranger"));
}

#[test]
fn every_drop_reason_is_read_under_the_name_the_switch_publishes() {
    let published = ofan_dataplane::telemetry::worker_counter_names();
    for reason in DropReason::ALL {
        let name = published_name(reason);
        assert!(
            published.contains(&name.as_str()),
            "{name} is not among the switch's counters {published:?}"
        );
    }
}

/// ρ_max of a permutation: 1 on the whole fat tree (even splitting carries any permutation), below
/// 1 once an edge has lost an uplink and its two hosts' traffic shares the other; and the same
/// failure named in the lab's terms (failed link ids) — what `run --load rho-max` uses.
#[test]
fn rho_max_follows_the_labs_failures() {
    let topology = Topology::fat_tree(4).unwrap();
    let plan = permutation(1, topology_hosts(&topology), BYTES, 5).unwrap();
    assert_eq!(rho_max(&topology, &FailedLinks::new(), &plan), Ok(1.0));
    let edge = &topology.edges()[0];
    let up = &topology.up_ports(edge.id)[0];
    let failures: FailedLinks = [up.link].into_iter().collect();
    let rho = rho_max(&topology, &failures, &plan).unwrap();
    assert!((0.5..1.0).contains(&rho), "{rho}");
    // Every uplink of an edge gone: its hosts cannot reach anyone.
    let cut: FailedLinks = topology.up_ports(edge.id).iter().map(|p| p.link).collect();
    assert!(rho_max(&topology, &cut, &plan).is_err());
}

#[test]
fn each_phase_runs_from_its_first_send_to_its_last_ack() {
    let mut s = quiet_scenario();
    s.plan.phases = vec!["reduce-scatter".into(), "all-gather".into()];
    let t0 = s.reports[0].first_send_ns.unwrap();
    for (id, flow) in s.plan.flows.iter_mut().enumerate() {
        flow.phase = u16::from(id >= 8);
    }
    for report in &mut s.reports {
        let flow = &mut report.flows[0];
        if flow.flow >= 8 {
            flow.first_send_ns = Some(t0 + 1_200_000_000 + u64::from(flow.flow));
            flow.last_ack_ns = Some(t0 + 2_000_000_000 - u64::from(flow.flow));
        }
    }
    let phases = evaluate_scenario(&s).phases;
    assert_eq!(phases.len(), 2);
    let (first, second) = (&phases[0], &phases[1]);
    assert_eq!((first.name.as_str(), first.flows), ("reduce-scatter", 8));
    assert_eq!(first.start_ps, Some(0));
    assert_eq!(first.end_ps, Some(1_000_000_000_000));
    assert_eq!(second.start_ps, Some(1_200_000_008_000));
    assert_eq!(second.end_ps, Some(1_999_999_992_000));
    assert_eq!(second.cct_ps, Some(799_999_984_000));
    // A flow not ACKed in full leaves its phase without an end.
    s.reports[15].flows[0].acks -= 1;
    let phases = evaluate_scenario(&s).phases;
    assert_eq!((phases[1].end_ps, phases[1].cct_ps), (None, None));
    assert!(phases[0].cct_ps.is_some());
    // Plans without named phases report none.
    s.plan.phases.clear();
    for flow in &mut s.plan.flows {
        flow.phase = 0;
    }
    assert!(evaluate_scenario(&s).phases.is_empty());
}
