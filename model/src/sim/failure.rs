//! Links that fail during a run ([`ModelConfig::fail_at`]; see the module documentation of
//! `sim`, "Links failing during a run"): the failure itself, which loses what the link's two
//! ports held, each adjacent switch's local detection, and the routing plane's reconvergence,
//! after which every switch routes on the topology without the link.
//!
//! Until a switch knows, its load balancer keeps the dead port among its valid ones and the
//! frames it sends there are lost; a core (or an aggregation switch going down) that knows has
//! no other way and drops (`switch.no_route`). Under the `arf-*` schemes the adjacent switches
//! also send the framework's *failure detected* notification when they detect (`arf.rs`).
//!
//! [`ModelConfig::fail_at`]: crate::ModelConfig::fail_at

use ofan_dataplane::lb::DestKey;
use ofan_topology::{FailedLinks, LinkId, NodeId, Role, Topology};

use super::Sim;
use crate::config::{LinkFailure, ModelConfig};
use crate::error::ModelError;
use crate::report::{LinkFailureRun, SwitchLearned};

/// Bit of a wake event's target that marks a link-failure event (host indices,
/// [`super::host::TIMER_BIT`] and [`super::arf::ARF_BIT`] stay clear of it); the low bits index
/// [`LinkFailures::actions`].
pub(super) const FAIL_BIT: u32 = 1 << 28;

/// What a port's link is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PortLink {
    Up,
    /// Failed (index in [`LinkFailures::failures`]); `known` once the port's switch detected it.
    Down {
        failure: u16,
        known: bool,
    },
}

/// What happens at one of a failure's three times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Fail,
    Detect,
    Reroute,
}

/// Why a frame was lost with a failed link: the report's drop reasons, in this order.
#[derive(Debug, Clone, Copy)]
pub(super) enum Loss {
    /// In the port's queue (being sent included) when the link failed.
    Queued,
    /// On the wire (sent, propagating) when the link failed.
    InFlight,
    /// Sent to the dead port by a switch that did not know yet.
    Unaware,
}

impl Loss {
    pub(super) const REASONS: [&'static str; 3] = [
        "link.down.queued",
        "link.down.in_flight",
        "link.down.unaware",
    ];
}

/// One failing link.
#[derive(Debug)]
struct Failing {
    link: LinkId,
    /// The two ends: node id and port id (in `Sim::ports`).
    ends: [(u32, u32); 2],
    at: u64,
    detected: bool,
    /// Frames lost, by [`Loss`].
    lost: [u64; 3],
    /// Frames a switch that knew had to drop at the dead port (no other way; counted as
    /// `switch.no_route` too).
    no_route: u64,
    last_loss: Option<u64>,
}

/// Every link failing during the run, and what the switches know of them.
#[derive(Debug)]
pub(super) struct LinkFailures {
    failures: Vec<Failing>,
    /// (time, failure, step), in the order their events were queued.
    actions: Vec<(u64, u16, Step)>,
    /// Per port (empty when nothing fails during the run).
    pub(super) ports: Vec<PortLink>,
    /// What routing knows: the failures from the start, plus every failure once rerouted.
    routed: FailedLinks,
    detect_ps: u64,
    reroute_ps: u64,
}

/// The link `failure` names, which must join two switches, be alive from the start and fail
/// once.
fn resolve(
    topology: &Topology,
    failure: &LinkFailure,
    from_start: &FailedLinks,
    earlier: &[Failing],
) -> Result<LinkId, ModelError> {
    let cannot = |reason| ModelError::CannotFail {
        from: failure.from.clone(),
        to: failure.to.clone(),
        reason,
    };
    let by_name = |name: &str| topology.nodes().iter().find(|node| node.name == name);
    let (from, to) = by_name(&failure.from)
        .zip(by_name(&failure.to))
        .ok_or_else(|| cannot("no node of that name (switches are e-p0-0, a-p0-0, c-0, …)"))?;
    if !from.role.is_switch() || !to.role.is_switch() {
        return Err(cannot(
            "only switch-to-switch links fail (not a host's link)",
        ));
    }
    let link = topology
        .link_between(from.id, to.id)
        .ok_or_else(|| cannot("the two switches are not linked"))?;
    if !from_start.is_alive(link) {
        return Err(cannot(
            "it is failed from the start (--fail-links / --fail-prob)",
        ));
    }
    if earlier.iter().any(|failing| failing.link == link) {
        return Err(cannot("it fails twice"));
    }
    Ok(link)
}

impl LinkFailures {
    /// The failures of `config`, or `None` when no link fails during the run. `port_base` is
    /// each node's first port in `Sim::ports`.
    pub(super) fn new(
        topology: &Topology,
        config: &ModelConfig,
        from_start: &FailedLinks,
        port_base: &[u32],
        port_count: usize,
    ) -> Result<Option<Self>, ModelError> {
        if config.fail_at.is_empty() {
            return Ok(None);
        }
        let timing = config.failure_timing;
        let mut failures: Vec<Failing> = Vec::new();
        let ports = vec![PortLink::Up; port_count];
        for failure in &config.fail_at {
            let link = resolve(topology, failure, from_start, &failures)?;
            let ends = {
                let link = topology.link(link);
                [link.a, link.b]
                    .map(|(node, port)| (node.0, port_base[node.index()] + u32::from(port.0)))
            };
            failures.push(Failing {
                link,
                ends,
                at: failure.at_ps,
                detected: false,
                lost: [0; 3],
                no_route: 0,
                last_loss: None,
            });
        }
        let mut actions = Vec::new();
        for (index, failing) in failures.iter().enumerate() {
            let index = index as u16;
            actions.push((failing.at, index, Step::Fail));
            actions.push((failing.at + timing.detect_ps, index, Step::Detect));
            actions.push((failing.at + timing.reroute_ps, index, Step::Reroute));
        }
        Ok(Some(Self {
            failures,
            actions,
            ports,
            routed: from_start.clone(),
            detect_ps: timing.detect_ps,
            reroute_ps: timing.reroute_ps,
        }))
    }

    /// When the last switch learns of the last failure, ps (routing reconverged).
    pub(super) fn last_reroute_ps(&self) -> u64 {
        self.failures
            .iter()
            .map(|failing| failing.at + self.reroute_ps)
            .max()
            .unwrap_or(0)
    }

    /// The failures that `node` knows of: what routing knows, plus its own ports it detected
    /// down.
    fn known_by(&self, node: u32) -> FailedLinks {
        let mut known = self.routed.clone();
        for failing in self.failures.iter().filter(|failing| failing.detected) {
            if failing.ends.iter().any(|&(end, _)| end == node) {
                known.insert(failing.link);
            }
        }
        known
    }
}

impl Sim<'_> {
    /// Queues every failure's three events (fail, detect, reroute).
    pub(super) fn failures_start(&mut self) {
        let Some(failures) = self.link_failures.as_ref() else {
            return;
        };
        let times: Vec<u64> = failures.actions.iter().map(|&(at, _, _)| at).collect();
        for (index, at) in times.into_iter().enumerate() {
            self.queue.push(at, FAIL_BIT | index as u32, true);
        }
    }

    /// A link-failure event (`target` without [`FAIL_BIT`]) at the current time.
    pub(super) fn failure_event(&mut self, target: u32) {
        let Some(mut failures) = self.link_failures.take() else {
            return;
        };
        let (_, index, step) = failures.actions[target as usize];
        match step {
            Step::Fail => self.link_fails(&mut failures, index),
            Step::Detect => self.link_detected(&mut failures, index),
            Step::Reroute => self.link_rerouted(&mut failures, index),
        }
        self.link_failures = Some(failures);
    }

    /// The link goes down: both its ports lose what they hold (queued and on the wire); their
    /// pending arrival events find an empty wire and do nothing.
    fn link_fails(&mut self, failures: &mut LinkFailures, index: u16) {
        let (now, propagation) = (self.now, self.propagation);
        let failing = &mut failures.failures[usize::from(index)];
        for &(_, port_id) in &failing.ends {
            let port = &mut self.ports[port_id as usize];
            port.purge(&self.wires, now, propagation);
            let (in_flight, queued) = (port.sent, port.queued());
            port.wire_clear();
            port.sent = 0;
            port.data = 0;
            port.bytes = 0;
            port.free_at = now;
            port.head_finish = now;
            failing.lost[Loss::InFlight as usize] += u64::from(in_flight);
            failing.lost[Loss::Queued as usize] += u64::from(queued);
            if in_flight + queued > 0 {
                failing.last_loss = Some(now);
            }
            failures.ports[port_id as usize] = PortLink::Down {
                failure: index,
                known: false,
            };
        }
    }

    /// The two adjacent switches detect the failure: their ports are known down, their valid
    /// ports change, and under `arf-*` they tell their other neighbours.
    fn link_detected(&mut self, failures: &mut LinkFailures, index: u16) {
        let failing = &mut failures.failures[usize::from(index)];
        failing.detected = true;
        let ends = failing.ends;
        for &(node, port_id) in &ends {
            failures.ports[port_id as usize] = PortLink::Down {
                failure: index,
                known: true,
            };
            self.recompute_masks(failures, node);
        }
        let [(a, _), (b, _)] = ends;
        self.arf_link_failed(a, b);
        self.arf_link_failed(b, a);
    }

    /// Routing has reconverged: every switch routes on the topology without the link (DRB's
    /// hosts too), and under `arf-*` the remote path information follows.
    fn link_rerouted(&mut self, failures: &mut LinkFailures, index: u16) {
        let link = failures.failures[usize::from(index)].link;
        failures.routed.insert(link);
        self.dead[link.index()] = true;
        for node in 0..self.nodes.len() as u32 {
            self.recompute_masks(failures, node);
        }
        let routed = failures.routed.clone();
        self.arf_rerouted(&routed);
    }

    /// Sets `node`'s valid up-port masks from the failures it knows of.
    fn recompute_masks(&mut self, failures: &LinkFailures, node: u32) {
        let info = self.nodes[node as usize];
        if !matches!(info.role, Role::Edge | Role::Aggregation) {
            return;
        }
        let known = failures.known_by(node);
        let id = NodeId(node);
        for key in 0..self.topology.dest_key_count(id) {
            self.masks[(info.mask_base + key) as usize] =
                self.topology.valid_up_mask(&known, id, DestKey(key));
        }
    }

    /// A switch sends a frame out of a port whose link failed: lost unless the switch knows
    /// (then it has no route: it had no other way).
    #[cold]
    pub(super) fn send_to_dead_port(&mut self, state: PortLink) {
        let PortLink::Down { failure, known } = state else {
            return;
        };
        let now = self.now;
        let failures = self
            .link_failures
            .as_mut()
            .expect("a port is down only when links fail");
        let failing = &mut failures.failures[usize::from(failure)];
        failing.last_loss = Some(now);
        if known {
            failing.no_route += 1;
            self.drops_no_route += 1;
        } else {
            failing.lost[Loss::Unaware as usize] += 1;
        }
    }

    /// The report's section: per failure, its times, its losses, and when each switch learned
    /// of it before routing reconverged.
    pub(super) fn failures_report(&self) -> (Vec<LinkFailureRun>, [u64; 3]) {
        let Some(failures) = self.link_failures.as_ref() else {
            return (Vec::new(), [0; 3]);
        };
        let mut totals = [0u64; 3];
        let runs = failures
            .failures
            .iter()
            .map(|failing| {
                for (total, lost) in totals.iter_mut().zip(failing.lost) {
                    *total += lost;
                }
                let [(a, _), (b, _)] = failing.ends;
                let name = |node: u32| self.topology.node(NodeId(node)).name.clone();
                let detected_ps = failing.at + failures.detect_ps;
                let rerouted_ps = failing.at + failures.reroute_ps;
                let mut learned: Vec<SwitchLearned> = Vec::new();
                for node in [a, b] {
                    learned.push(SwitchLearned {
                        switch: name(node),
                        detected_ps: Some(detected_ps),
                        notified_ps: self.arf_failure_notice(node, a, b),
                    });
                }
                for (node, notified) in self.arf_failure_notices(a, b) {
                    if node != a && node != b {
                        learned.push(SwitchLearned {
                            switch: name(node),
                            detected_ps: None,
                            notified_ps: Some(notified),
                        });
                    }
                }
                LinkFailureRun {
                    from: name(a),
                    to: name(b),
                    link: failing.link.0,
                    at_ps: failing.at,
                    detected_ps,
                    rerouted_ps,
                    lost_queued: failing.lost[Loss::Queued as usize],
                    lost_in_flight: failing.lost[Loss::InFlight as usize],
                    lost_unaware: failing.lost[Loss::Unaware as usize],
                    no_route: failing.no_route,
                    last_loss_ps: failing.last_loss,
                    learned,
                }
            })
            .collect();
        (runs, totals)
    }
}
