//! The shared worker pool (`ofan_dataplane::afxdp::pool`) on its own: switch data paths started
//! in this process, each from a thread in its own namespace as `ofan-switch group` starts its
//! members, with their workers handed to one [`WorkerPool`] of a single thread.
//!
//! A chain `h1 — s1 — s2 — s3 — h2` and a host `h3` on `s1`. The switches' namespaces do not
//! forward (`ip_forward=0`), so whatever arrives was forwarded by the data path, and so by the
//! pool's thread, the only thread their workers have.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ofan_control::mirror::Mirror;
use ofan_dataplane::afxdp::pool::{PoolConfig, WorkerPool};
use ofan_dataplane::afxdp::{enter_network_namespace, monotonic_ns, Runtime, Threads};
use ofan_dataplane::fib::{Fib, SharedFib};
use ofan_dataplane::telemetry::SwitchTelemetry;
use ofan_switch::config::{self, BindArg, Overrides};
use ofan_tests::{binary, key_values, serial, Lab};

/// A switch whose data path runs on the pool, driven from a thread in its namespace.
struct PooledSwitch {
    name: &'static str,
    stop: Arc<AtomicBool>,
    telemetry: Arc<SwitchTelemetry>,
    /// Returns how the data path stopped: (frames balanced, frames).
    thread: Option<JoinHandle<Result<(bool, u64), String>>>,
}

impl PooledSwitch {
    /// Starts switch `name` (namespace `namespace`, ports `ports`) with its workers on `pool`.
    fn start(
        name: &'static str,
        namespace: String,
        ports: &[&str],
        pool: &Arc<WorkerPool>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let overrides = Overrides {
            ports: ports.iter().map(|p| format!("{p}:host")).collect(),
            bind_mode: Some(BindArg::Copy),
            ..Overrides::default()
        };
        let (started, telemetry) = mpsc::channel();
        let (thread_stop, thread_pool) = (Arc::clone(&stop), Arc::clone(pool));
        let thread = std::thread::Builder::new()
            .name(format!("test-{name}"))
            .spawn(move || -> Result<(bool, u64), String> {
                let fail = |what: &str, error: &dyn std::fmt::Display| format!("{what}: {error}");
                enter_network_namespace(&namespace).map_err(|e| fail("netns", &e))?;
                let config = config::load(None, &overrides).map_err(|e| fail("config", &e))?;
                let fib = Arc::new(SharedFib::from_pointee(
                    Fib::builder().build().map_err(|e| fail("fib", &e))?,
                ));
                let mirror = Mirror::start(config.mirror.clone(), Arc::clone(&fib))
                    .map_err(|e| fail("mirror", &e))?;
                let threads = Threads::Pool {
                    pool: thread_pool,
                    first: 0,
                };
                let mut runtime = Runtime::start_on(config.runtime.clone(), fib, threads)
                    .map_err(|e| fail("runtime", &e))?;
                let _ = started.send(Arc::clone(runtime.telemetry()));
                while !thread_stop.load(Ordering::SeqCst) {
                    if runtime.failed() {
                        return Err("a worker died".to_owned());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let report = runtime.stop();
                mirror.stop();
                Ok((report.frames_balanced(), report.frames))
            })
            .expect("a thread for the switch");
        let telemetry = match telemetry.recv_timeout(Duration::from_secs(20)) {
            Ok(telemetry) => telemetry,
            Err(_) => panic!("{name} did not start: {:?}", thread.join()),
        };
        Self {
            name,
            stop,
            telemetry,
            thread: Some(thread),
        }
    }

    /// Frames its data path forwarded so far.
    fn forwarded(&self) -> u64 {
        self.telemetry
            .snapshot(monotonic_ns())
            .counters
            .iter()
            .find(|(name, _)| name == "forwarded")
            .map_or(0, |&(_, value)| value)
    }

    /// Stops it; its data path's stop must return within 10 s (the pool thread hands back its
    /// workers) with every frame accounted for.
    fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let thread = self.thread.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !thread.is_finished() {
            assert!(
                Instant::now() < deadline,
                "{}: its data path did not stop within 10 s (the pool kept its workers)",
                self.name
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let (balanced, frames) = thread
            .join()
            .expect("no panic")
            .unwrap_or_else(|e| panic!("{}: {e}", self.name));
        assert!(
            balanced,
            "{}: frames unaccounted for of {frames}",
            self.name
        );
    }
}

impl Drop for PooledSwitch {
    /// A test that failed midway still stops the data path (its program detaches) before the
    /// namespaces go — unless the stop hangs (what the test may have caught): then the thread
    /// is left behind after 10 s, and the test reports its failure instead of hanging.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// The pool, ended on drop: its threads end once every switch has stopped (they are joined),
/// within 5 s, else they are left behind (a failing test reports instead of hanging).
struct PoolGuard {
    pool: Option<Arc<WorkerPool>>,
}

impl PoolGuard {
    /// Drops the pool; whether its threads ended within 5 s.
    fn end(&mut self) -> bool {
        let Some(pool) = self.pool.take() else {
            return true;
        };
        let (dropped, done) = mpsc::channel();
        std::thread::spawn(move || {
            drop(pool);
            let _ = dropped.send(());
        });
        done.recv_timeout(Duration::from_secs(5)).is_ok()
    }
}

impl Drop for PoolGuard {
    fn drop(&mut self) {
        self.end();
    }
}

/// CPU time (user + system, in clock ticks) of this process's thread named `name`.
fn thread_cpu_ticks(name: &str) -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let mut found = tasks.filter_map(Result::ok).filter(|task| {
        std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name)
    });
    let task = found.next().unwrap_or_else(|| panic!("no thread {name}"));
    assert!(found.next().is_none(), "two threads named {name}");
    let stat = std::fs::read_to_string(task.path().join("stat")).expect("stat");
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command name.
    let after: Vec<&str> = stat[stat.rfind(')').expect("comm") + 1..]
        .split_whitespace()
        .collect();
    after[11].parse::<u64>().expect("utime") + after[12].parse::<u64>().expect("stime")
}

/// Names of this process's threads that start with `prefix`.
fn threads_named(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|comm| comm.trim().to_owned())
        .filter(|comm| comm.starts_with(prefix))
        .collect()
}

/// A flow of `count` datagrams from namespace `from` to `to_addr` in namespace `to`, at `rate`
/// per second.
struct Flow<'a> {
    from: &'a str,
    to: &'a str,
    to_addr: &'a str,
    count: u64,
    rate: u64,
}

/// Starts `flow` in the background (its receiver, then its sender) under the name `tag`;
/// returns the receiver's label.
fn start_flow(lab: &mut Lab, tag: &str, flow: Flow<'_>) -> String {
    let Flow {
        from,
        to,
        to_addr,
        count,
        rate,
    } = flow;
    let udp = binary("ofan-udp").display().to_string();
    let label = format!("recv-{tag}");
    let count = count.to_string();
    lab.spawn(
        to,
        &label,
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9000",
            "--count",
            &count,
            "--timeout-ms",
            "3000",
        ],
    );
    assert!(lab.wait_for(Duration::from_secs(5), || lab.log(&label).contains("ready")));
    let target = format!("{to_addr}:9000");
    let rate = rate.to_string();
    lab.spawn(
        from,
        &format!("send-{tag}"),
        &[
            &udp, "send", "--to", &target, "--count", &count, "--size", "200", "--rate", &rate,
            "--flows", "4",
        ],
    );
    label
}

/// Datagrams the receiver `label` got, once it has reported (each once).
fn received(lab: &Lab, label: &str) -> u64 {
    assert!(
        lab.wait_for(Duration::from_secs(30), || lab
            .log(label)
            .contains("received=")),
        "receiver {label} never reported"
    );
    let report = key_values(&lab.log(label));
    assert_eq!(report["duplicates"], "0", "{report:?}");
    report["received"].parse().expect("a count")
}

fn ping(lab: &Lab, from: &str, to: &str) -> bool {
    lab.try_exec(from, &["ping", "-c", "2", "-i", "0.05", "-W", "1", to])
        .status
        .success()
}

/// One pool thread serves three switches: a frame crosses all three on it; with nothing to
/// forward it sleeps (under a tenth of a CPU); a switch stopped in the middle of the chain
/// gets its workers back from it (its stop returns, every frame accounted for) while another
/// switch's flow on the same thread loses nothing, and the switch started again on the same
/// pool forwards again; once every switch has stopped, the pool ends.
pub(crate) fn pool_thread_serves_switches_in_turn_sleeps_when_idle_and_lets_one_restart() {
    let _machine = serial();
    let mut lab = Lab::new("pool");
    for ns in ["h1", "s1", "s2", "s3", "h2", "h3"] {
        lab.add_ns(ns);
    }
    lab.link("h1", "eth0", "s1", "p0");
    lab.link("s1", "p1", "s2", "p0");
    lab.link("s2", "p1", "s3", "p0");
    lab.link("s3", "p1", "h2", "eth0");
    lab.link("s1", "p2", "h3", "eth0");
    lab.addr("s1", "p0", "10.9.0.0/31");
    lab.addr("s1", "p1", "10.9.1.0/31");
    lab.addr("s1", "p2", "10.9.4.0/31");
    lab.addr("s2", "p0", "10.9.1.1/31");
    lab.addr("s2", "p1", "10.9.2.0/31");
    lab.addr("s3", "p0", "10.9.2.1/31");
    lab.addr("s3", "p1", "10.9.3.0/31");
    lab.host("h1", "eth0", "10.9.0.1/31", "10.9.0.0");
    lab.host("h2", "eth0", "10.9.3.1/31", "10.9.3.0");
    lab.host("h3", "eth0", "10.9.4.1/31", "10.9.4.0");
    for (switch, prefix, via) in [
        ("s1", "10.9.3.0/24", "10.9.1.1"),
        ("s2", "10.9.0.0/24", "10.9.1.0"),
        ("s2", "10.9.4.0/24", "10.9.1.0"),
        ("s2", "10.9.3.0/24", "10.9.2.1"),
        ("s3", "10.9.0.0/24", "10.9.2.0"),
        ("s3", "10.9.4.0/24", "10.9.2.0"),
    ] {
        lab.exec(switch, &["ip", "route", "add", prefix, "via", via]);
    }
    for switch in ["s1", "s2", "s3"] {
        lab.exec(switch, &["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    }

    let mut guard = PoolGuard {
        pool: Some(Arc::new(
            WorkerPool::start(PoolConfig {
                threads: 1,
                rt_priority: None,
                pin: false,
                activity: None,
                fair_share_rest_ns: 0,
            })
            .expect("the pool"),
        )),
    };
    // Dropped before the guard, which drops the last reference.
    let pool = Arc::clone(guard.pool.as_ref().expect("the pool"));
    let s1 = PooledSwitch::start("s1", lab.ns("s1"), &["p0", "p1", "p2"], &pool);
    let s2 = PooledSwitch::start("s2", lab.ns("s2"), &["p0", "p1"], &pool);
    let s3 = PooledSwitch::start("s3", lab.ns("s3"), &["p0", "p1"], &pool);
    assert_eq!(
        threads_named("ofan-worker"),
        Vec::<String>::new(),
        "a switch on the pool runs no worker thread of its own"
    );
    assert_eq!(threads_named("ofan-pool"), ["ofan-pool-0"]);

    // Across the three switches, on the one thread.
    let through = lab.wait_for(Duration::from_secs(10), || ping(&lab, "h1", "10.9.3.1"));
    assert!(through, "no ping h1 → h2 through s1, s2, s3");
    const N: u64 = 2_000;
    let before = [&s1, &s2, &s3].map(PooledSwitch::forwarded);
    let chain = Flow {
        from: "h1",
        to: "h2",
        to_addr: "10.9.3.1",
        count: N,
        rate: 10_000,
    };
    let flow = start_flow(&mut lab, "chain", chain);
    assert_eq!(received(&lab, &flow), N, "h1 → h2 through s1, s2, s3");
    // Workers publish their counters every few milliseconds.
    let forwarded = || {
        let after = [&s1, &s2, &s3].map(PooledSwitch::forwarded);
        [0, 1, 2].map(|i| after[i] - before[i])
    };
    let counted = lab.wait_for(Duration::from_secs(2), || {
        forwarded().iter().all(|&f| f >= N)
    });
    assert!(
        counted,
        "forwarded by s1, s2, s3: {:?} of {N} each",
        forwarded()
    );

    // Idle: the thread sleeps (it would spin a whole CPU, 2 s = 200 ticks, if it did not).
    std::thread::sleep(Duration::from_millis(300));
    let ticks = thread_cpu_ticks("ofan-pool-0");
    std::thread::sleep(Duration::from_secs(2));
    let idle = thread_cpu_ticks("ofan-pool-0") - ticks;
    assert!(idle < 20, "the idle pool thread used {idle} ticks in 2 s");

    // s2 stops while s1 forwards h1 → h3 on the same thread, and starts again.
    assert!(lab.wait_for(Duration::from_secs(10), || ping(&lab, "h1", "10.9.4.1")));
    const BACKGROUND: u64 = 4_000;
    let beside = Flow {
        from: "h1",
        to: "h3",
        to_addr: "10.9.4.1",
        count: BACKGROUND,
        rate: 1_000,
    };
    let beside = start_flow(&mut lab, "beside", beside);
    std::thread::sleep(Duration::from_millis(500));
    s2.stop();
    assert!(
        !ping(&lab, "h1", "10.9.3.1"),
        "h1 reached h2 with s2 stopped"
    );
    let s2 = PooledSwitch::start("s2", lab.ns("s2"), &["p0", "p1"], &pool);
    let back = lab.wait_for(Duration::from_secs(10), || ping(&lab, "h1", "10.9.3.1"));
    assert!(back, "no ping h1 → h2 through the restarted s2");
    let again = Flow {
        from: "h1",
        to: "h2",
        to_addr: "10.9.3.1",
        count: N,
        rate: 10_000,
    };
    let flow = start_flow(&mut lab, "again", again);
    assert_eq!(received(&lab, &flow), N, "h1 → h2 through the restarted s2");
    assert!(lab.wait_for(Duration::from_secs(2), || s2.forwarded() >= N));
    assert_eq!(
        received(&lab, &beside),
        BACKGROUND,
        "h1 → h3 (s1 alone) lost datagrams while s2 stopped and started"
    );

    for switch in [s1, s2, s3] {
        switch.stop();
    }
    // Every worker handed back: dropping the pool joins its thread.
    drop(pool);
    assert!(
        guard.end(),
        "the pool did not end with every switch stopped"
    );
    assert_eq!(threads_named("ofan-pool"), Vec::<String>::new());
}
