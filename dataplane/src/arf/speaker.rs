//! The speaker's rules: what one switch tells its neighbours about its own links, and when
//! (pure: measurements, port states and times in, what to tell out). The switch's notifier
//! (`ofan-control`'s `notify`, which adds the wire and the neighbours' addresses) and the model
//! run exactly this; only the unit of time differs (ns in the switch, ps in the model).
//!
//! **What.** Each fabric port (one facing a switch) has a [`Detector`]; the switch N detects on
//! its link N→F. A port that is down is a failed link: *failure detected* at level 0 until it is
//! back (*failure cleared*, with the detector's level). Whoever sends says it to every switch
//! neighbour except F.
//!
//! **When.** A state change is told at once, but at most one message per link per window: a
//! change within a window of the link's last message waits for the window to pass. Every
//! link's state — congested or not, with its current level — is refreshed every `refresh`, and
//! the receiver holds it for `hold` (the message carries it), so a receiver that lost a message
//! or restarted catches up and a lost "cleared" ages out. A link at the best level stops being
//! refreshed once its best state has been told for a hold time: a receiver that holds no entry
//! for a link takes it as best, so an idle fabric sends nothing.
//!
//! **Sequence numbers** increase by one per message of the switch, from 0 at start, and each
//! message carries the speaker's **epoch**, drawn when it starts (the caller's choice: the
//! switch takes its start time in 1/10 s, so a restarted switch's epoch is newer). Receivers
//! order messages by (epoch, sequence) ([`super::table`]): a restarted speaker's first messages
//! are new, not stale, though its sequence began again.

use super::detect::{Detector, Thresholds, Window};
use super::{Kind, Quality};

/// How often a speaker looks, refreshes and how long receivers hold, in one unit of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Detection window (and the rate limit: one message per link per window).
    pub window: u64,
    /// Refresh interval T.
    pub refresh: u64,
    /// How long a receiver keeps a state without a refresh (the switch's is 3T).
    pub hold: u64,
}

/// One link state to tell the neighbours (every one but the far end of `port`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    /// The fabric port (the link is this switch → the neighbour behind it).
    pub port: u32,
    /// What the message says.
    pub kind: Kind,
    /// The link's level (0 while it is down).
    pub quality: Quality,
    /// The speaker's epoch.
    pub epoch: u32,
    /// The message's sequence number.
    pub sequence: u32,
    /// A state change (detected, cleared, failed, repaired), not a refresh.
    pub change: bool,
}

/// One fabric port's detector and sending state.
#[derive(Debug, Clone)]
struct LinkSlot {
    port: u32,
    detector: Detector,
    /// A state change not yet told (rate limited, or the far end not known yet).
    pending: Option<Kind>,
    /// The port is down (carrier or admin state): the link has failed.
    down: bool,
    last_sent: Option<u64>,
    /// When the messages began to say "best level, not congested, not down" (the first of the
    /// current run of them); `None` while the last message said anything else.
    best_since: Option<u64>,
}

impl LinkSlot {
    /// Whether the link's state is the one a receiver assumes without an entry.
    fn at_best(&self) -> bool {
        !self.down && !self.detector.congested() && self.detector.level() == Quality::BEST
    }

    /// The level told: 0 while down, else the detector's.
    fn quality(&self) -> Quality {
        if self.down {
            Quality::POOREST
        } else {
            self.detector.level()
        }
    }

    /// The kind that states the link's current state (what a refresh says).
    fn state_kind(&self) -> Kind {
        if self.down {
            Kind::FailureDetected
        } else if self.detector.congested() {
            Kind::CongestionDetected
        } else {
            Kind::CongestionCleared
        }
    }
}

/// The sending side of one switch.
#[derive(Debug, Clone)]
pub struct Speaker {
    timing: Timing,
    links: Vec<LinkSlot>,
    epoch: u32,
    sequence: u32,
}

impl Speaker {
    /// A speaker for these fabric ports, every link idle, in epoch `epoch`.
    #[must_use]
    pub fn new(timing: Timing, thresholds: Thresholds, ports: &[u32], epoch: u32) -> Self {
        Self {
            timing,
            links: ports
                .iter()
                .map(|&port| LinkSlot {
                    port,
                    detector: Detector::new(thresholds),
                    pending: None,
                    down: false,
                    last_sent: None,
                    best_since: None,
                })
                .collect(),
            epoch,
            sequence: 0,
        }
    }

    /// The timing it runs on.
    #[must_use]
    pub const fn timing(&self) -> Timing {
        self.timing
    }

    /// The epoch its messages carry.
    #[must_use]
    pub const fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Takes one window of fabric port `port`; returns the state change it detected, if any
    /// (told by the next [`Speaker::due`]). Unknown ports are ignored.
    pub fn observe(&mut self, port: u32, window: &Window) -> Option<Kind> {
        let slot = self.links.iter_mut().find(|slot| slot.port == port)?;
        let change = slot.detector.observe(window);
        // While the port is down its failure is the news; the detector's state is told once the
        // port is back (by the failure-cleared message or the next refresh).
        if change.is_some() && !slot.down {
            slot.pending = change;
        }
        change
    }

    /// Sets whether fabric port `port` is down; returns the failure event a change calls for
    /// (told by the next [`Speaker::due`]: *failure detected* at level 0, *failure cleared*
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
            .map(|slot| (slot.quality(), slot.down || slot.detector.congested()))
    }

    /// A flow message's header for fabric port `port`, if its link is congested now (and up):
    /// the link's state and a sequence number of its own. Flow messages go out every window
    /// while the link stays congested (a congested port's heaviest flows, [`super::flows`]),
    /// not only with the link's state messages.
    pub fn flow_told(&mut self, port: u32) -> Option<Told> {
        let slot = self.links.iter().find(|slot| slot.port == port)?;
        if slot.down || !slot.detector.congested() {
            return None;
        }
        let quality = slot.quality();
        self.sequence = self.sequence.wrapping_add(1);
        Some(Told {
            port,
            kind: Kind::CongestionDetected,
            quality,
            epoch: self.epoch,
            sequence: self.sequence,
            change: false,
        })
    }

    /// Appends to `out` what is due at `now`: pending changes of links not told within the
    /// last window, and refreshes of links not told within the last T (none for a link whose
    /// best state has been told for a hold time already). A link whose far end is not
    /// `known` yet keeps its change pending.
    pub fn due(&mut self, now: u64, known: impl Fn(u32) -> bool, out: &mut Vec<Told>) {
        let timing = self.timing;
        for slot in &mut self.links {
            if !known(slot.port) {
                continue;
            }
            let since = slot.last_sent.map(|last| now.saturating_sub(last));
            let told_best = slot.at_best()
                && slot
                    .best_since
                    .is_some_and(|first| now.saturating_sub(first) >= timing.hold);
            let (kind, change) = match (slot.pending, since) {
                (Some(kind), None) => (kind, true),
                (Some(kind), Some(since)) if since >= timing.window => (kind, true),
                (_, None) => (slot.state_kind(), false),
                (_, Some(since)) if since >= timing.refresh && !told_best => {
                    (slot.state_kind(), false)
                }
                _ => continue,
            };
            slot.pending = None;
            slot.last_sent = Some(now);
            slot.best_since = if slot.at_best() {
                slot.best_since.or(Some(now))
            } else {
                None
            };
            self.sequence = self.sequence.wrapping_add(1);
            out.push(Told {
                port: slot.port,
                kind,
                quality: slot.quality(),
                epoch: self.epoch,
                sequence: self.sequence,
                change,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn speaker() -> Speaker {
        let timing = Timing {
            window: 10 * MS,
            refresh: 100 * MS,
            hold: 300 * MS,
        };
        Speaker::new(timing, Thresholds::default(), &[0, 1, 2], 7)
    }

    /// A window whose queue was `fill` × the congested reference (8 full frames): 1.0 is level 0.
    fn window(fill: f64) -> Window {
        Window {
            max_queue_bytes: (fill * 8.0 * 1_500.0) as u64,
            full_frame_bytes: 1_500,
            drops: 0,
        }
    }

    fn due(speaker: &mut Speaker, now: u64) -> Vec<Told> {
        let mut out = Vec::new();
        speaker.due(now, |_| true, &mut out);
        out
    }

    #[test]
    fn changes_at_once_at_most_once_per_window_and_refreshes_every_t() {
        let mut speaker = speaker();
        let first = due(&mut speaker, 0);
        assert_eq!(first.len(), 3, "every link's state once at start");
        assert!(first
            .iter()
            .all(|t| t.kind == Kind::CongestionCleared && !t.change && t.epoch == 7));
        assert!(due(&mut speaker, 50 * MS).is_empty(), "nothing until T");
        assert_eq!(due(&mut speaker, 100 * MS).len(), 3);
        // A change 3 ms after the refresh waits for the window to pass.
        assert_eq!(
            speaker.observe(1, &window(1.0)),
            Some(Kind::CongestionDetected)
        );
        assert!(due(&mut speaker, 103 * MS).is_empty());
        let told = due(&mut speaker, 110 * MS);
        assert_eq!(told.len(), 1);
        assert_eq!(
            (told[0].port, told[0].kind, told[0].quality, told[0].change),
            (1, Kind::CongestionDetected, Quality::POOREST, true)
        );
        assert_eq!(speaker.level(1), Some((Quality::POOREST, true)));
        // Sequence numbers go up by one per message: 3 + 3 + 1.
        assert_eq!(told[0].sequence, 7);
    }

    #[test]
    fn a_link_at_its_best_is_told_for_a_hold_time_then_left_to_age_out() {
        let mut speaker = speaker();
        for t in [0, 100, 200] {
            assert_eq!(due(&mut speaker, t * MS).len(), 3, "at {t} ms");
        }
        for t in [300, 400, 900] {
            assert!(due(&mut speaker, t * MS).is_empty(), "at {t} ms");
        }
        // A congestion is told and refreshed like any state that is not the best.
        speaker.observe(0, &window(1.0));
        assert_eq!(due(&mut speaker, 910 * MS).len(), 1);
        assert_eq!(due(&mut speaker, 1010 * MS).len(), 1);
        // Back at the best level: three more messages, then silence again.
        speaker.observe(0, &window(0.0));
        speaker.observe(0, &window(0.0));
        assert_eq!(speaker.level(0), Some((Quality::BEST, false)));
        let told: usize = (1020..=2000)
            .step_by(10)
            .map(|t| due(&mut speaker, t * MS).len())
            .sum();
        assert_eq!(told, 3);
    }

    #[test]
    fn a_port_that_goes_down_is_a_failure_until_it_comes_back() {
        let mut speaker = speaker();
        due(&mut speaker, 0);
        assert_eq!(speaker.set_down(0, true), Some(Kind::FailureDetected));
        assert_eq!(speaker.set_down(0, true), None, "no change, no event");
        // Its detector's changes wait while it is down.
        speaker.observe(0, &window(1.0));
        let told = due(&mut speaker, 10 * MS);
        assert_eq!(told.len(), 1);
        assert_eq!(
            (told[0].kind, told[0].quality, told[0].change),
            (Kind::FailureDetected, Quality::POOREST, true)
        );
        let refreshed = due(&mut speaker, 110 * MS);
        assert!(refreshed
            .iter()
            .filter(|t| t.port == 0)
            .all(|t| t.kind == Kind::FailureDetected && !t.change));
        assert_eq!(speaker.set_down(0, false), Some(Kind::FailureCleared));
        let repaired = due(&mut speaker, 120 * MS);
        assert_eq!(repaired[0].kind, Kind::FailureCleared);
        assert_eq!(
            repaired[0].quality,
            Quality::POOREST,
            "the detector saw it full"
        );
    }

    #[test]
    fn flow_messages_are_for_congested_links_only() {
        let mut speaker = speaker();
        assert_eq!(speaker.flow_told(0), None, "not congested");
        speaker.observe(0, &window(1.0));
        let told = speaker.flow_told(0).unwrap();
        assert_eq!(
            (told.kind, told.quality),
            (Kind::CongestionDetected, Quality::POOREST)
        );
        assert_eq!(speaker.flow_told(0).unwrap().sequence, told.sequence + 1);
        speaker.set_down(0, true);
        assert_eq!(speaker.flow_told(0), None, "a failed link carries no flow");
    }

    #[test]
    fn a_link_whose_far_end_is_unknown_keeps_its_change() {
        let mut speaker = speaker();
        speaker.observe(2, &window(1.0));
        let mut out = Vec::new();
        speaker.due(0, |port| port != 2, &mut out);
        assert!(out.iter().all(|t| t.port != 2));
        let later = due(&mut speaker, MS);
        assert!(later
            .iter()
            .any(|t| t.port == 2 && t.kind == Kind::CongestionDetected && t.change));
    }
}
