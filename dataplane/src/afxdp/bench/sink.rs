//! [`XdpSink`]: loads `ofan_sink` (count per CPU, drop) and reads its counters: IPv4 frames per
//! RX queue, and every other frame apart.
//!
//! The program and map names are those of `ebpf/programs/src/sink.rs`.
#![forbid(unsafe_code)]

use aya::{
    maps::{MapData, MapError, PerCpuArray},
    programs::{xdp::XdpLinkId, ProgramError, Xdp},
    Ebpf, EbpfError,
};

use ofan_ebpf_common::{MAX_QUEUES, SINK_OTHER_SLOT};

use crate::afxdp::steer::{XdpMode, EBPF_OBJECT};

/// Kernel name of the sink program.
pub const SINK_PROGRAM: &str = "ofan_sink";
/// Name of its per-CPU counter array (slots: IPv4 frames per RX queue, then other frames).
pub const SINK_MAP: &str = "SINK";

/// What the sink has counted so far, summed over the CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkCount {
    /// IPv4 frames by the RX queue they arrived on (the last entry also counts higher queues).
    pub per_queue: [u64; MAX_QUEUES as usize],
    /// Every other frame (ARP, IPv6: a forwarder's own control traffic).
    pub other: u64,
}

impl SinkCount {
    /// IPv4 frames on every queue: the benchmark's frames.
    pub fn ipv4(&self) -> u64 {
        self.per_queue.iter().sum()
    }
}

/// What went wrong while loading, attaching or reading `ofan_sink`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The embedded object did not parse, or its maps could not be created.
    #[error("loading the embedded eBPF object (maps and programs)")]
    Object(#[source] Box<EbpfError>),
    /// The object lacks the program or the map (a build mismatch).
    #[error("the eBPF object has no `{SINK_PROGRAM}` program or `{SINK_MAP}` map")]
    Missing,
    /// The kernel refused the program, or attaching it failed.
    #[error("loading or attaching `{SINK_PROGRAM}` (interface `{interface}`, {mode} mode)")]
    Program {
        /// The interface, empty when loading.
        interface: String,
        /// The mode.
        mode: XdpMode,
        /// aya's error, with the errno.
        #[source]
        source: ProgramError,
    },
    /// The counter could not be read.
    #[error("reading map `{SINK_MAP}`")]
    Read(#[source] MapError),
}

/// The loaded `ofan_sink`. Dropping it detaches it everywhere.
pub struct XdpSink {
    ebpf: Ebpf,
    mode: XdpMode,
    counters: PerCpuArray<MapData, u64>,
    links: Vec<(String, XdpLinkId)>,
}

impl std::fmt::Debug for XdpSink {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("XdpSink")
            .field("mode", &self.mode)
            .field("attached", &self.links)
            .finish_non_exhaustive()
    }
}

impl XdpSink {
    /// Loads `ofan_sink` and its counter; attaches nowhere yet.
    ///
    /// # Errors
    /// [`SinkError::Object`], [`SinkError::Missing`], [`SinkError::Program`].
    pub fn load(mode: XdpMode) -> Result<Self, SinkError> {
        let mut ebpf =
            Ebpf::load(EBPF_OBJECT).map_err(|error| SinkError::Object(Box::new(error)))?;
        program(&mut ebpf)?
            .load()
            .map_err(|source| SinkError::Program {
                interface: String::new(),
                mode,
                source,
            })?;
        let counters = ebpf
            .take_map(SINK_MAP)
            .and_then(|map| PerCpuArray::try_from(map).ok())
            .ok_or(SinkError::Missing)?;
        Ok(Self {
            ebpf,
            mode,
            counters,
            links: Vec::new(),
        })
    }

    /// Counts and drops every frame arriving on `interface`.
    ///
    /// # Errors
    /// [`SinkError::Program`] (for example when another XDP program is attached there).
    pub fn attach(&mut self, interface: &str) -> Result<(), SinkError> {
        if self.links.iter().any(|(attached, _)| attached == interface) {
            return Ok(());
        }
        let mode = self.mode;
        let link = program(&mut self.ebpf)?
            .attach(interface, mode.to_aya())
            .map_err(|source| SinkError::Program {
                interface: interface.to_owned(),
                mode,
                source,
            })?;
        self.links.push((interface.to_owned(), link));
        Ok(())
    }

    /// What it counted so far, summed over the CPUs.
    ///
    /// # Errors
    /// [`SinkError::Read`].
    pub fn count(&self) -> Result<SinkCount, SinkError> {
        let slot = |index: u32| -> Result<u64, SinkError> {
            let per_cpu = self.counters.get(&index, 0).map_err(SinkError::Read)?;
            Ok(per_cpu.iter().sum())
        };
        let mut count = SinkCount {
            other: slot(SINK_OTHER_SLOT)?,
            ..SinkCount::default()
        };
        for (queue, frames) in (0..).zip(&mut count.per_queue) {
            *frames = slot(queue)?;
        }
        Ok(count)
    }
}

fn program(ebpf: &mut Ebpf) -> Result<&mut Xdp, SinkError> {
    ebpf.program_mut(SINK_PROGRAM)
        .and_then(|program| program.try_into().ok())
        .ok_or(SinkError::Missing)
}
