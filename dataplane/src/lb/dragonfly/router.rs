//! A dragonfly router's routing stage in a switch: the [`PathTag`] on the wire and the source's
//! choice made with the switch's own queues.
//!
//! The tag travels in the IPv4 DSCP field: `0` for a minimal packet, `1 + G` for a packet that
//! still has to reach intermediate group `G` (so a fabric the switch routes has at most
//! [`MAX_TAGGED_GROUPS`] groups). The fabric owns the field, as a data centre re-marks DSCP at
//! its edge: the source router writes it on every packet it sends between groups, and the router
//! where a packet enters its intermediate group clears it. A dragonfly router in a real network
//! carries the same bit of state in its own header (Cray's Aries in its routing header, as a
//! virtual-channel class); a software switch forwarding plain IPv4 has DSCP.
//!
//! The stage runs before the route lookup and changes only *which address* is looked up: the
//! destination, or — while the tag names a group — that group's prefix (`10.G.0.0`), whose
//! route is the minimal route towards the group. Everything after it (LPM, TTL, checksum, MAC
//! rewrite, queues) is the switch's ordinary L3 path, and the FIB holds only minimal routes.

use std::net::Ipv4Addr;

use ofan_topology::dragonfly::{GroupId, RouterId, RouterPort};
use ofan_topology::{Dragonfly, DragonflyShape};

use super::{next_hop, Congestion, DragonflyBalancer, DragonflyScheme, PathTag};
use crate::lb::{LbRng, PortLoad};

/// The most groups a tag in the six DSCP bits can name (`1 + G ≤ 63`).
pub const MAX_TAGGED_GROUPS: u32 = 63;

/// A switch's place in a dragonfly and its scheme: what [`DragonflyRouter`] is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DragonflyRole {
    /// The fabric's shape.
    pub shape: DragonflyShape,
    /// This switch's router.
    pub router: RouterId,
    /// The routing scheme of the source decision.
    pub scheme: DragonflyScheme,
}

/// Why a [`DragonflyRole`] cannot route in a switch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    /// More groups than the DSCP tag can name.
    #[error("a dragonfly of {groups} groups: the DSCP path tag names at most {MAX_TAGGED_GROUPS}")]
    TooManyGroups {
        /// The fabric's groups.
        groups: u32,
    },
    /// The router is not in the fabric.
    #[error("router {router} is not in a dragonfly of {routers} routers")]
    NoSuchRouter {
        /// The router asked for.
        router: u32,
        /// The fabric's routers.
        routers: u32,
    },
    /// A scheme a switch cannot run.
    #[error("dragonfly scheme {scheme} needs {needs}: it runs in the model only")]
    ModelOnly {
        /// The scheme.
        scheme: DragonflyScheme,
        /// What the switch lacks.
        needs: &'static str,
    },
}

impl DragonflyRole {
    /// Checks that a switch can route as this role.
    ///
    /// # Errors
    /// More groups than the tag names, a router outside the fabric, `ugal-g` (every router's
    /// queues) or `arf-ugal` (the framework's notifications of a group's global links, which the
    /// switch's notifier does not send on a dragonfly yet).
    pub fn check(self) -> Result<Self, RoleError> {
        let (groups, routers) = (self.shape.groups(), self.shape.routers());
        if groups > MAX_TAGGED_GROUPS {
            return Err(RoleError::TooManyGroups { groups });
        }
        if self.router.0 >= routers {
            return Err(RoleError::NoSuchRouter {
                router: self.router.0,
                routers,
            });
        }
        let needs = match self.scheme {
            DragonflyScheme::UgalG => Some("every router's queues (global knowledge)"),
            DragonflyScheme::ArfUgal => {
                Some("notifications of the group's global-link queues, which switches do not send")
            }
            _ => None,
        };
        match needs {
            Some(needs) => Err(RoleError::ModelOnly {
                scheme: self.scheme,
                needs,
            }),
            None => Ok(self),
        }
    }

    /// Whether the scheme reads the router's egress queues.
    #[must_use]
    pub const fn uses_queues(self) -> bool {
        matches!(
            self.scheme,
            DragonflyScheme::UgalL | DragonflyScheme::UgalRotate
        )
    }
}

/// The DSCP value that carries `tag`.
#[must_use]
pub fn tag_dscp(tag: PathTag) -> u8 {
    tag.via.map_or(0, |group| {
        u8::try_from(group.0 + 1).expect("groups fit the tag: checked by DragonflyRole::check")
    })
}

/// The tag a DSCP value carries in a fabric of `groups` groups (a value naming no group is no
/// tag: the packet goes minimally).
#[must_use]
pub fn dscp_tag(dscp: u8, groups: u32) -> PathTag {
    let via = u32::from(dscp)
        .checked_sub(1)
        .filter(|&group| group < groups);
    PathTag {
        via: via.map(GroupId),
    }
}

/// What the stage decided for one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The address the FIB looks up.
    pub lookup: Ipv4Addr,
    /// The DSCP the packet leaves with.
    pub dscp: u8,
    /// This router sent the packet into the network through an intermediate group.
    pub detoured: bool,
}

/// A dragonfly router's routing stage (see the [module documentation](self)).
#[derive(Debug, Clone)]
pub struct DragonflyRouter {
    fabric: Dragonfly,
    router: RouterId,
    balancer: DragonflyBalancer,
    rng: LbRng,
    uses_queues: bool,
}

impl DragonflyRouter {
    /// The stage of `role` (checked with [`DragonflyRole::check`]); its rotation pointers and
    /// random draws come from `seed`.
    ///
    /// # Errors
    /// As [`DragonflyRole::check`].
    pub fn new(role: DragonflyRole, seed: u64) -> Result<Self, RoleError> {
        let role = role.check()?;
        let fabric = Dragonfly::new(role.shape);
        let mut rng = LbRng::new(seed);
        let balancer = DragonflyBalancer::new(role.scheme, &fabric, role.router, &mut rng);
        Ok(Self {
            fabric,
            router: role.router,
            balancer,
            rng,
            uses_queues: role.uses_queues(),
        })
    }

    /// Routes a packet from `src` to `dst` that arrived with `dscp` (six bits): a packet between
    /// two hosts of the fabric that one of this router's hosts sent gets the scheme's choice,
    /// any other follows its tag. Anything not between two hosts of the fabric (a switch's
    /// address, a loopback) is looked up as it is, its DSCP untouched.
    ///
    /// `loads` are the router's egress queues by up position (router port `p + i` is position
    /// `i`); the choice's first hop is charged `frame_len` in them, as the balancer does, so
    /// that one batch does not pile onto the queue it read as shortest.
    pub fn route(
        &mut self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        dscp: u8,
        frame_len: u32,
        loads: &mut [PortLoad],
    ) -> Route {
        let untouched = Route {
            lookup: dst,
            dscp,
            detoured: false,
        };
        let (Some(from), Some(to)) = (self.fabric.host_by_addr(src), self.fabric.host_by_addr(dst))
        else {
            return untouched;
        };
        let dst_router = self.fabric.router_of(to);
        let mut tag = if self.fabric.router_of(from) == self.router {
            let view = QueueView {
                loads,
                first_up: self.fabric.shape().p(),
            };
            self.balancer.choose(
                &self.fabric,
                dst_router,
                u64::from(frame_len),
                &view,
                &mut self.rng,
            )
        } else {
            dscp_tag(dscp, self.fabric.shape().groups())
        };
        let detoured = tag.via.is_some() && self.fabric.router_of(from) == self.router;
        let port = next_hop(&self.fabric, self.router, dst_router, &mut tag);
        if self.uses_queues {
            if let Some(load) = port
                .and_then(|port| up_position(self.fabric.shape(), port))
                .and_then(|i| loads.get_mut(i))
            {
                load.packets = load.packets.saturating_add(1);
                load.bytes = load.bytes.saturating_add(frame_len);
            }
        }
        Route {
            lookup: match tag.via {
                Some(group) => self.fabric.group_prefix(group).0,
                None => dst,
            },
            dscp: tag_dscp(tag),
            detoured,
        }
    }
}

/// The up position of router port `port` (`None` for a host port).
fn up_position(shape: DragonflyShape, port: RouterPort) -> Option<usize> {
    port.0.checked_sub(shape.p()).map(usize::from)
}

/// The router's own queues, as the balancer asks for them.
struct QueueView<'a> {
    loads: &'a [PortLoad],
    first_up: u16,
}

impl Congestion for QueueView<'_> {
    fn local(&self, port: RouterPort) -> u64 {
        port.0
            .checked_sub(self.first_up)
            .and_then(|i| self.loads.get(usize::from(i)))
            .map_or(0, |load| u64::from(load.bytes))
    }

    fn notified(&self, _channel: u32) -> u64 {
        0
    }

    fn anywhere(&self, _router: RouterId, _port: RouterPort) -> u64 {
        unreachable!("ugal-g is refused by DragonflyRole::check")
    }
}
