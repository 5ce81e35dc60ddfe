//! Forwarding benchmarks of `ofan-switch` against its peers, with a traffic generator and a sink
//! of the project's own.
//!
//! [`forward`] builds `gen —veth— dut(p0, p1) —veth— sink` in namespaces named
//! `ofan-bench-<pid>-…`, blasts 64-byte UDP frames from `gen` (in the kernel, with XDP
//! live frames; or with an AF_XDP TX-only socket),
//! counts them in `sink` with an XDP program that counts and drops, and measures each candidate
//! forwarding p0 → p1 in `dut` — `ofan-switch` (lookup + balancing + egress queue), the same
//! binary in `--bare` mode, DPDK `dpdk-testpmd` with its AF_XDP PMD (when installed), and plain
//! XDP_REDIRECT (the ceiling) — interleaved round by round so drifts hit every candidate alike.
//!
//! Modules:
//! - [`forward`]: the orchestration (fabric, candidates, rounds), from typed
//!   [`forward::Options`] to a [`forward::Report`].
//! - [`agents`]: the generator, the sink and the redirect, the small processes (`ofan-lab bench
//!   gen|sink|redirect`) `forward` runs inside the namespaces; each talks over stdin/stdout
//!   lines (see there).
//! - [`report`]: medians, ratios and the table (pure).
//! - [`lab`](mod@lab): `bench lab`, the highest link rate at which a whole lab stays faithful,
//!   and the CPU it costs per forwarded frame.
//!   Before each rate it probes how quiet the machine is
//!   ([`ofan_lab_experiment::stalls`], also `bench stalls`).
//! - `process`: the run's child processes, always stopped (its namespaces are a
//!   [`ofan_lab::netns::Namespaces`]).
//!
//! The command line (`ofan-lab bench …`: flags, progress lines, the table, the JSON file) is
//! the binary's `cli/bench.rs`.

#![forbid(unsafe_code)]

pub mod agents;
pub mod forward;
pub mod lab;
mod process;
pub mod report;
