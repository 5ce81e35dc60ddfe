//! One repetition on a running lab: reset and snapshot every switch, start one agent per host
//! at a common start time, wait for all of them, snapshot again, evaluate.

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use ofan_control::admin::Client;
use ofan_dataplane::telemetry::SwitchSnapshot;
use ofan_topology::{NodeId, Role};

use super::chaos::{self, Chaos};
use super::kernel::{self, KernelCounters, Side};
use super::metrics::{self, KernelSample, LabSetup, RepInput, RunReport, SwitchSample};
use super::progress::{ProgressFile, RunProgress};
use super::stalls;
use ofan_lab::{plan::namespace, Loaded};
use ofan_lab_agent::collective::Plan;
use ofan_lab_agent::report::AgentReport;

/// How long after a reset request every worker has applied it: an idle worker wakes up at
/// least every 100 ms.
const RESET_SETTLE: Duration = Duration::from_millis(250);

/// How long after the last agent exits the switches and kernels are read: frames still
/// between a switch's queue and a host's socket reach their counters, and every idle worker
/// has woken (at least every 100 ms) and published its queues' last frames leaving the wire.
const SETTLE_AFTER: Duration = Duration::from_millis(200);

/// The log of the shared agent in a repetition's directory.
const SHARED_LOG: &str = "agents.log";

/// Options passed to every agent.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// SCHED_FIFO priority of the sender threads (0 = off).
    pub rt_priority: u8,
    /// Make up for late sends (sch_fq style).
    pub catch_up: bool,
    /// Spin window before each departure, µs.
    pub spin_us: u64,
    /// Entropy pool for spray/REPS.
    pub entropies: u16,
    /// UDP port of the agents.
    pub port: u16,
    /// Multi-plane hosts' plane policy.
    pub host_planes: ofan_dataplane::lb::planes::PlanePolicy,
    /// One agent process for all hosts, or one per host.
    pub agents: AgentMode,
    /// Watch the machine for stalls during each repetition (labs of a switch group only; see
    /// [`super::stalls::StallWatch`]).
    pub stall_watch: bool,
}

/// How a repetition's host agents run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AgentMode {
    /// One process in the root namespace serves every host (`ofan-lab agent --lab L --host …
    /// --out-dir D`): one sender thread paces all hosts' departures, one receiver thread
    /// serves all their sockets — few wake-ups and context switches on a small machine.
    #[default]
    Shared,
    /// One process per host, each started in its host's namespace (`ip netns exec`).
    PerHost,
}

/// Kills agents that are still running when dropped (an error or Ctrl-C of the orchestrator
/// never leaves agents behind). Each process with the hosts it serves.
struct Agents(Vec<(Vec<String>, Child)>);

impl Drop for Agents {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// Runs one repetition of `plan` on `lab` and returns its report; agents' plans, logs and
/// reports are kept in `dir`. With `chaos`, one fault ([`chaos::schedule`]) strikes while the
/// agents run, and the report's `chaos` record says what it did ([`chaos::judge`]).
///
/// # Errors
/// A switch that does not answer, an agent that cannot be started or writes no report.
pub fn run_repetition(
    lab: &Loaded,
    plan: &Plan,
    setup: LabSetup,
    options: &AgentOptions,
    dir: &Path,
    chaos: Option<&Chaos>,
) -> anyhow::Result<RunReport> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let plan_path = dir.join("plan.json");
    std::fs::write(&plan_path, plan.to_json())
        .with_context(|| format!("cannot write {}", plan_path.display()))?;
    let lower_bound_ps = metrics::lower_bound_ps(
        &lab.topology,
        plan,
        setup.link_rate_bps,
        setup.load,
        setup.payload,
        &setup.slowed_links,
    )
    .map_err(anyhow::Error::msg)?;

    let switches: Vec<(NodeId, String, Client)> = lab
        .topology
        .switches()
        .iter()
        .filter(|switch| !lab.state.stopped.contains(&switch.name))
        .map(|switch| {
            let client = Client::new(lab.dir.socket(&switch.name));
            (switch.id, switch.name.clone(), client)
        })
        .collect();
    for (_, name, client) in &switches {
        client
            .reset()
            .with_context(|| format!("switch {name} (is the lab healthy? see ofan-lab status)"))?;
    }
    std::thread::sleep(RESET_SETTLE);
    let before = snapshot_all(&switches)?;
    let namespaces = open_namespaces(lab)?;
    let kernels_before = kernel_all(&namespaces)?;

    // Agents bind their sockets within milliseconds of starting; leave them ample time.
    let hosts = plan.hosts.len() as u64;
    let lead = Duration::from_millis(500 + 25 * hosts);
    let start_at = ofan_lab_agent::monotonic_now_ns() + lead.as_nanos() as u64;
    let expected_s = lower_bound_ps as f64 * 1e-12;
    let buffer_bytes = ofan_topology::units::parse_size(&setup.buffer)
        .with_context(|| format!("the lab's buffer `{}`", setup.buffer))?;
    let max_round_trip_ns = metrics::max_round_trip_ns(
        &lab.topology,
        plan,
        setup.link_rate_bps,
        setup.payload,
        buffer_bytes,
    )
    .map_err(anyhow::Error::msg)?;
    // A bound on a stuck run, not on a slow one: recovering a loss costs a few timeouts.
    let timeout_s = f64::max(10.0 * expected_s, 4.0 * max_round_trip_ns as f64 * 1e-9) + 10.0;
    let stop_file = dir.join("stop");
    let _ = std::fs::remove_file(&stop_file);
    let done_file = |host: &str| dir.join(format!("{host}.done"));
    // This very binary, even after a rebuild replaced its file during a long campaign (the
    // agents of the next repetition then failed to start: "exec of …/ofan-lab (deleted)"):
    // the kernel keeps the running image behind /proc/PID/exe.
    let exe = std::path::PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    let stagger = stagger_ns(&setup, plan.hosts.len());
    // `agent` and the options every host shares, logging to `log`.
    let cc = setup.cc;
    let agent = |command: &mut Command, log: &Path| -> anyhow::Result<()> {
        let log = File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
        command
            .arg("agent")
            .arg("--plan")
            .arg(&plan_path)
            .args(["--link-rate", &setup.link_rate_bps.to_string()])
            .args(["--load", &setup.load.to_string()])
            .args(["--payload", &setup.payload.to_string()])
            .args(["--host-lb", &setup.host_lb])
            .args(["--host-planes", options.host_planes.name()])
            .args(["--entropies", &options.entropies.to_string()])
            .args(["--seed", &setup.seed.to_string()])
            .args(["--port", &options.port.to_string()])
            .args(["--timeout", &format!("{timeout_s:.1}")])
            .args(["--spin-us", &options.spin_us.to_string()])
            .args(["--rt-priority", &options.rt_priority.to_string()])
            .args(["--max-round-trip", &format!("{max_round_trip_ns}ns")])
            .arg("--stop-file")
            .arg(&stop_file)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        if options.catch_up {
            command.arg("--catch-up");
        }
        if let Some(cc) = &cc {
            command
                .args(["--cc", cc.kind.name()])
                .args(["--base-rtt", &format!("{}ns", cc.path.base_rtt)]);
        }
        if options.host_planes == ofan_dataplane::lb::planes::PlanePolicy::PlaneArf
            && lab.state.params.notifies_hosts()
        {
            // The edges pass their notifications on (`--arf-notify-hosts`): the agents hear
            // them and rebuild their edges' views from the topology's routing plan.
            command
                .arg("--topology")
                .arg(lab.dir.topology_file())
                .args(["--arf-combine", lab.state.params.arf_combine.name()]);
        }
        if lab.state.params.host_links == ofan_lab::HostLinks::Shared {
            command.arg("--host-links").arg(lab.dir.host_links());
        }
        Ok(())
    };
    for host in &plan.hosts {
        let _ = std::fs::remove_file(done_file(&host.name));
    }
    // From before the first agent starts until the last has stopped; only where a group keeps
    // the CPUs awake anyway (in a lab of switch processes its spinning would keep the CPUs from
    // halting, which they otherwise do).
    let watch = if options.stall_watch && lab.state.params.switches == ofan_lab::Switches::Group {
        match stalls::StallWatch::start() {
            Ok(watch) => Some(watch),
            Err(error) => {
                eprintln!("ofan-lab: no stall watch for this repetition ({error})");
                None
            }
        }
    } else {
        None
    };
    let mut agents = Agents(Vec::with_capacity(plan.hosts.len()));
    match options.agents {
        AgentMode::Shared => {
            // In the root namespace: it creates each host's sockets in the host's namespace.
            let mut command = Command::new(&exe);
            agent(&mut command, &dir.join(SHARED_LOG))?;
            command
                .args(["--lab", &lab.state.name])
                .args(["--start-at", &start_at.to_string()])
                .args(["--stagger-ns", &stagger.to_string()])
                .arg("--out-dir")
                .arg(dir);
            for host in &plan.hosts {
                command.args(["--host", &host.name]);
            }
            let child = command
                .spawn()
                .context("cannot start the shared agent of every host")?;
            let names = plan.hosts.iter().map(|host| host.name.clone()).collect();
            agents.0.push((names, child));
        }
        AgentMode::PerHost => {
            for (index, host) in plan.hosts.iter().enumerate() {
                let start_at = start_at + index as u64 * stagger;
                let mut command = Command::new("ip");
                command
                    .args(["netns", "exec", &namespace(&lab.state.name, &host.name)])
                    .arg(&exe);
                agent(&mut command, &dir.join(format!("{}.log", host.name)))?;
                command
                    .args(["--host", &host.name])
                    .args(["--start-at", &start_at.to_string()])
                    .arg("--out")
                    .arg(dir.join(format!("{}.json", host.name)))
                    .arg("--done-file")
                    .arg(done_file(&host.name));
                let child = command
                    .spawn()
                    .with_context(|| format!("cannot start the agent of {}", host.name))?;
                agents.0.push((vec![host.name.clone()], child));
            }
        }
    }
    // The fault, on its own thread: the lab's operations take their time (a reconvergence, a
    // switch coming back) while the agents go on.
    let fault = chaos.and_then(|chaos| {
        chaos::schedule(
            chaos,
            setup.seed,
            &lab.topology,
            &lab.routing_failures(),
            &lab.state.stopped,
            Duration::from_nanos(lower_bound_ps / 1000),
        )
    });
    let cancel = Arc::new(AtomicBool::new(false));
    let striker = fault.clone().map(|fault| {
        let traffic_start = Instant::now()
            + Duration::from_nanos(start_at.saturating_sub(ofan_lab_agent::monotonic_now_ns()));
        let (name, cancel) = (lab.state.name.clone(), Arc::clone(&cancel));
        std::thread::spawn(move || chaos::apply(&name, &fault, traffic_start, &cancel))
    });
    // Every agent keeps answering after it completes, until all have (a peer whose last ACK
    // was lost must still get one); then they all stop and write their reports.
    let deadline = Instant::now() + lead + Duration::from_secs_f64(timeout_s + 15.0);
    let mut stopping = false;
    // When the last agent completed (seen within a poll): the end of the traffic.
    let mut completed_at = None;
    // For the lab's live view (`ofan-lab view`), which cannot see the agents.
    let mut progress = ProgressFile::new(lab.dir.root());
    while Instant::now() < deadline {
        if crate::interrupt::interrupted() {
            // The agents stop with `agents` (killed on drop), the fault's thread here.
            cancel.store(true, Ordering::Relaxed);
            crate::interrupt::check()?;
        }
        let done: Vec<bool> = plan
            .hosts
            .iter()
            .map(|host| done_file(&host.name).exists())
            .collect();
        progress.write(RunProgress::of(
            plan,
            &done,
            std::process::id(),
            expected_s,
            cc.map_or(ofan_transport::CcKind::None, |cc| cc.kind),
        ));
        let running: Vec<&str> = agents
            .0
            .iter_mut()
            .filter_map(|(hosts, child)| matches!(child.try_wait(), Ok(None)).then_some(hosts))
            .flat_map(|hosts| hosts.iter().map(String::as_str))
            .collect();
        if running.is_empty() {
            break;
        }
        if !stopping && running.iter().all(|host| done_file(host).exists()) {
            File::create(&stop_file)
                .with_context(|| format!("cannot create {}", stop_file.display()))?;
            stopping = true;
            completed_at = Some(ofan_lab_agent::monotonic_now_ns());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(agents);
    // Whether the CPUs were full is judged over the traffic: from the agents' common start to
    // the last one's completion (or to now, if one never completed).
    let traffic = (
        start_at,
        completed_at.unwrap_or_else(ofan_lab_agent::monotonic_now_ns),
    );
    let machine = watch.and_then(|watch| watch.stop(Some(traffic)).ok());
    drop(progress);
    cancel.store(true, Ordering::Relaxed);
    let applied = striker.map(|striker| {
        striker.join().unwrap_or_else(|_| chaos::Applied {
            error: Some("the fault's thread panicked".into()),
            ..chaos::Applied::default()
        })
    });
    // Frames still on their way between a switch and a host's socket land in a counter.
    std::thread::sleep(SETTLE_AFTER);
    let after = snapshot_all(&switches)?;
    let kernels_after = kernel_all(&namespaces)?;

    let reports = plan
        .hosts
        .iter()
        .map(|host| {
            let path = dir.join(format!("{}.json", host.name));
            let text = std::fs::read_to_string(&path).map_err(|_| {
                let (log, last) = match options.agents {
                    AgentMode::PerHost => (format!("{}.log", host.name), None),
                    AgentMode::Shared => (SHARED_LOG.to_owned(), Some(host.name.as_str())),
                };
                let log = std::fs::read_to_string(dir.join(&log)).unwrap_or_default();
                anyhow::anyhow!(
                    "the agent of {} wrote no report; {log} says: {}",
                    host.name,
                    last_log_line(&log, last).unwrap_or("(nothing)")
                )
            })?;
            serde_json::from_str::<AgentReport>(&text)
                .with_context(|| format!("{}: not an agent report", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let samples: Vec<SwitchSample> = switches
        .iter()
        .zip(before)
        .zip(after)
        .map(|(((node, _, _), before), after)| SwitchSample {
            node: *node,
            route_changes: after.1.saturating_sub(before.1),
            before: before.0,
            after: after.0,
        })
        .collect();
    let report = metrics::evaluate(&RepInput {
        topology: &lab.topology,
        plan,
        reports: &reports,
        switches: &samples,
        kernels: &namespaces
            .iter()
            .zip(kernels_before)
            .zip(kernels_after)
            .map(|((_, before), after)| KernelSample { before, after })
            .collect::<Vec<_>>(),
        setup,
        fault_injected: fault.is_some(),
    })
    .map_err(anyhow::Error::msg)?;
    let mut report = report;
    if let (Some(chaos), Some(fault), Some(applied)) = (chaos, &fault, &applied) {
        let record = chaos::judge(chaos.seed, fault, applied, &report);
        if let ofan_model::report::Details::Lab(lab) = &mut report.details {
            lab.chaos = Some(record);
        }
    }
    if let ofan_model::report::Details::Lab(lab) = &mut report.details {
        lab.machine = machine;
    }
    let path = dir.join("result.json");
    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(report)
}

/// The last line of an agent's log — with `host`, the last that names it, else the last.
fn last_log_line<'a>(log: &'a str, host: Option<&str>) -> Option<&'a str> {
    host.and_then(|host| log.lines().rev().find(|line| line.contains(host)))
        .or_else(|| log.lines().last())
}

/// Agents start one full DATA frame time apart divided by the number of hosts: all of them
/// within one packet time (the collective still starts together at the scale of a message),
/// but their departures never fall due at the same instant — on a small machine, sixteen
/// agents due at once would queue for the CPUs and each lose that wait at every packet.
fn stagger_ns(setup: &LabSetup, hosts: usize) -> u64 {
    let frame_bits = f64::from(setup.payload + metrics::FRAME_OVERHEAD) * 8.0 + 160.0;
    let wire_ns = frame_bits / (setup.link_rate_bps as f64 * setup.load) * 1e9;
    (wire_ns / hosts.max(1) as f64) as u64
}

/// Every node's namespace of the lab (switches and hosts), open.
fn open_namespaces(lab: &Loaded) -> anyhow::Result<Vec<(String, Side, File)>> {
    lab.topology
        .nodes()
        .iter()
        .map(|node| {
            let file = ofan_lab::ops::open_namespace(&lab.state.name, &node.name)
                .with_context(|| format!("cannot open the namespace of {}", node.name))?;
            let side = if node.role == Role::Host {
                Side::Host
            } else {
                Side::Switch
            };
            Ok((node.name.clone(), side, file))
        })
        .collect()
}

fn kernel_all(namespaces: &[(String, Side, File)]) -> anyhow::Result<Vec<KernelCounters>> {
    namespaces
        .iter()
        .map(|(node, side, file)| {
            kernel::read(file, *side).with_context(|| format!("kernel counters of {node}"))
        })
        .collect()
}

/// Every switch's telemetry and how many times its routes have changed so far.
fn snapshot_all(
    switches: &[(NodeId, String, Client)],
) -> anyhow::Result<Vec<(SwitchSnapshot, u64)>> {
    switches
        .iter()
        .map(|(_, name, client)| {
            let stats = client.stats().with_context(|| {
                format!("switch {name} (is the lab healthy? see ofan-lab status)")
            })?;
            // The steering program's drops (a blackholed port) beside the workers'.
            let mut snapshot = stats.data_path;
            snapshot.counters.extend(
                stats
                    .steering
                    .into_iter()
                    .filter(|(name, _)| name.starts_with("drop_"))
                    .map(|(name, value)| {
                        (format!("{}{name}", super::metrics::STEERING_PREFIX), value)
                    }),
            );
            Ok((snapshot, stats.fib.route_changes))
        })
        .collect()
}
