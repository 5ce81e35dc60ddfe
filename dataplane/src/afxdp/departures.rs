//! A pool thread's due departures, earliest first: a min-heap of its members' next shaper
//! departures, as Linux's `sch_fq` keeps its flows in a tree ordered by their next
//! transmission time and arms one timer for the earliest.
//!
//! A pool thread serves the workers of many switches (40 per thread in a k = 8 lab on two
//! cores). Before each step that reads arrivals it sends what the members' shapers let leave
//! ([`super::pool`] explains why departures go first); with the heap that costs the due members
//! and a look at the earliest, not a pass over every member.
//!
//! Entries are never updated in place: a member whose earliest departure changes gets a new
//! entry, and the old one becomes stale — it is recognised (the member's departure or its
//! latest entry no longer matches) and dropped when it reaches the top. Member indexes are the
//! thread's `Vec` positions, so the heap is rebuilt whenever members come or go.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What the departure heap needs of a pool thread's member.
pub(super) trait Departing {
    /// Its earliest departure, as of its last step or departure (`None`: nothing queued, or it
    /// failed).
    fn depart_at(&self) -> Option<u64>;
    /// Sends what is due now; `None` if it panicked (it then reports no departure any more).
    fn depart(&mut self) -> Option<usize>;
}

/// No entry in the heap for this member.
const NO_ENTRY: u64 = u64::MAX;

/// The members' earliest departures, earliest first.
#[derive(Debug, Default)]
pub(super) struct Departures {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    /// Per member, the time of its latest entry (an older entry of the same member is stale).
    entered: Vec<u64>,
    /// Members that departed in the current sweep, entered again once it ends (a member whose
    /// frames could not leave — a full TX ring — keeps its time: it waits for the next sweep
    /// instead of being asked again and again in this one).
    departed: Vec<u32>,
}

impl Departures {
    /// Forgets every entry and enters each member's earliest departure: members came or went,
    /// and their indexes changed.
    pub(super) fn rebuild<M: Departing>(&mut self, members: &[M]) {
        self.heap.clear();
        self.entered.clear();
        self.entered.resize(members.len(), NO_ENTRY);
        for (index, member) in members.iter().enumerate() {
            self.note(index, member.depart_at());
        }
    }

    /// Member `index`'s earliest departure is now `at` (after a step).
    pub(super) fn note(&mut self, index: usize, at: Option<u64>) {
        let Some(at) = at else {
            return;
        };
        if self.entered[index] == at {
            return;
        }
        self.entered[index] = at;
        self.heap.push(Reverse((
            at,
            u32::try_from(index).expect("fewer than 2^32 members"),
        )));
        // Stale entries leave when they reach the top; bound them in between.
        if self.heap.len() > 4 * self.entered.len() + 64 {
            self.compact();
        }
    }

    /// Sends the due departures of every member whose earliest one has come by `now`, earliest
    /// first. Returns the frames sent and the earliest departure of any member afterwards
    /// (`u64::MAX`: none queued).
    pub(super) fn due<M: Departing>(&mut self, members: &mut [M], now: u64) -> (usize, u64) {
        let mut sent = 0;
        let soonest = loop {
            let Some(&Reverse((at, index))) = self.heap.peek() else {
                break u64::MAX;
            };
            let slot = index as usize;
            if self.entered[slot] != at || members[slot].depart_at() != Some(at) {
                self.heap.pop();
                continue;
            }
            if at > now {
                break at;
            }
            self.heap.pop();
            self.entered[slot] = NO_ENTRY;
            sent += members[slot].depart().unwrap_or(0);
            self.departed.push(index);
        };
        if self.departed.is_empty() {
            return (sent, soonest);
        }
        let mut soonest = soonest;
        let mut departed = std::mem::take(&mut self.departed);
        for &index in &departed {
            let slot = index as usize;
            let at = members[slot].depart_at();
            self.note(slot, at);
            if let Some(at) = at {
                soonest = soonest.min(at);
            }
        }
        departed.clear();
        self.departed = departed;
        (sent, soonest)
    }

    /// Drops the stale entries.
    fn compact(&mut self) {
        let entered = &self.entered;
        self.heap
            .retain(|&Reverse((at, index))| entered[index as usize] == at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member whose queued frames leave at the given times, one per departure.
    struct Queue {
        departures: Vec<u64>,
        sent: usize,
        panics: bool,
        /// Its frames cannot leave (a full TX ring): a departure sends nothing.
        stuck: bool,
    }

    impl Departing for Queue {
        fn depart_at(&self) -> Option<u64> {
            self.departures.first().copied()
        }

        fn depart(&mut self) -> Option<usize> {
            if self.panics {
                self.departures.clear();
                return None;
            }
            if self.stuck {
                return Some(0);
            }
            self.departures.remove(0);
            self.sent += 1;
            Some(1)
        }
    }

    fn queue(departures: &[u64]) -> Queue {
        Queue {
            departures: departures.to_vec(),
            sent: 0,
            panics: false,
            stuck: false,
        }
    }

    fn built(members: &[Queue]) -> Departures {
        let mut departures = Departures::default();
        departures.rebuild(members);
        departures
    }

    #[test]
    fn a_sweep_sends_only_what_is_due_and_says_when_the_next_is() {
        let mut members = [queue(&[100, 900]), queue(&[]), queue(&[500]), queue(&[50])];
        let mut departures = built(&members);
        let (sent, soonest) = departures.due(&mut members, 100);
        assert_eq!(sent, 2, "the departures at 100 and 50");
        assert_eq!(
            members.iter().map(|m| m.sent).collect::<Vec<_>>(),
            [1, 0, 0, 1]
        );
        assert_eq!(soonest, 500, "the third's, not the first's next at 900");
        let (sent, soonest) = departures.due(&mut members, 499);
        assert_eq!((sent, soonest), (0, 500));
        let (sent, soonest) = departures.due(&mut members, 1_000);
        assert_eq!((sent, soonest), (2, u64::MAX), "nothing left queued");
    }

    #[test]
    fn a_member_that_panics_in_a_sweep_sends_nothing_and_the_others_go_on() {
        let mut members = [queue(&[10]), queue(&[20]), queue(&[30])];
        members[1].panics = true;
        let mut departures = built(&members);
        let (sent, soonest) = departures.due(&mut members, 25);
        assert_eq!(sent, 1);
        assert_eq!(
            soonest, 30,
            "the panicked member's departure no longer counts"
        );
        assert_eq!(
            members.iter().map(|m| m.sent).collect::<Vec<_>>(),
            [1, 0, 0],
            "the first sent; the third was not due"
        );
    }

    #[test]
    fn a_member_whose_frames_cannot_leave_is_asked_once_per_sweep() {
        let mut members = [queue(&[10]), queue(&[20])];
        members[0].stuck = true;
        let mut departures = built(&members);
        let (sent, soonest) = departures.due(&mut members, 30);
        assert_eq!(
            (sent, soonest),
            (1, 10),
            "still due: the next sweep asks again"
        );
        members[0].stuck = false;
        let (sent, soonest) = departures.due(&mut members, 30);
        assert_eq!((sent, soonest), (1, u64::MAX));
    }

    #[test]
    fn a_departure_moved_by_a_step_leaves_at_its_new_time_only() {
        let mut members = [queue(&[100]), queue(&[200])];
        let mut departures = built(&members);
        // A step of member 0 queues a frame due earlier, then one of member 1 a later one.
        members[0].departures.insert(0, 40);
        departures.note(0, members[0].depart_at());
        members[1].departures = vec![300];
        departures.note(1, members[1].depart_at());
        assert_eq!(departures.due(&mut members, 50), (1, 100));
        assert_eq!(departures.due(&mut members, 250), (1, 300), "200 was stale");
        assert_eq!(departures.due(&mut members, 300), (1, u64::MAX));
        assert_eq!(members[0].sent + members[1].sent, 3);
    }

    /// Against the scan it replaces: over random members, steps that move departures and
    /// sweeps at random times, every sweep sends the same frames and names the same soonest
    /// departure as a pass over every member, and the heap stays bounded.
    #[test]
    fn the_heap_agrees_with_a_scan_of_every_member() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for _ in 0..50 {
            let count = 1 + next(40) as usize;
            let mut heaped: Vec<Queue> = (0..count).map(|_| queue(&[])).collect();
            let mut scanned: Vec<Queue> = (0..count).map(|_| queue(&[])).collect();
            let mut departures = built(&heaped);
            let mut now = 0;
            for _ in 0..400 {
                now += next(50);
                if next(3) == 0 {
                    // A step: the member queues a frame (earlier or later than its others).
                    let member = next(count as u64) as usize;
                    let at = now + next(200);
                    for side in [&mut heaped, &mut scanned] {
                        let queued = &mut side[member].departures;
                        let place = queued.partition_point(|&t| t <= at);
                        queued.insert(place, at);
                    }
                    departures.note(member, heaped[member].depart_at());
                    continue;
                }
                let by_heap = departures.due(&mut heaped, now);
                let mut sent = 0;
                for member in &mut scanned {
                    if member.depart_at().is_some_and(|at| at <= now) {
                        sent += member.depart().unwrap_or(0);
                    }
                }
                let soonest = scanned.iter().filter_map(Departing::depart_at).min();
                assert_eq!(by_heap, (sent, soonest.unwrap_or(u64::MAX)));
                assert!(departures.heap.len() <= 4 * count + 64 + 1);
            }
            let sent = |side: &[Queue]| side.iter().map(|m| m.sent).collect::<Vec<_>>();
            assert_eq!(sent(&heaped), sent(&scanned));
        }
    }
}
