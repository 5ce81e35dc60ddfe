//! `ofan-lab topo`: build a topology and print a summary, or write it as JSON for
//! `--topo FILE` elsewhere.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ofan_lab::DEFAULT_DRAGONFLY;
use ofan_topology::{Role, Topology, TopologyKind};

use super::Shape;

/// Arguments of `ofan-lab topo`.
#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Topology shape: fat-tree (3 tiers: k pods, (k/2)² cores, k³/4 hosts), leaf-spine
    /// (2 tiers: k leaves, k/2 spines, k²/2 hosts) or dragonfly (a·h + 1 groups of a routers
    /// with p hosts each; --p, --a, --h).
    #[arg(long, value_enum, default_value_t = TopoShape::FatTree)]
    pub topo: TopoShape,
    /// Switch radix k (even, 4 to 64) of a fat tree or leaf-spine.
    #[arg(long, default_value_t = 4)]
    pub k: u16,
    /// Dragonfly: hosts per router.
    #[arg(long, default_value_t = DEFAULT_DRAGONFLY.0)]
    pub p: u16,
    /// Dragonfly: routers per group.
    #[arg(long, default_value_t = DEFAULT_DRAGONFLY.1)]
    pub a: u16,
    /// Dragonfly: global links per router.
    #[arg(long, default_value_t = DEFAULT_DRAGONFLY.2)]
    pub h: u16,
    /// Write the topology as JSON to this file (readable by `--topo FILE`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also list every node with its addresses.
    #[arg(long)]
    pub nodes: bool,
}

/// `topo --topo`: the Clos families and the dragonfly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TopoShape {
    // (No doc comments on the variants: --topo describes them.)
    FatTree,
    LeafSpine,
    Dragonfly,
}

/// Builds a topology from its shape and radix.
pub fn build(shape: Shape, k: u16) -> anyhow::Result<Topology> {
    Topology::new(shape.kind(k)).with_context(|| format!("cannot build a {shape:?} with k = {k}"))
}

/// Runs `ofan-lab topo`.
pub fn run(args: TopoArgs) -> anyhow::Result<()> {
    let topology = match args.topo {
        TopoShape::FatTree => build(Shape::FatTree, args.k)?,
        TopoShape::LeafSpine => build(Shape::LeafSpine, args.k)?,
        TopoShape::Dragonfly => Topology::new(TopologyKind::Dragonfly {
            p: args.p,
            a: args.a,
            h: args.h,
        })?,
    };
    let count = |role: Role| topology.nodes().iter().filter(|n| n.role == role).count();
    if let Some(dragonfly) = topology.dragonfly() {
        println!(
            "{}: {} links ({} router-to-router)",
            dragonfly.shape(),
            topology.links().len(),
            dragonfly.links().len()
        );
    } else {
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
    }
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
