//! The teaching course (`docs/teaching/`) and its automatic checker, `ofan-lab check`.
//!
//! Each [`Exercise`] is a list of checks. A check looks at what the student built — the live lab
//! ([`facts::LabFacts`], gathered once from the lab's state, its switches, the kernel FIBs of its
//! namespaces and a `pingall`) and the results file of the runs the exercise asks for
//! ([`Summarized`], read from `results.json`) — and says pass or fail with what it saw and a
//! hint. The checks themselves are pure functions of those two inputs ([`checks`]), so the
//! course's own examples (a correct and a deliberately broken one per exercise, in
//! `docs/teaching/solutions/`) run through exactly the code a student's lab does.
//!
//! Layers: [`facts`] (I/O: reads a running lab), [`checks`] (pure), [`report`] (the report an
//! instructor collects: one type, written as JSON and CSV).

#![forbid(unsafe_code)]

pub mod checks;
pub mod facts;
pub mod report;

use std::fmt;
use std::str::FromStr;

use ofan_lab_experiment::summary::Summarized;

pub use checks::{CheckResult, Outcome};
pub use facts::LabFacts;
pub use report::CheckReport;

/// What an exercise's checks look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// A running lab (`--name`).
    Lab,
    /// A results directory or `results.json` of `ofan-lab run`/`compare` (`--results`).
    Results,
}

/// The exercises of the course, in order (`docs/teaching/NN-id.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exercise {
    /// 1: a k = 4 fat tree, every host reaching every other through the switches.
    FirstLab,
    /// 2: `--routing none`, and the routes written by hand until the FIBs are the plan's.
    StaticRoutes,
    /// 3: ECMP's flow collisions against Ofan on a permutation.
    EcmpCollisions,
    /// 4: a failed link, and what the static routes make of it.
    LinkFailure,
    /// 5: queue growth with message size (the paper's Fig. 4), fitted.
    QueueGrowth,
    /// 6: one rotation per destination edge against one for all (Simple RR) and per pipe.
    Consolidation,
    /// 7: a BGP fabric reconverging around a failed link.
    BgpFailure,
    /// 8: the adaptive-routing framework against Ofan on a degraded core link.
    ArfDegraded,
}

impl Exercise {
    /// Every exercise, in course order.
    pub const ALL: [Self; 8] = [
        Self::FirstLab,
        Self::StaticRoutes,
        Self::EcmpCollisions,
        Self::LinkFailure,
        Self::QueueGrowth,
        Self::Consolidation,
        Self::BgpFailure,
        Self::ArfDegraded,
    ];

    /// Its number in the course, from 1.
    #[must_use]
    pub fn number(self) -> usize {
        Self::ALL.iter().position(|&e| e == self).expect("listed") + 1
    }

    /// Its short name (`first-lab`, …).
    #[must_use]
    pub const fn slug(self) -> &'static str {
        match self {
            Self::FirstLab => "first-lab",
            Self::StaticRoutes => "static-routes",
            Self::EcmpCollisions => "ecmp-collisions",
            Self::LinkFailure => "link-failure",
            Self::QueueGrowth => "queue-growth",
            Self::Consolidation => "consolidation",
            Self::BgpFailure => "bgp-failure",
            Self::ArfDegraded => "arf-degraded",
        }
    }

    /// `01-first-lab`: the exercise's file name in `docs/teaching/` (without `.md`) and the
    /// folder of its examples in `docs/teaching/solutions/`.
    #[must_use]
    pub fn id(self) -> String {
        format!("{:02}-{}", self.number(), self.slug())
    }

    /// Its title.
    #[must_use]
    pub const fn title(self) -> &'static str {
        match self {
            Self::FirstLab => "A first fat tree",
            Self::StaticRoutes => "Static routes by hand",
            Self::EcmpCollisions => "ECMP collisions",
            Self::LinkFailure => "A link fails",
            Self::QueueGrowth => "Queues and message size",
            Self::Consolidation => "One pointer per destination edge",
            Self::BgpFailure => "BGP and what a failure costs",
            Self::ArfDegraded => "Adaptive routing against Ofan on a degraded link",
        }
    }

    /// What its checks look at.
    #[must_use]
    pub const fn needs(self) -> Needs {
        match self {
            Self::FirstLab | Self::StaticRoutes | Self::LinkFailure | Self::BgpFailure => {
                Needs::Lab
            }
            Self::EcmpCollisions | Self::QueueGrowth | Self::Consolidation | Self::ArfDegraded => {
                Needs::Results
            }
        }
    }

    /// Runs the exercise's checks on what the student built.
    #[must_use]
    pub fn check(self, input: &Input<'_>) -> Vec<CheckResult> {
        checks::run(self, input)
    }
}

impl fmt::Display for Exercise {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id())
    }
}

/// An exercise name that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "no exercise `{0}` (exercises: 1–8, e.g. `3`, `03`, `ecmp-collisions` or `03-ecmp-collisions`)"
)]
pub struct UnknownExercise(pub String);

impl FromStr for Exercise {
    type Err = UnknownExercise;

    /// `3`, `03`, `ecmp-collisions` and `03-ecmp-collisions` all name exercise 3.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|exercise| {
                text == exercise.id()
                    || text == exercise.slug()
                    || text.parse::<usize>().ok() == Some(exercise.number())
            })
            .ok_or(UnknownExercise(text))
    }
}

/// What the checks of an exercise are given: the lab and the results, each when there is one.
#[derive(Debug, Clone, Copy, Default)]
pub struct Input<'a> {
    /// The live lab, gathered.
    pub lab: Option<&'a LabFacts>,
    /// The runs of the results file.
    pub results: Option<&'a Summarized>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_names_its_exercise_and_nothing_else_does() {
        for exercise in Exercise::ALL {
            for text in [
                exercise.number().to_string(),
                format!("{:02}", exercise.number()),
                exercise.slug().to_owned(),
                exercise.id(),
                exercise.id().to_uppercase(),
            ] {
                assert_eq!(text.parse::<Exercise>(), Ok(exercise), "{text}");
            }
        }
        for text in ["0", "9", "first", "01-static-routes-x", ""] {
            assert!(text.parse::<Exercise>().is_err(), "{text}");
        }
        assert_eq!(Exercise::ArfDegraded.id(), "08-arf-degraded");
    }
}
