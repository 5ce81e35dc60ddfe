//! The checker's report (schema `ofan.check-report/1`): what an instructor collects from each
//! student, as JSON (everything) and CSV (one row per check, so many students' files
//! concatenate into one table).

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::{CheckResult, Exercise};

/// The report's schema name.
pub const SCHEMA: &str = "ofan.check-report/1";

/// One run of `ofan-lab check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// The exercise (`03-ecmp-collisions`).
    pub exercise: String,
    /// Its title.
    pub title: String,
    /// Who ran the check (`SUDO_USER`, else `USER`).
    pub student: String,
    /// When, seconds since the Unix epoch.
    pub checked_at: u64,
    /// The lab checked, when the exercise checks one.
    pub lab: Option<String>,
    /// The results file checked, when the exercise checks one.
    pub results: Option<String>,
    /// Checks that passed.
    pub passed: usize,
    /// Checks that failed.
    pub failed: usize,
    /// Every check, in order.
    pub checks: Vec<CheckResult>,
}

impl CheckReport {
    /// The report of `checks` of `exercise`.
    #[must_use]
    pub fn new(
        exercise: Exercise,
        student: String,
        checked_at: u64,
        lab: Option<String>,
        results: Option<String>,
        checks: Vec<CheckResult>,
    ) -> Self {
        let passed = checks.iter().filter(|check| check.passed()).count();
        Self {
            schema: SCHEMA.to_owned(),
            exercise: exercise.id(),
            title: exercise.title().to_owned(),
            student,
            checked_at,
            lab,
            results,
            passed,
            failed: checks.len() - passed,
            checks,
        }
    }

    /// Whether every check passed.
    #[must_use]
    pub fn all_passed(&self) -> bool {
        self.failed == 0 && !self.checks.is_empty()
    }

    /// The CSV: a header, then one row per check.
    #[must_use]
    pub fn csv(&self) -> String {
        let mut csv = String::from("student,exercise,checked_at,check,outcome,detail,hint\n");
        for check in &self.checks {
            let outcome = if check.passed() { "pass" } else { "fail" };
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{}",
                field(&self.student),
                field(&self.exercise),
                self.checked_at,
                field(&check.id),
                outcome,
                field(&check.detail),
                field(&check.hint)
            );
        }
        csv
    }
}

/// A CSV field (RFC 4180): quoted when it holds a comma, quote or line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outcome;

    #[test]
    fn csv_has_a_row_per_check_and_quotes_what_needs_it() {
        let check = |id: &str, outcome, detail: &str| CheckResult {
            id: id.to_owned(),
            description: String::new(),
            outcome,
            detail: detail.to_owned(),
            hint: String::new(),
        };
        let report = CheckReport::new(
            Exercise::FirstLab,
            "ada".to_owned(),
            7,
            Some("lab".to_owned()),
            None,
            vec![
                check("pingall", Outcome::Pass, "240 of 240"),
                check(
                    "switches-running",
                    Outcome::Fail,
                    "not running: e-p0-0 \"stopped\", c-0",
                ),
            ],
        );
        assert_eq!((report.passed, report.failed), (1, 1));
        assert!(!report.all_passed());
        assert_eq!(
            report.csv(),
            "student,exercise,checked_at,check,outcome,detail,hint\n\
             ada,01-first-lab,7,pingall,pass,240 of 240,\n\
             ada,01-first-lab,7,switches-running,fail,\"not running: e-p0-0 \"\"stopped\"\", c-0\",\n"
        );
        let json = serde_json::to_string(&report).unwrap();
        assert_eq!(serde_json::from_str::<CheckReport>(&json).unwrap(), report);
    }
}
