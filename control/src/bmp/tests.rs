//! The station's state machine on a real BMP stream: `testdata/frr-e-p0-0-refresh.bin` is what
//! FRR 8.4.4's bgpd of switch e-p0-0 in a k = 4 BGP lab sent to a station that connected after
//! its two sessions were up (Initiation, two Peer Ups), then mirrored after
//! `clear bgp * soft in`: per peer a BoRR, 14 UPDATEs (7 prefixes × 2 ADD-PATH paths), an EoRR,
//! and keepalives.

use std::net::{IpAddr, Ipv4Addr};

use bytes::Bytes;
use ofan_topology::plan::AsnPlan;
use ofan_topology::Topology;

use super::rib::{Rib, RibError};
use super::split_messages;
use crate::paths::LearnedPaths;

const STREAM: &[u8] = include_bytes!("testdata/frr-e-p0-0-refresh.bin");

/// The peers came up at this time (Unix seconds), before the station connected.
const PEERS_UP: f64 = 1_796_085_372.0;

fn messages() -> Vec<Bytes> {
    let mut buffer = STREAM.to_vec();
    let messages = split_messages(&mut buffer).expect("a clean stream");
    assert!(buffer.is_empty(), "the capture ends on a message boundary");
    messages
}

#[test]
fn the_stream_frames_into_its_messages() {
    let messages = messages();
    assert_eq!(messages.len(), 47);
    // A partial message stays in the buffer until the rest arrives.
    let mut buffer = STREAM[..40].to_vec();
    assert_eq!(split_messages(&mut buffer).unwrap().len(), 1);
    assert_eq!(buffer.len(), 5, "35-byte Initiation taken, 5 bytes wait");
}

#[test]
fn a_route_refresh_completes_peers_that_came_up_before_the_station() {
    let topology = Topology::fat_tree(4).unwrap();
    let edge = topology.edges()[0].id; // e-p0-0
    let mut rib = Rib::new(PEERS_UP + 1.0);
    let messages = messages();
    // Initiation and the two Peer Ups: both peers known, neither complete, ADD-PATH on.
    for message in &messages[..3] {
        rib.handle(message.clone()).unwrap();
    }
    let status = rib.status();
    assert_eq!(status.peers.len(), 2);
    assert!(status.peers.iter().all(|p| p.add_path && !p.complete));
    for message in &messages[3..] {
        rib.handle(message.clone()).unwrap();
    }
    let status = rib.status();
    assert_eq!(status.errors, 0, "{status:?}");
    assert!(
        status.peers.iter().all(|p| p.complete && p.paths == 14),
        "{status:?}"
    );
    assert_eq!(status.updates, 28);
    // What BGP says is what the plan says: every prefix, neighbour (ASN and BGP identifier)
    // and next-next hop by ASN; these routes carry no next-next router IDs.
    assert_eq!(rib.learned(), plan_by_asn(&topology, edge));
    let remote = &rib.learned().routes[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
    assert_eq!(remote.len(), 2);
    assert!(remote.values().all(|n| n.next_next.len() == 2));
}

#[test]
fn peers_up_after_the_station_started_are_complete() {
    let mut rib = Rib::new(PEERS_UP - 1.0);
    for message in messages().into_iter().take(3) {
        rib.handle(message).unwrap();
    }
    assert!(rib.status().peers.iter().all(|p| p.complete));
}

#[test]
fn bad_messages_are_errors_that_change_nothing() {
    let mut rib = Rib::new(0.0);
    for message in messages() {
        rib.handle(message).unwrap();
    }
    let before = rib.learned();
    let mut wrong_version = messages()[1].to_vec();
    wrong_version[0] = 1;
    assert_eq!(
        rib.handle(Bytes::from(wrong_version)),
        Err(RibError::Version(1))
    );
    // A Peer Up cut short, and a mirrored UPDATE whose BGP message is cut short.
    let peer_up = messages()[1].to_vec();
    let mut short = peer_up[..60].to_vec();
    short[1..5].copy_from_slice(&60_u32.to_be_bytes());
    assert!(rib.handle(Bytes::from(short)).is_err());
    let update = messages().iter().find(|m| m.len() == 123).unwrap().to_vec();
    let mut cut = update.clone();
    cut.truncate(100);
    cut[1..5].copy_from_slice(&100_u32.to_be_bytes());
    assert!(rib.handle(Bytes::from(cut)).is_err());
    assert_eq!(rib.status().errors, 3);
    assert_eq!(rib.learned(), before);
}

/// Every prefix of every length of the stream, and random bytes, never panic.
#[test]
fn truncations_and_noise_never_panic() {
    let mut rib = Rib::new(0.0);
    for message in messages() {
        for cut in 0..message.len() {
            let _ = rib.handle(message.slice(..cut));
        }
    }
    let mut state = 0x9E37_79B9_7F4A_7C15_u64;
    for _ in 0..20_000 {
        let mut noise = messages()[(state % 47) as usize].to_vec();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state as usize) % noise.len();
            noise[at] = (state >> 32) as u8;
        }
        let _ = rib.handle(Bytes::from(noise));
    }
}

/// FRR may mirror a new session's first UPDATEs before it sends the session's Peer Up: they are
/// kept and applied when the Peer Up arrives (a root test lost a whole peer's paths to this
/// before, under load).
#[test]
fn updates_before_their_peer_up_are_applied_when_it_comes() {
    let topology = Topology::fat_tree(4).unwrap();
    let messages = messages();
    let mut rib = Rib::new(PEERS_UP - 1.0);
    rib.handle(messages[0].clone()).unwrap(); // Initiation
    for message in &messages[3..] {
        rib.handle(message.clone()).unwrap();
    }
    assert!(rib.learned().routes.is_empty());
    assert_eq!(rib.status().unknown_peer, 44);
    for message in &messages[1..3] {
        rib.handle(message.clone()).unwrap(); // the Peer Ups
    }
    let status = rib.status();
    assert!(
        status.peers.iter().all(|p| p.complete && p.paths == 14),
        "{status:?}"
    );
    assert_eq!(
        rib.learned(),
        plan_by_asn(&topology, topology.edges()[0].id)
    );
}

/// A Peer Down for `peer_up`'s neighbour stamped `seconds` and the Peer Up's fraction (as FRR
/// stamps both: whole seconds of its monotonic clock, converted to real time): the Peer Up's
/// per-peer header, then reason 2 (closed locally without a NOTIFICATION) and its FSM event code.
fn peer_down(peer_up: &Bytes, seconds: u32) -> Bytes {
    let mut message = peer_up[..48].to_vec();
    message[5] = 2; // Peer Down Notification
    message[40..44].copy_from_slice(&seconds.to_be_bytes());
    message.extend_from_slice(&[2, 0, 0]);
    let len = u32::try_from(message.len()).unwrap();
    message[1..5].copy_from_slice(&len.to_be_bytes());
    Bytes::from(message)
}

/// FRR closes the losing connection of a collision after the winner's Peer Up, with a Peer Down
/// for the same address stamped with that connection's start: it must not end the session (a
/// repaired link's paths went missing in the lab test to this); a Peer Down stamped after the
/// session came up does.
#[test]
fn a_peer_down_stamped_before_the_session_came_up_is_about_another_connection() {
    let messages = messages();
    let mut rib = Rib::new(PEERS_UP - 1.0);
    for message in &messages {
        rib.handle(message.clone()).unwrap();
    }
    let learned = rib.learned();
    let up = messages[1].clone();
    let doppelganger = PEERS_UP as u32 - 3600;
    rib.handle(peer_down(&up, doppelganger)).unwrap();
    let status = rib.status();
    assert_eq!(status.stale_peer_down, 1);
    assert_eq!(status.peers.len(), 2);
    assert_eq!(rib.learned(), learned, "nothing changed");

    rib.handle(peer_down(&up, PEERS_UP as u32 + 5)).unwrap();
    let status = rib.status();
    assert_eq!((status.stale_peer_down, status.peers.len()), (1, 1));
    assert_ne!(rib.learned(), learned);
    // The same second as the Peer Up ends the session too (FRR stamps whole seconds).
    rib.handle(peer_down(&messages[2], PEERS_UP as u32))
        .unwrap();
    assert!(rib.status().peers.is_empty());
    assert!(rib.learned().routes.is_empty());
}

/// A Peer Down for a neighbour not up yet drops only what was mirrored before it.
#[test]
fn a_peer_down_before_the_peer_up_drops_only_earlier_messages() {
    let topology = Topology::fat_tree(4).unwrap();
    let messages = messages();
    let mut rib = Rib::new(PEERS_UP - 1.0);
    rib.handle(messages[0].clone()).unwrap();
    for message in &messages[3..] {
        rib.handle(message.clone()).unwrap();
    }
    // Stamped long before the mirrored messages: they stay.
    rib.handle(peer_down(&messages[1], PEERS_UP as u32 - 3600))
        .unwrap();
    rib.handle(peer_down(&messages[2], PEERS_UP as u32 - 3600))
        .unwrap();
    for message in &messages[1..3] {
        rib.handle(message.clone()).unwrap();
    }
    assert_eq!(
        rib.learned(),
        plan_by_asn(&topology, topology.edges()[0].id)
    );
    // Stamped after them: they go.
    let mut rib = Rib::new(PEERS_UP - 1.0);
    for message in &messages[3..] {
        rib.handle(message.clone()).unwrap();
    }
    rib.handle(peer_down(&messages[1], u32::MAX)).unwrap();
    rib.handle(peer_down(&messages[2], u32::MAX)).unwrap();
    for message in &messages[1..3] {
        rib.handle(message.clone()).unwrap();
    }
    assert!(rib.learned().routes.is_empty());
    // Stamped in the second of the first mirrored message (…379.658598; the Peer Down's
    // fraction is .320220, so it happened in [379.32, 380.32)): that message cannot be placed,
    // so the peer comes up incomplete.
    let mut rib = Rib::new(PEERS_UP - 1.0);
    for message in &messages[3..] {
        rib.handle(message.clone()).unwrap();
    }
    rib.handle(peer_down(&messages[1], 1_796_085_379)).unwrap();
    rib.handle(messages[1].clone()).unwrap();
    let status = rib.status();
    assert_eq!(status.peers.len(), 1);
    assert!(!status.peers[0].complete, "{status:?}");
}

/// What FRR 8.4.4's bgpd of core c-0 in a k = 4 lab sent about its neighbour a-p0-0
/// (100.64.0.32) while `link a-p0-0 c-0 down`/`up` ran 20 times on a machine kept busy (the
/// capture starts mid-session; other peers and keepalives left out): sessions that came up
/// twice in a row, Peer Ups without the received OPEN, a Peer Down after the Peer Up it is
/// not about. Before the station handled both, the neighbour ended up missing.
const FLAPS: &[u8] = include_bytes!("testdata/frr-c-0-flaps.bin");

#[test]
fn a_flapping_session_ends_with_its_paths_whatever_frr_sent() {
    let mut buffer = FLAPS.to_vec();
    let messages = split_messages(&mut buffer).expect("a clean stream");
    assert_eq!(messages.len(), 223);
    let mut rib = Rib::new(0.0);
    let mut bare_opens = 0;
    for message in messages {
        if message[5] == 3
            && message
                .windows(19)
                .any(|w| w[..16] == [0xff; 16] && w[16..] == [0, 19, 1])
        {
            bare_opens += 1;
        }
        rib.handle(message).unwrap();
    }
    let status = rib.status();
    assert_eq!(status.errors, 0, "{status:?}");
    assert_eq!(bare_opens, 6, "Peer Ups with FRR's bare OPEN header");
    assert_eq!(status.open_missing, 6);
    assert_eq!(status.stale_peer_down, 1);
    assert_eq!(status.peers.len(), 1);
    let peer = &status.peers[0];
    assert_eq!(peer.address, IpAddr::from([100, 64, 0, 32]));
    assert!(peer.complete && peer.add_path, "{peer:?}");
    // Pod 0's two prefixes, one path each (a-p0-0 sends only its own, not c-0's back).
    assert_eq!(peer.paths, 2);
}

/// The plan's paths as these captured routes give them: next-next hops by ASN only (the routes
/// carry no next-next router IDs).
fn plan_by_asn(topology: &Topology, edge: ofan_topology::NodeId) -> LearnedPaths {
    let mut plan = LearnedPaths::from_plan(topology, edge, AsnPlan::Unique);
    for neighbours in plan.routes.values_mut() {
        for paths in neighbours.values_mut() {
            paths.next_next_ids.clear();
        }
    }
    plan
}

/// A Route Mirroring message for `peer_up`'s neighbour: the Peer Up's per-peer header, then one
/// BGP Message TLV carrying `bgp`.
fn mirrored(peer_up: &Bytes, bgp: &[u8]) -> Bytes {
    let mut message = peer_up[..48].to_vec();
    message[5] = 6; // Route Mirroring
    message.extend_from_slice(&0_u16.to_be_bytes());
    message.extend_from_slice(&u16::try_from(bgp.len()).unwrap().to_be_bytes());
    message.extend_from_slice(bgp);
    let len = u32::try_from(message.len()).unwrap();
    message[1..5].copy_from_slice(&len.to_be_bytes());
    Bytes::from(message)
}

/// Under RFC 7938's ASNs the two paths a-p0-0 sends e-p0-0 towards pod 3 have the same AS_PATH
/// (the cores share an ASN): only their next-next-hop tags tell c-0 from c-1. Hand-made UPDATEs
/// on the captured sessions (ADD-PATH on).
#[test]
fn tagged_paths_name_the_neighbours_next_hops_by_router_id() {
    use crate::nnh::wire::{update, Announcement};
    use crate::nnh::NnhTag;
    let topology = Topology::fat_tree(4).unwrap();
    let node = |name: &str| topology.nodes().iter().find(|n| n.name == name).unwrap();
    let asn = |name: &str| AsnPlan::Rfc7938.asn(&topology, node(name));
    let messages = messages();
    let mut rib = Rib::new(PEERS_UP - 1.0);
    for message in &messages[..3] {
        rib.handle(message.clone()).unwrap();
    }
    let peer_up = &messages[1];
    let peer = Ipv4Addr::new(peer_up[28], peer_up[29], peer_up[30], peer_up[31]);
    let neighbour = rib.status().peers[0].asn;
    assert_eq!(IpAddr::V4(peer), rib.status().peers[0].address);
    let prefix = (Ipv4Addr::new(10, 3, 1, 0), 24);
    let as_path = [neighbour, asn("c-0"), asn("a-p3-0"), asn("e-p3-1")];
    let tag = |name: &str| NnhTag::new(node(name).loopback).parts();
    let announce = |rib: &mut Rib, path_id: u32, as_path: &[u32], tags: &[[u32; 3]]| {
        let bgp = update(&Announcement {
            prefix,
            path_id: Some(path_id),
            as_path,
            next_hop: peer,
            large_communities: tags,
        });
        rib.handle(mirrored(peer_up, &bgp)).unwrap();
    };
    announce(&mut rib, 1, &as_path, &[tag("c-0")]);
    announce(&mut rib, 2, &as_path, &[tag("c-1")]);
    // A longer path (prepended) is not one of the neighbour's best: its tag does not count.
    let prepended = [
        neighbour,
        neighbour,
        asn("c-0"),
        asn("a-p3-0"),
        asn("e-p3-1"),
    ];
    announce(&mut rib, 3, &prepended, &[tag("c-2")]);
    assert_eq!(rib.status().errors, 0, "{:?}", rib.status());
    let learned = rib.learned();
    let paths = &learned.routes[&prefix][&peer];
    assert_eq!(
        paths.next_next,
        [asn("c-0")].into(),
        "one ASN for both cores"
    );
    assert_eq!(
        paths.next_next_ids,
        [node("c-0").loopback, node("c-1").loopback].into()
    );
    // One best path without a tag: the router IDs are not known, the ASN stays.
    announce(&mut rib, 2, &as_path, &[]);
    let learned = rib.learned();
    let paths = &learned.routes[&prefix][&peer];
    assert!(paths.next_next_ids.is_empty(), "{paths:?}");
    assert_eq!(paths.next_next, [asn("c-0")].into());
}

/// What FRR 8.4.4's bgpd of e-p0-0 in a k = 4 lab under RFC 7938's ASNs
/// (`up --routing bgp --asn-plan rfc7938`, next-next-hop tags on every route) sent to a second
/// BMP target added after its sessions were up (`bmp targets capture` / `bmp mirror` /
/// `bmp connect 127.0.0.1 port 11020` through vtysh, a listener on that port in the switch's
/// namespace), then mirrored after `clear bgp * soft in`, cut at the last whole message.
const TAGGED: &[u8] = include_bytes!("testdata/frr-e-p0-0-rfc7938-refresh.bin");

/// The tags of a real stream name every next-next hop by router ID: the station's table is the
/// plan's under RFC 7938's ASNs, router IDs included — which the AS_PATHs alone could not say
/// (the cores behind an aggregation switch are one ASN).
#[test]
fn a_tagged_stream_under_rfc7938_names_next_next_hops_as_the_plan_does() {
    let topology = Topology::fat_tree(4).unwrap();
    let edge = topology.edges()[0].id; // e-p0-0
    let mut buffer = TAGGED.to_vec();
    let messages = split_messages(&mut buffer).expect("a clean stream");
    assert!(buffer.is_empty());
    // The sessions came up before this target connected: incomplete until the refresh ends.
    let mut rib = Rib::new(f64::INFINITY);
    for message in messages {
        rib.handle(message).unwrap();
    }
    let status = rib.status();
    assert_eq!(status.errors, 0, "{status:?}");
    assert!(
        status.peers.iter().all(|p| p.complete && p.add_path),
        "{status:?}"
    );
    let plan = LearnedPaths::from_plan(&topology, edge, AsnPlan::Rfc7938);
    assert_eq!(rib.learned(), plan);
    let remote = &rib.learned().routes[&(Ipv4Addr::new(10, 3, 1, 0), 24)];
    assert!(remote
        .values()
        .all(|n| n.next_next.len() == 1 && n.next_next_ids.len() == 2));
}
