//! Forwarding benchmark (being written).

/// Benchmark subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Forwarding benchmark (not written yet).
    Bench,
}

/// Runs a benchmark subcommand.
pub fn run(_command: Command) -> anyhow::Result<()> {
    anyhow::bail!("the benchmark is not written yet")
}
