//! The FSDP2 backward pass (paper §6.7) at small scale: k = 8 (128 GPUs, 16 servers of 8),
//! a few layers — every flow completes under congestion control, the phases open in window
//! order, and Fig. 14's figure has its structure.

use ofan_dataplane::lb::Algorithm;
use ofan_model::figures::{training, Sweep};
use ofan_model::fsdp::{Fsdp, Llama, WindowGate};
use ofan_model::{run, CcKind, ModelConfig, RunReport, Scheme, Workload};
use ofan_topology::TopologyKind;

fn config(fsdp: Fsdp, cc: CcKind, scheme: Scheme) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 8 };
    config.cc = cc;
    config.scheme = scheme;
    config.workload = Workload::Fsdp { fsdp };
    config
}

fn small(layers: u32) -> Fsdp {
    Fsdp {
        layers,
        ..Llama::B8.fsdp()
    }
}

fn phases(report: &RunReport) -> &[ofan_model::PhaseRun] {
    &report.phases
}

#[test]
fn every_flow_of_every_layer_completes_under_nscc_and_mswift() {
    for cc in [CcKind::Nscc, CcKind::Mswift] {
        for scheme in [Scheme::Reps, Scheme::Switch(Algorithm::Ofan)] {
            let report = run(&config(small(3), cc, scheme)).unwrap();
            // 128 GPUs × 3 layers × (all-gather + reduce-scatter).
            assert_eq!(report.flows, 128 * 6, "{cc:?} {scheme:?}");
            assert_eq!(report.packets.flows_complete, 128 * 6);
            let cct = report.cct_ps.expect("every flow completes");
            assert!(cct >= report.lower_bound_ps);
            let names: Vec<&str> = phases(&report).iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "all-gather 2",
                    "reduce-scatter 2",
                    "all-gather 1",
                    "reduce-scatter 1",
                    "all-gather 0",
                    "reduce-scatter 0"
                ]
            );
            for phase in phases(&report) {
                assert_eq!(phase.flows, 128, "{}", phase.name);
                assert!(phase.cct_ps.is_some_and(|c| c > 0), "{}", phase.name);
            }
        }
    }
}

#[test]
fn a_layer_waits_for_the_one_before() {
    let report = run(&config(
        small(3),
        CcKind::Nscc,
        Scheme::Switch(Algorithm::Ofan),
    ))
    .unwrap();
    let phases = phases(&report);
    let start = |i: usize| phases[i].start_ps.unwrap();
    // Window 0 (all-gather 2) starts at 0; window 1 (reduce-scatter 2 and all-gather 1)
    // starts only once some GPU has all of all-gather 2, i.e. after one flow's time.
    assert_eq!(start(0), 0);
    let one_flow_ps = 119 * 4096 * 8 * 1000 / 800;
    assert!(start(1) >= one_flow_ps, "{} < {one_flow_ps}", start(1));
    assert_eq!(start(1), start(2), "a window's two flows start together");
    // Every GPU starts window w + 1 after it received window w: the first start of a window
    // follows the first end of the window before.
    // Windows: phase 0 → 0; 1, 2 → 1; 3, 4 → 2; 5 → 3.
    for (before, after) in [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5)] {
        assert!(
            start(after) >= start(before) + one_flow_ps,
            "phase {after} before {before}"
        );
    }
    // The backward pass ends with layer 0's reduce-scatter.
    assert_eq!(
        report.cct_ps.unwrap(),
        phases.iter().filter_map(|p| p.end_ps).max().unwrap()
    );
}

#[test]
fn fig14_has_a_point_per_cca_model_and_scheme() {
    let mut base = ModelConfig::paper();
    base.topology = TopologyKind::FatTree { k: 8 };
    let sweep = Sweep {
        base,
        seeds: 1,
        threads: 2,
    };
    let schemes = [
        Scheme::Switch(Algorithm::Ar),
        Scheme::Switch(Algorithm::Ofan),
    ];
    let fig = training(
        &sweep,
        &[Llama::B8],
        Some(1),
        WindowGate::Received,
        &[CcKind::Nscc, CcKind::Mswift],
        &schemes,
    )
    .unwrap();
    assert_eq!(fig.name, "fig14");
    assert_eq!(fig.x_categories, ["ar", "ofan"]);
    assert_eq!(fig.points.len(), 4);
    let series: Vec<&str> = fig.points.iter().map(|p| p.series.as_str()).collect();
    assert_eq!(series, ["nscc 8b", "nscc 8b", "mswift 8b", "mswift 8b"]);
    for point in &fig.points {
        for metric in [
            "cct_increase_pct",
            "all_gather_cct_us",
            "reduce_scatter_cct_us",
            "utilization",
            "max_queue_kb",
        ] {
            let value = point.metrics.get(metric).map(|s| s.mean);
            assert!(value.is_some_and(|v| v >= 0.0), "{metric}: {value:?}");
        }
        // A layer's phase is part of the pass.
        let m = |name: &str| point.metrics[name].mean;
        assert!(m("all_gather_cct_us") < m("cct_us"));
        assert!(m("reduce_scatter_cct_us") < m("cct_us"));
    }
    assert!(
        fig.notes
            .iter()
            .any(|n| n.contains("nscc 8b") && n.contains("cut")),
        "{:?}",
        fig.notes
    );
}

#[test]
fn the_bound_counts_one_path_per_window() {
    let config = config(small(3), CcKind::Nscc, Scheme::Switch(Algorithm::Ofan));
    let report = run(&config).unwrap();
    let link = &config.link;
    let frame_ps = link.serialization_ps(4096 + u64::from(link.header_bytes + link.gap_bytes));
    // 3 layers: 6 flows of 119 frames from every GPU, and 4 windows, each ending with its last
    // frame crossing at least 4 links (a server is two whole edge switches at k = 8).
    let sending = 6 * 119 * frame_ps;
    let waits = 4 * 4 * link.propagation_ps;
    assert!(
        report.lower_bound_ps >= sending + waits,
        "{} < {sending} + {waits}",
        report.lower_bound_ps
    );
    assert!(report.cct_ps.unwrap() >= report.lower_bound_ps);
}
