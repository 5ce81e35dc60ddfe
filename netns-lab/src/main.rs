//! `ofan-lab`: fat trees of Linux network namespaces, collective traffic, experiments and the
//! deterministic packet-level model — everything that runs *around* switches.
//!
//! A thin command line over the `ofan_lab` library: [`cli`] parses, calls, prints; `main` only
//! reports errors (one line, exit code 1).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match cli::Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ofan-lab: {error:#}");
            ExitCode::FAILURE
        }
    }
}
