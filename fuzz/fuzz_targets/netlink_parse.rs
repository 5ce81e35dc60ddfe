//! Arbitrary bytes through every parser of the rtnetlink codec (`ofan-netlink`).
//!
//! The input is read twice: as a datagram from the kernel (split into messages, each payload
//! given to every parser, its attributes walked two levels deep) and as one payload directly.
//! Checked: no panic, and a parsed route's hops stay within what the payload can hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_netlink::{
    attributes, error_code, messages, parse_address, parse_link, parse_link_xdp, parse_neighbor,
    parse_nexthop, parse_route, RouteKind,
};

fn parse_payload(payload: &[u8]) {
    let _ = parse_link(payload);
    let _ = parse_link_xdp(payload);
    let _ = parse_address(payload);
    let _ = parse_nexthop(payload);
    let _ = parse_neighbor(payload);
    let _ = error_code(payload);
    if let Some(route) = parse_route(payload) {
        if let RouteKind::Unicast { hops, .. } = route.kind {
            // Every multipath hop takes at least 8 bytes of the payload.
            assert!(hops.len() <= payload.len() / 8 + 1);
        }
    }
    for header in [8, 12, 16] {
        for (_, value) in attributes(payload.get(header..).unwrap_or(&[])) {
            for (_, inner) in attributes(value) {
                let _ = attributes(inner).count();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    for message in messages(data) {
        parse_payload(message.payload);
    }
    parse_payload(data);
});
