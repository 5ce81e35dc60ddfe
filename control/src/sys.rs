//! The one module of this crate with `unsafe`: a raw `NETLINK_ROUTE` socket and a UDP probe.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A `NETLINK_ROUTE` socket.
#[derive(Debug)]
pub struct NetlinkSocket {
    fd: OwnedFd,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

impl NetlinkSocket {
    /// Opens a socket subscribed to the given multicast groups (`RTNLGRP_*` numbers).
    ///
    /// # Errors
    /// The socket, bind or setsockopt error.
    pub fn open(groups: &[u32]) -> io::Result<Self> {
        // SAFETY: plain syscall without pointers.
        let fd = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: `fd` is a fresh descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; all-zero is a valid value (pid 0 = kernel assigns).
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: `addr` is a valid sockaddr_nl and its size is passed.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        })?;
        for &group in groups {
            // SAFETY: the option value is a valid u32 and its size is passed.
            check(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_NETLINK,
                    libc::NETLINK_ADD_MEMBERSHIP,
                    (&group as *const u32).cast(),
                    4,
                )
            })?;
        }
        let buffer: libc::c_int = 8 << 20;
        // SAFETY: valid int option; failure only means a smaller buffer (not fatal).
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&buffer as *const libc::c_int).cast(),
                4,
            );
        }
        Ok(Self { fd })
    }

    /// Sends one message to the kernel.
    ///
    /// # Errors
    /// The send error.
    pub fn send(&self, message: &[u8]) -> io::Result<()> {
        // SAFETY: sockaddr_nl zeroed = the kernel (pid 0); `message` is valid for its length.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: pointers and lengths describe valid memory for the duration of the call.
        check(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            ) as libc::c_int
        })
        .map(drop)
    }

    /// Receives one datagram (possibly several messages) into `buffer`, waiting at most
    /// `timeout_ms` (−1 = forever). `Ok(0)` on timeout.
    ///
    /// # Errors
    /// The poll or recv error (ENOBUFS means events were lost: the caller re-dumps).
    pub fn recv(&self, buffer: &mut [u8], timeout_ms: i32) -> io::Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let ready = check(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })?;
        if ready == 0 {
            return Ok(0);
        }
        // SAFETY: `buffer` is valid and writable for its length.
        let received = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                0,
            )
        };
        if received < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(received as usize)
    }
}

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
    check(unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.as_bytes_with_nul().len() as u32,
        )
    })?;
    socket.send_to(&[], (addr, 9)).map(drop)
}
