//! The model's uses of `unsafe`: a cache prefetch hint and huge-page advice.
//!
//! The event loop knows, many events ahead, which ports and frames it will touch (events due at
//! the current picosecond are final), but each of those touches is a cache miss on a working set
//! of megabytes. A prefetch starts the load without waiting for it, so the misses of the next
//! events overlap with the work on this one. Stable Rust has no safe prefetch, so this module
//! wraps the x86-64 instruction; on other targets it does nothing. The large arrays those
//! accesses land in are backed by huge pages where the kernel allows it (`madvise`), so that
//! the accesses and prefetches do not also wait for page walks; so is, once built, the per-host
//! state that malloc spread over its heap.
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

/// Asks the kernel to back `memory` with transparent huge pages where it can (2 MiB pages on
/// x86-64), before the memory is first touched.
///
/// The model's large arrays (ports, wires, hosts) are read at random: with 4 KiB pages nearly
/// every access of a large fabric also misses the TLB, and the prefetches the event loop issues
/// ahead wait for page walks. Advice only: on systems where transparent huge pages are off (or
/// not `madvise`-able) nothing changes, and no result ever depends on it.
pub(crate) fn advise_huge_pages<T>(memory: &[T]) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = memory.as_ptr() as usize;
        let end = start + std::mem::size_of_val(memory);
        let first = start.next_multiple_of(PAGE);
        if end > first {
            // SAFETY: `madvise` with `MADV_HUGEPAGE` only changes how the kernel backs the pages
            // of the range, never their contents or mappings; the range is page-aligned and
            // lies inside `memory`, an allocation this process owns. Failure (THP unavailable)
            // is harmless and ignored.
            unsafe {
                libc::madvise(
                    first as *mut libc::c_void,
                    (end - first) / PAGE * PAGE,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = memory;
}

/// Asks the kernel to back the process's anonymous heap memory with transparent huge pages:
/// every private, writable, anonymous mapping of at least 2 MiB (the `[heap]`, malloc's
/// arenas and large allocations) is advised (`MADV_HUGEPAGE`, for what it still grows into)
/// and what it already holds is collapsed into huge pages (`MADV_COLLAPSE`, Linux ≥ 6.1).
///
/// The model's per-host state — each host's flows, held ACKs and loss-recovery records — is
/// thousands of small allocations spread over malloc's heap, which [`advise_huge_pages`]
/// cannot reach before they are touched; at 65,536 hosts they are hundreds of megabytes read
/// at random. Advice only: where the kernel refuses, nothing changes, and no result ever
/// depends on it.
pub(crate) fn collapse_heap_into_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
            return;
        };
        for line in maps.lines() {
            let mut fields = line.split_ascii_whitespace();
            let (Some(range), Some(perms)) = (fields.next(), fields.next()) else {
                continue;
            };
            let path = fields.nth(3).unwrap_or("");
            if perms != "rw-p" || !(path.is_empty() || path == "[heap]") {
                continue;
            }
            let Some((start, end)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end)) = (
                usize::from_str_radix(start, 16),
                usize::from_str_radix(end, 16),
            ) else {
                continue;
            };
            let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
            if last <= first {
                continue;
            }
            // SAFETY: `madvise` with `MADV_HUGEPAGE` or `MADV_COLLAPSE` changes how the kernel
            // backs the pages of the range, never their contents or mappings (a collapse copies
            // the pages into a huge page atomically); the range is 2 MiB-aligned and lies inside
            // a mapping of this process read from `/proc/self/maps`. Failures (THP unavailable,
            // a kernel without `MADV_COLLAPSE`, a mapping gone meanwhile) are harmless and
            // ignored.
            unsafe {
                let address = first as *mut libc::c_void;
                libc::madvise(address, last - first, libc::MADV_HUGEPAGE);
                libc::madvise(address, last - first, libc::MADV_COLLAPSE);
            }
        }
    }
}
