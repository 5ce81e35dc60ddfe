//! The congestion table: what neighbours last said about their links, until it ages out.
//!
//! One entry per remote link (near end → far end, by switch id: router IDs in the switch, node
//! ids in the model). A notification replaces the entry's level and pushes its expiry to
//! `now + hold`; one that is not newer than the entry's last is stale and changes nothing.
//! Newer means a later epoch (the speaker restarted, [`super::speaker`]), or the same epoch and
//! a later sequence number, both in serial-number arithmetic (RFC 1982) so either may wrap. A *failure detected* makes the link's level 0 whatever the message's level says. An
//! entry not refreshed within its hold time is dropped by [`CongestionTable::expire`], so a lost
//! "cleared" cannot pin a path as congested.

use std::collections::BTreeMap;

use super::{Kind, Quality};

/// A link between two switches, from the end that reports it (`near`) to the other (`far`),
/// by the switches' ids (ASNs in the lab).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId {
    /// The reporting end.
    pub near: u32,
    /// The other end.
    pub far: u32,
}

/// One notification as the table needs it (decoded from the wire by the control thread, or an
/// event in the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    /// The link.
    pub link: LinkId,
    /// What happened.
    pub kind: Kind,
    /// The link's level now.
    pub quality: Quality,
    /// How long the state holds without a refresh, ns.
    pub hold_ns: u64,
    /// The originator's epoch (drawn when it started).
    pub epoch: u32,
    /// The originator's sequence number.
    pub sequence: u32,
}

/// What [`CongestionTable::apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The link's level changed (or the link is new to the table).
    Changed,
    /// Same level, expiry pushed back.
    Refreshed,
    /// An older or repeated sequence number: ignored.
    Stale,
}

/// A remote link's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LinkState {
    /// Its level (0 when failed).
    pub quality: u8,
    /// Whether the last word was a failure.
    pub failed: bool,
    /// The epoch of the last message taken.
    pub epoch: u32,
    /// The last sequence number taken.
    pub sequence: u32,
    /// When the entry ages out, ns (the caller's clock).
    pub expires_ns: u64,
    /// When the entry last changed level, ns.
    pub changed_ns: u64,
}

/// The remote links' states.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CongestionTable {
    links: BTreeMap<LinkId, LinkState>,
}

impl CongestionTable {
    /// Takes one notification received at `now_ns`.
    pub fn apply(&mut self, update: &Update, now_ns: u64) -> Applied {
        let failed = update.kind == Kind::FailureDetected;
        let quality = if failed {
            Quality::POOREST.level()
        } else {
            update.quality.level()
        };
        let expires_ns = now_ns.saturating_add(update.hold_ns);
        match self.links.get_mut(&update.link) {
            Some(state)
                if !newer(
                    (update.epoch, update.sequence),
                    (state.epoch, state.sequence),
                ) =>
            {
                Applied::Stale
            }
            Some(state) => {
                let changed = state.quality != quality || state.failed != failed;
                *state = LinkState {
                    quality,
                    failed,
                    epoch: update.epoch,
                    sequence: update.sequence,
                    expires_ns,
                    changed_ns: if changed { now_ns } else { state.changed_ns },
                };
                if changed {
                    Applied::Changed
                } else {
                    Applied::Refreshed
                }
            }
            None => {
                self.links.insert(
                    update.link,
                    LinkState {
                        quality,
                        failed,
                        epoch: update.epoch,
                        sequence: update.sequence,
                        expires_ns,
                        changed_ns: now_ns,
                    },
                );
                Applied::Changed
            }
        }
    }

    /// Drops every entry whose hold time has passed at `now_ns`; returns how many, so the caller
    /// knows whether its view changed.
    pub fn expire(&mut self, now_ns: u64) -> usize {
        let before = self.links.len();
        self.links.retain(|_, state| state.expires_ns > now_ns);
        before - self.links.len()
    }

    /// The level of `link`: the best when nothing is known.
    #[must_use]
    pub fn quality(&self, link: LinkId) -> Quality {
        self.links
            .get(&link)
            .and_then(|state| Quality::new(state.quality))
            .unwrap_or(Quality::BEST)
    }

    /// Whether the last word on `link` was a failure (not merely level 0).
    #[must_use]
    pub fn failed(&self, link: LinkId) -> bool {
        self.links.get(&link).is_some_and(|state| state.failed)
    }

    /// Every entry, ordered by link.
    pub fn links(&self) -> impl Iterator<Item = (&LinkId, &LinkState)> {
        self.links.iter()
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }
}

/// Whether a message numbered `(epoch, sequence)` comes after `last`: a later epoch, or the
/// same epoch and a later sequence number (RFC 1982 serial arithmetic on 32 bits, both).
fn newer((epoch, sequence): (u32, u32), (last_epoch, last): (u32, u32)) -> bool {
    let after = |a: u32, b: u32| a != b && a.wrapping_sub(b) < 1 << 31;
    if epoch == last_epoch {
        after(sequence, last)
    } else {
        after(epoch, last_epoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: LinkId = LinkId {
        near: 65001,
        far: 65101,
    };

    fn update(kind: Kind, level: u8, sequence: u32) -> Update {
        Update {
            link: LINK,
            kind,
            quality: Quality::new(level).unwrap(),
            hold_ns: 300,
            epoch: 5,
            sequence,
        }
    }

    #[test]
    fn a_restarted_speakers_new_epoch_is_newer_though_its_sequence_began_again() {
        let mut table = CongestionTable::default();
        table.apply(&update(Kind::CongestionDetected, 3, 900), 0);
        // The speaker restarts: epoch 6, sequence from 1. Taken at once, not stale for a hold.
        let restarted = Update {
            epoch: 6,
            ..update(Kind::CongestionCleared, 15, 1)
        };
        assert_eq!(table.apply(&restarted, 1), Applied::Changed);
        assert_eq!(table.quality(LINK), Quality::BEST);
        // A late message of the old epoch, however high its sequence: stale.
        assert_eq!(
            table.apply(&update(Kind::CongestionDetected, 0, 901), 2),
            Applied::Stale
        );
        assert_eq!(table.links().next().unwrap().1.epoch, 6);
    }

    #[test]
    fn levels_change_refresh_and_age_out() {
        let mut table = CongestionTable::default();
        assert_eq!(table.quality(LINK), Quality::BEST);
        assert_eq!(
            table.apply(&update(Kind::CongestionDetected, 3, 1), 0),
            Applied::Changed
        );
        assert_eq!(
            table.apply(&update(Kind::CongestionDetected, 3, 2), 100),
            Applied::Refreshed
        );
        assert_eq!(table.quality(LINK).level(), 3);
        // Held from the refresh: 100 + 300.
        assert_eq!(table.expire(399), 0);
        assert_eq!(table.expire(400), 1);
        assert_eq!(table.quality(LINK), Quality::BEST);
        assert!(table.is_empty());
    }

    #[test]
    fn old_and_repeated_sequence_numbers_are_stale_even_across_the_wrap() {
        let mut table = CongestionTable::default();
        table.apply(&update(Kind::CongestionDetected, 3, u32::MAX - 1), 0);
        assert_eq!(
            table.apply(&update(Kind::CongestionCleared, 12, u32::MAX - 1), 1),
            Applied::Stale
        );
        assert_eq!(
            table.apply(&update(Kind::CongestionCleared, 12, u32::MAX - 5), 1),
            Applied::Stale
        );
        assert_eq!(
            table.apply(&update(Kind::CongestionCleared, 12, 2), 1),
            Applied::Changed,
            "wrapped"
        );
        assert_eq!(table.quality(LINK).level(), 12);
        let (_, state) = table.links().next().unwrap();
        assert_eq!(
            (state.sequence, state.changed_ns, state.failed),
            (2, 1, false)
        );
    }

    #[test]
    fn a_failure_is_level_zero_whatever_the_message_says() {
        let mut table = CongestionTable::default();
        table.apply(&update(Kind::FailureDetected, 15, 1), 0);
        assert_eq!(table.quality(LINK), Quality::POOREST);
        assert!(table.links().next().unwrap().1.failed);
        assert_eq!(
            table.apply(&update(Kind::FailureCleared, 15, 2), 0),
            Applied::Changed
        );
        assert_eq!(table.quality(LINK), Quality::BEST);
    }
}
