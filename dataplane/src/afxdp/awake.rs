//! Keeping a virtual machine's CPUs awake while frames flow.
//!
//! A [`WorkerPool`](super::pool::WorkerPool) starts the threads (`ofan-switch group --keep-awake-us`);
//! its threads call [`KeepAwake::worked`] when they move frames. A switch in its own process
//! has none: in a lab of switch processes (k = 4, 3 runs per rate, same session) they did not
//! help — faithful 3/3 at 1 and 2 Mbit/s with and without, shaper p99 0.12 and 0.15 packet
//! times with them against 0.10 and 0.12 without, and at 5 Mbit/s 0/3 against 1/3: twenty
//! processes' workers already keep the CPUs busy, and forty spinners only compete.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::sys::{self, monotonic_ns, Epoll, EventFd};

/// The longest a keep-awake thread sleeps with nothing flowing (it checks its stop flag).
const IDLE_WAKE_MS: i32 = 100;

/// Keeps a virtual machine's CPUs from halting while frames flow: one SCHED_IDLE thread per
/// CPU that spins while a pool thread moved a frame within `linger_ns` and sleeps otherwise.
///
/// A VM's idle CPU halts, and waking a halted virtual CPU — for a frame, a shaper's timer, an
/// agent's departure — waits for the hypervisor. Measured in a 2-CPU VM (`perf sched`): threads
/// runnable for 1–2.4 ms on a CPU the guest saw idle; in a k = 4 lab at 2 Mbit/s per link,
/// agents late by 0.9–2 ms p99 and shapers by 0.34–0.68 packet times (0 of 3 runs faithful).
/// A spinning thread keeps the CPU running, so that a wake-up is a local preemption. At
/// SCHED_IDLE it takes no time from anything else: ordinary tasks preempt it too (the pool
/// itself spinning through the gaps, real-time, starved them for 0.6–0.7 s at a time and
/// exhausted the kernel's real-time budget, stopping every real-time thread for 25–50 ms once a
/// second). An idle lab's CPUs still sleep. With it the same lab was faithful in 3 of 3 runs at
/// 1, 2 and 5 Mbit/s, shapers late 0.09–0.21 packet times p99.
#[derive(Debug)]
pub struct KeepAwake {
    linger_ns: u64,
    /// When a pool thread last moved frames (CLOCK_MONOTONIC ns).
    last_work: AtomicU64,
    /// Some keep-awake thread sleeps (or is about to): the next frame wakes them all.
    sleeping: AtomicBool,
    wakers: Vec<EventFd>,
    stop: AtomicBool,
}

impl KeepAwake {
    fn new(linger_ns: u64, cpus: usize) -> std::io::Result<Self> {
        Ok(Self {
            linger_ns,
            last_work: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            wakers: (0..cpus)
                .map(|_| EventFd::new())
                .collect::<Result<_, _>>()?,
            stop: AtomicBool::new(false),
        })
    }

    /// A pool thread moved frames just now.
    pub fn worked(&self) {
        self.last_work.store(monotonic_ns(), Ordering::Relaxed);
        if self.sleeping.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::SeqCst);
            for waker in &self.wakers {
                waker.notify();
            }
        }
    }

    fn flowing(&self) -> bool {
        monotonic_ns() < self.last_work.load(Ordering::SeqCst) + self.linger_ns
    }

    /// Thread `index`'s loop, on CPU `index`.
    fn run(&self, index: usize) {
        let epoll = Epoll::new().expect("epoll for a keep-awake thread");
        epoll
            .add(std::os::fd::AsRawFd::as_raw_fd(&self.wakers[index]), 0)
            .expect("eventfd in epoll");
        while !self.stop.load(Ordering::Relaxed) {
            if self.flowing() {
                std::hint::spin_loop();
                continue;
            }
            self.sleeping.store(true, Ordering::SeqCst);
            // A frame that moved after the check above but before the flag was seen: go on.
            if self.flowing() {
                continue;
            }
            epoll.wait(IDLE_WAKE_MS);
            self.wakers[index].drain();
        }
    }
}

/// The keep-awake threads, one per CPU; they stop and are joined when this is dropped.
#[derive(Debug)]
pub struct KeepAwakeThreads {
    awake: Arc<KeepAwake>,
    threads: Vec<JoinHandle<()>>,
}

impl KeepAwakeThreads {
    /// Starts one thread per CPU that keeps it awake for `linger_ns` after a frame moved;
    /// `None` for a linger of 0 (off). A thread that cannot be pinned at SCHED_IDLE logs a
    /// warning and ends (the CPU then halts as without it).
    ///
    /// # Errors
    /// An eventfd or a thread cannot be created.
    pub fn start(linger_ns: u64) -> std::io::Result<Option<Self>> {
        if linger_ns == 0 {
            return Ok(None);
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let awake = Arc::new(KeepAwake::new(linger_ns, cpus)?);
        let mut threads = Vec::new();
        for cpu in 0..cpus {
            let awake = Arc::clone(&awake);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ofan-awake-{cpu}"))
                    .spawn(move || {
                        if let Err(error) = sys::pin_to_cpu(cpu).and_then(|()| sys::set_idle_policy())
                        {
                            tracing::warn!(cpu, %error, "keep-awake thread not pinned at SCHED_IDLE: not running it");
                            return;
                        }
                        awake.run(cpu);
                    })?,
            );
        }
        Ok(Some(Self { awake, threads }))
    }

    /// What the threads that move frames tell.
    #[must_use]
    pub fn handle(&self) -> Arc<KeepAwake> {
        Arc::clone(&self.awake)
    }
}

impl Drop for KeepAwakeThreads {
    fn drop(&mut self) {
        self.awake.stop.store(true, Ordering::SeqCst);
        for waker in &self.awake.wakers {
            waker.notify();
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep_awake(linger_ns: u64) -> KeepAwake {
        KeepAwake::new(linger_ns, 1).unwrap()
    }

    #[test]
    fn frames_keep_the_cpus_awake_for_the_linger_only() {
        let awake = keep_awake(50_000_000);
        assert!(!awake.flowing(), "nothing moved yet");
        awake.worked();
        assert!(awake.flowing());
        let brief = keep_awake(1);
        brief.worked();
        std::thread::sleep(std::time::Duration::from_millis(1));
        assert!(!brief.flowing(), "the linger is over");
    }

    #[test]
    fn a_frame_wakes_a_sleeping_keep_awake_thread() {
        let awake = Arc::new(keep_awake(50_000_000));
        let thread = {
            let awake = Arc::clone(&awake);
            std::thread::spawn(move || awake.run(0))
        };
        // It goes to sleep with nothing flowing …
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !awake.sleeping.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "never went to sleep");
            std::thread::yield_now();
        }
        // … and a frame clears the flag and notifies it (else it would sleep up to
        // IDLE_WAKE_MS with frames flowing).
        awake.worked();
        assert!(!awake.sleeping.load(Ordering::SeqCst));
        awake.stop.store(true, Ordering::SeqCst);
        awake.wakers[0].notify();
        thread.join().unwrap();
    }
}
