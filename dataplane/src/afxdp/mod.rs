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

pub mod bench;
pub mod bypass;
mod config;
mod departures;
pub mod fast;
mod frames;
mod inbox;
pub mod pool;
mod queue;
pub mod redirect;
pub mod splice;
pub mod steer;
#[allow(unsafe_code)]
mod sys;
mod worker;

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use xdpilone::UmemConfig;

use config::{queues_per_port, validate};
pub use config::{
    BindMode, Forwarding, FrameLayout, FrameSize, PollMode, PortSpec, RuntimeConfig, RuntimeError,
    FRAME_SIZES, MAX_FRAMES_PER_PACKET, SINGLE_BUFFER_MAX_MTU, XDP_HEADROOM,
};
pub use fast::FastPathMode;
pub use frames::FrameCensus;
/// The most RX queues per port that can have an AF_XDP socket (the XSKMAP's slots per port).
pub use ofan_ebpf_common::MAX_QUEUES;
pub use steer::{Buffers, Steering, XdpMode};
pub use sys::{
    enter_network_namespace, ifindex, monotonic_ns, mtu, pin_to_cpu, release_free_memory, Epoll,
    EventFd,
};

use crate::egress::EgressQueue;
use crate::fib::{PortId, SharedFib};
use crate::forward::{Forwarder, ForwarderConfig};
use crate::lb::dragonfly::{DragonflyRole, DragonflyRouter};
use crate::lb::SwitchBalancer;
use crate::telemetry::{SharedFrames, SwitchTelemetry};
use frames::FramePool;
use inbox::Inboxes;
use queue::open_queue;
use sys::UmemArea;
use worker::{OwnedPort, QueueLoads, QueueRings, Worker, WorkerShared};

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
    /// The slots where this switch's receiving ends of in-process links are published.
    splices: Vec<Arc<splice::SpliceSlot>>,
    /// Per port: whether it is blackholed, for the senders of a splice to it (the steering
    /// program's own flag is a map a sender could read only with a system call).
    blackholed: Vec<Arc<AtomicBool>>,
    /// Set once a pooled worker is found to have panicked.
    failed: Vec<bool>,
    stop: Arc<AtomicBool>,
    wakers: Arc<[EventFd]>,
    telemetry: Arc<SwitchTelemetry>,
    pool: Arc<FramePool>,
    inboxes: Arc<Inboxes>,
    steering: Option<Steering>,
    /// The XDP fast path's tables, when it is on (the FIB mirror publishes into them).
    fast_path: Option<fast::SharedFastPath>,
    balancer: Arc<SwitchBalancer>,
    layout: FrameLayout,
    // Dropped last: the sockets (owned by the workers) must be closed before the UMEM goes.
    _umem: sys::HeldUmem,
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

    /// How packets lie in the UMEM: frame size, frames per packet, single or multi-buffer.
    pub fn layout(&self) -> FrameLayout {
        self.layout
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
        let layout = port_frame_layout(&config)?;
        let frame_size = layout.frame_size;
        let queues = queues_per_port(&config);
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

        let (mut steering, mut fast_path) = match config.fast_path {
            FastPathMode::Off => (Steering::load_for(config.xdp_mode, layout.buffers)?, None),
            FastPathMode::Xdp => {
                if layout.buffers == Buffers::Multi {
                    return Err(RuntimeError::Config(format!(
                        "--fast-path xdp: frames of up to {} bytes span several buffers, which the \
                         fast path does not forward; use an MTU of at most {SINGLE_BUFFER_MAX_MTU}",
                        layout.max_frame_len()
                    )));
                }
                let (steering, fast) = Steering::load_fast(config.xdp_mode)?;
                (steering, Some(fast))
            }
        };
        // One socket per (port, queue): `rings[queue][port]`.
        let mut rings: Vec<Vec<Option<QueueRings>>> = Vec::new();
        let mut first = true;
        for queue in 0..queues {
            let mut of_queue = Vec::new();
            for (index, port) in config.ports.iter().enumerate() {
                let socket = open_queue(
                    &umem,
                    port,
                    queue,
                    first,
                    config.bind_mode,
                    layout.buffers,
                    config.ring_size,
                )?;
                first = false;
                steering.register_socket(index as u16, queue, socket.rx.as_raw_fd())?;
                of_queue.push(Some(socket));
            }
            rings.push(of_queue);
        }
        let balancer = SwitchBalancer::new(config.lb.clone())?;
        if let Some(fast) = &mut fast_path {
            let ifindexes = config
                .ports
                .iter()
                .map(|port| {
                    sys::ifindex(&port.name).map_err(|source| RuntimeError::Socket {
                        port: port.name.clone(),
                        queue: 0,
                        step: "look up interface",
                        source,
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            fast.init(
                &balancer,
                config.ack_max_frame,
                layout.max_frame_len(),
                &ifindexes,
            )?;
            fast.publish(&fib.load())?;
        }
        let fast_path = fast_path.map(|fast| Arc::new(std::sync::Mutex::new(fast)));
        // Worker `pipe · queues + queue` serves queue `queue` of the ports of pipe `pipe`.
        let worker_count = config.pipes.len() * queues as usize;
        let telemetry = Arc::new(SwitchTelemetry::new(
            config.ports.iter().map(|p| p.name.clone()).collect(),
            queues as usize,
            worker_count,
            crate::telemetry::worker_counter_names(),
        ));
        for (index, port) in config.ports.iter().enumerate() {
            telemetry.init_link_rate(index, port.egress.link_rate_bps);
        }
        let pool = Arc::new(FramePool::new(frames, frame_size));
        let inboxes = Arc::new(Inboxes::new(worker_count, config.ring_size as usize * 4));
        {
            let (pool, inboxes) = (Arc::clone(&pool), Arc::clone(&inboxes));
            telemetry.set_umem(
                u64::from(pool.total()),
                SharedFrames(Box::new(move || (pool.len() as u64, inboxes.frames()))),
            );
        }
        let wakers: Arc<[EventFd]> = (0..worker_count)
            .map(|_| EventFd::new())
            .collect::<io::Result<Vec<_>>>()
            .map_err(|source| RuntimeError::Spawn { index: 0, source })?
            .into();
        let sleeping: Arc<[AtomicBool]> =
            (0..worker_count).map(|_| AtomicBool::new(false)).collect();
        // For each queue, every port's owner on that queue: a frame a worker forwards leaves on
        // its own queue of the egress port, through the worker that owns that queue of it.
        let owners: Vec<Arc<[(usize, usize)]>> = (0..queues as usize)
            .map(|queue| {
                let mut owner_of = vec![(0usize, 0usize); config.ports.len()];
                for (pipe, ports) in config.pipes.iter().enumerate() {
                    for (local, port) in ports.iter().enumerate() {
                        owner_of[usize::from(port.0)] = (pipe * queues as usize + queue, local);
                    }
                }
                owner_of.into()
            })
            .collect();
        let up_ports: Arc<[PortId]> = config.up_ports.clone().into();
        let stop = Arc::new(AtomicBool::new(false));

        let mut bypasses = open_bypasses(&config, &fib, &layout)?;
        let mut workers = Vec::new();
        let shared = WorkerShared {
            up_ports,
            fib: Arc::clone(&fib),
            umem: Arc::clone(&area),
            pool: Arc::clone(&pool),
            buffers: layout.buffers,
            inboxes: Arc::clone(&inboxes),
            wakers: Arc::clone(&wakers),
            sleeping: Arc::clone(&sleeping),
            telemetry: Arc::clone(&telemetry),
            stop: Arc::clone(&stop),
            poll: config.poll,
            ring_size: config.ring_size,
            forwarding: config.forwarding,
            queue_loads: if config.dragonfly.is_some_and(DragonflyRole::uses_queues) {
                QueueLoads::Read
            } else {
                QueueLoads::of(config.lb.algorithm)
            },
        };
        let served = config
            .pipes
            .iter()
            .enumerate()
            .flat_map(|(pipe, ports)| (0..queues).map(move |queue| (pipe, ports, queue)));
        for (index, (_, ports, queue)) in served.enumerate() {
            let owned = ports
                .iter()
                .map(|&id| OwnedPort {
                    id,
                    queues: vec![rings[queue as usize][usize::from(id.0)]
                        .take()
                        .expect("each port in one pipe")],
                    egress: EgressQueue::new(
                        config.ports[usize::from(id.0)].egress,
                        config.ring_size as usize,
                    ),
                    egress_frames: 0,
                    tx_rest: Vec::with_capacity(MAX_FRAMES_PER_PACKET as usize),
                    rx_packets: 0,
                    rx_bytes: 0,
                    rx_spliced: 0,
                    splice: config
                        .splices
                        .get(usize::from(id.0))
                        .and_then(Option::as_ref)
                        .map(|splice| Arc::clone(&splice.peer)),
                    bypass: bypasses[usize::from(id.0)].take(),
                    rx_bypass: 0,
                    drops_bypass: 0,
                })
                .collect();
            let mut forwarder = Forwarder::new(
                balancer.pipe(index as u16)?,
                ForwarderConfig {
                    ack_max_frame: config.ack_max_frame,
                    // The kernel delivers at most frame size − 256 bytes per frame.
                    max_frame_len: layout.max_frame_len(),
                },
            );
            if let Some(role) = config.dragonfly {
                // Each worker its own rotation pointers and draws, as each pipe its balancer.
                let seed = ofan_topology::mix64(config.lb.seed ^ (index as u64 + 1));
                let router = DragonflyRouter::new(role, seed)
                    .map_err(|error| RuntimeError::Config(format!("dragonfly: {error}")))?;
                forwarder = forwarder.on_dragonfly(router);
            }
            let worker = Worker::new(
                index,
                queue,
                owned,
                Arc::clone(&owners[queue as usize]),
                forwarder,
                &shared,
            );
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
        // The ports' receiving ends, for the peers of in-process links.
        let mut splices = Vec::new();
        let mut blackholed = Vec::new();
        for (index, splice) in config.splices.iter().enumerate() {
            let flag = Arc::new(AtomicBool::new(false));
            if let Some(splice) = splice {
                let port = PortId(index as u16);
                splice.own.open(splice::SpliceEnd {
                    port,
                    owner: owners[0][index].0,
                    inboxes: Arc::clone(&inboxes),
                    wakers: Arc::clone(&wakers),
                    sleeping: Arc::clone(&sleeping),
                    pool: Arc::clone(&pool),
                    umem: Arc::clone(&area),
                    fib: Arc::clone(&fib),
                    telemetry: Arc::clone(&telemetry),
                    blackholed: Arc::clone(&flag),
                });
                splices.push(Arc::clone(&splice.own));
            }
            blackholed.push(flag);
        }
        // Attach last: the workers have filled their fill rings by the time frames arrive.
        let mut runtime = Self {
            splices,
            blackholed,
            failed: vec![false; workers.len()],
            workers,
            stop,
            wakers,
            telemetry,
            pool,
            inboxes,
            steering: None,
            fast_path,
            balancer,
            layout,
            _umem: sys::HeldUmem(umem),
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

    /// Counters of the steering program, by name: its decisions, and with the fast path on,
    /// why frames were left to the AF_XDP path (`fast_miss_<reason>`). Frames the fast path
    /// forwarded also count in their ports' telemetry (see [`Self::publish_fast_counters`]).
    pub fn steering_counters(&self) -> Vec<(String, u64)> {
        let mut counters: Vec<(String, u64)> = self
            .steering
            .as_ref()
            .map(Steering::stats)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect();
        if let Some(fast) = self.fast_counters() {
            counters.extend(
                fast.misses
                    .iter()
                    .map(|(name, value)| (format!("fast_miss_{name}"), *value)),
            );
        }
        counters
    }

    /// The XDP fast path's tables, to publish every new forwarding table into (the switch hands
    /// it to its FIB mirror); `None` when the fast path is off.
    pub fn fast_path(&self) -> Option<fast::SharedFastPath> {
        self.fast_path.clone()
    }

    fn fast_counters(&self) -> Option<fast::FastCounters> {
        let fast = self.fast_path.as_ref()?.lock().ok()?;
        match fast.counters() {
            Ok(counters) => Some(counters),
            Err(error) => {
                tracing::warn!(%error, "cannot read the fast path's counters");
                None
            }
        }
    }

    /// Copies the frames the fast path forwarded, by port, into the ports' telemetry
    /// (`fast_rx_packets`, `fast_tx_packets`; `rx_packets` and `tx_packets` include them). The
    /// switch calls it with the steering counters, every 100 ms.
    pub fn publish_fast_counters(&self) {
        let Some(fast) = self.fast_counters() else {
            return;
        };
        for (port, (rx, tx)) in fast.rx.iter().zip(&fast.tx).enumerate() {
            self.telemetry.port(port).publish_fast(*rx, *tx);
        }
    }

    /// The steering program, to change its tables (local addresses, dropped ports) while the
    /// switch runs; `None` only while the runtime starts or stops.
    pub fn steering_mut(&mut self) -> Option<&mut Steering> {
        self.steering.as_mut()
    }

    /// Ends the data path as a crash of its process would: the workers stop and the sockets
    /// close, but the XDP program stays attached with every port set to drop, so the switch is
    /// the black hole a crashed box is until a new switch replaces the program. For
    /// `ofan-switch group`, whose members cannot be killed alone.
    ///
    /// The drop flags are what makes it a black hole: a program left as it was finds no socket
    /// for a data frame and passes it to the kernel, and a lab's switch namespace (IPv4
    /// forwarding on, for ICMP errors) forwards it along the kernel's routes.
    pub fn abandon(mut self) {
        self.close_splices();
        if let Some(mut steering) = self.steering.take() {
            let ports: Vec<u16> = steering.attached().map(|(_, port)| port).collect();
            for port in ports {
                if let Err(error) = steering.set_port_drop(port, true) {
                    tracing::warn!(port, %error, "abandoned port keeps passing frames to the kernel");
                }
            }
            // The links' destructors would detach the program: a killed process runs none.
            std::mem::forget(steering);
        }
        drop(self);
    }

    /// Makes port `port` drop every frame it receives (`on`), or stop doing so: in the steering
    /// program, and for the senders of an in-process link to it.
    ///
    /// # Errors
    /// The steering program's map update; no program (the runtime is being stopped).
    pub fn set_blackhole(&mut self, port: u16, on: bool) -> Result<(), steer::SteerError> {
        if let Some(flag) = self.blackholed.get(usize::from(port)) {
            flag.store(on, Ordering::SeqCst);
        }
        match self.steering.as_mut() {
            Some(steering) => steering.set_port_drop(port, on),
            None => Ok(()),
        }
    }

    /// Withdraws this switch's receiving ends: its peers send over the veths again, and
    /// nothing enters its inboxes from them once this returns.
    fn close_splices(&mut self) {
        for slot in self.splices.drain(..) {
            slot.close();
        }
    }

    /// Stops the workers, detaches the XDP program and counts the frames.
    pub fn stop(mut self) -> StopReport {
        self.close_splices();
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
        census.inbox = self.inboxes.frames();
        census.pool = self.pool.len() as u64;
        StopReport {
            frames: u64::from(self.pool.total()),
            census,
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.close_splices();
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

/// The UMEM layout for `config`'s ports, from their MTUs ([`FrameSize::resolve`]).
fn port_frame_layout(config: &RuntimeConfig) -> Result<FrameLayout, RuntimeError> {
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

/// The bypasses of `config`'s ports, opened, by port.
fn open_bypasses(
    config: &RuntimeConfig,
    fib: &SharedFib,
    layout: &FrameLayout,
) -> Result<Vec<Option<Box<dyn bypass::Bypass>>>, RuntimeError> {
    let mut bypasses: Vec<Option<Box<dyn bypass::Bypass>>> =
        (0..config.ports.len()).map(|_| None).collect();
    let fib = fib.load();
    for (index, opener) in config.bypasses.iter().enumerate() {
        let Some(opener) = opener else {
            continue;
        };
        let port = &config.ports[index];
        if layout.buffers == Buffers::Multi {
            return Err(RuntimeError::Config(format!(
                "port {}: a bypass (host link) carries single-frame packets only (its MTU \
                 needs several)",
                port.name
            )));
        }
        let mac = fib
            .port(PortId(index as u16))
            .map(|fib_port| fib_port.mac)
            .ok_or_else(|| {
                RuntimeError::Config(format!(
                    "port {}: not in the forwarding table, so its bypass (host link) has no MAC",
                    port.name
                ))
            })?;
        let port = bypass::BypassPort {
            name: &port.name,
            mac,
            frame_size: layout.frame_size,
        };
        bypasses[index] = Some(opener.open(&port).map_err(RuntimeError::Bypass)?);
    }
    Ok(bypasses)
}

/// The longest an idle thread of the data path sleeps — a worker of its own, a pool thread
/// with nothing due (and, in `ofan-switch group`, its keep-awake thread with nothing flowing).
/// Whatever needs it sooner wakes it: a stop request or a hand-off (its eventfd), a frame (its
/// sockets), a shaper deadline (its timerfd). This period bounds how late an idle worker
/// applies a telemetry reset and publishes the depth of a frame whose slot has ended
/// (`Worker::run`); the lab's runner counts on it (`RESET_SETTLE`, `SETTLE_AFTER` in
/// `netns-lab`'s `experiment::runner`).
pub const IDLE_WAKE_MS: i32 = 100;

#[cfg(test)]
mod tests {
    use super::{Buffers, FrameLayout, FrameSize};

    fn layout(frame_size: u32, frames_per_packet: u32, buffers: Buffers) -> FrameLayout {
        FrameLayout {
            frame_size,
            frames_per_packet,
            buffers,
        }
    }

    #[test]
    fn auto_frame_size_is_the_smallest_that_carries_the_largest_mtu() {
        let one = |size| Ok(layout(size, 1, Buffers::Single));
        assert_eq!(FrameSize::Auto.resolve([]), one(2048));
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 1500), ("p1", 1778)]),
            one(2048)
        );
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 1500), ("p1", 1779)]),
            one(4096)
        );
        assert_eq!(FrameSize::Auto.resolve([("p0", 3506)]), one(4096));
        // One frame still, but a driver receives it in two buffers: multi-buffer program.
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 3507)]),
            Ok(layout(4096, 1, Buffers::Multi))
        );
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 3826)]),
            Ok(layout(4096, 1, Buffers::Multi))
        );
    }

    #[test]
    fn jumbo_mtus_chain_up_to_three_frames() {
        let multi = |size, frames| Ok(layout(size, frames, Buffers::Multi));
        assert_eq!(FrameSize::Auto.resolve([("p0", 3827)]), multi(4096, 2));
        assert_eq!(
            FrameSize::Auto.resolve([("p0", 1500), ("p1", 9000)]),
            multi(4096, 3)
        );
        assert_eq!(FrameSize::Auto.resolve([("p0", 11506)]), multi(4096, 3));
        assert_eq!(layout(4096, 3, Buffers::Multi).max_frame_len(), 11520);
        let error = FrameSize::Auto
            .resolve([("p0", 1500), ("p7", 11507)])
            .unwrap_err();
        assert!(error.contains("port p7 has MTU 11507"), "{error}");
        assert!(error.contains("at most 11506"), "{error}");
        assert!(!error.contains("set xdp.frame_size"), "{error}");
    }

    #[test]
    fn a_fixed_frame_size_chains_frames_within_the_limit() {
        assert_eq!(
            FrameSize::Bytes(4096).resolve([("p0", 1500)]),
            Ok(layout(4096, 1, Buffers::Single))
        );
        assert_eq!(
            FrameSize::Bytes(2048).resolve([("p0", 1778)]),
            Ok(layout(2048, 1, Buffers::Single))
        );
        // 3000 + 14 bytes in 1792-byte pieces: two frames.
        assert_eq!(
            FrameSize::Bytes(2048).resolve([("p0", 1500), ("p2", 3000)]),
            Ok(layout(2048, 2, Buffers::Multi))
        );
        let error = FrameSize::Bytes(2048)
            .resolve([("p0", 1500), ("p2", 9000)])
            .unwrap_err();
        assert!(error.contains("port p2 has MTU 9000"), "{error}");
        assert!(error.contains("at most 5362"), "{error}");
        assert!(error.contains("xdp.frame_size = 4096"), "{error}");
        assert!(FrameSize::Bytes(3000).resolve([("p0", 1500)]).is_err());
    }
}
