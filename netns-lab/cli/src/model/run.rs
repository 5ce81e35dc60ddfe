//! `ofan-lab model run`: one configuration over one or several seeds, in parallel (fat trees,
//! leaf-spines and multi-plane fabrics through `ofan_model::run_many`, dragonflies through
//! `ofan_model::dragonfly`), printed as a table and written as JSON, or as one shard's part.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use ofan_model::dragonfly::{run_dragonfly, DragonflyConfig, DragonflyReport};
use ofan_model::shard::RunPart;
use ofan_model::{run_many, RunReport, Shard};

use super::output::*;
use super::{ModelShape, RunArgs};

pub(super) fn run_one(args: RunArgs) -> anyhow::Result<()> {
    if args.common.topology == ModelShape::Dragonfly {
        return run_dragonfly_seeds(&args);
    }
    let mut base = args.common.config()?;
    if base.receiver_credit && base.cc.is_none() {
        bail!("--receiver-credit needs a CCA (--cc dctcp|nscc|mswift): the credits pace new data beside its window");
    }
    base.seed = args.seed;
    let seeds = args.seeds.max(1);
    let configs = RunPart::configs(&base, seeds, args.shard.unwrap_or(Shard::ALL));
    let started = Instant::now();
    let reports = run_many(&configs, args.common.threads())
        .into_iter()
        .collect::<Result<Vec<RunReport>, _>>()?;
    let wall = started.elapsed().as_secs_f64();
    print_reports(&reports);
    let events: u64 = reports.iter().map(|r| model_of(r).events).sum();
    eprintln!(
        "{} run(s) in {wall:.3} s wall, {:.1} M events/s",
        reports.len(),
        events as f64 / wall / 1e6
    );
    if let Some(shard) = args.shard {
        let path = args
            .json
            .unwrap_or_else(|| PathBuf::from(format!("run.{}.json", part_suffix(shard))));
        let part = RunPart {
            schema: RunPart::SCHEMA.into(),
            base,
            seeds,
            shard,
            reports,
        };
        write_out(&path, &serde_json::to_string_pretty(&part)?)?;
        eprintln!("shard {shard}: wrote {}", path.display());
    } else if let Some(path) = args.json {
        write_out(&path, &reports_json(&reports)?)?;
    }
    Ok(())
}

/// `model run --topology dragonfly`: the seeds in parallel, a table, the reports as JSON.
fn run_dragonfly_seeds(args: &RunArgs) -> anyhow::Result<()> {
    if args.shard.is_some() {
        bail!("--shard splits fat-tree sweeps; a dragonfly run is not sharded");
    }
    let base = args.common.dragonfly()?;
    let configs: Vec<DragonflyConfig> = (0..args.seeds.max(1))
        .map(|i| DragonflyConfig {
            seed: args.seed + i,
            ..base.clone()
        })
        .collect();
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(vec![None; configs.len()]);
    std::thread::scope(|scope| {
        for _ in 0..args.common.threads().clamp(1, configs.len()) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(config) = configs.get(index) else {
                    break;
                };
                let report = run_dragonfly(config).map_err(|e| e.to_string());
                results.lock().expect("no thread panics holding the lock")[index] = Some(report);
            });
        }
    });
    let reports = results
        .into_inner()
        .expect("no thread panics holding the lock")
        .into_iter()
        .map(|r| r.expect("every seed ran").map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<DragonflyReport>>>()?;
    let wall = started.elapsed().as_secs_f64();
    println!("{}, {} B per host", base.shape, base.message_bytes);
    println!(
        "{:<12} {:<12} {:>5} {:>10} {:>10} {:>7} {:>8} {:>8} {:>7} {:>10} {:>10}",
        "scheme",
        "workload",
        "seed",
        "CCT µs",
        "bound µs",
        "CCT/LB",
        "thrput",
        "minimal",
        "global",
        "maxQ glob",
        "maxQ loc"
    );
    for r in &reports {
        println!(
            "{:<12} {:<12} {:>5} {:>10.2} {:>10.2} {:>7.3} {:>8.3} {:>8.3} {:>7.3} {:>8} KB {:>7} KB",
            r.scheme,
            r.workload,
            r.seed,
            r.cct_ps as f64 / 1e6,
            r.lower_bound_ps as f64 / 1e6,
            r.cct_increase(),
            r.throughput,
            r.minimal_share,
            r.mean_global_hops,
            r.max_global_queue_bytes / 1000,
            r.max_local_queue_bytes / 1000,
        );
    }
    let events: u64 = reports.iter().map(|r| r.events).sum();
    eprintln!(
        "{} run(s) in {wall:.3} s wall, {:.1} M events/s",
        reports.len(),
        events as f64 / wall / 1e6
    );
    if let Some(path) = &args.json {
        let text = if reports.len() == 1 {
            serde_json::to_string_pretty(&reports[0])?
        } else {
            serde_json::to_string_pretty(&reports)?
        };
        write_out(path, &text)?;
    }
    Ok(())
}
