//! The forwarding table the workers read.
//!
//! # Contract
//! - A [`Fib`] is built whole on the control side with a [`FibBuilder`], which validates
//!   everything once ([`FibError`]); the result is immutable. Workers read it through an
//!   `Arc<Fib>` that the control plane replaces whole ([`SharedFib`], `arc-swap`): a worker loads
//!   the current table once per batch and never sees a half-updated one.
//! - Every lookup is allocation-free and lock-free: longest-prefix match for IPv4 and IPv6
//!   routes and for destination keys (per-length hash tables, see `lpm`), an exact match for the
//!   switch's own addresses. All three are answered by one walk ([`Fib::destination`]) over a
//!   table of the union of the three prefix sets, each entry holding the answers for its prefix
//!   (see [`Destination`]).
//! - Ports are `PortId(0..n)` (dense: an index into the switch's port list). The Up ports carry
//!   their position among the Up ports, `0..w`, which is what the bits of a [`PortMask`] mean.
//! - A route leads to a next-hop [`Group`] (1..=64 hops), to the switch itself, or nowhere.
//!   Each group is precomputed: its [`GroupKind`] (a *northbound choice* is ≥ 2 hops, all on
//!   Up ports — the only place the load balancer decides), the hops that are usable right now
//!   (port operationally up and neighbour MAC resolved) as a hop bitmask and, for northbound
//!   groups, as a [`PortMask`] over up-positions with a map back from up-position to hop.
//!   A change of port state or neighbour means a new table.

mod lpm;

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::lb::{DestKey, PortMask, UpPort, MAX_PORTS};
use crate::wire::MacAddr;
use lpm::Lpm;

/// The table as workers share it: the control plane stores a new `Arc<Fib>`, workers
/// `load()` once per batch.
pub type SharedFib = arc_swap::ArcSwap<Fib>;

/// A port of the switch: an index into its port list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub u16);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port {}", self.0)
    }
}

/// Where a port leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortRole {
    /// To a host.
    Host,
    /// Down the tree, to a switch of the tier below.
    Down,
    /// Up the tree, to a switch of the tier above: the ports the load balancer chooses among.
    Up,
}

/// One port of the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    /// Kernel interface index.
    pub ifindex: u32,
    /// The port's MAC address (the source MAC of the frames it sends).
    pub mac: MacAddr,
    /// Where the port leads.
    pub role: PortRole,
    /// Position among the Up ports (`0..w`); `Some` exactly for Up ports.
    pub up_position: Option<u8>,
    /// Operational state (carrier up and interface up).
    pub oper_up: bool,
}

/// A next-hop group: an index into the table's groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u32);

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.0)
    }
}

/// One next hop of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextHop {
    /// The egress port.
    pub port: PortId,
    /// The neighbour's address (a host or the next switch).
    pub gateway: IpAddr,
    /// The neighbour's MAC address; `None` while the neighbour is unresolved.
    pub mac: Option<MacAddr>,
}

/// What a route leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteTarget {
    /// Forward to one of the group's next hops.
    Group(GroupId),
    /// To the switch itself (the kernel).
    Local,
    /// Blackhole or prohibit: drop.
    Unreachable,
}

/// Everything the forwarding path needs to know of a destination address, from one
/// longest-prefix walk ([`Fib::destination`]).
///
/// The table behind it holds every route prefix, key prefix and local address, each entry with
/// the longest route, the longest key prefix and the local address that contain *its prefix*.
/// That is the answer for every address whose longest entry it is: a route or key prefix that
/// contains such an address is no longer than the entry (else it would be the longer entry), so
/// it contains the entry's whole prefix too; and a local address is a full-length entry of its
/// own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Destination {
    /// The target of the longest route prefix containing the address ([`Fib::route`]).
    pub route: Option<RouteTarget>,
    /// The key of the longest key prefix containing it ([`Fib::dest_key`]).
    pub key: Option<DestKey>,
    /// Whether it is one of the switch's addresses ([`Fib::is_local`]).
    pub local: bool,
}

/// The most hops one group may have (hop sets are 64-bit masks).
pub const MAX_GROUP_HOPS: usize = 64;

/// What kind of choice a group's hops are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupKind {
    /// One hop: no choice (southbound, or a single uplink).
    Single,
    /// Several hops not all on Up ports: plain ECMP on the flow hash.
    Ecmp,
    /// At least two hops, all on distinct Up ports: the load balancer chooses.
    Northbound,
}

/// "No hop" in [`Group::hop_at_up`].
const NO_HOP: u8 = u8::MAX;

/// A next-hop group with its precomputed state.
#[derive(Clone)]
pub struct Group {
    hops: Box<[NextHop]>,
    kind: GroupKind,
    /// Bit `i`: hop `i` is usable (port up, MAC resolved).
    usable: u64,
    /// Bit `i`: hop `i`'s port is operationally up.
    port_up: u64,
    /// Northbound: the up-positions of the usable hops.
    up_mask: PortMask,
    /// Northbound: up-position → hop index ([`NO_HOP`] if the position is not in the group).
    hop_at_up: [u8; MAX_PORTS],
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("kind", &self.kind)
            .field("hops", &self.hops)
            .field("usable", &format_args!("{:#x}", self.usable))
            .field("up_mask", &self.up_mask)
            .finish()
    }
}

impl Group {
    /// The hops, in the order they were given.
    pub fn hops(&self) -> &[NextHop] {
        &self.hops
    }

    /// Hop `index`.
    #[inline]
    pub fn hop(&self, index: usize) -> Option<&NextHop> {
        self.hops.get(index)
    }

    /// What kind of choice the group is.
    #[inline]
    pub fn kind(&self) -> GroupKind {
        self.kind
    }

    /// The usable hops (port up and MAC resolved), bit `i` = hop `i`.
    #[inline]
    pub fn usable_hops(&self) -> u64 {
        self.usable
    }

    /// The hops whose port is operationally up (resolved or not), bit `i` = hop `i`.
    #[inline]
    pub fn port_up_hops(&self) -> u64 {
        self.port_up
    }

    /// For a northbound group, the up-positions of its usable hops (the `valid` mask of the
    /// load balancer); empty for other kinds.
    #[inline]
    pub fn up_mask(&self) -> PortMask {
        self.up_mask
    }

    /// For a northbound group, the hop on up-position `port`.
    #[inline]
    pub fn hop_at_up(&self, port: UpPort) -> Option<&NextHop> {
        let index = *self.hop_at_up.get(usize::from(port.0))?;
        self.hops.get(usize::from(index))
    }

    /// For a northbound group, the index (in [`hops`](Self::hops)) of the hop on up-position
    /// `port`; `None` if the position is not in the group.
    #[inline]
    pub fn hop_index_at_up(&self, port: UpPort) -> Option<u8> {
        self.hop_at_up
            .get(usize::from(port.0))
            .copied()
            .filter(|&index| index != NO_HOP)
    }

    /// A usable hop chosen by `hash` (uniform over the usable hops for a uniform hash); `None`
    /// if no hop is usable.
    #[inline]
    pub fn hop_by_hash(&self, hash: u32) -> Option<&NextHop> {
        let count = self.usable.count_ones();
        if count == 0 {
            return None;
        }
        let rank = ((u64::from(hash) * u64::from(count)) >> 32) as u32;
        self.hops.get(usize::from(PortMask(self.usable).nth(rank)))
    }
}

/// An IPv4 or IPv6 prefix with no host bits set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

/// Errors in a prefix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Longer than the address.
    #[error("prefix length {len} is longer than the {max} bits of the address")]
    LengthTooLong {
        /// What was asked for.
        len: u8,
        /// 32 or 128.
        max: u8,
    },
    /// Bits set past the prefix length.
    #[error("{addr}/{len} has host bits set")]
    HostBitsSet {
        /// The address.
        addr: IpAddr,
        /// The length.
        len: u8,
    },
    /// Not `address/length` or `address`.
    #[error("`{text}` is not a prefix (expected address/length)")]
    Syntax {
        /// What was given.
        text: String,
    },
}

impl IpPrefix {
    /// A prefix of `len` bits.
    ///
    /// # Errors
    /// [`PrefixError::LengthTooLong`] past 32 (IPv4) or 128 (IPv6) bits,
    /// [`PrefixError::HostBitsSet`] if `addr` has bits set past `len`.
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, PrefixError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(PrefixError::LengthTooLong { len, max });
        }
        let host_bits = match addr {
            IpAddr::V4(v4) => v4.to_bits() & !<u32 as lpm::LpmBits>::prefix_mask(len) != 0,
            IpAddr::V6(v6) => v6.to_bits() & !<u128 as lpm::LpmBits>::prefix_mask(len) != 0,
        };
        if host_bits {
            return Err(PrefixError::HostBitsSet { addr, len });
        }
        Ok(Self { addr, len })
    }

    /// The prefix of one address (/32 or /128).
    pub fn host(addr: IpAddr) -> Self {
        Self {
            addr,
            len: if addr.is_ipv4() { 32 } else { 128 },
        }
    }

    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.len
    }

    /// Whether this is a default route (length 0).
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// Whether `addr` is inside the prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                a.to_bits() & <u32 as lpm::LpmBits>::prefix_mask(self.len) == net.to_bits()
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                a.to_bits() & <u128 as lpm::LpmBits>::prefix_mask(self.len) == net.to_bits()
            }
            _ => false,
        }
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for IpPrefix {
    type Err = PrefixError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || PrefixError::Syntax {
            text: text.to_owned(),
        };
        match text.split_once('/') {
            Some((addr, len)) => Self::new(
                addr.parse().map_err(|_| syntax())?,
                len.parse().map_err(|_| syntax())?,
            ),
            None => Ok(Self::host(text.parse().map_err(|_| syntax())?)),
        }
    }
}

/// Errors found when building a [`Fib`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    /// The same port id twice.
    #[error("{port} is defined twice")]
    DuplicatePort {
        /// The port.
        port: PortId,
    },
    /// Port ids must be `0..n`.
    #[error("{missing} is not defined, but the switch has {ports} ports (ids must be 0..{ports})")]
    PortIdGap {
        /// The first missing id.
        missing: PortId,
        /// Number of ports defined.
        ports: usize,
    },
    /// An Up port without its up-position.
    #[error("{port} is an Up port without an up-position")]
    MissingUpPosition {
        /// The port.
        port: PortId,
    },
    /// An up-position on a Host or Down port.
    #[error("{port} is a {role:?} port but has an up-position")]
    UnexpectedUpPosition {
        /// The port.
        port: PortId,
        /// Its role.
        role: PortRole,
    },
    /// More Up ports than a [`PortMask`] holds.
    #[error("{up_ports} Up ports, at most {max} are supported")]
    TooManyUpPorts {
        /// Number of Up ports.
        up_ports: usize,
        /// [`MAX_PORTS`].
        max: usize,
    },
    /// Two Up ports on one position.
    #[error("{first} and {second} both have up-position {position}")]
    DuplicateUpPosition {
        /// The position.
        position: u8,
        /// One port.
        first: PortId,
        /// The other.
        second: PortId,
    },
    /// Up-positions must be `0..w`.
    #[error("{port} has up-position {position}, but there are {up_ports} Up ports (positions must be 0..{up_ports})")]
    UpPositionOutOfRange {
        /// The port.
        port: PortId,
        /// Its position.
        position: u8,
        /// Number of Up ports.
        up_ports: usize,
    },
    /// A group without hops.
    #[error("{group} has no hops")]
    EmptyGroup {
        /// The group.
        group: GroupId,
    },
    /// A group with more than [`MAX_GROUP_HOPS`] hops.
    #[error("{group} has {hops} hops, at most {max} are supported")]
    GroupTooLarge {
        /// The group.
        group: GroupId,
        /// Its number of hops.
        hops: usize,
        /// [`MAX_GROUP_HOPS`].
        max: usize,
    },
    /// A hop on a port that is not defined.
    #[error("{group} has a hop on {port}, which is not defined")]
    HopOnMissingPort {
        /// The group.
        group: GroupId,
        /// The port.
        port: PortId,
    },
    /// A group of Up hops that uses one Up port twice.
    #[error("{group} uses up-position {position} ({port}) twice")]
    RepeatedUpPort {
        /// The group.
        group: GroupId,
        /// The position.
        position: u8,
        /// The port.
        port: PortId,
    },
    /// A route to a group that does not exist.
    #[error("route {prefix} leads to {group}, which does not exist")]
    MissingGroup {
        /// The route.
        prefix: IpPrefix,
        /// The group.
        group: GroupId,
    },
    /// The same route prefix twice.
    #[error("route {prefix} is defined twice")]
    DuplicateRoute {
        /// The prefix.
        prefix: IpPrefix,
    },
    /// The same key prefix twice.
    #[error("destination key prefix {prefix} is defined twice")]
    DuplicateKeyPrefix {
        /// The prefix.
        prefix: IpPrefix,
    },
    /// A key outside `0..dest_keys`.
    #[error("{prefix} has destination key {key}, but there are {dest_keys} keys")]
    KeyOutOfRange {
        /// The prefix.
        prefix: IpPrefix,
        /// Its key.
        key: u32,
        /// The key count set with [`FibBuilder::dest_keys`].
        dest_keys: u32,
    },
}

/// The forwarding table: ports, next-hop groups, routes, destination keys, local addresses.
#[derive(Debug, Clone)]
pub struct Fib {
    ports: Box<[Port]>,
    /// up-position → port.
    up_ports: Box<[PortId]>,
    groups: Box<[Group]>,
    routes_v4: Lpm<u32, RouteTarget>,
    routes_v6: Lpm<u128, RouteTarget>,
    /// Routes, keys and local addresses merged (see [`Destination`]): what [`Fib::destination`],
    /// [`Fib::route`], [`Fib::dest_key`] and [`Fib::is_local`] read. The routes are kept on
    /// their own too, for the exact-prefix queries of the control plane.
    destinations_v4: Lpm<u32, Destination>,
    destinations_v6: Lpm<u128, Destination>,
    dest_keys: u32,
}

impl Default for Fib {
    /// The empty table: no ports, no routes (every frame is dropped as `no_route`).
    fn default() -> Self {
        Self {
            ports: Box::default(),
            up_ports: Box::default(),
            groups: Box::default(),
            routes_v4: Lpm::empty(),
            routes_v6: Lpm::empty(),
            destinations_v4: Lpm::empty(),
            destinations_v6: Lpm::empty(),
            dest_keys: 0,
        }
    }
}

impl Fib {
    /// Starts a table.
    pub fn builder() -> FibBuilder {
        FibBuilder::default()
    }

    /// Every port, indexed by [`PortId`].
    pub fn ports(&self) -> &[Port] {
        &self.ports
    }

    /// Port `id`.
    #[inline]
    pub fn port(&self, id: PortId) -> Option<&Port> {
        self.ports.get(usize::from(id.0))
    }

    /// Number of Up ports `w` (the `up_ports` of the switch's `LbConfig`).
    pub fn up_port_count(&self) -> u8 {
        self.up_ports.len() as u8
    }

    /// The port on up-position `position`.
    pub fn up_port(&self, position: UpPort) -> Option<PortId> {
        self.up_ports.get(usize::from(position.0)).copied()
    }

    /// Every group, indexed by [`GroupId`].
    pub fn groups(&self) -> &[Group] {
        &self.groups
    }

    /// Group `id`.
    #[inline]
    pub fn group(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(id.0 as usize)
    }

    /// The target of the longest route prefix containing `dst`.
    #[inline]
    pub fn route(&self, dst: IpAddr) -> Option<RouteTarget> {
        self.destination(dst).route
    }

    /// The destination key of the longest key prefix containing `dst`.
    #[inline]
    pub fn dest_key(&self, dst: IpAddr) -> Option<DestKey> {
        self.destination(dst).key
    }

    /// Number of destination keys (the `dest_keys` of the switch's `LbConfig`); every key in
    /// the table is below it.
    pub fn dest_keys(&self) -> u32 {
        self.dest_keys
    }

    /// The route, destination key and locality of `dst` in one longest-prefix walk: the same
    /// answers as [`route`](Self::route), [`dest_key`](Self::dest_key) and
    /// [`is_local`](Self::is_local).
    #[inline]
    pub fn destination(&self, dst: IpAddr) -> Destination {
        match dst {
            IpAddr::V4(v4) => self.destinations_v4.lookup(v4.to_bits()),
            IpAddr::V6(v6) => self.destinations_v6.lookup(v6.to_bits()),
        }
        .unwrap_or_default()
    }

    /// Every IPv4 entry of the one-walk table [`destination`](Self::destination) reads: each
    /// route prefix, key prefix and local address with the answer for the addresses whose
    /// longest entry it is. A longest-prefix match over these entries gives `destination`'s
    /// answer for every IPv4 address (the XDP fast path loads them into its route trie).
    pub fn destinations_v4(
        &self,
    ) -> impl Iterator<Item = (std::net::Ipv4Addr, u8, Destination)> + '_ {
        self.destinations_v4
            .entries()
            .map(|(bits, len, destination)| (std::net::Ipv4Addr::from_bits(bits), len, destination))
    }

    /// Whether `addr` is one of the switch's own addresses.
    #[inline]
    pub fn is_local(&self, addr: IpAddr) -> bool {
        self.destination(addr).local
    }

    /// The target of exactly `prefix`, if it is a route.
    pub fn route_exact(&self, prefix: IpPrefix) -> Option<RouteTarget> {
        match prefix.addr {
            IpAddr::V4(v4) => self.routes_v4.get_exact(v4.to_bits(), prefix.len),
            IpAddr::V6(v6) => self.routes_v6.get_exact(v6.to_bits(), prefix.len),
        }
    }

    /// Number of routes (IPv4, IPv6).
    pub fn route_count(&self) -> (usize, usize) {
        (self.routes_v4.len(), self.routes_v6.len())
    }
}

/// Collects the parts of a [`Fib`]; [`build`](Self::build) validates them.
#[derive(Debug, Clone, Default)]
pub struct FibBuilder {
    ports: Vec<(PortId, Port)>,
    groups: Vec<Vec<NextHop>>,
    routes: Vec<(IpPrefix, RouteTarget)>,
    keys: Vec<(IpPrefix, DestKey)>,
    locals: Vec<IpAddr>,
    dest_keys: Option<u32>,
}

impl FibBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds port `id`.
    pub fn port(&mut self, id: PortId, port: Port) -> &mut Self {
        self.ports.push((id, port));
        self
    }

    /// Adds a next-hop group and returns its id.
    pub fn group(&mut self, hops: impl IntoIterator<Item = NextHop>) -> GroupId {
        self.groups.push(hops.into_iter().collect());
        GroupId(self.groups.len() as u32 - 1)
    }

    /// Adds a route.
    pub fn route(&mut self, prefix: IpPrefix, target: RouteTarget) -> &mut Self {
        self.routes.push((prefix, target));
        self
    }

    /// Maps the destinations under `prefix` to `key`.
    pub fn dest_key(&mut self, prefix: IpPrefix, key: DestKey) -> &mut Self {
        self.keys.push((prefix, key));
        self
    }

    /// Sets the number of destination keys; without it, one more than the largest key given.
    pub fn dest_keys(&mut self, count: u32) -> &mut Self {
        self.dest_keys = Some(count);
        self
    }

    /// Adds one of the switch's own addresses.
    pub fn local_address(&mut self, addr: IpAddr) -> &mut Self {
        self.locals.push(addr);
        self
    }

    /// Validates and builds the table.
    ///
    /// # Errors
    /// The first [`FibError`] found: ports (duplicates, gaps, up-positions), groups (empty,
    /// too large, hops on missing ports, an Up port twice in a northbound group), routes
    /// (duplicates, missing groups), keys (duplicates, out of range).
    pub fn build(&self) -> Result<Fib, FibError> {
        let ports = self.build_ports()?;
        let up_ports = up_ports(&ports)?;
        let groups = self
            .groups
            .iter()
            .enumerate()
            .map(|(index, hops)| build_group(GroupId(index as u32), hops, &ports))
            .collect::<Result<Box<[_]>, _>>()?;

        let mut seen = std::collections::HashSet::new();
        for &(prefix, target) in &self.routes {
            if !seen.insert(prefix) {
                return Err(FibError::DuplicateRoute { prefix });
            }
            if let RouteTarget::Group(group) = target {
                if group.0 as usize >= groups.len() {
                    return Err(FibError::MissingGroup { prefix, group });
                }
            }
        }
        seen.clear();
        for &(prefix, _) in &self.keys {
            if !seen.insert(prefix) {
                return Err(FibError::DuplicateKeyPrefix { prefix });
            }
        }
        let dest_keys = self.dest_keys.unwrap_or_else(|| {
            self.keys
                .iter()
                .map(|(_, key)| key.0 + 1)
                .max()
                .unwrap_or(0)
        });
        if let Some(&(prefix, key)) = self.keys.iter().find(|(_, key)| key.0 >= dest_keys) {
            return Err(FibError::KeyOutOfRange {
                prefix,
                key: key.0,
                dest_keys,
            });
        }

        let (routes_v4, routes_v6) = split_families(&self.routes);
        let (keys_v4, keys_v6) = split_families(&self.keys);
        let locals: Vec<_> = self
            .locals
            .iter()
            .map(|&addr| (IpPrefix::host(addr), ()))
            .collect();
        let (local_v4, local_v6) = split_families(&locals);
        let destinations_v4 = destinations(&routes_v4, &keys_v4, &local_v4);
        let destinations_v6 = destinations(&routes_v6, &keys_v6, &local_v6);
        Ok(Fib {
            ports,
            up_ports,
            groups,
            routes_v4,
            routes_v6,
            destinations_v4,
            destinations_v6,
            dest_keys,
        })
    }

    fn build_ports(&self) -> Result<Box<[Port]>, FibError> {
        let mut slots: Vec<Option<Port>> = vec![None; self.ports.len()];
        let mut seen = std::collections::HashSet::new();
        for &(id, port) in &self.ports {
            if !seen.insert(id) {
                return Err(FibError::DuplicatePort { port: id });
            }
            // An id ≥ n leaves a gap below n, reported next.
            if let Some(slot) = slots.get_mut(usize::from(id.0)) {
                *slot = Some(port);
            }
        }
        slots
            .iter()
            .enumerate()
            .map(|(index, slot)| {
                slot.ok_or(FibError::PortIdGap {
                    missing: PortId(index as u16),
                    ports: self.ports.len(),
                })
            })
            .collect()
    }
}

/// Validates the up-positions; returns up-position → port.
fn up_ports(ports: &[Port]) -> Result<Box<[PortId]>, FibError> {
    let mut up = Vec::new();
    for (index, port) in ports.iter().enumerate() {
        let id = PortId(index as u16);
        match (port.role, port.up_position) {
            (PortRole::Up, Some(position)) => up.push((position, id)),
            (PortRole::Up, None) => return Err(FibError::MissingUpPosition { port: id }),
            (role, Some(_)) => return Err(FibError::UnexpectedUpPosition { port: id, role }),
            (_, None) => {}
        }
    }
    if up.len() > MAX_PORTS {
        return Err(FibError::TooManyUpPorts {
            up_ports: up.len(),
            max: MAX_PORTS,
        });
    }
    let mut by_position: Vec<Option<PortId>> = vec![None; up.len()];
    for &(position, port) in &up {
        match by_position.get_mut(usize::from(position)) {
            None => {
                return Err(FibError::UpPositionOutOfRange {
                    port,
                    position,
                    up_ports: up.len(),
                })
            }
            Some(Some(first)) => {
                return Err(FibError::DuplicateUpPosition {
                    position,
                    first: *first,
                    second: port,
                })
            }
            Some(slot) => *slot = Some(port),
        }
    }
    // Unique positions below the count: every slot is filled.
    Ok(by_position.into_iter().flatten().collect())
}

fn build_group(id: GroupId, hops: &[NextHop], ports: &[Port]) -> Result<Group, FibError> {
    if hops.is_empty() {
        return Err(FibError::EmptyGroup { group: id });
    }
    if hops.len() > MAX_GROUP_HOPS {
        return Err(FibError::GroupTooLarge {
            group: id,
            hops: hops.len(),
            max: MAX_GROUP_HOPS,
        });
    }
    let mut usable = 0u64;
    let mut port_up = 0u64;
    let mut all_up_role = true;
    for (index, hop) in hops.iter().enumerate() {
        let port = ports
            .get(usize::from(hop.port.0))
            .ok_or(FibError::HopOnMissingPort {
                group: id,
                port: hop.port,
            })?;
        if port.oper_up {
            port_up |= 1 << index;
            if hop.mac.is_some() {
                usable |= 1 << index;
            }
        }
        all_up_role &= port.role == PortRole::Up;
    }
    let kind = match hops.len() {
        1 => GroupKind::Single,
        _ if all_up_role => GroupKind::Northbound,
        _ => GroupKind::Ecmp,
    };
    let mut up_mask = PortMask::EMPTY;
    let mut hop_at_up = [NO_HOP; MAX_PORTS];
    if kind == GroupKind::Northbound {
        for (index, hop) in hops.iter().enumerate() {
            // Up ports have a position below 64 (checked by `up_ports`).
            let position = ports[usize::from(hop.port.0)].up_position.unwrap_or(NO_HOP);
            let slot = &mut hop_at_up[usize::from(position)];
            if *slot != NO_HOP {
                return Err(FibError::RepeatedUpPort {
                    group: id,
                    position,
                    port: hop.port,
                });
            }
            *slot = index as u8;
            if usable & (1 << index) != 0 {
                up_mask = up_mask.with(position);
            }
        }
    }
    Ok(Group {
        hops: hops.into(),
        kind,
        usable,
        port_up,
        up_mask,
        hop_at_up,
    })
}

/// Splits `(prefix, value)` pairs into the IPv4 and IPv6 tables.
fn split_families<V: Copy>(entries: &[(IpPrefix, V)]) -> (Lpm<u32, V>, Lpm<u128, V>) {
    let v4 = entries
        .iter()
        .filter_map(|&(prefix, value)| match prefix.addr {
            IpAddr::V4(addr) => Some((addr.to_bits(), prefix.len, value)),
            IpAddr::V6(_) => None,
        });
    let v6 = entries
        .iter()
        .filter_map(|&(prefix, value)| match prefix.addr {
            IpAddr::V6(addr) => Some((addr.to_bits(), prefix.len, value)),
            IpAddr::V4(_) => None,
        });
    (Lpm::build(v4), Lpm::build(v6))
}

/// The merged table of [`Destination`]s: one entry per prefix of any of the three tables,
/// holding the three answers for that prefix.
fn destinations<A: lpm::LpmBits + std::hash::Hash>(
    routes: &Lpm<A, RouteTarget>,
    keys: &Lpm<A, DestKey>,
    locals: &Lpm<A, ()>,
) -> Lpm<A, Destination> {
    let prefixes: std::collections::HashSet<(A, u8)> = routes
        .prefixes()
        .chain(keys.prefixes())
        .chain(locals.prefixes())
        .collect();
    Lpm::build(prefixes.into_iter().map(|(prefix, len)| {
        let destination = Destination {
            route: routes.lookup_within(prefix, len),
            key: keys.lookup_within(prefix, len),
            local: len == A::BITS && locals.get_exact(prefix, len).is_some(),
        };
        (prefix, len, destination)
    }))
}

#[cfg(test)]
mod tests;
