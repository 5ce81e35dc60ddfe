//! Keeping a virtual machine's CPUs awake while frames flow: a CPU-latency request.
//!
//! `ofan-switch group --keep-awake-us` starts it ([`KeepAwakeThread`]) and hands it to its
//! [`WorkerPool`](ofan_dataplane::afxdp::pool::WorkerPool) as the pool's [`PoolActivity`]: the
//! pool's threads call [`KeepAwake::worked`] when they move frames, and one sleeping thread
//! holds a CPU-latency request of 0 µs from a frame until the linger after the last
//! ([`LatencyRequest`]): idle CPUs then poll instead of halting, and no task spins. Where the
//! kernel cannot poll when asked ([`idle_polling`]), nothing keeps the CPUs awake: the group
//! says so once, and a lab's fidelity at high rates is lower there (docs/lab.md). Spinning
//! SCHED_IDLE threads, the other way this module had, went: they competed with the real-time
//! data path for the kernel's share for ordinary tasks and needed their own starvation rules.
//! A switch in its own process has none: in a lab of switch processes (k = 4, 3 runs per rate,
//! same session) keep-awake did not help — twenty processes' workers already keep the CPUs
//! busy.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ofan_dataplane::afxdp::pool::PoolActivity;
use ofan_dataplane::afxdp::{monotonic_ns, Epoll, EventFd, IDLE_WAKE_MS};

/// The kernel's CPU-latency request device (PM QoS): while a process holds it open with a
/// value written, idle CPUs enter no state slower to leave than that many µs.
pub const CPU_LATENCY_DEVICE: &str = "/dev/cpu_dma_latency";

/// What the kernel makes of a request of -1: the default (no constraint).
const NO_LATENCY_CONSTRAINT: i32 = -1;

/// A CPU-latency request: 0 µs while held, none while released; the kernel drops it when the
/// request is closed — with the process, however it ends.
///
/// With a cpuidle driver whose shallowest state is polling (`POLL`: `haltpoll` in a KVM guest,
/// `intel_idle` and `acpi_idle` on hardware), a request of 0 keeps every idle CPU in that
/// state: the idle task spins on its run queue instead of halting, a wake-up needs no
/// interrupt (the CPU is seen polling) and, in a VM, no exit to the hypervisor. It keeps the
/// CPUs awake as spinning threads would without being a task: the kernel's share for ordinary
/// tasks (its fair server) is never handed to a spinner ahead of the real-time data path, and
/// the idle time stays idle in `/proc/stat`. Measured on 2026-12-04 against the
/// spinning threads (k = 4, pofan, alternating fresh labs; `docs/lab.md`): at 8 Mbit/s with
/// 1 MB messages faithful in 8 of 8 runs against 5 of 8; at 20 Mbit/s with 4 MB 8 of 8 each,
/// CCT median +1.7 % over the bound against +2.0 %; at 30 Mbit/s, past the CPUs' limit, none
/// faithful either way, but the CCT lower in each of 6 pairs (median +4.0 % against +5.6 %).
#[derive(Debug)]
pub struct LatencyRequest<W: Write = std::fs::File> {
    device: W,
    held: bool,
}

impl LatencyRequest {
    /// Opens a request (released) on [`CPU_LATENCY_DEVICE`] if this kernel polls when asked
    /// ([`idle_polling`]); else why not.
    ///
    /// # Errors
    /// A sentence saying why idle polling is not available here.
    pub fn open() -> Result<Self, String> {
        idle_polling()?;
        let device = std::fs::OpenOptions::new()
            .write(true)
            .open(CPU_LATENCY_DEVICE)
            .map_err(|error| format!("cannot open {CPU_LATENCY_DEVICE}: {error}"))?;
        Ok(Self::on(device))
    }
}

impl<W: Write> LatencyRequest<W> {
    /// A released request written to `device`.
    pub fn on(device: W) -> Self {
        Self {
            device,
            held: false,
        }
    }

    /// Asks for 0 µs (idle CPUs poll); nothing if held already.
    ///
    /// # Errors
    /// The write to the device.
    pub fn hold(&mut self) -> std::io::Result<()> {
        if !self.held {
            self.device.write_all(&0_i32.to_ne_bytes())?;
            self.held = true;
        }
        Ok(())
    }

    /// Drops the constraint (idle CPUs may halt again); nothing if released already.
    ///
    /// # Errors
    /// The write to the device.
    pub fn release(&mut self) -> std::io::Result<()> {
        if self.held {
            self.device
                .write_all(&NO_LATENCY_CONSTRAINT.to_ne_bytes())?;
            self.held = false;
        }
        Ok(())
    }

    /// Whether the request is held.
    #[cfg(test)]
    pub fn held(&self) -> bool {
        self.held
    }
}

/// Whether a CPU-latency request of 0 makes this machine's idle CPUs poll: a cpuidle driver is
/// loaded (without one the idle loop halts whatever is asked) and every CPU's shallowest state
/// is `POLL`. Else a sentence saying why not.
///
/// # Errors
/// Why idle polling is not available.
pub fn idle_polling() -> Result<(), String> {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
        .map_err(|error| format!("no cpuidle on this kernel ({error})"))?;
    let driver = driver.trim();
    if driver.is_empty() || driver == "none" {
        return Err("no cpuidle driver: an idle CPU halts whatever latency is asked".to_owned());
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    for cpu in 0..cpus {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state0/name");
        let name = std::fs::read_to_string(&path)
            .map_err(|error| format!("CPU {cpu} has no idle states ({path}: {error})"))?;
        if name.trim() != "POLL" {
            return Err(format!(
                "CPU {cpu}'s shallowest idle state is {} (driver {driver}), not polling",
                name.trim()
            ));
        }
    }
    Ok(())
}

/// Keeps a virtual machine's CPUs from halting while frames flow, through a
/// [`LatencyRequest`] held by one thread from a frame until `linger_ns` after the last.
///
/// A VM's idle CPU halts, and waking a halted virtual CPU — for a frame, a shaper's timer, an
/// agent's departure — waits for the hypervisor. Measured in a 2-CPU VM (`perf sched`): threads
/// runnable for 1–2.4 ms on a CPU the guest saw idle; in a k = 4 lab at 2 Mbit/s per link,
/// agents late by 0.9–2 ms p99 and shapers by 0.34–0.68 packet times (0 of 3 runs faithful);
/// with the CPUs kept awake, 3 of 3 at 1, 2 and 5 Mbit/s. An idle lab's CPUs still sleep.
#[derive(Debug)]
pub struct KeepAwake {
    linger_ns: u64,
    /// When a pool thread last moved frames (CLOCK_MONOTONIC ns).
    last_work: AtomicU64,
    /// The thread sleeps (or is about to): the next frame wakes it.
    sleeping: AtomicBool,
    waker: EventFd,
    stop: AtomicBool,
}

impl PoolActivity for KeepAwake {
    fn frames_moved(&self) {
        self.worked();
    }
}

impl KeepAwake {
    fn new(linger_ns: u64) -> std::io::Result<Self> {
        Ok(Self {
            linger_ns,
            last_work: AtomicU64::new(0),
            sleeping: AtomicBool::new(false),
            waker: EventFd::new()?,
            stop: AtomicBool::new(false),
        })
    }

    /// A pool thread moved frames just now.
    pub fn worked(&self) {
        self.last_work.store(monotonic_ns(), Ordering::Relaxed);
        if self.sleeping.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::SeqCst);
            self.waker.notify();
        }
    }

    fn flowing(&self) -> bool {
        monotonic_ns() < self.flowing_until()
    }

    /// When the CPUs may sleep unless frames move again (CLOCK_MONOTONIC ns).
    fn flowing_until(&self) -> u64 {
        self.last_work.load(Ordering::SeqCst) + self.linger_ns
    }

    /// An epoll on the waker.
    fn waker_epoll(&self) -> Epoll {
        let epoll = Epoll::new().expect("epoll for the keep-awake thread");
        epoll
            .add(std::os::fd::AsRawFd::as_raw_fd(&self.waker), 0)
            .expect("eventfd in epoll");
        epoll
    }

    /// Sleeps until a frame moves (or [`IDLE_WAKE_MS`], to see the stop flag); at once if one
    /// moved since the caller looked.
    fn sleep_until_frames(&self, epoll: &Epoll) {
        self.sleeping.store(true, Ordering::SeqCst);
        // A frame that moved after the caller's check but before the flag was seen: go on.
        if self.flowing() {
            return;
        }
        epoll.wait(IDLE_WAKE_MS);
        self.waker.drain();
    }

    /// The latency-request thread's loop: holds `request` from the first frame until the
    /// linger after the last one, then releases it and sleeps until frames move again. One
    /// write to the device per change, a check per linger while frames flow. A request the
    /// device refuses is logged once and given up (the CPUs may halt, as without it).
    fn hold_while_flowing<W: Write>(&self, request: &mut LatencyRequest<W>) {
        let epoll = self.waker_epoll();
        while !self.stop.load(Ordering::Relaxed) {
            let (now, until) = (monotonic_ns(), self.flowing_until());
            if now < until {
                if let Err(error) = request.hold() {
                    tracing::warn!(%error, "the CPU-latency request was refused: CPUs may halt while frames flow");
                    return;
                }
                std::thread::sleep(Duration::from_nanos(until - now));
                continue;
            }
            if let Err(error) = request.release() {
                tracing::warn!(%error, "the CPU-latency request could not be released: closing it");
                return;
            }
            self.sleep_until_frames(&epoll);
        }
    }
}

/// The thread that holds the CPU-latency request while frames flow; it stops and is joined
/// when this is dropped.
#[derive(Debug)]
pub struct KeepAwakeThread {
    awake: Arc<KeepAwake>,
    thread: Option<JoinHandle<()>>,
}

impl KeepAwakeThread {
    /// Starts `ofan-awake-poll`, which holds a CPU-latency request for `linger_ns` after each
    /// frame; `None` for a linger of 0 (off), or where this kernel cannot poll when asked
    /// (logged once, with why: the CPUs may halt between frames).
    ///
    /// # Errors
    /// An eventfd or the thread cannot be created.
    pub fn start(linger_ns: u64) -> std::io::Result<Option<Self>> {
        if linger_ns == 0 {
            return Ok(None);
        }
        let mut request = match LatencyRequest::open() {
            Ok(request) => request,
            Err(why) => {
                tracing::warn!(
                    %why,
                    "nothing keeps the CPUs awake while frames flow: in a virtual machine a \
                     halted CPU wakes late, and emulated links at high rates are less faithful"
                );
                return Ok(None);
            }
        };
        let awake = Arc::new(KeepAwake::new(linger_ns)?);
        let thread = {
            let awake = Arc::clone(&awake);
            std::thread::Builder::new()
                .name("ofan-awake-poll".to_owned())
                .spawn(move || awake.hold_while_flowing(&mut request))?
        };
        tracing::info!(
            linger_us = linger_ns / 1000,
            "CPUs kept awake while frames flow (CPU-latency request)"
        );
        Ok(Some(Self {
            awake,
            thread: Some(thread),
        }))
    }

    /// What the threads that move frames tell.
    #[must_use]
    pub fn handle(&self) -> Arc<KeepAwake> {
        Arc::clone(&self.awake)
    }
}

impl Drop for KeepAwakeThread {
    fn drop(&mut self) {
        self.awake.stop.store(true, Ordering::SeqCst);
        self.awake.waker.notify();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keep_awake(linger_ns: u64) -> KeepAwake {
        KeepAwake::new(linger_ns).unwrap()
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

    /// A device that records what was written to it, 4 bytes (one request value) at a time.
    #[derive(Debug, Clone, Default)]
    struct Recorded(Arc<std::sync::Mutex<Vec<i32>>>);

    impl Write for Recorded {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let value = i32::from_ne_bytes(buf.try_into().expect("one s32 per write"));
            self.0.lock().unwrap().push(value);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "never {what}");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn the_latency_request_is_held_from_a_frame_until_the_linger_after_the_last() {
        let device = Recorded::default();
        let written = Arc::clone(&device.0);
        let awake = Arc::new(keep_awake(300_000_000));
        let thread = {
            let awake = Arc::clone(&awake);
            std::thread::spawn(move || {
                let mut request = LatencyRequest::on(device);
                awake.hold_while_flowing(&mut request);
                request.held()
            })
        };
        // Nothing flows: it sleeps without writing (a new request is released).
        wait_for("went to sleep", || awake.sleeping.load(Ordering::SeqCst));
        assert!(written.lock().unwrap().is_empty());
        // A frame: 0 µs asked at once, and kept while frames go on moving (well within the
        // 300-ms linger, even on a loaded machine) …
        awake.worked();
        wait_for("held the request", || !written.lock().unwrap().is_empty());
        for _ in 0..4 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            awake.worked();
        }
        assert_eq!(*written.lock().unwrap(), [0]);
        // … then released once, a linger after the last, and asleep again.
        wait_for("released the request", || {
            written.lock().unwrap().len() == 2
        });
        assert_eq!(*written.lock().unwrap(), [0, NO_LATENCY_CONSTRAINT]);
        wait_for("went back to sleep", || {
            awake.sleeping.load(Ordering::SeqCst)
        });
        awake.stop.store(true, Ordering::SeqCst);
        awake.waker.notify();
        assert!(!thread.join().unwrap(), "stopped released");
    }

    #[test]
    fn the_kernel_polls_while_the_request_is_held() {
        let mut request = match LatencyRequest::open() {
            Ok(request) => request,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        };
        // The device reads the machine's current limit, µs.
        let limit = || {
            let bytes = std::fs::read(CPU_LATENCY_DEVICE).expect("reading the limit");
            i32::from_ne_bytes(bytes[..4].try_into().unwrap())
        };
        request.hold().unwrap();
        assert_eq!(limit(), 0);
        request.release().unwrap();
        // Back to the default (2000 s), unless another process asks for less.
        assert!(limit() > 0, "released, the limit is {}", limit());
    }
}
