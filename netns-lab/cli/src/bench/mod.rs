//! `ofan-lab bench`: the forwarding benchmark and the agents it runs in its namespaces — flags
//! parsed into [`ofan_lab_bench`]'s typed options, its progress lines, its table and its JSON
//! file.

mod agents;
mod forward;
mod lab;
mod stalls;

use clap::Subcommand;

use agents::{GenArgs, RedirectArgs, SinkArgs};
use forward::{run_forward, ForwardArgs, FORWARD_LONG_ABOUT};
use lab::{run_lab, LabArgs, LAB_LONG_ABOUT};
use stalls::{run_stalls, StallsArgs, STALLS_LONG_ABOUT};

/// `ofan-lab bench …` (flattened into `ofan-lab`'s commands).
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
    #[command(long_about = FORWARD_LONG_ABOUT)]
    Forward(ForwardArgs),
    /// The highest link rate at which a whole lab stays faithful: per rate, a fat tree built,
    /// a permutation at load 1 run through it, its fidelity and its CPU per forwarded frame.
    #[command(long_about = LAB_LONG_ABOUT)]
    Lab(LabArgs),
    /// How quiet this machine is: the share of each CPU's time a spinning thread loses to
    /// stalls, and the longest stall — what `bench lab` probes before each rate.
    #[command(long_about = STALLS_LONG_ABOUT)]
    Stalls(StallsArgs),
    /// Agent: send prebuilt UDP frames on an interface — in the kernel with XDP live frames
    /// (`--gen live`, default) or with an AF_XDP TX-only socket (`--gen afxdp`) — until stdin
    /// closes (each stdin line asks for the frames sent so far).
    Gen(GenArgs),
    /// Agent: count and drop every frame arriving on an interface with the XDP program
    /// `ofan_sink` until stdin closes (each stdin line asks for the count).
    Sink(SinkArgs),
    /// Agent: XDP_REDIRECT every frame from one interface to another until stdin closes.
    Redirect(RedirectArgs),
}

/// Runs a benchmark subcommand.
///
/// # Errors
/// What the benchmark or agent reports.
pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Bench { command } = command;
    // The agents talk to `bench forward` over their stdin and stdout.
    let (stdin, stdout) = (std::io::stdin, std::io::stdout);
    match command {
        BenchCommand::Forward(args) => run_forward(&args),
        BenchCommand::Lab(args) => run_lab(&args),
        BenchCommand::Stalls(args) => run_stalls(&args),
        BenchCommand::Gen(args) => {
            ofan_lab_bench::agents::gen(&args.options()?, stdin().lock(), stdout())
        }
        BenchCommand::Sink(args) => {
            ofan_lab_bench::agents::sink(&args.interface, stdin().lock(), stdout())
        }
        BenchCommand::Redirect(args) => {
            ofan_lab_bench::agents::redirect(&args.from, &args.to, stdin().lock(), stdout())
        }
    }
}

/// `bench …`'s subcommand from `args` (after `ofan-lab bench`), for the tests of each.
#[cfg(test)]
fn parse(args: &[&str]) -> BenchCommand {
    use clap::Parser;
    let cli = crate::Cli::try_parse_from(["ofan-lab", "bench"].iter().chain(args))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let crate::Command::Bench(Command::Bench { command }) = cli.command else {
        panic!("not a bench command");
    };
    command
}
