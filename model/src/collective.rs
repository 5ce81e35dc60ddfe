//! Ring collectives with dependencies: all-reduce, all-gather and reduce-scatter, as a
//! [`FlowGraph`] in which a ring step starts when the previous step's chunk has arrived.
//!
//! `n` hosts, `D` bytes per host (the collective's buffer), servers of `G` hosts (`G` = 1:
//! a flat ring). Each of the `G` rings links the hosts of the same rank on consecutive servers
//! (rank `r` of server `s` sends to rank `r` of the next server), as NCCL's hierarchical rings
//! and FSDP2's HSDP do (paper §6.7: GPU `i` sends to GPU `i + 8 mod n`). A step sends one
//! chunk of `⌈D / n⌉` bytes from every ring member to the next; a reduce-scatter and an
//! all-gather each take `n / G − 1` steps, an all-reduce both phases one after the other
//! (`2 (n / G − 1)` steps). Step `s + 1` of a member starts once its receiver side has the
//! whole chunk of step `s` from its predecessor (the chunk it reduces or forwards): a
//! one-shot trigger per (member, step), activated by the previous chunk's arrival.
//!
//! **Intra-server traffic is skipped**: with `G` > 1 the intra-server reduce-scatter before
//! and all-gather after the inter-server rings run on NVLink, outside the fabric, and are not
//! modelled (neither traffic nor delay); the CCT is the fabric's part. Servers are `G`
//! consecutive hosts (one edge switch's when `G` ≤ k/2), placed on the ring in host order or
//! in a seeded random order (paper §6.7: random server placement).

use ofan_dataplane::lb::{mix64, LbRng};
use serde::{Deserialize, Serialize};

use crate::config::FlowSpec;
use crate::deps::{DependentFlow, FlowGraph, FlowStart, Trigger, TriggerKind};
use crate::error::ModelError;

/// Salt of the ring-order stream.
const RING_SALT: u64 = 0x7269_6e67_6f72_6472;

/// Which collective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CollectiveKind {
    /// Reduce-scatter, then all-gather.
    AllReduce,
    /// Every member ends with every member's chunk.
    AllGather,
    /// Every member ends with one reduced chunk.
    ReduceScatter,
}

impl CollectiveKind {
    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CollectiveKind::AllReduce => "ring-allreduce",
            CollectiveKind::AllGather => "ring-allgather",
            CollectiveKind::ReduceScatter => "ring-reducescatter",
        }
    }

    /// The phases, in order.
    #[must_use]
    pub const fn phases(self) -> &'static [&'static str] {
        match self {
            CollectiveKind::AllReduce => &["reduce-scatter", "all-gather"],
            CollectiveKind::AllGather => &["all-gather"],
            CollectiveKind::ReduceScatter => &["reduce-scatter"],
        }
    }
}

/// The order of the servers on the rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RingOrder {
    /// Server `s` sends to server `s + 1`, in host order.
    Index,
    /// A seeded random order of the servers.
    Random,
}

/// A ring collective over every host of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collective {
    /// All-reduce, all-gather or reduce-scatter.
    pub kind: CollectiveKind,
    /// Hosts per server (`G`); 1 is a flat ring over all hosts.
    pub gpus_per_server: u32,
    /// The servers' order on the rings.
    pub order: RingOrder,
}

/// The number of servers `hosts` GPUs form with `gpus_per_server` each.
///
/// # Errors
/// [`ModelError::InvalidConfig`] unless they form at least two whole servers.
pub(crate) fn whole_servers(hosts: u32, gpus_per_server: u32) -> Result<u32, ModelError> {
    let group = gpus_per_server;
    if group == 0 || hosts % group != 0 || hosts / group < 2 {
        return Err(ModelError::InvalidConfig {
            field: "gpus per server",
            value: format!("{group} (of {hosts} hosts)"),
            reason: "the hosts must form at least two whole servers",
        });
    }
    Ok(hosts / group)
}

/// Servers `0..servers` in ring order: as numbered, or shuffled (Fisher–Yates) by a generator
/// seeded with `rng_seed`.
pub(crate) fn server_order(servers: u32, order: RingOrder, rng_seed: u64) -> Vec<u32> {
    let mut servers: Vec<u32> = (0..servers).collect();
    if order == RingOrder::Random {
        let mut rng = LbRng::new(rng_seed);
        for i in (1..servers.len()).rev() {
            let j = rng.below(i as u32 + 1) as usize;
            servers.swap(i, j);
        }
    }
    servers
}

impl Collective {
    /// The collective's flows and triggers over `hosts` hosts, `data_bytes` per host.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when the hosts do not form at least two whole servers,
    /// or a chunk would be empty.
    pub fn graph(&self, hosts: u32, data_bytes: u64, seed: u64) -> Result<FlowGraph, ModelError> {
        let servers = whole_servers(hosts, self.gpus_per_server)?;
        let group = self.gpus_per_server;
        let chunk = data_bytes.div_ceil(u64::from(hosts));
        if chunk == 0 {
            return Err(ModelError::InvalidConfig {
                field: "message_bytes",
                value: data_bytes.to_string(),
                reason: "a ring step carries at least one byte",
            });
        }
        let order = server_order(servers, self.order, mix64(seed ^ RING_SALT));
        let steps_per_phase = servers - 1;
        let phases = self.kind.phases();
        let steps = steps_per_phase * phases.len() as u32;
        // Trigger of (ring, position, step ≥ 1): `((ring × servers + position) × (steps − 1)
        // + step − 1)`.
        let trigger = |ring: u32, position: u32, step: u32| {
            (ring * servers + position) * (steps - 1) + step - 1
        };
        let mut flows = Vec::with_capacity((group * servers * steps) as usize);
        for ring in 0..group {
            for position in 0..servers {
                let next = (position + 1) % servers;
                let src = order[position as usize] * group + ring;
                let dst = order[next as usize] * group + ring;
                for step in 0..steps {
                    flows.push(DependentFlow {
                        spec: FlowSpec {
                            src,
                            dst,
                            bytes: chunk,
                        },
                        start: if step == 0 {
                            FlowStart::At(0)
                        } else {
                            FlowStart::Trigger(trigger(ring, position, step))
                        },
                        on_sent: None,
                        // The receiver's next step may start once this chunk has arrived.
                        on_received: (step + 1 < steps).then(|| trigger(ring, next, step + 1)),
                        phase: (step / steps_per_phase) as u16,
                    });
                }
            }
        }
        let triggers = (0..group * servers * (steps - 1))
            .map(|index| Trigger {
                id: index + 1,
                kind: TriggerKind::OneShot,
            })
            .collect();
        Ok(FlowGraph {
            flows,
            triggers,
            phases: phases.iter().map(|&phase| phase.to_owned()).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_all_reduce_has_two_phases_of_n_minus_1_steps() {
        let ring = Collective {
            kind: CollectiveKind::AllReduce,
            gpus_per_server: 1,
            order: RingOrder::Index,
        };
        let graph = ring.graph(4, 4000, 1).unwrap();
        graph.check().unwrap();
        assert_eq!(graph.flows.len(), 4 * 6);
        assert!(graph.flows.iter().all(|flow| flow.spec.bytes == 1000));
        let first = |phase: u16| graph.flows.iter().filter(move |f| f.phase == phase).count();
        assert_eq!((first(0), first(1)), (12, 12));
        // Host 0 sends to 1; its step 1 waits for host 3's step 0 chunk.
        assert_eq!((graph.flows[0].spec.src, graph.flows[0].spec.dst), (0, 1));
        let FlowStart::Trigger(t) = graph.flows[1].start else {
            panic!("step 1 is triggered");
        };
        let feeder = graph
            .flows
            .iter()
            .find(|flow| flow.on_received == Some(t))
            .unwrap();
        assert_eq!((feeder.spec.src, feeder.spec.dst), (3, 0));
    }

    #[test]
    fn hierarchical_rings_link_same_rank_peers() {
        let ring = Collective {
            kind: CollectiveKind::AllGather,
            gpus_per_server: 4,
            order: RingOrder::Random,
        };
        let graph = ring.graph(16, 1600, 3).unwrap();
        graph.check().unwrap();
        // 4 rings of 4 servers, 3 steps each.
        assert_eq!(graph.flows.len(), 4 * 4 * 3);
        for flow in &graph.flows {
            assert_eq!(flow.spec.src % 4, flow.spec.dst % 4, "same rank");
            assert_ne!(flow.spec.src / 4, flow.spec.dst / 4, "across servers");
            assert_eq!(flow.spec.bytes, 100, "one 1/n shard per step");
        }
    }

    #[test]
    fn too_few_servers_are_refused() {
        let ring = Collective {
            kind: CollectiveKind::ReduceScatter,
            gpus_per_server: 8,
            order: RingOrder::Index,
        };
        assert!(ring.graph(8, 1 << 20, 1).is_err());
        assert!(ring.graph(12, 1 << 20, 1).is_err());
    }
}
