//! `ofan_redirect`: plain `XDP_REDIRECT` from one interface to another through a devmap, no user
//! space involved — the ceiling a forwarding benchmark compares the AF_XDP data path against.
//!
//! Frames that XDP redirects *into* a veth vanish unless the far end has an XDP program (or GRO)
//! on it; a benchmark attaches one there (see `AFXDP-NOTES.md`).
#![forbid(unsafe_code)]

use aya::{
    maps::{xdp::XdpMapError, DevMapHash, MapData},
    programs::{xdp::XdpLinkId, ProgramError, Xdp},
    Ebpf, EbpfError,
};
use ofan_ebpf_common::{REDIRECT_MAP, REDIRECT_PROGRAM};

use super::steer::{XdpMode, EBPF_OBJECT};

/// What went wrong while loading or wiring `ofan_redirect`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectError {
    /// The embedded object did not parse, or its maps could not be created.
    #[error("loading the embedded eBPF object (maps and programs)")]
    Object(#[source] Box<EbpfError>),
    /// The object lacks the program or the map (a build mismatch).
    #[error("the eBPF object has no `{REDIRECT_PROGRAM}` program or `{REDIRECT_MAP}` map")]
    Missing,
    /// The kernel refused the program, or attaching it failed.
    #[error("loading or attaching `{REDIRECT_PROGRAM}` (interface `{interface}`, {mode} mode)")]
    Program {
        /// The interface, empty when loading.
        interface: String,
        /// The mode.
        mode: XdpMode,
        /// aya's error, with the errno.
        #[source]
        source: ProgramError,
    },
    /// No interface of that name in this network namespace.
    #[error("no interface named `{interface}` in this network namespace")]
    UnknownInterface {
        /// The name given.
        interface: String,
    },
    /// The devmap refused the entry.
    #[error("adding `{from}` → `{to}` to map `{REDIRECT_MAP}`")]
    Map {
        /// Ingress interface.
        from: String,
        /// Egress interface.
        to: String,
        /// aya's error, with the errno.
        #[source]
        source: Box<XdpMapError>,
    },
}

/// The loaded `ofan_redirect` program and its devmap. Dropping it detaches everything.
pub struct XdpRedirect {
    ebpf: Ebpf,
    mode: XdpMode,
    devmap: DevMapHash<MapData>,
    links: Vec<(String, XdpLinkId)>,
}

impl std::fmt::Debug for XdpRedirect {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("XdpRedirect")
            .field("mode", &self.mode)
            .field("attached", &self.links)
            .finish_non_exhaustive()
    }
}

impl XdpRedirect {
    /// Loads `ofan_redirect` and its devmap; attaches nowhere yet.
    ///
    /// # Errors
    ///
    /// [`RedirectError::Object`], [`RedirectError::Missing`], [`RedirectError::Program`].
    pub fn load(mode: XdpMode) -> Result<Self, RedirectError> {
        let mut ebpf =
            Ebpf::load(EBPF_OBJECT).map_err(|error| RedirectError::Object(Box::new(error)))?;
        program(&mut ebpf)?
            .load()
            .map_err(|source| RedirectError::Program {
                interface: String::new(),
                mode,
                source,
            })?;
        let devmap = ebpf
            .take_map(REDIRECT_MAP)
            .and_then(|map| DevMapHash::try_from(map).ok())
            .ok_or(RedirectError::Missing)?;
        Ok(Self {
            ebpf,
            mode,
            devmap,
            links: Vec::new(),
        })
    }

    /// Redirects every frame arriving on `from` out of `to`, attaching to `from` if needed.
    ///
    /// # Errors
    ///
    /// [`RedirectError::UnknownInterface`], [`RedirectError::Map`], [`RedirectError::Program`]
    /// (for example when another XDP program is attached to `from`).
    pub fn forward(&mut self, from: &str, to: &str) -> Result<(), RedirectError> {
        let from_index = ifindex(from)?;
        let to_index = ifindex(to)?;
        self.devmap
            .insert(from_index, to_index, None, 0)
            .map_err(|source| RedirectError::Map {
                from: from.to_owned(),
                to: to.to_owned(),
                source: Box::new(source),
            })?;
        if self.links.iter().any(|(interface, _)| interface == from) {
            return Ok(());
        }
        let mode = self.mode;
        let link = program(&mut self.ebpf)?
            .attach(from, mode.to_aya())
            .map_err(|source| RedirectError::Program {
                interface: from.to_owned(),
                mode,
                source,
            })?;
        self.links.push((from.to_owned(), link));
        Ok(())
    }

    /// The kernel id of the loaded program.
    ///
    /// # Errors
    ///
    /// [`RedirectError::Missing`], [`RedirectError::Program`] if the kernel cannot say.
    pub fn program_id(&mut self) -> Result<u32, RedirectError> {
        let mode = self.mode;
        let info = program(&mut self.ebpf)?
            .info()
            .map_err(|source| RedirectError::Program {
                interface: String::new(),
                mode,
                source,
            })?;
        Ok(info.id())
    }
}

fn program(ebpf: &mut Ebpf) -> Result<&mut Xdp, RedirectError> {
    ebpf.program_mut(REDIRECT_PROGRAM)
        .and_then(|program| program.try_into().ok())
        .ok_or(RedirectError::Missing)
}

fn ifindex(interface: &str) -> Result<u32, RedirectError> {
    std::fs::read_to_string(format!("/sys/class/net/{interface}/ifindex"))
        .ok()
        .and_then(|index| index.trim().parse().ok())
        .ok_or_else(|| RedirectError::UnknownInterface {
            interface: interface.to_owned(),
        })
}
