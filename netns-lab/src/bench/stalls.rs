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

use std::io;
use std::sync::Barrier;
use std::time::Duration;

use serde::Serialize;

use crate::sys;

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
