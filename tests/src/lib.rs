//! Support for ofan's root integration tests: network namespaces, veth pairs and processes that
//! are always cleaned up.
//!
//! Every object carries a unique prefix (`ofan-t<pid>-…`) and is owned by an RAII guard:
//! [`Lab`] deletes exactly the namespaces it created (which removes their veths and any XDP
//! program attached inside them) and kills exactly the processes it started, by pid — also when
//! the test panics. Tests that need root call [`require_root`] and are skipped (with a message)
//! when not run as root.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT_LAB: AtomicU32 = AtomicU32::new(0);
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the machine for one measuring test: tests that forward traffic and measure rates or
/// loss take this first, so they never compete with each other for the two cores.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the tests run as root; prints why a test is skipped otherwise.
pub fn require_root(test: &str) -> bool {
    // SAFETY-free: geteuid through `id -u` keeps this crate without unsafe.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        eprintln!("skipping {test}: needs root (network namespaces, XDP)");
    }
    root
}

/// For a measuring root test: `None` (skip, with a message) unless root, else the machine.
///
/// ```ignore
/// let Some(_machine) = ofan_tests::root_serial("my_test") else { return };
/// ```
pub fn root_serial(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    require_root(test).then(serial)
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

/// A set of namespaces and processes that is torn down on drop.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    namespaces: Vec<String>,
    children: Vec<(String, Child)>,
    dir: PathBuf,
}

impl Lab {
    /// A new, empty lab with a unique prefix and a scratch directory.
    pub fn new(tag: &str) -> Self {
        let id = NEXT_LAB.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("ofan-t{}-{id}{tag}", std::process::id());
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Self {
            prefix,
            namespaces: Vec::new(),
            children: Vec::new(),
            dir,
        }
    }

    /// The lab's scratch directory (removed on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The full namespace name of `short`.
    pub fn ns(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    /// Creates namespace `short` with loopback up.
    pub fn add_ns(&mut self, short: &str) -> String {
        let name = self.ns(short);
        run("ip", &["netns", "add", &name]);
        self.namespaces.push(name.clone());
        self.exec(short, &["ip", "link", "set", "lo", "up"]);
        name
    }

    /// Runs a command inside namespace `short`, panicking on failure.
    pub fn exec(&self, short: &str, command: &[&str]) -> Output {
        let ns = self.ns(short);
        let mut args = vec!["netns", "exec", ns.as_str()];
        args.extend_from_slice(command);
        run("ip", &args)
    }

    /// Runs a command inside namespace `short` and returns its output, failing or not.
    pub fn try_exec(&self, short: &str, command: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.ns(short)])
            .args(command)
            .output()
            .expect("ip netns exec")
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
    /// pid) when the lab drops.
    pub fn spawn(&mut self, short: &str, label: &str, command: &[&str]) -> u32 {
        let log = std::fs::File::create(self.dir.join(format!("{label}.log"))).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(short)])
            .args(command)
            .stdin(Stdio::null())
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
        &self.namespaces
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = Command::new("kill")
                .args(["-s", "TERM", &child.id().to_string()])
                .status();
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
        for ns in self.namespaces.drain(..).rev() {
            let _ = Command::new("ip").args(["netns", "del", &ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Namespaces whose name starts with `prefix` (to check that nothing is left behind).
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    let output = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// Parses `key=value` words into a map (for the traffic tool's output).
pub fn key_values(text: &str) -> BTreeMap<String, String> {
    text.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}
