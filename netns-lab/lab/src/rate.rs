//! `link A B rate R`: a degraded link — one link between two switches shaped slower than the
//! rest (the adaptive-routing framework's scenario: remote congestion a local view cannot see).
//! Each end's switch shapes its port at the new rate from its next frame on (the admin request
//! `rate PORT BPS`); `rate default` gives the link the lab's rate again. Host ends are paced by
//! their agents, not by a switch, so a link to a host cannot be degraded this way.
//!
//! The rate is recorded in the lab's state before the switches are told, and given again to a
//! switch that starts (`node S start`): a new process starts from its configured rate.

use anyhow::{bail, Context};
use ofan_topology::LinkId;

use super::up::switch_client;
use super::{find_node, load, Loaded};

/// What `link A B rate R` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateChange {
    /// The link's rate now, bit/s.
    pub bps: u64,
    /// The lab's rate (every other link's), bit/s.
    pub lab_bps: u64,
}

/// Shapes the link between switches `a` and `b` at `bps` bit/s (`None`: the lab's rate again).
///
/// # Errors
/// No such lab, nodes or link; an end that is a host; an unshaped lab (`--link-rate 0`); a
/// switch that refuses or does not answer (the recorded rate is then rolled back).
pub fn link_rate(name: &str, a: &str, b: &str, bps: Option<u64>) -> anyhow::Result<RateChange> {
    let mut lab = load(name)?;
    let lab_bps = lab.state.params.link_rate_bps;
    if lab_bps == 0 {
        bail!("lab `{name}` is unshaped (--link-rate 0): there is no rate to change");
    }
    let (node_a, node_b) = (find_node(&lab.topology, a)?, find_node(&lab.topology, b)?);
    for node in [node_a, node_b] {
        if !node.role.is_switch() {
            bail!(
                "{} is a host: only links between two switches can be slowed (a host's rate is its agent's pacing)",
                node.name
            );
        }
    }
    let link = lab
        .topology
        .link_between(node_a.id, node_b.id)
        .with_context(|| format!("{a} and {b} are not linked"))?;
    let bps = bps.unwrap_or(lab_bps);
    let previous = lab.state.link_rates.clone();
    lab.state.link_rates.retain(|(id, _)| *id != link.0);
    if bps != lab_bps {
        lab.state.link_rates.push((link.0, bps));
    }
    lab.dir.save(&lab.state)?;
    if let Err(error) = lab.shape_link(link, bps) {
        let old = previous
            .iter()
            .find(|(id, _)| *id == link.0)
            .map_or(lab_bps, |(_, bps)| *bps);
        let _ = lab.shape_link(link, old);
        lab.state.link_rates = previous;
        lab.dir.save(&lab.state)?;
        return Err(error);
    }
    Ok(RateChange { bps, lab_bps })
}

impl Loaded {
    /// The links slowed with `link A B rate R`, for reports and the lower bound.
    #[must_use]
    pub fn slowed_links(&self) -> Vec<ofan_model::report::SlowedLink> {
        self.state
            .link_rates
            .iter()
            .map(|&(id, rate_bps)| {
                let link = self.topology.link(LinkId(id));
                ofan_model::report::SlowedLink {
                    link: id,
                    a: self.topology.node(link.a.0).name.clone(),
                    b: self.topology.node(link.b.0).name.clone(),
                    rate_bps,
                }
            })
            .collect()
    }

    /// Tells both (running) end switches of `link` to shape their port at `bps`.
    fn shape_link(&self, link: LinkId, bps: u64) -> anyhow::Result<()> {
        let link = self.topology.link(link);
        for (node, port) in [link.a, link.b] {
            let node = self.topology.node(node);
            if self.state.stopped.contains(&node.name) {
                continue;
            }
            let ifname = &self.topology.port(node.id, port).ifname;
            switch_client(&self.dir, &node.name)
                .set_link_rate(ifname, bps)
                .with_context(|| format!("rate {bps} at {}:{ifname}", node.name))?;
        }
        Ok(())
    }

    /// Gives switch `switch` (just started) the recorded rates of its degraded links.
    ///
    /// # Errors
    /// The switch does not answer.
    pub(crate) fn reapply_link_rates(&self, switch: &str) -> anyhow::Result<()> {
        let node = find_node(&self.topology, switch)?;
        for port in &node.ports {
            if let Some((_, bps)) = self
                .state
                .link_rates
                .iter()
                .find(|(id, _)| *id == port.link.0)
            {
                switch_client(&self.dir, switch)
                    .set_link_rate(&port.ifname, *bps)
                    .with_context(|| format!("rate {bps} at {switch}:{}", port.ifname))?;
            }
        }
        Ok(())
    }
}
