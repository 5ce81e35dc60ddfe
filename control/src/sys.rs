//! The one module of this crate with `unsafe`: the UDP probes that make the kernel resolve a
//! neighbour, the control loop's epoll, a socket peer's credentials, the effective uid, and receiving a datagram with its
//! TTL and arrival interface (`recvmsg` control messages) for the notifications' GTSM check. (The rtnetlink socket is `ofan_netlink::RouteSocket`.)

use std::io;
use std::os::fd::AsRawFd;

/// The sockets the FIB mirror sends its neighbour probes from: opened once, in the switch's
/// namespace (a probe sent later from a control loop's thread goes out of the right one).
#[derive(Debug)]
pub struct NeighborProbes {
    v4: Option<std::net::UdpSocket>,
    v6: Option<std::net::UdpSocket>,
}

impl NeighborProbes {
    /// One socket per family, where the namespace has it.
    pub fn open() -> Self {
        Self {
            v4: std::net::UdpSocket::bind("0.0.0.0:0").ok(),
            v6: std::net::UdpSocket::bind("[::]:0").ok(),
        }
    }

    /// Sends one empty UDP datagram to `addr`:9 (discard) out of `ifname`, which makes the
    /// kernel resolve the neighbour; the datagram itself is harmless.
    ///
    /// # Errors
    /// No socket of the family, or the socket-option or send error.
    pub fn probe(&self, ifname: &str, addr: std::net::IpAddr) -> io::Result<()> {
        let socket = match addr {
            std::net::IpAddr::V4(_) => self.v4.as_ref(),
            std::net::IpAddr::V6(_) => self.v6.as_ref(),
        }
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "no socket of the family"))?;
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

/// One datagram received with [`recv_with_ttl`]: its length, sender, IP TTL and arrival
/// interface, as the kernel's control messages gave them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes of payload written into the buffer (a longer datagram is cut; see `truncated`).
    pub len: usize,
    /// Whether the datagram was longer than the buffer.
    pub truncated: bool,
    /// The sender.
    pub from: std::net::SocketAddrV4,
    /// The IP TTL it arrived with (`IP_RECVTTL`), when the kernel said.
    pub ttl: Option<u8>,
    /// The interface it arrived on (`IP_PKTINFO`), when the kernel said.
    pub ifindex: Option<u32>,
}

/// Asks the kernel for the TTL and arrival interface of every datagram `socket` receives
/// (`IP_RECVTTL`, `IP_PKTINFO`).
///
/// # Errors
/// The `setsockopt` error.
pub fn enable_ttl_and_pktinfo(socket: &std::net::UdpSocket) -> io::Result<()> {
    for option in [libc::IP_RECVTTL, libc::IP_PKTINFO] {
        let on: libc::c_int = 1;
        // SAFETY: the option value is a c_int valid for reads for the call, and the length is
        // its size.
        let ret = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_IP,
                option,
                std::ptr::from_ref(&on).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives one IPv4 datagram into `buffer` with its TTL and arrival interface (`recvmsg`);
/// blocks as the socket is set to (read timeout: `WouldBlock`/`TimedOut`), or not at all with
/// `dont_wait` (none queued: `WouldBlock`).
///
/// # Errors
/// The `recvmsg` error; `InvalidData` for a sender that is not IPv4.
pub fn recv_with_ttl(
    socket: &std::net::UdpSocket,
    buffer: &mut [u8],
    dont_wait: bool,
) -> io::Result<Received> {
    // Room for IP_TTL (an int) and IP_PKTINFO (in_pktinfo), each with its cmsghdr; u64 words
    // keep it aligned for cmsghdr.
    let mut control = [0u64; 16];
    // SAFETY: zeroed sockaddr_in and msghdr are valid values (plain C structs).
    let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: as above.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_name = std::ptr::from_mut(&mut from).cast();
    message.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = std::mem::size_of_val(&control);
    let flags = if dont_wait { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: every pointer in `message` (name, one iovec over `buffer`, control) is valid for
    // writes of the length given beside it for the duration of the call.
    let len = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut message, flags) };
    if len < 0 {
        return Err(io::Error::last_os_error());
    }
    if i32::from(from.sin_family) != libc::AF_INET {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not an IPv4 sender",
        ));
    }
    let mut received = Received {
        len: (len as usize).min(buffer.len()),
        truncated: message.msg_flags & libc::MSG_TRUNC != 0,
        from: std::net::SocketAddrV4::new(
            u32::from_be(from.sin_addr.s_addr).into(),
            u16::from_be(from.sin_port),
        ),
        ttl: None,
        ifindex: None,
    };
    // SAFETY: `message` was filled by recvmsg, so CMSG_FIRSTHDR/CMSG_NXTHDR walk headers inside
    // `control` (msg_controllen bytes), and each header's data is read with read_unaligned
    // only when its level, type and length say it holds the type read.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            let level = (*header).cmsg_level;
            let kind = (*header).cmsg_type;
            let data = libc::CMSG_DATA(header);
            let data_len = (*header).cmsg_len as usize - (data as usize - header as usize);
            if level == libc::IPPROTO_IP
                && kind == libc::IP_TTL
                && data_len >= std::mem::size_of::<libc::c_int>()
            {
                let ttl = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                received.ttl = u8::try_from(ttl).ok();
            } else if level == libc::IPPROTO_IP
                && kind == libc::IP_PKTINFO
                && data_len >= std::mem::size_of::<libc::in_pktinfo>()
            {
                let info = std::ptr::read_unaligned(data.cast::<libc::in_pktinfo>());
                received.ifindex = u32::try_from(info.ipi_ifindex).ok();
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    Ok(received)
}

/// A level-triggered epoll instance: the one system interface of [`crate::event`].
#[derive(Debug)]
pub struct Epoll(std::os::fd::OwnedFd);

impl Epoll {
    /// A new instance, closed on exec.
    ///
    /// # Errors
    /// The `epoll_create1` error.
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1 takes a flag word and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor this call just created and nothing else owns.
        Ok(Self(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        }))
    }

    /// Watches `fd` for `events` (`EPOLLIN`, `EPOLLOUT`…), reporting them with `token`;
    /// `modify`: changes an existing watch instead.
    ///
    /// # Errors
    /// The `epoll_ctl` error (`EBADF` for a closed `fd`, `EEXIST`/`ENOENT`).
    pub fn control(
        &self,
        fd: std::os::fd::RawFd,
        events: u32,
        token: u64,
        modify: bool,
    ) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        let op = if modify {
            libc::EPOLL_CTL_MOD
        } else {
            libc::EPOLL_CTL_ADD
        };
        // SAFETY: `event` is valid for reads for the call; the kernel checks the descriptors.
        let ret = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut event) };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd`.
    ///
    /// # Errors
    /// The `epoll_ctl` error (`ENOENT` when it was not watched, `EBADF` when closed).
    pub fn delete(&self, fd: std::os::fd::RawFd) -> io::Result<()> {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `control` (a non-null event for kernels before 2.6.9).
        let ret =
            unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut event) };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` (`None`: without end) for events and puts `(token, events)` of
    /// each ready descriptor into `ready` (cleared first; at most its capacity, at least one).
    /// An interrupted wait returns with none.
    ///
    /// # Errors
    /// The `epoll_wait` error other than `EINTR`.
    pub fn wait(
        &self,
        ready: &mut Vec<(u64, u32)>,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // Rounded up: a deadline 0.3 ms away must not turn into a spin of zero timeouts.
        let timeout_ms = timeout.map_or(-1, |t| {
            let ms = t.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        });
        // SAFETY: `events` is valid for writes of its length for the call.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
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
        ready.extend(events[..n as usize].iter().map(|e| {
            let (token, flags) = (e.u64, e.events);
            (token, flags)
        }));
        Ok(())
    }
}

/// Waits up to `timeout` until one of `fds` is readable (or hung up); returns which are.
///
/// # Errors
/// The `poll` error other than `EINTR` (an interrupted wait returns none ready).
pub fn poll_readable(
    fds: &[std::os::fd::RawFd],
    timeout: std::time::Duration,
) -> io::Result<Vec<bool>> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let timeout_ms =
        libc::c_int::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX);
    // SAFETY: `polled` is valid for reads and writes of its length for the call.
    let n = unsafe {
        libc::poll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            timeout_ms,
        )
    };
    if n < 0 {
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    Ok(polled.iter().map(|p| p.revents != 0).collect())
}
