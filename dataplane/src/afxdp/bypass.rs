//! Bypasses: a second way in and out of a port, beside its AF_XDP socket, that carries some of
//! the port's frames. The lab's shared-memory host links (`ofan-hostlink`, plugged in by
//! `ofan-switch group --host-links`) are one; the data path knows a bypass only through
//! [`Bypass`].
//!
//! The worker that owns the port reads the bypass's inputs at every pass, a batch from each,
//! and decides their frames as if the port's RX ring had delivered them; it offers the bypass
//! each frame the port transmits (single-frame packets only, while the bypass says it takes
//! any: [`Bypass::diverting`]), and the bypass takes it or leaves it to the TX ring. Before the
//! worker's thread sleeps it tells the bypass, which wakes it through a descriptor the thread
//! watches. Which frames a bypass takes, where they go and how they come back is its own
//! business.
//!
//! A port's bypass is opened when the runtime starts ([`OpenBypass`], given by port in
//! [`RuntimeConfig::bypasses`](super::RuntimeConfig::bypasses)), once the port's MAC and the
//! UMEM's frame size are known, and is then owned by the worker of the port's pipe.

use std::fmt;
use std::os::fd::BorrowedFd;

use crate::wire::MacAddr;

/// What came out of one of a bypass's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Nothing waits.
    Empty,
    /// A frame of this many bytes, copied out.
    Frame(usize),
    /// A frame that cannot be read (longer than the buffer, or than the bypass carries):
    /// skipped, counted as a bad descriptor.
    Malformed,
}

/// What a bypass did with a frame offered on transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Not one it carries (or too large for it): the frame goes to the TX ring.
    Passed,
    /// Taken: copied into the bypass; the worker frees the frame.
    Taken,
    /// One it carries, but lost (its consumer fell behind, as a link's queue would drop it):
    /// counted in the port's bypass drops; the worker frees the frame.
    Lost,
}

/// A port's bypass, as the worker that owns the port uses it. Called on the worker's hot path:
/// no allocation, lock or system call per frame (a system call to wake a sleeping consumer is
/// the exception a ring's wake-up makes).
pub trait Bypass: Send + fmt::Debug {
    /// How many inputs it has: the worker reads a batch from each in turn at every pass.
    fn inputs(&self) -> usize;

    /// Whether frames wait in input `input` (asked at every pass and before a sleep).
    fn pending(&self, input: usize) -> bool;

    /// Copies the oldest frame of input `input` into `out`.
    fn take(&self, input: usize, out: &mut [u8]) -> Take;

    /// Whether it may take frames the port transmits now; asked once per transmit pass
    /// (`false`: the pass offers it none, and the frames go to the TX ring as on a port without
    /// a bypass).
    fn diverting(&self) -> bool;

    /// Offers a frame the port transmits (in a pass for which [`Self::diverting`] said yes).
    fn offer(&self, frame: &[u8]) -> Offer;

    /// The worker's thread is about to sleep (`true`: a frame coming in then writes to
    /// [`Self::wake_fd`]; the worker looks at [`Self::pending`] once more after this), or runs
    /// again (`false`: no wake-up needed).
    fn set_sleeping(&self, sleeping: bool);

    /// The descriptor whose readability means that frames came in while the thread slept.
    fn wake_fd(&self) -> BorrowedFd<'_>;

    /// Clears [`Self::wake_fd`] after a wake-up.
    fn clear_wake(&self);
}

/// Why a port's bypass could not be opened (its own error, shown as it is).
pub type BypassError = Box<dyn std::error::Error + Send + Sync>;

/// The port a bypass is opened for.
#[derive(Debug, Clone, Copy)]
pub struct BypassPort<'a> {
    /// Its interface.
    pub name: &'a str,
    /// Its MAC, from the forwarding table: where the frames a bypass brings in are addressed.
    pub mac: MacAddr,
    /// The UMEM's frame size, bytes: the largest frame a bypass's input may bring in (with the
    /// headroom the frame needs), and the largest the worker offers it.
    pub frame_size: u32,
}

/// Opens a port's bypass when the runtime starts.
pub trait OpenBypass: Send + Sync + fmt::Debug {
    /// The bypass of `port`.
    ///
    /// # Errors
    /// Why it cannot be opened: the runtime then does not start
    /// ([`RuntimeError::Bypass`](super::RuntimeError::Bypass)).
    fn open(&self, port: &BypassPort<'_>) -> Result<Box<dyn Bypass>, BypassError>;
}
