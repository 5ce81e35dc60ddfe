//! `ofan-switch group`: several switches in one process, their pipes served by one shared pool
//! of worker threads.
//!
//! Each member is the switch `ofan-switch run` would be — the same configuration, FIB mirror,
//! admin socket, counters, BMP station and adaptive-routing speaker — started on a short-lived
//! thread that first enters the member's network namespace, so that every socket it opens
//! belongs there ([`Running::start`]). What runs after that is shared: [`WorkerPool`] threads
//! (one per CPU by default) step the workers of many switches in turn, so a frame one member
//! transmits is forwarded by the next one without a wake-up (see
//! `ofan_dataplane::afxdp::pool`), and one control loop ([`EventLoop`], thread `ofan-control`)
//! serves every member's control sources — admin sockets and housekeeping — instead of threads
//! per member. A member is stopped on a thread in its namespace too (a detach may need it).
//!
//! Members start and stop on their own through the group's control socket (one line per
//! request: `status`, `stop NODE`, `kill NODE`, `start NODE`; one JSON line per reply): a
//! stopped member detaches its program and releases its sockets as a stopped process would; a
//! killed one closes its sockets but leaves its program attached, as a killed process does (its
//! ports drop everything until it starts again); the others forward on. A member whose workers
//! die is reported `failed` with its error. SIGINT/SIGTERM stop them all.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use ofan_control::event::{self, EventLoop, LoopHandle};
use ofan_dataplane::afxdp::bypass::OpenBypass;
use ofan_dataplane::afxdp::pool::{PoolActivity, PoolConfig, WorkerPool};
use ofan_dataplane::afxdp::splice::{SplicePort, SpliceSlot};
use ofan_dataplane::afxdp::{enter_network_namespace, Threads};
use ofan_dataplane::lb::Algorithm;
use ofan_switch::config;
use ofan_topology::Topology;
use serde::Serialize;

use super::{init_logging, stop_on_signals, RunArgs};
use crate::running::Running;
use awake::KeepAwakeThread;
use hostlink::host_links_of;

mod awake;
mod hostlink;

/// `--help` of `ofan-switch group`.
pub const LONG_ABOUT: &str = "\
Run several switches in one process: each in its network namespace (--netns, `{node}` replaced \
by the member's name), with its own FIB mirror, admin socket (--admin-socket with `{node}`), \
counters, BMP station and notifications, as `ofan-switch run` would; their pipes are served by \
a shared pool of --workers threads (default: one per CPU), and their control work (FIB mirrors, \
admin sockets, BMP stations, notifications) by one event loop on one thread: the group's threads \
do not grow with its members.

A switch in its own process sleeps in epoll until each frame wakes it: in a lab of twenty \
switches on two cores that is a wake-up and a context switch per frame per hop. Pool threads \
step the workers of many switches in turn: a frame one member sends is in the next member's \
RX ring when the send returns, and the same thread forwards it at once. Use a group for labs \
(`ofan-lab up` does, unless --switches process); run one switch per process on a real box.

Every member gets the same flags (or --config file) with --node set to its name. The control \
socket (--control) takes one request per line — `status`, `stop NODE`, `kill NODE` (ends it as \
a crash would: sockets closed, program left attached), `start NODE` — and answers one JSON \
line. SIGINT/SIGTERM stop every member cleanly.

Example: ip netns add … ; ofan-switch group --topology topo.json --member e-p0-0 --member \
e-p0-1 --netns 'lab-{node}' --admin-socket '/run/ofan/{node}.sock' --lb pofan --link-rate 20mbit";

/// Arguments of `ofan-switch group`.
#[derive(Debug, Clone, clap::Args)]
pub struct GroupArgs {
    /// A switch to run: its node name (repeat for each member; sets --node for it).
    #[arg(long = "member", value_name = "NODE", required = true)]
    members: Vec<String>,
    /// A member that runs another load-balancing algorithm than --lb, as NODE=ALGO (repeat):
    /// a fabric whose switches run different algorithms (incremental deployment, paper §6.4).
    #[arg(long = "member-lb", value_name = "NODE=ALGO", value_parser = parse_member_lb)]
    member_lb: Vec<(String, Algorithm)>,
    /// Network namespace of each member (`ip netns` name); `{node}` is replaced by its name.
    #[arg(long, value_name = "PATTERN")]
    netns: String,
    /// Worker threads shared by the members (default: one per CPU).
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
    /// SCHED_FIFO priority of the shared worker threads (1..=99; 0 = ordinary scheduling;
    /// default: the members' --rt-priority). A lab runs them above every switch's own threads
    /// and below its host agents and the kernel's ksoftirqd.
    #[arg(long, value_name = "PRIO")]
    pool_rt_priority: Option<u8>,
    /// Keep the CPUs awake this long after the last frame moved, µs (0: never): the group
    /// holds a CPU-latency request of 0 µs (/dev/cpu_dma_latency) while frames flow, so idle
    /// CPUs poll instead of halting — no task spins, and wake-ups need no interrupt. In a
    /// virtual machine an idle CPU halts, and waking it (for a frame, a timer, a host agent)
    /// takes the hypervisor up to milliseconds. Needs a cpuidle driver whose shallowest state
    /// polls (haltpoll in a KVM guest, intel_idle, acpi_idle); elsewhere the log says the CPUs
    /// are not kept awake. The kernel drops the request when the group exits, however it ends.
    /// A lab sets it.
    #[arg(long, value_name = "US", default_value_t = 0)]
    keep_awake_us: u64,
    /// A pool thread that has run 1 ms without sleeping (it never ran out of work) rests this
    /// long, so that the machine's ordinary tasks get the CPU in short slices — otherwise the
    /// kernel's fair server gives them their 5 % in blocks of up to 50 ms ahead of every
    /// real-time task, agents included (0: never rest). Frames wait in the rings meanwhile:
    /// a departure due then is up to the rest late.
    #[arg(long, value_name = "US", default_value_t = 0)]
    fair_share_us: u64,
    /// The group's control socket.
    #[arg(long, value_name = "PATH", default_value = "/run/ofan/ofan-group.sock")]
    control: PathBuf,
    /// Carry frames between members in the process (needs --topology): a frame a member
    /// sends toward another member is copied into that member's memory and decided there
    /// at once, without the veth between them — the kernel's work per hop (a system call, an
    /// skb, two copies) becomes one copy. Only frames the receiver's XDP program would give
    /// its data path, over links up at both ends and not blackholed; the rest still take
    /// the veth. The veths' counters and tcpdump on them do not see spliced frames.
    #[arg(long)]
    splice: bool,
    /// Link each member's ports that lead to a host (needs --topology) to the host's traffic
    /// agent through shared memory: the file `DIR/HOST.link` (made here, with its wake-up FIFOs
    /// `HOST.link-up` and `HOST.link-down`). While an agent is attached, the frames it sends
    /// arrive through the link and the UDP datagrams to its port leave through it, without the
    /// veth and the host's kernel; everything else (ARP, ping, TCP, other ports) keeps the veth.
    #[arg(long, value_name = "DIR")]
    host_links: Option<PathBuf>,
    /// Every member's configuration (--admin-socket must contain `{node}` when there are
    /// several members).
    #[command(flatten)]
    run: RunArgs,
}

/// What a member is doing, as `status` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
enum MemberState {
    /// Its thread runs the switch.
    Running,
    /// Stopped on request (or never started again).
    Stopped,
    /// It ended with an error (configuration, data path, a dead worker).
    Failed {
        /// Why.
        error: String,
    },
}

struct Member {
    /// The thread starting it in its namespace, until it is joined.
    starting: Option<JoinHandle<anyhow::Result<Running>>>,
    /// The switch, once started.
    running: Option<Running>,
    state: MemberState,
    /// Its network namespace, held open while the group lives: no thread of the group need
    /// stay in a member's namespace (the control loop and the pool serve every member from
    /// the root namespace), and this descriptor is how tools that look for the processes of
    /// a namespace find the group (`ofan-lab down --all` and `reset` stat every descriptor).
    _namespace: Option<std::fs::File>,
}

impl Member {
    /// Whether it runs or is starting.
    fn is_up(&self) -> bool {
        self.starting.is_some() || self.running.is_some()
    }
}

/// How a member ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// As a stopped process: program detached, frames accounted for.
    Stop,
    /// As a killed process: sockets closed, program left attached and dropping.
    Kill,
}

/// What every member is started from.
struct Blueprint {
    args: GroupArgs,
    pool: Arc<WorkerPool>,
    /// The control loop every member's sources join.
    control: LoopHandle,
    /// With --splice: each member's in-process links, by port name.
    splices: BTreeMap<String, BTreeMap<String, SplicePort>>,
    /// With --host-links: each member's host links, by port name.
    host_links: BTreeMap<String, BTreeMap<String, Arc<dyn OpenBypass>>>,
}

/// The in-process links between `members` of `topology` (both ends members): for each member,
/// by port name, the slots of the port's end and of its peer's.
fn splices_between(
    topology: &Topology,
    members: &[String],
) -> BTreeMap<String, BTreeMap<String, SplicePort>> {
    let mut splices: BTreeMap<String, BTreeMap<String, SplicePort>> = BTreeMap::new();
    let is_member = |name: &str| members.iter().any(|m| m == name);
    for link in topology.links() {
        let ends = [link.a, link.b].map(|(node, port)| {
            (
                topology.node(node).name.clone(),
                topology.port(node, port).ifname.clone(),
                Arc::new(SpliceSlot::default()),
            )
        });
        if !ends.iter().all(|(node, _, _)| is_member(node)) {
            continue;
        }
        for (this, other) in [(0, 1), (1, 0)] {
            let (node, ifname, own) = &ends[this];
            splices.entry(node.clone()).or_default().insert(
                ifname.clone(),
                SplicePort {
                    own: Arc::clone(own),
                    peer: Arc::clone(&ends[other].2),
                },
            );
        }
    }
    splices
}

/// `by_name`'s values in `ports` order (`None` for a port it lacks); empty when it is.
fn by_port<T: Clone>(
    ports: &[ofan_dataplane::afxdp::PortSpec],
    by_name: &BTreeMap<String, T>,
) -> Vec<Option<T>> {
    if by_name.is_empty() {
        return Vec::new();
    }
    ports
        .iter()
        .map(|port| by_name.get(&port.name).cloned())
        .collect()
}

impl Blueprint {
    /// The pool thread of member `node`'s first pipe: members are spread over the threads in
    /// blocks of consecutive names (the lab lists them pod by pod), so that switches that
    /// exchange most frames share a thread.
    fn thread_of(&self, node: &str) -> usize {
        let position = self
            .args
            .members
            .iter()
            .position(|m| m == node)
            .unwrap_or(0);
        position * self.pool.threads() / self.args.members.len().max(1)
    }

    fn netns(&self, node: &str) -> String {
        self.args.netns.replace("{node}", node)
    }

    /// Starts member `node` on a thread in its namespace (its state is `running` from now; a
    /// start that fails makes it `failed` when [`settle`] joins the thread).
    fn start(&self, node: &str) -> anyhow::Result<Member> {
        let mut overrides = self.args.run.overrides.clone();
        overrides.node = Some(node.to_owned());
        if let Some((_, algorithm)) = self.args.member_lb.iter().find(|(name, _)| name == node) {
            overrides.algorithm = Some(*algorithm);
        }
        overrides.admin_socket = overrides
            .admin_socket
            .as_ref()
            .map(|pattern| PathBuf::from(pattern.display().to_string().replace("{node}", node)));
        let config_file = self.args.run.config.clone();
        let splices = self.splices.get(node).cloned().unwrap_or_default();
        let host_links = self.host_links.get(node).cloned().unwrap_or_default();
        let threads = Threads::Pool {
            pool: Arc::clone(&self.pool),
            first: self.thread_of(node),
        };
        let control = self.control.clone();
        let starting = in_namespace(node, &self.netns(node), move || {
            let mut config = config::load(config_file.as_deref(), &overrides)?;
            let ports = &config.runtime.ports;
            config.runtime.splices = by_port(ports, &splices);
            config.runtime.bypasses = by_port(ports, &host_links);
            Running::start(config, threads, &control)
        })?;
        let namespace = std::path::Path::new("/run/netns").join(self.netns(node));
        Ok(Member {
            starting: Some(starting),
            running: None,
            state: MemberState::Running,
            _namespace: std::fs::File::open(namespace).ok(),
        })
    }

    /// Ends member `node` as `end` says, on a thread in its namespace, and records how it
    /// ended.
    fn end(&self, node: &str, member: &mut Member, end: End) -> MemberState {
        settle(member);
        let Some(running) = member.running.take() else {
            return member.state.clone();
        };
        let ended = in_namespace(node, &self.netns(node), move || match end {
            End::Stop => running.stop(),
            End::Kill => {
                running.abandon();
                anyhow::bail!("killed")
            }
        });
        member.state = match ended.map(JoinHandle::join) {
            Ok(Ok(Ok(()))) => MemberState::Stopped,
            Ok(Ok(Err(error))) | Err(error) => MemberState::Failed {
                error: format!("{error:#}"),
            },
            Ok(Err(_)) => MemberState::Failed {
                error: "its thread panicked".to_owned(),
            },
        };
        member.state.clone()
    }
}

/// Runs `work` on a thread (named after `node`) that first enters network namespace `netns`,
/// within the member's tracing span; every error it ends with is logged.
fn in_namespace<T: Send + 'static>(
    node: &str,
    netns: &str,
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<JoinHandle<anyhow::Result<T>>> {
    let (name, netns) = (node.to_owned(), netns.to_owned());
    std::thread::Builder::new()
        .name(format!("sw-{node}"))
        .spawn(move || {
            let _span = tracing::info_span!("switch", node = %name).entered();
            let result = enter_network_namespace(&netns)
                .with_context(|| format!("cannot enter network namespace `{netns}`"))
                .and_then(|()| work());
            // Every way a member ends with an error is in the log, a bad configuration or
            // namespace included (not only in the control socket's `status`).
            if let Err(error) = &result {
                tracing::error!("{error:#}");
            }
            result
        })
        .with_context(|| format!("cannot start a thread for {node}"))
}

/// How often the main thread records the members' ends without a request.
const REAP_EVERY: Duration = Duration::from_secs(1);

/// Runs the group until SIGINT/SIGTERM.
///
/// # Errors
/// Bad arguments; the pool or the control socket cannot be set up; a member ended with an
/// error (after all have stopped).
pub fn run(args: GroupArgs) -> anyhow::Result<()> {
    validate(&args)?;
    init_logging(&args.run.log)?;
    let stop = stop_on_signals()?;
    let threads = args
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    // The pool threads take the members' real-time priority (what their own workers would run
    // at): a due departure preempts ordinary tasks.
    let rt_priority = args
        .pool_rt_priority
        .or(args.run.overrides.rt_priority)
        .filter(|&p| p > 0);
    if rt_priority.is_some_and(|p| p > 99) {
        bail!("--pool-rt-priority must be 1..=99 (0: ordinary scheduling)");
    }
    // Held to the end of `run`: dropped after the blueprint and its pool.
    let awake = KeepAwakeThread::start(args.keep_awake_us.saturating_mul(1000))
        .context("cannot start the worker pool")?;
    let pool = Arc::new(
        WorkerPool::start(PoolConfig {
            threads,
            rt_priority,
            pin: false,
            activity: awake
                .as_ref()
                .map(|awake| awake.handle() as Arc<dyn PoolActivity>),
            fair_share_rest_ns: args.fair_share_us.saturating_mul(1000),
        })
        .context("cannot start the worker pool")?,
    );
    let _ = std::fs::remove_file(&args.control);
    if let Some(parent) = args.control.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let listener = UnixListener::bind(&args.control)
        .with_context(|| format!("cannot listen on {}", args.control.display()))?;
    listener.set_nonblocking(true)?;
    let topology = if args.splice || args.host_links.is_some() {
        let path = args.run.overrides.topology.as_ref().context(
            "--splice and --host-links need --topology: the links between members and to \
             hosts come from it",
        )?;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Some(
            Topology::from_json(&text)
                .with_context(|| format!("{}: not a topology", path.display()))?,
        )
    } else {
        None
    };
    let splices = match &topology {
        Some(topology) if args.splice => splices_between(topology, &args.members),
        _ => BTreeMap::new(),
    };
    let host_links = match (&topology, &args.host_links) {
        (Some(topology), Some(dir)) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--host-links: cannot create {}", dir.display()))?;
            host_links_of(topology, &args.members, dir)
        }
        _ => BTreeMap::new(),
    };
    let mut event_loop = EventLoop::new().context("cannot create the control loop")?;
    let control = event_loop.handle();
    let control_stop = Arc::new(AtomicBool::new(false));
    let control_thread = {
        let stop = Arc::clone(&control_stop);
        std::thread::Builder::new()
            .name("ofan-control".into())
            .spawn(move || event_loop.run_until(|| stop.load(Ordering::Relaxed)))
            .context("cannot start the control loop's thread")?
    };
    let blueprint = Blueprint {
        args: args.clone(),
        pool,
        control: control.clone(),
        splices,
        host_links,
    };
    let members: Mutex<BTreeMap<String, Member>> = Mutex::new(BTreeMap::new());
    for node in &args.members {
        let member = blueprint.start(node)?;
        lock(&members).insert(node.clone(), member);
    }
    tracing::info!(
        members = args.members.len(),
        workers = threads,
        control = %args.control.display(),
        "group running"
    );
    // The main thread sleeps until a request or a signal comes, or a second has passed (to
    // record members that started, failed to, or whose worker died).
    let (signalled, signal_writer) =
        UnixStream::pair().context("cannot create the signal socket")?;
    signalled.set_nonblocking(true)?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::low_level::pipe::register(signal, signal_writer.try_clone()?)
            .context("cannot install signal handlers")?;
    }
    let waited = [listener.as_raw_fd(), signalled.as_raw_fd()];
    while !stop.load(Ordering::Relaxed) {
        reap(&blueprint, &members);
        if let Err(error) = event::wait_readable(&waited, REAP_EVERY) {
            tracing::warn!(%error, "control socket: wait");
            std::thread::sleep(REAP_EVERY);
        }
        while let Ok((stream, _)) = listener.accept() {
            reap(&blueprint, &members);
            if let Err(error) = serve(stream, &blueprint, &members) {
                tracing::warn!(%error, "control connection");
            }
        }
        std::io::Read::read(&mut &signalled, &mut [0u8; 16]).ok();
    }
    tracing::info!("stopping every member");
    let mut failures = Vec::new();
    let mut all = std::mem::take(&mut *lock(&members));
    // All at once, each on its own thread (a stop waits for the member's workers).
    std::thread::scope(|scope| {
        let ends: Vec<_> = all
            .iter_mut()
            .map(|(node, member)| {
                let blueprint = &blueprint;
                scope.spawn(move || (node.clone(), blueprint.end(node, member, End::Stop)))
            })
            .collect();
        for end in ends {
            match end.join() {
                Ok((node, MemberState::Failed { error })) => {
                    failures.push(format!("{node}: {error}"));
                }
                Ok(_) => {}
                Err(_) => failures.push("a member's stop panicked".to_owned()),
            }
        }
    });
    control_stop.store(true, Ordering::Relaxed);
    control.wake();
    match control_thread.join() {
        Ok(Ok(())) => {}
        Ok(Err(error)) => failures.push(format!("control loop: {error}")),
        Err(_) => failures.push("the control loop panicked".to_owned()),
    }
    let _ = std::fs::remove_file(&args.control);
    drop(blueprint);
    if failures.is_empty() {
        Ok(())
    } else {
        bail!("members ended with errors: {}", failures.join("; "))
    }
}

fn validate(args: &GroupArgs) -> anyhow::Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for member in &args.members {
        if !seen.insert(member) {
            bail!("--member {member} is given twice");
        }
    }
    if args.run.overrides.node.is_some() {
        bail!("--node names one switch; a group names its members with --member");
    }
    let mut overridden = std::collections::BTreeSet::new();
    for (node, _) in &args.member_lb {
        if !args.members.contains(node) {
            bail!("--member-lb {node}=…: {node} is not a --member");
        }
        if !overridden.insert(node) {
            bail!("--member-lb names {node} twice");
        }
    }
    if args.members.len() > 1 && !args.netns.contains("{node}") {
        bail!(
            "--netns `{}` must contain {{node}}: each member runs in its own namespace",
            args.netns
        );
    }
    let socket = args.run.overrides.admin_socket.as_ref();
    if args.members.len() > 1 && !socket.is_some_and(|s| s.display().to_string().contains("{node}"))
    {
        bail!("--admin-socket must be given with {{node}} (e.g. /run/ofan/{{node}}.sock): each member has its own");
    }
    Ok(())
}

/// `--member-lb NODE=ALGO`.
fn parse_member_lb(text: &str) -> Result<(String, Algorithm), String> {
    let (node, algorithm) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}`: expected NODE=ALGO (e.g. e-p0-0=rsq)"))?;
    let algorithm = algorithm.parse().map_err(|e| format!("`{text}`: {e}"))?;
    Ok((node.to_owned(), algorithm))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Joins a member's starting thread, if any (waiting for it): the member runs from then on, or
/// failed to start.
fn settle(member: &mut Member) {
    let Some(thread) = member.starting.take() else {
        return;
    };
    match thread.join() {
        Ok(Ok(running)) => member.running = Some(running),
        Ok(Err(error)) => {
            member.state = MemberState::Failed {
                error: format!("{error:#}"),
            };
        }
        Err(_) => {
            member.state = MemberState::Failed {
                error: "its thread panicked".to_owned(),
            };
        }
    }
}

/// Records the members that started or failed to, and stops those whose workers died.
fn reap(blueprint: &Blueprint, members: &Mutex<BTreeMap<String, Member>>) {
    let mut members = lock(members);
    for (node, member) in members.iter_mut() {
        if member
            .starting
            .as_ref()
            .is_some_and(JoinHandle::is_finished)
        {
            settle(member);
        }
        if member.running.as_ref().is_some_and(Running::failed) {
            blueprint.end(node, member, End::Stop);
        }
    }
}

/// The reply to one control request.
#[derive(Debug, Serialize)]
struct Reply {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// `status`: every member's state and the pool's.
    #[serde(flatten)]
    status: Option<Status>,
}

/// What `status` answers.
#[derive(Debug, Serialize)]
struct Status {
    members: BTreeMap<String, MemberState>,
    pool: PoolState,
}

/// The shared worker threads, as `status` reports them.
#[derive(Debug, Serialize)]
struct PoolState {
    threads: usize,
    /// Nanoseconds the threads have spun to departures with nothing to forward
    /// ([`WorkerPool::spun_ns`]): busy CPU time a lab's CPU per frame leaves out.
    spun_ns: u64,
    /// Rests the threads took for the machine's ordinary tasks and their time, ns
    /// ([`WorkerPool::rests`], `--fair-share-us`).
    rests: u64,
    rested_ns: u64,
}

fn serve(
    stream: UnixStream,
    blueprint: &Blueprint,
    members: &Mutex<BTreeMap<String, Member>>,
) -> anyhow::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = match answer(line.trim(), blueprint, members) {
        Ok(status) => Reply {
            ok: true,
            error: None,
            status,
        },
        Err(error) => Reply {
            ok: false,
            error: Some(format!("{error:#}")),
            status: None,
        },
    };
    let mut stream = &stream;
    writeln!(stream, "{}", serde_json::to_string(&reply)?)?;
    Ok(())
}

fn answer(
    request: &str,
    blueprint: &Blueprint,
    members: &Mutex<BTreeMap<String, Member>>,
) -> anyhow::Result<Option<Status>> {
    let mut words = request.split_whitespace();
    let (verb, node) = (words.next().unwrap_or(""), words.next());
    let known = |node: Option<&str>| -> anyhow::Result<String> {
        let node = node.context("which member? (`stop NODE`, `start NODE`)")?;
        if !blueprint.args.members.iter().any(|m| m == node) {
            bail!(
                "no member `{node}` (members: {})",
                blueprint.args.members.join(", ")
            );
        }
        Ok(node.to_owned())
    };
    match verb {
        "status" => Ok(Some({
            let (rests, rested_ns) = blueprint.pool.rests();
            Status {
                members: lock(members)
                    .iter()
                    .map(|(node, member)| (node.clone(), member.state.clone()))
                    .collect(),
                pool: PoolState {
                    threads: blueprint.pool.threads(),
                    spun_ns: blueprint.pool.spun_ns(),
                    rests,
                    rested_ns,
                },
            }
        })),
        "stop" | "kill" => {
            let node = known(node)?;
            let mut members = lock(members);
            let member = members.get_mut(&node).expect("every member has an entry");
            let end = if verb == "kill" { End::Kill } else { End::Stop };
            blueprint.end(&node, member, end);
            Ok(None)
        }
        "start" => {
            let node = known(node)?;
            let mut members = lock(members);
            if members.get(&node).is_some_and(Member::is_up) {
                bail!("{node} is running");
            }
            let member = blueprint.start(&node)?;
            members.insert(node, member);
            Ok(None)
        }
        other => bail!("unknown request `{other}` (status, stop NODE, kill NODE, start NODE)"),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        group: GroupArgs,
    }

    fn args(extra: &[&str]) -> GroupArgs {
        let mut argv = vec!["ofan-switch"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).expect("parses").group
    }

    #[test]
    fn several_members_need_their_own_namespace_and_admin_socket() {
        let ok = ["--member", "a", "--member", "b", "--netns", "lab-{node}"];
        let socket = ["--admin-socket", "/run/x/{node}.sock"];
        assert!(validate(&args(&[&ok[..], &socket[..]].concat())).is_ok());
        let error = validate(&args(&ok)).unwrap_err().to_string();
        assert!(error.contains("--admin-socket"), "{error}");
        let shared = ["--member", "a", "--member", "b", "--netns", "lab"];
        let error = validate(&args(&[&shared[..], &socket[..]].concat()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("{node}"), "{error}");
        // One member may name its namespace and socket outright.
        assert!(validate(&args(&["--member", "a", "--netns", "lab-a"])).is_ok());
    }

    #[test]
    fn a_member_twice_or_a_node_flag_is_refused() {
        let twice = ["--member", "a", "--member", "a", "--netns", "{node}"];
        let socket = ["--admin-socket", "{node}.sock"];
        let error = validate(&args(&[&twice[..], &socket[..]].concat()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("twice"), "{error}");
        let node = ["--member", "a", "--netns", "{node}", "--node", "a"];
        let error = validate(&args(&node)).unwrap_err().to_string();
        assert!(error.contains("--member"), "{error}");
    }

    #[test]
    fn a_member_may_run_its_own_algorithm() {
        let base = ["--member", "a", "--member", "b", "--netns", "{node}"];
        let socket = ["--admin-socket", "{node}.sock", "--lb", "ofan"];
        let with = |extra: &[&str]| args(&[&base[..], &socket[..], extra].concat());
        let mixed = with(&["--member-lb", "b=rsq"]);
        assert!(validate(&mixed).is_ok());
        assert_eq!(mixed.member_lb, [("b".to_owned(), Algorithm::Rsq)]);
        let error = validate(&with(&["--member-lb", "c=rsq"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a --member"), "{error}");
        let error = validate(&with(&["--member-lb", "b=rsq", "--member-lb", "b=jsq"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("twice"), "{error}");
        let cli = |extra: &[&str]| {
            let mut argv = vec!["ofan-switch"];
            argv.extend_from_slice(&base);
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(drop)
        };
        assert!(cli(&["--member-lb", "b"]).is_err(), "no algorithm");
        assert!(
            cli(&["--member-lb", "b=fastest"]).is_err(),
            "no such algorithm"
        );
    }

    #[test]
    fn links_between_members_are_spliced_both_ways_and_no_others() {
        let topology = Topology::fat_tree(4).unwrap();
        let switches: Vec<String> = topology
            .nodes()
            .iter()
            .filter(|n| n.role.is_switch())
            .map(|n| n.name.clone())
            .collect();
        let splices = splices_between(&topology, &switches);
        // Every switch-to-switch port: 16 edge up-ports, 16 aggregation down- and 16 up-ports,
        // 16 core ports; no host port.
        let ports: usize = splices.values().map(BTreeMap::len).sum();
        assert_eq!(ports, 64);
        assert_eq!(splices["e-p0-0"].len(), 2, "an edge's two up-ports");
        assert_eq!(splices["c-0"].len(), 4);
        // The two ends of a link hold each other's slots.
        for link in topology.links() {
            let end = |(node, port): (ofan_topology::NodeId, ofan_topology::PortIndex)| {
                let name = &topology.node(node).name;
                splices
                    .get(name)
                    .and_then(|ports| ports.get(&topology.port(node, port).ifname))
            };
            match (end(link.a), end(link.b)) {
                (Some(a), Some(b)) => {
                    assert!(Arc::ptr_eq(&a.peer, &b.own) && Arc::ptr_eq(&b.peer, &a.own));
                    assert!(!Arc::ptr_eq(&a.own, &b.own));
                }
                (None, None) => {}
                ends => panic!("a link spliced at one end only: {ends:?}"),
            }
        }
        // A member's links to non-members stay veths.
        let pod0: Vec<String> = switches
            .iter()
            .filter(|s| s.contains("-p0-"))
            .cloned()
            .collect();
        let splices = splices_between(&topology, &pod0);
        assert_eq!(splices.values().map(BTreeMap::len).sum::<usize>(), 8);
        assert!(splices["a-p0-0"].keys().all(|port| topology
            .nodes()
            .iter()
            .find(|n| n.name == "a-p0-0")
            .is_some_and(|n| n
                .ports
                .iter()
                .any(|p| &p.ifname == port && topology.node(p.peer).name.starts_with("e-p0-")))));
    }

    #[test]
    fn members_go_to_the_pool_threads_in_blocks() {
        let members: Vec<String> = (0..20).map(|i| format!("s{i}")).collect();
        let mut argv: Vec<&str> = vec!["--netns", "{node}", "--admin-socket", "{node}.sock"];
        for member in &members {
            argv.extend_from_slice(&["--member", member]);
        }
        let pool = WorkerPool::start(PoolConfig {
            threads: 2,
            rt_priority: None,
            pin: false,
            activity: None,
            fair_share_rest_ns: 0,
        })
        .expect("pool");
        let event_loop = EventLoop::new().expect("control loop");
        let blueprint = Blueprint {
            args: args(&argv),
            pool: Arc::new(pool),
            control: event_loop.handle(),
            splices: BTreeMap::new(),
            host_links: BTreeMap::new(),
        };
        let threads: Vec<usize> = members.iter().map(|m| blueprint.thread_of(m)).collect();
        assert_eq!(threads[..10], [0; 10]);
        assert_eq!(threads[10..], [1; 10]);
    }
}
