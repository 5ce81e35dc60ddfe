//! A switch-to-switch link failing during a collective (`ModelConfig::fail_at`): what is lost,
//! that every flow recovers, when the switches stop sending into the dead link, and what the
//! adaptive-routing framework's failure notifications change. Small fat trees (k = 4); every
//! assertion is on simulated quantities.

use ofan_dataplane::lb::Algorithm;
use ofan_model::report::{LinkFailureRun, ModelRun};
use ofan_model::{run, FailureTiming, LinkFailure, ModelConfig, ModelError, RunReport, Scheme};
use ofan_topology::TopologyKind;

const ARF: [Algorithm; 3] = [Algorithm::ArfWcmp, Algorithm::ArfFlow, Algorithm::ArfPacket];

/// The drop reasons of a failing link.
const LINK_DOWN: [&str; 3] = [
    "link.down.queued",
    "link.down.in_flight",
    "link.down.unaware",
];

/// k = 4, a 1 MiB permutation (≈ 17 µs without failure) under `algorithm`; with `fail_at`, the
/// aggregation–core link a-p0-0 – c-0 fails at that time (µs).
fn config(algorithm: Algorithm, fail_at: Option<&str>) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.scheme = Scheme::Switch(algorithm);
    if let Some(at) = fail_at {
        config.fail_at = vec![format!("a-p0-0/c-0@{at}").parse().unwrap()];
    }
    config
}

fn model(report: &RunReport) -> &ModelRun {
    report.model().unwrap()
}

fn failure(report: &RunReport) -> &LinkFailureRun {
    let failures = &model(report).link_failures;
    assert_eq!(failures.len(), 1);
    &failures[0]
}

/// Frames lost at the failed link: with it, or at its dead ports.
fn lost_at_link(failed: &LinkFailureRun) -> u64 {
    failed.lost_queued + failed.lost_in_flight + failed.lost_unaware + failed.no_route
}

#[test]
fn a_link_failing_mid_run_loses_frames_and_every_flow_recovers() {
    for algorithm in [Algorithm::Ecmp, Algorithm::Ofan, Algorithm::ArfPacket] {
        let report = run(&config(algorithm, Some("3"))).unwrap();
        let failed = failure(&report);
        let name = algorithm.name();
        assert_eq!(
            (failed.from.as_str(), failed.to.as_str()),
            ("a-p0-0", "c-0")
        );
        assert_eq!(failed.at_ps, 3_000_000);
        let timing = FailureTiming::default();
        assert_eq!(failed.detected_ps, failed.at_ps + timing.detect_ps);
        assert_eq!(failed.rerouted_ps, failed.at_ps + timing.reroute_ps);
        // Frames were lost with the link and at its dead ports, and are in the drops by reason.
        assert!(lost_at_link(failed) > 0, "{name}: the failure loses frames");
        assert!(
            failed.lost_queued + failed.lost_in_flight > 0,
            "{name}: {failed:?}"
        );
        let down: u64 = LINK_DOWN.iter().map(|r| report.drops.get(r)).sum();
        assert_eq!(
            down,
            failed.lost_queued + failed.lost_in_flight + failed.lost_unaware
        );
        assert!(report.drops.get("switch.no_route") >= failed.no_route);
        let by_reason: u64 = report.drops.by_reason.values().sum();
        assert_eq!(report.drops.total, by_reason);
        // Every flow completes, every packet is delivered, and the CCT is above the bound of
        // the intact fabric.
        let packets = &report.packets;
        assert_eq!(packets.flows_complete, u64::from(report.flows), "{name}");
        assert_eq!(
            packets.data_delivered,
            16 * 256,
            "{name}: 16 flows × 256 packets"
        );
        let cct = report.cct_ps.expect("the run completes");
        assert!(cct >= report.lower_bound_ps);
        assert!(
            packets.retransmissions > 0,
            "{name}: the lost frames were sent again"
        );
        assert!(
            !model(&report).edge_uplink.applies,
            "no F.4 claim with a failure"
        );
        // The report reads back.
        let back = RunReport::from_json(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }
}

/// Once routing has reconverged no switch sends towards the dead link: the last frame lost
/// there left a queue before the reroute (its queue drained in at most one buffer's time).
#[test]
fn nothing_is_lost_at_the_dead_link_after_routing_reconverged() {
    for algorithm in [Algorithm::Ecmp, Algorithm::Jsq, Algorithm::ArfWcmp] {
        let mut config = config(algorithm, Some("3"));
        config.failure_timing = FailureTiming {
            detect_ps: 5_000_000,
            reroute_ps: 40_000_000,
        };
        let report = run(&config).unwrap();
        let failed = failure(&report);
        let link = &config.link;
        let drain = link.serialization_ps(config.buffer_bytes)
            + link.serialization_ps(u64::from(link.payload_bytes + link.header_bytes))
            + link.propagation_ps;
        let last = failed.last_loss_ps.expect("frames were lost");
        assert!(
            last <= failed.rerouted_ps + drain,
            "{}: last loss at {last} ps, rerouted at {} ps",
            algorithm.name(),
            failed.rerouted_ps
        );
        assert!(report.cct_ps.is_some());
    }
}

/// A failure after the last ACK changes nothing the collective measured.
#[test]
fn a_failure_after_the_collective_changes_nothing() {
    for algorithm in [Algorithm::Ecmp, Algorithm::Ofan, Algorithm::ArfFlow] {
        let intact = run(&config(algorithm, None)).unwrap();
        let cct = intact.cct_ps.unwrap();
        let at_us = cct / 1_000_000 + 1;
        let late = run(&config(algorithm, Some(&at_us.to_string()))).unwrap();
        assert_eq!(late.cct_ps, intact.cct_ps, "{}", algorithm.name());
        assert_eq!(late.packets, intact.packets);
        assert_eq!(late.drops, intact.drops);
        assert_eq!(late.queues, intact.queues);
        assert_eq!(lost_at_link(failure(&late)), 0);
    }
}

/// The adaptive-routing framework: both adjacent switches tell their other neighbours, who
/// apply the *failure detected* exactly `arf.delay_ps` after the detection — long before
/// routing reconverges — and steer away. Measured at k = 4, seed 1 (default timing: detection
/// 4 ms, reroute 64 ms, notification 100 µs): ECMP keeps sending into the dead path until the
/// reroute and finishes after it; every `arf-*` mode loses fewer frames at the link and
/// finishes before the reroute.
#[test]
fn arf_failure_notifications_arrive_before_routing_and_cut_the_losses() {
    let ecmp = run(&config(Algorithm::Ecmp, Some("3"))).unwrap();
    let ecmp_failed = failure(&ecmp);
    assert!(ecmp.cct_ps.unwrap() > ecmp_failed.rerouted_ps);
    assert!(ecmp_failed.learned.iter().all(|l| l.notified_ps.is_none()));
    for algorithm in ARF {
        let config = config(algorithm, Some("3"));
        let report = run(&config).unwrap();
        let failed = failure(&report);
        let name = algorithm.name();
        let notified_at = failed.detected_ps + config.arf.delay_ps;
        // c-0's neighbours but a-p0-0 (the other pods' a-pX-0) and a-p0-0's neighbours but
        // c-0 (its pod's edges, c-1): six switches, all at detection + delay.
        let notified: Vec<_> = failed
            .learned
            .iter()
            .filter(|learned| learned.detected_ps.is_none())
            .collect();
        assert_eq!(notified.len(), 6, "{name}: {notified:?}");
        assert!(notified
            .iter()
            .all(|learned| learned.notified_ps == Some(notified_at)));
        for other_pod in ["a-p1-0", "a-p2-0", "a-p3-0"] {
            assert!(notified.iter().any(|learned| learned.switch == other_pod));
        }
        assert!(
            lost_at_link(failed) < lost_at_link(ecmp_failed),
            "{name}: {} lost vs ecmp {}",
            lost_at_link(failed),
            lost_at_link(ecmp_failed)
        );
        assert!(
            report.cct_ps.unwrap() < failed.rerouted_ps,
            "{name} finishes before routing reconverges"
        );
    }
}

#[test]
fn bad_link_failures_are_rejected_by_name() {
    let refused = |text: &str| -> ModelError {
        let mut config = config(Algorithm::Ecmp, None);
        match text.parse::<LinkFailure>() {
            Ok(failure) => {
                config.fail_at = vec![failure];
                run(&config).unwrap_err()
            }
            Err(error) => error,
        }
    };
    for (text, expected) in [
        ("a-p0-0/c-9@5", "no node of that name"),
        ("a-p0-0/e-p1-0@5", "not linked"),
        ("h-p0-e0-h0/e-p0-0@5", "only switch-to-switch"),
        ("a-p0-0/c-0@-1", "0 or later"),
        ("a-p0-0/c-0", "FROM/TO@TIME_US"),
        ("a-p0-0/c-0@soon", "µs"),
    ] {
        let message = refused(text).to_string();
        assert!(message.contains(expected), "{text}: {message}");
    }
    let mut twice = config(Algorithm::Ecmp, Some("5"));
    twice.fail_at.push("c-0/a-p0-0@7".parse().unwrap());
    assert!(run(&twice).unwrap_err().to_string().contains("fails twice"));
    let mut early = config(Algorithm::Ecmp, Some("5"));
    early.failure_timing = FailureTiming {
        detect_ps: 2,
        reroute_ps: 1,
    };
    assert!(matches!(
        run(&early),
        Err(ModelError::InvalidConfig {
            field: "failure timing",
            ..
        })
    ));
}
