//! What `status` knows about a running lab: every switch's state and typed stats, every link's
//! counters each way, the shapers' lateness and the fidelity verdict. Drawing it is the CLI's.

use std::collections::BTreeMap;

use ofan_control::admin::Stats;
use ofan_control::paths::PathSource;
use ofan_dataplane::telemetry::PortSnapshot;
use ofan_topology::{FailedLinks, Link, Node, NodeId};

use super::bgp::Sessions;
use super::up::switch_client;
use super::{bgp, plan, procs, up, BgpDaemon, LinkState, Loaded, Routing};

/// Shaper lateness (p99, in packet times) above which `status` says the lab is not faithful.
pub const FAITHFUL_LATENESS: f64 = 0.25;
/// Ports that sent fewer frames than this are left out of the fidelity judgement.
pub const LATENESS_MIN_PACKETS: u64 = 1000;

/// A switch as `status` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchState {
    /// Answers its admin socket.
    Running,
    /// Its process lives but does not answer.
    NotAnswering,
    /// Its process is gone without `node stop`.
    Crashed,
    /// Stopped with `node stop`.
    Stopped,
    /// No process was ever recorded.
    NeverStarted,
}

impl SwitchState {
    /// The word `status` prints.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::NotAnswering => "not answering",
            Self::Crashed => "CRASHED",
            Self::Stopped => "stopped",
            Self::NeverStarted => "never started",
        }
    }
}

/// One switch.
#[derive(Debug, Clone)]
pub struct SwitchStatus {
    /// Its state.
    pub state: SwitchState,
    /// Its stats, when it answered.
    pub stats: Option<Stats>,
    /// Worst shaper lateness p99 over its ports with enough departures, packet times.
    pub lateness: Option<f64>,
    /// Under `--routing bgp`: its BGP sessions (`None` for other routing, or when its bgpd
    /// does not answer).
    pub bgp: Option<Sessions>,
    /// Under `--routing bgp`, for a running switch: how far it has converged.
    pub convergence: Option<Convergence>,
}

/// How far a switch of a BGP lab has converged to the plan under the lab's current failures.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Convergence {
    /// Its kernel FIB holds the plan's routes, each with its full number of next hops.
    pub fib: bool,
    /// Where its path table comes from: `bmp` (FRR) or `plan` (BIRD).
    pub paths_source: PathSource,
    /// BMP peers whose paths were all seen, and all monitored peers.
    pub bmp_peers: Option<(usize, usize)>,
    /// Its path table is the plan's (`None` with the plan as the source: equal by
    /// construction, blind to remote failures).
    pub paths: Option<bool>,
}

impl Convergence {
    /// Whether the switch has converged: FIB and (with BMP) a complete path table equal to
    /// the plan's.
    #[must_use]
    pub fn done(&self) -> bool {
        self.fib
            && self.paths != Some(false)
            && self.bmp_peers.is_none_or(|(complete, all)| complete == all)
    }

    fn of(lab: &Loaded, failures: &FailedLinks, switch: &Node, stats: &Stats) -> Option<Self> {
        let mut space = lab.open(switch.id).ok()?;
        let fib = up::fib_is_plan(&lab.topology, failures, switch, &mut space).ok()?;
        let source = stats.paths.source;
        let bmp_peers = stats.bmp.as_ref().map(|bmp| {
            let peers = &bmp.session.peers;
            (peers.iter().filter(|p| p.complete).count(), peers.len())
        });
        let paths = (source == PathSource::Bmp).then(|| {
            bgp::reported_paths(&stats.paths)
                == bgp::expected_paths(&lab.topology, lab.state.params.asns(), failures, switch)
        });
        Some(Self {
            fib,
            paths_source: source,
            bmp_peers,
            paths,
        })
    }
}

impl SwitchStatus {
    /// The port called `ifname`, when the switch answered.
    #[must_use]
    pub fn port(&self, ifname: &str) -> Option<&PortSnapshot> {
        let ports = &self.stats.as_ref()?.data_path.ports;
        ports.iter().find(|port| port.name == ifname)
    }
}

/// One link.
#[derive(Debug, Clone)]
pub struct LinkStatus<'a> {
    /// The link.
    pub link: &'a Link,
    /// Interface names at its ends.
    pub a_if: &'a str,
    /// See `a_if`.
    pub b_if: &'a str,
    /// Up, down (failed, or an end stopped) or blackholed.
    pub state: LinkState,
    /// Frames a sent (or b received, when a is a host).
    pub a_to_b: Option<u64>,
    /// Frames b sent (or a received, when b is a host).
    pub b_to_a: Option<u64>,
}

/// The whole lab.
#[derive(Debug)]
pub struct LabStatus<'a> {
    /// The lab.
    pub lab: &'a Loaded,
    /// Switches by name.
    pub switches: BTreeMap<String, SwitchStatus>,
    /// Links in topology order.
    pub links: Vec<LinkStatus<'a>>,
    /// Links down.
    pub failures: FailedLinks,
    /// Worst lateness of any switch, packet times.
    pub worst_lateness: f64,
    /// Unshaped, or worst lateness within [`FAITHFUL_LATENESS`].
    pub faithful: bool,
}

impl LabStatus<'_> {
    /// Switches in `state`.
    #[must_use]
    pub fn count(&self, state: SwitchState) -> usize {
        self.switches.values().filter(|s| s.state == state).count()
    }
}

/// Lateness in packet times (MTU-sized frames plus Ethernet overhead on the wire).
#[must_use]
pub fn packet_times(lateness_ns: u64, rate_bps: u64, mtu: u32) -> f64 {
    let bits = f64::from(mtu + 38) * 8.0;
    lateness_ns as f64 * 1e-9 * rate_bps as f64 / bits
}

/// Switch `name`'s state, and its stats when it answers (one admin request; no BGP query).
#[must_use]
pub fn ask(lab: &Loaded, name: &str) -> (SwitchState, Option<Stats>) {
    if lab.state.stopped.iter().any(|stopped| stopped == name) {
        return (SwitchState::Stopped, None);
    }
    match lab.process(name) {
        Some(process) if procs::switch_running(&lab.state, &lab.dir, process) => {
            match switch_client(&lab.dir, name).stats() {
                Ok(stats) => (SwitchState::Running, Some(stats)),
                Err(_) => (SwitchState::NotAnswering, None),
            }
        }
        Some(_) => (SwitchState::Crashed, None),
        None => (SwitchState::NeverStarted, None),
    }
}

/// What `link` is under the lab's `failures` ([`Loaded::failures`]): down (failed, or an end
/// stopped), blackholed or up.
#[must_use]
pub fn link_state(lab: &Loaded, failures: &FailedLinks, link: &Link) -> LinkState {
    if failures.contains(link.id) {
        LinkState::Down
    } else if lab.state.blackholed_links.contains(&link.id.0) {
        LinkState::Blackholed
    } else {
        LinkState::Up
    }
}

/// Asks every switch of `lab` and puts the answers together.
#[must_use]
pub fn gather(lab: &Loaded) -> LabStatus<'_> {
    let params = &lab.state.params;
    let bgp_lab = params.routing == Routing::Bgp.name();
    let daemon = params
        .bgp_daemon
        .as_deref()
        .and_then(BgpDaemon::from_name)
        .unwrap_or(BgpDaemon::Frr);
    let failures = lab.failures();
    // What BGP routes around: blackholed links too.
    let routing_failures = lab.routing_failures();
    let switches: BTreeMap<String, SwitchStatus> = lab
        .topology
        .switches()
        .iter()
        .map(|switch| {
            let (state, stats) = ask(lab, &switch.name);
            // Judged only on ports with enough departures for a p99 to mean something.
            let lateness = stats.as_ref().map(|stats| {
                let worst = stats
                    .data_path
                    .ports
                    .iter()
                    .filter(|port| port.tx_packets >= LATENESS_MIN_PACKETS)
                    .map(|port| port.lateness_p99_ns)
                    .max()
                    .unwrap_or(0);
                packet_times(worst, params.link_rate_bps, params.mtu)
            });
            let bgp = (bgp_lab && state == SwitchState::Running)
                .then(|| {
                    let namespace = plan::namespace(&lab.state.name, &switch.name);
                    let routing_dir = lab.dir.routing_dir(&switch.name);
                    Sessions::query(daemon, &namespace, &routing_dir).ok()
                })
                .flatten();
            let convergence = stats
                .as_ref()
                .filter(|_| bgp_lab)
                .and_then(|stats| Convergence::of(lab, &routing_failures, switch, stats));
            let status = SwitchStatus {
                state,
                stats,
                lateness,
                bgp,
                convergence,
            };
            (switch.name.clone(), status)
        })
        .collect();
    let worst_lateness = switches
        .values()
        .filter_map(|s| s.lateness)
        .fold(0.0, f64::max);
    let faithful = params.link_rate_bps == 0 || worst_lateness <= FAITHFUL_LATENESS;

    let counter = |node: NodeId, ifname: &str, field: fn(&PortSnapshot) -> u64| {
        let status = switches.get(&lab.topology.node(node).name)?;
        status.port(ifname).map(field)
    };
    let links = lab
        .topology
        .links()
        .iter()
        .map(|link| {
            let (a, b) = (link.a, link.b);
            let a_if = lab.topology.port(a.0, a.1).ifname.as_str();
            let b_if = lab.topology.port(b.0, b.1).ifname.as_str();
            let tx = |port: &PortSnapshot| port.tx_packets;
            let rx = |port: &PortSnapshot| port.rx_packets;
            LinkStatus {
                link,
                a_if,
                b_if,
                state: link_state(lab, &failures, link),
                // a→b: what a sent, or what b received when a is a host.
                a_to_b: counter(a.0, a_if, tx).or_else(|| counter(b.0, b_if, rx)),
                b_to_a: counter(b.0, b_if, tx).or_else(|| counter(a.0, a_if, rx)),
            }
        })
        .collect();
    LabStatus {
        lab,
        switches,
        links,
        failures,
        worst_lateness,
        faithful,
    }
}
