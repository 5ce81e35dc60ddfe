//! The kernel's real-time throttling while labs run: lifted where the fair server replaces it.
//!
//! `kernel.sched_rt_runtime_us` (950 000 of every `sched_rt_period_us`, 1 000 000, unless
//! changed) caps what real-time tasks may take of the machine's CPUs: once they ran 950 ms of
//! a second — borrowed across CPUs, so when **every** CPU is that full — they are throttled
//! for the rest of the second and ordinary tasks run, or the CPUs idle. A lab's data path is
//! real-time (the switch pool, the agents, `ksoftirqd`, [`super::softirq`]), and a lab near the
//! machine's capacity keeps both CPUs that full: measured on 2026-12-04 (k = 4, 20 Mbit/s,
//! 4 MB permutation, runs of 1.9 s), every run lost 10–41 ms with every agent at once (0 of 4
//! faithful), and `perf sched` showed both CPUs **idle** for 32.6 ms while both agent
//! threads waited to run. A 1 MB permutation at 20 Mbit/s lasts 0.45 s, under the second the
//! budget is counted over, which is why short runs passed.
//!
//! Kernels from 6.12 on keep ordinary tasks from starving another way, the fair class's
//! deadline server (50 ms of every second on each CPU, also where real-time tasks would
//! take everything), and drop the throttling unless built with `CONFIG_RT_GROUP_SCHED` (as the
//! development machine's 6.18 is). There, `sched_rt_runtime_us = -1` lifts the throttling and
//! leaves the fair server's guarantee in place. So `up --tune-machine` lifts it on such
//! kernels — found by looking for the fair server's debug directory, the release only where
//! that cannot be done ([`kernel_has_fair_server`]) — recording first, once while any lab runs,
//! what it found in `/run/ofan/rt-runtime.json`; `down` of the last lab — and `down --all`,
//! `reset`, the next `up` — puts it back, as for `ksoftirqd`. Older kernels keep it: without
//! the fair server, lifting it would let a full lab starve every ordinary task (routing
//! daemons, the lab's control threads, a shell). Labs built without `--tune-machine`, or with
//! `--rt-priority 0` (nothing real-time), leave it alone: their runs longer than a second that
//! fill both CPUs can lose the rest of a second (docs/lab.md, The machine's settings).

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::machine::Record;

const SYSCTL: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const OS_RELEASE: &str = "/proc/sys/kernel/osrelease";
const RECORD: Record = Record("/run/ofan/rt-runtime.json");

/// `sched_rt_runtime_us` without a limit.
const UNLIMITED: i64 = -1;

/// The first kernel with the fair class's deadline server.
const FAIR_SERVER_SINCE: (u32, u32) = (6, 12);

/// What the first lab found, put back by the last `down`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Original {
    sched_rt_runtime_us: i64,
}

/// What [`lift`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lifted {
    /// Throttling was on at `from` µs a period and is off now.
    Lifted { from: i64 },
    /// Already off (a lab before, or the machine's own setting).
    AlreadyOff,
    /// Kept: the kernel has no fair server.
    Kept,
    /// The kernel refused (e.g. `/proc/sys` read-only in a container): the lab runs throttled.
    Refused { error: String },
}

/// Whether kernel `release` (`uname -r`, e.g. `6.18.44-fc`) should have the fair server (the
/// guess where [`probe_fair_server`] cannot look).
fn has_fair_server(release: &str) -> bool {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= FAIR_SERVER_SINCE,
        _ => false,
    }
}

fn parse_runtime(text: &str) -> anyhow::Result<i64> {
    text.trim()
        .parse()
        .with_context(|| format!("{SYSCTL}: not a number: {text:?}"))
}

/// The scheduler's debug directory, where a kernel with the fair server has `fair_server/`.
const SCHED_DEBUG: &str = "/sys/kernel/debug/sched";

/// Whether the running kernel has the fair server, where tuned labs lift the throttling:
/// [probed](probe_fair_server) where debugfs can be looked at, else guessed from the release.
///
/// # Errors
/// Neither probe nor release could tell (the release cannot be read).
pub fn kernel_has_fair_server() -> anyhow::Result<bool> {
    if let Some(has) = probe_fair_server() {
        return Ok(has);
    }
    let release =
        std::fs::read_to_string(OS_RELEASE).with_context(|| format!("cannot read {OS_RELEASE}"))?;
    Ok(has_fair_server(release.trim()))
}

/// Looks for the fair server's debug directory (`/sys/kernel/debug/sched/fair_server`): where
/// debugfs is mounted, there; else in a debugfs mounted for the look in a private mount
/// namespace (`unshare --mount`: the machine's mounts stay as they are). `None`: no way to
/// look (no debugfs in this kernel, no `unshare`, not root).
fn probe_fair_server() -> Option<bool> {
    let dir = std::path::Path::new(SCHED_DEBUG);
    if dir.is_dir() {
        return Some(dir.join("fair_server").is_dir());
    }
    let script = format!(
        "mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null || exit 2; \
         test -d {SCHED_DEBUG} || exit 2; test -d {SCHED_DEBUG}/fair_server"
    );
    let status = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    match status.code() {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}

/// `kernel.sched_rt_runtime_us` now (-1: no throttling).
///
/// # Errors
/// The setting cannot be read or holds no number.
pub fn runtime_us() -> anyhow::Result<i64> {
    parse_runtime(
        &std::fs::read_to_string(SYSCTL).with_context(|| format!("cannot read {SYSCTL}"))?,
    )
}

fn write_runtime(value: i64) -> anyhow::Result<()> {
    std::fs::write(SYSCTL, value.to_string())
        .with_context(|| format!("cannot write {SYSCTL} = {value}"))
}

/// Lifts real-time throttling where the kernel has the fair server, recording first (once,
/// while any lab runs) what it found.
///
/// # Errors
/// The setting or the kernel's release cannot be read, or the record cannot be written. A
/// refused write is not an error ([`Lifted::Refused`]).
pub fn lift() -> anyhow::Result<Lifted> {
    if !kernel_has_fair_server()? {
        return Ok(Lifted::Kept);
    }
    let from = runtime_us()?;
    if from == UNLIMITED {
        return Ok(Lifted::AlreadyOff);
    }
    let recorded_here = RECORD.keep(&Original {
        sched_rt_runtime_us: from,
    })?;
    match write_runtime(UNLIMITED) {
        Ok(()) => Ok(Lifted::Lifted { from }),
        Err(error) => {
            if recorded_here {
                RECORD.forget();
            }
            Ok(Lifted::Refused {
                error: format!("{error:#}"),
            })
        }
    }
}

/// Puts the recorded setting back if no lab is left; returns it if it did.
///
/// # Errors
/// The record cannot be read or removed, the setting cannot be written.
pub fn restore_if_no_lab() -> anyhow::Result<Option<i64>> {
    RECORD.put_back_if_no_lab(|original: Original| {
        write_runtime(original.sched_rt_runtime_us)?;
        Ok(original.sched_rt_runtime_us)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fair_server_came_with_6_12() {
        for release in ["6.12.0", "6.18.44-fc-v1252", "7.0.1", "6.12-rc1"] {
            assert!(has_fair_server(release), "{release}");
        }
        for release in ["6.11.9", "6.1.0-27-amd64", "5.15.0", "4.19", "", "six"] {
            assert!(!has_fair_server(release), "{release}");
        }
    }

    #[test]
    fn the_probe_agrees_with_the_release_where_it_can_look() {
        // Unprivileged (or without debugfs) it cannot look, and says so; as root on a kernel
        // the release names, it must find what the release says.
        let Some(probed) = probe_fair_server() else {
            // CI runs as root on a kernel with debugfs: there it must look.
            assert!(
                std::env::var("CI").is_err(),
                "cannot look for the fair server under CI"
            );
            eprintln!("skipped: cannot look for the fair server here (not root, or no debugfs)");
            return;
        };
        let release = std::fs::read_to_string(OS_RELEASE).unwrap();
        assert_eq!(probed, has_fair_server(release.trim()), "{release}");
    }

    #[test]
    fn the_setting_parses_with_its_newline_and_its_unlimited_value() {
        assert_eq!(parse_runtime("950000\n").unwrap(), 950_000);
        assert_eq!(parse_runtime("-1\n").unwrap(), UNLIMITED);
        assert!(parse_runtime("").is_err());
        assert!(parse_runtime("lots").is_err());
    }

    #[test]
    fn the_record_round_trips() {
        let original = Original {
            sched_rt_runtime_us: 950_000,
        };
        let text = serde_json::to_string(&original).unwrap();
        assert_eq!(serde_json::from_str::<Original>(&text).unwrap(), original);
    }
}
