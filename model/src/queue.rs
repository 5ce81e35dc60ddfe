//! The event queue: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) on the integer
//! picosecond time, with first-in first-out order among events due at the same picosecond, in
//! front of which a window holds the next events in the order they will pop.
//!
//! Events pop by (time, insertion order): collectives run in lockstep, so many events share a
//! picosecond, and ties must resolve the same way in every run. A radix heap gives that order
//! without storing a sequence number. The event loop never schedules before the last popped time
//! (the heap is *monotone*), so every queued time agrees with `last` on its high bits, and bucket
//! `b` holds the events whose time first differs from `last` at bit `b − 1` (bucket 0: time ==
//! `last`). Events due at the same time are therefore always in the same bucket, and buckets keep
//! their events in insertion order. Every access is a sequential push or scan of a small vector,
//! where a binary heap of a few thousand events costs a cache miss per level.
//!
//! Bucket 0 is the *window*: the events due up to `last`, in the order they pop, from `head`.
//! [`EventQueue::pull`] moves the next time's events into it (it empties the first non-empty
//! bucket into the lower ones around its minimum, which becomes `last`; each event moves down
//! at most 64 times and in practice a few). The event loop pulls ahead of need
//! ([`EventQueue::top_up`]), so that the events a few places ahead are known whatever their
//! time, and prefetches what they will touch (`sim/prefetch.rs`). What it saw stays true: an
//! event scheduled later at a time already in the window goes after the window's events of
//! that time and before those of later times ([`EventQueue::insert_early`]), so the window's
//! events keep their order among themselves. Each event is given a name as it enters the
//! window, so that what is learnt about it ahead can be kept until it pops.
//!
//! An event scheduled before the present (which the simulator should not do, but does: a host
//! woken by its retransmission timer under a CCA can push its pacer into the past) pops where
//! the radix heap without the window popped it, so that results do not depend on the window:
//! the window is put back into the buckets around the present ([`EventQueue::push_late`]),
//! and it is pulled no further ahead than need until that event popped.
//!
//! The queue stays small however many frames are in flight: it holds one event per busy output
//! port (the next arrival off its wire) and one per sending host (its pacer).

/// Events per bucket allocated up front.
const BUCKET_CAPACITY: usize = 64;
/// Popped events the window keeps before it drops them (a move of the few events left).
const WINDOW_COMPACT: usize = 1024;
/// Bit of a slot's name that marks an event scheduled before the present.
const LATE_BIT: u32 = 1 << 31;
/// Bit of [`Event::target`]'s packed form that marks a pacer event.
const WAKE_BIT: u32 = 1 << 31;

/// One event: the next arrival off the wire of output port `target` (`wake == false`), or the
/// pacer timer of host `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) time: u64,
    pub(crate) target: u32,
    pub(crate) wake: bool,
}

/// A queued event: 16 bytes, the wake flag in the target's top bit, and in the window its name.
#[derive(Debug, Clone, Copy)]
struct Slot {
    time: u64,
    packed: u32,
    /// In the window: the event's name ([`EventQueue::peek`]); elsewhere meaningless.
    name: u32,
}

impl Slot {
    #[inline]
    fn event(self) -> Event {
        Event {
            time: self.time,
            target: self.packed & !WAKE_BIT,
            wake: self.packed & WAKE_BIT != 0,
        }
    }
}

#[derive(Debug)]
pub(crate) struct EventQueue {
    /// `buckets[b]`, `b ≥ 1`: events after `last` whose time first differs from it at bit
    /// `b − 1`. `buckets[0]`: the window, events due up to `last` in pop order from `head`.
    buckets: [Vec<Slot>; 65],
    head: usize,
    /// The latest time pulled into the window.
    last: u64,
    /// The time of the last popped event.
    now: u64,
    /// Events queued, window included.
    len: usize,
    /// Events scheduled before the present that have not popped (their names carry
    /// [`LATE_BIT`]): the window is not pulled ahead while there are any.
    late: u32,
    /// The name of the next event to enter the window.
    next_name: u32,
}

/// The bucket of `time` relative to the last pulled time.
#[inline]
fn bucket(time: u64, last: u64) -> usize {
    (u64::BITS - (time ^ last).leading_zeros()) as usize
}

impl EventQueue {
    pub(crate) fn new() -> Self {
        Self {
            buckets: std::array::from_fn(|_| Vec::with_capacity(BUCKET_CAPACITY)),
            head: 0,
            last: 0,
            now: 0,
            len: 0,
            late: 0,
            next_name: 0,
        }
    }

    /// The time of the last popped event: the simulation's present.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    /// Schedules an event at `time`, which should not be before the last popped event (one that
    /// is pops where the radix heap without the window popped it: see the module
    /// documentation).
    #[inline]
    pub(crate) fn push(&mut self, time: u64, target: u32, wake: bool) {
        debug_assert!(target & WAKE_BIT == 0, "targets use 31 bits");
        let packed = target | if wake { WAKE_BIT } else { 0 };
        let slot = Slot {
            time,
            packed,
            name: self.next_name,
        };
        self.len += 1;
        if time < self.last {
            self.insert_early(slot);
            return;
        }
        let b = bucket(time, self.last);
        // An event at `last` enters the window (at its end) and takes the name.
        self.next_name = (self.next_name + u32::from(b == 0)) & !LATE_BIT;
        self.buckets[b].push(slot);
    }

    /// Events queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The earliest event; events due at the same time pop in the order they were pushed.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        if self.head == self.buckets[0].len() && !self.pull() {
            return None;
        }
        let slot = self.buckets[0][self.head];
        self.head += 1;
        self.len -= 1;
        self.now = slot.time;
        if slot.name & LATE_BIT != 0 {
            self.late -= 1;
        }
        Some(slot.event())
    }

    /// Pulls events into the window until it holds the event [`peek`](Self::peek)`(ahead)`
    /// names, or the queue has no more.
    #[inline]
    pub(crate) fn top_up(&mut self, ahead: usize) {
        while self.late == 0 && self.buckets[0].len() - self.head <= ahead && self.pull() {}
    }

    /// The event that [`pop`](Self::pop) will return `ahead` calls from now, if it is in the
    /// window, with its name, which it keeps until it pops. Events scheduled meanwhile may come
    /// before it, never after.
    #[inline]
    pub(crate) fn peek(&self, ahead: usize) -> Option<(u32, Event)> {
        self.buckets[0]
            .get(self.head + ahead)
            .map(|slot| (slot.name, slot.event()))
    }

    /// An event scheduled before the present: the window's events after the present go back to
    /// the buckets around it, as if never pulled, and the event to the bucket of the first bit
    /// in which its time differs from the present, as in the radix heap without the window
    /// (which pops it once every event up to the end of the present's aligned block of `2^b`
    /// picoseconds popped, and turns the clock back).
    #[cold]
    #[inline(never)]
    fn push_late(&mut self, mut slot: Slot) {
        if self.last != self.now {
            let window = std::mem::take(&mut self.buckets[0]);
            let mut queued: Vec<Slot> = window[self.head..].to_vec();
            for bucket in &mut self.buckets[1..] {
                queued.append(bucket);
            }
            self.buckets[0] = window;
            self.buckets[0].clear();
            self.head = 0;
            self.last = self.now;
            // In order: events due at the same time keep their order.
            for queued in queued {
                let b = bucket(queued.time, self.last);
                self.buckets[b].push(queued);
            }
        }
        slot.name = LATE_BIT;
        self.late += 1;
        self.buckets[bucket(slot.time, self.last)].push(slot);
    }

    /// An event due before the window's last time (not before the present): after the window's
    /// events of its time or earlier, before the later ones.
    #[cold]
    #[inline(never)]
    fn insert_early(&mut self, mut slot: Slot) {
        if slot.time < self.now {
            self.push_late(slot);
            return;
        }
        slot.name = self.next_name;
        self.next_name = (self.next_name + 1) & !LATE_BIT;
        let window = &mut self.buckets[0];
        let position = self.head + window[self.head..].partition_point(|s| s.time <= slot.time);
        window.insert(position, slot);
    }

    /// Moves the events of the next time into the window: empties the first non-empty bucket
    /// into the lower ones around its minimum (which becomes `last`). `false` when nothing is
    /// left outside the window.
    #[cold]
    #[inline(never)]
    fn pull(&mut self) -> bool {
        let window = &mut self.buckets[0];
        if self.len == window.len() - self.head {
            return false;
        }
        if self.head == window.len() {
            window.clear();
            self.head = 0;
        } else if self.head >= WINDOW_COMPACT {
            window.drain(..self.head);
            self.head = 0;
        }
        let Some(from) = (1..self.buckets.len()).find(|&b| !self.buckets[b].is_empty()) else {
            return false;
        };
        let mut moving = std::mem::take(&mut self.buckets[from]);
        let Some(last) = moving.iter().map(|slot| slot.time).min() else {
            return false;
        };
        self.last = last;
        // In order, so that events due at the same time keep their insertion order.
        for &slot in &moving {
            let b = bucket(slot.time, last);
            let name = self.next_name | (slot.name & LATE_BIT);
            self.next_name = (self.next_name + u32::from(b == 0)) & !LATE_BIT;
            self.buckets[b].push(Slot { name, ..slot });
        }
        moving.clear();
        self.buckets[from] = moving;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::lb::LbRng;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Events pop exactly as from a binary heap ordered by (time, insertion sequence number):
    /// ties in time pop in scheduling order, however far ahead the window is pulled; an event
    /// seen in the window keeps its name until it pops.
    #[test]
    fn pops_in_time_then_insertion_order() {
        for window in [0, 1, 23, 200] {
            let mut rng = LbRng::new(3);
            let mut queue = EventQueue::new();
            let mut heap = BinaryHeap::new();
            let mut names = std::collections::HashMap::new();
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
                    queue.push(now + ahead, order, wake);
                    heap.push(Reverse((now + ahead, order, wake)));
                }
                if window > 0 {
                    queue.top_up(rng.below(window) as usize);
                    for ahead in 0..window as usize {
                        if let Some((name, event)) = queue.peek(ahead) {
                            assert_eq!(*names.entry(event.target).or_insert(name), name);
                        }
                    }
                }
                if rng.below(2) == 0 {
                    let (a, b) = (queue.pop(), heap.pop());
                    assert_eq!(a.map(|e| (e.time, e.target, e.wake)), b.map(|Reverse(e)| e));
                    if let Some(event) = a {
                        now = event.time;
                        assert_eq!(queue.now(), now);
                    }
                }
                assert_eq!(queue.len(), heap.len());
            }
            while let Some(Reverse(b)) = heap.pop() {
                let a = queue.pop().expect("same length");
                assert_eq!((a.time, a.target, a.wake), b);
            }
            assert!(queue.pop().is_none());
        }
    }

    /// The radix heap without the window (the queue before it had one), as the reference for
    /// events scheduled before the present.
    struct Reference {
        buckets: [Vec<(u64, u32)>; 65],
        head: usize,
        last: u64,
        len: usize,
    }

    impl Reference {
        fn push(&mut self, time: u64, target: u32) {
            self.buckets[bucket(time, self.last)].push((time, target));
            self.len += 1;
        }

        fn pop(&mut self) -> Option<(u64, u32)> {
            if self.head == self.buckets[0].len() {
                self.buckets[0].clear();
                self.head = 0;
                if self.len == 0 {
                    return None;
                }
                let from = (1..65).find(|&b| !self.buckets[b].is_empty())?;
                let moving = std::mem::take(&mut self.buckets[from]);
                let last = moving.iter().map(|e| e.0).min()?;
                self.last = last;
                for &event in &moving {
                    self.buckets[bucket(event.0, last)].push(event);
                }
            }
            let event = self.buckets[0][self.head];
            self.head += 1;
            self.len -= 1;
            Some(event)
        }
    }

    /// Events scheduled before the present pop where the radix heap without the window popped
    /// them, however far the window is pulled.
    #[test]
    fn events_in_the_past_pop_as_without_the_window() {
        for seed in 0..20 {
            let mut rng = LbRng::new(seed);
            let mut queue = EventQueue::new();
            let mut reference = Reference {
                buckets: std::array::from_fn(|_| Vec::new()),
                head: 0,
                last: 0,
                len: 0,
            };
            let mut order = 0u32;
            let mut now = 1u64 << 20;
            queue.push(now, 0, false);
            reference.push(now, 0);
            assert_eq!(queue.pop().map(|e| e.time), reference.pop().map(|e| e.0));
            for _ in 0..20_000u32 {
                for _ in 0..rng.below(3) {
                    let time = match rng.below(8) {
                        0 => now.saturating_sub(u64::from(rng.below(5000))),
                        1 => now + u64::from(rng.below(3)),
                        2 => now + u64::from(rng.below(2000)),
                        3 | 4 => now + u64::from(rng.below(60_000)),
                        _ => now + u64::from(rng.below(1 << 22)),
                    };
                    order += 1;
                    queue.push(time, order, false);
                    reference.push(time, order);
                }
                queue.top_up(rng.below(30) as usize);
                if rng.below(2) == 0 {
                    let (a, b) = (queue.pop(), reference.pop());
                    assert_eq!(a.map(|e| (e.time, e.target)), b, "seed {seed}");
                    if let Some((time, _)) = b {
                        now = time;
                    }
                }
                assert_eq!(queue.len(), reference.len);
            }
            while let Some(b) = reference.pop() {
                assert_eq!(
                    queue.pop().map(|e| (e.time, e.target)),
                    Some(b),
                    "seed {seed}"
                );
            }
            assert!(queue.pop().is_none());
        }
    }
}
