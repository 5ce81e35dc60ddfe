//! What the station knows, built from BMP messages (pure: bytes in, state out).
//!
//! Per monitored peer (a BGP neighbour of the local daemon) the Adj-RIB-In as the daemon
//! received it: every (prefix, ADD-PATH id) with its AS_PATH and its next-next-hop tag
//! ([`crate::nnh`]), rebuilt from the BGP UPDATEs the
//! daemon mirrors (BMP route mirroring, RFC 7854 §4.7). Mirroring rather than route monitoring
//! because FRR 8.4 drops the ADD-PATH id from route monitoring and reports one unpredictable path
//! of several; mirrored messages are the peer's own bytes, so every path arrives, and the ADD-PATH
//! state of the session is read from the OPEN messages of its Peer Up notification.
//!
//! A peer whose session came up before the BMP session did is **incomplete**: its earlier UPDATEs
//! were never mirrored. An enhanced route refresh (RFC 7313; `clear bgp … soft in` in FRR) makes
//! the peer send its routes again between a BoRR and an EoRR marker; at EoRR the peer's paths are
//! exactly those re-sent and it is complete. A "messages lost" mirroring TLV makes a peer
//! incomplete again.
//!
//! A **Peer Down ends only what came before it.** FRR 8.4 sends a Peer Down for every backward
//! transition of any of its connections to a neighbour, and when both ends of a repaired link
//! connect at once (a BGP connection collision, RFC 4271 §6.8) the losing connection is closed
//! *after* the winner's Peer Up — a Peer Down for the same address, stamped with that
//! connection's start (never established: the daemon's epoch), arriving after the session it is
//! not about came up. So a Peer Down stamped before the known session's Peer Up is counted
//! (`stale_peer_down`) and changes nothing, and one for a peer not up yet drops only the early
//! messages mirrored before it.
//!
//! A **Peer Up may lack an OPEN**: FRR 8.4 loses the received OPEN of a session that won a
//! connection collision (it logs "missing RX OPEN message") and sends a bare 19-byte OPEN header
//! in its place, which a strict parser rejects — the whole session's paths were lost to this.
//! The peer is up all the same; what its OPEN would have said (4-octet ASN, ADD-PATH) is taken
//! from the neighbour's previous session in this BMP session, else from the local speaker's
//! OPEN (a fabric whose speakers are configured alike, as the lab's are), and counted as
//! `open_missing`.
//!
//! Decoding uses `bgpkit-parser` (a maintained BGP/BMP parser) for the BMP headers and the BGP
//! messages; the TLV loop of a mirroring message is read here because the crate parses mirrored
//! UPDATEs without ADD-PATH, which this fabric uses, and the Peer Up body because the crate
//! rejects FRR's bare OPEN header (above).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use bgpkit_parser::models::capabilities::AddPathSendReceive;
use bgpkit_parser::models::{
    Afi, AsPathSegment, AsnLength, BgpMessage, BgpOpenMessage, BgpUpdateMessage, CapabilityValue,
    NetworkPrefix, ParamValue, Safi,
};
use bgpkit_parser::parser::bgp::parse_bgp_message;
use bgpkit_parser::parser::bmp::messages::{
    parse_bmp_common_header, parse_per_peer_header, BmpMsgType,
};
use bytes::{Buf, Bytes};
use serde::{Deserialize, Serialize};

use crate::nnh::NnhTag;
use crate::paths::{LearnedPaths, NeighborPaths, Prefix};

/// Mirrored messages kept per peer that is not up yet.
pub const MAX_PENDING: usize = 4096;

/// The BMP version this station speaks (RFC 7854).
pub const VERSION: u8 = 3;

/// A message the station could not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RibError {
    /// Not BMP version 3.
    #[error("BMP version {0}, expected 3")]
    Version(u8),
    /// A BMP header or body that does not parse.
    #[error("malformed BMP message: {0}")]
    Bmp(String),
    /// A mirrored BGP message that does not parse.
    #[error("malformed mirrored BGP message from {peer}: {reason}")]
    Bgp {
        /// The monitored peer.
        peer: IpAddr,
        /// What is wrong.
        reason: String,
    },
}

/// An AS_PATH (sequences flattened, sets in order).
type AsPath = Vec<u32>;

/// One path of a peer's Adj-RIB-In.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Path {
    as_path: AsPath,
    /// The peer's own next hop on this path, by router ID (the route's tag), if it names one.
    next_next_id: Option<std::net::Ipv4Addr>,
}

/// One monitored peer.
#[derive(Debug, Clone, Default)]
struct Peer {
    /// When the session came up (the Peer Up's timestamp, seconds since the Unix epoch).
    up_at: f64,
    asn: u32,
    /// Its BGP identifier (the per-peer header's, from its OPEN).
    router_id: Option<std::net::Ipv4Addr>,
    local_asn: u32,
    add_path: bool,
    complete: bool,
    /// Between BoRR and EoRR: the paths not re-sent yet.
    stale: Option<BTreeSet<(Prefix, u32)>>,
    paths: BTreeMap<(Prefix, u32), Path>,
}

/// Counters and per-peer state, for `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RibStatus {
    /// BMP messages handled.
    pub messages: u64,
    /// Mirrored UPDATEs applied.
    pub updates: u64,
    /// Messages that could not be used (see `last_error`).
    pub errors: u64,
    /// Mirrored messages from a peer before its Peer Up: kept and applied when it comes (FRR
    /// may send a new session's first UPDATEs before its Peer Up).
    pub unknown_peer: u64,
    /// Peer Downs stamped before the session they name came up: about another connection to
    /// the same neighbour (see the module documentation), so ignored.
    #[serde(default)]
    pub stale_peer_down: u64,
    /// Peer Ups without one of their OPEN messages (an FRR 8.4 race): the neighbour's
    /// capabilities were taken from its previous session, else from the other side's OPEN.
    #[serde(default)]
    pub open_missing: u64,
    /// The last error.
    pub last_error: Option<String>,
    /// The monitored peers.
    pub peers: Vec<PeerStatus>,
}

/// One monitored peer in [`RibStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// The peer's address.
    pub address: IpAddr,
    /// The peer's ASN.
    pub asn: u32,
    /// ADD-PATH negotiated towards the daemon (the peer sends every path).
    pub add_path: bool,
    /// Every path the peer sent was seen (see the module documentation).
    pub complete: bool,
    /// Paths in its Adj-RIB-In.
    pub paths: usize,
}

/// The station's state for one BMP session.
#[derive(Debug, Clone, Default)]
pub struct Rib {
    /// When the BMP session started (seconds since the Unix epoch).
    session_start: f64,
    peers: BTreeMap<IpAddr, Peer>,
    /// Mirrored bodies of peers not up yet with their timestamps, in arrival order; `None` once
    /// more than [`MAX_PENDING`] arrived (the peer will be incomplete).
    pending: BTreeMap<IpAddr, Option<Vec<(f64, Bytes)>>>,
    /// Per neighbour, what its last session's OPENs said (for a Peer Up without them).
    capabilities: BTreeMap<IpAddr, KnownCapabilities>,
    status: RibStatus,
}

/// What a speaker's OPEN says that the station needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Capabilities {
    /// Its 4-octet ASN.
    asn: u32,
    /// It announces ADD-PATH for IPv4 unicast, sending.
    add_path_send: bool,
    /// It announces ADD-PATH for IPv4 unicast, receiving.
    add_path_receive: bool,
}

impl Capabilities {
    fn of(open: &BgpOpenMessage) -> Self {
        Self {
            asn: four_octet_asn(open),
            add_path_send: add_path(open, AddPathSendReceive::Send),
            add_path_receive: add_path(open, AddPathSendReceive::Receive),
        }
    }
}

/// A neighbour's session as its OPENs described it: the local speaker's and the neighbour's.
#[derive(Debug, Clone, Copy)]
struct KnownCapabilities {
    local: Capabilities,
    remote: Capabilities,
}

/// The OPEN messages of a Peer Up (RFC 7854 §4.10): sent by the local speaker and received
/// from the neighbour; `None` for one the daemon did not keep (FRR 8.4 then sends a bare
/// 19-byte OPEN header and logs "missing RX OPEN message").
struct PeerUpOpens {
    sent: Option<BgpOpenMessage>,
    received: Option<BgpOpenMessage>,
}

impl PeerUpOpens {
    /// Parses a Peer Up body after its per-peer header: local address, ports, two OPENs
    /// (information TLVs after them are not needed).
    fn parse(mut body: Bytes) -> Result<Self, RibError> {
        const PORTS_AND_ADDRESS: usize = 16 + 2 + 2;
        if body.remaining() < PORTS_AND_ADDRESS {
            return Err(RibError::Bmp("Peer Up cut short".into()));
        }
        body.advance(PORTS_AND_ADDRESS);
        let sent = Self::open(&mut body)?;
        let received = Self::open(&mut body)?;
        Ok(Self { sent, received })
    }

    fn open(body: &mut Bytes) -> Result<Option<BgpOpenMessage>, RibError> {
        const HEADER: usize = 19;
        let len = match body.get(16..18) {
            Some(&[high, low]) => usize::from(u16::from_be_bytes([high, low])),
            _ => return Err(RibError::Bmp("Peer Up without its OPEN messages".into())),
        };
        if len < HEADER || len > body.remaining() {
            return Err(RibError::Bmp(format!(
                "Peer Up with an OPEN of {len} bytes"
            )));
        }
        let mut message = body.split_to(len);
        if len == HEADER {
            return Ok(None);
        }
        match parse_bgp_message(&mut message, false, &AsnLength::Bits32) {
            Ok(BgpMessage::Open(open)) => Ok(Some(open)),
            Ok(_) => Err(RibError::Bmp("Peer Up with a non-OPEN message".into())),
            Err(e) => Err(RibError::Bmp(format!("Peer Up with a bad OPEN: {e}"))),
        }
    }
}

impl Rib {
    /// The state of a BMP session accepted at `session_start` (seconds since the Unix epoch):
    /// peers that came up before it are incomplete.
    #[must_use]
    pub fn new(session_start: f64) -> Self {
        Self {
            session_start,
            ..Self::default()
        }
    }

    /// Applies one whole BMP message (common header included).
    ///
    /// # Errors
    /// The message is not BMP version 3 or does not parse; the state is unchanged, the error
    /// counted.
    pub fn handle(&mut self, message: Bytes) -> Result<(), RibError> {
        self.status.messages += 1;
        let result = self.apply(message);
        if let Err(error) = &result {
            self.status.errors += 1;
            self.status.last_error = Some(error.to_string());
        }
        result
    }

    fn apply(&mut self, message: Bytes) -> Result<(), RibError> {
        let bmp = |e: &dyn std::fmt::Display| RibError::Bmp(e.to_string());
        match message.first() {
            Some(&VERSION) => {}
            Some(&version) => return Err(RibError::Version(version)),
            None => return Err(RibError::Bmp("empty message".into())),
        }
        let mut data = message.clone();
        let header = parse_bmp_common_header(&mut data).map_err(|e| bmp(&e))?;
        let body_len = (header.msg_len as usize)
            .checked_sub(6)
            .filter(|&len| len <= data.remaining())
            .ok_or_else(|| RibError::Bmp(format!("length {} does not fit", header.msg_len)))?;
        let mut body = data.split_to(body_len);
        match header.msg_type {
            BmpMsgType::RouteMirroringMessage => {
                let peer = parse_per_peer_header(&mut body).map_err(|e| bmp(&e))?;
                self.mirrored(peer.peer_ip, peer.timestamp, body)
            }
            BmpMsgType::PeerUpNotification => {
                let peer = parse_per_peer_header(&mut body).map_err(|e| bmp(&e))?;
                let opens = PeerUpOpens::parse(body)?;
                self.peer_up(
                    peer.peer_ip,
                    (peer.peer_asn.to_u32(), peer.peer_bgp_id),
                    peer.timestamp,
                    &opens,
                )
            }
            BmpMsgType::PeerDownNotification => {
                let peer = parse_per_peer_header(&mut body).map_err(|e| bmp(&e))?;
                self.peer_down(peer.peer_ip, peer.timestamp);
                Ok(())
            }
            BmpMsgType::TerminationMessage => {
                self.peers.clear();
                self.pending.clear();
                self.capabilities.clear();
                Ok(())
            }
            // Initiation, statistics, route monitoring (not configured): nothing to learn.
            _ => Ok(()),
        }
    }

    /// A Peer Up for the neighbour at `address` (its ASN and BGP identifier), up since `at`,
    /// with its OPEN messages.
    fn peer_up(
        &mut self,
        address: IpAddr,
        (asn, router_id): (u32, std::net::Ipv4Addr),
        at: f64,
        opens: &PeerUpOpens,
    ) -> Result<(), RibError> {
        let known = self.capabilities.get(&address).copied();
        if opens.sent.is_none() || opens.received.is_none() {
            self.status.open_missing += 1;
        }
        let sent = opens.sent.as_ref().map(Capabilities::of);
        let received = opens.received.as_ref().map(Capabilities::of);
        // What is missing: this neighbour's last session, else the other side's OPEN (a fabric
        // configured alike), else another peer's local ASN.
        let local = sent.or(known.map(|k| k.local)).or(received);
        let remote = received.or(known.map(|k| k.remote)).or(sent);
        let mut local = local.unwrap_or_default();
        if local.asn == 0 {
            local.asn = self.peers.values().map(|p| p.local_asn).max().unwrap_or(0);
        }
        let remote = remote.unwrap_or_default();
        self.capabilities
            .insert(address, KnownCapabilities { local, remote });
        let pending = self.pending.remove(&address);
        let state = Peer {
            up_at: at,
            asn,
            router_id: Some(router_id),
            local_asn: local.asn,
            add_path: remote.add_path_send && local.add_path_receive,
            // Up before this BMP session, or more early messages than kept.
            complete: at >= self.session_start && !matches!(pending, Some(None)),
            ..Peer::default()
        };
        self.peers.insert(address, state);
        for (at, body) in pending.flatten().unwrap_or_default() {
            self.mirrored(address, at, body)?;
        }
        Ok(())
    }

    /// A Peer Down stamped `at`: it ends the known session only if that came up no later, and
    /// drops only the early messages mirrored before it (see the module documentation).
    ///
    /// FRR stamps a Peer Up or Down with the session's up or down time in whole seconds of its
    /// monotonic clock, converted to real time (so both carry the same fraction), and mirrored
    /// messages with their real arrival time: the down happened in `[at, at + 1)`. An early
    /// message from that second cannot be placed; the peer is then left incomplete, as if
    /// messages were lost, and the next route refresh completes it.
    fn peer_down(&mut self, address: IpAddr, at: f64) {
        match self.peers.get(&address) {
            Some(peer) if peer.up_at > at => self.status.stale_peer_down += 1,
            Some(_) => {
                self.peers.remove(&address);
            }
            None => {}
        }
        let Some(kept) = self.pending.get_mut(&address) else {
            return;
        };
        if let Some(bodies) = kept {
            if bodies.iter().any(|(t, _)| (at..at + 1.0).contains(t)) {
                *kept = None;
            } else {
                bodies.retain(|(mirrored_at, _)| *mirrored_at >= at + 1.0);
            }
        }
    }

    /// A route-mirroring body stamped `at`: TLVs of a BGP message (type 0) or information
    /// (type 1).
    fn mirrored(&mut self, address: IpAddr, at: f64, mut body: Bytes) -> Result<(), RibError> {
        let Some(peer) = self.peers.get_mut(&address) else {
            self.status.unknown_peer += 1;
            let kept = self
                .pending
                .entry(address)
                .or_insert_with(|| Some(Vec::new()));
            match kept {
                Some(bodies) if bodies.len() < MAX_PENDING => bodies.push((at, body)),
                _ => *kept = None,
            }
            return Ok(());
        };
        let bgp_error = |reason: String| RibError::Bgp {
            peer: address,
            reason,
        };
        while body.remaining() >= 4 {
            let kind = body.get_u16();
            let len = usize::from(body.get_u16());
            if len > body.remaining() {
                return Err(RibError::Bmp(format!(
                    "mirroring TLV of {len} bytes overruns"
                )));
            }
            let mut value = body.split_to(len);
            match kind {
                0 => {
                    let message = parse_bgp_message(&mut value, peer.add_path, &AsnLength::Bits32)
                        .map_err(|e| bgp_error(e.to_string()))?;
                    match message {
                        BgpMessage::Update(update) => {
                            peer.update(&update);
                            self.status.updates += 1;
                        }
                        BgpMessage::RouteRefresh(refresh) if refresh.afi == 1 => {
                            match refresh.subtype {
                                1 => peer.stale = Some(peer.paths.keys().copied().collect()),
                                2 => {
                                    for key in peer.stale.take().unwrap_or_default() {
                                        peer.paths.remove(&key);
                                    }
                                    peer.complete = true;
                                }
                                _ => {}
                            }
                        }
                        _ => {}
                    }
                }
                // Information: 1 = messages lost.
                1 if value.remaining() >= 2 && value.get_u16() == 1 => peer.complete = false,
                _ => {}
            }
        }
        Ok(())
    }

    /// The paths learned so far (see [`LearnedPaths`]): per prefix and peer, the peer's
    /// shortest loop-free paths (by AS_PATH length, prepending included, as BGP selects), the
    /// first ASN after the peer's own (prepending skipped) as next-next hops, and their tags as
    /// next-next hops by router ID — only when every one of those paths carries one (else the
    /// set would silently lack a next hop; the ASNs then stand alone).
    #[must_use]
    pub fn learned(&self) -> LearnedPaths {
        let mut learned = LearnedPaths::default();
        for (address, peer) in &self.peers {
            let IpAddr::V4(address) = *address else {
                continue;
            };
            let mut per_prefix: BTreeMap<Prefix, Vec<&Path>> = BTreeMap::new();
            for ((prefix, _), path) in &peer.paths {
                // A path through this switch's ASN is one the daemon rejects (AS_PATH loop).
                if !path.as_path.contains(&peer.local_asn) {
                    per_prefix.entry(*prefix).or_default().push(path);
                }
            }
            for (prefix, paths) in per_prefix {
                let shortest = paths.iter().map(|p| p.as_path.len()).min().unwrap_or(0);
                let best: Vec<&Path> = paths
                    .into_iter()
                    .filter(|p| p.as_path.len() == shortest)
                    .collect();
                let next_next = best.iter().filter_map(|p| second_asn(&p.as_path)).collect();
                let next_next_ids = best
                    .iter()
                    .map(|p| p.next_next_id)
                    .collect::<Option<BTreeSet<_>>>()
                    .unwrap_or_default();
                learned.routes.entry(prefix).or_default().insert(
                    address,
                    NeighborPaths {
                        asn: peer.asn,
                        router_id: peer.router_id.unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                        next_next,
                        next_next_ids,
                    },
                );
            }
        }
        learned
    }

    /// Counters and per-peer state.
    #[must_use]
    pub fn status(&self) -> RibStatus {
        let mut status = self.status.clone();
        status.peers = self
            .peers
            .iter()
            .map(|(address, peer)| PeerStatus {
                address: *address,
                asn: peer.asn,
                add_path: peer.add_path,
                complete: peer.complete,
                paths: peer.paths.len(),
            })
            .collect();
        status
    }
}

impl Peer {
    fn update(&mut self, update: &BgpUpdateMessage) {
        let mut withdrawn: Vec<&NetworkPrefix> = update.withdrawn_prefixes.iter().collect();
        let mut announced: Vec<&NetworkPrefix> = update.announced_prefixes.iter().collect();
        if let Some(nlri) = update.attributes.get_unreachable_nlri() {
            if nlri.afi == Afi::Ipv4 && nlri.safi == Safi::Unicast {
                withdrawn.extend(nlri.prefixes.iter());
            }
        }
        if let Some(nlri) = update.attributes.get_reachable_nlri() {
            if nlri.afi == Afi::Ipv4 && nlri.safi == Safi::Unicast {
                announced.extend(nlri.prefixes.iter());
            }
        }
        for prefix in withdrawn {
            if let Some(key) = key(prefix) {
                self.paths.remove(&key);
                if let Some(stale) = &mut self.stale {
                    stale.remove(&key);
                }
            }
        }
        if announced.is_empty() {
            return;
        }
        let as_path: AsPath = update
            .attributes
            .as_path()
            .map(|path| {
                path.iter_segments()
                    .flat_map(|segment| match segment {
                        AsPathSegment::AsSequence(asns) | AsPathSegment::AsSet(asns) => {
                            asns.iter().map(|a| a.to_u32()).collect::<Vec<_>>()
                        }
                        _ => Vec::new(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let path = Path {
            as_path,
            next_next_id: NnhTag::of_attributes(&update.attributes).map(|tag| tag.router_id),
        };
        for prefix in announced {
            if let Some(key) = key(prefix) {
                self.paths.insert(key, path.clone());
                if let Some(stale) = &mut self.stale {
                    stale.remove(&key);
                }
            }
        }
    }
}

/// The first ASN of `path` after its first one and the copies a prepending speaker added
/// (`[A, A, A, B, …]` → B); `None` when the path has no second AS.
fn second_asn(path: &[u32]) -> Option<u32> {
    let first = *path.first()?;
    path.iter().copied().find(|&asn| asn != first)
}

/// The (prefix, path id) of an IPv4 NLRI entry; `None` for IPv6.
fn key(prefix: &NetworkPrefix) -> Option<(Prefix, u32)> {
    match prefix.prefix {
        ipnet::IpNet::V4(net) => Some((
            (net.network(), net.prefix_len()),
            prefix.path_id.unwrap_or(0),
        )),
        ipnet::IpNet::V6(_) => None,
    }
}

/// The speaker's 4-octet ASN from its OPEN (the capability), else the 2-octet field.
fn four_octet_asn(open: &BgpOpenMessage) -> u32 {
    capabilities(open)
        .find_map(|value| match value {
            CapabilityValue::FourOctetAs(cap) => Some(cap.asn),
            _ => None,
        })
        .unwrap_or_else(|| open.asn.to_u32())
}

/// Whether `open` announces ADD-PATH for IPv4 unicast in direction `direction`.
fn add_path(open: &BgpOpenMessage, direction: AddPathSendReceive) -> bool {
    capabilities(open).any(|value| match value {
        CapabilityValue::AddPath(cap) => cap.address_families.iter().any(|family| {
            family.afi == Afi::Ipv4
                && family.safi == Safi::Unicast
                && (family.send_receive == direction
                    || family.send_receive == AddPathSendReceive::SendReceive)
        }),
        _ => false,
    })
}

fn capabilities(open: &BgpOpenMessage) -> impl Iterator<Item = &CapabilityValue> {
    open.opt_params
        .iter()
        .filter_map(|param| match &param.param_value {
            ParamValue::Capacities(caps) => Some(caps.iter().map(|cap| &cap.value)),
            ParamValue::Raw(_) => None,
        })
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::second_asn;

    #[test]
    fn the_second_asn_skips_the_neighbours_prepending() {
        assert_eq!(second_asn(&[7, 8, 9]), Some(8));
        assert_eq!(second_asn(&[7, 7, 7, 8, 9]), Some(8), "prepended twice");
        assert_eq!(second_asn(&[7, 7]), None, "the neighbour originates it");
        assert_eq!(second_asn(&[]), None);
    }
}
