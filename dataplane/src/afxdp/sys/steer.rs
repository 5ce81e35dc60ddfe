//! The raw system calls of the steering loader that aya does not offer: interface name ↔ index,
//! and finding and detaching a BPF link by program and interface. Every `unsafe` block of
//! [`crate::afxdp::steer`] lives here; its rtnetlink exchanges go through `ofan_netlink`.

use std::{
    ffi::{CStr, CString},
    io,
    mem::size_of,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
};

/// Index of the interface called `name` in the calling thread's network namespace.
pub(in crate::afxdp) fn if_nametoindex(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call; the function only
    // reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// Name of the interface with index `ifindex` in the calling thread's network namespace.
pub(in crate::afxdp) fn if_indextoname(ifindex: u32) -> Option<String> {
    let mut buffer = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buffer` has the IF_NAMESIZE bytes the function may write, including the NUL.
    let name = unsafe { libc::if_indextoname(ifindex, buffer.as_mut_ptr()) };
    if name.is_null() {
        return None;
    }
    // SAFETY: on success the function wrote a NUL-terminated string into `buffer`.
    let name = unsafe { CStr::from_ptr(buffer.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

// ---------------------------------------------------------------------------------------------
// bpf(2)

const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
const BPF_LINK_DETACH: libc::c_long = 34;
const BPF_LINK_TYPE_XDP: u32 = 6;

/// `union bpf_attr`, large enough for the commands used here, 8-byte aligned, zeroed.
#[repr(C, align(8))]
struct BpfAttr([u32; 36]);

fn bpf(command: libc::c_long, attr: &mut BpfAttr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zero-initialised, 8-byte aligned buffer of the size passed, laid out as
    // the `union bpf_attr` member of `command`; any pointer it carries (set by the callers) points
    // to a live buffer of the length given beside it. The kernel reads and writes only within it.
    let result = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            command,
            attr as *mut BpfAttr,
            size_of::<BpfAttr>() as u32,
        )
    };
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// `(type, id, prog_id, xdp.ifindex)` of `struct bpf_link_info`.
fn link_info(link: BorrowedFd<'_>) -> io::Result<(u32, u32, u32, u32)> {
    // type, id, prog_id, padding to the 8-byte aligned union, xdp.ifindex, padding.
    let mut info = [0u32; 6];
    let mut attr = BpfAttr([0; 36]);
    attr.0[0] = link.as_raw_fd() as u32; // bpf_fd
    attr.0[1] = size_of::<[u32; 6]>() as u32; // info_len
    let pointer = info.as_mut_ptr() as u64; // info (u64 at offset 8)
    attr.0[2] = pointer as u32;
    attr.0[3] = (pointer >> 32) as u32;
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok((info[0], info[1], info[2], info[4]))
}

fn link_fd_by_id(link_id: u32) -> io::Result<OwnedFd> {
    let mut attr = BpfAttr([0; 36]);
    attr.0[0] = link_id;
    let fd = bpf(BPF_LINK_GET_FD_BY_ID, &mut attr)?;
    // SAFETY: on success BPF_LINK_GET_FD_BY_ID returns a new file descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The BPF link that attaches program `program_id` to XDP on `ifindex`, if there is one.
///
/// Links are global but ifindexes are per network namespace: a program attached through links
/// to same-numbered interfaces of several namespaces would match more than once, which a
/// single switch process never does (it attaches one program per namespace).
pub(in crate::afxdp) fn find_xdp_link(
    program_id: u32,
    ifindex: u32,
) -> io::Result<Option<OwnedFd>> {
    let mut start_id = 0;
    loop {
        let mut attr = BpfAttr([0; 36]);
        attr.0[0] = start_id;
        match bpf(BPF_LINK_GET_NEXT_ID, &mut attr) {
            Ok(_) => {}
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(error) => return Err(error),
        }
        let link_id = attr.0[1]; // next_id
        start_id = link_id;
        let link = match link_fd_by_id(link_id) {
            Ok(link) => link,
            // Released between the two calls.
            Err(error) if error.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(error) => return Err(error),
        };
        let (link_type, _, link_program, link_ifindex) = link_info(link.as_fd())?;
        if link_type == BPF_LINK_TYPE_XDP && link_program == program_id && link_ifindex == ifindex {
            return Ok(Some(link));
        }
    }
}

/// Detaches the program of `link` from its hook; the link object itself stays, defunct.
pub(in crate::afxdp) fn link_detach(link: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = BpfAttr([0; 36]);
    attr.0[0] = link.as_raw_fd() as u32;
    bpf(BPF_LINK_DETACH, &mut attr).map(drop)
}
