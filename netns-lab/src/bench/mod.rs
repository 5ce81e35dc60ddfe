//! `ofan-lab bench`: forwarding benchmarks of `ofan-switch` against its peers, with a traffic
//! generator and a sink of the project's own.
//!
//! `bench forward` builds `gen —veth— dut(p0, p1) —veth— sink` in namespaces named
//! `ofan-bench-<pid>-…`, blasts 64-byte UDP frames from `gen` (in the kernel, with XDP
//! live frames; or with an AF_XDP TX-only socket),
//! counts them in `sink` with an XDP program that counts and drops, and measures each candidate
//! forwarding p0 → p1 in `dut` — `ofan-switch` (lookup + balancing + egress queue), the same
//! binary in `--bare` mode, DPDK `dpdk-testpmd` with its AF_XDP PMD (when installed), and plain
//! XDP_REDIRECT (the ceiling) — interleaved round by round so drifts hit every candidate alike.
//!
//! Modules:
//! - [`forward`]: the orchestration (topology, candidates, rounds, the table).
//! - [`agents`]: `bench gen`, `bench sink` and `bench redirect`, the small processes
//!   `forward` runs inside the namespaces; each talks over stdin/stdout lines (see there).
//! - [`netns`]: namespaces and child processes that are always cleaned up.
//! - [`report`]: medians, ratios and the table (pure).

mod agents;
mod forward;
mod netns;
mod report;

use clap::Subcommand;

/// `ofan-lab bench …`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Forwarding benchmarks (needs root): `ofan-lab bench forward`, and the generator, sink
    /// and redirect agents it runs inside its namespaces.
    Bench {
        /// What to run.
        #[command(subcommand)]
        command: BenchCommand,
    },
}

/// The benchmark subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Mpps of 64-byte frames through one forwarding core on veth (copy mode): ofan-switch,
    /// ofan-switch --bare, dpdk-testpmd (AF_XDP PMD) and XDP_REDIRECT, interleaved.
    #[command(long_about = forward::LONG_ABOUT)]
    Forward(forward::ForwardArgs),
    /// Agent: send prebuilt UDP frames on an interface — in the kernel with XDP live frames
    /// (`--gen live`, default) or with an AF_XDP TX-only socket (`--gen afxdp`) — until stdin
    /// closes (each stdin line asks for the frames sent so far).
    Gen(agents::GenArgs),
    /// Agent: count and drop every frame arriving on an interface with the XDP program
    /// `ofan_sink` until stdin closes (each stdin line asks for the count).
    Sink(agents::SinkArgs),
    /// Agent: XDP_REDIRECT every frame from one interface to another until stdin closes.
    Redirect(agents::RedirectArgs),
}

/// Runs a benchmark subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Bench { command } = command;
    match command {
        BenchCommand::Forward(args) => forward::run(&args),
        BenchCommand::Gen(args) => agents::gen(&args),
        BenchCommand::Sink(args) => agents::sink(&args),
        BenchCommand::Redirect(args) => agents::redirect(&args),
    }
}
