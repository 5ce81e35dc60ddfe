//! Root end-to-end test of a fabric whose switches run different algorithms (`ofan-lab up
//! --lb-map FILE`, `ofan-lab node S lb ALGO`): the paper's incremental deployment (§6.4).
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use ofan_tests::serial;

#[path = "lab/guard.rs"]
mod guard;
use guard::{run_results, LabGuard};

/// The algorithm switch `node` of `lab` says it runs.
fn algorithm(lab: &LabGuard, node: &str) -> String {
    lab.stats(node)["algorithm"]
        .as_str()
        .expect("algorithm")
        .to_owned()
}

/// Up with two edge switches on rsq, one more moved to jsq while the lab runs, one put back;
/// a permutation over the mixed fabric delivers every packet and its report names the mix;
/// cores and framework algorithms are refused; `set --lb` makes the fabric uniform again.
fn switches_of_one_lab_run_the_algorithms_the_map_gives_them() {
    let _machine = serial();
    let lab = LabGuard::new("mix");
    let map = std::env::temp_dir().join(format!("{}-lb-map", lab.name));
    std::fs::write(&map, "# two edges upgraded\ne-p0-0 rsq\ne-p1-0 rsq\n").unwrap();
    let refused = lab.lab(&["up", "--lb", "arf-wcmp", "--lb-map", map.to_str().unwrap()]);
    assert!(!refused.status.success(), "arf with a map");
    lab.ok(&[
        "up",
        "--k",
        "4",
        "--lb",
        "ofan",
        "--lb-map",
        map.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&map);
    let status = lab.ok(&["status"]);
    assert!(status.contains("lb ofan+rsq×2"), "{status}");
    assert_eq!(algorithm(&lab, "e-p0-0"), "rsq");
    assert_eq!(algorithm(&lab, "e-p1-0"), "rsq");
    assert_eq!(algorithm(&lab, "e-p0-1"), "ofan");
    assert_eq!(algorithm(&lab, "a-p0-0"), "ofan");

    lab.ok(&["node", "e-p0-1", "lb", "jsq"]);
    assert_eq!(algorithm(&lab, "e-p0-1"), "jsq");
    assert_eq!(algorithm(&lab, "e-p0-0"), "rsq", "the others keep theirs");
    for (node, algo) in [("c-0", "rsq"), ("e-p0-0", "arf-wcmp"), ("e-p0-0", "reps")] {
        let refused = lab.lab(&["node", node, "lb", algo]);
        assert!(!refused.status.success(), "node {node} lb {algo}");
    }

    let args = ["permutation", "--size", "64KB", "--seed", "2"];
    let out = run_results(&lab, "mixed", &args);
    let run = &out.results["runs"][0];
    assert_eq!(run["setup"]["lb"], "ofan+jsq×1+rsq×2", "{run}");
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    assert_eq!(algorithm(&lab, "e-p0-1"), "jsq", "the run kept the mix");

    lab.ok(&["node", "e-p1-0", "lb", "default"]);
    assert_eq!(algorithm(&lab, "e-p1-0"), "ofan");
    let status = lab.ok(&["status"]);
    assert!(status.contains("lb ofan+jsq×1+rsq×1"), "{status}");

    lab.ok(&["set", "--lb", "ecmp"]);
    for node in ["e-p0-0", "e-p0-1", "a-p1-1"] {
        assert_eq!(algorithm(&lab, node), "ecmp", "{node}");
    }
    let status = lab.ok(&["status"]);
    assert!(status.contains("lb ecmp,"), "{status}");
    // The group restarted with every change: its processes now.
    let pids = lab.switch_pids();
    lab.down_and_check(&pids);
}

ofan_tests::root_tests!(switches_of_one_lab_run_the_algorithms_the_map_gives_them);
