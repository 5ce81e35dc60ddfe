//! Workloads with dependencies: htsim's connection matrices (fixtures in `tests/fixtures`)
//! and ring collectives, at k = 4.

use ofan_model::collective::{Collective, CollectiveKind, RingOrder};
use ofan_model::{htsim, run, ModelConfig, ModelError, RunReport, Workload};
use ofan_topology::TopologyKind;

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn htsim_run(text: &str) -> RunReport {
    let matrix = htsim::parse(text).unwrap();
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.workload = Workload::Htsim {
        nodes: matrix.nodes,
        graph: matrix.graph,
    };
    run(&config).unwrap()
}

fn ring(kind: CollectiveKind, gpus_per_server: u32, bytes: u64) -> RunReport {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.message_bytes = bytes;
    config.workload = Workload::Collective {
        collective: Collective {
            kind,
            gpus_per_server,
            order: RingOrder::Random,
        },
    };
    run(&config).unwrap()
}

fn parse_error(text: &str) -> (usize, String) {
    match htsim::parse(text) {
        Err(ModelError::Matrix { line, reason }) => (line, reason),
        other => panic!("expected a matrix error, got {other:?}"),
    }
}

#[test]
fn htsims_all_reduce_file_runs_unchanged() {
    // Written by htsim's own generator (gen_allreduce.py 16 nodes, groups of 4, 64 KiB).
    let text = fixture("htsim-allreduce-16n-4g.cm");
    assert!(htsim::is_htsim(&text));
    let report = htsim_run(&text);
    assert_eq!(report.flows, 112);
    assert_eq!(report.packets.flows_complete, 112);
    let cct = report.cct_ps.expect("every flow completes");
    // Each group's chain is 7 flows in a row, each waiting for the previous one's last ACK:
    // at least 7 round trips of a 64 KiB flow's last frame, far more than the flows' bytes
    // alone would take (the bound ignores the waits).
    assert!(
        cct > 3 * report.lower_bound_ps,
        "{cct} vs {}",
        report.lower_bound_ps
    );
    let phases = &report.phases;
    assert_eq!(phases.len(), 1);
    assert_eq!(phases[0].cct_ps, Some(cct));
}

#[test]
fn a_chained_flow_waits_for_the_first_to_be_sent() {
    let single = htsim_run("Nodes 16\nConnections 1\n0->5 id 1 start 0 size 100000\n");
    let chain = htsim_run(
        "Nodes 16\nConnections 2\nTriggers 1\n\
         0->5 id 1 start 0 size 100000 send_done_trigger 1\n\
         5->9 id 2 trigger 1 size 100000\n\
         trigger id 1 oneshot\n",
    );
    let (one, two) = (single.cct_ps.unwrap(), chain.cct_ps.unwrap());
    // The second flow starts at the first's completion and takes as long (same path
    // length, nothing else in the fabric).
    assert!(
        two >= 2 * one - one / 50 && two <= 2 * one + one / 50,
        "{one} {two}"
    );
    // A start time delays a flow by exactly that much.
    let late = htsim_run("Nodes 16\nConnections 1\n0->5 id 1 start 3000000 size 100000\n");
    assert_eq!(late.cct_ps.unwrap(), one + 3_000_000);
}

#[test]
fn barriers_and_multishots_follow_htsim() {
    let report = htsim_run(&fixture("htsim-barrier-16n.cm"));
    assert_eq!(report.packets.flows_complete, 6);
    // Two flow ends activate the barrier: a count of 1 is one activation too many for htsim.
    let early = fixture("htsim-barrier-16n.cm").replace("barrier count 2", "barrier count 1");
    let error = htsim::parse(&early).unwrap_err().to_string();
    assert!(error.contains("past the count"), "{error}");
}

#[test]
fn errors_name_the_line_and_the_problem() {
    let cases = [
        (
            "Nodes 4\nConnections 1\n0->4 start 0 size 10\n",
            3,
            "not below Nodes 4",
        ),
        (
            "Nodes 4\nConnections 1\n0->1 size 10\n",
            3,
            "no `start T` and no `trigger T`",
        ),
        ("Nodes 4\nConnections 1\n0->1 start 0\n", 3, "no `size`"),
        (
            "Nodes 4\nConnections 1\n0->1 start 0 size 10 speed 3\n",
            3,
            "unknown word `speed`",
        ),
        (
            "Nodes 4\nConnections 1\n0->1 start x size 10\n",
            3,
            "`start x`",
        ),
        (
            "Nodes 4\nConnections 2\n0->1 start 0 size 10\n",
            3,
            "Connections 2, the file has 1",
        ),
        (
            "Nodes 4\nConnections 1\n0->1 id 1 trigger 1 size 10\n",
            3,
            "trigger 1 is used but never defined",
        ),
        (
            "Nodes 4\nConnections 1\nTriggers 1\n0->1 trigger 1 size 10\ntrigger id 1 oneshot\n",
            4,
            "needs an `id`",
        ),
        (
            "Nodes 4\nConnections 2\nTriggers 1\n\
             0->1 id 1 start 0 size 10\n1->2 id 2 trigger 1 size 10\ntrigger id 1 oneshot\n",
            5,
            "never starts",
        ),
        (
            "Nodes 4\nConnections 2\n0->1 id 1 start 0 size 10\n1->2 id 1 start 0 size 10\n",
            4,
            "already used on line 3",
        ),
        (
            "Nodes 4\nConnections 1\n2->2 start 0 size 10\n",
            3,
            "to itself",
        ),
        (
            "Nodes 4\nConnections 0\nfailure switch_type TOR\n",
            3,
            "not modelled",
        ),
        (
            "Nodes 4\nConnections 1\nTriggers 1\n0->1 start 0 size 10\ntrigger id 1 barrier\n",
            5,
            "needs `count C`",
        ),
    ];
    for (text, line, fragment) in cases {
        let (got_line, reason) = parse_error(text);
        assert_eq!(got_line, line, "{text}: {reason}");
        assert!(
            reason.contains(fragment),
            "{text}: `{reason}` lacks `{fragment}`"
        );
    }
}

#[test]
fn ring_steps_wait_for_the_previous_chunk() {
    let bytes = 1 << 20;
    let all_reduce = ring(CollectiveKind::AllReduce, 1, bytes);
    let phases = &all_reduce.phases;
    assert_eq!(phases.len(), 2);
    assert_eq!(phases[0].name, "reduce-scatter");
    assert_eq!(phases[1].name, "all-gather");
    assert_eq!(phases[0].flows, 16 * 15);
    let (rs, ag) = (phases[0].cct_ps.unwrap(), phases[1].cct_ps.unwrap());
    let cct = all_reduce.cct_ps.unwrap();
    assert_eq!(phases[1].end_ps, Some(cct));
    // The all-gather starts before the reduce-scatter is over everywhere (per member),
    // but not before the first member's reduce-scatter.
    assert!(phases[1].start_ps.unwrap() > 0);
    assert!(cct <= rs + ag && cct > rs.max(ag));
    // 15 sequential steps each cost at least a chunk's frames plus the path's propagation
    // (at least two links of 0.5 µs): the steps do wait for each other.
    let step = 2 * 500_000 + (bytes / 16) * 8 * 1000 / 800;
    assert!(rs >= 15 * step, "{rs} < 15 × {step}");
    // The one-phase collectives take about one phase of the all-reduce.
    let all_gather = ring(CollectiveKind::AllGather, 1, bytes).cct_ps.unwrap();
    assert!(all_gather >= 15 * step && all_gather < cct);
}

#[test]
fn hierarchical_rings_cross_the_fabric_between_servers_only() {
    let report = ring(CollectiveKind::ReduceScatter, 2, 1 << 20);
    // 2 rings of 8 servers, 7 steps each.
    assert_eq!(report.flows, 2 * 8 * 7);
    assert_eq!(report.packets.flows_complete, u64::from(report.flows));
    let flat = ring(CollectiveKind::ReduceScatter, 1, 1 << 20);
    // Fewer, equally small steps: the fabric's part of the collective is shorter.
    assert!(report.cct_ps.unwrap() < flat.cct_ps.unwrap());
}

/// MoE dispatch at k = 8: one flow per (GPU, remote server), every one delivered; the
/// busiest receiver's bytes bound the CCT.
#[test]
fn moe_dispatch_runs_and_its_skew_shows_at_the_receivers() {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 8 };
    config.link.payload_bytes = 64 * 1024;
    let moe = |skew_permille| ofan_model::moe::Moe {
        skew_permille,
        token_bytes: 82,
        ..ofan_model::moe::Moe::paper()
    };
    config.workload = Workload::Moe { moe: moe(1480) };
    let skewed = run(&config).unwrap();
    assert_eq!(skewed.flows, 128 * 15);
    assert_eq!(skewed.packets.flows_complete, 128 * 15);
    config.workload = Workload::Moe { moe: moe(1130) };
    let even = run(&config).unwrap();
    // The busiest receiver sets the bound: more skew, a later bound.
    assert!(skewed.lower_bound_ps > even.lower_bound_ps);
}

/// A host that received a flow (sending its ACKs, nothing of its own) and then starts one: the
/// ACKs of the wait had the link to themselves, so its flow takes as long as the same flow
/// alone — as the lab agent paces it. On the lab's frames (1 Gb/s, no propagation), 722 ACKs
/// charged to its first frame would hold it back by 722 ACK times (462 µs), far more than the
/// first flow's last ACK takes to return (what the second flow gains by starting at arrival).
#[test]
fn the_acks_of_a_wait_do_not_delay_the_flow_after_it() {
    let run_on_lab_frames = |text: &str| {
        let matrix = htsim::parse(text).unwrap();
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 4 };
        config.link = ofan_topology::LinkParams {
            rate_bps: 1_000_000_000,
            propagation_ps: 0,
            payload_bytes: 1454,
            header_bytes: 60,
            ack_bytes: 60,
            gap_bytes: 20,
        };
        config.workload = Workload::Htsim {
            nodes: matrix.nodes,
            graph: matrix.graph,
        };
        run(&config).unwrap().cct_ps.expect("complete")
    };
    let chain = run_on_lab_frames(
        "Nodes 16\nConnections 2\nTriggers 1\n\
         0->15 id 1 start 0 size 1048576 recv_done_trigger 1\n\
         15->0 id 2 trigger 1 size 1048576\n\
         trigger id 1 oneshot\n",
    );
    let alone =
        run_on_lab_frames("Nodes 16\nConnections 1\nTriggers 0\n0->15 id 1 start 0 size 1048576\n");
    assert!(
        chain < 2 * alone,
        "two flows in a row took {chain} ps, one alone {alone} ps"
    );
}
