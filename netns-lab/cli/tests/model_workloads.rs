//! `ofan-lab model run` with the workloads that have dependencies: an htsim connection-matrix
//! file through `--matrix`, and the ring collectives with their phases.

use std::process::Command;

fn ofan_lab(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ofan-lab"))
        .args(args)
        .output()
        .expect("ofan-lab runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Two layers of the 8B model's FSDP pass on 128 GPUs under NSCC.
const FSDP_PASS: [&str; 12] = [
    "model",
    "run",
    "--k",
    "8",
    "--workload",
    "fsdp",
    "--llama",
    "8b",
    "--layers",
    "2",
    "--cc",
    "nscc",
];

fn fixture(name: &str) -> String {
    format!(
        "{}/../../model/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn an_htsim_file_runs_unchanged_through_matrix() {
    let file = fixture("htsim-allreduce-16n-4g.cm");
    let (ok, stdout, stderr) = ofan_lab(&[
        "model",
        "run",
        "--k",
        "4",
        "--workload",
        "matrix",
        "--matrix",
        &file,
        "--json",
        "-",
    ]);
    assert!(ok, "{stderr}");
    let json_start = stdout.find("\n{").expect("a JSON report") + 1;
    let report: serde_json::Value = serde_json::from_str(&stdout[json_start..]).expect("JSON");
    assert_eq!(report["flows"], 112);
    assert_eq!(report["packets"]["flows_complete"], 112);
}

#[test]
fn a_bad_htsim_line_is_named() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("bad.cm");
    std::fs::write(
        &file,
        "Nodes 16\nConnections 1\n0->1 id 1 start 0 size 10 colour 3\n",
    )
    .expect("writes");
    let (ok, _, stderr) = ofan_lab(&[
        "model",
        "run",
        "--k",
        "4",
        "--workload",
        "matrix",
        "--matrix",
        file.to_str().expect("utf-8"),
    ]);
    assert!(!ok);
    assert!(
        stderr.contains("line 3") && stderr.contains("unknown word `colour`"),
        "{stderr}"
    );
}

#[test]
fn a_ring_all_reduce_reports_its_phases() {
    let (ok, stdout, stderr) = ofan_lab(&[
        "model",
        "run",
        "--k",
        "4",
        "--workload",
        "ring-allreduce",
        "--gpus-per-server",
        "2",
        "--size",
        "256K",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("phase reduce-scatter: 112 flows"),
        "{stdout}"
    );
    assert!(stdout.contains("phase all-gather: 112 flows"), "{stdout}");
}

/// `model fig10` at a small radix: one point per scheme, every run complete, and the CCT
/// reduction notes (structure and invariants, never a target number).
#[test]
fn fig10_quick_runs_every_scheme_on_a_leaf_spine() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().to_str().expect("utf-8");
    let (ok, stdout, stderr) = ofan_lab(&[
        "model",
        "fig10",
        "--leaf-spine-ks",
        "8",
        "--seeds",
        "1",
        "--out",
        out,
    ]);
    assert!(ok, "{stderr}");
    let figure: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("fig10.json")).expect("fig10.json"),
    )
    .expect("JSON");
    let points = figure["points"].as_array().expect("points");
    let series: Vec<&str> = points
        .iter()
        .map(|p| p["series"].as_str().expect("series"))
        .collect();
    assert_eq!(series, ["reps", "ar", "ofan", "4ofan"]);
    for point in points {
        assert_eq!(point["x"], 32.0, "k = 8: 32 hosts");
        let increase = point["metrics"]["cct_increase_pct"]["mean"]
            .as_f64()
            .expect("every run completes");
        assert!(increase >= 0.0, "no run beats the bound");
    }
    assert!(stdout.contains("ofan vs reps"), "{stdout}");
    assert!(stdout.contains("4ofan vs ar"), "{stdout}");
}

/// `model fig11` at k = 4: all-AR, the four placements, all-4Ofan, every run complete.
#[test]
fn fig11_quick_runs_the_four_placements_between_the_uniform_fabrics() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().to_str().expect("utf-8");
    let (ok, stdout, stderr) =
        ofan_lab(&["model", "fig11", "--k", "4", "--seeds", "1", "--out", out]);
    assert!(ok, "{stderr}");
    let figure: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("fig11.json")).expect("fig11.json"),
    )
    .expect("JSON");
    let categories: Vec<&str> = figure["x_categories"]
        .as_array()
        .expect("categories")
        .iter()
        .map(|c| c.as_str().expect("a name"))
        .collect();
    assert_eq!(
        categories,
        [
            "all ar",
            "random-switches",
            "random-pods",
            "aggregation",
            "edge",
            "all 4ofan"
        ]
    );
    let points = figure["points"].as_array().expect("points");
    assert_eq!(points.len(), 6);
    for point in points {
        assert!(point["metrics"]["cct_increase_pct"]["mean"]
            .as_f64()
            .is_some());
    }
    assert!(stdout.contains("midpoint"), "{stdout}");
}

/// `model fig13` scaled down: every scheme under no CCA and NSCC at both skews completes.
#[test]
fn fig13_quick_runs_moe_dispatch_per_cca_and_skew() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().to_str().expect("utf-8");
    let (ok, _, stderr) = ofan_lab(&[
        "model", "fig13", "--scale", "0.01", "--seeds", "1", "--out", out,
    ]);
    assert!(ok, "{stderr}");
    let figure: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("fig13.json")).expect("fig13.json"),
    )
    .expect("JSON");
    let points = figure["points"].as_array().expect("points");
    let mut series: Vec<&str> = points
        .iter()
        .map(|p| p["series"].as_str().expect("series"))
        .collect();
    series.dedup();
    assert_eq!(
        series,
        ["none 1.48x", "none 1.13x", "nscc 1.48x", "nscc 1.13x"]
    );
    assert_eq!(points.len(), 16);
    for point in points {
        let increase = point["metrics"]["cct_increase_pct"]["mean"]
            .as_f64()
            .expect("every run completes");
        assert!(increase >= 0.0);
    }
}

/// `model fig13 --ecn`: the threshold given replaces the paper's 10 packets of 64 KB (a
/// 1-byte threshold marks what the default leaves unmarked at this scale).
#[test]
fn fig13_takes_its_ecn_threshold_from_the_flag() {
    let marks = |ecn: Option<&str>| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let out = dir.path().to_str().expect("utf-8");
        let mut args = vec![
            "model",
            "fig13",
            "--scale",
            "0.01",
            "--seeds",
            "1",
            "--ccs",
            "nscc",
            "--skews",
            "1.48",
            "--schemes",
            "ofan",
            "--out",
            out,
        ];
        if let Some(ecn) = ecn {
            args.extend(["--ecn", ecn]);
        }
        let (ok, _, stderr) = ofan_lab(&args);
        assert!(ok, "{stderr}");
        let figure: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("fig13.json")).expect("fig13.json"),
        )
        .expect("JSON");
        let notes = figure["notes"].to_string();
        let point = &figure["points"][0];
        (
            point["metrics"]["ecn_marks"]["mean"]
                .as_f64()
                .expect("marks"),
            notes,
        )
    };
    let (default_marks, default_notes) = marks(None);
    let (marked, notes) = marks(Some("1"));
    assert!(
        default_notes.contains("10 packets of 64 KB"),
        "{default_notes}"
    );
    assert!(notes.contains("ECN threshold 1 B"), "{notes}");
    assert!(
        marked > default_marks,
        "{marked} marks with --ecn 1, {default_marks} without"
    );
}

/// `model run --workload fsdp`: two layers of the 8B model on 128 GPUs, one phase per layer
/// and kind, each with a flow from every GPU.
#[test]
fn an_fsdp_pass_reports_its_phases() {
    let (ok, stdout, stderr) = ofan_lab(&FSDP_PASS);
    assert!(ok, "{stderr}");
    for phase in [
        "all-gather 1",
        "reduce-scatter 1",
        "all-gather 0",
        "reduce-scatter 0",
    ] {
        assert!(
            stdout.contains(&format!("phase {phase}: 128 flows")),
            "{phase}: {stdout}"
        );
    }
    let (ok, _, stderr) = ofan_lab(&["model", "run", "--workload", "fsdp", "--llama", "13b"]);
    assert!(!ok && stderr.contains("13b"), "{stderr}");
}

/// `model fig14 --quick`: every scheme under NSCC and MSwift for two models completes, and a
/// layer's phases are shorter than the pass.
#[test]
fn fig14_quick_runs_the_fsdp_pass_per_cca_and_model() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = dir.path().to_str().expect("utf-8");
    let (ok, stdout, stderr) = ofan_lab(&["model", "fig14", "--quick", "--out", out]);
    assert!(ok, "{stderr}");
    let figure: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("fig14.json")).expect("fig14.json"),
    )
    .expect("JSON");
    assert_eq!(
        figure["x_categories"],
        serde_json::json!(["reps", "ar", "ofan", "4ofan"])
    );
    let points = figure["points"].as_array().expect("points");
    let mut series: Vec<&str> = points
        .iter()
        .map(|p| p["series"].as_str().expect("series"))
        .collect();
    series.dedup();
    assert_eq!(series, ["nscc 8b", "nscc 70b", "mswift 8b", "mswift 70b"]);
    assert_eq!(points.len(), 16);
    for point in points {
        let mean = |metric: &str| {
            point["metrics"][metric]["mean"]
                .as_f64()
                .unwrap_or_else(|| panic!("{metric} in {point}"))
        };
        assert!(mean("cct_increase_pct") >= 0.0);
        assert!(mean("all_gather_cct_us") < mean("cct_us"));
        assert!(mean("reduce_scatter_cct_us") < mean("cct_us"));
        assert!((0.0..=1.0).contains(&mean("utilization")));
    }
    assert!(stdout.contains("cut"), "{stdout}");
}

/// The report of `ofan-lab ARGS --json FILE` (the run must succeed).
fn report_of(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().expect("temporary directory");
    let json = dir.path().join("run.json");
    let json = json.to_str().expect("utf-8");
    let (ok, _, stderr) = ofan_lab(&[args, &["--json", json]].concat());
    assert!(ok, "{args:?}: {stderr}");
    serde_json::from_str(&std::fs::read_to_string(json).expect("report")).expect("JSON")
}

/// `ofan-lab ARGS` fails, naming `name`.
fn refused(args: &[&str], name: &str) {
    let (ok, _, stderr) = ofan_lab(args);
    assert!(!ok && stderr.contains(name), "{args:?}: {stderr}");
}

/// `--ack-every 4`: the receivers send about a quarter of the ACKs (the report's counts), and
/// what the model cannot do is refused by name.
#[test]
fn ack_every_coalesces_acks_and_refuses_what_it_cannot_model() {
    let report = report_of(&[&FSDP_PASS[..], &["--ack-every", "4"]].concat());
    let count = |field: &str| report["packets"][field].as_u64().expect(field);
    let (acks, frames) = (count("acks_sent"), count("data_delivered"));
    assert_eq!(count("flows_complete"), 4 * 128, "every flow completes");
    assert!(
        acks >= frames / 4 && acks < frames / 3,
        "{acks} ACKs for {frames} frames"
    );
    for bad in ["0", "65"] {
        refused(
            &["model", "run", "--k", "4", "--ack-every", bad],
            "ack_every",
        );
    }
    refused(
        &[
            "model",
            "run",
            "--topology",
            "dragonfly",
            "--ack-every",
            "4",
        ],
        "--ack-every",
    );
}

/// `--trim`: ECMP's colliding flows overflow 64 KB buffers; with trimming nothing is dropped,
/// every trimmed frame is NACKed (the report's counts), and what the model cannot do is
/// refused by name.
#[test]
fn trim_turns_drops_into_nacks_and_refuses_what_it_cannot_model() {
    let args = [
        "model", "run", "--k", "4", "--scheme", "ecmp", "--buffer", "64K", "--cc", "nscc",
    ];
    let (dropping, trimming) = (
        report_of(&args),
        report_of(&[&args[..], &["--trim"]].concat()),
    );
    let count = |report: &serde_json::Value, field: &str| report["packets"][field].as_u64();
    assert!(dropping["drops"]["total"].as_u64().expect("drops") > 0);
    assert_eq!(count(&dropping, "trimmed"), None, "absent without --trim");
    assert_eq!(trimming["drops"]["total"].as_u64(), Some(0));
    let trimmed = count(&trimming, "trimmed").expect("trimmed");
    assert!(trimmed > 0);
    assert_eq!(count(&trimming, "nacks"), Some(trimmed));
    assert_eq!(count(&trimming, "flows_complete"), Some(16));
    refused(
        &["model", "run", "--k", "4", "--header", "0", "--trim"],
        "trim",
    );
    refused(
        &["model", "run", "--topology", "dragonfly", "--trim"],
        "--trim",
    );
}

/// `--ecn-at dequeue`: the report's configuration says so and the frames are marked; a
/// dragonfly refuses it by name.
#[test]
fn ecn_at_dequeue_marks_and_is_recorded() {
    let report = report_of(&[
        "model", "run", "--k", "4", "--scheme", "ecmp", "--ecn-at", "dequeue",
    ]);
    assert_eq!(report["config"]["ecn_at"], "dequeue", "{report}");
    assert!(report["packets"]["ecn_marks"].as_u64().expect("marks") > 0);
    refused(
        &[
            "model",
            "run",
            "--topology",
            "dragonfly",
            "--ecn-at",
            "dequeue",
        ],
        "--ecn-at",
    );
}

/// `--receiver-credit`: PULLs in the report under a CCA; refused without one, and on a
/// dragonfly, by name.
#[test]
fn receiver_credit_pulls_under_a_cca_and_refuses_without_one() {
    let report = report_of(&[
        "model",
        "run",
        "--k",
        "4",
        "--cc",
        "nscc",
        "--receiver-credit",
    ]);
    // 256 packets a flow, 150 of them in the initial window (one BDP).
    assert_eq!(report["packets"]["pulls"].as_u64(), Some(16 * (256 - 150)));
    assert_eq!(report["packets"]["flows_complete"].as_u64(), Some(16));
    refused(
        &["model", "run", "--k", "4", "--receiver-credit"],
        "--receiver-credit",
    );
    refused(
        &[
            "model",
            "run",
            "--topology",
            "dragonfly",
            "--receiver-credit",
        ],
        "--receiver-credit",
    );
}
