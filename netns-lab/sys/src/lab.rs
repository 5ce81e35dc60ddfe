//! The lab's only `unsafe`: entering network namespaces, starting processes in their own
//! session, unmounting namespace files, the ethtool ioctl and signals.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn setns(namespace: &File) -> io::Result<()> {
    // SAFETY: `namespace` is an open descriptor for the duration of the call; setns only
    // changes the calling thread's network namespace.
    check(unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Runs `work` with the calling thread inside the network namespace `namespace` (an open
/// `/run/netns/NAME`), then returns the thread to the namespace it was in. Sockets created by
/// `work` stay in `namespace`; `/proc/sys/net` opened by `work` is the namespace's.
///
/// # Errors
/// When the namespace cannot be entered.
///
/// # Panics
/// If the thread cannot return to its original namespace (continuing would apply later work
/// to the wrong network).
pub fn in_netns<T>(namespace: &File, work: impl FnOnce() -> T) -> io::Result<T> {
    let origin = File::open("/proc/thread-self/ns/net")?;
    setns(namespace)?;
    let result = work();
    setns(&origin).expect("cannot return to the original network namespace");
    Ok(result)
}

/// Makes `command` start in a new session (`setsid`), so that it outlives the terminal and
/// the `ofan-lab` process that started it.
pub fn new_session(command: &mut Command) -> &mut Command {
    // SAFETY: the closure runs between fork and exec and calls only setsid, which is
    // async-signal-safe and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// Lazily unmounts `path` (`umount2(MNT_DETACH)`), as `ip netns del` does.
///
/// # Errors
/// The umount error (EINVAL: not a mount point).
pub fn detach_unmount(path: &Path) -> io::Result<()> {
    let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `path` is a valid NUL-terminated string for the duration of the call.
    check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) }).map(drop)
}

/// Turns TX checksum offload off on `ifname` (`ethtool -K IF tx off`) in the namespace of
/// `socket` (any socket created in that namespace).
///
/// # Errors
/// The ioctl error.
pub fn tx_checksum_off(socket: &impl AsRawFd, ifname: &str) -> io::Result<()> {
    const ETHTOOL_STXCSUM: u32 = 0x17;
    ethtool_set(socket, ifname, ETHTOOL_STXCSUM, 0)
}

/// Turns generic receive offload on on `ifname` (`ethtool -K IF gro on`) in the namespace of
/// `socket`.
///
/// # Errors
/// The ioctl error.
pub fn gro_on(socket: &impl AsRawFd, ifname: &str) -> io::Result<()> {
    const ETHTOOL_SGRO: u32 = 0x2c;
    ethtool_set(socket, ifname, ETHTOOL_SGRO, 1)
}

/// `SIOCETHTOOL` with a `struct ethtool_value` command `cmd` and value `data` on `ifname`.
fn ethtool_set(socket: &impl AsRawFd, ifname: &str, cmd: u32, data: u32) -> io::Result<()> {
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut value = EthtoolValue { cmd, data };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    if ifname.is_empty() || ifname.len() >= request.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    for (slot, byte) in request.ifr_name.iter_mut().zip(ifname.bytes()) {
        *slot = byte as libc::c_char;
    }
    request.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: `request` names the interface and points at `value`, both alive and valid for
    // the duration of the call; SIOCETHTOOL with a set command (`ETHTOOL_S*`) reads `value`
    // only.
    check(unsafe {
        libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut request as *mut libc::ifreq,
        )
    })
    .map(drop)
}

/// Sends `signal` to process `pid`.
///
/// # Errors
/// ESRCH when the process is gone, EPERM without permission.
pub fn signal(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    if pid <= 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a process id",
        ));
    }
    // SAFETY: kill has no memory preconditions; pid > 0 addresses exactly one process.
    check(unsafe { libc::kill(pid, signal) }).map(drop)
}

pub use libc::{SIGINT, SIGKILL, SIGTERM};

/// The scheduling policy and real-time priority of thread `pid`.
///
/// # Errors
/// No such thread.
pub fn scheduler_of(pid: u32) -> io::Result<(i32, i32)> {
    let mut param = libc::sched_param { sched_priority: 0 };
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `param` is a valid out-pointer for the duration of the call.
    let policy = check(unsafe { libc::sched_getscheduler(pid) })?;
    // SAFETY: as above.
    check(unsafe { libc::sched_getparam(pid, &mut param) })?;
    Ok((policy, param.sched_priority))
}

/// Sets thread `pid`'s scheduling policy and real-time priority (0 for the ordinary policies).
///
/// # Errors
/// No such thread; not permitted; a priority out of range for the policy.
pub fn set_scheduler(pid: u32, policy: i32, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `param` is valid for the duration of the call; the kernel copies it.
    check(unsafe { libc::sched_setscheduler(pid, policy, &param) }).map(drop)
}
