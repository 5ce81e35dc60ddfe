//! The first SIGTERM after `interrupt::catch` asks the experiment to stop instead of ending
//! the process (a test binary of its own: it installs process-wide handlers).

use ofan_lab_experiment::interrupt;

#[test]
fn the_first_signal_asks_the_experiment_to_stop() {
    interrupt::catch().expect("handlers");
    interrupt::catch().expect("catching twice is harmless");
    assert!(!interrupt::interrupted());
    assert!(interrupt::check().is_ok());
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).expect("raise");
    assert!(interrupt::interrupted(), "still running, the flag set");
    let error = interrupt::check().expect_err("interrupted").to_string();
    assert!(error.contains("interrupted"), "{error}");
}
