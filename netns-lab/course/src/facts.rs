//! What the checker reads from a running lab, once: how it was built, what its switches say,
//! what its links are, what every switch's kernel FIB does with every destination edge, and
//! whether every host reaches every other (`pingall` through the data path).

use std::net::Ipv4Addr;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use ofan_lab::status::{self, SwitchState};
use ofan_lab::{self as lab, ops, plan, LinkState, Loaded};

/// A running lab as the checks see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabFacts {
    /// The lab's name.
    pub name: String,
    /// Switches in its topology.
    pub switches: usize,
    /// Hosts in its topology.
    pub hosts: usize,
    /// Links in its topology.
    pub links: usize,
    /// Where its routes come from: `static`, `none` or `bgp`.
    pub routing: String,
    /// Its emulated link rate, bit/s.
    pub link_rate_bps: u64,
    /// Every switch: name, state (`running`, `stopped`, `CRASHED`, …) and, when it answered,
    /// its algorithm.
    pub switch_states: Vec<SwitchFact>,
    /// Every switch-to-switch or host link with its state and rate.
    pub link_states: Vec<LinkFact>,
    /// Every running switch × destination edge: what the kernel FIB does with the edge's hosts,
    /// against what the plan says under the lab's failed links.
    pub routes: Vec<RouteFact>,
    /// `pingall`: ordered host pairs that answered, of all.
    pub ping_ok: usize,
    /// Ordered host pairs.
    pub ping_pairs: usize,
    /// Some pairs that failed, `src → dst`.
    pub ping_failed: Vec<String>,
}

/// One switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchFact {
    /// Its name.
    pub name: String,
    /// What `status` calls its state.
    pub state: String,
    /// Its load-balancing algorithm, when it answered.
    pub algorithm: Option<String>,
}

/// One link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkFact {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// `up`, `DOWN` or `BLACKHOLE`.
    pub state: String,
    /// Its rate when it was slowed (`link A B rate R`), bit/s.
    pub slowed_bps: Option<u64>,
}

/// One switch's route towards one destination edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteFact {
    /// The switch.
    pub switch: String,
    /// The destination edge's prefix, `a.b.c.d/len`.
    pub prefix: String,
    /// Next hops of the longest kernel route matching the edge's first host (0: no route).
    pub width: usize,
    /// Next hops the plan gives (0: the destination is unreachable under the failed links).
    pub plan_width: usize,
}

impl LabFacts {
    /// Reads lab `name`: its state, every switch's stats, every switch namespace's FIB, and a
    /// `pingall` (two attempts per pair).
    ///
    /// # Errors
    /// No such lab; a namespace that cannot be opened.
    pub fn gather(name: &str) -> anyhow::Result<Self> {
        let lab = lab::load(name)?;
        let status = status::gather(&lab);
        let switch_states = status
            .switches
            .iter()
            .map(|(name, switch)| SwitchFact {
                name: name.clone(),
                state: switch.state.label().to_owned(),
                algorithm: switch.stats.as_ref().map(|stats| stats.algorithm.clone()),
            })
            .collect();
        let link_states = status
            .links
            .iter()
            .map(|link| {
                let a = lab.topology.node(link.link.a.0).name.clone();
                let b = lab.topology.node(link.link.b.0).name.clone();
                LinkFact {
                    a,
                    b,
                    state: link.state.label().to_owned(),
                    slowed_bps: lab
                        .state
                        .link_rates
                        .iter()
                        .find(|(id, _)| *id == link.link.id.0)
                        .map(|&(_, bps)| bps),
                }
            })
            .collect();
        let running: Vec<&str> = status
            .switches
            .iter()
            .filter(|(_, switch)| switch.state == SwitchState::Running)
            .map(|(name, _)| name.as_str())
            .collect();
        let routes = route_facts(&lab, &running)?;
        let ping = ops::pingall(name, 2)?;
        let failed = ping.failed();
        Ok(Self {
            name: name.to_owned(),
            switches: lab.topology.switches().len(),
            hosts: lab.topology.hosts().len(),
            links: lab.topology.links().len(),
            routing: lab.state.params.routing.clone(),
            link_rate_bps: lab.state.params.link_rate_bps,
            switch_states,
            link_states,
            routes,
            ping_ok: ping.pairs() - failed.len(),
            ping_pairs: ping.pairs(),
            ping_failed: failed
                .iter()
                .take(5)
                .map(|&(i, j)| format!("{} → {}", ping.hosts[i].0, ping.hosts[j].0))
                .collect(),
        })
    }

    /// The link between `a` and `b` (either order).
    #[must_use]
    pub fn link(&self, a: &str, b: &str) -> Option<&LinkFact> {
        self.link_states
            .iter()
            .find(|link| (link.a == a && link.b == b) || (link.a == b && link.b == a))
    }
}

/// The state label of a link that is down (as [`LinkState::label`] writes it).
#[must_use]
pub fn down_label() -> &'static str {
    LinkState::Down.label()
}

/// Every running switch's kernel route width towards every other edge, with the plan's.
fn route_facts(lab: &Loaded, running: &[&str]) -> anyhow::Result<Vec<RouteFact>> {
    let failures = lab.routing_failures();
    let mut facts = Vec::new();
    for switch in lab.topology.switches() {
        if !running.contains(&switch.name.as_str()) {
            continue;
        }
        let kernel = lab
            .kernel_routes(switch.id)
            .with_context(|| format!("cannot read the FIB of {}", switch.name))?;
        let planned = plan::switch_routes(&lab.topology, &failures, switch.id);
        for edge in lab.topology.edges() {
            if edge.id == switch.id {
                continue;
            }
            let (addr, len) = lab.topology.edge_prefix(edge.id);
            let host = Ipv4Addr::from(u32::from(addr) + 1);
            facts.push(RouteFact {
                switch: switch.name.clone(),
                prefix: format!("{addr}/{len}"),
                width: longest_match(&kernel, host).unwrap_or(0),
                plan_width: planned.get(&(addr, len)).map_or(0, Vec::len),
            });
        }
    }
    Ok(facts)
}

/// The next-hop count of the longest route in `routes` containing `addr`.
#[must_use]
pub fn longest_match(routes: &[lab::RouteWidth], addr: Ipv4Addr) -> Option<usize> {
    routes
        .iter()
        .filter(|((dst, len), _)| {
            let mask = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            u32::from(addr) & mask == u32::from(*dst) & mask
        })
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, width)| *width)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_route_decides() {
        let routes = vec![
            ((Ipv4Addr::new(0, 0, 0, 0), 0), 9),
            ((Ipv4Addr::new(10, 0, 0, 0), 8), 2),
            ((Ipv4Addr::new(10, 1, 0, 0), 16), 1),
            ((Ipv4Addr::new(10, 1, 2, 0), 24), 3),
        ];
        assert_eq!(longest_match(&routes, Ipv4Addr::new(10, 1, 2, 1)), Some(3));
        assert_eq!(longest_match(&routes, Ipv4Addr::new(10, 1, 3, 1)), Some(1));
        assert_eq!(longest_match(&routes, Ipv4Addr::new(10, 2, 0, 1)), Some(2));
        assert_eq!(longest_match(&routes, Ipv4Addr::new(11, 0, 0, 1)), Some(9));
        assert_eq!(
            longest_match(&routes[1..], Ipv4Addr::new(11, 0, 0, 1)),
            None
        );
    }
}
