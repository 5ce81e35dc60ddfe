//! `switch.toml`: parsed once into validated types; command-line flags override it.
//!
//! Every key is documented in [`REFERENCE`] (printed by `ofan-switch --help`) and in
//! `docs/switch.md`. A bad file or flag gives one error naming the key, and exit code 2.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ofan_control::mirror::{MirrorConfig, PortConfig};
use ofan_control::notify::detect::Thresholds;
use ofan_control::notify::speaker::{Identity, Neighbour, Timing};
use ofan_control::notify::wire::Quality;
use ofan_control::paths::LearnedPaths;
use ofan_dataplane::afxdp::{
    fast, BindMode, FastPathMode, Forwarding, FrameSize, PollMode, PortSpec, RuntimeConfig,
    XdpMode, FRAME_SIZES,
};
use ofan_dataplane::egress::{EgressConfig, Shaping};
use ofan_dataplane::fib::{IpPrefix, PortId};
use ofan_dataplane::lb::{Algorithm, DestKey, LbConfig, SizeClass};
use ofan_topology::{switch_seed, NodeId, PortDirection, Role, Topology};

use ofan_topology::units::{parse_rate, parse_size};

mod file;

pub use file::{AttachName, FileConfig};
use file::{PortEntry, RoleName};

/// The configuration reference, as shown by `--help`.
pub const REFERENCE: &str = r#"CONFIGURATION FILE (--config switch.toml; every key optional, flags override)

  name = "e-p0-0"                 switch name (logs, stats); default: --node or "ofan-switch"
  seed = 1                        run seed: the lab's, shared by every switch of a run; this
                                  switch seeds its random choices (hash salts, pointer starts,
                                  random streams) with one derived from it and `name`
                                  (ofan_topology::switch_seed), so no two switches share them
  switch_seed = 7                 this switch's own seed, used as is (no derivation; overrides
                                  `seed`): to reproduce one switch's choices exactly
  topology = "topo.json"          topology file (ofan-lab topo --out); with `node`, ports,
  node = "e-p0-0"                 roles and the destination-key table default to the plan

  [[ports]]                       one per interface, in port-id order
  name = "p0"                     interface name in this namespace
  role = "host" | "down" | "up"   where it leads; the balancer chooses among "up" ports
  queues = 1                      as xdp.queues (every port must have the same)
  link_rate = "100mbit"           this port's emulated rate (overrides [queue])
  buffer = "1MB"                  this port's egress buffer (overrides [queue])

  [lb]
  algorithm = "pofan"             ecmp | rsq | rr | jsq | ar | drill | ofan | pofan
                                  | arf-wcmp | arf-flow | arf-packet (docs/adaptive-routing.md)
  pipe_size = 4                   ports per pipe (one worker each), in port order
  pipes = [["p0","p2"],["p1","p3"]]   explicit pipes instead of pipe_size
  ack_max_frame = 128             frames up to this many bytes use the ACK pointers

  [queue]                         defaults for every port's egress queue
  link_rate = "0"                 emulated link rate; 0 = unshaped (the NIC is the queue)
  buffer = "1MB"                  per-port buffer; tail drop beyond it
  ecn_threshold = "100KB"         mark ECN-capable frames CE above this depth; "off" to disable
  catch_up = false                a late shaper shortens the next gap by its lateness (at most half
                                  a frame time, like sch_fq) so the link keeps its rate; false:
                                  a late shaper restarts from now and loses the lateness

  [xdp]
  attach = "native" | "generic"   XDP attach mode of the steering program
  mode = "auto" | "copy" | "zero-copy"   AF_XDP bind mode (veth: copy only)
  poll = "wakeup" | "busy"        workers sleep when idle (labs) or spin pinned (line rate)
  cpus = [0, 1]                   CPUs for busy workers (worker i on cpus[i % len])
  rt_priority = 0                 wakeup workers run SCHED_FIFO at this priority (1-99; 0 = off):
                                  on a crowded machine their wake-ups preempt other tasks at once
  frame_size = 2048               UMEM frame size, 2048 or 4096: one frame carries an MTU up to
                                  size - 270, larger packets span up to 3 frames (multi-buffer);
                                  unset: the smallest that carries the ports' largest MTU in one
                                  frame, else 4096 (jumbo: up to MTU 11506)
  queues = 1                      queues served per port, 1-8: worker per pipe and queue, each
                                  receiving on RX queue q and sending on TX queue q of its
                                  ports (as a NIC's RSS spreads flows); more than one needs
                                  unshaped ports (the interface's own rate applies)
  frames_per_port = 8192          UMEM frames per port (default 4 x ring_size x queues)
  ring_size = 2048                fill/completion/RX/TX ring size (power of two)
  fast_path = "off" | "xdp"       xdp: the XDP program forwards what it can itself (IPv4 with a
                                  usable route; pofan with one pointer set per CPU, ecmp, rsq),
                                  the rest goes to the AF_XDP workers; no link emulation

  [keys]                          destination prefix -> key (paper 4.1 consolidation)
  count = 8                       number of keys (default: largest key + 1)
  table = [{ prefix = "10.1.0.0/24", key = 2 }, ...]

  [admin]
  socket = "/run/ofan/NAME.sock"  admin socket for `ofan-switch stats`; default /run/ofan/<name>.sock
  metrics = "127.0.0.1:9100"      Prometheus text endpoint (GET /metrics); a bare port ("9100")
                                  is on loopback; "off" (default) to disable

  [bgp]
  bmp = "127.0.0.1:11019"         BMP station (RFC 7854) the local BGP daemon reports to (FRR:
                                  bgpd -M bmp, `bmp connect` + `bmp mirror`): the path table
                                  (next hops and next-next hops) follows BGP; "off" (default):
                                  path information comes from the topology plan, if any

  [adaptive_routing]              congestion notifications (docs/adaptive-routing.md)
  enabled = true                  default: on with an arf-* algorithm, off otherwise
  window_ms = 10                  detection window (1-1000): each fabric port's level is measured
  queue_frames = 8                from the window's largest queue: 15 empty, 0 at this many
                                  full-size frames or more (or any drop)
  refresh_ms = 100                every state is re-sent every T (window_ms-21845); hold is 3T
  port = 7415                     UDP port, sent with TTL 255 and accepted only with TTL 255
                                  from a fabric (up/down) port
  asn = 4200000001                this switch's ASN and router ID in notifications; default:
  router_id = "10.255.0.1"        the topology plan's; without either it receives only
  congested_at = 5                congestion detected at this level (0-15) or below
  cleared_at = 9                  and cleared at this level or above (above congested_at)
  windows_to_change = 2           windows a new level must last before it is reported
  jump = 4                        a change by more than this many levels is reported at once
"#;

/// A configuration error: which key, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// The key (`lb.pipe_size`, `ports[2].role`, `--link-rate`, the file…).
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

fn error(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

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

/// The validated configuration of one switch.
#[derive(Debug, Clone)]
pub struct SwitchConfig {
    /// Switch name.
    pub name: String,
    /// What the data path runs.
    pub runtime: RuntimeConfig,
    /// What the FIB mirror needs.
    pub mirror: MirrorConfig,
    /// Admin socket path.
    pub admin_socket: PathBuf,
    /// Prometheus endpoint.
    pub metrics: Option<SocketAddr>,
    /// BMP station address: path information from the BGP daemon.
    pub bmp: Option<SocketAddr>,
    /// Path information from the topology plan (with `topology` and `node`).
    pub plan_paths: Option<LearnedPaths>,
    /// Adaptive-routing notifications (`[adaptive_routing]`), when enabled.
    pub adaptive_routing: Option<AdaptiveRouting>,
}

/// The validated `[adaptive_routing]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptiveRouting {
    /// Window and refresh interval.
    pub timing: Timing,
    /// UDP port.
    pub port: u16,
    /// Detector settings.
    pub thresholds: Thresholds,
    /// This switch's ASN and router ID: the key, else the plan; without it the switch receives
    /// but does not send.
    pub identity: Option<Identity>,
    /// Fabric ports (role up or down), by port id.
    pub fabric_ports: Vec<u32>,
    /// The neighbours the plan names behind the fabric ports (empty without a plan: then they
    /// are the FIB's next hops on fabric ports, named by the path table's ASNs).
    pub plan_neighbours: Vec<Neighbour>,
}

/// The queues every port serves: `given` (the flag or `xdp.queues`), which a port's own
/// `queues` must then equal; else the ports' own, which must agree; else 1.
fn queues_of(given: Option<u32>, ports: &[PortEntry]) -> Result<u32, ConfigError> {
    let max = ofan_dataplane::afxdp::MAX_QUEUES;
    let per_port: Vec<(usize, u32)> = ports
        .iter()
        .enumerate()
        .filter_map(|(index, port)| Some((index, port.queues?)))
        .collect();
    let queues = match (given, per_port.first()) {
        (Some(queues), _) => queues,
        (None, Some(&(_, queues))) => queues,
        (None, None) => 1,
    };
    if !(1..=max).contains(&queues) {
        return Err(error(
            "xdp.queues",
            format!("{queues}: 1 to {max} queues per port"),
        ));
    }
    if let Some(&(index, other)) = per_port.iter().find(|&&(_, q)| q != queues) {
        return Err(error(
            format!("ports[{index}].queues"),
            format!(
                "{other}, but the switch serves {queues} queues on every port (a worker per \
                 pipe and queue): give every port the same, or set xdp.queues"
            ),
        ));
    }
    Ok(queues)
}

/// What the XDP fast path cannot be combined with, refused with the key at fault.
fn check_fast_path(runtime: &RuntimeConfig) -> Result<(), ConfigError> {
    if let Some(port) = runtime.ports.iter().find(|p| p.egress.link_rate_bps > 0) {
        return Err(error(
            "xdp.fast_path",
            format!(
                "port {} emulates a link ({}), but the XDP fast path has no shaper: the frames \
                 it forwards leave at the interface's own rate. Use a link rate of 0 \
                 (--link-rate 0), or --fast-path off to emulate links",
                port.name,
                ofan_topology::units::format_rate(port.egress.link_rate_bps)
            ),
        ));
    }
    if runtime.forwarding == Forwarding::Bare {
        return Err(error(
            "xdp.fast_path",
            "--bare forwards port to port in user space; it has no fast path",
        ));
    }
    fast::supported(runtime.lb.algorithm)
        .map(drop)
        .map_err(|reason| {
            error(
                "xdp.fast_path",
                format!("--lb {}: {reason}", runtime.lb.algorithm),
            )
        })
}

/// Reads and validates the configuration.
///
/// # Errors
/// [`ConfigError`] naming the key at fault.
pub fn load(path: Option<&Path>, flags: &Overrides) -> Result<SwitchConfig, ConfigError> {
    let file: FileConfig = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| error(path.display().to_string(), format!("cannot read: {e}")))?;
            parse_file(&path.display().to_string(), &text)?
        }
        None => FileConfig::default(),
    };
    resolve(file, flags)
}

/// Parses the text of a `switch.toml` (named `origin` in errors) into its schema, unvalidated;
/// pure, so the fuzz target `switch_config` reaches exactly what [`load`] runs.
///
/// # Errors
/// [`ConfigError`] naming `origin` and the line of a TOML or schema error.
pub fn parse_file(origin: &str, text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| error(origin, e.message().to_owned() + &span(text, e.span())))
}

/// Whether a parsed file names a topology file (which [`resolve`] then reads).
#[must_use]
pub fn names_topology(file: &FileConfig) -> bool {
    file.topology.is_some()
}

fn span(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(range) => {
            let line = text[..range.start.min(text.len())].lines().count().max(1);
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

/// Validates a parsed file with the command line's overrides (flags win).
///
/// # Errors
/// [`ConfigError`] naming the key at fault.
pub fn resolve(file: FileConfig, flags: &Overrides) -> Result<SwitchConfig, ConfigError> {
    let topology_path = flags.topology.clone().or(file.topology.clone());
    let node_name = flags.node.clone().or(file.node.clone());
    let plan = match (&topology_path, &node_name) {
        (Some(path), Some(node)) => Some(Plan::load(path, node)?),
        (Some(_), None) => {
            return Err(error(
                "node",
                "a topology needs the switch's node name (--node)",
            ))
        }
        (None, Some(_)) => {
            return Err(error(
                "topology",
                "a node name needs the topology file (--topology)",
            ))
        }
        (None, None) => None,
    };
    let name = file
        .name
        .clone()
        .or(node_name.clone())
        .unwrap_or_else(|| "ofan-switch".to_owned());

    // Ports: flags, then the file, then the plan.
    let mut ports: Vec<PortEntry> = if !flags.ports.is_empty() {
        flags
            .ports
            .iter()
            .map(|spec| parse_port_flag(spec))
            .collect::<Result<_, _>>()?
    } else if !file.ports.is_empty() {
        file.ports.clone()
    } else if let Some(plan) = &plan {
        plan.ports()
    } else {
        return Err(error(
            "ports",
            "no ports: give [[ports]], --port NAME:ROLE or --topology with --node",
        ));
    };
    for (index, port) in ports.iter().enumerate() {
        if port.name.is_empty() || port.name.len() > 15 {
            return Err(error(
                format!("ports[{index}].name"),
                format!(
                    "`{}` is not an interface name (1 to 15 characters)",
                    port.name
                ),
            ));
        }
        if ports[..index].iter().any(|other| other.name == port.name) {
            return Err(error(
                format!("ports[{index}].name"),
                format!("port `{}` is listed twice", port.name),
            ));
        }
        if port.queues == Some(0) {
            return Err(error(
                format!("ports[{index}].queues"),
                "must be at least 1",
            ));
        }
    }

    let algorithm = flags
        .algorithm
        .or(file.lb.algorithm)
        .unwrap_or(Algorithm::Pofan);
    let ack_max_frame = file
        .lb
        .ack_max_frame
        .unwrap_or(SizeClass::DEFAULT_ACK_MAX_FRAME);
    let pipes = pipes_of(
        &ports,
        flags.pipe_size,
        file.lb.pipe_size,
        file.lb.pipes.as_ref(),
    )?;

    let rate_text = flags
        .link_rate
        .clone()
        .or(file.queue.link_rate.clone())
        .unwrap_or_else(|| "0".into());
    let link_rate = parse_rate(&rate_text).map_err(|m| {
        error(
            if flags.link_rate.is_some() {
                "--link-rate"
            } else {
                "queue.link_rate"
            },
            m.to_string(),
        )
    })?;
    let buffer_text = flags
        .buffer
        .clone()
        .or(file.queue.buffer.clone())
        .unwrap_or_else(|| "1MB".into());
    let buffer = parse_size(&buffer_text).map_err(|m| {
        error(
            if flags.buffer.is_some() {
                "--buffer"
            } else {
                "queue.buffer"
            },
            m.to_string(),
        )
    })?;
    let ecn_text = flags
        .ecn_threshold
        .clone()
        .or(file.queue.ecn_threshold.clone())
        .unwrap_or_else(|| "off".into());
    let ecn_threshold = if ecn_text == "off" {
        None
    } else {
        Some(parse_size(&ecn_text).map_err(|m| error("queue.ecn_threshold", m.to_string()))?)
    };
    let shaping = if flags.catch_up || file.queue.catch_up.unwrap_or(false) {
        Shaping::CatchUp
    } else {
        Shaping::Strict
    };
    let to_u32 =
        |key: &str, value: u64| u32::try_from(value).map_err(|_| error(key, "must be below 4 GB"));
    let buffer = to_u32("queue.buffer", buffer)?;
    let ecn_threshold = ecn_threshold
        .map(|t| to_u32("queue.ecn_threshold", t))
        .transpose()?;

    let frame_size = match file.xdp.frame_size {
        None => FrameSize::Auto,
        Some(size) if FRAME_SIZES.contains(&size) => FrameSize::Bytes(size),
        Some(size) => {
            return Err(error(
                "xdp.frame_size",
                format!("{size} must be 2048 or 4096"),
            ))
        }
    };
    let ring_size = flags.ring_size.or(file.xdp.ring_size).unwrap_or(2048);
    if !ring_size.is_power_of_two() || !(64..=16384).contains(&ring_size) {
        return Err(error(
            "xdp.ring_size",
            format!("{ring_size} must be a power of two from 64 to 16384"),
        ));
    }
    let queues = queues_of(flags.queues.or(file.xdp.queues), &ports)?;
    let frames_per_port = flags
        .frames_per_port
        .or(file.xdp.frames_per_port)
        .unwrap_or(4 * ring_size * queues);
    if frames_per_port < 2 * ring_size * queues {
        return Err(error(
            "xdp.frames_per_port",
            format!(
                "{frames_per_port} must be at least twice xdp.ring_size ({ring_size}) per queue \
                 ({queues} queues)"
            ),
        ));
    }

    let mut specs = Vec::new();
    for (index, port) in ports.iter_mut().enumerate() {
        let rate = match &port.link_rate {
            Some(text) => parse_rate(text)
                .map_err(|m| error(format!("ports[{index}].link_rate"), m.to_string()))?,
            None => link_rate,
        };
        let port_buffer = match &port.buffer {
            Some(text) => to_u32(
                &format!("ports[{index}].buffer"),
                parse_size(text)
                    .map_err(|m| error(format!("ports[{index}].buffer"), m.to_string()))?,
            )?,
            None => buffer,
        };
        specs.push(PortSpec {
            name: port.name.clone(),
            queues,
            egress: EgressConfig {
                link_rate_bps: rate,
                buffer_bytes: port_buffer,
                ecn_threshold_bytes: ecn_threshold,
                shaping,
            },
        });
    }
    let up_ports: Vec<PortId> = ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.role == RoleName::Up)
        .map(|(i, _)| PortId(i as u16))
        .collect();
    if up_ports.len() > 64 {
        return Err(error(
            "ports",
            format!(
                "{} up ports; the balancer handles at most 64",
                up_ports.len()
            ),
        ));
    }

    let mut keys = Vec::new();
    if !file.keys.table.is_empty() {
        for (index, entry) in file.keys.table.iter().enumerate() {
            let prefix: IpPrefix = entry
                .prefix
                .parse()
                .map_err(|e| error(format!("keys.table[{index}].prefix"), format!("{e}")))?;
            keys.push((prefix, DestKey(entry.key)));
        }
    } else if let Some(plan) = &plan {
        keys = plan.keys();
    }
    let largest = keys.iter().map(|(_, key)| key.0 + 1).max().unwrap_or(0);
    let dest_keys = match file.keys.count {
        Some(count) if count < largest => {
            return Err(error(
                "keys.count",
                format!(
                    "{count} is not more than the largest key in keys.table ({})",
                    largest - 1
                ),
            ));
        }
        Some(count) => count,
        None => plan
            .as_ref()
            .map(|p| p.key_count())
            .unwrap_or(largest)
            .max(largest)
            .max(1),
    };

    // One run seed for every switch; each switch's own from it and the name, so that no two
    // switches salt their hashes alike (ECMP polarization) or start their pointers together.
    let seed = match flags.switch_seed.or(file.switch_seed) {
        Some(exact) => exact,
        None => switch_seed(flags.seed.or(file.seed).unwrap_or(1), &name),
    };
    let rt_priority = match flags.rt_priority.or(file.xdp.rt_priority).unwrap_or(0) {
        0 => None,
        p @ 1..=99 => Some(p),
        p => {
            return Err(error(
                "xdp.rt_priority",
                format!("{p} is not a SCHED_FIFO priority (1..=99, 0 = off)"),
            ))
        }
    };
    let runtime = RuntimeConfig {
        ports: specs,
        pipes: pipes.clone(),
        up_ports: up_ports.clone(),
        lb: LbConfig {
            algorithm,
            up_ports: up_ports.len().max(1) as u8,
            dest_keys,
            pipes: (pipes.len() * queues as usize) as u16,
            buffer_bytes: buffer,
            seed,
        },
        ack_max_frame,
        xdp_mode: match flags
            .attach
            .or(file.xdp.attach)
            .unwrap_or(AttachName::Native)
        {
            AttachName::Native => XdpMode::Native,
            AttachName::Generic => XdpMode::Generic,
        },
        bind_mode: flags
            .bind_mode
            .map(BindMode::from)
            .or(file.xdp.mode)
            .unwrap_or(BindMode::Auto),
        poll: flags
            .poll
            .map(PollMode::from)
            .or(file.xdp.poll)
            .unwrap_or(PollMode::Wakeup),
        cpus: file.xdp.cpus.clone().unwrap_or_default(),
        rt_priority,
        frame_size,
        frames_per_port,
        ring_size,
        forwarding: if flags.bare {
            Forwarding::Bare
        } else {
            Forwarding::Lookup
        },
        // Only a group wires in-process links (`ofan-switch group --splice`) and host links
        // (`--host-links`).
        splices: Vec::new(),
        host_links: Vec::new(),
        fast_path: flags
            .fast_path
            .map(FastPathMode::from)
            .or(file.xdp.fast_path)
            .unwrap_or_default(),
    };
    if runtime.fast_path == FastPathMode::Xdp {
        check_fast_path(&runtime)?;
    }
    if queues > 1 {
        if let Some(port) = runtime.ports.iter().find(|p| p.egress.link_rate_bps > 0) {
            return Err(error(
                "xdp.queues",
                format!(
                    "port {} emulates a link ({}), which needs one transmit queue per port: \
                     with {queues} queues each worker sends on its own queue, at the \
                     interface's own rate. Use a link rate of 0, or one queue",
                    port.name,
                    ofan_topology::units::format_rate(port.egress.link_rate_bps)
                ),
            ));
        }
    }
    if runtime.rt_priority.is_some() && runtime.poll == PollMode::Busy {
        return Err(error(
            "xdp.rt_priority",
            "only with poll = wakeup: busy workers spin and would starve their CPU".to_owned(),
        ));
    }
    let mirror = MirrorConfig {
        ports: ports
            .iter()
            .map(|p| PortConfig {
                name: p.name.clone(),
                role: p.role.into(),
            })
            .collect(),
        keys,
        dest_keys,
    };
    let admin_socket = flags
        .admin_socket
        .clone()
        .or(file.admin.socket.clone())
        .unwrap_or_else(|| PathBuf::from(format!("/run/ofan/{name}.sock")));
    let metrics_text = flags
        .metrics
        .clone()
        .or(file.admin.metrics.clone())
        .unwrap_or_else(|| "off".into());
    // A bare port is on loopback: exposing the endpoint beyond the host takes an address.
    let metrics_text = match metrics_text.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => metrics_text,
    };
    let metrics = parse_endpoint("admin.metrics", Some(&metrics_text))?;
    let bmp = parse_endpoint(
        "bgp.bmp",
        flags.bmp.clone().or(file.bgp.bmp.clone()).as_deref(),
    )?;
    let plan_paths = plan
        .as_ref()
        .map(|plan| LearnedPaths::from_plan(&plan.topology, plan.node));
    let adaptive_routing =
        adaptive_routing(&file.adaptive_routing, algorithm, &ports, plan.as_ref())?;
    Ok(SwitchConfig {
        name,
        runtime,
        mirror,
        admin_socket,
        metrics,
        bmp,
        plan_paths,
        adaptive_routing,
    })
}

/// `[adaptive_routing]`: on by default exactly when the algorithm is an `arf-*` mode (the only
/// ones that read what notifications say).
fn adaptive_routing(
    section: &file::AdaptiveRoutingSection,
    algorithm: Algorithm,
    ports: &[PortEntry],
    plan: Option<&Plan>,
) -> Result<Option<AdaptiveRouting>, ConfigError> {
    let arf = matches!(
        algorithm,
        Algorithm::ArfWcmp | Algorithm::ArfFlow | Algorithm::ArfPacket
    );
    if !section.enabled.unwrap_or(arf) {
        return Ok(None);
    }
    let window_ms = section.window_ms.unwrap_or(10);
    if !(1..=1000).contains(&window_ms) {
        return Err(error(
            "adaptive_routing.window_ms",
            format!("{window_ms} must be from 1 to 1000"),
        ));
    }
    let refresh_ms = section.refresh_ms.unwrap_or(100);
    // The hold time (3T) travels as 16-bit milliseconds.
    if refresh_ms < window_ms || refresh_ms > u64::from(u16::MAX) / 3 {
        return Err(error(
            "adaptive_routing.refresh_ms",
            format!(
                "{refresh_ms} must be from window_ms ({window_ms}) to {}",
                u16::MAX / 3
            ),
        ));
    }
    let port = section.port.unwrap_or(ofan_control::notify::DEFAULT_PORT);
    if port == 0 {
        return Err(error("adaptive_routing.port", "must not be 0"));
    }
    let level = |key: &str, value: Option<u8>, default: Quality| match value {
        None => Ok(default),
        Some(level) => Quality::new(level).ok_or_else(|| {
            error(
                format!("adaptive_routing.{key}"),
                format!("{level} is not a level (0 to 15)"),
            )
        }),
    };
    let defaults = Thresholds::default();
    let thresholds = Thresholds {
        congested_at: level("congested_at", section.congested_at, defaults.congested_at)?,
        cleared_at: level("cleared_at", section.cleared_at, defaults.cleared_at)?,
        windows_to_change: section
            .windows_to_change
            .unwrap_or(defaults.windows_to_change),
        jump: section.jump.unwrap_or(defaults.jump),
        queue_frames: section.queue_frames.unwrap_or(defaults.queue_frames),
    }
    .validate()
    .map_err(|e| {
        let key = match e {
            ofan_control::notify::detect::ThresholdError::Band { .. } => "cleared_at",
            ofan_control::notify::detect::ThresholdError::Windows => "windows_to_change",
            ofan_control::notify::detect::ThresholdError::QueueFrames => "queue_frames",
        };
        error(format!("adaptive_routing.{key}"), e.to_string())
    })?;
    let identity = match (section.asn, section.router_id, plan) {
        (Some(asn), Some(router_id), _) => Some(Identity { asn, router_id }),
        (None, None, Some(plan)) => Some(plan.identity(plan.node)),
        (None, None, None) => None,
        (Some(asn), None, Some(plan)) => Some(Identity {
            asn,
            router_id: plan.identity(plan.node).router_id,
        }),
        (None, Some(router_id), Some(plan)) => Some(Identity {
            asn: plan.identity(plan.node).asn,
            router_id,
        }),
        (Some(_), None, None) => {
            return Err(error(
                "adaptive_routing.router_id",
                "an asn needs a router_id (or a topology)",
            ))
        }
        (None, Some(_), None) => {
            return Err(error(
                "adaptive_routing.asn",
                "a router_id needs an asn (or a topology)",
            ))
        }
    };
    let fabric_ports = ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.role != RoleName::Host)
        .map(|(i, _)| i as u32)
        .collect();
    Ok(Some(AdaptiveRouting {
        timing: Timing {
            window_ns: window_ms * 1_000_000,
            refresh_ns: refresh_ms * 1_000_000,
        },
        port,
        thresholds,
        identity,
        fabric_ports,
        plan_neighbours: plan.map(|plan| plan.neighbours(ports)).unwrap_or_default(),
    }))
}

/// An optional `ADDR:PORT` setting: absent or "off" is none.
fn parse_endpoint(key: &str, text: Option<&str>) -> Result<Option<SocketAddr>, ConfigError> {
    match text {
        None | Some("off") => Ok(None),
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|_| error(key, format!("`{text}` is not ADDR:PORT or off"))),
    }
}

fn parse_port_flag(spec: &str) -> Result<PortEntry, ConfigError> {
    let (name, role) = spec
        .split_once(':')
        .ok_or_else(|| error("--port", format!("`{spec}` is not NAME:ROLE")))?;
    let role = match role {
        "host" => RoleName::Host,
        "down" => RoleName::Down,
        "up" => RoleName::Up,
        other => {
            return Err(error(
                "--port",
                format!("role `{other}` is not host, down or up"),
            ))
        }
    };
    Ok(PortEntry {
        name: name.to_owned(),
        role,
        queues: None,
        link_rate: None,
        buffer: None,
    })
}

fn pipes_of(
    ports: &[PortEntry],
    flag_size: Option<u16>,
    file_size: Option<u16>,
    explicit: Option<&Vec<Vec<String>>>,
) -> Result<Vec<Vec<PortId>>, ConfigError> {
    if let (Some(groups), None) = (explicit, flag_size) {
        let mut seen = vec![false; ports.len()];
        let mut pipes = Vec::new();
        for (pipe_index, group) in groups.iter().enumerate() {
            if group.is_empty() {
                return Err(error(
                    format!("lb.pipes[{pipe_index}]"),
                    "a pipe needs at least one port",
                ));
            }
            let mut pipe = Vec::new();
            for name in group {
                let index = ports.iter().position(|p| &p.name == name).ok_or_else(|| {
                    error(
                        format!("lb.pipes[{pipe_index}]"),
                        format!("no port named `{name}`"),
                    )
                })?;
                if std::mem::replace(&mut seen[index], true) {
                    return Err(error(
                        format!("lb.pipes[{pipe_index}]"),
                        format!("port `{name}` is in two pipes"),
                    ));
                }
                pipe.push(PortId(index as u16));
            }
            pipes.push(pipe);
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(error(
                "lb.pipes",
                format!("port `{}` is in no pipe", ports[missing].name),
            ));
        }
        return Ok(pipes);
    }
    let size = flag_size.or(file_size).unwrap_or(4);
    if size == 0 {
        return Err(error(
            if flag_size.is_some() {
                "--pipe-size"
            } else {
                "lb.pipe_size"
            },
            "must be at least 1",
        ));
    }
    Ok((0..ports.len() as u16)
        .collect::<Vec<_>>()
        .chunks(usize::from(size))
        .map(|chunk| chunk.iter().map(|&i| PortId(i)).collect())
        .collect())
}

/// The switch's place in a topology: the defaults for ports, roles and keys.
struct Plan {
    topology: Topology,
    node: NodeId,
}

impl Plan {
    fn load(path: &Path, node: &str) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| error("topology", format!("cannot read {}: {e}", path.display())))?;
        let topology = Topology::from_json(&text)
            .map_err(|e| error("topology", format!("{}: {e}", path.display())))?;
        let node = topology
            .nodes()
            .iter()
            .find(|n| n.name == node)
            .ok_or_else(|| {
                error(
                    "node",
                    format!("no node named `{node}` in {}", path.display()),
                )
            })?;
        if node.role == Role::Host {
            return Err(error(
                "node",
                format!("`{}` is a host, not a switch", node.name),
            ));
        }
        Ok(Self {
            node: node.id,
            topology,
        })
    }

    fn ports(&self) -> Vec<PortEntry> {
        let node = self.topology.node(self.node);
        node.ports
            .iter()
            .map(|port| PortEntry {
                name: port.ifname.clone(),
                role: match (port.direction, self.topology.role(port.peer)) {
                    (_, Role::Host) => RoleName::Host,
                    (PortDirection::Up, _) => RoleName::Up,
                    (PortDirection::Down, _) => RoleName::Down,
                },
                queues: None,
                link_rate: None,
                buffer: None,
            })
            .collect()
    }

    /// Destination keys of every edge prefix as seen from this switch (edge switches: the
    /// destination edge; aggregation switches: the destination pod).
    fn keys(&self) -> Vec<(IpPrefix, DestKey)> {
        let mut keys = Vec::new();
        for edge in self.topology.edges() {
            let (network, len) = self.topology.edge_prefix(edge.id);
            // Any host under that edge gives its key here.
            let Some(host) = edge
                .ports
                .iter()
                .find(|p| self.topology.role(p.peer) == Role::Host)
            else {
                continue;
            };
            let host_addr = self.topology.node(host.peer).loopback;
            if let Some(key) = self.topology.dest_key(self.node, host_addr) {
                let prefix =
                    IpPrefix::new(network.into(), len).expect("edge prefixes have no host bits");
                keys.push((prefix, key));
            }
        }
        keys
    }

    /// A switch's identity in notifications: its ASN and its loopback as router ID.
    fn identity(&self, node: NodeId) -> Identity {
        let node = self.topology.node(node);
        Identity {
            asn: ofan_topology::plan::asn(node),
            router_id: node.loopback,
        }
    }

    /// The switches behind this switch's ports, by the port ids of `ports` (matched by
    /// interface name).
    fn neighbours(&self, ports: &[PortEntry]) -> Vec<Neighbour> {
        let node = self.topology.node(self.node);
        node.ports
            .iter()
            .filter(|port| self.topology.role(port.peer).is_switch())
            .filter_map(|port| {
                let index = ports.iter().position(|p| p.name == port.ifname)?;
                let peer = self.topology.node(port.peer);
                let addr = peer
                    .ports
                    .iter()
                    .find(|p| p.index == port.peer_port)?
                    .address;
                Some(Neighbour {
                    port: index as u32,
                    addr,
                    id: self.identity(port.peer),
                })
            })
            .collect()
    }

    fn key_count(&self) -> u32 {
        self.topology.dest_key_count(self.node)
    }
}

#[cfg(test)]
mod tests;
