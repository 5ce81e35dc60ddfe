//! `ofan-lab demo`: the first command to run — a fat tree built, pinged, traced, shown and
//! compared under several algorithms, then removed; every step printed as the command a user
//! would type.

use anyhow::bail;
use ofan_lab::{self as lab, ops, plan, LabSpec, TopologySource};
use ofan_topology::TopologyKind;

use super::{experiment, pingall, status, Stderr};

/// Runs the demo.
///
/// # Errors
/// A step failing; pingall failing.
pub fn run(keep: bool, k: u16, lb: &str, size: &str, repeat: u32) -> anyhow::Result<()> {
    let name = "demo";
    println!(
        "== ofan-lab demo: a k={k} fat tree of network namespaces, one ofan-switch per switch ==\n"
    );
    if lab::exists(name) {
        println!("(removing the previous demo lab first)");
        super::lab::down(name)?;
    }
    let topology = TopologySource::Kind(TopologyKind::FatTree { k });
    let spec = LabSpec {
        link_rate_bps: topology.default_link_rate_bps()?,
        topology,
        buffer_bytes: lab::EXPERIMENT_BUFFER_BYTES,
        ..LabSpec::new(name)
    };
    println!("$ ofan-lab up --name demo --topo fat-tree --k {k}");
    lab::up(&spec, &mut Stderr)?;
    let result = (|| -> anyhow::Result<bool> {
        println!("\n$ ofan-lab pingall --name demo");
        let matrix = ops::pingall(name, 3)?;
        print!("{}", pingall::render(&matrix));
        let all = matrix.failed().is_empty();
        let lab = lab::load(name)?;
        let (src, dst) = (
            &lab.topology.hosts()[0],
            lab.topology.hosts().last().unwrap(),
        );
        println!(
            "\n$ ofan-lab exec --name demo {} -- traceroute -n -q 1 -w 1 {}",
            src.name, dst.loopback
        );
        let output = std::process::Command::new("ip")
            .args(["netns", "exec", &plan::namespace(name, &src.name)])
            .args([
                "traceroute",
                "-n",
                "-q",
                "1",
                "-w",
                "1",
                &dst.loopback.to_string(),
            ])
            .output();
        match output {
            Ok(output) => {
                for line in String::from_utf8_lossy(&output.stdout).lines() {
                    let owner = line
                        .split_whitespace()
                        .nth(1)
                        .and_then(|addr| addr.parse().ok())
                        .and_then(|addr| lab.topology.node_by_addr(addr))
                        .map(|id| format!("   ({})", lab.topology.node(id).name))
                        .unwrap_or_default();
                    println!("{line}{owner}");
                }
            }
            Err(error) => println!("(traceroute not available: {error})"),
        }
        println!("\n$ ofan-lab status --name demo");
        print!("{}", status::table(&lab::status::gather(&lab)));
        if all && lb != "none" {
            println!("\n$ ofan-lab compare --name demo --lb {lb} --sizes {size} --repeat {repeat}");
            let args = experiment::CompareArgs::for_demo(name, lb, size, repeat);
            experiment::compare_command(&args)?;
        }
        Ok(all)
    })();
    if keep {
        println!("\nthe lab stays up: try `ofan-lab exec --name demo h-p0-e0-h0 -- ping 10.3.1.3`, then `ofan-lab down --name demo`");
    } else {
        println!("\n$ ofan-lab down --name demo");
        super::lab::down(name)?;
    }
    match result? {
        true => Ok(()),
        false => bail!("pingall failed"),
    }
}
