//! The stall probe's and the stall watch's only `unsafe`: which CPUs this process may run on,
//! pinning the calling thread to one of them, SCHED_IDLE, and the calling thread's CPU time.

use std::io;
use std::mem::MaybeUninit;

/// The CPUs this process may run on (its affinity mask), in ascending order.
///
/// # Errors
/// When the kernel refuses to tell (it does not on Linux, short of a bad pid).
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mut set = MaybeUninit::<libc::cpu_set_t>::zeroed();
    // SAFETY: `set` is valid for a write of one cpu_set_t, whose size is passed; pid 0 is the
    // calling thread.
    let ret = unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set.as_mut_ptr())
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed, then filled by the kernel: a valid cpu_set_t either way.
    let set = unsafe { set.assume_init() };
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the bound CPU_ISSET needs.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to `cpu` (the data path's, which the switch's workers use).
pub use ofan_dataplane::afxdp::pin_to_cpu;

/// CPU time the calling thread has used, nanoseconds (CLOCK_THREAD_CPUTIME_ID).
#[must_use]
pub fn thread_cpu_ns() -> u64 {
    super::agent::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Puts the calling thread under SCHED_IDLE: it runs only when nothing else wants the CPU.
///
/// # Errors
/// The `sched_setscheduler` error.
pub fn set_idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the duration of
    // the call.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
