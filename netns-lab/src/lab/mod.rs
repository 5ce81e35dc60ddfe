//! The namespace lab (being written).

/// Lab subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Build a lab (not written yet).
    Up,
}

/// Runs a lab subcommand.
pub fn run(_command: Command) -> anyhow::Result<()> {
    anyhow::bail!("the lab is not written yet")
}
