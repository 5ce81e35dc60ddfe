//! The lab's commands: `up`, `down`, `status`, `exec`, `pingall`, `link`, `node`, `capture`,
//! `set` and `demo` — flags parsed into the lab's typed API ([`ofan_lab`]) and its answers
//! printed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use ofan_dataplane::afxdp::FastPathMode;
use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_dataplane::lb::Algorithm;
use ofan_lab::ops::{self, NodeChange};
use ofan_lab::{
    self as lab, Bfd, BgpDaemon, HostLinks, LabSpec, LinkState, Reconvergence, Removed, Routing,
    Shaping, Switches, TopologySource, DEFAULT_DRAGONFLY, DEFAULT_SWITCH_RT_PRIORITY,
};
use ofan_topology::{PlaneKind, TopologyKind};

use super::units::parse_rate;
use super::{demo, pingall, status, view, Shape, Stderr};

/// `--link-rate RATE`, or the default for `topology` when it was not given.
///
/// # Errors
/// A rate that does not parse; a topology that cannot be loaded.
pub fn link_rate_or_default(rate: Option<&str>, topology: &TopologySource) -> anyhow::Result<u64> {
    match rate {
        Some(rate) => parse_rate(rate),
        None => topology.default_link_rate_bps(),
    }
}

/// Egress buffer per port of labs built for experiments (and the demo): large enough that no
/// algorithm drops a 1 MB permutation on k=4, so that queues show their growth (with smaller
/// buffers the agents recover every drop, and the drops cost time).
pub const EXPERIMENT_BUFFER: &str = "2MB";
// Both as the lab's constants say: checked by a test below.
/// Default egress buffer per port.
pub const DEFAULT_BUFFER: &str = "64KB";

/// Which lab a command addresses.
#[derive(Debug, Clone, clap::Args)]
pub struct LabName {
    /// Lab name (lowercase letters and digits); namespaces are ofan-<name>-<node>.
    #[arg(long = "name", value_name = "LAB", default_value = "lab")]
    pub name: String,
}

/// Where the switches' routes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoutingArg {
    /// The lab computes every switch's routes from the topology (ECMP groups for up-paths)
    /// and programs them into the switch namespace's kernel FIB.
    Static,
    /// No routes: bring your own (e.g. `ofan-lab exec SWITCH -- ip route add …`).
    None,
    /// eBGP with FRR (zebra + bgpd) in every switch namespace, one private ASN per switch
    /// (RFC 7938); failures reconverge by BGP. Needs the `frr` package.
    Bgp,
}

/// `--bgp-daemon`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BgpDaemonArg {
    /// FRR 8.4: zebra and bgpd per switch.
    Frr,
    /// BIRD 2: one bird per switch.
    Bird,
}

/// What `up` builds.
#[derive(Debug, Clone, clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    pub lab: LabName,
    /// fat-tree, leaf-spine, dragonfly (with --p, --a, --h), multi-plane (with --planes,
    /// --plane-topo), or a topology file (ofan-lab topo --out FILE).
    #[arg(
        long,
        value_name = "fat-tree|leaf-spine|dragonfly|multi-plane|FILE",
        default_value = "fat-tree"
    )]
    pub topo: String,
    /// Switch radix (even, 4..=64) for fat-tree, leaf-spine and each plane of multi-plane.
    #[arg(long, default_value_t = 4)]
    pub k: u16,
    /// Multi-plane: the number of disjoint planes (2..=8; default 2). Every host gets one veth
    /// per plane, to its edge switch in that plane, with that plane's address on it; the agents
    /// choose each packet's plane (`run --host-planes`). Static routing and veth host links
    /// only. Refused without `--topo multi-plane`.
    #[arg(long, value_name = "P")]
    pub planes: Option<u8>,
    /// Multi-plane: what each plane is (the model's --plane-topology; default fat-tree).
    /// Refused without `--topo multi-plane`.
    #[arg(long, value_enum, alias = "plane-topology")]
    pub plane_topo: Option<Shape>,
    /// Dragonfly: hosts per router.
    #[arg(long, value_name = "P", default_value_t = DEFAULT_DRAGONFLY.0)]
    pub p: u16,
    /// Dragonfly: routers per group (a complete graph).
    #[arg(long, value_name = "A", default_value_t = DEFAULT_DRAGONFLY.1)]
    pub a: u16,
    /// Dragonfly: global links per router (a·h + 1 groups).
    #[arg(long, value_name = "H", default_value_t = DEFAULT_DRAGONFLY.2)]
    pub h: u16,
    /// Load-balancing algorithm of every switch: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan
    /// (the default), arf-wcmp, arf-flow, arf-packet. On a dragonfly, the routers' routing
    /// scheme: min (the default), valiant, ugal-l, rotate, ugal-rotate.
    #[arg(long, value_name = "ALGO")]
    pub lb: Option<String>,
    /// Switches that run another algorithm than --lb: one `SWITCH ALGO` per line (`#`
    /// comments), the model's --scheme-map format — an incremental deployment (paper §6.4).
    /// Edge and aggregation switches, algorithms outside arf-*; `node S lb ALGO` changes one
    /// switch later, `set --lb` all of them.
    #[arg(long, value_name = "FILE")]
    pub lb_map: Option<PathBuf>,
    /// Ports per pipe (one worker thread each); default: all ports in one pipe.
    #[arg(long, value_name = "P")]
    pub pipe_size: Option<u16>,
    /// Emulated rate of every link (e.g. 1mbit, 10mbit; 0 = unshaped). The default is what a
    /// quiet 2-core machine emulates faithfully with switches in a group and spliced links,
    /// with a margin: 8mbit up to 16 hosts (k = 4), and for larger labs the same traffic in
    /// total, 8mbit × 16 / hosts (k = 6: 2370kbit, k = 8: 1mbit: what costs CPU is the frames
    /// the hosts send). With --splice false use 2mbit at k = 4, with --switches process 1mbit.
    /// `ofan-lab bench lab` measures your machine.
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<String>,
    /// Egress buffer of every switch port (e.g. 64KB).
    #[arg(long, value_name = "BYTES", default_value = DEFAULT_BUFFER)]
    pub buffer: String,
    /// MTU of every link, 68..=9216 (above 1778 the switches use 4096-byte UMEM frames, above
    /// 3826 a packet spans up to three: jumbo frames through multi-buffer AF_XDP). Larger frames
    /// carry the same bytes in fewer frames: a lab's highest faithful link rate grows with the
    /// MTU (docs/lab.md).
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
    /// agents do the same unless run with `--agent-catch-up false`. `false`: strict shapers
    /// that restart from now.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub catch_up: bool,
    /// Route source.
    #[arg(long, value_enum, default_value = "static")]
    pub routing: RoutingArg,
    /// The BGP daemon of --routing bgp: frr (zebra + bgpd, ≈ 35 MB per switch) or bird
    /// (BIRD 2, a few MB per switch: the one for large labs).
    #[arg(long, value_enum, default_value = "frr")]
    pub bgp_daemon: BgpDaemonArg,
    /// The ASNs of --routing bgp: unique (one private ASN per switch, so an AS_PATH names every
    /// switch) or rfc7938 (RFC 7938 §5.2.1: the cores share one ASN, each pod's aggregation
    /// switches one, every edge its own). Either way the switches learn their next-next hops by
    /// router ID from the routes' tags (docs/adaptive-routing.md).
    #[arg(long, value_name = "PLAN", default_value = "unique")]
    pub asn_plan: ofan_topology::plan::AsnPlan,
    /// BFD on every BGP session (needs --routing bgp), 100 ms x 3: a neighbour that goes silent
    /// while its link stays up (see `link A B blackhole`) is declared down within 0.3 s
    /// instead of the 3 s hold time. FRR runs a bfdd per switch (≈ 6 MB, ≈ 2 % of a CPU
    /// each); BIRD has BFD built in, at a fraction of that. Under load the daemons wait for
    /// CPU, and FRR's BFD declares sessions down that are not (k = 4 at 10 Mbit/s: 38 times in
    /// 4 runs; BIRD none): a run in which routes changed says so and is not faithful. With
    /// --bfd, use BIRD above 5 Mbit/s (docs/lab.md, Routing under load).
    #[arg(long)]
    pub bfd: bool,
    /// The ofan-switch binary (default: $OFAN_SWITCH, next to ofan-lab, or on PATH).
    #[arg(long, value_name = "PATH")]
    pub switch_bin: Option<PathBuf>,
    /// How the switches run. group: one `ofan-switch group` process serving every switch
    /// (each in its namespace, with its own FIB, admin socket and counters) with one worker
    /// thread per CPU — a frame crosses the fabric without waking a process per hop, so links
    /// stay faithful at several times the rate. process: one `ofan-switch` per switch, as on a
    /// real box (each frame wakes the next switch): to test the switch as it is deployed.
    #[arg(long, value_enum, default_value = "group")]
    pub switches: SwitchesArg,
    /// In a group, carry each frame from one switch to the next inside the process
    /// (default: true): copied into the next switch's memory and decided there at once,
    /// instead of a system call, an skb and two copies through the veth between them — about
    /// twice the rate stays faithful (docs/lab.md, Scale and speed). Frames for a switch's
    /// kernel (TTL expiry, ping to the switch, ARP, BGP) and links down or blackholed still
    /// use the veths, which behave as before; `ip -s link` and tcpdump on a veth between two
    /// switches see only those. false: every frame crosses its veth (to watch it there).
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    pub splice: Option<bool>,
    /// What carries the traffic agents' frames between the hosts and their edge switches.
    /// veth: the agents' UDP sockets, through each host's kernel and its veth. shared: shared
    /// memory between the agents and the group (needs --switches group and --mtu ≤ 3506) —
    /// the agents write and read whole Ethernet frames, the hosts' kernels do no work per
    /// frame; ping, TCP, ARP and traceroute from a host still take its veth
    /// (docs/lab.md, Host links). Default: shared where it can be (a group, --mtu ≤ 3506),
    /// veth otherwise. Use veth to watch the agents' frames on a host's veth (tcpdump,
    /// `capture`).
    #[arg(long, value_enum)]
    pub host_links: Option<HostLinksArg>,
    /// Log filter of the switches (`ofan-switch --log`: info, debug, ofan_dataplane=debug,info
    /// …), kept for switches restarted by `node start`; their logs are under the lab's state
    /// directory, `logs/` (a group's in `group.log`). Default: the switches' own (info).
    #[arg(long, value_name = "FILTER")]
    pub switch_log: Option<String>,
    /// xdp: every switch forwards in its XDP program too (`ofan-switch --fast-path xdp`: LPM
    /// lookup, pofan with one pointer set per CPU (or ecmp, rsq), rewrite, XDP_REDIRECT), the
    /// AF_XDP workers take only what it leaves. An unshaped fabric over its veths: the link
    /// rate defaults to 0 (a rate is refused: the fast path has no shaper), --splice to false
    /// and --host-links to veth. For traffic at the machine's own speed, not for faithful
    /// emulation.
    #[arg(long, value_enum, default_value = "off")]
    pub fast_path: FastPathArg,
    /// Let the lab change machine-wide settings for fidelity at high link rates (off: it
    /// changes none): real-time throttling lifted (kernel.sched_rt_runtime_us = -1, on kernels
    /// whose fair server still keeps ordinary tasks a share), every ksoftirqd at SCHED_FIFO 45,
    /// and the neighbour table's gc_thresh1/2/3 raised to hold the lab's entries (without it, a
    /// lab too large for gc_thresh3 is refused). Each original is recorded under /run/ofan and
    /// put back, each on its own, by the last lab's down, down --all, reset, or the next up
    /// after a crash. For a machine of your own, not a shared server (docs/lab.md).
    #[arg(long)]
    pub tune_machine: bool,
    /// Queue depth above which the switches mark ECN-capable frames CE (the agents send ECT(0)
    /// and echo CE in their ACKs: the signal of `run --cc dctcp|nscc`): auto (a tenth of
    /// --buffer, as the model's --ecn), off, or a size (e.g. 16KB).
    #[arg(long, value_name = "auto|off|BYTES", default_value = "auto")]
    pub ecn_threshold: String,
    /// How the adaptive-routing switches (`--lb arf-*`) rate a path from its local and remote
    /// levels: min (the worse of the two: a path is as good as its worst link) or sum (the
    /// draft's local + remote, halved). docs/adaptive-routing.md has the measurement behind
    /// the default.
    #[arg(long, value_name = "RULE", default_value = "min")]
    pub arf_combine: ofan_dataplane::arf::Combine,
}

/// `--fast-path`: a [`FastPathMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FastPathArg {
    /// The AF_XDP workers forward every frame.
    Off,
    /// The switches' XDP programs forward what they can.
    Xdp,
}

/// `--host-links`: a [`HostLinks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostLinksArg {
    /// The hosts' veths and kernels.
    Veth,
    /// Shared memory between the agents and the switch group.
    Shared,
}

impl HostLinksArg {
    /// The library's value.
    #[must_use]
    pub const fn host_links(self) -> HostLinks {
        match self {
            Self::Veth => HostLinks::Veth,
            Self::Shared => HostLinks::Shared,
        }
    }
}

/// `--switches`: a [`Switches`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SwitchesArg {
    /// One process for all switches, one worker thread per CPU.
    Group,
    /// One process per switch.
    Process,
}

impl SwitchesArg {
    /// The library's value.
    #[must_use]
    pub const fn switches(self) -> Switches {
        match self {
            Self::Group => Switches::Group,
            Self::Process => Switches::Process,
        }
    }
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
    /// Return this machine to clean: every lab, and every namespace, veth and process named
    /// ofan-* (what `down --all` does). Safe to run at any time, also after a crash.
    Reset,
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
    /// Take the link between two nodes down, blackhole it (carrier up, every frame dropped at
    /// both ends: a silent failure only BGP's hold time or BFD notices), bring it back, or slow
    /// a link between two switches (`rate 250kbit`; `rate default` restores the lab's rate).
    Link {
        #[command(flatten)]
        lab: LabName,
        /// One end (node name).
        a: String,
        /// The other end.
        b: String,
        /// up, down, blackhole or rate.
        #[arg(value_enum)]
        state: LinkAction,
        /// With `rate`: the link's new rate (e.g. 500kbit, 1mbit) or `default`.
        #[arg(required_if_eq("state", "rate"), value_name = "RATE")]
        rate: Option<String>,
    },
    /// Stop a switch (its links go down, the fabric routes around it), start it again, crash
    /// and restart its BGP daemons (routing-restart) while it keeps forwarding, or kill it
    /// like a crash (kill; `start` starts it again).
    Node {
        #[command(flatten)]
        lab: LabName,
        /// Switch name.
        switch: String,
        /// stop, start, routing-restart, kill, or lb ALGO.
        #[arg(value_enum)]
        action: StopStart,
        /// For `lb`: the algorithm this switch runs from now on (`default`: the lab's again).
        #[arg(value_name = "ALGO", required_if_eq("action", "lb"))]
        algorithm: Option<String>,
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
    /// Reconfigure every switch without rebuilding the lab (each switch restarts: ~0.5 s outage;
    /// in a switch group all restart at once).
    #[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["lb", "arf_combine"])))]
    Set {
        #[command(flatten)]
        lab: LabName,
        /// New load-balancing algorithm (every switch; per-switch algorithms are forgotten).
        #[arg(long, value_name = "ALGO")]
        lb: Option<String>,
        /// How the adaptive-routing switches combine a path's local and remote levels: min or
        /// sum (see `up --help`).
        #[arg(long, value_name = "RULE")]
        arf_combine: Option<ofan_dataplane::arf::Combine>,
    },
    /// Serve a live view of the lab in the browser (topology, per-link utilization and queues,
    /// failures, the running collective; pushed twice a second) and the whole lab's Prometheus
    /// /metrics, on 127.0.0.1:8080 by default, until Ctrl-C.
    View(view::ViewArgs),
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

/// What `link` does to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkAction {
    /// Bring the link up (carrier on, no drops; undoes down and blackhole).
    Up,
    /// Take the link down (carrier off at both ends; static routes are recomputed).
    Down,
    /// Keep the carrier up and drop every frame at both receiving ends — data, ARP, BGP, BFD
    /// (switch ends in their XDP program, host ends by a tc filter). Nothing is recomputed.
    Blackhole,
    /// Shape the link (between two switches) at RATE from now on: a degraded link. Routing
    /// does not change; only load balancers that see congestion react.
    Rate,
}

impl LinkAction {
    /// The state it asks for (`rate` asks for none: it changes a link's speed).
    #[must_use]
    pub const fn state(self) -> Option<LinkState> {
        match self {
            Self::Up => Some(LinkState::Up),
            Self::Down => Some(LinkState::Down),
            Self::Blackhole => Some(LinkState::Blackholed),
            Self::Rate => None,
        }
    }
}

/// What `node` does to a switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StopStart {
    /// Stop the switch process.
    Stop,
    /// Start it again.
    Start,
    /// Under --routing bgp: kill the switch's BGP daemon like a crash (SIGKILL; FRR's bgpd,
    /// or BIRD) and start it again. Graceful restart keeps the kernel FIB, so the switch keeps
    /// forwarding, and its neighbours keep their routes through it (not with --bfd: the BFD
    /// sessions go down with the daemon); prints how long until its sessions were back and
    /// which FIBs of the fabric changed meanwhile.
    RoutingRestart,
    /// Kill the switch like a crash (its queues and counters are lost, its links stay up, its
    /// XDP program stays attached and drops what arrives): SIGKILL of its process, or in a
    /// switch group the member alone ends that way. `node S start` starts it again.
    Kill,
    /// Run another load-balancing algorithm on this switch alone (`node e-p0-0 lb rsq`; `lb
    /// default` returns it to the lab's): an incremental deployment. The switch restarts (in a
    /// switch group, the group: about a second).
    Lb,
}

/// Runs a lab subcommand.
///
/// # Errors
/// Not root; what the operation reports.
pub fn run(command: Command) -> anyhow::Result<()> {
    if !lab::is_root() {
        bail!("the lab needs root (network namespaces, XDP): run with sudo");
    }
    let mut observer = Stderr;
    match command {
        Command::Up(args) => lab::up(&args.spec()?, &mut observer).map(drop),
        Command::Down { lab, all } => {
            if all {
                down_all()
            } else {
                down(&lab.name)
            }
        }
        Command::Reset => down_all(),
        Command::Status { lab, json } => {
            let loaded = lab::load(&lab.name)?;
            let status = lab::status::gather(&loaded);
            if json {
                println!("{}", status::json(&status)?);
            } else {
                print!("{}", status::table(&status));
            }
            Ok(())
        }
        Command::View(args) => view::run(&args),
        Command::Exec { lab, node, command } => {
            let status = ops::exec(&lab.name, &node, &command)?;
            std::process::exit(status.code().unwrap_or(1));
        }
        Command::Pingall { lab, attempts } => {
            let matrix = ops::pingall(&lab.name, attempts)?;
            print!("{}", pingall::render(&matrix));
            if matrix.failed().is_empty() {
                Ok(())
            } else {
                std::process::exit(1)
            }
        }
        Command::Link {
            lab,
            a,
            b,
            state: LinkAction::Rate,
            rate,
        } => {
            let rate =
                rate.ok_or_else(|| anyhow::anyhow!("`link A B rate` needs a RATE (or `default`)"))?;
            let bps = if rate == "default" {
                None
            } else {
                match parse_rate(&rate)? {
                    0 => anyhow::bail!("a link cannot be slowed to 0; take it down instead"),
                    bps => Some(bps),
                }
            };
            let change = ofan_lab::link_rate(&lab.name, &a, &b, bps)?;
            eprintln!(
                "link {a} — {b} at {} (the lab's links: {})",
                ofan_topology::units::format_rate(change.bps),
                ofan_topology::units::format_rate(change.lab_bps)
            );
            Ok(())
        }
        Command::Link {
            rate: Some(rate), ..
        } => anyhow::bail!("`{rate}`: only `link A B rate` takes a rate"),
        Command::Link {
            lab, a, b, state, ..
        } => {
            let wanted = state.state().expect("`rate` is handled above");
            let change = ops::link(&lab.name, &a, &b, wanted)?;
            let mut rerouted = rerouted(change.routes, change.converged.as_ref());
            if change.state == LinkState::Blackholed && change.converged.is_none() {
                rerouted.push_str(" (only BGP notices a blackhole)");
            }
            eprintln!(
                "link {a} — {b} {}; {rerouted}",
                match change.state {
                    LinkState::Up => "up",
                    LinkState::Down => "down",
                    LinkState::Blackholed => "blackholed",
                },
            );
            Ok(())
        }
        Command::Node {
            lab,
            switch,
            action: StopStart::Lb,
            algorithm,
        } => {
            let algorithm = algorithm.filter(|algorithm| algorithm != "default");
            let started = Instant::now();
            let label = ops::set_switch_lb(&lab.name, &switch, algorithm.as_deref())?;
            eprintln!(
                "{switch} now runs {} ({:.1} s); the lab runs {label}",
                algorithm.as_deref().unwrap_or("the lab's algorithm"),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Command::Node {
            lab,
            switch,
            action: StopStart::Kill,
            ..
        } => {
            let pid = ops::kill_switch(&lab.name, &switch)?;
            let how = match lab::load(&lab.name)?.state.params.switches {
                Switches::Group => format!("killed in its switch group (pid {pid})"),
                Switches::Process => format!("process {pid} killed (SIGKILL)"),
            };
            eprintln!("{switch}: {how}; `node {switch} start` starts it again");
            Ok(())
        }
        Command::Node {
            lab,
            switch,
            action: StopStart::RoutingRestart,
            ..
        } => {
            let restart = ops::routing_restart(&lab.name, &switch)?;
            let daemons: Vec<String> = restart
                .daemons
                .iter()
                .map(|(daemon, old, new)| format!("{daemon} {old} → {new}"))
                .collect();
            let fibs = if restart.changed.is_empty() {
                "every FIB intact throughout (all switches sampled every 10 ms)".to_owned()
            } else {
                let first = restart
                    .changed
                    .iter()
                    .map(|c| c.1)
                    .min()
                    .unwrap_or_default();
                let last = restart
                    .changed
                    .iter()
                    .map(|c| c.2)
                    .max()
                    .unwrap_or_default();
                let names: Vec<&str> = restart.changed.iter().map(|c| c.0.as_str()).collect();
                format!(
                    "the FIBs of {} switches CHANGED between {:.2} and {:.2} s ({})",
                    names.len(),
                    first.as_secs_f64(),
                    last.as_secs_f64(),
                    names.join(" ")
                )
            };
            eprintln!(
                "{switch}: routing daemons killed and restarted ({}); sessions back in {:.2} s; {fibs}",
                daemons.join(", "),
                restart.sessions.as_secs_f64(),
            );
            Ok(())
        }
        Command::Node {
            lab,
            switch,
            action,
            ..
        } => {
            match ops::node(&lab.name, &switch, action == StopStart::Start)? {
                NodeChange::AlreadyStopped => eprintln!("{switch} is already stopped"),
                NodeChange::Stopped { routes, converged } => eprintln!(
                    "{switch} stopped; its links are down; {}",
                    rerouted(routes, converged.as_ref())
                ),
                NodeChange::AlreadyRunning { pid } => {
                    eprintln!("{switch} is already running (pid {pid})");
                }
                NodeChange::Started {
                    pid,
                    routes,
                    converged,
                } => {
                    eprintln!(
                        "{switch} started (pid {pid}); {}",
                        rerouted(routes, converged.as_ref())
                    );
                }
            }
            Ok(())
        }
        Command::Capture {
            lab,
            target,
            out,
            count,
            duration,
        } => {
            let (out, status) =
                ops::capture(&lab.name, &target, out, count, duration, &mut observer)?;
            eprintln!("capture written to {} ({status})", out.display());
            Ok(())
        }
        Command::Set {
            lab,
            lb,
            arf_combine,
        } => set_switches(&lab.name, lb.as_deref(), arf_combine),
        Command::Demo {
            keep,
            k,
            lb,
            size,
            repeat,
        } => demo::run(keep, k, &lb, &size, repeat),
    }
}

impl UpArgs {
    /// The lab these flags describe.
    ///
    /// # Errors
    /// A value that does not parse.
    pub fn spec(&self) -> anyhow::Result<LabSpec> {
        let multi_plane = self.topo == "multi-plane";
        if !multi_plane && (self.planes.is_some() || self.plane_topo.is_some()) {
            bail!(
                "--planes and --plane-topo describe a multi-plane lab: add --topo multi-plane \
                 (this lab is --topo {})",
                self.topo
            );
        }
        let topology = if multi_plane {
            TopologySource::Kind(TopologyKind::MultiPlane {
                plane: match self.plane_topo.unwrap_or(Shape::FatTree) {
                    Shape::FatTree => PlaneKind::FatTree,
                    Shape::LeafSpine => PlaneKind::LeafSpine,
                },
                planes: self.planes.unwrap_or(2),
                k: self.k,
            })
        } else {
            TopologySource::parse_with(&self.topo, self.k, (self.p, self.a, self.h))
        };
        let fast = self.fast_path == FastPathArg::Xdp;
        let dragonfly = matches!(
            topology,
            TopologySource::Kind(TopologyKind::Dragonfly { .. })
        );
        let (algorithm, scheme) = match (dragonfly, self.lb.as_deref()) {
            (true, lb) => (
                Algorithm::Ecmp,
                Some(
                    lb.unwrap_or("min")
                        .parse::<DragonflyScheme>()
                        .map_err(|e| anyhow::anyhow!("--lb: {e}"))?,
                ),
            ),
            (false, lb) => (parse_algorithm(lb.unwrap_or("pofan"))?, None),
        };
        let spec = LabSpec {
            name: self.lab.name.clone(),
            link_rate_bps: match (&self.link_rate, fast) {
                (None, true) => 0,
                (rate, _) => link_rate_or_default(rate.as_deref(), &topology)?,
            },
            topology,
            algorithm,
            lb_map: match &self.lb_map {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("--lb-map: cannot read {}", path.display()))?;
                    lab::lb_map::parse(&text)
                        .with_context(|| format!("--lb-map {}", path.display()))?
                }
                None => lab::lb_map::LbMap::new(),
            },
            dragonfly: scheme,
            pipe_size: self.pipe_size,
            buffer_bytes: parse_buffer(&self.buffer)?,
            mtu: self.mtu,
            seed: self.seed,
            rt_priority: self.rt_priority,
            shaping: Shaping::from_catch_up(self.catch_up),
            routing: match self.routing {
                RoutingArg::Static => Routing::Static,
                RoutingArg::None => Routing::None,
                RoutingArg::Bgp => Routing::Bgp,
            },
            bgp_daemon: match self.bgp_daemon {
                BgpDaemonArg::Frr => BgpDaemon::Frr,
                BgpDaemonArg::Bird => BgpDaemon::Bird,
            },
            bfd: self.bfd.then_some(Bfd::FAST),
            asn_plan: self.asn_plan,
            switch_bin: self.switch_bin.clone(),
            switches: self.switches.switches(),
            splice: match (self.splice, self.switches) {
                (Some(true), SwitchesArg::Process) => anyhow::bail!(
                    "--splice true needs --switches group: only switches in one process share memory"
                ),
                (splice, _) => splice.unwrap_or(!fast),
            },
            host_links: match (self.host_links, fast) {
                (Some(links), _) => links.host_links(),
                (None, true) => HostLinks::Veth,
                // A multi-plane host sends through its P veths.
                (None, false) if multi_plane => HostLinks::Veth,
                (None, false) => HostLinks::for_lab(self.switches.switches(), self.mtu),
            },
            switch_log: self.switch_log.clone(),
            fast_path: if fast {
                FastPathMode::Xdp
            } else {
                FastPathMode::Off
            },
            tune_machine: self.tune_machine,
            ecn_threshold: self
                .ecn_threshold
                .parse()
                .map_err(|e| anyhow::anyhow!("--ecn-threshold {e}"))?,
            arf_combine: self.arf_combine,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// What rerouting took: routes the lab reprogrammed, or BGP's convergence time (and each
/// watched switch's).
fn rerouted(routes: usize, converged: Option<&Reconvergence>) -> String {
    let Some(converged) = converged else {
        return format!("{routes} routes reprogrammed");
    };
    let mut line = format!("BGP converged in {:.2} s", converged.fibs.as_secs_f64());
    if !converged.ends.is_empty() {
        let ends: Vec<String> = converged
            .ends
            .iter()
            .map(|(switch, time)| format!("{switch} {:.2} s", time.as_secs_f64()))
            .collect();
        line.push_str(&format!(" (FIB of {})", ends.join(", ")));
    }
    line
}

/// `--lb`.
fn parse_algorithm(text: &str) -> anyhow::Result<Algorithm> {
    text.parse().map_err(|e| anyhow::anyhow!("--lb: {e}"))
}

/// `--buffer`.
fn parse_buffer(text: &str) -> anyhow::Result<u64> {
    ofan_topology::units::parse_size(text).map_err(|e| anyhow::anyhow!("--buffer {e}"))
}

/// Removes lab `name` and says what went.
pub fn down(name: &str) -> anyhow::Result<()> {
    say_removed(name, &lab::down(name)?);
    Ok(())
}

fn say_removed(name: &str, removed: &Removed) {
    if !removed.had_state && removed.namespaces == 0 {
        eprintln!("lab `{name}`: nothing to remove");
    } else {
        let daemons = if removed.daemons > 0 {
            format!(" and {} routing daemons", removed.daemons)
        } else {
            String::new()
        };
        eprintln!(
            "lab `{name}` removed in {:.1} s: {} switches{daemons} stopped, {} other processes killed, {} namespaces deleted",
            removed.seconds, removed.stopped, removed.strays, removed.namespaces
        );
    }
    if !removed.lingering.is_empty() {
        eprintln!(
            "ofan-lab: warning: {} of lab `{name}` had not exited 5 s after SIGKILL (stuck in the \
             kernel? see /proc/PID/stack): {}",
            if removed.lingering.len() == 1 {
                "a process"
            } else {
                "processes"
            },
            removed.lingering.join(", ")
        );
    }
}

fn down_all() -> anyhow::Result<()> {
    let removed = lab::down_all()?;
    for (name, lab) in &removed.labs {
        say_removed(name, lab);
    }
    eprintln!(
        "down --all: {} namespaces, {} processes, {} root-namespace links named ofan-*",
        removed.namespaces, removed.strays, removed.links
    );
    Ok(())
}

fn set_switches(
    name: &str,
    lb: Option<&str>,
    combine: Option<ofan_dataplane::arf::Combine>,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let restarted = ops::set_switches(name, lb, combine)?;
    let params = lab::load(name)?.state.params;
    let how = match params.switches {
        Switches::Group => "the switch group restarted",
        Switches::Process => "rolling restart",
    };
    eprintln!(
        "{restarted} switches now run {} (arf-combine {}) ({:.1} s, {how})",
        params.lb,
        params.arf_combine,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfd_is_a_flag_of_bgp_labs() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            args: UpArgs,
        }
        let spec = |line: &[&str]| Up::parse_from([&["up"], line].concat()).args.spec();
        let error = spec(&["--bfd"]).unwrap_err().to_string();
        assert!(error.contains("--bfd needs --routing bgp"), "{error}");
        let bgp = spec(&["--routing", "bgp", "--bfd", "--bgp-daemon", "bird"]).unwrap();
        assert_eq!(bgp.bfd, Some(Bfd::FAST));
        assert_eq!(bgp.bgp_daemon, BgpDaemon::Bird);
        assert_eq!(spec(&["--routing", "bgp"]).unwrap().bfd, None);
    }

    #[test]
    fn the_asn_plan_is_a_flag_of_bgp_labs() {
        use clap::Parser as _;
        use ofan_topology::plan::AsnPlan;
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            args: UpArgs,
        }
        let spec = |line: &[&str]| Up::parse_from([&["up"], line].concat()).args.spec();
        let bgp = spec(&["--routing", "bgp", "--asn-plan", "rfc7938"]).unwrap();
        assert_eq!(bgp.asn_plan, AsnPlan::Rfc7938);
        assert_eq!(
            spec(&["--routing", "bgp"]).unwrap().asn_plan,
            AsnPlan::Unique
        );
        let error = spec(&["--asn-plan", "rfc7938"]).unwrap_err().to_string();
        assert!(
            error.contains("--asn-plan rfc7938 needs --routing bgp"),
            "{error}"
        );
        let error = spec(&["--topo", "dragonfly", "--asn-plan", "rfc7938"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("dragonfly"), "{error}");
        assert!(Up::try_parse_from(["up", "--asn-plan", "rfc-7938"]).is_err());
    }

    #[test]
    fn plane_flags_are_refused_without_a_multi_plane_topology() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            args: UpArgs,
        }
        let spec = |line: &[&str]| Up::parse_from([&["up"], line].concat()).args.spec();
        for line in [&["--planes", "4"][..], &["--plane-topo", "leaf-spine"]] {
            let error = spec(line).unwrap_err().to_string();
            assert!(error.contains("add --topo multi-plane"), "{error}");
        }
        let planes = |line: &[&str]| match spec(line).unwrap().topology {
            TopologySource::Kind(TopologyKind::MultiPlane { planes, plane, .. }) => (planes, plane),
            other => panic!("{other:?}"),
        };
        assert_eq!(planes(&["--topo", "multi-plane"]), (2, PlaneKind::FatTree));
        assert_eq!(
            planes(&[
                "--topo",
                "multi-plane",
                "--planes",
                "4",
                "--plane-topo",
                "leaf-spine"
            ]),
            (4, PlaneKind::LeafSpine)
        );
    }

    #[test]
    fn the_link_rate_defaults_by_the_labs_size_and_a_given_one_is_kept() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Up {
            #[command(flatten)]
            args: UpArgs,
        }
        let rate = |line: &[&str]| {
            Up::parse_from([&["up"], line].concat())
                .args
                .spec()
                .unwrap()
                .link_rate_bps
        };
        assert_eq!(rate(&[]), lab::DEFAULT_LINK_RATE_BPS);
        assert_eq!(rate(&["--k", "8"]), 1_000_000);
        assert_eq!(rate(&["--k", "8", "--link-rate", "5mbit"]), 5_000_000);
        assert_eq!(rate(&["--link-rate", "0"]), 0);
    }

    #[test]
    fn defaults_are_the_labs_constants() {
        assert_eq!(
            parse_buffer(DEFAULT_BUFFER).unwrap(),
            lab::DEFAULT_BUFFER_BYTES
        );
        assert_eq!(
            parse_buffer(EXPERIMENT_BUFFER).unwrap(),
            lab::EXPERIMENT_BUFFER_BYTES
        );
    }
}
