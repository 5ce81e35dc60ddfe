//! The kernel's network processing in a lab: `ksoftirqd` at real-time priority while labs run.
//!
//! A veth delivers a frame in the sender's softirq — until the kernel decides a CPU's softirq
//! load is too high and hands it to that CPU's `ksoftirqd` thread. From then on, every packet
//! that CPU's veths carry waits for `ksoftirqd` to run, and `ksoftirqd` is an ordinary task:
//! the lab's real-time threads (the switch pool, the host agents' senders) run first. Measured
//! on a k = 4 lab at 5 Mbit/s, permutation at load 1: the hosts' frames piled up behind the
//! starved thread and reached the edge switches in bursts larger than their fill rings — 711
//! frames dropped in one of three runs (each such run costs a retransmission timeout, CCT
//! +2 181 %); with `ksoftirqd` at SCHED_FIFO 45, above the pool (40) and the agents (then 30,
//! now 42), three runs of three dropped nothing and came within 3–4.4 % of the bound.
//!
//! `up --tune-machine` raises every `ksoftirqd/N` (recording the policy it found in
//! `/run/ofan/ksoftirqd.json`, once, while any lab runs); `down` of the last lab — and
//! `down --all`/`reset`, the next `up` — puts back what was recorded. Labs built without the
//! flag, or with `--rt-priority 0`, leave the kernel's threads alone.

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::machine::Record;
use ofan_lab_sys::lab as sys;

/// SCHED_FIFO priority of `ksoftirqd` while labs run: above the switch group's pool
/// ([`super::spec::GROUP_RT_PRIORITY`]) and the agents' senders.
pub const KSOFTIRQD_RT_PRIORITY: u8 = 45;

const RECORD: Record = Record("/run/ofan/ksoftirqd.json");

/// One `ksoftirqd` thread as it was before the first lab raised it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Original {
    pid: u32,
    policy: i32,
    priority: i32,
}

/// The pids of the `ksoftirqd/N` threads.
fn ksoftirqd_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim().starts_with("ksoftirqd/"))
        })
        .collect()
}

/// Runs every `ksoftirqd` at SCHED_FIFO `priority`, recording first (once) how they ran.
///
/// # Errors
/// The record cannot be written; a thread's policy cannot be read or set.
pub fn raise(priority: u8) -> anyhow::Result<()> {
    let pids = ksoftirqd_pids();
    if !RECORD.exists() {
        let originals = pids
            .iter()
            .map(|&pid| {
                let (policy, priority) = sys::scheduler_of(pid)
                    .with_context(|| format!("cannot read the scheduling of ksoftirqd {pid}"))?;
                Ok(Original {
                    pid,
                    policy,
                    priority,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        RECORD.keep(&originals)?;
    }
    for pid in pids {
        sys::set_scheduler(pid, libc::SCHED_FIFO, i32::from(priority))
            .with_context(|| format!("cannot make ksoftirqd {pid} SCHED_FIFO {priority}"))?;
    }
    Ok(())
}

/// Puts every recorded `ksoftirqd` back as it was, if no lab is left; returns how many.
///
/// # Errors
/// The record cannot be read or removed.
pub fn restore_if_no_lab() -> anyhow::Result<usize> {
    let restored = RECORD.put_back_if_no_lab(|originals: Vec<Original>| {
        // A thread gone since (a CPU taken offline) has nothing to restore.
        Ok(originals
            .iter()
            .filter(|original| {
                sys::set_scheduler(original.pid, original.policy, original.priority).is_ok()
            })
            .count())
    })?;
    Ok(restored.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cpu_has_a_ksoftirqd() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        // Some containers hide kernel threads; where they are visible, there is one per CPU.
        let pids = ksoftirqd_pids();
        assert!(
            pids.is_empty() || pids.len() >= cpus,
            "{pids:?} for {cpus} CPUs"
        );
    }

    #[test]
    fn the_record_round_trips() {
        let originals = vec![Original {
            pid: 14,
            policy: 0,
            priority: 0,
        }];
        let text = serde_json::to_string(&originals).unwrap();
        assert_eq!(
            serde_json::from_str::<Vec<Original>>(&text).unwrap(),
            originals
        );
    }
}
