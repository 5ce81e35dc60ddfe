//! The lab a root test builds with `ofan-lab up` and removes on drop ([`LabGuard`]), and the
//! checks every lab suite makes of one: pingall, traceroute, a switch's counters.

// Each suite that includes this module uses part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ofan_tests::{binary, namespaces_with_prefix};
use serde_json::Value;

/// A lab built by `ofan-lab up`, removed (and checked) on drop.
pub struct LabGuard {
    pub name: String,
}

impl LabGuard {
    /// A unique lab name for this test process.
    pub fn new(tag: &str) -> Self {
        Self {
            name: format!("t{}{tag}", std::process::id()),
        }
    }

    /// Runs `ofan-lab <args> --name <lab>` (the name goes before `--` if there is one).
    pub fn lab(&self, args: &[&str]) -> Output {
        let mut full: Vec<&str> = Vec::new();
        let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        full.extend_from_slice(&args[..split]);
        full.extend_from_slice(&["--name", &self.name]);
        full.extend_from_slice(&args[split..]);
        let lab = binary("ofan-lab");
        assert!(
            lab.exists(),
            "build the binaries first: cargo build --release --workspace --bins"
        );
        Command::new(lab)
            .args(&full)
            .output()
            .expect("cannot run ofan-lab")
    }

    /// Like [`LabGuard::lab`], panicking with the output unless it succeeds.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.lab(args);
        assert!(
            output.status.success(),
            "ofan-lab {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub fn prefix(&self) -> String {
        format!("ofan-{}-", self.name)
    }

    pub fn state_dir(&self) -> PathBuf {
        PathBuf::from("/run/ofan/labs").join(&self.name)
    }

    pub fn state(&self) -> Value {
        let text =
            std::fs::read_to_string(self.state_dir().join("state.json")).expect("state.json");
        serde_json::from_str(&text).expect("state JSON")
    }

    pub fn switch_pids(&self) -> Vec<u32> {
        let state = self.state();
        // Routing daemons too (BGP labs): `down` returns only once they are gone as well.
        let daemons = state["daemons"].as_array().into_iter().flatten();
        state["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .chain(daemons)
            .map(|p| p["pid"].as_u64().unwrap() as u32)
            .collect()
    }

    /// Pids of the switches' records (a switch group's own record left out: the same pid).
    pub fn member_pids(&self) -> Vec<u32> {
        self.state()["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .filter(|p| p["node"] != "group")
            .map(|p| p["pid"].as_u64().unwrap() as u32)
            .collect()
    }

    /// `ofan-switch stats --json` of switch `node`.
    pub fn stats(&self, node: &str) -> Value {
        let socket = self.state_dir().join("sock").join(format!("{node}.sock"));
        let output = Command::new(binary("ofan-switch"))
            .args(["stats", "--json", "--socket"])
            .arg(&socket)
            .output()
            .expect("ofan-switch stats");
        assert!(output.status.success(), "stats of {node} failed");
        serde_json::from_slice(&output.stdout).expect("stats JSON")
    }

    /// Removes the lab and checks that nothing of it is left.
    pub fn down_and_check(&self, pids: &[u32]) {
        let started = Instant::now();
        self.ok(&["down"]);
        eprintln!(
            "lab {}: down in {:.2} s",
            self.name,
            started.elapsed().as_secs_f64()
        );
        assert_nothing_left(&self.prefix(), &self.state_dir(), pids);
    }
}

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let after = &stat[stat.rfind(')').unwrap_or(0) + 1..];
            after.split_whitespace().next() != Some("Z")
        })
        .unwrap_or(false)
}

/// Checks that nothing of a lab is left: namespaces, root links, processes, its state directory,
/// FRR run directories, XDP programs.
pub fn assert_nothing_left(prefix: &str, state_dir: &std::path::Path, pids: &[u32]) {
    let namespaces = namespaces_with_prefix(prefix);
    assert!(namespaces.is_empty(), "namespaces left: {namespaces:?}");
    let links = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    assert!(
        !links.contains(prefix),
        "links named {prefix}* left in the root namespace:\n{links}"
    );
    let running: Vec<u32> = pids.iter().copied().filter(|pid| alive(*pid)).collect();
    assert!(
        running.is_empty(),
        "switch or daemon processes left: {running:?}"
    );
    assert!(!state_dir.exists(), "{} left", state_dir.display());
    // FRR's per-namespace run directories (BGP labs).
    let frr: Vec<String> = std::fs::read_dir("/var/run/frr")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(prefix))
        .collect();
    assert!(frr.is_empty(), "FRR run directories left: {frr:?}");
    // XDP programs: none may outlive the switches — unless another lab (not this test's) is
    // up on the machine, whose programs cannot be told from ours. The kernel dismantles a
    // deleted namespace (and the programs on its interfaces) asynchronously: give it 5 s.
    let others = namespaces_with_prefix("ofan-");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut programs = ofan_tests::ofan_xdp_programs();
    let waited = Instant::now();
    while !programs.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        programs = ofan_tests::ofan_xdp_programs();
    }
    if waited.elapsed() > Duration::from_millis(40) {
        eprintln!(
            "XDP programs gone {:.2} s after down",
            waited.elapsed().as_secs_f64()
        );
    }
    if others.is_empty() {
        assert!(
            programs.is_empty(),
            "XDP programs left loaded: {programs:?}"
        );
    } else if !programs.is_empty() {
        eprintln!(
            "{} ofan XDP programs loaded, but other labs are up ({} namespaces): not checked",
            programs.len(),
            others.len()
        );
    }
}

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = self.lab(&["down"]);
        if !std::thread::panicking() {
            assert!(
                namespaces_with_prefix(&self.prefix()).is_empty(),
                "lab {} left namespaces behind",
                self.name
            );
        }
    }
}

/// Runs `pingall` and checks that all `pairs` ordered host pairs answered; returns its output.
pub fn pingall_passes(lab: &LabGuard, pairs: usize) -> String {
    let output = lab.lab(&["pingall"]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "pingall failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("{pairs}/{pairs} ordered pairs reachable")),
        "{stdout}"
    );
    stdout
}

/// `traceroute -n` from host `from` to `to` (one probe per hop).
pub fn traceroute(lab: &LabGuard, from: &str, to: &str) -> String {
    lab.ok(&[
        "exec",
        from,
        "--",
        "traceroute",
        "-n",
        "-q",
        "1",
        "-w",
        "2",
        to,
    ])
}

/// Counter `name` of a switch's `stats --json` (0 when absent).
pub fn counter(stats: &Value, name: &str) -> u64 {
    stats["data_path"]["counters"]
        .as_array()
        .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
        .and_then(|pair| pair[1].as_u64())
        .unwrap_or(0)
}

/// What `ofan-lab run` printed and wrote; its results directory is removed on drop.
pub struct RunOutput {
    /// The table (stdout).
    pub table: String,
    /// `--json`: results.json.
    pub results: Value,
    /// `--out`.
    pub dir: PathBuf,
}

impl Drop for RunOutput {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `ofan-lab run ARGS… --out DIR --json FILE` on `lab`, which must succeed.
pub fn run_results(lab: &LabGuard, tag: &str, args: &[&str]) -> RunOutput {
    let dir = std::env::temp_dir().join(format!("{}-{tag}-results", lab.name));
    let json = std::env::temp_dir().join(format!("{}-{tag}.json", lab.name));
    let mut command = vec!["run"];
    command.extend_from_slice(args);
    command.extend_from_slice(&[
        "--out",
        dir.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let table = lab.ok(&command);
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--json file")).unwrap();
    let _ = std::fs::remove_file(&json);
    RunOutput {
        table,
        results,
        dir,
    }
}
