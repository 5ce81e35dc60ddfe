//! Properties of the codec: every parser takes arbitrary bytes without panicking (raw, inside
//! well-framed messages, and as well-framed attributes of the kinds the parsers look at, with
//! arbitrary values), and what the request builders write, the parsers read back.

use std::net::{IpAddr, Ipv4Addr};

use ofan_netlink::{
    add_address_request, attributes, error_code, messages, parse_address, parse_link,
    parse_link_xdp, parse_neighbor, parse_nexthop, parse_route, route_request, set_link_up_request,
    Message, RouteHop, RouteKind, RTM_NEWADDR, RTM_NEWLINK, RTM_NEWROUTE,
};
use proptest::prelude::*;

/// Runs every parser of the crate on `payload`, and walks its attributes (and theirs, nested)
/// at every family-header length the parsers use.
fn parse_everything(payload: &[u8]) {
    let _ = parse_link(payload);
    let _ = parse_link_xdp(payload);
    let _ = parse_address(payload);
    let _ = parse_route(payload);
    let _ = parse_nexthop(payload);
    let _ = parse_neighbor(payload);
    let _ = error_code(payload);
    for header in [0, 8, 12, 16] {
        for (_, value) in attributes(payload.get(header..).unwrap_or(&[])) {
            for (_, inner) in attributes(value) {
                let _ = attributes(inner).count();
            }
        }
    }
}

fn parse_datagram(datagram: &[u8]) {
    for Message { payload, .. } in messages(datagram) {
        parse_everything(payload);
    }
}

/// A well-framed attribute: length, kind (small, as the parsers' are, sometimes nested) and
/// `value`, padded.
fn attribute(kind: u16, nested: bool, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let kind = if nested { kind | 0x8000 } else { kind };
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// A family header (family byte AF_INET, AF_INET6 or anything) followed by well-framed
/// attributes of kinds 0..48 (every kind the parsers read: `IFLA_XDP` is 43) with arbitrary
/// values — which may themselves be well-framed attribute runs, such as `RTA_MULTIPATH`'s
/// `rtnexthop`s or `IFLA_XDP`'s program ids.
fn framed_payload() -> impl Strategy<Value = Vec<u8>> {
    let family = prop_oneof![Just(2u8), Just(10u8), any::<u8>()];
    let header = (family, proptest::collection::vec(any::<u8>(), 7..16));
    let value = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..24),
        proptest::collection::vec(
            (
                0u16..48,
                any::<bool>(),
                proptest::collection::vec(any::<u8>(), 0..20)
            ),
            0..4
        )
        .prop_map(|inner| {
            inner
                .iter()
                .flat_map(|(kind, nested, value)| attribute(*kind, *nested, value))
                .collect()
        }),
    ];
    let attrs = proptest::collection::vec((0u16..48, any::<bool>(), value), 0..8);
    (header, attrs).prop_map(|((family, mut header), attrs)| {
        header.insert(0, family);
        for (kind, nested, value) in attrs {
            header.extend(attribute(kind, nested, &value));
        }
        header
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_datagram(&bytes);
        parse_everything(&bytes);
    }

    #[test]
    fn framed_attributes_with_arbitrary_values_never_panic(
        payloads in proptest::collection::vec(framed_payload(), 1..4),
        kind in any::<u16>(),
    ) {
        let mut datagram = Vec::new();
        for payload in &payloads {
            parse_everything(payload);
            datagram.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
            datagram.extend_from_slice(&kind.to_ne_bytes());
            datagram.extend_from_slice(&[0; 10]);
            datagram.extend_from_slice(payload);
            datagram.resize(datagram.len().next_multiple_of(4), 0);
        }
        prop_assert_eq!(messages(&datagram).count(), payloads.len());
        parse_datagram(&datagram);
    }

    #[test]
    fn a_route_request_parses_back(
        dst in any::<u32>(),
        prefix_len in 0u8..=32,
        hops in proptest::collection::vec((1u32..1000, any::<u32>()), 1..6),
    ) {
        let dst = Ipv4Addr::from(dst);
        let hops: Vec<(u32, Ipv4Addr)> =
            hops.into_iter().map(|(ifindex, gateway)| (ifindex, Ipv4Addr::from(gateway))).collect();
        let request = route_request(1, dst, prefix_len, &hops);
        let message = messages(&request).next().unwrap();
        prop_assert_eq!(message.kind, RTM_NEWROUTE);
        let route = parse_route(message.payload).unwrap();
        let expected_dst = if prefix_len > 0 { dst } else { Ipv4Addr::UNSPECIFIED };
        prop_assert_eq!(route.dst, IpAddr::V4(expected_dst));
        prop_assert_eq!(route.prefix_len, prefix_len);
        let expected: Vec<RouteHop> = hops
            .iter()
            .map(|(ifindex, gateway)| RouteHop { ifindex: *ifindex, gateway: Some(IpAddr::V4(*gateway)) })
            .collect();
        prop_assert_eq!(route.kind, RouteKind::Unicast { hops: expected, nh_id: None });
    }

    #[test]
    fn address_and_link_requests_parse_back(
        ifindex in 1u32..100_000,
        addr in any::<u32>(),
        prefix_len in 0u8..=32,
        up in any::<bool>(),
    ) {
        let request = add_address_request(1, ifindex, Ipv4Addr::from(addr), prefix_len);
        let message = messages(&request).next().unwrap();
        prop_assert_eq!(message.kind, RTM_NEWADDR);
        let address = parse_address(message.payload).unwrap();
        prop_assert_eq!(
            (address.index, address.addr, address.prefix_len),
            (ifindex, IpAddr::V4(Ipv4Addr::from(addr)), prefix_len)
        );

        let request = set_link_up_request(2, ifindex, up);
        let message = messages(&request).next().unwrap();
        prop_assert_eq!((message.kind, message.seq), (RTM_NEWLINK, 2));
        prop_assert_eq!(parse_link(message.payload).unwrap().index, ifindex);
    }
}
