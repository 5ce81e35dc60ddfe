//! The choices a lab is built with, each a type parsed once from the command line or a state
//! file: where the topology comes from, how routes are made, how the switches run, how hosts
//! are linked, which BGP daemon, BFD, shaping and ECN.

use std::path::PathBuf;

use anyhow::Context;
use ofan_topology::{Topology, TopologyKind};
use serde::{Deserialize, Serialize};

use super::{default_link_rate_bps, MAX_HOST_LINK_MTU};

/// The dragonfly `up --topo dragonfly` builds by default, `(p, a, h)`: one host per router, 4
/// routers and 2 global links each — 9 groups, 36 switches, 36 hosts.
pub const DEFAULT_DRAGONFLY: (u16, u16, u16) = (1, 4, 2);

/// Where a lab's topology comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologySource {
    /// A family and radix the topology crate builds.
    Kind(TopologyKind),
    /// A topology file (`ofan-lab topo --out FILE`).
    File(PathBuf),
}

impl TopologySource {
    /// `--topo` (fat-tree, leaf-spine, or a file) with `--k` for the families.
    #[must_use]
    pub fn parse(topo: &str, k: u16) -> Self {
        Self::parse_with(topo, k, DEFAULT_DRAGONFLY)
    }

    /// `--topo` (fat-tree, leaf-spine, dragonfly, or a file) with `--k` for the Clos families
    /// and `(p, a, h)` for a dragonfly.
    #[must_use]
    pub fn parse_with(topo: &str, k: u16, (p, a, h): (u16, u16, u16)) -> Self {
        match topo {
            "fat-tree" | "fattree" => Self::Kind(TopologyKind::FatTree { k }),
            "leaf-spine" | "leafspine" => Self::Kind(TopologyKind::LeafSpine { k }),
            "dragonfly" => Self::Kind(TopologyKind::Dragonfly { p, a, h }),
            file => Self::File(PathBuf::from(file)),
        }
    }

    /// Builds or reads the topology.
    ///
    /// # Errors
    /// A radix the family does not allow, an unreadable or invalid file.
    pub fn load(&self) -> anyhow::Result<Topology> {
        let topology = match self {
            Self::Kind(kind) => Topology::new(*kind)?,
            Self::File(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!(
                        "--topo {}: not fat-tree, leaf-spine or a readable file",
                        path.display()
                    )
                })?;
                Topology::from_json(&text).with_context(|| format!("--topo {}", path.display()))?
            }
        };
        Ok(topology)
    }

    /// Whether this is a multi-plane fabric named by its kind (a topology file is known to be
    /// one only once loaded).
    #[must_use]
    pub const fn is_multi_plane(&self) -> bool {
        matches!(self, Self::Kind(TopologyKind::MultiPlane { planes, .. }) if *planes > 1)
    }

    /// The default link rate of a lab of this topology ([`default_link_rate_bps`]).
    ///
    /// # Errors
    /// As [`Self::load`].
    pub fn default_link_rate_bps(&self) -> anyhow::Result<u64> {
        Ok(default_link_rate_bps(self.load()?.hosts().len()))
    }
}

/// Where the switches' routes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Routing {
    /// The lab computes every switch's routes from the topology (ECMP groups for up-paths)
    /// and programs them into the switch namespace's kernel FIB.
    Static,
    /// No routes: bring your own (e.g. `ofan-lab exec SWITCH -- ip route add …`).
    None,
    /// eBGP with FRR in every switch namespace (RFC 7938, one private ASN per switch; see
    /// [`crate::bgp`]): the daemons install the routes, and reconverge after a failure.
    Bgp,
}

impl Routing {
    /// The name in `state.json` and `status`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Static => "static",
            Self::None => "none",
            Self::Bgp => "bgp",
        }
    }
}

/// How the lab runs its switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Switches {
    /// One `ofan-switch group` process for all of them: each switch in its namespace with its
    /// own FIB mirror, admin socket and counters, their pipes served by one worker thread per
    /// CPU, so that a frame crosses the fabric without a wake-up per hop. The lab's default.
    Group,
    /// One `ofan-switch` process per switch (what runs on a real box): every frame wakes the
    /// next switch's worker. Labs recorded before groups existed ran this way.
    #[default]
    Process,
}

impl Switches {
    /// The name in `state.json`, `status` and `--switches`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Group => "group",
            Self::Process => "process",
        }
    }
}

/// What carries the hosts' traffic agents' frames to and from their edge switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostLinks {
    /// The veths: the agents' UDP sockets, through each host's kernel. Labs recorded before
    /// host links existed ran this way.
    #[default]
    Veth,
    /// Shared memory between the agents and the switch group
    /// (`ofan-switch group --host-links`, `ofan_dataplane::afxdp::hostlink`): the agents write
    /// and read whole frames, without the hosts' kernels; everything else a host does (ARP,
    /// ping, TCP, traceroute) keeps its veth. Only with switches in a group.
    Shared,
}

impl HostLinks {
    /// What `up` builds without `--host-links`: shared memory where it can — switches in a
    /// group, an MTU whose packets fit one UMEM frame — the veths otherwise. Shared links cost
    /// the hosts' kernels nothing per frame: with them k = 4 at 20 Mbit/s and k = 8 at 1 Mbit/s
    /// came closer to their bounds than over the veths (docs/lab.md, Host links).
    #[must_use]
    pub fn for_lab(switches: Switches, mtu: u32) -> Self {
        if switches == Switches::Group && mtu <= MAX_HOST_LINK_MTU {
            Self::Shared
        } else {
            Self::Veth
        }
    }

    /// The name in `state.json`, `status` and `--host-links`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Veth => "veth",
            Self::Shared => "shared",
        }
    }
}

/// Which BGP implementation runs in the switch namespaces under [`Routing::Bgp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BgpDaemon {
    /// FRR 8.4: zebra + bgpd per switch (≈ 35 MB each).
    Frr,
    /// BIRD 2.0: one `bird` per switch (a few MB).
    Bird,
}

impl BgpDaemon {
    /// The name in `state.json` and `status`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Frr => "frr",
            Self::Bird => "bird",
        }
    }

    /// The daemon named `name` in `state.json`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Frr, Self::Bird]
            .into_iter()
            .find(|d| d.name() == name)
    }
}

/// BFD (RFC 5880) on every BGP session (`up --bfd`): each switch's routing daemon runs
/// asynchronous single-hop BFD with its neighbours, and a session whose BFD goes down is torn
/// down at once instead of after the BGP hold time. Detects silent failures (a link that
/// drops frames while its carrier stays up) in `interval × multiplier`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bfd {
    /// Desired transmit and required receive interval, milliseconds.
    pub interval_ms: u32,
    /// Packets missed in a row before the session is declared down.
    pub multiplier: u8,
}

impl Bfd {
    /// What `--bfd` asks for: 100 ms × 3, a failure detected within 300 ms.
    pub const FAST: Self = Self {
        interval_ms: 100,
        multiplier: 3,
    };

    /// How long a silent neighbour takes to be declared down.
    #[must_use]
    pub fn detection_time(self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.interval_ms) * u64::from(self.multiplier))
    }
}

impl std::fmt::Display for Bfd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bfd {} ms x {}", self.interval_ms, self.multiplier)
    }
}

/// How the switches' shapers treat a late departure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaping {
    /// The next gap starts from now: lateness is lost.
    Strict,
    /// The next gap shrinks by the lateness (at most half a frame time, as Linux's sch_fq
    /// does), so a link loaded at exactly its rate carries it despite timer jitter
    /// (`ofan-switch --catch-up`).
    CatchUp,
}

impl Shaping {
    /// `true` for [`Shaping::CatchUp`] (the `--catch-up` flag and `state.json`'s `catch_up`).
    #[must_use]
    pub const fn catches_up(self) -> bool {
        matches!(self, Self::CatchUp)
    }

    /// The shaping a `--catch-up BOOL` flag asks for.
    #[must_use]
    pub const fn from_catch_up(catch_up: bool) -> Self {
        if catch_up {
            Self::CatchUp
        } else {
            Self::Strict
        }
    }
}

/// Where the switches start marking CE (`up --ecn-threshold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnThreshold {
    /// A tenth of the buffer, as the model's `--ecn` default (the default).
    #[default]
    Auto,
    /// No marking.
    Off,
    /// At this queue depth, bytes.
    Bytes(u64),
}

impl EcnThreshold {
    /// The depth for a buffer of `buffer_bytes` (`None`: off); a tenth of a buffer of under
    /// 10 bytes is 1 byte.
    #[must_use]
    pub fn for_buffer(self, buffer_bytes: u64) -> Option<u64> {
        match self {
            Self::Auto => Some((buffer_bytes / 10).max(1)),
            Self::Off => None,
            Self::Bytes(bytes) => Some(bytes),
        }
    }
}

impl std::str::FromStr for EcnThreshold {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim() {
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::Off),
            size => ofan_topology::units::parse_size(size)
                .map(Self::Bytes)
                .map_err(|e| format!("`{size}` is neither auto, off nor a size: {e}")),
        }
    }
}
