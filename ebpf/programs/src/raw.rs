//! Every `unsafe` operation of the XDP programs: bounds-checked packet reads and writes, map
//! value copies, counter increments, and the license section.

use aya_ebpf::{
    maps::{HashMap, PerCpuArray},
    programs::XdpContext,
};

/// The object's license, which the kernel checks for GPL-only helpers (none are used).
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

/// A copy of the `T` at byte `offset` of the frame, or `None` when it does not fit in the frame.
///
/// The single bounds check of the program (the verifier sees `data + offset + size <= data_end`
/// before the load). Returning a copy keeps packet pointers out of map keys.
#[inline(always)]
pub(crate) fn read<T: Copy>(ctx: &XdpContext, offset: usize) -> Option<T> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + offset + core::mem::size_of::<T>() > end {
        return None;
    }
    let pointer = (start + offset) as *const T;
    // SAFETY: `[pointer, pointer + size_of::<T>())` lies within `[data, data_end)`, the frame the
    // kernel handed to this program invocation, checked just above; `read_unaligned` has no
    // alignment requirement; `T: Copy` and the callers only use integer arrays, for which every
    // bit pattern is valid.
    Some(unsafe { pointer.read_unaligned() })
}

/// Writes `value` at byte `offset` of the frame; does nothing when it does not fit in the frame.
///
/// The same single bounds check as [`read`].
#[inline(always)]
pub(crate) fn write<T: Copy>(ctx: &XdpContext, offset: usize, value: T) {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + offset + core::mem::size_of::<T>() > end {
        return;
    }
    let pointer = (start + offset) as *mut T;
    // SAFETY: `[pointer, pointer + size_of::<T>())` lies within `[data, data_end)`, checked just
    // above: the frame this program invocation owns and may modify (XDP frames are writable);
    // `write_unaligned` has no alignment requirement; `T: Copy` has no destructor to skip.
    unsafe { pointer.write_unaligned(value) };
}

/// A copy of the value stored under `key`, if any.
#[inline(always)]
pub(crate) fn lookup<K, V: Copy>(map: &HashMap<K, V>, key: &K) -> Option<V> {
    let value = map.get_ptr(key)?;
    // SAFETY: `bpf_map_lookup_elem` returned a non-null pointer to a live, properly aligned `V`
    // in the map; the value is copied out at once, so a concurrent update from user space can at
    // worst be observed half-written, which the plain-integer value types tolerate.
    Some(unsafe { *value })
}

/// Replaces this CPU's slot `index` of a per-CPU `u64` array by `update(old)`; returns `old`, or
/// `None` when the index is out of range.
#[inline(always)]
pub(crate) fn update(
    slots: &PerCpuArray<u64>,
    index: u32,
    update: impl FnOnce(u64) -> u64,
) -> Option<u64> {
    let slot = slots.get_ptr_mut(index)?;
    // SAFETY: as in [`count`]: this CPU's own `u64` slot, which no other CPU writes, and no other
    // XDP program runs on this CPU until this one returns.
    unsafe {
        let old = *slot;
        *slot = update(old);
        Some(old)
    }
}

/// A pseudo-random 32-bit number (the kernel's per-CPU generator).
#[inline(always)]
pub(crate) fn random() -> u32 {
    // SAFETY: `bpf_get_prandom_u32` takes no arguments and only advances this CPU's generator;
    // XDP programs may call it.
    unsafe { aya_ebpf::helpers::bpf_get_prandom_u32() }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
#[inline(always)]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: `bpf_ktime_get_ns` takes no arguments and only reads the clock; XDP programs may
    // call it.
    unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() }
}

/// Adds one to this CPU's slot `index` of a per-CPU counter array.
#[inline(always)]
pub(crate) fn count(stats: &PerCpuArray<u64>, index: u32) {
    if let Some(counter) = stats.get_ptr_mut(index) {
        // SAFETY: the pointer comes from `bpf_map_lookup_elem` on a per-CPU array, so it points to
        // this CPU's `u64` slot, which no other CPU writes, and XDP programs are not preempted
        // by another XDP program on the same CPU.
        unsafe { *counter += 1 };
    }
}
