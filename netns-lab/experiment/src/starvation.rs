//! When the stall watch's spinning threads step aside: a SCHED_IDLE spinner that work of
//! higher classes starves would take the kernel's share for ordinary tasks in one block
//! ([`Starvation`]), so it steps aside until its CPU has room again ([`step_aside`]).
//!
//! The group's keep-awake threads spun the same way and used the same rules; they were
//! replaced by a CPU-latency request (`ofan-switch`'s `group::awake`), and the rules moved
//! here, to the one spinner left. The measurements below were made with both.

/// The window over which a spinning idle-priority thread judges its share of its CPU,
/// nanoseconds ([`Starvation`]): it looks back one to two of them.
pub const STARVED_WINDOW_NS: u64 = 100_000_000;

/// A spinner that ran less than this share of its CPU over the window, percent, was starved by
/// work of higher classes ([`Starvation`]). Twice the share the kernel keeps for ordinary tasks
/// (5 %), so that it steps aside before the kernel hands it that share.
pub const STARVED_SHARE_PERCENT: u64 = 10;

/// How often a spinner reads its CPU clock (a system call) to judge its share, nanoseconds.
pub const STARVED_READ_NS: u64 = 1_000_000;

/// How long a starved spinner steps aside, milliseconds ([`Starvation`]).
pub const STARVED_BACKOFF_MS: i32 = 200;

/// Idle time of CPU `cpu` so far, nanoseconds: the residency of its cpuidle states
/// (`/sys/devices/system/cpu/cpuN/cpuidle/stateK/time`, µs), `None` where the kernel has no
/// cpuidle driver for it.
#[must_use]
pub fn cpu_idle_ns(cpu: usize) -> Option<u64> {
    let dir = std::fs::read_dir(format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle")).ok()?;
    let mut idle_us = 0u64;
    let mut states = 0;
    for entry in dir.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("state") {
            continue;
        }
        let time = std::fs::read_to_string(entry.path().join("time")).ok()?;
        idle_us = idle_us.saturating_add(time.trim().parse::<u64>().ok()?);
        states += 1;
    }
    (states > 0).then(|| idle_us.saturating_mul(1000))
}

/// Whether a spinner that stepped aside may spin again after a back-off of `span_ns` in
/// which its CPU idled `idle_ns` (`None`: not known): only if the CPU idled at least
/// [`STARVED_SHARE_PERCENT`] of it — otherwise higher classes still hold it, and a spinner back
/// on it would be handed the kernel's share for ordinary tasks ([`Starvation`]).
#[must_use]
pub fn room_after_back_off(idle_ns: Option<u64>, span_ns: u64) -> bool {
    idle_ns.is_none_or(|idle| {
        u128::from(idle) * 100 >= u128::from(span_ns) * u128::from(STARVED_SHARE_PERCENT)
    })
}

/// Steps a starved spinner on CPU `cpu` aside: `back_off` (which sleeps about
/// [`STARVED_BACKOFF_MS`] and says whether to go on) until a back-off in which the CPU had
/// room ([`room_after_back_off`]), or until `back_off` says stop. Each back-off's span and the
/// time its CPU idled meanwhile (`None` without cpuidle) go to `idled(from_ns, end_ns,
/// idle_ns)`, for a caller that accounts for them (the lab's stall watch) without reading
/// cpuidle again.
pub fn step_aside(
    cpu: usize,
    mut back_off: impl FnMut() -> bool,
    mut idled: impl FnMut(u64, u64, Option<u64>),
) {
    loop {
        let (from, idle_from) = (ofan_lab_sys::agent::monotonic_ns(), cpu_idle_ns(cpu));
        let go_on = back_off();
        let (end, idle_end) = (ofan_lab_sys::agent::monotonic_ns(), cpu_idle_ns(cpu));
        let idle = idle_end
            .zip(idle_from)
            .map(|(now, from)| now.saturating_sub(from));
        idled(from, end, idle);
        if !go_on || room_after_back_off(idle, end - from) {
            return;
        }
    }
}

/// Tells a spinning SCHED_IDLE thread (the lab's stall watch) that work
/// of higher classes is starving it, so that it steps aside for [`STARVED_BACKOFF_MS`].
///
/// The kernel (6.12 and later: the fair class's deadline server, which replaced real-time
/// throttling) guarantees ordinary and idle-priority tasks 50 ms of every second even when
/// real-time threads would take all of it: on a CPU where they got less, it runs them, ahead of
/// every real-time thread, until the 50 ms are used or none is ready. A spinner is always
/// ready, so it took most of them in one block. Measured on a k = 8 lab at 1 Mbit/s per link
/// (`perf record -e sched:sched_switch`, 2026-12-03), where the pool and the agents held both
/// CPUs: every agent and shaper stopped for 46–50 ms about once a second while the keep-awake
/// and watch threads ran, and the agents fell to 0.956–0.965 of their rate; without the
/// spinners the stops shrank to what the ordinary tasks had queued (13–37 ms) and the agents
/// reached 0.979–0.984. A first version that stepped aside only after a gap of 20 ms in its
/// clock reads still took 12–18 ms blocks: the kernel's share is judged over the second, and a
/// spinner that got short slices now and then was never starved by that rule. So the rule is
/// the share it got of its CPU over the last 100–200 ms ([`STARVED_WINDOW_NS`]): below
/// [`STARVED_SHARE_PERCENT`] the CPU is taken, there is nothing to keep awake or to watch, and
/// a spinner that steps aside leaves the kernel only the ordinary tasks' real work. Measured
/// against spinners that never step aside, alternating labs in one session (k = 8, 1 Mbit/s,
/// 256 KB permutation, six runs each): the agents' rate ratio median 0.978 against 0.964, CCT
/// over the bound median +10.6 % against +13.3 %. What is left is the ordinary tasks' own work
/// (the FIB mirrors: `ofan_control::mirror::RESYNC_QUIET`) and the hypervisor's stalls; such a
/// lab needs more CPU than the machine has, and its runs say so (not faithful).
///
/// A spinner back from its back-off has no history to judge itself by for a window, and the
/// kernel may be in the middle of that block: on 2026-12-04 (k = 8, 2 Mbit/s, `perf sched
/// timehist`) the run's watch on CPU 0 woke from its 200 ms and spun 47.9 ms of a 50-ms stop in
/// which every agent waited (their sender, woken on that CPU, was not moved to the other, where
/// only the pool ran), and a second earlier this CPU's keep-awake thread had done the same for
/// 47.9 ms to the agents' receiver. So a starved spinner goes back to spinning only after a back-off in which its
/// CPU had room ([`step_aside`]): k = 8 at 2 Mbit/s was then faithful in 6 of 6 alternating
/// runs, against 2 of 6 with the agents' grid alone (their worst departures 1.5–18 ms late
/// against 12–47 ms).
#[derive(Debug, Clone, Copy)]
pub struct Starvation {
    /// The older reading (wall, CPU ns): the share is judged since it.
    from: (u64, u64),
    /// The newer one, which becomes `from` a window later.
    mid: (u64, u64),
}

impl Starvation {
    /// Spinning from `wall_ns` (CLOCK_MONOTONIC) with `cpu_ns` of CPU time used.
    #[must_use]
    pub fn new(wall_ns: u64, cpu_ns: u64) -> Self {
        Self {
            from: (wall_ns, cpu_ns),
            mid: (wall_ns, cpu_ns),
        }
    }

    /// A reading of both clocks: whether it got less than [`STARVED_SHARE_PERCENT`] of its
    /// CPU over the last one to two [`STARVED_WINDOW_NS`] (not judged before one has passed).
    pub fn starved(&mut self, wall_ns: u64, cpu_ns: u64) -> bool {
        if wall_ns.saturating_sub(self.mid.0) >= STARVED_WINDOW_NS {
            self.from = self.mid;
            self.mid = (wall_ns, cpu_ns);
        }
        let span = wall_ns.saturating_sub(self.from.0);
        span >= STARVED_WINDOW_NS
            && u128::from(cpu_ns.saturating_sub(self.from.1)) * 100
                < u128::from(span) * u128::from(STARVED_SHARE_PERCENT)
    }

    /// It spins again from these readings after a sleep (the sleep is not judged).
    pub fn resumed(&mut self, wall_ns: u64, cpu_ns: u64) {
        *self = Self::new(wall_ns, cpu_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinner_spins_again_only_after_a_back_off_in_which_its_cpu_idled() {
        let span = 200_000_000;
        assert!(!room_after_back_off(Some(0), span), "a full CPU");
        assert!(
            !room_after_back_off(Some(19_999_999), span),
            "just under 10 %"
        );
        assert!(room_after_back_off(Some(20_000_000), span));
        assert!(room_after_back_off(Some(span), span));
        assert!(room_after_back_off(None, span), "no figures: as before");
    }

    #[test]
    fn a_cpus_idle_time_only_grows() {
        let Some(first) = cpu_idle_ns(0) else {
            eprintln!("skipped: no cpuidle driver for CPU 0 on this machine");
            return;
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(cpu_idle_ns(0).expect("CPU 0's idle time") >= first);
        assert_eq!(cpu_idle_ns(usize::MAX), None);
    }

    #[test]
    fn a_spinner_is_starved_below_its_share_over_a_window_and_not_before_one() {
        const MS: u64 = 1_000_000;
        // Spinning alone: it gets all of its CPU.
        let mut alone = Starvation::new(0, 0);
        for t in (MS..=500 * MS).step_by(MS as usize) {
            assert!(!alone.starved(t, t), "at {t}");
        }
        // Real-time work takes 95 % from 0 on: not judged within the first window …
        let mut taken = Starvation::new(0, 0);
        assert!(!taken.starved(99 * MS, 99 * MS / 20));
        // … and starved once one has passed.
        assert!(taken.starved(100 * MS, 5 * MS));
        // 11 % is above the limit; 9 % below, over a window that slides.
        let mut some = Starvation::new(0, 0);
        assert!(!some.starved(100 * MS, 11 * MS));
        assert!(!some.starved(150 * MS, 16 * MS), "16 of 150 ms: 10.7 %");
        assert!(some.starved(200 * MS, 20 * MS), "since 100 ms: 9 of 100 ms");
        // The first reading after a long gap (the deadline server runs it) judges the gap.
        let mut gap = Starvation::new(0, 0);
        assert!(!gap.starved(50 * MS, 50 * MS));
        assert!(gap.starved(900 * MS, 50 * MS + 10_000));
        // After a back-off it starts afresh: the sleep is not judged.
        gap.resumed(1_100 * MS, 50 * MS + 20_000);
        assert!(!gap.starved(1_150 * MS, 50 * MS + 20_000));
    }
}
