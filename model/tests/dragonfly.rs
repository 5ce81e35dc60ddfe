//! The dragonfly model against the textbook (Kim, Dally, Scott, Abts 2008): minimal routing
//! collapses under the adversarial pattern, Valiant halves uniform throughput, UGAL gets both.

use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_model::dragonfly::{run_dragonfly, DragonflyConfig, DragonflyReport, DragonflyWorkload};

fn run(scheme: DragonflyScheme, workload: DragonflyWorkload) -> DragonflyReport {
    let config = DragonflyConfig {
        scheme,
        workload,
        message_bytes: 1 << 20,
        ..DragonflyConfig::small()
    };
    run_dragonfly(&config).unwrap()
}

#[test]
fn every_packet_arrives_no_earlier_than_the_bound_and_runs_replay() {
    for scheme in DragonflyScheme::ALL {
        for workload in [
            DragonflyWorkload::Uniform,
            DragonflyWorkload::Permutation,
            DragonflyWorkload::Adversarial,
        ] {
            let report = run(scheme, workload);
            assert_eq!(report.packets, 72 * 256, "{scheme} {workload}");
            assert!(
                report.cct_ps >= report.lower_bound_ps,
                "{scheme} {workload}"
            );
            assert_eq!(report, run(scheme, workload), "{scheme} {workload} replays");
        }
    }
}

#[test]
fn minimal_takes_one_global_hop_and_valiant_two() {
    let min = run(DragonflyScheme::Min, DragonflyWorkload::Uniform);
    assert_eq!((min.minimal_share, min.mean_global_hops), (1.0, 1.0));
    let valiant = run(DragonflyScheme::Valiant, DragonflyWorkload::Uniform);
    assert_eq!(
        (valiant.minimal_share, valiant.mean_global_hops),
        (0.0, 2.0)
    );
}

#[test]
fn the_textbook_result_appears() {
    use DragonflyScheme::{Min, UgalG, UgalL, Valiant};
    use DragonflyWorkload::{Adversarial, Uniform};
    let throughput = |scheme, workload| run(scheme, workload).throughput;
    // MIN under the adversarial pattern: a group's 8 hosts share one global link, 1/8.
    let min_adversarial = throughput(Min, Adversarial);
    assert!((0.10..0.15).contains(&min_adversarial), "{min_adversarial}");
    // Valiant doubles the global hops: about half of minimal's uniform throughput.
    let (min_uniform, valiant_uniform) = (throughput(Min, Uniform), throughput(Valiant, Uniform));
    assert!(
        valiant_uniform < 0.7 * min_uniform,
        "{valiant_uniform} vs {min_uniform}"
    );
    assert!(throughput(Valiant, Adversarial) > 2.5 * min_adversarial);
    // UGAL: close to minimal under uniform, far above it under the adversarial pattern.
    for ugal in [UgalL, UgalG] {
        let uniform = throughput(ugal, Uniform);
        assert!(
            uniform > 0.9 * min_uniform,
            "{ugal}: {uniform} vs {min_uniform}"
        );
        let adversarial = throughput(ugal, Adversarial);
        assert!(adversarial > 2.5 * min_adversarial, "{ugal}: {adversarial}");
    }
}

#[test]
fn bad_configurations_are_refused_by_name() {
    let config = DragonflyConfig {
        message_bytes: 0,
        ..DragonflyConfig::small()
    };
    let error = run_dragonfly(&config).unwrap_err().to_string();
    assert!(error.contains("message_bytes"), "{error}");
    assert!("all-to-all".parse::<DragonflyWorkload>().is_err());
}

/// At 1,056 hosts a uniform host's 1 MiB is fewer packets than there are other hosts: the
/// bound must count the packets as sent, not the expected matrix's byte shares.
#[test]
fn the_bound_holds_at_the_large_size() {
    for workload in [DragonflyWorkload::Uniform, DragonflyWorkload::Adversarial] {
        let config = DragonflyConfig {
            shape: ofan_topology::DragonflyShape::balanced(4).unwrap(),
            scheme: DragonflyScheme::UgalG,
            workload,
            message_bytes: 1 << 20,
            ..DragonflyConfig::small()
        };
        let report = run_dragonfly(&config).unwrap();
        assert_eq!(report.hosts, 1056);
        assert!(
            report.cct_ps >= report.lower_bound_ps,
            "{workload}: {report:?}"
        );
        // The NIC bound, about 11 µs at 800 Gb/s, is the binding one for both.
        assert!(report.lower_bound_ps < 13_000_000, "{workload}: {report:?}");
    }
}
