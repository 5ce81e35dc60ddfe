//! The hosts of a multi-plane fabric (see the module documentation of `sim`, "Several
//! planes"): each packet's plane and entropy from the host's policy ([`HostPlanes`], pure),
//! what the ACKs, losses and the edge switches' notifications tell it, and the report's
//! `planes` section.

use std::collections::VecDeque;
use std::sync::Arc;

use ofan_dataplane::arf::PathQuality;
use ofan_dataplane::lb::{mix64, DestKey};
use ofan_topology::Topology;

use super::Sim;
use crate::planes::{Choice, FlowPlanes, HostPlanes, PlanePolicy, PlaneView};
use crate::report::PlaneRun;

/// Views of edge switches (by position in [`Topology::edges`]) passed on to their hosts at one
/// instant.
pub(super) type ViewBatch = Vec<(u32, Arc<PathQuality>)>;

/// What the hosts of a multi-plane run keep beyond a single plane's.
#[derive(Debug)]
pub(super) struct Planes {
    policy: HostPlanes,
    /// Per flow: its state under the policy.
    flows: Vec<FlowPlanes>,
    /// Per data packet (its bit in `Sim::delivered`): `plane << 16 | entropy` of its latest
    /// transmission, so that a loss names its path.
    sent_path: Vec<u32>,
    /// `plane-arf`: per edge switch (position in [`Topology::edges`]), the view its hosts
    /// hold — the edge's path quality as it last passed it on; empty for the other policies.
    views: Vec<Arc<PathQuality>>,
    /// Views on their way from the edges to their hosts: (arrival, [(edge position, view)]).
    pub(super) in_flight: VecDeque<(u64, ViewBatch)>,
    stats: PlaneRun,
}

impl Planes {
    /// The hosts' state for `flows` ((source, destination) host), whose data packets take
    /// `delivered_bits` bits of `Sim::delivered`, on `topology`.
    pub(super) fn new(
        topology: &Topology,
        policy: PlanePolicy,
        seed: u64,
        flows: &[(u32, u32)],
        delivered_bits: usize,
    ) -> Self {
        let planes = topology.planes();
        let policy = HostPlanes::new(policy, planes);
        let views = if policy.policy() == PlanePolicy::PlaneArf {
            topology
                .edges()
                .iter()
                .map(|edge| {
                    let up = topology.up_ports(edge.id).len() as u8;
                    Arc::new(PathQuality::uniform(up, topology.dest_key_count(edge.id)))
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            flows: flows
                .iter()
                .enumerate()
                .map(|(index, &(src, dst))| {
                    policy.flow(mix64(
                        seed ^ (index as u64) << 32 ^ u64::from(src) << 16 ^ u64::from(dst),
                    ))
                })
                .collect(),
            policy,
            sent_path: vec![0; delivered_bits],
            views,
            in_flight: VecDeque::new(),
            stats: PlaneRun {
                policy: policy.policy(),
                data_sent: vec![0; usize::from(planes)],
                ce_acks: vec![0; usize::from(planes)],
                losses: vec![0; usize::from(planes)],
                views_delivered: 0,
                wire_bytes: Vec::new(),
                flows_by_planes_used: Vec::new(),
                notifications: Vec::new(),
            },
        }
    }

    /// Whether the hosts want their edges' views (`plane-arf`).
    pub(super) fn wants_views(&self) -> bool {
        !self.views.is_empty()
    }
}

impl Sim<'_> {
    /// The plane and entropy of packet `seq` of `flow_id`, sent by `host` now; `lost`: it is
    /// a retransmission of a packet declared lost (its previous path is told first).
    pub(super) fn plane_choose(&mut self, host: u32, flow_id: u32, seq: u32, lost: bool) -> Choice {
        let flow = &self.flows[flow_id as usize];
        let (bit, dst) = (flow.delivered_base + seq as usize, flow.dst);
        let view = self.plane_view(host, dst);
        let planes = self.host_planes.as_deref_mut().expect("several planes");
        let state = &mut planes.flows[flow_id as usize];
        if lost {
            let path = planes.sent_path[bit];
            let plane = (path >> 16) as u8;
            planes.policy.on_loss(state, plane, path as u16);
            planes.stats.losses[usize::from(plane)] += 1;
        }
        let choice = planes.policy.choose(state, &view);
        planes.sent_path[bit] = u32::from(choice.plane) << 16 | u32::from(choice.entropy);
        planes.stats.data_sent[usize::from(choice.plane)] += 1;
        choice
    }

    /// An ACK of `flow_id` reached its sender on plane `plane` (the plane its DATA took).
    pub(super) fn plane_acked(&mut self, flow_id: u32, plane: u16, entropy: u16, ce: bool) {
        let planes = self.host_planes.as_deref_mut().expect("several planes");
        let state = &mut planes.flows[flow_id as usize];
        planes.policy.on_ack(state, plane as u8, entropy, ce);
        if ce {
            planes.stats.ce_acks[usize::from(plane)] += 1;
        }
    }

    /// What `host` knows of each plane's paths to host `dst` (`plane-arf`): per plane, the
    /// mean path quality over the up ports of its edge there, from the view the edge last
    /// passed on; a plane is dead when every path is. Hosts under one edge share it.
    fn plane_view(&self, host: u32, dst: u32) -> PlaneView {
        let mut view = PlaneView::CLEAR;
        let Some(planes) = self.host_planes.as_deref() else {
            return view;
        };
        if planes.views.is_empty() {
            return view;
        }
        let first_edge = self.topology.edges()[0].id.0;
        for plane in 0..u32::from(self.planes) {
            let base = plane * self.host_count;
            let (from, to) = (
                &self.places[(base + host) as usize],
                &self.places[(base + dst) as usize],
            );
            if from.edge == to.edge {
                continue;
            }
            let paths = &planes.views[(from.edge - first_edge) as usize];
            view.set_edge_paths(plane as u8, paths, DestKey(to.edge_number));
        }
        view
    }

    /// Views of the edges' planes arrive at their hosts.
    pub(super) fn plane_views_arrive(&mut self, batch: ViewBatch) {
        let planes = self.host_planes.as_deref_mut().expect("views go to hosts");
        for (edge, view) in batch {
            planes.views[edge as usize] = view;
            planes.stats.views_delivered += 1;
        }
    }

    /// The report's section: per plane, what the hosts sent and learned.
    pub(super) fn planes_report(&self) -> Option<PlaneRun> {
        self.host_planes
            .as_deref()
            .map(|planes| planes.stats.clone())
    }
}
