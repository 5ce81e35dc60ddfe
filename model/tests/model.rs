//! Properties of the model, at small scale (k = 4…8, small messages) so that they run fast
//! unoptimized.

use ofan_dataplane::lb::Algorithm;
use ofan_model::{
    run, run_many, workload, AckAirtime, BufferLimit, Failures, FlowSpec, ModelConfig, Pacing,
    RunReport, Scheme, Stage, StartPhase, Workload,
};
use ofan_topology::{BoundSystem, Forwarding, LinkParams, SendRate, Topology, TopologyKind};
use ofan_transport::RecoveryConfig;

fn config(k: u16, message_bytes: u64, scheme: Scheme) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k };
    config.message_bytes = message_bytes;
    config.scheme = scheme;
    config
}

fn ofan() -> Scheme {
    Scheme::Switch(Algorithm::Ofan)
}

fn rsq() -> Scheme {
    Scheme::Switch(Algorithm::Rsq)
}

fn json(report: &RunReport) -> String {
    serde_json::to_string(report).expect("reports serialize")
}

#[test]
fn same_seed_is_bit_identical_and_seeds_differ() {
    for scheme in [ofan(), rsq(), Scheme::Reps, Scheme::Switch(Algorithm::Jsq)] {
        let base = config(4, 128 * 1024, scheme);
        let a = run(&base).unwrap();
        let b = run(&base).unwrap();
        assert_eq!(json(&a), json(&b), "{scheme}");
        let mut other = base.clone();
        other.seed = 2;
        let c = run(&other).unwrap();
        assert_ne!(
            json(&a),
            json(&c),
            "{scheme}: seeds 1 and 2 gave the same run"
        );
    }
}

#[test]
fn a_report_reads_back_as_the_same_value_with_its_schema_and_source() {
    let report = run(&config(4, 64 * 1024, ofan())).unwrap();
    let text = json(&report);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["schema"], ofan_model::report::SCHEMA);
    assert_eq!(value["source"], "model");
    assert!(value["config"].is_object() && value["edge_uplink"].is_object());
    assert_eq!(
        ofan_model::report::RunReport::from_json(&text).unwrap(),
        report
    );
    assert!(ofan_model::report::RunReport::from_json(&text.replace("ofan.run/2", "x")).is_err());
}

#[test]
fn parallel_runs_equal_sequential_runs() {
    let configs: Vec<ModelConfig> = [ofan(), rsq(), Scheme::Drb]
        .into_iter()
        .map(|scheme| config(4, 64 * 1024, scheme))
        .collect();
    let parallel = run_many(&configs, 3);
    for (config, result) in configs.iter().zip(parallel) {
        assert_eq!(json(&result.unwrap()), json(&run(config).unwrap()));
    }
}

/// Every data frame is delivered exactly once and every ACK returns, for every scheme, when
/// buffers are large enough.
#[test]
fn large_buffers_conserve_every_packet() {
    for workload in [
        Workload::Permutation,
        Workload::AllToAll,
        Workload::Ring { stride: 3 },
    ] {
        for scheme in Scheme::ALL {
            let mut config = config(4, 20_000, scheme);
            config.workload = workload.clone();
            config.buffer_bytes = 1 << 30;
            let report = run(&config).unwrap();
            let flows = match workload {
                Workload::AllToAll => 16 * 15,
                _ => 16,
            };
            let packets = flows * 20_000u64.div_ceil(4096);
            let counts = &report.packets;
            assert_eq!(u64::from(report.flows), flows, "{scheme} {workload:?}");
            assert_eq!(counts.flows_complete, flows, "{scheme} {workload:?}");
            assert_eq!(counts.data_sent, packets, "{scheme} {workload:?}");
            assert_eq!(counts.data_delivered, packets, "{scheme} {workload:?}");
            assert_eq!(counts.acks_sent, packets, "{scheme} {workload:?}");
            assert_eq!(counts.acks_delivered, packets, "{scheme} {workload:?}");
            assert_eq!(report.drops.total, 0);
            assert!(report.cct_ps.unwrap() >= report.lower_bound_ps, "{scheme}");
        }
    }
}

#[test]
fn cct_is_never_below_the_lower_bound() {
    for k in [4, 6] {
        for scheme in Scheme::ALL {
            let report = run(&config(k, 100_000, scheme)).unwrap();
            let cct = report.cct_ps.unwrap();
            assert!(
                cct >= report.lower_bound_ps,
                "k={k} {scheme}: {cct} < bound"
            );
            assert!(report.cct_increase.unwrap() >= 0.0);
        }
    }
}

/// A single flow meets no contention: its CCT is the lower bound for its send rate when its
/// frames all have the same size — exactly when the paced gap is a whole number of
/// picoseconds, else within the bound's rounding down (under 1 ps per gap) — at line rate and
/// below it. A shorter last frame cannot overtake the full frame ahead of it in a FIFO, which
/// the bound ignores: then the CCT exceeds it by at most (h − 1) frame times.
#[test]
fn a_lone_flow_completes_at_the_lower_bound() {
    let frame = LinkParams::paper().serialization_ps(4096 + 62 + 20);
    let topology = Topology::fat_tree(4).unwrap();
    let hosts = topology.hosts();
    for load in [1.0, 0.8, 0.5, 0.3] {
        for (dst, bytes) in [
            (15, 1u64 << 20),
            (3, 1 << 20),
            (1, 40_960),
            (1, 10_000),
            (15, 4096 * 7 + 5),
        ] {
            let flow = (hosts[0].id, hosts[dst as usize].id);
            let packets = bytes.div_ceil(4096);
            let slack = if bytes % 4096 == 0 {
                // 0 at loads 1, 0.8 and 0.5 (41 780 ps / load is whole).
                packets - 1
            } else {
                u64::from(topology.hop_count(flow.0, flow.1) - 1) * frame
            };
            for scheme in Scheme::ALL {
                let mut config = config(4, bytes, scheme);
                config.load = load;
                config.workload = Workload::Matrix {
                    flows: vec![FlowSpec { src: 0, dst, bytes }],
                };
                let report = run(&config).unwrap();
                let system = BoundSystem {
                    send_rate: SendRate::nearest(load),
                    forwarding: Forwarding::StoreAndForward,
                };
                let bound = topology.cct_lower_bound_ps(&config.link, &system, &[flow], bytes);
                assert_eq!(report.lower_bound_ps, bound);
                let cct = report.cct_ps.unwrap();
                assert!(
                    cct >= bound && cct - bound <= slack,
                    "load {load}, {scheme} to {dst}: {cct} vs {bound}"
                );
                if bytes % 4096 == 0 && load != 0.3 {
                    assert_eq!(cct, bound, "load {load}, {scheme} to {dst}");
                }
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 48,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// No run finishes below its bound: any topology (fat tree k = 4, 6; leaf-spine k = 4, 6),
    /// workload, message size, send rate ρ in [0.2, 1] (offered, or ρ × ρ_max under random
    /// link failures), host pacing rule, start phase, link timing and scheme. Buffers are
    /// unlimited so that every run completes.
    #[test]
    fn no_run_finishes_below_its_bound(
        fat_tree in proptest::bool::ANY,
        k in proptest::sample::select(vec![4u16, 6]),
        workload in 0usize..4,
        bytes in 1u64..=48 * 1024,
        load in 0.2f64..=1.0,
        failures in proptest::bool::weighted(0.25),
        reserved in proptest::bool::ANY,
        random_phase in proptest::bool::ANY,
        lab_like_link in proptest::bool::ANY,
        scheme in proptest::sample::select(Scheme::ALL.to_vec()),
        seed in 1u64..1000,
    ) {
        let mut config = config(k, bytes, scheme);
        config.topology = if fat_tree {
            TopologyKind::FatTree { k }
        } else {
            TopologyKind::LeafSpine { k }
        };
        config.workload = [
            Workload::Permutation,
            Workload::InterPodPermutation,
            Workload::AllToAll,
            Workload::Ring { stride: 1 },
        ][workload]
            .clone();
        config.load = load;
        config.buffer_limit = BufferLimit::Unlimited;
        if failures {
            config.failures = Failures::Random { probability: 0.05 };
            config.pacing = Pacing::RhoMax;
        }
        if reserved {
            config.ack_airtime = AckAirtime::Reserved;
        }
        if random_phase {
            config.start_phase = StartPhase::Random;
        }
        if lab_like_link {
            // The lab's veth framing at 1 Gb/s, no propagation delay.
            config.link = LinkParams {
                rate_bps: 1_000_000_000,
                propagation_ps: 0,
                payload_bytes: 1454,
                header_bytes: 60,
                ack_bytes: 60,
                gap_bytes: 20,
            };
        }
        config.seed = seed;
        let report = run(&config).unwrap();
        let cct = report.cct_ps.expect("unlimited buffers: every flow completes");
        proptest::prop_assert!(report.lower_bound_ps > 0);
        proptest::prop_assert!(
            cct >= report.lower_bound_ps,
            "CCT {} below the bound {} (send rate {})",
            cct,
            report.lower_bound_ps,
            report.model().unwrap().send_rate
        );
    }
}

/// Paper F.4: under Ofan, a permutation at full rate with equal-size data frames never queues
/// more than w + 1 data frames at an edge uplink, whatever the message size.
#[test]
fn ofan_edge_uplinks_stay_within_w_plus_one() {
    for (k, sizes) in [
        (4u16, &[64 * 1024, 1 << 20][..]),
        (6, &[64 * 1024, 512 * 1024][..]),
        (8, &[32 * 1024, 256 * 1024][..]),
    ] {
        for &bytes in sizes {
            for seed in 1..=3 {
                let mut config = config(k, bytes, ofan());
                config.seed = seed;
                let report = run(&config).unwrap();
                let invariant = &report.model().unwrap().edge_uplink;
                assert!(invariant.applies);
                assert_eq!(invariant.bound_data_packets, u32::from(k / 2) + 1);
                assert_eq!(
                    invariant.violations, 0,
                    "k={k} m={bytes} seed={seed}: {invariant:?}"
                );
                assert!(invariant.max_data_packets <= invariant.bound_data_packets);
            }
        }
    }
}

/// The invariant is only claimed where its conditions hold.
#[test]
fn the_edge_bound_does_not_apply_outside_its_conditions() {
    let mut all_to_all = config(4, 8192, ofan());
    all_to_all.workload = Workload::AllToAll;
    assert!(
        !run(&all_to_all)
            .unwrap()
            .model()
            .unwrap()
            .edge_uplink
            .applies
    );
    assert!(
        !run(&config(4, 8192, rsq()))
            .unwrap()
            .model()
            .unwrap()
            .edge_uplink
            .applies
    );
}

/// Small-scale Fig. 4 classes: Ofan's max queue stays flat as messages grow 16×, RSQ's grows.
#[test]
fn ofan_queues_stay_flat_while_rsq_queues_grow() {
    let max_queue = |scheme, bytes| -> f64 {
        (1..=3)
            .map(|seed| {
                let mut config = config(6, bytes, scheme);
                config.seed = seed;
                run(&config).unwrap().max_queue_bytes as f64
            })
            .sum::<f64>()
            / 3.0
    };
    let (small, large) = (64 * 1024, 1 << 20);
    let ofan_growth = max_queue(ofan(), large) / max_queue(ofan(), small);
    let rsq_growth = max_queue(rsq(), large) / max_queue(rsq(), small);
    assert!(ofan_growth < 1.5, "ofan grew {ofan_growth}×");
    assert!(rsq_growth > 2.0, "rsq grew only {rsq_growth}×");
    assert!(max_queue(ofan(), large) * 3.0 < max_queue(rsq(), large));
}

/// Tiny buffers drop many frames (ACKs too); the hosts' selective repeat recovers every one.
#[test]
fn small_buffers_drop_and_recover() {
    let mut config = config(4, 256 * 1024, Scheme::Switch(Algorithm::Ecmp));
    config.buffer_bytes = 2 * (4096 + 62);
    let report = run(&config).unwrap();
    let counts = &report.packets;
    assert!(report.drops.get("switch.buffer") > 0);
    assert_eq!(counts.flows_complete, u64::from(report.flows));
    assert!(report.cct_ps.is_some());
    assert_eq!(
        counts.data_sent + counts.acks_sent,
        counts.data_delivered + counts.duplicate_data + counts.acks_delivered + report.drops.total
    );
    let packets = 16 * (256 * 1024u64).div_ceil(4096);
    assert_eq!(counts.data_sent, packets + counts.retransmissions);
    assert_eq!(counts.data_delivered, packets);
    assert_eq!(counts.acks_delivered - counts.duplicate_acks, packets);
    assert!(report
        .queues
        .iter()
        .filter(|stats| stats.stage.is_switch())
        .all(|stats| stats.max_bytes <= config.buffer_bytes));
}

#[test]
fn failed_links_are_avoided_and_paced_at_rho_max() {
    let topology = Topology::fat_tree(4).unwrap();
    // The first edge's first up-link and one aggregation-core link of pod 1.
    let edge_up = topology.hosts().len() as u32;
    let agg_core = edge_up + 16 + 5;
    for scheme in [
        ofan(),
        Scheme::Switch(Algorithm::Pofan),
        Scheme::Drb,
        Scheme::Reps,
        rsq(),
    ] {
        let mut config = config(4, 64 * 1024, scheme);
        config.failures = Failures::Links {
            links: vec![edge_up, agg_core],
        };
        config.pacing = Pacing::RhoMax;
        let report = run(&config).unwrap();
        let rho = report.model().unwrap().rho_max.unwrap();
        assert!(rho < 1.0 && rho > 0.0, "{rho}");
        assert_eq!(report.model().unwrap().send_rate, rho);
        assert_eq!(report.drops.get("switch.no_route"), 0, "{scheme}");
        assert_eq!(report.packets.flows_complete, 16, "{scheme}");
        assert_eq!(
            report.model().unwrap().failed_links,
            vec![edge_up, agg_core]
        );
    }
}

#[test]
fn random_failures_are_reproducible() {
    let mut config = config(6, 32 * 1024, ofan());
    config.failures = Failures::Random { probability: 0.05 };
    config.pacing = Pacing::RhoMax;
    let a = run(&config).unwrap();
    assert_eq!(json(&a), json(&run(&config).unwrap()));
    assert_eq!(a.packets.flows_complete, u64::from(a.flows));
}

#[test]
fn leaf_spine_runs_every_scheme() {
    for scheme in Scheme::ALL {
        let mut config = config(6, 64 * 1024, scheme);
        config.topology = TopologyKind::LeafSpine { k: 6 };
        let report = run(&config).unwrap();
        assert_eq!(report.packets.flows_complete, 18, "{scheme}");
        assert_eq!(report.stage(Stage::AggUp).unwrap().ports, 0);
        if scheme == ofan() {
            assert_eq!(report.model().unwrap().edge_uplink.violations, 0);
        }
    }
}

#[test]
fn lower_load_paces_hosts() {
    let mut config = config(4, 256 * 1024, ofan());
    config.load = 0.5;
    let half = run(&config).unwrap();
    let full = run(&self::config(4, 256 * 1024, ofan())).unwrap();
    // 64 frames at half rate take 63 extra frame times (the propagation part is unchanged).
    let frame = LinkParams::paper().serialization_ps(4096 + 62 + 20);
    assert!(half.cct_ps.unwrap() >= full.cct_ps.unwrap() + 60 * frame);
    assert!(
        (half.utilization - 0.5).abs() < 0.05,
        "{}",
        half.utilization
    );
    assert!(full.utilization > 0.9, "{}", full.utilization);
}

#[test]
fn workloads_have_their_shape() {
    let topology = Topology::fat_tree(6).unwrap();
    let hosts = topology.hosts();
    let perm = workload::flows(&topology, &Workload::Permutation, 1000, 7).unwrap();
    assert_eq!(perm.len(), hosts.len());
    let mut dsts: Vec<u32> = perm.iter().map(|flow| flow.dst).collect();
    dsts.sort_unstable();
    assert_eq!(dsts, (0..hosts.len() as u32).collect::<Vec<_>>());
    assert!(perm.iter().all(|flow| flow.src != flow.dst));
    let inter = workload::flows(&topology, &Workload::InterPodPermutation, 1000, 7).unwrap();
    assert_eq!(inter.len(), hosts.len());
    assert!(inter
        .iter()
        .all(|flow| hosts[flow.src as usize].pod != hosts[flow.dst as usize].pod));
    let matrix = workload::parse_matrix("# comment\n0 5 100\n0 5 50\n\n3 4\n", 7).unwrap();
    assert_eq!(matrix.len(), 3);
    let flows = workload::flows(&topology, &Workload::Matrix { flows: matrix }, 0, 1).unwrap();
    assert_eq!(
        flows,
        vec![
            FlowSpec {
                src: 0,
                dst: 5,
                bytes: 150
            },
            FlowSpec {
                src: 3,
                dst: 4,
                bytes: 7
            }
        ]
    );
    assert!(workload::parse_matrix("0 x", 1).is_err());
    assert!(workload::flows(
        &topology,
        &Workload::Matrix {
            flows: vec![FlowSpec {
                src: 0,
                dst: 999,
                bytes: 1
            }]
        },
        0,
        1
    )
    .is_err());
}

/// The paper's periodic sources: ACK airtime reserved on a fixed schedule, random phases.
fn periodic(mut config: ModelConfig) -> ModelConfig {
    config.ack_airtime = AckAirtime::Reserved;
    config.start_phase = StartPhase::Random;
    config
}

#[test]
fn host_pacing_options_are_deterministic() {
    for scheme in [rsq(), Scheme::Switch(Algorithm::Rr), Scheme::Spray] {
        let base = periodic(config(4, 128 * 1024, scheme));
        assert_eq!(json(&run(&base).unwrap()), json(&run(&base).unwrap()));
        let mut other = base.clone();
        other.seed = 2;
        assert_ne!(json(&run(&base).unwrap()), json(&run(&other).unwrap()));
    }
}

/// Two hosts exchange 1 MiB (256 frames each way). Reserved, each leaves one ACK time after
/// every data frame, so the last frame leaves 255 ACK times later than at line rate; charged,
/// the hosts send at line rate until the first ACK comes back, so the CCT lies between.
#[test]
fn reserved_ack_airtime_slows_data_by_one_ack_per_frame() {
    let link = LinkParams::paper();
    let ack = link.serialization_ps(64 + 20);
    let exchange = |ack_airtime| {
        let mut config = config(4, 1 << 20, ofan());
        config.ack_airtime = ack_airtime;
        config.workload = Workload::Matrix {
            flows: vec![
                FlowSpec {
                    src: 0,
                    dst: 15,
                    bytes: 1 << 20,
                },
                FlowSpec {
                    src: 15,
                    dst: 0,
                    bytes: 1 << 20,
                },
            ],
        };
        let report = run(&config).unwrap();
        assert_eq!(report.packets.flows_complete, 2, "{ack_airtime:?}");
        (report.cct_ps.unwrap(), report.lower_bound_ps)
    };
    // Within a frame time, as for a lone flow: the last ACK can meet the other flow's data.
    let frame = link.serialization_ps(4096 + 62 + 20);
    let (reserved, bound) = exchange(AckAirtime::Reserved);
    let expected = bound + 255 * ack;
    assert!(
        reserved.abs_diff(expected) <= frame,
        "{reserved} vs {expected}"
    );
    let (charged, _) = exchange(AckAirtime::Charged);
    assert!(charged > bound && charged < reserved, "{charged}");
}

/// Both ACK rules mean the same load: data at `load` × line rate while the ACKs fit in the
/// slack; at load 1, data plus ACKs at line rate (data frames of 4178 wire bytes, ACKs of 84).
#[test]
fn load_is_the_data_rate_under_both_ack_rules() {
    for ack_airtime in [AckAirtime::Charged, AckAirtime::Reserved] {
        let mut half = config(4, 1 << 20, ofan());
        half.ack_airtime = ack_airtime;
        half.load = 0.5;
        let utilization = run(&half).unwrap().utilization;
        assert!(
            (utilization - 0.5).abs() < 0.01,
            "{ack_airtime:?}: {utilization}"
        );
    }
    let mut full = periodic(config(4, 1 << 20, ofan()));
    full.load = 1.0;
    let utilization = run(&full).unwrap().utilization;
    let share = 4178.0 / (4178.0 + 84.0);
    assert!(
        (utilization - share).abs() < 0.01,
        "{utilization} vs {share}"
    );
}

/// Paper Thm. 2: with strictly periodic senders at distinct phases, Simple RR sends each flow
/// through one edge up-port for the whole run (the uplinks are exactly balanced), so colliding
/// flows meet on the downlinks for the whole run and the max queue grows linearly with m.
#[test]
fn periodic_senders_stick_to_their_ports_under_simple_rr() {
    let max_queue = |bytes| {
        let mut config = periodic(config(6, bytes, Scheme::Switch(Algorithm::Rr)));
        config.workload = Workload::InterPodPermutation;
        config.buffer_limit = BufferLimit::Unlimited;
        let report = run(&config).unwrap();
        assert!(
            report.stage(Stage::EdgeUp).unwrap().link_overload < 0.01,
            "{bytes}"
        );
        report.max_queue_bytes as f64
    };
    let growth = max_queue(1 << 20) / max_queue(256 * 1024);
    assert!(growth > 3.5, "grew {growth}× for 4× the message");
}

/// Outputs of runs that lose nothing, recorded before the hosts recovered losses: recovery must
/// not change a single event of them. (Every row but DRB's was recorded again, from the merged
/// code, when switches got seeds of their own: ECMP salts, pointer starts and tie-breaks
/// changed. From then on they pin the loss-free path.) (scheme, buffer limit, message bytes, cct_ps, events,
/// max_queue_bytes), k = 4, seed 1.
const NO_LOSS_BEFORE_RECOVERY: [(Scheme, BufferLimit, u64, u64, u64, u64); 6] = [
    (
        Scheme::Switch(Algorithm::Ecmp),
        BufferLimit::Unlimited,
        256 << 10,
        11_602_100,
        11_008,
        270_718,
    ),
    (
        Scheme::Switch(Algorithm::Ofan),
        BufferLimit::Enforced,
        1 << 20,
        17_170_420,
        44_032,
        16_952,
    ),
    (
        Scheme::Reps,
        BufferLimit::Unlimited,
        256 << 10,
        9_390_060,
        11_008,
        54_118,
    ),
    (
        Scheme::Drb,
        BufferLimit::Enforced,
        256 << 10,
        9_054_980,
        11_008,
        16_632,
    ),
    (
        Scheme::Switch(Algorithm::Jsq),
        BufferLimit::Unlimited,
        256 << 10,
        9_279_840,
        11_008,
        41_900,
    ),
    (
        Scheme::Spray,
        BufferLimit::Enforced,
        256 << 10,
        9_390_060,
        11_008,
        54_118,
    ),
];

#[test]
fn runs_without_loss_are_unchanged_by_recovery() {
    for (scheme, limit, bytes, cct, events, max_queue) in NO_LOSS_BEFORE_RECOVERY {
        let mut config = config(4, bytes, scheme);
        config.buffer_limit = limit;
        let report = run(&config).unwrap();
        let counts = &report.packets;
        assert_eq!(report.drops.get("switch.buffer"), 0, "{scheme}");
        assert_eq!(
            (
                counts.retransmissions,
                counts.timeouts,
                counts.duplicate_data,
                counts.duplicate_acks
            ),
            (0, 0, 0, 0),
            "{scheme}"
        );
        assert_eq!(
            (
                report.cct_ps,
                report.model().unwrap().events,
                report.model().unwrap().end_ps,
                report.max_queue_bytes
            ),
            (Some(cct), events, cct, max_queue),
            "{scheme} {limit:?}"
        );
    }
}

/// Unlimited buffers lose nothing, so nothing is ever retransmitted, whatever the queues
/// (ECMP and RR build the deepest).
#[test]
fn unlimited_buffers_never_retransmit() {
    for workload in [Workload::Permutation, Workload::AllToAll] {
        for scheme in Scheme::ALL {
            let mut config = config(4, 128 * 1024, scheme);
            config.workload = workload.clone();
            config.buffer_limit = BufferLimit::Unlimited;
            let report = run(&config).unwrap();
            let counts = &report.packets;
            assert_eq!(
                counts.flows_complete,
                u64::from(report.flows),
                "{scheme} {workload:?}"
            );
            assert_eq!(counts.retransmissions, 0, "{scheme} {workload:?}");
            assert_eq!(counts.duplicate_data + counts.duplicate_acks, 0);
        }
    }
}

/// With the paper's drop-tail buffers scaled down, ECMP drops; every flow still completes,
/// later than with buffers that never drop, and every lost frame was sent again.
#[test]
fn enforced_small_buffers_recover_every_drop() {
    for seed in 1..=3 {
        let mut config = config(4, 256 * 1024, Scheme::Switch(Algorithm::Ecmp));
        config.buffer_bytes = 64 << 10;
        config.seed = seed;
        let lossy = run(&config).unwrap();
        config.buffer_limit = BufferLimit::Unlimited;
        let lossless = run(&config).unwrap();
        let counts = &lossy.packets;
        assert!(lossy.drops.get("switch.buffer") > 0, "seed {seed}: no drop");
        assert_eq!(counts.flows_complete, u64::from(lossy.flows), "seed {seed}");
        // Every dropped frame (DATA, or the ACK of a DATA frame) leaves its packet unACKed
        // until a timeout sends it again.
        assert!(
            counts.retransmissions >= lossy.drops.get("switch.buffer"),
            "seed {seed}"
        );
        assert!(
            counts.timeouts >= lossy.drops.get("switch.buffer"),
            "seed {seed}"
        );
        assert!(
            lossy.cct_ps.unwrap() > lossless.cct_ps.unwrap(),
            "seed {seed}"
        );
        assert_eq!(lossless.packets.retransmissions, 0);
    }
}

/// Timers from the configuration are the ones used: far shorter than the round trip, they fire
/// without any loss, and the copies are counted (and the run still completes).
#[test]
fn configured_timers_apply_and_spurious_copies_are_counted() {
    let mut config = config(4, 256 * 1024, Scheme::Switch(Algorithm::Ecmp));
    config.buffer_limit = BufferLimit::Unlimited;
    config.recovery = Some(RecoveryConfig {
        rto_min: 1_000,
        rto_initial: 1_000,
        rto_max: 1_000_000,
    });
    let report = run(&config).unwrap();
    let counts = &report.packets;
    assert_eq!(report.drops.get("switch.buffer"), 0);
    assert!(counts.retransmissions > 0);
    assert!(counts.duplicate_data > 0);
    assert!(counts.duplicate_acks > 0);
    assert_eq!(counts.flows_complete, u64::from(report.flows));
    let json = serde_json::to_string(&report.model().unwrap().config).unwrap();
    assert!(json.contains("\"rto_min\":1000"), "{json}");
    let mut default = config.clone();
    default.recovery = None;
    let json = serde_json::to_string(&default).unwrap();
    assert!(
        !json.contains("recovery"),
        "absent when unset, as in older reports"
    );
}

#[test]
fn invalid_configurations_are_rejected() {
    let mut bad = config(4, 1000, ofan());
    bad.load = 1.5;
    assert!(run(&bad).is_err());
    let mut bad = config(4, 1000, ofan());
    bad.buffer_bytes = 100;
    assert!(run(&bad).is_err());
    let mut bad = config(4, 1000, ofan());
    bad.recovery = Some(RecoveryConfig {
        rto_min: 0,
        rto_initial: 10,
        rto_max: 100,
    });
    assert!(run(&bad).is_err());
    assert!("nope".parse::<Scheme>().is_err());
    assert_eq!("DRB".parse::<Scheme>().unwrap(), Scheme::Drb);
}
