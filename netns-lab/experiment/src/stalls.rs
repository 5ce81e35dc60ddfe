//! How quiet the machine is: the share of each CPU's time a spinning thread loses, and the
//! longest stall it sees.
//!
//! A lab's fidelity is judged by how late its shapers and agents are (`docs/lab.md`), and
//! lateness has two sources: the lab's own load, and whatever else takes the CPUs — other
//! processes, and, on a virtual machine, the hypervisor, which can hold a virtual CPU (or all of
//! them at once) for milliseconds without the guest's scheduler seeing it. The second is not the
//! lab's capacity, and a benchmark that does not measure it blames the lab. So [`probe`] pins
//! one thread to each CPU this process may use, spins reading `CLOCK_MONOTONIC` for a while and
//! records every gap between two reads longer than [`GAP_NS`] (a read takes tens of
//! nanoseconds; a gap is time the thread did not run). Per CPU it reports the time lost, the
//! longest gap and the gaps over a millisecond, and splits the loss by what the guest saw:
//! the share of the wall time the thread ran by its own CPU clock (`CLOCK_THREAD_CPUTIME_ID`),
//! and the steal the hypervisor reported (`/proc/stat`). Lost time the guest counted as the
//! probe's own run time is hidden from it: interrupt work (this kernel may charge it to the
//! running thread) or a virtual CPU held by the hypervisor without reporting steal.
//!
//! The same measurement as the kernel's `hwlat` tracer or `cyclictest`, which are not on every
//! machine; its summary is pure ([`Gaps`], [`CpuStalls::new`]) and unit-tested.
//!
//! A probe takes every CPU, so it runs before a measurement. During one, a [`StallWatch`]
//! (started by the experiment's runner for each repetition on a lab whose switches run as a
//! group) spins one SCHED_IDLE thread per CPU — it runs only in time nothing else wants, as the
//! group's keep-awake threads do — and counts the stalls hidden from the guest's scheduler: a
//! gap of a millisecond or more in its clock reads during which its own CPU clock advanced by
//! a millisecond or more ([`hidden_ns`]). The kernel charged it that time as run, yet it made
//! no progress: the hypervisor held the virtual CPU without reporting steal, or interrupt work
//! ran on it. A gap in which its CPU clock stood still was another task running (the lab's own
//! load: not counted), and a stall the hypervisor reports as steal is not charged to the
//! thread either (the record gives the steal from `/proc/stat` beside it). It sees only what
//! strikes while it runs — its record says for what share of the CPUs' time that was
//! (`watched`) — so a stall it reports is certain, and one it does not is not excluded.
//!
//! The same threads tell when the lab itself needed more than the machine has: a window of
//! [`FULL_WINDOW_NS`] in which no watching thread got [`FULL_RAN_MAX`] of its CPU had no time
//! to spare on any CPU ([`RanWindows`], [`full_share`]; `cpus_full` in the record). An average
//! hides it — a k = 8 lab at 5 Mbit/s per link left 23 % of the CPUs' time to the watch over a
//! run (`perf record`), yet `perf sched` showed both CPUs taken for 400 ms at a time while all
//! 128 hosts sent at once. (The group keeps its CPUs awake by idle polling, where the kernel
//! can: the idle task polls, and the watch preempts it like any task.)

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;

use ofan_model::report::MachineStalls;
use serde::Serialize;

use super::starvation::{step_aside, Starvation, STARVED_BACKOFF_MS};
use ofan_lab_sys as sys;

/// Gaps between two clock reads at least this long are lost time, nanoseconds. A read and a
/// loop turn take well under a microsecond; a timer interrupt a few.
pub const GAP_NS: u64 = 10_000;

/// The most a quiet machine may lose of any CPU: 1 %, the margin by which a faithful run's
/// agents may fall short of their rate — a machine that takes more can fail a run by itself.
pub const QUIET_LOST: f64 = 0.01;

/// The gaps one spinning thread saw (pure: fed the gap lengths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gaps {
    /// Total length of the gaps of at least [`GAP_NS`], nanoseconds.
    pub lost_ns: u64,
    /// The longest gap, nanoseconds (0 when there was none of at least [`GAP_NS`]).
    pub max_ns: u64,
    /// Gaps of at least [`GAP_NS`].
    pub count: u64,
    /// Gaps over one millisecond.
    pub over_1ms: u64,
}

impl Gaps {
    /// Records the time between two consecutive clock reads.
    pub fn record(&mut self, gap_ns: u64) {
        if gap_ns < GAP_NS {
            return;
        }
        self.lost_ns += gap_ns;
        self.max_ns = self.max_ns.max(gap_ns);
        self.count += 1;
        if gap_ns > 1_000_000 {
            self.over_1ms += 1;
        }
    }
}

/// What the probe saw on one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuStalls {
    /// The CPU.
    pub cpu: usize,
    /// Wall time spun, seconds.
    pub seconds: f64,
    /// Share of that time lost in gaps of at least [`GAP_NS`], 0–1.
    pub lost: f64,
    /// Share of that time the guest ran the probe, by the thread's CPU clock, 0–1.
    pub ran: f64,
    /// Share of the CPU's time the hypervisor reported as stolen (`/proc/stat`), 0–1.
    pub steal: f64,
    /// The longest gap, milliseconds.
    pub max_gap_ms: f64,
    /// Gaps over one millisecond.
    pub gaps_over_1ms: u64,
}

impl CpuStalls {
    /// The summary of `gaps` over `wall_ns` of spinning, during which the thread's CPU clock
    /// advanced `thread_ns` and `steal` of the CPU's time was reported stolen.
    #[must_use]
    pub fn new(cpu: usize, gaps: &Gaps, wall_ns: u64, thread_ns: u64, steal: f64) -> Self {
        let wall = wall_ns.max(1) as f64;
        Self {
            cpu,
            seconds: wall_ns as f64 / 1e9,
            lost: (gaps.lost_ns as f64 / wall).min(1.0),
            ran: (thread_ns as f64 / wall).min(1.0),
            steal: steal.clamp(0.0, 1.0),
            max_gap_ms: gaps.max_ns as f64 / 1e6,
            gaps_over_1ms: gaps.over_1ms,
        }
    }

    /// Lost time the guest counted as the probe's run time, 0–1: stalls below its scheduler
    /// (the time it did not run the probe, `1 − ran`, is what it saw).
    #[must_use]
    pub fn hidden(&self) -> f64 {
        (self.lost - (1.0 - self.ran)).max(0.0)
    }
}

/// What the probe saw on every CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stalls {
    /// One entry per CPU probed, in CPU order.
    pub cpus: Vec<CpuStalls>,
}

impl Stalls {
    /// The largest share any CPU lost, 0–1.
    #[must_use]
    pub fn worst_lost(&self) -> f64 {
        self.cpus.iter().map(|cpu| cpu.lost).fold(0.0, f64::max)
    }

    /// The longest gap on any CPU, milliseconds.
    #[must_use]
    pub fn max_gap_ms(&self) -> f64 {
        self.cpus
            .iter()
            .map(|cpu| cpu.max_gap_ms)
            .fold(0.0, f64::max)
    }

    /// Whether no CPU lost more than [`QUIET_LOST`].
    #[must_use]
    pub fn quiet(&self) -> bool {
        self.worst_lost() <= QUIET_LOST
    }
}

/// Spins one thread pinned to each CPU this process may use, all at once, for `duration`, and
/// reports the gaps each saw. It takes every CPU for that long: run it when the machine
/// should be idle (before a measurement), not during one.
///
/// # Errors
/// The CPUs cannot be listed or a thread cannot be pinned or started; `/proc/stat` cannot be
/// read.
pub fn probe(duration: Duration) -> io::Result<Stalls> {
    let cpus = sys::cpu::allowed_cpus()?;
    let barrier = Barrier::new(cpus.len());
    let before = std::fs::read_to_string("/proc/stat")?;
    let spun = std::thread::scope(|scope| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let barrier = &barrier;
                std::thread::Builder::new()
                    .name(format!("ofan-probe-{cpu}"))
                    .spawn_scoped(scope, move || {
                        let pinned = sys::cpu::pin_to_cpu(cpu);
                        // Every thread waits here, pinned or not, so none waits forever.
                        barrier.wait();
                        pinned.map(|()| spin(duration))
                    })
            })
            .collect::<io::Result<_>>()?;
        handles
            .into_iter()
            .map(|handle| handle.join().expect("a probe thread panicked"))
            .collect::<io::Result<Vec<_>>>()
    })?;
    let after = std::fs::read_to_string("/proc/stat")?;
    Ok(Stalls {
        cpus: cpus
            .iter()
            .zip(spun)
            .map(|(&cpu, (gaps, wall_ns, thread_ns))| {
                let steal = steal_share(&before, &after, cpu).unwrap_or(0.0);
                CpuStalls::new(cpu, &gaps, wall_ns, thread_ns, steal)
            })
            .collect(),
    })
}

/// The shortest gap a [`StallWatch`] counts, nanoseconds: shorter ones are interrupt work of the
/// lab's own (a NAPI poll copying 9 KB frames takes tens of microseconds).
pub const WATCH_GAP_NS: u64 = 1_000_000;

/// How often a watching thread reads its CPU clock while it spins, nanoseconds.
const WATCH_CPU_READ_NS: u64 = 50_000;

/// A gap this long between a watching thread's clock reads is time it did not run (a loop turn
/// takes tens of nanoseconds; a preemption, a context switch and back, microseconds).
const WATCH_RAN_GAP_NS: u64 = 5_000;

/// The windows in which [`full_share`] judges whether the CPUs had time to spare, nanoseconds:
/// a few packet times of a fast lab link (a 1500-byte frame takes 0.6 ms at 20 Mbit/s), short
/// enough that a burst of work is not averaged away.
pub const FULL_WINDOW_NS: u64 = 10_000_000;

/// A CPU is full in a window when its watching thread ran less than this share of it.
pub const FULL_RAN_MAX: f64 = 0.05;

/// The time one watching thread ran, per window of [`FULL_WINDOW_NS`] counted from a common
/// origin (pure: fed the stretches it ran).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RanWindows {
    origin_ns: u64,
    ran_ns: Vec<u64>,
}

impl RanWindows {
    /// No time run yet, windows counted from `origin_ns` (CLOCK_MONOTONIC).
    #[must_use]
    pub fn new(origin_ns: u64) -> Self {
        Self {
            origin_ns,
            ran_ns: Vec::new(),
        }
    }

    /// The thread ran from `from_ns` to `to_ns`; the stretch is split over the windows it
    /// spans (time before the origin is not counted).
    pub fn record(&mut self, from_ns: u64, to_ns: u64) {
        let mut at = from_ns.max(self.origin_ns);
        while at < to_ns {
            let window = ((at - self.origin_ns) / FULL_WINDOW_NS) as usize;
            let window_end = self.origin_ns + (window as u64 + 1) * FULL_WINDOW_NS;
            let until = to_ns.min(window_end);
            if self.ran_ns.len() <= window {
                self.ran_ns.resize(window + 1, 0);
            }
            self.ran_ns[window] += until - at;
            at = until;
        }
    }

    /// Time run in window `window`, nanoseconds.
    #[must_use]
    pub fn ran_in(&self, window: usize) -> u64 {
        self.ran_ns.get(window).copied().unwrap_or(0)
    }
}

/// The share of the whole windows (counted from the threads' common origin) between `from_ns`
/// and `to_ns` in which every CPU was full: its watching thread ran less than [`FULL_RAN_MAX`]
/// of the window. `None` without a thread or a whole window. Pure.
#[must_use]
pub fn full_share(cpus: &[RanWindows], from_ns: u64, to_ns: u64) -> Option<f64> {
    let origin = cpus.first()?.origin_ns;
    let first = from_ns.saturating_sub(origin).div_ceil(FULL_WINDOW_NS) as usize;
    let end = (to_ns.saturating_sub(origin) / FULL_WINDOW_NS) as usize;
    if end <= first {
        return None;
    }
    let most = (FULL_RAN_MAX * FULL_WINDOW_NS as f64) as u64;
    let full = (first..end)
        .filter(|&window| cpus.iter().all(|cpu| cpu.ran_in(window) < most))
        .count();
    Some(full as f64 / (end - first) as f64)
}

/// The part of a gap hidden from the guest's scheduler, nanoseconds: the watching thread last
/// read its CPU clock `spun_ns` before the gap began (time it spun, making progress), and the
/// clock advanced `cpu_ns` from that read to the end of the gap; what the kernel charged it
/// beyond the spinning it ran without progress. Pure.
#[must_use]
pub fn hidden_ns(spun_ns: u64, cpu_ns: u64) -> u64 {
    cpu_ns.saturating_sub(spun_ns)
}

/// Stalls hidden from the guest's scheduler while a measurement runs: one SCHED_IDLE thread
/// per CPU, stopped by [`StallWatch::stop`] (or on drop).
#[derive(Debug)]
pub struct StallWatch {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Option<Watched>>>,
    /// The CPUs watched, one thread each (their steal is read from `/proc/stat`).
    cpus: Vec<usize>,
    started_ns: u64,
    stat_before: String,
}

impl StallWatch {
    /// Starts a watching thread on each CPU this process may use. A thread that cannot be
    /// pinned at SCHED_IDLE watches nothing (it would take time from the lab).
    ///
    /// # Errors
    /// The CPUs cannot be listed, `/proc/stat` read or a thread started.
    pub fn start() -> io::Result<Self> {
        let cpus = sys::cpu::allowed_cpus()?;
        let stat_before = std::fs::read_to_string("/proc/stat")?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut watch = Self {
            stop: Arc::clone(&stop),
            threads: Vec::with_capacity(cpus.len()),
            cpus: cpus.clone(),
            started_ns: sys::agent::monotonic_ns(),
            stat_before,
        };
        let origin = watch.started_ns;
        for cpu in cpus {
            let stop = Arc::clone(&stop);
            watch.threads.push(
                std::thread::Builder::new()
                    .name(format!("ofan-watch-{cpu}"))
                    .spawn(move || {
                        sys::cpu::pin_to_cpu(cpu)
                            .and_then(|()| sys::cpu::set_idle_policy())
                            .ok()
                            .map(|()| watch_hidden(&stop, cpu, origin))
                    })?,
            );
        }
        Ok(watch)
    }

    /// Stops the threads: what they saw, with the steal the hypervisor reported meanwhile;
    /// whether the CPUs were full is judged over `judged` (CLOCK_MONOTONIC ns, from–to: the
    /// traffic) within the watch, or over all of it.
    ///
    /// # Errors
    /// `/proc/stat` cannot be read.
    pub fn stop(mut self, judged: Option<(u64, u64)>) -> io::Result<MachineStalls> {
        let end = sys::agent::monotonic_ns();
        let (from, to) = judged.map_or((self.started_ns, end), |(from, to)| (from, to.min(end)));
        let seconds = end.saturating_sub(self.started_ns) as f64 / 1e9;
        let watched = self.join();
        let stat_after = std::fs::read_to_string("/proc/stat")?;
        let steal = self
            .cpus
            .iter()
            .filter_map(|&cpu| steal_share(&self.stat_before, &stat_after, cpu))
            .fold(0.0, f64::max);
        let (records, windows): (Vec<(Gaps, u64)>, Vec<Option<RanWindows>>) = watched
            .into_iter()
            .map(|watched| match watched {
                Some(w) => ((w.gaps, w.ran_ns), Some(w.windows)),
                None => ((Gaps::default(), 0), None),
            })
            .unzip();
        // The machine was full only if every CPU was watched and was.
        let full = windows
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .and_then(|windows| full_share(&windows, from, to));
        Ok(machine_stalls(&records, seconds, steal, full))
    }

    fn join(&mut self) -> Vec<Option<Watched>> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads
            .drain(..)
            .map(|thread| thread.join().unwrap_or_default())
            .collect()
    }
}

/// What one watching thread saw.
#[derive(Debug)]
struct Watched {
    /// Stalls hidden from the scheduler.
    gaps: Gaps,
    /// CPU time it ran (stalls included), nanoseconds.
    ran_ns: u64,
    /// When it ran.
    windows: RanWindows,
}

impl Drop for StallWatch {
    fn drop(&mut self) {
        self.join();
    }
}

/// The record of a watch: the gaps each thread saw and the CPU time it ran, over `seconds`,
/// the largest share of a CPU's time reported stolen and the share of windows in which the
/// CPUs were full ([`full_share`]). Pure.
#[must_use]
pub fn machine_stalls(
    watched: &[(Gaps, u64)],
    seconds: f64,
    steal: f64,
    full: Option<f64>,
) -> MachineStalls {
    let ran_ns: u64 = watched.iter().map(|(_, ran_ns)| ran_ns).sum();
    let capacity_ns = seconds * 1e9 * watched.len() as f64;
    MachineStalls {
        seconds,
        cpus: watched.len(),
        watched: if capacity_ns > 0.0 {
            (ran_ns as f64 / capacity_ns).min(1.0)
        } else {
            0.0
        },
        hidden_stalls: watched.iter().map(|(gaps, _)| gaps.count).sum(),
        hidden_ms_total: watched.iter().map(|(gaps, _)| gaps.lost_ns).sum::<u64>() as f64 / 1e6,
        hidden_ms_max: watched
            .iter()
            .map(|(gaps, _)| gaps.max_ns)
            .max()
            .unwrap_or(0) as f64
            / 1e6,
        steal_max: steal,
        cpus_full: full,
    }
}

/// A watching thread's loop until `stop`: the stalls of at least [`WATCH_GAP_NS`] hidden from
/// the scheduler, the CPU time it ran (stalls included), and when it ran, in windows from
/// `origin_ns`.
fn watch_hidden(stop: &AtomicBool, cpu: usize, origin_ns: u64) -> Watched {
    let cpu_start = sys::cpu::thread_cpu_ns();
    let mut gaps = Gaps::default();
    let mut windows = RanWindows::new(origin_ns);
    let mut previous = sys::agent::monotonic_ns();
    let mut running_since = previous;
    let (mut read_at, mut cpu_at) = (previous, cpu_start);
    let mut starvation = Starvation::new(previous, cpu_start);
    while !stop.load(Ordering::Relaxed) {
        let now = sys::agent::monotonic_ns();
        let gap = now - previous;
        if gap >= WATCH_RAN_GAP_NS {
            windows.record(running_since, previous);
            running_since = sys::agent::monotonic_ns();
        }
        if gap >= WATCH_GAP_NS {
            let cpu = sys::cpu::thread_cpu_ns();
            let hidden = hidden_ns(previous - read_at, cpu - cpu_at);
            if hidden >= WATCH_GAP_NS {
                gaps.record(hidden);
            }
            (read_at, cpu_at) = (now, cpu);
        } else if now - read_at >= WATCH_CPU_READ_NS {
            (read_at, cpu_at) = (now, sys::cpu::thread_cpu_ns());
        }
        previous = now;
        // Other work holds the CPU: a watch ready to run would take the share the kernel keeps
        // for ordinary tasks in one block, stopping the lab ([`Starvation`]). It steps aside
        // (for as many back-offs as its CPU stays full, [`step_aside`]); the windows of a
        // back-off count as full but for the time its CPU idled meanwhile (its cpuidle
        // residency), which had time to spare — where in the back-off is not known, so at its
        // end. (The sleep is a gap in its clock reads
        // during which its CPU clock stands still: no hidden stall.)
        if read_at == now && starvation.starved(now, cpu_at) {
            step_aside(
                cpu,
                || {
                    back_off(stop);
                    !stop.load(Ordering::Relaxed)
                },
                |from, end, idle| record_idle(&mut windows, from, end, idle),
            );
            starvation.resumed(sys::agent::monotonic_ns(), sys::cpu::thread_cpu_ns());
        }
    }
    windows.record(running_since, previous);
    Watched {
        gaps,
        ran_ns: sys::cpu::thread_cpu_ns() - cpu_start,
        windows,
    }
}

/// Records the time a CPU idled during a watch's back-off from `from_ns` to `end_ns` (from its
/// cpuidle residency, `None` without cpuidle) as time to spare, at the back-off's end (where in
/// it is not known); at most the back-off itself.
fn record_idle(windows: &mut RanWindows, from_ns: u64, end_ns: u64, idle_ns: Option<u64>) {
    if let Some(idle) = idle_ns {
        let idle = idle.min(end_ns.saturating_sub(from_ns));
        windows.record(end_ns - idle, end_ns);
    }
}

/// Sleeps for [`STARVED_BACKOFF_MS`] or until `stop`, whichever comes first (it looks every
/// 10 ms: a stopped watch is joined within that).
fn back_off(stop: &AtomicBool) {
    let end = sys::agent::monotonic_ns() + u64::from(STARVED_BACKOFF_MS.unsigned_abs()) * 1_000_000;
    while !stop.load(Ordering::Relaxed) {
        let left = end.saturating_sub(sys::agent::monotonic_ns());
        if left == 0 {
            return;
        }
        std::thread::sleep(Duration::from_nanos(left.min(10_000_000)));
    }
}

/// Spins for `duration`: the gaps, the wall time and the thread's CPU time.
fn spin(duration: Duration) -> (Gaps, u64, u64) {
    let mut gaps = Gaps::default();
    let cpu_start = sys::cpu::thread_cpu_ns();
    let start = sys::agent::monotonic_ns();
    let end = start + u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
    let mut previous = start;
    loop {
        let now = sys::agent::monotonic_ns();
        gaps.record(now - previous);
        previous = now;
        if now >= end {
            break;
        }
    }
    (
        gaps,
        previous - start,
        sys::cpu::thread_cpu_ns() - cpu_start,
    )
}

/// The share of CPU `cpu`'s ticks between two `/proc/stat` texts that were steal.
fn steal_share(before: &str, after: &str, cpu: usize) -> Option<f64> {
    let (steal_before, total_before) = cpu_ticks(before, cpu)?;
    let (steal_after, total_after) = cpu_ticks(after, cpu)?;
    let total = total_after.checked_sub(total_before)?;
    (total > 0).then(|| steal_after.saturating_sub(steal_before) as f64 / total as f64)
}

/// Steal ticks and all ticks of CPU `cpu` in a `/proc/stat` text.
fn cpu_ticks(stat: &str, cpu: usize) -> Option<(u64, u64)> {
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name.as_str()))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map_while(|field| field.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice: within user]
    let steal = *ticks.get(7)?;
    Some((steal, ticks.iter().take(8).sum()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_back_off_counts_the_time_its_cpu_idled_as_time_to_spare_at_its_end() {
        let w = FULL_WINDOW_NS;
        let mut windows = RanWindows::new(0);
        // 200 ms of back-off from 0, the CPU idle 30 ms of them: the last three windows.
        record_idle(&mut windows, 0, 20 * w, Some(3 * w));
        assert_eq!(windows.ran_in(16), 0);
        assert_eq!(windows.ran_in(17), w);
        assert_eq!(windows.ran_in(19), w);
        // Never more than the back-off; nothing without cpuidle figures.
        let mut windows = RanWindows::new(0);
        record_idle(&mut windows, 5 * w, 7 * w, Some(100 * w));
        assert_eq!(
            (windows.ran_in(4), windows.ran_in(5), windows.ran_in(6)),
            (0, w, w)
        );
        let mut windows = RanWindows::new(0);
        record_idle(&mut windows, 0, 20 * w, None);
        assert_eq!(windows, RanWindows::new(0));
    }

    #[test]
    fn short_gaps_are_not_lost_and_long_ones_are_counted() {
        let mut gaps = Gaps::default();
        for gap in [40, 900, GAP_NS - 1] {
            gaps.record(gap);
        }
        assert_eq!(gaps, Gaps::default());
        for gap in [GAP_NS, 250_000, 1_000_000, 1_000_001, 19_000_000] {
            gaps.record(gap);
        }
        assert_eq!(
            gaps,
            Gaps {
                lost_ns: GAP_NS + 250_000 + 1_000_000 + 1_000_001 + 19_000_000,
                max_ns: 19_000_000,
                count: 5,
                over_1ms: 2,
            }
        );
    }

    #[test]
    fn the_loss_splits_into_what_the_guest_saw_and_what_it_did_not() {
        // One second spun; 40 ms lost, of which the thread's clock says it did not run for
        // 10 ms (another task had the CPU): the other 30 ms were hidden from the guest.
        let gaps = Gaps {
            lost_ns: 40_000_000,
            max_ns: 19_000_000,
            count: 7,
            over_1ms: 3,
        };
        let cpu = CpuStalls::new(1, &gaps, 1_000_000_000, 990_000_000, 0.002);
        assert_eq!(cpu.cpu, 1);
        assert!((cpu.seconds - 1.0).abs() < 1e-12);
        assert!((cpu.lost - 0.04).abs() < 1e-12);
        assert!((cpu.ran - 0.99).abs() < 1e-12);
        assert!((cpu.hidden() - 0.03).abs() < 1e-12);
        assert!((cpu.max_gap_ms - 19.0).abs() < 1e-12);
        assert_eq!(cpu.gaps_over_1ms, 3);
        // A thread that lost only what it was preempted for hid nothing.
        let seen = CpuStalls::new(0, &gaps, 1_000_000_000, 960_000_000, 0.0);
        assert_eq!(seen.hidden(), 0.0);

        let stalls = Stalls {
            cpus: vec![seen, cpu],
        };
        assert!((stalls.worst_lost() - 0.04).abs() < 1e-12);
        assert!((stalls.max_gap_ms() - 19.0).abs() < 1e-12);
        assert!(!stalls.quiet());
        let calm = Gaps {
            lost_ns: 2_000_000,
            max_ns: 300_000,
            count: 40,
            over_1ms: 0,
        };
        let quiet = Stalls {
            cpus: vec![CpuStalls::new(0, &calm, 1_000_000_000, 998_000_000, 0.0)],
        };
        assert!(quiet.quiet());
    }

    #[test]
    fn the_hidden_part_of_a_gap_is_the_cpu_time_charged_beyond_the_spinning() {
        // Read its clock 30 µs before a gap; by the end of the gap it was charged 2.03 ms: a
        // 2 ms stall the kernel counted as its run.
        assert_eq!(hidden_ns(30_000, 2_030_000), 2_000_000);
        // Charged only the 30 µs (and a little): another task ran through the gap.
        assert_eq!(hidden_ns(30_000, 31_000), 1_000);
        assert_eq!(hidden_ns(30_000, 0), 0);
    }

    #[test]
    fn a_sleep_is_not_charged_to_the_thread_and_so_never_hidden() {
        // The criterion on the real clocks: 3 ms asleep is a gap the kernel saw.
        let (start, cpu_start) = (sys::agent::monotonic_ns(), sys::cpu::thread_cpu_ns());
        std::thread::sleep(Duration::from_millis(3));
        let gap = sys::agent::monotonic_ns() - start;
        let hidden = hidden_ns(0, sys::cpu::thread_cpu_ns() - cpu_start);
        assert!(gap >= 3_000_000 && hidden < WATCH_GAP_NS, "{gap} {hidden}");
    }

    #[test]
    fn a_watch_record_sums_the_cpus_and_keeps_the_longest() {
        let watched = [
            (
                Gaps {
                    lost_ns: 21_000_000,
                    max_ns: 19_000_000,
                    count: 2,
                    over_1ms: 2,
                },
                200_000_000,
            ),
            (Gaps::default(), 0),
            (
                Gaps {
                    lost_ns: 3_000_000,
                    max_ns: 3_000_000,
                    count: 1,
                    over_1ms: 1,
                },
                100_000_000,
            ),
        ];
        let record = machine_stalls(&watched, 0.5, 0.01, Some(0.25));
        assert_eq!(record.cpus, 3);
        assert_eq!(record.hidden_stalls, 3);
        assert!((record.hidden_ms_total - 24.0).abs() < 1e-9);
        assert!((record.hidden_ms_max - 19.0).abs() < 1e-9);
        // 0.3 s run of 1.5 CPU-seconds: it watched a fifth of the time.
        assert!((record.watched - 0.2).abs() < 1e-12);
        assert_eq!((record.seconds, record.steal_max), (0.5, 0.01));
        assert_eq!(record.cpus_full, Some(0.25));
        let nothing = machine_stalls(&[], 1.0, 0.0, None);
        assert_eq!((nothing.hidden_ms_max, nothing.watched), (0.0, 0.0));
    }

    #[test]
    fn a_stretch_run_is_split_over_the_windows_it_spans() {
        let origin = 5 * FULL_WINDOW_NS;
        let mut windows = RanWindows::new(origin);
        // Before the origin: not counted; across it: from the origin on.
        windows.record(0, origin - 1);
        windows.record(origin - 1_000, origin + 2_000);
        // From the middle of window 0 into window 2.
        windows.record(
            origin + FULL_WINDOW_NS / 2,
            origin + 2 * FULL_WINDOW_NS + 300,
        );
        windows.record(origin + 3 * FULL_WINDOW_NS, origin + 3 * FULL_WINDOW_NS);
        assert_eq!(windows.ran_in(0), 2_000 + FULL_WINDOW_NS / 2);
        assert_eq!(windows.ran_in(1), FULL_WINDOW_NS);
        assert_eq!(windows.ran_in(2), 300);
        assert_eq!((windows.ran_in(3), windows.ran_in(99)), (0, 0));
    }

    #[test]
    fn the_cpus_are_full_in_a_window_only_when_every_watch_got_almost_nothing() {
        let origin = 1_000;
        let ran = |stretches: &[(u64, u64)]| {
            let mut windows = RanWindows::new(origin);
            for &(from, to) in stretches {
                windows.record(origin + from, origin + to);
            }
            windows
        };
        let w = FULL_WINDOW_NS;
        let most = (FULL_RAN_MAX * w as f64) as u64;
        // CPU 0 idle in window 0, full in 1–3; CPU 1 full in 0–2 (just under the share in
        // window 2), idle in 3. Only windows 1 and 2 are full on both.
        let cpu0 = ran(&[(0, w), (3 * w, 4 * w)]);
        let cpu1 = ran(&[(2 * w, 2 * w + most - 1), (3 * w, 4 * w)]);
        let cpus = [cpu0, cpu1];
        assert_eq!(full_share(&cpus, origin, origin + 4 * w), Some(0.5));
        // Partial windows at either end are not judged.
        assert_eq!(full_share(&cpus, origin + 1, origin + 4 * w - 1), Some(1.0));
        assert_eq!(full_share(&cpus, origin, origin + 4 * w + w / 2), Some(0.5));
        assert_eq!(full_share(&cpus, origin + 2 * w, origin + 4 * w), Some(0.5));
        // A watch that got exactly the share was not full.
        let cpu1 = ran(&[(2 * w, 2 * w + most), (3 * w, 4 * w)]);
        assert_eq!(
            full_share(&[cpus[0].clone(), cpu1], origin, origin + 4 * w),
            Some(0.25)
        );
        assert_eq!(
            full_share(&cpus, origin, origin + w - 1),
            None,
            "no whole window"
        );
        assert_eq!(
            full_share(&cpus, origin + 1, origin + 2 * w - 1),
            None,
            "none whole"
        );
        assert_eq!(full_share(&[], origin, origin + 4 * w), None, "no thread");
    }

    #[test]
    fn busy_cpus_leave_the_watch_nothing_and_are_counted_full() {
        // Ordinary threads spinning on every CPU for 150 ms take all but a sliver from the
        // SCHED_IDLE watching threads: most whole windows of the watch are full.
        let cpus = sys::cpu::allowed_cpus().unwrap();
        let watch = StallWatch::start().expect("watch");
        let until = sys::agent::monotonic_ns() + 150_000_000;
        std::thread::scope(|scope| {
            for &cpu in &cpus {
                scope.spawn(move || {
                    sys::cpu::pin_to_cpu(cpu).expect("pin");
                    while sys::agent::monotonic_ns() < until {
                        std::hint::spin_loop();
                    }
                });
            }
        });
        let record = watch.stop(None).expect("stop");
        let full = record.cpus_full.expect("whole windows were watched");
        assert!(full >= 0.5, "{record:?}");
    }

    #[test]
    fn a_watch_runs_on_every_cpu_and_stops() {
        let watch = StallWatch::start().expect("watch");
        std::thread::sleep(Duration::from_millis(50));
        let record = watch.stop(None).expect("stop");
        assert_eq!(record.cpus, sys::cpu::allowed_cpus().unwrap().len());
        assert!(record.seconds >= 0.05 && record.seconds < 5.0, "{record:?}");
        // Idle but for this test binary: the watch ran for much of the time.
        assert!(record.watched > 0.0 && record.watched <= 1.0, "{record:?}");
        // Whatever it saw fits in the time it watched, on every CPU.
        assert!(record.hidden_ms_max <= record.seconds * 1e3, "{record:?}");
        assert!(
            record
                .cpus_full
                .is_some_and(|full| (0.0..=1.0).contains(&full)),
            "{record:?}"
        );
        assert!(
            record.hidden_ms_total <= record.seconds * 1e3 * record.cpus as f64,
            "{record:?}"
        );
        // Dropped without stop: the threads end too.
        drop(StallWatch::start().expect("watch"));
    }

    #[test]
    fn steal_comes_from_the_cpus_own_line() {
        let before = "cpu  10 0 10 100 0 0 0 4 0 0\ncpu0 5 0 5 50 0 0 0 1 0 0\n\
                      cpu1 5 0 5 50 0 0 0 3 0 0\ncpu10 1 1 1 1 1 1 1 1 0 0\n";
        let after = "cpu  20 0 20 200 0 0 0 14 0 0\ncpu0 10 0 10 100 0 0 0 1 0 0\n\
                     cpu1 10 0 10 100 0 0 0 13 0 0\ncpu10 1 1 1 1 1 1 1 1 0 0\n";
        assert_eq!(steal_share(before, after, 0), Some(0.0));
        // cpu1: 5 + 5 + 50 + 10 ticks passed, 10 of them steal.
        assert_eq!(steal_share(before, after, 1), Some(10.0 / 70.0));
        // cpu10 did not move: no share; a CPU without a line has none either.
        assert_eq!(steal_share(before, after, 10), None);
        assert_eq!(steal_share(before, after, 3), None);
    }

    #[test]
    fn the_probe_reports_every_allowed_cpu_over_the_time_asked() {
        let allowed = sys::cpu::allowed_cpus().expect("affinity");
        assert!(!allowed.is_empty());
        let stalls = probe(Duration::from_millis(50)).expect("probe");
        let probed: Vec<usize> = stalls.cpus.iter().map(|cpu| cpu.cpu).collect();
        assert_eq!(probed, allowed);
        for cpu in &stalls.cpus {
            assert!(cpu.seconds >= 0.05 && cpu.seconds < 5.0, "{cpu:?}");
            assert!((0.0..=1.0).contains(&cpu.lost), "{cpu:?}");
            assert!(cpu.ran > 0.0 && cpu.ran <= 1.0, "{cpu:?}");
            assert!(cpu.max_gap_ms <= cpu.seconds * 1e3, "{cpu:?}");
        }
    }
}
