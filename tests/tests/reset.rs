//! Root end-to-end test of `ofan-lab reset`: whatever a student's machine holds — labs, a lab
//! whose state directory is gone, stray namespaces with processes in them, root-namespace veths
//! named `ofan-*` — `reset` returns it to clean, and says so again on a clean machine.
//!
//! `reset` removes *everything* named `ofan-*`, also what others run on the machine, so this
//! suite runs only where nothing named `ofan-*` exists when it starts (as in CI): elsewhere it
//! is reported ignored with what it found, and under `CI=true` it fails instead.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ofan_lab::rt_throttle;
use ofan_tests::{binary, namespaces_with_prefix, ofan_xdp_programs, serial, MachineSettings};

const LABS: &str = "/run/ofan/labs";

/// What named `ofan-*` exists on the machine: namespaces, lab state directories, root links.
fn ofan_objects() -> Vec<String> {
    let mut found: Vec<String> = namespaces_with_prefix("ofan-")
        .into_iter()
        .map(|ns| format!("namespace {ns}"))
        .collect();
    found.extend(
        std::fs::read_dir(LABS)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| format!("lab {}", entry.file_name().to_string_lossy())),
    );
    let links = Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .expect("ip link");
    found.extend(
        String::from_utf8_lossy(&links.stdout)
            .lines()
            .filter_map(|line| line.split(": ").nth(1))
            .map(|name| name.split('@').next().unwrap_or(name))
            .filter(|name| name.starts_with("ofan-"))
            .map(|name| format!("link {name}")),
    );
    found
}

fn lab(args: &[&str]) -> String {
    let output = Command::new(binary("ofan-lab"))
        .args(args)
        .output()
        .expect("ofan-lab");
    assert!(
        output.status.success(),
        "ofan-lab {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("ip");
    assert!(status.success(), "ip {args:?}");
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

fn switch_pids(name: &str) -> Vec<u32> {
    let text = std::fs::read_to_string(format!("{LABS}/{name}/state.json")).expect("state.json");
    let state: serde_json::Value = serde_json::from_str(&text).expect("state JSON");
    state["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["pid"].as_u64().unwrap() as u32)
        .collect()
}

/// Reaps the stray process when `reset` killed it (it is this test's child).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn reset_returns_the_machine_to_clean() {
    let _machine = serial();
    let pid = std::process::id();
    let before = MachineSettings::read();
    let (kept, lost, stray) = (
        format!("t{pid}r1"),
        format!("t{pid}r2"),
        format!("ofan-t{pid}stray"),
    );
    lab(&["up", "--name", &kept, "--tune-machine"]);
    lab(&["up", "--name", &lost, "--topo", "leaf-spine"]);
    let mut pids = switch_pids(&kept);
    pids.extend(switch_pids(&lost));
    // The tuned lab's switch group crashes (kill -9: nothing of it cleans up): its records
    // of the machine's settings outlive it, for reset to put back.
    let group = pids[0];
    let killed = Command::new("kill")
        .args(["-9", &group.to_string()])
        .status()
        .expect("kill");
    assert!(killed.success(), "kill -9 {group}");
    // A lab whose state directory is gone (a student deleted it, a reboot of /run half-done):
    // `down --name` cannot find it any more; its namespaces and switches are strays now.
    std::fs::remove_dir_all(format!("{LABS}/{lost}")).expect("remove the state directory");
    // A namespace of another tool with a process in it, and a veth pair in the root namespace.
    ip(&["netns", "add", &stray]);
    let sleeper = Reaped(
        Command::new("ip")
            .args(["netns", "exec", &stray, "sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep in the stray namespace"),
    );
    let (veth_a, veth_b) = (format!("ofan-t{pid}a"), format!("ofan-t{pid}b"));
    ip(&[
        "link", "add", &veth_a, "type", "veth", "peer", "name", &veth_b,
    ]);
    assert!(
        !ofan_xdp_programs().is_empty(),
        "the labs' switches attach XDP programs"
    );
    let tuned = MachineSettings::read();
    assert!(
        tuned.ksoftirqd_realtime(),
        "while a tuned lab runs, ksoftirqd is SCHED_FIFO: {tuned:?}"
    );
    if rt_throttle::kernel_has_fair_server().expect("the kernel's release") {
        assert_eq!(
            tuned.rt_runtime_us, "-1",
            "while a tuned lab runs on a kernel with the fair server, real-time throttling is lifted"
        );
    }

    let said = lab(&["reset"]);
    eprintln!("{said}");
    let left = ofan_objects();
    assert!(left.is_empty(), "reset left: {left:?}");
    // The kernel dismantles deleted namespaces (and the programs on their interfaces)
    // asynchronously: give it 5 s.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ofan_xdp_programs().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        ofan_xdp_programs(),
        Vec::<String>::new(),
        "XDP programs left"
    );
    assert_eq!(
        MachineSettings::read(),
        before,
        "reset puts the machine's settings back as they were"
    );
    let living: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(living.is_empty(), "switch processes left: {living:?}");
    // The stray's process was killed: its `ip netns exec` child exits.
    let mut sleeper = sleeper;
    let status = sleeper.0.wait().expect("wait");
    assert!(!status.success(), "the stray process was not killed");

    // On a clean machine it has nothing to do, and says so without failing.
    lab(&["reset"]);
    assert!(ofan_objects().is_empty());
}

fn main() -> std::process::ExitCode {
    let found = ofan_objects();
    let blocker = (!found.is_empty()).then(|| {
        format!(
            "`ofan-lab reset` would remove what exists here named ofan-*: {}",
            found.join(", ")
        )
    });
    ofan_tests::run_root_tests_unless(
        blocker,
        &[(
            "reset_returns_the_machine_to_clean",
            reset_returns_the_machine_to_clean,
        )],
    )
}
