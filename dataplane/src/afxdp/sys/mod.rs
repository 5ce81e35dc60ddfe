//! Every `unsafe` of the AF_XDP I/O layer lives here: the UMEM mapping and frame access (also the
//! benchmark generator's prebuilt frames), and the few Linux calls the workers make directly
//! (clock, epoll, eventfd, timerfd).
//!
//! Each function states its preconditions; callers outside this module stay safe. The raw
//! calls of the steering loader are in [`steer`].

pub(super) mod steer;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use super::frames::FrameAddr;

/// The UMEM: one anonymous, page-aligned mapping shared by every socket of the switch.
#[derive(Debug)]
pub struct UmemArea {
    base: NonNull<u8>,
    len: usize,
    frame_size: u32,
}

// SAFETY: the mapping is plain memory owned by this value until drop. Frames inside it are handed
// out by index; the frame accounting guarantees each frame is held by exactly one owner at a time
// (a ring, a queue, or one worker's batch), so sharing the base pointer between threads creates no
// aliasing `&mut`.
unsafe impl Send for UmemArea {}
// SAFETY: see `Send`: `&UmemArea` only exposes frame access through `frame_mut`, whose contract
// requires exclusive ownership of the frame.
unsafe impl Sync for UmemArea {}

/// The UMEM's registration with the kernel (xdpilone's `Umem`), held by the runtime once every
/// socket is made, only so that it closes after them: nothing reads it any more.
pub struct HeldUmem(#[allow(dead_code)] pub xdpilone::Umem);

// SAFETY: xdpilone's `Umem` is `!Send` only for its `NonNull` into the area (an `UmemArea`,
// itself `Send`, owned by the runtime beside it); the rest is an `Arc` of the socket's fd and a
// `Send + Sync` device set. A `HeldUmem` gives no access to the `Umem`: it is only moved and
// dropped, and dropping it closes the fd (if the last) and touches no memory of the area, on
// whatever thread.
unsafe impl Send for HeldUmem {}

impl UmemArea {
    /// Maps `frames × frame_size` bytes of anonymous memory, 2 MiB-aligned and advised for
    /// transparent huge pages, populated up front so the first packets do not fault.
    ///
    /// Huge pages matter because the worker reads and rewrites the header of every frame, and
    /// with 4 KiB pages and 4 KiB frames each frame of a batch is its own TLB miss (a page walk
    /// the prefetch of the header cannot hide). Where THP is off (`never`) the advice is
    /// ignored and the area uses small pages, which is still correct.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new(frames: u32, frame_size: u32) -> io::Result<Self> {
        const HUGE: usize = 2 << 20;
        let len = frames as usize * frame_size as usize;
        // Over-allocate by one huge page so an aligned start exists, then give back the slack.
        let mapped = len + HUGE;
        // SAFETY: an anonymous private mapping with no address hint has no preconditions; the
        // result is checked for MAP_FAILED below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let start = ptr as usize;
        let aligned = start.next_multiple_of(HUGE);
        let head = aligned - start;
        let tail = mapped - head - len;
        // SAFETY: both ranges lie inside the mapping just created, which nothing references
        // yet; unmapping the unaligned head and the tail leaves exactly `aligned .. aligned +
        // len` mapped. A zero-length range is skipped (munmap rejects it).
        unsafe {
            if head > 0 {
                libc::munmap(ptr, head);
            }
            if tail > 0 {
                libc::munmap((aligned + len) as *mut libc::c_void, tail);
            }
        }
        let base = aligned as *mut libc::c_void;
        // SAFETY: advice and population on the area owned here; both only change how the pages
        // are backed, never their contents (zero), and failures are harmless: without THP the
        // pages are small, and pages left unpopulated fault in on first use.
        unsafe {
            libc::madvise(base, len, libc::MADV_HUGEPAGE);
            if libc::madvise(base, len, libc::MADV_POPULATE_WRITE) != 0 {
                for offset in (0..len).step_by(4096) {
                    base.cast::<u8>().add(offset).write_volatile(0);
                }
            }
        }
        Ok(Self {
            base: NonNull::new(base.cast()).expect("mmap returned a non-null mapping"),
            len,
            frame_size,
        })
    }

    /// Maps a new area like [`Self::new`] and lets `write` fill it before returning it: how
    /// prebuilt frames (the benchmark generator's) get into a UMEM.
    ///
    /// Sound by construction: the area is brand new, so it has never been registered with the
    /// kernel and no other reference into it exists while `write` runs.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new_with(
        frames: u32,
        frame_size: u32,
        write: impl FnOnce(&mut [u8]),
    ) -> io::Result<Self> {
        let area = Self::new(frames, frame_size)?;
        let bytes = area.as_slice_ptr();
        // SAFETY: `as_slice_ptr` covers exactly the live, readable and writable anonymous mapping
        // the area owns (zero-initialised by the kernel, unmapped only when `area` drops, which
        // happens after the slice is gone). The area was created above and not shared,
        // registered or borrowed elsewhere, so this slice is the only reference into the mapping
        // until `write` returns.
        write(unsafe { &mut *bytes.as_ptr() });
        Ok(area)
    }

    /// The whole area, for registering it as a UMEM.
    pub fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.base, self.len)
    }

    /// Size of one frame.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Whether `addr .. addr + len` lies inside the area and inside one frame.
    fn holds(&self, addr: u64, len: u32) -> bool {
        let frame_size = u64::from(self.frame_size);
        let end = addr.saturating_add(u64::from(len));
        end <= self.len as u64 && (addr / frame_size + 1) * frame_size >= end
    }

    /// Starts loading the first cache line of a received frame into this CPU's cache. In copy
    /// mode the kernel wrote the frame on the CPU that ran the receive softirq, so the worker's
    /// first read of each header misses; issuing every miss of a batch before parsing the first
    /// frame overlaps them instead of paying them one after another.
    #[inline]
    fn prefetch(&self, addr: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint that never faults and has no architectural effect; the
        // address lies in the mapping anyway (`holds` was checked by the caller).
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.base.as_ptr().add(addr as usize).cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = addr;
    }

    /// The bytes of a frame this thread owns.
    #[inline]
    pub fn data<'a>(&'a self, frame: &'a mut OwnedFrame) -> &'a mut [u8] {
        debug_assert!(self.holds(frame.addr, frame.len));
        // SAFETY: an `OwnedFrame` is only made by `receive` from a descriptor the kernel handed
        // back on an RX ring and checked by `holds` to lie in this area and one frame; the kernel
        // never hands out a frame twice, `OwnedFrame` is neither `Clone` nor `Copy`, and the slice
        // borrows it mutably, so no other slice of this frame can exist while this one lives.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.base.as_ptr().add(frame.addr as usize),
                frame.len as usize,
            )
        }
    }

    /// Copies `bytes` into `free`, a frame of this area taken from its free frames (a
    /// [`FramePool`](super::frames::FramePool) or a worker's cache), at the offset where the
    /// kernel puts received data ([`XDP_HEADROOM`](super::XDP_HEADROOM)), and returns the
    /// frame as a received packet. `None` when `bytes` do not fit one frame (the frame stays
    /// the caller's).
    ///
    /// A frame taken from the free frames belongs to the taker alone — the frame accounting
    /// hands each out once — and the taker gives up its address here for the `OwnedFrame`.
    pub(in crate::afxdp) fn fill_free_frame(
        &self,
        free: FrameAddr,
        bytes: &[u8],
    ) -> Option<OwnedFrame> {
        let addr = free.0 + u64::from(super::XDP_HEADROOM);
        let len = u32::try_from(bytes.len()).ok()?;
        if !self.holds(addr, len) || free.0 % u64::from(self.frame_size) != 0 {
            return None;
        }
        // SAFETY: `holds` checked that `addr .. addr + len` lies in the mapping and in one frame;
        // the frame is free (see above), so no other reference to its bytes exists, and `bytes`
        // comes from another area or another frame (a `&[u8]` and this frame cannot overlap).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(addr as usize),
                bytes.len(),
            );
        }
        Some(OwnedFrame::single(addr, len))
    }
}

/// Descriptor option: the packet continues in the next descriptor (`XDP_PKT_CONTD`).
const XDP_PKT_CONTD: u32 = 1;

/// Continuation frames a packet may have besides its first.
const MAX_CONTINUATIONS: usize = super::MAX_FRAMES_PER_PACKET as usize - 1;

/// A received packet, owned by whoever holds this value: the only handle through which its
/// bytes can be read or written. It is consumed when its frames go back to the kernel (TX) or to
/// the free frames.
///
/// A packet is one UMEM frame, or with multi-buffer AF_XDP a first frame (which holds the
/// headers: the kernel fills each frame before the next) and up to
/// [`MAX_FRAMES_PER_PACKET`](super::MAX_FRAMES_PER_PACKET) − 1 continuation frames.
#[derive(Debug, PartialEq, Eq)]
pub struct OwnedFrame {
    addr: u64,
    len: u32,
    /// Lengths of the continuation frames; 0 ends the list (the kernel never hands out an
    /// empty buffer).
    more_len: [u16; MAX_CONTINUATIONS],
    more_addr: [u64; MAX_CONTINUATIONS],
}

impl OwnedFrame {
    /// A frame of made-up ownership, for the tests of the types that carry frames (only the
    /// receive path creates real ones).
    #[cfg(test)]
    pub(in crate::afxdp) fn for_test(addr: u64, len: u32) -> Self {
        Self::single(addr, len)
    }

    fn single(addr: u64, len: u32) -> Self {
        Self {
            addr,
            len,
            more_len: [0; MAX_CONTINUATIONS],
            more_addr: [0; MAX_CONTINUATIONS],
        }
    }

    /// Packet length in bytes, every frame of it ([`UmemArea::data`] gives access to the
    /// first).
    #[allow(clippy::len_without_is_empty)]
    #[inline]
    pub fn len(&self) -> u32 {
        self.len + self.more_len.iter().map(|&len| u32::from(len)).sum::<u32>()
    }

    /// UMEM frames the packet occupies.
    #[inline]
    pub fn frames(&self) -> usize {
        1 + self.more_len.iter().take_while(|&&len| len != 0).count()
    }

    /// Appends `next`, a single received frame, as the packet's next frame; gives it back if the
    /// packet has [`MAX_FRAMES_PER_PACKET`](super::MAX_FRAMES_PER_PACKET) frames already.
    ///
    /// # Errors
    /// `next` itself when there is no room.
    pub fn append(&mut self, next: OwnedFrame) -> Result<(), OwnedFrame> {
        debug_assert_eq!(next.frames(), 1, "a continuation is one frame");
        let free = self.frames() - 1;
        if free == MAX_CONTINUATIONS {
            return Err(next);
        }
        self.more_len[free] = next.len as u16;
        self.more_addr[free] = next.addr;
        Ok(())
    }

    /// The TX descriptors that send this packet, first frame first, each but the last marked
    /// `XDP_PKT_CONTD` (the frames now belong to the TX ring). `send` is called once per frame.
    #[inline]
    pub fn into_tx(self, mut send: impl FnMut(xdpilone::xdp::XdpDesc)) {
        let frames = self.frames();
        let continued = |index: usize| {
            if index + 1 < frames {
                XDP_PKT_CONTD
            } else {
                0
            }
        };
        send(xdpilone::xdp::XdpDesc {
            addr: self.addr,
            len: self.len,
            options: continued(0),
        });
        for index in 1..frames {
            send(xdpilone::xdp::XdpDesc {
                addr: self.more_addr[index - 1],
                len: u32::from(self.more_len[index - 1]),
                options: continued(index),
            });
        }
    }

    /// The UMEM frames that hold it, to free them (`frame_size`: the UMEM's).
    pub fn into_frames(self, frame_size: u32) -> impl Iterator<Item = FrameAddr> {
        let frames = self.frames();
        std::iter::once(self.addr)
            .chain(self.more_addr.into_iter().take(frames - 1))
            .map(move |addr| FrameAddr::base(addr, frame_size))
    }
}

/// What [`receive`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Frames read into `out`.
    pub frames: usize,
    /// Descriptors that do not lie inside the UMEM (never expected; not used, and counted by
    /// the caller as `RxDropReason::BadDescriptor`).
    pub bad: usize,
    /// Bit i set: frame i's packet continues in frame i + 1 (`XDP_PKT_CONTD`; only sockets
    /// bound with `XDP_USE_SG` see it).
    pub continued: u64,
}

/// Reads up to `out.len()` (at most 64) descriptors from an RX ring into owned frames, one per
/// descriptor: the caller joins the frames of a multi-buffer packet ([`Received::continued`]).
pub fn receive(
    rx: &mut xdpilone::RingRx,
    umem: &UmemArea,
    out: &mut [Option<OwnedFrame>],
) -> Received {
    debug_assert!(out.len() <= 64, "continuation flags are a 64-bit mask");
    let mut reader = rx.receive(out.len() as u32);
    let mut received = Received::default();
    while let Some(desc) = reader.read() {
        if umem.holds(desc.addr, desc.len) {
            umem.prefetch(desc.addr);
            if desc.options & XDP_PKT_CONTD != 0 {
                received.continued |= 1 << received.frames;
            }
            out[received.frames] = Some(OwnedFrame::single(desc.addr, desc.len));
            received.frames += 1;
        } else {
            received.bad += 1;
        }
    }
    reader.release();
    received
}

/// A multi-buffer packet being joined across [`receive`] batches: the kernel puts a packet's
/// frames on the RX ring together, but a batch may end inside one.
#[derive(Debug, Default)]
pub struct Assembly {
    /// The frames so far of a packet whose last frame is still to come.
    packet: Option<OwnedFrame>,
    /// Dropping the rest of a packet that had too many frames.
    dropping: bool,
}

impl Assembly {
    /// Takes the frames of an unfinished packet (at shutdown, to free them).
    pub fn take(&mut self) -> Option<OwnedFrame> {
        self.dropping = false;
        self.packet.take()
    }

    /// Frames held for an unfinished packet.
    pub fn frames(&self) -> usize {
        self.packet.as_ref().map_or(0, OwnedFrame::frames)
    }

    /// Joins the `received.frames` frames at the front of `frames` into packets, in place: the
    /// first returned-count slots hold whole packets afterwards. A packet whose last frame is
    /// not in this batch waits here for the next. A packet of more frames than allowed is
    /// given to `discard` frame group by frame group (and counted once in the returned drops).
    /// Returns (packets, packets dropped).
    pub fn join(
        &mut self,
        frames: &mut [Option<OwnedFrame>],
        received: Received,
        mut discard: impl FnMut(OwnedFrame),
    ) -> (usize, usize) {
        let (mut packets, mut dropped) = (0, 0);
        for index in 0..received.frames {
            let frame = frames[index]
                .take()
                .expect("received frames are all present");
            let continued = received.continued & (1 << index) != 0;
            if self.dropping {
                discard(frame);
            } else {
                match self.packet.take() {
                    None => self.packet = Some(frame),
                    Some(mut packet) => match packet.append(frame) {
                        Ok(()) => self.packet = Some(packet),
                        Err(frame) => {
                            discard(packet);
                            discard(frame);
                            self.dropping = true;
                            dropped += 1;
                        }
                    },
                }
            }
            if !continued {
                self.dropping = false;
                if let Some(packet) = self.packet.take() {
                    frames[packets] = Some(packet);
                    packets += 1;
                }
            }
        }
        (packets, dropped)
    }
}

/// Registers the area as the switch's UMEM with the kernel.
///
/// # Errors
/// The kernel's error for `XDP_UMEM_REG`.
pub fn register_umem(
    area: &UmemArea,
    config: xdpilone::UmemConfig,
) -> Result<xdpilone::Umem, xdpilone::Errno> {
    // SAFETY: the area is a page-aligned mapping (mmap) of `len` bytes that lives as long as the
    // runtime, which drops every socket using the UMEM before the area.
    unsafe { xdpilone::Umem::new(config, area.as_slice_ptr()) }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `new`, unmapped once. Sockets
        // that referenced it are closed before the area is dropped (the runtime drops them
        // first).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of the shaper and of the timerfd deadlines.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux.
    unsafe {
        libc::clock_gettime(clock, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Marks descriptor `fd` close-on-exec, so that a process this one starts does not inherit it.
///
/// xdpilone opens its AF_XDP sockets (and the UMEM's) without `SOCK_CLOEXEC`. A child started
/// while a switch runs in the process would hold them open until it exits: a stopped switch's
/// socket — and its UMEM's registration on the queue — would outlive its stop, and a switch
/// started again on the same queue would fail to bind (EBUSY) until then.
///
/// # Errors
/// The `fcntl` error (EBADF for a descriptor that is not open).
pub fn set_close_on_exec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFD and F_SETFD take no pointer; they read and set the descriptor's flags, and
    // fail with EBADF for one that is not open.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) }).map(drop)
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = check(fd)?;
    // SAFETY: `fd` was just returned by the kernel, is valid, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An eventfd a worker sleeps on and other threads write to wake it.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A non-blocking eventfd.
    ///
    /// # Errors
    /// The `eventfd` error.
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointer arguments.
        owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }).map(Self)
    }

    /// Wakes the sleeper (adds 1).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to an eventfd we own. A full counter (EAGAIN)
        // means the sleeper is already due to wake, so the result is deliberately ignored.
        unsafe {
            libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8);
        }
    }

    /// Clears pending notifications.
    pub fn drain(&self) {
        read_counter(&self.0);
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A `CLOCK_MONOTONIC` timerfd armed with absolute nanosecond deadlines.
#[derive(Debug)]
pub struct TimerFd(OwnedFd);

impl TimerFd {
    /// A non-blocking, disarmed timer.
    ///
    /// # Errors
    /// The `timerfd_create` error.
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointer arguments.
        owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })
        .map(Self)
    }

    /// Fires at the absolute monotonic time `deadline_ns` (0 disarms).
    pub fn arm_at(&self, deadline_ns: u64) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid itimerspec, null old-value pointer is allowed. A deadline in the past
        // fires immediately, which is what we want.
        unsafe {
            libc::timerfd_settime(
                self.0.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            );
        }
    }

    /// Clears an expiry.
    pub fn drain(&self) {
        read_counter(&self.0);
    }
}

/// Reads (and so resets) the 8-byte counter of a non-blocking eventfd or timerfd; EAGAIN
/// (nothing pending) is fine.
fn read_counter(fd: &OwnedFd) {
    let mut value: u64 = 0;
    // SAFETY: reads at most 8 bytes into a valid, writable u64 owned by this frame.
    unsafe {
        libc::read(fd.as_raw_fd(), (&mut value as *mut u64).cast(), 8);
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// An epoll set whose events carry a caller-chosen `u64` token.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// An empty epoll set.
    ///
    /// # Errors
    /// The `epoll_create1` error.
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointer arguments.
        owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map(Self)
    }

    /// Watches `fd` for readability, reporting `token`.
    ///
    /// # Errors
    /// The `epoll_ctl` error.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `event` is valid for the call; the kernel copies it.
        check(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })
            .map(drop)
    }

    /// Stops watching `fd`.
    ///
    /// # Errors
    /// The `epoll_ctl` error.
    pub fn remove(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer (null is allowed since Linux 2.6.9).
        check(unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        })
        .map(drop)
    }

    /// Waits up to `timeout_ms` (−1 = forever) and calls `ready` with the token of each source
    /// that became readable.
    pub fn wait_with(&self, timeout_ms: i32, mut ready: impl FnMut(u64)) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: the buffer holds 64 events and we pass 64; EINTR returns −1, treated as 0.
        let count = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout_ms,
            )
        };
        for event in &events[..count.max(0) as usize] {
            let token = event.u64;
            ready(token);
        }
    }

    /// Waits up to `timeout_ms` (−1 = forever) and returns how many events arrived (their tokens
    /// are not needed: the worker polls every source after waking).
    pub fn wait(&self, timeout_ms: i32) -> usize {
        let mut ready = 0;
        self.wait_with(timeout_ms, |_| ready += 1);
        ready
    }
}

/// Asks the kernel to fire this thread's timers as close to their deadline as it can (the
/// default timer slack of 50 µs would make every shaper wake-up that much late).
pub fn minimize_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Prepares the calling thread to move frames: timer slack minimized, pinned to `cpu` and
/// SCHED_FIFO at `rt_priority` if given. What cannot be applied is logged as a warning naming
/// `thread` (e.g. "worker 2") and the thread runs on without it.
pub fn prepare_forwarding_thread(thread: &str, cpu: Option<usize>, rt_priority: Option<u8>) {
    minimize_timer_slack();
    if let Some(cpu) = cpu {
        if let Err(error) = pin_to_cpu(cpu) {
            tracing::warn!(thread, cpu, %error, "cannot pin the thread");
        }
    }
    if let Some(priority) = rt_priority {
        if let Err(error) = set_realtime(priority) {
            tracing::warn!(thread, priority, %error, "cannot make the thread real-time");
        }
    }
}

/// Moves the calling thread to the SCHED_FIFO real-time class at `priority` (clamped to
/// 1..=99). Needs CAP_SYS_NICE (root).
///
/// # Errors
/// The `sched_setscheduler` error.
pub fn set_realtime(priority: u8) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: i32::from(priority.clamp(1, 99)),
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the duration of
    // the call.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }).map(drop)
}

/// Pins the calling thread to one CPU.
///
/// # Errors
/// A CPU outside the process's affinity mask, not online or beyond `CPU_SETSIZE` (EINVAL).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set; CPU_SET writes inside it, as
    // `cpu` is below CPU_SETSIZE (checked above).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        check(libc::sched_setaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &set,
        ))
        .map(drop)
    }
}

/// The interface index of `name` in the current network namespace.
///
/// # Errors
/// `NotFound` when no such interface exists.
pub fn ifindex(name: &str) -> io::Result<u32> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: `cname` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named `{name}`"),
        ))
    } else {
        Ok(index)
    }
}

/// The MTU of interface `name` in the calling thread's network namespace (`SIOCGIFMTU`; unlike
/// `/sys/class/net`, which shows the namespace sysfs was mounted in, this follows `setns`).
///
/// # Errors
/// No such interface; the socket or ioctl error.
pub fn mtu(name: &str) -> io::Result<u32> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name `{name}` is too long"),
        ));
    }
    // SAFETY: a datagram socket for the ioctl, closed by OwnedFd.
    let socket =
        owned(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: ifreq is plain data; zeroed is valid. The name fits (checked above) and stays
    // NUL-terminated; the kernel writes ifr_mtu inside the struct.
    unsafe {
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(name.bytes()) {
            *slot = byte as libc::c_char;
        }
        check(libc::ioctl(
            socket.as_raw_fd(),
            libc::SIOCGIFMTU,
            &mut request,
        ))?;
        Ok(request.ifr_ifru.ifru_mtu as u32)
    }
}

/// Moves the calling thread into network namespace `name` (`/run/netns/NAME`, as `ip netns`
/// names them). Sockets it creates afterwards, and threads it spawns, belong to that namespace.
///
/// # Errors
/// No such namespace; the `setns` error.
pub fn enter_network_namespace(name: &str) -> io::Result<()> {
    let path = std::path::Path::new("/run/netns").join(name);
    let file = std::fs::File::open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: `file` is an open namespace descriptor for the duration of the call; setns with
    // CLONE_NEWNET only changes the calling thread's network namespace.
    check(unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Returns the allocator's free memory to the kernel (glibc's `malloc_trim`; nothing elsewhere).
/// Loading the XDP program parses the kernel's BTF — tens of MB, freed at once but kept by the
/// allocator's per-thread arenas: in an `ofan-switch group` of twenty switches, 310 MB of its
/// 556 MB resident (measured).
pub fn release_free_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's own free lists; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::{Assembly, OwnedFrame, Received, XDP_PKT_CONTD};
    use crate::afxdp::frames::FrameAddr;

    /// `lens.len()` frames at 4096-byte frames 0, 1, 2…, each 256 bytes in (as received).
    fn batch(lens: &[u32]) -> Vec<Option<OwnedFrame>> {
        lens.iter()
            .enumerate()
            .map(|(index, &len)| Some(OwnedFrame::single(index as u64 * 4096 + 256, len)))
            .collect()
    }

    fn received(frames: usize, continued: &[usize]) -> Received {
        Received {
            frames,
            bad: 0,
            continued: continued.iter().map(|&index| 1 << index).sum(),
        }
    }

    #[test]
    fn a_packet_of_three_frames_is_sent_as_three_chained_descriptors_and_freed_whole() {
        let mut packet = OwnedFrame::single(256, 3840);
        packet.append(OwnedFrame::single(4096 + 256, 3840)).unwrap();
        packet.append(OwnedFrame::single(8192 + 256, 1334)).unwrap();
        assert_eq!((packet.len(), packet.frames()), (9014, 3));
        // A fourth frame does not fit and is given back.
        let extra = packet.append(OwnedFrame::single(12288, 10)).unwrap_err();
        assert_eq!(extra, OwnedFrame::single(12288, 10));

        let mut descs = Vec::new();
        packet.into_tx(|desc| descs.push((desc.addr, desc.len, desc.options)));
        assert_eq!(
            descs,
            [
                (256, 3840, XDP_PKT_CONTD),
                (4352, 3840, XDP_PKT_CONTD),
                (8448, 1334, 0)
            ]
        );
        let mut packet = OwnedFrame::single(256, 3840);
        packet.append(OwnedFrame::single(4096 + 256, 100)).unwrap();
        let frames: Vec<_> = packet.into_frames(4096).collect();
        assert_eq!(frames, [FrameAddr(0), FrameAddr(4096)]);

        let mut descs = Vec::new();
        OwnedFrame::single(512, 60).into_tx(|desc| descs.push((desc.addr, desc.len, desc.options)));
        assert_eq!(descs, [(512, 60, 0)]);
    }

    #[test]
    fn join_builds_packets_in_place_and_carries_one_across_batches() {
        let mut assembly = Assembly::default();
        // Frames: [a a a] [b] [c c | … c]: c's last frame comes with the next batch.
        let mut frames = batch(&[3840, 3840, 1334, 60, 3840, 3840]);
        let (packets, dropped) = assembly.join(&mut frames, received(6, &[0, 1, 4, 5]), |_| {
            panic!("nothing to drop")
        });
        assert_eq!((packets, dropped), (2, 0));
        let lens: Vec<_> = frames[..2].iter().flatten().map(OwnedFrame::len).collect();
        assert_eq!(lens, [9014, 60]);
        assert!(frames[2..].iter().all(Option::is_none));
        assert_eq!(assembly.frames(), 2);

        let mut frames = batch(&[100, 60]);
        let (packets, _) = assembly.join(&mut frames, received(2, &[]), |_| panic!());
        assert_eq!(packets, 2);
        let packet = frames[0].take().unwrap();
        assert_eq!((packet.len(), packet.frames()), (7780, 3));
        assert_eq!(frames[1].as_ref().map(OwnedFrame::len), Some(60));
        assert_eq!(assembly.frames(), 0);
    }

    #[test]
    fn join_drops_a_packet_of_too_many_frames_to_its_end_and_keeps_the_next() {
        let mut assembly = Assembly::default();
        let mut discarded = Vec::new();
        // Five frames of one packet (a 64 KB segment, say), split across two batches, then a
        // packet of one frame.
        let mut frames = batch(&[3840, 3840, 3840, 3840]);
        let (packets, dropped) = assembly.join(&mut frames, received(4, &[0, 1, 2, 3]), |frame| {
            discarded.push(frame.frames())
        });
        assert_eq!((packets, dropped), (0, 1));
        let mut frames = batch(&[500, 60]);
        let (packets, dropped) = assembly.join(&mut frames, received(2, &[]), |frame| {
            discarded.push(frame.frames())
        });
        assert_eq!((packets, dropped), (1, 0));
        assert_eq!(
            discarded.iter().sum::<usize>(),
            5,
            "every frame of it freed"
        );
        assert_eq!(frames[0].as_ref().map(OwnedFrame::len), Some(60));
        assert_eq!(assembly.frames(), 0);
    }
}
