//! [`LiveGen`]: the kernel's XDP live-frames mode as a traffic generator.
//!
//! `BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES` (Linux ≥ 5.18) runs an XDP program `repeat`
//! times on copies of one frame, in batches of up to 256, as if each copy had arrived on
//! `ingress_ifindex`, and then carries out what the program returned. `ofan_gen` (see
//! `ebpf/programs/src/gen.rs`) sets each copy's UDP source port to the next flow's and returns
//! `XDP_TX`, which this mode turns into a redirect out of the interface. On veth the peer then
//! receives an `xdp_frame` straight into its XDP receive ring: no skb, no AF_XDP copy-mode
//! transmit, about a tenth of the generator CPU's work per frame of [`super::gen::TrafficGen`].
//!
//! The peer must be ready for XDP frames (an XDP program attached, or GRO on); frames it cannot
//! take (ring full, no program) are dropped by the kernel and not reported to the caller, so
//! what the generator ran is an upper bound of what it offered. veth counts the frames it
//! accepted per transmit queue (`ethtool -S`: `tx_queue_<n>_xdp_xmit`, and `…_errors` for the
//! others).
//!
//! The program runs on the calling thread's CPU (pin it), in calls of [`LiveConfig::chunk`]
//! frames, so a stop request is noticed within one call.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use aya::{
    maps::{Array, Map, MapData, MapError, PerCpuArray},
    programs::{ProgramError, TestRun, TestRunAttrs, TestRunOptions, Xdp},
    Ebpf, EbpfError,
};
use ofan_ebpf_common::{GenSettings, GEN_COUNT_MAP, GEN_HEAD_LEN, GEN_PROGRAM, GEN_SETTINGS_MAP};

use super::frame::{FrameError, UdpFlows};
use crate::afxdp::steer::EBPF_OBJECT;
use crate::afxdp::sys as afxdp_sys;

/// Largest batch live-frames mode accepts (the kernel's `TEST_XDP_MAX_BATCH`).
pub const MAX_BATCH: u32 = 256;

/// How to run a live-frames generator.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// Interface the frames leave by (`ingress_ifindex` of the runs, queue 0).
    pub interface: String,
    /// Frames per `BPF_PROG_RUN` call: the stop flag is looked at between calls. Each call
    /// sets up and tears down a page pool, which took ~20 ms here (an RCU grace period on a
    /// busy machine), so calls must be long: 2²⁰ frames ≈ 0.3–1 s.
    pub chunk: u32,
    /// Frames the kernel runs, then transmits at once (1..=[`MAX_BATCH`]; 64 is NAPI's batch and
    /// fits a veth peer's 256-frame XDP ring).
    pub batch_size: u32,
    /// Frames per second to send at most, or `None` for as fast as the CPU allows. Paced in the
    /// program, frame by frame: copies that come too early are dropped at once (the CPU still
    /// spins at full speed).
    pub rate: Option<f64>,
}

impl LiveConfig {
    /// Chunks of 2²⁰ frames in batches of 64 out of `interface`, unpaced.
    pub fn new(interface: impl Into<String>) -> Self {
        Self {
            interface: interface.into(),
            chunk: 1 << 20,
            batch_size: 64,
            rate: None,
        }
    }
}

/// Why a live-frames generator could not be set up or stopped running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    /// Bad configuration.
    #[error("invalid generator configuration: {0}")]
    Config(String),
    /// The frames could not be built.
    #[error("building the generator's frames")]
    Frames(#[from] FrameError),
    /// No interface of that name in this network namespace.
    #[error("no interface named `{interface}` in this network namespace")]
    UnknownInterface {
        /// The name given.
        interface: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The embedded object did not parse, or its maps could not be created.
    #[error("loading the embedded eBPF object (maps and programs)")]
    Object(#[source] Box<EbpfError>),
    /// The object lacks the program or a map (a build mismatch).
    #[error(
        "the eBPF object has no `{GEN_PROGRAM}` program or `{GEN_SETTINGS_MAP}`/`{GEN_COUNT_MAP}` map"
    )]
    Missing,
    /// A map could not be written or read.
    #[error("accessing map `{map}`")]
    Map {
        /// The map.
        map: &'static str,
        /// aya's error.
        #[source]
        source: MapError,
    },
    /// The kernel refused to load or to run the program (live-frames mode needs Linux ≥ 5.18).
    #[error("{step} `{GEN_PROGRAM}` (interface `{interface}`)")]
    Program {
        /// `loading` or `running` (`BPF_PROG_RUN`).
        step: &'static str,
        /// The interface.
        interface: String,
        /// aya's error, with the errno.
        #[source]
        source: ProgramError,
    },
    /// The kernel loads the program but will not run it in live-frames mode (EPERM or
    /// EOPNOTSUPP on the first frame): a kernel before 5.18, or a sandbox that denies it.
    #[error(
        "the kernel refuses XDP live frames (BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES) on \
         `{interface}`: it needs Linux 5.18 or later, and some sandboxes deny it; an AF_XDP \
         socket (`--gen afxdp`) sends instead"
    )]
    Refused {
        /// The interface.
        interface: String,
        /// aya's error, with the errno.
        #[source]
        source: ProgramError,
    },
}

/// What a live-frames generator did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveReport {
    /// Frames the program ran on and transmitted (`XDP_TX`).
    pub frames: u64,
    /// `BPF_PROG_RUN` calls.
    pub calls: u64,
}

/// `ofan_gen`, loaded, with its flows set and its frame prebuilt.
pub struct LiveGen {
    ebpf: Ebpf,
    interface: String,
    frame: Vec<u8>,
    /// `struct xdp_md` as `BPF_PROG_RUN` takes it in `ctx_in`.
    context: [u8; XDP_MD_LEN],
    counts: PerCpuArray<MapData, u64>,
    /// Kernel id of the count map, for [`LiveGen::counter`].
    counts_id: u32,
    chunk: u32,
    batch_size: u32,
}

/// Another handle on a generator's frame count, for another thread to read while
/// [`LiveGen::run`] runs: exact at any moment, where `run`'s `sent` is updated once per call.
pub struct LiveCounter(PerCpuArray<MapData, u64>);

impl std::fmt::Debug for LiveCounter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LiveCounter")
            .finish_non_exhaustive()
    }
}

impl LiveCounter {
    /// Frames the program has transmitted so far, summed over the CPUs.
    ///
    /// # Errors
    /// [`LiveError::Map`].
    pub fn frames(&self) -> Result<u64, LiveError> {
        sum_counts(&self.0)
    }
}

impl std::fmt::Debug for LiveGen {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LiveGen")
            .field("interface", &self.interface)
            .field("frame_len", &self.frame.len())
            .field("chunk", &self.chunk)
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

/// Size of `struct xdp_md`: `data`, `data_end`, `data_meta`, `ingress_ifindex`,
/// `rx_queue_index`, `egress_ifindex`, six `u32`s.
const XDP_MD_LEN: usize = 24;

/// The `ctx_in` of a live run: a frame of `frame_len` bytes at offset 0 (`data` = 0, `data_end`
/// = length, no metadata), arriving on queue 0 of `ifindex`.
fn xdp_md(frame_len: u32, ifindex: u32) -> [u8; XDP_MD_LEN] {
    let fields = [0, frame_len, 0, ifindex, 0, 0];
    let mut bytes = [0u8; XDP_MD_LEN];
    for (chunk, field) in bytes.chunks_exact_mut(4).zip(fields) {
        chunk.copy_from_slice(&field.to_ne_bytes());
    }
    bytes
}

impl LiveGen {
    /// Builds flow 0's frame of `udp` (checking `flows` against it), loads `ofan_gen` and tells
    /// it to cycle through `flows` source ports from `udp.first_src_port`.
    ///
    /// # Errors
    /// [`LiveError`] naming what failed.
    pub fn open(config: &LiveConfig, udp: &UdpFlows, flows: u32) -> Result<Self, LiveError> {
        if !(1..=MAX_BATCH).contains(&config.batch_size) {
            return Err(LiveError::Config(format!(
                "batch size {} must be 1 to {MAX_BATCH}",
                config.batch_size
            )));
        }
        if config
            .rate
            .is_some_and(|rate| !(rate.is_finite() && rate > 0.0))
        {
            return Err(LiveError::Config(
                "the rate must be a positive number".into(),
            ));
        }
        if config.chunk == 0 {
            return Err(LiveError::Config("chunk must be at least 1 frame".into()));
        }
        if flows == 0 {
            return Err(LiveError::Config("at least one flow".into()));
        }
        let frame = udp.frames(flows)?.swap_remove(0);
        let ifindex = afxdp_sys::ifindex(&config.interface).map_err(|source| {
            LiveError::UnknownInterface {
                interface: config.interface.clone(),
                source,
            }
        })?;
        let mut ebpf =
            Ebpf::load(EBPF_OBJECT).map_err(|error| LiveError::Object(Box::new(error)))?;
        program(&mut ebpf)?
            .load()
            .map_err(|source| LiveError::Program {
                step: "loading",
                interface: config.interface.clone(),
                source,
            })?;
        let mut settings: Array<_, GenSettings> = ebpf
            .map_mut(GEN_SETTINGS_MAP)
            .and_then(|map| Array::try_from(map).ok())
            .ok_or(LiveError::Missing)?;
        settings
            .set(
                0,
                GenSettings {
                    first_src_port: u32::from(udp.first_src_port),
                    flows,
                    gap_ns: config
                        .rate
                        .map_or(0, |rate| (1e9 / rate).round().max(1.0) as u64),
                    head: frame[..GEN_HEAD_LEN].try_into().map_err(|_| {
                        LiveError::Config("the frame is shorter than its headers".into())
                    })?,
                    reserved: [0; 6],
                },
                0,
            )
            .map_err(|source| LiveError::Map {
                map: GEN_SETTINGS_MAP,
                source,
            })?;
        let map_error = |source| LiveError::Map {
            map: GEN_COUNT_MAP,
            source,
        };
        let counts_id = match ebpf.map(GEN_COUNT_MAP) {
            Some(Map::PerCpuArray(data)) => data.info().map_err(map_error)?.id(),
            _ => return Err(LiveError::Missing),
        };
        let counts = ebpf
            .take_map(GEN_COUNT_MAP)
            .and_then(|map| PerCpuArray::try_from(map).ok())
            .ok_or(LiveError::Missing)?;
        let mut generator = Self {
            ebpf,
            interface: config.interface.clone(),
            context: xdp_md(frame.len() as u32, ifindex),
            frame,
            counts,
            counts_id,
            chunk: config.chunk,
            batch_size: config.batch_size,
        };
        generator.probe()?;
        Ok(generator)
    }

    /// Sends one frame, so that a kernel that will not run live frames says so at once (a
    /// [`LiveError::Refused`]) rather than at the first chunk, after the generator said it
    /// was ready. The frame counts like every other.
    fn probe(&mut self) -> Result<(), LiveError> {
        let Self {
            ebpf,
            interface,
            frame,
            context,
            ..
        } = self;
        let options = TestRunOptions {
            data_in: Some(frame),
            ctx_in: Some(context),
            repeat: 1,
            attrs: TestRunAttrs::new().xdp_live_frames(1),
            ..TestRunOptions::new()
        };
        match program(ebpf)?.test_run(options) {
            Ok(_) => Ok(()),
            Err(ProgramError::SyscallError(error))
                if matches!(
                    error.io_error.raw_os_error(),
                    Some(libc::EPERM | libc::EOPNOTSUPP)
                ) =>
            {
                Err(LiveError::Refused {
                    interface: interface.clone(),
                    source: ProgramError::SyscallError(error),
                })
            }
            Err(source) => Err(LiveError::Program {
                step: "running",
                interface: interface.clone(),
                source,
            }),
        }
    }

    /// Frames the program has transmitted so far, summed over the CPUs.
    ///
    /// # Errors
    /// [`LiveError::Map`].
    pub fn frames(&self) -> Result<u64, LiveError> {
        sum_counts(&self.counts)
    }

    /// A second handle on the frame count (needs the privilege to open maps by id, as root).
    ///
    /// # Errors
    /// [`LiveError::Map`] when the map cannot be opened.
    pub fn counter(&self) -> Result<LiveCounter, LiveError> {
        let map_error = |source| LiveError::Map {
            map: GEN_COUNT_MAP,
            source,
        };
        let data = MapData::from_id(self.counts_id).map_err(map_error)?;
        PerCpuArray::try_from(Map::PerCpuArray(data))
            .map(LiveCounter)
            .map_err(map_error)
    }

    /// Runs chunk after chunk until `stop` is set, storing the running frame count in `sent`
    /// after each.
    ///
    /// # Errors
    /// [`LiveError::Program`] when a run fails (other than by a signal, which is retried), and
    /// [`LiveError::Map`] when the count cannot be read.
    pub fn run(&mut self, stop: &AtomicBool, sent: &AtomicU64) -> Result<LiveReport, LiveError> {
        let mut report = LiveReport::default();
        let Self {
            ebpf,
            interface,
            frame,
            context,
            counts,
            chunk,
            batch_size,
            ..
        } = self;
        let program = program(ebpf)?;
        while !stop.load(Ordering::Relaxed) {
            let options = TestRunOptions {
                data_in: Some(frame),
                ctx_in: Some(context),
                repeat: *chunk,
                attrs: TestRunAttrs::new().xdp_live_frames(*batch_size),
                ..TestRunOptions::new()
            };
            match program.test_run(options) {
                Ok(_) => report.calls += 1,
                Err(ProgramError::SyscallError(error))
                    if error.io_error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(LiveError::Program {
                        step: "running",
                        interface: interface.clone(),
                        source,
                    })
                }
            }
            sent.store(sum_counts(counts)?, Ordering::Relaxed);
        }
        report.frames = sum_counts(counts)?;
        sent.store(report.frames, Ordering::Relaxed);
        Ok(report)
    }
}

fn sum_counts(counts: &PerCpuArray<MapData, u64>) -> Result<u64, LiveError> {
    let per_cpu = counts.get(&0, 0).map_err(|source| LiveError::Map {
        map: GEN_COUNT_MAP,
        source,
    })?;
    Ok(per_cpu.iter().sum())
}

fn program(ebpf: &mut Ebpf) -> Result<&mut Xdp, LiveError> {
    ebpf.program_mut(GEN_PROGRAM)
        .and_then(|program| program.try_into().ok())
        .ok_or(LiveError::Missing)
}

#[cfg(test)]
mod tests {
    use ofan_ebpf_common::udp_checksum_with_port;

    use super::*;

    fn udp(frame_size: u32) -> UdpFlows {
        super::super::frame::test_flows(frame_size)
    }

    /// What `ofan_gen` does to a frame: the new source port and the updated checksum.
    fn rewrite(frame: &mut [u8], new_port: u16) {
        let old_port = u16::from_be_bytes([frame[34], frame[35]]);
        let checksum = u16::from_be_bytes([frame[40], frame[41]]);
        let checksum = udp_checksum_with_port(checksum, old_port, new_port);
        frame[34..36].copy_from_slice(&new_port.to_be_bytes());
        frame[40..42].copy_from_slice(&checksum.to_be_bytes());
    }

    #[test]
    fn rewritten_frames_equal_the_prebuilt_ones_whatever_the_page_held() {
        // Live-frames mode may hand the program the original frame or one it rewrote before:
        // from any flow's frame, rewriting to any flow must give exactly that flow's frame.
        for frame_size in [64, 65, 66, 99, 128, 1518] {
            let flows = udp(frame_size).frames(256).unwrap();
            for (from, start) in flows.iter().enumerate().step_by(7) {
                for (to, expected) in flows.iter().enumerate() {
                    let mut frame = start.clone();
                    rewrite(&mut frame, 1024 + to as u16);
                    assert_eq!(&frame, expected, "size {frame_size}, flow {from} -> {to}");
                }
            }
        }
    }

    #[test]
    fn checksum_update_matches_a_fresh_checksum_at_the_edges() {
        // Every (old, new) pair over a sparse grid, against the from-scratch one's-complement sum
        // of a pseudo datagram holding just the port.
        let fresh = |rest: u16, port: u16| {
            let mut sum = u32::from(rest) + u32::from(port);
            sum = (sum & 0xffff) + (sum >> 16);
            match !(sum as u16) {
                0 => 0xffff,
                checksum => checksum,
            }
        };
        let values = [0u16, 1, 2, 0x7fff, 0x8000, 0xfffe, 0xffff, 1024, 1279];
        for &rest in &values {
            for &old in &values {
                for &new in &values {
                    let before = fresh(rest, old);
                    let after = udp_checksum_with_port(before, old, new);
                    // 0x0000 and 0xFFFF are the same one's-complement value: compare classes.
                    let class = |c: u16| if c == 0 { 0xffff } else { c };
                    assert_eq!(
                        class(after),
                        class(fresh(rest, new)),
                        "rest {rest:#x} old {old:#x} new {new:#x}"
                    );
                    assert_ne!(after, 0, "a computed checksum is never sent as 0");
                }
            }
        }
        assert_eq!(udp_checksum_with_port(0, 1, 2), 0, "no checksum stays none");
    }

    #[test]
    fn the_context_is_a_whole_frame_on_queue_0() {
        let context = xdp_md(60, 7);
        let field = |i: usize| u32::from_ne_bytes(context[4 * i..4 * i + 4].try_into().unwrap());
        assert_eq!((0..6).map(field).collect::<Vec<_>>(), [0, 60, 0, 7, 0, 0]);
    }
}
