//! `switch.toml`: parsed once into validated types; command-line flags override it.
//!
//! Every key is documented in [`REFERENCE`] (printed by `ofan-switch --help`) and in
//! `docs/switch.md`. A bad file or flag gives one error naming the key, and exit code 2.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use ofan_control::mirror::{MirrorConfig, PortConfig};
use ofan_control::paths::LearnedPaths;
use ofan_dataplane::afxdp::{
    fast, BindMode, FastPathMode, Forwarding, FrameSize, PollMode, PortSpec, RuntimeConfig,
    XdpMode, FRAME_SIZES,
};
use ofan_dataplane::egress::{EgressConfig, Shaping};
use ofan_dataplane::fib::{IpPrefix, PortId};
use ofan_dataplane::lb::dragonfly::{DragonflyRole, UnknownDragonflyScheme};
use ofan_dataplane::lb::{Algorithm, DestKey, LbConfig, SizeClass};
use ofan_topology::switch_seed;

use ofan_topology::units::{parse_rate, parse_size};

mod arf;
mod file;
mod flags;
mod plan;
mod reference;

use arf::adaptive_routing;
pub use arf::AdaptiveRouting;
pub use file::{AttachName, FileConfig};
use file::{PortEntry, RoleName};
pub use flags::{BindArg, FastPathArg, Overrides, PollArg};
use plan::Plan;
pub use reference::REFERENCE;

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
    let asn_plan = flags.asn_plan.or(file.bgp.asn_plan);
    if asn_plan.is_some() && topology_path.is_none() {
        return Err(error(
            "bgp.asn_plan",
            "an ASN plan numbers a topology's switches: it needs --topology and --node",
        ));
    }
    let plan = match (&topology_path, &node_name) {
        (Some(path), Some(node)) => Some(Plan::load(path, node, asn_plan.unwrap_or_default())?),
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

    let dragonfly = dragonfly_role(flags, &file, plan.as_ref())?;
    let algorithm = flags
        .algorithm
        .or(file.lb.algorithm)
        .unwrap_or(if dragonfly.is_some() {
            Algorithm::Ecmp
        } else {
            Algorithm::Pofan
        });
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
        dragonfly,
        ring_size,
        forwarding: if flags.bare {
            Forwarding::Bare
        } else {
            Forwarding::Lookup
        },
        // Only a group wires in-process links (`ofan-switch group --splice`) and host links
        // (`--host-links`).
        splices: Vec::new(),
        bypasses: Vec::new(),
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
        .map(|plan| LearnedPaths::from_plan(&plan.topology, plan.node, plan.asns));
    let adaptive_routing = adaptive_routing(
        &file.adaptive_routing,
        algorithm,
        &ports,
        plan.as_ref(),
        flags.arf_combine,
        flags.arf_notify_hosts,
    )?;
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

/// `--dragonfly` / `lb.dragonfly`: the scheme, on a router of a dragonfly plan only.
fn dragonfly_role(
    flags: &Overrides,
    file: &FileConfig,
    plan: Option<&Plan>,
) -> Result<Option<DragonflyRole>, ConfigError> {
    let scheme = match (flags.dragonfly, file.lb.dragonfly.as_deref()) {
        (Some(scheme), _) => scheme,
        (None, Some(name)) => name
            .parse()
            .map_err(|e: UnknownDragonflyScheme| error("lb.dragonfly", e.to_string()))?,
        (None, None) => return Ok(None),
    };
    let Some((shape, router)) = plan.and_then(Plan::dragonfly_router) else {
        return Err(error(
            "lb.dragonfly",
            "needs --topology of a dragonfly (ofan-lab topo --topo dragonfly --out FILE) and \
             --node naming one of its routers",
        ));
    };
    DragonflyRole {
        shape,
        router,
        scheme,
    }
    .check()
    .map(Some)
    .map_err(|e| error("lb.dragonfly", e.to_string()))
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

#[cfg(test)]
mod tests;
