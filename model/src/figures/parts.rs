//! Sharded figures: a shard runs every N-th run of a figure ([`run_shard`]), and [`merge`]
//! joins the shards' parts into the figure the unsharded sweep makes, number for number.

use super::*;

/// Runs shard `shard` of the runs of `spec` (run `i`, in the order of the jobs and their
/// seeds, belongs to shard `i mod N + 1`) and returns its part of the figure, for
/// [`merge`] to join with the others.
///
/// # Errors
/// The first of the shard's runs that fails to set up.
pub fn run_shard(
    spec: &FigureSpec,
    settings: &Sweep,
    shard: Shard,
) -> Result<FigurePart, ModelError> {
    let configs = run_configs(&spec.jobs(&settings.base), settings.seeds);
    let total_runs = configs.len();
    let indices: Vec<usize> = shard.indices(total_runs).collect();
    let mine: Vec<ModelConfig> = indices.iter().map(|&i| configs[i].clone()).collect();
    let metrics = measure(&mine, settings.threads)?;
    Ok(FigurePart {
        schema: FigurePart::SCHEMA.into(),
        spec: spec.clone(),
        base: settings.base.clone(),
        seeds: settings.seeds,
        shard,
        total_runs,
        runs: indices
            .into_iter()
            .zip(metrics)
            .map(|(index, metrics)| PartRun { index, metrics })
            .collect(),
    })
}

/// One shard's share of a figure's runs ([`run_shard`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigurePart {
    /// [`FigurePart::SCHEMA`].
    pub schema: String,
    /// The figure.
    pub spec: FigureSpec,
    /// The configuration every run starts from.
    pub base: ModelConfig,
    /// Seeds per point.
    pub seeds: u64,
    /// Which shard of how many.
    pub shard: Shard,
    /// Runs of the whole figure.
    pub total_runs: usize,
    /// This shard's runs.
    pub runs: Vec<PartRun>,
}

impl FigurePart {
    /// Schema tag of a figure part.
    pub const SCHEMA: &'static str = "ofan.figure-part/1";
}

/// One run of a shard: its index among the figure's runs and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartRun {
    /// Index in the order of the figure's jobs and seeds.
    pub index: usize,
    /// Metric name → value.
    pub metrics: RunMetrics,
}

/// Joins the parts of one sharded figure into the figure the unsharded sweep makes, number for
/// number.
///
/// # Errors
/// [`ModelError::Parts`] when the parts are not exactly the shards `1..=N` of one figure
/// (same figure, configuration, seeds and shard count), or do not hold each run once.
pub fn merge(parts: Vec<FigurePart>) -> Result<Figure, ModelError> {
    let first = parts.first().ok_or_else(|| parts_error("no parts"))?;
    let (spec, base, seeds, count, total) = (
        first.spec.clone(),
        first.base.clone(),
        first.seeds,
        first.shard.count,
        first.total_runs,
    );
    let mut shards = vec![false; count as usize];
    let mut runs: Vec<Option<RunMetrics>> = vec![None; total];
    for part in parts {
        if part.schema != FigurePart::SCHEMA {
            return Err(parts_error(format!(
                "schema {} is not {}",
                part.schema,
                FigurePart::SCHEMA
            )));
        }
        if part.spec != spec || part.base != base || part.seeds != seeds {
            return Err(parts_error(format!(
                "shard {} is of another figure, configuration or seed count",
                part.shard
            )));
        }
        if part.shard.count != count || part.total_runs != total {
            return Err(parts_error(format!(
                "shard {} of {} runs is not one of {count} shards of {total} runs",
                part.shard, part.total_runs
            )));
        }
        let seen = &mut shards[part.shard.index as usize - 1];
        if std::mem::replace(seen, true) {
            return Err(parts_error(format!("shard {} given twice", part.shard)));
        }
        for run in part.runs {
            let slot = runs
                .get_mut(run.index)
                .ok_or_else(|| parts_error(format!("run {} out of range", run.index)))?;
            if slot.replace(run.metrics).is_some() {
                return Err(parts_error(format!("run {} in two shards", run.index)));
            }
        }
    }
    if let Some(missing) = shards.iter().position(|&seen| !seen) {
        return Err(parts_error(format!(
            "shard {}/{count} missing",
            missing + 1
        )));
    }
    let metrics = runs
        .into_iter()
        .enumerate()
        .map(|(index, run)| run.ok_or_else(|| parts_error(format!("run {index} missing"))))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(spec.finish(&base, seeds, metrics))
}

pub(super) fn parts_error(reason: impl Into<String>) -> ModelError {
    ModelError::Parts {
        reason: reason.into(),
    }
}
