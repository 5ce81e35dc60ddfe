//! # ofan-lab — everything that runs *around* switches
//!
//! Fat trees of Linux network namespaces with an `ofan-switch` per switch, the host agents that
//! load them with collective traffic, the experiments that measure what the switches do with it,
//! and the forwarding benchmarks. The `ofan-lab` binary is a thin command line over these layers
//! (`src/cli/`: every clap type and every table it prints); tests and benchmarks use them
//! directly.
//!
//! Layers, bottom up (each uses only those above it in this list):
//! - [`units`] (pure): the argument parsers every command shares — rates, sizes, durations.
//! - [`netns`]: named namespaces under an RAII guard that deletes exactly what it created (the
//!   bench's and the root tests'), and the one listing of namespaces by prefix.
//! - [`agent`]: the host traffic agent — collective plans, the 18-byte packet header, pacing,
//!   host-side load balancing, exactly-once tracking (pure), and the sender/receiver (I/O).
//! - [`lab`]: a typed [`lab::LabSpec`] turned into namespaces, veths, routes and switch
//!   processes, and taken away again; status, link and node operations on a running lab.
//! - [`experiment`]: collectives run on a lab — the per-repetition report from agent reports and
//!   switch telemetry (pure [`experiment::metrics`]), summaries, result files and plots.
//! - [`bench`](mod@bench): forwarding benchmarks of `ofan-switch` against its peers in
//!   namespaces.
//! - [`course`]: the teaching course's exercises and their checker (`ofan-lab check`): pure
//!   checks over what a live lab and a results file show.
//! - [`view`]: the live view of a lab in the browser (topology, utilization, queues, progress,
//!   pushed as server-sent events) and the whole lab's Prometheus `/metrics`.
//!
//! The only `unsafe` code is in one private module (`sys`: setns, clocks, socket options).
#![deny(unsafe_code)]

pub mod agent;
pub mod bench;
pub mod course;
pub mod experiment;
pub mod lab;
pub mod netns;
#[allow(unsafe_code)]
mod sys;
pub mod units;
pub mod view;
