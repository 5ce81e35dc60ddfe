//! A multi-plane host's sending side: which plane (NIC port) each DATA packet leaves on, by
//! the host policy ([`HostPlanes`], pure, the model's), and what each plane carried.
//!
//! A plane is chosen by choosing the destination's *address* on it: the lab routes each
//! plane's prefixes through the host's port in that plane (`ofan_lab::plan::host_routes`), and
//! the sockets are bound to no address, so the kernel gives the packet that port's source
//! address and the receiver's ACK comes back through the same plane.
//!
//! Per-plane feedback, as in the model: the plane (and entropy) each copy left with is kept
//! per packet; an ACK passes its CE echo to the policy for that plane, and a packet declared
//! lost (its timer expired) a loss. Under `plane-arf` with notifications ([`super::endpoint`])
//! each packet's [`PlaneView`] is what the host's edges told of their plane's paths to the
//! flow's destination (the receiver thread rebuilds each plane's view and passes it on); without
//! them every plane is at full quality ([`PlaneView::CLEAR`]) and ECN and losses alone steer.
//!
//! Ports: the host's pacer paces all its ports together (at P × the link rate × ρ), and each
//! port is a link of its own: a packet whose chosen plane's port is still busy with the
//! previous packet's wire time waits for it ([`PlaneSender::choose`]), so one port never
//! carries more than the link rate (a `plane-hash` host with one flow sends at one port's
//! rate). The wait is the host's: its other flows wait behind it (head of line), as behind a
//! NIC's single queue.

use std::sync::Arc;

use ofan_dataplane::arf::PathQuality;
use ofan_dataplane::lb::planes::{Choice, FlowPlanes, HostPlanes, PlanePolicy, PlaneView};
use ofan_dataplane::lb::DestKey;

use super::endpoint::{self, EndpointConfig};

use super::PlanesReport;

/// One host's planes: the policy, each own flow's state, and what each plane carried.
#[derive(Debug)]
pub(super) struct PlaneSender {
    policy: HostPlanes,
    flows: Vec<FlowPlanes>,
    /// Per own flow and sequence number: the plane and entropy of its latest copy.
    sent_on: Vec<Vec<(u8, u16)>>,
    /// Per own flow: the choice made for a packet that waits for its plane's port.
    pending: Vec<Option<Choice>>,
    /// Per plane: when its port has sent what it was given (ns).
    free_at: Vec<u64>,
    /// Per plane: DATA packets and wire bytes sent.
    pub packets: Vec<u64>,
    pub wire_bytes: Vec<u64>,
    /// Per plane: ACKs that echoed CE, and packets declared lost.
    pub ce_acks: Vec<u64>,
    pub losses: Vec<u64>,
    /// With notifications: per plane, the edge's path quality as the host last rebuilt it
    /// (empty: none, every plane clear).
    views: Vec<Arc<PathQuality>>,
    /// Per own flow, per plane: the destination's key at the host's edge (`None`: the same
    /// edge).
    keys: Vec<Vec<Option<DestKey>>>,
    /// Views that reached the sender.
    pub views_delivered: u64,
}

impl PlaneSender {
    /// `planes` planes under `policy`, for own flows of `packets` packets each; `flow_keys`
    /// name the flows (plan flow ids mixed with the seed: plane-hash's hash).
    pub(super) fn new(
        policy: PlanePolicy,
        planes: u8,
        flow_keys: impl Iterator<Item = u64>,
        packets: &[u32],
    ) -> Self {
        let policy = HostPlanes::new(policy, planes);
        let planes = usize::from(planes);
        Self {
            policy,
            flows: flow_keys.map(|key| policy.flow(key)).collect(),
            sent_on: packets.iter().map(|&n| vec![(0, 0); n as usize]).collect(),
            pending: vec![None; packets.len()],
            free_at: vec![0; planes],
            packets: vec![0; planes],
            wire_bytes: vec![0; planes],
            ce_acks: vec![0; planes],
            losses: vec![0; planes],
            views: Vec::new(),
            keys: Vec::new(),
            views_delivered: 0,
        }
    }

    /// Steers by the views of `endpoint`'s edges (every path at its best until a view comes),
    /// towards each own flow's destination keys `keys` (per plane).
    pub(super) fn with_views(
        &mut self,
        endpoint: &EndpointConfig,
        keys: impl Iterator<Item = Vec<Option<DestKey>>>,
    ) {
        self.views = endpoint.view().views().cloned().collect();
        self.keys = keys.collect();
    }

    /// Plane `plane`'s view changed.
    pub(super) fn set_view(&mut self, plane: u8, view: Arc<PathQuality>) {
        if let Some(slot) = self.views.get_mut(usize::from(plane)) {
            *slot = view;
            self.views_delivered += 1;
        }
    }

    /// The plane and entropy of flow `local`'s next packet at `now`; `Err(t)` when the chosen
    /// plane's port is busy beyond `slack_ns`: the packet waits until `t` (the port's free time
    /// less `slack_ns`), its choice kept for it.
    pub(super) fn choose(&mut self, local: usize, now: u64, slack_ns: u64) -> Result<Choice, u64> {
        let choice = match self.pending[local].take() {
            Some(choice) => choice,
            None => {
                let view = match self.keys.get(local) {
                    Some(keys) => endpoint::plane_view(&self.views, keys),
                    None => PlaneView::CLEAR,
                };
                self.policy.choose(&mut self.flows[local], &view)
            }
        };
        let free_at = self.free_at[usize::from(choice.plane)];
        if free_at > now + slack_ns {
            self.pending[local] = Some(choice);
            return Err(free_at - slack_ns);
        }
        Ok(choice)
    }

    /// Packet `seq` of flow `local` left on `choice`'s plane at `now`, `wire` bytes taking
    /// `wire_ns` of its port.
    pub(super) fn sent(
        &mut self,
        local: usize,
        seq: u32,
        choice: Choice,
        now: u64,
        wire: u64,
        wire_ns: u64,
    ) {
        let plane = usize::from(choice.plane);
        if let Some(slot) = self.sent_on[local].get_mut(seq as usize) {
            *slot = (choice.plane, choice.entropy);
        }
        self.free_at[plane] = self.free_at[plane].max(now) + wire_ns;
        self.packets[plane] += 1;
        self.wire_bytes[plane] += wire;
    }

    /// An ACK of packet `seq` of flow `local` came back, echoing CE or not.
    pub(super) fn on_ack(&mut self, local: usize, seq: u32, ce: bool) {
        let Some(&(plane, entropy)) = self.sent_on[local].get(seq as usize) else {
            return;
        };
        if ce {
            self.ce_acks[usize::from(plane)] += 1;
        }
        self.policy
            .on_ack(&mut self.flows[local], plane, entropy, ce);
    }

    /// Packet `seq` of flow `local` was declared lost.
    pub(super) fn on_loss(&mut self, local: usize, seq: u32) {
        let Some(&(plane, entropy)) = self.sent_on[local].get(seq as usize) else {
            return;
        };
        self.losses[usize::from(plane)] += 1;
        self.policy.on_loss(&mut self.flows[local], plane, entropy);
    }

    /// The policy's name.
    pub(super) fn policy(&self) -> PlanePolicy {
        self.policy.policy()
    }

    /// What the report says of the planes.
    pub(super) fn report(self) -> PlanesReport {
        PlanesReport {
            policy: self.policy().name().to_owned(),
            flows_by_planes_used: self.planes_per_flow(),
            packets: self.packets,
            wire_bytes: self.wire_bytes,
            ce_acks: self.ce_acks,
            losses: self.losses,
            // The receiver's counts are added by the report.
            notifications: Vec::new(),
            notifications_rejected: 0,
            views_delivered: self.views_delivered,
        }
    }

    /// Flows that sent on each number of planes: `result[n]` flows used exactly n planes.
    pub(super) fn planes_per_flow(&self) -> Vec<u32> {
        let mut counts = vec![0; self.free_at.len() + 1];
        for flow in &self.flows {
            let used = flow.sent.iter().filter(|&&sent| sent > 0).count();
            counts[used] += 1;
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under plane-arf with notifications, a view in which every path of plane 0's edge is at
    /// level 0 moves the flow's packets to plane 1 (weights (0 + 1) against (15 + 1)); a flow
    /// to a host under the same edges sees no path and splits evenly.
    #[test]
    fn plane_arf_weighs_the_planes_by_the_view_towards_each_flows_destination() {
        use ofan_dataplane::arf::{CongestionTable, Quality, RemotePaths};
        let topology = ofan_topology::Topology::new(ofan_topology::TopologyKind::MultiPlane {
            plane: ofan_topology::PlaneKind::FatTree,
            planes: 2,
            k: 4,
        })
        .unwrap();
        let endpoint = EndpointConfig::from_topology(
            &topology,
            0,
            endpoint::DEFAULT_PORT,
            ofan_dataplane::arf::Combine::Min,
        )
        .unwrap();
        // Flow 0 to host 4 (pod 1), flow 1 to host 1 (the same edge in both planes).
        let mut arf = PlaneSender::new(PlanePolicy::PlaneArf, 2, [3, 5].into_iter(), &[64, 64]);
        arf.with_views(
            &endpoint,
            [4, 1].into_iter().map(|dst| endpoint.keys[dst].clone()),
        );
        let keys = topology.dest_key_count(topology.edges()[0].id);
        let poor = Quality::POOREST;
        arf.set_view(
            0,
            Arc::new(PathQuality::build(
                &[poor, poor],
                &CongestionTable::default(),
                &RemotePaths::new(2, keys),
                1,
            )),
        );
        assert_eq!(arf.views_delivered, 1);
        let mut sent = [[0u32; 2]; 2];
        for (local, per_plane) in sent.iter_mut().enumerate() {
            for seq in 0..64 {
                let choice = arf.choose(local, 0, u64::MAX / 2).unwrap();
                arf.sent(local, seq, choice, 0, 100, 0);
                per_plane[usize::from(choice.plane)] += 1;
            }
        }
        assert!(sent[0][0] * 8 < sent[0][1], "towards pod 1: {:?}", sent[0]);
        assert_eq!(sent[1], [32, 32], "under the same edge");
    }

    /// A plane-hash flow keeps its plane; its port lets one packet through per wire time, the
    /// others of the host's planes wait for nothing; spray alternates and feeds back per plane.
    #[test]
    fn ports_pace_each_plane_and_feedback_finds_the_plane() {
        let mut hash = PlaneSender::new(PlanePolicy::PlaneHash, 2, [7].into_iter(), &[4]);
        let first = hash.choose(0, 1_000, 0).unwrap();
        hash.sent(0, 0, first, 1_000, 1500, 100);
        // The same plane is busy until 1100: the packet waits, with its choice kept.
        assert_eq!(hash.choose(0, 1_050, 10), Err(1_090));
        let second = hash.choose(0, 1_090, 10).unwrap();
        assert_eq!(second.plane, first.plane);
        hash.sent(0, 1, second, 1_090, 1500, 100);
        assert_eq!(hash.planes_per_flow(), [0, 1, 0]);
        assert_eq!(hash.packets[usize::from(first.plane)], 2);

        let mut spray = PlaneSender::new(PlanePolicy::PlaneSpray, 2, [1].into_iter(), &[4]);
        let mut planes = Vec::new();
        for seq in 0..4 {
            let choice = spray.choose(0, 0, u64::MAX / 2).unwrap();
            spray.sent(0, seq, choice, 0, 100, 10);
            planes.push(choice.plane);
        }
        assert_eq!(spray.packets, [2, 2]);
        assert_ne!(planes[0], planes[1]);
        spray.on_ack(0, 1, true);
        spray.on_loss(0, 2);
        assert_eq!(spray.ce_acks[usize::from(planes[1])], 1);
        assert_eq!(spray.losses[usize::from(planes[2])], 1);
        assert_eq!(spray.planes_per_flow(), [0, 0, 1]);
    }
}
