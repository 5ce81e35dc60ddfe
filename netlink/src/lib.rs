//! # ofan-netlink — the one rtnetlink codec of ofan
//!
//! Every conversation of ofan with the kernel's routing layer goes through this crate: the
//! control thread's FIB mirror (`ofan-control`: dumps links, addresses, routes, next-hop objects
//! and neighbours, listens to their notifications, asks for managed neighbours), the data path's
//! XDP steering (`ofan-dataplane`: which programs an interface has, detach only the expected
//! one) and the lab (`ofan-lab`: veth pairs across namespaces, addresses, routes, link state).
//! It sits below all three, next to `topology`, and depends on nothing of ofan.
//!
//! The layers, bottom up:
//!
//! - framing: the messages of a datagram ([`messages`]), the attributes of a payload or of a
//!   nested attribute ([`attributes`]), the errno of an `NLMSG_ERROR` ([`error_code`]), message
//!   types and flags.
//! - parsers: typed views of what the kernel sends — [`Link`] and its XDP programs
//!   ([`parse_link_xdp`]), [`Address`], [`Route`] with its [`RouteHop`]s (single,
//!   `RTA_MULTIPATH`, or a next-hop object by `RTA_NH_ID`), [`NexthopObject`]s and groups,
//!   [`Neighbor`]. They read byte slices and **never panic on malformed input**: what does not
//!   parse is `None` (a property test and a `cargo fuzz` target feed them arbitrary bytes).
//! - request builders: [`dump_request`], [`get_link_request`], [`managed_neighbor_request`],
//!   [`veth_pair_request`], [`set_link_up_request`], [`delete_link_request`],
//!   [`add_address_request`], [`route_request`], [`delete_route_request`],
//!   [`xdp_detach_request`], and the general [`RequestBuilder`].
//! - [`RouteSocket`]: one small blocking `NETLINK_ROUTE` socket — multicast groups, send,
//!   receive with a timeout, request-and-wait-for-acknowledgement returning the kernel's errno
//!   as an [`std::io::Error`], and dumps. Its libc calls are the crate's only `unsafe` code, in
//!   one private module with a `// SAFETY:` comment per block.
//!
//! ## Why our own codec and not `netlink-packet-route`
//!
//! The maintained crates of this field are `netlink-packet-route` (messages), on top of
//! `netlink-packet-core` (framing, `ErrorMessage`), with `netlink-sys` (the socket) and
//! `rtnetlink` (an async, tokio-based client — ofan has no async runtime, so not that one). As
//! of `netlink-packet-route` 0.34 / `netlink-packet-core` 0.9 / `netlink-sys` 0.9 they cover
//! most of what ofan needs — `RouteAttribute::MultiPath` and `NhId`, `NeighbourExtFlags::Managed`,
//! `LinkXdp::ExpectedFd` and `Flags`, `LinkAttribute::NetNsFd` for a veth peer in another
//! namespace, errors as `ErrorMessage` with `to_io()` — but not next-hop objects: its
//! `RouteNetlinkMessage` has no `RTM_NEWNEXTHOP`/`RTM_GETNEXTHOP` variant and deserializing one
//! fails with "Unknown message type". FRR installs its routes as `RTA_NH_ID` references to
//! next-hop groups, which the mirror must resolve, so taking the crate would still leave a
//! hand-written nexthop codec beside it: two codecs again. `netlink-sys`' blocking socket has no
//! receive timeout (the mirror's follower and every request here wait with one), so it would
//! still need an unsafe `poll` (or `SO_RCVTIMEO`) of our own. What ofan uses of rtnetlink is small (six parsers, ten
//! requests and a socket: ~1,300 lines with their docs), zero-copy over the received bytes,
//! property-tested and fuzzed; so it stays here, one codec in one place. Should
//! `netlink-packet-route` gain next-hop objects, moving the parsers onto it is local to this
//! crate: the types above are ofan's, not its.
#![deny(unsafe_code)]

mod frame;
mod parse;
mod request;
mod socket;
#[allow(unsafe_code)]
mod sys;

pub use frame::{
    attributes, error_code, messages, Message, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_CREATE,
    NLM_F_DUMP, NLM_F_EXCL, NLM_F_REPLACE, NLM_F_REQUEST, RTM_DELLINK, RTM_DELROUTE, RTM_GETADDR,
    RTM_GETLINK, RTM_GETNEIGH, RTM_GETNEXTHOP, RTM_GETROUTE, RTM_NEWADDR, RTM_NEWLINK,
    RTM_NEWNEIGH, RTM_NEWNEXTHOP, RTM_NEWROUTE, RTM_SETLINK,
};
pub use parse::{
    parse_address, parse_link, parse_link_xdp, parse_neighbor, parse_nexthop, parse_route, Address,
    Link, Neighbor, NeighborKind, NexthopObject, Route, RouteHop, RouteKind, XdpAttachMode,
    XdpProgram, RT_TABLE_LOCAL, RT_TABLE_MAIN,
};
pub use request::{
    add_address_request, delete_link_request, delete_route_request, dump_request, get_link_request,
    managed_neighbor_request, route_request, set_link_up_request, veth_pair_request,
    xdp_detach_request, Dump, IpFamily, RequestBuilder, VethEnd,
};
pub use socket::{Group, QueryError, RouteSocket};
