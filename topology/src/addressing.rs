//! The IPv4 addressing plan, documented in the crate root: encoding positions as addresses and
//! decoding addresses back into positions.

use std::net::Ipv4Addr;

use crate::shape::Shape;

/// Prefix length of every point-to-point link address.
pub(crate) const LINK_PREFIX_LEN: u8 = 31;
/// Prefix length of a destination-edge prefix.
pub(crate) const EDGE_PREFIX_LEN: u8 = 24;

const SWITCH_LINK_BASE: u32 = u32::from_be_bytes([100, 64, 0, 0]);
const SWITCH_LINK_SPAN: u32 = 1 << 22;

/// Address of host `slot` under edge `edge` of pod `pod`; `edge_side` selects the edge's end of
/// the host link instead.
pub(crate) fn host_link_address(pod: u32, edge: u32, slot: u32, edge_side: bool) -> Ipv4Addr {
    let last = 2 * slot + u32::from(!edge_side);
    Ipv4Addr::new(10, octet(pod), octet(edge), octet(last))
}

/// The `/24` holding every host-link address of edge `edge` of pod `pod`.
pub(crate) fn edge_prefix(pod: u32, edge: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, octet(pod), octet(edge), 0)
}

/// Address of one end of switch-to-switch link number `number`.
pub(crate) fn switch_link_address(number: u32, upper_end: bool) -> Ipv4Addr {
    Ipv4Addr::from(SWITCH_LINK_BASE + 2 * number + u32::from(upper_end))
}

/// Loopback of the switch with sequential number `number`.
pub(crate) fn loopback(number: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, octet(number >> 8), octet(number & 0xff))
}

/// Who an address belongs to, according to the plan (before looking anything up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// An end of the link of host `slot` under global edge `edge_number`.
    HostLink {
        edge_number: u32,
        slot: u32,
        edge_side: bool,
    },
    /// An end of switch-to-switch link number `number`.
    SwitchLink { number: u32, upper_end: bool },
    /// The loopback of switch number `number`.
    Loopback { number: u32 },
}

/// Decodes an address, checking it against the topology's dimensions.
pub(crate) fn owner(shape: &Shape, ip: Ipv4Addr) -> Option<Owner> {
    let [a, b, c, d] = ip.octets();
    let (b, c, d) = (u32::from(b), u32::from(c), u32::from(d));
    if a == 10 && b == 255 {
        let number = c << 8 | d;
        return (number < shape.num_switches()).then_some(Owner::Loopback { number });
    }
    if a == 10 {
        let (pod, edge) = (b, c);
        let slot = d / 2;
        // In a multi-plane fabric the second octet is `plane · pods + pod`.
        return (pod < shape.planes * shape.pods
            && edge < shape.edges_per_pod
            && slot < shape.hosts_per_edge())
        .then_some(Owner::HostLink {
            edge_number: pod * shape.edges_per_pod + edge,
            slot,
            edge_side: d % 2 == 0,
        });
    }
    let offset = u32::from(ip).wrapping_sub(SWITCH_LINK_BASE);
    if offset < SWITCH_LINK_SPAN {
        let number = offset / 2;
        return (number < shape.num_switch_links()).then_some(Owner::SwitchLink {
            number,
            upper_end: offset % 2 == 1,
        });
    }
    None
}

/// Narrows a value the plan guarantees to fit an octet.
fn octet(value: u32) -> u8 {
    u8::try_from(value).expect("the addressing plan keeps every octet below 256 for k <= 64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TopologyKind;

    #[test]
    fn plan_examples() {
        assert_eq!(
            host_link_address(3, 1, 2, false),
            Ipv4Addr::new(10, 3, 1, 5)
        );
        assert_eq!(host_link_address(3, 1, 2, true), Ipv4Addr::new(10, 3, 1, 4));
        assert_eq!(edge_prefix(3, 1), Ipv4Addr::new(10, 3, 1, 0));
        assert_eq!(switch_link_address(0, false), Ipv4Addr::new(100, 64, 0, 0));
        assert_eq!(switch_link_address(0, true), Ipv4Addr::new(100, 64, 0, 1));
        assert_eq!(
            switch_link_address(200, true),
            Ipv4Addr::new(100, 64, 1, 145)
        );
        assert_eq!(loopback(0), Ipv4Addr::new(10, 255, 0, 0));
        assert_eq!(loopback(5119), Ipv4Addr::new(10, 255, 19, 255));
    }

    #[test]
    fn owner_rejects_out_of_range_addresses() {
        let shape = Shape::new(TopologyKind::FatTree { k: 4 }).unwrap();
        // pod 4, edge 2, slot 2 do not exist at k = 4.
        assert_eq!(owner(&shape, Ipv4Addr::new(10, 4, 0, 1)), None);
        assert_eq!(owner(&shape, Ipv4Addr::new(10, 0, 2, 1)), None);
        assert_eq!(owner(&shape, Ipv4Addr::new(10, 0, 1, 4)), None);
        // 20 switches, 32 switch links at k = 4.
        assert_eq!(owner(&shape, Ipv4Addr::new(10, 255, 0, 20)), None);
        assert_eq!(owner(&shape, Ipv4Addr::new(100, 64, 0, 64)), None);
        assert_eq!(owner(&shape, Ipv4Addr::new(100, 63, 255, 255)), None);
        assert_eq!(owner(&shape, Ipv4Addr::new(192, 168, 0, 1)), None);
        assert_eq!(
            owner(&shape, Ipv4Addr::new(100, 64, 0, 63)),
            Some(Owner::SwitchLink {
                number: 31,
                upper_end: true
            })
        );
        assert_eq!(
            owner(&shape, Ipv4Addr::new(10, 3, 1, 2)),
            Some(Owner::HostLink {
                edge_number: 7,
                slot: 1,
                edge_side: true
            })
        );
    }
}
