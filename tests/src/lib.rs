//! Support for ofan's root integration tests: network namespaces, veth pairs and processes that
//! are always cleaned up, and the harness that runs the root test suites.
//!
//! Every object carries a unique prefix (`ofan-t<pid>-…`) and is owned by an RAII guard:
//! [`Lab`] kills exactly the processes it started, by pid, and its
//! [`Namespaces`](ofan_lab::netns::Namespaces) (the guard the forwarding benchmark uses too)
//! then delete exactly the namespaces it created (which removes their veths and any XDP program
//! attached inside them) — also when the test panics.
//!
//! A suite of tests that need root is a test target with `harness = false` whose `main` is
//! [`root_tests!`]: as root every test runs; otherwise each is reported *ignored* (counted in
//! `cargo test`'s summary, with one line saying why), and with `CI=true` in the environment each
//! *fails* instead, so that CI cannot pass by skipping them. See [`run_root_tests`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Namespaces whose name starts with `prefix`, sorted (to check that nothing is left behind).
pub use ofan_lab::netns::namespaces_with_prefix;

/// The names of the ofan XDP programs (`ofan_steer`, `ofan_steer_sg`, `ofan_redirect`) loaded in the kernel,
/// one per program: after every switch is gone there must be none, since a program lives as
/// long as an interface, a process or a pin holds it.
#[must_use]
pub fn ofan_xdp_programs() -> Vec<String> {
    aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .filter_map(|program| program.name_as_str().map(str::to_owned))
        .filter(|name| name.starts_with("ofan_"))
        .collect()
}
use ofan_lab::netns::Namespaces;

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the machine for one measuring test: tests that forward traffic and measure rates or
/// loss take this first, so they never compete with each other for the two cores.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether this process runs as root (effective uid 0), which the root suites need to create
/// network namespaces and attach XDP programs.
pub fn is_root() -> bool {
    // `id -u` prints the effective uid, and keeps this crate free of `unsafe` (no `geteuid`).
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Whether the environment says this is a CI run (`CI=true`, as CI systems set it; `1` too).
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| {
        let value = value.trim();
        value.eq_ignore_ascii_case("true") || value == "1"
    })
}

/// How a root suite treats its tests in this environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootGate {
    /// Root: every test runs.
    Run,
    /// Not root: every test is reported ignored (it still runs with `--ignored` or
    /// `--include-ignored`, and then fails for want of root).
    Ignore,
    /// Not root under CI: every test fails, saying so.
    Fail,
}

impl RootGate {
    /// The gate for a process that is (or is not) root, in a CI run or not.
    pub const fn new(root: bool, ci: bool) -> Self {
        match (root, ci) {
            (true, _) => RootGate::Run,
            (false, false) => RootGate::Ignore,
            (false, true) => RootGate::Fail,
        }
    }

    /// The gate of this process.
    pub fn current() -> Self {
        Self::new(is_root(), is_ci())
    }
}

/// What a root test needs root for: printed once per suite, and in the failure of each test
/// under CI.
const ROOT_FOR: &str = "network namespaces, veth pairs, XDP programs";

/// Runs one root test under `gate`: under [`RootGate::Fail`] it fails without running, saying
/// why; otherwise it runs (an ignored test runs only when asked for with `--ignored`).
pub fn run_gated(gate: RootGate, test: fn()) -> Result<(), libtest_mimic::Failed> {
    match gate {
        RootGate::Fail => {
            Err(format!("needs root ({ROOT_FOR}), and CI=true forbids skipping it").into())
        }
        RootGate::Run | RootGate::Ignore => {
            test();
            Ok(())
        }
    }
}

/// The trials of a root suite under `gate`, flagged ignored under [`RootGate::Ignore`].
pub fn root_trials(gate: RootGate, tests: &[(&'static str, fn())]) -> Vec<libtest_mimic::Trial> {
    tests
        .iter()
        .map(|&(name, test)| {
            libtest_mimic::Trial::test(name, move || run_gated(gate, test))
                .with_ignored_flag(gate == RootGate::Ignore)
        })
        .collect()
}

/// The `main` of a root suite: runs `tests` (name, function) with the arguments of cargo test's
/// own harness (name filters, `--exact`, `--skip`, `--list`, `--ignored`, `--test-threads`, …).
///
/// As root every test runs. Otherwise every test is reported ignored and one line on stderr
/// says why; with `CI=true` every test fails instead (see [`RootGate`]). A test panics to fail,
/// as under the standard harness.
pub fn run_root_tests(tests: &[(&'static str, fn())]) -> std::process::ExitCode {
    let args = libtest_mimic::Arguments::from_args();
    let gate = RootGate::current();
    if !args.list {
        match gate {
            RootGate::Run => {}
            RootGate::Ignore => eprintln!(
                "note: not root: the {} tests of this suite need root ({ROOT_FOR}); they are \
                 reported ignored (run as root to run them)",
                tests.len()
            ),
            RootGate::Fail => eprintln!(
                "error: CI=true but not root: the {} tests of this suite need root ({ROOT_FOR}) \
                 and fail rather than skip",
                tests.len()
            ),
        }
    }
    libtest_mimic::run(&args, root_trials(gate, tests)).exit_code()
}

/// The `main` of a root suite that can run only on a machine in a given state: when `blocker`
/// says why it cannot (e.g. other labs exist that its test would remove), each test is reported
/// ignored with that reason, and under `CI=true` each fails with it — as without root.
/// Otherwise it is [`run_root_tests`].
pub fn run_root_tests_unless(
    blocker: Option<String>,
    tests: &[(&'static str, fn())],
) -> std::process::ExitCode {
    let Some(reason) = blocker else {
        return run_root_tests(tests);
    };
    let args = libtest_mimic::Arguments::from_args();
    let ci = is_ci();
    if !args.list {
        eprintln!(
            "{}: the {} tests of this suite cannot run here: {reason}",
            if ci { "error" } else { "note" },
            tests.len()
        );
    }
    let trials = tests
        .iter()
        .map(|&(name, _)| {
            let reason = reason.clone();
            libtest_mimic::Trial::test(name, move || {
                Err(format!("cannot run: {reason} (and CI=true forbids skipping)").into())
            })
            .with_ignored_flag(!ci)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Declares the `main` of a root suite (a test target with `harness = false`) that runs the
/// listed test functions under their own names, through [`run_root_tests`]:
///
/// ```ignore
/// ofan_tests::root_tests!(k4_lab_up_pingall_traceroute_down, two_labs_at_once);
/// ```
///
/// The tests are plain `fn()`s without `#[test]`: one left out of the list is dead code, which
/// the workspace's `clippy -D warnings` rejects, so no test is silently never run.
#[macro_export]
macro_rules! root_tests {
    ($($test:ident),+ $(,)?) => {
        fn main() -> ::std::process::ExitCode {
            $crate::run_root_tests(&[$((::std::stringify!($test), $test as fn())),+])
        }
    };
}

/// Path of a workspace binary built by cargo: `$OFAN_BIN_DIR/<name>` when set, else
/// `target/<profile>/<name>` of the running test (build them first: `cargo build --bins`).
pub fn binary(name: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("OFAN_BIN_DIR") {
        return PathBuf::from(dir).join(name);
    }
    // Integration tests run from target/<profile>/deps/…; the binaries sit one level up.
    let mut path = std::env::current_exe().expect("test executable path");
    path.pop();
    if path.ends_with("deps") {
        path.pop();
    }
    path.join(name)
}

/// Runs a command and returns its output; panics with the command line and stderr on failure.
pub fn run(program: &str, args: &[&str]) -> Output {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        output.status.success(),
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A set of namespaces and processes that is torn down on drop: the processes first, then the
/// namespaces.
#[derive(Debug)]
pub struct Lab {
    children: Vec<(String, Child)>,
    dir: PathBuf,
    // Dropped after `Drop::drop` stopped the children.
    namespaces: Namespaces,
}

impl Lab {
    /// A new, empty lab with a unique prefix and a scratch directory.
    pub fn new(tag: &str) -> Self {
        let id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("ofan-t{}-{id}{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Self {
            children: Vec::new(),
            dir,
            namespaces: Namespaces::new(prefix),
        }
    }

    /// The lab's scratch directory (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The full namespace name of `short`.
    pub fn ns(&self, short: &str) -> String {
        self.namespaces.name(short)
    }

    /// Creates namespace `short` with loopback up.
    pub fn add_ns(&mut self, short: &str) -> String {
        self.namespaces
            .add(short)
            .unwrap_or_else(|e| panic!("namespace {short}: {e}"))
    }

    /// Runs a command inside namespace `short`, panicking on failure.
    pub fn exec(&self, short: &str, command: &[&str]) -> Output {
        let output = self.try_exec(short, command);
        assert!(
            output.status.success(),
            "ip netns exec {} {} failed: {}",
            self.ns(short),
            command.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// Runs a command inside namespace `short` and returns its output, failing or not.
    pub fn try_exec(&self, short: &str, command: &[&str]) -> Output {
        self.namespaces
            .output(short, command)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Links `a:a_if` and `b:b_if` with a veth pair, both ends up.
    pub fn link(&self, a: &str, a_if: &str, b: &str, b_if: &str) {
        self.link_queues(a, a_if, b, b_if, 1);
    }

    /// Links `a:a_if` and `b:b_if` with a veth pair of `queues` RX and TX queues per end.
    pub fn link_queues(&self, a: &str, a_if: &str, b: &str, b_if: &str, queues: u32) {
        let (a_ns, b_ns) = (self.ns(a), self.ns(b));
        let queues = queues.to_string();
        let q = queues.as_str();
        #[rustfmt::skip]
        let args = [
            "link", "add", "ofan-tmp-a", "numrxqueues", q, "numtxqueues", q, "netns", &a_ns,
            "type", "veth", "peer", "name", "ofan-tmp-b", "numrxqueues", q, "numtxqueues", q,
            "netns", &b_ns,
        ];
        run("ip", &args);
        self.exec(a, &["ip", "link", "set", "ofan-tmp-a", "name", a_if]);
        self.exec(b, &["ip", "link", "set", "ofan-tmp-b", "name", b_if]);
        self.exec(a, &["ip", "link", "set", a_if, "up"]);
        self.exec(b, &["ip", "link", "set", b_if, "up"]);
    }

    /// Adds `addr/len` to `ns:ifname`.
    pub fn addr(&self, ns: &str, ifname: &str, cidr: &str) {
        self.exec(ns, &["ip", "addr", "add", cidr, "dev", ifname]);
    }

    /// Configures a host namespace: address, default route, TX checksum offload off (forwarded
    /// frames would otherwise carry partial checksums).
    pub fn host(&self, ns: &str, ifname: &str, cidr: &str, gateway: &str) {
        self.addr(ns, ifname, cidr);
        self.exec(ns, &["ip", "route", "add", "default", "via", gateway]);
        self.exec(ns, &["ethtool", "-K", ifname, "tx", "off"]);
    }

    /// Starts a process in namespace `short`, logging to `<dir>/<label>.log`; it is killed (by
    /// pid) when the lab drops. Its stdin is empty (closed at once).
    pub fn spawn(&mut self, short: &str, label: &str, command: &[&str]) -> u32 {
        self.spawn_with_stdin(short, label, command, Stdio::null())
    }

    /// Like [`spawn`](Self::spawn), but the process's stdin is a pipe that stays open (nothing
    /// is written to it) until the lab drops: for agents that run until their stdin closes.
    /// Start such an agent itself, never through a shell (`sleep | agent`): the lab kills the
    /// process it started, and an agent behind a shell would outlive it.
    pub fn spawn_held_open(&mut self, short: &str, label: &str, command: &[&str]) -> u32 {
        self.spawn_with_stdin(short, label, command, Stdio::piped())
    }

    fn spawn_with_stdin(
        &mut self,
        short: &str,
        label: &str,
        command: &[&str],
        stdin: Stdio,
    ) -> u32 {
        let log = std::fs::File::create(self.dir.join(format!("{label}.log"))).expect("log file");
        let (program, args) = command.split_first().expect("a command");
        let child = self
            .namespaces
            .command(short, program)
            .args(args)
            .stdin(stdin)
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
        let pid = child.id();
        self.children.push((label.to_owned(), child));
        pid
    }

    /// The log of a process started with [`spawn`](Self::spawn).
    pub fn log(&self, label: &str) -> String {
        std::fs::read_to_string(self.dir.join(format!("{label}.log"))).unwrap_or_default()
    }

    /// Sends `signal` (e.g. "TERM", "KILL") to the process `label` and waits for it, returning
    /// its exit code (None if killed by a signal).
    pub fn signal(&mut self, label: &str, signal: &str) -> Option<i32> {
        let index = self
            .children
            .iter()
            .position(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no process `{label}`"));
        let (_, mut child) = self.children.remove(index);
        let pid = child.id().to_string();
        let _ = Command::new("kill").args(["-s", signal, &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "`{label}` did not exit within 10 s of SIG{signal}:\n{}",
                    self.log(label)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process `label` is still running.
    pub fn running(&mut self, label: &str) -> bool {
        self.children
            .iter_mut()
            .find(|(l, _)| l == label)
            .is_some_and(|(_, child)| matches!(child.try_wait(), Ok(None)))
    }

    /// Waits until `check` holds (polling every 50 ms) or `timeout` passes.
    pub fn wait_for(&self, timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        check()
    }

    /// Interfaces of namespace `short` that carry an XDP program.
    pub fn xdp_attached(&self, short: &str) -> Vec<String> {
        let output = self.try_exec(short, &["ip", "-o", "link", "show"]);
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.contains(" xdp"))
            .filter_map(|line| {
                line.split(':')
                    .nth(1)
                    .map(|name| name.trim().split('@').next().unwrap_or("").to_owned())
            })
            .collect()
    }

    /// The names of the namespaces this lab created.
    pub fn namespaces(&self) -> &[String] {
        self.namespaces.names()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            // Only a child still running: the pid of one already waited for may be reused.
            if matches!(child.try_wait(), Ok(None)) {
                let _ = Command::new("kill")
                    .args(["-s", "TERM", &child.id().to_string()])
                    .status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, child) in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        // The namespaces go when the field drops, right after this.
    }
}

/// Parses `key=value` words into a map (for the traffic tool's output).
pub fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passes() {}

    fn panics() {
        panic!("must not run");
    }

    const TESTS: [(&str, fn()); 2] = [("passes", passes), ("panics", panics)];

    #[test]
    fn the_gate_follows_root_and_ci() {
        assert_eq!(RootGate::new(true, false), RootGate::Run);
        assert_eq!(RootGate::new(true, true), RootGate::Run);
        assert_eq!(RootGate::new(false, false), RootGate::Ignore);
        assert_eq!(RootGate::new(false, true), RootGate::Fail);
    }

    #[test]
    fn trials_keep_their_names_and_are_ignored_only_without_root() {
        for (gate, ignored) in [
            (RootGate::Run, false),
            (RootGate::Ignore, true),
            (RootGate::Fail, false),
        ] {
            let trials = root_trials(gate, &TESTS);
            let seen: Vec<_> = trials
                .iter()
                .map(|t| (t.name(), t.has_ignored_flag()))
                .collect();
            assert_eq!(seen, [("passes", ignored), ("panics", ignored)], "{gate:?}");
        }
    }

    #[test]
    fn under_ci_without_root_a_test_fails_without_running() {
        let failed = run_gated(RootGate::Fail, panics).unwrap_err();
        assert!(
            failed.message().is_some_and(|m| m.contains("CI=true")),
            "{failed:?}"
        );
        assert!(run_gated(RootGate::Run, passes).is_ok());
        assert!(run_gated(RootGate::Ignore, passes).is_ok());
    }
}

/// The machine-wide settings `ofan-lab up --tune-machine` changes (and nothing else may):
/// real-time throttling, every `ksoftirqd`'s scheduling policy and priority, and the IPv4
/// neighbour table's thresholds — read as text, to compare before, during and after a lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSettings {
    /// `kernel.sched_rt_runtime_us`.
    pub rt_runtime_us: String,
    /// Each `ksoftirqd/N`: pid, policy (`/proc/PID/stat` field 41), real-time priority (40).
    pub ksoftirqd: Vec<(u32, u32, u32)>,
    /// `net.ipv4.neigh.default.gc_thresh1..3`.
    pub gc_thresh: [String; 3],
}

/// Where [`MachineSettings::gc_thresh`] live.
pub const GC_THRESH: [&str; 3] = [
    "/proc/sys/net/ipv4/neigh/default/gc_thresh1",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh2",
    "/proc/sys/net/ipv4/neigh/default/gc_thresh3",
];

impl MachineSettings {
    /// The settings now.
    ///
    /// # Panics
    /// A setting cannot be read.
    #[must_use]
    pub fn read() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("{path}: {e}"))
                .trim()
                .to_owned()
        };
        let mut ksoftirqd: Vec<(u32, u32, u32)> = std::fs::read_dir("/proc")
            .expect("/proc")
            .filter_map(Result::ok)
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.starts_with("ksoftirqd/"))
            })
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let after: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
                // Fields 40 and 41 are the 38th and 39th after the command name (fields 3…).
                Some((
                    pid,
                    after.get(38)?.parse().ok()?,
                    after.get(37)?.parse().ok()?,
                ))
            })
            .collect();
        ksoftirqd.sort_unstable();
        Self {
            rt_runtime_us: read("/proc/sys/kernel/sched_rt_runtime_us"),
            ksoftirqd,
            gc_thresh: GC_THRESH.map(read),
        }
    }

    /// Whether every `ksoftirqd` runs SCHED_FIFO (policy 1), as a tuned lab makes them.
    #[must_use]
    pub fn ksoftirqd_realtime(&self) -> bool {
        !self.ksoftirqd.is_empty() && self.ksoftirqd.iter().all(|&(_, policy, _)| policy == 1)
    }
}
