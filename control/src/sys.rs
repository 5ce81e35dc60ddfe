//! The one module of this crate with `unsafe`: the UDP probe that makes the kernel resolve a
//! neighbour, a socket peer's credentials and the effective uid. (The rtnetlink socket is `ofan_netlink::RouteSocket`.)

use std::io;
use std::os::fd::AsRawFd;

/// Sends one empty UDP datagram to `addr`:9 (discard) out of `ifname`, which makes the kernel
/// resolve the neighbour; the datagram itself is harmless.
///
/// # Errors
/// The socket or send error.
pub fn probe_neighbor(ifname: &str, addr: std::net::IpAddr) -> io::Result<()> {
    let socket = std::net::UdpSocket::bind(match addr {
        std::net::IpAddr::V4(_) => "0.0.0.0:0",
        std::net::IpAddr::V6(_) => "[::]:0",
    })?;
    let name = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: the option value is a NUL-terminated name valid for the call.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.as_bytes_with_nul().len() as u32,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    socket.send_to(&[], (addr, 9)).map(drop)
}

/// The credentials of a Unix socket's peer (`SO_PEERCRED`).
///
/// # Errors
/// The `getsockopt` error.
pub fn peer_credentials(
    stream: &std::os::unix::net::UnixStream,
) -> io::Result<crate::endpoint::Peer> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes for the call, and `len` is the size of the
    // `ucred` the kernel fills for SO_PEERCRED.
    let ret = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::from_mut(&mut cred).cast(),
            &mut len,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(crate::endpoint::Peer {
        pid: cred.pid,
        uid: cred.uid,
        gid: cred.gid,
    })
}

/// This process's effective user id.
#[must_use]
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
