//! Root end-to-end tests of the course's checker (`ofan-lab check`) on its lab exercises (1, 2,
//! 4, 7): each exercise's `solution.sh` in `docs/teaching/solutions/` builds a lab the checker
//! passes, and its `broken.sh` one the checker fails, on the checks the script names. The
//! scripts run as a student runs them (`ofan-lab` on the PATH, the lab named by `LAB`).
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ofan_tests::{binary, namespaces_with_prefix, serial};
use serde_json::Value;

/// A lab named for this test process, removed (and checked) on drop.
struct Lab {
    name: String,
}

impl Lab {
    fn new(tag: &str) -> Self {
        Self {
            name: format!("t{}{tag}", std::process::id()),
        }
    }

    /// Runs example `script` of `exercise` against this lab.
    fn build(&self, exercise: &str, script: &str) {
        let path = solutions().join(exercise).join(script);
        let output = Command::new("sh")
            .arg(&path)
            .env("LAB", &self.name)
            .env("PATH", search_path())
            .output()
            .expect("sh");
        assert!(
            output.status.success(),
            "{} failed:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// `ofan-lab check EXERCISE` on this lab: its exit status and the report it wrote.
    fn check(&self, exercise: &str, dir: &Path) -> (bool, Value) {
        let output: Output = Command::new(binary("ofan-lab"))
            .args(["check", exercise, "--name", &self.name, "--report"])
            .arg(dir)
            .output()
            .expect("ofan-lab check");
        eprintln!("{}", String::from_utf8_lossy(&output.stdout));
        let report = std::fs::read_to_string(dir.join(format!("check-{exercise}.json")))
            .unwrap_or_else(|e| {
                panic!(
                    "no report ({e}): {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        let csv = std::fs::read_to_string(dir.join(format!("check-{exercise}.csv")))
            .expect("the CSV report");
        let report: Value = serde_json::from_str(&report).expect("report JSON");
        let checks = report["checks"].as_array().expect("checks").len();
        assert_eq!(
            csv.lines().count(),
            checks + 1,
            "one CSV row per check:\n{csv}"
        );
        (output.status.success(), report)
    }

    fn down(&self) {
        let output = Command::new(binary("ofan-lab"))
            .args(["down", "--name", &self.name])
            .output()
            .expect("ofan-lab down");
        assert!(output.status.success(), "down failed");
        assert!(
            namespaces_with_prefix(&format!("ofan-{}-", self.name)).is_empty(),
            "lab {} left namespaces behind",
            self.name
        );
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(binary("ofan-lab"))
            .args(["down", "--name", &self.name])
            .output();
    }
}

fn solutions() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/teaching/solutions")
}

/// The binaries' directory first, so the scripts' `ofan-lab` is the one under test.
fn search_path() -> String {
    let bin = binary("ofan-lab");
    let dir = bin.parent().expect("binary directory");
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn failed_ids(report: &Value) -> Vec<String> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|check| check["outcome"] != "pass")
        .map(|check| check["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The exercise passes with its solution and fails with its broken example, at least on
/// `must_fail` (and on nothing outside `may_fail` besides those).
fn solution_passes_broken_fails(exercise: &str, tag: &str, must_fail: &[&str], may_fail: &[&str]) {
    let _machine = serial();
    let reports = std::env::temp_dir().join(format!("ofan-check-{}-{tag}", std::process::id()));
    let lab = Lab::new(tag);
    lab.build(exercise, "solution.sh");
    let (passed, report) = lab.check(exercise, &reports);
    assert!(passed, "{exercise}: the solution fails: {report:#}");
    assert_eq!(report["failed"], 0);
    assert_eq!(report["lab"], lab.name.as_str());
    lab.down();

    lab.build(exercise, "broken.sh");
    let (passed, report) = lab.check(exercise, &reports);
    let failed = failed_ids(&report);
    assert!(!passed, "{exercise}: the broken example passes: {report:#}");
    for id in must_fail {
        assert!(
            failed.iter().any(|f| f == id),
            "{exercise}: `{id}` should fail on the broken example: {report:#}"
        );
    }
    for id in &failed {
        assert!(
            must_fail.contains(&id.as_str()) || may_fail.contains(&id.as_str()),
            "{exercise}: `{id}` failed unexpectedly on the broken example: {report:#}"
        );
    }
    lab.down();
    let _ = std::fs::remove_dir_all(&reports);
}

fn first_lab() {
    solution_passes_broken_fails("01-first-lab", "c1", &["switches-running", "pingall"], &[]);
}

fn static_routes_by_hand() {
    // Every host still reaches every other over one uplink: only the widths are wrong.
    solution_passes_broken_fails("02-static-routes", "c2", &["routes-match-plan"], &[]);
}

fn link_failure() {
    // Behind the lab's back the kernel keeps the dead hops (or not, as its sysctls say), and
    // frames sent to them are lost: the routes and pingall may fail too.
    solution_passes_broken_fails(
        "04-link-failure",
        "c4",
        &["link-down"],
        &["routes-match-plan", "pingall"],
    );
}

fn bgp_failure() {
    solution_passes_broken_fails("07-bgp-failure", "c7", &["routing"], &[]);
}

ofan_tests::root_tests!(first_lab, static_routes_by_hand, link_failure, bgp_failure);
