//! [`RouteSocket`]: the one blocking `NETLINK_ROUTE` socket of ofan, for requests and dumps
//! (with a sequence number of its own per exchange) and for listening to change notifications.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use crate::frame::{error_code, messages, Message, NLMSG_DONE, NLMSG_ERROR};
use crate::sys;

/// A multicast group of rtnetlink change notifications (`RTNLGRP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Links (`RTNLGRP_LINK`).
    Link,
    /// Neighbours (`RTNLGRP_NEIGH`).
    Neighbor,
    /// IPv4 addresses (`RTNLGRP_IPV4_IFADDR`).
    Ipv4Address,
    /// IPv4 routes (`RTNLGRP_IPV4_ROUTE`).
    Ipv4Route,
    /// IPv6 addresses (`RTNLGRP_IPV6_IFADDR`).
    Ipv6Address,
    /// IPv6 routes (`RTNLGRP_IPV6_ROUTE`).
    Ipv6Route,
    /// Next-hop objects (`RTNLGRP_NEXTHOP`).
    Nexthop,
}

impl Group {
    /// The group's `RTNLGRP_*` number.
    #[must_use]
    pub fn number(self) -> u32 {
        match self {
            Self::Link => 1,
            Self::Neighbor => 3,
            Self::Ipv4Address => 5,
            Self::Ipv4Route => 7,
            Self::Ipv6Address => 9,
            Self::Ipv6Route => 11,
            Self::Nexthop => 32,
        }
    }
}

/// Why a [`RouteSocket::query`] failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The kernel answered with an error: its errno (`raw_os_error`), e.g. `EEXIST`, `ENOENT`,
    /// `EOPNOTSUPP`.
    #[error("the kernel refused the request: {0}")]
    Refused(io::Error),
    /// Sending or receiving failed, the answer was malformed, or no answer came in time
    /// ([`io::ErrorKind::TimedOut`]).
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl From<QueryError> for io::Error {
    /// The kernel's errno, or the I/O error.
    fn from(error: QueryError) -> Self {
        match error {
            QueryError::Refused(error) | QueryError::Io(error) => error,
        }
    }
}

/// A blocking `NETLINK_ROUTE` socket in the network namespace of the thread that opened it.
///
/// Requests go through [`RouteSocket::request`] (wait for the acknowledgement) or
/// [`RouteSocket::query`] (a dump, or a get that answers with messages), each with the next
/// sequence number of this socket, so that an answer is never mistaken for another's. A socket
/// opened with [`RouteSocket::subscribed`] also receives change notifications, read with
/// [`RouteSocket::recv`].
pub struct RouteSocket {
    fd: OwnedFd,
    seq: u32,
    buffer: Vec<u8>,
}

impl fmt::Debug for RouteSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RouteSocket")
            .field("fd", &self.fd)
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl RouteSocket {
    /// Size of the receive buffer of [`RouteSocket::query`] (a dump's datagrams are smaller).
    const BUFFER: usize = 1 << 16;

    /// Opens a socket for requests, in the calling thread's network namespace.
    ///
    /// # Errors
    /// The socket or bind error.
    pub fn open() -> io::Result<Self> {
        Self::subscribed(&[])
    }

    /// Opens a socket that also receives the change notifications of `groups`.
    ///
    /// # Errors
    /// The socket, bind or setsockopt error.
    pub fn subscribed(groups: &[Group]) -> io::Result<Self> {
        let numbers: Vec<u32> = groups.iter().map(|group| group.number()).collect();
        Ok(Self {
            fd: sys::open_route_socket(&numbers)?,
            seq: 0,
            buffer: vec![0; Self::BUFFER],
        })
    }

    /// Sends one datagram (one or more complete messages) to the kernel.
    ///
    /// # Errors
    /// The send error.
    pub fn send(&self, message: &[u8]) -> io::Result<()> {
        sys::send_to_kernel(self.fd.as_fd(), message)
    }

    /// Receives one datagram (possibly several messages) into `buffer`, waiting at most
    /// `timeout` (zero: only what is already queued): its length, or `None` on timeout.
    ///
    /// # Errors
    /// The poll or recv error (`ENOBUFS` on a subscribed socket means notifications were lost:
    /// the reader should dump again).
    pub fn recv(&self, buffer: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        sys::receive(self.fd.as_fd(), buffer, timeout)
    }

    /// Sends the request `make(seq)` builds and hands every answer with that sequence number to
    /// `each`, until the kernel ends the exchange: `NLMSG_DONE` after a dump, the
    /// acknowledgement after a request with `NLM_F_ACK`. Each wait for a datagram lasts at most
    /// `timeout`. Messages of other exchanges (a late answer to an earlier, timed-out one) are
    /// skipped.
    ///
    /// # Errors
    /// [`QueryError::Refused`] with the kernel's errno; [`QueryError::Io`] if sending or
    /// receiving fails, the error message is truncated, or nothing arrives within `timeout`.
    pub fn query(
        &mut self,
        make: impl FnOnce(u32) -> Vec<u8>,
        timeout: Duration,
        mut each: impl FnMut(&Message<'_>),
    ) -> Result<(), QueryError> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.send(&make(seq))?;
        loop {
            let Some(received) = sys::receive(self.fd.as_fd(), &mut self.buffer, timeout)? else {
                return Err(QueryError::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no rtnetlink answer within {timeout:?}"),
                )));
            };
            for message in messages(&self.buffer[..received]) {
                if message.seq != seq {
                    continue;
                }
                match message.kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        return match error_code(message.payload) {
                            Some(0) => Ok(()),
                            Some(code) => Err(QueryError::Refused(io::Error::from_raw_os_error(
                                code.saturating_neg(),
                            ))),
                            None => Err(QueryError::Io(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "truncated rtnetlink error message",
                            ))),
                        };
                    }
                    _ => each(&message),
                }
            }
        }
    }

    /// Sends the request `make(seq)` builds (which must ask for an acknowledgement, as every
    /// builder of this crate but [`crate::dump_request`] does) and waits for the kernel's
    /// answer, each wait for a datagram lasting at most `timeout`.
    ///
    /// # Errors
    /// The kernel's errno as an [`io::Error`] (`raw_os_error`: e.g. `EEXIST`, `ESRCH`), the
    /// socket error, or [`io::ErrorKind::TimedOut`].
    pub fn request(
        &mut self,
        make: impl FnOnce(u32) -> Vec<u8>,
        timeout: Duration,
    ) -> io::Result<()> {
        self.query(make, timeout, |_| {}).map_err(io::Error::from)
    }
}

impl AsFd for RouteSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
