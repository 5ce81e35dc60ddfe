//! `model figN` and `model merge`: the paper's figures, whole or sharded, and their files.

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) enum FigureKind {
    Fig1,
    Fig3,
    Fig4,
    Fig6,
    Failures,
    Fig10,
    Fig11,
    Fig12,
    Fig13,
    Fig14,
}

pub(super) fn schemes(names: &[String], default: &[&str]) -> anyhow::Result<Vec<Scheme>> {
    let names: Vec<&str> = if names.is_empty() {
        default.to_vec()
    } else {
        names.iter().map(String::as_str).collect()
    };
    names
        .into_iter()
        .map(|name| name.parse::<Scheme>().map_err(Into::into))
        .collect()
}

pub(super) fn figure(args: FigArgs, kind: FigureKind) -> anyhow::Result<()> {
    let sweep = Sweep {
        base: args.common.config()?,
        seeds: args.seeds.max(1),
        threads: args.common.threads(),
    };
    let all: Vec<&str> = Scheme::ALL.iter().map(|s| s.name()).collect();
    let spec = match kind {
        FigureKind::Fig1 => FigureSpec::LoadSweep {
            loads: args.loads.clone(),
            schemes: schemes(&args.schemes, &["reps", "ar", "pofan", "ofan"])?,
        },
        FigureKind::Fig3 => FigureSpec::LinkOverload {
            schemes: schemes(&args.schemes, &all)?,
        },
        FigureKind::Fig4 => FigureSpec::MessageSizes {
            sizes: args.sizes.clone(),
            schemes: schemes(&args.schemes, &all)?,
        },
        FigureKind::Fig6 => FigureSpec::NetworkSizes {
            ks: args.ks.clone(),
            pipe_sizes: args.pipe_sizes.clone(),
        },
        FigureKind::Failures => FigureSpec::Failures {
            probabilities: args.probs.clone(),
            schemes: schemes(&args.schemes, &["reps", "ar", "pofan", "ofan", "drb"])?,
        },
        FigureKind::Fig10 => FigureSpec::TwoLevel {
            ks: args.leaf_spine_ks.clone(),
            schemes: schemes(&args.schemes, &["reps", "ar", "ofan", "pofan"])?,
        },
        FigureKind::Fig11 => {
            let pair = schemes(&args.schemes, &["ar", "pofan"])?;
            let [base, placed] = pair[..] else {
                bail!("fig11 compares two schemes: --schemes BASE,PLACED (default ar,pofan)");
            };
            FigureSpec::Incremental { base, placed }
        }
        FigureKind::Fig13 => FigureSpec::Moe {
            moe: match sweep.base.workload.clone() {
                Workload::Moe { moe } => moe,
                _ => ofan_model::moe::Moe {
                    token_bytes: ((8192.0 * args.common.scale).round() as u64).max(1),
                    ..ofan_model::moe::Moe::paper()
                },
            },
            skews_permille: args
                .skews
                .iter()
                .map(|skew| (skew * 1000.0).round() as u32)
                .collect(),
            ccs: ccs(&args.ccs)?,
            schemes: schemes(&args.schemes, &["reps", "ar", "ofan", "pofan"])?,
            ecn_bytes: args.common.ecn,
        },
        FigureKind::Fig14 => FigureSpec::Training {
            models: if args.llamas.is_empty() {
                Llama::ALL.to_vec()
            } else {
                args.llamas
                    .iter()
                    .map(|name| name.parse::<Llama>().map_err(anyhow::Error::msg))
                    .collect::<anyhow::Result<_>>()?
            },
            layers: args.common.layers,
            gate: args.common.fsdp_gate.gate(),
            ccs: ccs(&args.ccs)?,
            schemes: schemes(&args.schemes, &["reps", "ar", "ofan", "pofan"])?,
        },
        FigureKind::Fig12 => FigureSpec::CongestionControl {
            ccs: ccs(&args.ccs)?,
            schemes: schemes(
                &args.schemes,
                &["reps", "ar", "ofan", "pofan", "ecmp", "rsq"],
            )?,
            message_bytes: args.message_size,
        },
    };
    let started = Instant::now();
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    if let Some(shard) = args.shard {
        let part = figures::run_shard(&spec, &sweep, shard)?;
        let path = args
            .out
            .join(format!("{}.{}.json", spec.name(), part_suffix(shard)));
        write_out(&path, &serde_json::to_string_pretty(&part)?)?;
        eprintln!(
            "{} shard {shard}: {} of {} runs in {:.1} s; wrote {}",
            spec.name(),
            part.runs.len(),
            part.total_runs,
            started.elapsed().as_secs_f64(),
            path.display()
        );
        return Ok(());
    }
    let fig = figures::build(&spec, &sweep)?;
    let wall = started.elapsed().as_secs_f64();
    let written = write_figure(&fig, &args.out)?;
    eprintln!("{} in {wall:.1} s; wrote {}", fig.name, written.join(", "));
    Ok(())
}

/// Prints a figure's tables and writes `<out>/<name>.json` and its plots; returns the paths.
pub(super) fn write_figure(fig: &Figure, out: &std::path::Path) -> anyhow::Result<Vec<String>> {
    print!("{}", fig.text());
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let json_path = out.join(format!("{}.json", fig.name));
    write_out(&json_path, &serde_json::to_string_pretty(fig)?)?;
    let mut written = vec![json_path.display().to_string()];
    for (metric, svg) in fig.plots() {
        let path = out.join(format!("{}-{metric}.svg", fig.name));
        write_out(&path, &svg)?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

pub(super) fn merge(args: MergeArgs) -> anyhow::Result<()> {
    let mut figure_parts = Vec::new();
    let mut run_parts = Vec::new();
    for path in &args.parts {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        match Part::from_json(&text).with_context(|| format!("reading {}", path.display()))? {
            Part::Figure(part) => figure_parts.push(part),
            Part::Run(part) => run_parts.push(part),
        }
    }
    match (figure_parts.is_empty(), run_parts.is_empty()) {
        (false, true) => {
            let fig = figures::merge(figure_parts)?;
            let written = write_figure(&fig, &args.out)?;
            eprintln!(
                "merged {} parts; wrote {}",
                args.parts.len(),
                written.join(", ")
            );
        }
        (true, false) => {
            let reports = merge_runs(run_parts)?;
            print_reports(&reports);
            fs::create_dir_all(&args.out)
                .with_context(|| format!("creating {}", args.out.display()))?;
            let path = args.out.join("run.json");
            write_out(&path, &reports_json(&reports)?)?;
            eprintln!(
                "merged {} parts; wrote {}",
                args.parts.len(),
                path.display()
            );
        }
        _ => bail!("the parts mix figure and run parts"),
    }
    Ok(())
}

/// `--ccs`: each name a congestion control.
fn ccs(names: &[String]) -> anyhow::Result<Vec<CcKind>> {
    names
        .iter()
        .map(|name| name.parse::<CcKind>().context("--ccs"))
        .collect()
}
