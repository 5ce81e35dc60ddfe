//! The namespace lab: one command turns a [`Topology`] into Linux network namespaces joined by
//! veth pairs, with an `ofan-switch` forwarding in every switch namespace, and one command
//! takes exactly that away again.
//!
//! Layers, bottom up:
//! - [`plan`] (pure): namespace names and the static routes of every switch under a set of
//!   failed links.
//! - [`state`]: the per-lab state directory `/run/ofan/labs/<name>/`, where every created
//!   object is recorded *before* it is created, so `down` works after any crash.
//! - [`net`]: the kernel side in bulk — namespaces with `ip netns add` (in parallel), veths,
//!   addresses, routes and link state over rtnetlink from this process.
//! - [`procs`]: switch processes (own session, logs, pid + start-time identity).
//! - [`ping`]: `pingall` with raw ICMP sockets inside the host namespaces.
//! - [`sys`]: the module's only `unsafe` (setns, setsid, umount, ethtool, kill).
//!
//! Naming: lab `L`'s namespaces are `ofan-L-<node>` (lab names are lowercase letters and
//! digits, so prefixes of different labs never overlap); inside a namespace the interfaces
//! carry the topology's names `p0`, `p1`, … (hosts too: their one port is `p0`).

mod net;
mod ping;
pub(crate) mod plan;
mod procs;
mod state;
use crate::sys::lab as sys;

use crate::agent::{load_topology, parse_rate};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ofan_topology::{FailedLinks, Node, NodeId, Role, Topology};
use serde_json::Value;

use net::{Namespace, NsKind, Rtnl};
use state::{LabState, Params, Phase, StateDir};

/// The default emulated link rate: the largest rate at which a k=4 lab on a 2-core machine
/// keeps shaper lateness p99 within 0.25 packet times under a full-load permutation (see
/// docs/lab.md for the measurements).
pub const DEFAULT_LINK_RATE: &str = "1mbit";
/// Default SCHED_FIFO priority of the switches' workers (below the experiments' agents, whose
/// departures must be exact; above everything else on the machine).
pub const DEFAULT_SWITCH_RT_PRIORITY: u8 = 20;
/// Egress buffer per port of labs built for experiments (and the demo): large enough that no
/// algorithm drops a 1 MB permutation on k=4, so that queues show their growth (with smaller
/// buffers the agents recover every drop, and the drops cost time).
pub const EXPERIMENT_BUFFER: &str = "2MB";
/// Default egress buffer per port.
pub const DEFAULT_BUFFER: &str = "64KB";
/// Shaper lateness (p99, in packet times) above which `status` says the lab is not faithful.
pub const FAITHFUL_LATENESS: f64 = 0.25;
/// Ports that sent fewer frames than this are left out of the fidelity judgement.
pub const LATENESS_MIN_PACKETS: u64 = 1000;

/// Which lab a command addresses.
#[derive(Debug, Clone, clap::Args)]
pub struct LabName {
    /// Lab name (lowercase letters and digits); namespaces are ofan-<name>-<node>.
    #[arg(long = "name", value_name = "LAB", default_value = "lab")]
    pub name: String,
}

/// Where the switches' routes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Routing {
    /// The lab computes every switch's routes from the topology (ECMP groups for up-paths)
    /// and programs them into the switch namespace's kernel FIB.
    Static,
    /// No routes: bring your own (e.g. `ofan-lab exec SWITCH -- ip route add …`).
    None,
}

/// What `up` builds.
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub lab: LabName,
    /// fat-tree, leaf-spine, or a topology file (ofan-lab topo --out FILE).
    #[arg(
        long,
        value_name = "fat-tree|leaf-spine|FILE",
        default_value = "fat-tree"
    )]
    pub topo: String,
    /// Switch radix (even, 4..=64) for fat-tree and leaf-spine.
    #[arg(long, default_value_t = 4)]
    pub k: u16,
    /// Load-balancing algorithm of every switch: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan.
    #[arg(long, value_name = "ALGO", default_value = "pofan")]
    pub lb: String,
    /// Ports per pipe (one worker thread each); default: all ports in one pipe.
    #[arg(long, value_name = "P")]
    pub pipe_size: Option<u16>,
    /// Emulated rate of every link (e.g. 1mbit, 10mbit; 0 = unshaped).
    #[arg(long, value_name = "RATE", default_value = DEFAULT_LINK_RATE)]
    pub link_rate: String,
    /// Egress buffer of every switch port (e.g. 64KB).
    #[arg(long, value_name = "BYTES", default_value = DEFAULT_BUFFER)]
    pub buffer: String,
    /// MTU of every link (68..=1778: the switch's 2048-byte frames carry at most 1792 bytes).
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Seed of every switch's random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// SCHED_FIFO priority of the switches' workers (1..=99; 0 = ordinary scheduling). Idle
    /// workers sleep, so this costs nothing; busy ones preempt other tasks at once, which keeps
    /// the emulated links on time on a crowded machine.
    #[arg(long, value_name = "PRIO", default_value_t = DEFAULT_SWITCH_RT_PRIORITY)]
    pub rt_priority: u8,
    /// Shapers make up for late departures (ofan-switch --catch-up: the next gap shrinks by the
    /// lateness, at most half a frame time, as Linux's sch_fq does), so a link loaded at
    /// exactly its rate carries it despite the machine's timer jitter (40-70 µs per wake-up
    /// on a VM, ~0.5 % of a 1 Mbit/s link lost at every late departure otherwise). The host
    /// agents keep the strict rule (a late NIC continues at line rate from now) unless run with
    /// --agent-catch-up. `false`: strict shapers that restart from now.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub catch_up: bool,
    /// Route source.
    #[arg(long, value_enum, default_value = "static")]
    pub routing: Routing,
    /// The ofan-switch binary (default: $OFAN_SWITCH, next to ofan-lab, or on PATH).
    #[arg(long, value_name = "PATH")]
    pub switch_bin: Option<PathBuf>,
}

/// Lab subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Build a lab: namespaces, veths, addresses, routes, one ofan-switch per switch.
    Up(UpArgs),
    /// Remove a lab (exactly what it created), or with --all everything carrying the ofan- prefix.
    Down {
        #[command(flatten)]
        lab: LabName,
        /// Every lab, and every namespace, veth and process carrying the ofan- prefix (also
        /// those of other tools and tests).
        #[arg(long)]
        all: bool,
    },
    /// Nodes, links, switch health and per-link counters, shaper lateness.
    Status {
        #[command(flatten)]
        lab: LabName,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Run a command inside a node's namespace.
    Exec {
        #[command(flatten)]
        lab: LabName,
        /// Node name (e.g. h-p0-e0-h0, e-p1-0, c-3).
        node: String,
        /// The command and its arguments (after --).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Ping every ordered host pair; prints a matrix and a summary; exit code 1 unless all pass.
    Pingall {
        #[command(flatten)]
        lab: LabName,
        /// Attempts per pair before it counts as failed.
        #[arg(long, default_value_t = 3)]
        attempts: u32,
    },
    /// Take the link between two nodes down or bring it back; routes are recomputed.
    Link {
        #[command(flatten)]
        lab: LabName,
        /// One end (node name).
        a: String,
        /// The other end.
        b: String,
        /// up or down.
        #[arg(value_enum)]
        state: UpDown,
    },
    /// Stop a switch (its links go down, the fabric routes around it) or start it again.
    Node {
        #[command(flatten)]
        lab: LabName,
        /// Switch name.
        switch: String,
        /// stop or start.
        #[arg(value_enum)]
        action: StopStart,
    },
    /// Capture a node's port to a pcap file with tcpdump (Ctrl-C, --count or --duration ends it).
    Capture {
        #[command(flatten)]
        lab: LabName,
        /// NODE:PORT, e.g. h-p0-e0-h0:p0 or e-p0-0:p2.
        target: String,
        /// Output file (default: ./ofan-<lab>-<node>-<port>.pcap).
        #[arg(long, short = 'w', value_name = "FILE")]
        out: Option<PathBuf>,
        /// Stop after this many packets.
        #[arg(long, short = 'c')]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        duration: Option<f64>,
    },
    /// Reconfigure every switch without rebuilding the lab (each switch restarts: ~0.5 s outage).
    Set {
        #[command(flatten)]
        lab: LabName,
        /// New load-balancing algorithm.
        #[arg(long, value_name = "ALGO")]
        lb: String,
    },
    /// The first command to run: build a k=4 fat tree, pingall, show the fabric, compare
    /// ecmp, rsq, jsq, ofan and pofan on a 1 MB permutation, tear it down.
    Demo {
        /// Keep the lab (named `demo`) instead of tearing it down.
        #[arg(long)]
        keep: bool,
        /// Radix of the fat tree.
        #[arg(long, default_value_t = 4)]
        k: u16,
        /// Algorithms to compare (comma-separated; `none` skips the comparison).
        #[arg(long, value_name = "ALGOS", default_value = "ecmp,rsq,jsq,ofan,pofan")]
        lb: String,
        /// Message size of the permutation.
        #[arg(long, value_name = "BYTES", default_value = "1MB")]
        size: String,
        /// Repetitions per algorithm.
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
}

/// `up` / `down` for links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UpDown {
    /// Bring the link up.
    Up,
    /// Take the link down.
    Down,
}

/// `stop` / `start` for switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StopStart {
    /// Stop the switch process.
    Stop,
    /// Start it again.
    Start,
}

/// Runs a lab subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    if !sys::is_root() {
        bail!("the lab needs root (network namespaces, XDP): run with sudo");
    }
    match command {
        Command::Up(args) => up(&args).map(drop),
        Command::Down { lab, all } => {
            if all {
                down_all()
            } else {
                down(&lab.name, true)
            }
        }
        Command::Status { lab, json } => status(&lab.name, json),
        Command::Exec { lab, node, command } => exec(&lab.name, &node, &command),
        Command::Pingall { lab, attempts } => {
            if pingall(&lab.name, attempts, true)? {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::Link { lab, a, b, state } => link(&lab.name, &a, &b, state),
        Command::Node {
            lab,
            switch,
            action,
        } => node(&lab.name, &switch, action),
        Command::Capture {
            lab,
            target,
            out,
            count,
            duration,
        } => capture(&lab.name, &target, out, count, duration),
        Command::Set { lab, lb } => set_lb(&lab.name, &lb),
        Command::Demo {
            keep,
            k,
            lb,
            size,
            repeat,
        } => demo(keep, k, &lb, &size, repeat),
    }
}

// ---------------------------------------------------------------------------------------------
// up
// ---------------------------------------------------------------------------------------------

fn check_name(name: &str) -> anyhow::Result<()> {
    if !plan::valid_lab_name(name) {
        bail!("lab name `{name}`: use 1 to 16 lowercase letters and digits");
    }
    Ok(())
}

fn namespaces_of(topology: &Topology, lab: &str) -> Vec<String> {
    topology
        .nodes()
        .iter()
        .map(|node| plan::namespace(lab, &node.name))
        .collect()
}

/// Builds a lab; on failure everything created so far is removed again.
/// Builds a lab.
pub(crate) fn up(args: &UpArgs) -> anyhow::Result<LabState> {
    let name = &args.lab.name;
    check_name(name)?;
    args.lb
        .parse::<ofan_dataplane::lb::Algorithm>()
        .map_err(|e| anyhow::anyhow!("--lb: {e}"))?;
    let link_rate_bps = parse_rate(&args.link_rate)?;
    if args.rt_priority > 99 {
        bail!(
            "--rt-priority {}: SCHED_FIFO priorities are 1..=99 (0 = off)",
            args.rt_priority
        );
    }
    if !(68..=1778).contains(&args.mtu) {
        bail!("--mtu {}: must be in 68..=1778 (the switch's 2048-byte frames carry at most 1792 bytes)", args.mtu);
    }
    let topology = load_topology(&args.topo, args.k)?;
    let dir = StateDir::of(name);
    if dir.exists() {
        bail!("lab `{name}` exists (see ofan-lab status --name {name}); remove it first with ofan-lab down --name {name}");
    }
    let leftovers = net::namespaces_with_prefix(&plan::namespace_prefix(name));
    if !leftovers.is_empty() {
        bail!(
            "{} namespaces named ofan-{name}-* exist without a lab state (e.g. {}); remove them with ofan-lab down --name {name}",
            leftovers.len(),
            leftovers[0]
        );
    }
    let switch_bin = args.switch_bin.clone().unwrap_or_else(procs::switch_binary);
    let params = Params {
        topo: match topology.kind() {
            ofan_topology::TopologyKind::FatTree { k } => format!("fat-tree k={k}"),
            ofan_topology::TopologyKind::LeafSpine { k } => format!("leaf-spine k={k}"),
        },
        lb: args.lb.to_ascii_lowercase(),
        pipe_size: args.pipe_size.unwrap_or(topology.k()),
        link_rate: args.link_rate.clone(),
        link_rate_bps,
        buffer: args.buffer.clone(),
        mtu: args.mtu,
        seed: args.seed,
        rt_priority: args.rt_priority,
        catch_up: args.catch_up,
        routing: match args.routing {
            Routing::Static => "static".to_owned(),
            Routing::None => "none".to_owned(),
        },
        switch_bin,
    };
    dir.create()?;
    std::fs::write(dir.topology_file(), topology.to_json_pretty())
        .with_context(|| format!("cannot write {}", dir.topology_file().display()))?;
    let mut state = LabState::new(name, params);
    dir.save(&state)?;
    let started = Instant::now();
    match build(&topology, &mut state, &dir, args.routing, started) {
        Ok(()) => Ok(state),
        Err(error) => {
            eprintln!("ofan-lab: up failed ({error:#}); removing what was created");
            let _ = down(name, false);
            Err(error)
        }
    }
}

fn build(
    topology: &Topology,
    state: &mut LabState,
    dir: &StateDir,
    routing: Routing,
    started: Instant,
) -> anyhow::Result<()> {
    let lab = state.name.clone();
    let mtu = state.params.mtu;
    let step = |what: &str| eprintln!("  {:>6.2} s  {what}", started.elapsed().as_secs_f64());

    // Namespaces: recorded first, then created all at once.
    let names = namespaces_of(topology, &lab);
    state.namespaces = names.clone();
    dir.save(state)?;
    net::create_namespaces(&names)?;
    let mut spaces: Vec<Namespace> = names
        .iter()
        .map(|name| Namespace::open(name))
        .collect::<Result<_, _>>()?;
    for (node, space) in topology.nodes().iter().zip(&mut spaces) {
        space.configure(if node.role.is_switch() {
            NsKind::Switch
        } else {
            NsKind::Host
        })?;
    }
    step(&format!("{} namespaces", names.len()));

    // Veths, created directly in their namespaces from here.
    state.veths = topology
        .links()
        .iter()
        .flat_map(|link| [link.a, link.b])
        .map(|(node, port)| {
            format!(
                "{}/{}",
                names[node.index()],
                topology.port(node, port).ifname
            )
        })
        .collect();
    dir.save(state)?;
    let mut root = Rtnl::open().context("netlink socket")?;
    for link in topology.links() {
        let (a, b) = (link.a, link.b);
        net::create_veth(
            &mut root,
            (&spaces[a.0.index()], &topology.port(a.0, a.1).ifname),
            (&spaces[b.0.index()], &topology.port(b.0, b.1).ifname),
            mtu,
        )?;
    }
    step(&format!("{} veth pairs", topology.links().len()));

    // Addresses; hosts get a default route and TX checksum offload off.
    for (node, space) in topology.nodes().iter().zip(&mut spaces) {
        space.refresh_links()?;
        for port in &node.ports {
            space.set_link(&port.ifname, true)?;
            space.add_address(&port.ifname, port.address, port.prefix_len)?;
        }
        if node.role == Role::Host {
            let ifname = &node.ports[0].ifname;
            space.tx_checksum_off(ifname)?;
            space.set_route(
                Ipv4Addr::UNSPECIFIED,
                0,
                &[(ifname, plan::host_gateway(topology, node.id))],
            )?;
        }
    }
    step("addresses, host routes");

    if routing == Routing::Static {
        let none = FailedLinks::new();
        for switch in topology.switches() {
            let routes = plan::switch_routes(topology, &none, switch.id);
            install_routes(
                topology,
                &mut spaces[switch.id.index()],
                switch,
                &routes,
                &BTreeMap::new(),
                true,
            )?;
        }
        step("switch routes");
    }

    // Switches.
    for switch in topology.switches() {
        let process = procs::start_switch(state, dir, &switch.name)?;
        state.processes.push(process);
        dir.save(state)?;
    }
    let sockets: Vec<(String, PathBuf)> = topology
        .switches()
        .iter()
        .map(|switch| (switch.name.clone(), dir.socket(&switch.name)))
        .collect();
    let timeout = Duration::from_secs(30) + Duration::from_millis(250) * sockets.len() as u32;
    let missing = procs::wait_for_sockets(&sockets, timeout);
    if !missing.is_empty() {
        let log = std::fs::read_to_string(dir.log(&missing[0])).unwrap_or_default();
        bail!(
            "{} switches did not come up ({}…); log of {}:\n{}",
            missing.len(),
            missing[0],
            missing[0],
            tail(&log, 10)
        );
    }
    step(&format!("{} switches running", sockets.len()));
    if routing == Routing::Static {
        wait_for_fibs(topology, dir, Duration::from_secs(20));
        step("FIBs complete");
    }
    state.phase = Phase::Up;
    state.up_seconds = Some(started.elapsed().as_secs_f64());
    dir.save(state)?;
    eprintln!(
        "lab `{lab}` up in {:.1} s: {} hosts, {} switches, {} links ({}, lb {}, link rate {}, MTU {})",
        started.elapsed().as_secs_f64(),
        topology.hosts().len(),
        topology.switches().len(),
        topology.links().len(),
        state.params.topo,
        state.params.lb,
        state.params.link_rate,
        mtu
    );
    Ok(())
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Installs `routes` into a switch namespace: replaces routes that differ from `old` (all of
/// them with `force`) and deletes routes `old` had and `routes` lacks.
fn install_routes(
    topology: &Topology,
    space: &mut Namespace,
    switch: &Node,
    routes: &plan::RouteTable,
    old: &plan::RouteTable,
    force: bool,
) -> anyhow::Result<usize> {
    let mut changed = 0;
    for ((dst, len), _) in old
        .iter()
        .filter(|(prefix, _)| !routes.contains_key(*prefix))
    {
        space.delete_route(*dst, *len)?;
        changed += 1;
    }
    for ((dst, len), hops) in routes {
        if !force && old.get(&(*dst, *len)) == Some(hops) {
            continue;
        }
        let hops: Vec<(&str, Ipv4Addr)> = hops
            .iter()
            .map(|hop| {
                (
                    topology.port(switch.id, hop.port).ifname.as_str(),
                    hop.gateway,
                )
            })
            .collect();
        space.set_route(*dst, *len, &hops)?;
        changed += 1;
    }
    Ok(changed)
}

/// Waits until every switch's FIB mirror holds its routes with every next hop resolved.
pub(crate) fn wait_for_fibs(topology: &Topology, dir: &StateDir, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let none = FailedLinks::new();
    let mut pending: Vec<&Node> = topology.switches().iter().collect();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|switch| {
            let expected = plan::switch_routes(topology, &none, switch.id).len() as u64;
            match switch_stats(&dir.socket(&switch.name)) {
                Some(stats) => {
                    let routes = stats["fib"]["routes"][0].as_u64().unwrap_or(0);
                    let unresolved = stats["fib"]["unresolved"].as_array().map_or(0, Vec::len);
                    routes < expected || unresolved > 0
                }
                None => true,
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if !pending.is_empty() {
        eprintln!(
            "warning: {} switches have incomplete FIBs after {:?} (e.g. {})",
            pending.len(),
            timeout,
            pending[0].name
        );
    }
}

/// A switch's `stats` reply, if it answers.
fn switch_stats(socket: &Path) -> Option<Value> {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
    writeln!(stream, "stats").ok()?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).ok()?;
    serde_json::from_str(&reply).ok()
}

// ---------------------------------------------------------------------------------------------
// down
// ---------------------------------------------------------------------------------------------

/// Removes lab `name`: its recorded processes (verified), anything else running in its
/// namespaces, its namespaces (which removes its veths and XDP programs), its state directory.
/// Idempotent; works from the state file alone, or from the namespace prefix when the state is
/// gone.
fn down(name: &str, report: bool) -> anyhow::Result<()> {
    check_name(name)?;
    let started = Instant::now();
    let dir = StateDir::of(name);
    let state = dir.load().ok();
    procs::wait_for_namespace_creators(&plan::namespace_prefix(name));
    let mut namespaces: Vec<String> = state
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    for extra in net::namespaces_with_prefix(&plan::namespace_prefix(name)) {
        if !namespaces.contains(&extra) {
            namespaces.push(extra);
        }
    }
    let stopped = state
        .as_ref()
        .map_or(0, |s| procs::stop(&s.processes, Duration::from_secs(3)));
    let strays = net::pids_in_namespaces(&namespaces);
    procs::kill_pids(&strays.iter().map(|(pid, _)| *pid).collect::<Vec<_>>());
    let mut removed = 0;
    for namespace in &namespaces {
        if net::namespace_exists(namespace) {
            net::delete_namespace(namespace)?;
            removed += 1;
        }
    }
    dir.remove()?;
    if report {
        if state.is_none() && removed == 0 {
            eprintln!("lab `{name}`: nothing to remove");
        } else {
            eprintln!(
                "lab `{name}` removed in {:.1} s: {stopped} switches stopped, {} other processes killed, {removed} namespaces deleted",
                started.elapsed().as_secs_f64(),
                strays.len()
            );
        }
    }
    Ok(())
}

/// `down --all`: every lab with a state directory, then every namespace and root-namespace
/// link named `ofan-*` and every process inside those namespaces.
fn down_all() -> anyhow::Result<()> {
    for name in StateDir::all_labs() {
        if plan::valid_lab_name(&name) {
            down(&name, true)?;
        } else {
            StateDir::of(&name).remove()?;
        }
    }
    procs::wait_for_namespace_creators("ofan-");
    let namespaces = net::namespaces_with_prefix("ofan-");
    let strays = net::pids_in_namespaces(&namespaces);
    procs::kill_pids(&strays.iter().map(|(pid, _)| *pid).collect::<Vec<_>>());
    for namespace in &namespaces {
        net::delete_namespace(namespace)?;
    }
    let mut root = Rtnl::open()?;
    let links: Vec<_> = root
        .links()?
        .into_iter()
        .filter(|link| link.name.starts_with("ofan-"))
        .collect();
    for link in &links {
        let mut header = [0u8; 16];
        header[4..8].copy_from_slice(&(link.index as i32).to_ne_bytes());
        // Deleting one end of a veth deletes the pair; the peer may already be gone.
        let _ = root.request(|seq| {
            ofan_control::netlink::RequestBuilder::new(
                ofan_control::netlink::RTM_DELLINK,
                0,
                seq,
                &header,
            )
            .finish()
        });
    }
    eprintln!(
        "down --all: {} namespaces, {} processes, {} root-namespace links named ofan-*",
        namespaces.len(),
        strays.len(),
        links.len()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Loading a running lab
// ---------------------------------------------------------------------------------------------

/// A running lab as recorded in its state directory.
pub(crate) struct Loaded {
    pub(crate) dir: StateDir,
    pub(crate) state: LabState,
    pub(crate) topology: Topology,
}

/// Loads lab `name` (its state and topology).
pub(crate) fn load(name: &str) -> anyhow::Result<Loaded> {
    check_name(name)?;
    let dir = StateDir::of(name);
    if !dir.exists() {
        let labs = StateDir::all_labs();
        bail!(
            "no lab `{name}` (running labs: {}); start one with ofan-lab up --name {name}",
            if labs.is_empty() {
                "none".to_owned()
            } else {
                labs.join(", ")
            }
        );
    }
    let state = dir.load()?;
    let text = std::fs::read_to_string(dir.topology_file())
        .with_context(|| format!("cannot read {}", dir.topology_file().display()))?;
    let topology = Topology::from_json(&text)?;
    Ok(Loaded {
        dir,
        state,
        topology,
    })
}

/// Whether lab `name` has a state directory.
pub(crate) fn exists(name: &str) -> bool {
    check_name(name).is_ok() && StateDir::of(name).exists()
}

/// Removes lab `name` without the summary line.
pub(crate) fn down_quiet(name: &str) -> anyhow::Result<()> {
    down(name, false)
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    sys::is_root()
}

fn find_node<'a>(topology: &'a Topology, name: &str) -> anyhow::Result<&'a Node> {
    topology
        .nodes()
        .iter()
        .find(|node| node.name == name)
        .with_context(|| {
            format!(
                "no node `{name}` (nodes look like {}, {}, {})",
                topology.hosts()[0].name,
                topology.edges()[0].name,
                topology.cores()[0].name
            )
        })
}

impl Loaded {
    fn failures(&self) -> FailedLinks {
        plan::effective_failures(
            &self.topology,
            &self.state.failed_links,
            &self.state.stopped,
        )
    }

    fn process(&self, node: &str) -> Option<&state::Process> {
        self.state.processes.iter().find(|p| p.node == node)
    }

    /// Opens the namespaces of `nodes` (for reprogramming).
    fn open(&self, node: NodeId) -> anyhow::Result<Namespace> {
        let mut space = Namespace::open(&plan::namespace(
            &self.state.name,
            &self.topology.node(node).name,
        ))?;
        space.refresh_links()?;
        Ok(space)
    }

    /// Reprograms every switch whose routes differ between `before` and `after` (and the
    /// switches in `force` completely). Returns the number of route changes.
    fn reroute(
        &self,
        before: &FailedLinks,
        after: &FailedLinks,
        force: &[NodeId],
    ) -> anyhow::Result<usize> {
        if self.state.params.routing != "static" {
            return Ok(0);
        }
        let mut changed = 0;
        for switch in self.topology.switches() {
            let old = plan::switch_routes(&self.topology, before, switch.id);
            let new = plan::switch_routes(&self.topology, after, switch.id);
            let forced = force.contains(&switch.id);
            if old == new && !forced {
                continue;
            }
            if self.state.stopped.contains(&switch.name) {
                continue;
            }
            let mut space = self.open(switch.id)?;
            changed += install_routes(&self.topology, &mut space, switch, &new, &old, forced)?;
        }
        Ok(changed)
    }

    /// Sets both ends of link `link` up or down.
    fn set_link(&self, link: ofan_topology::LinkId, up: bool) -> anyhow::Result<()> {
        let link = self.topology.link(link);
        for (node, port) in [link.a, link.b] {
            let mut space = self.open(node)?;
            space.set_link(&self.topology.port(node, port).ifname, up)?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

/// What `status` knows about one switch.
struct SwitchStatus {
    state: &'static str,
    stats: Option<Value>,
}

fn switch_statuses(lab: &Loaded) -> BTreeMap<String, SwitchStatus> {
    lab.topology
        .switches()
        .iter()
        .map(|switch| {
            let status = if lab.state.stopped.contains(&switch.name) {
                SwitchStatus {
                    state: "stopped",
                    stats: None,
                }
            } else {
                match lab.process(&switch.name) {
                    Some(process) if procs::is_ours(process) => {
                        let stats = switch_stats(&lab.dir.socket(&switch.name));
                        SwitchStatus {
                            state: if stats.is_some() {
                                "running"
                            } else {
                                "not answering"
                            },
                            stats,
                        }
                    }
                    Some(_) => SwitchStatus {
                        state: "CRASHED",
                        stats: None,
                    },
                    None => SwitchStatus {
                        state: "never started",
                        stats: None,
                    },
                }
            };
            (switch.name.clone(), status)
        })
        .collect()
}

fn port_stats<'a>(stats: &'a Value, ifname: &str) -> Option<&'a Value> {
    stats["data_path"]["ports"]
        .as_array()?
        .iter()
        .find(|port| port["name"] == ifname)
}

/// Lateness in packet times (MTU-sized frames plus Ethernet overhead on the wire).
fn packet_times(lateness_ns: u64, rate_bps: u64, mtu: u32) -> f64 {
    let bits = f64::from(mtu + 38) * 8.0;
    lateness_ns as f64 * 1e-9 * rate_bps as f64 / bits
}

fn status(name: &str, json: bool) -> anyhow::Result<()> {
    let lab = load(name)?;
    let params = &lab.state.params;
    let statuses = switch_statuses(&lab);
    let failures = lab.failures();
    let rate = params.link_rate_bps;

    // Per switch: worst p99 lateness over its ports.
    let lateness: BTreeMap<&str, f64> = statuses
        .iter()
        .filter_map(|(name, status)| {
            let ports = status.stats.as_ref()?["data_path"]["ports"].as_array()?;
            // Judged only on ports with enough departures for a p99 to mean something.
            let worst = ports
                .iter()
                .filter(|port| port["tx_packets"].as_u64().unwrap_or(0) >= LATENESS_MIN_PACKETS)
                .map(|port| port["lateness_p99_ns"].as_u64().unwrap_or(0))
                .max()
                .unwrap_or(0);
            Some((name.as_str(), packet_times(worst, rate, params.mtu)))
        })
        .collect();
    let worst = lateness.values().copied().fold(0.0, f64::max);
    let faithful = rate == 0 || worst <= FAITHFUL_LATENESS;

    let counter = |node: NodeId, ifname: &str, field: &str| -> Option<u64> {
        let status = statuses.get(&lab.topology.node(node).name)?;
        port_stats(status.stats.as_ref()?, ifname)?[field].as_u64()
    };
    let mut links = Vec::new();
    for link in lab.topology.links() {
        let (a, b) = (link.a, link.b);
        let a_if = &lab.topology.port(a.0, a.1).ifname;
        let b_if = &lab.topology.port(b.0, b.1).ifname;
        // a→b: what a sent, or what b received when a is a host.
        let ab = counter(a.0, a_if, "tx_packets").or_else(|| counter(b.0, b_if, "rx_packets"));
        let ba = counter(b.0, b_if, "tx_packets").or_else(|| counter(a.0, a_if, "rx_packets"));
        links.push((link, a_if, b_if, !failures.contains(link.id), ab, ba));
    }

    if json {
        let value = serde_json::json!({
            "name": lab.state.name,
            "phase": lab.state.phase,
            "params": lab.state.params,
            "up_seconds": lab.state.up_seconds,
            "faithful": faithful,
            "worst_lateness_p99_packet_times": worst,
            "switches": statuses.iter().map(|(name, s)| serde_json::json!({
                "name": name,
                "state": s.state,
                "pid": lab.process(name).map(|p| p.pid),
                "lateness_p99_packet_times": lateness.get(name.as_str()),
                "fib": s.stats.as_ref().map(|st| st["fib"].clone()),
            })).collect::<Vec<_>>(),
            "links": links.iter().map(|(link, a_if, b_if, up, ab, ba)| serde_json::json!({
                "id": link.id.0,
                "a": format!("{}:{a_if}", lab.topology.node(link.a.0).name),
                "b": format!("{}:{b_if}", lab.topology.node(link.b.0).name),
                "up": up,
                "a_to_b_packets": ab,
                "b_to_a_packets": ba,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }

    println!(
        "lab `{}` ({:?}): {}, lb {}, link rate {}, buffer {}, MTU {}, seed {}, routing {}, {} shapers{}",
        lab.state.name,
        lab.state.phase,
        params.topo,
        params.lb,
        params.link_rate,
        params.buffer,
        params.mtu,
        params.seed,
        params.routing,
        if params.catch_up {
            "catch-up"
        } else {
            "strict"
        },
        lab.state
            .up_seconds
            .map(|s| format!(", built in {s:.1} s"))
            .unwrap_or_default()
    );
    println!(
        "state: {}   namespaces: ofan-{}-<node>   hosts: {}",
        lab.dir.root().display(),
        lab.state.name,
        lab.topology.hosts().len()
    );
    println!();
    println!(
        "{:<10} {:<14} {:>8} {:>6} {:>7} {:>10} {:>12} {:>12} {:>8} {:>9}",
        "switch",
        "state",
        "pid",
        "fib",
        "routes",
        "unresolved",
        "rx pkts",
        "tx pkts",
        "drops",
        "late p99"
    );
    for switch in lab.topology.switches() {
        let status = &statuses[&switch.name];
        let pid = lab
            .process(&switch.name)
            .map_or("-".to_owned(), |p| p.pid.to_string());
        let (generation, routes, unresolved, rx, tx, drops) = match &status.stats {
            Some(stats) => {
                let ports = stats["data_path"]["ports"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let sum = |field: &str| {
                    ports
                        .iter()
                        .map(|p| p[field].as_u64().unwrap_or(0))
                        .sum::<u64>()
                };
                (
                    stats["fib"]["generation"].to_string(),
                    stats["fib"]["routes"][0].to_string(),
                    stats["fib"]["unresolved"]
                        .as_array()
                        .map_or(0, Vec::len)
                        .to_string(),
                    sum("rx_packets").to_string(),
                    sum("tx_packets").to_string(),
                    (sum("drops_buffer") + sum("drops_handoff")).to_string(),
                )
            }
            None => Default::default(),
        };
        let late = lateness
            .get(switch.name.as_str())
            .map_or("-".to_owned(), |t| format!("{t:.3} pt"));
        println!(
            "{:<10} {:<14} {:>8} {:>6} {:>7} {:>10} {:>12} {:>12} {:>8} {:>9}",
            switch.name, status.state, pid, generation, routes, unresolved, rx, tx, drops, late
        );
        if status.state == "CRASHED" {
            let log = std::fs::read_to_string(lab.dir.log(&switch.name)).unwrap_or_default();
            println!(
                "           log {}:\n{}",
                lab.dir.log(&switch.name).display(),
                tail(&log, 3)
            );
        }
    }
    println!();
    println!(
        "{:<5} {:<22} {:<22} {:<5} {:>12} {:>12}",
        "link", "a", "b", "state", "a→b pkts", "b→a pkts"
    );
    for (link, a_if, b_if, up, ab, ba) in &links {
        let show = |v: &Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        println!(
            "{:<5} {:<22} {:<22} {:<5} {:>12} {:>12}",
            link.id.0,
            format!("{}:{a_if}", lab.topology.node(link.a.0).name),
            format!("{}:{b_if}", lab.topology.node(link.b.0).name),
            if *up { "up" } else { "DOWN" },
            show(ab),
            show(ba)
        );
    }
    println!();
    let crashed = statuses.values().filter(|s| s.state == "CRASHED").count();
    let running = statuses.values().filter(|s| s.state == "running").count();
    println!(
        "{running}/{} switches running, {crashed} crashed, {} stopped, {} links down",
        statuses.len(),
        lab.state.stopped.len(),
        failures.len()
    );
    if rate == 0 {
        println!("links are unshaped (--link-rate 0): no fidelity claim");
    } else if faithful {
        println!("emulation faithful: worst shaper lateness p99 {worst:.3} packet times (limit {FAITHFUL_LATENESS}; ports with >= {LATENESS_MIN_PACKETS} frames sent)");
    } else {
        println!(
            "WARNING: emulation NOT faithful: worst shaper lateness p99 {worst:.3} packet times > {FAITHFUL_LATENESS}; use a lower --link-rate"
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// exec, pingall
// ---------------------------------------------------------------------------------------------

fn exec(name: &str, node: &str, command: &[String]) -> anyhow::Result<()> {
    let lab = load(name)?;
    find_node(&lab.topology, node)?;
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", &plan::namespace(name, node)])
        .args(command)
        .status()
        .context("cannot run ip netns exec")?;
    std::process::exit(status.code().unwrap_or(1));
}

/// Opens the namespace of `node` of lab `lab` (for `setns`).
///
/// # Errors
/// When it does not exist.
pub fn open_namespace(lab: &str, node: &str) -> std::io::Result<std::fs::File> {
    std::fs::File::open(Path::new(net::NETNS_DIR).join(plan::namespace(lab, node)))
}

/// Pings every ordered host pair; prints the matrix (when it fits) and a summary.
fn pingall(name: &str, attempts: u32, print: bool) -> anyhow::Result<bool> {
    let lab = load(name)?;
    let hosts = lab.topology.hosts();
    let spaces: Vec<std::fs::File> = hosts
        .iter()
        .map(|host| {
            open_namespace(name, &host.name).with_context(|| format!("namespace of {}", host.name))
        })
        .collect::<anyhow::Result<_>>()?;
    let pairs: Vec<(&std::fs::File, Ipv4Addr)> = spaces
        .iter()
        .zip(hosts)
        .map(|(file, host)| (file, host.loopback))
        .collect();
    let started = Instant::now();
    let matrix = ping::pingall(&pairs, attempts.max(1), Duration::from_millis(1000))?;
    let total = hosts.len() * (hosts.len() - 1);
    let failed: Vec<(usize, usize)> = (0..hosts.len())
        .flat_map(|i| (0..hosts.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && !matrix[i][j].ok)
        .collect();
    if print {
        if hosts.len() <= 32 {
            print!("{:<12}", "from \\ to");
            for j in 0..hosts.len() {
                print!("{:>3}", j);
            }
            println!();
            for (i, host) in hosts.iter().enumerate() {
                print!("{:>2} {:<9}", i, short(&host.name));
                for (j, result) in matrix[i].iter().enumerate() {
                    print!(
                        "{:>3}",
                        if i == j {
                            "·"
                        } else if result.ok {
                            "✓"
                        } else {
                            "✗"
                        }
                    );
                }
                println!();
            }
        }
        for (i, j) in failed.iter().take(20) {
            println!(
                "FAIL {} → {} ({})",
                hosts[*i].name, hosts[*j].name, hosts[*j].loopback
            );
        }
        let rtts: Vec<f64> = matrix
            .iter()
            .flatten()
            .filter_map(|r| r.rtt)
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        let mean = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64;
        println!(
            "pingall: {}/{} ordered pairs reachable, {} failed ({:.2} s, mean RTT {:.2} ms)",
            total - failed.len(),
            total,
            failed.len(),
            started.elapsed().as_secs_f64(),
            mean
        );
    }
    Ok(failed.is_empty())
}

fn short(name: &str) -> String {
    name.chars().take(9).collect()
}

// ---------------------------------------------------------------------------------------------
// link, node, set, capture
// ---------------------------------------------------------------------------------------------

fn link(name: &str, a: &str, b: &str, target: UpDown) -> anyhow::Result<()> {
    let mut lab = load(name)?;
    let (node_a, node_b) = (
        find_node(&lab.topology, a)?.id,
        find_node(&lab.topology, b)?.id,
    );
    let link = lab
        .topology
        .link_between(node_a, node_b)
        .with_context(|| format!("{a} and {b} are not linked"))?;
    let before = lab.failures();
    match target {
        UpDown::Down => {
            if !lab.state.failed_links.contains(&link.0) {
                lab.state.failed_links.push(link.0);
            }
        }
        UpDown::Up => lab.state.failed_links.retain(|id| *id != link.0),
    }
    let after = lab.failures();
    let up = after.is_alive(link);
    lab.set_link(link, up)?;
    let changed = lab.reroute(&before, &after, &[node_a, node_b])?;
    lab.dir.save(&lab.state)?;
    eprintln!(
        "link {a} — {b} {}; {changed} routes reprogrammed",
        if up { "up" } else { "down" }
    );
    Ok(())
}

fn node(name: &str, switch: &str, action: StopStart) -> anyhow::Result<()> {
    let mut lab = load(name)?;
    let node = find_node(&lab.topology, switch)?.clone();
    if !node.role.is_switch() {
        bail!("{switch} is a host; node stop/start applies to switches");
    }
    let before = lab.failures();
    match action {
        StopStart::Stop => {
            if lab.state.stopped.contains(&node.name) {
                eprintln!("{switch} is already stopped");
                return Ok(());
            }
            let processes: Vec<_> = lab
                .state
                .processes
                .iter()
                .filter(|p| p.node == node.name)
                .cloned()
                .collect();
            procs::stop(&processes, Duration::from_secs(3));
            lab.state.processes.retain(|p| p.node != node.name);
            lab.state.stopped.push(node.name.clone());
            lab.dir.save(&lab.state)?;
            for port in &node.ports {
                lab.set_link(port.link, false)?;
            }
            let after = lab.failures();
            let changed = lab.reroute(&before, &after, &[])?;
            eprintln!("{switch} stopped; its links are down; {changed} routes reprogrammed");
        }
        StopStart::Start => {
            if let Some(process) = lab.process(&node.name) {
                if procs::is_ours(process) {
                    eprintln!("{switch} is already running (pid {})", process.pid);
                    return Ok(());
                }
            }
            lab.state.stopped.retain(|n| *n != node.name);
            lab.state.processes.retain(|p| p.node != node.name);
            let after = lab.failures();
            for port in &node.ports {
                if after.is_alive(port.link) {
                    lab.set_link(port.link, true)?;
                }
            }
            let mut force: Vec<NodeId> = vec![node.id];
            force.extend(node.ports.iter().map(|p| p.peer));
            let changed = lab.reroute(&before, &after, &force)?;
            let process = procs::start_switch(&lab.state, &lab.dir, &node.name)?;
            eprintln!(
                "{switch} started (pid {}); {changed} routes reprogrammed",
                process.pid
            );
            lab.state.processes.push(process);
            lab.dir.save(&lab.state)?;
            let missing = procs::wait_for_sockets(
                &[(node.name.clone(), lab.dir.socket(&node.name))],
                Duration::from_secs(20),
            );
            if !missing.is_empty() {
                bail!(
                    "{switch} did not come up; see {}",
                    lab.dir.log(&node.name).display()
                );
            }
        }
    }
    Ok(())
}

/// Switches every switch of lab `name` to `lb` (rolling restart).
pub(crate) fn set_lb(name: &str, lb: &str) -> anyhow::Result<()> {
    lb.parse::<ofan_dataplane::lb::Algorithm>()
        .map_err(|e| anyhow::anyhow!("--lb: {e}"))?;
    let mut lab = load(name)?;
    lab.state.params.lb = lb.to_ascii_lowercase();
    lab.dir.save(&lab.state)?;
    let started = Instant::now();
    let mut restarted = 0;
    // Rolling restart: one switch at a time, so most of the fabric keeps forwarding.
    for switch in lab.topology.switches() {
        if lab.state.stopped.contains(&switch.name) {
            continue;
        }
        let old: Vec<_> = lab
            .state
            .processes
            .iter()
            .filter(|p| p.node == switch.name)
            .cloned()
            .collect();
        procs::stop(&old, Duration::from_secs(3));
        lab.state.processes.retain(|p| p.node != switch.name);
        let process = procs::start_switch(&lab.state, &lab.dir, &switch.name)?;
        lab.state.processes.push(process);
        lab.dir.save(&lab.state)?;
        let missing = procs::wait_for_sockets(
            &[(switch.name.clone(), lab.dir.socket(&switch.name))],
            Duration::from_secs(20),
        );
        if !missing.is_empty() {
            bail!(
                "{} did not come back; see {}",
                switch.name,
                lab.dir.log(&switch.name).display()
            );
        }
        restarted += 1;
    }
    eprintln!(
        "{restarted} switches now run {lb} ({:.1} s, rolling restart)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn capture(
    name: &str,
    target: &str,
    out: Option<PathBuf>,
    count: Option<u64>,
    duration: Option<f64>,
) -> anyhow::Result<()> {
    let lab = load(name)?;
    let (node_name, ifname) = target
        .split_once(':')
        .with_context(|| format!("`{target}`: expected NODE:PORT, e.g. h-p0-e0-h0:p0"))?;
    let node = find_node(&lab.topology, node_name)?;
    if !node.ports.iter().any(|port| port.ifname == ifname) {
        bail!(
            "{node_name} has no port {ifname} (ports: {})",
            node.ports
                .iter()
                .map(|p| p.ifname.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let out =
        out.unwrap_or_else(|| PathBuf::from(format!("ofan-{name}-{node_name}-{ifname}.pcap")));
    let mut command = std::process::Command::new("ip");
    command
        .args(["netns", "exec", &plan::namespace(name, node_name)])
        .args(["tcpdump", "-n", "-U", "-i", ifname, "-w"])
        .arg(&out);
    if let Some(count) = count {
        command.args(["-c", &count.to_string()]);
    }
    if node.role.is_switch() {
        eprintln!(
            "note: frames the switch forwards through AF_XDP bypass the kernel; capture at the \
             peer's port to see them ({}:{})",
            lab.topology
                .node(node.ports.iter().find(|p| p.ifname == ifname).unwrap().peer)
                .name,
            lab.topology
                .port(
                    node.ports.iter().find(|p| p.ifname == ifname).unwrap().peer,
                    node.ports
                        .iter()
                        .find(|p| p.ifname == ifname)
                        .unwrap()
                        .peer_port
                )
                .ifname
        );
    }
    let mut child = command.spawn().context("cannot run tcpdump")?;
    if let Some(seconds) = duration {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < deadline {
            if child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait()?.is_none() {
            // Our own child (ip netns exec becomes tcpdump by exec): stop it like Ctrl-C does.
            let _ = sys::signal(child.id(), sys::SIGINT);
        }
    }
    let status = child.wait()?;
    eprintln!("capture written to {} ({status})", out.display());
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// demo
// ---------------------------------------------------------------------------------------------

fn demo(keep: bool, k: u16, lb: &str, size: &str, repeat: u32) -> anyhow::Result<()> {
    let name = "demo";
    println!(
        "== ofan-lab demo: a k={k} fat tree of network namespaces, one ofan-switch per switch ==\n"
    );
    if StateDir::of(name).exists() {
        println!("(removing the previous demo lab first)");
        down(name, true)?;
    }
    let args = UpArgs {
        lab: LabName {
            name: name.to_owned(),
        },
        topo: "fat-tree".to_owned(),
        k,
        lb: "pofan".to_owned(),
        pipe_size: None,
        link_rate: DEFAULT_LINK_RATE.to_owned(),
        buffer: EXPERIMENT_BUFFER.to_owned(),
        mtu: 1500,
        seed: 1,
        rt_priority: DEFAULT_SWITCH_RT_PRIORITY,
        catch_up: true,
        routing: Routing::Static,
        switch_bin: None,
    };
    println!("$ ofan-lab up --name demo --topo fat-tree --k {k}");
    up(&args)?;
    let result = (|| -> anyhow::Result<bool> {
        println!("\n$ ofan-lab pingall --name demo");
        let all = pingall(name, 3, true)?;
        let lab = load(name)?;
        let (src, dst) = (
            &lab.topology.hosts()[0],
            lab.topology.hosts().last().unwrap(),
        );
        println!(
            "\n$ ofan-lab exec --name demo {} -- traceroute -n -q 1 -w 1 {}",
            src.name, dst.loopback
        );
        let output = std::process::Command::new("ip")
            .args(["netns", "exec", &plan::namespace(name, &src.name)])
            .args([
                "traceroute",
                "-n",
                "-q",
                "1",
                "-w",
                "1",
                &dst.loopback.to_string(),
            ])
            .output();
        match output {
            Ok(output) => {
                for line in String::from_utf8_lossy(&output.stdout).lines() {
                    let owner = line
                        .split_whitespace()
                        .nth(1)
                        .and_then(|addr| addr.parse().ok())
                        .and_then(|addr| lab.topology.node_by_addr(addr))
                        .map(|id| format!("   ({})", lab.topology.node(id).name))
                        .unwrap_or_default();
                    println!("{line}{owner}");
                }
            }
            Err(error) => println!("(traceroute not available: {error})"),
        }
        println!("\n$ ofan-lab status --name demo");
        status(name, false)?;
        if all && lb != "none" {
            println!("\n$ ofan-lab compare --name demo --lb {lb} --sizes {size} --repeat {repeat}");
            let args = crate::experiment::CompareArgs::for_demo(name, lb, size, repeat);
            crate::experiment::compare_command(&args)?;
        }
        Ok(all)
    })();
    if keep {
        println!("\nthe lab stays up: try `ofan-lab exec --name demo h-p0-e0-h0 -- ping 10.3.1.3`, then `ofan-lab down --name demo`");
    } else {
        println!("\n$ ofan-lab down --name demo");
        down(name, true)?;
    }
    match result? {
        true => Ok(()),
        false => bail!("pingall failed"),
    }
}
