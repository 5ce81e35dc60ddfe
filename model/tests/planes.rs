//! Multi-plane fabrics in the model: every host policy delivers every packet once, plane-spray
//! splits evenly, plane-arf moves traffic off a degraded plane, one plane is the plane itself.
//! Small fabrics (k = 4) so that they run fast unoptimized; every assertion is on simulated
//! quantities.

use ofan_dataplane::lb::Algorithm;
use ofan_model::planes::PlanePolicy;
use ofan_model::report::PlaneRun;
use ofan_model::{run, CcKind, ModelConfig, ModelError, RunReport, Scheme};
use ofan_topology::{PlaneKind, TopologyKind};

fn config(plane: PlaneKind, planes: u8, policy: PlanePolicy, message_bytes: u64) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::MultiPlane {
        plane,
        planes,
        k: 4,
    };
    config.host_planes = policy;
    config.message_bytes = message_bytes;
    config
}

fn planes(report: &RunReport) -> &PlaneRun {
    report.model().unwrap().planes.as_ref().unwrap()
}

fn share_of_plane_0(report: &RunReport) -> f64 {
    let sent = &planes(report).data_sent;
    sent[0] as f64 / sent.iter().sum::<u64>() as f64
}

#[test]
fn every_policy_delivers_every_packet_exactly_once_on_healthy_planes() {
    for (plane, planes_count) in [
        (PlaneKind::FatTree, 2),
        (PlaneKind::FatTree, 4),
        (PlaneKind::LeafSpine, 2),
    ] {
        for policy in PlanePolicy::ALL {
            for scheme in [Algorithm::Ofan, Algorithm::ArfWcmp] {
                let mut config = config(plane, planes_count, policy, 256 * 1024);
                config.scheme = Scheme::Switch(scheme);
                let report = run(&config).unwrap();
                let what = format!("{plane:?} × {planes_count}, {policy}, {scheme:?}");
                let hosts = u64::from(report.hosts);
                assert!(report.cct_ps.is_some(), "{what}");
                assert!(report.cct_ps.unwrap() >= report.lower_bound_ps, "{what}");
                assert_eq!(report.packets.data_delivered, hosts * 64, "{what}");
                assert_eq!(report.packets.duplicate_data, 0, "{what}");
                assert_eq!(
                    report.packets.data_sent,
                    hosts * 64,
                    "{what}: no retransmission"
                );
                let section = planes(&report);
                assert_eq!(section.policy, policy);
                assert_eq!(section.data_sent.len(), usize::from(planes_count));
                assert_eq!(section.data_sent.iter().sum::<u64>(), hosts * 64, "{what}");
            }
        }
    }
}

/// Per flow, plane-spray uses every plane equally within one packet (`planes::tests` checks
/// it flow by flow); summed over the 16 flows, within 16 packets.
#[test]
fn plane_spray_uses_every_plane_equally() {
    for planes_count in [2, 3, 4] {
        let report = run(&config(
            PlaneKind::FatTree,
            planes_count,
            PlanePolicy::PlaneSpray,
            (64 * 4096) + 100,
        ))
        .unwrap();
        let sent = &planes(&report).data_sent;
        let (min, max) = (sent.iter().min().unwrap(), sent.iter().max().unwrap());
        assert!(max - min <= u64::from(report.flows), "{sent:?}");
    }
}

/// A host with P ports finishes a permutation faster than with one (plane-spray), and the
/// lower bound knows it; plane-hash keeps each flow on one port.
#[test]
fn hosts_send_over_every_port() {
    let mut single = ModelConfig::paper();
    single.topology = TopologyKind::FatTree { k: 4 };
    single.message_bytes = 1 << 20;
    let one = run(&single).unwrap();
    let spray = run(&config(
        PlaneKind::FatTree,
        2,
        PlanePolicy::PlaneSpray,
        1 << 20,
    ))
    .unwrap();
    let hash = run(&config(
        PlaneKind::FatTree,
        2,
        PlanePolicy::PlaneHash,
        1 << 20,
    ))
    .unwrap();
    assert!(spray.lower_bound_ps < one.lower_bound_ps * 3 / 4);
    assert!(spray.cct_ps.unwrap() < one.cct_ps.unwrap() * 3 / 4);
    assert!(hash.cct_ps.unwrap() > spray.cct_ps.unwrap() * 5 / 4);
}

/// One plane is the plane: same nodes, names, seeds and code path, so the same run.
#[test]
fn one_plane_gives_the_fat_tree_s_run() {
    for scheme in [Algorithm::Ofan, Algorithm::ArfWcmp, Algorithm::Ecmp] {
        for seed in [1, 2] {
            let mut multi = config(PlaneKind::FatTree, 1, PlanePolicy::PlaneArf, 256 * 1024);
            multi.scheme = Scheme::Switch(scheme);
            multi.seed = seed;
            multi.degraded = vec!["a-p0-0/c-0:0.25".parse().unwrap()];
            let mut plain = multi.clone();
            plain.topology = TopologyKind::FatTree { k: 4 };
            let (multi, plain) = (run(&multi).unwrap(), run(&plain).unwrap());
            assert_eq!(multi.cct_ps, plain.cct_ps, "{scheme:?} seed {seed}");
            assert_eq!(multi.packets, plain.packets);
            assert_eq!(multi.lower_bound_ps, plain.lower_bound_ps);
            let events = |report: &RunReport| report.model().unwrap().events;
            assert_eq!(events(&multi), events(&plain));
            assert!(
                multi.model().unwrap().planes.is_none(),
                "one plane: no section"
            );
        }
    }
}

/// A quarter-rate link in plane 0: plane-arf, which weighs planes by their CE marks and
/// losses, sends less of its traffic through plane 0 than plane-spray (one half) and than
/// plane-hash's flows hashed there on average, and loses nothing where plane-spray loses
/// packets to the full buffer; messages long enough (16 MB) for ACKs to come back while a
/// flow sends.
#[test]
fn plane_arf_sends_less_through_a_degraded_plane() {
    let degraded = |policy| {
        let mut config = config(PlaneKind::FatTree, 2, policy, 16 << 20);
        config.degraded = vec!["a-p0-0@0/c-0@0:0.25".parse().unwrap()];
        run(&config).unwrap()
    };
    let spray_report = degraded(PlanePolicy::PlaneSpray);
    let spray = share_of_plane_0(&spray_report);
    let arf_report = degraded(PlanePolicy::PlaneArf);
    let arf = share_of_plane_0(&arf_report);
    assert!(planes(&spray_report).losses[0] > 0);
    assert_eq!(planes(&arf_report).losses, [0, 0]);
    assert!(arf_report.cct_ps < spray_report.cct_ps);
    assert!((spray - 0.5).abs() < 0.01, "{spray}");
    assert!(arf < spray - 0.05, "plane-arf {arf} vs plane-spray {spray}");
    assert!(planes(&arf_report).ce_acks[0] > planes(&arf_report).ce_acks[1]);
    // plane-hash over seeds: on average half the flows on plane 0.
    let hashed: f64 = (1..=8)
        .map(|seed| {
            let mut config = config(PlaneKind::FatTree, 2, PlanePolicy::PlaneHash, 1 << 20);
            config.seed = seed;
            share_of_plane_0(&run(&config).unwrap())
        })
        .sum::<f64>()
        / 8.0;
    assert!(
        arf < hashed - 0.05,
        "plane-arf {arf} vs plane-hash {hashed}"
    );
}

/// The endpoint plane alone: no ECN marks (threshold beyond any queue) and no losses
/// (unlimited buffers), so plane-arf hosts learn of a slow edge up-link in plane 0 only from
/// the view their edge passes on (here after 1 µs): they send less through plane 0 than
/// plane-spray, and nothing moves with the views switched off (the default 100 µs arrive after
/// the collective).
#[test]
fn plane_arf_steers_by_the_views_its_edges_pass_on() {
    let degraded = |policy, delay_ps| {
        let mut config = config(PlaneKind::FatTree, 2, policy, 4 << 20);
        config.degraded = vec!["e-p0-0@0>a-p0-0@0:0.25".parse().unwrap()];
        config.ecn_threshold_bytes = u64::MAX;
        config.buffer_limit = ofan_model::BufferLimit::Unlimited;
        config.arf.delay_ps = delay_ps;
        run(&config).unwrap()
    };
    let spray = degraded(PlanePolicy::PlaneSpray, 1_000_000);
    let fast = degraded(PlanePolicy::PlaneArf, 1_000_000);
    let slow = degraded(PlanePolicy::PlaneArf, 1_000_000_000);
    assert_eq!(planes(&fast).ce_acks, [0, 0]);
    assert_eq!(planes(&fast).losses, [0, 0]);
    assert!(planes(&fast).views_delivered > 0);
    assert!(
        share_of_plane_0(&fast) < share_of_plane_0(&spray) - 0.01,
        "{} vs {}",
        share_of_plane_0(&fast),
        share_of_plane_0(&spray)
    );
    assert_eq!(planes(&slow).data_sent, planes(&spray).data_sent);
    assert!(fast.cct_ps < spray.cct_ps);
}

#[test]
fn several_planes_refuse_host_schemes_and_congestion_control() {
    for scheme in [Scheme::Spray, Scheme::Reps, Scheme::Drb] {
        let mut config = config(PlaneKind::FatTree, 2, PlanePolicy::PlaneSpray, 4096);
        config.scheme = scheme;
        assert!(matches!(
            run(&config),
            Err(ModelError::InvalidConfig {
                field: "scheme",
                ..
            })
        ));
    }
    let mut config = config(PlaneKind::FatTree, 2, PlanePolicy::PlaneSpray, 4096);
    config.cc = CcKind::Dctcp;
    assert!(matches!(
        run(&config),
        Err(ModelError::InvalidConfig { field: "cc", .. })
    ));
    config.cc = CcKind::None;
    config.topology = TopologyKind::MultiPlane {
        plane: PlaneKind::FatTree,
        planes: 9,
        k: 4,
    };
    assert!(run(&config).is_err(), "9 planes");
}
