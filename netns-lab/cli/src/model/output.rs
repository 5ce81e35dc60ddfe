//! What `model run` prints and writes: the results table, the JSON reports and their parts.

use super::*;

/// The reports as `run` writes them: one object for one seed, else an array.
pub(super) fn reports_json(reports: &[RunReport]) -> anyhow::Result<String> {
    Ok(if reports.len() == 1 {
        serde_json::to_string_pretty(&reports[0])?
    } else {
        serde_json::to_string_pretty(&reports)?
    })
}

/// `part-I-of-N`, the name part files carry.
pub(super) fn part_suffix(shard: Shard) -> String {
    format!("part-{}-of-{}", shard.index, shard.count)
}

pub(super) fn write_out(path: &PathBuf, text: &str) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        println!("{text}");
        Ok(())
    } else {
        fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    }
}

/// The scheme column: the scheme, and what other switches run (`ar+pofan@edge`, `ar+map`);
/// an `arf-*` scheme with a combination rule other than `min` names it (`arf-wcmp/sum`).
pub(super) fn scheme_label(config: &ModelConfig) -> String {
    if config.scheme.uses_arf() && !config.arf.combine.is_min() {
        return format!("{}/{}", config.scheme, config.arf.combine);
    }
    match &config.switch_schemes {
        SwitchSchemes::Uniform => config.scheme.name().to_owned(),
        SwitchSchemes::Map { .. } => format!("{}+map", config.scheme),
        SwitchSchemes::Mix { scheme, placement } => {
            format!("{}+{scheme}@{placement}", config.scheme)
        }
    }
}

pub(super) fn print_reports(reports: &[RunReport]) {
    println!(
        "{:>10} {:>6} {:>5} {:>10} {:>10} {:>8} {:>6} {:>9} {:>26} {:>9} {:>8} {:>8} {:>7} {:>6}",
        "scheme",
        "cc",
        "seed",
        "CCT µs",
        "bound µs",
        "incr %",
        "util",
        "maxQ KB",
        "max queue pkts H E A C A E",
        "edge≤w+1",
        "drops",
        "retx",
        "ooo %",
        "reord"
    );
    for r in reports {
        let stages: Vec<String> = Stage::ALL
            .iter()
            .map(|&s| r.stage(s).map_or(0, |q| q.max_packets).to_string())
            .collect();
        let model = model_of(r);
        let edge = &model.edge_uplink;
        println!(
            "{:>10} {:>6} {:>5} {:>10} {:>10.3} {:>8} {:>6.3} {:>9.1} {:>26} {:>9} {:>8} {:>8} {:>7.2} {:>6}",
            scheme_label(&model.config),
            model.config.cc.name(),
            model.config.seed,
            r.cct_ps
                .map_or("-".into(), |c| format!("{:.3}", c as f64 / 1e6)),
            r.lower_bound_ps as f64 / 1e6,
            r.cct_increase
                .map_or("-".into(), |i| format!("{:.2}", i * 100.0)),
            r.utilization,
            r.max_queue_bytes as f64 / 1000.0,
            stages.join(" "),
            if edge.applies {
                format!(
                    "{}/{}{}",
                    edge.max_data_packets,
                    edge.bound_data_packets,
                    if edge.violations > 0 { "!" } else { "" }
                )
            } else {
                // The bound is only claimed for Ofan on a permutation without failures.
                format!("{} (n/a)", edge.max_data_packets)
            },
            r.drops.total,
            r.packets.retransmissions,
            r.reordering.fraction() * 100.0,
            r.reordering.max_distance,
        );
    }
    println!(
        "ooo %: first arrivals that came after a higher sequence number of their flow; \
         reord: the largest reorder distance, packets"
    );
    for r in reports {
        let model = model_of(r);
        for phase in &r.phases {
            let us =
                |ps: Option<u64>| ps.map_or("-".into(), |ps| format!("{:.3}", ps as f64 / 1e6));
            println!(
                "{:>10} {:>5}   phase {}: {} flows, {} µs → {} µs, CCT {} µs",
                model.config.scheme.name(),
                model.config.seed,
                phase.name,
                phase.flows,
                us(phase.start_ps),
                us(phase.end_ps),
                us(phase.cct_ps),
            );
        }
        for slow in &model.degraded {
            println!(
                "{:>10} {:>5}   degraded {} → {} at {:.2}: {:.1} KB, {:.2} × its stage's mean",
                model.config.scheme.name(),
                model.config.seed,
                slow.from,
                slow.to,
                slow.rate,
                slow.bytes as f64 / 1000.0,
                slow.share_of_stage_mean
            );
        }
        for failed in &model.link_failures {
            let us = |ps: u64| ps as f64 / 1e6;
            let notified: Vec<u64> = failed
                .learned
                .iter()
                .filter(|learned| learned.detected_ps.is_none())
                .filter_map(|learned| learned.notified_ps)
                .collect();
            println!(
                "{:>10} {:>5}   failed {} – {} at {:.1} µs: detected {:.1} µs, rerouted {:.1} µs, \
                 {} switches notified (first {}), lost {} queued + {} in flight + {} unaware \
                 + {} no route (last at {})",
                model.config.scheme.name(),
                model.config.seed,
                failed.from,
                failed.to,
                us(failed.at_ps),
                us(failed.detected_ps),
                us(failed.rerouted_ps),
                notified.len(),
                notified
                    .iter()
                    .min()
                    .map_or("-".into(), |&t| format!("{:.1} µs", us(t))),
                failed.lost_queued,
                failed.lost_in_flight,
                failed.lost_unaware,
                failed.no_route,
                failed
                    .last_loss_ps
                    .map_or("-".into(), |t| format!("{:.1} µs", us(t))),
            );
        }
        if let Some(cc) = &model.cc {
            let us = |ps: u64| ps as f64 / 1e6;
            println!(
                "{:>10} {:>5}   cc {}: base RTT {:.2} µs, initial window {:.1} KB, timeouts \
                 {} (rto_min {:.2} µs), reordering-window losses {} (window {} ‰ of srtt), \
                 reordered ACKs {} of {}, max reordering {:.2} µs, final window {:.1} KB",
                model.config.scheme.name(),
                model.config.seed,
                cc.config.kind,
                us(cc.config.path.base_rtt),
                cc.config.initial_window as f64 / 1000.0,
                r.packets.timeouts,
                us(cc.recovery.rto_min),
                cc.reorder_losses,
                cc.reorder_window_permille,
                cc.reordered_acks,
                cc.rtt_samples,
                us(cc.max_reordering_ps),
                cc.mean_final_window as f64 / 1000.0,
            );
        }
        if model.config.trim {
            println!(
                "{:>10} {:>5}   trimming: {} DATA frames cut to their header at a full buffer, \
                 {} NACKed",
                model.config.scheme.name(),
                model.config.seed,
                r.packets.trimmed,
                r.packets.nacks,
            );
        }
        if model.config.receiver_credit && model.cc.is_some() {
            println!(
                "{:>10} {:>5}   receiver credits: {} PULLs (one data frame each)",
                model.config.scheme.name(),
                model.config.seed,
                r.packets.pulls,
            );
        }
        if let Some(planes) = &model.planes {
            let list = |values: &[u64]| {
                values
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("/")
            };
            println!(
                "{:>10} {:>5}   planes ({}): DATA {}, CE-marked ACKs {}, losses {}, views passed to hosts {}",
                model.config.scheme.name(),
                model.config.seed,
                planes.policy,
                list(&planes.data_sent),
                list(&planes.ce_acks),
                list(&planes.losses),
                planes.views_delivered,
            );
        }
        if let Some(arf) = &model.arf {
            let us = |ps: u64| ps as f64 / 1e6;
            println!(
                "{:>10} {:>5}   arf: {} detections (first at {}), {} notifications ({} refreshes), \
                 {} applied ({} changed, {} stale), {} publications, {:.1} KB = {:.4} % of fabric \
                 bytes, reaction {} µs, {} flows moved",
                model.config.scheme.name(),
                model.config.seed,
                arf.detections,
                arf.first_detection_ps
                    .map_or("-".into(), |t| format!("{:.1} µs", us(t))),
                arf.sent,
                arf.refreshes,
                arf.applied,
                arf.changed,
                arf.stale,
                arf.publications,
                arf.bytes as f64 / 1000.0,
                arf.overhead * 100.0,
                match (arf.reaction_min_ps, arf.reaction_max_ps) {
                    (Some(min), Some(max)) => format!("{:.1}–{:.1}", us(min), us(max)),
                    _ => "-".into(),
                },
                arf.flows_moved,
            );
        }
    }
}

/// The model's section of a report the model wrote.
pub(super) fn model_of(report: &RunReport) -> &ofan_model::report::ModelRun {
    report
        .model()
        .expect("ofan_model::run writes reports with a model section")
}
