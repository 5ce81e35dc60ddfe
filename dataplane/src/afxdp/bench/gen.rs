//! [`TrafficGen`]: a TX-only AF_XDP socket that sends prebuilt frames as fast as the kernel
//! takes them.
//!
//! Every frame is written into the UMEM once, before the socket binds; the send loop only moves
//! descriptors: completed frames go to the back of a FIFO and are sent again from its front, so
//! the flows take turns. In copy mode (the only mode veth offers) one `sendto` kick sends at
//! most 32 descriptors, so the loop reserves, commits and kicks 32 at a time.

use std::collections::VecDeque;
use std::io;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use xdpilone::{IfInfo, Socket, SocketConfig, UmemConfig};

use crate::afxdp::sys::{self as afxdp_sys, UmemArea};
use crate::afxdp::BindMode;

/// Descriptors per kick: what one copy-mode `sendto` sends.
const KICK_BATCH: u32 = 32;

/// How to open a generator.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Interface to send on.
    pub interface: String,
    /// Its TX queue to send on (a veth hands the frames to the same RX queue of its peer).
    pub queue: u32,
    /// TX and completion ring size (a power of two).
    pub ring_size: u32,
    /// Copy or zero-copy (`Auto`: zero-copy on devices, copy on virtual interfaces).
    pub bind_mode: BindMode,
}

/// Why a generator could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// Bad configuration or frames.
    #[error("invalid generator configuration: {0}")]
    Config(String),
    /// The UMEM could not be mapped or registered.
    #[error("cannot set up the generator's UMEM ({frames} frames): {source}")]
    Umem {
        /// Frames asked for.
        frames: u32,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// The socket could not be created, bound or mapped.
    #[error("cannot open the AF_XDP socket on `{interface}` ({step}): {source}")]
    Socket {
        /// Interface.
        interface: String,
        /// What failed.
        step: &'static str,
        /// Cause.
        #[source]
        source: io::Error,
    },
}

/// A bound TX-only socket and its UMEM of prebuilt frames.
pub struct TrafficGen {
    tx: xdpilone::RingTx,
    device: xdpilone::DeviceQueue,
    /// Descriptors of frames not in the kernel's hands, oldest first.
    idle: VecDeque<xdpilone::xdp::XdpDesc>,
    frames: u32,
    /// Length of every frame (one flow set has one size).
    frame_len: u32,
    ring_size: u32,
    _user: xdpilone::User,
    // Dropped after the socket and rings above (fields drop in declaration order).
    _umem: xdpilone::Umem,
    _area: UmemArea,
}

impl std::fmt::Debug for TrafficGen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficGen")
            .field("frames", &self.frames)
            .field("ring_size", &self.ring_size)
            .finish_non_exhaustive()
    }
}

/// What a generator did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenReport {
    /// Frames the kernel took from the TX ring (completed).
    pub completed: u64,
    /// `sendto` kicks.
    pub kicks: u64,
}

impl TrafficGen {
    /// Writes `frames` (one flow set: all of one size) into a new UMEM (each frame several times over, so the TX and completion
    /// rings can be kept full) and binds a TX-only socket on queue 0 of the interface.
    ///
    /// # Errors
    /// [`GenError`] naming the step that failed.
    pub fn open(config: &GenConfig, frames: &[Vec<u8>]) -> Result<Self, GenError> {
        const FRAME_SIZE: u32 = 2048;
        if frames.is_empty() {
            return Err(GenError::Config("no frames to send".into()));
        }
        if let Some(long) = frames
            .iter()
            .find(|f| f.len() > (FRAME_SIZE - 256) as usize)
        {
            return Err(GenError::Config(format!(
                "a frame of {} bytes does not fit a {FRAME_SIZE}-byte UMEM frame in copy mode",
                long.len()
            )));
        }
        let frame_len = frames[0].len() as u32;
        if frames.iter().any(|f| f.len() as u32 != frame_len) {
            return Err(GenError::Config(
                "frames of one flow set must have one size".into(),
            ));
        }
        if !config.ring_size.is_power_of_two() || !(64..=16384).contains(&config.ring_size) {
            return Err(GenError::Config(format!(
                "ring size {} must be a power of two from 64 to 16384",
                config.ring_size
            )));
        }
        // Twice the ring, rounded up to whole copies of the flow set: the ring stays full
        // while completions come back, and the flows take turns evenly.
        let copies = (2 * config.ring_size).div_ceil(frames.len() as u32).max(1);
        let umem_frames = copies * frames.len() as u32;
        let area = UmemArea::new_with(umem_frames, FRAME_SIZE, |bytes| {
            for (slot, chunk) in bytes.chunks_exact_mut(FRAME_SIZE as usize).enumerate() {
                let frame = &frames[slot % frames.len()];
                chunk[..frame.len()].copy_from_slice(frame);
            }
        })
        .map_err(|source| GenError::Umem {
            frames: umem_frames,
            source,
        })?;
        let umem = afxdp_sys::register_umem(
            &area,
            UmemConfig {
                fill_size: config.ring_size,
                complete_size: config.ring_size,
                frame_size: FRAME_SIZE,
                headroom: 0,
                flags: 0,
            },
        )
        .map_err(|e| GenError::Umem {
            frames: umem_frames,
            source: errno(e),
        })?;

        let fail = |step: &'static str| {
            let interface = config.interface.clone();
            move |e: xdpilone::Errno| GenError::Socket {
                interface,
                step,
                source: errno(e),
            }
        };
        let name = std::ffi::CString::new(config.interface.as_str())
            .map_err(|_| GenError::Config("interface name has a NUL".into()))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name).map_err(fail("look up interface"))?;
        info.set_queue(config.queue);
        let socket = Socket::with_shared(&info, &umem).map_err(fail("create socket"))?;
        // Its descriptor is the UMEM's too: a process the generator's process starts must not
        // hold them (see `set_close_on_exec`).
        afxdp_sys::set_close_on_exec(socket.as_raw_fd()).map_err(|source| GenError::Socket {
            interface: config.interface.clone(),
            step: "close on exec",
            source,
        })?;
        let device = umem.fq_cq(&socket).map_err(fail("fill/completion rings"))?;
        let mode = match config.bind_mode.resolve(&config.interface) {
            BindMode::ZeroCopy => SocketConfig::XDP_BIND_ZEROCOPY,
            _ => SocketConfig::XDP_BIND_COPY,
        };
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: None,
                    tx_size: NonZeroU32::new(config.ring_size),
                    bind_flags: mode | SocketConfig::XDP_BIND_NEED_WAKEUP,
                },
            )
            .map_err(fail("tx ring"))?;
        umem.bind(&user).map_err(fail("bind"))?;
        let tx = user.map_tx().map_err(fail("map tx ring"))?;
        let idle = (0..umem_frames)
            .map(|slot| xdpilone::xdp::XdpDesc {
                addr: u64::from(slot) * u64::from(FRAME_SIZE),
                len: frame_len,
                options: 0,
            })
            .collect();
        Ok(Self {
            tx,
            device,
            idle,
            frames: umem_frames,
            frame_len,
            ring_size: config.ring_size,
            _user: user,
            _umem: umem,
            _area: area,
        })
    }

    /// Sends until `stop` is set, adding every completed frame to `sent` as it goes.
    pub fn run(&mut self, stop: &AtomicBool, sent: &AtomicU64) -> GenReport {
        let mut report = GenReport::default();
        while !stop.load(Ordering::Relaxed) {
            let completed = self.reclaim();
            if completed > 0 {
                report.completed += u64::from(completed);
                sent.store(report.completed, Ordering::Relaxed);
            }
            let want = (self.idle.len() as u32).min(KICK_BATCH);
            if want > 0 {
                let mut writer = self.tx.transmit(want);
                let reserved = writer.capacity() as usize;
                let inserted = writer.insert(self.idle.drain(..reserved)) as usize;
                debug_assert_eq!(inserted, reserved, "reserved TX slots are guaranteed");
                writer.commit();
            }
            if self.tx.pending() > 0 {
                self.tx.wake();
                report.kicks += 1;
            }
        }
        report.completed += u64::from(self.reclaim());
        sent.store(report.completed, Ordering::Relaxed);
        report
    }

    /// Moves completed frames to the back of the idle FIFO; returns how many.
    fn reclaim(&mut self) -> u32 {
        let mut reader = self.device.complete(self.ring_size);
        let mut count = 0;
        while let Some(addr) = reader.read() {
            self.idle.push_back(xdpilone::xdp::XdpDesc {
                addr,
                len: self.frame_len,
                options: 0,
            });
            count += 1;
        }
        reader.release();
        count
    }
}

fn errno(error: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(error.get_raw())
}
