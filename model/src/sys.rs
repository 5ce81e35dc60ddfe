//! The model's one use of `unsafe`: a cache prefetch hint.
//!
//! The event loop knows, many events ahead, which ports and frames it will touch (events due at
//! the current picosecond are final), but each of those touches is a cache miss on a working set
//! of megabytes. A prefetch starts the load without waiting for it, so the misses of the next
//! events overlap with the work on this one. Stable Rust has no safe prefetch, so this module
//! wraps the x86-64 instruction; on other targets it does nothing.
#![allow(unsafe_code)]

/// Asks the CPU to bring the cache line holding `address` into all cache levels.
///
/// A hint only: it never faults, whatever the address, changes no memory and no result, and may
/// be ignored.
#[inline(always)]
pub(crate) fn prefetch<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is a hint that architecturally reads nothing and cannot fault, whatever
    // the address. SSE, which provides it, is part of the x86-64 baseline, so the instruction
    // exists on every x86-64 CPU this code runs on.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
