//! Root end-to-end tests of a dragonfly lab (`ofan-lab up --topo dragonfly`): 9 groups of 4
//! routers, one host each, static minimal routes, and the switches' own non-minimal choices
//! with the path tag in DSCP.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::collections::BTreeSet;

use ofan_tests::serial;
use ofan_topology::{Topology, TopologyKind};

#[path = "lab/guard.rs"]
mod guard;
use guard::{counter, pingall_passes, run_results, traceroute, LabGuard};

/// The lab's dragonfly, as the test reads addresses back to routers.
fn dragonfly() -> Topology {
    Topology::new(TopologyKind::Dragonfly { p: 1, a: 4, h: 2 }).unwrap()
}

/// Frames every router of the lab sent through an intermediate group.
fn detoured(lab: &LabGuard, topology: &Topology) -> u64 {
    topology
        .edges()
        .iter()
        .map(|router| counter(&lab.stats(&router.name), "detoured"))
        .sum()
}

/// Up, pingall, a traceroute through a global link, and the adversarial pattern (every host
/// sends to its peer in the next group: a ring of stride a·p = 4) under `min` and `ugal-l`:
/// every packet arrives exactly once under both; `min` never detours, `ugal-l` does (its
/// minimal path is one global link for the four hosts of a group); the CCT stays above the
/// lab's bound.
fn dragonfly_lab_routes_minimally_and_detours_under_ugal() {
    let _machine = serial();
    let lab = LabGuard::new("df");
    let refused = lab.lab(&["up", "--topo", "dragonfly", "--lb", "ugal-g"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("model"),
        "{said}"
    );
    let refused = lab.lab(&["up", "--topo", "dragonfly", "--routing", "bgp"]);
    assert!(!refused.status.success());

    lab.ok(&[
        "up",
        "--topo",
        "dragonfly",
        "--lb",
        "min",
        "--buffer",
        "64KB",
    ]);
    let pids = lab.switch_pids();
    let status = lab.ok(&["status"]);
    assert!(status.contains("dragonfly p=1 a=4 h=2"), "{status}");
    pingall_passes(&lab, 36 * 35);

    // From router 1 of group 0 to router 2 of group 1: local, global, local.
    let topology = dragonfly();
    let fabric = topology.dragonfly().unwrap();
    let trace = traceroute(&lab, "h-g0-r1-h0", "10.1.2.1");
    let hops: Vec<String> = trace
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned))
        .collect();
    let groups: Vec<u16> = hops
        .iter()
        .filter_map(|addr| topology.node_by_addr(addr.parse().ok()?))
        .filter_map(|node| topology.node(node).pod)
        .collect();
    assert_eq!(hops.last().map(String::as_str), Some("10.1.2.1"), "{trace}");
    let minimal = fabric.minimal_path(
        ofan_topology::dragonfly::RouterId(1),
        ofan_topology::dragonfly::RouterId(6),
    );
    assert_eq!(hops.len(), minimal.len() + 1, "{trace}");
    assert_eq!(
        groups.iter().copied().collect::<BTreeSet<_>>(),
        BTreeSet::from([0, 1]),
        "{trace}"
    );
    assert!(
        groups.windows(2).any(|w| w[0] != w[1]),
        "no global link: {trace}"
    );

    let args = ["ring", "--stride", "4", "--size", "64KB", "--repeat", "1"];
    let min = run_results(&lab, "min", &args);
    let run = &min.results["runs"][0];
    assert_eq!(run["setup"]["lb"], "min", "{run}");
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    let (cct_min, bound) = (
        run["cct_ps"].as_u64().unwrap(),
        run["lower_bound_ps"].as_u64().unwrap(),
    );
    assert!(cct_min >= bound, "CCT {cct_min} below the bound {bound}");
    assert_eq!(detoured(&lab, &topology), 0, "min detoured");

    // `set`, not `run --lb`: a run puts the lab back on its scheme (a restart) when it ends,
    // and the counters read below are the ugal-l switches'.
    lab.ok(&["set", "--lb", "ugal-l"]);
    let ugal = run_results(&lab, "ugal", &args);
    let run = &ugal.results["runs"][0];
    assert_eq!(run["setup"]["lb"], "ugal-l", "{run}");
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    let cct_ugal = run["cct_ps"].as_u64().unwrap();
    assert!(cct_ugal >= bound, "CCT {cct_ugal} below the bound {bound}");
    let detours = detoured(&lab, &topology);
    eprintln!("adversarial 64KB: min CCT {cct_min} ps, ugal-l {cct_ugal} ps ({detours} frames detoured), bound {bound} ps");
    assert!(
        detours > 0,
        "ugal-l never detoured under the adversarial pattern"
    );
    lab.down_and_check(&pids);
}

ofan_tests::root_tests!(dragonfly_lab_routes_minimally_and_detours_under_ugal);
