//! Root tests of the namespace guard every short-lived namespace user shares
//! ([`ofan_lab::netns::Namespaces`]: the root suites' [`ofan_tests::Lab`] and `ofan-lab bench
//! forward`): it deletes exactly the namespaces it created, also when a panic unwinds.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::panic::AssertUnwindSafe;

use ofan_lab::netns::{namespaces_with_prefix, Namespaces};

/// A prefix no other test or process uses.
fn prefix(test: &str) -> String {
    format!("ofan-t{}-{test}", std::process::id())
}

fn guard_deletes_exactly_its_namespaces_also_on_panic() {
    let prefix = prefix("guard");
    // A neighbour whose names extend the guard's prefix: dropping the guard must leave them.
    let mut neighbour = Namespaces::new(format!("{prefix}-a"));
    neighbour.add("x").expect("neighbour namespace");
    let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut namespaces = Namespaces::new(prefix.clone());
        assert_eq!(namespaces.add("a").unwrap(), format!("{prefix}-a"));
        namespaces.add("b").unwrap();
        assert_eq!(
            namespaces_with_prefix(&prefix),
            [
                format!("{prefix}-a"),
                format!("{prefix}-a-x"),
                format!("{prefix}-b")
            ]
        );
        // Commands run inside, loopback is up.
        let lo = namespaces
            .exec("a", &["ip", "-o", "link", "show", "lo"])
            .unwrap();
        assert!(lo.contains(",UP"), "{lo}");
        assert!(!namespaces.output("b", &["false"]).unwrap().status.success());
        assert!(namespaces.exec("b", &["false"]).is_err());
        // A second guard cannot adopt a namespace that exists.
        assert!(Namespaces::new(prefix.clone()).add("b").is_err());
        // A panic's unwinding, without the hook's message and backtrace.
        std::panic::resume_unwind(Box::new("unwinding through the guard"));
    }));
    assert!(unwound.is_err());
    assert_eq!(namespaces_with_prefix(&prefix), [format!("{prefix}-a-x")]);
    drop(neighbour);
    assert!(namespaces_with_prefix(&prefix).is_empty());
}

ofan_tests::root_tests!(guard_deletes_exactly_its_namespaces_also_on_panic);
