//! # ofan-model — a deterministic packet-level model of a fat tree
//!
//! The model runs **the switch's own load-balancing core** ([`ofan_dataplane::lb`]) inside a
//! discrete-event simulation of a fat tree or leaf-spine from [`ofan_topology`], so that the
//! paper's claims can be checked at scale (k = 12, 432 hosts, and beyond) in seconds, exactly
//! and reproducibly:
//!
//! * [`config`]: what to run — topology, link parameters ([`ofan_topology::LinkParams`]),
//!   buffers, load, workload, scheme ([`Scheme`]: the eleven switch algorithms, the
//!   adaptive-routing framework's `arf-*` among them, plus host-based spray, REPS and DRB),
//!   pipe size, failures (from the start, or of a link during the run: [`LinkFailure`],
//!   [`FailureTiming`]), degraded links, the framework's timing ([`ArfConfig`]), seed.
//! * [`workload`]: traffic matrices (permutation, inter-pod permutation, all-to-all, ring,
//!   matrix files) and failure samples, drawn from the seed; [`deps`]: workloads whose flows
//!   wait for others (htsim's connection matrices, [`htsim`]; ring collectives,
//!   [`collective`]).
//! * [`sim`]: the event loop — output-queued store-and-forward switches with per-port FIFOs,
//!   paced hosts (no congestion control by default, paper §2.2; DCTCP, NSCC or MSwift windows
//!   with [`ModelConfig::cc`], paper §6.5) whose links carry their data and their
//!   ACKs (one per data frame; [`AckAirtime`] says how the pacer makes room for them) and
//!   that recover lost frames with the lab agent's selective repeat ([`ofan_transport`],
//!   timers [`RecoveryConfig`]). Every
//!   northbound decision at an edge or aggregation switch is a call to
//!   [`ofan_dataplane::lb::PipeBalancer::choose`] on the pipe of the ingress port, the
//!   dataplane's own decision.
//! * [`report`]: what a run measures ([`RunReport`]): CCT, its lower bound and increase,
//!   utilization, per-stage queues and link overload, packet accounting, drops by reason, and
//!   Ofan's edge-uplink bound (paper F.4) as a checked invariant — schema `ofan.run/2`, the
//!   same type the lab writes.
//! * [`figures`]: the paper's figures as sweeps over many runs, with tables, fits and SVG plots
//!   ([`svg`]).
//! * [`dragonfly`]: the same kind of packet-level run on a dragonfly
//!   ([`ofan_topology::Dragonfly`]) under the dragonfly schemes of
//!   [`ofan_dataplane::lb::dragonfly`] (min, Valiant, UGAL, the framework's notified UGAL,
//!   per-destination-group rotation); its own report, [`dragonfly::DragonflyReport`].
//! * [`shard`]: sweeps split into independent processes ([`Shard`] `I/N`), whose parts join
//!   into exactly the unsharded result.
//!
//! ## Determinism (contract)
//! Time is integer picoseconds and the event loop's state holds no floats; events are ordered
//! by (time, insertion sequence number); every random choice comes from [`ofan_dataplane::lb::LbRng`]
//! streams derived from [`ModelConfig::seed`]. Same configuration → bit-identical
//! [`RunReport`] (and JSON). [`run_many`] runs independent configurations on several threads;
//! each result is the same as a sequential run.
//!
//! ## Example
//! ```
//! use ofan_model::{run, ModelConfig, Scheme};
//! use ofan_topology::TopologyKind;
//!
//! let mut config = ModelConfig::paper();
//! config.topology = TopologyKind::FatTree { k: 4 };
//! config.message_bytes = 64 * 1024;
//! config.scheme = "ofan".parse::<Scheme>()?;
//! let report = run(&config)?;
//! assert!(report.cct_ps.unwrap() >= report.lower_bound_ps);
//! assert_eq!(report.model().unwrap().edge_uplink.violations, 0);
//! # Ok::<(), ofan_model::ModelError>(())
//! ```
// `unsafe` is denied everywhere but in `sys`, which wraps the one CPU instruction the model needs.
#![deny(unsafe_code)]

pub mod collective;
pub mod config;
pub mod deps;
pub mod dragonfly;
mod error;
pub mod figures;
pub mod fsdp;
pub mod htsim;
pub mod mix;
pub mod moe;
/// The host plane policies, pure; they live beside the switches' decisions in
/// [`ofan_dataplane::lb::planes`] so the lab's traffic agent runs the same code.
pub use ofan_dataplane::lb::planes;
mod queue;
pub mod report;
pub mod shard;
pub mod sim;
pub mod svg;
mod sys;
mod wires;
pub mod workload;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub use config::{
    AckAirtime, ArfConfig, BufferLimit, DegradedLink, EcnAt, FailureTiming, Failures, FlowSpec,
    LinkDirection, LinkFailure, ModelConfig, Pacing, Scheme, StartPhase, Workload,
    ARF_CONTROL_DELAY_PS, ARF_WINDOW_PS, FAILURE_DETECT_PS, FAILURE_REROUTE_PS,
};
pub use error::ModelError;
pub use ofan_transport::{CcKind, RecoveryConfig};
pub use report::{CcRun, PhaseRun, QueueStats, RunReport, Stage};
pub use shard::Shard;
pub use sim::{run, run_on};

/// Runs every configuration, on up to `threads` threads (at least one), and returns the
/// results in the order of `configs`. Each run is independent and deterministic, so the result
/// does not depend on `threads`.
pub fn run_many(configs: &[ModelConfig], threads: usize) -> Vec<Result<RunReport, ModelError>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunReport, ModelError>>>> =
        Mutex::new((0..configs.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, configs.len().max(1)) {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                let Some(config) = configs.get(index) else {
                    break;
                };
                let result = run(config);
                results.lock().expect("no thread panics holding the lock")[index] = Some(result);
            });
        }
    });
    results
        .into_inner()
        .expect("no thread panics holding the lock")
        .into_iter()
        .map(|result| result.expect("every configuration ran"))
        .collect()
}

/// The number of threads to use by default: the machine's available parallelism.
#[must_use]
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}
