//! `model bench`: wall time, events per second and peak memory of one configuration, or of the
//! permutation at several network sizes (`--sizes`).

use std::fs;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use ofan_model::ModelConfig;

use super::{model_of, Common};
use crate::Shape;

#[derive(Debug, Args)]
pub(super) struct BenchArgs {
    #[command(flatten)]
    common: Common,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Network sizes to time one after the other, in hosts (each must be k³/4 for the fat
    /// tree, k²/2 for the leaf-spine, e.g. 432,1024,3456,8192,65536): prints a table of
    /// hosts, events, events/s, ns/event, peak RSS and wall time; `--k` is ignored.
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u64>,
    /// With `--sizes`: no further repetition of a size once its runs took this long (s).
    #[arg(long, default_value_t = 60.0)]
    budget_s: f64,
}

pub(super) fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let mut config = args.common.config()?;
    config.seed = args.seed;
    if !args.sizes.is_empty() {
        return bench_sizes(&args, config);
    }
    let timed = time_runs(&config, args.repeat, f64::INFINITY)?;
    println!(
        "{} k={} {} {} B: median {:.3} s over {} runs (min {:.3}, max {:.3}), {} events, {:.2} M events/s, peak RSS {}",
        config.scheme,
        config.topology.k(),
        config.workload.name(),
        config.message_bytes,
        timed.median(),
        timed.times.len(),
        timed.times[0],
        timed.times[timed.times.len() - 1],
        timed.events,
        timed.events as f64 / timed.median() / 1e6,
        peak_rss_kb().map_or_else(|| "unknown".into(), |kb| format!("{kb} kB"))
    );
    Ok(())
}

/// Wall times of repeated runs of one configuration, sorted, and its events.
struct Timed {
    times: Vec<f64>,
    events: u64,
}

impl Timed {
    fn median(&self) -> f64 {
        self.times[self.times.len() / 2]
    }
}

/// Runs `config` up to `repeat` times (at least once), and no more once the runs took
/// `budget_s` in all.
fn time_runs(config: &ModelConfig, repeat: usize, budget_s: f64) -> anyhow::Result<Timed> {
    let mut times = Vec::new();
    let mut events = 0;
    while times.len() < repeat.max(1) && times.iter().sum::<f64>() < budget_s {
        let started = Instant::now();
        let report = ofan_model::run(config)?;
        times.push(started.elapsed().as_secs_f64());
        events = model_of(&report).events;
    }
    times.sort_by(f64::total_cmp);
    Ok(Timed { times, events })
}

/// The radix whose fabric has `hosts` hosts: k³/4 for the fat tree, k²/2 for the leaf-spine.
fn radix_of(shape: Shape, hosts: u64) -> anyhow::Result<u16> {
    (4..=64u16)
        .step_by(2)
        .find(|&k| {
            let k = u64::from(k);
            match shape {
                Shape::FatTree => k * k * k / 4 == hosts,
                Shape::LeafSpine => k * k / 2 == hosts,
            }
        })
        .with_context(|| {
            format!("no even k in 4..=64 gives {hosts} hosts (fat tree: k³/4, leaf-spine: k²/2)")
        })
}

/// `bench --sizes`: the configuration at each size, one after the other, as a table. Peak
/// RSS is the process's high-water mark, reset before each size (`/proc/self/clear_refs`), so
/// with sizes in increasing order each row is its own run's peak.
fn bench_sizes(args: &BenchArgs, config: ModelConfig) -> anyhow::Result<()> {
    let ks: Vec<(u64, u16)> = args
        .sizes
        .iter()
        .map(|&hosts| {
            Ok((
                hosts,
                radix_of(args.common.topology.tiered("model bench")?, hosts)?,
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    println!(
        "{} {} {} B, seed {}, one thread; median of up to {} runs (at most {:.0} s per size)",
        config.scheme,
        config.workload.name(),
        config.message_bytes,
        config.seed,
        args.repeat.max(1),
        args.budget_s
    );
    println!(
        "{:>7} {:>3} {:>12} {:>9} {:>9} {:>11} {:>10} {:>5}",
        "hosts", "k", "events", "M ev/s", "ns/event", "peak RSS MB", "wall s", "runs"
    );
    for (hosts, k) in ks {
        let config = ModelConfig {
            topology: args.common.topology.tiered("model bench")?.kind(k),
            ..config.clone()
        };
        // Best effort: without it the high-water mark is the largest size's so far.
        let _ = fs::write("/proc/self/clear_refs", "5");
        let timed = time_runs(&config, args.repeat, args.budget_s)?;
        let wall = timed.median();
        println!(
            "{:>7} {:>3} {:>12} {:>9.2} {:>9.1} {:>11} {:>10.3} {:>5}",
            hosts,
            k,
            timed.events,
            timed.events as f64 / wall / 1e6,
            wall * 1e9 / timed.events as f64,
            peak_rss_kb().map_or_else(|| "?".into(), |kb| format!("{:.0}", kb as f64 / 1024.0)),
            wall,
            timed.times.len()
        );
    }
    Ok(())
}

/// The process's peak resident set (VmHWM), kB.
fn peak_rss_kb() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
