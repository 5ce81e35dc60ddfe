//! Shared workers: a few threads — one per core — serving the pipes of many switches, so that a
//! whole lab forwards in one process.
//!
//! A switch in its own process runs one thread per pipe, asleep in epoll until a frame or its
//! shaper's timer wakes it. In a lab of twenty switches on two cores, that is a wake-up and a
//! context switch per frame per hop, and twenty runnable threads queueing for two CPUs: measured
//! (`perf`, k = 4 at 10 Mbit/s) as most of the lab's CPU time going to `epoll_wait`, the
//! scheduler and the timer instead of to forwarding, and as shapers late by whole packet times.
//!
//! A [`WorkerPool`] thread instead owns the workers of several switches and steps them in turn.
//! A frame one of its switches transmits on a veth reaches the next switch's RX ring within the
//! same `sendto` (veth delivers in the sender's softirq; the XDP program redirects the frame into
//! that switch's socket), so the next iteration forwards it: no wake-up at all. The thread
//! sleeps only when none of its workers has work — in one epoll over all their sockets and
//! wake-up eventfds, with one timer at the earliest shaper departure of any of them — and spins
//! instead when that departure is nearer than a sleep and a wake-up would take.
//!
//! Each worker keeps its switch's identity (UMEM, FIB, balancer, telemetry, stop flag); the pool
//! only decides which thread runs it. A switch stops its workers as in its own process (its stop
//! flag and wake-up eventfds); the pool thread then finishes them and sends their exit back. A
//! worker that panics is dropped alone: its switch sees its exit channel closed
//! ([`super::Runtime::failed`]) and stops, the other switches forward on.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::departures::{Departing, Departures};
use super::sys::{self, monotonic_ns, Epoll, EventFd, TimerFd};
use super::worker::{RxRings, Worker, WorkerExit};
use super::IDLE_WAKE_MS;

/// How near a departure must be for a thread to spin to it rather than sleep, ns, while its
/// wake-ups come in time: a sleep shorter than this costs more than it saves.
const SPIN_MIN_NS: u64 = 30_000;
/// ... and while they come late for its links ([`SpinWindow`]).
const SPIN_LATE_NS: u64 = 300_000;
/// The latest a wake-up tail the long window answers: one it cannot cover with room to spare
/// is not a wake-up's cost but the CPUs being taken (the lab needing more than the machine
/// has), and spinning would take more of them.
const TAIL_COVERED_NS: u64 = SPIN_LATE_NS / 2;
/// Wake-ups late by more than this share of a full frame's wire time at the fastest link (1 /
/// `LATE_SHARE`) are late for it: a shaper sleeping to its departures would be that late.
const LATE_SHARE: u64 = 20;
/// The frame whose wire time is the links' packet time: 1 500 bytes of MTU, Ethernet header,
/// FCS, preamble and gap.
const FULL_FRAME_WIRE_BYTES: u64 = 1538;
/// Timer wake-ups a [`SpinWindow`] judges at a time.
const WAKEUPS: usize = 64;
/// Epoll tokens of the thread's own timer and eventfd (members' descriptors are their own
/// tokens, and never this large).
const TOKEN_TIMER: u64 = u64::MAX;
const TOKEN_POOL: u64 = u64::MAX - 1;
/// How often a pool thread steps all its workers, idle or not.
const FULL_PASS_NS: u64 = 10_000_000;

/// How long a pool thread may run without sleeping before it rests ([`FairShare`]).
pub const FAIR_SHARE_PERIOD_NS: u64 = 1_000_000;

/// When a real-time pool thread that never runs out of work rests, so that the machine's
/// ordinary tasks get the CPU in short slices instead of in the kernel's fair-server blocks.
///
/// The kernel guarantees ordinary (fair-class) tasks 50 ms of each CPU per second even under
/// real-time load: its *fair server*, a deadline reservation that, when they have not had that
/// share by 50 ms before the end of the second, runs them ahead of every real-time task —
/// for up to 50 ms at once. `perf sched` on a k = 4 lab at 8 Mbit/s (2026-12-04) caught the
/// agents' sender (real-time, above the pool) 4.6–8.4 ms late behind such blocks: its CPU ran
/// `kdamond`, or the group's control threads, a kworker and `perf`, for milliseconds while the
/// sender waited on it, and the kernel did not move it to the other CPU — which ran another
/// such block, or the pool (below the sender). A pool thread that rests `rest_ns` in every [`FAIR_SHARE_PERIOD_NS`]
/// it runs without sleeping gives them their share in slices of `rest_ns`; what they do not
/// need is idle (or polled) time. A rest never exceeds a [`REST_SHARE`]th of a full frame's
/// wire time at the fastest link the thread serves, so that the departures it delays stay
/// well within a shaper's tolerance: 75 µs at 8 Mbit/s, 30 µs at 20.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairShare {
    /// The rest, ns (0: never rest).
    pub rest_ns: u64,
    /// When the thread last slept or rested.
    awake_since: u64,
}

impl FairShare {
    /// Rests of `rest_ns` (0: none), awake from `now`.
    #[must_use]
    pub fn new(rest_ns: u64, now: u64) -> Self {
        Self {
            rest_ns,
            awake_since: now,
        }
    }

    /// Whether the thread, awake since its last sleep or rest, should rest at `now`.
    #[must_use]
    pub fn due(&self, now: u64) -> bool {
        self.rest_ns > 0 && now.saturating_sub(self.awake_since) >= FAIR_SHARE_PERIOD_NS
    }

    /// The thread slept or rested until `now`.
    pub fn slept(&mut self, now: u64) {
        self.awake_since = now;
    }

    /// How long to rest with links of at most `fastest_bps` (0: unshaped), ns.
    #[must_use]
    pub fn rest_for(&self, fastest_bps: u64) -> u64 {
        if fastest_bps == 0 {
            return self.rest_ns;
        }
        let frame_ns = FULL_FRAME_WIRE_BYTES * 8 * 1_000_000_000 / fastest_bps;
        self.rest_ns.min(frame_ns / REST_SHARE)
    }
}

/// A rest is at most this share (1 / `REST_SHARE`) of a full frame's wire time ([`FairShare`]).
pub const REST_SHARE: u64 = 20;

/// What the pool tells whoever watches it ([`PoolConfig::activity`]): the data path's only
/// word about its threads' work to the rest of the process (`ofan-switch group` keeps the CPUs
/// awake while frames move). Called on a pool thread's hot loop, so it must be cheap: a few
/// atomic operations, no lock, no system call while nothing changes.
pub trait PoolActivity: Send + Sync + std::fmt::Debug {
    /// A pool thread's pass moved frames just now.
    fn frames_moved(&self);
}

/// How the pool's threads run.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// Threads (one per core is the point).
    pub threads: usize,
    /// Run them SCHED_FIFO at this priority (1..=99): a due departure preempts ordinary tasks.
    pub rt_priority: Option<u8>,
    /// Pin thread i to CPU i (modulo the CPUs).
    pub pin: bool,
    /// Told whenever a thread's pass moved frames (`None`: nobody listens).
    pub activity: Option<Arc<dyn PoolActivity>>,
    /// Rest this long in every [`FAIR_SHARE_PERIOD_NS`] a thread runs without sleeping, ns
    /// (0: never). See [`FairShare`].
    pub fair_share_rest_ns: u64,
}

/// Threads serving the workers of many switches.
#[derive(Debug)]
pub struct WorkerPool {
    threads: Vec<PoolThread>,
}

#[derive(Debug)]
struct PoolThread {
    shared: Arc<ThreadShared>,
    handle: Option<JoinHandle<()>>,
}

/// What a pool thread shares with the switches that give it workers.
#[derive(Debug)]
struct ThreadShared {
    /// Workers given to the thread and not picked up yet.
    incoming: Mutex<Vec<Adopted>>,
    /// Wakes the thread for new workers and for the pool's stop.
    waker: EventFd,
    /// The pool is ending: exit once no worker is left.
    stop: AtomicBool,
    /// Workers the thread serves or will (for placement).
    load: AtomicUsize,
    /// Nanoseconds it has spun with nothing to forward, waiting for a departure nearer than
    /// its [`SpinWindow`] (published when a spin ends: at work, or at a sleep).
    spun_ns: AtomicU64,
    /// Rests it took for the machine's ordinary tasks ([`FairShare`]), and their length, ns.
    rests: AtomicU64,
    rested_ns: AtomicU64,
    /// The rest of [`PoolConfig::fair_share_rest_ns`].
    rest_ns: u64,
}

#[derive(Debug)]
struct Adopted {
    worker: Worker,
    exit: mpsc::Sender<WorkerExit>,
    /// Its last step moved frames: step it again (it publishes once it finds nothing to do).
    busy: bool,
    /// When it next needs a step although no frame arrives ([`Worker::wake_at`] after its
    /// last step: only a step changes it).
    wake_at: Option<u64>,
    /// The thread's epoll reported one of its descriptors since its last step: an RX ring
    /// with frames, or a wake-up (eventfd, host link FIFO) — step it, reading its RX rings.
    ready: bool,
    /// Its earliest shaper departure ([`Worker::next_departure_ns`] after its last step or
    /// departure sweep).
    depart_at: Option<u64>,
    /// It panicked (in a step or a departure sweep): the pass drops it, and its switch sees
    /// its exit channel close and stops; the others go on.
    failed: bool,
}

impl Departing for Adopted {
    fn depart_at(&self) -> Option<u64> {
        if self.failed {
            return None;
        }
        self.depart_at
    }

    fn depart(&mut self) -> Option<usize> {
        let worker = AssertUnwindSafe(&mut self.worker);
        if let Ok(sent) = std::panic::catch_unwind(move || { worker }.0.depart()) {
            self.busy |= sent > 0;
            self.depart_at = self.worker.next_departure_ns();
            self.wake_at = self.worker.wake_at();
            Some(sent)
        } else {
            self.failed = true;
            self.depart_at = None;
            None
        }
    }
}

impl WorkerPool {
    /// Starts the threads.
    ///
    /// # Errors
    /// An eventfd or a thread cannot be created.
    pub fn start(config: PoolConfig) -> std::io::Result<Self> {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let mut threads = Vec::new();
        for index in 0..config.threads.max(1) {
            let shared = Arc::new(ThreadShared {
                incoming: Mutex::new(Vec::new()),
                waker: EventFd::new()?,
                stop: AtomicBool::new(false),
                load: AtomicUsize::new(0),
                spun_ns: AtomicU64::new(0),
                rests: AtomicU64::new(0),
                rested_ns: AtomicU64::new(0),
                rest_ns: config.fair_share_rest_ns,
            });
            let thread_shared = Arc::clone(&shared);
            let activity = config.activity.clone();
            let rt_priority = config.rt_priority;
            let cpu = config.pin.then_some(index % cpus);
            let handle = std::thread::Builder::new()
                .name(format!("ofan-pool-{index}"))
                .spawn(move || {
                    sys::prepare_forwarding_thread(
                        &format!("pool thread {index}"),
                        cpu,
                        rt_priority,
                    );
                    serve(&thread_shared, activity.as_deref());
                })?;
            threads.push(PoolThread {
                shared,
                handle: Some(handle),
            });
        }
        Ok(Self { threads })
    }

    /// Threads in the pool.
    #[must_use]
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Nanoseconds its threads have spun to departures with nothing to forward, summed (up
    /// to the last spin that ended). To a CPU-time count that time is busy, though the
    /// thread would have left the CPU to anyone had it been sure to wake up in time: what a
    /// lab's CPU per forwarded frame leaves out, as it leaves out the keep-awake threads.
    #[must_use]
    pub fn spun_ns(&self) -> u64 {
        self.threads
            .iter()
            .map(|thread| thread.shared.spun_ns.load(Ordering::Relaxed))
            .sum()
    }

    /// Rests its threads took for the machine's ordinary tasks, and their time, ns, summed
    /// ([`FairShare`]).
    #[must_use]
    pub fn rests(&self) -> (u64, u64) {
        self.threads.iter().fold((0, 0), |(n, ns), thread| {
            (
                n + thread.shared.rests.load(Ordering::Relaxed),
                ns + thread.shared.rested_ns.load(Ordering::Relaxed),
            )
        })
    }

    /// Gives `worker` to thread `hint` modulo the threads (the caller groups switches that
    /// exchange frames on one thread), or to the least loaded one without a hint. The
    /// receiver gets the worker's exit once its switch stopped it; it disconnects without one
    /// if the worker panicked.
    pub(crate) fn adopt(&self, worker: Worker, hint: Option<usize>) -> mpsc::Receiver<WorkerExit> {
        let index = hint.map_or_else(
            || {
                (0..self.threads.len())
                    .min_by_key(|&i| self.threads[i].shared.load.load(Ordering::Relaxed))
                    .unwrap_or(0)
            },
            |hint| hint % self.threads.len(),
        );
        let shared = &self.threads[index].shared;
        let (exit, receiver) = mpsc::channel();
        shared.load.fetch_add(1, Ordering::Relaxed);
        shared
            .incoming
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Adopted {
                worker,
                exit,
                busy: true,
                wake_at: None,
                ready: true,
                depart_at: None,
                failed: false,
            });
        shared.waker.notify();
        receiver
    }
}

impl Drop for WorkerPool {
    /// Ends the threads once their switches have stopped their workers.
    fn drop(&mut self) {
        for thread in &self.threads {
            thread.shared.stop.store(true, Ordering::SeqCst);
            thread.shared.waker.notify();
        }
        for thread in &mut self.threads {
            if let Some(handle) = thread.handle.take() {
                let _ = handle.join();
            }
        }
    }
}

/// How near a departure must be for a pool thread to spin to it instead of sleeping:
/// [`SPIN_MIN_NS`] while the thread's timer wake-ups come in time for its links, [`SPIN_LATE_NS`]
/// once the 95th percentile of the last [`WAKEUPS`] of them is late by more than a
/// [`LATE_SHARE`]th of a full frame's wire time at the fastest link it serves — and by at most
/// [`TAIL_COVERED_NS`]: a later tail is the CPUs being full, not the wake-up, and spinning
/// made it worse (a k = 8 lab at 1 Mbit/s, whose threads' tail reached 0.6–0.7 ms under load,
/// had the agents at 0.952–0.964 of their rate and CCT +8.7 … +13.5 % in 7 benches with the
/// long window, against 0.981–1.000 and +4.4 … +7.0 % in 6 without, alternating).
///
/// A fixed 30 µs was what a wake-up costs on a quiet machine. On a virtual machine whose
/// wake-ups come later (measured here: 22–36 µs at the median, 43–88 µs at the 95th
/// percentile), a shaper sleeping to its departures is late by that tail: a k = 4 lab at
/// 20 Mbit/s per link (0.6 ms per frame), two rounds of 5 runs, measured CCT +2.7 / +6.8 % over
/// the bound (3 of 10 runs faithful) with 30 µs against +1.4 / +1.6 % (6 of 10) with the
/// threads spinning up to 300 µs, in the same session (`bench lab`, 2026-12-03); 100 µs was
/// between (+4.2 / +1.6 %, 5 of 10). At 4 Mbit/s the same tail is
/// 2 % of a frame time and harmless, and spinning 300 µs there cost 38 µs of CPU per forwarded
/// frame against 22: so the long window only where the tail matters, judged from the
/// machine's own wake-ups.
#[derive(Debug, Clone)]
struct SpinWindow {
    /// How late recent timer wake-ups came, ns (a ring of [`WAKEUPS`]).
    late: [u64; WAKEUPS],
    next: usize,
    /// The 95th percentile of the last full ring, ns.
    tail_ns: u64,
}

impl SpinWindow {
    fn new() -> Self {
        Self {
            late: [0; WAKEUPS],
            next: 0,
            tail_ns: 0,
        }
    }

    /// Spin to a departure this near, ns, for links of at most `fastest_bps` (0: unshaped).
    fn ns(&self, fastest_bps: u64) -> u64 {
        let late_for_links = fastest_bps != 0
            && self.tail_ns <= TAIL_COVERED_NS
            && u128::from(self.tail_ns * LATE_SHARE) * u128::from(fastest_bps)
                > u128::from(FULL_FRAME_WIRE_BYTES * 8) * 1_000_000_000;
        if late_for_links {
            SPIN_LATE_NS
        } else {
            SPIN_MIN_NS
        }
    }

    /// A timer wake-up came `late_ns` after its deadline; every [`WAKEUPS`] of them the tail
    /// is judged again.
    fn woke(&mut self, late_ns: u64) {
        self.late[self.next] = late_ns;
        self.next += 1;
        if self.next == WAKEUPS {
            self.next = 0;
            let mut sorted = self.late;
            sorted.sort_unstable();
            self.tail_ns = sorted[WAKEUPS * 95 / 100];
        }
    }
}

/// A pool thread's loop: steps its workers while any has work, spins to departures nearer
/// than its [`SpinWindow`], sleeps otherwise. With `activity`, it tells that frames moved
/// ([`PoolActivity`]).
fn serve(shared: &ThreadShared, activity: Option<&dyn PoolActivity>) {
    let epoll = Epoll::new().expect("epoll for a pool thread");
    let timer = TimerFd::new().expect("timerfd for a pool thread");
    epoll
        .add(std::os::fd::AsRawFd::as_raw_fd(&timer), TOKEN_TIMER)
        .expect("timerfd in epoll");
    epoll
        .add(std::os::fd::AsRawFd::as_raw_fd(&shared.waker), TOKEN_POOL)
        .expect("eventfd in epoll");
    let mut members: Vec<Adopted> = Vec::new();
    // Which member each descriptor in the epoll belongs to.
    let mut owners = Owners::default();
    // Their earliest departures, earliest first.
    let mut departures = Departures::default();
    let mut tokens: Vec<u64> = Vec::with_capacity(64);
    let mut next_full_pass = 0;
    let mut spin = SpinWindow::new();
    let mut fair = FairShare::new(shared.rest_ns, monotonic_ns());
    // The fastest shaped link of its workers ([`Worker::fastest_link_bps`]), as of the last
    // full pass (a new link rate reaches a worker at a step).
    let mut fastest_bps = 0;
    // When the current spin to a departure began (the pass that found nothing to do).
    let mut spinning_since: Option<u64> = None;
    let end_spin = |at: u64, since: &mut Option<u64>| {
        if let Some(from) = since.take() {
            shared
                .spun_ns
                .fetch_add(at.saturating_sub(from), Ordering::Relaxed);
        }
    };
    loop {
        let adopted = std::mem::take(
            &mut *shared
                .incoming
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        if !adopted.is_empty() {
            for mut member in adopted {
                member.worker.prepare();
                // Tokens: the descriptor, so that a wake-up eventfd epoll reports is drained
                // (and only then: a read per member per wake-up cost 3 % of a lab's CPU).
                for fd in member.worker.wait_fds() {
                    if let Err(error) = epoll.add(fd, fd as u64) {
                        tracing::error!(%error, "cannot watch a worker's socket");
                    }
                }
                members.push(member);
            }
            owners.index(&members);
            departures.rebuild(&members);
        }

        // What became ready since the last pass: RX rings with frames (the kernel wakes a
        // socket's waiters for every batch it delivers), wake-ups. One system call (≈ 0.2 µs
        // here with nothing ready) instead of reading every RX ring of every member.
        tokens.clear();
        epoll.wait_with(0, |token| tokens.push(token));
        for &token in &tokens {
            absorb(token, &mut members, &owners, shared, &timer);
        }

        // Only workers with something to do are stepped; an idle one costs a few loads
        // ([`Worker::has_local_input`]) instead of a step's clock reads, telemetry epochs and
        // publication checks (`Worker::step` and the clock were 9.5 % of a k = 4 lab's CPU at
        // 10 Mbit/s per link when every worker was stepped on every pass). Every
        // `FULL_PASS_NS` all are, RX rings read, for what arrives without a frame (a telemetry
        // reset, a new link rate, the depth of a frame whose slot ended).
        let mut now = monotonic_ns();
        if fair.due(now) {
            // Frames wait in the rings meanwhile, and departures are up to the rest late.
            std::thread::sleep(std::time::Duration::from_nanos(fair.rest_for(fastest_bps)));
            let woke = monotonic_ns();
            shared.rests.fetch_add(1, Ordering::Relaxed);
            shared
                .rested_ns
                .fetch_add(woke.saturating_sub(now), Ordering::Relaxed);
            end_spin(now, &mut spinning_since);
            fair.slept(woke);
            now = woke;
        }
        let full = now >= next_full_pass;
        if full {
            next_full_pass = now + FULL_PASS_NS;
        }
        // Departures first: what the members' shapers let leave by now goes before (and
        // between) the steps that read arrivals. Where the CPUs are nearly full — k = 8 at
        // 5 Mbit/s, 80 switches on two threads, full in 86–91 % of the traffic's 10-ms windows —
        // a pass through the members with arrivals is long, and a departure that fell due
        // during it waited for its member's turn behind other switches' arrivals: the shapers'
        // lateness p99 sat at 0.13–0.29 packet times on such labs (30 runs, 2026-12-04), at the
        // threshold of a faithful run (0.25). A switch's egress does not wait for its ingress;
        // with departures first the emulated one waits at most for one member's step (the same
        // labs: 0.07–0.09, alternating with and without).
        let (mut work, mut soonest) = departures.due(&mut members, now);
        let mut index = 0;
        let count = members.len();
        while index < members.len() {
            if members[index].failed {
                tracing::error!("a worker panicked: dropping it (its switch stops)");
                drop(leave(&mut members, index, &epoll, shared));
                departures.rebuild(&members);
                continue;
            }
            if members[index].worker.stopping() {
                let member = leave(&mut members, index, &epoll, shared);
                let _ = member.exit.send(member.worker.finish());
                departures.rebuild(&members);
                continue;
            }
            let member = &mut members[index];
            if !(full
                || member.busy
                || member.ready
                || member.wake_at.is_some_and(|at| at <= now)
                || member.worker.has_local_input())
            {
                index += 1;
                continue;
            }
            let rx = if full || member.ready {
                RxRings::Read
            } else {
                RxRings::Skip
            };
            member.ready = false;
            let worker = AssertUnwindSafe(&mut member.worker);
            match std::panic::catch_unwind(move || { worker }.0.step_with(rx)) {
                Ok(moved) => {
                    work += moved;
                    member.busy = moved > 0;
                    member.wake_at = member.worker.wake_at();
                    member.depart_at = member.worker.next_departure_ns();
                    if let Some(at) = member.depart_at {
                        soonest = soonest.min(at);
                    }
                    departures.note(index, member.depart_at);
                    // A step that moved frames took time: send what came due meanwhile
                    // before the next member's arrivals.
                    if moved > 0 && soonest != u64::MAX {
                        let at = monotonic_ns();
                        if soonest <= at {
                            let (sent, next) = departures.due(&mut members, at);
                            work += sent;
                            soonest = next;
                        }
                    }
                }
                Err(_) => {
                    // Dropped at the top of the loop, as one that panicked in a sweep.
                    members[index].failed = true;
                    continue;
                }
            }
            index += 1;
        }
        if members.len() != count {
            owners.index(&members);
        }
        if full {
            fastest_bps = members
                .iter()
                .map(|m| m.worker.fastest_link_bps())
                .max()
                .unwrap_or(0);
        }
        if members.is_empty() && shared.stop.load(Ordering::SeqCst) {
            let pending = shared
                .incoming
                .lock()
                .is_ok_and(|incoming| !incoming.is_empty());
            if !pending {
                return;
            }
        }
        if work > 0 {
            end_spin(now, &mut spinning_since);
            if let Some(activity) = activity {
                activity.frames_moved();
            }
            continue;
        }

        let deadline = members.iter().filter_map(|m| m.wake_at).min();
        if deadline.is_some_and(|d| d <= monotonic_ns() + spin.ns(fastest_bps)) {
            spinning_since.get_or_insert(now);
            std::hint::spin_loop();
            continue;
        }
        end_spin(monotonic_ns(), &mut spinning_since);
        for member in &members {
            member.worker.set_sleeping(true);
        }
        // Re-check after announcing the sleep: a hand-off or stop that raced with it is seen now.
        let raced = members
            .iter()
            .any(|m| m.worker.has_handoffs() || m.worker.stopping())
            || shared.stop.load(Ordering::SeqCst)
            || shared
                .incoming
                .lock()
                .is_ok_and(|incoming| !incoming.is_empty());
        if !raced {
            if let Some(deadline) = deadline {
                timer.arm_at(deadline);
            }
            tokens.clear();
            let before = monotonic_ns();
            epoll.wait_with(IDLE_WAKE_MS, |token| tokens.push(token));
            let after = monotonic_ns();
            // A sleep as long as a rest gave the CPU away as a rest would.
            if after.saturating_sub(before) >= fair.rest_for(fastest_bps) {
                fair.slept(after);
            }
            for &token in &tokens {
                if token == TOKEN_TIMER {
                    if let Some(deadline) = deadline {
                        let before = spin.ns(fastest_bps);
                        spin.woke(monotonic_ns().saturating_sub(deadline));
                        if spin.ns(fastest_bps) != before {
                            tracing::debug!(
                                window_us = spin.ns(fastest_bps) / 1000,
                                late_p95_us = spin.tail_ns / 1000,
                                "pool thread spin window"
                            );
                        }
                    }
                }
                absorb(token, &mut members, &owners, shared, &timer);
            }
        }
        for member in &members {
            member.worker.set_sleeping(false);
        }
    }
}

/// Takes in what epoll reported under `token`: the timer or the thread's eventfd are drained; a
/// member's descriptor marks it ready (and its eventfd or host link FIFO is drained).
fn absorb(
    token: u64,
    members: &mut [Adopted],
    owners: &Owners,
    shared: &ThreadShared,
    timer: &TimerFd,
) {
    if token == TOKEN_TIMER {
        timer.drain();
    } else if token == TOKEN_POOL {
        shared.waker.drain();
    } else if let Some(member) = owners.of(token).and_then(|index| members.get_mut(index)) {
        let fd = std::os::fd::RawFd::try_from(token).expect("member tokens are descriptors");
        member.worker.clear_ready(fd);
        member.ready = true;
    }
}

/// The member each descriptor a pool thread watches belongs to, by descriptor (descriptors are
/// small integers: a table, not a map). Rebuilt when members come or go.
#[derive(Debug, Default)]
struct Owners {
    by_fd: Vec<u32>,
}

impl Owners {
    const NONE: u32 = u32::MAX;

    fn index(&mut self, members: &[Adopted]) {
        self.index_fds(members.iter().map(|member| member.worker.wait_fds()));
    }

    /// Member i's descriptors are the i-th item of `members`.
    fn index_fds(&mut self, members: impl IntoIterator<Item = Vec<std::os::fd::RawFd>>) {
        self.by_fd.clear();
        for (index, fds) in members.into_iter().enumerate() {
            for fd in fds {
                let Ok(fd) = usize::try_from(fd) else {
                    continue;
                };
                if self.by_fd.len() <= fd {
                    self.by_fd.resize(fd + 1, Self::NONE);
                }
                self.by_fd[fd] = u32::try_from(index).expect("fewer than 2^32 members");
            }
        }
    }

    fn of(&self, token: u64) -> Option<usize> {
        let index = *self.by_fd.get(usize::try_from(token).ok()?)?;
        (index != Self::NONE).then_some(index as usize)
    }
}

/// Takes member `index` out of the thread: out of its epoll and its load.
fn leave(
    members: &mut Vec<Adopted>,
    index: usize,
    epoll: &Epoll,
    shared: &ThreadShared,
) -> Adopted {
    let member = members.swap_remove(index);
    unwatch(epoll, &member.worker);
    shared.load.fetch_sub(1, Ordering::Relaxed);
    member
}

fn unwatch(epoll: &Epoll, worker: &Worker) {
    for fd in worker.wait_fds() {
        let _ = epoll.remove(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBIT: u64 = 1_000_000;

    fn after(late: impl IntoIterator<Item = u64>) -> SpinWindow {
        let mut spin = SpinWindow::new();
        for ns in late {
            spin.woke(ns);
        }
        spin
    }

    #[test]
    fn a_thread_rests_after_a_millisecond_awake_and_not_before() {
        let mut fair = FairShare::new(75_000, 1_000);
        assert!(!fair.due(1_000));
        assert!(!fair.due(1_000 + FAIR_SHARE_PERIOD_NS - 1));
        assert!(fair.due(1_000 + FAIR_SHARE_PERIOD_NS));
        // A rest (or a sleep) starts the next millisecond.
        fair.slept(2_000_000);
        assert!(!fair.due(2_500_000));
        assert!(fair.due(3_000_000));
        // Off: never.
        assert!(!FairShare::new(0, 0).due(u64::MAX));
    }

    #[test]
    fn a_rest_is_at_most_a_twentieth_of_a_frame_time_at_the_fastest_link() {
        let fair = FairShare::new(75_000, 0);
        // 1538 wire bytes: 1.538 ms at 8 Mbit/s (a twentieth: 76.9 µs), 615.2 µs at 20.
        assert_eq!(fair.rest_for(8 * MBIT), 75_000);
        assert_eq!(fair.rest_for(20 * MBIT), 30_760);
        assert_eq!(fair.rest_for(100 * MBIT), 6_152);
        // Unshaped links: the rest as configured.
        assert_eq!(fair.rest_for(0), 75_000);
    }

    #[test]
    fn a_descriptor_names_its_member_until_the_members_change() {
        let mut owners = Owners::default();
        owners.index_fds([vec![7, 9], vec![3], vec![12]]);
        assert_eq!(owners.of(7), Some(0));
        assert_eq!(owners.of(9), Some(0));
        assert_eq!(owners.of(3), Some(1));
        assert_eq!(owners.of(12), Some(2));
        for unknown in [0, 8, 13, TOKEN_TIMER, TOKEN_POOL] {
            assert_eq!(owners.of(unknown), None, "token {unknown}");
        }
        // Member 0 left (the last took its place): its descriptors name no one now.
        owners.index_fds([vec![12], vec![3]]);
        assert_eq!(owners.of(7), None);
        assert_eq!(owners.of(9), None);
        assert_eq!(owners.of(12), Some(0));
        assert_eq!(owners.of(3), Some(1));
    }

    #[test]
    fn late_wake_ups_lengthen_the_window_only_for_links_they_are_late_for() {
        // A full frame takes 615 µs at 20 Mbit/s, 3.1 ms at 4: a twentieth is 31 µs, 154 µs.
        let late = (0..WAKEUPS as u64).map(|i| if i < 60 { 10_000 } else { 80_000 + i });
        let spin = after(late);
        assert_eq!(
            spin.tail_ns, 80_060,
            "the 95th percentile is the 61st of 64"
        );
        assert_eq!(spin.ns(20 * MBIT), SPIN_LATE_NS);
        assert_eq!(spin.ns(4 * MBIT), SPIN_MIN_NS);
        assert_eq!(
            spin.ns(0),
            SPIN_MIN_NS,
            "unshaped links wait for no departure"
        );
        // Punctual wake-ups: the short window even at 100 Mbit/s (a twentieth: 6 µs).
        assert_eq!(after([5_000; WAKEUPS]).ns(100 * MBIT), SPIN_MIN_NS);
    }

    #[test]
    fn a_tail_the_window_cannot_cover_is_busy_cpus_not_a_wake_up() {
        // 0.6 ms late at 1 Mbit/s (a twentieth of a frame time: 615 µs) or at 20 Mbit/s.
        for late in [TAIL_COVERED_NS + 1, 650_000] {
            assert_eq!(after([late; WAKEUPS]).ns(MBIT), SPIN_MIN_NS);
            assert_eq!(after([late; WAKEUPS]).ns(20 * MBIT), SPIN_MIN_NS);
        }
        assert_eq!(
            after([TAIL_COVERED_NS; WAKEUPS]).ns(20 * MBIT),
            SPIN_LATE_NS
        );
    }

    #[test]
    fn one_stall_is_not_the_tail_and_a_punctual_round_restores_the_short_window() {
        let spin = after((0..WAKEUPS as u64).map(|i| if i == 7 { 5_000_000 } else { 2_000 }));
        assert_eq!(spin.ns(20 * MBIT), SPIN_MIN_NS);
        // Judged once per round of WAKEUPS: not before the first is complete.
        assert_eq!(after([250_000; WAKEUPS - 1]).ns(20 * MBIT), SPIN_MIN_NS);
        let mut spin = after([120_000; WAKEUPS]);
        assert_eq!(spin.ns(20 * MBIT), SPIN_LATE_NS);
        for _ in 0..WAKEUPS - 1 {
            spin.woke(1_000);
        }
        assert_eq!(spin.ns(20 * MBIT), SPIN_LATE_NS);
        spin.woke(1_000);
        assert_eq!(spin.ns(20 * MBIT), SPIN_MIN_NS);
    }
}
