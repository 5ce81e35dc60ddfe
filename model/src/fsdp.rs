//! Training with FSDP2 and HSDP (paper §6.7): the backward pass's all-gather of weights and
//! reduce-scatter of gradients, layer by layer, as a [`FlowGraph`].
//!
//! **Fabric traffic.** `n` GPUs (hosts) in servers of `G` consecutive hosts; the servers sit
//! on the ring in a seeded random order ([`RingOrder::Random`], the paper's random server
//! placement) or in host order. Logical GPU `i` sends to logical GPU `i + G mod n` — `G`
//! parallel rings over the servers, rank `r` to rank `r` of the next server, as in
//! [`crate::collective`]. Per layer and phase, every GPU sends **one flow** of `flow_bytes`
//! to its ring successor: the paper's "packets per flow per layer" (119, 418 and 1,533 packets
//! of 4 KB for Llama-3 8B, 70B and 405B; see [`Llama`]). **Intra-server traffic is skipped**:
//! the all-gather inside a server that completes the remaining 7/8 runs on NVLink, outside
//! the fabric, and is modelled neither as traffic nor as a delay.
//!
//! **Dependencies (our choice; the paper does not say how layers overlap).** The backward
//! pass runs from the last layer `L − 1` to the first, computation takes no time, and FSDP2
//! prefetches one layer ahead: while layer `l`'s gradients are reduce-scattered, layer
//! `l − 1`'s weights are all-gathered. So the run is `L + 1` *windows*: window 0 carries
//! all-gather `L − 1`; window `w` (1 ≤ w < L) all-gather `L − 1 − w` and reduce-scatter
//! `L − w` together; window `L` reduce-scatter 0. A GPU opens its window `w + 1` once
//! everything its predecessor sent it in window `w` has arrived (a barrier per GPU and window,
//! activated by those flows' arrival): the weights it needs before computing, and the
//! gradient shard it reduces into its own before sending it on. At most two flows per GPU are
//! in flight, both to the same successor.
//!
//! Phases (reports give each its CCT): `all-gather l` and `reduce-scatter l` per layer, in
//! the order the windows open.
//!
//! **Lower bound.** The bound of the flows' bytes alone ignores the waits, which here are one
//! path per window: 127 of them for the 8B model, where a window lasts only about 10 µs. A run
//! of this workload is therefore bounded by [`Fsdp::chain_bound_ps`] too — a GPU's window
//! `w + 1` cannot open before its predecessor has put all of window `w`'s frames on its link
//! and the last of them has crossed the path between them — and the report's bound is the
//! larger of the two.

use ofan_dataplane::lb::mix64;
use serde::{Deserialize, Serialize};

use ofan_topology::{LinkParams, NodeId, SendRate, Topology};

use crate::collective::{server_order, whole_servers, RingOrder};
use crate::config::FlowSpec;
use crate::deps::{DependentFlow, FlowGraph, FlowStart, Trigger, TriggerKind};
use crate::error::ModelError;

/// Salt of the server-placement stream.
const PLACEMENT_SALT: u64 = 0x6673_6470_706c_6163;

/// The paper's packet payload for Fig. 14: 4 KB.
pub const PAPER_PAYLOAD: u64 = 4096;

/// A Llama-3 model of the paper's Fig. 14: layers and packets per flow per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Llama {
    /// Llama-3 8B: 32 layers, 119 packets per flow per layer.
    B8,
    /// Llama-3 70B: 80 layers, 418 packets.
    B70,
    /// Llama-3 405B: 126 layers, 1,533 packets.
    B405,
}

impl Llama {
    /// All three, smallest first.
    pub const ALL: [Llama; 3] = [Llama::B8, Llama::B70, Llama::B405];

    /// The command-line name (`8b`, `70b`, `405b`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Llama::B8 => "8b",
            Llama::B70 => "70b",
            Llama::B405 => "405b",
        }
    }

    /// Transformer layers.
    #[must_use]
    pub const fn layers(self) -> u32 {
        match self {
            Llama::B8 => 32,
            Llama::B70 => 80,
            Llama::B405 => 126,
        }
    }

    /// Packets of [`PAPER_PAYLOAD`] per flow per layer, as the paper gives them. They are
    /// twice a 1/1,024 FP8 shard of a layer (405 G parameters / 126 layers / 1,024 / 4,096 B ≈
    /// 766 packets); the paper does not say why, and we take its numbers as they are.
    #[must_use]
    pub const fn packets_per_flow(self) -> u64 {
        match self {
            Llama::B8 => 119,
            Llama::B70 => 418,
            Llama::B405 => 1533,
        }
    }

    /// The paper's workload for this model: every layer, 8-GPU servers in random order,
    /// flows of [`Self::packets_per_flow`] × 4 KB.
    #[must_use]
    pub const fn fsdp(self) -> Fsdp {
        Fsdp {
            layers: self.layers(),
            flow_bytes: self.packets_per_flow() * PAPER_PAYLOAD,
            gpus_per_server: 8,
            order: RingOrder::Random,
            gate: WindowGate::Received,
        }
    }
}

impl std::str::FromStr for Llama {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Llama::ALL
            .into_iter()
            .find(|model| model.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| format!("unknown Llama-3 model `{text}` (8b, 70b, 405b)"))
    }
}

/// The backward pass of FSDP2 with HSDP over every host of the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fsdp {
    /// Layers simulated (the paper: all of the model's).
    pub layers: u32,
    /// Bytes of every flow (one per GPU, layer and phase).
    pub flow_bytes: u64,
    /// GPUs per server (`G`, the paper: 8): the ring stride.
    pub gpus_per_server: u32,
    /// The servers' order on the rings.
    pub order: RingOrder,
    /// What a GPU's next window waits for.
    #[serde(default)]
    pub gate: WindowGate,
}

/// What opens a GPU's window `w + 1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowGate {
    /// Everything its predecessor sent it in window `w` has arrived (the default).
    #[default]
    Received,
    /// That, and its own window-`w` flows are acknowledged, as a NCCL kernel completes only
    /// once its sends have: GPUs cannot run ahead of their own sending.
    ReceivedAndSent,
}

impl Fsdp {
    /// Phase index of layer `layer`'s all-gather (its reduce-scatter is the next).
    const fn all_gather_phase(&self, layer: u32) -> u16 {
        (2 * (self.layers - 1 - layer)) as u16
    }

    /// The physical host of each logical GPU over `hosts` hosts: server `g / G` at its place
    /// in the seeded order, rank `g mod G`.
    ///
    /// # Errors
    /// As [`Self::graph`].
    fn placement(&self, hosts: u32, seed: u64) -> Result<Vec<u32>, ModelError> {
        let servers = whole_servers(hosts, self.gpus_per_server)?;
        let group = self.gpus_per_server;
        if !(1..=16_384).contains(&self.layers) {
            return Err(ModelError::InvalidConfig {
                field: "layers",
                value: self.layers.to_string(),
                reason: "FSDP simulates 1 to 16,384 layers",
            });
        }
        if self.flow_bytes == 0 {
            return Err(ModelError::InvalidConfig {
                field: "flow bytes",
                value: "0".into(),
                reason: "a flow carries at least one byte",
            });
        }
        let order = server_order(servers, self.order, mix64(seed ^ PLACEMENT_SALT));
        Ok((0..hosts)
            .map(|gpu| order[(gpu / group) as usize] * group + gpu % group)
            .collect())
    }

    /// The flows and triggers over `hosts` hosts.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when the hosts do not form at least two whole servers,
    /// there are no layers (or more than 16,384), or flows would be empty.
    pub fn graph(&self, hosts: u32, seed: u64) -> Result<FlowGraph, ModelError> {
        let placement = self.placement(hosts, seed)?;
        let host = |gpu: u32| placement[gpu as usize];
        let group = self.gpus_per_server;
        let layers = self.layers;
        // Trigger of (window w ≥ 1, receiving logical GPU g): (w − 1) × n + g.
        let trigger = |window: u32, gpu: u32| (window - 1) * hosts + gpu;
        let mut flows = Vec::with_capacity((2 * layers * hosts) as usize);
        for gpu in 0..hosts {
            let next = (gpu + group) % hosts;
            for window in 0..=layers {
                let start = if window == 0 {
                    FlowStart::At(0)
                } else {
                    FlowStart::Trigger(trigger(window, gpu))
                };
                let on_received = (window < layers).then(|| trigger(window + 1, next));
                let on_sent = (self.gate == WindowGate::ReceivedAndSent && window < layers)
                    .then(|| trigger(window + 1, gpu));
                let mut send = |phase: u16| {
                    flows.push(DependentFlow {
                        spec: FlowSpec {
                            src: host(gpu),
                            dst: host(next),
                            bytes: self.flow_bytes,
                        },
                        start,
                        on_sent,
                        on_received,
                        phase,
                    });
                };
                if window < layers {
                    send(self.all_gather_phase(layers - 1 - window));
                }
                if window >= 1 {
                    send(self.all_gather_phase(layers - window) + 1);
                }
            }
        }
        // Window w's barrier waits for what window w − 1 carried: its all-gather (w − 1 < L)
        // and its reduce-scatter (w − 1 ≥ 1).
        let triggers = (1..=layers)
            .flat_map(|window| {
                let flows = 1 + u32::from(window >= 2);
                let count = match self.gate {
                    WindowGate::Received => flows,
                    WindowGate::ReceivedAndSent => 2 * flows,
                };
                (0..hosts).map(move |gpu| Trigger {
                    id: trigger(window, gpu) + 1,
                    kind: TriggerKind::Barrier { count },
                })
            })
            .collect();
        let phases = (0..layers)
            .rev()
            .flat_map(|layer| {
                [
                    format!("all-gather {layer}"),
                    format!("reduce-scatter {layer}"),
                ]
            })
            .collect();
        Ok(FlowGraph {
            flows,
            triggers,
            phases,
        })
    }

    /// A lower bound on the pass's CCT from its dependencies, ps. GPU `g` opens window
    /// `w + 1` no earlier than its predecessor `p` opened window `w` plus the time `p` needs to
    /// send all of window `w`'s frames, paced at `send_rate`, and for the last of them to cross
    /// the `p → g` path (store-and-forward, shortest path); the pass ends no earlier than the
    /// last window's frames have arrived and the last ACK has come back. Computed exactly over
    /// every GPU's chain of predecessors. Frames on the host link only (the ACKs a host also
    /// sends are not charged: still a bound).
    ///
    /// # Errors
    /// As [`Self::graph`].
    pub fn chain_bound_ps(
        &self,
        topology: &Topology,
        params: &LinkParams,
        send_rate: SendRate,
        seed: u64,
    ) -> Result<u64, ModelError> {
        let hosts = u32::try_from(topology.hosts().len()).expect("at most 2^32 hosts");
        let placement = self.placement(hosts, seed)?;
        let group = self.gpus_per_server;
        // Per logical GPU: hops from its predecessor.
        let hops: Vec<u64> = (0..hosts)
            .map(|gpu| {
                let previous = placement[((gpu + hosts - group) % hosts) as usize];
                u64::from(topology.hop_count(NodeId(previous), NodeId(placement[gpu as usize])))
            })
            .collect();
        let payload = u64::from(params.payload_bytes);
        let overhead = u64::from(params.header_bytes) + u64::from(params.gap_bytes);
        let packets = self.flow_bytes.div_ceil(payload);
        let full = payload + overhead;
        let last = self.flow_bytes - (packets - 1) * payload + overhead;
        // A host of P planes sends over its P ports at once.
        let nics = u64::from(topology.planes());
        let paced = |wire: u64| send_rate.paced_floor_ps(params, wire) / nics;
        let link = |wire: u64| params.serialization_ps(wire) + params.propagation_ps;
        let flow_ps = (packets - 1) * paced(full) + paced(last);
        // A window of `flows` flows over `hops`: every frame sent, the last one (a flow's last
        // frame or, with two flows, possibly a full one) across the path.
        let window = |flows: u64, hops: u64| {
            let candidates = [Some(last), (flows > 1 || packets > 1).then_some(full)];
            candidates
                .into_iter()
                .flatten()
                .map(|wire| flows * flow_ps - paced(wire) + hops * link(wire))
                .min()
                .expect("a candidate")
        };
        // open[g]: the earliest GPU g can open the current window. Windows 0 and L carry one
        // flow, the L − 1 between them two.
        let mut open = vec![0u64; hosts as usize];
        for window_index in 0..self.layers {
            let flows = if window_index == 0 { 1 } else { 2 };
            open = (0..hosts)
                .map(|gpu| {
                    let previous = ((gpu + hosts - group) % hosts) as usize;
                    open[previous] + window(flows, hops[gpu as usize])
                })
                .collect();
        }
        let ack_wire = u64::from(params.ack_bytes) + u64::from(params.gap_bytes);
        // The last window: from each GPU to its successor, whose ACK comes back.
        Ok((0..hosts)
            .map(|gpu| {
                let next = ((gpu + group) % hosts) as usize;
                let hops = hops[next];
                open[gpu as usize] + window(1, hops) + hops * link(ack_wire)
            })
            .max()
            .expect("at least two servers"))
    }
}

/// The kind of a phase named `kind layer` (`all-gather 3` → `all-gather`), for summaries over
/// layers; a name without a layer is its own kind.
#[must_use]
pub fn phase_kind(name: &str) -> &str {
    match name.rsplit_once(' ') {
        Some((kind, layer)) if layer.bytes().all(|b| b.is_ascii_digit()) => kind,
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(layers: u32) -> Fsdp {
        Fsdp {
            layers,
            flow_bytes: 4096 * 3,
            gpus_per_server: 4,
            order: RingOrder::Random,
            gate: WindowGate::Received,
        }
    }

    #[test]
    fn the_paper_models_have_their_layers_and_flows() {
        let sizes: Vec<(u32, u64)> = Llama::ALL
            .iter()
            .map(|m| (m.layers(), m.fsdp().flow_bytes / PAPER_PAYLOAD))
            .collect();
        assert_eq!(sizes, [(32, 119), (80, 418), (126, 1533)]);
        assert_eq!("405B".parse::<Llama>(), Ok(Llama::B405));
        assert!("13b".parse::<Llama>().is_err());
    }

    #[test]
    fn every_gpu_sends_two_flows_per_layer_to_its_same_rank_successor() {
        let fsdp = small(3);
        let graph = fsdp.graph(16, 7).unwrap();
        graph.check().unwrap();
        // 16 GPUs × 3 layers × (all-gather + reduce-scatter).
        assert_eq!(graph.flows.len(), 16 * 3 * 2);
        assert_eq!(graph.phases.len(), 6);
        assert_eq!(graph.phases[0], "all-gather 2");
        assert_eq!(graph.phases[5], "reduce-scatter 0");
        for (index, _) in graph.phases.iter().enumerate() {
            let flows = graph.flows.iter().filter(|f| f.phase as usize == index);
            assert_eq!(flows.count(), 16, "phase {index}: one flow per GPU");
        }
        let mut successors = std::collections::BTreeMap::new();
        for flow in &graph.flows {
            assert_eq!(flow.spec.bytes, 4096 * 3);
            assert_eq!(flow.spec.src % 4, flow.spec.dst % 4, "same rank");
            assert_ne!(flow.spec.src / 4, flow.spec.dst / 4, "across servers");
            assert_eq!(
                *successors.entry(flow.spec.src).or_insert(flow.spec.dst),
                flow.spec.dst,
                "one successor per GPU"
            );
        }
        // The successors form G rings, each through every server once.
        let mut at = 0;
        for _ in 0..4 {
            at = successors[&at];
        }
        assert_eq!(at, 0, "a ring of 4 servers");
    }

    #[test]
    fn a_window_opens_when_the_previous_windows_flows_have_arrived() {
        let graph = small(3).graph(8, 1).unwrap();
        let flows = &graph.flows;
        // Flows at t = 0: one all-gather (of the last layer) per GPU.
        let first: Vec<&DependentFlow> = flows
            .iter()
            .filter(|f| f.start == FlowStart::At(0))
            .collect();
        assert_eq!(first.len(), 8);
        assert!(first.iter().all(|f| f.phase == 0));
        // Every later flow waits for a barrier activated by exactly the flows its sender
        // received in the window before: the all-gather alone first, then two.
        let targets = graph.targets();
        for (index, trigger) in graph.triggers.iter().enumerate() {
            let feeders: Vec<&DependentFlow> = flows
                .iter()
                .filter(|f| f.on_received == Some(index as u32))
                .collect();
            let TriggerKind::Barrier { count } = trigger.kind else {
                panic!("barriers only");
            };
            assert_eq!(feeders.len() as u32, count, "trigger {index}");
            let starts = &targets[index];
            assert!(!starts.is_empty() && starts.len() <= 2);
            for &start in starts {
                let started = &flows[start as usize];
                for feeder in &feeders {
                    assert_eq!(feeder.spec.dst, started.spec.src, "fed by its predecessor");
                    assert!(feeder.phase < started.phase, "an earlier window");
                }
            }
        }
        // The last layer's reduce-scatter waits for its all-gather, and layer 0's
        // reduce-scatter is the end of every chain: nothing waits for it.
        assert!(flows
            .iter()
            .filter(|f| f.phase == 5)
            .all(|f| f.on_received.is_none()));
    }

    #[test]
    fn gated_on_its_own_sends_a_window_also_waits_for_the_gpus_acks() {
        let gated = Fsdp {
            gate: WindowGate::ReceivedAndSent,
            ..small(3)
        };
        let graph = gated.graph(8, 1).unwrap();
        graph.check().unwrap();
        let targets = graph.targets();
        for (index, trigger) in graph.triggers.iter().enumerate() {
            let named = Some(index as u32);
            let sent: Vec<&DependentFlow> =
                graph.flows.iter().filter(|f| f.on_sent == named).collect();
            let received = graph.flows.iter().filter(|f| f.on_received == named);
            let TriggerKind::Barrier { count } = trigger.kind else {
                panic!("barriers only");
            };
            assert_eq!(sent.len() + received.count(), count as usize);
            // Its own flows: sent by the GPU whose window the trigger opens.
            let opens = targets[index][0] as usize;
            assert!(sent
                .iter()
                .all(|f| f.spec.src == graph.flows[opens].spec.src));
        }
    }

    #[test]
    fn one_layer_and_too_few_servers() {
        let graph = small(1).graph(8, 1).unwrap();
        graph.check().unwrap();
        assert_eq!(graph.flows.len(), 16);
        assert!(small(0).graph(8, 1).is_err());
        assert!(small(2).graph(4, 1).is_err(), "one server");
        assert!(small(2).graph(10, 1).is_err(), "not whole servers");
    }

    #[test]
    fn phase_kinds_drop_the_layer() {
        assert_eq!(phase_kind("all-gather 12"), "all-gather");
        assert_eq!(phase_kind("reduce-scatter"), "reduce-scatter");
        assert_eq!(phase_kind("all"), "all");
    }
}
