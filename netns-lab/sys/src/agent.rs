//! The agent's only `unsafe`: the monotonic clock, absolute sleeps, timer slack, socket
//! options socket2 does not offer, `recvmsg` with the IP_TOS control message, and the epoll
//! set over every host's receive socket of a shared agent.

use std::io;
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// CLOCK_MONOTONIC in nanoseconds — the clock all network namespaces of a machine share, and
/// the clock of `--start-at` (the data path's: agents and switches read the same clock).
pub use ofan_dataplane::afxdp::monotonic_ns;

/// A clock that always exists (CLOCK_MONOTONIC, the calling thread's CPU-time clock) in
/// nanoseconds.
pub(super) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut now = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `now` is valid for a write of one timespec; the callers pass only clocks that
    // always exist on Linux, so the call cannot fail and initializes `now`.
    let now = unsafe {
        libc::clock_gettime(clock, now.as_mut_ptr());
        now.assume_init()
    };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (returns at once if it has), resuming
/// after signals.
pub fn sleep_until_ns(deadline_ns: u64) {
    let deadline = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: `deadline` is a valid timespec for the duration of the call; with
        // TIMER_ABSTIME the remaining-time pointer is not used and may be null.
        let ret = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &deadline,
                std::ptr::null_mut(),
            )
        };
        if ret != libc::EINTR {
            return;
        }
    }
}

/// Sets the calling thread's timer slack (how much later than asked the kernel may end its
/// sleeps, 50 µs by default) to `ns`.
///
/// # Errors
/// When prctl fails.
pub fn set_timer_slack_ns(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument by value and only changes
    // the calling thread's timer slack.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// Moves the calling thread to the SCHED_FIFO real-time class at `priority` (1..=99), so that
/// it preempts ordinary tasks the moment its sleep ends. Needs CAP_SYS_NICE (root).
///
/// # Errors
/// When sched_setscheduler fails (e.g. without the capability).
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the duration of
    // the call.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

fn set_int_option(
    socket: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the descriptor is open for the duration of the call (borrowed), and the option
    // value points to a c_int whose size is passed along.
    check(unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// Never fragment: sends larger than the path MTU fail with `EMSGSIZE` (IP_PMTUDISC_DO).
///
/// # Errors
/// When setsockopt fails.
pub fn set_dont_fragment(socket: &impl AsRawFd) -> io::Result<()> {
    set_int_option(
        socket,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_DO,
    )
}

/// Sets the receive buffer to `bytes` beyond `net.core.rmem_max` (SO_RCVBUFFORCE, needs
/// CAP_NET_ADMIN).
///
/// # Errors
/// When setsockopt fails (e.g. without the capability).
pub fn set_recv_buffer_force(socket: &impl AsRawFd, bytes: usize) -> io::Result<()> {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)
}

/// One received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Bytes written to the buffer.
    pub len: usize,
    /// Sender.
    pub from: SocketAddrV4,
    /// The IPv4 TOS byte it arrived with (needs IP_RECVTOS on the socket).
    pub tos: Option<u8>,
}

/// Receives one IPv4 datagram into `buf`, with its source address and TOS byte.
///
/// # Errors
/// As recvmsg (`WouldBlock` when a receive timeout expires).
pub fn recv_with_tos(socket: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Received> {
    // Room for a few control messages (IP_TOS needs CMSG_SPACE(1) = 24 bytes); u64 alignment
    // as cmsghdr requires.
    let mut control = [0u64; 8];
    let mut from = MaybeUninit::<libc::sockaddr_in>::zeroed();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = from.as_mut_ptr().cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);

    // SAFETY: every pointer in `msg` (name, one iovec over `buf`, control) points to live
    // memory of the stated length that outlives the call; the kernel writes at most those
    // lengths.
    let len = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, 0) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }

    let mut tos = None;
    // SAFETY: after a successful recvmsg, `msg.msg_control`/`msg_controllen` describe the
    // control messages the kernel wrote into `control`, which is alive and 8-byte aligned;
    // CMSG_FIRSTHDR/CMSG_NXTHDR stay within msg_controllen and return null past the end, and
    // an IP_TOS message carries at least one data byte.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::IPPROTO_IP && (*cmsg).cmsg_type == libc::IP_TOS {
                tos = Some(*libc::CMSG_DATA(cmsg));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: `from` was zero-initialized, so it is a valid sockaddr_in whether or not the
    // kernel filled it (it does for every datagram on an IPv4 socket).
    let from = unsafe { from.assume_init() };
    Ok(Received {
        len: len as usize,
        from: SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
            u16::from_be(from.sin_port),
        ),
        tos,
    })
}

/// An epoll set of sockets waited on for input, each registered with a token (the shared
/// agent's receiver: one set over every host's receive socket).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// An empty set.
    ///
    /// # Errors
    /// When epoll_create1 fails.
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 takes a flag word and returns a new descriptor or -1.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by epoll_create1, is open and owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Watches `socket` for input (level-triggered); `wait` reports it as `token`.
    ///
    /// # Errors
    /// When epoll_ctl fails.
    pub fn add(&self, socket: &impl AsRawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: both descriptors are open for the duration of the call; `event` is a valid
        // epoll_event the kernel only reads.
        check(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                socket.as_raw_fd(),
                &mut event,
            )
        })
        .map(drop)
    }

    /// Stops watching `socket`.
    ///
    /// # Errors
    /// When epoll_ctl fails (e.g. the socket was not in the set).
    pub fn remove(&self, socket: &impl AsRawFd) -> io::Result<()> {
        // SAFETY: both descriptors are open for the duration of the call; EPOLL_CTL_DEL ignores
        // the event pointer, which may be null.
        check(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                socket.as_raw_fd(),
                std::ptr::null_mut(),
            )
        })
        .map(drop)
    }

    /// Waits up to `timeout` for input and replaces `ready` with the tokens of the sockets that
    /// have some (empty on timeout or a signal).
    ///
    /// # Errors
    /// When epoll_wait fails for another reason than a signal.
    pub fn wait(&self, ready: &mut Vec<u64>, timeout: Duration) -> io::Result<()> {
        const MAX_EVENTS: usize = 64;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let timeout_ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `events` is valid for writes of MAX_EVENTS epoll_events for the duration of
        // the call, and the kernel writes at most that many.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                MAX_EVENTS as libc::c_int,
                timeout_ms,
            )
        };
        ready.clear();
        if n < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(error)
            };
        }
        ready.extend(events[..n as usize].iter().map(|event| event.u64));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_advances_and_sleep_reaches_its_deadline() {
        let start = monotonic_ns();
        sleep_until_ns(start + 2_000_000);
        let end = monotonic_ns();
        assert!(end >= start + 2_000_000, "{start} {end}");
        sleep_until_ns(start); // in the past: returns at once
        set_timer_slack_ns(1).unwrap();
    }

    #[test]
    fn receives_tos_over_loopback() {
        let receiver = socket2::Socket::new(
            socket2::Domain::IPV4,
            socket2::Type::DGRAM,
            Some(socket2::Protocol::UDP),
        )
        .unwrap();
        receiver.set_recv_tos(true).unwrap();
        receiver
            .bind(&SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0).into())
            .unwrap();
        let to = receiver.local_addr().unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let sender = socket2::Socket::from(sender);
        sender.set_tos(u32::from(ECN_CE)).unwrap();
        sender.send_to(b"hello", &to).unwrap();
        let mut buf = [0u8; 3];
        let got = recv_with_tos(&receiver, &mut buf).unwrap();
        assert_eq!(&buf, b"hel");
        assert_eq!(got.len, 3, "only what fits is returned");
        assert_eq!(got.tos, Some(ECN_CE));
        assert_eq!(
            SocketAddr::V4(got.from),
            sender.local_addr().unwrap().as_socket().unwrap()
        );
    }

    use std::net::SocketAddr;

    /// The ECN "congestion experienced" codepoint (RFC 3168) a switch marks: the agent's
    /// `wire::ECN_CE` (the agent's crate is above this one).
    const ECN_CE: u8 = 0b11;
}
