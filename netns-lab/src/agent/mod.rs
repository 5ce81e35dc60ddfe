//! The host traffic agent (being written).

/// Agent subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Host traffic agent (not written yet).
    Agent,
}

/// Runs an agent subcommand.
pub fn run(_command: Command) -> anyhow::Result<()> {
    anyhow::bail!("the agent is not written yet")
}
