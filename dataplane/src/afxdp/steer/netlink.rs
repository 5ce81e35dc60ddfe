//! The steering loader's two rtnetlink exchanges, through the workspace's one codec
//! ([`ofan_netlink`]): which XDP programs an interface has, and detaching a netlink-attached
//! program only if it is still the expected one.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use ofan_netlink::{
    get_link_request, parse_link_xdp, xdp_detach_request, RouteSocket, XdpAttachMode, XdpProgram,
    RTM_NEWLINK,
};

/// How long the loader waits for each answer of the kernel.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The XDP programs attached to `ifindex`, with their mode (at most one per mode).
pub(super) fn xdp_programs(ifindex: u32) -> io::Result<Vec<XdpProgram>> {
    let mut socket = RouteSocket::open()?;
    let mut programs = None;
    socket.query(
        |seq| get_link_request(seq, ifindex),
        TIMEOUT,
        |message| {
            if message.kind == RTM_NEWLINK && programs.is_none() {
                programs = parse_link_xdp(message.payload);
            }
        },
    )?;
    programs.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "unexpected answer to RTM_GETLINK",
        )
    })
}

/// Detaches the netlink-attached program `expected` (an fd of it) from `ifindex` in `mode`;
/// the kernel refuses (EEXIST) if another program has replaced it meanwhile.
pub(super) fn detach_xdp(
    ifindex: u32,
    mode: XdpAttachMode,
    expected: BorrowedFd<'_>,
) -> io::Result<()> {
    RouteSocket::open()?.request(
        |seq| xdp_detach_request(seq, ifindex, mode, expected),
        TIMEOUT,
    )
}
