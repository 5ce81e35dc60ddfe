//! Dragonfly fabrics (Kim, Dally, Scott and Abts, ISCA 2008) as plain data.
//!
//! A [`Dragonfly`] has `g` groups of `a` routers. Each router has `p` hosts, a local link to
//! every other router of its group (the group is a complete graph) and `h` global links; the
//! `a·h` global links of a group reach the `g − 1 = a·h` other groups, one link per pair of
//! groups, so `g = a·h + 1` (the canonical, maximal dragonfly). The balanced dragonfly of the
//! paper has `a = 2p = 2h` ([`DragonflyShape::balanced`]).
//!
//! Like [`crate::Topology`], this is inert data plus the answers the upper layers share —
//! ports, addresses, destination keys, minimal and Valiant paths, the lower bound of a
//! collective — so that the lab, the switch and the model agree on them. It never touches a
//! network.
//!
//! ## Ids (contract)
//! Groups `0..g`; routers `0..g·a`, router `r` is router `r mod a` of group `⌊r/a⌋`; hosts
//! `0..g·a·p`, host `x` is slot `x mod p` of router `⌊x/p⌋`.
//!
//! ## Global-link arrangement (contract): circulant ("palmtree")
//! The global ports of a group are numbered by *channel* `c = i·h + j` (router index `i` in the
//! group, its global port `j`), `c ∈ 0..a·h`. Channel `c` of group `G` leads to group
//! `(G + c + 1) mod g` and lands on that group's channel `g − 2 − c`: the link between `G` and
//! `G' = G + d` (`d ∈ 1..g`) is channel `d − 1` on `G`'s side and channel `g − 1 − d` on the
//! other. This is the circulant arrangement that Camarero, Vallejo and Beivide (2014) call
//! *palmtree*; it is symmetric under rotating the groups, so every group sees the same
//! network. The adversarial pattern "group `G` sends to `G + 1`" therefore uses channel 0 of
//! every group — router 0, global port 0 — for its minimal path.
//!
//! ## Port numbering (contract)
//! On router `i` of a group, with radix `k = p + (a − 1) + h`:
//!
//! | Ports | Peer |
//! | --- | --- |
//! | `0..p` | hosts, in slot order |
//! | `p..p + a − 1` | the other routers of the group in index order, skipping `i` |
//! | `p + a − 1..k` | global channels `i·h .. i·h + h − 1` |
//!
//! Router-to-router links ([`Dragonfly::links`]) are numbered: local links in (group, lower
//! index, higher index) order, then global links in (lower group, channel) order.
//!
//! ## Addressing plan (contract)
//!
//! | What | Address |
//! | --- | --- |
//! | host in slot `s` of router `i` of group `G` | `10.G.i.(2s+1)/31` |
//! | that router's port towards it | `10.G.i.(2s)/31` |
//! | destination prefix of router `i` of group `G` | `10.G.i.0/24` |
//! | destination prefix of group `G` | `10.G.0.0/16` |
//! | router-to-router link `n`, lower end / upper end | `100.64.0.0 + 2n` / `+ 2n + 1`, `/31` |
//! | loopback of router `r` | `10.255.⌊r/256⌋.(r mod 256)/32` |
//!
//! Hence `g ≤ 255` (group 255 would collide with the loopbacks), `a ≤ 256` and `p ≤ 128`.
//!
//! ## Paths
//! A minimal path goes local–global–local: at most three router-to-router hops, exactly one
//! of them global when the groups differ; with one global link per pair of groups it is unique
//! ([`Dragonfly::minimal_path`]). A Valiant path goes minimally to an intermediate group and
//! from there minimally to the destination: at most five hops, two of them global
//! ([`Dragonfly::valiant_path`]). [`Dragonfly::next_port`] is the per-hop form both reduce to:
//! the port a router sends a packet on towards a router, or towards a group first.

use std::fmt;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use crate::error::TopologyError;
use crate::routing::DestKey;
use crate::timing::LinkParams;

/// A group of a dragonfly: `0..g`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct GroupId(pub u32);

/// A router of a dragonfly: `0..g·a`, router `r mod a` of group `⌊r/a⌋`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RouterId(pub u32);

/// A host of a dragonfly: `0..g·a·p`, slot `x mod p` of router `⌊x/p⌋`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct HostId(pub u32);

/// A port of a dragonfly router (numbering in the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RouterPort(pub u16);

impl GroupId {
    /// The id as an index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl RouterId {
    /// The id as an index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl HostId {
    /// The id as an index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl RouterPort {
    /// The port as an index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.0)
    }
}

impl fmt::Display for RouterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "router {}", self.0)
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host {}", self.0)
    }
}

/// The three parameters of a dragonfly, validated: `p` hosts per router, `a` routers per group,
/// `h` global links per router.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "RawShape", into = "RawShape")]
pub struct DragonflyShape {
    p: u16,
    a: u16,
    h: u16,
}

#[derive(Serialize, Deserialize)]
struct RawShape {
    p: u16,
    a: u16,
    h: u16,
}

impl TryFrom<RawShape> for DragonflyShape {
    type Error = TopologyError;
    fn try_from(raw: RawShape) -> Result<Self, TopologyError> {
        Self::new(raw.p, raw.a, raw.h)
    }
}

impl From<DragonflyShape> for RawShape {
    fn from(shape: DragonflyShape) -> Self {
        Self {
            p: shape.p,
            a: shape.a,
            h: shape.h,
        }
    }
}

/// The largest number of groups the addressing plan holds (`10.G.…`, `G < 255`).
pub const MAX_GROUPS: u32 = 255;
/// The largest number of routers per group (`10.G.i.…`, `i < 256`).
pub const MAX_ROUTERS_PER_GROUP: u16 = 256;
/// The largest number of hosts per router (`10.G.i.(2s+1)`, `s < 128`).
pub const MAX_HOSTS_PER_ROUTER: u16 = 128;

impl DragonflyShape {
    /// Validates `p`, `a` and `h`.
    ///
    /// # Errors
    /// [`TopologyError::DragonflyParameter`] naming the first parameter that is out of range:
    /// each must be at least 1, `p ≤ 128`, `a ≤ 256` and `g = a·h + 1 ≤ 255`.
    pub fn new(p: u16, a: u16, h: u16) -> Result<Self, TopologyError> {
        let refuse = |name: &'static str, value: u32, reason: String| {
            Err(TopologyError::DragonflyParameter {
                name,
                value,
                reason,
            })
        };
        if p == 0 || p > MAX_HOSTS_PER_ROUTER {
            return refuse(
                "p",
                p.into(),
                format!("hosts per router must be in 1..={MAX_HOSTS_PER_ROUTER} (addresses 10.G.i.(2s+1))"),
            );
        }
        if a == 0 || a > MAX_ROUTERS_PER_GROUP {
            return refuse(
                "a",
                a.into(),
                format!(
                    "routers per group must be in 1..={MAX_ROUTERS_PER_GROUP} (addresses 10.G.i.x)"
                ),
            );
        }
        if h == 0 {
            return refuse(
                "h",
                0,
                "global links per router must be at least 1 (groups must be connected)".into(),
            );
        }
        let groups = u32::from(a) * u32::from(h) + 1;
        if groups > MAX_GROUPS {
            return refuse(
                "h",
                h.into(),
                format!(
                    "a·h + 1 = {groups} groups with a = {a}, more than the {MAX_GROUPS} the addressing plan holds (10.G.…)"
                ),
            );
        }
        Ok(Self { p, a, h })
    }

    /// The balanced dragonfly of Kim et al.: `a = 2p`, `h = p`.
    ///
    /// # Errors
    /// As [`DragonflyShape::new`].
    pub fn balanced(p: u16) -> Result<Self, TopologyError> {
        Self::new(p, p.saturating_mul(2), p)
    }

    /// Hosts per router.
    #[must_use]
    pub const fn p(self) -> u16 {
        self.p
    }

    /// Routers per group.
    #[must_use]
    pub const fn a(self) -> u16 {
        self.a
    }

    /// Global links per router.
    #[must_use]
    pub const fn h(self) -> u16 {
        self.h
    }

    /// Number of groups, `a·h + 1`.
    #[must_use]
    pub const fn groups(self) -> u32 {
        self.a as u32 * self.h as u32 + 1
    }

    /// Number of routers, `g·a`.
    #[must_use]
    pub const fn routers(self) -> u32 {
        self.groups() * self.a as u32
    }

    /// Number of hosts, `g·a·p`.
    #[must_use]
    pub const fn hosts(self) -> u32 {
        self.routers() * self.p as u32
    }

    /// Router radix, `p + (a − 1) + h`.
    #[must_use]
    pub const fn radix(self) -> u16 {
        self.p + self.a - 1 + self.h
    }
}

impl fmt::Display for DragonflyShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dragonfly p={} a={} h={} ({} groups, {} routers, {} hosts)",
            self.p,
            self.a,
            self.h,
            self.groups(),
            self.routers(),
            self.hosts()
        )
    }
}

/// Kind of a router-to-router link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkClass {
    /// Between two routers of one group.
    Local,
    /// Between two groups.
    Global,
}

/// One end of a router-to-router link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkEnd {
    /// The router.
    pub router: RouterId,
    /// Its port.
    pub port: RouterPort,
}

/// A router-to-router link; `a` is the lower end (lower router id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RouterLink {
    /// Local or global.
    pub class: LinkClass,
    /// Lower end.
    pub a: LinkEnd,
    /// Upper end.
    pub b: LinkEnd,
}

/// What a router port is attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortPeer {
    /// A host.
    Host(HostId),
    /// A router of the same group.
    Local(RouterId),
    /// A router of another group, over the group's global channel `channel`.
    Global {
        /// The router at the far end.
        router: RouterId,
        /// The channel of this group the port is.
        channel: u32,
    },
}

/// A dragonfly fabric: its shape and its router-to-router links (everything else follows
/// from the arithmetic in the module documentation, and the tests hold the two equal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dragonfly {
    shape: DragonflyShape,
    links: Vec<RouterLink>,
}

impl Dragonfly {
    /// Builds the dragonfly of `shape`.
    #[must_use]
    pub fn new(shape: DragonflyShape) -> Self {
        let mut dragonfly = Self {
            shape,
            links: Vec::new(),
        };
        let (groups, a) = (shape.groups(), u32::from(shape.a));
        let mut links = Vec::new();
        for group in 0..groups {
            for low in 0..a {
                for high in low + 1..a {
                    let (x, y) = (RouterId(group * a + low), RouterId(group * a + high));
                    links.push(RouterLink {
                        class: LinkClass::Local,
                        a: LinkEnd {
                            router: x,
                            port: dragonfly.local_port(x, y),
                        },
                        b: LinkEnd {
                            router: y,
                            port: dragonfly.local_port(y, x),
                        },
                    });
                }
            }
        }
        for group in 0..groups {
            for channel in 0..groups - 1 {
                let peer_group = (group + channel + 1) % groups;
                if peer_group < group {
                    continue;
                }
                let (here, there) = (
                    dragonfly.channel_end(GroupId(group), channel),
                    dragonfly.channel_end(GroupId(peer_group), groups - 2 - channel),
                );
                links.push(RouterLink {
                    class: LinkClass::Global,
                    a: here,
                    b: there,
                });
            }
        }
        dragonfly.links = links;
        dragonfly
    }

    /// The shape.
    #[must_use]
    pub const fn shape(&self) -> DragonflyShape {
        self.shape
    }

    /// The router-to-router links, numbered as in the module documentation.
    #[must_use]
    pub fn links(&self) -> &[RouterLink] {
        &self.links
    }

    /// The group of `router`.
    #[must_use]
    pub const fn group_of(&self, router: RouterId) -> GroupId {
        GroupId(router.0 / self.shape.a as u32)
    }

    /// The index of `router` within its group.
    #[must_use]
    pub const fn index_in_group(&self, router: RouterId) -> u32 {
        router.0 % self.shape.a as u32
    }

    /// Router `index` of `group`.
    #[must_use]
    pub const fn router(&self, group: GroupId, index: u32) -> RouterId {
        RouterId(group.0 * self.shape.a as u32 + index)
    }

    /// The router `host` hangs off.
    #[must_use]
    pub const fn router_of(&self, host: HostId) -> RouterId {
        RouterId(host.0 / self.shape.p as u32)
    }

    /// The group of `host`.
    #[must_use]
    pub const fn group_of_host(&self, host: HostId) -> GroupId {
        self.group_of(self.router_of(host))
    }

    /// The router port towards `host` (its slot), which must hang off that router.
    #[must_use]
    pub const fn host_port(&self, host: HostId) -> RouterPort {
        RouterPort((host.0 % self.shape.p as u32) as u16)
    }

    /// The port of `router` towards `peer`, another router of its group.
    ///
    /// # Panics
    /// If `peer` is `router` or in another group.
    #[must_use]
    pub fn local_port(&self, router: RouterId, peer: RouterId) -> RouterPort {
        assert!(
            router != peer && self.group_of(router) == self.group_of(peer),
            "{peer} is not a local peer of {router}"
        );
        let (mine, theirs) = (self.index_in_group(router), self.index_in_group(peer));
        let slot = if theirs < mine { theirs } else { theirs - 1 };
        RouterPort(self.shape.p + slot as u16)
    }

    /// The channel of `from` whose global link leads to `to` (`to ≠ from`).
    #[must_use]
    pub const fn channel_towards(&self, from: GroupId, to: GroupId) -> u32 {
        let groups = self.shape.groups();
        (to.0 + groups - from.0) % groups - 1
    }

    /// The group channel `channel` of `group` leads to.
    #[must_use]
    pub const fn channel_peer_group(&self, group: GroupId, channel: u32) -> GroupId {
        GroupId((group.0 + channel + 1) % self.shape.groups())
    }

    /// The router and port of channel `channel` of `group`.
    #[must_use]
    pub const fn channel_end(&self, group: GroupId, channel: u32) -> LinkEnd {
        let h = self.shape.h as u32;
        LinkEnd {
            router: self.router(group, channel / h),
            port: RouterPort(self.shape.p + self.shape.a - 1 + (channel % h) as u16),
        }
    }

    /// The router of `from` that holds the global link to `to` and its port on it (`to ≠ from`).
    #[must_use]
    pub const fn gateway(&self, from: GroupId, to: GroupId) -> LinkEnd {
        self.channel_end(from, self.channel_towards(from, to))
    }

    /// What port `port` of `router` is attached to, or `None` past the radix.
    #[must_use]
    pub fn peer(&self, router: RouterId, port: RouterPort) -> Option<PortPeer> {
        let (p, a, h) = (self.shape.p, self.shape.a, self.shape.h);
        let index = port.0;
        if index < p {
            return Some(PortPeer::Host(HostId(
                router.0 * u32::from(p) + u32::from(index),
            )));
        }
        if index < p + a - 1 {
            let slot = u32::from(index - p);
            let mine = self.index_in_group(router);
            let theirs = if slot < mine { slot } else { slot + 1 };
            return Some(PortPeer::Local(self.router(self.group_of(router), theirs)));
        }
        if index < p + a - 1 + h {
            let group = self.group_of(router);
            let channel = self.index_in_group(router) * u32::from(h) + u32::from(index - p - a + 1);
            let far_group = self.channel_peer_group(group, channel);
            let far = self.channel_end(far_group, self.shape.groups() - 2 - channel);
            return Some(PortPeer::Global {
                router: far.router,
                channel,
            });
        }
        None
    }

    /// The global channel port `port` of `router` is, if it is a global port.
    #[must_use]
    pub fn channel_of_port(&self, router: RouterId, port: RouterPort) -> Option<u32> {
        match self.peer(router, port)? {
            PortPeer::Global { channel, .. } => Some(channel),
            PortPeer::Host(_) | PortPeer::Local(_) => None,
        }
    }

    /// The far end of the link on `port` of `router`: the router and its port, or `None` for a
    /// host port or a port past the radix.
    #[must_use]
    pub fn far_end(&self, router: RouterId, port: RouterPort) -> Option<LinkEnd> {
        match self.peer(router, port)? {
            PortPeer::Host(_) => None,
            PortPeer::Local(peer) => Some(LinkEnd {
                router: peer,
                port: self.local_port(peer, router),
            }),
            PortPeer::Global { channel, .. } => {
                let groups = self.shape.groups();
                let far_group = self.channel_peer_group(self.group_of(router), channel);
                Some(self.channel_end(far_group, groups - 2 - channel))
            }
        }
    }

    /// The port `router` forwards on to bring a packet minimally towards `target`: into
    /// `target`'s group first, then to `target`; `None` at `target` itself (the packet leaves
    /// on a host port there).
    #[must_use]
    pub fn next_port(&self, router: RouterId, target: RouterId) -> Option<RouterPort> {
        if router == target {
            return None;
        }
        let (here, there) = (self.group_of(router), self.group_of(target));
        if here == there {
            return Some(self.local_port(router, target));
        }
        Some(self.next_port_to_group(router, there))
    }

    /// The port `router` forwards on to bring a packet minimally into group `to` (another
    /// group): its global port to `to`, or the local port to the router that has it.
    #[must_use]
    pub fn next_port_to_group(&self, router: RouterId, to: GroupId) -> RouterPort {
        let gateway = self.gateway(self.group_of(router), to);
        if gateway.router == router {
            gateway.port
        } else {
            self.local_port(router, gateway.router)
        }
    }

    /// The minimal router path from `src` to `dst`, both ends included: local–global–local,
    /// at most three hops (four routers). Unique, as every pair of groups has one global link.
    #[must_use]
    pub fn minimal_path(&self, src: RouterId, dst: RouterId) -> Vec<RouterId> {
        let mut path = vec![src];
        let mut at = src;
        while let Some(port) = self.next_port(at, dst) {
            at = self.far_end(at, port).expect("a router port").router;
            path.push(at);
        }
        path
    }

    /// Number of router-to-router hops of the minimal path.
    #[must_use]
    pub fn minimal_hops(&self, src: RouterId, dst: RouterId) -> u32 {
        let (here, there) = (self.group_of(src), self.group_of(dst));
        if src == dst {
            return 0;
        }
        if here == there {
            return 1;
        }
        let out = self.gateway(here, there);
        let into = self.gateway(there, here);
        1 + u32::from(out.router != src) + u32::from(into.router != dst)
    }

    /// The Valiant path from `src` to `dst` through group `via`: minimally into `via` (to the
    /// router its global link from `src`'s group lands on), then minimally to `dst`. At most
    /// five hops, two of them global.
    ///
    /// # Errors
    /// [`TopologyError::DragonflyParameter`] (`via`) if `via` is the group of `src` or `dst`, or
    /// does not exist.
    pub fn valiant_path(
        &self,
        src: RouterId,
        dst: RouterId,
        via: GroupId,
    ) -> Result<Vec<RouterId>, TopologyError> {
        if via.0 >= self.shape.groups() || via == self.group_of(src) || via == self.group_of(dst) {
            return Err(TopologyError::DragonflyParameter {
                name: "via",
                value: via.0,
                reason: format!(
                    "an intermediate group must exist and differ from the source's ({}) and the destination's ({})",
                    self.group_of(src).0,
                    self.group_of(dst).0
                ),
            });
        }
        let mut path = vec![src];
        let mut at = src;
        while self.group_of(at) != via {
            let port = self.next_port_to_group(at, via);
            at = self.far_end(at, port).expect("a router port").router;
            path.push(at);
        }
        while let Some(port) = self.next_port(at, dst) {
            at = self.far_end(at, port).expect("a router port").router;
            path.push(at);
        }
        Ok(path)
    }

    /// Number of router-to-router hops of the Valiant path through `via` (a group other than
    /// both ends').
    #[must_use]
    pub fn valiant_hops(&self, src: RouterId, dst: RouterId, via: GroupId) -> u32 {
        let landing = self.gateway(via, self.group_of(src)).router;
        self.minimal_hops(src, landing) + self.minimal_hops(landing, dst)
    }

    /// Ofan's destination key at `router` for a packet to `dst`: a router of the own group is
    /// keyed by its index (`0..a`), another group by `a + group` — per destination group is the
    /// granularity a dragonfly router's choice depends on. Keys are dense in
    /// `0..`[`Dragonfly::dest_key_count`].
    #[must_use]
    pub fn dest_key(&self, router: RouterId, dst: HostId) -> DestKey {
        let target = self.router_of(dst);
        if self.group_of(target) == self.group_of(router) {
            DestKey(self.index_in_group(target))
        } else {
            DestKey(u32::from(self.shape.a) + self.group_of(target).0)
        }
    }

    /// Number of destination keys of every router, `a + g`.
    #[must_use]
    pub const fn dest_key_count(&self) -> u32 {
        self.shape.a as u32 + self.shape.groups()
    }

    /// Address of `host`.
    #[must_use]
    pub fn host_address(&self, host: HostId) -> Ipv4Addr {
        let router = self.router_of(host);
        let slot = host.0 % u32::from(self.shape.p);
        Ipv4Addr::new(
            10,
            octet(self.group_of(router).0),
            octet(self.index_in_group(router)),
            octet(2 * slot + 1),
        )
    }

    /// Address of `router`'s port towards `host` (the router's end of the host link).
    #[must_use]
    pub fn host_gateway_address(&self, host: HostId) -> Ipv4Addr {
        let address = u32::from(self.host_address(host));
        Ipv4Addr::from(address - 1)
    }

    /// The `/24` destination prefix of `router` (all its hosts).
    #[must_use]
    pub fn router_prefix(&self, router: RouterId) -> (Ipv4Addr, u8) {
        (
            Ipv4Addr::new(
                10,
                octet(self.group_of(router).0),
                octet(self.index_in_group(router)),
                0,
            ),
            24,
        )
    }

    /// The `/16` destination prefix of `group` (all its hosts).
    #[must_use]
    pub fn group_prefix(&self, group: GroupId) -> (Ipv4Addr, u8) {
        (Ipv4Addr::new(10, octet(group.0), 0, 0), 16)
    }

    /// Address of the `upper` (or lower) end of router-to-router link number `link`.
    #[must_use]
    pub fn link_address(&self, link: usize, upper: bool) -> Ipv4Addr {
        let base = u32::from(Ipv4Addr::new(100, 64, 0, 0));
        Ipv4Addr::from(base + 2 * link as u32 + u32::from(upper))
    }

    /// Loopback of `router`.
    #[must_use]
    pub fn loopback(&self, router: RouterId) -> Ipv4Addr {
        Ipv4Addr::new(10, 255, octet(router.0 >> 8), octet(router.0 & 0xff))
    }

    /// The host an address belongs to, if it is a host address of this dragonfly.
    #[must_use]
    pub fn host_by_addr(&self, address: Ipv4Addr) -> Option<HostId> {
        let [ten, group, index, last] = address.octets();
        let (group, index, last) = (u32::from(group), u32::from(index), u32::from(last));
        let fits = ten == 10
            && group < self.shape.groups()
            && index < u32::from(self.shape.a)
            && last % 2 == 1
            && last / 2 < u32::from(self.shape.p);
        fits.then(|| {
            let router = self.router(GroupId(group), index);
            HostId(router.0 * u32::from(self.shape.p) + last / 2)
        })
    }

    /// A lower bound on the completion time of a collective of `flows` (source, destination,
    /// payload bytes), for store-and-forward routers and hosts sending at line rate, whatever
    /// the routing: the busiest of (a host's link out, a host's link in, a group's `a·h`
    /// global links out, a group's global links in) must carry its wire bytes at line rate,
    /// and the last of them still has to reach its host — at least the latency of the shortest
    /// flow's minimal path minus one serialization.
    #[must_use]
    pub fn collective_lower_bound_ps(
        &self,
        params: &LinkParams,
        flows: &[(HostId, HostId, u64)],
    ) -> u64 {
        let payload = u64::from(params.payload_bytes.max(1));
        let overhead = u64::from(params.header_bytes) + u64::from(params.gap_bytes);
        let wire = |bytes: u64| bytes + bytes.div_ceil(payload) * overhead;
        let (hosts, groups) = (self.shape.hosts() as usize, self.shape.groups() as usize);
        let mut host_out = vec![0u64; hosts];
        let mut host_in = vec![0u64; hosts];
        let mut group_out = vec![0u64; groups];
        let mut group_in = vec![0u64; groups];
        let mut shortest_links: Option<u64> = None;
        let mut smallest_last_packet = payload;
        for &(src, dst, bytes) in flows {
            if bytes == 0 || src == dst {
                continue;
            }
            let last = bytes % payload;
            smallest_last_packet = smallest_last_packet.min(if last == 0 { payload } else { last });
            let bytes = wire(bytes);
            host_out[src.index()] += bytes;
            host_in[dst.index()] += bytes;
            let (from, to) = (self.group_of_host(src), self.group_of_host(dst));
            if from != to {
                group_out[from.index()] += bytes;
                group_in[to.index()] += bytes;
            }
            let links = 2 + u64::from(self.minimal_hops(self.router_of(src), self.router_of(dst)));
            shortest_links = Some(shortest_links.map_or(links, |s| s.min(links)));
        }
        let Some(links) = shortest_links else {
            return 0;
        };
        let global = u64::from(self.shape.a) * u64::from(self.shape.h);
        let busiest = [
            host_out.iter().max().copied().unwrap_or(0),
            host_in.iter().max().copied().unwrap_or(0),
            group_out
                .iter()
                .max()
                .copied()
                .unwrap_or(0)
                .div_ceil(global),
            group_in.iter().max().copied().unwrap_or(0).div_ceil(global),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let packet = params.serialization_ps(smallest_last_packet + overhead);
        params.serialization_ps(busiest) + (links - 1) * packet + links * params.propagation_ps
    }
}

fn octet(value: u32) -> u8 {
    u8::try_from(value).expect("the addressing plan's dimensions are validated")
}
