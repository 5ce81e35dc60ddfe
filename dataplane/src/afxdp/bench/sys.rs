//! The one `unsafe` operation of the benchmark pieces: writing the generator's frames into a
//! fresh UMEM area before anything else can see it.

use std::io;

use crate::afxdp::sys::UmemArea;

/// Maps a new area of `frames × frame_size` bytes and lets `write` fill it before returning it.
///
/// Sound by construction: the area is brand new, so it has never been registered with the
/// kernel and no other reference into it exists while `write` runs.
///
/// # Errors
/// The `mmap` error.
pub(super) fn area_with(
    frames: u32,
    frame_size: u32,
    write: impl FnOnce(&mut [u8]),
) -> io::Result<UmemArea> {
    let area = UmemArea::new(frames, frame_size)?;
    let bytes = area.as_slice_ptr();
    // SAFETY: `as_slice_ptr` covers exactly the live, readable and writable anonymous mapping the
    // area owns (zero-initialised by the kernel, unmapped only when `area` drops, which happens
    // after the slice is gone). The area was created above and not shared, registered or
    // borrowed elsewhere, so this slice is the only reference into the mapping until `write`
    // returns.
    write(unsafe { &mut *bytes.as_ptr() });
    Ok(area)
}
