//! The XDP steering layer: loads `ofan_steer` (built from `ebpf/programs` by `build.rs`),
//! attaches it to every port of the switch and keeps its maps.
//!
//! One program serves all ports. For each frame it looks up the ingress interface in `PORTS`
//! (ifindex → port) and either passes the frame to the kernel — ARP, IPv6 neighbour discovery,
//! BGP, traffic to the switch's own addresses ([`Steering::set_local_addrs`]), TTL or hop limit
//! ≤ 1, IPv4 options and fragments, multicast, IPv6 hop-by-hop, non-IP and malformed frames — or
//! redirects it into the AF_XDP socket registered for its (port, RX queue)
//! ([`Steering::register_socket`]); with no socket there the frame falls back to the kernel.
//! A port can be made to drop every frame it receives ([`Steering::set_port_drop`]): a link
//! that fails silently while its carrier stays up. Every frame increments exactly one counter
//! ([`StatIndex`]), read with [`Steering::counters`].
//!
//! # Stale and foreign programs
//!
//! Before attaching to an interface, [`Steering::attach`] looks at the XDP programs already
//! there. A program named `ofan_steer` (or `ofan_steer_sg`, `ofan_fast`) is taken to be left
//! over by an earlier run (for example one whose `Steering` was leaked, or a netlink attachment
//! that outlived its process) and is detached. Any other program is never touched: the attach fails with
//! [`SteerError::ForeignProgram`], naming the interface and the program. (A run killed with
//! `SIGKILL` usually leaves nothing: on kernels with BPF links, aya attaches through a link, which
//! the kernel releases with the process's last file descriptor.)
//!
//! # Example
//!
//! ```no_run
//! # use ofan_dataplane::afxdp::steer::{Steering, XdpMode, StatIndex};
//! let mut steering = Steering::load(XdpMode::Native)?;
//! steering.attach("sw0-p0", 0)?;
//! steering.set_local_addrs(&["10.0.0.1".parse().unwrap()])?;
//! // steering.register_socket(0, 0, user.as_raw_fd())?; // an xdpilone `User`, after bind
//! println!("{}", steering.counters()?.get(StatIndex::Redirected));
//! # Ok::<(), ofan_dataplane::afxdp::steer::SteerError>(())
//! ```
#![deny(unsafe_code)]

mod netlink;
use super::sys::steer as sys;

use std::{
    collections::HashSet,
    fmt, io,
    net::IpAddr,
    os::fd::{AsFd as _, AsRawFd},
};

use aya::{
    maps::{Array, HashMap, MapData, MapError, PerCpuArray, XskMap},
    programs::{loaded_programs, xdp::XdpLinkId, ProgramError, ProgramInfo, Xdp},
    Ebpf, EbpfError,
};
pub use ofan_ebpf_common::StatIndex;
use ofan_ebpf_common::{
    fast::FAST_PROGRAM, xsk_index, LocalV4, LocalV6, PortId, LOCAL_V4_MAP, LOCAL_V6_MAP, MAX_PORTS,
    MAX_QUEUES, PORTS_MAP, PORT_ARRAY_IFINDEXES, PORT_DROP_MAP, PORT_OF_IFINDEX_MAP, STATS_MAP,
    STEER_PROGRAM, STEER_SG_PROGRAM, XSKS_MAP,
};

use ofan_netlink::{XdpAttachMode, XdpProgram};

/// The eBPF object with `ofan_steer` and `ofan_redirect`, built by `build.rs`.
pub(crate) static EBPF_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/ofan-ebpf.o"));

/// Whether packets may span several buffers (`xdp.frags`), which decides the program loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Buffers {
    /// One buffer per packet: `ofan_steer`. A driver caps its ports' MTU to what a page holds
    /// (veth: 3506) while it is attached.
    Single,
    /// Packets of several buffers (jumbo frames): `ofan_steer_sg`, for sockets bound with
    /// `XDP_USE_SG`.
    Multi,
}

impl Buffers {
    /// The kernel name of the steering program for these buffers.
    pub fn program(self) -> &'static str {
        SteerProgram::Steer(self).name()
    }
}

/// Which of the object's steering programs a [`Steering`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SteerProgram {
    /// `ofan_steer`, or `ofan_steer_sg` for multi-buffer packets: data-path frames to the
    /// AF_XDP sockets.
    Steer(Buffers),
    /// `ofan_fast`: the same steering, then the XDP fast path ([`super::fast`]) forwards what it
    /// can itself (single-buffer packets only).
    Fast,
}

impl SteerProgram {
    /// The program's kernel name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Steer(Buffers::Single) => STEER_PROGRAM,
            Self::Steer(Buffers::Multi) => STEER_SG_PROGRAM,
            Self::Fast => FAST_PROGRAM,
        }
    }

    /// Whether a program of this name is one of these (a stale one may be replaced).
    fn is_ours(name: &str) -> bool {
        [STEER_PROGRAM, STEER_SG_PROGRAM, FAST_PROGRAM].contains(&name)
    }
}

/// Where the XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XdpMode {
    /// In the driver, before an skb exists (needs driver support; veth has it).
    Native,
    /// In the generic (skb) path: works on every interface, slower.
    Generic,
}

impl XdpMode {
    pub(crate) fn to_aya(self) -> aya::programs::XdpMode {
        match self {
            Self::Native => aya::programs::XdpMode::Driver,
            Self::Generic => aya::programs::XdpMode::Skb,
        }
    }
}

impl fmt::Display for XdpMode {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(match self {
            Self::Native => "native",
            Self::Generic => "generic",
        })
    }
}

/// What an attach error's errno usually means: `ERANGE` is the driver refusing a program
/// without multi-buffer support at the interface's MTU (veth checks its peer's: at most 3506
/// with 4 KiB pages), which the bare errno ("numerical result out of range") does not say.
fn attach_hint(error: &ProgramError) -> &'static str {
    match error {
        ProgramError::SyscallError(aya::sys::SyscallError { io_error, .. })
            if io_error.raw_os_error() == Some(libc::ERANGE) =>
        {
            " (an MTU is too large for an XDP program without multi-buffer support: veth takes \
             at most 3506 on either end with 4 KiB pages; ofan loads its multi-buffer program \
             when a port's own MTU is above 3506, so give both ends of the link the same MTU, or \
             lower it)"
        }
        _ => "",
    }
}

/// What went wrong while loading, attaching or configuring the steering program.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    /// The embedded object did not parse, or its maps could not be created.
    #[error("loading the embedded eBPF object (maps and programs)")]
    Object(#[source] Box<EbpfError>),
    /// The object lacks a program (a build mismatch).
    #[error("the eBPF object has no XDP program `{program}`")]
    MissingProgram {
        /// The program looked for.
        program: &'static str,
    },
    /// The object lacks a map or has it with another type (a build mismatch).
    #[error("map `{map}` of the eBPF object is missing or has an unexpected type")]
    Map {
        /// The map looked for.
        map: &'static str,
        /// The type mismatch, if the map exists.
        #[source]
        source: Option<MapError>,
    },
    /// The kernel refused the program (verifier, missing privileges).
    #[error("loading XDP program `{program}` into the kernel")]
    ProgramLoad {
        /// The program.
        program: &'static str,
        /// aya's error, with the errno and verifier log.
        #[source]
        source: ProgramError,
    },
    /// No interface of that name in this network namespace.
    #[error("no interface named `{interface}` in this network namespace")]
    UnknownInterface {
        /// The name given.
        interface: String,
    },
    /// No interface with that index in this network namespace.
    #[error("no interface with index {ifindex} in this network namespace")]
    UnknownIfindex {
        /// The index given.
        ifindex: u32,
    },
    /// The port number does not fit the maps.
    #[error("port {port} is out of range: the steering program serves ports 0..{MAX_PORTS}")]
    PortOutOfRange {
        /// The port given.
        port: u16,
    },
    /// The queue number does not fit the XSKMAP.
    #[error("queue {queue} is out of range: the XSKMAP holds queues 0..{MAX_QUEUES} of each port")]
    QueueOutOfRange {
        /// The queue given.
        queue: u32,
    },
    /// This `Steering` already serves the interface.
    #[error("interface `{interface}` is already attached, as port {port}")]
    AlreadyAttached {
        /// The interface.
        interface: String,
        /// Its port.
        port: u16,
    },
    /// Another interface already has the port number.
    #[error("port {port} is already attached to interface `{interface}`")]
    PortInUse {
        /// The port.
        port: u16,
        /// The interface that has it.
        interface: String,
    },
    /// Another program is attached to the interface; ofan leaves it alone.
    #[error(
        "interface `{interface}` has a foreign XDP program attached: `{program}` (id {id}, \
         {mode} mode); ofan only ever replaces its own `{STEER_PROGRAM}`, so detach it first \
         (e.g. `ip link set dev {interface} xdp off`)"
    )]
    ForeignProgram {
        /// The interface.
        interface: String,
        /// The kernel's name of the attached program (`?` if it could not be read).
        program: String,
        /// Its kernel id (as `bpftool prog show id` takes it).
        id: u32,
        /// native, generic or offload.
        mode: &'static str,
    },
    /// Asking the kernel which XDP programs the interface has failed.
    #[error("interface `{interface}`: querying its XDP programs over rtnetlink")]
    Query {
        /// The interface.
        interface: String,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// Detaching a stale `ofan_steer` failed.
    #[error("interface `{interface}`: detaching the stale `{STEER_PROGRAM}` (id {id}) of an earlier run")]
    StaleRemoval {
        /// The interface.
        interface: String,
        /// The stale program's kernel id.
        id: u32,
        /// The errno.
        #[source]
        source: io::Error,
    },
    /// Attaching failed (mode unsupported by the driver, MTU too large for non-frags XDP, …).
    #[error(
        "interface `{interface}`: attaching `{}` in {mode} mode{}",
        .program.name(),
        attach_hint(.source)
    )]
    Attach {
        /// The interface.
        interface: String,
        /// Which program.
        program: SteerProgram,
        /// The mode asked for.
        mode: XdpMode,
        /// aya's error, with the errno.
        #[source]
        source: ProgramError,
    },
    /// Detaching failed.
    #[error("interface `{interface}`: detaching the steering program")]
    Detach {
        /// The interface.
        interface: String,
        /// aya's error.
        #[source]
        source: ProgramError,
    },
    /// A map update or read failed.
    #[error("updating or reading map `{map}`")]
    MapUpdate {
        /// The map.
        map: &'static str,
        /// aya's error, with the errno.
        #[source]
        source: MapError,
    },
    /// The XSKMAP refused the socket (not an AF_XDP socket, closed fd, …).
    #[error("registering AF_XDP socket fd {fd} for port {port} queue {queue} in `{XSKS_MAP}`")]
    RegisterSocket {
        /// The port.
        port: u16,
        /// The RX queue.
        queue: u32,
        /// The file descriptor given.
        fd: i32,
        /// aya's error, with the errno.
        #[source]
        source: MapError,
    },
}

/// Totals of the steering program's counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteerStats {
    counts: [u64; StatIndex::COUNT as usize],
}

impl SteerStats {
    /// The total of one counter.
    pub fn get(&self, stat: StatIndex) -> u64 {
        self.counts[stat.index() as usize]
    }

    /// Every counter with its total, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (StatIndex, u64)> + '_ {
        StatIndex::ALL.iter().map(|&stat| (stat, self.get(stat)))
    }

    /// Frames seen by the program (every frame increments exactly one counter).
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl fmt::Display for SteerStats {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, (stat, count)) in self.iter().enumerate() {
            let separator = if position == 0 { "" } else { " " };
            write!(formatter, "{separator}{}={count}", stat.name())?;
        }
        Ok(())
    }
}

/// One interface the program is attached to.
#[derive(Debug)]
struct Attachment {
    interface: String,
    ifindex: u32,
    port: u16,
    link: XdpLinkId,
}

/// The loaded steering program, its maps and its attachments. Dropping it detaches everything.
pub struct Steering {
    ebpf: Ebpf,
    mode: XdpMode,
    program: SteerProgram,
    program_id: u32,
    ports: HashMap<MapData, u32, PortId>,
    port_of_ifindex: Array<MapData, u32>,
    local_v4: HashMap<MapData, LocalV4, u8>,
    local_v6: HashMap<MapData, LocalV6, u8>,
    xsks: XskMap<MapData>,
    stats: PerCpuArray<MapData, u64>,
    port_drop: Array<MapData, u32>,
    attachments: Vec<Attachment>,
}

impl fmt::Debug for Steering {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Steering")
            .field("mode", &self.mode)
            .field("program_id", &self.program_id)
            .field("attachments", &self.attachments)
            .finish_non_exhaustive()
    }
}

impl Steering {
    /// Loads `ofan_steer` into the kernel (verifier included) and creates its maps; attaches
    /// nowhere yet.
    ///
    /// # Errors
    ///
    /// [`SteerError::Object`], [`SteerError::ProgramLoad`] (not root, verifier), or
    /// [`SteerError::MissingProgram`] / [`SteerError::Map`] on a build mismatch.
    pub fn load(mode: XdpMode) -> Result<Self, SteerError> {
        Self::load_for(mode, Buffers::Single)
    }

    /// [`Steering::load`] with the program for `buffers`: `ofan_steer_sg` for multi-buffer
    /// packets.
    ///
    /// # Errors
    ///
    /// As [`Steering::load`].
    pub fn load_for(mode: XdpMode, buffers: Buffers) -> Result<Self, SteerError> {
        let ebpf = Ebpf::load(EBPF_OBJECT).map_err(|error| SteerError::Object(Box::new(error)))?;
        Self::load_program(ebpf, mode, SteerProgram::Steer(buffers))
    }

    /// Loads `ofan_fast` (steering and the XDP fast path) and creates its maps: the steering
    /// program and the fast path's tables, to be filled before it is attached
    /// ([`super::fast::FastPath::init`]).
    ///
    /// # Errors
    ///
    /// As [`Steering::load`]; [`SteerError::Map`] when a fast-path map is missing.
    pub fn load_fast(mode: XdpMode) -> Result<(Self, super::fast::FastPath), SteerError> {
        let mut ebpf =
            Ebpf::load(EBPF_OBJECT).map_err(|error| SteerError::Object(Box::new(error)))?;
        let fast = super::fast::FastPath::take_maps(&mut ebpf)?;
        let steering = Self::load_program(ebpf, mode, SteerProgram::Fast)?;
        Ok((steering, fast))
    }

    fn load_program(
        mut ebpf: Ebpf,
        mode: XdpMode,
        which: SteerProgram,
    ) -> Result<Self, SteerError> {
        let program = xdp_program(&mut ebpf, which)?;
        program.load().map_err(|source| SteerError::ProgramLoad {
            program: which.name(),
            source,
        })?;
        let program_id = program
            .info()
            .map_err(|source| SteerError::ProgramLoad {
                program: which.name(),
                source,
            })?
            .id();
        Ok(Self {
            ports: take_map(&mut ebpf, PORTS_MAP)?,
            port_of_ifindex: take_map(&mut ebpf, PORT_OF_IFINDEX_MAP)?,
            local_v4: take_map(&mut ebpf, LOCAL_V4_MAP)?,
            local_v6: take_map(&mut ebpf, LOCAL_V6_MAP)?,
            xsks: take_map(&mut ebpf, XSKS_MAP)?,
            stats: take_map(&mut ebpf, STATS_MAP)?,
            port_drop: take_map(&mut ebpf, PORT_DROP_MAP)?,
            ebpf,
            mode,
            program: which,
            program_id,
            attachments: Vec::new(),
        })
    }

    /// Runs the program once on `frame` as if it had arrived on RX queue `queue` of the
    /// interface `ingress` (`BPF_PROG_RUN`; nothing is sent or redirected): the XDP action it
    /// returns and the frame as it left it. It runs on the calling thread's CPU, with that CPU's
    /// per-CPU state — how tests hold the program's decisions against the data path's.
    ///
    /// # Errors
    /// [`SteerError::ProgramLoad`] with the kernel's refusal (for example an `ingress` that is
    /// not an interface of this namespace).
    pub fn run_once(
        &mut self,
        frame: &[u8],
        ingress: u32,
        queue: u32,
    ) -> Result<(u32, Vec<u8>), SteerError> {
        // `struct xdp_md`: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex.
        let fields = [0, frame.len() as u32, 0, ingress, queue, 0];
        let mut context = [0u8; 24];
        for (chunk, field) in context.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&field.to_ne_bytes());
        }
        let mut out = vec![0u8; frame.len() + 256];
        let which = self.program;
        let program = xdp_program(&mut self.ebpf, which)?;
        let result = aya::programs::TestRun::test_run(
            &*program,
            aya::programs::TestRunOptions {
                data_in: Some(frame),
                data_out: Some(&mut out),
                ctx_in: Some(&context),
                ..aya::programs::TestRunOptions::new()
            },
        )
        .map_err(|source| SteerError::ProgramLoad {
            program: which.name(),
            source,
        })?;
        out.truncate(result.data_size_out as usize);
        Ok((result.return_value, out))
    }

    /// The kernel id of the loaded program (as `ip -d link` and `bpftool` show it).
    pub fn program_id(&self) -> u32 {
        self.program_id
    }

    /// The mode every attachment uses.
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// Attaches the program to `interface` as switch port `port`, after detaching a stale
    /// `ofan_steer` of an earlier run from it.
    ///
    /// # Errors
    ///
    /// [`SteerError::ForeignProgram`] if another XDP program is attached (it is left alone);
    /// [`SteerError::UnknownInterface`], [`SteerError::PortOutOfRange`],
    /// [`SteerError::AlreadyAttached`], [`SteerError::PortInUse`], [`SteerError::Query`],
    /// [`SteerError::StaleRemoval`], [`SteerError::Attach`], [`SteerError::MapUpdate`].
    pub fn attach(&mut self, interface: &str, port: u16) -> Result<(), SteerError> {
        let ifindex =
            sys::if_nametoindex(interface).ok_or_else(|| SteerError::UnknownInterface {
                interface: interface.to_owned(),
            })?;
        self.attach_resolved(interface.to_owned(), ifindex, port)
    }

    /// [`Steering::attach`] by interface index.
    ///
    /// # Errors
    ///
    /// As [`Steering::attach`], with [`SteerError::UnknownIfindex`] for an unknown index.
    pub fn attach_ifindex(&mut self, ifindex: u32, port: u16) -> Result<(), SteerError> {
        let interface =
            sys::if_indextoname(ifindex).ok_or(SteerError::UnknownIfindex { ifindex })?;
        self.attach_resolved(interface, ifindex, port)
    }

    fn attach_resolved(
        &mut self,
        interface: String,
        ifindex: u32,
        port: u16,
    ) -> Result<(), SteerError> {
        if u32::from(port) >= MAX_PORTS {
            return Err(SteerError::PortOutOfRange { port });
        }
        if let Some(existing) = self.attachments.iter().find(|a| a.ifindex == ifindex) {
            return Err(SteerError::AlreadyAttached {
                interface,
                port: existing.port,
            });
        }
        if let Some(existing) = self.attachments.iter().find(|a| a.port == port) {
            return Err(SteerError::PortInUse {
                port,
                interface: existing.interface.clone(),
            });
        }
        self.remove_stale(&interface, ifindex)?;

        // The port is known before the first frame arrives.
        self.ports
            .insert(ifindex, PortId(u32::from(port)), 0)
            .map_err(|source| SteerError::MapUpdate {
                map: PORTS_MAP,
                source,
            })?;
        if ifindex < PORT_ARRAY_IFINDEXES {
            self.port_of_ifindex
                .set(ifindex, u32::from(port) + 1, 0)
                .map_err(|source| SteerError::MapUpdate {
                    map: PORT_OF_IFINDEX_MAP,
                    source,
                })?;
        }
        let (mode, which) = (self.mode, self.program);
        let attached = xdp_program(&mut self.ebpf, which).and_then(|program| {
            program
                .attach_to_if_index(ifindex, mode.to_aya())
                .map_err(|source| SteerError::Attach {
                    interface: interface.clone(),
                    program: which,
                    mode,
                    source,
                })
        });
        match attached {
            Ok(link) => {
                self.attachments.push(Attachment {
                    interface,
                    ifindex,
                    port,
                    link,
                });
                Ok(())
            }
            Err(error) => {
                self.forget_port(ifindex);
                Err(error)
            }
        }
    }

    /// Detaches stale `ofan_steer` programs from `ifindex`; refuses if any other program is there.
    fn remove_stale(&self, interface: &str, ifindex: u32) -> Result<(), SteerError> {
        let attached = netlink::xdp_programs(ifindex).map_err(|source| SteerError::Query {
            interface: interface.to_owned(),
            source,
        })?;
        // First make sure everything there is ours, then remove: never half-clean an interface.
        let mut stale = Vec::new();
        for XdpProgram { mode, id } in attached {
            let info = program_info(id);
            let name = info
                .as_ref()
                .and_then(ProgramInfo::name_as_str)
                .unwrap_or("?")
                .to_owned();
            if !SteerProgram::is_ours(&name) {
                return Err(SteerError::ForeignProgram {
                    interface: interface.to_owned(),
                    program: name,
                    id,
                    mode: mode.name(),
                });
            }
            stale.push((mode, id, info));
        }
        for (mode, id, info) in stale {
            remove_stale_program(ifindex, mode, id, info.as_ref()).map_err(|source| {
                SteerError::StaleRemoval {
                    interface: interface.to_owned(),
                    id,
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// Detaches the program from `interface` and forgets its port (its sockets stay registered).
    ///
    /// # Errors
    ///
    /// [`SteerError::UnknownInterface`] if this `Steering` is not attached to it;
    /// [`SteerError::Detach`].
    pub fn detach(&mut self, interface: &str) -> Result<(), SteerError> {
        let position = self
            .attachments
            .iter()
            .position(|a| a.interface == interface)
            .ok_or_else(|| SteerError::UnknownInterface {
                interface: interface.to_owned(),
            })?;
        let attachment = self.attachments.swap_remove(position);
        self.detach_one(attachment)
    }

    /// Detaches the program from every interface. Runs on drop as well.
    ///
    /// # Errors
    ///
    /// The first [`SteerError::Detach`]; the other interfaces are detached regardless.
    pub fn detach_all(&mut self) -> Result<(), SteerError> {
        let mut first_error = None;
        for attachment in std::mem::take(&mut self.attachments) {
            if let Err(error) = self.detach_one(attachment) {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn detach_one(&mut self, attachment: Attachment) -> Result<(), SteerError> {
        let Attachment {
            interface,
            ifindex,
            link,
            ..
        } = attachment;
        self.forget_port(ifindex);
        xdp_program(&mut self.ebpf, self.program)?
            .detach(link)
            .map_err(|source| SteerError::Detach { interface, source })
    }

    /// Removes `ifindex` from the port maps (best effort: the program no longer runs there).
    fn forget_port(&mut self, ifindex: u32) {
        let _ignored = self.ports.remove(&ifindex);
        if ifindex < PORT_ARRAY_IFINDEXES {
            let _ignored = self.port_of_ifindex.set(ifindex, 0, 0);
        }
    }

    /// The interfaces the program is attached to, with their ports.
    pub fn attached(&self) -> impl Iterator<Item = (&str, u16)> + '_ {
        self.attachments
            .iter()
            .map(|a| (a.interface.as_str(), a.port))
    }

    /// Makes `addresses` the switch's own addresses: frames to them go to the kernel.
    ///
    /// Replaces the previous set (addresses no longer listed are removed).
    ///
    /// # Errors
    ///
    /// [`SteerError::MapUpdate`], e.g. with more than 256 addresses of one family.
    pub fn set_local_addrs(&mut self, addresses: &[IpAddr]) -> Result<(), SteerError> {
        let mut v4 = HashSet::new();
        let mut v6 = HashSet::new();
        for address in addresses {
            match address {
                IpAddr::V4(address) => v4.insert(LocalV4(address.octets())),
                IpAddr::V6(address) => v6.insert(LocalV6(address.octets())),
            };
        }
        replace_set(&mut self.local_v4, LOCAL_V4_MAP, &v4)?;
        replace_set(&mut self.local_v6, LOCAL_V6_MAP, &v6)
    }

    /// Makes port `port` drop every frame it receives (`drop`), whatever it is — data, ARP, BGP,
    /// BFD — or forward and pass them again. Counted as [`StatIndex::DropBlackhole`]. The flag
    /// belongs to the port number and survives detaching and re-attaching it.
    ///
    /// # Errors
    ///
    /// [`SteerError::PortOutOfRange`], [`SteerError::MapUpdate`].
    pub fn set_port_drop(&mut self, port: u16, drop: bool) -> Result<(), SteerError> {
        if u32::from(port) >= MAX_PORTS {
            return Err(SteerError::PortOutOfRange { port });
        }
        self.port_drop
            .set(u32::from(port), u32::from(drop), 0)
            .map_err(|source| SteerError::MapUpdate {
                map: PORT_DROP_MAP,
                source,
            })
    }

    /// The ports that drop every frame they receive ([`Steering::set_port_drop`]), ascending.
    ///
    /// # Errors
    ///
    /// [`SteerError::MapUpdate`] if the map cannot be read.
    pub fn dropping_ports(&self) -> Result<Vec<u16>, SteerError> {
        let mut ports = Vec::new();
        for port in 0..MAX_PORTS as u16 {
            let flag = self.port_drop.get(&u32::from(port), 0).map_err(|source| {
                SteerError::MapUpdate {
                    map: PORT_DROP_MAP,
                    source,
                }
            })?;
            if flag != 0 {
                ports.push(port);
            }
        }
        Ok(ports)
    }

    /// Registers the AF_XDP socket bound to RX queue `queue` of port `port`: from now on the
    /// program redirects that queue's data-path frames into it.
    ///
    /// `socket` is the socket's file descriptor — for xdpilone, `User::as_raw_fd()` of the socket
    /// after `umem.bind(&user)` (any `impl AsRawFd`, a plain `RawFd` included). The kernel checks
    /// that it is an AF_XDP socket. The socket must be bound to this port's interface and this
    /// queue: otherwise the kernel drops the redirected frames (they still count as
    /// `redirected`).
    ///
    /// # Errors
    ///
    /// [`SteerError::PortOutOfRange`], [`SteerError::QueueOutOfRange`],
    /// [`SteerError::RegisterSocket`].
    pub fn register_socket(
        &mut self,
        port: u16,
        queue: u32,
        socket: impl AsRawFd,
    ) -> Result<(), SteerError> {
        let slot = slot(port, queue)?;
        let fd = socket.as_raw_fd();
        self.xsks
            .set(slot, fd, 0)
            .map_err(|source| SteerError::RegisterSocket {
                port,
                queue,
                fd,
                source,
            })
    }

    /// Removes the socket of (`port`, `queue`): its frames fall back to the kernel again.
    ///
    /// # Errors
    ///
    /// [`SteerError::PortOutOfRange`], [`SteerError::QueueOutOfRange`], [`SteerError::MapUpdate`].
    pub fn unregister_socket(&mut self, port: u16, queue: u32) -> Result<(), SteerError> {
        let slot = slot(port, queue)?;
        self.xsks
            .unset(slot)
            .map_err(|source| SteerError::MapUpdate {
                map: XSKS_MAP,
                source,
            })
    }

    /// The program's counters by name (`StatIndex::name`), each summed over CPUs, for
    /// telemetry. Empty if the counter map cannot be read; [`Steering::counters`] says why.
    pub fn stats(&self) -> Vec<(&'static str, u64)> {
        self.counters()
            .map(|counters| {
                counters
                    .iter()
                    .map(|(stat, count)| (stat.name(), count))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The program's counters, each summed over CPUs.
    ///
    /// # Errors
    ///
    /// [`SteerError::MapUpdate`] if the map cannot be read.
    pub fn counters(&self) -> Result<SteerStats, SteerError> {
        let mut stats = SteerStats::default();
        for &stat in StatIndex::ALL {
            let per_cpu =
                self.stats
                    .get(&stat.index(), 0)
                    .map_err(|source| SteerError::MapUpdate {
                        map: STATS_MAP,
                        source,
                    })?;
            stats.counts[stat.index() as usize] = per_cpu.iter().sum();
        }
        Ok(stats)
    }
}

impl Drop for Steering {
    fn drop(&mut self) {
        let _ignored = self.detach_all();
    }
}

/// The XSKMAP slot of (`port`, `queue`).
fn slot(port: u16, queue: u32) -> Result<u32, SteerError> {
    if u32::from(port) >= MAX_PORTS {
        return Err(SteerError::PortOutOfRange { port });
    }
    xsk_index(u32::from(port), queue).ok_or(SteerError::QueueOutOfRange { queue })
}

fn xdp_program(ebpf: &mut Ebpf, which: SteerProgram) -> Result<&mut Xdp, SteerError> {
    ebpf.program_mut(which.name())
        .and_then(|program| program.try_into().ok())
        .ok_or(SteerError::MissingProgram {
            program: which.name(),
        })
}

pub(crate) fn take_map<M>(ebpf: &mut Ebpf, name: &'static str) -> Result<M, SteerError>
where
    M: TryFrom<aya::maps::Map, Error = MapError>,
{
    let map = ebpf.take_map(name).ok_or(SteerError::Map {
        map: name,
        source: None,
    })?;
    M::try_from(map).map_err(|source| SteerError::Map {
        map: name,
        source: Some(source),
    })
}

/// The kernel's information on program `id`, if it is still loaded and readable.
fn program_info(id: u32) -> Option<ProgramInfo> {
    loaded_programs()
        .filter_map(Result::ok)
        .find(|info| info.id() == id)
}

/// Detaches the stale program `id` from `ifindex`: through its BPF link if it has one (links
/// cannot be replaced over netlink), else over netlink, only if it is still that program.
fn remove_stale_program(
    ifindex: u32,
    mode: XdpAttachMode,
    id: u32,
    info: Option<&ProgramInfo>,
) -> io::Result<()> {
    if let Some(link) = sys::find_xdp_link(id, ifindex)? {
        return sys::link_detach(link.as_fd());
    }
    let info = info.ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    let program = info.fd().map_err(io::Error::other)?;
    netlink::detach_xdp(ifindex, mode, program.as_fd())
}

fn replace_set<K>(
    map: &mut HashMap<MapData, K, u8>,
    name: &'static str,
    wanted: &HashSet<K>,
) -> Result<(), SteerError>
where
    K: aya::Pod + Eq + std::hash::Hash,
{
    let map_error = |source| SteerError::MapUpdate { map: name, source };
    let present = map
        .keys()
        .collect::<Result<Vec<K>, _>>()
        .map_err(map_error)?;
    for key in present.iter().filter(|key| !wanted.contains(key)) {
        map.remove(key).map_err(map_error)?;
    }
    for key in wanted {
        map.insert(key, 1, 0).map_err(map_error)?;
    }
    Ok(())
}
