//! How far the collective running on a lab has come, as the lab's live view shows it.
//!
//! The agents run in the hosts' namespaces and tell only the orchestrating `run` process when
//! they finish (each receiver writes its done file once every flow *to* it has arrived); the
//! view runs in another process. So `run` writes what it knows to `progress.json` in the lab's
//! state directory whenever it changes, and removes it when the repetition ends
//! ([`ProgressFile`], also on an error). A receiver done means every flow into it is done, so
//! `flows_done` counts the flows into finished receivers: exact for a permutation or a ring
//! (one flow per receiver), a lower bound for all-to-all until its last receivers finish.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use ofan_lab_agent::collective::Plan;

/// The file's name in the lab's state directory.
pub const PROGRESS_FILE: &str = "progress.json";

/// What `run` writes while a repetition runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunProgress {
    /// The collective (`permutation`, `all-to-all`, `ring`, `matrix`, `ring-allreduce`, …).
    pub collective: String,
    /// The pid of the `run` process (a file left by a killed run names a dead process).
    pub pid: u32,
    /// Hosts taking part.
    pub hosts: usize,
    /// Hosts that received every flow to them.
    pub hosts_done: usize,
    /// Flows in the plan.
    pub flows: usize,
    /// Flows into finished receivers.
    pub flows_done: usize,
    /// The repetition's lower bound on its completion time, seconds.
    pub expected_s: f64,
    /// The hosts' congestion control (`none`, `dctcp`, `nscc`, `mswift`).
    #[serde(default)]
    pub cc: ofan_transport::CcKind,
}

impl RunProgress {
    /// The progress of `plan`, whose hosts run congestion control `cc`, once the receivers in
    /// `done` (flags by host index) have finished.
    #[must_use]
    pub fn of(
        plan: &Plan,
        done: &[bool],
        pid: u32,
        expected_s: f64,
        cc: ofan_transport::CcKind,
    ) -> Self {
        let finished = |host: u32| done.get(host as usize).copied().unwrap_or(false);
        Self {
            collective: plan.kind.name().to_owned(),
            pid,
            hosts: plan.hosts.len(),
            hosts_done: done.iter().filter(|d| **d).count(),
            flows: plan.flows.len(),
            flows_done: plan.flows.iter().filter(|f| finished(f.dst)).count(),
            expected_s,
            cc,
        }
    }
}

/// The progress file of one repetition: written on [`ProgressFile::write`], removed on drop.
#[derive(Debug)]
pub struct ProgressFile {
    path: PathBuf,
    last: Option<RunProgress>,
}

impl ProgressFile {
    /// The file in state directory `dir` (nothing is written yet).
    #[must_use]
    pub fn new(dir: &Path) -> Self {
        Self {
            path: dir.join(PROGRESS_FILE),
            last: None,
        }
    }

    /// Writes `progress` when it differs from what was written last (a new file renamed over
    /// the old: a reader never sees half of one). Best effort: the view is not worth failing
    /// a run for.
    pub fn write(&mut self, progress: RunProgress) {
        if self.last.as_ref() == Some(&progress) {
            return;
        }
        let staged = self.path.with_extension("json.new");
        let text = serde_json::to_string(&progress).unwrap_or_default();
        if std::fs::write(&staged, text).is_ok() {
            let _ = std::fs::rename(&staged, &self.path);
        }
        self.last = Some(progress);
    }
}

impl Drop for ProgressFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The progress in state directory `dir`, if a live `run` wrote one.
#[must_use]
pub fn read(dir: &Path) -> Option<RunProgress> {
    let text = std::fs::read_to_string(dir.join(PROGRESS_FILE)).ok()?;
    let progress: RunProgress = serde_json::from_str(&text).ok()?;
    Path::new(&format!("/proc/{}", progress.pid))
        .exists()
        .then_some(progress)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_lab_agent::collective::{CollectiveKind, PlanFlow, PlanHost};

    #[test]
    fn flows_into_finished_receivers_are_done() {
        let hosts = (0..3)
            .map(|i| PlanHost {
                name: format!("h{i}"),
                planes: Vec::new(),
                address: std::net::Ipv4Addr::new(10, 0, 0, i),
            })
            .collect();
        let flow = |src, dst| PlanFlow::new(src, dst, 1);
        let plan = Plan {
            collective: 1,
            kind: CollectiveKind::AllToAll,
            hosts,
            flows: vec![flow(0, 1), flow(0, 2), flow(1, 2), flow(2, 0)],
            phases: Vec::new(),
        };
        let progress = RunProgress::of(
            &plan,
            &[false, false, true],
            7,
            1.5,
            ofan_transport::CcKind::None,
        );
        assert_eq!(progress.collective, "all-to-all");
        assert_eq!((progress.hosts_done, progress.hosts), (1, 3));
        assert_eq!((progress.flows_done, progress.flows), (2, 4));
        assert_eq!(progress.cc, ofan_transport::CcKind::None);
    }

    #[test]
    fn the_file_is_written_whole_and_removed_on_drop() {
        let dir = std::env::temp_dir().join(format!("ofan-progress-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let progress = RunProgress {
            collective: "ring".into(),
            pid: std::process::id(),
            hosts: 2,
            hosts_done: 1,
            flows: 2,
            flows_done: 1,
            expected_s: 0.5,
            cc: ofan_transport::CcKind::Nscc,
        };
        {
            let mut file = ProgressFile::new(&dir);
            file.write(progress.clone());
            assert_eq!(read(&dir), Some(progress));
        }
        assert_eq!(read(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
