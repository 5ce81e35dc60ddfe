//! `ofan-lab topo`: build a topology and print a summary, or write it as JSON for
//! `--topo FILE` elsewhere.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ofan_topology::{Role, Topology};

use super::Shape;

/// Arguments of `ofan-lab topo`.
#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Topology shape: fat-tree (3 tiers: k pods, (k/2)² cores, k³/4 hosts) or leaf-spine
    /// (2 tiers: k leaves, k/2 spines, k²/2 hosts).
    #[arg(long, value_enum, default_value_t = Shape::FatTree)]
    pub topo: Shape,
    /// Switch radix k (even, 4 to 64).
    #[arg(long, default_value_t = 4)]
    pub k: u16,
    /// Write the topology as JSON to this file (readable by `--topo FILE`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also list every node with its addresses.
    #[arg(long)]
    pub nodes: bool,
}

/// Builds a topology from its shape and radix.
pub fn build(shape: Shape, k: u16) -> anyhow::Result<Topology> {
    Topology::new(shape.kind(k)).with_context(|| format!("cannot build a {shape:?} with k = {k}"))
}

/// Runs `ofan-lab topo`.
pub fn run(args: TopoArgs) -> anyhow::Result<()> {
    let topology = build(args.topo, args.k)?;
    let count = |role: Role| topology.nodes().iter().filter(|n| n.role == role).count();
    println!(
        "{:?} k={}: {} hosts, {} edge, {} aggregation, {} core switches, {} links",
        args.topo,
        args.k,
        count(Role::Host),
        count(Role::Edge),
        count(Role::Aggregation),
        count(Role::Core),
        topology.links().len()
    );
    if args.nodes {
        for node in topology.nodes() {
            let addresses: Vec<String> = node
                .ports
                .iter()
                .map(|port| format!("{}={}/{}", port.ifname, port.address, port.prefix_len))
                .collect();
            println!(
                "{:<16} {:<12?} lo={} {}",
                node.name,
                node.role,
                node.loopback,
                addresses.join(" ")
            );
        }
    }
    if let Some(path) = args.out {
        std::fs::write(&path, topology.to_json_pretty())
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
