//! The figures of the paper's §6.3–6.6 (Figs. 10, 11, 12, 13): two-level fat trees,
//! incremental deployment, congestion control and MoE dispatch.

use super::*;

/// Fig. 12 (§6.5): a permutation of `message_bytes` messages (the paper: 4 MB, 6.8 RTTs) under
/// each congestion-control algorithm and scheme — CCT increase over the bound, utilization,
/// max queue, and what the transport did (retransmissions, timeouts, losses found by the
/// reordering window, ECN marks). Buffers as configured (the paper's 800 KB, drop-tail).
///
/// # Errors
/// The first run that fails to set up.
pub fn congestion_control(
    settings: &Sweep,
    ccs: &[CcKind],
    schemes: &[Scheme],
    message_bytes: u64,
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::CongestionControl {
            ccs: ccs.to_vec(),
            schemes: schemes.to_vec(),
            message_bytes,
        },
        settings,
    )
}

pub(super) fn finish_congestion_control(
    settings: (&ModelConfig, u64),
    points: Vec<Point>,
    schemes: &[Scheme],
    message_bytes: u64,
) -> Figure {
    let mut fig = figure(
        "fig12",
        "Fig. 12: permutation under congestion control",
        "scheme",
        false,
        settings,
    );
    fig.x_categories = schemes.iter().map(|s| s.name().to_owned()).collect();
    fig.points = points;
    fig.panels = vec![
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("utilization", "utilization", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("retransmissions", "retransmissions per run", false),
        panel("timeouts", "timeouts per run", false),
    ];
    fig.notes.push(format!(
        "{} KiB messages; mean ± SEM over {} seeds of the CCT increase (%):",
        message_bytes / 1024,
        settings.1
    ));
    for series in fig.series_names() {
        let mut line = format!("{series:>8}:");
        for (index, scheme) in fig.x_categories.iter().enumerate() {
            let summary = fig
                .points
                .iter()
                .find(|p| p.series == series && p.x == index as f64)
                .and_then(|p| p.metrics.get("cct_increase_pct"));
            let _ = match summary {
                Some(s) => write!(line, " {scheme} {:.2} ± {:.2}", s.mean, s.sem),
                None => write!(line, " {scheme} -"),
            };
        }
        fig.notes.push(line);
    }
    fig
}

/// A scheme's series name: its own, but pOfan named by its pipe size as in the paper (`4ofan`).
pub(super) fn series_name(scheme: Scheme, pipe_ports: u16) -> String {
    if scheme == Scheme::Switch(Algorithm::Pofan) {
        format!("{pipe_ports}ofan")
    } else {
        scheme.name().to_owned()
    }
}

/// Fig. 10 (§6.3): the permutation on two-level fat trees (leaf-spine, k²/2 hosts; the paper:
/// k = 64, 2,048 hosts) — CCT, its increase over the bound, max queue and utilization, and the
/// CCT reduction of Ofan and pOfan against REPS and AR. Buffers as configured.
///
/// # Errors
/// The first run that fails to set up.
pub fn two_level(settings: &Sweep, ks: &[u16], schemes: &[Scheme]) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::TwoLevel {
            ks: ks.to_vec(),
            schemes: schemes.to_vec(),
        },
        settings,
    )
}

pub(super) fn finish_two_level(settings: (&ModelConfig, u64), points: Vec<Point>) -> Figure {
    let mut fig = figure(
        "fig10",
        "Fig. 10: permutation on a two-level fat tree (leaf-spine)",
        "hosts",
        false,
        settings,
    );
    fig.points = points;
    fig.panels = vec![
        panel("cct_us", "CCT (µs)", false),
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("utilization", "utilization", false),
    ];
    let series = fig.series_names();
    let mean_cct = |name: &str, x: f64| {
        fig.points
            .iter()
            .find(|p| p.series == name && p.x == x)
            .and_then(|p| p.metrics.get("cct_us"))
            .map(|s| s.mean)
    };
    let mut xs: Vec<f64> = fig.points.iter().map(|p| p.x).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let ours: Vec<&String> = series.iter().filter(|s| s.ends_with("ofan")).collect();
    let theirs: Vec<&String> = series.iter().filter(|s| !s.ends_with("ofan")).collect();
    let mut notes = vec![
        "CCT reduction = 1 − CCT(ours) / CCT(theirs), of the mean CCTs (the paper: Ofan and 4Ofan \
         cut the CCT by over 11 % against REPS and AR at k = 64)"
            .to_owned(),
    ];
    for &x in &xs {
        let mut line = format!("{x:>6} hosts:");
        for our in &ours {
            for their in &theirs {
                if let (Some(a), Some(b)) = (mean_cct(our, x), mean_cct(their, x)) {
                    let _ = write!(line, " {our} vs {their} {:.1} %", (1.0 - a / b) * 100.0);
                }
            }
        }
        notes.push(line);
    }
    fig.notes.extend(notes);
    fig
}

/// Fig. 11's x categories: all `base`, `placed` on half the switches by each placement, all
/// `placed`: (the configuration's scheme, its switch schemes).
pub(super) fn incremental_variants(base: Scheme, placed: Scheme) -> Vec<(Scheme, SwitchSchemes)> {
    let mut variants = vec![(base, SwitchSchemes::Uniform)];
    for placement in Placement::ALL {
        variants.push((
            base,
            SwitchSchemes::Mix {
                scheme: placed,
                placement,
            },
        ));
    }
    variants.push((placed, SwitchSchemes::Uniform));
    variants
}

/// Fig. 11 (§6.4): incremental deployment — the permutation with every balancing switch on
/// `base`, with `placed` on half of them by each of the paper's placements (random switches,
/// random pods, all aggregation, all edge), and all on `placed`: CCT increase and max queue,
/// with the midpoint of the two uniform fabrics' increases.
///
/// # Errors
/// The first run that fails to set up.
pub fn incremental(settings: &Sweep, base: Scheme, placed: Scheme) -> Result<Figure, ModelError> {
    build(&FigureSpec::Incremental { base, placed }, settings)
}

pub(super) fn finish_incremental(
    settings: (&ModelConfig, u64),
    points: Vec<Point>,
    base: Scheme,
    placed: Scheme,
) -> Figure {
    let pipe = settings.0.pipe_ports;
    let (a, b) = (series_name(base, pipe), series_name(placed, pipe));
    let mut fig = figure(
        "fig11",
        "Fig. 11: incremental deployment (half the balancing switches)",
        "deployment",
        false,
        settings,
    );
    fig.x_categories = std::iter::once(format!("all {a}"))
        .chain(Placement::ALL.iter().map(|p| p.name().to_owned()))
        .chain(std::iter::once(format!("all {b}")))
        .collect();
    fig.points = points;
    fig.panels = vec![
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("cct_us", "CCT (µs)", false),
        panel("max_queue_kb", "max queue (KB)", false),
    ];
    let increase = |index: usize| {
        fig.points
            .iter()
            .find(|p| p.x == index as f64)
            .and_then(|p| p.metrics.get("cct_increase_pct"))
            .map(|s| s.mean)
    };
    let last = fig.x_categories.len() - 1;
    let mut notes = Vec::new();
    if let (Some(all_a), Some(all_b)) = (increase(0), increase(last)) {
        let midpoint = (all_a + all_b) / 2.0;
        notes.push(format!(
            "CCT increase: all {a} {all_a:.2} %, all {b} {all_b:.2} %, midpoint {midpoint:.2} % \
             (the paper: midpoint 7.3 %, every mix slightly above it and below all {a}, best at \
             the edge)"
        ));
        for (index, placement) in Placement::ALL.iter().enumerate() {
            if let Some(mix) = increase(index + 1) {
                notes.push(format!(
                    "{:>16}: {mix:.2} % ({:+.2} points vs all {a}, {:+.2} vs the midpoint)",
                    placement.name(),
                    mix - all_a,
                    mix - midpoint
                ));
            }
        }
    }
    fig.notes.extend(notes);
    fig
}

/// Fig. 13's packets: 64 KB payloads (paper §6.6).
pub(super) const MOE_PAYLOAD: u32 = 64 * 1024;

/// Fig. 13 (§6.6): MoE dispatch on a k = 8 fat tree (128 GPUs in 8-GPU servers, one expert
/// each), 64 KB packets — per congestion control (`none`: unlimited buffers, the paper's (a),
/// (b); `nscc`: drop-tail buffers, (c), (d)) and skew (1.48 ×, 1.13 × with EPLB): CCT, its
/// increase over the bound (the busiest receiver's), max queue.
///
/// # Errors
/// The first run that fails to set up.
pub fn moe(
    settings: &Sweep,
    moe: &Moe,
    skews_permille: &[u32],
    ccs: &[CcKind],
    schemes: &[Scheme],
    ecn_bytes: Option<u64>,
) -> Result<Figure, ModelError> {
    build(
        &FigureSpec::Moe {
            moe: moe.clone(),
            skews_permille: skews_permille.to_vec(),
            ccs: ccs.to_vec(),
            schemes: schemes.to_vec(),
            ecn_bytes,
        },
        settings,
    )
}

pub(super) fn finish_moe(
    settings: (&ModelConfig, u64),
    points: Vec<Point>,
    schemes: &[Scheme],
    moe: &Moe,
    ecn_bytes: Option<u64>,
) -> Figure {
    let mut fig = figure(
        "fig13",
        "Fig. 13: MoE dispatch (k = 8, 128 GPUs, 64 KB packets)",
        "scheme",
        false,
        settings,
    );
    fig.x_categories = schemes
        .iter()
        .map(|&s| series_name(s, settings.0.pipe_ports))
        .collect();
    fig.points = points;
    fig.panels = vec![
        panel("cct_us", "CCT (µs)", false),
        panel("cct_increase_pct", "CCT increase (%)", false),
        panel("max_queue_kb", "max queue (KB)", false),
        panel("retransmissions", "retransmissions per run", false),
    ];
    fig.notes.push(format!(
        "{} tokens per GPU to {} experts, {} B per token copy; series: CCA and skew",
        moe.tokens_per_gpu, moe.top_k, moe.token_bytes
    ));
    fig.notes.push(match ecn_bytes {
        Some(bytes) => format!("ECN threshold {bytes} B (--ecn)"),
        None => "ECN threshold 10 packets of 64 KB (the paper's)".to_owned(),
    });
    if settings.0.receiver_credit {
        fig.notes.push(
            "under a CCA the receivers pace new data by credits (--receiver-credit, as htsim's \
             UEC source by default)"
                .to_owned(),
        );
    }
    if settings.0.trim {
        fig.notes.push(
            "switches trim a DATA frame that finds the buffer full to its header; \
             its receiver NACKs it (--trim, as htsim's switches)"
                .to_owned(),
        );
    }
    fig
}
