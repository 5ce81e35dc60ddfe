//! `check`: an exercise of the course (`docs/teaching/`) checked against a student's lab and
//! results, printed check by check and written as a report an instructor can collect.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use ofan_lab as lab;
use ofan_lab_course::{CheckReport, Exercise, Input, LabFacts, Needs};
use ofan_lab_experiment::output::read_results;

/// Checks an exercise of the course (docs/teaching/) against your lab and your results.
///
/// Exercises 1, 2, 4 and 7 check a running lab (--name): its build, its switches, every
/// switch's kernel FIB against the plan, and a pingall. Exercises 3, 5, 6 and 8 check the
/// results directory of the runs they ask for (--results). Each check prints PASS or FAIL with
/// what it saw and, when it fails, a hint. The report is written as check-<exercise>.json and
/// .csv (one row per check) for your instructor. Exit status 0 when every check passed.
///
/// Examples:
///   ofan-lab check                       # the exercises
///   ofan-lab check 1                     # exercise 1 against the lab `lab`
///   ofan-lab check 03 --results out/ecmp # exercise 3 against a compare --out directory
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The exercise: its number (3, 03), name (ecmp-collisions) or both
    /// (03-ecmp-collisions); without one, the exercises are listed.
    exercise: Option<String>,
    /// The lab to check (exercises 1, 2, 4, 7).
    #[arg(long = "name", value_name = "LAB", default_value = "lab")]
    name: String,
    /// The results to check (exercises 3, 5, 6, 8): the directory `ofan-lab compare --out`
    /// or `run --out` wrote, or its results.json.
    #[arg(long, value_name = "PATH")]
    results: Option<PathBuf>,
    /// Directory the report files go to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    report: PathBuf,
    /// Write no report files.
    #[arg(long, conflicts_with = "report")]
    no_report: bool,
}

/// Runs `check`.
///
/// # Errors
/// An unknown exercise, an unreadable lab or results file, a report that cannot be written;
/// failed checks make the process exit with status 1.
pub fn run(args: CheckArgs) -> anyhow::Result<()> {
    let Some(exercise) = args.exercise.as_deref() else {
        print!("{}", list());
        return Ok(());
    };
    let exercise: Exercise = exercise.parse()?;
    let (facts, results) = match exercise.needs() {
        Needs::Lab => {
            if !lab::is_root() {
                bail!("checking a lab needs root (its namespaces and switches): run with sudo");
            }
            if !lab::exists(&args.name) {
                bail!(
                    "no lab `{}`: build it as exercise {} says, or name yours with --name",
                    args.name,
                    exercise.number()
                );
            }
            eprintln!("reading lab `{}` (switches, FIBs, pingall) …", args.name);
            (Some(LabFacts::gather(&args.name)?), None)
        }
        Needs::Results => {
            let Some(path) = &args.results else {
                bail!(
                    "exercise {} checks results: give the directory of your runs with \
                     --results DIR",
                    exercise.number()
                );
            };
            (None, Some((path.clone(), read_results(path)?)))
        }
    };
    let input = Input {
        lab: facts.as_ref(),
        results: results.as_ref().map(|(_, results)| results),
    };
    let checks = exercise.check(&input);
    let report = CheckReport::new(
        exercise,
        student(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        facts.as_ref().map(|facts| facts.name.clone()),
        results.as_ref().map(|(path, _)| path.display().to_string()),
        checks,
    );
    print!("{}", render(&report));
    if !args.no_report {
        for path in write(&report, &args.report)? {
            println!("report: {}", path.display());
        }
    }
    if !report.all_passed() {
        std::process::exit(1);
    }
    Ok(())
}

fn student() -> String {
    ["SUDO_USER", "USER"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The exercises, one per line.
fn list() -> String {
    let mut text = String::from("Exercises (docs/teaching/); check one with `ofan-lab check N`:\n");
    for exercise in Exercise::ALL {
        let needs = match exercise.needs() {
            Needs::Lab => "a running lab (--name)",
            Needs::Results => "a results directory (--results)",
        };
        text.push_str(&format!(
            "  {:<20} {:<50} checks {needs}\n",
            exercise.id(),
            exercise.title()
        ));
    }
    text
}

/// The checks, one block each.
fn render(report: &CheckReport) -> String {
    let mut text = format!("exercise {}: {}\n", report.exercise, report.title);
    for check in &report.checks {
        let word = if check.passed() { "PASS" } else { "FAIL" };
        text.push_str(&format!(
            "  {word}  {:<18} {}\n",
            check.id, check.description
        ));
        text.push_str(&format!("        {}\n", check.detail));
        if !check.passed() {
            text.push_str(&format!("        hint: {}\n", check.hint));
        }
    }
    text.push_str(&format!(
        "{} of {} checks passed\n",
        report.passed,
        report.checks.len()
    ));
    text
}

/// Writes `check-<exercise>.json` and `.csv` into `dir`.
fn write(report: &CheckReport, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let json = dir.join(format!("check-{}.json", report.exercise));
    let csv = dir.join(format!("check-{}.csv", report.exercise));
    std::fs::write(&json, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("cannot write {}", json.display()))?;
    std::fs::write(&csv, report.csv())
        .with_context(|| format!("cannot write {}", csv.display()))?;
    Ok(vec![json, csv])
}
