//! `ofan-lab`: fat trees of Linux network namespaces, collective traffic, experiments and the
//! deterministic packet-level model — everything that runs *around* switches.
//!
//! Each subcommand lives in its own module; `main` only parses the command line and reports
//! errors (one line, exit code 2 for bad input, 1 for failures while running).

mod agent;
mod bench;
mod experiment;
mod lab;
mod model_cli;
#[allow(unsafe_code)]
mod sys;
mod topo_cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Labs, traffic, experiments and the model for the ofan load-balancing switch.
#[derive(Debug, Parser)]
#[command(name = "ofan-lab", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a topology (fat tree or leaf-spine) and print it or write it to a file.
    Topo(topo_cli::TopoArgs),
    /// Deterministic packet-level model: run one experiment or reproduce a paper figure.
    Model(model_cli::ModelArgs),
    #[command(flatten)]
    Lab(lab::Command),
    #[command(flatten)]
    Bench(bench::Command),
    #[command(flatten)]
    Experiment(experiment::Command),
    #[command(flatten)]
    Agent(agent::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topo(args) => topo_cli::run(args),
        Command::Model(args) => model_cli::run(args),
        Command::Lab(command) => lab::run(command),
        Command::Bench(command) => bench::run(command),
        Command::Experiment(command) => experiment::run(command),
        Command::Agent(command) => agent::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ofan-lab: {error:#}");
            ExitCode::FAILURE
        }
    }
}
