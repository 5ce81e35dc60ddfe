//! `ofan-lab`: fat trees of Linux network namespaces, collective traffic, experiments and the
//! deterministic packet-level model — everything that runs *around* switches.
//!
//! A thin command line over the lab's crates (`netns-lab/*`), which tests and benchmarks use
//! directly. Bottom up, each using only those above it in this list:
//! - `ofan_lab_sys`: every system call of these crates that needs `unsafe` (setns, clocks,
//!   socket options, scheduling, CPU affinity) and the lab's netlink socket; the other crates
//!   forbid `unsafe`.
//! - [`ofan_lab_agent`]: the host traffic agent — collective plans, the 18-byte packet header,
//!   pacing, host-side load balancing, exactly-once tracking (pure), and the sender/receiver.
//! - [`ofan_lab`]: a typed [`ofan_lab::LabSpec`] turned into namespaces, veths, routes and switch
//!   processes, and taken away again; status, link and node operations on a running lab; and
//!   [`ofan_lab::netns`], the RAII guard of short-lived namespaces (the bench's and the root
//!   tests') with the one listing of namespaces by prefix.
//! - [`ofan_lab_experiment`]: collectives run on a lab — the per-repetition report from agent
//!   reports and switch telemetry (pure `metrics`), summaries, result files and plots.
//! - [`ofan_lab_bench`]: forwarding benchmarks of `ofan-switch` against its peers in
//!   namespaces, and the lab benchmark.
//! - [`ofan_lab_course`]: the teaching course's exercises and their checker (`ofan-lab check`):
//!   pure checks over what a live lab and a results file show.
//! - [`ofan_lab_view`]: the live view of a lab in the browser (topology, utilization, queues,
//!   progress, pushed as server-sent events) and the whole lab's Prometheus `/metrics`.
//!
//! This crate is every clap type and every table and line the command prints. Each command
//! parses its flags into the libraries' typed values once, calls them, and renders what comes
//! back; `main` only reports errors (one line, exit code 1).
//!
//! - [`units`]: the argument parsers every command shares — rates, sizes, durations.
//! - [`lab`]: `up`, `down`, `status`, `exec`, `pingall`, `link`, `node`, `capture`, `set`,
//!   `view` ([`view`]: the live view's flags);
//!   [`status`] and [`pingall`] draw their tables, [`demo`] is the guided tour.
//! - [`experiment`]: `run` and `compare`; [`results`] draws their tables and progress lines.
//! - [`agent`]: `agent` and its helpers.
//! - [`topo`], [`model`]: the topology builder and the deterministic model.
//! - [`check`]: the course's checker.
//! - [`bench`](mod@bench): the forwarding benchmark and its agents; its progress lines, table
//!   and JSON file.

#![forbid(unsafe_code)]

pub mod agent;
pub mod bench;
pub mod check;
pub mod demo;
pub mod experiment;
pub mod lab;
pub mod model;
pub mod pingall;
pub mod results;
pub mod status;
pub mod topo;
mod units;
pub mod view;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;

use clap::{Parser, Subcommand, ValueEnum};
use ofan_lab_agent::collective::Collective;
use ofan_lab_agent::entropy::HostLb;
use ofan_lab_agent::read_matrix;
use ofan_model::collective::RingOrder;
use ofan_topology::TopologyKind;

/// Labs, traffic, experiments and the model for the ofan load-balancing switch.
#[derive(Debug, Parser)]
#[command(name = "ofan-lab", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build a topology (fat tree or leaf-spine) and print it or write it to a file.
    Topo(topo::TopoArgs),
    /// Deterministic packet-level model: run one experiment or reproduce a paper figure.
    Model(model::ModelArgs),
    #[command(flatten)]
    Lab(lab::Command),
    #[command(flatten)]
    Bench(bench::Command),
    #[command(flatten)]
    Experiment(experiment::Command),
    #[command(flatten)]
    Agent(agent::Command),
    /// Check an exercise of the course (docs/teaching/) against your lab and results.
    Check(check::CheckArgs),
}

impl Cli {
    /// Runs the command.
    ///
    /// # Errors
    /// What the command reports.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Topo(args) => topo::run(args),
            Command::Model(args) => model::run(args),
            Command::Lab(command) => lab::run(command),
            Command::Bench(command) => bench::run(command),
            Command::Experiment(command) => experiment::run(command),
            Command::Agent(command) => agent::run(command),
            Command::Check(args) => check::run(args),
        }
    }
}

/// The topology families (`--topo` of `topo`, `--topology` of `model`): with `--k`, a
/// [`TopologyKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shape {
    // (No doc comments on the variants: the flags that take a shape describe them, in one line.)
    FatTree,
    LeafSpine,
}

impl Shape {
    /// The family at radix `k`.
    #[must_use]
    pub const fn kind(self, k: u16) -> TopologyKind {
        match self {
            Self::FatTree => TopologyKind::FatTree { k },
            Self::LeafSpine => TopologyKind::LeafSpine { k },
        }
    }
}

/// The collectives (`run`, `compare`, `agent plan`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CollectiveName {
    /// Seeded random derangement: every host sends --size to one other host.
    Permutation,
    /// Every host sends --size to every other host, round-robin over its flows.
    AllToAll,
    /// Host i sends --size to host i + --stride.
    Ring,
    /// Bytes from a host-to-host matrix (--matrix FILE, CSV or JSON).
    Matrix,
    /// Ring all-reduce of a --size buffer per host: reduce-scatter, then all-gather, each
    /// ring step starting when the previous step's chunk (--size / hosts) has arrived; rings
    /// over servers of --gpus-per-server hosts, as the model's `ring-allreduce`.
    RingAllreduce,
    /// Ring all-gather (one phase of ring-allreduce).
    RingAllgather,
    /// Ring reduce-scatter (one phase of ring-allreduce).
    RingReducescatter,
}

/// The flags that shape a collective (`run`, `compare`, `agent plan`): each belongs to some
/// collectives, and is refused with another.
#[derive(Debug, Clone, clap::Args)]
pub struct CollectiveOptions {
    /// Ring stride for `ring`.
    #[arg(long, default_value_t = 1)]
    pub stride: u32,
    /// Byte matrix for `matrix` (CSV or JSON; see docs/agent.md).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Hosts per server for the ring collectives: rank r of each server sends to rank r of
    /// the next server, so G rings cross the fabric (intra-server traffic is not sent).
    /// Default 1: one flat ring over every host.
    #[arg(long, value_name = "G")]
    pub gpus_per_server: Option<u32>,
    /// The servers' order on the rings of the ring collectives: index (server s to s + 1), or
    /// random (default: drawn from the repetition's seed, as the model draws it).
    #[arg(long, value_enum)]
    pub ring_order: Option<RingOrderArg>,
}

impl Default for CollectiveOptions {
    fn default() -> Self {
        Self {
            stride: 1,
            matrix: None,
            gpus_per_server: None,
            ring_order: None,
        }
    }
}

/// `--ring-order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RingOrderArg {
    Index,
    Random,
}

impl From<RingOrderArg> for RingOrder {
    fn from(order: RingOrderArg) -> Self {
        match order {
            RingOrderArg::Index => Self::Index,
            RingOrderArg::Random => Self::Random,
        }
    }
}

impl CollectiveOptions {
    /// Collective `name` with these flags: `--stride` for `ring`, the `--matrix` file for
    /// `matrix` (which needs one), `--gpus-per-server` and `--ring-order` for the ring
    /// collectives.
    ///
    /// # Errors
    /// `matrix` without a file, a flag for another collective, an unreadable file.
    pub fn collective(&self, name: CollectiveName) -> anyhow::Result<Collective> {
        use ofan_model::collective::{Collective as Steps, CollectiveKind};
        let steps = |kind| {
            Collective::RingCollective(Steps {
                kind,
                gpus_per_server: self.gpus_per_server.unwrap_or(1),
                order: self.ring_order.unwrap_or(RingOrderArg::Random).into(),
            })
        };
        let is_ring_collective = matches!(
            name,
            CollectiveName::RingAllreduce
                | CollectiveName::RingAllgather
                | CollectiveName::RingReducescatter
        );
        if !is_ring_collective && (self.gpus_per_server.is_some() || self.ring_order.is_some()) {
            bail!("--gpus-per-server and --ring-order are for the ring collectives (ring-allreduce, …)");
        }
        if name != CollectiveName::Ring && self.stride != 1 {
            bail!("--stride is only for the ring collective");
        }
        Ok(match (name, &self.matrix) {
            (CollectiveName::Matrix, Some(path)) => Collective::Matrix {
                text: read_matrix(path)?,
            },
            (CollectiveName::Matrix, None) => bail!("matrix needs --matrix FILE"),
            (_, Some(_)) => bail!("--matrix is only for the matrix collective"),
            (CollectiveName::Permutation, None) => Collective::Permutation,
            (CollectiveName::AllToAll, None) => Collective::AllToAll,
            (CollectiveName::Ring, None) => Collective::Ring {
                stride: self.stride,
            },
            (CollectiveName::RingAllreduce, None) => steps(CollectiveKind::AllReduce),
            (CollectiveName::RingAllgather, None) => steps(CollectiveKind::AllGather),
            (CollectiveName::RingReducescatter, None) => steps(CollectiveKind::ReduceScatter),
        })
    }
}

/// `--host-lb`: host-side load balancing ([`HostLb`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HostLbArg {
    /// One fixed entropy (source port) per flow.
    None,
    /// A random entropy per packet (host random packet spraying).
    Spray,
    /// Recycled entropy packet spraying: reuse entropies of ACKs without CE, else a fresh one.
    Reps,
}

impl From<HostLbArg> for HostLb {
    fn from(arg: HostLbArg) -> Self {
        match arg {
            HostLbArg::None => Self::None,
            HostLbArg::Spray => Self::Spray,
            HostLbArg::Reps => Self::Reps,
        }
    }
}

/// Prints what the library reports while it works, to stderr.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stderr;

impl ofan_lab::Observer for Stderr {
    fn step(&mut self, elapsed: Duration, what: &str) {
        eprintln!("  {:>6.2} s  {what}", elapsed.as_secs_f64());
    }

    fn note(&mut self, text: &str) {
        eprintln!("{text}");
    }
}

impl ofan_lab_experiment::Observer for Stderr {
    fn repetition(
        &mut self,
        done: usize,
        total: usize,
        elapsed: Duration,
        variant: &ofan_lab_experiment::summary::Variant,
        report: &ofan_lab_experiment::metrics::RunReport,
    ) {
        eprintln!(
            "{}",
            results::progress_line(done, total, elapsed, variant, report)
        );
    }
}

fn main() -> ExitCode {
    match Cli::parse().run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ofan-lab: {error:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collective_flags_are_checked_once_for_every_command() {
        let with = |edit: &dyn Fn(&mut CollectiveOptions)| {
            let mut options = CollectiveOptions::default();
            edit(&mut options);
            options
        };
        let ring = with(&|o| o.stride = 3);
        assert_eq!(
            ring.collective(CollectiveName::Ring).unwrap(),
            Collective::Ring { stride: 3 }
        );
        assert!(ring.collective(CollectiveName::Permutation).is_err());
        let plain = CollectiveOptions::default();
        assert!(plain.collective(CollectiveName::Matrix).is_err());
        let file = with(&|o| o.matrix = Some("/nonexistent/matrix.csv".into()));
        assert!(file
            .collective(CollectiveName::Permutation)
            .unwrap_err()
            .to_string()
            .contains("only for the matrix"));
        assert!(file.collective(CollectiveName::Matrix).is_err());
        let servers = with(&|o| {
            o.gpus_per_server = Some(2);
            o.ring_order = Some(RingOrderArg::Index);
        });
        let Collective::RingCollective(steps) =
            servers.collective(CollectiveName::RingAllreduce).unwrap()
        else {
            panic!("a ring collective");
        };
        assert_eq!(steps.gpus_per_server, 2);
        assert_eq!(steps.order, RingOrder::Index);
        let Collective::RingCollective(steps) = CollectiveOptions::default()
            .collective(CollectiveName::RingAllgather)
            .unwrap()
        else {
            panic!("a ring collective");
        };
        assert_eq!(
            (steps.gpus_per_server, steps.order),
            (1, RingOrder::Random),
            "the model's defaults"
        );
        assert!(servers.collective(CollectiveName::AllToAll).is_err());
    }
}
