//! The notifier's state machine (pure: measurements, neighbours and times in, messages and
//! verdicts out; [`super::transport`] does the I/O).
//!
//! **Sending.** Each fabric port (one facing a switch) has a [`Detector`]. The switch N detects
//! on its link N→F, F being the neighbour behind the port, and tells **every switch neighbour
//! except F** (F knows its own side, and a notification is about the link as N sees it). A
//! congestion-state change is sent at once; every link's state — congested or not, with its
//! current level — is refreshed every `refresh` so a receiver that lost a message or restarted
//! catches up, and held `3 × refresh` by the receiver. A link at the best level stops being
//! refreshed once its best state has been told for a hold time (three messages): a receiver
//! that holds no entry for a link takes it as best, so a lost or missed one still converges (its
//! entry ages out) and an idle fabric sends nothing. Rate limit: at most one message per link
//! per window (a change within a window of the last message waits for the next window), so a
//! neighbour gets at most one message per link of N per window.
//!
//! **Receiving.** [`check`] gives the verdict on one datagram: it must have arrived on a fabric
//! port, with IP TTL 255 (GTSM, RFC 5082: a datagram that crossed a router cannot have it), and
//! parse; anything else is [`Reject`]ed under its reason and changes nothing.

use std::net::Ipv4Addr;

use ofan_dataplane::arf::detect::{Detector, Thresholds, Window};
use ofan_dataplane::arf::{Kind, LinkId, Quality, Update};

use super::wire::{LinkRef, Notification};

/// The TTL every notification is sent with and must arrive with (GTSM).
pub const GTSM_TTL: u8 = 255;

/// A switch's identity in notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Its ASN (the plan's numbering): what `LinkId` and the path table use.
    pub asn: u32,
    /// Its router ID.
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
}

/// One message to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outgoing {
    /// The neighbour's address.
    pub to: Ipv4Addr,
    /// The message.
    pub message: Notification,
}

/// One fabric port's detector and sending state.
#[derive(Debug, Clone)]
struct LinkSlot {
    port: u32,
    detector: Detector,
    /// A state change not yet sent (rate limited, or no neighbour known yet).
    pending: Option<Kind>,
    /// The port is down (carrier or admin state): the link has failed.
    down: bool,
    last_sent_ns: Option<u64>,
    /// When the messages began to say "best level, not congested, not down" (the first of the
    /// current run of them); `None` while the last message said anything else.
    best_since_ns: Option<u64>,
}

impl LinkSlot {
    /// Whether the link's state is the one a receiver assumes without an entry.
    fn at_best(&self) -> bool {
        !self.down && !self.detector.congested() && self.detector.level() == Quality::BEST
    }
}

/// The sending side of one switch.
#[derive(Debug, Clone)]
pub struct Speaker {
    identity: Identity,
    timing: Timing,
    links: Vec<LinkSlot>,
    sequence: u32,
}

impl Speaker {
    /// A speaker for these fabric ports (port ids), every link idle.
    #[must_use]
    pub fn new(identity: Identity, timing: Timing, thresholds: Thresholds, ports: &[u32]) -> Self {
        Self {
            identity,
            timing,
            links: ports
                .iter()
                .map(|&port| LinkSlot {
                    port,
                    detector: Detector::new(thresholds),
                    pending: None,
                    down: false,
                    last_sent_ns: None,
                    best_since_ns: None,
                })
                .collect(),
            sequence: 0,
        }
    }

    /// Takes one window of fabric port `port`; returns the state change it detected, if any
    /// (sent by the next [`Speaker::due`]). Unknown ports are ignored.
    pub fn observe(&mut self, port: u32, window: &Window) -> Option<Kind> {
        let slot = self.links.iter_mut().find(|slot| slot.port == port)?;
        let change = slot.detector.observe(window);
        // While the port is down its failure is the news; the detector's state is sent once the
        // port is back (by the failure-cleared message or the next refresh).
        if change.is_some() && !slot.down {
            slot.pending = change;
        }
        change
    }

    /// Sets whether fabric port `port` is down; returns the failure event a change calls for
    /// (sent by the next [`Speaker::due`]: *failure detected* at level 0, *failure cleared*
    /// with the detector's level). Unknown ports are ignored.
    pub fn set_down(&mut self, port: u32, down: bool) -> Option<Kind> {
        let slot = self.links.iter_mut().find(|slot| slot.port == port)?;
        if slot.down == down {
            return None;
        }
        slot.down = down;
        let kind = if down {
            Kind::FailureDetected
        } else {
            Kind::FailureCleared
        };
        slot.pending = Some(kind);
        Some(kind)
    }

    /// The reported level and congestion state of fabric port `port` (level 0 and congested
    /// while it is down).
    #[must_use]
    pub fn level(&self, port: u32) -> Option<(Quality, bool)> {
        self.links
            .iter()
            .find(|slot| slot.port == port)
            .map(|slot| {
                if slot.down {
                    (Quality::POOREST, true)
                } else {
                    (slot.detector.level(), slot.detector.congested())
                }
            })
    }

    /// The messages due at `now_ns` (monotonic), stamped `unix_ns`: pending changes of links
    /// not sent to within the last window, and refreshes of links not sent within the last T
    /// (none for a link whose best state has been told for a hold time already).
    /// Each goes to every neighbour except the one behind the link's port; a link with no
    /// neighbour known keeps its change pending.
    pub fn due(&mut self, now_ns: u64, unix_ns: u64, neighbours: &[Neighbour]) -> Vec<Outgoing> {
        let mut out = Vec::new();
        let hold_ms = self.timing.hold_ms();
        for slot in &mut self.links {
            let Some(far) = neighbours.iter().find(|n| n.port == slot.port) else {
                continue;
            };
            let since = slot.last_sent_ns.map(|last| now_ns.saturating_sub(last));
            let told_best = slot.at_best()
                && slot.best_since_ns.is_some_and(|first| {
                    now_ns.saturating_sub(first) >= self.timing.refresh_ns.saturating_mul(3)
                });
            let kind = match (slot.pending, since) {
                (Some(kind), None) => kind,
                (Some(kind), Some(since)) if since >= self.timing.window_ns => kind,
                (_, None) => state_kind(slot),
                (_, Some(since)) if since >= self.timing.refresh_ns && !told_best => {
                    state_kind(slot)
                }
                _ => continue,
            };
            slot.pending = None;
            slot.last_sent_ns = Some(now_ns);
            slot.best_since_ns = if slot.at_best() {
                slot.best_since_ns.or(Some(now_ns))
            } else {
                None
            };
            self.sequence = self.sequence.wrapping_add(1);
            let quality = if slot.down {
                Quality::POOREST
            } else {
                slot.detector.level()
            };
            let message = Notification {
                kind,
                quality,
                hold_ms,
                sequence: self.sequence,
                timestamp_ns: unix_ns,
                originator: self.identity.router_id,
                link: LinkRef {
                    near: self.identity.router_id,
                    far: far.id.router_id,
                    near_asn: self.identity.asn,
                    far_asn: far.id.asn,
                    port: slot.port,
                },
                flow: None,
            };
            let mut sent_to: Vec<Ipv4Addr> = Vec::new();
            for neighbour in neighbours {
                if neighbour.port == slot.port
                    || neighbour.id.asn == far.id.asn
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
        out
    }
}

/// The kind that states a link's current state (what a refresh says).
fn state_kind(slot: &LinkSlot) -> Kind {
    if slot.down {
        Kind::FailureDetected
    } else if slot.detector.congested() {
        Kind::CongestionDetected
    } else {
        Kind::CongestionCleared
    }
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
    /// An older or repeated sequence number for its link.
    Stale,
}

impl Reject {
    /// Every reason, in counter order.
    pub const ALL: [Self; 6] = [
        Self::HostPort,
        Self::UnknownPort,
        Self::Ttl,
        Self::Malformed,
        Self::OwnLink,
        Self::Stale,
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
            Speaker::new(id(100), timing, Thresholds::default(), &[0, 1, 2]),
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
    fn refreshes_every_t_and_changes_at_most_once_per_window() {
        let (mut speaker, neighbours) = speaker();
        speaker.due(0, 0, &neighbours);
        // Nothing until T.
        assert!(speaker.due(50 * MS, 0, &neighbours).is_empty());
        assert_eq!(speaker.due(100 * MS, 0, &neighbours).len(), 6);
        // A change 3 ms after the refresh waits for the window to pass.
        speaker.observe(0, &window(1.0));
        assert!(speaker.due(103 * MS, 0, &neighbours).is_empty());
        let sent = speaker.due(110 * MS, 0, &neighbours);
        assert_eq!(sent.len(), 2);
        assert!(sent
            .iter()
            .all(|o| o.message.kind == Kind::CongestionDetected));
        // It cleared in the next window: sent one window later, not before.
        speaker.observe(0, &window(0.0));
        assert!(speaker.due(115 * MS, 0, &neighbours).is_empty());
        let cleared = speaker.due(120 * MS, 0, &neighbours);
        assert_eq!(cleared[0].message.kind, Kind::CongestionCleared);
        // Sequence numbers increase per message.
        assert!(cleared[0].message.sequence > sent[0].message.sequence);
    }

    #[test]
    fn a_link_at_its_best_is_told_for_a_hold_time_then_left_to_age_out() {
        let (mut speaker, neighbours) = speaker();
        // Idle: told at 0, T and 2T (a hold time of 3T), then nothing more.
        for t in [0, 100, 200] {
            assert_eq!(speaker.due(t * MS, 0, &neighbours).len(), 6, "at {t} ms");
        }
        for t in [300, 400, 900] {
            assert!(speaker.due(t * MS, 0, &neighbours).is_empty(), "at {t} ms");
        }
        // A congestion is sent and refreshed like any state that is not the best …
        speaker.observe(0, &window(1.0));
        let detected = speaker.due(910 * MS, 0, &neighbours);
        assert_eq!(detected.len(), 2);
        assert_eq!(speaker.due(1010 * MS, 0, &neighbours).len(), 2);
        // … and so is a cleared link below the best level (its weight still counts).
        speaker.observe(0, &window(0.3));
        speaker.observe(0, &window(0.3));
        let cleared = speaker.due(1110 * MS, 0, &neighbours);
        assert_eq!(cleared[0].message.kind, Kind::CongestionCleared);
        assert!(cleared[0].message.quality < Quality::BEST);
        assert_eq!(speaker.due(1210 * MS, 0, &neighbours).len(), 2);
        // Back at the best level: three more messages, then silence again.
        speaker.observe(0, &window(0.0));
        speaker.observe(0, &window(0.0));
        assert_eq!(speaker.level(0), Some((Quality::BEST, false)));
        let mut told = 0;
        for t in (1220..=2000).step_by(10) {
            told += speaker
                .due(t * MS, 0, &neighbours)
                .iter()
                .filter(|o| o.message.link.port == 0)
                .count();
        }
        assert_eq!(told, 3 * 2, "three messages to the two other neighbours");
    }

    #[test]
    fn a_port_that_goes_down_is_a_failure_until_it_comes_back() {
        let (mut speaker, neighbours) = speaker();
        speaker.due(0, 0, &neighbours);
        assert_eq!(speaker.set_down(0, true), Some(Kind::FailureDetected));
        assert_eq!(speaker.set_down(0, true), None, "no change, no event");
        assert_eq!(speaker.level(0), Some((Quality::POOREST, true)));
        let sent = speaker.due(10 * MS, 0, &neighbours);
        assert_eq!(sent.len(), 2);
        assert!(sent
            .iter()
            .all(|o| o.message.kind == Kind::FailureDetected
                && o.message.quality == Quality::POOREST));
        // Refreshed as a failure.
        let refreshed = speaker.due(110 * MS, 0, &neighbours);
        assert!(refreshed
            .iter()
            .filter(|o| o.message.link.port == 0)
            .all(|o| o.message.kind == Kind::FailureDetected));
        assert_eq!(speaker.set_down(0, false), Some(Kind::FailureCleared));
        let repaired = speaker.due(120 * MS, 0, &neighbours);
        assert_eq!(repaired[0].message.kind, Kind::FailureCleared);
        assert_eq!(repaired[0].message.quality, Quality::BEST);
        assert_eq!(speaker.level(0), Some((Quality::BEST, false)));
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
                "stale"
            ]
        );
    }
}
