//! The one module of this crate with `unsafe`: the libc calls of a `NETLINK_ROUTE` socket
//! (socket, bind, setsockopt, sendto, poll, recv), each behind a safe function. Messages are
//! built and parsed as plain bytes elsewhere, in safe code.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The kernel's address: a `sockaddr_nl` with pid 0 and no groups.
fn kernel_address() -> libc::sockaddr_nl {
    // SAFETY: `sockaddr_nl` is plain data (integers only), for which all-zero is a valid value.
    let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    address
}

/// Opens a `NETLINK_ROUTE` socket in the calling thread's network namespace, bound to a port id
/// the kernel assigns, member of the multicast `groups` (`RTNLGRP_*` numbers), with a receive
/// buffer of up to 8 MiB (so a burst of notifications or a large dump is not cut short).
pub(crate) fn open_route_socket(groups: &[u32]) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; no pointers.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    })?;
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Pid 0: the kernel assigns the port id.
    let address = kernel_address();
    // SAFETY: `address` is a valid `sockaddr_nl` that outlives the call, and its size is passed;
    // bind(2) only reads it.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&raw const address).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    })?;
    for group in groups {
        // SAFETY: the option value is a `u32` that outlives the call, and its size is passed;
        // setsockopt(2) only reads it.
        check(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                std::ptr::from_ref(group).cast(),
                size_of::<u32>() as libc::socklen_t,
            )
        })?;
    }
    let buffer: libc::c_int = 8 << 20;
    // SAFETY: the option value is a `c_int` that outlives the call, and its size is passed.
    // Failure only leaves the default (smaller) buffer, so the result is ignored.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw const buffer).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    Ok(fd)
}

/// Sends one datagram (one or more complete messages) to the kernel.
pub(crate) fn send_to_kernel(fd: BorrowedFd<'_>, message: &[u8]) -> io::Result<()> {
    let kernel = kernel_address();
    // SAFETY: `message` and `kernel` are live for the call, with the lengths passed; sendto(2)
    // only reads them.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            message.as_ptr().cast(),
            message.len(),
            0,
            (&raw const kernel).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Receives one datagram into `buffer`, waiting at most `timeout` (zero: only what is already
/// there): its length, or `None` if nothing arrived in time.
pub(crate) fn receive(
    fd: BorrowedFd<'_>,
    buffer: &mut [u8],
    timeout: Duration,
) -> io::Result<Option<usize>> {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout_ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `poll` is one valid, writable `pollfd` that outlives the call, and the count is 1.
    let ready = check(unsafe { libc::poll(&mut poll, 1, timeout_ms) })?;
    if ready == 0 {
        return Ok(None);
    }
    // SAFETY: `buffer` is live and writable for its whole length, which is passed; recv(2)
    // writes at most that many bytes.
    let received =
        unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Some(received as usize))
}
