//! Routing on a dragonfly ([`ofan_topology::Dragonfly`]): where a packet goes non-minimally.
//!
//! In a dragonfly the one choice is made when a packet enters the network, at its source
//! router: go minimally (local–global–local) or through an intermediate group (Valiant). The
//! choice travels with the packet as a [`PathTag`] — the intermediate group it still has to
//! reach — and every router after the source only follows it ([`next_hop`]): towards the
//! intermediate group while the tag names one, and minimally to the destination once the
//! packet is inside it. That tag is what a lossless network would carry as a virtual-channel
//! class (phase 1 / phase 2) to break the cyclic dependencies of non-minimal routes; a
//! buffered network without link-level flow control needs it only to know where the packet is
//! going.
//!
//! [`DragonflyBalancer::choose`] makes the source's choice, for every [`DragonflyScheme`], as a
//! pure function of its inputs: the destination, the congestion the router can see
//! ([`Congestion`]: its own queues, the framework's notifications of its group's global links,
//! or — for the model's upper reference only — every queue), a seeded [`LbRng`] and the
//! balancer's per-destination-group rotation pointers. No clock, no I/O, no allocation per
//! packet: the model runs this code, and a switch can.
//!
//! Traffic inside one group always goes minimally (one local hop): there is no global link to
//! relieve and a detour only adds hops.

use std::fmt;
use std::str::FromStr;

use ofan_topology::dragonfly::{GroupId, RouterId, RouterPort};
use ofan_topology::Dragonfly;

use super::LbRng;

/// A dragonfly routing scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DragonflyScheme {
    /// Minimal: local–global–local (ECMP over the minimal paths; the canonical dragonfly has
    /// one per pair of routers).
    Min,
    /// Valiant: through a uniformly random intermediate group.
    Valiant,
    /// UGAL with local information: minimal unless `q_min · H_min > q_nm · H_nm`, with `q` the
    /// source router's own output queue towards each path and `H` its hop count; the
    /// non-minimal candidate is a random intermediate group.
    UgalL,
    /// UGAL with global information (the model only, an upper reference): the same comparison
    /// on the estimated delay of each whole path, `Σ queues + H · packet`.
    UgalG,
    /// The adaptive-routing framework on a dragonfly: UGAL whose `q` adds to the local queue
    /// the notified queue of the path's first global link (the gateway router's congestion
    /// notification to the routers of its group — remote congestion seen before it backs up).
    ArfUgal,
    /// Ofan's rotation: per destination group, packet `n` leaves on global channel
    /// `(start + n) mod a·h` of the source group — the direct link when that channel leads to
    /// the destination group, otherwise Valiant through the group the channel leads to.
    Rotate,
    /// UGAL-L whose non-minimal candidate comes from the rotation instead of a random draw.
    UgalRotate,
}

impl DragonflyScheme {
    /// Every scheme, in the order tables list them.
    pub const ALL: [Self; 7] = [
        Self::Min,
        Self::Valiant,
        Self::UgalL,
        Self::UgalG,
        Self::ArfUgal,
        Self::Rotate,
        Self::UgalRotate,
    ];

    /// The name the CLI and the reports use.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Min => "min",
            Self::Valiant => "valiant",
            Self::UgalL => "ugal-l",
            Self::UgalG => "ugal-g",
            Self::ArfUgal => "arf-ugal",
            Self::Rotate => "rotate",
            Self::UgalRotate => "ugal-rotate",
        }
    }
}

impl fmt::Display for DragonflyScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A dragonfly scheme name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown dragonfly scheme {0:?} (min, valiant, ugal-l, ugal-g, arf-ugal, rotate, ugal-rotate)"
)]
pub struct UnknownDragonflyScheme(pub String);

impl FromStr for DragonflyScheme {
    type Err = UnknownDragonflyScheme;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|scheme| scheme.name() == text)
            .ok_or_else(|| UnknownDragonflyScheme(text.to_owned()))
    }
}

/// What a packet carries about its route: the intermediate group it still has to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PathTag {
    /// `Some(group)` until the packet enters `group`, then `None` (minimal from there on).
    pub via: Option<GroupId>,
}

/// The congestion a deciding router can see, in queued bytes.
pub trait Congestion {
    /// The deciding router's own output queue on `port`.
    fn local(&self, port: RouterPort) -> u64;
    /// The deciding router's latest notification of the queue on global `channel` of its own
    /// group (0 when none arrived). Only [`DragonflyScheme::ArfUgal`] asks.
    fn notified(&self, channel: u32) -> u64;
    /// The queue on `port` of any `router` — global knowledge. Only
    /// [`DragonflyScheme::UgalG`] asks; a switch cannot answer it.
    fn anywhere(&self, router: RouterId, port: RouterPort) -> u64;
}

/// The next port of a packet at `router` towards destination router `dst`, following and
/// updating its `tag`; `None` when `router` is `dst` (deliver on the host port).
#[must_use]
pub fn next_hop(
    dragonfly: &Dragonfly,
    router: RouterId,
    dst: RouterId,
    tag: &mut PathTag,
) -> Option<RouterPort> {
    if let Some(via) = tag.via {
        if dragonfly.group_of(router) == via {
            tag.via = None;
        } else {
            return Some(dragonfly.next_port_to_group(router, via));
        }
    }
    dragonfly.next_port(router, dst)
}

/// A source router's routing state: the scheme and, per destination group, a rotation pointer.
#[derive(Debug, Clone)]
pub struct DragonflyBalancer {
    scheme: DragonflyScheme,
    router: RouterId,
    /// `pointers[group]`: packets sent to that group so far, offset by a seeded start.
    pointers: Vec<u32>,
}

impl DragonflyBalancer {
    /// The balancer of `router`; rotation pointers start at values drawn from `rng`.
    #[must_use]
    pub fn new(
        scheme: DragonflyScheme,
        dragonfly: &Dragonfly,
        router: RouterId,
        rng: &mut LbRng,
    ) -> Self {
        let shape = dragonfly.shape();
        let channels = shape.groups() - 1;
        let pointers = (0..shape.groups()).map(|_| rng.below(channels)).collect();
        Self {
            scheme,
            router,
            pointers,
        }
    }

    /// The scheme.
    #[must_use]
    pub const fn scheme(&self) -> DragonflyScheme {
        self.scheme
    }

    /// The route of a packet of `packet_bytes` entering the network at this router for
    /// destination router `dst`: the tag it carries.
    pub fn choose(
        &mut self,
        dragonfly: &Dragonfly,
        dst: RouterId,
        packet_bytes: u64,
        congestion: &impl Congestion,
        rng: &mut LbRng,
    ) -> PathTag {
        let src = self.router;
        let (from, to) = (dragonfly.group_of(src), dragonfly.group_of(dst));
        let groups = dragonfly.shape().groups();
        if from == to || groups < 3 {
            return PathTag::default();
        }
        let random_via = |rng: &mut LbRng| {
            // Uniform over the g − 2 groups that are neither end.
            let mut via = rng.below(groups - 2);
            for end in [from.0.min(to.0), from.0.max(to.0)] {
                if via >= end {
                    via += 1;
                }
            }
            GroupId(via)
        };
        let via = match self.scheme {
            DragonflyScheme::Min => None,
            DragonflyScheme::Valiant => Some(random_via(rng)),
            DragonflyScheme::Rotate => self.rotate(dragonfly, to, false),
            DragonflyScheme::UgalL | DragonflyScheme::UgalG | DragonflyScheme::ArfUgal => {
                let candidate = random_via(rng);
                self.ugal(dragonfly, dst, candidate, packet_bytes, congestion)
            }
            DragonflyScheme::UgalRotate => {
                let candidate = self
                    .rotate(dragonfly, to, true)
                    .expect("skips the direct link");
                self.ugal(dragonfly, dst, candidate, packet_bytes, congestion)
            }
        };
        PathTag { via }
    }

    /// The next channel of the rotation towards group `to`, as an intermediate group (`None`:
    /// the direct link); with `skip_direct`, the direct link's turn passes to the next channel.
    fn rotate(&mut self, dragonfly: &Dragonfly, to: GroupId, skip_direct: bool) -> Option<GroupId> {
        let from = dragonfly.group_of(self.router);
        let channels = dragonfly.shape().groups() - 1;
        let pointer = &mut self.pointers[to.index()];
        let mut channel = *pointer % channels;
        *pointer = pointer.wrapping_add(1);
        let mut group = dragonfly.channel_peer_group(from, channel);
        if group == to && skip_direct {
            channel = *pointer % channels;
            *pointer = pointer.wrapping_add(1);
            group = dragonfly.channel_peer_group(from, channel);
        }
        (group != to).then_some(group)
    }

    /// UGAL's comparison between the minimal path and the one through `candidate`: `None`
    /// (minimal) unless the minimal one's cost is the higher.
    fn ugal(
        &self,
        dragonfly: &Dragonfly,
        dst: RouterId,
        candidate: GroupId,
        packet_bytes: u64,
        congestion: &impl Congestion,
    ) -> Option<GroupId> {
        let src = self.router;
        let minimal = PathTag { via: None };
        let detour = PathTag {
            via: Some(candidate),
        };
        let (cost_min, cost_nm) = match self.scheme {
            DragonflyScheme::UgalG => (
                path_delay(dragonfly, src, dst, minimal, packet_bytes, congestion),
                path_delay(dragonfly, src, dst, detour, packet_bytes, congestion),
            ),
            _ => {
                let hops_min = u64::from(dragonfly.minimal_hops(src, dst));
                let hops_nm = u64::from(dragonfly.valiant_hops(src, dst, candidate));
                let view = |tag: PathTag| self.first_queue(dragonfly, dst, tag, congestion);
                (view(minimal) * hops_min, view(detour) * hops_nm)
            }
        };
        (cost_min > cost_nm).then_some(candidate)
    }

    /// The queue the source sees towards a path: its own output queue on the first hop, and
    /// for [`DragonflyScheme::ArfUgal`] also the notified queue of the path's first global
    /// link when another router of the group holds it.
    fn first_queue(
        &self,
        dragonfly: &Dragonfly,
        dst: RouterId,
        mut tag: PathTag,
        congestion: &impl Congestion,
    ) -> u64 {
        let src = self.router;
        let port = next_hop(dragonfly, src, dst, &mut tag).expect("src is not dst");
        let mut queue = congestion.local(port);
        if self.scheme == DragonflyScheme::ArfUgal && dragonfly.channel_of_port(src, port).is_none()
        {
            let from = dragonfly.group_of(src);
            let towards = tag.via.unwrap_or_else(|| dragonfly.group_of(dst));
            queue += congestion.notified(dragonfly.channel_towards(from, towards));
        }
        queue
    }
}

/// The delay UGAL-G estimates for the path `tag` gives from `src` to `dst`: every queue along
/// it plus one packet per hop.
fn path_delay(
    dragonfly: &Dragonfly,
    src: RouterId,
    dst: RouterId,
    mut tag: PathTag,
    packet_bytes: u64,
    congestion: &impl Congestion,
) -> u64 {
    let mut at = src;
    let mut delay = 0;
    while let Some(port) = next_hop(dragonfly, at, dst, &mut tag) {
        delay += congestion.anywhere(at, port) + packet_bytes;
        at = dragonfly.far_end(at, port).expect("a router port").router;
    }
    delay
}

mod router;

pub use router::{
    dscp_tag, tag_dscp, DragonflyRole, DragonflyRouter, RoleError, Route, MAX_TAGGED_GROUPS,
};
