//! Typed request builders: dumps, one link's state, a managed neighbour, veth pairs, link
//! up/down and deletion, addresses, routes (add-or-replace with ECMP, delete), and detaching an
//! XDP program only if it is still the expected one. Each returns the complete message bytes
//! for [`crate::RouteSocket`]; the sequence number comes from the socket.
//!
//! [`RequestBuilder`] is the general form they are built with.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::frame::{
    align, push_attr, AF_INET, AF_INET6, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP,
    NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, RTM_DELLINK, RTM_DELROUTE, RTM_GETADDR, RTM_GETLINK,
    RTM_GETNEIGH, RTM_GETNEXTHOP, RTM_GETROUTE, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWNEIGH,
    RTM_NEWROUTE, RTM_SETLINK,
};
use crate::parse::{
    XdpAttachMode, IFA_ADDRESS, IFA_LOCAL, IFF_UP, IFINFOMSG_LEN, IFLA_IFNAME, IFLA_XDP, NDA_DST,
    RTA_DST, RTA_GATEWAY, RTA_MULTIPATH, RTA_OIF, RTN_UNICAST, RT_TABLE_MAIN,
};

const RTPROT_STATIC: u8 = 4;
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
        Self::with_flags(kind, NLM_F_REQUEST | NLM_F_ACK | extra_flags, seq, header)
    }

    fn with_flags(kind: u16, flags: u16, seq: u32, header: &[u8]) -> Self {
        let mut message = Vec::with_capacity(128);
        message.extend_from_slice(&0u32.to_ne_bytes());
        message.extend_from_slice(&kind.to_ne_bytes());
        message.extend_from_slice(&flags.to_ne_bytes());
        message.extend_from_slice(&seq.to_ne_bytes());
        message.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
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

/// An address family of routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpFamily {
    /// IPv4 (`AF_INET`).
    V4,
    /// IPv6 (`AF_INET6`).
    V6,
}

/// What a dump request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dump {
    /// Every link (`RTM_GETLINK`).
    Links,
    /// Every address of every family (`RTM_GETADDR`).
    Addresses,
    /// Every next-hop object (`RTM_GETNEXTHOP`; kernel 5.3, an older one refuses).
    Nexthops,
    /// Every route of one family, all tables (`RTM_GETROUTE`).
    Routes(IpFamily),
    /// Every neighbour of every family (`RTM_GETNEIGH`).
    Neighbors,
}

impl Dump {
    /// The request's message type.
    #[must_use]
    pub fn kind(self) -> u16 {
        match self {
            Self::Links => RTM_GETLINK,
            Self::Addresses => RTM_GETADDR,
            Self::Nexthops => RTM_GETNEXTHOP,
            Self::Routes(_) => RTM_GETROUTE,
            Self::Neighbors => RTM_GETNEIGH,
        }
    }
}

/// A dump request (`NLM_F_DUMP`): a zeroed family header of the kind's size (`ifinfomsg`,
/// `ifaddrmsg`, `nhmsg`, `rtmsg`, `ndmsg`) whose first byte is the family.
#[must_use]
pub fn dump_request(what: Dump, seq: u32) -> Vec<u8> {
    let (header_len, family) = match what {
        Dump::Links => (IFINFOMSG_LEN, 0),
        Dump::Addresses | Dump::Nexthops => (8, 0),
        Dump::Routes(IpFamily::V4) => (12, AF_INET),
        Dump::Routes(IpFamily::V6) => (12, AF_INET6),
        Dump::Neighbors => (12, 0),
    };
    let mut header = [0u8; 16];
    header[0] = family;
    RequestBuilder::with_flags(
        what.kind(),
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
        &header[..header_len],
    )
    .finish()
}

/// A 16-byte `ifinfomsg`: family unspecified, interface `index` (0 = none/new), `IFF_UP` set in
/// the flags when `up`, with `IFF_UP` in the change mask when `set_up` is true.
fn ifinfomsg(index: u32, up: bool, set_up: bool) -> [u8; IFINFOMSG_LEN] {
    let mut header = [0u8; IFINFOMSG_LEN];
    header[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
    header[8..12].copy_from_slice(&(if up { IFF_UP } else { 0 }).to_ne_bytes());
    header[12..16].copy_from_slice(&(if set_up { IFF_UP } else { 0 }).to_ne_bytes());
    header
}

/// `RTM_GETLINK` for interface `ifindex` alone, acknowledged: the answer is one
/// `RTM_NEWLINK` (with its XDP state, see [`crate::parse_link_xdp`]) and the acknowledgement.
#[must_use]
pub fn get_link_request(seq: u32, ifindex: u32) -> Vec<u8> {
    RequestBuilder::new(RTM_GETLINK, 0, seq, &ifinfomsg(ifindex, false, false)).finish()
}

/// A request that creates a *managed* neighbour entry (`NTF_EXT_MANAGED`): the kernel resolves
/// it now and keeps it resolved, without traffic.
#[must_use]
pub fn managed_neighbor_request(seq: u32, ifindex: u32, addr: IpAddr) -> Vec<u8> {
    const NDA_FLAGS_EXT: u16 = 15;
    const NTF_EXT_MANAGED: u32 = 1;
    // struct ndmsg { family, pad1, pad2, ifindex, state, flags, type }; state NUD_NONE: the
    // kernel resolves it.
    let mut header = [0u8; 12];
    header[0] = if addr.is_ipv4() { AF_INET } else { AF_INET6 };
    header[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
    let mut request = RequestBuilder::new(RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE, seq, &header);
    match addr {
        IpAddr::V4(v4) => request.attr(NDA_DST, &v4.octets()),
        IpAddr::V6(v6) => request.attr(NDA_DST, &v6.octets()),
    };
    request.attr_u32(NDA_FLAGS_EXT, NTF_EXT_MANAGED).finish()
}

/// One end of a veth pair to create: its name and the network namespace (an open file
/// descriptor of `/run/netns/NAME`) it is created in.
#[derive(Debug, Clone, Copy)]
pub struct VethEnd<'a> {
    /// Interface name in its namespace (at most 15 bytes).
    pub name: &'a str,
    /// The target network namespace; it must stay open until the request is sent.
    pub netns: BorrowedFd<'a>,
}

/// `RTM_NEWLINK` creating a veth pair whose ends are created directly in their namespaces
/// (`IFLA_NET_NS_FD` for both), with MTU `mtu`. Both ends start administratively down (the
/// kernel refuses `IFF_UP` at creation: an end cannot open before its peer is attached); bring
/// them up with [`set_link_up_request`].
#[must_use]
pub fn veth_pair_request(seq: u32, first: VethEnd<'_>, peer: VethEnd<'_>, mtu: u32) -> Vec<u8> {
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
        .attr_u32(IFLA_NET_NS_FD, first.netns.as_raw_fd() as u32)
        .begin_nest(IFLA_LINKINFO)
        .attr_str(IFLA_INFO_KIND, "veth")
        .begin_nest(IFLA_INFO_DATA)
        .begin_nest(VETH_INFO_PEER)
        .raw(&ifinfomsg(0, false, false))
        .attr_str(IFLA_IFNAME, peer.name)
        .attr_u32(IFLA_MTU, mtu)
        .attr_u32(IFLA_NET_NS_FD, peer.netns.as_raw_fd() as u32)
        .end_nest()
        .end_nest()
        .end_nest();
    request.finish()
}

/// `RTM_NEWLINK` setting interface `ifindex` administratively up or down.
#[must_use]
pub fn set_link_up_request(seq: u32, ifindex: u32, up: bool) -> Vec<u8> {
    RequestBuilder::new(RTM_NEWLINK, 0, seq, &ifinfomsg(ifindex, up, true)).finish()
}

/// `RTM_DELLINK` deleting interface `ifindex` (for a veth end: the pair).
#[must_use]
pub fn delete_link_request(seq: u32, ifindex: u32) -> Vec<u8> {
    RequestBuilder::new(RTM_DELLINK, 0, seq, &ifinfomsg(ifindex, false, false)).finish()
}

/// `RTM_SETLINK` detaching the XDP program attached to `ifindex` in `mode`, only if it is
/// still the program `expected` (an fd of it; `XDP_FLAGS_REPLACE` with
/// `IFLA_XDP_EXPECTED_FD`): the kernel refuses with `EEXIST` if another program has replaced
/// it meanwhile.
#[must_use]
pub fn xdp_detach_request(
    seq: u32,
    ifindex: u32,
    mode: XdpAttachMode,
    expected: BorrowedFd<'_>,
) -> Vec<u8> {
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    const IFLA_XDP_EXPECTED_FD: u16 = 8;
    const XDP_FLAGS_REPLACE: u32 = 1 << 4;
    let mut request = RequestBuilder::new(RTM_SETLINK, 0, seq, &ifinfomsg(ifindex, false, false));
    request
        .begin_nest(IFLA_XDP)
        .attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes())
        .attr_u32(IFLA_XDP_FLAGS, mode.flag() | XDP_FLAGS_REPLACE)
        .attr(IFLA_XDP_EXPECTED_FD, &expected.as_raw_fd().to_ne_bytes())
        .end_nest();
    request.finish()
}

/// `RTM_NEWADDR` adding IPv4 `addr/prefix_len` to interface `ifindex` (replacing an identical
/// address).
#[must_use]
pub fn add_address_request(seq: u32, ifindex: u32, addr: Ipv4Addr, prefix_len: u8) -> Vec<u8> {
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

/// A 12-byte IPv4 `rtmsg` in the main table, protocol static.
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
/// several. Each hop is `(ifindex, gateway)`.
///
/// # Panics
///
/// If `hops` is empty.
#[must_use]
pub fn route_request(seq: u32, dst: Ipv4Addr, prefix_len: u8, hops: &[(u32, Ipv4Addr)]) -> Vec<u8> {
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
    use crate::frame::{attributes, messages, NLMSG_HDR_LEN};

    #[test]
    fn dump_requests_have_the_family_header_of_their_kind() {
        for (what, len, family) in [
            (Dump::Links, 32, 0),
            (Dump::Addresses, 24, 0),
            (Dump::Nexthops, 24, 0),
            (Dump::Routes(IpFamily::V4), 28, AF_INET),
            (Dump::Routes(IpFamily::V6), 28, AF_INET6),
            (Dump::Neighbors, 28, 0),
        ] {
            let request = dump_request(what, 9);
            assert_eq!(request.len(), len, "{what:?}");
            assert_eq!(
                u32::from_ne_bytes(request[..4].try_into().unwrap()) as usize,
                len
            );
            assert_eq!(u16::from_ne_bytes([request[4], request[5]]), what.kind());
            assert_eq!(
                u16::from_ne_bytes([request[6], request[7]]),
                NLM_F_REQUEST | NLM_F_DUMP
            );
            assert_eq!(request[NLMSG_HDR_LEN], family);
        }
    }

    #[test]
    fn xdp_detach_nests_fd_flags_and_expected_fd() {
        let expected = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsFd;
        let request = xdp_detach_request(3, 5, XdpAttachMode::Skb, expected.as_fd());
        let message = messages(&request).next().unwrap();
        assert_eq!((message.kind, message.seq), (RTM_SETLINK, 3));
        assert_eq!(
            i32::from_ne_bytes(message.payload[4..8].try_into().unwrap()),
            5
        );
        let (kind, xdp) = attributes(&message.payload[IFINFOMSG_LEN..])
            .next()
            .unwrap();
        assert_eq!(kind, IFLA_XDP);
        let inner: Vec<_> = attributes(xdp)
            .map(|(kind, value)| (kind, i32::from_ne_bytes(value.try_into().unwrap())))
            .collect();
        assert_eq!(
            inner,
            [
                (1, -1),
                (3, 1 << 1 | 1 << 4), // XDP_FLAGS_SKB_MODE | XDP_FLAGS_REPLACE
                (8, expected.as_raw_fd())
            ]
        );
    }

    #[test]
    fn get_link_covers_header_and_index() {
        let message = get_link_request(1, 5);
        assert_eq!(message.len(), 32);
        assert_eq!(u32::from_ne_bytes(message[..4].try_into().unwrap()), 32);
        assert_eq!(i32::from_ne_bytes(message[20..24].try_into().unwrap()), 5);
    }
}
