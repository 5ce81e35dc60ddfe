//! `ofan-lab model … --shard I/N` and `ofan-lab model merge`: the parts of every shard, made
//! by separate processes, join into exactly the files the unsharded command writes.

use std::path::Path;
use std::process::Command;

fn ofan_lab(args: &[&str], dir: &Path) {
    let output = Command::new(env!("CARGO_BIN_EXE_ofan-lab"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("ofan-lab runs");
    assert!(
        output.status.success(),
        "ofan-lab {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A 3-shard Fig. 4 merged is the unsharded Fig. 4: the same JSON, byte for byte (every point
/// and number), and the same plots.
#[test]
fn a_three_shard_fig4_merges_into_the_unsharded_fig4() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let common = [
        "model",
        "fig4",
        "--k",
        "4",
        "--seeds",
        "2",
        "--sizes",
        "32K,128K,512K",
        "--schemes",
        "rsq,ofan,jsq",
        "--threads",
        "1",
    ];
    let mut whole = common.to_vec();
    whole.extend(["--out", "whole"]);
    ofan_lab(&whole, dir.path());
    for shard in ["1/3", "2/3", "3/3"] {
        let mut args = common.to_vec();
        args.extend(["--out", "parts", "--shard", shard]);
        ofan_lab(&args, dir.path());
    }
    ofan_lab(
        &[
            "model",
            "merge",
            "parts/fig4.part-3-of-3.json",
            "parts/fig4.part-1-of-3.json",
            "parts/fig4.part-2-of-3.json",
            "--out",
            "merged",
        ],
        dir.path(),
    );
    for file in [
        "fig4.json",
        "fig4-max_queue_kb.svg",
        "fig4-cct_increase_pct.svg",
    ] {
        assert_eq!(
            read(&dir.path().join("merged").join(file)),
            read(&dir.path().join("whole").join(file)),
            "{file}"
        );
    }
    // Two shards of three are not the figure.
    let output = Command::new(env!("CARGO_BIN_EXE_ofan-lab"))
        .args([
            "model",
            "merge",
            "parts/fig4.part-1-of-3.json",
            "parts/fig4.part-2-of-3.json",
            "--out",
            "incomplete",
        ])
        .current_dir(dir.path())
        .output()
        .expect("ofan-lab runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("shard 3/3 missing"));
}

/// `run --seeds 4` in 2 shards merges into the reports the unsharded run writes.
#[test]
fn a_sharded_run_merges_into_the_unsharded_reports() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let common = [
        "model",
        "run",
        "--k",
        "4",
        "--size",
        "256K",
        "--scheme",
        "rsq",
        "--seed",
        "3",
        "--seeds",
        "4",
        "--threads",
        "1",
    ];
    let mut whole = common.to_vec();
    whole.extend(["--json", "whole.json"]);
    ofan_lab(&whole, dir.path());
    for shard in ["1/2", "2/2"] {
        let mut args = common.to_vec();
        args.extend(["--shard", shard]);
        ofan_lab(&args, dir.path());
    }
    ofan_lab(
        &[
            "model",
            "merge",
            "run.part-1-of-2.json",
            "run.part-2-of-2.json",
            "--out",
            "merged",
        ],
        dir.path(),
    );
    assert_eq!(
        read(&dir.path().join("merged/run.json")),
        read(&dir.path().join("whole.json"))
    );
}
