//! Sweeps split into independent processes: a sweep's runs are numbered in a fixed order (a
//! figure's jobs and their seeds, or a `run`'s seeds), shard `I/N` makes the runs `i` with
//! `i mod N = I − 1` and writes them as a *part*, and [`merge_runs`] or
//! [`figures::merge`](crate::figures::merge) join the parts of all `N` shards into exactly
//! what the unsharded sweep makes. Every run is deterministic, so which process made it, and
//! when, changes nothing.
//!
//! Round-robin keeps shards even: the runs of one point (its seeds) and the points of one
//! series, which cost about the same, go to different shards.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::figures::FigurePart;
use crate::report::RunReport;

/// Shard `index` of `count` (1-based): `I/N` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, `1..=count`.
    pub index: u32,
    /// How many shards.
    pub count: u32,
}

impl Shard {
    /// The whole sweep: shard 1 of 1.
    pub const ALL: Self = Self { index: 1, count: 1 };

    /// The indices of the runs, among `total`, that this shard makes.
    pub fn indices(self, total: usize) -> impl Iterator<Item = usize> {
        (self.index as usize - 1..total).step_by(self.count as usize)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ModelError;

    /// `I/N` with `1 ≤ I ≤ N`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || ModelError::InvalidConfig {
            field: "shard",
            value: text.to_owned(),
            reason: "expected I/N with 1 <= I <= N, e.g. 2/8",
        };
        let (index, count) = text.split_once('/').ok_or_else(invalid)?;
        let index: u32 = index.trim().parse().map_err(|_| invalid())?;
        let count: u32 = count.trim().parse().map_err(|_| invalid())?;
        if index == 0 || index > count {
            return Err(invalid());
        }
        Ok(Self { index, count })
    }
}

/// One shard's share of the seeds of a `run` (seed `base.seed + i` is run `i`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPart {
    /// [`RunPart::SCHEMA`].
    pub schema: String,
    /// The configuration of every run; `seed` is the first seed.
    pub base: ModelConfig,
    /// Seeds in the whole sweep.
    pub seeds: u64,
    /// Which shard of how many.
    pub shard: Shard,
    /// This shard's reports, by seed.
    pub reports: Vec<RunReport>,
}

impl RunPart {
    /// Schema tag of a run part.
    pub const SCHEMA: &'static str = "ofan.run-part/1";

    /// The configurations of the runs `shard` makes among seeds `base.seed ..` (`seeds` of
    /// them).
    #[must_use]
    pub fn configs(base: &ModelConfig, seeds: u64, shard: Shard) -> Vec<ModelConfig> {
        shard
            .indices(seeds as usize)
            .map(|i| ModelConfig {
                seed: base.seed + i as u64,
                ..base.clone()
            })
            .collect()
    }
}

/// A part file: of a figure or of a `run`.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Of a figure.
    Figure(FigurePart),
    /// Of a `run --seeds`.
    Run(RunPart),
}

impl Part {
    /// Reads a part file's text, whichever kind it is (by its `schema`).
    ///
    /// # Errors
    /// [`ModelError::Parts`] when the text is not a part of a known schema.
    pub fn from_json(text: &str) -> Result<Self, ModelError> {
        #[derive(Deserialize)]
        struct Schema {
            schema: String,
        }
        let invalid = |error: serde_json::Error| ModelError::Parts {
            reason: format!("not a part file: {error}"),
        };
        let schema: Schema = serde_json::from_str(text).map_err(invalid)?;
        match schema.schema.as_str() {
            FigurePart::SCHEMA => Ok(Self::Figure(serde_json::from_str(text).map_err(invalid)?)),
            RunPart::SCHEMA => Ok(Self::Run(serde_json::from_str(text).map_err(invalid)?)),
            other => Err(ModelError::Parts {
                reason: format!(
                    "schema {other} is neither {} nor {}",
                    FigurePart::SCHEMA,
                    RunPart::SCHEMA
                ),
            }),
        }
    }
}

/// Joins the parts of one sharded `run --seeds` into its reports, by seed: what the unsharded
/// run writes.
///
/// # Errors
/// [`ModelError::Parts`] when the parts are not exactly the shards `1..=N` of one run (same
/// configuration, seeds and shard count), or do not hold each seed once.
pub fn merge_runs(parts: Vec<RunPart>) -> Result<Vec<RunReport>, ModelError> {
    let error = |reason: String| ModelError::Parts { reason };
    let first = parts.first().ok_or_else(|| error("no parts".into()))?;
    let (base, seeds, count) = (first.base.clone(), first.seeds, first.shard.count);
    let mut shards = vec![false; count as usize];
    let mut reports: Vec<Option<RunReport>> = vec![None; seeds as usize];
    for part in parts {
        if part.schema != RunPart::SCHEMA || part.base != base || part.seeds != seeds {
            return Err(error(format!(
                "shard {} is of another run (configuration or seed count)",
                part.shard
            )));
        }
        if part.shard.count != count {
            return Err(error(format!(
                "shard {} is not one of {count} shards",
                part.shard
            )));
        }
        if std::mem::replace(&mut shards[part.shard.index as usize - 1], true) {
            return Err(error(format!("shard {} given twice", part.shard)));
        }
        let indices: Vec<usize> = part.shard.indices(seeds as usize).collect();
        if indices.len() != part.reports.len() {
            return Err(error(format!(
                "shard {} holds {} reports, not {}",
                part.shard,
                part.reports.len(),
                indices.len()
            )));
        }
        for (index, report) in indices.into_iter().zip(part.reports) {
            let seed = report.model().map(|model| model.config.seed);
            if seed != Some(base.seed + index as u64) {
                return Err(error(format!(
                    "shard {}: report {index} is not of seed {}",
                    part.shard,
                    base.seed + index as u64
                )));
            }
            reports[index] = Some(report);
        }
    }
    if let Some(missing) = shards.iter().position(|&seen| !seen) {
        return Err(error(format!("shard {}/{count} missing", missing + 1)));
    }
    Ok(reports
        .into_iter()
        .map(|r| r.expect("every shard's seeds"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_runs_round_robin_and_cover_them_once() {
        let shard = |text: &str| text.parse::<Shard>().expect("valid");
        assert_eq!(shard("2/3").indices(8).collect::<Vec<_>>(), [1, 4, 7]);
        let mut all: Vec<usize> = (1..=3)
            .flat_map(|i| Shard { index: i, count: 3 }.indices(10))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(Shard::ALL.indices(2).count(), 2);
        for bad in ["0/3", "4/3", "3", "a/b", "1/0"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(shard(" 1 / 4").to_string(), "1/4");
    }
}
