//! `ofan-lab model`: the deterministic packet-level model (being written).

use clap::Args;

/// Arguments of `ofan-lab model`.
#[derive(Debug, Args)]
pub struct ModelArgs {}

/// Runs `ofan-lab model`.
pub fn run(_args: ModelArgs) -> anyhow::Result<()> {
    anyhow::bail!("the model is not built yet")
}
