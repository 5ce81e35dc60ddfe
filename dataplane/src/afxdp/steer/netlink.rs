//! rtnetlink messages for the XDP state of one interface: which programs are attached in which
//! mode (`RTM_GETLINK`, attribute `IFLA_XDP`), and detaching a netlink-attached program only if
//! it is still the expected one (`RTM_SETLINK` with `XDP_FLAGS_REPLACE`). Bytes are built and
//! parsed here; the socket calls are in [`super::sys`].

use std::{io, os::fd::AsRawFd};

use super::sys::RouteSocket;

const NLMSG_HDR_LEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLMSG_ERROR: u16 = 2;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_TYPE_MASK: u16 = 0x3fff;

const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_DRV_PROG_ID: u16 = 5;
const IFLA_XDP_SKB_PROG_ID: u16 = 6;
const IFLA_XDP_HW_PROG_ID: u16 = 7;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// Where on an interface an XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AttachMode {
    /// Native (driver) XDP.
    Driver,
    /// Generic (skb) XDP.
    Skb,
    /// Offloaded to the NIC.
    Hardware,
}

impl AttachMode {
    fn flag(self) -> u32 {
        match self {
            Self::Driver => XDP_FLAGS_DRV_MODE,
            Self::Skb => XDP_FLAGS_SKB_MODE,
            Self::Hardware => XDP_FLAGS_HW_MODE,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Driver => "native",
            Self::Skb => "generic",
            Self::Hardware => "offload",
        }
    }
}

/// The ids of the XDP programs attached to `ifindex`, with their mode (at most one per mode).
pub(super) fn xdp_programs(ifindex: u32) -> io::Result<Vec<(AttachMode, u32)>> {
    let socket = RouteSocket::open()?;
    socket.send(&request(RTM_GETLINK, NLM_F_REQUEST, ifindex, &[]))?;
    let mut buffer = vec![0u8; 64 * 1024];
    let length = socket.receive(&mut buffer)?;
    let (message_type, payload) = first_message(&buffer[..length])?;
    if message_type == NLMSG_ERROR {
        return Err(error_of(payload).unwrap_or_else(|| invalid("truncated netlink error")));
    }
    if message_type != RTM_NEWLINK || payload.len() < IFINFOMSG_LEN {
        return Err(invalid("unexpected answer to RTM_GETLINK"));
    }
    let mut programs = Vec::new();
    for (kind, value) in attributes(&payload[IFINFOMSG_LEN..]) {
        if kind != IFLA_XDP {
            continue;
        }
        for (kind, value) in attributes(value) {
            let mode = match kind {
                IFLA_XDP_DRV_PROG_ID => AttachMode::Driver,
                IFLA_XDP_SKB_PROG_ID => AttachMode::Skb,
                IFLA_XDP_HW_PROG_ID => AttachMode::Hardware,
                _ => continue,
            };
            if let Some(id) = value.get(..4) {
                let id = u32::from_ne_bytes([id[0], id[1], id[2], id[3]]);
                if id != 0 {
                    programs.push((mode, id));
                }
            }
        }
    }
    Ok(programs)
}

/// Detaches the netlink-attached program `expected` (an fd of it) from `ifindex` in `mode`;
/// the kernel refuses (EEXIST) if another program has replaced it meanwhile.
pub(super) fn detach_xdp(
    ifindex: u32,
    mode: AttachMode,
    expected: &impl AsRawFd,
) -> io::Result<()> {
    let mut xdp = Vec::new();
    push_attribute(&mut xdp, IFLA_XDP_FD, &(-1i32).to_ne_bytes());
    push_attribute(
        &mut xdp,
        IFLA_XDP_FLAGS,
        &(mode.flag() | XDP_FLAGS_REPLACE).to_ne_bytes(),
    );
    push_attribute(
        &mut xdp,
        IFLA_XDP_EXPECTED_FD,
        &expected.as_raw_fd().to_ne_bytes(),
    );
    let mut attributes = Vec::new();
    push_attribute(&mut attributes, IFLA_XDP | NLA_F_NESTED, &xdp);

    let socket = RouteSocket::open()?;
    socket.send(&request(
        RTM_SETLINK,
        NLM_F_REQUEST | NLM_F_ACK,
        ifindex,
        &attributes,
    ))?;
    let mut buffer = vec![0u8; 8 * 1024];
    let length = socket.receive(&mut buffer)?;
    match first_message(&buffer[..length])? {
        (NLMSG_ERROR, payload) => match error_of(payload) {
            None => Ok(()),
            Some(error) if error.raw_os_error() == Some(0) => Ok(()),
            Some(error) => Err(error),
        },
        _ => Err(invalid("unexpected answer to RTM_SETLINK")),
    }
}

/// A request: `nlmsghdr`, an `ifinfomsg` for `ifindex`, then `attributes`.
fn request(message_type: u16, flags: u16, ifindex: u32, attributes: &[u8]) -> Vec<u8> {
    let length = NLMSG_HDR_LEN + IFINFOMSG_LEN + attributes.len();
    let mut message = Vec::with_capacity(length);
    message.extend_from_slice(&(length as u32).to_ne_bytes());
    message.extend_from_slice(&message_type.to_ne_bytes());
    message.extend_from_slice(&flags.to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    message.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    message.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]); // family, pad, type
    message.extend_from_slice(&(ifindex as i32).to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes()); // flags
    message.extend_from_slice(&0u32.to_ne_bytes()); // change
    message.extend_from_slice(attributes);
    message
}

fn push_attribute(buffer: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let length = 4 + value.len();
    buffer.extend_from_slice(&(length as u16).to_ne_bytes());
    buffer.extend_from_slice(&kind.to_ne_bytes());
    buffer.extend_from_slice(value);
    buffer.resize(buffer.len().next_multiple_of(4), 0);
}

/// Type and payload of the first netlink message of a datagram.
fn first_message(datagram: &[u8]) -> io::Result<(u16, &[u8])> {
    let header = datagram
        .get(..NLMSG_HDR_LEN)
        .ok_or_else(|| invalid("short netlink reply"))?;
    let length = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let message_type = u16::from_ne_bytes([header[4], header[5]]);
    let payload = datagram
        .get(NLMSG_HDR_LEN..length.max(NLMSG_HDR_LEN))
        .ok_or_else(|| invalid("truncated netlink reply"))?;
    Ok((message_type, payload))
}

/// The errno of an `NLMSG_ERROR` payload (0 is an acknowledgement).
fn error_of(payload: &[u8]) -> Option<io::Error> {
    let errno = payload.get(..4)?;
    let errno = i32::from_ne_bytes([errno[0], errno[1], errno[2], errno[3]]);
    Some(io::Error::from_raw_os_error(-errno))
}

/// The `(type, value)` pairs of a run of netlink attributes; stops at the first malformed one.
fn attributes(mut bytes: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let header = bytes.get(..4)?;
        let length = usize::from(u16::from_ne_bytes([header[0], header[1]]));
        let kind = u16::from_ne_bytes([header[2], header[3]]) & NLA_TYPE_MASK;
        let value = bytes.get(4..length)?;
        bytes = bytes.get(length.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind, value))
    })
}

fn invalid(message: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_walks_padded_and_nested_runs() {
        let mut inner = Vec::new();
        push_attribute(&mut inner, IFLA_XDP_DRV_PROG_ID, &42u32.to_ne_bytes());
        push_attribute(&mut inner, 2, &[1]); // IFLA_XDP_ATTACHED, padded to 8 bytes
        push_attribute(&mut inner, IFLA_XDP_SKB_PROG_ID, &7u32.to_ne_bytes());
        let mut outer = Vec::new();
        push_attribute(&mut outer, 3, b"abc");
        push_attribute(&mut outer, IFLA_XDP | NLA_F_NESTED, &inner);
        let found: Vec<_> = attributes(&outer).map(|(kind, _)| kind).collect();
        assert_eq!(found, [3, IFLA_XDP]);
        let (_, nested) = attributes(&outer).nth(1).unwrap();
        let kinds: Vec<_> = attributes(nested)
            .map(|(kind, value)| (kind, value.len()))
            .collect();
        assert_eq!(
            kinds,
            [(IFLA_XDP_DRV_PROG_ID, 4), (2, 1), (IFLA_XDP_SKB_PROG_ID, 4)]
        );
    }

    #[test]
    fn attributes_stops_at_a_truncated_attribute() {
        let bytes = [8u8, 0, 1, 0, 0xaa]; // claims 8 bytes, has 5
        assert_eq!(attributes(&bytes).count(), 0);
    }

    #[test]
    fn request_length_covers_everything() {
        let message = request(RTM_GETLINK, NLM_F_REQUEST, 5, &[0; 8]);
        assert_eq!(message.len(), 40);
        assert_eq!(u32::from_ne_bytes(message[..4].try_into().unwrap()), 40);
        assert_eq!(i32::from_ne_bytes(message[20..24].try_into().unwrap()), 5);
    }
}
