//! The paper's figures as sweeps of independent runs: each point is the mean (± standard error)
//! over seeds `1..=seeds`, every run deterministic.
//!
//! | function | paper | x | metrics |
//! |---|---|---|---|
//! | [`load_sweep`] | Fig. 1 | offered load | utilization, max queue, CCT |
//! | [`link_overload`] | Fig. 3 | stage (E→A, A→C, C→A, A→E) | worst link overload |
//! | [`message_sizes`] | Fig. 4 | message size | max queue, CCT increase; fitted growth exponents |
//! | [`network_sizes`] | Fig. 6 / 17 | hosts | CCT increase of pOfan pipe sizes and DRB; DRB/Ofan max-queue ratio |
//! | [`failures`] | Fig. 9 (§6.2) | link-failure probability | CCT increase at ρ_max pacing |
//! | [`two_level`] | Fig. 10 (§6.3) | leaf-spine hosts | CCT, CCT increase, max queue, utilization; CCT reduction of Ofan/pOfan vs REPS and AR |
//! | [`incremental`] | Fig. 11 (§6.4) | all A, B on half the switches by placement, all B | CCT increase, max queue; midpoint of all-A and all-B |
//! | [`moe`] | Fig. 13 (§6.6) | scheme, per CCA and skew | CCT, CCT increase, max queue |
//! | [`congestion_control`] | Fig. 12 (§6.5) | scheme, per CCA | CCT increase, utilization, max queue |
//! | [`training`] | Fig. 14 (§6.7) | scheme, per CCA and Llama-3 model | CCT increase, per-layer all-gather / reduce-scatter CCT, utilization, max queue |
//!
//! Figs. 3, 4 and 6/17 follow the analysis of paper §3.3 and run with unlimited buffers
//! ([`BufferLimit::Unlimited`]), so that queues show their growth instead of drops (which the
//! hosts would recover from, at the cost of retransmission timeouts); Fig. 1 and the failure
//! sweep keep the configured limit.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ofan_dataplane::lb::Algorithm;
use ofan_topology::TopologyKind;
use serde::{Deserialize, Serialize};

use ofan_transport::CcKind;

use crate::config::{BufferLimit, Failures, ModelConfig, Pacing, Scheme, Workload};
use crate::error::ModelError;
use crate::fsdp::{phase_kind, Llama, WindowGate};
use crate::mix::{Placement, SwitchSchemes};
use crate::moe::Moe;
use crate::report::{RunReport, Stage};
use crate::run_many;
use crate::shard::Shard;
use crate::svg::{LinePlot, Series};

/// How to run a sweep.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The configuration every run starts from.
    pub base: ModelConfig,
    /// Seeds `1..=seeds` per point.
    pub seeds: u64,
    /// Worker threads.
    pub threads: usize,
}

/// Mean, standard error of the mean, min and max of one metric over the seeds of a point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Mean.
    pub mean: f64,
    /// Standard error of the mean (0 for one run).
    pub sem: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of runs.
    pub runs: usize,
}

impl Summary {
    /// The summary of `values` (mean, SEM with n − 1, min, max).
    #[must_use]
    pub fn of(values: &[f64]) -> Self {
        let n = values.len().max(1) as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Self {
            mean,
            sem: (var / n).sqrt(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            runs: values.len(),
        }
    }
}

/// One point of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Series (scheme, or variant) name.
    pub series: String,
    /// X value.
    pub x: f64,
    /// Metric name → summary over seeds.
    pub metrics: BTreeMap<String, Summary>,
}

/// A least-squares fit of log(metric) against log(x): the growth exponent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// Series.
    pub series: String,
    /// Fitted metric.
    pub metric: String,
    /// Slope of log(metric) vs log(x).
    pub exponent: f64,
    /// Coefficient of determination of the fit.
    pub r_squared: f64,
}

/// A metric to plot and tabulate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    /// Metric name (key of [`Point::metrics`]).
    pub metric: String,
    /// Axis label.
    pub label: String,
    /// Log-scale y axis.
    pub log_y: bool,
}

/// A reproduced figure: all points, fits and notes; renders tables and SVG plots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// Short name (`fig4`, …), used for file names.
    pub name: String,
    /// Title.
    pub title: String,
    /// X-axis label.
    pub x_label: String,
    /// Log-scale x axis.
    pub log_x: bool,
    /// X values are byte counts (printed as KB / MB, binary).
    pub x_bytes: bool,
    /// Category names of x = 0, 1, … (empty for numeric x).
    pub x_categories: Vec<String>,
    /// The panels (one plot each).
    pub panels: Vec<Panel>,
    /// Every point.
    pub points: Vec<Point>,
    /// Growth-exponent fits, if the figure has any.
    pub fits: Vec<Fit>,
    /// Closing notes (interpretation, checks).
    pub notes: Vec<String>,
    /// The base configuration of the sweep.
    pub base: ModelConfig,
    /// Seeds per point.
    pub seeds: u64,
}

impl Figure {
    fn series_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for point in &self.points {
            if !names.contains(&point.series) {
                names.push(point.series.clone());
            }
        }
        names
    }

    fn xs(&self) -> Vec<f64> {
        let mut xs: Vec<f64> = Vec::new();
        for point in &self.points {
            if !xs.contains(&point.x) {
                xs.push(point.x);
            }
        }
        xs.sort_by(f64::total_cmp);
        xs
    }

    fn x_name(&self, x: f64) -> String {
        if let Some(name) = self.x_categories.get(x as usize) {
            return name.clone();
        }
        if self.x_bytes && x >= 1024.0 {
            let kib = x / 1024.0;
            return if kib >= 1024.0 {
                format!("{}MB", kib / 1024.0)
            } else {
                format!("{kib}KB")
            };
        }
        format!("{x}")
    }

    /// A text table of `panel` (series × x), then the fits and notes.
    #[must_use]
    pub fn table(&self, panel: &Panel) -> String {
        let xs = self.xs();
        let mut out = String::new();
        let _ = writeln!(out, "{} — {}", self.title, panel.label);
        let _ = write!(out, "{:>10}", "");
        for &x in &xs {
            let _ = write!(out, " {:>12}", self.x_name(x));
        }
        out.push('\n');
        for series in self.series_names() {
            let _ = write!(out, "{series:>10}");
            for &x in &xs {
                let value = self
                    .points
                    .iter()
                    .find(|p| p.series == series && p.x == x)
                    .and_then(|p| p.metrics.get(&panel.metric));
                match value {
                    Some(summary) => {
                        let _ = write!(out, " {:>12}", format_value(summary.mean));
                    }
                    None => {
                        let _ = write!(out, " {:>12}", "-");
                    }
                }
            }
            out.push('\n');
        }
        out
    }

    /// Every panel's table, then the fits and the notes.
    #[must_use]
    pub fn text(&self) -> String {
        let mut out = String::new();
        for panel in &self.panels {
            out.push_str(&self.table(panel));
            out.push('\n');
        }
        if !self.fits.is_empty() {
            let _ = writeln!(out, "Fitted growth exponents (least squares on log-log):");
            let _ = writeln!(
                out,
                "{:>10} {:>14} {:>9} {:>6}",
                "series", "metric", "exponent", "R²"
            );
            for fit in &self.fits {
                let _ = writeln!(
                    out,
                    "{:>10} {:>14} {:>9.3} {:>6.3}",
                    fit.series, fit.metric, fit.exponent, fit.r_squared
                );
            }
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }

    /// One SVG plot per panel: `(file suffix, document)`.
    #[must_use]
    pub fn plots(&self) -> Vec<(String, String)> {
        self.panels
            .iter()
            .map(|panel| {
                let series = self
                    .series_names()
                    .into_iter()
                    .map(|name| Series {
                        points: self
                            .points
                            .iter()
                            .filter(|p| p.series == name)
                            .filter_map(|p| Some((p.x, p.metrics.get(&panel.metric)?.mean)))
                            .collect(),
                        name,
                    })
                    .collect();
                let plot = LinePlot {
                    title: self.title.clone(),
                    x_label: self.x_label.clone(),
                    y_label: panel.label.clone(),
                    log_x: self.log_x,
                    log_y: panel.log_y,
                    x_categories: self.x_categories.clone(),
                    series,
                };
                (panel.metric.clone(), plot.render())
            })
            .collect()
    }
}

fn format_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// What one run contributes to a figure: metric name → value.
pub type RunMetrics = BTreeMap<String, f64>;

/// The metrics every run contributes.
fn metrics_of(report: &RunReport) -> RunMetrics {
    let mut m = BTreeMap::new();
    m.insert(
        "max_queue_kb".into(),
        report.max_queue_bytes as f64 / 1000.0,
    );
    m.insert("max_queue_packets".into(), report.max_queue_packets as f64);
    m.insert("utilization".into(), report.utilization);
    if let (Some(cct), Some(increase)) = (report.cct_ps, report.cct_increase) {
        m.insert("cct_us".into(), cct as f64 / 1e6);
        m.insert("cct_increase_pct".into(), increase * 100.0);
    }
    m.insert("drops".into(), report.drops.get("switch.buffer") as f64);
    m.insert(
        "out_of_order_pct".into(),
        report.reordering.fraction() * 100.0,
    );
    m.insert(
        "reorder_distance_max".into(),
        f64::from(report.reordering.max_distance),
    );
    if let Some(model) = report.model() {
        m.insert(
            "edge_up_max_data".into(),
            f64::from(model.edge_uplink.max_data_packets),
        );
        if let Some(rho) = model.rho_max {
            m.insert("rho_max".into(), rho);
        }
        if let Some(cc) = &model.cc {
            m.insert(
                "retransmissions".into(),
                report.packets.retransmissions as f64,
            );
            m.insert("timeouts".into(), report.packets.timeouts as f64);
            m.insert("reorder_losses".into(), cc.reorder_losses as f64);
            m.insert("ecn_marks".into(), report.packets.ecn_marks as f64);
        }
        if model.config.trim {
            m.insert("trimmed".into(), report.packets.trimmed as f64);
        }
        // Phases of one kind (an FSDP run's `all-gather 3`, …): their mean CCT.
        let mut kinds: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
        for phase in &report.phases {
            if let Some(cct) = phase.cct_ps {
                let entry = kinds.entry(phase_kind(&phase.name)).or_default();
                *entry = (entry.0 + cct as f64 / 1e6, entry.1 + 1);
            }
        }
        for (kind, (sum, count)) in kinds {
            let key = format!("{}_cct_us", kind.replace(['-', ' '], "_"));
            m.insert(key, sum / f64::from(count));
        }
    }
    for stats in &report.queues {
        let stage = stats.stage;
        m.insert(
            format!("overload_{stage:?}").to_lowercase(),
            stats.link_overload * 100.0,
        );
        m.insert(
            format!("mean_queue_{stage:?}").to_lowercase(),
            stats.mean_packets,
        );
    }
    m
}

/// A point to measure: which series and x it belongs to, and the configuration its runs start
/// from (one run per seed).
struct Job {
    series: String,
    x: f64,
    config: ModelConfig,
}

/// Every run of `jobs`, job after job, seeds `1..=seeds` within a job: the order in which
/// shards split them.
fn run_configs(jobs: &[Job], seeds: u64) -> Vec<ModelConfig> {
    let mut configs = Vec::new();
    for job in jobs {
        for seed in 1..=seeds {
            let mut config = job.config.clone();
            config.seed = seed;
            configs.push(config);
        }
    }
    configs
}

/// Runs `configs` and returns each run's metrics, in order.
fn measure(configs: &[ModelConfig], threads: usize) -> Result<Vec<RunMetrics>, ModelError> {
    run_many(configs, threads)
        .into_iter()
        .map(|result| result.map(|report| metrics_of(&report)))
        .collect()
}

/// One point per job: each metric summarized over the job's runs (`metrics` in the order of
/// [`run_configs`]).
fn summarize(jobs: Vec<Job>, seeds: u64, metrics: Vec<RunMetrics>) -> Vec<Point> {
    let mut runs = metrics.into_iter();
    let mut points = Vec::new();
    for job in jobs {
        let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for _ in 0..seeds {
            let run = runs.next().expect("one result per config");
            for (name, value) in run {
                values.entry(name).or_default().push(value);
            }
        }
        points.push(Point {
            series: job.series,
            x: job.x,
            metrics: values
                .into_iter()
                .map(|(name, values)| (name, Summary::of(&values)))
                .collect(),
        });
    }
    points
}

/// Least-squares slope of log(y) on log(x) over the points of `series` with `metric` > 0.
#[must_use]
pub fn fit_exponent(points: &[Point], series: &str, metric: &str) -> Option<Fit> {
    let pairs: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.series == series && p.x > 0.0)
        .filter_map(|p| {
            let y = p.metrics.get(metric)?.mean;
            (y > 0.0).then(|| (p.x.ln(), y.ln()))
        })
        .collect();
    if pairs.len() < 2 {
        return None;
    }
    let n = pairs.len() as f64;
    let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let syy: f64 = pairs.iter().map(|p| (p.1 - my).powi(2)).sum();
    let slope = sxy / sxx;
    let r_squared = if syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    Some(Fit {
        series: series.to_owned(),
        metric: metric.to_owned(),
        exponent: slope,
        r_squared,
    })
}

fn panel(metric: &str, label: &str, log_y: bool) -> Panel {
    Panel {
        metric: metric.into(),
        label: label.into(),
        log_y,
    }
}

fn figure(
    name: &str,
    title: &str,
    x_label: &str,
    log_x: bool,
    (base, seeds): (&ModelConfig, u64),
) -> Figure {
    Figure {
        name: name.into(),
        title: title.into(),
        x_label: x_label.into(),
        log_x,
        x_bytes: false,
        x_categories: Vec::new(),
        panels: Vec::new(),
        points: Vec::new(),
        fits: Vec::new(),
        notes: Vec::new(),
        base: base.clone(),
        seeds,
    }
}

/// Which figure to reproduce, and the values it sweeps: with a [`Sweep`], everything that
/// decides its runs and its points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FigureSpec {
    /// Fig. 1 ([`load_sweep`]).
    LoadSweep {
        /// Offered loads.
        loads: Vec<f64>,
        /// Schemes compared.
        schemes: Vec<Scheme>,
    },
    /// Fig. 3 ([`link_overload`]).
    LinkOverload {
        /// Schemes compared.
        schemes: Vec<Scheme>,
    },
    /// Fig. 4 ([`message_sizes`]).
    MessageSizes {
        /// Message sizes, bytes.
        sizes: Vec<u64>,
        /// Schemes compared.
        schemes: Vec<Scheme>,
    },
    /// Fig. 6 / 17 ([`network_sizes`]).
    NetworkSizes {
        /// Radices k.
        ks: Vec<u16>,
        /// pOfan pipe sizes.
        pipe_sizes: Vec<u16>,
    },
    /// §6.2 ([`failures`]).
    Failures {
        /// Link-failure probabilities.
        probabilities: Vec<f64>,
        /// Schemes compared.
        schemes: Vec<Scheme>,
    },
    /// Fig. 10 ([`two_level`]).
    TwoLevel {
        /// Leaf-spine radices k (k²/2 hosts each; the paper: 64).
        ks: Vec<u16>,
        /// Schemes compared.
        schemes: Vec<Scheme>,
    },
    /// Fig. 11 ([`incremental`]).
    Incremental {
        /// The scheme deployed first (the paper: AR).
        base: Scheme,
        /// The scheme rolled out on half the switches (the paper: 4Ofan).
        placed: Scheme,
    },
    /// Fig. 13 ([`moe`]).
    Moe {
        /// The dispatch (its skew is replaced by each of `skews_permille`).
        moe: Moe,
        /// Skews, busiest over mean, per mille (the paper: 1480, and 1130 with EPLB).
        skews_permille: Vec<u32>,
        /// Congestion control per panel (`none`: unlimited buffers).
        ccs: Vec<CcKind>,
        /// Schemes compared (the x categories).
        schemes: Vec<Scheme>,
        /// ECN marking threshold, bytes (`None`: the paper's 10 packets of 64 KB).
        ecn_bytes: Option<u64>,
    },
    /// Fig. 14 ([`training`]).
    Training {
        /// Llama-3 models (a series each, per CCA).
        models: Vec<Llama>,
        /// Layers of each model to simulate (`None`: all of them).
        layers: Option<u32>,
        /// What opens a GPU's next window.
        #[serde(default)]
        gate: WindowGate,
        /// Congestion-control algorithms.
        ccs: Vec<CcKind>,
        /// Schemes compared (the x categories).
        schemes: Vec<Scheme>,
    },
    /// Fig. 12 ([`congestion_control`]).
    CongestionControl {
        /// Congestion-control algorithms (one series each).
        ccs: Vec<CcKind>,
        /// Schemes compared (the x categories).
        schemes: Vec<Scheme>,
        /// Message size, bytes (the paper: 4 MB).
        message_bytes: u64,
    },
}

impl FigureSpec {
    /// The figure's short name (its files are `<name>.json`, `<name>-<metric>.svg`).
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::LoadSweep { .. } => "fig1",
            Self::LinkOverload { .. } => "fig3",
            Self::MessageSizes { .. } => "fig4",
            Self::NetworkSizes { .. } => "fig6_17",
            Self::Failures { .. } => "failures",
            Self::TwoLevel { .. } => "fig10",
            Self::Incremental { .. } => "fig11",
            Self::Moe { .. } => "fig13",
            Self::Training { .. } => "fig14",
            Self::CongestionControl { .. } => "fig12",
        }
    }

    /// The points to measure, in the order their runs are made.
    fn jobs(&self, base: &ModelConfig) -> Vec<Job> {
        let mut jobs = Vec::new();
        match self {
            Self::LoadSweep { loads, schemes } => {
                for &scheme in schemes {
                    for &load in loads {
                        let mut config = base.clone();
                        config.scheme = scheme;
                        config.load = load;
                        jobs.push(Job {
                            series: scheme.name().into(),
                            x: load,
                            config,
                        });
                    }
                }
            }
            Self::LinkOverload { schemes } => {
                for &scheme in schemes {
                    let mut config = base.clone();
                    config.scheme = scheme;
                    config.workload = Workload::InterPodPermutation;
                    config.buffer_limit = BufferLimit::Unlimited;
                    jobs.push(Job {
                        series: scheme.name().into(),
                        x: 0.0,
                        config,
                    });
                }
            }
            Self::MessageSizes { sizes, schemes } => {
                for &scheme in schemes {
                    for &size in sizes {
                        let mut config = base.clone();
                        config.scheme = scheme;
                        config.message_bytes = size;
                        config.buffer_limit = BufferLimit::Unlimited;
                        jobs.push(Job {
                            series: scheme.name().into(),
                            x: size as f64,
                            config,
                        });
                    }
                }
            }
            Self::NetworkSizes { ks, pipe_sizes } => {
                let mut variants: Vec<(String, Scheme, u16)> = pipe_sizes
                    .iter()
                    .map(|&p| (format!("{p}ofan"), Scheme::Switch(Algorithm::Pofan), p))
                    .collect();
                variants.push((
                    "ofan".into(),
                    Scheme::Switch(Algorithm::Ofan),
                    base.pipe_ports,
                ));
                variants.push(("drb".into(), Scheme::Drb, base.pipe_ports));
                for &k in ks {
                    let hosts = f64::from(k).powi(3) / 4.0;
                    for (name, scheme, pipe) in &variants {
                        let mut config = base.clone();
                        config.topology = TopologyKind::FatTree { k };
                        config.scheme = *scheme;
                        config.pipe_ports = *pipe;
                        config.buffer_limit = BufferLimit::Unlimited;
                        jobs.push(Job {
                            series: name.clone(),
                            x: hosts,
                            config,
                        });
                    }
                }
            }
            Self::Failures {
                probabilities,
                schemes,
            } => {
                for &scheme in schemes {
                    for &p in probabilities {
                        let mut config = base.clone();
                        config.scheme = scheme;
                        config.pacing = Pacing::RhoMax;
                        config.failures = if p > 0.0 {
                            Failures::Random { probability: p }
                        } else {
                            Failures::None
                        };
                        jobs.push(Job {
                            series: scheme.name().into(),
                            x: p,
                            config,
                        });
                    }
                }
            }
            Self::TwoLevel { ks, schemes } => {
                for &scheme in schemes {
                    for &k in ks {
                        let mut config = base.clone();
                        config.topology = TopologyKind::LeafSpine { k };
                        config.scheme = scheme;
                        jobs.push(Job {
                            series: series_name(scheme, base.pipe_ports),
                            x: f64::from(k) * f64::from(k) / 2.0,
                            config,
                        });
                    }
                }
            }
            Self::Incremental {
                base: first,
                placed,
            } => {
                let series = format!(
                    "{} in {}",
                    series_name(*placed, base.pipe_ports),
                    series_name(*first, base.pipe_ports)
                );
                for (index, (scheme, schemes)) in incremental_variants(*first, *placed)
                    .into_iter()
                    .enumerate()
                {
                    let mut config = base.clone();
                    config.scheme = scheme;
                    config.switch_schemes = schemes;
                    jobs.push(Job {
                        series: series.clone(),
                        x: index as f64,
                        config,
                    });
                }
            }
            Self::Moe {
                moe,
                skews_permille,
                ccs,
                schemes,
                ecn_bytes,
            } => {
                for &cc in ccs {
                    for &skew in skews_permille {
                        for (index, &scheme) in schemes.iter().enumerate() {
                            let mut config = base.clone();
                            config.topology = TopologyKind::FatTree { k: 8 };
                            config.cc = cc;
                            config.scheme = scheme;
                            config.link.payload_bytes = MOE_PAYLOAD;
                            // Paper §6: 10 packets of ECN threshold with 64 KB packets.
                            config.ecn_threshold_bytes = ecn_bytes
                                .unwrap_or(10 * u64::from(MOE_PAYLOAD + config.link.header_bytes));
                            config.buffer_limit = if cc.is_none() {
                                BufferLimit::Unlimited
                            } else {
                                config.buffer_limit
                            };
                            config.workload = Workload::Moe {
                                moe: Moe {
                                    skew_permille: skew,
                                    ..moe.clone()
                                },
                            };
                            jobs.push(Job {
                                series: format!("{} {:.2}x", cc.name(), f64::from(skew) / 1000.0),
                                x: index as f64,
                                config,
                            });
                        }
                    }
                }
            }
            Self::Training {
                models,
                layers,
                gate,
                ccs,
                schemes,
            } => jobs = training_jobs(base, models, *layers, *gate, ccs, schemes),
            Self::CongestionControl {
                ccs,
                schemes,
                message_bytes,
            } => {
                for &cc in ccs {
                    for (index, &scheme) in schemes.iter().enumerate() {
                        let mut config = base.clone();
                        config.cc = cc;
                        config.scheme = scheme;
                        config.message_bytes = *message_bytes;
                        jobs.push(Job {
                            series: cc.name().into(),
                            x: index as f64,
                            config,
                        });
                    }
                }
            }
        }
        jobs
    }

    /// The figure from the metrics of all its runs, in the order of [`FigureSpec::jobs`].
    fn finish(&self, base: &ModelConfig, seeds: u64, metrics: Vec<RunMetrics>) -> Figure {
        let points = summarize(self.jobs(base), seeds, metrics);
        let settings = (base, seeds);
        match self {
            Self::LoadSweep { .. } => finish_load_sweep(settings, points),
            Self::LinkOverload { .. } => finish_link_overload(settings, points),
            Self::MessageSizes { schemes, .. } => finish_message_sizes(settings, points, schemes),
            Self::NetworkSizes { .. } => finish_network_sizes(settings, points),
            Self::Failures { .. } => finish_failures(settings, points),
            Self::TwoLevel { .. } => finish_two_level(settings, points),
            Self::Moe {
                schemes,
                moe,
                ecn_bytes,
                ..
            } => finish_moe(settings, points, schemes, moe, *ecn_bytes),
            Self::Training {
                schemes,
                layers,
                gate,
                ..
            } => finish_training(settings, points, schemes, *layers, *gate),
            Self::Incremental { base, placed } => {
                finish_incremental(settings, points, *base, *placed)
            }
            Self::CongestionControl {
                schemes,
                message_bytes,
                ..
            } => finish_congestion_control(settings, points, schemes, *message_bytes),
        }
    }
}

/// Runs every run of `spec` and returns the figure.
///
/// # Errors
/// The first run that fails to set up.
pub fn build(spec: &FigureSpec, settings: &Sweep) -> Result<Figure, ModelError> {
    let jobs = spec.jobs(&settings.base);
    let metrics = measure(&run_configs(&jobs, settings.seeds), settings.threads)?;
    Ok(spec.finish(&settings.base, settings.seeds, metrics))
}

mod eval;
mod parts;
mod sweeps;
mod training;

pub use eval::*;
pub use parts::*;
pub use sweeps::*;
pub use training::*;
