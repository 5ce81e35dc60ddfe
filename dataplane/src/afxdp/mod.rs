//! AF_XDP I/O: the XDP steering program, one UMEM shared by every socket of the switch, one
//! worker per pipe, egress queues with link emulation, telemetry.
//!
//! ```text
//!            ┌──────────── kernel ────────────┐
//!  NIC/veth ─┤ XDP ofan_steer ── XDP_PASS ──► │ stack (ARP, ND, BGP, ICMP to the switch, TTL ≤ 1)
//!            │      │ bpf_redirect_map(XSKS)  │
//!            └──────┼─────────────────────────┘
//!                   ▼ RX ring (frame in the shared UMEM)
//!   worker of the ingress port's pipe: parse → FIB (LPM) → lb choice → TTL/checksum/MACs
//!                   │ same pipe                  │ other pipe
//!                   ▼                            ▼ owner's inbox (lock-free)
//!             egress queue (FIFO, tail drop, ECN, shaper at --link-rate)
//!                   ▼ TX ring of the egress port ──► wire; completion ring ──► free frames
//! ```
//!
//! [`Runtime::start`] sets everything up and spawns the workers; [`Runtime::stop`] stops them,
//! detaches the program and checks that every frame is accounted for.

pub mod awake;
pub mod bench;
mod frames;
pub mod pool;
pub mod redirect;
pub mod steer;
#[allow(unsafe_code)]
mod sys;
mod worker;

use std::io;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_queue::ArrayQueue;
use xdpilone::{IfInfo, Socket, SocketConfig, UmemConfig};

pub use frames::FrameCensus;
pub use steer::{Steering, XdpMode};
pub use sys::{enter_network_namespace, ifindex, monotonic_ns, mtu, release_free_memory};

use crate::egress::{EgressConfig, EgressQueue};
use crate::fib::{PortId, SharedFib};
use crate::forward::{Forwarder, ForwarderConfig};
use crate::lb::{LbConfig, SwitchBalancer};
use crate::telemetry::{RxDrops, SharedFrames, SwitchTelemetry};
use frames::{FrameCache, FramePool};
use sys::{EventFd, UmemArea};
use worker::{OwnedPort, Pace, QueueLoads, QueueRings, Worker};

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

/// The size of the UMEM's frames, which bounds the largest frame a port can receive: copy mode
/// and zero-copy drivers alike keep [`XDP_HEADROOM`] bytes in front of the frame, so a frame
/// of `size` bytes carries at most `size − 256` (an Ethernet header plus an MTU of
/// `size − 270`). The kernel takes 2048 up to a page (4096); larger frames need AF_XDP's
/// multi-buffer mode, which the workers do not speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameSize {
    /// The smallest size that carries the largest MTU among the ports (read when the runtime
    /// starts): 2048 up to MTU 1778, 4096 up to 3826.
    Auto,
    /// This size, 2048 or 4096; a port whose MTU does not fit is refused at start.
    Bytes(u32),
}

/// Bytes the kernel keeps in front of every received frame (`XDP_PACKET_HEADROOM`).
pub const XDP_HEADROOM: u32 = 256;

/// The frame sizes the UMEM can have (see [`FrameSize`]).
pub const FRAME_SIZES: [u32; 2] = [2048, 4096];

impl FrameSize {
    /// The frame size for ports with these `(name, MTU)`s, or why none fits: the configured
    /// size must carry every port's largest frame (MTU + 14-byte Ethernet header), and `Auto`
    /// picks the smallest of [`FRAME_SIZES`] that does.
    ///
    /// # Errors
    /// A message naming the port whose MTU no (or not the configured) frame size carries.
    pub fn resolve<'a>(
        self,
        mtus: impl IntoIterator<Item = (&'a str, u32)>,
    ) -> Result<u32, String> {
        let largest = mtus.into_iter().max_by_key(|&(_, mtu)| mtu);
        let needed = |mtu: u32| mtu + 14 + XDP_HEADROOM;
        let max_mtu = |size: u32| size - 14 - XDP_HEADROOM;
        match (self, largest) {
            (FrameSize::Bytes(size), _) if !FRAME_SIZES.contains(&size) => {
                Err(format!("frame size {size} must be 2048 or 4096"))
            }
            (FrameSize::Bytes(size), Some((port, mtu))) if needed(mtu) > size => Err(format!(
                "port {port} has MTU {mtu}, but {size}-byte UMEM frames carry an MTU of at most {}{}",
                max_mtu(size),
                if needed(mtu) <= 4096 {
                    " (set xdp.frame_size = 4096, or leave it unset to fit the MTU)"
                } else {
                    ""
                }
            )),
            (FrameSize::Bytes(size), _) => Ok(size),
            (FrameSize::Auto, None) => Ok(FRAME_SIZES[0]),
            (FrameSize::Auto, Some((port, mtu))) => FRAME_SIZES
                .into_iter()
                .find(|&size| needed(mtu) <= size)
                .ok_or_else(|| {
                    format!(
                        "port {port} has MTU {mtu}: AF_XDP frames are at most a page (4096 bytes), \
                         which carries an MTU of at most {} (larger needs multi-buffer AF_XDP, \
                         not supported)",
                        max_mtu(4096)
                    )
                }),
        }
    }
}

/// One port of the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// Interface name.
    pub name: String,
    /// Number of RX queues to bind (one socket each).
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
    /// The balancer configuration is invalid.
    #[error(transparent)]
    Lb(#[from] crate::lb::LbError),
    /// A thread could not be spawned.
    #[error("cannot spawn worker {index}: {source}")]
    Spawn {
        /// Worker index.
        index: usize,
        /// Cause.
        source: io::Error,
    },
}

fn errno(error: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(error.get_raw())
}

/// What `stop` found.
#[derive(Debug, Clone, Copy)]
pub struct StopReport {
    /// Frames in the UMEM.
    pub frames: u64,
    /// Where they were after the workers stopped.
    pub census: FrameCensus,
}

impl StopReport {
    /// Whether every frame was accounted for.
    pub fn frames_balanced(&self) -> bool {
        self.census.total() == self.frames
    }
}

/// Which threads run a switch's workers.
#[derive(Debug, Clone, Default)]
pub enum Threads {
    /// A thread of its own per pipe (a switch on its own box, or its own process in a lab).
    #[default]
    Own,
    /// Threads of a pool shared with other switches of the process, starting at thread
    /// `first` (pipe i goes to thread `first + i`): a lab in one process.
    Pool {
        /// The pool.
        pool: Arc<pool::WorkerPool>,
        /// The pool thread of pipe 0.
        first: usize,
    },
}

/// A running worker: its thread, or its place in a pool.
enum WorkerHandle {
    Thread(JoinHandle<worker::WorkerExit>),
    Pooled(std::sync::mpsc::Receiver<worker::WorkerExit>),
}

impl WorkerHandle {
    /// Waits for the worker's exit; `None` if it panicked.
    fn join(self) -> Option<worker::WorkerExit> {
        match self {
            WorkerHandle::Thread(handle) => handle.join().ok(),
            WorkerHandle::Pooled(exit) => exit.recv().ok(),
        }
    }
}

/// A running switch data path.
pub struct Runtime {
    workers: Vec<WorkerHandle>,
    /// Set once a pooled worker is found to have panicked.
    failed: Vec<bool>,
    stop: Arc<AtomicBool>,
    wakers: Arc<[EventFd]>,
    telemetry: Arc<SwitchTelemetry>,
    pool: Arc<FramePool>,
    inboxes: Arc<[Arc<ArrayQueue<worker::Handoff>>]>,
    steering: Option<Steering>,
    balancer: Arc<SwitchBalancer>,
    // Dropped last: the sockets (owned by the workers) must be closed before the UMEM goes.
    _umem: xdpilone::Umem,
    area: Arc<UmemArea>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.workers.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// The UMEM's frame size, as configured or as [`FrameSize::Auto`] chose it.
    pub fn frame_size(&self) -> u32 {
        self.area.frame_size()
    }

    /// Sets up the UMEM, the sockets and the steering program, and starts one worker per pipe.
    ///
    /// # Errors
    /// [`RuntimeError`] naming the step, port and queue that failed.
    pub fn start(config: RuntimeConfig, fib: Arc<SharedFib>) -> Result<Self, RuntimeError> {
        Self::start_on(config, fib, Threads::Own)
    }

    /// [`Runtime::start`], with the workers run by `threads`.
    ///
    /// # Errors
    /// [`RuntimeError`] naming the step, port and queue that failed.
    pub fn start_on(
        config: RuntimeConfig,
        fib: Arc<SharedFib>,
        threads: Threads,
    ) -> Result<Self, RuntimeError> {
        validate(&config)?;
        let frame_size = port_frame_size(&config)?;
        let frames = config.frames_per_port * config.ports.len() as u32;
        let area = UmemArea::new(frames, frame_size).map_err(|source| RuntimeError::Umem {
            frames,
            frame_size,
            source,
        })?;
        let area = Arc::new(area);
        let umem = sys::register_umem(
            &area,
            UmemConfig {
                fill_size: config.ring_size,
                complete_size: config.ring_size,
                frame_size,
                headroom: 0,
                flags: 0,
            },
        )
        .map_err(|e| RuntimeError::Umem {
            frames,
            frame_size,
            source: errno(e),
        })?;

        let mut steering = Steering::load(config.xdp_mode)?;
        let mut port_rings: Vec<Vec<QueueRings>> = Vec::new();
        let mut first = true;
        for (index, port) in config.ports.iter().enumerate() {
            let mut queues = Vec::new();
            for queue in 0..port.queues {
                let rings = open_queue(
                    &umem,
                    port,
                    queue,
                    first,
                    config.bind_mode,
                    config.ring_size,
                )?;
                first = false;
                steering.register_socket(index as u16, queue, rings.rx.as_raw_fd())?;
                queues.push(rings);
            }
            port_rings.push(queues);
        }
        let balancer = SwitchBalancer::new(config.lb.clone())?;
        let worker_count = config.pipes.len();
        let telemetry = Arc::new(SwitchTelemetry::new(
            config.ports.iter().map(|p| p.name.clone()).collect(),
            worker_count,
            crate::telemetry::worker_counter_names(),
        ));
        for (index, port) in config.ports.iter().enumerate() {
            telemetry.init_link_rate(index, port.egress.link_rate_bps);
        }
        let pool = Arc::new(FramePool::new(frames, frame_size));
        let inboxes: Arc<[_]> = (0..worker_count)
            .map(|_| Arc::new(ArrayQueue::new(config.ring_size as usize * 4)))
            .collect();
        {
            let (pool, inboxes) = (Arc::clone(&pool), Arc::clone(&inboxes));
            telemetry.set_umem(
                u64::from(pool.total()),
                SharedFrames(Box::new(move || {
                    let inbox = inboxes.iter().map(|inbox| inbox.len() as u64).sum();
                    (pool.len() as u64, inbox)
                })),
            );
        }
        let wakers: Arc<[EventFd]> = (0..worker_count)
            .map(|_| EventFd::new())
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| RuntimeError::Spawn { index: 0, source })?
            .into();
        let sleeping: Arc<[AtomicBool]> =
            (0..worker_count).map(|_| AtomicBool::new(false)).collect();
        let mut owner_of = vec![(0usize, 0usize); config.ports.len()];
        for (pipe, ports) in config.pipes.iter().enumerate() {
            for (local, port) in ports.iter().enumerate() {
                owner_of[usize::from(port.0)] = (pipe, local);
            }
        }
        let owner_of: Arc<[(usize, usize)]> = owner_of.into();
        let up_ports: Arc<[PortId]> = config.up_ports.clone().into();
        let stop = Arc::new(AtomicBool::new(false));

        let mut rings_by_port: Vec<Option<Vec<QueueRings>>> =
            port_rings.into_iter().map(Some).collect();
        let mut workers = Vec::new();
        for (index, ports) in config.pipes.iter().enumerate() {
            let owned = ports
                .iter()
                .map(|&id| OwnedPort {
                    id,
                    queues: rings_by_port[usize::from(id.0)]
                        .take()
                        .expect("each port in one pipe"),
                    egress: EgressQueue::new(
                        config.ports[usize::from(id.0)].egress,
                        config.ring_size as usize,
                    ),
                    rx_packets: 0,
                    rx_bytes: 0,
                })
                .collect();
            let worker = Worker {
                index,
                ports: owned,
                owner_of: Arc::clone(&owner_of),
                up_ports: Arc::clone(&up_ports),
                forwarder: Forwarder::new(
                    balancer.pipe(index as u16)?,
                    ForwarderConfig {
                        ack_max_frame: config.ack_max_frame,
                        // The kernel delivers at most frame size − 256 bytes per frame.
                        max_frame_len: frame_size - XDP_HEADROOM,
                    },
                ),
                fib: Arc::clone(&fib),
                umem: Arc::clone(&area),
                pool: Arc::clone(&pool),
                cache: FrameCache::new(256),
                inbox: Arc::clone(&inboxes[index]),
                inboxes: Arc::clone(&inboxes),
                wakers: Arc::clone(&wakers),
                sleeping: Arc::clone(&sleeping),
                telemetry: Arc::clone(&telemetry),
                stop: Arc::clone(&stop),
                poll: config.poll,
                fill_target: config.ring_size,
                tx_ring_size: config.ring_size,
                rx_drops: RxDrops::default(),
                counter_scratch: Vec::new(),
                forwarding: config.forwarding,
                queue_loads: QueueLoads::of(config.lb.algorithm),
                pace: Pace::default(),
            };
            if let Threads::Pool { pool, first } = &threads {
                workers.push(WorkerHandle::Pooled(
                    pool.adopt(worker, Some(first + index)),
                ));
                continue;
            }
            let cpu = (!config.cpus.is_empty() && config.poll == PollMode::Busy)
                .then(|| config.cpus[index % config.cpus.len()]);
            let rt_priority = config
                .rt_priority
                .filter(|_| config.poll == PollMode::Wakeup);
            let handle = std::thread::Builder::new()
                .name(format!("ofan-worker-{index}"))
                .spawn(move || {
                    sys::prepare_forwarding_thread(&format!("worker {index}"), cpu, rt_priority);
                    // A worker that panics would leave its ports a silent black hole while the
                    // process lives on: end the process instead, so that it is seen to crash.
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| worker.run())) {
                        Ok(exit) => exit,
                        Err(_) => {
                            tracing::error!(worker = index, "worker panicked: aborting the switch");
                            std::process::abort()
                        }
                    }
                })
                .map_err(|source| RuntimeError::Spawn { index, source })?;
            workers.push(WorkerHandle::Thread(handle));
        }
        // Attach last: the workers have filled their fill rings by the time frames arrive.
        let mut runtime = Self {
            failed: vec![false; workers.len()],
            workers,
            stop,
            wakers,
            telemetry,
            pool,
            inboxes,
            steering: None,
            balancer,
            _umem: umem,
            area,
        };
        std::thread::sleep(std::time::Duration::from_millis(5));
        for (index, port) in config.ports.iter().enumerate() {
            // On error, dropping `runtime` stops the workers and `steering` detaches.
            steering.attach(&port.name, index as u16)?;
        }
        runtime.steering = Some(steering);
        Ok(runtime)
    }

    /// Whether a worker of the switch has died (a pooled worker that panicked; a worker on its
    /// own thread aborts the process instead). The switch should stop.
    pub fn failed(&mut self) -> bool {
        for (handle, failed) in self.workers.iter().zip(&mut self.failed) {
            if let WorkerHandle::Pooled(exit) = handle {
                // A worker sends its exit only once stopped: before that, a disconnection is
                // a panic.
                if matches!(
                    exit.try_recv(),
                    Err(std::sync::mpsc::TryRecvError::Disconnected)
                ) {
                    *failed = true;
                }
            }
        }
        self.failed.iter().any(|&failed| failed)
    }

    /// The published telemetry.
    pub fn telemetry(&self) -> &Arc<SwitchTelemetry> {
        &self.telemetry
    }

    /// The switch's balancer (shared state).
    pub fn balancer(&self) -> &Arc<SwitchBalancer> {
        &self.balancer
    }

    /// Counters of the steering program, by name.
    pub fn steering_counters(&self) -> Vec<(&'static str, u64)> {
        self.steering
            .as_ref()
            .map(Steering::stats)
            .unwrap_or_default()
    }

    /// The steering program, to change its tables (local addresses, dropped ports) while the
    /// switch runs; `None` only while the runtime starts or stops.
    pub fn steering_mut(&mut self) -> Option<&mut Steering> {
        self.steering.as_mut()
    }

    /// Ends the data path as a crash of its process would: the workers stop and the sockets
    /// close, but the XDP program stays attached (as it does when a process is killed), so its
    /// ports drop what arrives until a new switch replaces the program. For `ofan-switch
    /// group`, whose members cannot be killed alone.
    pub fn abandon(mut self) {
        if let Some(steering) = self.steering.take() {
            // The links' destructors would detach the program: a killed process runs none.
            std::mem::forget(steering);
        }
        drop(self);
    }

    /// Stops the workers, detaches the XDP program and counts the frames.
    pub fn stop(mut self) -> StopReport {
        self.stop.store(true, Ordering::SeqCst);
        for waker in self.wakers.iter() {
            waker.notify();
        }
        let mut census = FrameCensus::default();
        for handle in self.workers.drain(..) {
            match handle.join() {
                Some(exit) => census.add(&exit.census),
                None => tracing::error!("a worker panicked"),
            }
        }
        if let Some(mut steering) = self.steering.take() {
            if let Err(error) = steering.detach_all() {
                tracing::error!(%error, "cannot detach the steering program");
            }
        }
        census.inbox = self.inboxes.iter().map(|inbox| inbox.len() as u64).sum();
        census.pool = self.pool.len() as u64;
        StopReport {
            frames: u64::from(self.pool.total()),
            census,
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for waker in self.wakers.iter() {
            waker.notify();
        }
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
        if let Some(mut steering) = self.steering.take() {
            let _ = steering.detach_all();
        }
    }
}

/// The UMEM frame size for `config`'s ports, from their MTUs ([`FrameSize::resolve`]).
fn port_frame_size(config: &RuntimeConfig) -> Result<u32, RuntimeError> {
    let mtus = config
        .ports
        .iter()
        .map(|port| {
            sys::mtu(&port.name)
                .map(|mtu| (port.name.as_str(), mtu))
                .map_err(|e| {
                    RuntimeError::Config(format!("cannot read the MTU of port {}: {e}", port.name))
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    config
        .frame_size
        .resolve(mtus)
        .map_err(RuntimeError::Config)
}

fn validate(config: &RuntimeConfig) -> Result<(), RuntimeError> {
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
    if usize::from(config.lb.pipes) != config.pipes.len() {
        return bad(format!(
            "balancer has {} pipes, runtime {}",
            config.lb.pipes,
            config.pipes.len()
        ));
    }
    Ok(())
}

fn open_queue(
    umem: &xdpilone::Umem,
    port: &PortSpec,
    queue: u32,
    first: bool,
    bind_mode: BindMode,
    ring_size: u32,
) -> Result<QueueRings, RuntimeError> {
    let fail = |step: &'static str| {
        move |error: xdpilone::Errno| RuntimeError::Socket {
            port: port.name.clone(),
            queue,
            step,
            source: errno(error),
        }
    };
    let mut info = IfInfo::invalid();
    let name = std::ffi::CString::new(port.name.as_str()).map_err(|_| RuntimeError::Socket {
        port: port.name.clone(),
        queue,
        step: "interface name",
        source: io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"),
    })?;
    info.from_name(&name).map_err(fail("look up interface"))?;
    info.set_queue(queue);
    let socket = if first {
        Socket::with_shared(&info, umem)
    } else {
        Socket::new(&info)
    }
    .map_err(fail("create socket"))?;
    let device = umem.fq_cq(&socket).map_err(fail("fill/completion rings"))?;
    let ring = NonZeroU32::new(ring_size);
    let bind = |flags: u16| -> Result<xdpilone::User, RuntimeError> {
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: ring,
                    tx_size: ring,
                    bind_flags: flags,
                },
            )
            .map_err(fail("rx/tx rings"))?;
        umem.bind(&user).map_err(fail("bind"))?;
        Ok(user)
    };
    // Sockets sharing the UMEM inherit the first socket's flags and must not repeat them.
    let user = if !first {
        bind(0)?
    } else {
        let copy = SocketConfig::XDP_BIND_COPY | SocketConfig::XDP_BIND_NEED_WAKEUP;
        let zero_copy = SocketConfig::XDP_BIND_ZEROCOPY | SocketConfig::XDP_BIND_NEED_WAKEUP;
        match bind_mode.resolve(&port.name) {
            BindMode::ZeroCopy => bind(zero_copy)?,
            _ => bind(copy)?,
        }
    };
    let rx = user.map_rx().map_err(fail("map rx ring"))?;
    let tx = user.map_tx().map_err(fail("map tx ring"))?;
    Ok(QueueRings {
        queue,
        device,
        rx,
        tx: (queue == 0).then_some(tx),
        _user: user,
        fill_outstanding: 0,
        tx_outstanding: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::FrameSize;

    #[test]
    fn auto_frame_size_is_the_smallest_that_carries_the_largest_mtu() {
        assert_eq!(FrameSize::Auto.resolve([]), Ok(2048));
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 1500), ("p1", 1778)]),
            Ok(2048)
        );
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 1500), ("p1", 1779)]),
            Ok(4096)
        );
        assert_eq!(FrameSize::Auto.resolve([("p0", 3826)]), Ok(4096));
        let error = FrameSize::Auto
            .resolve([("p0", 1500), ("p7", 3827)])
            .unwrap_err();
        assert!(error.contains("port p7 has MTU 3827"), "{error}");
        assert!(error.contains("at most 3826"), "{error}");
    }

    #[test]
    fn a_fixed_frame_size_must_carry_every_port() {
        assert_eq!(FrameSize::Bytes(4096).resolve([("p0", 1500)]), Ok(4096));
        assert_eq!(FrameSize::Bytes(2048).resolve([("p0", 1778)]), Ok(2048));
        let error = FrameSize::Bytes(2048)
            .resolve([("p0", 1500), ("p2", 3000)])
            .unwrap_err();
        assert!(error.contains("port p2 has MTU 3000"), "{error}");
        assert!(error.contains("at most 1778"), "{error}");
        assert!(error.contains("xdp.frame_size = 4096"), "{error}");
        // No configured size fits 9000: the hint to use 4096 would not help.
        let error = FrameSize::Bytes(4096).resolve([("p0", 9000)]).unwrap_err();
        assert!(!error.contains("set xdp.frame_size"), "{error}");
        assert!(FrameSize::Bytes(3000).resolve([("p0", 1500)]).is_err());
    }
}
