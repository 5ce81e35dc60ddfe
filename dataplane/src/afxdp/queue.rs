//! Opening one AF_XDP socket on a port's queue: its rings, its bind (copy or zero-copy, one
//! buffer or several per packet), close-on-exec.

use std::io;
use std::num::NonZeroU32;

use xdpilone::{IfInfo, Socket, SocketConfig};

use super::sys;
use super::worker::QueueRings;
use super::{errno, BindMode, Buffers, PortSpec, RuntimeError};

/// Bind flag: the socket takes packets of several buffers (`XDP_USE_SG`, Linux 6.6).
const XDP_USE_SG: u16 = 1 << 4;

pub(super) fn open_queue(
    umem: &xdpilone::Umem,
    port: &PortSpec,
    queue: u32,
    first: bool,
    bind_mode: BindMode,
    buffers: Buffers,
    ring_size: u32,
) -> Result<QueueRings, RuntimeError> {
    let fail = |step: &'static str| {
        move |error: xdpilone::Errno| RuntimeError::Socket {
            port: port.name.clone(),
            queue,
            step,
            source: errno(error),
        }
    };
    let mut info = IfInfo::invalid();
    let name = std::ffi::CString::new(port.name.as_str()).map_err(|_| RuntimeError::Socket {
        port: port.name.clone(),
        queue,
        step: "interface name",
        source: io::Error::new(io::ErrorKind::InvalidInput, "NUL in name"),
    })?;
    info.from_name(&name).map_err(fail("look up interface"))?;
    info.set_queue(queue);
    let socket = if first {
        Socket::with_shared(&info, umem)
    } else {
        Socket::new(&info)
    }
    .map_err(fail("create socket"))?;
    // The first socket's descriptor is the UMEM's.
    sys::set_close_on_exec(socket.as_raw_fd()).map_err(|source| RuntimeError::Socket {
        port: port.name.clone(),
        queue,
        step: "close on exec",
        source,
    })?;
    let device = umem.fq_cq(&socket).map_err(fail("fill/completion rings"))?;
    let ring = NonZeroU32::new(ring_size);
    let bind = |flags: u16| -> Result<xdpilone::User, RuntimeError> {
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: ring,
                    tx_size: ring,
                    bind_flags: flags,
                },
            )
            .map_err(fail("rx/tx rings"))?;
        bind_waiting_for_the_queue(umem, &user).map_err(fail("bind"))?;
        Ok(user)
    };
    // Sockets sharing the UMEM inherit the first socket's flags and must not repeat them.
    let user = if !first {
        bind(0)?
    } else {
        let sg = match buffers {
            Buffers::Single => 0,
            Buffers::Multi => XDP_USE_SG,
        };
        let copy = SocketConfig::XDP_BIND_COPY | SocketConfig::XDP_BIND_NEED_WAKEUP | sg;
        let zero_copy = SocketConfig::XDP_BIND_ZEROCOPY | SocketConfig::XDP_BIND_NEED_WAKEUP | sg;
        match bind_mode.resolve(&port.name) {
            BindMode::ZeroCopy => bind(zero_copy)?,
            _ => bind(copy)?,
        }
    };
    let rx = user.map_rx().map_err(fail("map rx ring"))?;
    let tx = user.map_tx().map_err(fail("map tx ring"))?;
    Ok(QueueRings {
        queue,
        device,
        rx,
        tx: Some(tx),
        partial: sys::Assembly::default(),
        _user: user,
        fill_outstanding: 0,
        tx_outstanding: 0,
    })
}

/// How long a bind waits for a queue that is still taken (EBUSY) by a socket closed just
/// before: the kernel detaches a closed socket's buffer pool from its queue in deferred work
/// (`xp_put_pool` → `xp_release_deferred`), so a switch restarted on the same queue at once can
/// find it still bound — on a busy 2-core machine the group suite's restart did, once in many
/// runs.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Binds `user`'s socket to its queue, retrying while the queue is busy for up to
/// [`BIND_BUSY_WAIT`].
fn bind_waiting_for_the_queue(
    umem: &xdpilone::Umem,
    user: &xdpilone::User,
) -> Result<(), xdpilone::Errno> {
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    loop {
        match umem.bind(user) {
            Err(errno)
                if errno.get_raw() == libc::EBUSY && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            result => return result,
        }
    }
}
