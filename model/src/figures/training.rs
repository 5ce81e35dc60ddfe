//! Fig. 14 (§6.7): training Llama-3 with FSDP2 and HSDP — the backward pass's all-gathers and
//! reduce-scatters ([`crate::fsdp`]) under congestion control with loss recovery.

use super::*;
use crate::fsdp::{Llama, WindowGate};

/// Fig. 14 (§6.7): the FSDP2 backward pass of each Llama-3 model (`layers` overrides the
/// model's layer count, for shorter runs) under each congestion-control algorithm and scheme,
/// on the configured fabric (the paper: k = 16, 1,024 GPUs, 4 KB packets, 800 KB buffers) —
/// CCT and its increase over the bound, the mean CCT of a layer's all-gather and
/// reduce-scatter, utilization, max queue, retransmissions; and by how much Ofan (and
/// pOfan) cut the increase against the better of REPS and AR.
///
/// # Errors
/// The first run that fails to set up.
pub fn training(
    settings: &Sweep,
    models: &[Llama],
    layers: Option<u32>,
    gate: WindowGate,
    ccs: &[CcKind],
    schemes: &[Scheme],
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::Training {
            models: models.to_vec(),
            layers,
            gate,
            ccs: ccs.to_vec(),
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

/// Fig. 14's points: per CCA and model (a series), per scheme (x).
pub(super) fn training_jobs(
    base: &ModelConfig,
    models: &[Llama],
    layers: Option<u32>,
    gate: WindowGate,
    ccs: &[CcKind],
    schemes: &[Scheme],
) -> Vec<Job> {
    let mut jobs = Vec::new();
    for &cc in ccs {
        for &model in models {
            for (index, &scheme) in schemes.iter().enumerate() {
                let mut config = base.clone();
                config.cc = cc;
                config.scheme = scheme;
                let mut fsdp = model.fsdp();
                fsdp.layers = layers.unwrap_or(fsdp.layers);
                fsdp.gate = gate;
                config.workload = Workload::Fsdp { fsdp };
                jobs.push(Job {
                    series: format!("{} {}", cc.name(), model.name()),
                    x: index as f64,
                    config,
                });
            }
        }
    }
    jobs
}

pub(super) fn finish_training(
    settings: (&ModelConfig, u64),
    points: Vec<Point>,
    schemes: &[Scheme],
    layers: Option<u32>,
    gate: WindowGate,
) -> Figure {
    let pipe = settings.0.pipe_ports;
    let mut fig = figure(
        "fig14",
        "Fig. 14: FSDP2 backward pass (all-gather + reduce-scatter per layer)",
        "scheme",
        false,
        settings,
    );
    fig.x_categories = schemes.iter().map(|&s| series_name(s, pipe)).collect();
    fig.points = points;
    fig.panels = vec![
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("cct_us", "CCT (µs)", false),
        panel("all_gather_cct_us", "all-gather CCT per layer (µs)", false),
        panel(
            "reduce_scatter_cct_us",
            "reduce-scatter CCT per layer (µs)",
            false,
        ),
        panel("utilization", "utilization", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("retransmissions", "retransmissions per run", false),
    ];
    fig.notes.push(match layers {
        Some(layers) => format!("{layers} layers of each model (not the model's own count)"),
        None => "every layer of each model (8B: 32, 70B: 80, 405B: 126)".to_owned(),
    });
    fig.notes.push(match gate {
        WindowGate::Received => {
            "a GPU's next window opens when its predecessor's data has arrived".to_owned()
        }
        WindowGate::ReceivedAndSent => {
            "a GPU's next window opens when its predecessor's data has arrived and its own \
             sends are acknowledged"
                .to_owned()
        }
    });
    fig.notes.push(
        "bound: the larger of the bytes' bound and the chain of windows (a GPU's frames and \
         the path from its predecessor per window); per-layer CCT: mean over layers of a phase's first \
         start to its last flow's completion"
            .to_owned(),
    );
    fig.notes.push(
        "cut = min(REPS, AR increase) / increase (the paper at 405B: Ofan 16× NSCC, 39× \
         MSwift; 4Ofan 15×, 36×):"
            .to_owned(),
    );
    let increase = |series: &str, name: &str| {
        let index = fig.x_categories.iter().position(|c| c == name)?;
        fig.points
            .iter()
            .find(|p| p.series == series && p.x == index as f64)
            .and_then(|p| p.metrics.get("cct_increase_pct"))
            .map(|s| s.mean)
    };
    let mut lines = Vec::new();
    for series in fig.series_names() {
        let theirs = match (increase(&series, "reps"), increase(&series, "ar")) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => continue,
        };
        let mut line = format!("{series:>12}: best of REPS/AR {theirs:.2} %");
        for ours in fig.x_categories.iter().filter(|c| c.ends_with("ofan")) {
            if let Some(value) = increase(&series, ours) {
                let _ = write!(line, ", {ours} {value:.2} % (cut {:.1}×)", theirs / value);
            }
        }
        lines.push(line);
    }
    fig.notes.extend(lines);
    fig
}
