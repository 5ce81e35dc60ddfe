//! The view models the page draws, computed from the same typed [`Stats`] snapshots that
//! `status` reads (pure: snapshots and times in, plain serializable values out).
//!
//! - [`TopologyView`]: the fabric once — nodes in tiers with a position, links by id. Sent as
//!   `GET /api/topology`.
//! - [`Frame`]: one sampling interval — every switch's state and counters, every link's
//!   state, utilization each way and queue at each end, per-stage queues, the running
//!   collective's progress. Sent as one server-sent event per interval.
//!
//! A link's direction a→b is from its lower-tier end (`Link::a`) to its upper one. Its traffic
//! that way is what a's egress port sent (or, when a is a host, what b's port received); its
//! queue at a is a's egress queue (hosts have none the view can see). Utilization is the bits
//! sent between the counting switch's two snapshots over that time times the port's link rate (the rate the switch's
//! shaper uses, so a slowed link is judged at its own rate); frame bytes are counted without
//! the wire's preamble and gap, so a saturated link shows ≈ 97–98 %. Queues are time-averaged
//! over the interval from the switch's depth integrals, the instantaneous depth when an
//! interval has none (the first sample, a restart).

use std::collections::BTreeMap;

use ofan_control::admin::Stats;
use ofan_dataplane::telemetry::PortSnapshot;
use ofan_topology::{Link, NodeId, PortDirection, Role, Topology, TopologyKind};
use serde::Serialize;

use ofan_lab::status::SwitchState;
use ofan_lab::LinkState;
use ofan_lab_experiment::progress::RunProgress;

/// Links that carried less than this fraction of their rate count as idle in [`Totals`].
pub const BUSY_UTILIZATION: f64 = 0.01;

/// The fabric as the page draws it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopologyView {
    /// The lab's name.
    pub lab: String,
    /// `fat-tree`, `leaf-spine` or `dragonfly`.
    pub kind: &'static str,
    /// The radix.
    pub k: u16,
    /// Tier names, top first (`core`, `aggregation`, `edge`, `host`; `spine`, `leaf`, `host`;
    /// `router`, `host` — a dragonfly's routers in one row, group by group, the links among
    /// them drawn as arcs above it).
    pub tiers: Vec<&'static str>,
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// Every link, in topology order (`id` = position).
    pub links: Vec<LinkView>,
}

/// One node of [`TopologyView`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeView {
    /// Its name.
    pub name: String,
    /// Its tier's name.
    pub role: &'static str,
    /// Whether it is a switch (else a host).
    pub switch: bool,
    /// Its tier, 0 at the top.
    pub tier: usize,
    /// Horizontal position in `0..1`, pods apart.
    pub x: f64,
    /// Its pod, if any.
    pub pod: Option<u16>,
    /// Its plane in a multi-plane fabric (switches only; `None` for hosts and with one
    /// plane).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plane: Option<u8>,
}

/// One link of [`TopologyView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkView {
    /// Its position in the topology's links.
    pub id: u32,
    /// Lower-tier end: node index into [`TopologyView::nodes`].
    pub a: usize,
    /// Upper-tier end.
    pub b: usize,
    /// Interface at a.
    pub a_port: String,
    /// Interface at b.
    pub b_port: String,
}

/// The name of a node's tier in this kind of topology.
#[must_use]
pub const fn role_name(kind: TopologyKind, role: Role) -> &'static str {
    let leaf_spine = matches!(kind, TopologyKind::LeafSpine { .. });
    let dragonfly = matches!(kind, TopologyKind::Dragonfly { .. });
    match role {
        Role::Host => "host",
        Role::Edge if dragonfly => "router",
        Role::Edge if leaf_spine => "leaf",
        Role::Edge => "edge",
        Role::Aggregation => "aggregation",
        Role::Core if leaf_spine => "spine",
        Role::Core => "core",
    }
}

const fn tier_of(role: Role, kind: TopologyKind) -> usize {
    let leaf_spine = matches!(kind, TopologyKind::LeafSpine { .. });
    if matches!(kind, TopologyKind::Dragonfly { .. }) {
        return if matches!(role, Role::Host) { 1 } else { 0 };
    }
    match role {
        Role::Core => 0,
        Role::Aggregation => 1,
        Role::Edge if leaf_spine => 1,
        Role::Edge => 2,
        Role::Host if leaf_spine => 2,
        Role::Host => 3,
    }
}

/// Pods of one tier are this many node widths apart.
const POD_GAP: f64 = 0.6;
/// Planes of a multi-plane fabric are this many node widths apart: each switch tier is drawn
/// plane by plane, plane 0 on the left, and every host links to one edge switch in each.
const PLANE_GAP: f64 = 2.0;

impl TopologyView {
    /// The drawing of `topology` for lab `lab`: tiers top-down, each tier's nodes in (pod,
    /// index) order spread over the width, a gap between pods.
    #[must_use]
    pub fn of(lab: &str, topology: &Topology) -> Self {
        let kind = topology.kind().plane_kind();
        let (kind_name, tiers): (&'static str, Vec<&'static str>) = match kind.plane_kind() {
            TopologyKind::LeafSpine { .. } => ("leaf-spine", vec!["spine", "leaf", "host"]),
            TopologyKind::FatTree { .. } => {
                ("fat-tree", vec!["core", "aggregation", "edge", "host"])
            }
            TopologyKind::Dragonfly { .. } => ("dragonfly", vec!["router", "host"]),
            TopologyKind::MultiPlane { .. } => unreachable!("plane_kind is a single plane"),
        };
        let mut nodes: Vec<NodeView> = topology
            .nodes()
            .iter()
            .map(|node| NodeView {
                name: node.name.clone(),
                role: role_name(kind, node.role),
                switch: node.role.is_switch(),
                tier: tier_of(node.role, kind),
                x: 0.0,
                pod: node.pod,
                plane: (topology.planes() > 1)
                    .then(|| topology.plane_of(node.id))
                    .flatten(),
            })
            .collect();
        for tier in 0..tiers.len() {
            let mut members: Vec<(Option<u8>, Option<u16>, u16, usize)> = topology
                .nodes()
                .iter()
                .enumerate()
                .filter(|(index, _)| nodes[*index].tier == tier)
                .map(|(index, node)| (nodes[index].plane, node.pod, node.index, index))
                .collect();
            members.sort_unstable();
            let (mut gaps, mut last) = (0.0, None);
            let mut slots = Vec::with_capacity(members.len());
            for (position, (plane, pod, _, index)) in members.iter().enumerate() {
                if position > 0 && *plane != last.and_then(|(plane, _)| plane) {
                    gaps += PLANE_GAP;
                } else if position > 0 && Some((*plane, *pod)) != last {
                    gaps += POD_GAP;
                }
                last = Some((*plane, *pod));
                slots.push((position as f64 + gaps, *index));
            }
            let width = members.len() as f64 + gaps;
            for (slot, index) in slots {
                nodes[index].x = (slot + 0.5) / width;
            }
        }
        let links = topology
            .links()
            .iter()
            .map(|link| LinkView {
                id: link.id.0,
                a: link.a.0 .0 as usize,
                b: link.b.0 .0 as usize,
                a_port: topology.port(link.a.0, link.a.1).ifname.clone(),
                b_port: topology.port(link.b.0, link.b.1).ifname.clone(),
            })
            .collect();
        Self {
            lab: lab.to_owned(),
            kind: kind_name,
            k: topology.k(),
            tiers,
            nodes,
            links,
        }
    }
}

/// What one sampling round read from the lab: every switch (in [`Topology::switches`] order)
/// and every link's state (in topology order).
#[derive(Debug, Clone)]
pub struct Sample {
    /// When it was taken (monotonic ns).
    pub at_ns: u64,
    /// Switches by name: state, and stats when it answered.
    pub switches: BTreeMap<String, (SwitchState, Option<Stats>)>,
    /// Every link's state, by link id.
    pub links: Vec<LinkState>,
    /// The collective running on the lab, if one says so.
    pub progress: Option<RunProgress>,
}

impl Sample {
    fn port(&self, topology: &Topology, node: NodeId, ifname: &str) -> Option<&PortSnapshot> {
        self.timed_port(topology, node, ifname)
            .map(|(port, _)| port)
    }

    /// The port and when its switch took the snapshot (monotonic ns; the sample's time when
    /// the switch gave none).
    fn timed_port(
        &self,
        topology: &Topology,
        node: NodeId,
        ifname: &str,
    ) -> Option<(&PortSnapshot, u64)> {
        let name = &topology.node(node).name;
        let (_, stats) = self.switches.get(name)?;
        let snapshot = &stats.as_ref()?.data_path;
        let port = snapshot.ports.iter().find(|port| port.name == ifname)?;
        let at = if snapshot.time_ns > 0 {
            snapshot.time_ns
        } else {
            self.at_ns
        };
        Some((port, at))
    }
}

/// One interval of the view: what the page redraws.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Frame {
    /// Counts frames from 1.
    pub seq: u64,
    /// The interval the rates are over, seconds (0 for the first frame).
    pub interval_s: f64,
    /// Every switch, in topology order.
    pub switches: Vec<SwitchFrame>,
    /// Every link, by id.
    pub links: Vec<LinkFrame>,
    /// Egress queues summed by stage of a packet's path (up the tree, then down).
    pub stages: Vec<StageFrame>,
    /// The running collective, if any.
    pub progress: Option<RunProgress>,
    /// Counts over the whole fabric.
    pub totals: Totals,
}

/// One switch in a [`Frame`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SwitchFrame {
    /// Its name.
    pub name: String,
    /// `running`, `stopped`, `CRASHED`, … ([`SwitchState::label`]).
    pub state: &'static str,
    /// Its load-balancing algorithm, when it answered.
    pub algorithm: Option<String>,
    /// Seconds since it started.
    pub uptime_s: Option<f64>,
    /// Frames received, all ports.
    pub rx_packets: u64,
    /// Frames sent, all ports.
    pub tx_packets: u64,
    /// Frames dropped at its egress (buffer full, hand-off full).
    pub drops: u64,
    /// Frames queued now, all ports.
    pub queued_packets: u64,
    /// Its forwarding counters that are not zero, by name (all of them: `/api/switch/NAME`).
    pub counters: Vec<(String, u64)>,
}

/// One link in a [`Frame`]. Each `_ab` value is the a→b direction (lower end up), `_ba` back.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkFrame {
    /// Link id.
    pub id: u32,
    /// Up, down or blackholed.
    pub state: LinkState,
    /// Fraction of the link's rate used a→b in the interval (`None`: unknown or unshaped).
    pub util_ab: Option<f64>,
    /// The same b→a.
    pub util_ba: Option<f64>,
    /// Bits per second a→b in the interval.
    pub bps_ab: Option<f64>,
    /// The same b→a.
    pub bps_ba: Option<f64>,
    /// a's egress queue towards b (`None` for a host).
    pub queue_a: Option<Queue>,
    /// b's egress queue towards a.
    pub queue_b: Option<Queue>,
    /// Frames a→b so far (since the last reset).
    pub packets_ab: Option<u64>,
    /// Frames b→a so far.
    pub packets_ba: Option<u64>,
}

/// An egress queue in a [`Frame`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Queue {
    /// Frames, averaged over the interval.
    pub packets: f64,
    /// Bytes, averaged over the interval.
    pub bytes: f64,
    /// `bytes` over the port's buffer.
    pub fill: f64,
    /// Frames dropped there for a full buffer or hand-off ring, so far.
    pub drops: u64,
}

/// Queues of one stage of the paths in a [`Frame`] (e.g. `aggregation ↑`: every aggregation
/// switch's ports towards the cores).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageFrame {
    /// `edge ↑`, `aggregation ↑`, `core ↓`, `aggregation ↓`, `edge ↓` (leaf-spine: `leaf ↑`,
    /// `spine ↓`, `leaf ↓`).
    pub name: String,
    /// Egress ports in the stage that reported.
    pub ports: usize,
    /// Sum of their averaged queues, frames.
    pub queued_packets: f64,
    /// The largest of them, frames.
    pub max_packets: f64,
    /// Mean utilization of their links in that direction.
    pub mean_util: f64,
}

/// Counts over the fabric in a [`Frame`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Totals {
    /// Switches.
    pub switches: usize,
    /// Switches answering.
    pub running: usize,
    /// Hosts.
    pub hosts: usize,
    /// Links.
    pub links: usize,
    /// Links not up (down or blackholed).
    pub links_down: usize,
    /// Link directions at or above [`BUSY_UTILIZATION`].
    pub busy_directions: usize,
    /// The highest utilization of any link direction.
    pub max_util: f64,
}

/// Counter difference that survives a reset (a reset counter counts from zero again).
const fn since(before: u64, after: u64) -> u64 {
    if after >= before {
        after - before
    } else {
        after
    }
}

/// One direction of a link: its sending end's egress port (if a switch) and its receiving
/// end's ingress port.
struct Direction<'a> {
    from: (NodeId, &'a str),
    to: (NodeId, &'a str),
}

/// What the view computes from two samples; `rate_bps` is the lab's link rate (a port's own
/// rate wins when it reports one), `buffer_bytes` every port's buffer.
#[derive(Debug, Clone, Copy)]
pub struct FrameInput<'a> {
    /// The lab's topology.
    pub topology: &'a Topology,
    /// The previous sample (`None` for the first frame: no rates).
    pub before: Option<&'a Sample>,
    /// This sample.
    pub now: &'a Sample,
    /// The lab's link rate, bit/s (0: unshaped).
    pub rate_bps: u64,
    /// Every switch port's buffer, bytes.
    pub buffer_bytes: u64,
    /// This frame's number.
    pub seq: u64,
}

impl FrameInput<'_> {
    fn interval_s(&self) -> f64 {
        self.before.map_or(0.0, |before| {
            self.now.at_ns.saturating_sub(before.at_ns) as f64 * 1e-9
        })
    }

    /// Bits per second and utilization of one direction, over the interval between the two
    /// snapshots of the switch that counted it (not between the sampler's reads, which wait
    /// for each switch in turn).
    fn rate(&self, direction: &Direction<'_>) -> (Option<f64>, Option<f64>) {
        let Some(before) = self.before else {
            return (None, None);
        };
        let pick = |sample: &Sample| {
            sample
                .timed_port(self.topology, direction.from.0, direction.from.1)
                .map(|(port, at)| (port.tx_bytes, port.link_rate_bps, at))
                .or_else(|| {
                    sample
                        .timed_port(self.topology, direction.to.0, direction.to.1)
                        .map(|(port, at)| (port.rx_bytes, 0, at))
                })
        };
        let (Some((then, _, then_ns)), Some((now, port_rate, now_ns))) =
            (pick(before), pick(self.now))
        else {
            return (None, None);
        };
        let interval = now_ns.saturating_sub(then_ns) as f64 * 1e-9;
        if interval <= 0.0 {
            return (None, None);
        }
        let bps = since(then, now) as f64 * 8.0 / interval;
        let rate = if port_rate > 0 {
            port_rate
        } else {
            self.rate_bps
        };
        (Some(bps), (rate > 0).then(|| bps / rate as f64))
    }

    /// The egress queue of `node`'s port `ifname`, averaged over the interval.
    fn queue(&self, node: NodeId, ifname: &str) -> Option<Queue> {
        let now = self.now.port(self.topology, node, ifname)?;
        let then = self
            .before
            .and_then(|before| before.port(self.topology, node, ifname));
        let averaged = then.and_then(|then| {
            let span = now
                .integrated_until_ns
                .checked_sub(then.integrated_until_ns)?;
            let packet_ns = now.depth_packet_ns.checked_sub(then.depth_packet_ns)?;
            let byte_ns = now.depth_byte_ns.checked_sub(then.depth_byte_ns)?;
            (span > 0).then(|| (packet_ns as f64 / span as f64, byte_ns as f64 / span as f64))
        });
        let (packets, bytes) =
            averaged.unwrap_or((now.depth_packets as f64, now.depth_bytes as f64));
        Some(Queue {
            packets,
            bytes,
            fill: if self.buffer_bytes > 0 {
                bytes / self.buffer_bytes as f64
            } else {
                0.0
            },
            drops: now.drops_buffer + now.drops_handoff,
        })
    }

    fn packets(&self, direction: &Direction<'_>) -> Option<u64> {
        let sample = self.now;
        sample
            .port(self.topology, direction.from.0, direction.from.1)
            .map(|port| port.tx_packets)
            .or_else(|| {
                sample
                    .port(self.topology, direction.to.0, direction.to.1)
                    .map(|port| port.rx_packets)
            })
    }

    fn link(&self, link: &Link) -> LinkFrame {
        let topology = self.topology;
        let a_if = topology.port(link.a.0, link.a.1).ifname.as_str();
        let b_if = topology.port(link.b.0, link.b.1).ifname.as_str();
        let up = Direction {
            from: (link.a.0, a_if),
            to: (link.b.0, b_if),
        };
        let down = Direction {
            from: (link.b.0, b_if),
            to: (link.a.0, a_if),
        };
        let (bps_ab, util_ab) = self.rate(&up);
        let (bps_ba, util_ba) = self.rate(&down);
        LinkFrame {
            id: link.id.0,
            state: self
                .now
                .links
                .get(link.id.0 as usize)
                .copied()
                .unwrap_or(LinkState::Up),
            util_ab,
            util_ba,
            bps_ab,
            bps_ba,
            queue_a: self.queue(link.a.0, a_if),
            queue_b: self.queue(link.b.0, b_if),
            packets_ab: self.packets(&up),
            packets_ba: self.packets(&down),
        }
    }
}

/// The stages of a path through this kind of fabric, in the order a packet meets them: an
/// egress port's stage is its switch's tier and whether it leads up or down.
#[must_use]
pub fn stages(kind: TopologyKind) -> Vec<(Role, PortDirection)> {
    use PortDirection::{Down, Up};
    match kind.plane_kind() {
        TopologyKind::LeafSpine { .. } => {
            vec![(Role::Edge, Up), (Role::Core, Down), (Role::Edge, Down)]
        }
        TopologyKind::FatTree { .. } => vec![
            (Role::Edge, Up),
            (Role::Aggregation, Up),
            (Role::Core, Down),
            (Role::Aggregation, Down),
            (Role::Edge, Down),
        ],
        // Router to router (local or global), then router to host.
        TopologyKind::Dragonfly { .. } => vec![(Role::Edge, Up), (Role::Edge, Down)],
        TopologyKind::MultiPlane { .. } => unreachable!("plane_kind is a single plane"),
    }
}

/// The view of one interval.
#[must_use]
pub fn frame(input: &FrameInput<'_>) -> Frame {
    let topology = input.topology;
    let kind = topology.kind().plane_kind();
    let links: Vec<LinkFrame> = topology
        .links()
        .iter()
        .map(|link| input.link(link))
        .collect();
    let switches: Vec<SwitchFrame> = topology
        .switches()
        .iter()
        .map(|switch| {
            let (state, stats) = input
                .now
                .switches
                .get(&switch.name)
                .map_or((SwitchState::NeverStarted, None), |(state, stats)| {
                    (*state, stats.as_ref())
                });
            let ports = stats.map_or(&[][..], |stats| &stats.data_path.ports[..]);
            SwitchFrame {
                name: switch.name.clone(),
                state: state.label(),
                algorithm: stats.map(|stats| stats.algorithm.clone()),
                uptime_s: stats.map(|stats| stats.uptime_s),
                rx_packets: ports.iter().map(|port| port.rx_packets).sum(),
                tx_packets: ports.iter().map(|port| port.tx_packets).sum(),
                drops: ports
                    .iter()
                    .map(|port| port.drops_buffer + port.drops_handoff)
                    .sum(),
                queued_packets: ports.iter().map(|port| port.depth_packets).sum(),
                counters: stats.map_or_else(Vec::new, |stats| {
                    let counters = stats.data_path.counters.iter();
                    counters.filter(|(_, value)| *value > 0).cloned().collect()
                }),
            }
        })
        .collect();
    let stages = stages(kind)
        .into_iter()
        .map(|(role, direction)| {
            let mut stage = StageFrame {
                name: format!(
                    "{} {}",
                    role_name(kind, role),
                    if direction == PortDirection::Up {
                        "↑"
                    } else {
                        "↓"
                    }
                ),
                ports: 0,
                queued_packets: 0.0,
                max_packets: 0.0,
                mean_util: 0.0,
            };
            let mut utils = Vec::new();
            for (link, view) in topology.links().iter().zip(&links) {
                // Up the tree the sender is the link's lower end a, down it is b.
                let (sender, queue, util) = match direction {
                    PortDirection::Up => (link.a.0, view.queue_a, view.util_ab),
                    PortDirection::Down => (link.b.0, view.queue_b, view.util_ba),
                };
                if topology.role(sender) != role {
                    continue;
                }
                if let Some(queue) = queue {
                    stage.ports += 1;
                    stage.queued_packets += queue.packets;
                    stage.max_packets = stage.max_packets.max(queue.packets);
                }
                utils.extend(util);
            }
            if !utils.is_empty() {
                stage.mean_util = utils.iter().sum::<f64>() / utils.len() as f64;
            }
            stage
        })
        .collect();
    let utils = links
        .iter()
        .flat_map(|link| [link.util_ab, link.util_ba])
        .flatten();
    let totals = Totals {
        switches: switches.len(),
        running: switches
            .iter()
            .filter(|s| s.state == SwitchState::Running.label())
            .count(),
        hosts: topology.hosts().len(),
        links: links.len(),
        links_down: links.iter().filter(|l| l.state != LinkState::Up).count(),
        busy_directions: utils.clone().filter(|u| *u >= BUSY_UTILIZATION).count(),
        max_util: utils.fold(0.0, f64::max),
    };
    Frame {
        seq: input.seq,
        interval_s: input.interval_s(),
        switches,
        links,
        stages,
        progress: input.now.progress.clone(),
        totals,
    }
}

#[cfg(test)]
mod tests;
