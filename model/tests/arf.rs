//! The adaptive-routing framework in the model (`arf-*` schemes): notification timing, the
//! reaction to a degraded link, determinism. Small fat trees (k = 4) so that they run fast
//! unoptimized; every assertion is on simulated quantities, none on wall-clock time.

use ofan_dataplane::lb::Algorithm;
use ofan_model::report::ModelRun;
use ofan_model::{run, DegradedLink, ModelConfig, ModelError, RunReport, Scheme};
use ofan_topology::TopologyKind;

const ARF: [Algorithm; 3] = [Algorithm::ArfWcmp, Algorithm::ArfFlow, Algorithm::ArfPacket];

/// k = 4 permutation of `message_bytes` under `algorithm`, with one aggregation–core link at a
/// quarter of line rate in both directions.
fn degraded(algorithm: Algorithm, message_bytes: u64) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.message_bytes = message_bytes;
    config.scheme = Scheme::Switch(algorithm);
    config.degraded = vec!["a-p0-0/c-0:0.25".parse().unwrap()];
    config
}

fn model(report: &RunReport) -> &ModelRun {
    report.model().unwrap()
}

fn json(report: &RunReport) -> String {
    serde_json::to_string(report).unwrap()
}

#[test]
fn arf_schemes_parse_and_only_they_run_the_control_plane() {
    for algorithm in ARF {
        let scheme: Scheme = algorithm.name().parse().unwrap();
        assert_eq!(scheme, Scheme::Switch(algorithm));
        assert!(scheme.uses_arf());
        assert!(Scheme::ALL.contains(&scheme));
    }
    let report = run(&degraded(Algorithm::Ecmp, 64 * 1024)).unwrap();
    assert!(model(&report).arf.is_none(), "ecmp runs no control plane");
    assert_eq!(model(&report).degraded.len(), 2, "both directions are slow");
    let report = run(&degraded(Algorithm::ArfWcmp, 64 * 1024)).unwrap();
    assert!(model(&report).arf.is_some());
}

/// Every table change a detection causes happens exactly `delay` after the detection, for two
/// different delays; the notifications are all accounted for; and the delay matters.
#[test]
fn notifications_arrive_after_exactly_the_control_plane_delay() {
    let mut reports = Vec::new();
    for delay_ps in [7_000_000, 23_000_000] {
        let mut config = degraded(Algorithm::ArfWcmp, 1 << 20);
        config.arf.delay_ps = delay_ps;
        let report = run(&config).unwrap();
        let arf = model(&report).arf.clone().unwrap();
        assert!(arf.detections > 0, "the slow link is detected");
        assert!(arf.changed > 0, "and changes some neighbour's table");
        assert_eq!(arf.reaction_min_ps, Some(delay_ps));
        assert_eq!(arf.reaction_max_ps, Some(delay_ps));
        assert_eq!(arf.reaction_mean_ps, Some(delay_ps as f64));
        assert_eq!(
            arf.sent,
            arf.applied + arf.stale,
            "every notification arrives"
        );
        assert_eq!(
            arf.bytes,
            arf.sent * 90,
            "48-byte messages in 42 bytes of headers"
        );
        // Detection happens at the end of a window.
        let first = arf.first_detection_ps.unwrap();
        assert_eq!(first % config.arf.window_ps, 0);
        assert!(first > 0);
        reports.push(json(&report));
    }
    assert_ne!(
        reports[0], reports[1],
        "the delay changes what the switches know when"
    );
}

/// A degraded core link under a permutation: arf-wcmp steers flows off it (locally at the
/// aggregation switch, remotely at the other pods' aggregation switches), so both slow
/// directions carry clearly less than under ECMP, which hashes as if the link were whole.
#[test]
fn a_degraded_core_link_carries_less_under_arf_wcmp_than_under_ecmp() {
    let ecmp = run(&degraded(Algorithm::Ecmp, 4 << 20)).unwrap();
    let wcmp = run(&degraded(Algorithm::ArfWcmp, 4 << 20)).unwrap();
    let (ecmp, wcmp) = (&model(&ecmp).degraded, &model(&wcmp).degraded);
    assert_eq!(ecmp.len(), 2);
    for (e, w) in ecmp.iter().zip(wcmp) {
        assert_eq!((&e.from, &e.to), (&w.from, &w.to));
        assert_eq!(e.rate, 0.25);
        assert!(
            (w.bytes as f64) < 0.8 * e.bytes as f64,
            "{} → {}: arf-wcmp {} B, ecmp {} B",
            e.from,
            e.to,
            w.bytes,
            e.bytes
        );
    }
}

#[test]
fn arf_runs_are_deterministic_and_seeded() {
    for algorithm in ARF {
        let config = degraded(algorithm, 256 * 1024);
        let a = run(&config).unwrap();
        let b = run(&config).unwrap();
        assert_eq!(json(&a), json(&b), "{}", algorithm.name());
        let mut other = config.clone();
        other.seed = 2;
        assert_ne!(
            json(&a),
            json(&run(&other).unwrap()),
            "{}",
            algorithm.name()
        );
    }
}

#[test]
fn degraded_links_are_checked() {
    assert!("a-p0-0/c-0".parse::<DegradedLink>().is_err(), "no rate");
    assert!(
        "a-p0-0-c-0:0.5".parse::<DegradedLink>().is_err(),
        "no separator"
    );
    let one_way: DegradedLink = "c-0>a-p1-0:0.5".parse().unwrap();
    assert_eq!(one_way.direction, ofan_model::LinkDirection::Forward);
    let mut config = degraded(Algorithm::Ecmp, 64 * 1024);
    config.degraded = vec!["a-p0-0/c-3:0.5".parse().unwrap()];
    assert!(
        matches!(run(&config), Err(ModelError::NoSuchLink { .. })),
        "a-p0-0 is not linked to c-3 at k = 4"
    );
    config.degraded = vec!["a-p0-0/c-0:0".parse().unwrap()];
    assert!(matches!(
        run(&config),
        Err(ModelError::InvalidConfig { .. })
    ));
    config.degraded = vec![one_way];
    let report = run(&config).unwrap();
    assert_eq!(model(&report).degraded.len(), 1, "one direction");
    assert_eq!(model(&report).degraded[0].from, "c-0");
}

/// `arf-flow` on the degraded core link: the congested port's heaviest flows are named to the
/// upstream switches, which move them (and only flows they were told about) off the path.
#[test]
fn arf_flow_moves_the_flows_a_congested_link_names() {
    let report = run(&degraded(Algorithm::ArfFlow, 1 << 20)).unwrap();
    let arf = model(&report).arf.clone().unwrap();
    assert!(arf.detections > 0, "the slow link is detected");
    assert!(arf.flow_sent > 0, "its flows are named: {arf:?}");
    assert!(
        arf.flow_applied > 0,
        "and some neighbour carries them there: {arf:?}"
    );
    assert!(arf.flows_moved > 0, "and moves them: {arf:?}");
    assert!(
        arf.flows_moved <= arf.flow_applied,
        "a move per request at most (hold-down): {arf:?}"
    );
    assert_eq!(
        arf.bytes,
        arf.sent * 90 + arf.flow_sent * 106,
        "flow messages are 64 bytes"
    );
    // arf-wcmp names no flows.
    let wcmp = run(&degraded(Algorithm::ArfWcmp, 1 << 20)).unwrap();
    let wcmp = model(&wcmp).arf.clone().unwrap();
    assert_eq!((wcmp.flow_sent, wcmp.flows_moved), (0, 0));
}
