//! Flags that override `switch.toml` ([`Overrides`]) and their value enums.

use std::path::PathBuf;

use ofan_dataplane::afxdp::{BindMode, FastPathMode, PollMode};
use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_dataplane::lb::Algorithm;

use super::file::AttachName;

/// Flags that override the file (all optional).
#[derive(Debug, Default, Clone, clap::Args)]
pub struct Overrides {
    /// Topology file (ofan-lab topo --out); with --node, ports, roles and keys follow the plan.
    #[arg(long, value_name = "FILE")]
    pub topology: Option<PathBuf>,
    /// This switch's node name in the topology (e.g. e-p0-0).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// A port as NAME:ROLE (role host, down or up); repeat in port order. Replaces [[ports]].
    #[arg(long = "port", value_name = "NAME:ROLE")]
    pub ports: Vec<String>,
    /// Load-balancing algorithm: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan, arf-wcmp, arf-flow, arf-packet.
    #[arg(long = "lb", value_name = "ALGO")]
    pub algorithm: Option<Algorithm>,
    /// On a dragonfly router (--topology of a dragonfly, --node a router): the source's
    /// routing scheme, min, valiant, ugal-l, rotate or ugal-rotate (sets lb.dragonfly).
    #[arg(long = "dragonfly", value_name = "SCHEME")]
    pub dragonfly: Option<DragonflyScheme>,
    /// Ports per pipe (one worker per pipe).
    #[arg(long, value_name = "P")]
    pub pipe_size: Option<u16>,
    /// Emulated link rate of every port (e.g. 100mbit; 0 = unshaped).
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<String>,
    /// Egress buffer of every port (e.g. 1MB).
    #[arg(long, value_name = "BYTES")]
    pub buffer: Option<String>,
    /// ECN marking threshold (e.g. 100KB, or off).
    #[arg(long, value_name = "BYTES")]
    pub ecn_threshold: Option<String>,
    /// Shaper catch-up: a late departure shortens the next gap by its lateness, at most half a
    /// frame time, so a backlogged link keeps its rate under timer jitter (sets queue.catch_up).
    #[arg(long)]
    pub catch_up: bool,
    /// AF_XDP bind mode.
    #[arg(long = "xdp-mode", value_enum, value_name = "MODE")]
    pub bind_mode: Option<BindArg>,
    /// XDP attach mode of the steering program.
    #[arg(long, value_enum, value_name = "MODE")]
    pub attach: Option<AttachName>,
    /// Worker wait mode: wakeup (idle switches sleep) or busy (pinned, spinning).
    #[arg(long, value_enum, value_name = "MODE")]
    pub poll: Option<PollArg>,
    /// Run seed (the lab's, the same for every switch): the switch derives its own from it and
    /// its name.
    #[arg(long)]
    pub seed: Option<u64>,
    /// This switch's own seed, used as is (overrides --seed and the derivation).
    #[arg(long, value_name = "N")]
    pub switch_seed: Option<u64>,
    /// Admin socket path.
    #[arg(long, value_name = "PATH")]
    pub admin_socket: Option<PathBuf>,
    /// Prometheus endpoint address (ADDR:PORT) or "off".
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// BMP station address (ADDR:PORT) the local BGP daemon reports to, or "off" (sets
    /// bgp.bmp).
    #[arg(long, value_name = "ADDR")]
    pub bmp: Option<String>,
    /// How the BGP fabric of --topology numbers its ASNs: unique (one per switch) or rfc7938
    /// (one per core tier and per pod's aggregation tier, one per edge); sets bgp.asn_plan.
    #[arg(long = "asn-plan", value_name = "PLAN")]
    pub asn_plan: Option<ofan_topology::plan::AsnPlan>,
    /// Adaptive routing: how a path's quality combines its local and remote levels, min (the
    /// worse, default) or sum (the draft's local + remote, halved); sets
    /// adaptive_routing.combine.
    #[arg(long = "arf-combine", value_name = "RULE")]
    pub arf_combine: Option<ofan_dataplane::arf::Combine>,
    /// Adaptive routing: pass the notifications on to the hosts on the host ports (an edge
    /// switch of a multi-plane fabric; needs --topology); sets adaptive_routing.notify_hosts.
    #[arg(long = "arf-notify-hosts")]
    pub arf_notify_hosts: bool,
    /// Benchmark mode: port 2i ↔ 2i+1 without lookup, balancing or rewrite.
    #[arg(long)]
    pub bare: bool,
    /// UMEM/ring size (overrides xdp.ring_size).
    #[arg(long, value_name = "N")]
    pub ring_size: Option<u32>,
    /// Queues served per port, 1-8 (overrides xdp.queues): one worker per pipe and queue, each
    /// receiving on RX queue q and sending on TX queue q of its pipe's ports, so a flow stays
    /// on one queue and one worker. More than one needs unshaped ports.
    #[arg(long, value_name = "N")]
    pub queues: Option<u32>,
    /// UMEM frames per port, at least twice the ring size per queue (overrides
    /// xdp.frames_per_port; default 4 × ring size × queues).
    #[arg(long, value_name = "N")]
    pub frames_per_port: Option<u32>,
    /// Run wakeup-mode workers SCHED_FIFO at this priority, 1..=99 (0 = off; overrides
    /// xdp.rt_priority).
    #[arg(long, value_name = "PRIO")]
    pub rt_priority: Option<u8>,
    /// Forward in the XDP program too (`xdp`): IPv4 frames with a usable route are looked up,
    /// balanced (pofan: one pointer set per CPU; ecmp; rsq), rewritten and sent with
    /// XDP_REDIRECT without reaching user space; the rest go to the AF_XDP workers as with
    /// `off`. No link emulation (the interface's own rate applies). Overrides xdp.fast_path.
    #[arg(long, value_enum, value_name = "MODE")]
    pub fast_path: Option<FastPathArg>,
}

/// The fast path as a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FastPathArg {
    /// Every data-path frame goes to the AF_XDP workers.
    Off,
    /// The XDP program forwards what it can itself.
    Xdp,
}

impl From<FastPathArg> for FastPathMode {
    fn from(arg: FastPathArg) -> Self {
        match arg {
            FastPathArg::Off => FastPathMode::Off,
            FastPathArg::Xdp => FastPathMode::Xdp,
        }
    }
}

/// AF_XDP bind mode as a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BindArg {
    /// Zero-copy on NICs, copy on virtual interfaces.
    Auto,
    /// Copy mode.
    Copy,
    /// Zero-copy or fail.
    ZeroCopy,
}

impl From<BindArg> for BindMode {
    fn from(arg: BindArg) -> Self {
        match arg {
            BindArg::Auto => BindMode::Auto,
            BindArg::Copy => BindMode::Copy,
            BindArg::ZeroCopy => BindMode::ZeroCopy,
        }
    }
}

/// Worker wait mode as a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PollArg {
    /// Sleep in epoll when idle.
    Wakeup,
    /// Spin on pinned cores.
    Busy,
}

impl From<PollArg> for PollMode {
    fn from(arg: PollArg) -> Self {
        match arg {
            PollArg::Wakeup => PollMode::Wakeup,
            PollArg::Busy => PollMode::Busy,
        }
    }
}
