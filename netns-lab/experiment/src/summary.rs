//! Repetitions summarized per cell (variant × message size): mean ± SEM of every metric, the
//! table `run` and `compare` print, and the growth exponent of the max queue with message size
//! (the model's fit, so lab and model exponents compare directly). Pure.

use std::collections::BTreeMap;

use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_dataplane::lb::Algorithm;
use ofan_model::figures::{fit_exponent, Point, Summary};
use ofan_model::report::Stage;
use serde::{Deserialize, Serialize};

use super::metrics::{lab_of, RunReport};
use ofan_lab_agent::entropy::HostLb;
use ofan_transport::CcKind;

/// What runs: a switch algorithm, the agents' host load balancing and their congestion
/// control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// Switch algorithm (canonical name).
    pub lb: String,
    /// Host load balancing.
    pub host_lb: HostLb,
    /// The hosts' congestion control.
    pub cc: CcKind,
}

impl Variant {
    /// A variant, with `lb` checked against the load-balancing core's algorithms and
    /// dragonfly schemes (which of the two a lab runs, the lab checks when it switches).
    ///
    /// # Errors
    /// When `lb` is neither an algorithm nor a dragonfly scheme.
    pub fn new(lb: &str, host_lb: HostLb) -> anyhow::Result<Self> {
        let name = match lb.trim().parse::<Algorithm>() {
            Ok(algorithm) => algorithm.name(),
            Err(error) => match lb.trim().parse::<DragonflyScheme>() {
                Ok(scheme) => scheme.name(),
                Err(_) => anyhow::bail!("--lb `{lb}`: {error}; on a dragonfly lab min, valiant, ugal-l, rotate or ugal-rotate"),
            },
        };
        Ok(Self {
            lb: name.to_owned(),
            host_lb,
            cc: CcKind::None,
        })
    }

    /// This variant with the hosts running `cc`.
    #[must_use]
    pub fn with_cc(self, cc: CcKind) -> Self {
        Self { cc, ..self }
    }

    /// `--host-lb` spelling.
    #[must_use]
    pub fn host_lb_name(&self) -> &'static str {
        match self.host_lb {
            HostLb::None => "none",
            HostLb::Spray => "spray",
            HostLb::Reps => "reps",
        }
    }

    /// Display name: the switch algorithm, or the host scheme over ecmp (`spray`, `reps`),
    /// and the congestion control after a slash when there is one (`ofan/dctcp`).
    #[must_use]
    pub fn name(&self) -> String {
        variant_name(&self.lb, self.host_lb_name(), self.cc)
    }
}

fn variant_name(lb: &str, host_lb: &str, cc: CcKind) -> String {
    let balancing = match (lb, host_lb) {
        (lb, "none") => lb.to_owned(),
        ("ecmp", host) => host.to_owned(),
        (lb, host) => format!("{lb}+{host}"),
    };
    if cc.is_none() {
        balancing
    } else {
        format!("{balancing}/{cc}")
    }
}

/// The congestion control a repetition ran.
fn cc_of(run: &RunReport) -> CcKind {
    lab_of(run).setup.cc.map_or(CcKind::None, |cc| cc.kind)
}

/// One cell: every repetition of a variant at a message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    /// Variant display name.
    pub variant: String,
    /// Switch algorithm.
    pub lb: String,
    /// Host load balancing.
    pub host_lb: String,
    /// The hosts' congestion control.
    #[serde(default, skip_serializing_if = "CcKind::is_none")]
    pub cc: CcKind,
    /// Bytes per flow.
    pub message_bytes: u64,
    /// Repetitions.
    pub runs: usize,
    /// Repetitions in which every packet arrived exactly once (CCT metrics are over these).
    pub exactly_once_runs: usize,
    /// Repetitions whose every lost frame a drop counter explains (census `unaccounted` 0).
    pub accounted_runs: usize,
    /// Repetitions whose emulation was faithful.
    pub faithful_runs: usize,
    /// Repetitions whose machine was watched for stalls (a group lab's; the `machine` record).
    #[serde(default)]
    pub watched_runs: usize,
    /// Of those, the repetitions in which the machine stalled below its scheduler.
    #[serde(default)]
    pub stalled_runs: usize,
    /// Metric → mean ± SEM over the repetitions.
    pub metrics: BTreeMap<String, Summary>,
}

impl CellSummary {
    /// The mean of `metric`, if measured.
    #[must_use]
    pub fn mean(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).map(|s| s.mean)
    }
}

/// Every repetition and its summary per cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summarized {
    /// Cells in the order they ran.
    pub cells: Vec<CellSummary>,
    /// Every repetition.
    pub runs: Vec<RunReport>,
}

/// Stage key used in metric names (`max_queue.edge_up`, …).
#[must_use]
pub fn stage_key(stage: Stage) -> &'static str {
    match stage {
        Stage::HostUp => "host_up",
        Stage::EdgeUp => "edge_up",
        Stage::AggUp => "agg_up",
        Stage::CoreDown => "core_down",
        Stage::AggDown => "agg_down",
        Stage::EdgeDown => "edge_down",
    }
}

/// The metrics of one repetition, by name.
fn metrics_of(report: &RunReport) -> Vec<(String, f64)> {
    let lab = lab_of(report);
    let mut metrics = vec![
        (
            "lower_bound_s".to_owned(),
            report.lower_bound_ps as f64 * 1e-12,
        ),
        (
            "max_queue_packets".to_owned(),
            report.max_queue_packets as f64,
        ),
        ("max_queue_bytes".to_owned(), report.max_queue_bytes as f64),
        ("drops".to_owned(), report.drops.total as f64),
        (
            "retransmissions".to_owned(),
            report.packets.retransmissions as f64,
        ),
        ("ce_marks".to_owned(), report.packets.ecn_marks as f64),
        ("timeouts".to_owned(), report.packets.timeouts as f64),
        (
            "out_of_order_pct".to_owned(),
            report.reordering.fraction() * 100.0,
        ),
        (
            "reorder_distance_max".to_owned(),
            f64::from(report.reordering.max_distance),
        ),
        ("unaccounted".to_owned(), lab.census.unaccounted as f64),
        (
            "shaper_late_p99_packet_times".to_owned(),
            lab.fidelity.shaper_late_p99_packet_times,
        ),
        (
            "agent_rate_ratio_min".to_owned(),
            lab.fidelity.agent_rate_ratio_min,
        ),
    ];
    if lab.delivery.exactly_once {
        if let (Some(cct), Some(increase)) = (report.cct_ps, report.cct_increase) {
            metrics.push(("cct_s".to_owned(), cct as f64 * 1e-12));
            metrics.push(("cct_increase".to_owned(), increase));
            metrics.push(("utilization".to_owned(), report.utilization));
        }
    }
    for queues in &report.queues {
        let key = stage_key(queues.stage);
        metrics.push((format!("max_queue.{key}"), queues.max_packets as f64));
        metrics.push((format!("max_queue_bytes.{key}"), queues.max_bytes as f64));
        metrics.push((format!("mean_queue.{key}"), queues.mean_packets));
        metrics.push((format!("utilization.{key}"), queues.utilization));
        metrics.push((format!("link_overload.{key}"), queues.link_overload));
    }
    metrics
}

/// Groups repetitions into cells (variant × size, in order of appearance) and summarizes them.
#[must_use]
pub fn summarize(runs: Vec<RunReport>) -> Summarized {
    let mut order: Vec<(String, u64)> = Vec::new();
    let mut groups: BTreeMap<(String, u64), Vec<&RunReport>> = BTreeMap::new();
    for run in &runs {
        let key = (
            variant_name(
                &lab_of(run).setup.lb,
                &lab_of(run).setup.host_lb,
                cc_of(run),
            ),
            lab_of(run).setup.message_bytes,
        );
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(run);
    }
    let cells = order
        .into_iter()
        .map(|key| {
            let group = &groups[&key];
            let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for run in group {
                for (name, value) in metrics_of(run) {
                    values.entry(name).or_default().push(value);
                }
            }
            CellSummary {
                variant: key.0.clone(),
                lb: lab_of(group[0]).setup.lb.clone(),
                host_lb: lab_of(group[0]).setup.host_lb.clone(),
                cc: cc_of(group[0]),
                message_bytes: key.1,
                runs: group.len(),
                exactly_once_runs: group
                    .iter()
                    .filter(|r| lab_of(r).delivery.exactly_once)
                    .count(),
                accounted_runs: group
                    .iter()
                    .filter(|r| lab_of(r).census.unaccounted == 0)
                    .count(),
                faithful_runs: group.iter().filter(|r| lab_of(r).fidelity.faithful).count(),
                watched_runs: group.iter().filter(|r| lab_of(r).machine.is_some()).count(),
                stalled_runs: group
                    .iter()
                    .filter_map(|r| lab_of(r).machine.as_ref())
                    .filter(|machine| machine.hidden_stalls > 0)
                    .count(),
                metrics: values
                    .into_iter()
                    .map(|(name, values)| (name, Summary::of(&values)))
                    .collect(),
            }
        })
        .collect();
    Summarized { cells, runs }
}

/// `64KB`, `1MB`, … (binary units, as `--size` reads them), or plain bytes.
#[must_use]
pub fn size_label(bytes: u64) -> String {
    ofan_topology::units::format_size(bytes)
}

/// The fitted growth of one variant's max queue with message size.
#[derive(Debug, Clone, PartialEq)]
pub struct GrowthFit {
    /// The variant.
    pub variant: String,
    /// The exponent: max queue ∝ size^exponent.
    pub exponent: f64,
    /// Goodness of the log–log fit.
    pub r_squared: f64,
}

/// The growth exponent of the max queue with message size for every variant run at two or
/// more sizes (least squares on log–log, as `ofan-lab model fig4`).
#[must_use]
pub fn growth_exponents(results: &Summarized) -> Vec<GrowthFit> {
    let points: Vec<Point> = results
        .cells
        .iter()
        .map(|cell| Point {
            series: cell.variant.clone(),
            x: cell.message_bytes as f64,
            metrics: cell.metrics.clone(),
        })
        .collect();
    let mut variants: Vec<&str> = Vec::new();
    for cell in &results.cells {
        let sizes = results
            .cells
            .iter()
            .filter(|c| c.variant == cell.variant)
            .count();
        if sizes >= 2 && !variants.contains(&cell.variant.as_str()) {
            variants.push(&cell.variant);
        }
    }
    variants
        .into_iter()
        .filter_map(|variant| {
            let fit = fit_exponent(&points, variant, "max_queue_bytes")?;
            Some(GrowthFit {
                variant: variant.to_owned(),
                exponent: fit.exponent,
                r_squared: fit.r_squared,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{
        Census, Delivery, Details, Drops, Fidelity, LabRun, LabSetup, PacketCounts, QueueStats,
        SCHEMA,
    };

    fn run(lb: &str, host_lb: &str, bytes: u64, repetition: u32, max_bytes: u64) -> RunReport {
        RunReport {
            schema: SCHEMA.into(),
            hosts: 16,
            flows: 16,
            cct_ps: Some(1_000_000 + u64::from(repetition) * 100_000),
            lower_bound_ps: 1_000_000,
            cct_increase: Some(f64::from(repetition) * 0.1),
            utilization: 0.9,
            max_queue_packets: max_bytes / 1514,
            max_queue_bytes: max_bytes,
            queues: vec![QueueStats {
                stage: Stage::EdgeUp,
                ports: 16,
                max_packets: max_bytes / 1514,
                max_data_packets: None,
                max_bytes,
                mean_packets: 1.0,
                mean_bytes: 1514.0,
                link_overload: 0.0,
                utilization: 0.8,
            }],
            packets: PacketCounts::default(),
            drops: Drops::default(),
            reordering: ofan_transport::Reordering::default(),
            phases: Vec::new(),
            details: Details::Lab(LabRun {
                setup: LabSetup {
                    lab: "t".into(),
                    collective: "permutation".into(),
                    lb: lb.into(),
                    arf_combine: Default::default(),
                    host_lb: host_lb.into(),
                    message_bytes: bytes,
                    load: 1.0,
                    link_rate_bps: 1_000_000,
                    payload: 1472,
                    buffer: "2MB".into(),
                    catch_up: true,
                    cc: None,
                    repetition,
                    seed: 1 + u64::from(repetition),
                    slowed_links: Vec::new(),
                },
                delivery: Delivery {
                    complete: true,
                    exactly_once: true,
                    ..Delivery::default()
                },
                census: Census::default(),
                fidelity: Fidelity {
                    faithful: true,
                    ..Fidelity::default()
                },
                chaos: None,
                machine: None,
                planes: None,
            }),
        }
    }

    #[test]
    fn cells_group_variants_and_sizes_with_mean_and_sem() {
        let runs = vec![
            run("ecmp", "spray", 1 << 20, 0, 3000),
            run("ecmp", "spray", 1 << 20, 1, 5000),
            run("ofan", "none", 1 << 20, 0, 3000),
        ];
        let results = summarize(runs);
        assert_eq!(results.cells.len(), 2);
        let spray = &results.cells[0];
        assert_eq!((spray.variant.as_str(), spray.runs), ("spray", 2));
        let max = spray.metrics["max_queue_bytes"];
        assert_eq!((max.mean, max.sem), (4000.0, 1000.0));
        assert!((spray.metrics["cct_increase"].mean - 0.05).abs() < 1e-12);
        // Not watched (a lab of switch processes): none stalled, none watched.
        assert_eq!((spray.watched_runs, spray.stalled_runs), (0, 0));
    }

    #[test]
    fn runs_under_another_congestion_control_are_another_cell() {
        let under = |cc: CcKind, repetition: u32| {
            let mut report = run("ofan", "none", 1 << 20, repetition, 3000);
            if let Details::Lab(lab) = &mut report.details {
                let path = ofan_transport::PathParams {
                    mss: 1518,
                    base_rtt: 10_000_000,
                    rate_bps: 8_000_000,
                };
                lab.setup.cc = ofan_lab_agent::cc_config(cc, 1472, path.base_rtt, path.rate_bps);
            }
            report
        };
        let results = summarize(vec![
            under(CcKind::None, 0),
            under(CcKind::Dctcp, 0),
            under(CcKind::Dctcp, 1),
            under(CcKind::Nscc, 0),
        ]);
        let cells: Vec<(&str, CcKind, usize)> = results
            .cells
            .iter()
            .map(|cell| (cell.variant.as_str(), cell.cc, cell.runs))
            .collect();
        assert_eq!(
            cells,
            [
                ("ofan", CcKind::None, 1),
                ("ofan/dctcp", CcKind::Dctcp, 2),
                ("ofan/nscc", CcKind::Nscc, 1)
            ]
        );
        let variant = Variant::new("rsq", HostLb::Spray).unwrap();
        assert_eq!(variant.with_cc(CcKind::Mswift).name(), "rsq+spray/mswift");
    }

    #[test]
    fn a_cell_counts_its_watched_runs_and_those_the_machine_stalled() {
        let watched = |repetition: u32, stalls: u64| {
            let mut report = run("pofan", "none", 1 << 20, repetition, 3000);
            if let Details::Lab(lab) = &mut report.details {
                lab.machine = Some(ofan_model::report::MachineStalls {
                    seconds: 1.0,
                    cpus: 2,
                    watched: 0.7,
                    hidden_stalls: stalls,
                    hidden_ms_total: stalls as f64 * 2.0,
                    hidden_ms_max: if stalls > 0 { 2.0 } else { 0.0 },
                    steal_max: 0.0,
                    cpus_full: None,
                });
            }
            report
        };
        let results = summarize(vec![
            watched(0, 3),
            watched(1, 0),
            watched(2, 1),
            run("pofan", "none", 1 << 20, 3, 3000),
        ]);
        let cell = &results.cells[0];
        assert_eq!((cell.runs, cell.watched_runs, cell.stalled_runs), (4, 3, 2));
    }

    #[test]
    fn growth_exponent_of_square_root_queues_is_one_half() {
        let runs = [1u64 << 16, 1 << 18, 1 << 20, 1 << 22]
            .iter()
            .flat_map(|&bytes| {
                let sqrt = ((bytes as f64).sqrt() * 10.0) as u64;
                [
                    run("rsq", "none", bytes, 0, sqrt),
                    run("ofan", "none", bytes, 0, 4500),
                ]
            })
            .collect();
        let fits = growth_exponents(&summarize(runs));
        assert_eq!(fits.len(), 2);
        assert_eq!(fits[0].variant, "rsq");
        assert!((fits[0].exponent - 0.5).abs() < 0.005, "{fits:?}");
        assert_eq!(fits[1].variant, "ofan");
        assert!(fits[1].exponent.abs() < 0.005, "{fits:?}");
    }

    #[test]
    fn variant_names_and_sizes() {
        assert_eq!(Variant::new("OFAN", HostLb::None).unwrap().name(), "ofan");
        assert_eq!(Variant::new("ecmp", HostLb::Reps).unwrap().name(), "reps");
        assert_eq!(
            Variant::new("rsq", HostLb::Spray).unwrap().name(),
            "rsq+spray"
        );
        assert!(Variant::new("fastest", HostLb::None).is_err());
        assert_eq!(size_label(1 << 20), "1MB");
        assert_eq!(size_label(64 << 10), "64KB");
        assert_eq!(size_label(1500), "1500B");
    }
}
