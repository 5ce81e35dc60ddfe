//! The namespace lab: one command turns a [`Topology`](ofan_topology::Topology) into Linux network namespaces joined by
//! veth pairs, with an `ofan-switch` forwarding in every switch namespace, and one command
//! takes exactly that away again.
//!
//! The API: [`up()`] builds what a [`LabSpec`] describes, [`down()`] removes it, [`load`] reads a
//! running lab back, [`status::gather`] asks its switches, and the operations in [`ops`] change
//! it. Nothing here prints: long operations report to an [`Observer`], the rest return what
//! happened.
//!
//! Layers, bottom up:
//! - [`spec`] (pure): the typed, validated [`LabSpec`].
//! - [`plan`] (pure): namespace names and the static routes of every switch under a set of
//!   failed links.
//! - [`state`]: the per-lab state directory `/run/ofan/labs/<name>/`, where every created
//!   object is recorded *before* it is created, so `down` works after any crash.
//! - `net`: the kernel side in bulk — namespaces with `ip netns add` (in parallel), veths,
//!   addresses, routes and link state over rtnetlink from this process.
//! - `procs`: switch processes (own session, logs, pid + start-time identity).
//! - `ping`: `pingall` with raw ICMP sockets inside the host namespaces.
//! - `blackhole`: the drops of `link A B blackhole` (switch XDP flag, host tc filter).
//! - [`mod@up`], [`mod@down`], [`loaded`], [`status`], [`ops`]: the API above, one job each.
//! - [`neighbours`], [`softirq`], [`rt_throttle`]: the machine-wide settings a lab built with
//!   `--tune-machine` changes while it runs (the neighbour table's room, `ksoftirqd`'s
//!   priority, the kernel's real-time throttling), recorded and put back, each on its own, by
//!   the last `down`, `reset` or the next `up` (`machine`: the record they share).
//! - `sys` ([`ofan_lab_sys::lab`], where the `unsafe` is): setns, setsid, umount, ethtool, kill;
//!   the netlink socket is [`ofan_lab_sys::rtnl`]'s, shared with the host agent.
//!
//! Naming: lab `L`'s namespaces are `ofan-L-<node>` (lab names are lowercase letters and
//! digits, so prefixes of different labs never overlap); inside a namespace the interfaces
//! carry the topology's names `p0`, `p1`, … (hosts too: their one port is `p0`).

#![forbid(unsafe_code)]

pub mod bgp;
mod blackhole;
pub mod down;
pub mod group;
pub mod lb_map;
pub mod loaded;
mod machine;
pub mod neighbours;
mod net;
pub mod netns;
pub mod ops;
mod ping;
pub mod plan;
pub(crate) mod procs;
mod rate;
pub mod rt_throttle;
pub mod softirq;
pub mod spec;
pub mod state;
pub mod status;
pub mod up;

use std::time::Duration;

use ofan_lab_sys::lab as sys;

pub use down::{down, down_all, Removed, RemovedAll};
pub use loaded::{exists, find_node, load, Loaded, Reconvergence};
pub use net::{RouteWidth, Rtnl, NETNS_DIR};
pub use ping::PairResult;
pub use rate::{link_rate, RateChange};
pub use spec::{
    check_name, default_link_rate_bps, Bfd, BgpDaemon, EcnThreshold, HostLinks, LabSpec, Routing,
    Shaping, Switches, TopologySource, DEFAULT_BUFFER_BYTES, DEFAULT_DRAGONFLY,
    DEFAULT_LINK_RATE_BPS, DEFAULT_RATE_HOSTS, DEFAULT_SWITCH_RT_PRIORITY, EXPERIMENT_BUFFER_BYTES,
};
pub use state::LinkState;
pub use up::{up, wait_for_fibs};

/// What a long lab operation tells its user while it works. The CLI prints it (to stderr); a
/// caller that wants none of it passes [`Quiet`].
pub trait Observer {
    /// A step of a long operation finished, `elapsed` after the operation started.
    fn step(&mut self, _elapsed: Duration, _what: &str) {}
    /// Something the user should know: a summary, a warning, what an operation did.
    fn note(&mut self, _text: &str) {}
}

/// An [`Observer`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// Whether this process runs as root (the lab needs it: namespaces, XDP).
#[must_use]
pub fn is_root() -> bool {
    sys::is_root()
}
