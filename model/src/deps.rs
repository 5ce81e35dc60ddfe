//! Workloads with dependencies: flows that start at a time or when a *trigger* fires, and
//! triggers that fire when flows have been sent or received.
//!
//! One engine serves two producers: htsim's connection-matrix files ([`crate::htsim`]) and the
//! ring collectives ([`crate::collective`]), whose step `s + 1` starts when step `s`'s chunk
//! has arrived. The semantics are htsim's (`sim/trigger.cpp`):
//!
//! * a flow **starts** at a time ([`FlowStart::At`]) or when its trigger fires
//!   ([`FlowStart::Trigger`]);
//! * a flow **activates** its `on_sent` trigger once it has been sent — every packet
//!   acknowledged, the moment the model calls the flow done — and its `on_received` trigger
//!   once its receiver holds every packet;
//! * a [`TriggerKind::OneShot`] fires on its first activation and starts all its flows; a
//!   [`TriggerKind::MultiShot`] starts its next flow (in the order they name it) on every
//!   activation; a [`TriggerKind::Barrier`] fires after exactly `count` activations.
//!
//! [`FlowGraph::check`] refuses graphs in which a flow can never start (a cycle, a trigger
//! nothing activates, a barrier activated fewer times than its count) and the activations
//! htsim aborts on (a one-shot or a barrier activated too often), so that every accepted
//! graph runs to completion.

use serde::{Deserialize, Serialize};

use crate::config::FlowSpec;

/// When a flow starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowStart {
    /// At this time, ps.
    At(u64),
    /// When the trigger of this index ([`FlowGraph::triggers`]) fires.
    Trigger(u32),
}

/// How a trigger reacts to its activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    /// Fires once, on the first activation, starting every flow it names.
    OneShot,
    /// Starts its next flow on every activation, in the order the flows name it.
    MultiShot,
    /// Fires once, after this many activations, starting every flow it names.
    Barrier {
        /// Activations needed (at least one).
        count: u32,
    },
}

/// A trigger: its kind and the name it has in its source (an htsim trigger id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    /// The id of the trigger in the file it came from (for messages).
    pub id: u32,
    /// How it fires.
    pub kind: TriggerKind,
}

/// One flow of a dependent workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DependentFlow {
    /// Source, destination (host indices) and bytes.
    #[serde(flatten)]
    pub spec: FlowSpec,
    /// When it starts.
    pub start: FlowStart,
    /// Trigger activated once every packet is acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_sent: Option<u32>,
    /// Trigger activated once the receiver holds every packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_received: Option<u32>,
    /// Index of the flow's phase in [`FlowGraph::phases`] (reports give each phase's CCT).
    pub phase: u16,
}

/// A workload with dependencies: flows, triggers, and named phases.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowGraph {
    /// The flows, in the order of their source.
    pub flows: Vec<DependentFlow>,
    /// The triggers, by index.
    pub triggers: Vec<Trigger>,
    /// Phase names (at least one); every flow names one.
    pub phases: Vec<String>,
}

/// Why a [`FlowGraph`] cannot run: which flow (index) or trigger (index), and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// A flow names a trigger or phase that does not exist, or carries no bytes.
    #[error("flow {flow}: {reason}")]
    Flow {
        /// Flow index.
        flow: usize,
        /// What is wrong.
        reason: String,
    },
    /// A trigger is activated in a way htsim aborts on, or never fires for its flows.
    #[error("trigger {id}: {reason}")]
    Trigger {
        /// Trigger index.
        trigger: usize,
        /// The trigger's own id.
        id: u32,
        /// What is wrong.
        reason: String,
    },
}

impl FlowGraph {
    /// The flows as plain specs (source, destination, bytes), in order: what bounds, ρ_max and
    /// the lab's plans read.
    #[must_use]
    pub fn specs(&self) -> Vec<FlowSpec> {
        self.flows.iter().map(|flow| flow.spec).collect()
    }

    /// Per flow, the one flow whose arrival starts it (`None`: it starts at t = 0) — when the
    /// graph's dependencies are all of that form, as a ring collective's are: every trigger a
    /// one-shot that one flow's arrival (`on_received`) activates. What a lab agent can keep
    /// by itself (it sees the arrival and starts the flow), and what
    /// [`ofan_topology::Topology::chain_lower_bound_ps`] bounds.
    ///
    /// # Errors
    /// The first flow that needs more: a later start time, a send-done trigger, a trigger that
    /// several flows activate, a barrier or multi-shot trigger.
    pub fn arrival_predecessors(&self) -> Result<Vec<Option<u32>>, GraphError> {
        let unsupported = |flow: usize, reason: &str| GraphError::Flow {
            flow,
            reason: reason.to_owned(),
        };
        let mut activated_by: Vec<Option<u32>> = vec![None; self.triggers.len()];
        for (index, flow) in self.flows.iter().enumerate() {
            if flow.on_sent.is_some() {
                return Err(unsupported(index, "a send-done trigger"));
            }
            if let Some(trigger) = flow.on_received {
                let slot = activated_by
                    .get_mut(trigger as usize)
                    .ok_or_else(|| unsupported(index, "activates a trigger that does not exist"))?;
                if slot.replace(index as u32).is_some() {
                    return Err(unsupported(
                        index,
                        "activates a trigger another flow activates",
                    ));
                }
            }
        }
        self.flows
            .iter()
            .enumerate()
            .map(|(index, flow)| match flow.start {
                FlowStart::At(0) => Ok(None),
                FlowStart::At(_) => Err(unsupported(index, "starts at a later time")),
                FlowStart::Trigger(trigger) => {
                    match self.triggers.get(trigger as usize).map(|t| t.kind) {
                        Some(TriggerKind::OneShot) => {
                            activated_by[trigger as usize].map(Some).ok_or_else(|| {
                                unsupported(index, "waits for a trigger nothing activates")
                            })
                        }
                        _ => Err(unsupported(
                            index,
                            "waits for a barrier or multi-shot trigger",
                        )),
                    }
                }
            })
            .collect()
    }

    /// Per trigger, the flows it starts, in flow order (a multi-shot starts them in this
    /// order).
    #[must_use]
    pub fn targets(&self) -> Vec<Vec<u32>> {
        let mut targets = vec![Vec::new(); self.triggers.len()];
        for (index, flow) in self.flows.iter().enumerate() {
            if let FlowStart::Trigger(trigger) = flow.start {
                targets[trigger as usize].push(index as u32);
            }
        }
        targets
    }

    /// Checks that every reference exists, that no trigger is activated more often than htsim
    /// allows, and that every flow starts: an abstract run in which every started flow
    /// activates its triggers.
    ///
    /// # Errors
    /// The first problem found, naming the flow or trigger.
    pub fn check(&self) -> Result<(), GraphError> {
        let flow_error = |flow: usize, reason: String| GraphError::Flow { flow, reason };
        let triggers = self.triggers.len();
        if self.phases.is_empty() {
            return Err(flow_error(0, "the workload names no phase".into()));
        }
        let mut activations = vec![0u32; triggers];
        for (index, flow) in self.flows.iter().enumerate() {
            if flow.spec.bytes == 0 {
                return Err(flow_error(index, "carries no bytes".into()));
            }
            if usize::from(flow.phase) >= self.phases.len() {
                return Err(flow_error(index, format!("no phase {}", flow.phase)));
            }
            let named = [
                match flow.start {
                    FlowStart::Trigger(trigger) => Some(trigger),
                    FlowStart::At(_) => None,
                },
                flow.on_sent,
                flow.on_received,
            ];
            for trigger in named.into_iter().flatten() {
                if trigger as usize >= triggers {
                    return Err(flow_error(index, format!("no trigger {trigger}")));
                }
            }
            for trigger in [flow.on_sent, flow.on_received].into_iter().flatten() {
                activations[trigger as usize] += 1;
            }
        }
        for (index, (trigger, &count)) in self.triggers.iter().zip(&activations).enumerate() {
            let error = |reason: String| GraphError::Trigger {
                trigger: index,
                id: trigger.id,
                reason,
            };
            match trigger.kind {
                TriggerKind::OneShot if count > 1 => {
                    return Err(error(format!(
                        "one-shot, activated by {count} flow ends (htsim aborts on the second)"
                    )));
                }
                TriggerKind::Barrier { count: 0 } => {
                    return Err(error("a barrier needs a count of at least 1".into()));
                }
                TriggerKind::Barrier { count: needed } if count > needed => {
                    return Err(error(format!(
                        "barrier of count {needed} activated by {count} flow ends \
                         (htsim aborts past the count)"
                    )));
                }
                _ => {}
            }
        }
        // The abstract run: which flows ever start.
        let targets = self.targets();
        let mut started = vec![false; self.flows.len()];
        let mut ready: Vec<usize> = Vec::new();
        for (index, flow) in self.flows.iter().enumerate() {
            if let FlowStart::At(_) = flow.start {
                started[index] = true;
                ready.push(index);
            }
        }
        let mut state: Vec<(u32, bool)> = vec![(0, false); triggers];
        while let Some(index) = ready.pop() {
            let flow = &self.flows[index];
            for trigger in [flow.on_sent, flow.on_received].into_iter().flatten() {
                let trigger = trigger as usize;
                let (fired, done) = &mut state[trigger];
                *fired += 1;
                let starts: &[u32] = match self.triggers[trigger].kind {
                    TriggerKind::OneShot if !*done => {
                        *done = true;
                        &targets[trigger]
                    }
                    TriggerKind::Barrier { count } if !*done && *fired == count => {
                        *done = true;
                        &targets[trigger]
                    }
                    TriggerKind::MultiShot => targets[trigger]
                        .get(*fired as usize - 1)
                        .map(std::slice::from_ref)
                        .unwrap_or_default(),
                    _ => &[],
                };
                for &target in starts {
                    if !started[target as usize] {
                        started[target as usize] = true;
                        ready.push(target as usize);
                    }
                }
            }
        }
        if let Some(index) = started.iter().position(|&started| !started) {
            let FlowStart::Trigger(trigger) = self.flows[index].start else {
                unreachable!("flows with a start time start");
            };
            return Err(flow_error(
                index,
                format!(
                    "never starts: trigger {} never fires for it (a cycle, or fewer \
                     activations than it needs)",
                    self.triggers[trigger as usize].id
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: u32, dst: u32, start: FlowStart, on_sent: Option<u32>) -> DependentFlow {
        DependentFlow {
            spec: FlowSpec {
                src,
                dst,
                bytes: 100,
            },
            start,
            on_sent,
            on_received: None,
            phase: 0,
        }
    }

    fn graph(flows: Vec<DependentFlow>, kinds: &[TriggerKind]) -> FlowGraph {
        FlowGraph {
            flows,
            triggers: kinds
                .iter()
                .enumerate()
                .map(|(index, &kind)| Trigger {
                    id: index as u32 + 1,
                    kind,
                })
                .collect(),
            phases: vec!["all".into()],
        }
    }

    #[test]
    fn a_chain_checks() {
        let g = graph(
            vec![
                flow(0, 1, FlowStart::At(0), Some(0)),
                flow(1, 2, FlowStart::Trigger(0), Some(1)),
                flow(2, 3, FlowStart::Trigger(1), None),
            ],
            &[TriggerKind::OneShot, TriggerKind::OneShot],
        );
        assert_eq!(g.check(), Ok(()));
        assert_eq!(g.targets(), vec![vec![1], vec![2]]);
    }

    #[test]
    fn arrival_chains_name_each_flows_one_predecessor_and_others_are_refused() {
        let received = |mut flow: DependentFlow, trigger: Option<u32>| {
            flow.on_sent = None;
            flow.on_received = trigger;
            flow
        };
        let chain = graph(
            vec![
                received(flow(0, 1, FlowStart::At(0), None), Some(0)),
                received(flow(1, 2, FlowStart::Trigger(0), None), Some(1)),
                received(flow(2, 3, FlowStart::Trigger(1), None), None),
                received(flow(1, 3, FlowStart::Trigger(0), None), None),
            ],
            &[TriggerKind::OneShot, TriggerKind::OneShot],
        );
        assert_eq!(
            chain.arrival_predecessors(),
            Ok(vec![None, Some(0), Some(1), Some(0)])
        );
        // A send-done trigger, a barrier, a timed start: not single arrivals.
        let sent = graph(
            vec![
                flow(0, 1, FlowStart::At(0), Some(0)),
                flow(1, 2, FlowStart::Trigger(0), None),
            ],
            &[TriggerKind::OneShot],
        );
        assert!(sent.arrival_predecessors().is_err());
        let mut barrier = chain.clone();
        barrier.triggers[1].kind = TriggerKind::Barrier { count: 1 };
        assert!(barrier.arrival_predecessors().is_err());
        let mut timed = chain;
        timed.flows[0].start = FlowStart::At(5);
        assert!(timed.arrival_predecessors().is_err());
    }

    #[test]
    fn a_cycle_never_starts() {
        let g = graph(
            vec![
                flow(0, 1, FlowStart::At(0), None),
                flow(1, 2, FlowStart::Trigger(0), Some(1)),
                flow(2, 3, FlowStart::Trigger(1), Some(0)),
            ],
            &[TriggerKind::OneShot, TriggerKind::OneShot],
        );
        let error = g.check().unwrap_err();
        assert!(matches!(error, GraphError::Flow { flow: 1, .. }), "{error}");
        assert!(error.to_string().contains("never starts"), "{error}");
    }

    #[test]
    fn a_barrier_needs_its_count() {
        let flows = vec![
            flow(0, 1, FlowStart::At(0), Some(0)),
            flow(2, 1, FlowStart::At(0), Some(0)),
            flow(1, 3, FlowStart::Trigger(0), None),
        ];
        let ok = graph(flows.clone(), &[TriggerKind::Barrier { count: 2 }]);
        assert_eq!(ok.check(), Ok(()));
        let short = graph(flows.clone(), &[TriggerKind::Barrier { count: 3 }]);
        assert!(short
            .check()
            .unwrap_err()
            .to_string()
            .contains("never starts"));
        let over = graph(flows, &[TriggerKind::Barrier { count: 1 }]);
        assert!(over
            .check()
            .unwrap_err()
            .to_string()
            .contains("past the count"));
    }

    #[test]
    fn a_one_shot_fires_once() {
        let flows = vec![
            flow(0, 1, FlowStart::At(0), Some(0)),
            flow(2, 1, FlowStart::At(0), Some(0)),
            flow(1, 3, FlowStart::Trigger(0), None),
        ];
        let error = graph(flows, &[TriggerKind::OneShot]).check().unwrap_err();
        assert!(error.to_string().contains("one-shot"), "{error}");
    }

    #[test]
    fn a_multi_shot_starts_one_flow_per_activation() {
        let flows = vec![
            flow(0, 1, FlowStart::At(0), Some(0)),
            flow(1, 2, FlowStart::Trigger(0), None),
            flow(1, 3, FlowStart::Trigger(0), None),
        ];
        // One activation starts only the first of its two flows.
        let error = graph(flows.clone(), &[TriggerKind::MultiShot])
            .check()
            .unwrap_err();
        assert!(matches!(error, GraphError::Flow { flow: 2, .. }), "{error}");
        let mut two = flows;
        two[1].on_sent = Some(0);
        assert_eq!(graph(two, &[TriggerKind::MultiShot]).check(), Ok(()));
    }
}
