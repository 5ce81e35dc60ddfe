//! Message framing: the `nlmsghdr` of every message, the `(length, type)` attributes after a
//! family header (nested attributes are runs of attributes inside a value), the errno of an
//! `NLMSG_ERROR`, and the message types and flags of rtnetlink.
//!
//! Everything here reads byte slices and never panics: a length that does not fit ends the
//! iteration instead.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `NLMSG_ERROR`: an error, or with errno 0 an acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: the end of a dump.
pub const NLMSG_DONE: u16 = 3;
/// `RTM_NEWLINK`: a link (dump answer, notification, or request creating or changing one).
pub const RTM_NEWLINK: u16 = 16;
/// `RTM_DELLINK`.
pub const RTM_DELLINK: u16 = 17;
/// `RTM_GETLINK`.
pub const RTM_GETLINK: u16 = 18;
/// `RTM_SETLINK`.
pub const RTM_SETLINK: u16 = 19;
/// `RTM_NEWADDR`.
pub const RTM_NEWADDR: u16 = 20;
/// `RTM_GETADDR`.
pub const RTM_GETADDR: u16 = 22;
/// `RTM_NEWROUTE`.
pub const RTM_NEWROUTE: u16 = 24;
/// `RTM_DELROUTE`.
pub const RTM_DELROUTE: u16 = 25;
/// `RTM_GETROUTE`.
pub const RTM_GETROUTE: u16 = 26;
/// `RTM_NEWNEIGH`.
pub const RTM_NEWNEIGH: u16 = 28;
/// `RTM_GETNEIGH`.
pub const RTM_GETNEIGH: u16 = 30;
/// `RTM_NEWNEXTHOP` (kernel 5.3).
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_GETNEXTHOP` (kernel 5.3).
pub const RTM_GETNEXTHOP: u16 = 106;

/// `NLM_F_REQUEST`: set on every request.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`: ask for an acknowledgement.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_REPLACE`: replace an existing object.
pub const NLM_F_REPLACE: u16 = 0x100;
/// `NLM_F_EXCL`: fail if the object exists.
pub const NLM_F_EXCL: u16 = 0x200;
/// `NLM_F_CREATE`: create the object if it does not exist.
pub const NLM_F_CREATE: u16 = 0x400;
/// `NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`): every object of the kind.
pub const NLM_F_DUMP: u16 = 0x300;

/// `NLA_F_NESTED`: the attribute's value is a run of attributes.
pub(crate) const NLA_F_NESTED: u16 = 0x8000;
/// The type bits of an attribute (without `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`).
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Length of `struct nlmsghdr`.
pub(crate) const NLMSG_HDR_LEN: usize = 16;

pub(crate) const AF_INET: u8 = 2;
pub(crate) const AF_INET6: u8 = 10;

/// A netlink message: header fields and payload.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    /// `nlmsg_type`.
    pub kind: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// Everything after the 16-byte header: the family header and the attributes.
    pub payload: &'a [u8],
}

/// Splits a received datagram into messages; stops at the first one whose length does not fit.
pub fn messages(buffer: &[u8]) -> impl Iterator<Item = Message<'_>> {
    let mut rest = buffer;
    std::iter::from_fn(move || {
        let header = rest.get(..NLMSG_HDR_LEN)?;
        let len = u32::from_ne_bytes(header[0..4].try_into().ok()?) as usize;
        if len < NLMSG_HDR_LEN || len > rest.len() {
            return None;
        }
        let message = Message {
            kind: u16::from_ne_bytes([header[4], header[5]]),
            seq: u32::from_ne_bytes(header[8..12].try_into().ok()?),
            payload: &rest[NLMSG_HDR_LEN..len],
        };
        rest = &rest[align(len).min(rest.len())..];
        Some(message)
    })
}

/// Iterates over the `(type, value)` attributes of a run (the part of a payload after its
/// family header, or the value of a nested attribute); stops at the first malformed one. The
/// type has the `NLA_F_NESTED` and byte-order bits cleared.
pub fn attributes(mut data: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let header = data.get(..4)?;
        let len = usize::from(u16::from_ne_bytes([header[0], header[1]]));
        let kind = u16::from_ne_bytes([header[2], header[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > data.len() {
            return None;
        }
        let value = &data[4..len];
        data = &data[align(len).min(data.len())..];
        Some((kind, value))
    })
}

/// The (negative) errno of an `NLMSG_ERROR` payload; 0 is an acknowledgement. `None` if the
/// payload is too short to hold one.
pub fn error_code(payload: &[u8]) -> Option<i32> {
    Some(i32::from_ne_bytes(payload.get(..4)?.try_into().ok()?))
}

/// Netlink's 4-byte alignment of messages and attributes.
pub(crate) const fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Appends attribute `kind` with `value`, padded to the alignment.
pub(crate) fn push_attr(message: &mut Vec<u8>, kind: u16, value: &[u8]) {
    message.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    message.extend_from_slice(&kind.to_ne_bytes());
    message.extend_from_slice(value);
    message.resize(align(message.len()), 0);
}

/// The first four bytes of `value` as a native-endian `u32`.
pub(crate) fn u32_of(value: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

/// An address of `family` (`AF_INET`, `AF_INET6`) from the start of `value`.
pub(crate) fn ip_of(family: u8, value: &[u8]) -> Option<IpAddr> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_walks_padded_and_nested_runs() {
        const IFLA_XDP: u16 = 43;
        let mut inner = Vec::new();
        push_attr(&mut inner, 5, &42u32.to_ne_bytes());
        push_attr(&mut inner, 2, &[1]); // padded to 8 bytes
        push_attr(&mut inner, 6, &7u32.to_ne_bytes());
        let mut outer = Vec::new();
        push_attr(&mut outer, 3, b"abc");
        push_attr(&mut outer, IFLA_XDP | NLA_F_NESTED, &inner);
        let found: Vec<_> = attributes(&outer).map(|(kind, _)| kind).collect();
        assert_eq!(found, [3, IFLA_XDP]);
        let (_, nested) = attributes(&outer).nth(1).unwrap();
        let kinds: Vec<_> = attributes(nested)
            .map(|(kind, value)| (kind, value.len()))
            .collect();
        assert_eq!(kinds, [(5, 4), (2, 1), (6, 4)]);
    }

    #[test]
    fn attributes_stops_at_a_truncated_attribute() {
        let bytes = [8u8, 0, 1, 0, 0xaa]; // claims 8 bytes, has 5
        assert_eq!(attributes(&bytes).count(), 0);
        assert_eq!(attributes(&[8, 0, 1, 0, 1]).count(), 0);
        assert_eq!(attributes(&[2, 0, 1, 0]).count(), 0); // shorter than its own header
    }

    #[test]
    fn messages_stop_at_a_length_beyond_the_buffer() {
        assert_eq!(messages(&[1, 2, 3]).count(), 0);
        let mut datagram = Vec::new();
        for seq in [7u32, 8] {
            datagram.extend_from_slice(&20u32.to_ne_bytes());
            datagram.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
            datagram.extend_from_slice(&0u16.to_ne_bytes());
            datagram.extend_from_slice(&seq.to_ne_bytes());
            datagram.extend_from_slice(&0u32.to_ne_bytes());
            datagram.extend_from_slice(&[1, 2, 3, 4]);
        }
        let seqs: Vec<_> = messages(&datagram)
            .map(|m| (m.seq, m.payload.len()))
            .collect();
        assert_eq!(seqs, [(7, 4), (8, 4)]);
        datagram[20] = 200; // the second claims more than is there
        assert_eq!(messages(&datagram).count(), 1);
    }
}
