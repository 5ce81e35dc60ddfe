//! The event queue: the events due at each picosecond in first-in first-out order, and the
//! distinct picoseconds that have events in a binary heap.
//!
//! Events pop by (time, insertion order): collectives run in lockstep, so many events share a
//! picosecond (17.6 on average in a 432-host permutation, 112 at 3,456 hosts), and ties must
//! resolve the same way in every run. So the queue keeps one list per distinct time, found by a
//! small open-addressing table on the time: an event is written once, at the end of its time's
//! list, and popped from the front of the list of the earliest time; only the distinct times go
//! through the heap. (A radix heap moved each event down its buckets several times: 13 % of
//! the instructions of a 432-host permutation went to that.) The event loop never schedules
//! before the last popped time (the queue is *monotone*): an event scheduled at the present
//! goes last among the present's.
//!
//! The queue stays small however many frames are in flight: it holds one event per busy output
//! port (the next arrival off its wire) and one per sending host (its pacer).
//!
//! Each event carries a 32-bit *hint* beside its target, which the queue only stores: what the
//! scheduler knew of the event for free when it pushed it (for an arrival, the frame's flow and
//! direction). The event loop's prefetching reads it from the events ahead, so that it need not
//! load a port and a wire entry to learn what the scheduler had in hand (`sim/prefetch.rs`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Bit of an event's packed target that marks a pacer event.
const WAKE_BIT: u32 = 1 << 31;
/// Slots of the time table at the start (a power of two).
const TABLE_CAPACITY: usize = 256;
/// A free slot of the time table.
const NO_LIST: u32 = u32::MAX;

/// One event: the next arrival off the wire of output port `target` (`wake == false`), or the
/// pacer timer of host `target`, with the hint it was pushed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) time: u64,
    pub(crate) target: u32,
    pub(crate) wake: bool,
    pub(crate) hint: u32,
}

/// A queued event: its target with the wake flag in the top bit in the low half, its hint in
/// the high half (its time is its list's).
#[inline]
fn pack(target: u32, wake: bool, hint: u32) -> u64 {
    u64::from(target | if wake { WAKE_BIT } else { 0 }) | u64::from(hint) << 32
}

#[inline]
fn unpack(time: u64, packed: u64) -> Event {
    let low = packed as u32;
    Event {
        time,
        target: low & !WAKE_BIT,
        wake: low & WAKE_BIT != 0,
        hint: (packed >> 32) as u32,
    }
}

/// A slot of [`TimeTable`]: a time and the list of its events.
#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    list: u32,
}

/// From a future time to the index of its list: open addressing with linear probing, removal
/// by backward shift (no tombstones), at most half full.
#[derive(Debug)]
struct TimeTable {
    slots: Vec<Entry>,
    len: usize,
}

/// The slot where a probe for `time` starts, in a table of `mask + 1` slots. Fibonacci
/// hashing: times are multiples of a few picosecond steps, and the multiplication mixes every
/// bit into the top ones.
#[inline]
fn home(time: u64, mask: usize) -> usize {
    (time.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & mask
}

impl TimeTable {
    fn new() -> Self {
        Self {
            slots: Self::free_slots(TABLE_CAPACITY),
            len: 0,
        }
    }

    fn free_slots(count: usize) -> Vec<Entry> {
        vec![
            Entry {
                time: 0,
                list: NO_LIST
            };
            count
        ]
    }

    /// Where `time` is, or the free slot where it would go.
    #[inline]
    fn find(&self, time: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut index = home(time, mask);
        loop {
            let entry = self.slots[index];
            if entry.list == NO_LIST || entry.time == time {
                return index;
            }
            index = (index + 1) & mask;
        }
    }

    /// The list of `time`, or `None` with the free slot where it would go.
    #[inline]
    fn get(&self, time: u64) -> Result<u32, usize> {
        let index = self.find(time);
        match self.slots[index].list {
            NO_LIST => Err(index),
            list => Ok(list),
        }
    }

    /// Puts `time` with `list` in the free slot `index` ([`TimeTable::get`]'s).
    #[cold]
    fn insert(&mut self, index: usize, time: u64, list: u32) {
        self.slots[index] = Entry { time, list };
        self.len += 1;
        if 2 * self.len > self.slots.len() {
            let grown = Self::free_slots(2 * self.slots.len());
            let old = std::mem::replace(&mut self.slots, grown);
            for entry in old.into_iter().filter(|entry| entry.list != NO_LIST) {
                let index = self.find(entry.time);
                self.slots[index] = entry;
            }
        }
    }

    /// Takes `time` (which must be present) out and returns its list.
    fn remove(&mut self, time: u64) -> u32 {
        let mask = self.slots.len() - 1;
        let mut hole = self.find(time);
        let list = self.slots[hole].list;
        debug_assert_ne!(list, NO_LIST, "a queued time is in the table");
        self.len -= 1;
        // Backward shift: move up every entry of the run after the hole whose home slot is not
        // between the hole and it, so that no probe for it ever meets the hole.
        let mut index = hole;
        loop {
            index = (index + 1) & mask;
            let entry = self.slots[index];
            if entry.list == NO_LIST {
                break;
            }
            let from_home = index.wrapping_sub(home(entry.time, mask)) & mask;
            if from_home >= index.wrapping_sub(hole) & mask {
                self.slots[hole] = entry;
                hole = index;
            }
        }
        self.slots[hole].list = NO_LIST;
        list
    }
}

#[derive(Debug)]
pub(crate) struct EventQueue {
    /// The packed events due at `last`, in insertion order, popped from `head`.
    due: Vec<u64>,
    head: usize,
    last: u64,
    len: usize,
    /// The distinct times after `last` that have events.
    times: BinaryHeap<Reverse<u64>>,
    /// Each of those times' list in `lists`.
    table: TimeTable,
    /// Lists of packed events, by index; those in `spare` are empty and unused.
    lists: Vec<Vec<u64>>,
    spare: Vec<u32>,
    /// The time of the last push after the present, and its list: consecutive events often
    /// go to the same time (frames that leave idle ports together arrive together). A time
    /// stays in the table until it becomes the present, and no push comes after the present,
    /// so this is never stale when it matches a time that is not the present.
    recent: (u64, u32),
    /// Times popped so far (wrapping).
    generation: u32,
}

impl EventQueue {
    pub(crate) fn new() -> Self {
        Self {
            due: Vec::new(),
            head: 0,
            last: 0,
            len: 0,
            times: BinaryHeap::new(),
            table: TimeTable::new(),
            lists: Vec::new(),
            spare: Vec::new(),
            recent: (0, NO_LIST),
            generation: 0,
        }
    }

    /// The time of the last popped event: the simulation's present.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.last
    }

    /// Schedules an event at `time`, which must not be before the last popped event, with hint
    /// 0.
    ///
    /// # Panics
    /// In debug builds, if `time` is earlier than the last popped event.
    #[inline]
    pub(crate) fn push(&mut self, time: u64, target: u32, wake: bool) {
        self.push_hinted(time, target, wake, 0);
    }

    /// Schedules an event at `time` (as [`push`](Self::push)) that carries `hint`.
    #[inline]
    pub(crate) fn push_hinted(&mut self, time: u64, target: u32, wake: bool, hint: u32) {
        debug_assert!(time >= self.last, "the event queue is monotone");
        debug_assert!(target & WAKE_BIT == 0, "targets use 31 bits");
        let packed = pack(target, wake, hint);
        self.len += 1;
        if time == self.last {
            self.due.push(packed);
            return;
        }
        let list = if self.recent.0 == time {
            self.recent.1
        } else {
            let list = match self.table.get(time) {
                Ok(list) => list,
                Err(slot) => self.new_time(slot, time),
            };
            self.recent = (time, list);
            list
        };
        self.lists[list as usize].push(packed);
    }

    /// A list for `time`, which has no events yet; `slot` is its free slot in the table.
    #[cold]
    fn new_time(&mut self, slot: usize, time: u64) -> u32 {
        let list = self.spare.pop().unwrap_or_else(|| {
            self.lists.push(Vec::new());
            (self.lists.len() - 1) as u32
        });
        self.table.insert(slot, time, list);
        self.times.push(Reverse(time));
        list
    }

    /// Events queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The earliest event; events due at the same time pop in the order they were pushed.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        if self.head == self.due.len() {
            self.refill()?;
        }
        let packed = self.due[self.head];
        self.head += 1;
        self.len -= 1;
        Some(unpack(self.last, packed))
    }

    /// Which picosecond the present is, counted in the times popped so far (wrapping): it
    /// changes exactly when a new time's events begin.
    #[inline]
    pub(crate) fn time_number(&self) -> u32 {
        self.generation
    }

    /// Events due at the current picosecond still queued.
    #[inline]
    pub(crate) fn due_after_head(&self) -> usize {
        self.due.len() - self.head
    }

    /// The position among the present's events of the event that [`pop`](Self::pop) will
    /// return `ahead` calls from now (if it is due now): a name that stays its own for as long
    /// as the present lasts.
    #[inline]
    pub(crate) fn position_ahead(&self, ahead: usize) -> usize {
        self.head + ahead
    }

    /// The event that [`pop`](Self::pop) will return `ahead` calls from now, if it is already
    /// known to be due at the current time (no event is ever scheduled before the current time,
    /// and one scheduled at it goes last, so those are final).
    #[inline]
    pub(crate) fn peek_due(&self, ahead: usize) -> Option<Event> {
        self.due
            .get(self.head + ahead)
            .map(|&packed| unpack(self.last, packed))
    }

    /// The present's events are used up: the earliest time's list becomes the present's.
    /// `None` when the queue is empty.
    #[cold]
    fn refill(&mut self) -> Option<()> {
        self.due.clear();
        self.head = 0;
        self.generation = self.generation.wrapping_add(1);
        let Reverse(time) = self.times.pop()?;
        let list = self.table.remove(time);
        std::mem::swap(&mut self.due, &mut self.lists[list as usize]);
        self.spare.push(list);
        self.last = time;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::lb::LbRng;

    /// Events pop exactly as from a binary heap ordered by (time, insertion sequence number):
    /// ties in time pop in scheduling order, each with its target, wake flag and hint.
    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut rng = LbRng::new(3);
        let mut queue = EventQueue::new();
        let mut heap = BinaryHeap::new();
        let mut order = 0u32;
        let mut now = 0u64;
        for _ in 0..50_000u32 {
            for _ in 0..rng.below(3) {
                let ahead = match rng.below(5) {
                    0 => u64::from(rng.below(2000)),
                    1 => u64::from(rng.below(600_000)),
                    2 | 3 => u64::from(rng.below(2)) * 41_800,
                    _ => u64::from(rng.below(1 << 30)),
                };
                order += 1;
                let wake = rng.below(2) == 0;
                let hint = rng.below(u32::MAX);
                queue.push_hinted(now + ahead, order, wake, hint);
                heap.push(Reverse((now + ahead, order, wake, hint)));
            }
            if rng.below(2) == 0 {
                let (a, b) = (queue.pop(), heap.pop());
                assert_eq!(
                    a.map(|e| (e.time, e.target, e.wake, e.hint)),
                    b.map(|Reverse(e)| e)
                );
                if let Some(event) = a {
                    now = event.time;
                }
            }
        }
        while let Some(Reverse(b)) = heap.pop() {
            let a = queue.pop().expect("same length");
            assert_eq!((a.time, a.target, a.wake, a.hint), b);
        }
        assert!(queue.pop().is_none());
    }

    /// The time table finds every time it holds and none it does not, across growth and
    /// removals in any order, with many times sharing a home slot.
    #[test]
    fn time_table_survives_collisions_growth_and_removal() {
        let mut rng = LbRng::new(7);
        let mut table = TimeTable::new();
        let mut held = std::collections::BTreeMap::new();
        for round in 0..20_000u32 {
            // Multiples of 2^40 share their home slot whatever the table size.
            let time = u64::from(rng.below(64)) << 40 | u64::from(rng.below(4));
            match (table.get(time), held.contains_key(&time)) {
                (Ok(list), true) => {
                    assert_eq!(Some(&list), held.get(&time));
                    if round % 3 == 0 {
                        assert_eq!(table.remove(time), list);
                        held.remove(&time);
                    }
                }
                (Err(slot), false) => {
                    table.insert(slot, time, round);
                    held.insert(time, round);
                }
                (found, expected) => panic!("{time}: {found:?}, held {expected}"),
            }
            assert_eq!(table.len, held.len());
        }
        for (&time, &list) in &held {
            assert_eq!(table.get(time), Ok(list));
        }
    }
}
