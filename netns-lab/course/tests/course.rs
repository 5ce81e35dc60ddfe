//! The course's results exercises (3, 5, 6, 8) checked against their examples in
//! `docs/teaching/solutions/`: each exercise's correct results (real runs of the `solution.sh`
//! beside them) pass every check, and its deliberately broken results fail the checks its
//! `solution.sh` names. (The lab exercises' examples run in the root suite `tests/course.rs`.)

use std::path::PathBuf;

use ofan_lab_course::{Exercise, Input, Needs};
use ofan_lab_experiment::output::read_results;

fn example(exercise: Exercise, which: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/teaching/solutions")
        .join(exercise.id())
        .join(which)
}

/// The ids of the checks that failed on the example `which` of `exercise`.
fn failed(exercise: Exercise, which: &str) -> Vec<String> {
    let results = read_results(&example(exercise, which)).expect("the example's results.json");
    let checks = exercise.check(&Input {
        lab: None,
        results: Some(&results),
    });
    assert!(!checks.is_empty());
    checks
        .into_iter()
        .filter(|check| !check.passed())
        .map(|check| check.id)
        .collect()
}

#[test]
fn every_results_exercise_passes_its_solution_and_fails_its_broken_example() {
    let expected: [(Exercise, &[&str]); 4] = [
        (Exercise::EcmpCollisions, &["runs-present"]),
        (Exercise::QueueGrowth, &["runs-present", "growth"]),
        (Exercise::Consolidation, &["runs-present"]),
        (Exercise::ArfDegraded, &["degraded-link"]),
    ];
    let results_exercises = Exercise::ALL
        .into_iter()
        .filter(|e| e.needs() == Needs::Results)
        .count();
    assert_eq!(
        expected.len(),
        results_exercises,
        "every results exercise has its examples"
    );
    for (exercise, broken) in expected {
        assert_eq!(
            failed(exercise, "results"),
            Vec::<String>::new(),
            "{exercise}: solution"
        );
        assert_eq!(
            failed(exercise, "broken"),
            broken,
            "{exercise}: broken example"
        );
    }
}

#[test]
fn a_missing_input_is_a_failed_check_that_says_what_to_give() {
    for exercise in Exercise::ALL {
        let checks = exercise.check(&Input::default());
        assert_eq!(checks.len(), 1, "{exercise}");
        assert!(!checks[0].passed());
        assert!(
            checks[0].hint.contains("--"),
            "{exercise}: {}",
            checks[0].hint
        );
    }
}

#[test]
fn a_file_that_is_not_a_results_file_is_refused_with_its_name() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let error = read_results(&path).unwrap_err().to_string();
    assert!(error.contains("Cargo.toml"), "{error}");
}
