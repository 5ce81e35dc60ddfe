//! Just enough rtnetlink to mirror the kernel's forwarding state: dump and parse links,
//! addresses, routes (with multipath and next-hop objects), next hops and neighbours, and build
//! the few requests the mirror sends.
//!
//! Parsing is over byte slices and never panics on malformed input: a message that does not
//! parse is skipped (and counted by the caller).

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_GETADDR: u16 = 22;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_GETROUTE: u16 = 26;
pub const RTM_NEWNEIGH: u16 = 28;
pub const RTM_GETNEIGH: u16 = 30;
pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_GETNEXTHOP: u16 = 106;

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;

/// Multicast groups the mirror listens to.
pub const RTNLGRP_LINK: u32 = 1;
pub const RTNLGRP_NEIGH: u32 = 3;
pub const RTNLGRP_IPV4_IFADDR: u32 = 5;
pub const RTNLGRP_IPV4_ROUTE: u32 = 7;
pub const RTNLGRP_IPV6_IFADDR: u32 = 9;
pub const RTNLGRP_IPV6_ROUTE: u32 = 11;
pub const RTNLGRP_NEXTHOP: u32 = 32;

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;

/// Route table `main`.
pub const RT_TABLE_MAIN: u32 = 254;
/// Route table `local`.
pub const RT_TABLE_LOCAL: u32 = 255;

const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x10000;
const NUD_INCOMPLETE: u16 = 0x01;
const NUD_FAILED: u16 = 0x20;
const NUD_NOARP: u16 = 0x40;

/// A netlink message: header fields and payload.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// Everything after the 16-byte header.
    pub payload: &'a [u8],
}

/// Splits a received datagram into messages.
pub fn messages(buffer: &[u8]) -> impl Iterator<Item = Message<'_>> {
    let mut rest = buffer;
    std::iter::from_fn(move || {
        if rest.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes(rest[0..4].try_into().ok()?) as usize;
        if len < 16 || len > rest.len() {
            return None;
        }
        let message = Message {
            kind: u16::from_ne_bytes([rest[4], rest[5]]),
            seq: u32::from_ne_bytes(rest[8..12].try_into().ok()?),
            payload: &rest[16..len],
        };
        rest = &rest[align(len).min(rest.len())..];
        Some(message)
    })
}

const fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Iterates over `(type, value)` route attributes.
pub fn attributes(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([data[0], data[1]]) as usize;
        let kind = u16::from_ne_bytes([data[2], data[3]]) & 0x3fff;
        if len < 4 || len > data.len() {
            return None;
        }
        let value = &data[4..len];
        data = &data[align(len).min(data.len())..];
        Some((kind, value))
    })
}

fn u32_of(value: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

fn ip_of(family: u8, value: &[u8]) -> Option<IpAddr> {
    match family {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(value.get(..4)?).ok()?,
        ))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(value.get(..16)?).ok()?,
        ))),
        _ => None,
    }
}

/// Builds a dump request (`NLM_F_DUMP`) for `kind` with a zeroed family header of `header_len`
/// bytes whose first byte is `family`.
pub fn dump_request(kind: u16, seq: u32, header_len: usize, family: u8) -> Vec<u8> {
    let len = 16 + header_len;
    let mut message = Vec::with_capacity(len);
    message.extend_from_slice(&(len as u32).to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    message.extend_from_slice(&seq.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    message.push(family);
    message.resize(len, 0);
    message
}

fn push_attr(message: &mut Vec<u8>, kind: u16, value: &[u8]) {
    message.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
    message.extend_from_slice(value);
    message.resize(align(message.len()), 0);
}

/// A request that creates a *managed* neighbour entry (`NTF_EXT_MANAGED`): the kernel resolves
/// it now and keeps it resolved, without traffic.
pub fn managed_neighbor_request(seq: u32, ifindex: u32, addr: IpAddr) -> Vec<u8> {
    const NDA_DST: u16 = 1;
    const NDA_FLAGS_EXT: u16 = 15;
    const NTF_EXT_MANAGED: u32 = 1;
    let mut message = Vec::with_capacity(64);
    message.extend_from_slice(&0u32.to_ne_bytes());
    message.extend_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
    message.extend_from_slice(
        &(NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE).to_ne_bytes(),
    );
    message.extend_from_slice(&seq.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    // struct ndmsg { family, pad1, pad2, ifindex, state, flags, type }
    message.push(if addr.is_ipv4() { AF_INET } else { AF_INET6 });
    message.extend_from_slice(&[0, 0, 0]);
    message.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    message.extend_from_slice(&0u16.to_ne_bytes()); // NUD_NONE: the kernel resolves it
    message.push(0);
    message.push(0);
    match addr {
        IpAddr::V4(v4) => push_attr(&mut message, NDA_DST, &v4.octets()),
        IpAddr::V6(v6) => push_attr(&mut message, NDA_DST, &v6.octets()),
    }
    push_attr(&mut message, NDA_FLAGS_EXT, &NTF_EXT_MANAGED.to_ne_bytes());
    let len = message.len() as u32;
    message[0..4].copy_from_slice(&len.to_ne_bytes());
    message
}

/// The errno of an `NLMSG_ERROR` payload (0 = ACK).
pub fn error_code(payload: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(payload.get(..4)?.try_into().ok()?))
}

/// One interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Interface index.
    pub index: u32,
    /// Name.
    pub name: String,
    /// MAC address (all-zero if none).
    pub mac: [u8; 6],
    /// Administratively up and carrier up.
    pub oper_up: bool,
}

/// Parses an `RTM_NEWLINK` payload.
pub fn parse_link(payload: &[u8]) -> Option<Link> {
    const IFLA_ADDRESS: u16 = 1;
    const IFLA_IFNAME: u16 = 3;
    let header = payload.get(..16)?;
    let index = i32::from_ne_bytes(header[4..8].try_into().ok()?) as u32;
    let flags = u32::from_ne_bytes(header[8..12].try_into().ok()?);
    let mut link = Link {
        index,
        name: String::new(),
        mac: [0; 6],
        oper_up: flags & IFF_UP != 0 && flags & IFF_LOWER_UP != 0,
    };
    for (kind, value) in attributes(&payload[16..]) {
        match kind {
            IFLA_IFNAME => {
                link.name = String::from_utf8_lossy(value.split(|&b| b == 0).next().unwrap_or(&[]))
                    .into_owned();
            }
            IFLA_ADDRESS if value.len() == 6 => link.mac.copy_from_slice(value),
            _ => {}
        }
    }
    Some(link)
}

/// An address of an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Address {
    /// Interface index.
    pub index: u32,
    /// The address.
    pub addr: IpAddr,
    /// Prefix length.
    pub prefix_len: u8,
}

/// Parses an `RTM_NEWADDR` payload.
pub fn parse_address(payload: &[u8]) -> Option<Address> {
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    let header = payload.get(..8)?;
    let family = header[0];
    let prefix_len = header[1];
    let index = u32::from_ne_bytes(header[4..8].try_into().ok()?);
    let mut address = None;
    let mut local = None;
    for (kind, value) in attributes(&payload[8..]) {
        match kind {
            IFA_ADDRESS => address = ip_of(family, value),
            IFA_LOCAL => local = ip_of(family, value),
            _ => {}
        }
    }
    Some(Address {
        index,
        addr: local.or(address)?,
        prefix_len,
    })
}

/// One next hop of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RouteHop {
    /// Output interface.
    pub ifindex: u32,
    /// Gateway; `None` for a directly connected destination.
    pub gateway: Option<IpAddr>,
}

/// What a route does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteKind {
    /// Forward via these hops (or via next-hop object `nh_id`, resolved later).
    Unicast {
        /// Hops (empty when `nh_id` is set).
        hops: Vec<RouteHop>,
        /// Next-hop object id (`RTA_NH_ID`), as FRR installs routes.
        nh_id: Option<u32>,
    },
    /// To the host itself.
    Local,
    /// Blackhole, unreachable or prohibit.
    Reject,
    /// Broadcast, multicast, anycast…: left to the kernel.
    Other,
}

/// A route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Destination address.
    pub dst: IpAddr,
    /// Prefix length.
    pub prefix_len: u8,
    /// Table.
    pub table: u32,
    /// Metric (`RTA_PRIORITY`); among equal prefixes the lowest wins.
    pub metric: u32,
    /// What it does.
    pub kind: RouteKind,
}

/// Parses an `RTM_NEWROUTE` payload.
pub fn parse_route(payload: &[u8]) -> Option<Route> {
    const RTA_DST: u16 = 1;
    const RTA_OIF: u16 = 4;
    const RTA_GATEWAY: u16 = 5;
    const RTA_PRIORITY: u16 = 6;
    const RTA_MULTIPATH: u16 = 9;
    const RTA_TABLE: u16 = 15;
    const RTA_VIA: u16 = 18;
    const RTA_NH_ID: u16 = 30;
    let header = payload.get(..12)?;
    let family = header[0];
    let prefix_len = header[1];
    let mut table = u32::from(header[4]);
    let route_type = header[7];
    let mut dst = None;
    let mut oif = None;
    let mut gateway = None;
    let mut metric = 0;
    let mut multipath = Vec::new();
    let mut nh_id = None;
    for (kind, value) in attributes(&payload[12..]) {
        match kind {
            RTA_DST => dst = ip_of(family, value),
            RTA_OIF => oif = u32_of(value),
            RTA_GATEWAY => gateway = ip_of(family, value),
            RTA_VIA if value.len() >= 2 => {
                let via_family = value[0];
                gateway = ip_of(via_family, &value[2..]);
            }
            RTA_PRIORITY => metric = u32_of(value).unwrap_or(0),
            RTA_TABLE => table = u32_of(value).unwrap_or(table),
            RTA_NH_ID => nh_id = u32_of(value),
            RTA_MULTIPATH => {
                // A sequence of struct rtnexthop { len u16, flags u8, hops u8, ifindex i32 }
                // each followed by its attributes.
                let mut rest = value;
                while rest.len() >= 8 {
                    let len = u16::from_ne_bytes([rest[0], rest[1]]) as usize;
                    if len < 8 || len > rest.len() {
                        break;
                    }
                    let ifindex = i32::from_ne_bytes(rest[4..8].try_into().ok()?) as u32;
                    let mut hop_gateway = None;
                    for (kind, value) in attributes(&rest[8..len]) {
                        match kind {
                            RTA_GATEWAY => hop_gateway = ip_of(family, value),
                            RTA_VIA if value.len() >= 2 => {
                                hop_gateway = ip_of(value[0], &value[2..])
                            }
                            _ => {}
                        }
                    }
                    multipath.push(RouteHop {
                        ifindex,
                        gateway: hop_gateway,
                    });
                    rest = &rest[align(len).min(rest.len())..];
                }
            }
            _ => {}
        }
    }
    let dst = dst.unwrap_or(match family {
        AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AF_INET6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    });
    let kind = match route_type {
        1 => {
            let hops = if multipath.is_empty() {
                oif.map(|ifindex| vec![RouteHop { ifindex, gateway }])
                    .unwrap_or_default()
            } else {
                multipath
            };
            RouteKind::Unicast { hops, nh_id }
        }
        2 => RouteKind::Local,
        6..=8 => RouteKind::Reject,
        _ => RouteKind::Other,
    };
    Some(Route {
        dst,
        prefix_len,
        table,
        metric,
        kind,
    })
}

/// A next-hop object (`ip nexthop`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NexthopObject {
    /// One hop.
    Hop(RouteHop),
    /// A group of other objects (ids).
    Group(Vec<u32>),
    /// A blackhole.
    Blackhole,
}

/// Parses an `RTM_NEWNEXTHOP` payload into `(id, object)`.
pub fn parse_nexthop(payload: &[u8]) -> Option<(u32, NexthopObject)> {
    const NHA_ID: u16 = 1;
    const NHA_GROUP: u16 = 2;
    const NHA_BLACKHOLE: u16 = 4;
    const NHA_OIF: u16 = 5;
    const NHA_GATEWAY: u16 = 6;
    let header = payload.get(..8)?;
    let family = header[0];
    let mut id = None;
    let mut group = None;
    let mut blackhole = false;
    let mut oif = None;
    let mut gateway = None;
    for (kind, value) in attributes(&payload[8..]) {
        match kind {
            NHA_ID => id = u32_of(value),
            NHA_GROUP => group = Some(value.chunks_exact(8).filter_map(u32_of).collect()),
            NHA_BLACKHOLE => blackhole = true,
            NHA_OIF => oif = u32_of(value),
            NHA_GATEWAY => gateway = ip_of(family, value),
            _ => {}
        }
    }
    let object = if blackhole {
        NexthopObject::Blackhole
    } else if let Some(group) = group {
        NexthopObject::Group(group)
    } else {
        NexthopObject::Hop(RouteHop {
            ifindex: oif?,
            gateway,
        })
    };
    Some((id?, object))
}

/// A neighbour entry with a link-layer address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbor {
    /// Interface index.
    pub ifindex: u32,
    /// The neighbour's address.
    pub addr: IpAddr,
    /// Its MAC address, when resolved.
    pub mac: Option<[u8; 6]>,
}

/// Parses an `RTM_NEWNEIGH` payload.
pub fn parse_neighbor(payload: &[u8]) -> Option<Neighbor> {
    const NDA_DST: u16 = 1;
    const NDA_LLADDR: u16 = 2;
    let header = payload.get(..12)?;
    let family = header[0];
    let ifindex = i32::from_ne_bytes(header[4..8].try_into().ok()?) as u32;
    let state = u16::from_ne_bytes([header[8], header[9]]);
    let mut addr = None;
    let mut mac = None;
    for (kind, value) in attributes(&payload[12..]) {
        match kind {
            NDA_DST => addr = ip_of(family, value),
            NDA_LLADDR if value.len() == 6 => mac = Some(<[u8; 6]>::try_from(value).ok()?),
            _ => {}
        }
    }
    let usable = state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP) == 0;
    Some(Neighbor {
        ifindex,
        addr: addr?,
        mac: mac.filter(|_| usable),
    })
}

/// Everything the mirror reads from the kernel, as of one dump.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelState {
    /// Interfaces by index.
    pub links: BTreeMap<u32, Link>,
    /// Addresses.
    pub addresses: Vec<Address>,
    /// Routes of the main and local tables.
    pub routes: Vec<Route>,
    /// Next-hop objects by id.
    pub nexthops: BTreeMap<u32, NexthopObject>,
    /// Neighbours by (interface, address).
    pub neighbors: BTreeMap<(u32, IpAddr), Option<[u8; 6]>>,
}

impl KernelState {
    /// Adds one dumped message.
    pub fn absorb(&mut self, message: &Message<'_>) {
        match message.kind {
            RTM_NEWLINK => {
                if let Some(link) = parse_link(message.payload) {
                    self.links.insert(link.index, link);
                }
            }
            RTM_NEWADDR => self.addresses.extend(parse_address(message.payload)),
            RTM_NEWROUTE => {
                if let Some(route) = parse_route(message.payload) {
                    if route.table == RT_TABLE_MAIN || route.table == RT_TABLE_LOCAL {
                        self.routes.push(route);
                    }
                }
            }
            RTM_NEWNEXTHOP => {
                if let Some((id, object)) = parse_nexthop(message.payload) {
                    self.nexthops.insert(id, object);
                }
            }
            RTM_NEWNEIGH => {
                if let Some(neighbor) = parse_neighbor(message.payload) {
                    self.neighbors
                        .insert((neighbor.ifindex, neighbor.addr), neighbor.mac);
                }
            }
            _ => {}
        }
    }

    /// The hops of a route, with next-hop objects expanded.
    pub fn hops_of(&self, hops: &[RouteHop], nh_id: Option<u32>) -> Option<Vec<RouteHop>> {
        let Some(id) = nh_id else {
            return Some(hops.to_vec());
        };
        match self.nexthops.get(&id)? {
            NexthopObject::Hop(hop) => Some(vec![*hop]),
            NexthopObject::Blackhole => None,
            NexthopObject::Group(members) => Some(
                members
                    .iter()
                    .filter_map(|member| match self.nexthops.get(member) {
                        Some(NexthopObject::Hop(hop)) => Some(*hop),
                        _ => None,
                    })
                    .collect(),
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Requests that change kernel state (used by `ofan-lab` to build labs in bulk).
// ---------------------------------------------------------------------------------------------

/// `RTM_DELROUTE`.
pub const RTM_DELROUTE: u16 = 25;

const NLM_F_EXCL: u16 = 0x200;
const NLA_F_NESTED: u16 = 0x8000;
const RTPROT_STATIC: u8 = 4;
const RTN_UNICAST: u8 = 1;
const RT_SCOPE_UNIVERSE: u8 = 0;
const RT_SCOPE_NOWHERE: u8 = 255;

/// A request under construction: the netlink header, a fixed family header and attributes,
/// possibly nested. The length fields are filled in by [`RequestBuilder::finish`] and
/// [`RequestBuilder::end_nest`].
#[derive(Debug, Clone)]
pub struct RequestBuilder {
    message: Vec<u8>,
    nests: Vec<usize>,
}

impl RequestBuilder {
    /// Starts a request of `kind` with `NLM_F_REQUEST | NLM_F_ACK` plus `extra_flags`, followed
    /// by the family header `header` (e.g. a 16-byte `ifinfomsg`).
    #[must_use]
    pub fn new(kind: u16, extra_flags: u16, seq: u32, header: &[u8]) -> Self {
        let mut message = Vec::with_capacity(128);
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&kind.to_ne_bytes());
        message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | extra_flags).to_ne_bytes());
        message.extend_from_slice(&seq.to_ne_bytes());
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(header);
        message.resize(align(message.len()), 0);
        Self {
            message,
            nests: Vec::new(),
        }
    }

    /// Appends attribute `kind` with raw `value`.
    pub fn attr(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        push_attr(&mut self.message, kind, value);
        self
    }

    /// Appends a NUL-terminated string attribute.
    pub fn attr_str(&mut self, kind: u16, value: &str) -> &mut Self {
        let mut bytes = value.as_bytes().to_vec();
        bytes.push(0);
        self.attr(kind, &bytes)
    }

    /// Appends a `u32` attribute.
    pub fn attr_u32(&mut self, kind: u16, value: u32) -> &mut Self {
        self.attr(kind, &value.to_ne_bytes())
    }

    /// Opens a nested attribute; close it with [`RequestBuilder::end_nest`].
    pub fn begin_nest(&mut self, kind: u16) -> &mut Self {
        self.nests.push(self.message.len());
        self.message.extend_from_slice(&0u16.to_ne_bytes());
        self.message
            .extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
        self
    }

    /// Appends raw bytes inside the current nest (a family header inside a nested message,
    /// such as the peer's `ifinfomsg` of a veth).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.message.extend_from_slice(bytes);
        self.message.resize(align(self.message.len()), 0);
        self
    }

    /// Closes the innermost open nest.
    ///
    /// # Panics
    ///
    /// If no nest is open.
    pub fn end_nest(&mut self) -> &mut Self {
        let start = self.nests.pop().expect("end_nest without begin_nest");
        let len = (self.message.len() - start) as u16;
        self.message[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self
    }

    /// The finished message.
    ///
    /// # Panics
    ///
    /// If a nest is still open.
    #[must_use]
    pub fn finish(&mut self) -> Vec<u8> {
        assert!(self.nests.is_empty(), "unclosed nested attribute");
        let len = self.message.len() as u32;
        self.message[0..4].copy_from_slice(&len.to_ne_bytes());
        std::mem::take(&mut self.message)
    }
}

/// A 16-byte `ifinfomsg`: family unspecified, interface `index` (0 = none/new), `IFF_UP` set in
/// the flags when `up`, with `IFF_UP` in the change mask when `set_up` is true.
fn ifinfomsg(index: i32, up: bool, set_up: bool) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[4..8].copy_from_slice(&index.to_ne_bytes());
    header[8..12].copy_from_slice(&(if up { IFF_UP } else { 0 }).to_ne_bytes());
    header[12..16].copy_from_slice(&(if set_up { IFF_UP } else { 0 }).to_ne_bytes());
    header
}

/// One end of a veth pair to create: its name and the network namespace (an open file
/// descriptor of `/run/netns/NAME`) it is created in.
#[derive(Debug, Clone, Copy)]
pub struct VethEnd<'a> {
    /// Interface name in its namespace (at most 15 bytes).
    pub name: &'a str,
    /// File descriptor of the target network namespace.
    pub netns_fd: i32,
}

/// `RTM_NEWLINK` creating a veth pair whose ends are created directly in their namespaces
/// (`IFLA_NET_NS_FD` for both), with MTU `mtu`. Both ends start administratively down (the
/// kernel refuses `IFF_UP` at creation: an end cannot open before its peer is attached); bring
/// them up with [`set_link_up_request`].
#[must_use]
pub fn veth_pair_request(seq: u32, first: VethEnd<'_>, peer: VethEnd<'_>, mtu: u32) -> Vec<u8> {
    const IFLA_IFNAME: u16 = 3;
    const IFLA_MTU: u16 = 4;
    const IFLA_LINKINFO: u16 = 18;
    const IFLA_NET_NS_FD: u16 = 28;
    const IFLA_INFO_KIND: u16 = 1;
    const IFLA_INFO_DATA: u16 = 2;
    const VETH_INFO_PEER: u16 = 1;
    let mut request = RequestBuilder::new(
        RTM_NEWLINK,
        NLM_F_CREATE | NLM_F_EXCL,
        seq,
        &ifinfomsg(0, false, false),
    );
    request
        .attr_str(IFLA_IFNAME, first.name)
        .attr_u32(IFLA_MTU, mtu)
        .attr_u32(IFLA_NET_NS_FD, first.netns_fd as u32)
        .begin_nest(IFLA_LINKINFO)
        .attr_str(IFLA_INFO_KIND, "veth")
        .begin_nest(IFLA_INFO_DATA)
        .begin_nest(VETH_INFO_PEER)
        .raw(&ifinfomsg(0, false, false))
        .attr_str(IFLA_IFNAME, peer.name)
        .attr_u32(IFLA_MTU, mtu)
        .attr_u32(IFLA_NET_NS_FD, peer.netns_fd as u32)
        .end_nest()
        .end_nest()
        .end_nest();
    request.finish()
}

/// `RTM_NEWLINK` setting interface `ifindex` administratively up or down.
#[must_use]
pub fn set_link_up_request(seq: u32, ifindex: u32, up: bool) -> Vec<u8> {
    RequestBuilder::new(RTM_NEWLINK, 0, seq, &ifinfomsg(ifindex as i32, up, true)).finish()
}

/// `RTM_NEWADDR` adding IPv4 `addr/prefix_len` to interface `ifindex` (replacing an identical
/// address).
#[must_use]
pub fn add_address_request(seq: u32, ifindex: u32, addr: Ipv4Addr, prefix_len: u8) -> Vec<u8> {
    const IFA_ADDRESS: u16 = 1;
    const IFA_LOCAL: u16 = 2;
    // struct ifaddrmsg { family, prefixlen, flags, scope, index }
    let mut header = [0u8; 8];
    header[0] = AF_INET;
    header[1] = prefix_len;
    header[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    RequestBuilder::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, seq, &header)
        .attr(IFA_LOCAL, &addr.octets())
        .attr(IFA_ADDRESS, &addr.octets())
        .finish()
}

fn rtmsg(prefix_len: u8, scope: u8, kind: u8) -> [u8; 12] {
    // struct rtmsg { family, dst_len, src_len, tos, table, protocol, scope, type, flags }
    let mut header = [0u8; 12];
    header[0] = AF_INET;
    header[1] = prefix_len;
    header[4] = RT_TABLE_MAIN as u8;
    header[5] = RTPROT_STATIC;
    header[6] = scope;
    header[7] = kind;
    header
}

/// `RTM_NEWROUTE` installing (or replacing) a static IPv4 route to `dst/prefix_len` in the
/// main table: through one gateway, or an ECMP route (`RTA_MULTIPATH`, equal weights) through
/// several. Every hop must have an IPv4 gateway.
///
/// # Panics
///
/// If `hops` is empty.
#[must_use]
pub fn route_request(seq: u32, dst: Ipv4Addr, prefix_len: u8, hops: &[(u32, Ipv4Addr)]) -> Vec<u8> {
    const RTA_DST: u16 = 1;
    const RTA_OIF: u16 = 4;
    const RTA_GATEWAY: u16 = 5;
    const RTA_MULTIPATH: u16 = 9;
    assert!(!hops.is_empty(), "a route needs at least one next hop");
    let mut request = RequestBuilder::new(
        RTM_NEWROUTE,
        NLM_F_CREATE | NLM_F_REPLACE,
        seq,
        &rtmsg(prefix_len, RT_SCOPE_UNIVERSE, RTN_UNICAST),
    );
    if prefix_len > 0 {
        request.attr(RTA_DST, &dst.octets());
    }
    if let [(ifindex, gateway)] = hops {
        request
            .attr(RTA_GATEWAY, &gateway.octets())
            .attr_u32(RTA_OIF, *ifindex);
    } else {
        // RTA_MULTIPATH: a sequence of struct rtnexthop { len u16, flags u8, hops u8,
        // ifindex i32 } each followed by its own attributes.
        let mut nexthops = Vec::with_capacity(hops.len() * 16);
        for (ifindex, gateway) in hops {
            let len: u16 = 8 + 8;
            nexthops.extend_from_slice(&len.to_ne_bytes());
            nexthops.push(0); // flags
            nexthops.push(0); // weight - 1
            nexthops.extend_from_slice(&(*ifindex as i32).to_ne_bytes());
            push_attr(&mut nexthops, RTA_GATEWAY, &gateway.octets());
        }
        request.attr(RTA_MULTIPATH, &nexthops);
    }
    request.finish()
}

/// `RTM_DELROUTE` removing the main-table IPv4 route to `dst/prefix_len` (whatever its hops).
#[must_use]
pub fn delete_route_request(seq: u32, dst: Ipv4Addr, prefix_len: u8) -> Vec<u8> {
    const RTA_DST: u16 = 1;
    let mut request = RequestBuilder::new(
        RTM_DELROUTE,
        0,
        seq,
        &rtmsg(prefix_len, RT_SCOPE_NOWHERE, 0),
    );
    if prefix_len > 0 {
        request.attr(RTA_DST, &dst.octets());
    }
    request.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&0u16.to_ne_bytes());
        out.extend_from_slice(&7u32.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes());
        out.extend_from_slice(payload);
        out.resize(align(out.len()), 0);
        out
    }

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_attr(&mut out, kind, value);
        out
    }

    #[test]
    fn parses_an_ecmp_route_with_two_gateways() {
        // rtmsg: AF_INET, /24, table main, proto static, scope universe, unicast.
        let mut payload = vec![AF_INET, 24, 0, 0, 254, 4, 0, 1, 0, 0, 0, 0];
        payload.extend(attr(1, &[10, 2, 0, 0]));
        let mut multipath = Vec::new();
        for (ifindex, gateway) in [(5i32, [100u8, 64, 0, 1]), (6, [100, 64, 0, 3])] {
            let hop_attrs = attr(5, &gateway);
            multipath.extend_from_slice(&((8 + hop_attrs.len()) as u16).to_ne_bytes());
            multipath.extend_from_slice(&[0, 0]);
            multipath.extend_from_slice(&ifindex.to_ne_bytes());
            multipath.extend(hop_attrs);
        }
        payload.extend(attr(9, &multipath));
        let datagram = message(RTM_NEWROUTE, &payload);
        let parsed: Vec<_> = messages(&datagram).collect();
        assert_eq!(parsed.len(), 1);
        let route = parse_route(parsed[0].payload).unwrap();
        assert_eq!(route.dst, IpAddr::V4(Ipv4Addr::new(10, 2, 0, 0)));
        assert_eq!(route.prefix_len, 24);
        assert_eq!(route.table, RT_TABLE_MAIN);
        assert_eq!(
            route.kind,
            RouteKind::Unicast {
                hops: vec![
                    RouteHop {
                        ifindex: 5,
                        gateway: Some(IpAddr::V4(Ipv4Addr::new(100, 64, 0, 1)))
                    },
                    RouteHop {
                        ifindex: 6,
                        gateway: Some(IpAddr::V4(Ipv4Addr::new(100, 64, 0, 3)))
                    },
                ],
                nh_id: None
            }
        );
    }

    #[test]
    fn parses_links_neighbors_and_nexthop_groups() {
        let mut link = vec![0u8; 16];
        link[4..8].copy_from_slice(&3i32.to_ne_bytes());
        link[8..12].copy_from_slice(&(IFF_UP | IFF_LOWER_UP).to_ne_bytes());
        link.extend(attr(3, b"p1\0"));
        link.extend(attr(1, &[2, 0, 0, 0, 0, 9]));
        let parsed = parse_link(&link).unwrap();
        assert_eq!(
            (
                parsed.index,
                parsed.name.as_str(),
                parsed.mac,
                parsed.oper_up
            ),
            (3, "p1", [2, 0, 0, 0, 0, 9], true)
        );

        let mut neighbor = vec![AF_INET, 0, 0, 0];
        neighbor.extend_from_slice(&3i32.to_ne_bytes());
        neighbor.extend_from_slice(&0x02u16.to_ne_bytes()); // NUD_REACHABLE
        neighbor.extend_from_slice(&[0, 0]);
        neighbor.extend(attr(1, &[10, 0, 0, 1]));
        neighbor.extend(attr(2, &[2, 0, 0, 0, 0, 1]));
        let parsed = parse_neighbor(&neighbor).unwrap();
        assert_eq!(parsed.mac, Some([2, 0, 0, 0, 0, 1]));
        // The same entry in FAILED state has no usable MAC.
        neighbor[8..10].copy_from_slice(&NUD_FAILED.to_ne_bytes());
        assert_eq!(parse_neighbor(&neighbor).unwrap().mac, None);

        let mut group = vec![AF_INET, 0, 0, 0, 0, 0, 0, 0];
        group.extend(attr(1, &9u32.to_ne_bytes()));
        let mut members = Vec::new();
        for id in [1u32, 2] {
            members.extend_from_slice(&id.to_ne_bytes());
            members.extend_from_slice(&[1, 0, 0, 0]);
        }
        group.extend(attr(2, &members));
        assert_eq!(
            parse_nexthop(&group),
            Some((9, NexthopObject::Group(vec![1, 2])))
        );
    }

    #[test]
    fn malformed_input_is_skipped_not_fatal() {
        assert_eq!(messages(&[1, 2, 3]).count(), 0);
        let mut bad = message(RTM_NEWROUTE, &[0u8; 4]);
        assert_eq!(parse_route(messages(&bad).next().unwrap().payload), None);
        bad[0] = 200; // length beyond the buffer
        assert_eq!(messages(&bad).count(), 0);
        assert_eq!(attributes(&[8, 0, 1, 0, 1]).count(), 0);
    }
}
