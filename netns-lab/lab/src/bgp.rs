//! `--routing bgp`: the fabric as an RFC 7938 eBGP Clos network, one BGP daemon per switch
//! namespace — FRR (zebra + bgpd) or BIRD 2 ([`BgpDaemon`]). This module writes the daemons'
//! configuration (pure), knows how they run inside a namespace and asks them about their
//! sessions; the lab's `procs` module starts and stops the processes.
//!
//! The plan:
//! - **One private 4-byte ASN per switch** ([`ofan_topology::plan::asn`]: `4200000000 + node id`). RFC 7938 §5.2.1 suggests
//!   one ASN shared by all spines; a unique ASN per switch instead makes the AS_PATH of every
//!   route name every switch it crossed, so a switch can read its next-next hops from the paths
//!   it learns (the adaptive-routing framework draft's AS_PATH option), and loop prevention is
//!   plain eBGP's.
//! - Single-hop eBGP on every switch-to-switch link (the neighbour is the peer's address on the
//!   link's `/31`), datacenter timers (1 s keepalive, 3 s hold).
//! - Every edge originates its hosts' `/24` ([`ofan_topology::Topology::edge_prefix`]), whether
//!   or not the kernel has that exact prefix (`no bgp network import-check`: the hosts are
//!   connected `/31`s inside it).
//! - **Valley-free** (up, then down, never down-then-up): a route learned from a switch above
//!   (an up-port's neighbour) is tagged with the community [`FROM_ABOVE`] on the way in and never
//!   advertised to a switch above. RFC 7938's shared spine ASN prevents valleys by AS_PATH loop
//!   detection; with one ASN per switch nothing else would, and after a failure BGP would route
//!   through valleys (edge → agg → core → agg → edge → agg → core …) that the paper's fat tree
//!   and the static plan never use. With the filter, a converged FIB is exactly the plan's.
//! - Multipath across different neighbour ASNs (`bestpath as-path multipath-relax`),
//!   `maximum-paths` = the switch's radix.
//! - zebra installs multipath routes inline (`no zebra nexthop kernel enable`): with kernel
//!   next-hop groups FRR 8.4 keeps only the surviving member after a carrier flap and never
//!   restores ECMP width (measured on this kind of machine).
//!
//! FRR runs as its `frr` user: each namespace gets its own path space (`-N <namespace>`, so
//! vty and zserv sockets live in `/var/run/frr/<namespace>/`, a directory owned by `frr`), its
//! own configuration files in the lab's state directory, and no `-d`: the lab records the
//! daemons' pids like the switches'.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ofan_topology::plan::asn;
use ofan_topology::{Node, Topology};

pub use super::spec::{Bfd, BgpDaemon};

/// Where Debian's FRR keeps its daemons.
pub const FRR_DIR: &str = "/usr/lib/frr";
/// Where FRR puts the sockets of a path space.
pub const FRR_RUN_DIR: &str = "/var/run/frr";

/// The community of routes learned from a switch above (see the module documentation).
pub const FROM_ABOVE: &str = "64512:1";

/// Where a switch's BMP station listens, in the switch's namespace: bgpd connects to it.
pub const BMP_HOST: &str = "127.0.0.1";
/// The BMP station's port (RFC 7854 assigns none; 11019 is the customary one).
pub const BMP_PORT: u16 = 11019;

/// bgpd's `maximum-paths`: with ADD-PATH a switch receives each of a neighbour's paths, so an
/// edge of a fat tree holds (k/2)² equal paths to a remote pod (k/2 aggregations × k/2 cores
/// each), all of which must count as multipath; 64 is FRR's limit.
fn maximum_paths(topology: &Topology) -> usize {
    let half = usize::from(topology.k() / 2).max(1);
    (half * half).clamp(usize::from(topology.k()).max(1), 64)
}

/// BIRD's executable.
pub const BIRD: &str = "/usr/sbin/bird";

/// The name of the BFD profile FRR's bgpd asks bfdd for (`--bfd`).
pub const BFD_PROFILE: &str = "ofan";

/// The routing daemons of one switch under `daemon`, in start order (FRR's bfdd with `bfd`,
/// between zebra, which relays bgpd's BFD sessions to it, and bgpd; BIRD has BFD built in).
/// `node S routing-restart` kills and starts all of them again.
#[must_use]
pub const fn daemons(daemon: BgpDaemon, bfd: Option<Bfd>) -> &'static [Daemon] {
    match (daemon, bfd) {
        (BgpDaemon::Frr, None) => &[Daemon::Zebra, Daemon::Bgpd],
        (BgpDaemon::Frr, Some(_)) => &[Daemon::Zebra, Daemon::Bfdd, Daemon::Bgpd],
        (BgpDaemon::Bird, _) => &[Daemon::Bird],
    }
}

/// One routing daemon process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// FRR's zebra: installs routes into the namespace's kernel FIB.
    Zebra,
    /// FRR's BGP daemon.
    Bgpd,
    /// FRR's BFD daemon (`--bfd`).
    Bfdd,
    /// BIRD: BGP and the kernel table in one process.
    Bird,
}

impl Daemon {
    /// The executable's name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Zebra => "zebra",
            Self::Bgpd => "bgpd",
            Self::Bfdd => "bfdd",
            Self::Bird => "bird",
        }
    }

    /// The daemon's executable.
    #[must_use]
    pub fn binary(self) -> PathBuf {
        match self {
            Self::Zebra | Self::Bgpd | Self::Bfdd => Path::new(FRR_DIR).join(self.name()),
            Self::Bird => PathBuf::from(BIRD),
        }
    }

    /// Whether it is one of FRR's (runs as the `frr` user, in a path space).
    #[must_use]
    pub const fn is_frr(self) -> bool {
        matches!(self, Self::Zebra | Self::Bgpd | Self::Bfdd)
    }
}

/// BIRD's control socket in a switch's routing directory.
#[must_use]
pub fn bird_socket(routing_dir: &Path) -> PathBuf {
    routing_dir.join("bird.ctl")
}

/// FRR's run directory of namespace `namespace`.
#[must_use]
pub fn run_dir(namespace: &str) -> PathBuf {
    Path::new(FRR_RUN_DIR).join(namespace)
}

/// What a switch's bgpd says about its sessions (`show bgp summary json`, the fields used).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Sessions {
    /// Sessions in state Established.
    pub established: usize,
    /// Configured sessions.
    pub total: usize,
    /// Prefixes received over all sessions.
    pub prefixes: u64,
}

impl Sessions {
    /// Parses the JSON of `show bgp summary json`.
    ///
    /// # Errors
    /// Not that JSON.
    pub fn from_summary_json(text: &str) -> Result<Self, serde_json::Error> {
        #[derive(serde::Deserialize)]
        struct Summary {
            #[serde(rename = "ipv4Unicast", default)]
            ipv4: Option<Family>,
        }
        #[derive(serde::Deserialize)]
        struct Family {
            #[serde(default)]
            peers: std::collections::BTreeMap<String, Peer>,
        }
        #[derive(serde::Deserialize)]
        struct Peer {
            state: String,
            #[serde(rename = "pfxRcd", default)]
            prefixes: u64,
        }
        let summary: Summary = serde_json::from_str(text)?;
        let peers = summary.ipv4.map(|f| f.peers).unwrap_or_default();
        Ok(Self {
            established: peers.values().filter(|p| p.state == "Established").count(),
            total: peers.len(),
            prefixes: peers.values().map(|p| p.prefixes).sum(),
        })
    }

    /// Parses the output of BIRD's `show protocols all`: every `BGP` protocol is a session,
    /// `Established` ones are up, `Routes: N imported` are its prefixes.
    #[must_use]
    pub fn from_birdc(text: &str) -> Self {
        let mut sessions = Self::default();
        let mut in_bgp = false;
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if !line.starts_with(char::is_whitespace) && fields.len() >= 2 {
                in_bgp = fields[1] == "BGP";
                if in_bgp {
                    sessions.total += 1;
                    sessions.established += usize::from(fields.contains(&"Established"));
                }
            } else if in_bgp && fields.first() == Some(&"Routes:") {
                sessions.prefixes += fields.get(1).and_then(|n| n.parse().ok()).unwrap_or(0);
            }
        }
        sessions
    }

    /// Asks the routing daemon of a switch: FRR's bgpd through `vtysh` in `namespace`, or
    /// BIRD through `birdc` on its socket in `routing_dir`.
    ///
    /// # Errors
    /// The client cannot run or the daemon does not answer.
    pub fn query(daemon: BgpDaemon, namespace: &str, routing_dir: &Path) -> anyhow::Result<Self> {
        if daemon == BgpDaemon::Bird {
            let output = std::process::Command::new("birdc")
                .arg("-s")
                .arg(bird_socket(routing_dir))
                .args(["show", "protocols", "all"])
                .stdin(std::process::Stdio::null())
                .output()?;
            anyhow::ensure!(output.status.success(), "birdc failed");
            return Ok(Self::from_birdc(&String::from_utf8_lossy(&output.stdout)));
        }
        let output = std::process::Command::new("ip")
            .args(["netns", "exec", namespace, "vtysh", "-N", namespace])
            .args(["-c", "show bgp summary json"])
            .stdin(std::process::Stdio::null())
            .output()?;
        let text = String::from_utf8_lossy(&output.stdout);
        // vtysh prints a warning about a missing vtysh.conf before the JSON.
        let json = text.find('{').map_or("", |start| &text[start..]);
        Ok(Self::from_summary_json(json)?)
    }
}

/// Asks FRR's bgpd in each of `namespaces` for an enhanced route refresh from every neighbour
/// (`clear bgp * soft in`, all switches at once): they send their routes again, bgpd mirrors them
/// to the switch's BMP station, and peers whose sessions came up before the station connected
/// become complete.
///
/// # Errors
/// vtysh cannot run or fails.
pub fn refresh_routes(namespaces: &[String]) -> anyhow::Result<()> {
    let children = namespaces
        .iter()
        .map(|namespace| {
            std::process::Command::new("ip")
                .args(["netns", "exec", namespace, "vtysh", "-N", namespace])
                .args(["-c", "clear bgp * soft in"])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map(|child| (namespace, child))
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    for (namespace, child) in children {
        let output = child.wait_with_output()?;
        anyhow::ensure!(
            output.status.success(),
            "vtysh in {namespace}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// The uid and gid of FRR's `frr` user (from `/etc/passwd`).
///
/// # Errors
/// No such user: FRR is not installed.
pub fn frr_ids() -> anyhow::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() > 3 && fields[0] == "frr")
        .and_then(|fields| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no `frr` user: --routing bgp needs FRR (apt-get install frr; scripts/setup installs it)"
            )
        })
}

/// A BGP neighbour of a switch: the switch across one of its links.
#[derive(Debug, Clone, Copy)]
struct Peer<'a> {
    node: &'a Node,
    /// The neighbour's address on the link.
    address: std::net::Ipv4Addr,
    /// This switch's address on the link.
    local: std::net::Ipv4Addr,
    /// The neighbour is above (the link is one of this switch's up-ports).
    above: bool,
}

/// Every neighbour of `switch`, in port order.
fn peers<'a>(topology: &'a Topology, switch: &'a Node) -> Vec<Peer<'a>> {
    let up_ports = topology.up_ports(switch.id);
    switch
        .ports
        .iter()
        .map(|port| Peer {
            node: topology.node(port.peer),
            address: topology.port(port.peer, port.peer_port).address,
            local: port.address,
            above: up_ports.iter().any(|up| up.index == port.index),
        })
        .filter(|peer| peer.node.role.is_switch())
        .collect()
}

/// BIRD's configuration for switch `switch` of `topology`: the same plan as FRR's — one ASN
/// per switch, single-hop eBGP, the edge's `/24` originated (a static blackhole route in BIRD's
/// table, never exported to the kernel), the valley-free community filters, BGP routes merged
/// into multipath kernel routes (`merge paths yes limit 64`), and `error wait time 1,5` so a
/// session re-establishes within seconds after a flap. Graceful restart as FRR's: every session
/// restarts gracefully (`graceful restart on`, [`RESTART_TIME_S`]), and the kernel protocol
/// leaves its routes in the kernel when BIRD ends (`persist`) and, in a recovery after a crash
/// (`bird -R`), keeps them until BGP has recovered (`graceful restart on`). With `bfd`, a
/// `protocol bfd` at its intervals and `bfd on` in every BGP session.
#[must_use]
pub fn bird_conf(topology: &Topology, switch: &Node, bfd: Option<Bfd>) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "# bird of {} (written by ofan-lab)", switch.name);
    let _ = writeln!(conf, "router id {};", switch.loopback);
    let _ = writeln!(
        conf,
        "log stderr {{ info, remote, warning, error, auth, fatal, bug }};"
    );
    let _ = writeln!(conf, "protocol device {{ scan time 10; }}");
    let _ = writeln!(
        conf,
        "protocol kernel {{ ipv4 {{ import none; export filter {{ if source = RTS_BGP then accept; reject; }}; }}; merge paths yes limit 64; learn no; persist; graceful restart on; }}"
    );
    let (a, b) = FROM_ABOVE.split_once(':').unwrap_or(("64512", "1"));
    let _ = writeln!(
        conf,
        "filter from_above {{ bgp_community.add(({a},{b})); accept; }}"
    );
    let _ = writeln!(
        conf,
        "filter to_above {{ if ({a},{b}) ~ bgp_community then reject; accept; }}"
    );
    if topology.edges().iter().any(|edge| edge.id == switch.id) {
        let (prefix, len) = topology.edge_prefix(switch.id);
        let _ = writeln!(
            conf,
            "protocol static {{ ipv4; route {prefix}/{len} blackhole; }}"
        );
    }
    if let Some(bfd) = bfd {
        let _ = writeln!(
            conf,
            "protocol bfd {{ interface \"*\" {{ interval {} ms; multiplier {}; }}; }}",
            bfd.interval_ms, bfd.multiplier
        );
    }
    let bfd_on = if bfd.is_some() { " bfd on;" } else { "" };
    for peer in peers(topology, switch) {
        let filters = if peer.above {
            "import filter from_above; export filter to_above;"
        } else {
            "import all; export all;"
        };
        let _ = writeln!(
            conf,
            "protocol bgp {} {{ local {} as {}; neighbor {} as {}; hold time 3; keepalive time 1; connect retry time 1; error wait time 1,5; graceful restart on; graceful restart time {RESTART_TIME_S};{bfd_on} ipv4 {{ {filters} }}; }}",
            peer.node.name.replace('-', "_"),
            peer.local,
            asn(switch),
            peer.address,
            asn(peer.node)
        );
    }
    conf
}

/// zebra's configuration for switch `node`.
#[must_use]
pub fn zebra_conf(node: &Node) -> String {
    format!(
        "! zebra of {name} (written by ofan-lab)\nhostname {name}\nno zebra nexthop kernel enable\n",
        name = node.name
    )
}

/// bfdd's configuration for switch `node`: one profile, [`BFD_PROFILE`], at `bfd`'s
/// intervals; the sessions themselves are bgpd's ([`bgpd_bfd_conf`]). (Configuring them in
/// bfdd as well does not keep them up across a bgpd crash: FRR 8.4's bfdd deletes a session
/// when its last client goes, configured or not — measured.)
#[must_use]
pub fn bfdd_conf(node: &Node, bfd: Bfd) -> String {
    format!(
        "! bfdd of {name} (written by ofan-lab)\nhostname {name}\nbfd\n profile {BFD_PROFILE}\n  detect-multiplier {multiplier}\n  receive-interval {interval}\n  transmit-interval {interval}\n exit\nexit\n",
        name = node.name,
        multiplier = bfd.multiplier,
        interval = bfd.interval_ms,
    )
}

/// The lines `--bfd` adds to [`bgpd_conf`]: every neighbour of `switch` gets a BFD session
/// with bfdd's profile [`BFD_PROFILE`] (appended to the configuration: FRR re-enters the
/// `router bgp` node).
#[must_use]
pub fn bgpd_bfd_conf(topology: &Topology, switch: &Node) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "router bgp {}", asn(switch));
    for Peer { address, .. } in peers(topology, switch) {
        let _ = writeln!(conf, " neighbor {address} bfd profile {BFD_PROFILE}");
    }
    let _ = writeln!(conf, "exit");
    conf
}

/// How long a neighbour keeps the routes of a switch whose BGP daemon restarts before it gives
/// up on it (the graceful-restart time the switch advertises), seconds. A routing restart takes
/// 2–5 s in the lab.
pub const RESTART_TIME_S: u32 = 15;

/// How long a neighbour keeps the stale paths of a restarted session after it is back
/// (`stalepath-time`), seconds; FRR's default is 360. They should go at the session's
/// End-of-RIB, but FRR 8.4 kept an ADD-PATH path the restarted neighbour never re-sent as
/// stale — and best, so no route was installed for its prefix — with the stale-path timer still
/// running after End-of-RIB (found by `run --chaos` on a BGP lab: e-p0-0 lost 10.3.1.0/24 for
/// minutes after a-p0-0 was killed and restarted). This bounds the damage.
pub const STALEPATH_S: u32 = 10;

/// How long bgpd gathers a new session's first updates before sending them (`coalesce-time`),
/// milliseconds; FRR's default is 1000.
pub const COALESCE_MS: u32 = 20;

/// How long a starting bgpd waits at most for End-of-RIB from every neighbour before it computes
/// and announces its routes (`update-delay`), seconds.
pub const UPDATE_DELAY_S: u32 = 10;

/// The lines every bgpd gets for graceful restart (RFC 4724), appended to [`bgpd_conf`] (FRR
/// re-enters the `router bgp` node): every session restarts gracefully (`neighbor X
/// graceful-restart`; helping the neighbours restart is FRR's default), the switch says that
/// it keeps its forwarding state across a restart (`preserve-fw-state`, the F bit: without it
/// a neighbour drops the stale routes as soon as the new session opens) and asks its
/// neighbours to wait [`RESTART_TIME_S`].
///
/// - `update-delay`, only for a bgpd `restarting` after a crash: it stays read-only until every
///   neighbour has sent End-of-RIB (at most [`UPDATE_DELAY_S`]; a neighbour over a failed link
///   never does, which is why a fresh bgpd does without). FRR 8.4's bgpd cannot be told that it is restarting, so
///   without this it tells zebra "route update complete" at once, and zebra, which kept the
///   crashed bgpd's routes, deletes them all 1.2 s before the new ones arrive (measured).
/// - `coalesce-time` [`COALESCE_MS`]: FRR 8.4 sends a new session's End-of-RIB at once but
///   its routes only after the coalesce time (1 s by default), and a neighbour helping a
///   restart drops its stale routes at End-of-RIB — every restart lost the switch's routes at
///   its neighbours, and its own, for 1.2 s (measured). As a side effect a repaired link and
///   a restarted switch converge faster (`link up` 0.4 s instead of 1.4 s).
/// - `no bgp graceful-restart notification`: a session that ends by a NOTIFICATION — the hold
///   timer of a silently failed link — is not a restart (with RFC 8538's N bit FRR would keep
///   a blackholed neighbour's routes for the whole restart time).
#[must_use]
pub fn bgpd_graceful_restart_conf(topology: &Topology, switch: &Node, restarting: bool) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "router bgp {}", asn(switch));
    let _ = writeln!(conf, " bgp graceful-restart");
    let _ = writeln!(conf, " bgp graceful-restart preserve-fw-state");
    let _ = writeln!(conf, " bgp graceful-restart restart-time {RESTART_TIME_S}");
    let _ = writeln!(conf, " no bgp graceful-restart notification");
    let _ = writeln!(conf, " bgp graceful-restart stalepath-time {STALEPATH_S}");
    if restarting {
        let _ = writeln!(conf, " update-delay {UPDATE_DELAY_S}");
    }
    let _ = writeln!(conf, " coalesce-time {COALESCE_MS}");
    for Peer { address, .. } in peers(topology, switch) {
        let _ = writeln!(conf, " neighbor {address} graceful-restart");
    }
    let _ = writeln!(conf, "exit");
    conf
}

/// bgpd's configuration for switch `switch` of `topology`.
#[must_use]
pub fn bgpd_conf(topology: &Topology, switch: &Node) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "! bgpd of {} (written by ofan-lab)", switch.name);
    let _ = writeln!(conf, "frr defaults datacenter");
    let _ = writeln!(conf, "hostname {}", switch.name);
    // Route-map changes take effect at once (the default waits 5 s).
    let _ = writeln!(conf, "bgp route-map delay-timer 0");
    let _ = writeln!(conf, "router bgp {}", asn(switch));
    let _ = writeln!(conf, " bgp router-id {}", switch.loopback);
    let _ = writeln!(conf, " no bgp ebgp-requires-policy");
    // Session changes and their reasons (hold timer, notification) in the bgpd log.
    let _ = writeln!(conf, " bgp log-neighbor-changes");
    let _ = writeln!(conf, " no bgp network import-check");
    let _ = writeln!(conf, " bgp bestpath as-path multipath-relax");
    let peers = peers(topology, switch);
    for Peer { node, address, .. } in &peers {
        let _ = writeln!(conf, " neighbor {address} remote-as {}", asn(node));
        let _ = writeln!(conf, " neighbor {address} description {}", node.name);
        let _ = writeln!(conf, " neighbor {address} timers 1 3");
        let _ = writeln!(conf, " neighbor {address} timers connect 1");
    }
    let _ = writeln!(conf, " address-family ipv4 unicast");
    if topology.edges().iter().any(|edge| edge.id == switch.id) {
        let (prefix, len) = topology.edge_prefix(switch.id);
        let _ = writeln!(conf, "  network {prefix}/{len}");
    }
    for Peer { address, above, .. } in &peers {
        // Every path, not only the best: the receiver learns all its next-next hops.
        let _ = writeln!(conf, "  neighbor {address} addpath-tx-all-paths");
        if *above {
            let _ = writeln!(conf, "  neighbor {address} route-map FROM-ABOVE in");
            let _ = writeln!(conf, "  neighbor {address} route-map TO-ABOVE out");
        }
    }
    let _ = writeln!(conf, "  maximum-paths {}", maximum_paths(topology));
    let _ = writeln!(conf, " exit-address-family");
    let _ = writeln!(conf, " bmp targets ofan");
    let _ = writeln!(conf, "  bmp mirror");
    let _ = writeln!(
        conf,
        "  bmp connect {BMP_HOST} port {BMP_PORT} min-retry 100 max-retry 1000"
    );
    let _ = writeln!(conf, " exit");
    let _ = writeln!(conf, "!");
    let _ = writeln!(
        conf,
        "bgp community-list standard FROM-ABOVE permit {FROM_ABOVE}"
    );
    let _ = writeln!(conf, "route-map FROM-ABOVE permit 10");
    let _ = writeln!(conf, " set community {FROM_ABOVE} additive");
    let _ = writeln!(conf, "route-map TO-ABOVE deny 10");
    let _ = writeln!(conf, " match community FROM-ABOVE");
    let _ = writeln!(conf, "route-map TO-ABOVE permit 20");
    conf
}

/// One route of a path table, comparable: prefix → (gateway, neighbour ASN, sorted next-next
/// ASNs) per next hop, sorted.
pub type PathRows =
    std::collections::BTreeMap<String, Vec<(std::net::IpAddr, Option<u32>, Vec<u32>)>>;

/// The path table switch `switch` should report under `failures`: the plan's routes, each next
/// hop with the neighbour's own next hops, switches named by their ASN.
#[must_use]
pub fn expected_paths(
    topology: &Topology,
    failures: &ofan_topology::FailedLinks,
    switch: &Node,
) -> PathRows {
    ofan_topology::plan::remote_paths(topology, failures, switch.id)
        .into_iter()
        .map(|((addr, len), hops)| {
            let mut rows: Vec<_> = hops
                .iter()
                .map(|hop| {
                    let mut behind: Vec<u32> = hop
                        .next_next
                        .iter()
                        .map(|&id| asn(topology.node(id)))
                        .collect();
                    behind.sort_unstable();
                    (
                        std::net::IpAddr::V4(hop.hop.gateway),
                        Some(asn(topology.node(hop.neighbor))),
                        behind,
                    )
                })
                .collect();
            rows.sort();
            (format!("{addr}/{len}"), rows)
        })
        .collect()
}

/// A switch's reported path table in the form of [`expected_paths`].
#[must_use]
pub fn reported_paths(report: &ofan_control::paths::PathReport) -> PathRows {
    report
        .routes
        .iter()
        .map(|route| {
            let mut rows: Vec<_> = route
                .hops
                .iter()
                .map(|hop| {
                    let mut behind = hop.next_next.clone();
                    behind.sort_unstable();
                    (hop.gateway, hop.asn, behind)
                })
                .collect();
            rows.sort();
            (route.prefix.clone(), rows)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bird_has_the_same_plan() {
        let topology = Topology::fat_tree(4).unwrap();
        for switch in topology.switches() {
            let bird = bird_conf(&topology, switch, None);
            let frr = bgpd_conf(&topology, switch);
            assert_eq!(
                bird.matches("protocol bgp ").count(),
                frr.matches("remote-as").count(),
                "{}",
                switch.name
            );
            assert_eq!(
                bird.matches("import filter from_above").count(),
                frr.matches("route-map FROM-ABOVE in").count()
            );
            assert_eq!(bird.contains("blackhole"), frr.contains("  network "));
        }
        let edge = &topology.edges()[0];
        let bird = bird_conf(&topology, edge, None);
        assert!(bird.contains("route 10.0.0.0/24 blackhole"), "{bird}");
        assert!(!bird.contains("bfd"), "{bird}");
        assert!(bird.contains(&format!("as {};", asn(edge))));
        assert!(bird.contains("merge paths yes limit 64"));
    }

    #[test]
    fn bfd_runs_on_every_session_at_100_ms_x_3() {
        let topology = Topology::fat_tree(4).unwrap();
        let bfd = Bfd::FAST;
        assert_eq!(
            daemons(BgpDaemon::Frr, Some(bfd)),
            [Daemon::Zebra, Daemon::Bfdd, Daemon::Bgpd]
        );
        assert_eq!(daemons(BgpDaemon::Frr, None), [Daemon::Zebra, Daemon::Bgpd]);
        assert_eq!(daemons(BgpDaemon::Bird, Some(bfd)), [Daemon::Bird]);
        for switch in topology.switches() {
            let sessions = bgpd_conf(&topology, switch).matches("remote-as").count();
            // FRR: one BFD session per BGP neighbour, in the same `router bgp`.
            let frr = bgpd_bfd_conf(&topology, switch);
            assert!(
                frr.starts_with(&format!("router bgp {}\n", asn(switch))),
                "{frr}"
            );
            assert_eq!(frr.matches(" bfd profile ofan").count(), sessions, "{frr}");
            // BIRD: one bfd protocol, `bfd on` in every BGP session.
            let bird = bird_conf(&topology, switch, Some(bfd));
            assert_eq!(bird.matches("protocol bfd ").count(), 1);
            assert_eq!(bird.matches(" bfd on;").count(), sessions, "{bird}");
            assert!(bird.contains("interval 100 ms; multiplier 3;"), "{bird}");
        }
        let edge = &topology.edges()[0];
        let up = &topology.up_ports(edge.id)[0];
        let address = topology.port(up.peer, up.peer_port).address;
        assert!(bgpd_bfd_conf(&topology, edge)
            .contains(&format!(" neighbor {address} bfd profile ofan\n")));
        let bfdd = bfdd_conf(edge, bfd);
        for line in [
            "bfd\n",
            " profile ofan\n",
            "  detect-multiplier 3\n",
            "  receive-interval 100\n",
            "  transmit-interval 100\n",
        ] {
            assert!(bfdd.contains(line), "{line:?} missing:\n{bfdd}");
        }
    }

    #[test]
    fn every_session_restarts_gracefully() {
        let topology = Topology::fat_tree(4).unwrap();
        let edge = &topology.edges()[0];
        let fresh = bgpd_graceful_restart_conf(&topology, edge, false);
        assert!(
            fresh.starts_with(&format!("router bgp {}\n", asn(edge))),
            "{fresh}"
        );
        for line in [
            " bgp graceful-restart\n",
            " bgp graceful-restart preserve-fw-state\n",
            " bgp graceful-restart restart-time 15\n",
            " no bgp graceful-restart notification\n",
            " coalesce-time 20\n",
        ] {
            assert!(fresh.contains(line), "{line:?} missing:\n{fresh}");
        }
        assert_eq!(
            fresh.matches(" graceful-restart\n").count(),
            1 + 2,
            "{fresh}"
        );
        // Read-only until End-of-RIB only after a crash: a fresh bgpd does without.
        assert!(!fresh.contains("update-delay"));
        let restarting = bgpd_graceful_restart_conf(&topology, edge, true);
        assert!(restarting.contains(" update-delay 10\n"), "{restarting}");
        let bird = bird_conf(&topology, edge, None);
        assert_eq!(
            bird.matches("graceful restart on; graceful restart time 15;")
                .count(),
            2,
            "{bird}"
        );
        assert!(bird.contains("persist; graceful restart on; }"), "{bird}");
    }

    #[test]
    fn sessions_from_frr_summary_json() {
        let json = r#"{"ipv4Unicast":{"routerId":"10.255.0.1","as":4200000016,"peers":{
            "100.64.0.1":{"remoteAs":4200000024,"state":"Established","pfxRcd":7},
            "100.64.0.3":{"remoteAs":4200000025,"state":"Active","pfxRcd":0}},
            "failedPeers":1,"totalPeers":2}}"#;
        let sessions = Sessions::from_summary_json(json).unwrap();
        assert_eq!(
            sessions,
            Sessions {
                established: 1,
                total: 2,
                prefixes: 7
            }
        );
        assert_eq!(
            Sessions::from_summary_json("{}").unwrap(),
            Sessions::default()
        );
        assert!(Sessions::from_summary_json("% bgpd is not running").is_err());
    }

    #[test]
    fn sessions_from_birdc() {
        let text = "BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     21:30:13.857
kernel1    Kernel     master4    up     21:30:13.857
  Channel ipv4
    Routes:         0 imported, 7 exported, 0 preferred
a_p0_0     BGP        ---        up     21:30:17.889  Established
  BGP state:          Established
  Channel ipv4
    Routes:         7 imported, 1 exported, 7 preferred
a_p0_1     BGP        ---        start  21:30:17.800  Active        Socket: Connection refused
  BGP state:          Active
  Channel ipv4
    Routes:         0 imported, 0 exported, 0 preferred
";
        assert_eq!(
            Sessions::from_birdc(text),
            Sessions {
                established: 1,
                total: 2,
                prefixes: 7
            }
        );
    }

    #[test]
    fn every_switch_link_is_one_session_and_edges_originate_their_hosts() {
        let topology = Topology::fat_tree(4).unwrap();
        let mut asns = std::collections::BTreeSet::new();
        let mut sessions = 0;
        for switch in topology.switches() {
            assert!(asns.insert(asn(switch)), "ASNs are unique");
            let conf = bgpd_conf(&topology, switch);
            let neighbors = conf.matches("remote-as").count();
            let switch_ports = switch
                .ports
                .iter()
                .filter(|p| topology.node(p.peer).role.is_switch())
                .count();
            assert_eq!(neighbors, switch_ports, "{}", switch.name);
            sessions += neighbors;
            let originates = conf.contains("  network ");
            let is_edge = topology.edges().iter().any(|e| e.id == switch.id);
            assert_eq!(originates, is_edge, "{}", switch.name);
        }
        // Each switch-to-switch link is configured from both ends: k=4 has 32 such links.
        assert_eq!(sessions, 2 * 32);
        let edge = &topology.edges()[0];
        let conf = bgpd_conf(&topology, edge);
        assert!(conf.contains(&format!(
            "router bgp {}",
            ofan_topology::plan::ASN_BASE + edge.id.0
        )));
        assert!(conf.contains("  network 10.0.0.0/24"), "{conf}");
        assert!(conf.contains("maximum-paths 4"));
        // The neighbour of an edge's first up-port is its aggregation switch, by its own ASN.
        let up = &topology.up_ports(edge.id)[0];
        let peer = topology.node(up.peer);
        let address = topology.port(up.peer, up.peer_port).address;
        assert!(conf.contains(&format!(" neighbor {address} remote-as {}", asn(peer))));
        assert!(zebra_conf(edge).contains("no zebra nexthop kernel enable"));
        // Valley-free: the filters sit on the up-neighbours only (edges: 2 aggs; cores: none).
        assert_eq!(conf.matches("route-map TO-ABOVE out").count(), 2);
        assert!(conf.contains(&format!(" neighbor {address} route-map FROM-ABOVE in")));
        let core = &topology.cores()[0];
        assert_eq!(
            bgpd_conf(&topology, core)
                .matches("route-map TO-ABOVE out")
                .count(),
            0
        );
    }
}
