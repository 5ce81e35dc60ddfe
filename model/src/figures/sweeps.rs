//! The figures of the paper's §3 and §6.1–6.2 (Figs. 1, 3, 4, 5, 6 and the failures): a
//! sweep of one parameter per figure, each built from [`FigureSpec`] and finished from its
//! points.

use super::*;

/// Fig. 1: utilization, max queue and CCT as the offered load grows.
///
/// # Errors
/// The first run that fails to set up.
pub fn load_sweep(
    settings: &Sweep,
    loads: &[f64],
    schemes: &[Scheme],
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::LoadSweep {
            loads: loads.to_vec(),
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_load_sweep(settings: (&ModelConfig, u64), points: Vec<Point>) -> Figure {
    let mut fig = figure(
        "fig1",
        "Fig. 1: permutation vs offered load",
        "offered load",
        false,
        settings,
    );
    fig.points = points;
    fig.panels = vec![
        panel("utilization", "utilization", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("cct_us", "CCT (µs)", false),
    ];
    fig.notes.push(
        "utilization = data bits delivered / (line rate × sum of receivers' delivery windows); \
         an ideal balancer follows y = load"
            .into(),
    );
    fig
}

/// Fig. 3: worst-case link overload per inter-switch stage, inter-pod permutation.
///
/// # Errors
/// The first run that fails to set up.
pub fn link_overload(settings: &Sweep, schemes: &[Scheme]) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::LinkOverload {
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_link_overload(settings: (&ModelConfig, u64), runs: Vec<Point>) -> Figure {
    let stages = [Stage::EdgeUp, Stage::AggUp, Stage::CoreDown, Stage::AggDown];
    let mut fig = figure(
        "fig3",
        "Fig. 3: worst-case link overload per stage",
        "stage",
        false,
        settings,
    );
    fig.x_categories = stages.iter().map(|s| s.label().to_owned()).collect();
    for run in runs {
        for (index, stage) in stages.iter().enumerate() {
            let key = format!("overload_{stage:?}").to_lowercase();
            let mut metrics = BTreeMap::new();
            if let Some(summary) = run.metrics.get(&key) {
                metrics.insert("overload_pct".to_owned(), *summary);
            }
            fig.points.push(Point {
                series: run.series.clone(),
                x: index as f64,
                metrics,
            });
        }
    }
    fig.panels = vec![panel("overload_pct", "worst link overload (%)", false)];
    fig.notes.push(
        "overload = frame bytes on the busiest link of the stage / mean over the stage's links − 1"
            .into(),
    );
    fig
}

/// Fig. 4: max queue and CCT increase vs message size, with fitted growth exponents of the max
/// queue (≈ 0.5 for random spraying, ≈ 1 for Simple RR and JSQ, ≈ 0 for destination-based
/// rotation).
///
/// # Errors
/// The first run that fails to set up.
pub fn message_sizes(
    settings: &Sweep,
    sizes: &[u64],
    schemes: &[Scheme],
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::MessageSizes {
            sizes: sizes.to_vec(),
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_message_sizes(
    settings: (&ModelConfig, u64),
    points: Vec<Point>,
    schemes: &[Scheme],
) -> Figure {
    let mut fig = figure(
        "fig4",
        "Fig. 4: permutation vs message size",
        "message size (bytes)",
        true,
        settings,
    );
    fig.x_bytes = true;
    fig.points = points;
    fig.panels = vec![
        panel("max_queue_kb", "max queue (KB)", true),
        panel("cct_increase_pct", "CCT increase (%)", true),
    ];
    fig.fits = schemes
        .iter()
        .filter_map(|scheme| fit_exponent(&fig.points, scheme.name(), "max_queue_kb"))
        .collect();
    fig.notes.push(
        "expected classes (paper §3.3, Fig. 4b): ≈0.5 rsq/spray/reps/ar, ≈1 rr/jsq, ≈0 ofan/pofan/drb"
            .into(),
    );
    fig
}

/// Fig. 6 and Fig. 17: CCT increase of pOfan with several pipe sizes, Ofan and DRB as the
/// network grows, and the ratio of DRB's max queue to Ofan's.
///
/// # Errors
/// The first run that fails to set up.
pub fn network_sizes(
    settings: &Sweep,
    ks: &[u16],
    pipe_sizes: &[u16],
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::NetworkSizes {
            ks: ks.to_vec(),
            pipe_sizes: pipe_sizes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_network_sizes(settings: (&ModelConfig, u64), points: Vec<Point>) -> Figure {
    let mut fig = figure(
        "fig6_17",
        "Fig. 6 / 17: pOfan pipe sizes and DRB vs network size",
        "hosts",
        true,
        settings,
    );
    fig.points = points;
    let xs = fig.xs();
    for x in xs {
        let get = |series: &str| {
            fig.points
                .iter()
                .find(|p| p.series == series && p.x == x)
                .and_then(|p| p.metrics.get("max_queue_kb"))
                .map(|s| s.mean)
        };
        if let (Some(drb), Some(ofan)) = (get("drb"), get("ofan")) {
            let ratio = drb / ofan;
            let mut metrics = BTreeMap::new();
            metrics.insert(
                "queue_ratio".to_owned(),
                Summary {
                    mean: ratio,
                    sem: 0.0,
                    min: ratio,
                    max: ratio,
                    runs: settings.1 as usize,
                },
            );
            fig.points.push(Point {
                series: "drb/ofan".into(),
                x,
                metrics,
            });
        }
    }
    fig.panels = vec![
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("queue_ratio", "DRB / Ofan max queue (Fig. 17)", false),
    ];
    fig.notes.push(
        "Npofan = pOfan with N ports per pipe; queue_ratio = mean DRB max queue / mean Ofan max queue"
            .into(),
    );
    fig
}

/// §6.2 (Fig. 9): CCT increase over the failure-free lower bound vs the probability that each
/// edge–aggregation and aggregation–core link fails, hosts paced at ρ_max.
///
/// # Errors
/// The first run that fails to set up (e.g. every failure sample disconnected a flow).
pub fn failures(
    settings: &Sweep,
    probabilities: &[f64],
    schemes: &[Scheme],
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::Failures {
            probabilities: probabilities.to_vec(),
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_failures(settings: (&ModelConfig, u64), points: Vec<Point>) -> Figure {
    let mut fig = figure(
        "failures",
        "§6.2: CCT increase vs link-failure probability (ρ_max pacing)",
        "link failure probability",
        false,
        settings,
    );
    fig.points = points;
    fig.panels = vec![
        panel(
            "cct_increase_pct",
            "CCT increase over the bound at the ρ_max send rate, failure-free paths (%)",
            false,
        ),
        panel("rho_max", "ρ_max", false),
    ];
    fig.notes.push(
        "each seed draws its own failure sample (resampled while some flow is disconnected); all \
         schemes see the same samples"
            .into(),
    );
    fig
}
