//! The routing daemons' configuration files (pure): FRR's bgpd, zebra and bfdd, and BIRD's,
//! for one switch of a topology under an [`AsnPlan`] (see the module documentation of
//! [`super`] for the plan they implement).

use std::fmt::Write as _;

use ofan_control::nnh::{self, NnhTag};
use ofan_topology::plan::AsnPlan;
use ofan_topology::{Node, Topology};

use super::{Bfd, BFD_PROFILE, BMP_HOST, BMP_PORT, FROM_ABOVE};

/// FRR's expanded large-community list that matches every next-next-hop tag
/// ([`nnh::MATCH_ANY`]): what a switch deletes from a route before it tags it.
pub const NNH_LIST: &str = "NNH";

/// bgpd's `maximum-paths`: with ADD-PATH a switch receives each of a neighbour's paths, so an
/// edge of a fat tree holds (k/2)² equal paths to a remote pod (k/2 aggregations × k/2 cores
/// each), all of which must count as multipath; 64 is FRR's limit.
fn maximum_paths(topology: &Topology) -> usize {
    let half = usize::from(topology.k() / 2).max(1);
    (half * half).clamp(usize::from(topology.k()).max(1), 64)
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

/// The route-map a switch applies to what it receives from `peer` (FRR): delete any
/// next-next-hop tag, then (`on-match next`, so that the deletion cannot undo it) tag the route
/// with the peer's router ID and, from a switch above, [`FROM_ABOVE`].
fn inbound_route_map(name: &str, peer: &Peer<'_>) -> String {
    let mut map = String::new();
    let _ = writeln!(map, "route-map {name} permit 10");
    let _ = writeln!(map, " set large-comm-list {NNH_LIST} delete");
    let _ = writeln!(map, " on-match next");
    let _ = writeln!(map, "route-map {name} permit 20");
    let _ = writeln!(
        map,
        " set large-community {} additive",
        NnhTag::new(peer.node.loopback)
    );
    if peer.above {
        let _ = writeln!(map, " set community {FROM_ABOVE} additive");
    }
    map
}

/// The name of the route-map of what a switch receives from `peer`.
fn inbound_name(peer: &Peer<'_>) -> String {
    format!("FROM-{}", peer.node.name)
}

/// BIRD's configuration for switch `switch` of `topology`: the same plan as FRR's — the ASNs
/// of `asns`, single-hop eBGP, the next-next-hop tag on every route received, the edge's `/24` originated (a static blackhole route in BIRD's
/// table, never exported to the kernel), the valley-free community filters, BGP routes merged
/// into multipath kernel routes (`merge paths yes limit 64`), and `error wait time 1,5` so a
/// session re-establishes within seconds after a flap. Graceful restart as FRR's: every session
/// restarts gracefully (`graceful restart on`, [`RESTART_TIME_S`]), and the kernel protocol
/// leaves its routes in the kernel when BIRD ends (`persist`) and, in a recovery after a crash
/// (`bird -R`), keeps them until BGP has recovered (`graceful restart on`). With `bfd`, a
/// `protocol bfd` at its intervals and `bfd on` in every BGP session.
#[must_use]
pub fn bird_conf(topology: &Topology, asns: AsnPlan, switch: &Node, bfd: Option<Bfd>) -> String {
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
        let [global, function, id] = NnhTag::new(peer.node.loopback).parts();
        let above = if peer.above {
            format!(" bgp_community.add(({a},{b}));")
        } else {
            String::new()
        };
        let export = if peer.above {
            "export filter to_above;"
        } else {
            "export all;"
        };
        let filters = format!(
            "import filter {{ bgp_large_community.delete([({global}, {function}, *)]); bgp_large_community.add(({global}, {function}, {id}));{above} accept; }}; {export}"
        );
        let _ = writeln!(
            conf,
            "protocol bgp {} {{ local {} as {}; neighbor {} as {}; hold time 3; keepalive time 1; connect retry time 1; error wait time 1,5; graceful restart on; graceful restart time {RESTART_TIME_S};{bfd_on} ipv4 {{ {filters} }}; }}",
            peer.node.name.replace('-', "_"),
            peer.local,
            asns.asn(topology, switch),
            peer.address,
            asns.asn(topology, peer.node)
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
pub fn bgpd_bfd_conf(topology: &Topology, asns: AsnPlan, switch: &Node) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "router bgp {}", asns.asn(topology, switch));
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
pub fn bgpd_graceful_restart_conf(
    topology: &Topology,
    asns: AsnPlan,
    switch: &Node,
    restarting: bool,
) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "router bgp {}", asns.asn(topology, switch));
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

/// bgpd's configuration for switch `switch` of `topology` under `asns`: the sessions, the
/// edge's prefix, ADD-PATH to every neighbour, the inbound route-maps that tag every route
/// with its sender's router ID (and mark what comes from above), the valley-free outbound
/// filter towards the switches above, large communities sent to every neighbour (FRR sends
/// them by default; said explicitly because the tags depend on it), and the BMP station.
#[must_use]
pub fn bgpd_conf(topology: &Topology, asns: AsnPlan, switch: &Node) -> String {
    let mut conf = String::new();
    let _ = writeln!(conf, "! bgpd of {} (written by ofan-lab)", switch.name);
    let _ = writeln!(conf, "frr defaults datacenter");
    let _ = writeln!(conf, "hostname {}", switch.name);
    // Route-map changes take effect at once (the default waits 5 s).
    let _ = writeln!(conf, "bgp route-map delay-timer 0");
    let _ = writeln!(conf, "router bgp {}", asns.asn(topology, switch));
    let _ = writeln!(conf, " bgp router-id {}", switch.loopback);
    let _ = writeln!(conf, " no bgp ebgp-requires-policy");
    // Session changes and their reasons (hold timer, notification) in the bgpd log.
    let _ = writeln!(conf, " bgp log-neighbor-changes");
    let _ = writeln!(conf, " no bgp network import-check");
    let _ = writeln!(conf, " bgp bestpath as-path multipath-relax");
    let peers = peers(topology, switch);
    for Peer { node, address, .. } in &peers {
        let _ = writeln!(
            conf,
            " neighbor {address} remote-as {}",
            asns.asn(topology, node)
        );
        let _ = writeln!(conf, " neighbor {address} description {}", node.name);
        let _ = writeln!(conf, " neighbor {address} timers 1 3");
        let _ = writeln!(conf, " neighbor {address} timers connect 1");
    }
    let _ = writeln!(conf, " address-family ipv4 unicast");
    if topology.edges().iter().any(|edge| edge.id == switch.id) {
        let (prefix, len) = topology.edge_prefix(switch.id);
        let _ = writeln!(conf, "  network {prefix}/{len}");
    }
    for peer in &peers {
        let address = peer.address;
        // Every path, not only the best: the receiver learns all its next-next hops.
        let _ = writeln!(conf, "  neighbor {address} addpath-tx-all-paths");
        let _ = writeln!(conf, "  neighbor {address} send-community all");
        let _ = writeln!(
            conf,
            "  neighbor {address} route-map {} in",
            inbound_name(peer)
        );
        if peer.above {
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
    let _ = writeln!(
        conf,
        "bgp large-community-list expanded {NNH_LIST} permit {}",
        nnh::MATCH_ANY
    );
    for peer in &peers {
        conf.push_str(&inbound_route_map(&inbound_name(peer), peer));
    }
    let _ = writeln!(conf, "route-map TO-ABOVE deny 10");
    let _ = writeln!(conf, " match community FROM-ABOVE");
    let _ = writeln!(conf, "route-map TO-ABOVE permit 20");
    conf
}

#[cfg(test)]
mod tests {
    use super::super::{daemons, BgpDaemon, Daemon};
    use super::*;

    const UNIQUE: AsnPlan = AsnPlan::Unique;

    fn asn(topology: &Topology, node: &Node) -> u32 {
        UNIQUE.asn(topology, node)
    }

    #[test]
    fn bird_has_the_same_plan() {
        let topology = Topology::fat_tree(4).unwrap();
        for switch in topology.switches() {
            let bird = bird_conf(&topology, UNIQUE, switch, None);
            let frr = bgpd_conf(&topology, UNIQUE, switch);
            assert_eq!(
                bird.matches("protocol bgp ").count(),
                frr.matches("remote-as").count(),
                "{}",
                switch.name
            );
            assert_eq!(
                bird.matches("bgp_community.add((64512,1))").count(),
                frr.matches(" set community 64512:1 additive").count()
            );
            assert_eq!(
                bird.matches("bgp_large_community.delete([(4200000000, 1, *)])")
                    .count(),
                frr.matches(" set large-comm-list NNH delete").count()
            );
            assert_eq!(bird.contains("blackhole"), frr.contains("  network "));
        }
        let edge = &topology.edges()[0];
        let bird = bird_conf(&topology, UNIQUE, edge, None);
        assert!(bird.contains("route 10.0.0.0/24 blackhole"), "{bird}");
        assert!(!bird.contains("bfd"), "{bird}");
        assert!(bird.contains(&format!("as {};", asn(&topology, edge))));
        // Routes from a-p0-0 (10.255.0.8) are tagged with its router ID.
        let a_p0_0 = &topology.aggregations()[0];
        assert_eq!(u32::from(a_p0_0.loopback), 184_483_848);
        assert!(
            bird.contains("bgp_large_community.add((4200000000, 1, 184483848));"),
            "{bird}"
        );
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
            let sessions = bgpd_conf(&topology, UNIQUE, switch)
                .matches("remote-as")
                .count();
            // FRR: one BFD session per BGP neighbour, in the same `router bgp`.
            let frr = bgpd_bfd_conf(&topology, UNIQUE, switch);
            assert!(
                frr.starts_with(&format!("router bgp {}\n", asn(&topology, switch))),
                "{frr}"
            );
            assert_eq!(frr.matches(" bfd profile ofan").count(), sessions, "{frr}");
            // BIRD: one bfd protocol, `bfd on` in every BGP session.
            let bird = bird_conf(&topology, UNIQUE, switch, Some(bfd));
            assert_eq!(bird.matches("protocol bfd ").count(), 1);
            assert_eq!(bird.matches(" bfd on;").count(), sessions, "{bird}");
            assert!(bird.contains("interval 100 ms; multiplier 3;"), "{bird}");
        }
        let edge = &topology.edges()[0];
        let up = &topology.up_ports(edge.id)[0];
        let address = topology.port(up.peer, up.peer_port).address;
        assert!(bgpd_bfd_conf(&topology, UNIQUE, edge)
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
        let fresh = bgpd_graceful_restart_conf(&topology, UNIQUE, edge, false);
        assert!(
            fresh.starts_with(&format!("router bgp {}\n", asn(&topology, edge))),
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
        let restarting = bgpd_graceful_restart_conf(&topology, UNIQUE, edge, true);
        assert!(restarting.contains(" update-delay 10\n"), "{restarting}");
        let bird = bird_conf(&topology, UNIQUE, edge, None);
        assert_eq!(
            bird.matches("graceful restart on; graceful restart time 15;")
                .count(),
            2,
            "{bird}"
        );
        assert!(bird.contains("persist; graceful restart on; }"), "{bird}");
    }

    #[test]
    fn every_switch_link_is_one_session_and_edges_originate_their_hosts() {
        let topology = Topology::fat_tree(4).unwrap();
        let mut asns = std::collections::BTreeSet::new();
        let mut sessions = 0;
        for switch in topology.switches() {
            assert!(asns.insert(asn(&topology, switch)), "ASNs are unique");
            let conf = bgpd_conf(&topology, UNIQUE, switch);
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
        let conf = bgpd_conf(&topology, UNIQUE, edge);
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
        assert!(conf.contains(&format!(
            " neighbor {address} remote-as {}",
            asn(&topology, peer)
        )));
        assert!(zebra_conf(edge).contains("no zebra nexthop kernel enable"));
        // Valley-free: the filters sit on the up-neighbours only (edges: 2 aggs; cores: none).
        assert_eq!(conf.matches("route-map TO-ABOVE out").count(), 2);
        assert!(conf.contains(&format!(" neighbor {address} route-map FROM-a-p0-0 in")));
        let core = &topology.cores()[0];
        assert_eq!(
            bgpd_conf(&topology, UNIQUE, core)
                .matches("route-map TO-ABOVE out")
                .count(),
            0
        );
    }

    /// Every route a switch receives is tagged with its sender's router ID after any older tag
    /// is deleted — in that order, whatever order FRR applies one entry's `set`s in — and the
    /// valley-free marking of what comes from above rides in the same route-map.
    #[test]
    fn every_received_route_is_tagged_with_its_senders_router_id() {
        let topology = Topology::fat_tree(4).unwrap();
        let agg = topology
            .aggregations()
            .iter()
            .find(|node| node.name == "a-p0-0")
            .unwrap();
        let conf = bgpd_conf(&topology, UNIQUE, agg);
        assert!(
            conf.contains("bgp large-community-list expanded NNH permit ^4200000000:1:[0-9]+$\n")
        );
        for peer in peers(&topology, agg) {
            let name = &peer.node.name;
            let address = peer.address;
            for line in [
                format!("  neighbor {address} route-map FROM-{name} in\n"),
                format!("  neighbor {address} send-community all\n"),
            ] {
                assert!(conf.contains(&line), "{line:?} missing:\n{conf}");
            }
            let tag = NnhTag::new(peer.node.loopback);
            let mut map = format!(
                "route-map FROM-{name} permit 10\n set large-comm-list NNH delete\n on-match next\n\
                 route-map FROM-{name} permit 20\n set large-community {tag} additive\n"
            );
            if peer.above {
                map.push_str(" set community 64512:1 additive\n");
            }
            assert!(conf.contains(&map), "{map} missing:\n{conf}");
            // Only towards the cores is what came from above held back.
            assert_eq!(
                conf.contains(&format!("  neighbor {address} route-map TO-ABOVE out\n")),
                peer.node.role == ofan_topology::Role::Core
            );
        }
        // c-0's tag, as the BMP station reads it back.
        let c0 = &topology.cores()[0];
        assert!(conf.contains(&format!(
            " set large-community 4200000000:1:{} additive\n",
            u32::from(c0.loopback)
        )));
    }

    /// Under RFC 7938's plan the sessions name the shared ASNs, and nothing else changes.
    #[test]
    fn rfc7938_sessions_name_the_shared_asns() {
        let topology = Topology::fat_tree(4).unwrap();
        let plan = AsnPlan::Rfc7938;
        let core_asn = plan.asn(&topology, &topology.cores()[0]);
        for agg in topology.aggregations() {
            let conf = bgpd_conf(&topology, plan, agg);
            let pod_asn = plan.asn(&topology, agg);
            assert!(conf.contains(&format!("router bgp {pod_asn}\n")), "{conf}");
            // Two cores above, one ASN; two edges below, each its own.
            assert_eq!(
                conf.matches(&format!("remote-as {core_asn}\n")).count(),
                2,
                "{conf}"
            );
            let unique = bgpd_conf(&topology, UNIQUE, agg);
            let strip = |text: &str| {
                text.lines()
                    .filter(|line| !line.contains("router bgp") && !line.contains("remote-as"))
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            assert_eq!(strip(&conf), strip(&unique));
            assert!(!conf.contains("allowas-in"));
            let bird = bird_conf(&topology, plan, agg, None);
            assert_eq!(bird.matches(&format!("as {core_asn};")).count(), 2);
        }
    }
}
