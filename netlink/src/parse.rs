//! Typed parsers of the payloads the kernel sends: links (and their XDP attachment state),
//! addresses, routes with their hops (single, `RTA_MULTIPATH`, or a next-hop object by
//! `RTA_NH_ID`), next-hop objects and groups, and neighbours.
//!
//! Each parser takes the payload of one message (after the `nlmsghdr`, see
//! [`crate::messages`]) and returns `None` when the payload does not hold what it needs; none
//! of them panics, whatever the bytes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::frame::{attributes, ip_of, u32_of, AF_INET, AF_INET6};

/// Route table `main`.
pub const RT_TABLE_MAIN: u32 = 254;
/// Route table `local`.
pub const RT_TABLE_LOCAL: u32 = 255;

pub(crate) const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x10000;
const NUD_INCOMPLETE: u16 = 0x01;
pub(crate) const NUD_FAILED: u16 = 0x20;
const NUD_NOARP: u16 = 0x40;
const NUD_PERMANENT: u16 = 0x80;

/// Length of `struct ifinfomsg`.
pub(crate) const IFINFOMSG_LEN: usize = 16;
pub(crate) const IFLA_ADDRESS: u16 = 1;
pub(crate) const IFLA_IFNAME: u16 = 3;
pub(crate) const IFLA_XDP: u16 = 43;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;

pub(crate) const IFA_ADDRESS: u16 = 1;
pub(crate) const IFA_LOCAL: u16 = 2;

pub(crate) const RTA_DST: u16 = 1;
pub(crate) const RTA_OIF: u16 = 4;
pub(crate) const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
pub(crate) const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_NH_ID: u16 = 30;
pub(crate) const RTN_UNICAST: u8 = 1;

pub(crate) const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;

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
    let header = payload.get(..IFINFOMSG_LEN)?;
    let index = i32::from_ne_bytes(header[4..8].try_into().ok()?) as u32;
    let flags = u32::from_ne_bytes(header[8..12].try_into().ok()?);
    let mut link = Link {
        index,
        name: String::new(),
        mac: [0; 6],
        oper_up: flags & IFF_UP != 0 && flags & IFF_LOWER_UP != 0,
    };
    for (kind, value) in attributes(&payload[IFINFOMSG_LEN..]) {
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

/// Where on an interface an XDP program runs (one program per mode at most).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttachMode {
    /// Native (driver) XDP.
    Driver,
    /// Generic (skb) XDP.
    Skb,
    /// Offloaded to the NIC.
    Hardware,
}

impl XdpAttachMode {
    /// The mode's `XDP_FLAGS_*_MODE` bit.
    pub(crate) fn flag(self) -> u32 {
        const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
        const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
        const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
        match self {
            Self::Driver => XDP_FLAGS_DRV_MODE,
            Self::Skb => XDP_FLAGS_SKB_MODE,
            Self::Hardware => XDP_FLAGS_HW_MODE,
        }
    }

    /// The mode as `ip link` and `bpftool` name it: native, generic or offload.
    pub fn name(self) -> &'static str {
        match self {
            Self::Driver => "native",
            Self::Skb => "generic",
            Self::Hardware => "offload",
        }
    }
}

/// An XDP program attached to an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpProgram {
    /// Its mode.
    pub mode: XdpAttachMode,
    /// Its kernel id (as `bpftool prog show id` takes it).
    pub id: u32,
}

/// The XDP programs attached to the link of an `RTM_NEWLINK` payload (attribute `IFLA_XDP`),
/// in the order the kernel lists them; empty when there are none.
pub fn parse_link_xdp(payload: &[u8]) -> Option<Vec<XdpProgram>> {
    let attrs = payload.get(IFINFOMSG_LEN..)?;
    let mut programs = Vec::new();
    for (_, xdp) in attributes(attrs).filter(|(kind, _)| *kind == IFLA_XDP) {
        for (kind, value) in attributes(xdp) {
            let mode = match kind {
                IFLA_XDP_DRV_PROG_ID => XdpAttachMode::Driver,
                IFLA_XDP_SKB_PROG_ID => XdpAttachMode::Skb,
                IFLA_XDP_HW_PROG_ID => XdpAttachMode::Hardware,
                _ => continue,
            };
            match u32_of(value) {
                Some(id) if id != 0 => programs.push(XdpProgram { mode, id }),
                _ => {}
            }
        }
    }
    Some(programs)
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
    /// Forward via these hops (or via next-hop object `nh_id`, resolved by the reader).
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
            RTA_MULTIPATH => multipath = parse_multipath(family, value),
            _ => {}
        }
    }
    let dst = dst.unwrap_or(match family {
        AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        AF_INET6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => return None,
    });
    let kind = match route_type {
        RTN_UNICAST => {
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

/// The hops of an `RTA_MULTIPATH` value: a sequence of `struct rtnexthop { len u16, flags u8,
/// hops u8, ifindex i32 }`, each followed by its own attributes. Stops at the first malformed
/// one.
fn parse_multipath(family: u8, mut rest: &[u8]) -> Vec<RouteHop> {
    let mut hops = Vec::new();
    while let Some(header) = rest.get(..8) {
        let len = usize::from(u16::from_ne_bytes([header[0], header[1]]));
        if len < 8 || len > rest.len() {
            break;
        }
        let ifindex = i32::from_ne_bytes([header[4], header[5], header[6], header[7]]) as u32;
        let mut gateway = None;
        for (kind, value) in attributes(&rest[8..len]) {
            match kind {
                RTA_GATEWAY => gateway = ip_of(family, value),
                RTA_VIA if value.len() >= 2 => gateway = ip_of(value[0], &value[2..]),
                _ => {}
            }
        }
        hops.push(RouteHop { ifindex, gateway });
        rest = &rest[crate::frame::align(len).min(rest.len())..];
    }
    hops
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
            // struct nexthop_grp { id u32, weight u8, resvd1 u8, resvd2 u16 }
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
    /// Its MAC address, when resolved (not in state incomplete, failed or noarp).
    pub mac: Option<[u8; 6]>,
    /// Who keeps the entry: an administrator (permanent) or the kernel's resolution.
    pub kind: NeighborKind,
}

/// Who keeps a neighbour entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NeighborKind {
    /// Written by an administrator with its address (`ip neigh add … nud permanent`,
    /// `NUD_PERMANENT`): the kernel never probes, ages or deletes it, so nobody needs to look
    /// after it — and replacing it with an entry the kernel must resolve would lose an address
    /// that ARP may never bring back (a peer that does not answer, as a benchmark's sink).
    Permanent,
    /// Resolved, being resolved or failed by the kernel's neighbour discovery (every other
    /// state, managed entries included).
    Dynamic,
}

/// Parses an `RTM_NEWNEIGH` payload.
pub fn parse_neighbor(payload: &[u8]) -> Option<Neighbor> {
    let header = payload.get(..12)?;
    let family = header[0];
    let ifindex = i32::from_ne_bytes(header[4..8].try_into().ok()?) as u32;
    let state = u16::from_ne_bytes([header[8], header[9]]);
    let mut addr = None;
    let mut mac = None;
    for (kind, value) in attributes(&payload[12..]) {
        match kind {
            NDA_DST => addr = ip_of(family, value),
            NDA_LLADDR if value.len() == 6 => mac = <[u8; 6]>::try_from(value).ok(),
            _ => {}
        }
    }
    let usable = state & (NUD_INCOMPLETE | NUD_FAILED | NUD_NOARP) == 0;
    Some(Neighbor {
        ifindex,
        addr: addr?,
        mac: mac.filter(|_| usable),
        kind: if state & NUD_PERMANENT != 0 {
            NeighborKind::Permanent
        } else {
            NeighborKind::Dynamic
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{align, messages, push_attr, NLA_F_NESTED, RTM_NEWROUTE};

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
        assert_eq!(parsed.kind, NeighborKind::Dynamic);
        // The same entry made permanent by an administrator.
        neighbor[8..10].copy_from_slice(&NUD_PERMANENT.to_ne_bytes());
        let parsed = parse_neighbor(&neighbor).unwrap();
        assert_eq!(
            (parsed.mac, parsed.kind),
            (Some([2, 0, 0, 0, 0, 1]), NeighborKind::Permanent)
        );
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
    fn parses_the_xdp_programs_of_a_link() {
        let mut xdp = Vec::new();
        push_attr(&mut xdp, IFLA_XDP_DRV_PROG_ID, &42u32.to_ne_bytes());
        push_attr(&mut xdp, 2, &[4]); // IFLA_XDP_ATTACHED: multi
        push_attr(&mut xdp, IFLA_XDP_SKB_PROG_ID, &7u32.to_ne_bytes());
        push_attr(&mut xdp, IFLA_XDP_HW_PROG_ID, &0u32.to_ne_bytes()); // none
        let mut link = vec![0u8; 16];
        link.extend(attr(IFLA_IFNAME, b"p0\0"));
        link.extend(attr(IFLA_XDP | NLA_F_NESTED, &xdp));
        assert_eq!(
            parse_link_xdp(&link),
            Some(vec![
                XdpProgram {
                    mode: XdpAttachMode::Driver,
                    id: 42
                },
                XdpProgram {
                    mode: XdpAttachMode::Skb,
                    id: 7
                },
            ])
        );
        assert_eq!(parse_link_xdp(&link[..16]), Some(Vec::new()));
        assert_eq!(parse_link_xdp(&link[..15]), None);
    }

    #[test]
    fn malformed_input_is_skipped_not_fatal() {
        let bad = message(RTM_NEWROUTE, &[0u8; 4]);
        assert_eq!(parse_route(messages(&bad).next().unwrap().payload), None);
        // A multipath whose second hop claims more bytes than there are: the first one stays.
        let mut multipath = Vec::new();
        multipath.extend_from_slice(&8u16.to_ne_bytes());
        multipath.extend_from_slice(&[0, 0]);
        multipath.extend_from_slice(&4i32.to_ne_bytes());
        multipath.extend_from_slice(&64u16.to_ne_bytes());
        multipath.extend_from_slice(&[0; 6]);
        let mut payload = vec![AF_INET, 0, 0, 0, 254, 4, 0, 1, 0, 0, 0, 0];
        payload.extend(attr(RTA_MULTIPATH, &multipath));
        assert_eq!(
            parse_route(&payload).unwrap().kind,
            RouteKind::Unicast {
                hops: vec![RouteHop {
                    ifindex: 4,
                    gateway: None
                }],
                nh_id: None
            }
        );
    }
}
