//! Root end-to-end test of a collective with dependencies in the lab: a ring all-reduce on a
//! k = 4 fat tree, whose every ring step starts when the previous step's chunk has arrived,
//! and the model's run of the same seed.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::process::Command;

use ofan_tests::{binary, serial};
use serde_json::Value;

#[path = "lab/guard.rs"]
mod guard;
use guard::{run_results, LabGuard};

/// Hosts of the k = 4 fat tree.
const HOSTS: u64 = 16;
/// The buffer every host reduces: 256 KiB, a chunk of 16 KiB per ring step.
const BUFFER: u64 = 256 << 10;

/// The model's report of the same ring all-reduce, seed `seed`, on the lab's frames.
fn model_run(seed: u64) -> Value {
    let json = std::env::temp_dir().join(format!("ofan-collective-{}.json", std::process::id()));
    let output = Command::new(binary("ofan-lab"))
        .args(["model", "run", "--k", "4", "--workload", "ring-allreduce"])
        .args([
            "--size",
            "256K",
            "--scheme",
            "ofan",
            "--seed",
            &seed.to_string(),
        ])
        .args(["--rate-gbps", "1", "--latency-ns", "0", "--payload", "1454"])
        .args(["--header", "60", "--ack", "60", "--gap", "20"])
        .args(["--buffer-limit", "unlimited", "--json"])
        .arg(&json)
        .output()
        .expect("cannot run ofan-lab model");
    assert!(
        output.status.success(),
        "model run failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = serde_json::from_str(&std::fs::read_to_string(&json).expect("model JSON"));
    let _ = std::fs::remove_file(&json);
    report.expect("model JSON")
}

/// (name, flows, start, end) of every phase of a report.
fn phases(report: &Value) -> Vec<(String, u64, u64, u64)> {
    report["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|phase| {
            (
                phase["name"].as_str().unwrap().to_owned(),
                phase["flows"].as_u64().unwrap(),
                phase["start_ps"].as_u64().expect("a phase that started"),
                phase["end_ps"].as_u64().expect("a phase that ended"),
            )
        })
        .collect()
}

/// A ring all-reduce on the lab: every chunk arrives exactly once; the two phases have the
/// model's flows (the same graph for the same seed); and the steps really wait — the
/// all-gather cannot start before the reduce-scatter's 15 chunks have crossed the ring one
/// after the other, which agents sending every flow at once would not show.
fn a_ring_all_reduce_steps_through_the_lab_as_through_the_model() {
    let _machine = serial();
    let lab = LabGuard::new("ring");
    let refused = lab.lab(&["run", "permutation", "--gpus-per-server", "2"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("ring collectives"),
        "{said}"
    );
    lab.ok(&["up", "--k", "4", "--buffer", "2MB"]);
    let pids = lab.switch_pids();
    let seed = "3";
    let args = [
        "ring-allreduce",
        "--size",
        "256KB",
        "--lb",
        "ofan",
        "--seed",
        seed,
    ];
    let out = run_results(&lab, "ring", &args);
    let run = &out.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    let cct = run["cct_ps"].as_u64().expect("complete");
    let bound = run["lower_bound_ps"].as_u64().unwrap();
    assert!(cct >= bound, "CCT {cct} below the bound {bound}");

    let lab_phases = phases(run);
    let model = model_run(3);
    let model_phases = phases(&model);
    let shape = |phases: &[(String, u64, u64, u64)]| -> Vec<(String, u64)> {
        phases.iter().map(|p| (p.0.clone(), p.1)).collect()
    };
    assert_eq!(
        shape(&lab_phases),
        [
            ("reduce-scatter".to_owned(), HOSTS * (HOSTS - 1)),
            ("all-gather".to_owned(), HOSTS * (HOSTS - 1))
        ]
    );
    assert_eq!(shape(&lab_phases), shape(&model_phases));

    // 15 chunks of 16 KiB cross each ring link one after the other before any all-gather
    // step may start: at the lab's rate that is most of the reduce-scatter's time.
    let rate_bps = run["setup"]["link_rate_bps"].as_f64().unwrap();
    let chunk_ps = (BUFFER / HOSTS) as f64 * 8.0 / rate_bps * 1e12;
    let (reduce, gather) = (&lab_phases[0], &lab_phases[1]);
    assert!(
        gather.2 as f64 >= (HOSTS - 1) as f64 * chunk_ps,
        "the all-gather started at {} ps, before 15 chunks of {chunk_ps:.0} ps could arrive",
        gather.2
    );
    assert!(gather.3 >= reduce.3 && reduce.2 == 0, "{lab_phases:?}");
    let ratio = |report: &Value| {
        report["cct_ps"].as_f64().unwrap() / report["lower_bound_ps"].as_f64().unwrap()
    };
    eprintln!(
        "ring all-reduce 256 KiB, seed {seed}: lab CCT {:.3} s = {:.3} × its bound, model {:.3} × \
         its bound; phases lab {lab_phases:?}, model {model_phases:?}",
        cct as f64 * 1e-12,
        ratio(run),
        ratio(&model)
    );
    lab.down_and_check(&pids);
}

ofan_tests::root_tests!(a_ring_all_reduce_steps_through_the_lab_as_through_the_model);
