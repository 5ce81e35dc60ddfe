//! `link A B blackhole`: a link that drops every frame while its carrier stays up — at each
//! end, what that end receives, so both directions are black. A switch end drops in its XDP
//! steering program (the admin request `blackhole PORT on`, counted as `drop_blackhole`): its
//! AF_XDP transmissions bypass the kernel's qdiscs and XDP runs before tc ingress, so only the
//! program sees every frame. A host end, which runs no XDP, gets a tc filter on the ingress of
//! its `clsact` qdisc that drops every frame: `bpf da bytecode "1,6 0 0 2,"`, a one-instruction
//! classic BPF program `ret #2` (`TC_ACT_SHOT`) in direct-action mode. (`matchall action drop`
//! would say the same, but kernels built without `cls_matchall` and `act_gact` — this lab's
//! is one — have only `cls_bpf`.)
//!
//! Everything is dropped — data, ARP, BGP, BFD — which is the point: no carrier event tells the
//! routing daemons, only their timers can.

use std::process::Command;

use anyhow::{bail, Context};
use ofan_topology::LinkId;

use super::up::switch_client;
use super::{plan, Loaded};

impl Loaded {
    /// Sets up (`on`) or removes the drops of both ends of `link`. A stopped switch's end is
    /// skipped: [`Loaded::reapply_blackholes`] sets it up when the switch starts.
    ///
    /// # Errors
    /// A switch that does not answer, `tc` failing in a host namespace.
    pub(crate) fn set_blackhole(&self, link: LinkId, on: bool) -> anyhow::Result<()> {
        let link = self.topology.link(link);
        for (node, port) in [link.a, link.b] {
            let node = self.topology.node(node);
            let ifname = &self.topology.port(node.id, port).ifname;
            if !node.role.is_switch() {
                host_port(&plan::namespace(&self.state.name, &node.name), ifname, on)?;
            } else if !self.state.stopped.contains(&node.name) {
                switch_client(&self.dir, &node.name)
                    .blackhole(ifname, on)
                    .with_context(|| format!("blackhole {on} at {}:{ifname}", node.name))?;
            }
        }
        Ok(())
    }

    /// Sets up again the drops of the blackholed links at switch `switch` (after it started: a
    /// new process has a new steering program).
    ///
    /// # Errors
    /// The switch does not answer.
    pub(crate) fn reapply_blackholes(&self, switch: &str) -> anyhow::Result<()> {
        let node = super::find_node(&self.topology, switch)?;
        for port in &node.ports {
            if self.state.blackholed_links.contains(&port.link.0) {
                switch_client(&self.dir, switch)
                    .blackhole(&port.ifname, true)
                    .with_context(|| format!("blackhole on at {switch}:{}", port.ifname))?;
            }
        }
        Ok(())
    }
}

/// `ret #2`: classic BPF (one `BPF_RET | BPF_K` instruction, code 6) returning `TC_ACT_SHOT`,
/// in tc's `bytecode` notation (instruction count, then `code jt jf k` per instruction).
const DROP_ALL: &str = "1,6 0 0 2,";

/// Drops every frame host port `ifname` in `namespace` receives (`on`: a `clsact` qdisc with
/// the [`DROP_ALL`] direct-action ingress filter), or removes the qdisc and its filter again.
fn host_port(namespace: &str, ifname: &str, on: bool) -> anyhow::Result<()> {
    // Idempotent: the qdisc (and with it any filter) goes first, whatever was there.
    let _ = tc(namespace, &["qdisc", "del", "dev", ifname, "clsact"]);
    if on {
        tc(namespace, &["qdisc", "add", "dev", ifname, "clsact"])?;
        let filter = ["filter", "add", "dev", ifname, "ingress", "bpf", "da"];
        tc(namespace, &[&filter[..], &["bytecode", DROP_ALL]].concat())?;
    }
    Ok(())
}

/// Runs `tc ARGS` in `namespace`.
fn tc(namespace: &str, args: &[&str]) -> anyhow::Result<()> {
    let output = Command::new("ip")
        .args(["netns", "exec", namespace, "tc"])
        .args(args)
        .output()
        .context("cannot run tc (iproute2)")?;
    if !output.status.success() {
        bail!(
            "tc {} in {namespace}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}
