//! The endpoint plane in the agent (`plane-arf` on a multi-plane host): the host hears the
//! notifications its edge switch in each plane passes on (`ofan-switch --arf-notify-hosts`,
//! which the lab sets on its multi-plane `arf-*` labs) and steers by the path quality they
//! tell, as the model's hosts steer by the view their edges pass on.
//!
//! Everything but the sockets is `ofan_control::notify`: the one codec ([`wire`]), the socket
//! that sends and checks TTL 255 ([`NotifySocket`]), and the pure host view ([`HostView`]:
//! which datagrams count, the congestion table's sequence, epoch and hold-time rules, and the
//! edge's path quality rebuilt from the topology's routing plan). That is why this crate
//! depends on `ofan-control` (a library the lab, the experiment runner and the view already
//! link): a second codec or a copy of the table's rules here would drift from the switch's.
//! The decision per packet is the model's too: [`PlaneView::set_edge_paths`] over each
//! plane's view, then `HostPlanes::choose` ([`super::planes`]).
//!
//! One socket per plane, bound to the host's address in that plane, so the socket names the
//! plane. The receiver thread owns them (one more entry each in its epoll set) and the host's
//! [`HostView`]; a view that changed goes to the sender thread as an [`super::Event::View`].
//!
//! [`wire`]: ofan_control::notify::wire

use std::net::Ipv4Addr;

use anyhow::Context;
use ofan_control::notify::host::{HostView, PlaneEdge};
use ofan_control::notify::transport::NotifySocket;
use ofan_dataplane::arf::Combine;
use ofan_dataplane::lb::planes::PlaneView;
use ofan_dataplane::lb::DestKey;
use ofan_topology::Topology;

pub use ofan_control::notify::DEFAULT_PORT;

/// What a multi-plane host needs to hear and use its edges' notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointConfig {
    /// The notification port (the switches' `adaptive_routing.port`).
    pub port: u16,
    /// The host's edge switch in each plane.
    pub edges: Vec<PlaneEdge>,
    /// Per plan host (topology host order), per plane: its destination key at this host's
    /// edge (`None`: under the same edge).
    pub keys: Vec<Vec<Option<DestKey>>>,
    /// How the edges combine a path's local and remote levels.
    pub combine: Combine,
}

impl EndpointConfig {
    /// For host `host` (index in the plan, which is the topology's host order) of the
    /// multi-plane `topology`; `None` when the topology has one plane or no such host.
    #[must_use]
    pub fn from_topology(
        topology: &Topology,
        host: u32,
        port: u16,
        combine: Combine,
    ) -> Option<Self> {
        let planes = topology.planes();
        let me = topology.hosts().get(host as usize)?.id;
        if planes < 2 {
            return None;
        }
        let edges = (0..planes)
            .map(|plane| PlaneEdge::of_host(topology, me, plane))
            .collect::<Option<Vec<_>>>()?;
        let keys = topology
            .hosts()
            .iter()
            .map(|dst| {
                (0..planes)
                    .map(|plane| PlaneEdge::dest_key(topology, me, plane, dst.id))
                    .collect()
            })
            .collect();
        Some(Self {
            port,
            edges,
            keys,
            combine,
        })
    }

    /// A host view with nothing heard yet.
    #[must_use]
    pub fn view(&self) -> HostView {
        HostView::new(self.edges.clone(), self.combine)
    }
}

/// One socket per plane address of the host (`planes[i]`: its address in plane i), on `port`.
///
/// # Errors
/// When a socket cannot be bound.
pub(super) fn open_sockets(planes: &[Ipv4Addr], port: u16) -> anyhow::Result<Vec<NotifySocket>> {
    planes
        .iter()
        .map(|&addr| {
            NotifySocket::bind_to(addr, port)
                .with_context(|| format!("cannot bind the notification port {addr}:{port}"))
        })
        .collect()
}

/// What the host knows of each plane's paths towards a destination whose keys at its edges
/// are `keys` (per plane), from `views` (per plane: the edge's path quality as rebuilt).
#[must_use]
pub(super) fn plane_view(
    views: &[std::sync::Arc<ofan_dataplane::arf::PathQuality>],
    keys: &[Option<DestKey>],
) -> PlaneView {
    let mut view = PlaneView::CLEAR;
    for (plane, (paths, key)) in views.iter().zip(keys).enumerate() {
        if let Some(key) = key {
            view.set_edge_paths(plane as u8, paths, *key);
        }
    }
    view
}
