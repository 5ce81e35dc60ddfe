//! Workloads with dependencies at run time ([`crate::deps`]): flows that start after t = 0,
//! at a time or when a trigger fires, and the triggers their ends activate.
//!
//! A flow that has not started is not in its host's round robin. Starting it puts it there
//! and, if the host's pacer is idle, wakes the pacer at once (no earlier than the pacer
//! allows); a host therefore has at most one pacer event pending, which this module tracks
//! (`pacer_pending`) only when the workload has dependencies. A flow activates its
//! `on_sent` trigger when its last packet is first acknowledged (the moment the model counts
//! it done) and its `on_received` trigger when its receiver first holds every packet.

use crate::deps::{FlowGraph, FlowStart, TriggerKind};
use crate::error::ModelError;
use crate::report::PhaseRun;

use super::Sim;

/// Bit of a wake event's target that marks a flow's timed start (the rest is the flow
/// index): flow indices stay below it.
pub(super) const START_BIT: u32 = 1 << 27;
/// No trigger.
const NONE: u32 = u32::MAX;
/// [`Deps::started`] of a flow that has not started.
const NOT_STARTED: u64 = u64::MAX;

/// The dependency engine's state.
#[derive(Debug)]
pub(super) struct Deps {
    /// Per flow: the trigger its sent end activates ([`NONE`]).
    on_sent: Vec<u32>,
    /// Per flow: the trigger its received end activates ([`NONE`]).
    on_received: Vec<u32>,
    /// Per trigger: how it fires, activations so far, whether it fired, its flows.
    kinds: Vec<TriggerKind>,
    activations: Vec<u32>,
    fired: Vec<bool>,
    targets: Vec<Vec<u32>>,
    /// Per host: a pacer event is pending.
    pub(super) pacer_pending: Vec<bool>,
    /// Per flow: when it started, ps ([`NOT_STARTED`]).
    started: Vec<u64>,
    /// Per flow: its phase.
    phase: Vec<u16>,
    phases: Vec<String>,
    /// Flows that start at a time after 0: (time, flow).
    timed: Vec<(u64, u32)>,
}

impl Deps {
    /// The engine for `graph`, whose flows are the run's flows in order.
    pub(super) fn new(graph: &FlowGraph, hosts: usize) -> Result<Self, ModelError> {
        if graph.flows.len() >= START_BIT as usize {
            return Err(ModelError::InvalidConfig {
                field: "workload",
                value: graph.flows.len().to_string(),
                reason: "a workload with dependencies has fewer than 2^27 flows",
            });
        }
        let option = |trigger: Option<u32>| trigger.unwrap_or(NONE);
        let mut started = vec![NOT_STARTED; graph.flows.len()];
        let mut timed = Vec::new();
        for (index, flow) in graph.flows.iter().enumerate() {
            match flow.start {
                FlowStart::At(0) => started[index] = 0,
                FlowStart::At(time) => timed.push((time, index as u32)),
                FlowStart::Trigger(_) => {}
            }
        }
        timed.sort_unstable();
        Ok(Self {
            on_sent: graph
                .flows
                .iter()
                .map(|flow| option(flow.on_sent))
                .collect(),
            on_received: graph
                .flows
                .iter()
                .map(|flow| option(flow.on_received))
                .collect(),
            kinds: graph.triggers.iter().map(|trigger| trigger.kind).collect(),
            activations: vec![0; graph.triggers.len()],
            fired: vec![false; graph.triggers.len()],
            targets: graph.targets(),
            pacer_pending: vec![false; hosts],
            started,
            phase: graph.flows.iter().map(|flow| flow.phase).collect(),
            phases: graph.phases.clone(),
            timed,
        })
    }

    /// Whether `flow` starts at t = 0.
    pub(super) fn starts_at_zero(&self, flow: usize) -> bool {
        self.started[flow] == 0
    }

    /// Activates `trigger`: the flows it starts now.
    fn activate(&mut self, trigger: u32) -> Vec<u32> {
        let index = trigger as usize;
        self.activations[index] += 1;
        let count = self.activations[index];
        match self.kinds[index] {
            TriggerKind::OneShot if !self.fired[index] => {
                self.fired[index] = true;
                self.targets[index].clone()
            }
            TriggerKind::Barrier { count: needed } if !self.fired[index] && count == needed => {
                self.fired[index] = true;
                self.targets[index].clone()
            }
            TriggerKind::MultiShot => self.targets[index]
                .get(count as usize - 1)
                .copied()
                .into_iter()
                .collect(),
            _ => Vec::new(),
        }
    }
}

impl Sim<'_> {
    /// Takes the flows that do not start at t = 0 out of their hosts' round robins and
    /// schedules the timed starts (before [`Sim::start`]).
    pub(super) fn install_deps(&mut self, graph: &FlowGraph) -> Result<(), ModelError> {
        let deps = Deps::new(graph, self.hosts.len())?;
        for host in &mut self.hosts {
            host.active
                .retain(|&flow| deps.starts_at_zero(flow as usize));
        }
        for &(time, flow) in &deps.timed {
            self.queue.push(time, START_BIT | flow, true);
        }
        self.deps = Some(Box::new(deps));
        Ok(())
    }

    /// Schedules `host`'s pacer at `time`, noting it when dependencies may start flows.
    #[inline]
    pub(super) fn push_pacer(&mut self, time: u64, host: u32) {
        if let Some(deps) = self.deps.as_deref_mut() {
            deps.pacer_pending[host as usize] = true;
        }
        self.push(time, host, true);
    }

    /// Whether `host`'s pacer has an event pending (only tracked with dependencies: without,
    /// a timer never meets a pending pacer).
    #[inline]
    pub(super) fn pacer_pending(&self, host: u32) -> bool {
        self.deps
            .as_deref()
            .is_some_and(|deps| deps.pacer_pending[host as usize])
    }

    /// Starts `flow` now (a trigger fired, or its start time came): into its host's round
    /// robin, and the pacer awake.
    pub(super) fn start_flow(&mut self, flow: u32) {
        let now = self.now;
        let deps = self.deps.as_deref_mut().expect("dependencies");
        debug_assert_eq!(deps.started[flow as usize], NOT_STARTED);
        deps.started[flow as usize] = now;
        let host = self.flows[flow as usize].src;
        let pending = deps.pacer_pending[host as usize];
        let state = &mut self.hosts[host as usize];
        state.active.push(flow);
        if !pending {
            state.due = state.due.max(now);
            let due = state.due;
            if let Some(cc) = self.cc.as_deref_mut() {
                // Awake now: a later ACK must not wake it a second time.
                cc.blocked[host as usize] = false;
            }
            self.push_pacer(due, host);
        }
    }

    /// `flow`'s last packet was acknowledged: its `on_sent` trigger.
    #[inline]
    pub(super) fn flow_sent(&mut self, flow: u32) {
        if let Some(deps) = self.deps.as_deref_mut() {
            let trigger = deps.on_sent[flow as usize];
            if trigger != NONE {
                for target in deps.activate(trigger) {
                    self.start_flow(target);
                }
            }
        }
    }

    /// `flow`'s receiver holds every packet: its `on_received` trigger.
    #[inline]
    pub(super) fn flow_received(&mut self, flow: u32) {
        if let Some(deps) = self.deps.as_deref_mut() {
            let trigger = deps.on_received[flow as usize];
            if trigger != NONE {
                for target in deps.activate(trigger) {
                    self.start_flow(target);
                }
            }
        }
    }

    /// Each phase's flows, first start, last completion and CCT (empty without dependencies).
    pub(super) fn phase_report(&self) -> Vec<PhaseRun> {
        let Some(deps) = self.deps.as_deref() else {
            return Vec::new();
        };
        let flows = self.flows.iter().enumerate().map(|(index, flow)| {
            let started = deps.started[index];
            (
                deps.phase[index],
                (started != NOT_STARTED).then_some(started),
                flow.done_at,
            )
        });
        PhaseRun::collect(&deps.phases, flows)
    }
}
