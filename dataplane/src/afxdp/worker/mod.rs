//! A worker: receives on its (port, queue) pairs, decides, queues, transmits.
//!
//! One worker runs each pipe and queue: it owns queue `q` of the ports of its pipe — their
//! sockets (fill, completion, RX and TX rings of that queue), their egress queues — and its own
//! balancing pipe, so none of that needs a lock. As on a NIC with RSS, a flow arrives on one
//! queue and leaves on the same queue of its egress port, so one worker handles all of it in
//! order: the switch reorders no flow. A frame forwarded to a port of another pipe is handed to
//! the owner of that port's queue `q` through its inbox, a lock-free bounded queue; the owner
//! queues and transmits it. One loop iteration:
//!
//! 1. inbox: frames other workers handed over → egress queues;
//! 2. receive a batch (≤ 64) per socket, decide it ([`Forwarder::process_batch`]), queue or hand
//!    off each forwarded frame, free the others;
//! 3. egress: each owned port sends what its shaper allows into its TX ring, and kicks the kernel;
//! 4. completions → free frames; top the fill rings up;
//! 5. publish telemetry now and then;
//! 6. idle → sleep in epoll (wakeup mode) until a socket, the inbox or the shaper's next deadline
//!    needs it; busy mode spins.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use xdpilone::{DeviceQueue, RingRx, RingTx, User};

use super::bypass::{Bypass, Take};
use super::frames::{FrameAddr, FrameCache, FrameCensus, FramePool};
use super::inbox::Inboxes;
use super::splice::SpliceSlot;
use super::sys::{self, monotonic_ns, Assembly, Epoll, EventFd, OwnedFrame, TimerFd, UmemArea};
use super::Buffers;
use super::{Forwarding, PollMode, IDLE_WAKE_MS};
use crate::egress::{Admission, EgressQueue};
use crate::fib::{PortId, SharedFib};
use crate::forward::{DropReason, Forwarder, FrameRef, Verdict};
use crate::lb::{Algorithm, PortLoad, MAX_BATCH};
use crate::telemetry::{
    worker_counter_values, RxDropReason, RxDrops, SocketDrops, SwitchTelemetry,
};
use crate::wire::{self, Ecn};

mod receive;
mod sample;
mod transmit;

/// A frame handed to a worker through its inbox.
#[derive(Debug)]
pub struct Handoff {
    /// The egress port ([`HandoffKind::Forwarded`]) or the ingress port
    /// ([`HandoffKind::Received`]), one of the worker's.
    pub port: PortId,
    /// The frame.
    pub frame: OwnedFrame,
    /// What the worker does with it.
    pub kind: HandoffKind,
}

/// Why a frame is in a worker's inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoffKind {
    /// Forwarded by another worker of the switch to a port of this one: queue it there.
    Forwarded,
    /// Received on a port of this worker over an in-process link ([`super::splice`]): decide
    /// it as a frame read from the port's RX ring.
    Received,
}

/// The rings of one (port, queue) socket.
pub struct QueueRings {
    /// The port's queue index.
    pub queue: u32,
    /// Fill and completion rings of this device queue.
    pub device: DeviceQueue,
    /// Receive ring.
    pub rx: RingRx,
    /// Transmit ring (of the same queue number).
    pub tx: Option<RingTx>,
    /// A multi-buffer packet whose last frames the next receive brings.
    pub partial: Assembly,
    /// Keeps the socket's ring mappings alive.
    pub _user: User,
    /// Frames given to the fill ring and not received back.
    pub fill_outstanding: u32,
    /// Frames given to the TX ring and not completed.
    pub tx_outstanding: u32,
}

impl std::fmt::Debug for QueueRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueRings")
            .field("queue", &self.queue)
            .field("fill_outstanding", &self.fill_outstanding)
            .field("tx_outstanding", &self.tx_outstanding)
            .finish_non_exhaustive()
    }
}

/// A port owned by this worker.
#[derive(Debug)]
pub struct OwnedPort {
    /// The port's id in the switch.
    pub id: PortId,
    /// Its sockets on the queues this worker serves: one, the worker's queue (`queues[0]`, on
    /// which it also transmits).
    pub queues: Vec<QueueRings>,
    /// Its egress queue.
    pub egress: EgressQueue<OwnedFrame>,
    /// UMEM frames of the packets in the egress queue (more than its length when packets
    /// span several frames), and of `tx_rest`.
    pub egress_frames: u64,
    /// The descriptors of a departed packet that did not fit the TX ring's reserved slots:
    /// written first next time (multi-buffer only; at most a packet's frames but one).
    pub tx_rest: Vec<xdpilone::xdp::XdpDesc>,
    /// Frames received on this port.
    pub rx_packets: u64,
    /// Bytes received on this port.
    pub rx_bytes: u64,
    /// Of `rx_packets`, those that came over an in-process link ([`super::splice`]).
    pub rx_spliced: u64,
    /// The slot of the link's other end, when it leads to a switch of this process.
    pub splice: Option<Arc<SpliceSlot>>,
    /// Its second way in and out beside its socket, if it has one ([`super::bypass`]: a lab's
    /// shared-memory link to a host's agent).
    pub bypass: Option<Box<dyn Bypass>>,
    /// Of `rx_packets`, those that came over the bypass.
    pub rx_bypass: u64,
    /// Frames lost on the bypass: offered and lost there ([`super::bypass::Offer::Lost`]);
    /// from it, with no free frame.
    pub drops_bypass: u64,
}

/// Everything one worker owns or shares.
pub struct Worker {
    /// Worker index (`pipe · queues + queue`): its balancing pipe, its inbox.
    index: usize,
    /// The queue of its ports it serves.
    queue: u32,
    /// The ports it owns.
    ports: Vec<OwnedPort>,
    /// For each switch port: (the worker owning its queue `queue`, index in that worker's
    /// `ports`).
    owner_of: Arc<[(usize, usize)]>,
    /// Up-port position → switch port, for reading queue lengths.
    up_ports: Arc<[PortId]>,
    /// Parse, lookup and balance.
    forwarder: Forwarder,
    /// The published forwarding table.
    fib: Arc<SharedFib>,
    /// UMEM memory.
    umem: Arc<UmemArea>,
    /// Free frames shared by the workers.
    pool: Arc<FramePool>,
    /// This worker's free frames.
    cache: FrameCache,
    /// Whether packets may span several frames (sockets bound with `XDP_USE_SG`).
    buffers: Buffers,
    /// Every worker's inbox (this one's is `inboxes[index]`).
    inboxes: Arc<Inboxes>,
    /// Every worker's wake-up eventfd.
    wakers: Arc<[EventFd]>,
    /// Every worker's "sleeping" flag.
    sleeping: Arc<[AtomicBool]>,
    /// Telemetry.
    telemetry: Arc<SwitchTelemetry>,
    /// Stop request.
    stop: Arc<AtomicBool>,
    /// How the worker waits.
    poll: PollMode,
    /// Fill ring level to keep per socket.
    fill_target: u32,
    /// TX ring size.
    tx_ring_size: u32,
    /// Descriptors dropped before the forwarder saw a frame, by [`RxDropReason`].
    rx_drops: RxDrops,
    /// Reused buffer for publishing the counters.
    counter_scratch: Vec<u64>,
    /// Reused buffer a bypass's frame is read into (zeroing a fresh one for every batch was a
    /// memset of 4 KB per frame at low rates).
    bypass_scratch: Box<[u8; BYPASS_FRAME_MAX]>,
    /// Forward by lookup, or bare port to port.
    forwarding: Forwarding,
    /// Whether the balancer reads queue lengths, and so whether the worker gathers and shares
    /// them.
    queue_loads: QueueLoads,
    /// When it last published, and what it owes.
    pace: Pace,
    /// `arf-flow`: the flows sampled on their way out ([`sample`]).
    flow_sampler: Option<sample::FlowSampler>,
}

/// A worker's publishing state between iterations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    /// When it last published its telemetry.
    last_publish: u64,
    /// Whether something changed since.
    unpublished: bool,
    /// When it last read its sockets' drop counters.
    last_socket_read: u64,
    /// Whether frames moved since.
    sockets_unread: bool,
    /// The telemetry reset epoch it has applied.
    reset_epoch: u64,
    /// The link-rate epoch it has applied.
    rate_epoch: u64,
}

/// Whether a pipe's balancer reads egress queue lengths ([`Algorithm::uses_queues`]), and so
/// whether its worker gathers and shares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLoads {
    /// The balancer ignores queue lengths: depths are published with the rest of the telemetry.
    Ignored,
    /// The balancer reads them: every batch gets the up-ports' loads, and the owned ports
    /// publish their depth after every busy loop iteration, for the other pipes' workers.
    Read,
}

impl QueueLoads {
    /// What `algorithm` needs.
    pub fn of(algorithm: Algorithm) -> Self {
        if algorithm.uses_queues() {
            QueueLoads::Read
        } else {
            QueueLoads::Ignored
        }
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("index", &self.index)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

/// Whether a step reads its sockets' RX rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxRings {
    /// Read every one (a worker on a thread of its own: a load or two each).
    Read,
    /// Leave them: none has frames (a pool thread knows which have from its epoll).
    Skip,
}

/// What a worker leaves behind: its frame census once its rings have been drained.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkerExit {
    /// Where this worker's frames were at exit.
    pub census: FrameCensus,
}

const PUBLISH_EVERY_NS: u64 = 1_000_000;
/// How often a busy worker reads its sockets' drop counters (a `getsockopt` each: 4 % of a lab's
/// forwarding CPU when read at every publication; every 10 ms, a k = 8 lab's group still made
/// 30 000 a second, 3 % of the machine's CPU samples). An idle worker comes back for the
/// reading it owes ([`Worker::wake_at`]), so a reader that waits this long after the traffic
/// (the lab's runner waits 200 ms) sees every drop.
const SOCKET_STATS_EVERY_NS: u64 = 100_000_000;
const TOKEN_SOCKET: u64 = 0;
/// The buffer a bypass's frame is read into, bytes: more than the largest single-buffer UMEM
/// frame carries (a longer frame is [`Take::Malformed`], one too long for the UMEM frame a bad
/// descriptor when copied in).
pub(super) const BYPASS_FRAME_MAX: usize = 4096 + 64;

/// What every worker of a switch shares, and the settings they all run with: given to
/// [`Worker::new`].
pub struct WorkerShared {
    /// Up-port position → switch port, for reading queue lengths.
    pub up_ports: Arc<[PortId]>,
    /// The published forwarding table.
    pub fib: Arc<SharedFib>,
    /// UMEM memory.
    pub umem: Arc<UmemArea>,
    /// Free frames shared by the workers.
    pub pool: Arc<FramePool>,
    /// Whether packets may span several frames (sockets bound with `XDP_USE_SG`).
    pub buffers: Buffers,
    /// Every worker's inbox.
    pub inboxes: Arc<Inboxes>,
    /// Every worker's wake-up eventfd.
    pub wakers: Arc<[EventFd]>,
    /// Every worker's "sleeping" flag.
    pub sleeping: Arc<[AtomicBool]>,
    /// Telemetry.
    pub telemetry: Arc<SwitchTelemetry>,
    /// Stop request.
    pub stop: Arc<AtomicBool>,
    /// How the workers wait.
    pub poll: PollMode,
    /// Ring size of every socket: the fill level kept and the TX ring's size.
    pub ring_size: u32,
    /// Forward by lookup, or bare port to port.
    pub forwarding: Forwarding,
    /// Whether the balancer reads queue lengths.
    pub queue_loads: QueueLoads,
}

/// Free frames a worker keeps at hand before it goes to the shared pool.
const FRAME_CACHE: usize = 256;

impl Worker {
    /// Worker `index`, serving queue `queue` of `ports`, deciding with `forwarder`; `owner_of`
    /// names, for each switch port, the worker that owns its queue `queue` and the port's
    /// index there.
    #[must_use]
    pub fn new(
        index: usize,
        queue: u32,
        ports: Vec<OwnedPort>,
        owner_of: Arc<[(usize, usize)]>,
        forwarder: Forwarder,
        shared: &WorkerShared,
    ) -> Self {
        let forwarder_algorithm = forwarder.balancer().switch().config().algorithm;
        Self {
            index,
            queue,
            ports,
            owner_of,
            up_ports: Arc::clone(&shared.up_ports),
            forwarder,
            fib: Arc::clone(&shared.fib),
            umem: Arc::clone(&shared.umem),
            pool: Arc::clone(&shared.pool),
            cache: FrameCache::new(FRAME_CACHE),
            buffers: shared.buffers,
            inboxes: Arc::clone(&shared.inboxes),
            wakers: Arc::clone(&shared.wakers),
            sleeping: Arc::clone(&shared.sleeping),
            telemetry: Arc::clone(&shared.telemetry),
            stop: Arc::clone(&shared.stop),
            poll: shared.poll,
            fill_target: shared.ring_size,
            tx_ring_size: shared.ring_size,
            rx_drops: RxDrops::default(),
            counter_scratch: Vec::new(),
            bypass_scratch: Box::new([0; BYPASS_FRAME_MAX]),
            forwarding: shared.forwarding,
            queue_loads: shared.queue_loads,
            pace: Pace::default(),
            flow_sampler: (forwarder_algorithm == crate::lb::Algorithm::ArfFlow)
                .then(|| sample::FlowSampler::new(shared.telemetry.port_count())),
        }
    }
}

impl Worker {
    /// Runs on its own thread until a stop is requested, then drains and reports.
    pub fn run(mut self) -> WorkerExit {
        let epoll = match self.poll {
            PollMode::Wakeup => Some(self.setup_epoll().expect("epoll setup")),
            PollMode::Busy => None,
        };
        let timer = TimerFd::new().expect("timerfd");
        if let Some(epoll) = &epoll {
            epoll
                .add(std::os::fd::AsRawFd::as_raw_fd(&timer), 2)
                .expect("timerfd in epoll");
        }
        self.prepare();
        while !self.stop.load(Ordering::Relaxed) {
            let work = self.step();
            if work == 0 {
                if let Some(epoll) = &epoll {
                    self.sleep(epoll, &timer);
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        self.finish()
    }

    /// Gets the worker ready to run: its fill rings filled.
    pub fn prepare(&mut self) {
        self.pace = Pace {
            reset_epoch: self.telemetry.reset_epoch(),
            rate_epoch: self.telemetry.rate_epoch(),
            ..Pace::default()
        };
        self.refill_all();
    }

    /// Whether its switch asked it to stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// One iteration: hand-offs, receive and decide, transmit what the shapers allow,
    /// completions, refill, telemetry. Returns the frames moved (0: nothing to do now).
    pub fn step(&mut self) -> usize {
        self.step_with(RxRings::Read)
    }

    /// [`Self::step`], reading its sockets' RX rings only if `rx` says so.
    pub fn step_with(&mut self, rx: RxRings) -> usize {
        let mut work = self.drain_inbox();
        work += self.receive_all(rx);
        work += self.transmit_all();
        work += self.complete_all();
        self.refill_all();
        self.pace.unpublished |= work > 0;
        self.pace.sockets_unread |= work > 0;
        if self.queue_loads == QueueLoads::Read && work > 0 {
            for port in &self.ports {
                let stats = port.egress.stats();
                self.telemetry
                    .port_queue(usize::from(port.id.0), self.queue)
                    .publish_depth(stats.depth_packets, stats.depth_bytes);
            }
        }

        let now = monotonic_ns();
        let epoch = self.telemetry.reset_epoch();
        if epoch != self.pace.reset_epoch {
            self.pace.reset_epoch = epoch;
            for port in &mut self.ports {
                port.egress.reset_peaks();
            }
            self.pace.unpublished = true;
        }
        let epoch = self.telemetry.rate_epoch();
        if epoch != self.pace.rate_epoch {
            self.pace.rate_epoch = epoch;
            for port in &mut self.ports {
                let rate = self
                    .telemetry
                    .port_queue(usize::from(port.id.0), self.queue)
                    .link_rate_bps();
                port.egress.set_link_rate(rate);
            }
        }
        // A frame on the wire leaves the queue's depth when its slot ends: an idle worker
        // publishes that too (`publish` settles it) when it next wakes — within
        // `IDLE_WAKE_MS` — so a quiet switch shows empty queues. (Waking at every slot's
        // end for it cost a shaped 100 Mbit/s port 6 % of its rate.)
        if work == 0
            && self
                .ports
                .iter()
                .any(|port| port.egress.on_wire_until_ns().is_some_and(|end| end <= now))
        {
            self.pace.unpublished = true;
        }
        // Publish at most every `PUBLISH_EVERY_NS`, busy or idle, and what changed at most
        // that long after (`wake_at` brings an idle worker back for what it owes), so that
        // readers never see counters of a quiet switch staler than that. (Publishing whenever
        // a step found nothing more to do was a publication per frame per switch at low rates:
        // a k = 8 lab's pool spent a tenth of its time there, eight clock reads each.) The
        // sockets' drop counters cost a system call per socket: they are read at most every
        // `SOCKET_STATS_EVERY_NS` (here too `wake_at` brings an idle worker back).
        let sockets =
            self.pace.sockets_unread && now - self.pace.last_socket_read >= SOCKET_STATS_EVERY_NS;
        if sockets || (self.pace.unpublished && now - self.pace.last_publish >= PUBLISH_EVERY_NS) {
            self.publish(sockets);
            self.pace.last_publish = now;
            self.pace.unpublished = false;
            if sockets {
                self.pace.last_socket_read = now;
                self.pace.sockets_unread = false;
            }
        }
        work
    }

    /// When the worker next needs to run although no frame arrives: the earliest shaper
    /// departure of its ports, or a publication or a reading of its sockets' drop counters it
    /// still owes.
    pub fn wake_at(&self) -> Option<u64> {
        let departure = self.next_departure_ns();
        let publish = self
            .pace
            .unpublished
            .then_some(self.pace.last_publish + PUBLISH_EVERY_NS);
        let sockets = self
            .pace
            .sockets_unread
            .then_some(self.pace.last_socket_read + SOCKET_STATS_EVERY_NS);
        [departure, publish, sockets].into_iter().flatten().min()
    }

    /// The earliest shaper departure of its ports (`None`: nothing queued).
    pub fn next_departure_ns(&self) -> Option<u64> {
        self.ports
            .iter()
            .filter_map(|port| port.egress.next_departure_ns())
            .min()
    }

    /// Sends only what its shapers let leave now — no hand-offs, no RX rings, no completions:
    /// what a pool thread does for it between other workers' steps, so that a departure does
    /// not wait for other switches' arrivals (the pool's `Departures`). Returns the frames
    /// sent; the next step completes them.
    pub fn depart(&mut self) -> usize {
        let sent = self.transmit_all();
        self.pace.unpublished |= sent > 0;
        self.pace.sockets_unread |= sent > 0;
        sent
    }

    /// The rate of its fastest shaped port, bit/s (0: none is shaped): how long a frame's
    /// departure may be late by is a share of its wire time there (see the pool's spin window).
    pub fn fastest_link_bps(&self) -> u64 {
        self.ports
            .iter()
            .map(|port| port.egress.link_rate_bps())
            .max()
            .unwrap_or(0)
    }

    /// Whether a step would find something to do now besides a due departure (see
    /// [`Self::wake_at`]) and frames in its sockets' RX rings: frames in its inbox or from a
    /// bypass, or TX descriptors not all sent or not completed (a descriptor not kicked yet
    /// counts in `tx_outstanding` too). A pool thread asks it instead of stepping an idle
    /// worker; which RX rings have frames it learns from its epoll (a ring lives on a page of
    /// its own in the kernel's memory: reading every ring of 40 switches on every pass, 320
    /// rings, was 9 % of a k = 8 lab's CPU samples at 1 Mbit/s, an eighth of its pool's).
    pub fn has_local_input(&self) -> bool {
        self.has_handoffs()
            || self.ports.iter().any(|port| {
                !port.tx_rest.is_empty() || port.queues.iter().any(|queue| queue.tx_outstanding > 0)
            })
    }

    /// Whether frames wait in its inbox or come from a bypass (checked after announcing
    /// a sleep).
    pub fn has_handoffs(&self) -> bool {
        !self.inboxes.is_empty(self.index)
            || self
                .bypasses()
                .any(|bypass| (0..bypass.inputs()).any(|input| bypass.pending(input)))
    }

    /// Announces that its thread sleeps (other workers then wake it for a hand-off, a bypass
    /// for a frame) or runs.
    pub fn set_sleeping(&self, sleeping: bool) {
        self.sleeping[self.index].store(sleeping, Ordering::SeqCst);
        for bypass in self.bypasses() {
            // What raced with the announcement `has_handoffs` sees after it.
            bypass.set_sleeping(sleeping);
        }
    }

    fn bypasses(&self) -> impl Iterator<Item = &dyn Bypass> {
        self.ports.iter().filter_map(|port| port.bypass.as_deref())
    }

    /// The descriptors whose readability means work: its sockets, its wake-up eventfd and its
    /// bypasses' wake-up descriptors.
    pub fn wait_fds(&self) -> Vec<std::os::fd::RawFd> {
        let mut fds: Vec<_> = self
            .ports
            .iter()
            .flat_map(|port| &port.queues)
            .map(|queue| queue.rx.as_raw_fd())
            .collect();
        fds.push(std::os::fd::AsRawFd::as_raw_fd(&self.wakers[self.index]));
        fds.extend(
            self.bypasses()
                .map(|bypass| std::os::fd::AsRawFd::as_raw_fd(&bypass.wake_fd())),
        );
        fds
    }

    /// Clears what woke it through `fd` if `fd` is its wake-up eventfd or a bypass's wake-up descriptor
    /// (`false`: not one of its own).
    pub fn clear_ready(&self, fd: std::os::fd::RawFd) -> bool {
        if fd == self.wake_fd() {
            self.clear_wake();
            return true;
        }
        match self
            .bypasses()
            .find(|bypass| std::os::fd::AsRawFd::as_raw_fd(&bypass.wake_fd()) == fd)
        {
            Some(bypass) => {
                bypass.clear_wake();
                true
            }
            None => false,
        }
    }

    /// Its wake-up eventfd (a pool drains it when epoll reports it).
    pub fn wake_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.wakers[self.index])
    }

    /// Clears its wake-up eventfd after a sleep.
    pub fn clear_wake(&self) {
        self.wakers[self.index].drain();
    }

    /// Publishes, drains and reports: the end of the worker.
    pub fn finish(mut self) -> WorkerExit {
        self.publish(true);
        self.shutdown()
    }

    fn setup_epoll(&self) -> std::io::Result<Epoll> {
        let epoll = Epoll::new()?;
        for fd in self.wait_fds() {
            epoll.add(fd, TOKEN_SOCKET)?;
        }
        Ok(epoll)
    }

    /// Sleeps until a socket has frames, another worker hands some over, or the earliest
    /// shaper deadline of the owned ports has come.
    fn sleep(&mut self, epoll: &Epoll, timer: &TimerFd) {
        let deadline = self.wake_at();
        self.set_sleeping(true);
        // Re-check after announcing the sleep: a hand-off that raced with the flag is seen now.
        if self.has_handoffs() || self.stopping() {
            self.set_sleeping(false);
            return;
        }
        if let Some(deadline) = deadline {
            timer.arm_at(deadline);
        }
        epoll.wait(IDLE_WAKE_MS);
        self.set_sleeping(false);
        timer.drain();
        self.clear_wake();
        for bypass in self.bypasses() {
            bypass.clear_wake();
        }
    }

    fn drain_inbox(&mut self) -> usize {
        if self.inboxes.is_empty(self.index) {
            return 0;
        }
        let now = monotonic_ns();
        let mut moved = 0;
        // Frames received over in-process links, decided in batches as a ring's would be.
        let mut frames: [Option<OwnedFrame>; MAX_BATCH] = std::array::from_fn(|_| None);
        let mut ingress = [PortId(0); MAX_BATCH];
        let mut received = 0;
        while let Some(handoff) = self.inboxes.pop(self.index) {
            moved += 1;
            match handoff.kind {
                HandoffKind::Forwarded => self.enqueue_local(handoff.port, handoff.frame, now),
                HandoffKind::Received => {
                    let local = self.owner_of[usize::from(handoff.port.0)].1;
                    let port = &mut self.ports[local];
                    port.rx_packets += 1;
                    port.rx_bytes += u64::from(handoff.frame.len());
                    port.rx_spliced += 1;
                    frames[received] = Some(handoff.frame);
                    ingress[received] = handoff.port;
                    received += 1;
                    if received == MAX_BATCH {
                        self.decide(&mut frames, &ingress, received);
                        received = 0;
                    }
                }
            }
        }
        if received > 0 {
            self.decide(&mut frames, &ingress, received);
        }
        moved
    }

    pub(super) fn enqueue_local(&mut self, port: PortId, mut frame: OwnedFrame, now: u64) {
        let local = self.owner_of[usize::from(port.0)].1;
        let len = frame.len();
        let capable =
            wire::ecn(self.umem.data(&mut frame), len as usize).is_some_and(Ecn::is_capable);
        match self.ports[local].egress.admit(len, capable, now) {
            Admission::Queue { mark_ce } => {
                let marked = mark_ce && wire::mark_ce(self.umem.data(&mut frame), len as usize);
                let port = &mut self.ports[local];
                port.egress_frames += frame.frames() as u64;
                port.egress.push(frame, len, marked, now);
            }
            Admission::Drop => {
                self.ports[local].egress.reject();
                self.free(frame);
            }
        }
    }

    /// Gives a packet's frames back to the free frames.
    #[inline]
    pub(super) fn free(&mut self, frame: OwnedFrame) {
        for frame in frame.into_frames(self.umem.frame_size()) {
            self.cache.give(frame, &self.pool);
        }
    }

    pub(super) fn hand_off(&mut self, owner: usize, handoff: Handoff) {
        match self.inboxes.push(owner, handoff) {
            Ok(()) => {
                if self.sleeping[owner].load(Ordering::SeqCst) {
                    self.wakers[owner].notify();
                }
            }
            Err(handoff) => {
                self.telemetry
                    .port_queue(usize::from(handoff.port.0), self.queue)
                    .add_handoff_drops(1);
                self.free(handoff.frame);
            }
        }
    }

    fn complete_all(&mut self) -> usize {
        let frame_size = self.umem.frame_size();
        let mut total = 0;
        for port_index in 0..self.ports.len() {
            for queue_index in 0..self.ports[port_index].queues.len() {
                // Checked before the buffer exists: zeroing it for every queue of every step
                // was 3 % of a k = 8 lab's pool time, with nothing outstanding.
                if self.ports[port_index].queues[queue_index].tx_outstanding == 0 {
                    continue;
                }
                let mut completed = [FrameAddr(0); MAX_BATCH * 2];
                let count = {
                    let queue = &mut self.ports[port_index].queues[queue_index];
                    let mut reader = queue.device.complete(completed.len() as u32);
                    let mut count = 0;
                    while let Some(addr) = reader.read() {
                        completed[count] = FrameAddr::base(addr, frame_size);
                        count += 1;
                    }
                    reader.release();
                    queue.tx_outstanding -= count as u32;
                    count
                };
                for &frame in &completed[..count] {
                    self.cache.give(frame, &self.pool);
                }
                total += count;
            }
        }
        total
    }

    fn refill_all(&mut self) {
        for port_index in 0..self.ports.len() {
            for queue_index in 0..self.ports[port_index].queues.len() {
                let missing = self
                    .fill_target
                    .saturating_sub(self.ports[port_index].queues[queue_index].fill_outstanding);
                // Topped up to full after every receive: a veth whose NAPI ran late delivers its
                // whole backlog (up to its 256-frame ring) at once, and a fill ring left 16 short
                // dropped the tail of such bursts (xsk rx_dropped, fill ring empty, with
                // thousands of frames free in the UMEM).
                if missing == 0 {
                    continue;
                }
                let mut frames = [FrameAddr(0); 256];
                let mut taken = 0;
                while taken < (missing as usize).min(frames.len()) {
                    match self.cache.take(&self.pool) {
                        Some(frame) => {
                            frames[taken] = frame;
                            taken += 1;
                        }
                        None => break,
                    }
                }
                let queue = &mut self.ports[port_index].queues[queue_index];
                let mut writer = queue.device.fill(taken as u32);
                let filled = writer.insert(frames[..taken].iter().map(|frame| frame.0)) as usize;
                writer.commit();
                drop(writer);
                queue.fill_outstanding += filled as u32;
                if queue.device.needs_wakeup() {
                    queue.device.wake();
                }
                for &frame in &frames[filled..taken] {
                    self.cache.give(frame, &self.pool);
                }
            }
        }
    }

    /// Publishes the counters, queues and frames; with `sockets`, the sockets' drop counters
    /// too (a system call per socket).
    fn publish(&mut self, sockets: bool) {
        let now = monotonic_ns();
        if let Some(sampler) = &mut self.flow_sampler {
            sampler.publish(&self.telemetry);
        }
        for port in &mut self.ports {
            port.egress.integrate(now);
            let telemetry = self
                .telemetry
                .port_queue(usize::from(port.id.0), self.queue);
            telemetry.publish_rx(port.rx_packets, port.rx_bytes, port.rx_spliced);
            if port.bypass.is_some() {
                telemetry.publish_host_link(port.rx_bypass, port.drops_bypass);
            }
            if sockets {
                let mut drops = SocketDrops::default();
                for queue in &port.queues {
                    if let Ok(stats) = queue.device.statistics_v2() {
                        drops.rx_dropped += stats.rx_dropped;
                        drops.rx_ring_full += stats.rx_ring_full;
                        drops.fill_ring_empty += stats.rx_fill_ring_empty_descs;
                        drops.invalid_descs += stats.rx_invalid_descs + stats.tx_invalid_descs;
                    }
                }
                telemetry.publish_socket_drops(&drops);
            }
            telemetry.publish_egress(port.egress.stats());
            port.egress.mark_published();
        }
        worker_counter_values(
            self.forwarder.counters(),
            &self.rx_drops,
            &mut self.counter_scratch,
        );
        self.telemetry
            .worker(self.index)
            .publish(&self.counter_scratch);
        let (mut fill, mut tx, mut egress) = (0u64, 0u64, 0u64);
        for port in &self.ports {
            for queue in &port.queues {
                fill += u64::from(queue.fill_outstanding);
                tx += u64::from(queue.tx_outstanding);
                // Frames of a packet being joined: held by the worker, as queued ones are.
                egress += queue.partial.frames() as u64;
            }
            egress += port.egress_frames;
        }
        self.telemetry
            .worker_frames(self.index)
            .publish(self.cache.len() as u64, fill, tx, egress);
    }

    /// Stops: frees what the worker can reclaim (egress queues, inbox, cache) and counts what
    /// the kernel still holds (fill and TX rings).
    fn shutdown(mut self) -> WorkerExit {
        let now = monotonic_ns();
        // Completions that arrived meanwhile.
        self.complete_all();
        let mut freed = Vec::new();
        let frame_size = self.umem.frame_size();
        for port in &mut self.ports {
            port.egress.drain(now, |frame| freed.push(frame));
            port.egress_frames = 0;
            for desc in port.tx_rest.drain(..) {
                self.cache
                    .give(FrameAddr::base(desc.addr, frame_size), &self.pool);
            }
            for queue in &mut port.queues {
                freed.extend(queue.partial.take());
            }
        }
        while let Some(handoff) = self.inboxes.pop(self.index) {
            freed.push(handoff.frame);
        }
        for frame in freed {
            self.free(frame);
        }
        let mut census = FrameCensus::default();
        for port in &self.ports {
            for queue in &port.queues {
                census.fill += u64::from(queue.fill_outstanding);
                census.tx += u64::from(queue.tx_outstanding);
            }
        }
        self.cache.return_all(&self.pool);
        census.caches = self.cache.len() as u64;
        WorkerExit { census }
    }
}
