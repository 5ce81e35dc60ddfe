//! The endpoint plane's receiving side (the framework draft's "Endpoint Plane", use case 3):
//! what a multi-plane host learns from the notifications its edge switch in each plane passes
//! on, as pure state — datagrams, addresses and times in, a path-quality view per plane out.
//!
//! **What arrives.** An edge switch with `notify_hosts` relays to the hosts on its host ports
//! every notification it accepted from a neighbour, byte for byte (same originator, sequence
//! and epoch), and sends them the ones it originates about its own links — one notification
//! mechanism for the network and the end side, as the draft asks. A host therefore hears of
//! the links its edge knows: the edge's own up-links and its neighbours' links to their next
//! hops.
//!
//! **What a host takes.** A datagram counts only if it came from the host's edge in that
//! plane (its address on the host's link, with IP TTL 255: nothing that crossed a router),
//! parses ([`super::wire`], the one codec), and names a link its originator may report: the
//! originator is the edge itself or one of its neighbours (the only switches whose messages an
//! edge can relay, notifications being one hop), and entitled to the link by the edge's remote
//! path information ([`ofan_dataplane::arf::trust`], the rule the edge itself applied). Flow
//! messages name a path of the network, not a link state, and are left out. The rest goes
//! into a [`CongestionTable`] per plane — the switch's own sequence, epoch and hold-time rules.
//!
//! **The view.** Per plane, the host rebuilds its edge's [`PathQuality`] with
//! [`PathQuality::build`]: the local level of each of the edge's up-ports is what the edge
//! told about its link to the neighbour behind it, the remote levels come from the table over
//! the edge's remote paths, which the host takes from the topology's routing plan
//! ([`RemotePaths::from_plan`], the function the model uses), switches named by router ID
//! (loopback) as on the wire. The host policy reads it per destination with
//! [`ofan_dataplane::lb::planes::PlaneView::set_edge_paths`], as the model's hosts read the
//! view their edge passes on.

use std::net::Ipv4Addr;
use std::sync::Arc;

use ofan_dataplane::arf::{
    trust, Applied, Combine, CongestionTable, LinkId, PathQuality, Quality, RemotePaths,
};
use ofan_dataplane::lb::DestKey;
use ofan_topology::{FailedLinks, NodeId, Role, Topology};

use super::speaker::{self, Arrival, Reject};
use super::wire::Notification;

/// A host's edge switch in one plane, as the host needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneEdge {
    /// The edge's address on the host's link: where its datagrams come from.
    pub addr: Ipv4Addr,
    /// The edge's router ID.
    pub router_id: Ipv4Addr,
    /// The neighbour behind each of the edge's up-ports, by up-port position (router IDs):
    /// the edge's own links, whose levels are the local levels of its paths.
    pub up_neighbours: Vec<Ipv4Addr>,
    /// The edge's remote path information, switches named by router ID.
    pub paths: RemotePaths,
}

impl PlaneEdge {
    /// The edge of host `host` in plane `plane` of `topology`, from the routing plan (every
    /// link alive); `None` when the host has no port in that plane or a neighbour is not a
    /// switch.
    #[must_use]
    pub fn of_host(topology: &Topology, host: NodeId, plane: u8) -> Option<Self> {
        let port = topology.node(host).ports.get(usize::from(plane))?;
        let edge = topology.node(port.peer);
        if edge.role != Role::Edge {
            return None;
        }
        let addr = topology.port(edge.id, port.peer_port).address;
        let router_id = |id: NodeId| u32::from(topology.node(id).loopback);
        Some(Self {
            addr,
            router_id: edge.loopback,
            up_neighbours: topology
                .up_ports(edge.id)
                .iter()
                .map(|up| topology.node(up.peer).loopback)
                .collect(),
            paths: RemotePaths::from_plan(topology, &FailedLinks::new(), edge.id, router_id),
        })
    }

    /// The key of host `dst` at this plane's edge of `host` (`None` when both are under that
    /// edge: no path of the plane's fabric is involved).
    #[must_use]
    pub fn dest_key(topology: &Topology, host: NodeId, plane: u8, dst: NodeId) -> Option<DestKey> {
        let edge = topology.node(host).ports.get(usize::from(plane))?.peer;
        let dst_edge = topology.node(dst).ports.get(usize::from(plane))?.peer;
        if edge == dst_edge {
            return None;
        }
        topology.dest_key_for_host(edge, dst)
    }
}

/// One plane as its host knows it.
#[derive(Debug, Clone)]
struct PlaneState {
    edge: PlaneEdge,
    table: CongestionTable,
    view: Arc<PathQuality>,
}

/// What one host knows of its planes from its edges' notifications.
#[derive(Debug, Clone)]
pub struct HostView {
    planes: Vec<PlaneState>,
    combine: Combine,
    generation: u64,
}

impl HostView {
    /// A host whose edge in plane i is `edges[i]`, nothing heard yet (every path at its best);
    /// its views combine local and remote levels by `combine` (the edges' rule).
    #[must_use]
    pub fn new(edges: Vec<PlaneEdge>, combine: Combine) -> Self {
        let planes = edges
            .into_iter()
            .map(|edge| {
                let mut view = PathQuality::uniform(edge.paths.up_ports(), edge.paths.dest_keys());
                view.combine = combine;
                PlaneState {
                    edge,
                    table: CongestionTable::default(),
                    view: Arc::new(view),
                }
            })
            .collect();
        Self {
            planes,
            combine,
            generation: 0,
        }
    }

    /// Number of planes.
    #[must_use]
    pub fn planes(&self) -> usize {
        self.planes.len()
    }

    /// The path-quality view of plane `plane`'s edge as the host rebuilt it.
    ///
    /// # Panics
    /// If `plane` is not one of the host's planes.
    #[must_use]
    pub fn view(&self, plane: usize) -> &Arc<PathQuality> {
        &self.planes[plane].view
    }

    /// Every plane's view, in plane order.
    pub fn views(&self) -> impl Iterator<Item = &Arc<PathQuality>> {
        self.planes.iter().map(|plane| &plane.view)
    }

    /// Takes one datagram that arrived on plane `plane` from `from` with IP TTL `ttl` at
    /// `now_ns`: what it did to the plane's table (a changed level rebuilds the plane's view).
    /// `Ok(None)`: a flow message, left out.
    ///
    /// # Errors
    /// Why it changed nothing: not from the plane's edge or an originator it may relay, not
    /// entitled to the link ([`Reject::Untrusted`]), a TTL other than 255 ([`Reject::Ttl`]),
    /// bytes that do not parse ([`Reject::Malformed`]), an older (epoch, sequence)
    /// ([`Reject::Stale`]), or no such plane ([`Reject::UnknownPort`]).
    pub fn receive(
        &mut self,
        plane: usize,
        from: Ipv4Addr,
        ttl: Option<u8>,
        bytes: &[u8],
        now_ns: u64,
    ) -> Result<Option<Applied>, Reject> {
        let state = self.planes.get_mut(plane).ok_or(Reject::UnknownPort)?;
        if from != state.edge.addr {
            return Err(Reject::Untrusted);
        }
        let message = speaker::check(Arrival::Fabric, ttl, bytes, None)?;
        if message.flow.is_some() {
            return Ok(None);
        }
        if !relayable(&state.edge, &message) {
            return Err(Reject::Untrusted);
        }
        let applied = state.table.apply(&speaker::update_of(&message), now_ns);
        match applied {
            Applied::Stale => return Err(Reject::Stale),
            Applied::Changed => self.rebuild(plane),
            Applied::Refreshed => {}
        }
        Ok(Some(applied))
    }

    /// Ages every plane's table at `now_ns`; the planes whose view changed (rebuilt).
    pub fn expire(&mut self, now_ns: u64) -> Vec<usize> {
        let expired: Vec<usize> = (0..self.planes.len())
            .filter(|&plane| self.planes[plane].table.expire(now_ns) > 0)
            .collect();
        for &plane in &expired {
            self.rebuild(plane);
        }
        expired
    }

    /// Rebuilds plane `plane`'s view from its table.
    fn rebuild(&mut self, plane: usize) {
        self.generation += 1;
        let state = &mut self.planes[plane];
        let edge = u32::from(state.edge.router_id);
        let local: Vec<Quality> = state
            .edge
            .up_neighbours
            .iter()
            .map(|&far| {
                state.table.quality(LinkId {
                    near: edge,
                    far: u32::from(far),
                })
            })
            .collect();
        let mut view = PathQuality::build(&local, &state.table, &state.edge.paths, self.generation);
        view.combine = self.combine;
        state.view = Arc::new(view);
    }
}

/// Whether `edge` may have relayed `message`: its originator is the edge or one of its
/// neighbours, entitled to report the link by the edge's remote paths.
fn relayable(edge: &PlaneEdge, message: &Notification) -> bool {
    let originator = message.originator;
    let neighbour = originator == edge.router_id || edge.up_neighbours.contains(&originator);
    neighbour
        && trust::entitled(
            u32::from(originator),
            speaker::update_of(message).link,
            &edge.paths,
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::wire::{Kind, LinkRef};
    use ofan_dataplane::lb::planes::PlaneView;

    const MS: u64 = 1_000_000;

    /// A k = 4 fat tree × 2 planes, and host 0's view of it.
    fn host() -> (Topology, HostView) {
        let topology = Topology::new(ofan_topology::TopologyKind::MultiPlane {
            plane: ofan_topology::PlaneKind::FatTree,
            planes: 2,
            k: 4,
        })
        .unwrap();
        let host = topology.hosts()[0].id;
        let edges = (0..2)
            .map(|plane| PlaneEdge::of_host(&topology, host, plane).unwrap())
            .collect();
        (topology, HostView::new(edges, Combine::Min))
    }

    fn node<'a>(topology: &'a Topology, name: &str) -> &'a ofan_topology::Node {
        topology.nodes().iter().find(|n| n.name == name).unwrap()
    }

    /// The bytes of a congestion notification about `near → far` at `level`, originated by
    /// `originator`, as another implementation would send it.
    fn bytes(topology: &Topology, originator: &str, near: &str, far: &str, level: u8) -> Vec<u8> {
        let (originator, near, far) = (
            node(topology, originator),
            node(topology, near),
            node(topology, far),
        );
        let message = Notification {
            kind: Kind::CongestionDetected,
            quality: Quality::new(level).unwrap(),
            hold_ms: 300,
            sequence: 1,
            epoch: 7,
            timestamp_ns: 1,
            originator: originator.loopback,
            link: LinkRef {
                near: near.loopback,
                far: far.loopback,
                near_asn: 65_000 + near.id.0,
                far_asn: 65_000 + far.id.0,
                port: 2,
            },
            flow: None,
        };
        let mut buffer = vec![0; 64];
        let len = message.emit(&mut buffer).unwrap();
        buffer.truncate(len);
        buffer
    }

    /// Host 0's view of each plane towards host `dst`.
    fn plane_view(topology: &Topology, view: &HostView, dst: usize) -> PlaneView {
        let (host, dst) = (topology.hosts()[0].id, topology.hosts()[dst].id);
        let mut out = PlaneView::CLEAR;
        for plane in 0..2 {
            if let Some(key) = PlaneEdge::dest_key(topology, host, plane, dst) {
                out.set_edge_paths(plane, view.view(usize::from(plane)), key);
            }
        }
        out
    }

    #[test]
    fn a_congested_link_lowers_its_plane_towards_the_hosts_behind_it_only() {
        let (topology, mut view) = host();
        let edge0 = view.planes[0].edge.addr;
        // Host 0 is under e-p0-0 in each plane; hosts 2.. are under e-p0-1, 4.. in pod 1.
        assert_eq!(plane_view(&topology, &view, 2), PlaneView::CLEAR);
        // a-p0-0@0 tells e-p0-0@0 (which relays it) that its link down to e-p0-1@0 is at
        // level 1: plane 0's paths to e-p0-1's hosts through a-p0-0 are poor, not the others.
        let congested = bytes(&topology, "a-p0-0@0", "a-p0-0@0", "e-p0-1@0", 1);
        assert_eq!(
            view.receive(0, edge0, Some(255), &congested, 0),
            Ok(Some(Applied::Changed))
        );
        let towards = plane_view(&topology, &view, 2);
        assert_eq!(
            towards.quality[0], 8,
            "the mean of the two up-ports, (1 + 15) / 2"
        );
        assert_eq!(towards.quality[1], 15, "plane 1 heard nothing");
        assert_eq!(towards.dead, 0);
        assert_eq!(
            plane_view(&topology, &view, 4),
            PlaneView::CLEAR,
            "pod 1 is reached through other links"
        );
        assert_eq!(
            plane_view(&topology, &view, 1),
            PlaneView::CLEAR,
            "same edge"
        );
        // The same bytes again: stale.
        assert_eq!(
            view.receive(0, edge0, Some(255), &congested, MS),
            Err(Reject::Stale)
        );
        // The edge's own up-link e-p0-0@0 → a-p0-1@0 at level 3: every destination beyond
        // the edge, in plane 0 only.
        let own = bytes(&topology, "e-p0-0@0", "e-p0-0@0", "a-p0-1@0", 3);
        assert_eq!(
            view.receive(0, edge0, Some(255), &own, MS),
            Ok(Some(Applied::Changed))
        );
        assert_eq!(
            plane_view(&topology, &view, 4).quality[..2],
            [(15 + 3) / 2, 15]
        );
        assert_eq!(
            plane_view(&topology, &view, 2).quality[0],
            2,
            "(min(15, 1) + min(3, 15)) / 2: port 0 remote 1, port 1 local 3"
        );
        // Held for 300 ms: then plane 0 is clear again.
        assert!(view.expire(250 * MS).is_empty());
        assert_eq!(view.expire(301 * MS), [0]);
        assert_eq!(plane_view(&topology, &view, 2), PlaneView::CLEAR);
    }

    #[test]
    fn a_message_its_edge_could_not_have_relayed_changes_nothing() {
        let (topology, mut view) = host();
        let (edge0, edge1) = (view.planes[0].edge.addr, view.planes[1].edge.addr);
        let before = Arc::clone(view.view(0));
        let congested = bytes(&topology, "a-p0-0@0", "a-p0-0@0", "e-p0-1@0", 1);
        // From another address than the edge's on this plane's link (plane 1's edge, a host).
        assert_eq!(
            view.receive(0, edge1, Some(255), &congested, 0),
            Err(Reject::Untrusted)
        );
        let peer = topology.hosts()[1].ports[0].address;
        assert_eq!(
            view.receive(0, peer, Some(255), &congested, 0),
            Err(Reject::Untrusted)
        );
        // Not one hop.
        assert_eq!(
            view.receive(0, edge0, Some(254), &congested, 0),
            Err(Reject::Ttl)
        );
        // A core originating: no neighbour of the edge.
        let core = bytes(&topology, "c-0@0", "c-0@0", "a-p1-0@0", 0);
        assert_eq!(
            view.receive(0, edge0, Some(255), &core, 0),
            Err(Reject::Untrusted)
        );
        // A neighbour of the edge speaking for a third party's link: not entitled.
        let third = bytes(&topology, "a-p0-0@0", "a-p1-0@0", "e-p1-0@0", 0);
        assert_eq!(
            view.receive(0, edge0, Some(255), &third, 0),
            Err(Reject::Untrusted)
        );
        assert_eq!(
            view.receive(0, edge0, Some(255), &congested[..40], 0),
            Err(Reject::Malformed)
        );
        assert!(Arc::ptr_eq(&before, view.view(0)), "no view rebuilt");
        assert_eq!(plane_view(&topology, &view, 2), PlaneView::CLEAR);
    }
}
