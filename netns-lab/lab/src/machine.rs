//! The machine-wide settings a lab built with `up --tune-machine` changes while it runs
//! ([`super::neighbours`], [`super::softirq`], [`super::rt_throttle`]; without the flag it
//! changes none), and their records: the first lab to change a setting writes what it found
//! under `/run/ofan`, later labs leave that record alone, and `down` of the last lab (and
//! `down --all`, `reset`, and the next `up` when no lab is left) puts it back and removes the
//! record — also after a crash, since the record outlives the process that wrote it. Each
//! setting is put back on its own: one that cannot be (its record stays for the next try)
//! keeps no other changed.

use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Where one setting's original value is kept while labs run.
#[derive(Debug, Clone, Copy)]
pub struct Record(pub &'static str);

impl Record {
    /// Whether a lab recorded the original (and has not put it back).
    pub fn exists(self) -> bool {
        Path::new(self.0).exists()
    }

    /// Writes `original` unless a record exists (an earlier lab's); returns whether it wrote.
    ///
    /// # Errors
    /// The record cannot be written.
    pub fn keep<T: Serialize>(self, original: &T) -> anyhow::Result<bool> {
        if self.exists() {
            return Ok(false);
        }
        let path = Path::new(self.0);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, serde_json::to_string(original)? + "\n")
            .with_context(|| format!("cannot write {}", self.0))?;
        Ok(true)
    }

    /// Removes a record this lab wrote for a change that then failed (nothing to put back).
    pub fn forget(self) {
        let _ = std::fs::remove_file(self.0);
    }

    /// If no lab is left and a record exists: `put_back` the original, then remove the
    /// record; returns what `put_back` returned.
    ///
    /// # Errors
    /// The record cannot be read, parsed or removed; `put_back` failed (the record stays,
    /// for the next `down` to try again).
    pub fn put_back_if_no_lab<T: DeserializeOwned, R>(
        self,
        put_back: impl FnOnce(T) -> anyhow::Result<R>,
    ) -> anyhow::Result<Option<R>> {
        if !super::state::StateDir::all_labs().is_empty() {
            return Ok(None);
        }
        let text = match std::fs::read_to_string(self.0) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error).context(self.0),
        };
        let original: T = serde_json::from_str(&text).with_context(|| format!("bad {}", self.0))?;
        let put = put_back(original)?;
        std::fs::remove_file(self.0).with_context(|| format!("cannot remove {}", self.0))?;
        Ok(Some(put))
    }
}

/// Puts back every machine-wide setting the labs changed, if no lab is left — each on its
/// own: one that cannot be put back (its record stays for the next `down` or `reset`) does not
/// keep the others changed.
///
/// # Errors
/// Every setting that could not be put back, by name.
pub fn restore_if_no_lab() -> anyhow::Result<()> {
    let failed: Vec<String> = [
        (
            "ksoftirqd policies",
            super::softirq::restore_if_no_lab().map(drop),
        ),
        (
            "kernel.sched_rt_runtime_us",
            super::rt_throttle::restore_if_no_lab().map(drop),
        ),
        (
            "neighbour thresholds",
            super::neighbours::restore_if_no_lab().map(drop),
        ),
    ]
    .into_iter()
    .filter_map(|(what, result)| result.err().map(|error| format!("{what}: {error:#}")))
    .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        anyhow::bail!(
            "could not put back what the labs changed (tried again at the next down or reset): {}",
            failed.join("; ")
        )
    }
}
