//! Ctrl-C and SIGTERM during an experiment: the experiment stops at the next point where it
//! can (between repetitions, or while it waits for the agents, which it then stops), and its
//! caller closes the session as after any error — a lab built for the run is removed, an
//! existing one gets its algorithm back. A second signal ends the process at once, cleanup or
//! not (`ofan-lab down` or `reset` then removes what is left).
//!
//! Without this a signal ended `run` and `compare` where they stood: a lab built for the run
//! stayed up, with its switches, and the shared agent (a child, not in the signalled process
//! under `kill PID`) kept sending.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;

/// Set by the first SIGINT or SIGTERM after [`catch`].
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// From now on, the first SIGINT or SIGTERM asks the experiment to stop ([`check`] fails), a
/// second one ends the process. Idempotent.
///
/// # Errors
/// The handlers cannot be installed.
pub fn catch() -> anyhow::Result<()> {
    if INTERRUPTED.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so that it runs while the flag is still unset: the second signal
        // terminates, the first only sets the flag.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&flag))?;
        signal_hook::flag::register(signal, Arc::clone(&flag))?;
    }
    let _ = INTERRUPTED.set(flag);
    Ok(())
}

/// Whether a signal asked the experiment to stop.
#[must_use]
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// Fails once a signal asked the experiment to stop.
///
/// # Errors
/// "interrupted", after a signal.
pub fn check() -> anyhow::Result<()> {
    if interrupted() {
        anyhow::bail!(
            "interrupted (the lab is being put back; a second Ctrl-C exits at once, then \
             `ofan-lab down` removes what is left)"
        );
    }
    Ok(())
}
