//! Traffic matrices, link loads and ρ_max (paper §2.2, §6.2).
//!
//! # Definition of ρ_max
//!
//! Every flow of a [`TrafficMatrix`] is routed on shortest (up-then-down) paths and, at every
//! switch where it climbs, split evenly over the up ports that are still valid for its
//! destination key ([`Topology::valid_up_mask`]). This is exactly the long-run split that a
//! per-destination round-robin pointer produces: the pointer of a key visits each valid port
//! equally often, and link loads are linear in the flows, so splitting each flow evenly and
//! splitting the key's aggregate evenly load every link the same. Links are full duplex with a
//! capacity of 1.0 (a host's line rate) per direction, host links included. With `L` the
//! largest load on any link direction when every host sends its flows at the weights given,
//!
//! ```text
//! ρ_max = min(1, 1 / L)
//! ```
//!
//! is the largest common fraction of line rate at which all flows can send without
//! overloading any link (1 on an idle matrix). Without failures and for a permutation it is 1.
//!
//! Under asymmetric failures this even split is not always the best possible one: a
//! linear-programming split that weighs paths unevenly (sending less through an aggregation
//! switch whose onward links are degraded) can sometimes reach a higher common rate. The value
//! here is the rate the switch load balancer itself can sustain, which is what the model and
//! the lab pace hosts at.
//!
//! # Exactness
//!
//! In a multi-plane fabric a host splits each flow evenly over its planes (its ports whose link
//! is alive) first, as a switch over its valid up ports, and a flow's weight is in line rates of
//! one port: a host that sends at line rate on each of its P ports sends flows of total weight
//! P.
//!
//! Within one flow weight, path fractions are accumulated exactly as integer multiples of
//! `1 / (lcm(1..=k/2)² · lcm(1..=P))` (every split divides a flow by at most k/2, twice, and
//! by at most P planes at the host), so a link carrying
//! exactly its capacity reads exactly 1.0 and a fault-free permutation gives exactly
//! ρ_max = 1. Only the final sum over distinct weights is in floating point.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::TopologyError;
use crate::model::{NodeId, Port, PortDirection, Role};
use crate::routing::{DestKey, FailedLinks, Target};
use crate::topology::Topology;

/// A flow from one host to another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Source host.
    pub src: NodeId,
    /// Destination host.
    pub dst: NodeId,
    /// Relative demand: 1.0 is a host's line rate.
    pub weight: f64,
}

/// A set of flows that run at the same time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TrafficMatrix {
    /// The flows, in no particular order.
    pub flows: Vec<Flow>,
}

impl TrafficMatrix {
    /// An empty matrix.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// One flow of weight 1.0 per `(src, dst)` pair.
    #[must_use]
    pub fn permutation(pairs: &[(NodeId, NodeId)]) -> Self {
        Self {
            flows: pairs
                .iter()
                .map(|&(src, dst)| Flow {
                    src,
                    dst,
                    weight: 1.0,
                })
                .collect(),
        }
    }

    /// Adds a flow.
    pub fn push(&mut self, src: NodeId, dst: NodeId, weight: f64) {
        self.flows.push(Flow { src, dst, weight });
    }
}

/// The load on both directions of one link, in units of link capacity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkLoad {
    /// From the lower end (`a`) to the upper end (`b`).
    pub up: f64,
    /// From the upper end (`b`) to the lower end (`a`).
    pub down: f64,
}

impl Topology {
    /// The load of every link (indexed by [`crate::LinkId`]) when every flow of `matrix` sends
    /// at its weight and is split as described in the [module documentation](self).
    ///
    /// Flows from a host to itself load nothing.
    ///
    /// # Errors
    ///
    /// [`TopologyError::UnknownNode`] or [`TopologyError::UnexpectedRole`] if a flow endpoint is
    /// not a host, [`TopologyError::InvalidWeight`] for a negative or non-finite weight, and
    /// [`TopologyError::NoValidPath`] for the first flow the failures disconnect.
    ///
    /// # Panics
    ///
    /// If more than 2³³ flows share one weight (the exact accumulator would overflow).
    pub fn link_loads(
        &self,
        failures: &FailedLinks,
        matrix: &TrafficMatrix,
    ) -> Result<Vec<LinkLoad>, TopologyError> {
        // Flows grouped by weight, so that each group is accumulated exactly.
        let mut groups: BTreeMap<u64, Vec<&Flow>> = BTreeMap::new();
        for flow in &matrix.flows {
            self.check_host(flow.src)?;
            self.check_host(flow.dst)?;
            if !(flow.weight.is_finite() && flow.weight >= 0.0) {
                return Err(TopologyError::InvalidWeight {
                    src: flow.src,
                    dst: flow.dst,
                    weight: flow.weight,
                });
            }
            // `+ 0.0` folds -0.0 into 0.0.
            groups
                .entry((flow.weight + 0.0).to_bits())
                .or_default()
                .push(flow);
        }

        let mut spreader = Spreader::new(self, failures);
        let mut loads = vec![0.0; 2 * self.links().len()];
        for (weight_bits, flows) in groups {
            let weight = f64::from_bits(weight_bits);
            for flow in flows {
                if !spreader.spread(flow.src, flow.dst, spreader.unit) {
                    return Err(TopologyError::NoValidPath {
                        src: flow.src,
                        dst: flow.dst,
                    });
                }
            }
            spreader.drain(weight, &mut loads);
        }
        Ok(loads
            .chunks_exact(2)
            .map(|pair| LinkLoad {
                up: pair[0],
                down: pair[1],
            })
            .collect())
    }

    /// ρ_max: the largest fraction of line rate at which every flow of `matrix` can send when
    /// each switch splits it evenly over its valid up ports — `min(1, 1 / max link load)`; see
    /// the [module documentation](self) for the exact definition.
    ///
    /// # Errors
    ///
    /// As [`Topology::link_loads`]; in particular [`TopologyError::NoValidPath`] names the
    /// first flow that the failures disconnect.
    pub fn rho_max(
        &self,
        failures: &FailedLinks,
        matrix: &TrafficMatrix,
    ) -> Result<f64, TopologyError> {
        let max_load = self
            .link_loads(failures, matrix)?
            .iter()
            .fold(0.0_f64, |max, load| max.max(load.up).max(load.down));
        Ok(if max_load <= 1.0 { 1.0 } else { 1.0 / max_load })
    }
}

/// Walks flows through the topology, accumulating exact per-direction loads.
struct Spreader<'a> {
    topology: &'a Topology,
    failures: &'a FailedLinks,
    /// One unit of weight: divisible by the product of any two split counts.
    unit: u128,
    /// Accumulated load per link direction (`2 · link + down`), in `1 / unit`.
    numerators: Vec<u128>,
    /// Link directions with a non-zero numerator.
    touched: Vec<usize>,
    masks: HashMap<(NodeId, DestKey), u64>,
}

impl<'a> Spreader<'a> {
    fn new(topology: &'a Topology, failures: &'a FailedLinks) -> Self {
        let lcm_to = |top: u128| (1..=top).fold(1, |lcm, n| lcm / gcd(lcm, n) * n);
        let lcm = lcm_to(u128::from(topology.k() / 2));
        Self {
            topology,
            failures,
            unit: lcm * lcm * lcm_to(u128::from(topology.planes())),
            numerators: vec![0; 2 * topology.links().len()],
            touched: Vec::new(),
            masks: HashMap::new(),
        }
    }

    /// Sends `amount` from `node` towards host `dst`; `false` if some switch on the way has no
    /// valid up port or a link on the way down is failed.
    fn spread(&mut self, node: NodeId, dst: NodeId, amount: u128) -> bool {
        let topology = self.topology;
        if node == dst {
            return true;
        }
        if topology.role(node) == Role::Host {
            // A host splits evenly over its ports (its planes) whose link is alive.
            let ports = &topology.node(node).ports;
            let alive = ports
                .iter()
                .filter(|port| self.failures.is_alive(port.link))
                .count() as u128;
            if alive == 0 {
                return false;
            }
            debug_assert_eq!(amount % alive, 0, "unit is divisible by every split");
            return ports
                .iter()
                .filter(|port| self.failures.is_alive(port.link))
                .all(|port| self.traverse(port, dst, amount / alive));
        }
        let Some(key) = topology.dest_key_for_host(node, dst) else {
            let port = topology.down_port_towards(node, Target::Host(dst));
            return self.traverse(topology.port(node, port), dst, amount);
        };
        let failures = self.failures;
        let mask = *self
            .masks
            .entry((node, key))
            .or_insert_with(|| topology.valid_up_mask(failures, node, key));
        let count = u128::from(mask.count_ones());
        if count == 0 {
            return false;
        }
        debug_assert_eq!(amount % count, 0, "unit is divisible by every split");
        let share = amount / count;
        topology
            .up_ports(node)
            .iter()
            .enumerate()
            .filter(|(position, _)| mask >> position & 1 == 1)
            .all(|(_, port)| self.traverse(port, dst, share))
    }

    fn traverse(&mut self, port: &'a Port, dst: NodeId, amount: u128) -> bool {
        if !self.failures.is_alive(port.link) {
            return false;
        }
        let slot = 2 * port.link.index() + usize::from(port.direction == PortDirection::Down);
        if self.numerators[slot] == 0 {
            self.touched.push(slot);
        }
        self.numerators[slot] = self.numerators[slot]
            .checked_add(amount)
            .expect("fewer than 2^33 flows share a weight");
        self.spread(port.peer, dst, amount)
    }

    /// Adds the accumulated loads, scaled by `weight`, to `loads` and resets the accumulator.
    #[allow(clippy::cast_precision_loss)] // Loads are reported as f64 by design.
    fn drain(&mut self, weight: f64, loads: &mut [f64]) {
        let unit = self.unit as f64;
        for slot in self.touched.drain(..) {
            loads[slot] += weight * (self.numerators[slot] as f64 / unit);
            self.numerators[slot] = 0;
        }
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
