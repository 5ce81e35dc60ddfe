//! The adaptive-routing framework's control plane in the model (`arf-*` schemes; see the module
//! documentation of `sim`, "Adaptive routing"): a detector per fabric port over windows of
//! simulated time, notifications to the neighbours after the control-plane delay, and the
//! congestion table and path-quality view each balancing switch publishes to its pipes.
//!
//! Everything the switches decide comes from [`ofan_dataplane::arf`], the code the switch's
//! control thread runs — detection, the speaker's rules (what is told when,
//! [`ofan_dataplane::arf::speaker`]), the congestion table and the path view — and the remote
//! paths from the topology's routing plan ([`ofan_topology::plan::remote_paths`], what the
//! lab's switches are given without BGP); this file only feeds them the model's ports and clock
//! (in ps) and carries the notifications. Switches are named by node id. Every switch runs the
//! same code path, in node order.

use std::collections::VecDeque;
use std::sync::Arc;

use ofan_dataplane::arf::detect::{Thresholds, Window};
use ofan_dataplane::arf::flows::{name_flows, request_move, FlowRedirect, FlowSketch};
use ofan_dataplane::arf::speaker::{Speaker, Timing, Told};
use ofan_dataplane::arf::{
    Applied, Combine, CongestionTable, Kind, LinkId, PathQuality, Quality, Redirect, RemotePaths,
    Update,
};
use ofan_dataplane::lb::PortMask;
use ofan_topology::{FailedLinks, Node, PortDirection, Topology};

use super::Sim;
use crate::config::ArfConfig;
use crate::report::ArfRun;

/// Bit of a wake event's target that marks an adaptive-routing event (host indices and
/// [`super::host::TIMER_BIT`] stay clear of it); the low bits say which.
pub(super) const ARF_BIT: u32 = 1 << 29;
/// The detection windows close.
const TICK: u32 = 0;
/// The oldest batch of notifications in flight arrives.
const DELIVER: u32 = 1;
/// The oldest batch of edge views on their way to the hosts arrives (`plane-arf`).
const ENDPOINT: u32 = 2;

/// One port's measurements in the current window, kept beside the ports (a port is one cache
/// line, full) and updated at every enqueue of an `arf-*` run.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct PortWindow {
    /// Wire bytes (frame and gap) accepted for transmission.
    pub(super) bytes: u64,
    /// Largest queue, bytes.
    pub(super) max_bytes: u64,
    /// Frames dropped at the full buffer.
    pub(super) drops: u64,
}

/// A port towards another switch.
#[derive(Debug, Clone, Copy)]
struct FabricPort {
    /// In `Sim::ports`.
    port: u32,
    /// The switch at the other end (node id).
    peer: u32,
    /// An up-port (its detector's level is the local quality of the paths through it).
    up: bool,
    /// Its position among the switch's up-ports (what the balancer names it by).
    up_position: u8,
    /// Its link failed and the switch detected it (the speaker reports it failed).
    failed: bool,
}

/// One switch's control plane.
#[derive(Debug)]
struct ArfSwitch {
    node: u32,
    ports: Vec<FabricPort>,
    /// The speaker's rules, over fabric ports named by their index in `ports`.
    speaker: Speaker,
    /// The switch neighbours (node ids) notifications go to.
    neighbours: Vec<u32>,
    table: CongestionTable,
    /// Under `arf-*`, balancing switches' first pipe balancer (which takes their views).
    lb: Option<u32>,
    /// Balancing switches: the remote path information.
    paths: Option<RemotePaths>,
    /// Edge switches whose hosts steer by their views (`plane-arf`): the edge's position in
    /// [`Topology::edges`].
    edge: Option<u32>,
    /// The view published last and not yet passed on to the hosts.
    for_hosts: Option<Arc<PathQuality>>,
    generation: u64,
    /// Flows neighbours named congested (`arf-flow`), each until it expires (ps).
    redirects: Vec<(FlowRedirect, u64)>,
}

/// A notification in flight to one switch.
#[derive(Debug, Clone, Copy)]
struct Note {
    /// Index of the recipient in `Arf::switches`.
    to: u32,
    update: Update,
    /// When the state change it reports was detected (`None`: a refresh).
    detected_at: Option<u64>,
    /// A flow-specific message (the draft's second type): the congested flow's id and its
    /// flow hash; the link update is then not applied (it names the flow's path only).
    flow: Option<(u32, u32)>,
}

/// What every published view carries besides the levels: when `arf-flow` moves a flow (from
/// the detectors' settings and T) and how a path's levels combine ([`ArfConfig::combine`]).
#[derive(Debug, Clone, Copy)]
struct Rules {
    redirect: Redirect,
    combine: Combine,
}

/// The control plane of every switch, the notifications in flight and what the report counts.
#[derive(Debug)]
pub(super) struct Arf {
    config: ArfConfig,
    switches: Vec<ArfSwitch>,
    /// Per node id: index in `switches` (`u32::MAX` for hosts).
    index_of: Vec<u32>,
    /// Batches of notifications in flight, by arrival time (the delay is constant, so the
    /// batches arrive in the order they were sent).
    in_flight: VecDeque<(u64, Vec<Note>)>,
    /// Adaptive-routing events in the event queue.
    pending: usize,
    stats: ArfRun,
    reaction_sum: u128,
    reaction_count: u64,
    /// (recipient node, failed link, when): the first *failure detected* notification that
    /// changed a recipient's table, per link.
    failure_notices: Vec<(u32, LinkId, u64)>,
    /// How the published views rate paths and move flows.
    rules: Rules,
    /// What one switch's speaker tells at one instant (reused).
    told: Vec<Told>,
    /// `arf-flow`: per port of `Sim::ports`, the window's data flows (id, hash); empty
    /// otherwise.
    pub(super) flows: Vec<FlowSketch<(u32, u32)>>,
}

/// The remote path information of balancing switch `node` under `failures`, switches named by
/// node id ([`RemotePaths::from_plan`]: the routing plan's next hops and their next hops).
fn remote_paths(topology: &Topology, failures: &FailedLinks, node: &Node) -> RemotePaths {
    RemotePaths::from_plan(topology, failures, node.id, |id| id.0)
}

impl Arf {
    /// The control plane of every switch of `topology`. `port_base` and `lb_base` give each
    /// node's first port in `Sim::ports` and its first pipe balancer (balancing switches);
    /// `balancers`: the balancers take the views (`arf-*`); `endpoint`: the edges pass their
    /// views on to their hosts (`plane-arf`).
    pub(super) fn new(
        topology: &Topology,
        failures: &FailedLinks,
        config: ArfConfig,
        bases: &[(u32, Option<u32>)],
        balancers: bool,
        endpoint: bool,
    ) -> Self {
        let first_edge = topology.edges()[0].id.0;
        let mut index_of = vec![u32::MAX; topology.nodes().len()];
        let mut switches = Vec::new();
        let timing = Timing {
            window: config.window_ps,
            refresh: config.window_ps * u64::from(config.refresh_windows),
            hold: config.hold_ps(),
        };
        for node in topology.nodes().iter().filter(|node| node.role.is_switch()) {
            let (port_base, lb_base) = bases[node.id.index()];
            let ports: Vec<FabricPort> = node
                .ports
                .iter()
                .filter(|port| topology.node(port.peer).role.is_switch())
                .map(|port| {
                    let id = port_base + u32::from(port.index.0);
                    FabricPort {
                        port: id,
                        peer: port.peer.0,
                        up: port.direction == PortDirection::Up,
                        up_position: topology
                            .up_ports(node.id)
                            .iter()
                            .position(|up| up.index == port.index)
                            .unwrap_or(0) as u8,
                        failed: false,
                    }
                })
                .collect();
            let mut neighbours: Vec<u32> = ports.iter().map(|port| port.peer).collect();
            neighbours.dedup();
            index_of[node.id.index()] = switches.len() as u32;
            let indices: Vec<u32> = (0..ports.len() as u32).collect();
            switches.push(ArfSwitch {
                node: node.id.0,
                speaker: Speaker::new(timing, Thresholds::default(), &indices, 0),
                ports,
                neighbours,
                table: CongestionTable::default(),
                lb: lb_base.filter(|_| balancers),
                paths: lb_base.map(|_| remote_paths(topology, failures, node)),
                edge: (endpoint && node.role == ofan_topology::Role::Edge)
                    .then(|| node.id.0 - first_edge),
                for_hosts: None,
                generation: 0,
                redirects: Vec::new(),
            });
        }
        Self {
            stats: ArfRun {
                window_ps: config.window_ps,
                delay_ps: config.delay_ps,
                ..ArfRun::default()
            },
            config,
            switches,
            index_of,
            in_flight: VecDeque::new(),
            pending: 0,
            reaction_sum: 0,
            reaction_count: 0,
            failure_notices: Vec::new(),
            rules: Rules {
                redirect: Redirect::of(&Thresholds::default(), timing.refresh / 1000),
                combine: config.combine,
            },
            told: Vec::new(),
            flows: Vec::new(),
        }
    }

    /// The report's section, given the fabric's carried bytes and `arf-flow`'s moves.
    pub(super) fn report(&self, fabric_bytes: u64, flows_moved: u64) -> ArfRun {
        let mut stats = self.stats.clone();
        stats.bytes = stats.sent * (ArfRun::MESSAGE_BYTES + ArfRun::HEADER_BYTES)
            + stats.flow_sent * (ArfRun::FLOW_MESSAGE_BYTES + ArfRun::HEADER_BYTES);
        stats.fabric_bytes = fabric_bytes;
        stats.overhead = if fabric_bytes == 0 {
            0.0
        } else {
            stats.bytes as f64 / fabric_bytes as f64
        };
        stats.reaction_mean_ps = (self.reaction_count > 0)
            .then(|| self.reaction_sum as f64 / self.reaction_count as f64);
        stats.flows_moved = flows_moved;
        stats
    }
}

impl Sim<'_> {
    /// Schedules the first window's end (`arf-*` runs).
    pub(super) fn arf_start(&mut self) {
        if let Some(arf) = self.arf.as_mut() {
            arf.pending += 1;
            let at = arf.config.window_ps;
            self.queue.push(at, ARF_BIT | TICK, true);
        }
    }

    /// An adaptive-routing event (`target` without [`ARF_BIT`]) at the current time.
    pub(super) fn arf_event(&mut self, target: u32) {
        let Some(mut arf) = self.arf.take() else {
            return;
        };
        arf.pending -= 1;
        match target {
            TICK => self.arf_tick(&mut arf),
            DELIVER => self.arf_deliver(&mut arf),
            _ => {
                let planes = self.host_planes.as_deref_mut().expect("views go to hosts");
                let (at, batch) = planes.in_flight.pop_front().expect("a batch per event");
                debug_assert_eq!(at, self.now, "views arrive after exactly the delay");
                self.plane_views_arrive(batch);
            }
        }
        self.endpoint_send(&mut arf);
        self.arf = Some(arf);
    }

    /// The windows close: every switch's detectors take their window, and what its speaker
    /// says is due (changes, refreshes) goes to its neighbours; aged-out table entries go.
    fn arf_tick(&mut self, arf: &mut Arf) {
        let (now, propagation) = (self.now, self.propagation);
        let now_ns = now / 1000;
        let hold_ns = arf.config.hold_ps() / 1000;
        let hold_ps = arf.config.hold_ps();
        // The queue counts frames without their gap.
        let full_frame = self.config.link.payload_bytes + self.config.link.header_bytes;
        let mut batch = Vec::new();
        let Arf {
            switches,
            index_of,
            stats,
            told,
            flows,
            ..
        } = arf;
        for switch in switches.iter_mut() {
            let mut local_changed = false;
            let mut local_requests = false;
            for (index, fabric) in switch.ports.iter().enumerate() {
                if fabric.failed {
                    // Nothing to measure: the speaker reports the failure.
                    continue;
                }
                let port = &mut self.ports[fabric.port as usize];
                port.purge(&self.wires, now, propagation);
                let counters = &mut self.arf_windows[fabric.port as usize];
                let window = Window {
                    max_queue_bytes: counters.max_bytes,
                    full_frame_bytes: full_frame,
                    drops: counters.drops,
                };
                // The next window starts with the queue standing now.
                *counters = PortWindow {
                    bytes: 0,
                    max_bytes: port.bytes,
                    drops: 0,
                };
                stats.windows += 1;
                let before = switch.speaker.level(index as u32);
                match switch.speaker.observe(index as u32, &window) {
                    Some(Kind::CongestionDetected) => {
                        stats.detections += 1;
                        stats.first_detection_ps.get_or_insert(now);
                    }
                    Some(_) => stats.clears += 1,
                    None => {}
                }
                local_changed |= fabric.up && switch.speaker.level(index as u32) != before;
            }
            tell(switch, now, hold_ns, index_of, stats, told, &mut batch);
            // `arf-flow`: every window a link stays congested, the flows that fill it.
            for index in 0..switch.ports.len() {
                let fabric = switch.ports[index];
                let Some(sketch) = flows.get(fabric.port as usize) else {
                    continue;
                };
                let named = name_flows(sketch);
                if named.is_empty() {
                    continue;
                }
                if let Some(said) = switch.speaker.flow_told(index as u32) {
                    let said = &said;
                    for flow in named {
                        if fabric.up && switch.lb.is_some() {
                            // The congestion point itself moves the flow off its own up-port
                            // (the draft's local adjustment), as a neighbour's request would.
                            let dst = self.topology.hosts()
                                [self.flow_ends[flow.0 as usize][1] as usize]
                                .id;
                            let node = ofan_topology::NodeId(switch.node);
                            if let Some(key) = self.topology.dest_key_for_host(node, dst) {
                                let request = FlowRedirect {
                                    flow_hash: flow.1,
                                    key,
                                    avoid: PortMask::EMPTY.with(fabric.up_position),
                                };
                                request_move(&mut switch.redirects, request, now + hold_ps);
                                stats.flow_local += 1;
                                local_requests = true;
                            }
                        }
                        let update = link_update(switch.node, fabric.peer, said, hold_ns);
                        for &neighbour in switch.neighbours.iter().filter(|&&n| n != fabric.peer) {
                            batch.push(Note {
                                to: index_of[neighbour as usize],
                                update,
                                detected_at: Some(now),
                                flow: Some(flow),
                            });
                            stats.flow_sent += 1;
                        }
                    }
                }
            }
            for fabric in &switch.ports {
                if let Some(sketch) = flows.get_mut(fabric.port as usize) {
                    sketch.clear();
                }
            }
            let expired = switch.table.expire(now_ns);
            stats.expired += expired as u64;
            let requests = switch.redirects.len();
            switch.redirects.retain(|&(_, until)| until > now);
            if local_changed || expired > 0 || local_requests || switch.redirects.len() != requests
            {
                self.arf_publish(switch, stats, arf.rules);
            }
        }
        self.arf_send(arf, batch);
        // Windows go on while some flow is not done and anything but the control plane itself
        // is left to happen (stale retransmission timers linger long after the last flow).
        if self.flows_done < self.flows.len() && self.queue.len() > arf.pending {
            arf.pending += 1;
            self.queue
                .push(now + arf.config.window_ps, ARF_BIT | TICK, true);
        }
    }

    /// The oldest batch of notifications arrives: each recipient applies its notification to
    /// its table and, if the table changed, publishes a new view.
    fn arf_deliver(&mut self, arf: &mut Arf) {
        let now = self.now;
        let now_ns = now / 1000;
        let (at, batch) = arf
            .in_flight
            .pop_front()
            .expect("a delivery event has a batch");
        debug_assert_eq!(at, now, "notifications arrive after exactly the delay");
        let mut touched: Vec<u32> = Vec::new();
        let hold_ps = arf.config.hold_ps();
        for note in &batch {
            let switch = &mut arf.switches[note.to as usize];
            if let Some((flow, flow_hash)) = note.flow {
                // A flow message changes no link state: it asks this switch to move the flow
                // off the ports whose path crosses the link (if it carries it there).
                let dst = self.topology.hosts()[self.flow_ends[flow as usize][1] as usize].id;
                let node = ofan_topology::NodeId(switch.node);
                let (Some(key), Some(paths)) = (
                    self.topology.dest_key_for_host(node, dst),
                    switch.paths.as_ref().filter(|_| switch.lb.is_some()),
                ) else {
                    continue;
                };
                let avoid = (0..paths.up_ports()).fold(PortMask::EMPTY, |mask, port| {
                    match paths.get(key, port) {
                        Some(hop) if hop.neighbour == note.update.link.near => mask.with(port),
                        _ => mask,
                    }
                });
                if avoid.is_empty() {
                    continue;
                }
                arf.stats.flow_applied += 1;
                let request = FlowRedirect {
                    flow_hash,
                    key,
                    avoid,
                };
                request_move(&mut switch.redirects, request, now + hold_ps);
                if !touched.contains(&note.to) {
                    touched.push(note.to);
                }
                continue;
            }
            match switch.table.apply(&note.update, now_ns) {
                Applied::Changed => {
                    arf.stats.applied += 1;
                    arf.stats.changed += 1;
                    if note.update.kind == Kind::FailureDetected {
                        let recipient = switch.node;
                        let link = note.update.link;
                        if !arf
                            .failure_notices
                            .iter()
                            .any(|&(node, known, _)| node == recipient && known == link)
                        {
                            arf.failure_notices.push((recipient, link, now));
                        }
                    }
                    if let Some(detected) = note.detected_at {
                        let reaction = now - detected;
                        arf.reaction_sum += u128::from(reaction);
                        arf.reaction_count += 1;
                        let stats = &mut arf.stats;
                        stats.reaction_min_ps =
                            Some(stats.reaction_min_ps.map_or(reaction, |m| m.min(reaction)));
                        stats.reaction_max_ps =
                            Some(stats.reaction_max_ps.map_or(reaction, |m| m.max(reaction)));
                    }
                    if touched.last() != Some(&note.to) && !touched.contains(&note.to) {
                        touched.push(note.to);
                    }
                }
                Applied::Refreshed => arf.stats.applied += 1,
                Applied::Stale => arf.stats.stale += 1,
            }
        }
        touched.sort_unstable();
        for index in touched {
            let switch = &mut arf.switches[index as usize];
            arf.stats.expired += switch.table.expire(now_ns) as u64;
            self.arf_publish(switch, &mut arf.stats, arf.rules);
        }
    }

    /// Builds `switch`'s path-quality view from its up-ports' levels, its table and its remote
    /// paths, and publishes it to its balancer (every pipe reads it from its next decision).
    /// Puts `batch` (the notifications of one instant) in flight: delivered `delay_ps` later.
    fn arf_send(&mut self, arf: &mut Arf, batch: Vec<Note>) {
        if batch.is_empty() {
            return;
        }
        let at = self.now + arf.config.delay_ps;
        arf.in_flight.push_back((at, batch));
        arf.pending += 1;
        self.queue.push(at, ARF_BIT | DELIVER, true);
    }

    fn arf_publish(&self, switch: &mut ArfSwitch, stats: &mut ArfRun, rules: Rules) {
        let Some(paths) = &switch.paths else {
            return;
        };
        if switch.lb.is_none() && switch.edge.is_none() {
            return;
        }
        let local: Vec<Quality> = switch
            .ports
            .iter()
            .enumerate()
            .filter(|(_, port)| port.up)
            .map(|(index, _)| {
                switch
                    .speaker
                    .level(index as u32)
                    .map_or(Quality::BEST, |(level, _)| level)
            })
            .collect();
        switch.generation += 1;
        let mut view = PathQuality::build(&local, &switch.table, paths, switch.generation);
        view.redirect = rules.redirect;
        view.combine = rules.combine;
        view.redirects = switch
            .redirects
            .iter()
            .map(|&(request, _)| request)
            .collect();
        let view = Arc::new(view);
        if switch.edge.is_some() {
            switch.for_hosts = Some(Arc::clone(&view));
        }
        if let Some(lb) = switch.lb {
            self.balancers[lb as usize].switch().set_path_quality(view);
            stats.publications += 1;
        }
    }

    /// The edges pass the views they published since the last call on to their hosts
    /// (`plane-arf`): they arrive `delay_ps` later, as a notification the edge forwards.
    fn endpoint_send(&mut self, arf: &mut Arf) {
        let batch: super::planes::ViewBatch = arf
            .switches
            .iter_mut()
            .filter_map(|switch| Some((switch.edge?, switch.for_hosts.take()?)))
            .collect();
        if batch.is_empty() {
            return;
        }
        let at = self.now + arf.config.delay_ps;
        if let Some(planes) = self.host_planes.as_deref_mut() {
            planes.in_flight.push_back((at, batch));
        }
        arf.pending += 1;
        self.queue.push(at, ARF_BIT | ENDPOINT, true);
    }
}

/// The update a speaker's message about link `near` → `far` carries.
fn link_update(near: u32, far: u32, told: &Told, hold_ns: u64) -> Update {
    Update {
        link: LinkId { near, far },
        kind: told.kind,
        quality: told.quality,
        hold_ns,
        epoch: told.epoch,
        sequence: told.sequence,
    }
}

/// Puts what `switch`'s speaker says is due at `now` into `batch`: each link state to every
/// neighbour but the link's far end.
fn tell(
    switch: &mut ArfSwitch,
    now: u64,
    hold_ns: u64,
    index_of: &[u32],
    stats: &mut ArfRun,
    told: &mut Vec<Told>,
    batch: &mut Vec<Note>,
) {
    told.clear();
    switch.speaker.due(now, |_| true, told);
    for told in told.iter() {
        let peer = switch.ports[told.port as usize].peer;
        let update = link_update(switch.node, peer, told, hold_ns);
        for &neighbour in switch.neighbours.iter().filter(|&&n| n != peer) {
            batch.push(Note {
                to: index_of[neighbour as usize],
                update,
                detected_at: told.change.then_some(now),
                flow: None,
            });
            stats.sent += 1;
            stats.refreshes += u64::from(!told.change);
        }
    }
}

impl Sim<'_> {
    /// Switch `node` detected its link to `peer` down (`arf-*` runs): its speaker reports the
    /// port failed from now on — its neighbours but `peer` are told at once, unless the link
    /// was told within the last window (then at the next window, as in the switch) — and its
    /// view takes the port's local level to 0.
    pub(super) fn arf_link_failed(&mut self, node: u32, peer: u32) {
        let Some(mut arf) = self.arf.take() else {
            return;
        };
        let now = self.now;
        let hold_ns = arf.config.hold_ps() / 1000;
        let index = arf.index_of[node as usize] as usize;
        let Arf {
            switches,
            index_of,
            stats,
            told,
            rules,
            ..
        } = &mut *arf;
        let switch = &mut switches[index];
        for (port, fabric) in switch.ports.iter_mut().enumerate() {
            if fabric.peer == peer {
                fabric.failed = true;
                switch.speaker.set_down(port as u32, true);
            }
        }
        let mut batch = Vec::new();
        tell(switch, now, hold_ns, index_of, stats, told, &mut batch);
        self.arf_publish(switch, stats, *rules);
        self.arf_send(&mut arf, batch);
        self.endpoint_send(&mut arf);
        self.arf = Some(arf);
    }

    /// Routing reconverged on `failures` (`arf-*` runs): every balancing switch's remote path
    /// information is the topology's without them (as the lab's switches learn it from BGP),
    /// and it publishes a new view.
    pub(super) fn arf_rerouted(&mut self, failures: &FailedLinks) {
        let Some(mut arf) = self.arf.take() else {
            return;
        };
        let rules = arf.rules;
        let Arf {
            switches, stats, ..
        } = &mut *arf;
        for switch in switches.iter_mut() {
            let node = self.topology.node(ofan_topology::NodeId(switch.node));
            if let Some(paths) = switch.paths.as_mut() {
                *paths = remote_paths(self.topology, failures, node);
                self.arf_publish(switch, stats, rules);
            }
        }
        self.endpoint_send(&mut arf);
        self.arf = Some(arf);
    }

    /// When `node` first learned of link `a` – `b` (either direction) from a *failure
    /// detected* notification, ps.
    pub(super) fn arf_failure_notice(&self, node: u32, a: u32, b: u32) -> Option<u64> {
        self.arf_failure_notices(a, b)
            .into_iter()
            .find(|&(recipient, _)| recipient == node)
            .map(|(_, at)| at)
    }

    /// Every switch that learned of link `a` – `b` from a *failure detected* notification, and
    /// when first, in node order.
    pub(super) fn arf_failure_notices(&self, a: u32, b: u32) -> Vec<(u32, u64)> {
        let Some(arf) = self.arf.as_ref() else {
            return Vec::new();
        };
        let mut first: Vec<(u32, u64)> = Vec::new();
        for &(node, link, at) in &arf.failure_notices {
            if !((link.near == a && link.far == b) || (link.near == b && link.far == a)) {
                continue;
            }
            match first.iter_mut().find(|(known, _)| *known == node) {
                Some((_, earliest)) => *earliest = (*earliest).min(at),
                None => first.push((node, at)),
            }
        }
        first.sort_unstable();
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_topology::{plan, NodeId, Role};

    /// The remote paths indexed here by destination key and up-port position name the same
    /// neighbours and next-next hops as the routing plan's prefixes ([`plan::remote_paths`],
    /// what the lab's switches learn), with and without a failed link.
    #[test]
    fn remote_paths_agree_with_the_routing_plan() {
        let topology = Topology::fat_tree(4).unwrap();
        let mut failed = FailedLinks::new();
        let agg_core = topology
            .links()
            .iter()
            .find(|link| topology.node(link.b.0).role == Role::Core)
            .unwrap()
            .id;
        failed.insert(agg_core);
        for failures in [FailedLinks::new(), failed] {
            for node in topology
                .nodes()
                .iter()
                .filter(|node| matches!(node.role, Role::Edge | Role::Aggregation))
            {
                let ours = remote_paths(&topology, &failures, node);
                let planned = plan::remote_paths(&topology, &failures, node.id);
                for edge in topology.edges() {
                    if edge.id == node.id {
                        continue;
                    }
                    let Some(hops) = planned.get(&topology.edge_prefix(edge.id)) else {
                        continue;
                    };
                    let key = topology.dest_key_for_host(node.id, host_of(&topology, edge.id));
                    let Some(key) = key else { continue };
                    for hop in hops.iter().filter(|hop| {
                        topology.port(node.id, hop.hop.port).direction == PortDirection::Up
                    }) {
                        let position = topology
                            .up_ports(node.id)
                            .iter()
                            .position(|port| port.index == hop.hop.port)
                            .unwrap() as u8;
                        let mine = ours.get(key, position).expect("a hop for every route");
                        assert_eq!(mine.neighbour, hop.neighbor.0, "{} key {key:?}", node.name);
                        let mut expected: Vec<u32> =
                            hop.next_next.iter().map(|id: &NodeId| id.0).collect();
                        let mut got = mine.next_next.clone();
                        expected.sort_unstable();
                        got.sort_unstable();
                        if node.role == Role::Edge || edge.id == last_edge_of_pod(&topology, edge) {
                            // One key per edge at an edge; at an aggregation switch the key is
                            // the pod, and its last edge's paths stand for it.
                            assert_eq!(got, expected, "{} key {key:?}", node.name);
                        }
                    }
                }
            }
        }
    }

    fn last_edge_of_pod(topology: &Topology, edge: &Node) -> NodeId {
        topology
            .edges()
            .iter()
            .rfind(|e| e.pod == edge.pod)
            .unwrap()
            .id
    }

    fn host_of(topology: &Topology, edge: NodeId) -> NodeId {
        topology
            .hosts()
            .iter()
            .find(|host| topology.host_edge(host.id) == edge)
            .unwrap()
            .id
    }
}
