//! The results directory: `results.json` (every repetition and the per-cell summaries),
//! `runs.csv`, `summary.csv`, and SVG plots.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use ofan_model::report::Stage;
use ofan_model::svg::{LinePlot, Series};
use serde::{Deserialize, Serialize};

use super::metrics::lab_of;
use super::summary::{size_label, stage_key, Summarized};

/// `results.json`.
#[derive(Debug, Serialize)]
struct ResultsFile<'a> {
    /// `"ofan.lab-results/1"`.
    schema: &'static str,
    /// `run` or `compare`.
    command: &'a str,
    #[serde(flatten)]
    results: &'a Summarized,
}

/// The schema name of `results.json`.
pub const RESULTS_SCHEMA: &str = "ofan.lab-results/1";

/// `results.json` as read back.
#[derive(Debug, Deserialize)]
struct ReadResults {
    schema: String,
    #[serde(flatten)]
    results: Summarized,
}

/// Reads the `results.json` that `run` or `compare` wrote: `path` is the file or the directory
/// holding it.
///
/// # Errors
/// No such file; not a results file of this schema.
pub fn read_results(path: &Path) -> anyhow::Result<Summarized> {
    let file = if path.is_dir() {
        path.join("results.json")
    } else {
        path.to_owned()
    };
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let read: ReadResults = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a results file of ofan-lab", file.display()))?;
    anyhow::ensure!(
        read.schema == RESULTS_SCHEMA,
        "{}: schema {}, expected {RESULTS_SCHEMA}",
        file.display(),
        read.schema
    );
    Ok(read.results)
}

/// Writes `results.json`, `runs.csv` and `summary.csv` into `dir`.
///
/// # Errors
/// When a file cannot be written.
pub fn write_results(dir: &Path, command: &str, results: &Summarized) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(&ResultsFile {
        schema: RESULTS_SCHEMA,
        command,
        results,
    })?;
    write(&dir.join("results.json"), &json)?;
    write(&dir.join("runs.csv"), &runs_csv(results))?;
    write(&dir.join("summary.csv"), &summary_csv(results))
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// One row per repetition.
#[must_use]
pub fn runs_csv(results: &Summarized) -> String {
    let stages = Stage::ALL;
    let mut out = String::from(
        "variant,lb,host_lb,message_bytes,repetition,seed,load,link_rate_bps,cct_s,lower_bound_s,\
         cct_increase,utilization,max_queue_packets,max_queue_bytes",
    );
    for stage in stages {
        let key = stage_key(stage);
        let _ = write!(
            out,
            ",max_queue.{key},mean_queue.{key},utilization.{key},link_overload.{key}"
        );
    }
    out.push_str(
        ",drops,retransmissions,data_sent,data_delivered,duplicates,missing,ce_marks,exactly_once,\
         unaccounted,shaper_late_p99_packet_times,agent_rate_ratio_min,emulation_drops,route_changes,faithful,\
         out_of_order,reorder_distance_max\n",
    );
    for run in &results.runs {
        let lab = lab_of(run);
        let s = &lab.setup;
        let variant = results
            .cells
            .iter()
            .find(|c| c.lb == s.lb && c.host_lb == s.host_lb)
            .map_or_else(|| s.lb.clone(), |c| c.variant.clone());
        let _ = write!(
            out,
            "{variant},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            s.lb,
            s.host_lb,
            s.message_bytes,
            s.repetition,
            s.seed,
            s.load,
            s.link_rate_bps,
            opt(run.cct_ps.map(|c| c as f64 * 1e-12)),
            run.lower_bound_ps as f64 * 1e-12,
            opt(run.cct_increase),
            run.utilization,
            run.max_queue_packets,
            run.max_queue_bytes,
        );
        for stage in stages {
            match run.stage(stage) {
                Some(q) => {
                    let _ = write!(
                        out,
                        ",{},{},{},{}",
                        q.max_packets, q.mean_packets, q.utilization, q.link_overload
                    );
                }
                None => out.push_str(",,,,"),
            }
        }
        let (d, p) = (&lab.delivery, &run.packets);
        let _ = writeln!(
            out,
            ",{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            run.drops.total,
            p.retransmissions,
            p.data_sent,
            p.data_delivered,
            p.duplicate_data,
            d.missing,
            p.ecn_marks,
            d.exactly_once,
            lab.census.unaccounted,
            lab.fidelity.shaper_late_p99_packet_times,
            lab.fidelity.agent_rate_ratio_min,
            lab.fidelity.emulation_drops,
            lab.fidelity.route_changes,
            lab.fidelity.faithful,
            run.reordering.out_of_order,
            run.reordering.max_distance,
        );
    }
    out
}

/// One row per cell and metric: mean, SEM, min, max, runs.
#[must_use]
pub fn summary_csv(results: &Summarized) -> String {
    let mut out = String::from("variant,lb,host_lb,message_bytes,metric,mean,sem,min,max,runs\n");
    for cell in &results.cells {
        for (metric, s) in &cell.metrics {
            let _ = writeln!(
                out,
                "{},{},{},{},{metric},{},{},{},{},{}",
                cell.variant,
                cell.lb,
                cell.host_lb,
                cell.message_bytes,
                s.mean,
                s.sem,
                s.min,
                s.max,
                s.runs
            );
        }
    }
    out
}

fn variants(results: &Summarized) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for cell in &results.cells {
        if !names.contains(&cell.variant) {
            names.push(cell.variant.clone());
        }
    }
    names
}

fn sizes(results: &Summarized) -> Vec<u64> {
    let mut sizes: Vec<u64> = results.cells.iter().map(|c| c.message_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// Draws the plots that the results support and returns their paths: max queue vs message
/// size (two or more sizes), CCT increase per variant, max queue per stage (largest size).
///
/// # Errors
/// When a file cannot be written.
pub fn plots(dir: &Path, results: &Summarized) -> anyhow::Result<Vec<PathBuf>> {
    let names = variants(results);
    let sizes = sizes(results);
    let mut written = Vec::new();
    let mean = |variant: &str, bytes: u64, metric: &str| {
        results
            .cells
            .iter()
            .find(|c| c.variant == variant && c.message_bytes == bytes)
            .and_then(|c| c.mean(metric))
    };

    if sizes.len() >= 2 {
        let plot = LinePlot {
            title: "Max queue vs message size (paper Fig. 4)".to_owned(),
            x_label: "message size (bytes)".to_owned(),
            y_label: "max queue (KB)".to_owned(),
            log_x: true,
            log_y: true,
            x_categories: Vec::new(),
            series: names
                .iter()
                .map(|name| Series {
                    name: name.clone(),
                    points: sizes
                        .iter()
                        .filter_map(|&b| Some((b as f64, mean(name, b, "max_queue_bytes")? * 1e-3)))
                        .collect(),
                })
                .collect(),
        };
        written.push(save(dir, "max-queue-vs-size.svg", &plot)?);
    }

    let plot = LinePlot {
        title: "CCT increase over the lower bound".to_owned(),
        x_label: "variant".to_owned(),
        y_label: "CCT increase (%)".to_owned(),
        log_x: false,
        log_y: false,
        x_categories: names.clone(),
        series: sizes
            .iter()
            .map(|&bytes| Series {
                name: size_label(bytes),
                points: names
                    .iter()
                    .enumerate()
                    .filter_map(|(i, name)| {
                        Some((i as f64, mean(name, bytes, "cct_increase")? * 100.0))
                    })
                    .collect(),
            })
            .collect(),
    };
    written.push(save(dir, "cct-increase.svg", &plot)?);

    let largest = *sizes.last().unwrap_or(&0);
    let stages: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|s| s.is_switch())
        .filter(|s| {
            results.cells.iter().any(|c| {
                c.metrics
                    .contains_key(&format!("max_queue.{}", stage_key(*s)))
            })
        })
        .collect();
    let plot = LinePlot {
        title: format!(
            "Max queue per stage, {} messages (paper Fig. 3)",
            size_label(largest)
        ),
        x_label: "stage".to_owned(),
        y_label: "max queue (KB)".to_owned(),
        log_x: false,
        log_y: false,
        x_categories: stages.iter().map(|s| s.label().to_owned()).collect(),
        series: names
            .iter()
            .map(|name| Series {
                name: name.clone(),
                points: stages
                    .iter()
                    .enumerate()
                    .filter_map(|(i, s)| {
                        Some((
                            i as f64,
                            mean(name, largest, &format!("max_queue_bytes.{}", stage_key(*s)))?
                                * 1e-3,
                        ))
                    })
                    .collect(),
            })
            .collect(),
    };
    written.push(save(dir, "queue-per-stage.svg", &plot)?);
    Ok(written)
}

fn save(dir: &Path, name: &str, plot: &LinePlot) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    write(&path, &plot.render())?;
    Ok(path)
}

/// `YYYYMMDD-HHMMSS` (UTC) of a Unix time, for directory names.
#[must_use]
pub fn timestamp(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let secs = unix_seconds % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400), "20000229-000000");
        assert_eq!(timestamp(1795910399), "20261128-235959");
    }
}
