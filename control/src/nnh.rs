//! The next-next-hop tag: standard BGP's stand-in for the adaptive-routing framework draft's
//! NNHN capability (a route carries its advertiser's next hop by router ID).
//!
//! Every switch tags each route it *receives* with a BGP large community (RFC 8092) naming the
//! neighbour it came from, after deleting any tag the route already carried. When it
//! advertises the route on, the route therefore carries exactly one tag, naming the
//! advertiser's own next hop: what a receiver needs per path to key remote congestion by router
//! ID ([`crate::paths::NeighborPaths::next_next_ids`]). The tag is
//! `GLOBAL_ADMINISTRATOR:NEXT_NEXT_HOP:<router ID as a 32-bit number>`: the global
//! administrator is the first private 4-byte ASN (RFC 6996, the fabric's own numbering base,
//! [`ofan_topology::plan::ASN_BASE`]), the first local-data part says what the tag is, the
//! second is the router ID (BGP identifier) — both local-data parts are 32 bits, so an IPv4
//! router ID fits whole.
//!
//! This module is the one place that knows the tag: the lab's FRR and BIRD configurations write
//! it from [`NnhTag`] and [`MATCH_ANY`], the BMP station ([`crate::bmp::rib`]) reads it back
//! with [`NnhTag::of_attributes`].

use std::net::Ipv4Addr;

use bgpkit_parser::models::{Attributes, LargeCommunity, MetaCommunity};

/// The tag's global administrator: [`ofan_topology::plan::ASN_BASE`], 4 200 000 000.
pub const GLOBAL_ADMINISTRATOR: u32 = ofan_topology::plan::ASN_BASE;

/// The tag's first local-data part: what the tag says (1: the advertiser's next hop).
pub const NEXT_NEXT_HOP: u32 = 1;

/// A regular expression that matches every tag's text and no other large community (FRR's
/// expanded large-community lists match each community as `GA:LD1:LD2`).
pub const MATCH_ANY: &str = "^4200000000:1:[0-9]+$";

/// One next-next-hop tag: the router ID of the switch the advertiser received the route from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NnhTag {
    /// The named switch's BGP identifier.
    pub router_id: Ipv4Addr,
}

impl NnhTag {
    /// The tag naming `router_id`.
    #[must_use]
    pub const fn new(router_id: Ipv4Addr) -> Self {
        Self { router_id }
    }

    /// The community's three 32-bit parts: global administrator, local data 1 and 2.
    #[must_use]
    pub fn parts(self) -> [u32; 3] {
        [
            GLOBAL_ADMINISTRATOR,
            NEXT_NEXT_HOP,
            u32::from(self.router_id),
        ]
    }

    /// The tag a large community is, if it is one.
    #[must_use]
    pub fn from_parts([global, function, id]: [u32; 3]) -> Option<Self> {
        (global == GLOBAL_ADMINISTRATOR && function == NEXT_NEXT_HOP)
            .then(|| Self::new(Ipv4Addr::from(id)))
    }

    /// The tag `community` is, if it is one.
    #[must_use]
    pub fn from_community(community: &LargeCommunity) -> Option<Self> {
        let [first, second] = community.local_data;
        Self::from_parts([community.global_admin, first, second])
    }

    /// The one tag among a route's path attributes; `None` when it carries none, or several
    /// (a speaker on the way added its own without deleting the one before: which is the
    /// advertiser's cannot be told).
    #[must_use]
    pub fn of_attributes(attributes: &Attributes) -> Option<Self> {
        let mut tags = attributes
            .iter_communities()
            .filter_map(|community| match community {
                MetaCommunity::Large(large) => Self::from_community(&large),
                _ => None,
            });
        let tag = tags.next()?;
        tags.all(|other| other == tag).then_some(tag)
    }
}

/// RFC 8092's textual form, as FRR and the docs write it: `4200000000:1:184483841`.
impl std::fmt::Display for NnhTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [global, function, id] = self.parts();
        write!(f, "{global}:{function}:{id}")
    }
}

/// Hand-made BGP UPDATE messages for tests: one IPv4 prefix with an AS_SEQUENCE of 4-octet
/// ASNs and large communities.
#[cfg(test)]
pub(crate) mod wire {
    use std::net::Ipv4Addr;

    /// One announced path.
    pub(crate) struct Announcement<'a> {
        pub(crate) prefix: (Ipv4Addr, u8),
        /// The ADD-PATH path identifier (encoded only when `Some`).
        pub(crate) path_id: Option<u32>,
        pub(crate) as_path: &'a [u32],
        pub(crate) next_hop: Ipv4Addr,
        pub(crate) large_communities: &'a [[u32; 3]],
    }

    /// The whole BGP message (marker, length, type 2).
    pub(crate) fn update(announcement: &Announcement<'_>) -> Vec<u8> {
        let mut attributes = vec![0x40, 1, 1, 0]; // ORIGIN IGP
        let path_len = 2 + 4 * announcement.as_path.len();
        attributes.extend_from_slice(&[0x40, 2, path_len as u8, 2]);
        attributes.push(announcement.as_path.len() as u8);
        for asn in announcement.as_path {
            attributes.extend_from_slice(&asn.to_be_bytes());
        }
        attributes.extend_from_slice(&[0x40, 3, 4]);
        attributes.extend_from_slice(&announcement.next_hop.octets());
        if !announcement.large_communities.is_empty() {
            // Optional transitive, type 32 (RFC 8092).
            let len = 12 * announcement.large_communities.len();
            attributes.extend_from_slice(&[0xc0, 32, len as u8]);
            for part in announcement.large_communities.iter().flatten() {
                attributes.extend_from_slice(&part.to_be_bytes());
            }
        }
        let mut nlri = Vec::new();
        if let Some(id) = announcement.path_id {
            nlri.extend_from_slice(&id.to_be_bytes());
        }
        let (network, len) = announcement.prefix;
        nlri.push(len);
        nlri.extend_from_slice(&network.octets()[..usize::from(len).div_ceil(8)]);
        let mut body = vec![0, 0]; // no withdrawn routes
        body.extend_from_slice(&(attributes.len() as u16).to_be_bytes());
        body.extend(attributes);
        body.extend(nlri);
        let mut message = vec![0xff; 16];
        message.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
        message.push(2);
        message.extend(body);
        message
    }
}

#[cfg(test)]
mod tests {
    use bgpkit_parser::models::{AsnLength, BgpMessage};
    use bgpkit_parser::parser::bgp::parse_bgp_message;
    use bytes::Bytes;

    use super::wire::{update, Announcement};
    use super::*;

    fn attributes_of(large_communities: &[[u32; 3]]) -> Attributes {
        let bytes = update(&Announcement {
            prefix: (Ipv4Addr::new(10, 3, 1, 0), 24),
            path_id: Some(1),
            as_path: &[4_200_000_024, 4_200_000_032],
            next_hop: Ipv4Addr::new(100, 64, 0, 1),
            large_communities,
        });
        match parse_bgp_message(&mut Bytes::from(bytes), true, &AsnLength::Bits32) {
            Ok(BgpMessage::Update(update)) => update.attributes,
            other => panic!("not an UPDATE: {other:?}"),
        }
    }

    #[test]
    fn a_tag_is_the_router_id_in_a_large_community() {
        let tag = NnhTag::new(Ipv4Addr::new(10, 255, 2, 1));
        assert_eq!(tag.parts(), [4_200_000_000, 1, 0x0aff_0201]);
        assert_eq!(tag.to_string(), "4200000000:1:184484353");
        assert_eq!(NnhTag::from_parts(tag.parts()), Some(tag));
        assert_eq!(NnhTag::from_parts([4_200_000_000, 2, 7]), None);
        assert_eq!(NnhTag::from_parts([65000, 1, 7]), None);
        assert!(MATCH_ANY.starts_with(&format!("^{GLOBAL_ADMINISTRATOR}:{NEXT_NEXT_HOP}:")));
    }

    #[test]
    fn the_tag_of_an_update_is_read_from_its_bytes() {
        let tag = NnhTag::new(Ipv4Addr::new(10, 255, 3, 0));
        let other = [64_512, 7, 7];
        assert_eq!(
            NnhTag::of_attributes(&attributes_of(&[other, tag.parts()])),
            Some(tag),
            "another large community beside it changes nothing"
        );
        assert_eq!(NnhTag::of_attributes(&attributes_of(&[other])), None);
        assert_eq!(NnhTag::of_attributes(&attributes_of(&[])), None);
        let second = NnhTag::new(Ipv4Addr::new(10, 255, 3, 1));
        assert_eq!(
            NnhTag::of_attributes(&attributes_of(&[tag.parts(), second.parts()])),
            None,
            "two tags: ambiguous"
        );
    }
}
