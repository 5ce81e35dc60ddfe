//! The notifier's speaker and verdicts (pure: measurements, neighbours and times in, messages
//! and verdicts out; [`super::transport`] does the I/O).
//!
//! **Sending.** What to tell and when is [`ofan_dataplane::arf::speaker`] — the rules the model
//! runs too (changes at once but once per window per link, refreshes every T, a link at its best
//! left to age out after a hold time, epoch and sequence numbers). This adds who hears it: each
//! message about link N→F goes to **every switch neighbour except F** (F knows its own side,
//! and a notification is about the link as N sees it), as a [`Notification`] with this switch's
//! router ID and ASN.
//!
//! **Receiving.** [`check`] gives the verdict on one datagram: it must have arrived on a fabric
//! port, with IP TTL 255 (GTSM, RFC 5082: a datagram that crossed a router cannot have it), and
//! parse; [`trusted`] then asks whether its sender may speak for the link
//! ([`ofan_dataplane::arf::trust`]). Anything else is [`Reject`]ed under its reason and changes
//! nothing.

use std::net::Ipv4Addr;

use ofan_dataplane::arf::detect::{Thresholds, Window};
use ofan_dataplane::arf::speaker::{self as rules, Told};
use ofan_dataplane::arf::{trust, Kind, LinkId, Quality, RemotePaths, Update};

use super::wire::{FiveTuple, LinkRef, Notification};

/// The TTL every notification is sent with and must arrive with (GTSM).
pub const GTSM_TTL: u8 = 255;

/// A switch's identity in notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Its ASN (the plan's numbering), for people: links are keyed by router ID.
    pub asn: u32,
    /// Its router ID (BGP identifier).
    pub router_id: Ipv4Addr,
}

/// A switch neighbour: who is behind a fabric port and where to send to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// The local port (port id) it is behind.
    pub port: u32,
    /// Its address on the link.
    pub addr: Ipv4Addr,
    /// Its identity.
    pub id: Identity,
}

/// How often the speaker looks and refreshes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Detection window, ns.
    pub window_ns: u64,
    /// Refresh interval T, ns; the hold time sent is 3T.
    pub refresh_ns: u64,
}

impl Timing {
    /// The hold time carried in messages: 3T, in ms (at most `u16::MAX`).
    #[must_use]
    pub fn hold_ms(&self) -> u16 {
        u16::try_from((self.refresh_ns.saturating_mul(3) / 1_000_000).max(1)).unwrap_or(u16::MAX)
    }

    /// The shared rules' timing (ns).
    fn rules(self) -> rules::Timing {
        rules::Timing {
            window: self.window_ns,
            refresh: self.refresh_ns,
            hold: u64::from(self.hold_ms()) * 1_000_000,
        }
    }
}

/// One message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    /// The neighbour's address.
    pub to: Ipv4Addr,
    /// The message.
    pub message: Notification,
}

/// The sending side of one switch.
#[derive(Debug, Clone)]
pub struct Speaker {
    identity: Identity,
    hold_ms: u16,
    rules: rules::Speaker,
    told: Vec<Told>,
}

impl Speaker {
    /// A speaker for these fabric ports (port ids), every link idle, in epoch `epoch` (see
    /// [`epoch_now`]).
    #[must_use]
    pub fn new(
        identity: Identity,
        timing: Timing,
        thresholds: Thresholds,
        ports: &[u32],
        epoch: u32,
    ) -> Self {
        Self {
            identity,
            hold_ms: timing.hold_ms(),
            rules: rules::Speaker::new(timing.rules(), thresholds, ports, epoch),
            told: Vec::new(),
        }
    }

    /// Takes one window of fabric port `port`; returns the state change it detected, if any
    /// (sent by the next [`Speaker::due`]). Unknown ports are ignored.
    pub fn observe(&mut self, port: u32, window: &Window) -> Option<Kind> {
        self.rules.observe(port, window)
    }

    /// Sets whether fabric port `port` is down; returns the failure event a change calls for
    /// (sent by the next [`Speaker::due`]). Unknown ports are ignored.
    pub fn set_down(&mut self, port: u32, down: bool) -> Option<Kind> {
        self.rules.set_down(port, down)
    }

    /// The reported level and congestion state of fabric port `port` (level 0 and congested
    /// while it is down).
    #[must_use]
    pub fn level(&self, port: u32) -> Option<(Quality, bool)> {
        self.rules.level(port)
    }

    /// The messages due at `now_ns` (monotonic), stamped `unix_ns`, each to every neighbour
    /// except the one behind the link's port; a link with no neighbour known keeps its change
    /// pending.
    pub fn due(&mut self, now_ns: u64, unix_ns: u64, neighbours: &[Neighbour]) -> Vec<Outgoing> {
        self.told.clear();
        self.rules.due(
            now_ns,
            |port| neighbours.iter().any(|n| n.port == port),
            &mut self.told,
        );
        let mut out = Vec::new();
        for told in &self.told {
            self.fan_out(told, None, unix_ns, neighbours, &mut out);
        }
        out
    }

    /// Flow messages for fabric port `port`, one per flow of `flows` to every neighbour except
    /// the one behind the port, if the port's link is congested now (else none).
    pub fn flow_messages(
        &mut self,
        port: u32,
        flows: &[FiveTuple],
        unix_ns: u64,
        neighbours: &[Neighbour],
    ) -> Vec<Outgoing> {
        let mut out = Vec::new();
        if flows.is_empty() || !neighbours.iter().any(|n| n.port == port) {
            return out;
        }
        let Some(told) = self.rules.flow_told(port) else {
            return out;
        };
        for &flow in flows {
            self.fan_out(&told, Some(flow), unix_ns, neighbours, &mut out);
        }
        out
    }

    /// Appends `told` (with `flow`, if any) as a message to every neighbour except the one
    /// behind its port (nothing if that one is not known).
    fn fan_out(
        &self,
        told: &Told,
        flow: Option<FiveTuple>,
        unix_ns: u64,
        neighbours: &[Neighbour],
        out: &mut Vec<Outgoing>,
    ) {
        let Some(far) = neighbours.iter().find(|n| n.port == told.port) else {
            return;
        };
        let message = Notification {
            kind: told.kind,
            quality: told.quality,
            hold_ms: self.hold_ms,
            sequence: told.sequence,
            epoch: told.epoch,
            timestamp_ns: unix_ns,
            originator: self.identity.router_id,
            link: LinkRef {
                near: self.identity.router_id,
                far: far.id.router_id,
                near_asn: self.identity.asn,
                far_asn: far.id.asn,
                port: told.port,
            },
            flow,
        };
        let mut sent_to: Vec<Ipv4Addr> = Vec::new();
        for neighbour in neighbours {
            if neighbour.port == told.port
                || neighbour.id.router_id == far.id.router_id
                || sent_to.contains(&neighbour.addr)
            {
                continue;
            }
            sent_to.push(neighbour.addr);
            out.push(Outgoing {
                to: neighbour.addr,
                message,
            });
        }
    }
}

/// An epoch for a speaker starting now: the time since the Unix epoch in tenths of a second
/// (wrapping; receivers compare epochs in serial arithmetic), so a restarted switch's is newer
/// unless it restarts within 100 ms.
#[must_use]
pub fn epoch_now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| (since.as_millis() / 100) as u32)
}

/// Which kind of port a datagram arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A fabric port (role `up` or `down`: facing a switch).
    Fabric,
    /// A host port.
    Host,
    /// No port of the switch (another interface, or the kernel did not say).
    Unknown,
}

/// Why a datagram or a notification changed nothing. One counter each (see
/// [`Reject::name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// It arrived on a host port.
    HostPort,
    /// It arrived on no port of the switch (or the kernel did not say where).
    UnknownPort,
    /// Its TTL was not 255 (or the kernel did not say).
    Ttl,
    /// It does not parse ([`super::wire::WireError`]).
    Malformed,
    /// It is about one of this switch's own links (a loop, or a spoof).
    OwnLink,
    /// An older or repeated (epoch, sequence) for its link.
    Stale,
    /// Its sender is not entitled to report the link (not one of its ends, nor named next to
    /// one by the path table), or is no known neighbour.
    Untrusted,
}

impl Reject {
    /// Every reason, in counter order.
    pub const ALL: [Self; 7] = [
        Self::HostPort,
        Self::UnknownPort,
        Self::Ttl,
        Self::Malformed,
        Self::OwnLink,
        Self::Stale,
        Self::Untrusted,
    ];

    /// Its counter name (the `reason` label of `ofan_arf_rejected_total`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::HostPort => "host_port",
            Self::UnknownPort => "unknown_port",
            Self::Ttl => "ttl",
            Self::Malformed => "malformed",
            Self::OwnLink => "own_link",
            Self::Stale => "stale",
            Self::Untrusted => "untrusted",
        }
    }
}

/// The verdict on one received datagram: the notification, or why not. The checks run in the
/// order of cost and trust: where it came from, its TTL, its bytes, whom it is about.
///
/// # Errors
/// The [`Reject`] reason.
pub fn check(
    arrival: Arrival,
    ttl: Option<u8>,
    bytes: &[u8],
    own_router_id: Option<Ipv4Addr>,
) -> Result<Notification, Reject> {
    match arrival {
        Arrival::Fabric => {}
        Arrival::Host => return Err(Reject::HostPort),
        Arrival::Unknown => return Err(Reject::UnknownPort),
    }
    if ttl != Some(GTSM_TTL) {
        return Err(Reject::Ttl);
    }
    let message = Notification::parse(bytes).map_err(|_| Reject::Malformed)?;
    if own_router_id.is_some_and(|id| id == message.link.near) {
        return Err(Reject::OwnLink);
    }
    Ok(message)
}

/// Whether the neighbour that sent `message` (its router ID, `None` when the datagram's source
/// is no known neighbour) may report its link ([`ofan_dataplane::arf::trust`]).
///
/// # Errors
/// [`Reject::Untrusted`].
pub fn trusted(
    message: &Notification,
    sender: Option<Ipv4Addr>,
    paths: &RemotePaths,
) -> Result<(), Reject> {
    let link = update_of(message).link;
    match sender {
        Some(sender) if trust::entitled(u32::from(sender), link, paths) => Ok(()),
        _ => Err(Reject::Untrusted),
    }
}

/// The congestion table's view of a notification: links by router ID (the draft's neighbour
/// ID), which names one switch whatever the ASN plan.
#[must_use]
pub fn update_of(message: &Notification) -> Update {
    Update {
        link: LinkId {
            near: u32::from(message.link.near),
            far: u32::from(message.link.far),
        },
        kind: message.kind,
        quality: message.quality,
        hold_ns: u64::from(message.hold_ms) * 1_000_000,
        epoch: message.epoch,
        sequence: message.sequence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn id(asn: u32) -> Identity {
        Identity {
            asn,
            router_id: Ipv4Addr::new(10, 255, 0, (asn % 256) as u8),
        }
    }

    /// N = 100 with ports 0 (to 200) and 1 (to 201), 2 (to 202).
    fn speaker() -> (Speaker, Vec<Neighbour>) {
        let timing = Timing {
            window_ns: 10 * MS,
            refresh_ns: 100 * MS,
        };
        let neighbours = (0..3)
            .map(|port| Neighbour {
                port,
                addr: Ipv4Addr::new(10, 0, port as u8, 1),
                id: id(200 + port),
            })
            .collect();
        (
            Speaker::new(id(100), timing, Thresholds::default(), &[0, 1, 2], 3),
            neighbours,
        )
    }

    /// A window whose queue was `fill` × the congested reference (8 full frames): 1.0 is level 0.
    fn window(fill: f64) -> Window {
        Window {
            max_queue_bytes: (fill * 8.0 * 1_500.0) as u64,
            full_frame_bytes: 1_500,
            drops: 0,
        }
    }

    #[test]
    fn a_link_is_told_to_every_neighbour_but_its_far_end() {
        let (mut speaker, neighbours) = speaker();
        // The first call refreshes every link: each to the two other neighbours.
        let first = speaker.due(0, 7, &neighbours);
        assert_eq!(first.len(), 6);
        for out in &first {
            assert_ne!(
                out.message.link.far_asn,
                200 + u32::from(out.to.octets()[2])
            );
            assert_eq!(out.message.link.near_asn, 100);
            assert_eq!(out.message.kind, Kind::CongestionCleared);
            assert_eq!(out.message.hold_ms, 300);
            assert_eq!(out.message.epoch, 3);
            assert_eq!(out.message.timestamp_ns, 7);
        }
        // Port 1 collapses: detected at once, to 200 and 202 only.
        assert_eq!(
            speaker.observe(1, &window(1.0)),
            Some(Kind::CongestionDetected)
        );
        for port in [0, 2] {
            assert_eq!(speaker.observe(port, &window(0.0)), None);
        }
        let sent = speaker.due(20 * MS, 8, &neighbours);
        let to: Vec<_> = sent.iter().map(|o| o.to).collect();
        assert_eq!(to, [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 2, 1)]);
        let message = sent[0].message;
        assert_eq!(message.kind, Kind::CongestionDetected);
        assert_eq!(message.quality, Quality::POOREST);
        assert_eq!((message.link.far_asn, message.link.port), (201, 1));
        assert_eq!(sent[0].message, sent[1].message, "one message, two copies");
        assert_eq!(speaker.level(1), Some((Quality::POOREST, true)));
    }

    #[test]
    fn flow_messages_go_while_the_link_is_congested_to_all_but_its_far_end() {
        let (mut speaker, neighbours) = speaker();
        let flow = FiveTuple {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 3, 1, 1),
            src_port: 40_000,
            dst_port: 7000,
            protocol: 17,
        };
        assert!(
            speaker.flow_messages(1, &[flow], 0, &neighbours).is_empty(),
            "not congested"
        );
        speaker.observe(1, &window(1.0));
        let sent = speaker.flow_messages(1, &[flow], 9, &neighbours);
        let to: Vec<_> = sent.iter().map(|o| o.to).collect();
        assert_eq!(to, [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 2, 1)]);
        assert!(sent.iter().all(|o| o.message.flow == Some(flow)
            && o.message.kind == Kind::CongestionDetected
            && o.message.link.far_asn == 201
            && o.message.timestamp_ns == 9));
        assert!(speaker.flow_messages(1, &[], 0, &neighbours).is_empty());
    }

    #[test]
    fn a_link_with_no_known_neighbour_keeps_its_change() {
        let (mut speaker, neighbours) = speaker();
        speaker.observe(2, &window(1.0));
        let without: Vec<_> = neighbours.iter().copied().filter(|n| n.port != 2).collect();
        let sent = speaker.due(0, 0, &without);
        assert!(sent.iter().all(|o| o.message.link.port != 2));
        let later = speaker.due(MS, 0, &neighbours);
        assert!(later
            .iter()
            .any(|o| o.message.link.port == 2 && o.message.kind == Kind::CongestionDetected));
    }

    fn bytes(near_asn: u32) -> Vec<u8> {
        let message = Notification {
            kind: Kind::CongestionDetected,
            quality: Quality::new(3).unwrap(),
            hold_ms: 300,
            sequence: 9,
            epoch: 1,
            timestamp_ns: 1,
            originator: Ipv4Addr::new(10, 255, 0, 1),
            link: LinkRef {
                near: Ipv4Addr::new(10, 255, 0, 1),
                far: Ipv4Addr::new(10, 255, 0, 2),
                near_asn,
                far_asn: 7,
                port: 3,
            },
            flow: None,
        };
        let mut buffer = vec![0; 64];
        let len = message.emit(&mut buffer).unwrap();
        buffer.truncate(len);
        buffer
    }

    #[test]
    fn rejections_by_reason() {
        let good = bytes(5);
        let message = check(
            Arrival::Fabric,
            Some(255),
            &good,
            Some(Ipv4Addr::new(10, 255, 0, 9)),
        )
        .unwrap();
        let update = update_of(&message);
        assert_eq!(
            update.link,
            LinkId {
                near: u32::from(Ipv4Addr::new(10, 255, 0, 1)),
                far: u32::from(Ipv4Addr::new(10, 255, 0, 2))
            },
            "by router ID, not ASN"
        );
        assert_eq!(update.hold_ns, 300 * MS);
        assert_eq!(
            check(Arrival::Host, Some(255), &good, None),
            Err(Reject::HostPort)
        );
        assert_eq!(
            check(Arrival::Unknown, Some(255), &good, None),
            Err(Reject::UnknownPort)
        );
        assert_eq!(
            check(Arrival::Fabric, Some(64), &good, None),
            Err(Reject::Ttl)
        );
        assert_eq!(check(Arrival::Fabric, None, &good, None), Err(Reject::Ttl));
        assert_eq!(
            check(Arrival::Fabric, Some(255), &good[..40], None),
            Err(Reject::Malformed)
        );
        assert_eq!(
            check(
                Arrival::Fabric,
                Some(255),
                &good,
                Some(Ipv4Addr::new(10, 255, 0, 1))
            ),
            Err(Reject::OwnLink)
        );
        let names: Vec<_> = Reject::ALL.iter().map(|r| r.name()).collect();
        assert_eq!(
            names,
            [
                "host_port",
                "unknown_port",
                "ttl",
                "malformed",
                "own_link",
                "stale",
                "untrusted"
            ]
        );
    }

    #[test]
    fn only_an_end_of_the_link_or_its_named_neighbour_is_trusted() {
        use ofan_dataplane::arf::RemoteHop;
        use ofan_dataplane::lb::DestKey;
        let message = check(Arrival::Fabric, Some(255), &bytes(5), None).unwrap();
        let (near, far) = (Ipv4Addr::new(10, 255, 0, 1), Ipv4Addr::new(10, 255, 0, 2));
        let mut paths = RemotePaths::new(1, 1);
        assert_eq!(trusted(&message, Some(near), &paths), Ok(()));
        assert_eq!(trusted(&message, Some(far), &paths), Ok(()));
        let forger = Ipv4Addr::new(10, 255, 0, 66);
        assert_eq!(
            trusted(&message, Some(forger), &paths),
            Err(Reject::Untrusted),
            "a neighbour speaking for a third party's link"
        );
        assert_eq!(trusted(&message, None, &paths), Err(Reject::Untrusted));
        // Named next to the near end by the path table: entitled.
        paths.set(
            DestKey(0),
            0,
            RemoteHop {
                neighbour: u32::from(forger),
                next_next: vec![u32::from(near)],
            },
        );
        assert_eq!(trusted(&message, Some(forger), &paths), Ok(()));
    }
}
