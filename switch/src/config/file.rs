//! `switch.toml` as written: the TOML schema, deserialized as is and checked by `resolve`.

use std::path::PathBuf;

use ofan_dataplane::afxdp::{BindMode, PollMode};
use ofan_dataplane::fib::PortRole;
use ofan_dataplane::lb::Algorithm;
use serde::Deserialize;

/// The file, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub(super) name: Option<String>,
    pub(super) seed: Option<u64>,
    pub(super) switch_seed: Option<u64>,
    pub(super) topology: Option<PathBuf>,
    pub(super) node: Option<String>,
    #[serde(default)]
    pub(super) ports: Vec<PortEntry>,
    #[serde(default)]
    pub(super) lb: LbSection,
    #[serde(default)]
    pub(super) queue: QueueSection,
    #[serde(default)]
    pub(super) xdp: XdpSection,
    #[serde(default)]
    pub(super) keys: KeysSection,
    #[serde(default)]
    pub(super) admin: AdminSection,
    #[serde(default)]
    pub(super) bgp: BgpSection,
    #[serde(default)]
    pub(super) adaptive_routing: AdaptiveRoutingSection,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PortEntry {
    pub(super) name: String,
    pub(super) role: RoleName,
    pub(super) queues: Option<u32>,
    pub(super) link_rate: Option<String>,
    pub(super) buffer: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RoleName {
    Host,
    Down,
    Up,
}

impl From<RoleName> for PortRole {
    fn from(role: RoleName) -> Self {
        match role {
            RoleName::Host => PortRole::Host,
            RoleName::Down => PortRole::Down,
            RoleName::Up => PortRole::Up,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LbSection {
    pub(super) algorithm: Option<Algorithm>,
    pub(super) pipe_size: Option<u16>,
    pub(super) pipes: Option<Vec<Vec<String>>>,
    pub(super) ack_max_frame: Option<u32>,
    pub(super) dragonfly: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QueueSection {
    pub(super) link_rate: Option<String>,
    pub(super) buffer: Option<String>,
    pub(super) ecn_threshold: Option<String>,
    pub(super) catch_up: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct XdpSection {
    pub(super) attach: Option<AttachName>,
    pub(super) mode: Option<BindMode>,
    pub(super) poll: Option<PollMode>,
    pub(super) cpus: Option<Vec<usize>>,
    pub(super) rt_priority: Option<u8>,
    pub(super) frame_size: Option<u32>,
    pub(super) frames_per_port: Option<u32>,
    pub(super) ring_size: Option<u32>,
    pub(super) fast_path: Option<ofan_dataplane::afxdp::FastPathMode>,
    pub(super) queues: Option<u32>,
}

/// XDP attach mode as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AttachName {
    /// Driver (native) XDP.
    Native,
    /// Generic (skb) XDP.
    Generic,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeysSection {
    pub(super) count: Option<u32>,
    #[serde(default)]
    pub(super) table: Vec<KeyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyEntry {
    pub(super) prefix: String,
    pub(super) key: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdminSection {
    pub(super) socket: Option<PathBuf>,
    pub(super) metrics: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BgpSection {
    pub(super) bmp: Option<String>,
    pub(super) asn_plan: Option<ofan_topology::plan::AsnPlan>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdaptiveRoutingSection {
    pub(super) enabled: Option<bool>,
    pub(super) window_ms: Option<u64>,
    pub(super) refresh_ms: Option<u64>,
    pub(super) port: Option<u16>,
    pub(super) asn: Option<u32>,
    pub(super) router_id: Option<std::net::Ipv4Addr>,
    pub(super) congested_at: Option<u8>,
    pub(super) cleared_at: Option<u8>,
    pub(super) windows_to_change: Option<u8>,
    pub(super) jump: Option<u8>,
    pub(super) queue_frames: Option<u16>,
    pub(super) combine: Option<ofan_dataplane::arf::Combine>,
    pub(super) notify_hosts: Option<bool>,
    #[serde(default)]
    pub(super) neighbours: Vec<NeighbourEntry>,
}

/// `[[adaptive_routing.neighbours]]`: a switch neighbour named by hand.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NeighbourEntry {
    pub(super) port: String,
    pub(super) addr: std::net::Ipv4Addr,
    pub(super) router_id: std::net::Ipv4Addr,
    pub(super) asn: u32,
}
