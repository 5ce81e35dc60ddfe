//! The machine's neighbour table while labs run: room for every lab's entries.
//!
//! Linux keeps **one** IPv4 neighbour table for the whole machine: the entries of every
//! namespace count against its garbage-collection thresholds `gc_thresh1`, `gc_thresh2` and
//! `gc_thresh3` (`net.ipv4.neigh.default.*`, 128 / 512 / 1024 unless changed; writable only
//! from the initial namespace). A lab holds two entries per link — each end knows its peer —:
//! 96 at k = 4, 768 at k = 8, 1 500 at k = 10, 6 144 at k = 16. What the kernel does as the
//! table fills (`net/core/neighbour.c`):
//! - **at `gc_thresh3`** it refuses new entries ("neighbor table overflow"): the switches and
//!   hosts cannot resolve their neighbours and every frame to one is dropped. Measured with the
//!   build before this module (2026-12-03): a k = 10 lab came up in 36 s with the table stuck
//!   at 1 024 entries, 964 refusals, and `pingall` reached **21 344 of 62 250** pairs; with the
//!   thresholds raised, 1 500 entries, no refusal, 62 250 of 62 250, up in 17 s;
//! - **above `gc_thresh2`**, a new entry more than 5 s after the last forced collection starts
//!   one, which deletes entries nothing holds and nothing updated for 5 s. The lab's entries
//!   are managed ([`super::net`], the switches' FIB mirror), which the kernel keeps probing:
//!   measured on a k = 4 lab with the thresholds lowered to 32 / 64, a link flap started a
//!   forced collection that deleted none of them;
//! - **above `gc_thresh1`**, the periodic collection deletes entries unused for
//!   `gc_stale_time` (60 s) outside the kernel's timer states: ordinary entries a switch's data
//!   path uses, never its kernel, went that way (115 hosts' gateways within two minutes of a
//!   k = 8 lab before they were managed).
//!
//! So `up --tune-machine` raises the three thresholds, where they are lower, to hold the
//! entries the machine has now plus the new lab's, with room to spare
//! ([`Thresholds::room_for`]) — recording first, once while any lab runs, what it found in
//! `/run/ofan/neighbour-table.json`; `down` of the last lab (and `down --all`, `reset`) puts
//! that back, as for `ksoftirqd` ([`super::softirq`]). The thresholds are the machine's:
//! anything else on it profits from the room while labs run; nothing is ever lowered. Without
//! the flag `up` changes nothing and refuses a lab whose entries would not fit under
//! `gc_thresh3` ([`check_room`]); above the two lower thresholds the lab's entries are safe,
//! being managed (the measurements above).

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::machine::Record;

/// Where the three thresholds live (the initial namespace's: the table's).
const SYSCTL_DIR: &str = "/proc/sys/net/ipv4/neigh/default";
/// The table's statistics: the first column of every line is its number of entries (hex).
const ARP_CACHE_STAT: &str = "/proc/net/stat/arp_cache";
const RECORD: Record = Record("/run/ofan/neighbour-table.json");

/// Entries beyond the count that `up` leaves room for, as a share of it (1 / `SPARE_SHARE`)
/// plus [`SPARE_MIN`]: the switches' kernels learn a few more (BGP daemons, a traceroute's
/// replies), and the machine's own table grows beside the labs.
const SPARE_SHARE: u32 = 4;
const SPARE_MIN: u32 = 256;

/// How long [`check_room`] waits for the entries of namespaces just deleted to go.
const DISMANTLED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// The IPv4 neighbour table's garbage-collection thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Below this many entries the periodic collection deletes nothing.
    pub gc_thresh1: u32,
    /// Above it, a new entry starts a forced collection (at most every 5 s).
    pub gc_thresh2: u32,
    /// The most entries the kernel keeps: above it, new ones are refused.
    pub gc_thresh3: u32,
}

impl Thresholds {
    /// The thresholds, raised where they are lower, that hold `entries` without a collection:
    /// the two lower ones at `entries` and a spare share above them, the hard limit twice that
    /// (as the kernel's defaults are 512 and 1024).
    #[must_use]
    pub fn room_for(self, entries: u32) -> Self {
        let wanted = entries.saturating_add((entries / SPARE_SHARE).max(SPARE_MIN));
        Self {
            gc_thresh1: self.gc_thresh1.max(wanted),
            gc_thresh2: self.gc_thresh2.max(wanted),
            gc_thresh3: self.gc_thresh3.max(wanted.saturating_mul(2)),
        }
    }

    /// Whether the kernel creates `entries` entries under these thresholds without refusing
    /// one: it refuses a new entry once it holds `gc_thresh3` and a forced collection frees
    /// none (the lab's entries are in use: none is freed).
    #[must_use]
    pub fn holds(self, entries: u32) -> bool {
        entries <= self.gc_thresh3
    }

    /// The machine's thresholds now.
    ///
    /// # Errors
    /// A sysctl cannot be read or holds no number.
    pub fn read() -> anyhow::Result<Self> {
        Ok(Self {
            gc_thresh1: read_sysctl("gc_thresh1")?,
            gc_thresh2: read_sysctl("gc_thresh2")?,
            gc_thresh3: read_sysctl("gc_thresh3")?,
        })
    }

    /// Sets the machine's thresholds (the kernel checks none against another).
    fn write(self) -> anyhow::Result<()> {
        for (key, value) in [
            ("gc_thresh1", self.gc_thresh1),
            ("gc_thresh2", self.gc_thresh2),
            ("gc_thresh3", self.gc_thresh3),
        ] {
            let path = Path::new(SYSCTL_DIR).join(key);
            std::fs::write(&path, value.to_string())
                .with_context(|| format!("cannot write {} = {value}", path.display()))?;
        }
        Ok(())
    }
}

fn read_sysctl(key: &str) -> anyhow::Result<u32> {
    let path = Path::new(SYSCTL_DIR).join(key);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{}: not a number: {text:?}", path.display()))
}

/// The entries of the machine's IPv4 neighbour table now.
///
/// # Errors
/// The statistics cannot be read or parsed.
pub fn entries() -> anyhow::Result<u32> {
    let text = std::fs::read_to_string(ARP_CACHE_STAT)
        .with_context(|| format!("cannot read {ARP_CACHE_STAT}"))?;
    parse_entries(&text).with_context(|| format!("cannot parse {ARP_CACHE_STAT}"))
}

/// The first column of the first line after the header (every line holds the same count; the
/// other columns are per CPU).
fn parse_entries(text: &str) -> anyhow::Result<u32> {
    let first = text
        .lines()
        .nth(1)
        .and_then(|line| line.split_whitespace().next())
        .context("no line after the header")?;
    u32::from_str_radix(first, 16).with_context(|| format!("entries {first:?} is not hex"))
}

/// The neighbour entries a lab with `links` links holds: one at each end of each.
#[must_use]
pub fn lab_entries(links: usize) -> u32 {
    u32::try_from(links.saturating_mul(2)).unwrap_or(u32::MAX)
}

/// What [`make_room`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raised {
    /// The thresholds found.
    pub from: Thresholds,
    /// The thresholds set (equal to `from`: nothing raised).
    pub to: Thresholds,
    /// Why they could not be raised although the lab fits under the hard limit as it is
    /// (e.g. `/proc/sys` read-only in a container): the lab runs, its entries at the mercy of
    /// the collections.
    pub refused: Option<String>,
}

/// Raises the machine's thresholds to hold its entries now and `more` (a new lab's),
/// recording first (once, while any lab runs) what it found.
///
/// # Errors
/// The table cannot be read or the record written; the thresholds cannot be raised and the
/// entries would not fit under `gc_thresh3` as it is (the kernel would refuse some: the lab
/// could not work), with what to do.
pub fn make_room(more: u32) -> anyhow::Result<Raised> {
    let from = Thresholds::read()?;
    let now = entries()?;
    let needed = now.saturating_add(more);
    let to = from.room_for(needed);
    if to == from {
        return Ok(Raised {
            from,
            to,
            refused: None,
        });
    }
    let recorded_here = RECORD.keep(&from)?;
    match to.write() {
        Ok(()) => Ok(Raised {
            from,
            to,
            refused: None,
        }),
        Err(error) => {
            // Put back what was raised before the failure; nothing to restore then.
            let _ = from.write();
            if recorded_here {
                RECORD.forget();
            }
            if !from.holds(needed) {
                anyhow::bail!(
                    "the machine's neighbour table holds at most {} entries \
                     (net.ipv4.neigh.default.gc_thresh3); it holds {now} and the lab needs {more} \
                     more, and raising the limit failed ({error:#}). Raise it as root in the \
                     initial namespace (sysctl -w net.ipv4.neigh.default.gc_thresh3={} \
                     net.ipv4.neigh.default.gc_thresh2={} net.ipv4.neigh.default.gc_thresh1={}) \
                     or build a smaller lab",
                    from.gc_thresh3,
                    to.gc_thresh3,
                    to.gc_thresh2,
                    to.gc_thresh1
                );
            }
            Ok(Raised {
                from,
                to: from,
                refused: Some(format!("{error:#}")),
            })
        }
    }
}

/// Checks, changing nothing, that the machine's table takes its entries now and `more` (a new
/// lab's) under the thresholds as they are (a lab built without `--tune-machine`).
///
/// # Errors
/// The table cannot be read; the entries would not fit under `gc_thresh3` (the kernel would
/// refuse some: the lab could not work), with what to do.
pub fn check_room(more: u32) -> anyhow::Result<()> {
    let thresholds = Thresholds::read()?;
    // Entries of namespaces deleted a moment ago (the previous lab's `down`) count until the
    // kernel has dismantled them, asynchronously: measured, 719 entries left just after a
    // k = 8 lab's down. Wait for them before refusing.
    let deadline = std::time::Instant::now() + DISMANTLED_WITHIN;
    let mut now = entries()?;
    while !thresholds.holds(now.saturating_add(more)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        now = entries()?;
    }
    let needed = now.saturating_add(more);
    if thresholds.holds(needed) {
        return Ok(());
    }
    let to = thresholds.room_for(needed);
    anyhow::bail!(
        "the machine's neighbour table holds at most {} entries \
         (net.ipv4.neigh.default.gc_thresh3); it holds {now} and the lab needs {more} more. \
         Build it with --tune-machine (the lab raises the thresholds and puts them back when \
         the last lab goes down), raise them yourself (sysctl -w \
         net.ipv4.neigh.default.gc_thresh3={} net.ipv4.neigh.default.gc_thresh2={} \
         net.ipv4.neigh.default.gc_thresh1={}), or build a smaller lab",
        thresholds.gc_thresh3,
        to.gc_thresh3,
        to.gc_thresh2,
        to.gc_thresh1
    );
}

/// Puts the recorded thresholds back if no lab is left; returns them if it did.
///
/// # Errors
/// The record cannot be read or removed, a threshold cannot be set.
pub fn restore_if_no_lab() -> anyhow::Result<Option<Thresholds>> {
    RECORD.put_back_if_no_lab(|original: Thresholds| {
        original.write()?;
        Ok(original)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: Thresholds = Thresholds {
        gc_thresh1: 128,
        gc_thresh2: 512,
        gc_thresh3: 1024,
    };

    #[test]
    fn a_small_lab_fits_the_defaults_and_larger_ones_raise_them() {
        // k = 4: 48 links, 96 entries (+ a few of the machine's): the defaults hold them, but
        // not above gc_thresh1 with the spare: raised to 96 + 256.
        let k4 = DEFAULTS.room_for(lab_entries(48));
        assert_eq!(k4.gc_thresh1, 352);
        assert_eq!((k4.gc_thresh2, k4.gc_thresh3), (512, 1024));
        // k = 8: 384 links, 768 entries: above gc_thresh2 — a forced collection per new entry.
        let k8 = DEFAULTS.room_for(lab_entries(384));
        assert_eq!(k8.gc_thresh2, 1024);
        assert_eq!(k8.gc_thresh1, 1024);
        assert_eq!(k8.gc_thresh3, 2048);
        // k = 16: 3 072 links, 6 144 entries: far above the hard limit.
        let k16 = DEFAULTS.room_for(lab_entries(3072));
        assert_eq!(k16.gc_thresh2, 6144 + 1536);
        assert!(k16.gc_thresh3 > k16.gc_thresh2);
    }

    #[test]
    fn a_lab_that_fits_under_the_hard_limit_can_run_without_raising_it() {
        // k = 4 (96) and k = 8 (768) fit the defaults; k = 10 (1 500) does not.
        assert!(DEFAULTS.holds(lab_entries(48)));
        assert!(DEFAULTS.holds(lab_entries(384) + 2));
        assert!(DEFAULTS.holds(1024));
        assert!(!DEFAULTS.holds(1025));
        assert!(!DEFAULTS.holds(lab_entries(750)));
    }

    #[test]
    fn thresholds_are_never_lowered() {
        let generous = Thresholds {
            gc_thresh1: 8192,
            gc_thresh2: 32768,
            gc_thresh3: 65536,
        };
        assert_eq!(generous.room_for(768), generous);
        assert_eq!(generous.room_for(0), generous);
        let mixed = Thresholds {
            gc_thresh1: 0,
            gc_thresh2: 4096,
            gc_thresh3: 1024,
        };
        assert_eq!(
            mixed.room_for(768),
            Thresholds {
                gc_thresh1: 1024,
                gc_thresh2: 4096,
                gc_thresh3: 2048
            }
        );
        assert_eq!(DEFAULTS.room_for(u32::MAX).gc_thresh3, u32::MAX);
    }

    #[test]
    fn the_entries_are_the_first_column_in_hex() {
        let stat = "entries  allocs   destroys hash_grows lookups\n\
                    00000300 00000001 00000000 00000000   00000004\n\
                    00000300 00000007 00000000 00000000   00000009\n";
        assert_eq!(parse_entries(stat).unwrap(), 768);
        assert!(parse_entries("entries allocs\n").is_err());
        assert!(parse_entries("entries\nzz 1\n").is_err());
    }

    #[test]
    fn the_record_round_trips() {
        let text = serde_json::to_string(&DEFAULTS).unwrap();
        assert_eq!(serde_json::from_str::<Thresholds>(&text).unwrap(), DEFAULTS);
    }
}
