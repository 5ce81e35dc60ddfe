//! The checks of every exercise: pure functions of the lab's [`LabFacts`] and the results'
//! [`Summarized`], each returning what it saw and, when it fails, a hint towards the fix.
//!
//! Checks of figures are plausibility checks, never a target number: a collective cannot end
//! before its lower bound, a growth fit needs three sizes, a degraded-link run must have had a
//! slowed link. Which algorithm wins is the student's to explain — except where the exercise is
//! about a law the mechanism guarantees (exercise 5: random spraying's queues grow with message
//! size faster than Ofan's).

use serde::{Deserialize, Serialize};

use ofan_model::report::RunReport;

use super::facts::{down_label, LabFacts};
use super::{Exercise, Input, Needs};
use ofan_lab_experiment::summary::{growth_exponents, Summarized};

/// Pass or fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The check holds.
    Pass,
    /// It does not.
    Fail,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Short stable name (`pingall`, `routes-match-plan`, …).
    pub id: String,
    /// What is checked, in words.
    pub description: String,
    /// The verdict.
    pub outcome: Outcome,
    /// What the checker saw.
    pub detail: String,
    /// Where to look when it fails (empty when it passed).
    pub hint: String,
}

impl CheckResult {
    fn new(id: &str, description: &str, passed: bool, detail: String, hint: &str) -> Self {
        Self {
            id: id.to_owned(),
            description: description.to_owned(),
            outcome: if passed { Outcome::Pass } else { Outcome::Fail },
            detail,
            hint: if passed {
                String::new()
            } else {
                hint.to_owned()
            },
        }
    }

    /// Whether it passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.outcome == Outcome::Pass
    }
}

/// The link exercise 4 takes down.
pub const FAILED_LINK: (&str, &str) = ("e-p0-0", "a-p0-0");
/// The link exercise 7 takes down under BGP.
pub const BGP_FAILED_LINK: (&str, &str) = ("a-p0-0", "c-0");

/// Runs `exercise`'s checks on `input`. A missing input is one failed check that says how to
/// give it.
#[must_use]
pub fn run(exercise: Exercise, input: &Input<'_>) -> Vec<CheckResult> {
    match exercise.needs() {
        Needs::Lab => {
            let Some(lab) = input.lab else {
                return vec![missing(
                    "lab",
                    "a running lab",
                    "build it (`ofan-lab up …`) and name it with --name",
                )];
            };
            lab_checks(exercise, lab)
        }
        Needs::Results => {
            let Some(results) = input.results else {
                return vec![missing(
                    "results",
                    "a results file",
                    "give the directory `ofan-lab compare --out DIR` wrote with --results DIR",
                )];
            };
            results_checks(exercise, results)
        }
    }
}

fn missing(id: &str, what: &str, hint: &str) -> CheckResult {
    CheckResult::new(
        id,
        &format!("{what} to check"),
        false,
        "none given".to_owned(),
        hint,
    )
}

fn lab_checks(exercise: Exercise, lab: &LabFacts) -> Vec<CheckResult> {
    match exercise {
        Exercise::FirstLab => vec![fat_tree_k4(lab), switches_running(lab), pingall(lab)],
        Exercise::StaticRoutes => vec![
            routing(lab, "none"),
            switches_running(lab),
            routes_match_plan(lab),
            pingall(lab),
        ],
        Exercise::LinkFailure => vec![
            routing(lab, "static"),
            link_down(lab, FAILED_LINK),
            routes_match_plan(lab),
            pingall(lab),
        ],
        Exercise::BgpFailure => vec![
            routing(lab, "bgp"),
            switches_running(lab),
            link_down(lab, BGP_FAILED_LINK),
            routes_match_plan(lab),
            pingall(lab),
        ],
        _ => unreachable!("{exercise} checks results"),
    }
}

fn results_checks(exercise: Exercise, results: &Summarized) -> Vec<CheckResult> {
    match exercise {
        Exercise::EcmpCollisions => vec![
            variants(results, &["ecmp", "ofan"], "permutation", 1),
            exactly_once(results),
            within_bound(results),
        ],
        Exercise::QueueGrowth => vec![
            variants(results, &["rsq", "ofan"], "permutation", 3),
            exactly_once(results),
            within_bound(results),
            growth(results, "rsq", "ofan"),
        ],
        Exercise::Consolidation => vec![
            variants(results, &["rr", "ofan", "pofan"], "permutation", 1),
            exactly_once(results),
            within_bound(results),
        ],
        Exercise::ArfDegraded => vec![
            variants(results, &["ecmp", "arf-wcmp", "ofan"], "all-to-all", 1),
            slowed_link(results),
            exactly_once(results),
            within_bound(results),
        ],
        _ => unreachable!("{exercise} checks a lab"),
    }
}

fn fat_tree_k4(lab: &LabFacts) -> CheckResult {
    let shape = (lab.switches, lab.hosts, lab.links);
    CheckResult::new(
        "fat-tree-k4",
        "the lab is a k = 4 fat tree",
        shape == (20, 16, 48),
        format!(
            "{} switches, {} hosts, {} links (a k = 4 fat tree has 20, 16, 48)",
            shape.0, shape.1, shape.2
        ),
        "`ofan-lab up` builds one (`--topo fat-tree --k 4` are the defaults)",
    )
}

fn switches_running(lab: &LabFacts) -> CheckResult {
    let not: Vec<String> = lab
        .switch_states
        .iter()
        .filter(|switch| switch.state != "running")
        .map(|switch| format!("{} {}", switch.name, switch.state))
        .collect();
    CheckResult::new(
        "switches-running",
        "every switch runs and answers",
        not.is_empty(),
        if not.is_empty() {
            format!("all {} running", lab.switch_states.len())
        } else {
            format!("not running: {}", not.join(", "))
        },
        "`ofan-lab status` shows each switch; `ofan-lab node SWITCH start` starts a stopped one",
    )
}

fn pingall(lab: &LabFacts) -> CheckResult {
    let passed = lab.ping_pairs > 0 && lab.ping_ok == lab.ping_pairs;
    let mut detail = format!("{} of {} host pairs answer", lab.ping_ok, lab.ping_pairs);
    if !lab.ping_failed.is_empty() {
        detail.push_str(&format!(", e.g. not {}", lab.ping_failed.join(", ")));
    }
    CheckResult::new(
        "pingall",
        "every host reaches every other host",
        passed,
        detail,
        "`ofan-lab pingall` shows the matrix; follow a failing pair hop by hop with \
         `ofan-lab exec HOST -- traceroute -n ADDR` and `ip route` in each switch",
    )
}

fn routing(lab: &LabFacts, want: &str) -> CheckResult {
    CheckResult::new(
        "routing",
        &format!("the lab is built with `--routing {want}`"),
        lab.routing == want,
        format!("routing {}", lab.routing),
        "`ofan-lab down`, then `ofan-lab up` with the routing the exercise asks for",
    )
}

fn link_down(lab: &LabFacts, (a, b): (&str, &str)) -> CheckResult {
    let state = lab.link(a, b).map(|link| link.state.clone());
    CheckResult::new(
        "link-down",
        &format!("the link {a}–{b} is down, as the lab knows it"),
        state.as_deref() == Some(down_label()),
        state.map_or_else(
            || format!("the lab has no link {a}–{b}"),
            |state| format!("{a}–{b} is {state}"),
        ),
        "take it down with `ofan-lab link A B down` (an `ip link set … down` inside a \
         namespace is not seen by the lab, which then cannot recompute anything)",
    )
}

fn routes_match_plan(lab: &LabFacts) -> CheckResult {
    let wrong: Vec<String> = lab
        .routes
        .iter()
        .filter(|route| route.width != route.plan_width)
        .map(|route| {
            format!(
                "{} → {}: {} next hop{} (plan: {})",
                route.switch,
                route.prefix,
                route.width,
                if route.width == 1 { "" } else { "s" },
                route.plan_width
            )
        })
        .collect();
    let detail = if wrong.is_empty() {
        format!(
            "{} switch × destination-edge routes, every one as wide as the plan",
            lab.routes.len()
        )
    } else {
        format!(
            "{} of {} differ, e.g. {}",
            wrong.len(),
            lab.routes.len(),
            wrong.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
        )
    };
    CheckResult::new(
        "routes-match-plan",
        "every switch sends each destination edge's traffic over every usable next hop (ECMP \
         width as the plan) and no other",
        !lab.routes.is_empty() && wrong.is_empty(),
        detail,
        "`ofan-lab exec SWITCH -- ip route`: upward routes need every uplink as a next hop \
         (`ip route add PREFIX nexthop via GW1 nexthop via GW2`); under BGP give it time to \
         reconverge",
    )
}

/// The runs of `results` whose switches ran `lb` without host load balancing.
fn runs_of<'a>(results: &'a Summarized, lb: &'a str) -> impl Iterator<Item = &'a RunReport> {
    results.runs.iter().filter(move |run| {
        run.lab()
            .is_some_and(|lab| lab.setup.lb == lb && lab.setup.host_lb == "none")
    })
}

fn variants(results: &Summarized, lbs: &[&str], collective: &str, min_sizes: usize) -> CheckResult {
    let mut missing = Vec::new();
    for lb in lbs {
        let mut sizes: Vec<u64> = runs_of(results, lb)
            .filter(|run| {
                run.lab()
                    .is_some_and(|lab| lab.setup.collective == collective)
            })
            .map(|run| run.lab().expect("lab run").setup.message_bytes)
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        if sizes.len() < min_sizes {
            missing.push(format!("{lb} at {} size(s)", sizes.len()));
        }
    }
    let sizes = if min_sizes > 1 {
        format!(" at {min_sizes} or more message sizes each")
    } else {
        String::new()
    };
    CheckResult::new(
        "runs-present",
        &format!(
            "the results hold {collective} runs of {}{sizes}",
            lbs.join(", ")
        ),
        missing.is_empty(),
        if missing.is_empty() {
            format!("{} runs", results.runs.len())
        } else {
            format!("missing or short: {}", missing.join(", "))
        },
        "run the `ofan-lab compare` line of the exercise, with --out DIR, and check DIR",
    )
}

fn exactly_once(results: &Summarized) -> CheckResult {
    let broken: Vec<String> = results
        .runs
        .iter()
        .filter_map(|run| {
            let lab = run.lab()?;
            (!lab.delivery.exactly_once).then(|| {
                format!(
                    "{} repetition {} ({} packets missing)",
                    lab.setup.lb, lab.setup.repetition, lab.delivery.missing
                )
            })
        })
        .collect();
    CheckResult::new(
        "exactly-once",
        "every run delivered every packet exactly once",
        !results.runs.is_empty() && broken.is_empty(),
        if broken.is_empty() {
            format!("{} runs, all exactly once", results.runs.len())
        } else {
            format!("not exactly once: {}", broken.join(", "))
        },
        "a run that lost packets measures the loss, not the load balancing: look at its drops \
         (`runs.csv`) and the lab's `status`, then run it again",
    )
}

fn within_bound(results: &Summarized) -> CheckResult {
    let impossible: Vec<String> = results
        .runs
        .iter()
        .filter_map(|run| {
            let lab = run.lab()?;
            let below = run.cct_ps.is_some_and(|cct| cct < run.lower_bound_ps);
            (below || run.utilization > 1.0 + 1e-9)
                .then(|| format!("{} repetition {}", lab.setup.lb, lab.setup.repetition))
        })
        .collect();
    CheckResult::new(
        "plausible",
        "no run ends before its lower bound or uses more than its links carry",
        impossible.is_empty(),
        if impossible.is_empty() {
            "every CCT ≥ its lower bound, every utilization ≤ 1".to_owned()
        } else {
            format!("impossible figures in {}", impossible.join(", "))
        },
        "results must come from `ofan-lab run`/`compare` unchanged",
    )
}

fn growth(results: &Summarized, grows: &str, flat: &str) -> CheckResult {
    let fits = growth_exponents(results);
    let exponent = |lb: &str| {
        fits.iter()
            .find(|fit| fit.variant == lb)
            .map(|f| f.exponent)
    };
    let (description, hint) = (
        format!("{grows}'s largest queue grows with message size faster than {flat}'s"),
        "with three or more sizes spanning 8× or more, fit `max_queue_bytes` against size on \
         log–log axes (the `compare` table prints the exponents)",
    );
    match (exponent(grows), exponent(flat)) {
        (Some(g), Some(f)) => CheckResult::new(
            "growth",
            &description,
            g > f,
            format!("fitted exponents: {grows} {g:.2}, {flat} {f:.2}"),
            hint,
        ),
        _ => CheckResult::new(
            "growth",
            &description,
            false,
            format!("no fit: {grows} and {flat} each need two sizes or more"),
            hint,
        ),
    }
}

fn slowed_link(results: &Summarized) -> CheckResult {
    let (mut slowed, mut total) = (0, 0);
    let mut example = None;
    for run in &results.runs {
        let Some(lab) = run.lab() else { continue };
        total += 1;
        if let Some(link) = lab
            .setup
            .slowed_links
            .iter()
            .find(|link| link.rate_bps < lab.setup.link_rate_bps)
        {
            slowed += 1;
            example.get_or_insert_with(|| {
                format!(
                    "{}–{} at {} of {} bit/s",
                    link.a, link.b, link.rate_bps, lab.setup.link_rate_bps
                )
            });
        }
    }
    CheckResult::new(
        "degraded-link",
        "every run had a link slower than the rest",
        total > 0 && slowed == total,
        format!(
            "{slowed} of {total} runs with a slowed link{}",
            example.map_or_else(String::new, |e| format!(" ({e})"))
        ),
        "slow one core link first: `ofan-lab link c-0 a-p0-0 rate 250kbit`, then compare on \
         that lab (`--name`)",
    )
}
