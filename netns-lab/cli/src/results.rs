//! The experiments' tables and progress lines.

use std::fmt::Write as _;
use std::time::Duration;

use ofan_lab_experiment::metrics::{
    emulation_drops, lab_of, RunReport, FAITHFUL_AGENT_RATE, FAITHFUL_LATENESS,
    FAITHFUL_RECEIVER_WINDOW,
};
use ofan_lab_experiment::summary::{
    size_label, stage_key, CellSummary, GrowthFit, Summarized, Variant,
};
use ofan_model::report::{ChaosRecord, Drops, Stage};

fn mean_sem(cell: &CellSummary, metric: &str, scale: f64, decimals: usize) -> String {
    match cell.metrics.get(metric) {
        Some(s) if s.runs > 1 => format!(
            "{:.decimals$} ± {:.decimals$}",
            s.mean * scale,
            s.sem * scale
        ),
        Some(s) => format!("{:.decimals$}", s.mean * scale),
        None => "—".to_owned(),
    }
}

/// The table of all cells: CCT and its increase over the bound, max queue (overall and per
/// stage), mean queue, utilization, drops, delivery and fidelity.
#[must_use]
pub fn table(results: &Summarized) -> String {
    let switch_stages: Vec<Stage> = Stage::ALL
        .into_iter()
        .filter(|stage| {
            stage.is_switch()
                && results.cells.iter().any(|c| {
                    c.metrics
                        .contains_key(&format!("max_queue.{}", stage_key(*stage)))
                })
        })
        .collect();
    let mut header = vec![
        "variant".to_owned(),
        "size".to_owned(),
        "runs".to_owned(),
        "CCT s".to_owned(),
        "CCT vs bound %".to_owned(),
        "max queue KB".to_owned(),
    ];
    header.extend(switch_stages.iter().map(|s| format!("{} KB", s.label())));
    header.extend(
        [
            "mean queue pkts",
            "util",
            "drops",
            "retx",
            "ooo %",
            "reord",
            "exactly once",
            "accounted",
            "faithful",
            "stalled",
        ]
        .iter()
        .map(|s| (*s).to_owned()),
    );
    let mut rows = vec![header];
    for cell in &results.cells {
        let mut row = vec![
            cell.variant.clone(),
            size_label(cell.message_bytes),
            cell.runs.to_string(),
            mean_sem(cell, "cct_s", 1.0, 3),
            mean_sem(cell, "cct_increase", 100.0, 1),
            mean_sem(cell, "max_queue_bytes", 1e-3, 1),
        ];
        row.extend(
            switch_stages
                .iter()
                .map(|s| mean_sem(cell, &format!("max_queue_bytes.{}", stage_key(*s)), 1e-3, 1)),
        );
        let mean_queue = switch_stages
            .iter()
            .filter_map(|s| cell.mean(&format!("mean_queue.{}", stage_key(*s))))
            .fold(0.0f64, f64::max);
        row.push(format!("{mean_queue:.2}"));
        row.push(mean_sem(cell, "utilization", 1.0, 3));
        row.push(mean_sem(cell, "drops", 1.0, 0));
        row.push(mean_sem(cell, "retransmissions", 1.0, 0));
        row.push(mean_sem(cell, "out_of_order_pct", 1.0, 1));
        row.push(mean_sem(cell, "reorder_distance_max", 1.0, 0));
        row.push(format!("{}/{}", cell.exactly_once_runs, cell.runs));
        row.push(format!("{}/{}", cell.accounted_runs, cell.runs));
        row.push(format!("{}/{}", cell.faithful_runs, cell.runs));
        row.push(if cell.watched_runs == 0 {
            "—".to_owned()
        } else {
            format!("{}/{}", cell.stalled_runs, cell.watched_runs)
        });
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i < 2 {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        if n == 0 {
            let rule: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(rule));
            out.push('\n');
        }
    }
    // A full DATA frame: UDP payload, UDP and IPv4 headers, Ethernet header.
    let full_frame_kb = results
        .runs
        .first()
        .map_or(1514, |run| lab_of(run).setup.payload + 8 + 20 + 14) as f64
        / 1000.0;
    let _ = writeln!(
        out,
        "mean ± SEM over repetitions; CCT over exactly-once repetitions (every packet delivered, \
         lost ones recovered by retransmission: retx); accounted = repetitions whose every lost \
         frame a drop counter explains; max queue = largest \
         queue of any port of the stage in a repetition, KB (1 full DATA frame = \
         {full_frame_kb:.1} KB; ACKs are 60 B); mean queue = time-averaged frames per port over \
         the CCT, worst stage; util = delivered DATA over line rate × receive windows; ooo % = \
         first arrivals that came after a higher sequence number of their flow, reord = the \
         largest such reorder distance, packets; stalled = \
         watched repetitions in which the machine stalled 1 ms or more below its scheduler (each \
         repetition's `machine` record; labs of switch processes are not watched: —)",
    );
    out
}

/// One fitted growth exponent.
#[must_use]
pub fn growth_line(fit: &GrowthFit) -> String {
    format!(
        "max-queue growth with message size: {:>6} exponent {:.2} (r² {:.2})",
        fit.variant, fit.exponent, fit.r_squared
    )
}

/// The chaos outcomes of a run (`--chaos`): per fault kind how many repetitions were accounted
/// for and how many voided, then each voided one and why. Empty without chaos.
#[must_use]
pub fn chaos_summary(results: &Summarized) -> String {
    let records: Vec<&ChaosRecord> = results
        .runs
        .iter()
        .filter_map(|run| lab_of(run).chaos.as_ref())
        .collect();
    if records.is_empty() {
        return String::new();
    }
    let mut out = String::from("chaos: fault kind    repetitions  accounted  voided\n");
    let mut kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    for kind in kinds {
        let of_kind = records.iter().filter(|r| r.kind == kind);
        let (total, accounted) = of_kind.fold((0, 0), |(t, a), r| {
            (t + 1, a + usize::from(r.outcome == "accounted"))
        });
        let _ = writeln!(
            out,
            "       {kind:<15} {total:>11}  {accounted:>9}  {:>6}",
            total - accounted
        );
    }
    for (index, record) in records.iter().enumerate() {
        if let Some(reason) = &record.reason {
            let _ = writeln!(out, "  voided #{}: {} — {reason}", index + 1, record.fault);
        }
    }
    out
}

/// A repetition's progress line says how often the CPUs were full (`machine.cpus_full`) from
/// this share of its 10-ms windows on: less is the odd burst, not a lab too large for the
/// machine at its rate.
const CPUS_FULL_SHOWN: f64 = 0.01;

/// `, routes changed N times at M switches (…)` when they did during the run: a flapping
/// routing session unless a fault was injected (the chaos record then says which).
fn rerouted(fidelity: &ofan_model::report::Fidelity) -> String {
    if fidelity.route_changes == 0 {
        return String::new();
    }
    let switches = &fidelity.rerouted_switches;
    let shown: Vec<&str> = switches.iter().take(3).map(String::as_str).collect();
    format!(
        ", routes changed {} time{} at {} switch{} ({}{})",
        fidelity.route_changes,
        if fidelity.route_changes == 1 { "" } else { "s" },
        switches.len(),
        if switches.len() == 1 { "" } else { "es" },
        shown.join(", "),
        if switches.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    )
}

/// `, lost N frames to the emulation (switch.neighbor_unresolved 726, …)` when the lab lost
/// frames the fabric under test would not have ([`emulation_drops`]), at most three names.
fn emulation_lost(drops: &Drops) -> String {
    let found = emulation_drops(drops);
    if found.is_empty() {
        return String::new();
    }
    let total: u64 = found.iter().map(|(_, count)| count).sum();
    let shown: Vec<String> = found
        .iter()
        .take(3)
        .map(|(name, count)| format!("{name} {count}"))
        .collect();
    format!(
        ", lost {total} frame{} to the emulation ({}{})",
        if total == 1 { "" } else { "s" },
        shown.join(", "),
        if found.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    )
}

/// ` (shapers late: p99 0.43 packet times at e-p1-0:p1; agents at 0.946 of their rate)`: what
/// of the links' emulation failed a run's verdict (route changes and emulation drops are named
/// after it), or nothing.
/// Each phase's own completion time (`, reduce-scatter 0.962 s, all-gather 0.958 s`), empty
/// for a collective without phases.
fn phases_label(phases: &[ofan_model::PhaseRun]) -> String {
    phases
        .iter()
        .map(|phase| {
            let cct = phase.cct_ps.map_or_else(
                || "incomplete".to_owned(),
                |c| format!("{:.3} s", c as f64 * 1e-12),
            );
            format!(", {} {cct}", phase.name)
        })
        .collect()
}

fn unfaithful_links(fidelity: &ofan_model::report::Fidelity) -> String {
    let mut why = Vec::new();
    if fidelity.shaper_late_p99_packet_times > FAITHFUL_LATENESS {
        why.push(format!(
            "shapers late: p99 {:.2} packet times at {}",
            fidelity.shaper_late_p99_packet_times, fidelity.worst_port
        ));
    }
    if fidelity.agent_rate_ratio_min < FAITHFUL_AGENT_RATE {
        why.push(match fidelity.slowest_agent_lost_sends {
            0 => format!(
                "agents at {:.3} of their rate",
                fidelity.agent_rate_ratio_min
            ),
            sends => format!(
                "agents at {:.3} of their rate, the slowest {:.1} ms behind its schedule after \
                 {sends} late send{}{}",
                fidelity.agent_rate_ratio_min,
                fidelity.slowest_agent_lost_ns as f64 / 1e6,
                if sends == 1 { "" } else { "s" },
                fidelity
                    .slowest_agent_worst_at_ms
                    .map(|at| format!(", the latest {at:.0} ms into the run"))
                    .unwrap_or_default()
            ),
        });
    }
    if fidelity.receiver_window_ratio_min < FAITHFUL_RECEIVER_WINDOW {
        why.push(format!(
            "receivers fed {:.1} % faster than their link",
            (1.0 / fidelity.receiver_window_ratio_min - 1.0) * 100.0
        ));
    }
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join("; "))
    }
}

/// A multi-plane lab's share of the DATA bytes per plane, e.g. `, planes 50/50 % (plane-spray)`.
fn planes_label(planes: &ofan_model::report::PlaneRun) -> String {
    let total: u64 = planes.wire_bytes.iter().sum();
    let shares: Vec<String> = planes
        .wire_bytes
        .iter()
        .map(|&bytes| format!("{:.0}", bytes as f64 * 100.0 / total.max(1) as f64))
        .collect();
    format!(", planes {} % ({})", shares.join("/"), planes.policy)
}

/// One progress line of a grid.
#[must_use]
pub fn progress_line(
    done: usize,
    total: usize,
    elapsed: Duration,
    variant: &Variant,
    report: &RunReport,
) -> String {
    let eta = elapsed.as_secs_f64() / done as f64 * (total - done) as f64;
    let cct = report.cct_ps.map_or_else(
        || "incomplete".to_owned(),
        |c| format!("{:.3} s", c as f64 * 1e-12),
    );
    let lab = lab_of(report);
    let increase = report
        .cct_increase
        .map_or_else(String::new, |i| format!(" (+{:.1} %)", i * 100.0));
    let phases = phases_label(&report.phases);
    let planes = lab.planes.as_ref().map_or_else(String::new, planes_label);
    format!(
        "[{done:>3}/{total}] {:<6} {:>6} rep {}: CCT {cct}{increase}{phases}{planes}, max queue {:.1} KB, drops {}, retx {}, {}{}{}{}{}{}{}{} — elapsed {:.0} s, ETA {eta:.0} s",
        variant.name(),
        size_label(lab.setup.message_bytes),
        lab.setup.repetition + 1,
        report.max_queue_bytes as f64 * 1e-3,
        report.drops.total,
        report.packets.retransmissions,
        if lab.delivery.exactly_once {
            "exactly once"
        } else {
            "NOT exactly once"
        },
        if lab.census.unaccounted > 0 {
            format!(", UNACCOUNTED losses {}", lab.census.unaccounted)
        } else {
            String::new()
        },
        if lab.fidelity.faithful {
            String::new()
        } else {
            format!(", NOT faithful{}", unfaithful_links(&lab.fidelity))
        },
        rerouted(&lab.fidelity),
        emulation_lost(&report.drops),
        lab.machine
            .as_ref()
            .filter(|machine| machine.hidden_stalls > 0)
            .map_or_else(String::new, |machine| format!(
                ", machine stalled {:.1} ms at most ({} stall{} of 1 ms or more in the {:.0} % of \
                 the CPUs' time watched)",
                machine.hidden_ms_max,
                machine.hidden_stalls,
                if machine.hidden_stalls == 1 { "" } else { "s" },
                machine.watched * 100.0
            )),
        lab.machine
            .as_ref()
            .and_then(|machine| machine.cpus_full)
            .filter(|&full| full >= CPUS_FULL_SHOWN)
            .map_or_else(String::new, |full| format!(
                ", CPUs full {:.0} % of the traffic",
                full * 100.0
            )),
        lab.chaos.as_ref().map_or_else(String::new, |chaos| {
            let when = chaos
                .applied_s
                .map_or_else(String::new, |t| format!(" at {t:.2} s"));
            if chaos.outcome == "accounted" {
                format!(", chaos: {}{when} → accounted", chaos.fault)
            } else {
                format!(", chaos: {}{when} → VOIDED", chaos.fault)
            }
        }),
        elapsed.as_secs_f64(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_model::report::Fidelity;

    #[test]
    fn a_run_with_phases_shows_each_phases_completion_time() {
        let phase = |name: &str, cct_ps| ofan_model::PhaseRun {
            name: name.to_owned(),
            flows: 16,
            start_ps: Some(0),
            end_ps: cct_ps,
            cct_ps,
        };
        assert_eq!(phases_label(&[]), "");
        assert_eq!(
            phases_label(&[
                phase("reduce-scatter", Some(962_000_000_000)),
                phase("all-gather", None)
            ]),
            ", reduce-scatter 0.962 s, all-gather incomplete"
        );
    }

    #[test]
    fn an_unfaithful_run_says_which_part_of_the_emulation_failed() {
        let mut fidelity = Fidelity {
            shaper_late_p99_packet_times: 0.2,
            worst_port: "e-p1-0:p1".into(),
            agent_rate_ratio_min: 0.995,
            receiver_window_ratio_min: 1.05,
            ..Fidelity::default()
        };
        assert_eq!(unfaithful_links(&fidelity), "");
        fidelity.shaper_late_p99_packet_times = 0.43;
        assert_eq!(
            unfaithful_links(&fidelity),
            " (shapers late: p99 0.43 packet times at e-p1-0:p1)"
        );
        fidelity.agent_rate_ratio_min = 0.946;
        fidelity.receiver_window_ratio_min = 0.98;
        assert_eq!(
            unfaithful_links(&fidelity),
            " (shapers late: p99 0.43 packet times at e-p1-0:p1; agents at 0.946 of their rate; \
             receivers fed 2.0 % faster than their link)"
        );
        // What the slowest agent's late sends cost: a stall or two, milliseconds each.
        fidelity.receiver_window_ratio_min = 1.0;
        fidelity.shaper_late_p99_packet_times = 0.1;
        fidelity.agent_rate_ratio_min = 0.978;
        fidelity.slowest_agent_lost_ns = 25_600_000;
        fidelity.slowest_agent_lost_sends = 2;
        assert_eq!(
            unfaithful_links(&fidelity),
            " (agents at 0.978 of their rate, the slowest 25.6 ms behind its schedule after 2 \
             late sends)"
        );
        fidelity.slowest_agent_lost_sends = 1;
        assert!(unfaithful_links(&fidelity).ends_with("after 1 late send)"));
        fidelity.slowest_agent_worst_at_ms = Some(212.4);
        assert!(unfaithful_links(&fidelity)
            .ends_with("after 1 late send, the latest 212 ms into the run)"));
    }

    #[test]
    fn emulation_drops_are_named_in_the_progress_line_most_frequent_first() {
        let mut drops = Drops::default();
        drops.add("switch.buffer", 40);
        assert_eq!(emulation_lost(&drops), "");
        drops.add("xsk.rx_ring_full", 3);
        drops.add("switch.neighbor_unresolved", 726);
        assert_eq!(
            emulation_lost(&drops),
            ", lost 729 frames to the emulation (switch.neighbor_unresolved 726, xsk.rx_ring_full 3)"
        );
        drops.add("host.udp_rcvbuf", 1);
        drops.add("kernel.tx_dropped", 1);
        assert!(
            emulation_lost(&drops).ends_with("host.udp_rcvbuf 1, …)"),
            "{}",
            emulation_lost(&drops)
        );
    }

    #[test]
    fn changed_routes_are_named_in_the_progress_line_at_most_three_switches() {
        let mut fidelity = Fidelity::default();
        assert_eq!(rerouted(&fidelity), "");
        fidelity.route_changes = 1;
        fidelity.rerouted_switches = vec!["e-p0-0".into()];
        assert_eq!(
            rerouted(&fidelity),
            ", routes changed 1 time at 1 switch (e-p0-0)"
        );
        fidelity.route_changes = 9;
        fidelity.rerouted_switches = ["e-p0-0", "a-p0-1", "c-2", "c-3"].map(String::from).into();
        assert_eq!(
            rerouted(&fidelity),
            ", routes changed 9 times at 4 switches (e-p0-0, a-p0-1, c-2, …)"
        );
    }
}
