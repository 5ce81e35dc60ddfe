//! Every `unsafe` of the host link: the shared mapping of its file, and the FIFOs that wake
//! its consumers.

use std::io;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A file mapped shared into this process: the rings of a host link ([`crate::HostLink`]),
/// which another process maps too. Only atomics and copies reach its bytes, never references
/// to them: the other process writes the memory.
#[derive(Debug)]
pub struct SharedMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping lives until drop; every access goes through atomics or bounds-checked
// copies, whose exclusivity the rings' protocol (one producer, one consumer per ring) provides.
unsafe impl Send for SharedMap {}
// SAFETY: see `Send`.
unsafe impl Sync for SharedMap {}

impl SharedMap {
    /// Maps the first `len` bytes of `file` (which must be that long) read-write and shared,
    /// every page faulted in for writing now (`MADV_POPULATE_WRITE`, Linux 5.14): on tmpfs a
    /// fresh file's pages are allocated here and not by the first frames through the rings —
    /// in the switch, 2,200–2,400 page faults on the pool threads' hot path during a k = 4
    /// lab's first run (`perf record -e page-faults`: `HostLink::push`, 2026-12-07). Not
    /// `MAP_POPULATE`: on a shared mapping it faults pages in for reading only, and the first
    /// write faults again. A kernel without the advice costs those faults, nothing else.
    ///
    /// # Errors
    /// The `mmap` error.
    pub fn new(file: &std::fs::File, len: usize) -> io::Result<Self> {
        // SAFETY: a shared mapping of a file descriptor we hold, no address hint; the result is
        // checked for MAP_FAILED. The file outlives nothing we rely on: the mapping keeps its
        // pages.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        // SAFETY: the range just mapped; the advice changes no byte of it (it faults pages in
        // as a write would, without writing). Its error (EINVAL before Linux 5.14) is ignored:
        // the pages then fault in on first use, as without it.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_POPULATE_WRITE);
        }
        Ok(Self { base, len })
    }

    /// The mapping's length, bytes.
    pub fn size(&self) -> usize {
        self.len
    }

    /// The 32-bit atomic at `offset`.
    ///
    /// # Panics
    /// When `offset` is not 4-aligned or the word is outside the mapping.
    pub fn atomic_u32(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(
            offset % 4 == 0 && offset + 4 <= self.len,
            "word {offset} outside the map"
        );
        // SAFETY: in bounds and aligned (the base is page-aligned); `AtomicU32` has the layout of
        // a u32 and every access to this word, in either process, is atomic.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(offset)
                .cast::<std::sync::atomic::AtomicU32>()
        }
    }

    /// Copies `bytes` to `offset`.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len, "write outside the map");
        // SAFETY: in bounds; the ring protocol gives the writer the range alone until it
        // publishes it (a release store the reader acquires).
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.as_ptr().add(offset),
                bytes.len(),
            );
        }
    }

    /// Copies `out.len()` bytes from `offset` into `out`.
    ///
    /// # Panics
    /// When the range is outside the mapping.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len, "read outside the map");
        // SAFETY: in bounds; the range was published to the reader (see `write`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().add(offset),
                out.as_mut_ptr(),
                out.len(),
            );
        }
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        // SAFETY: the mapping created in `new`, unmapped once; `&self` borrows ended with it.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Creates a named pipe (mode 0600) at `path`; one that exists already is kept.
///
/// # Errors
/// The `mkfifo` error, or a path that exists but is not a FIFO.
pub fn make_fifo(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path with a NUL byte"))?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.kind() == io::ErrorKind::AlreadyExists
        && std::fs::metadata(path).is_ok_and(|meta| meta.file_type().is_fifo())
    {
        return Ok(());
    }
    Err(error)
}
