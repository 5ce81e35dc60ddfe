//! `--routing bgp`: the fabric as an RFC 7938 eBGP Clos network, one BGP daemon per switch
//! namespace — FRR (zebra + bgpd) or BIRD 2 ([`BgpDaemon`]). This module writes the daemons'
//! configuration (pure), knows how they run inside a namespace and asks them about their
//! sessions; the lab's `procs` module starts and stops the processes.
//!
//! The plan ([`conf`] writes it):
//! - **ASNs by [`AsnPlan`]** (`up --asn-plan`): one private 4-byte ASN per switch (`unique`,
//!   `4200000000 + node id`: the AS_PATH of every route names every switch it crossed, so a
//!   switch can read its next-next hops from the paths it learns — the adaptive-routing
//!   framework draft's AS_PATH option), or RFC 7938 §5.2.1's (`rfc7938`: the cores share one
//!   ASN, each pod's aggregation switches one, every edge its own; an AS_PATH then names tiers).
//!   Loop prevention is plain eBGP's under both: no `allowas-in`.
//! - **Next-next hops by router ID** ([`ofan_control::nnh`]): every switch tags each route it
//!   receives with a large community naming the neighbour's router ID, replacing the tag the
//!   route came with; the route then carries its advertiser's own next hop, which the switch's
//!   BMP station reads. This is what names a next-next hop under either plan.
//! - Single-hop eBGP on every switch-to-switch link (the neighbour is the peer's address on the
//!   link's `/31`), datacenter timers (1 s keepalive, 3 s hold).
//! - Every edge originates its hosts' `/24` ([`ofan_topology::Topology::edge_prefix`]), whether
//!   or not the kernel has that exact prefix (`no bgp network import-check`: the hosts are
//!   connected `/31`s inside it).
//! - **Valley-free** (up, then down, never down-then-up): a route learned from a switch above
//!   (an up-port's neighbour) is tagged with the community [`FROM_ABOVE`] on the way in and never
//!   advertised to a switch above. Under RFC 7938's ASNs AS_PATH loop detection alone prevents
//!   valleys (a route that went down through a tier cannot climb back into it); with one ASN
//!   per switch nothing else would, and after a failure BGP would route through valleys
//!   (edge → agg → core → agg → edge → agg → core …) that the paper's fat tree and the static
//!   plan never use. With the filter (kept under both plans), a converged FIB is exactly the
//!   plan's.
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

pub mod conf;
mod paths;

use std::path::{Path, PathBuf};

pub use ofan_topology::plan::AsnPlan;

pub use self::conf::{
    bfdd_conf, bgpd_bfd_conf, bgpd_conf, bgpd_graceful_restart_conf, bird_conf, zebra_conf,
    COALESCE_MS, RESTART_TIME_S, STALEPATH_S, UPDATE_DELAY_S,
};
pub use self::paths::{expected_paths, reported_paths, PathRows};
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
