//! Medians, ratios and the table of `bench forward` (pure: no I/O, unit-tested).

use std::fmt::Write as _;

/// One measurement of one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Round (0-based).
    pub round: usize,
    /// Frames per second counted by the sink, in millions.
    pub mpps: f64,
    /// Frames per second the generator got onto the wire, in millions.
    pub offered_mpps: f64,
    /// Frames per second the device under test says it sent (its own counters), if it has any.
    pub dut_mpps: Option<f64>,
    /// Frames the sink received per RX queue during the measurement (queue 0 first; trailing
    /// empty queues left out).
    pub queues: Vec<u64>,
    /// An ofan-switch's own per-queue counters over the measurement, with several queues.
    pub dut_queues: DutQueues,
    /// The candidate's fault drop counters that grew during the measurement, by name (an
    /// ofan-switch's `drop_*`; empty for a candidate that forwarded everything it could).
    pub faults: Vec<(String, u64)>,
}

/// What an ofan-switch counted per queue during a measurement (empty with one queue, or for
/// another candidate).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DutQueues {
    /// Frames received on each queue of p0.
    pub received: Vec<u64>,
    /// Frames sent on each queue of p1.
    pub sent: Vec<u64>,
}

/// What became of one candidate.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Measured in every round.
    Measured(Vec<Sample>),
    /// Not measured, and why.
    Unavailable(String),
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Short name (`ofan`, `bare`, …).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// Its measurements.
    pub outcome: Outcome,
}

impl Row {
    /// Median sink rate, if measured.
    pub fn median_mpps(&self) -> Option<f64> {
        match &self.outcome {
            Outcome::Measured(samples) => median(samples.iter().map(|s| s.mpps)),
            Outcome::Unavailable(_) => None,
        }
    }
}

/// The median of some values (mean of the middle two for an even count); `None` if empty.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut values: Vec<f64> = values.into_iter().collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    })
}

/// `a / b` when both are known and `b` is not zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The median over rounds of `a`'s rate divided by `b`'s in the same round: the two were
/// measured seconds apart, so load that drifts over the run cancels in each quotient, which the
/// ratio of the two medians does not do. `None` unless both were measured in a common round.
pub fn paired_ratio(a: &Row, b: &Row) -> Option<f64> {
    median(round_ratios(a, b))
}

/// The per-round ratios `a / b` (rounds in which both were measured).
fn round_ratios(a: &Row, b: &Row) -> Vec<f64> {
    let (Outcome::Measured(a), Outcome::Measured(b)) = (&a.outcome, &b.outcome) else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|x| {
            b.iter()
                .find(|y| y.round == x.round)
                .and_then(|y| ratio(Some(x.mpps), Some(y.mpps)))
        })
        .collect()
}

/// A ratio with its 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Geometric mean of the per-round ratios.
    pub estimate: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Rounds it rests on.
    pub rounds: usize,
}

/// Student's t for a two-sided 95 % interval with `df` degrees of freedom (1.96 past 30).
fn t_975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    TABLE.get(df.wrapping_sub(1)).copied().unwrap_or(1.96)
}

/// The geometric mean of the per-round ratios `a / b` with a 95 % confidence interval (Student's
/// t on the logarithms, rounds taken as independent): how precisely the run pins the ratio down
/// on a machine whose rate moves by ±15 % from second to second. `None` below two common rounds.
pub fn paired_interval(a: &Row, b: &Row) -> Option<Interval> {
    let logs: Vec<f64> = round_ratios(a, b).into_iter().map(f64::ln).collect();
    let n = logs.len();
    if n < 2 {
        return None;
    }
    let mean = logs.iter().sum::<f64>() / n as f64;
    let variance = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t_975(n - 1) * (variance / n as f64).sqrt();
    Some(Interval {
        estimate: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
        rounds: n,
    })
}

/// A comparison the benchmark's targets are stated in: `candidate` forwards at least
/// `at_least` times what `baseline` forwards.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// The candidate measured.
    pub candidate: &'static str,
    /// What it is measured against, in the same rounds.
    pub baseline: &'static str,
    /// The ratio it should reach.
    pub at_least: f64,
}

impl Target {
    /// `candidate/baseline`, as the report names it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.candidate, self.baseline)
    }

    /// `candidate_baseline`, the JSON key.
    pub fn key(&self) -> String {
        format!("{}_{}", self.candidate, self.baseline)
    }
}

/// The targets: the switch's user-space path against bare AF_XDP forwarding and against
/// testpmd, and its XDP fast path against a bare XDP_REDIRECT.
pub const TARGETS: [Target; 3] = [
    Target {
        candidate: "ofan",
        baseline: "bare",
        at_least: 0.95,
    },
    Target {
        candidate: "ofan",
        baseline: "testpmd",
        at_least: 1.0,
    },
    Target {
        candidate: "xdp",
        baseline: "redirect",
        at_least: 0.8,
    },
];

/// The rows named `a` and `b`, if both are in `rows`.
fn pair<'a>(rows: &'a [Row], a: &str, b: &str) -> Option<(&'a Row, &'a Row)> {
    let row = |name: &str| rows.iter().find(|r| r.name == name);
    row(a).zip(row(b))
}

/// [`paired_ratio`] of the rows named `a` and `b`, if both are in `rows`.
pub fn paired_ratio_of(rows: &[Row], a: &str, b: &str) -> Option<f64> {
    pair(rows, a, b).and_then(|(a, b)| paired_ratio(a, b))
}

/// [`paired_interval`] of the rows named `a` and `b`, if both are in `rows`.
pub fn interval_of(rows: &[Row], a: &str, b: &str) -> Option<Interval> {
    pair(rows, a, b).and_then(|(a, b)| paired_interval(a, b))
}

fn interval_cell(interval: Option<Interval>) -> String {
    interval.map_or_else(
        || "–".to_owned(),
        |i| format!("{:.3} [{:.3}, {:.3}]", i.estimate, i.low, i.high),
    )
}

/// A round in which a candidate forwarded less than a floor times what the baseline forwarded.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortfall {
    /// The candidate.
    pub candidate: &'static str,
    /// The round (0-based).
    pub round: usize,
    /// Its rate over the baseline's in that round.
    pub ratio: f64,
}

/// Every round in which one of `candidates` forwarded less than `floor` × what `baseline`
/// forwarded in the same round (a candidate or baseline not measured is skipped: the caller
/// checks that they were). A functional check, not a speed target: run after run, the AF_XDP
/// switch forwards about as much as the bare port-to-port mode of the same process, so less
/// than half of it means a switch that drops or stalls.
pub fn shortfalls(rows: &[Row], candidates: &[&str], baseline: &str, floor: f64) -> Vec<Shortfall> {
    let Some(base) = rows.iter().find(|row| row.name == baseline) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for row in rows.iter().filter(|row| candidates.contains(&row.name)) {
        let (Outcome::Measured(samples), Outcome::Measured(base_samples)) =
            (&row.outcome, &base.outcome)
        else {
            continue;
        };
        for sample in samples {
            let paired = base_samples.iter().find(|b| b.round == sample.round);
            if let Some(ratio) = paired.and_then(|b| ratio(Some(sample.mpps), Some(b.mpps))) {
                if ratio < floor {
                    found.push(Shortfall {
                        candidate: row.name,
                        round: sample.round,
                        ratio,
                    });
                }
            }
        }
    }
    found
}

/// Within this fraction of the offered rate, a candidate forwarded everything it was given.
const GENERATOR_BOUND: f64 = 0.97;

/// What limited a candidate: the generator when it forwarded (nearly) all it was offered, so
/// its own limit is higher than measured; else the candidate itself.
fn limit(forwarded: Option<f64>, offered: Option<f64>) -> &'static str {
    match ratio(forwarded, offered) {
        Some(share) if share >= GENERATOR_BOUND => "generator (forwarded all offered)",
        Some(_) => "candidate",
        None => "–",
    }
}

fn cell(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.digits$}"))
}

/// The markdown table: one row per candidate, then the ratios the targets are stated in.
pub fn table(rows: &[Row]) -> String {
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .and_then(Row::median_mpps)
    };
    let ceiling = find("redirect");
    let mut out = String::new();
    out.push_str(
        "| candidate | median Mpps | min – max | runs | offered Mpps | DUT-counted Mpps | vs redirect | limited by |\n\
         |---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for row in rows {
        match &row.outcome {
            Outcome::Measured(samples) => {
                let min = samples.iter().map(|s| s.mpps).fold(f64::INFINITY, f64::min);
                let max = samples.iter().map(|s| s.mpps).fold(0.0, f64::max);
                let dut = median(samples.iter().filter_map(|s| s.dut_mpps));
                let offered = median(samples.iter().map(|s| s.offered_mpps));
                let _ = writeln!(
                    out,
                    "| `{}` {} | **{}** | {:.3} – {:.3} | {} | {} | {} | {} | {} |",
                    row.name,
                    row.description,
                    cell(row.median_mpps(), 3),
                    min,
                    max,
                    samples.len(),
                    cell(offered, 3),
                    cell(dut, 3),
                    cell(ratio(row.median_mpps(), ceiling), 2),
                    limit(row.median_mpps(), offered),
                );
            }
            Outcome::Unavailable(reason) => {
                let _ = writeln!(
                    out,
                    "| `{}` {} | not installed/unavailable: {} | | | | | | |",
                    row.name, row.description, reason
                );
            }
        }
    }
    let list = |each: &dyn Fn(&Target) -> String| {
        TARGETS
            .iter()
            .map(|target| format!("{} = {}", target.label(), each(target)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let _ = writeln!(
        out,
        "\nRatios of medians: {}.",
        list(&|t| format!(
            "{} (target ≥ {:.2})",
            cell(ratio(find(t.candidate), find(t.baseline)), 2),
            t.at_least
        )),
    );
    let _ = writeln!(
        out,
        "Medians of per-round ratios (each round's candidates measured back to back): {}.",
        list(&|t| cell(paired_ratio_of(rows, t.candidate, t.baseline), 2)),
    );
    let rounds = TARGETS
        .iter()
        .filter_map(|t| interval_of(rows, t.candidate, t.baseline))
        .map(|i| i.rounds)
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "Geometric means of per-round ratios with 95 % confidence intervals: {} ({} rounds).",
        list(&|t| interval_cell(interval_of(rows, t.candidate, t.baseline))),
        rounds,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mpps: f64) -> Sample {
        Sample {
            round: 0,
            mpps,
            offered_mpps: 2.0,
            dut_mpps: Some(mpps),
            queues: vec![1000],
            dut_queues: DutQueues::default(),
            faults: Vec::new(),
        }
    }

    /// A measured row whose round r forwarded `rates[r]`.
    fn measured(name: &'static str, rates: &[f64]) -> Row {
        Row {
            name,
            description: "",
            outcome: Outcome::Measured(
                rates
                    .iter()
                    .enumerate()
                    .map(|(round, &mpps)| Sample {
                        round,
                        ..sample(mpps)
                    })
                    .collect(),
            ),
        }
    }

    #[test]
    fn shortfalls_are_rounds_below_the_floor_against_the_same_rounds_baseline() {
        let row = measured;
        let rows = [
            row("ofan", &[0.9, 0.0, 0.5]),
            row("bare", &[1.0, 1.0, 1.2]),
            row("redirect", &[0.1, 0.1, 0.1]),
        ];
        // Round 1 forwarded nothing; round 2 is 0.417 of bare. The redirect is not checked.
        let found = shortfalls(&rows, &["ofan", "xdp", "redirect"][..2], "bare", 0.5);
        assert_eq!(
            found
                .iter()
                .map(|s| (s.candidate, s.round))
                .collect::<Vec<_>>(),
            [("ofan", 1), ("ofan", 2)]
        );
        assert!((found[1].ratio - 0.5 / 1.2).abs() < 1e-9);
        assert!(shortfalls(&rows, &["ofan"], "bare", 0.4).len() == 1);
        // No baseline, nothing to compare with.
        assert!(shortfalls(&rows[..1], &["ofan"], "bare", 0.5).is_empty());
    }

    #[test]
    fn medians() {
        assert_eq!(median([]), None);
        assert_eq!(median([3.0]), Some(3.0));
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn paired_ratios_divide_within_a_round() {
        let at = |round, mpps| Sample {
            round,
            ..sample(mpps)
        };
        let a = Row {
            name: "ofan",
            description: "",
            outcome: Outcome::Measured(vec![at(0, 1.0), at(1, 2.0), at(2, 0.9)]),
        };
        let b = Row {
            name: "bare",
            description: "",
            outcome: Outcome::Measured(vec![at(0, 1.0), at(1, 2.5), at(2, 1.0)]),
        };
        // Per round 1.0, 0.8, 0.9 → median 0.9; the ratio of medians would be 1.0 / 1.0.
        assert_eq!(paired_ratio(&a, &b), Some(0.9));
        let none = Row {
            name: "testpmd",
            description: "",
            outcome: Outcome::Unavailable("x".into()),
        };
        assert_eq!(paired_ratio(&a, &none), None);
    }

    #[test]
    fn paired_intervals_cover_the_ratio_and_narrow_with_rounds() {
        let row = measured;
        // Per-round ratios 0.9 and 1.1 alternating: geometric mean √0.99.
        let base: Vec<f64> = (0..40).map(|i| 0.5 + 0.01 * f64::from(i % 7)).collect();
        let wobble = |n: usize| -> Vec<f64> {
            base[..n]
                .iter()
                .enumerate()
                .map(|(i, b)| b * if i % 2 == 0 { 0.9 } else { 1.1 })
                .collect()
        };
        let short = paired_interval(&row("ofan", &wobble(4)), &row("bare", &base[..4])).unwrap();
        let long = paired_interval(&row("ofan", &wobble(40)), &row("bare", &base)).unwrap();
        for interval in [short, long] {
            assert!(
                (interval.estimate - 0.99f64.sqrt()).abs() < 1e-9,
                "{interval:?}"
            );
            assert!(interval.low < interval.estimate && interval.estimate < interval.high);
        }
        assert_eq!((short.rounds, long.rounds), (4, 40));
        assert!(
            long.high - long.low < (short.high - short.low) / 4.0,
            "{short:?} {long:?}"
        );
        // Constant ratios: a zero-width interval.
        let exact = paired_interval(&row("ofan", &[0.5, 0.6]), &row("bare", &[1.0, 1.2])).unwrap();
        assert!((exact.low - 0.5).abs() < 1e-12 && (exact.high - 0.5).abs() < 1e-12);
        assert_eq!(
            paired_interval(&row("ofan", &[0.5]), &row("bare", &[1.0])),
            None
        );
    }

    #[test]
    fn ratios_need_both_sides() {
        assert_eq!(ratio(Some(1.0), Some(2.0)), Some(0.5));
        assert_eq!(ratio(Some(1.0), None), None);
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
    }

    #[test]
    fn table_has_a_row_per_candidate_and_the_ratios() {
        let rows = [
            Row {
                name: "ofan",
                description: "switch",
                outcome: Outcome::Measured(vec![sample(0.9), sample(1.0), sample(0.8)]),
            },
            Row {
                name: "bare",
                description: "bare",
                outcome: Outcome::Measured(vec![sample(1.0)]),
            },
            Row {
                name: "testpmd",
                description: "dpdk",
                outcome: Outcome::Unavailable("dpdk-testpmd not on PATH".into()),
            },
            Row {
                name: "redirect",
                description: "xdp",
                outcome: Outcome::Measured(vec![sample(3.6)]),
            },
        ];
        let text = table(&rows);
        assert!(text.contains("| **0.900** | 0.800 – 1.000 | 3 |"), "{text}");
        assert!(text.contains("| candidate |"), "{text}");
        assert!(
            text.contains("| generator (forwarded all offered) |"),
            "{text}"
        );
        assert!(text.contains("not installed/unavailable: dpdk-testpmd not on PATH"));
        assert!(text.contains("| 0.25 |"), "{text}");
        assert!(text.contains("ofan/bare = 0.90"));
        // Paired: only round 0 has both (0.9 / 1.0).
        assert!(text.contains("per-round ratios (each round's candidates measured back to back): ofan/bare = 0.90"), "{text}");
        assert!(text.contains("ofan/testpmd = –"));
    }
}
