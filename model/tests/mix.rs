//! Switches running different schemes in one fabric (paper §6.4).

use ofan_model::mix::{parse_scheme_map, Placement, SwitchSchemes};
use ofan_model::{run, ModelConfig, RunReport};
use ofan_topology::{Role, Topology, TopologyKind};

fn config(k: u16, scheme: &str) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k };
    config.message_bytes = 256 * 1024;
    config.scheme = scheme.parse().unwrap();
    config
}

fn outcome(report: &RunReport) -> (Option<u64>, u64, Vec<u64>) {
    (
        report.cct_ps,
        report.max_queue_bytes,
        report.queues.iter().map(|q| q.max_bytes).collect(),
    )
}

/// A map that gives every balancing switch pOfan, in a fabric whose scheme is AR, is the
/// pOfan fabric, frame for frame: the map reaches every switch's balancer and nothing else.
#[test]
fn a_map_naming_every_switch_is_that_schemes_fabric() {
    let topology = Topology::new(TopologyKind::FatTree { k: 6 }).unwrap();
    let lines: String = topology
        .nodes()
        .iter()
        .filter(|node| matches!(node.role, Role::Edge | Role::Aggregation))
        .map(|node| format!("{} pofan\n", node.name))
        .collect();
    let mut mapped = config(6, "ar");
    mapped.switch_schemes = SwitchSchemes::Map {
        switches: parse_scheme_map(&lines).unwrap(),
    };
    let uniform = run(&config(6, "pofan")).unwrap();
    let ar = run(&config(6, "ar")).unwrap();
    let mapped = run(&mapped).unwrap();
    assert_eq!(outcome(&mapped), outcome(&uniform));
    assert_ne!(outcome(&mapped), outcome(&ar));
}

/// Half the switches on pOfan: a fabric between the two, and each placement its own.
#[test]
fn mixes_differ_by_placement_and_complete() {
    let mut seen = Vec::new();
    for placement in Placement::ALL {
        let mut mixed = config(8, "ar");
        mixed.switch_schemes = SwitchSchemes::Mix {
            scheme: "pofan".parse().unwrap(),
            placement,
        };
        let report = run(&mixed).unwrap();
        assert!(report.cct_ps.is_some(), "{placement}");
        assert!(!report.model().unwrap().edge_uplink.applies);
        seen.push(outcome(&report));
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4, "each placement puts pOfan elsewhere");
}

#[test]
fn host_schemes_do_not_mix() {
    let mut mixed = config(4, "reps");
    mixed.switch_schemes = SwitchSchemes::Mix {
        scheme: "pofan".parse().unwrap(),
        placement: Placement::Edge,
    };
    assert!(run(&mixed).is_err());
    let mut leaf = config(4, "ar");
    leaf.topology = TopologyKind::LeafSpine { k: 4 };
    leaf.switch_schemes = SwitchSchemes::Mix {
        scheme: "pofan".parse().unwrap(),
        placement: Placement::RandomPods,
    };
    assert!(run(&leaf)
        .unwrap_err()
        .to_string()
        .contains("fat trees only"));
}
