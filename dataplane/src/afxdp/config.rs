//! What a switch's data path is asked to run ([`RuntimeConfig`], its ports and modes), how
//! its UMEM frames are sized ([`FrameSize`], [`FrameLayout`]), what can go wrong starting it
//! ([`RuntimeError`]), and the checks made before anything is opened ([`validate`]).

use std::io;

use super::bypass::{BypassError, OpenBypass};
use super::{fast, splice, steer, Buffers, FastPathMode, XdpMode, MAX_QUEUES};
use crate::egress::EgressConfig;
use crate::fib::PortId;
use crate::lb::dragonfly::DragonflyRole;
use crate::lb::LbConfig;

/// How the AF_XDP sockets bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindMode {
    /// Zero-copy when the driver offers it, else copy.
    Auto,
    /// Copy mode (veth only offers this).
    Copy,
    /// Zero-copy or fail.
    ZeroCopy,
}

impl BindMode {
    /// `Auto` becomes zero-copy for interfaces backed by a device (a NIC whose driver may offer
    /// it) and copy for virtual ones (veth refuses zero-copy). A socket's rings cannot be set up
    /// twice, so the choice is made before binding rather than by trying.
    pub fn resolve(self, ifname: &str) -> BindMode {
        match self {
            BindMode::Auto
                if std::path::Path::new("/sys/class/net")
                    .join(ifname)
                    .join("device")
                    .exists() =>
            {
                BindMode::ZeroCopy
            }
            BindMode::Auto => BindMode::Copy,
            mode => mode,
        }
    }
}

/// How workers wait for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PollMode {
    /// Sleep in epoll when idle (an idle switch uses no CPU): for labs.
    Wakeup,
    /// Spin on pinned cores: for line rate.
    Busy,
}

/// What the workers do with a received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarding {
    /// Parse, look up, balance and rewrite ([`Forwarder`]): the switch.
    Lookup,
    /// Port to port, for benchmarks: frames from port 2i leave on port 2i+1 and back, with no
    /// parsing, lookup, balancing or rewrite (the egress queue still applies).
    Bare,
}

/// The size of the UMEM's frames. Copy mode and zero-copy drivers alike keep
/// [`XDP_HEADROOM`] bytes in front of every received buffer, so a frame of `size` bytes carries
/// `size − 256` bytes of a packet; a larger packet spans several frames (AF_XDP multi-buffer,
/// up to [`MAX_FRAMES_PER_PACKET`]). The kernel takes 2048 up to a page (4096).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// The smallest size whose single frame carries the largest MTU among the ports (read when
    /// the runtime starts): 2048 up to MTU 1778, 4096 up to 3826, and 4096 frames chained for
    /// larger (jumbo) MTUs.
    Auto,
    /// This size, 2048 or 4096; packets above `size − 256` bytes span several frames.
    Bytes(u32),
}

/// Bytes the kernel keeps in front of every received frame (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;

/// The frame sizes the UMEM can have (see [`FrameSize`]).
pub const FRAME_SIZES: [u32; 2] = [2048, 4096];

/// The most UMEM frames one packet may span: three 4096-byte frames carry an MTU of 11 506,
/// beyond the 9 216 of jumbo Ethernet.
pub const MAX_FRAMES_PER_PACKET: u32 = 3;

/// The largest MTU whose frames a driver receives into one page: 4096 − 256 bytes of headroom
/// − 320 of `skb_shared_info` − 14 of Ethernet header. Above it packets arrive in several
/// buffers, which only a multi-buffer (`xdp.frags`) program may receive: veth refuses to attach
/// a plain one when either end's MTU is larger.
pub const SINGLE_BUFFER_MAX_MTU: u32 = 3506;

/// How the ports' packets lie in the UMEM: what [`FrameSize::resolve`] chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameLayout {
    /// UMEM frame size in bytes.
    pub frame_size: u32,
    /// The most frames one packet of the largest MTU spans (1 without multi-buffer).
    pub frames_per_packet: u32,
    /// Whether packets may come in several buffers: then the steering program is
    /// `ofan_steer_sg` and the sockets are bound with `XDP_USE_SG`.
    pub buffers: Buffers,
}

impl FrameLayout {
    /// The longest frame (Ethernet header included) a packet of this layout carries.
    pub fn max_frame_len(&self) -> u32 {
        self.frames_per_packet * (self.frame_size - XDP_HEADROOM)
    }
}

impl FrameSize {
    /// The layout for ports with these `(name, MTU)`s, or why none fits: frames of the
    /// configured size (or, for `Auto`, the smallest of [`FRAME_SIZES`] that carries the
    /// largest frame — MTU + 14 — in one, else 4096), chained up to
    /// [`MAX_FRAMES_PER_PACKET`] per packet.
    ///
    /// # Errors
    /// A message naming the port whose MTU needs more frames per packet than allowed.
    pub fn resolve<'a>(
        self,
        mtus: impl IntoIterator<Item = (&'a str, u32)>,
    ) -> Result<FrameLayout, String> {
        let largest = mtus.into_iter().max_by_key(|&(_, mtu)| mtu);
        let frames = |mtu: u32, size: u32| (mtu + 14).div_ceil(size - XDP_HEADROOM);
        let max_mtu = |size: u32| MAX_FRAMES_PER_PACKET * (size - XDP_HEADROOM) - 14;
        let size = match (self, largest) {
            (FrameSize::Bytes(size), _) if !FRAME_SIZES.contains(&size) => {
                return Err(format!("frame size {size} must be 2048 or 4096"))
            }
            (FrameSize::Bytes(size), _) => size,
            (FrameSize::Auto, None) => FRAME_SIZES[0],
            (FrameSize::Auto, Some((_, mtu))) => FRAME_SIZES
                .into_iter()
                .find(|&size| frames(mtu, size) == 1)
                .unwrap_or(FRAME_SIZES[1]),
        };
        let Some((port, mtu)) = largest else {
            return Ok(FrameLayout {
                frame_size: size,
                frames_per_packet: 1,
                buffers: Buffers::Single,
            });
        };
        let frames_per_packet = frames(mtu, size);
        if frames_per_packet > MAX_FRAMES_PER_PACKET {
            return Err(format!(
                "port {port} has MTU {mtu}, but a packet spans at most {MAX_FRAMES_PER_PACKET} \
                 {size}-byte UMEM frames, which carry an MTU of at most {}{}",
                max_mtu(size),
                if size < FRAME_SIZES[1] && mtu <= max_mtu(FRAME_SIZES[1]) {
                    " (set xdp.frame_size = 4096, or leave it unset to fit the MTU)"
                } else {
                    ""
                }
            ));
        }
        Ok(FrameLayout {
            frame_size: size,
            frames_per_packet,
            buffers: if frames_per_packet > 1 || mtu > SINGLE_BUFFER_MAX_MTU {
                Buffers::Multi
            } else {
                Buffers::Single
            },
        })
    }
}

/// One port of the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// Interface name.
    pub name: String,
    /// Queues to serve (one socket each, receiving on the RX queue and sending on the TX queue
    /// of that number; one worker per pipe and queue). Every port of a switch has the same.
    pub queues: u32,
    /// Egress queue and link emulation settings.
    pub egress: EgressConfig,
}

/// Everything the runtime needs.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Ports, in `PortId` order (the FIB uses the same ids).
    pub ports: Vec<PortSpec>,
    /// Ports of each pipe; every port in exactly one pipe.
    pub pipes: Vec<Vec<PortId>>,
    /// Up-port position → port (what `PortMask` bits mean), for queue-aware balancing.
    pub up_ports: Vec<PortId>,
    /// Load balancer (its `pipes` must equal `pipes.len()`).
    pub lb: LbConfig,
    /// Frames up to this length are ACKs.
    pub ack_max_frame: u32,
    /// XDP attach mode.
    pub xdp_mode: XdpMode,
    /// Socket bind mode.
    pub bind_mode: BindMode,
    /// Worker wait mode.
    pub poll: PollMode,
    /// CPUs to pin workers to in busy mode (worker i → `cpus[i % len]`); empty = no pinning.
    pub cpus: Vec<usize>,
    /// Run the workers SCHED_FIFO at this priority (1..=99) so that a wake-up preempts
    /// ordinary tasks at once — the fidelity of an emulated link on a crowded machine. Only
    /// with `PollMode::Wakeup` (a spinning real-time worker would starve its CPU). `None`:
    /// ordinary scheduling.
    pub rt_priority: Option<u8>,
    /// UMEM frame size: fixed, or the smallest that carries every port's MTU.
    pub frame_size: FrameSize,
    /// UMEM frames per port.
    pub frames_per_port: u32,
    /// Ring sizes (fill, completion, RX, TX), a power of two.
    pub ring_size: u32,
    /// Forward by lookup, or bare port to port (benchmarks; the ports must pair up).
    pub forwarding: Forwarding,
    /// In-process links, by port (`ports` order; empty: none): for a port whose link leads to
    /// another switch of the process, the slots of its two ends ([`splice`]).
    pub splices: Vec<Option<splice::SplicePort>>,
    /// Bypasses, by port (`ports` order; empty: none): for a port with a second way in and
    /// out beside its socket (a shared-memory link to a host's agent, in a lab), what opens it
    /// ([`super::bypass`]).
    pub bypasses: Vec<Option<std::sync::Arc<dyn OpenBypass>>>,
    /// Whether the XDP program forwards what it can itself ([`fast`]).
    pub fast_path: FastPathMode,
    /// On a dragonfly router: its place and scheme; every worker runs the routing stage
    /// ([`crate::lb::dragonfly::DragonflyRouter`]) before its route lookups.
    pub dragonfly: Option<DragonflyRole>,
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// Bad configuration.
    #[error("invalid runtime configuration: {0}")]
    Config(String),
    /// The UMEM could not be mapped or registered.
    #[error("cannot set up the UMEM ({frames} frames of {frame_size} B): {source}")]
    Umem {
        /// Frames asked for.
        frames: u32,
        /// Frame size.
        frame_size: u32,
        /// Cause.
        source: io::Error,
    },
    /// A socket could not be created or bound.
    #[error("cannot open the AF_XDP socket of {port} queue {queue} ({step}): {source}")]
    Socket {
        /// Interface.
        port: String,
        /// Queue.
        queue: u32,
        /// What failed.
        step: &'static str,
        /// Cause.
        source: io::Error,
    },
    /// The steering program failed.
    #[error(transparent)]
    Steer(#[from] steer::SteerError),
    /// A port's bypass could not be opened.
    #[error(transparent)]
    Bypass(BypassError),
    /// The balancer configuration is invalid.
    #[error(transparent)]
    Lb(#[from] crate::lb::LbError),
    /// The XDP fast path could not be set up.
    #[error(transparent)]
    FastPath(#[from] fast::FastPathError),
    /// A thread could not be spawned.
    #[error("cannot spawn worker {index}: {source}")]
    Spawn {
        /// Worker index.
        index: usize,
        /// Cause.
        source: io::Error,
    },
}

pub(super) fn validate(config: &RuntimeConfig) -> Result<(), RuntimeError> {
    let bad = |message: String| Err(RuntimeError::Config(message));
    if config.ports.is_empty() {
        return bad("no ports".into());
    }
    if !config.ring_size.is_power_of_two() || config.ring_size < 64 {
        return bad(format!(
            "ring size {} must be a power of two ≥ 64",
            config.ring_size
        ));
    }
    if config.frames_per_port < 2 * config.ring_size {
        return bad(format!(
            "{} frames per port cannot keep a ring of {} filled (need at least twice the ring)",
            config.frames_per_port, config.ring_size
        ));
    }
    if config.forwarding == Forwarding::Bare && config.ports.len() % 2 != 0 {
        return bad(format!(
            "bare mode pairs ports (0↔1, 2↔3…) but there are {}",
            config.ports.len()
        ));
    }
    let mut seen = vec![false; config.ports.len()];
    for port in config.pipes.iter().flatten() {
        match seen.get_mut(usize::from(port.0)) {
            Some(slot) if !*slot => *slot = true,
            Some(_) => return bad(format!("port {} is in two pipes", port.0)),
            None => {
                return bad(format!(
                    "pipe names port {} but there are {}",
                    port.0,
                    config.ports.len()
                ))
            }
        }
    }
    if let Some(missing) = seen.iter().position(|s| !s) {
        return bad(format!(
            "port {} ({}) is in no pipe",
            missing, config.ports[missing].name
        ));
    }
    let queues = queues_per_port(config);
    if let Some(port) = config.ports.iter().find(|p| p.queues != queues) {
        return bad(format!(
            "port {} has {} queues, port {} {}: every port of a switch has the same number \
             (each worker serves one queue of the ports of its pipe)",
            port.name, port.queues, config.ports[0].name, queues
        ));
    }
    if queues == 0 || queues > MAX_QUEUES {
        return bad(format!("{queues} queues per port: 1 to {MAX_QUEUES}"));
    }
    if queues > 1 {
        if let Some(port) = config.ports.iter().find(|p| p.egress.link_rate_bps > 0) {
            return bad(format!(
                "port {} emulates a link, which needs one transmit queue per port: with {queues} \
                 queues each worker transmits on its own queue of the port, and the interface's \
                 own rate applies (use a link rate of 0, or one queue)",
                port.name
            ));
        }
        if config.splices.iter().any(Option::is_some) || config.bypasses.iter().any(Option::is_some)
        {
            return bad(format!(
                "in-process links and host links (bypasses) take one queue per port, not {queues}"
            ));
        }
    }
    if config.frames_per_port < 2 * config.ring_size * queues {
        return bad(format!(
            "{} frames per port cannot keep {queues} rings of {} filled (need at least twice the \
             ring per queue)",
            config.frames_per_port, config.ring_size
        ));
    }
    let workers = config.pipes.len() * queues as usize;
    if usize::from(config.lb.pipes) != workers {
        return bad(format!(
            "balancer has {} pipes, runtime {} ({} pipes of ports × {queues} queues: a worker \
             per pipe and queue, each its own balancing pipe)",
            config.lb.pipes,
            workers,
            config.pipes.len()
        ));
    }
    if config.fast_path == FastPathMode::Xdp {
        validate_fast_path(config)?;
    }
    if let Some(role) = config.dragonfly {
        validate_dragonfly(config, role)?;
    }
    Ok(())
}

/// A dragonfly router's ports must be the fabric's: the router's radix, its router ports
/// (`p..k`) the up ports in order — the routing stage reads their queues by up position.
fn validate_dragonfly(config: &RuntimeConfig, role: DragonflyRole) -> Result<(), RuntimeError> {
    let bad = |message: String| Err(RuntimeError::Config(format!("dragonfly: {message}")));
    if let Err(error) = role.check() {
        return bad(error.to_string());
    }
    let (p, radix) = (role.shape.p(), role.shape.radix());
    if config.ports.len() != usize::from(radix) {
        return bad(format!(
            "router {} of a {} has {} ports, not {}",
            role.router.0,
            role.shape,
            radix,
            config.ports.len()
        ));
    }
    let expected: Vec<PortId> = (p..radix).map(PortId).collect();
    if config.up_ports != expected {
        return bad(format!(
            "the up ports must be the router ports {p}..{radix} in order, not {:?}",
            config.up_ports
        ));
    }
    if config.fast_path != FastPathMode::Off {
        return bad(
            "the XDP fast path does not run the dragonfly routing stage; use --fast-path off"
                .into(),
        );
    }
    Ok(())
}

/// Queues per port (every port has the same; checked by [`validate`]).
pub(super) fn queues_per_port(config: &RuntimeConfig) -> u32 {
    config.ports.first().map_or(1, |port| port.queues)
}

/// What the XDP fast path cannot do, refused before anything is set up.
fn validate_fast_path(config: &RuntimeConfig) -> Result<(), RuntimeError> {
    let bad = |message: String| Err(RuntimeError::Config(format!("--fast-path xdp: {message}")));
    if let Some(port) = config.ports.iter().find(|p| p.egress.link_rate_bps > 0) {
        return bad(format!(
            "port {} emulates a link (link rate {} bit/s), but the fast path has no shaper — \
             frames it forwards leave at the interface's own rate; use --link-rate 0, or \
             --fast-path off to emulate links",
            port.name, port.egress.link_rate_bps
        ));
    }
    if config.forwarding == Forwarding::Bare {
        return bad("bare mode forwards port to port in user space; drop --bare".into());
    }
    if config.splices.iter().any(Option::is_some) || config.bypasses.iter().any(Option::is_some) {
        return bad(
            "in-process links (--splice) and host links (bypasses) bypass the XDP program; a \
             fast-path fabric forwards over its veths"
                .into(),
        );
    }
    if let Err(reason) = fast::supported(config.lb.algorithm) {
        return bad(reason);
    }
    Ok(())
}
