//! The event queue: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) on the integer
//! picosecond time, with first-in first-out order among events due at the same picosecond.
//!
//! Events pop by (time, insertion order): collectives run in lockstep, so many events share a
//! picosecond, and ties must resolve the same way in every run. A radix heap gives that order
//! without storing a sequence number. The event loop never schedules before the last popped time
//! (the heap is *monotone*), so every queued time agrees with the last popped time `last` on its
//! high bits, and bucket `b` holds the events whose time first differs from `last` at bit
//! `b − 1` (bucket 0: time == `last`). Events due at the same time are therefore always in the
//! same bucket, and buckets keep their events in insertion order; popping takes bucket 0 from
//! the front, and when it is empty, the first non-empty bucket is emptied into lower buckets
//! (in order) around its minimum, which becomes the new `last`. Each event moves down at most
//! 64 times and in practice a few; every access is a sequential push or scan of a small
//! vector, where a binary heap of a few thousand events costs a cache miss per level.
//!
//! The queue stays small however many frames are in flight: it holds one event per busy output
//! port (the next arrival off its wire) and one per sending host (its pacer).

/// Events per bucket allocated up front.
const BUCKET_CAPACITY: usize = 64;
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

/// A queued event: 16 bytes, the wake flag in the target's top bit.
#[derive(Debug, Clone, Copy)]
struct Slot {
    time: u64,
    packed: u32,
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
    /// `buckets[b]`: events whose time first differs from `last` at bit `b − 1`; bucket 0 holds
    /// the events due at `last`, popped from `head`.
    buckets: [Vec<Slot>; 65],
    head: usize,
    last: u64,
    len: usize,
    /// Refills so far: with a position in bucket 0, it names an event for as long as it is due.
    generation: u32,
}

/// The bucket of `time` relative to the last popped time.
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
            len: 0,
            generation: 0,
        }
    }

    /// The time of the last popped event: the simulation's present.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        self.last
    }

    /// Schedules an event at `time`, which must not be before the last popped event.
    ///
    /// # Panics
    /// In debug builds, if `time` is earlier than the last popped event.
    #[inline]
    pub(crate) fn push(&mut self, time: u64, target: u32, wake: bool) {
        debug_assert!(time >= self.last, "the event queue is monotone");
        debug_assert!(target & WAKE_BIT == 0, "targets use 31 bits");
        let packed = target | if wake { WAKE_BIT } else { 0 };
        self.buckets[bucket(time, self.last)].push(Slot { time, packed });
        self.len += 1;
    }

    /// Events queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The earliest event; events due at the same time pop in the order they were pushed.
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        if self.head == self.buckets[0].len() {
            self.refill()?;
        }
        let slot = self.buckets[0][self.head];
        self.head += 1;
        self.len -= 1;
        Some(slot.event())
    }

    /// Whether the last popped event was the first of its picosecond.
    #[inline]
    pub(crate) fn first_of_time(&self) -> bool {
        self.head == 1
    }

    /// Events due at the current picosecond still queued.
    #[inline]
    pub(crate) fn due_after_head(&self) -> usize {
        self.buckets[0].len() - self.head
    }

    /// The event that [`pop`](Self::pop) will return `ahead` calls from now, if it is already
    /// known to be due at the current time (no event is ever scheduled before the current time,
    /// and one scheduled at it goes last, so those are final), with a stamp that names it among
    /// all events of the run (the refill and its position in the current picosecond), so that
    /// what is learnt about it ahead can be kept until it is popped.
    #[inline]
    pub(crate) fn peek_due_stamped(&self, ahead: usize) -> Option<(u64, Event)> {
        let position = self.head + ahead;
        self.buckets[0].get(position).map(|slot| {
            let stamp = u64::from(self.generation) << 32 | position as u64;
            (stamp, slot.event())
        })
    }

    /// Bucket 0 is used up: empty the first non-empty bucket into the lower ones around its
    /// minimum (which becomes `last`). `None` when the queue is empty.
    #[cold]
    fn refill(&mut self) -> Option<()> {
        self.buckets[0].clear();
        self.head = 0;
        self.generation = self.generation.wrapping_add(1);
        if self.len == 0 {
            return None;
        }
        let from = (1..self.buckets.len()).find(|&b| !self.buckets[b].is_empty())?;
        let mut moving = std::mem::take(&mut self.buckets[from]);
        let last = moving.iter().map(|slot| slot.time).min()?;
        self.last = last;
        // In order, so that events due at the same time keep their insertion order.
        for &slot in &moving {
            self.buckets[bucket(slot.time, last)].push(slot);
        }
        moving.clear();
        self.buckets[from] = moving;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::lb::LbRng;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Events pop exactly as from a binary heap ordered by (time, insertion sequence number):
    /// ties in time pop in scheduling order.
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
                queue.push(now + ahead, order, wake);
                heap.push(Reverse((now + ahead, order, wake)));
            }
            if rng.below(2) == 0 {
                let (a, b) = (queue.pop(), heap.pop());
                assert_eq!(a.map(|e| (e.time, e.target, e.wake)), b.map(|Reverse(e)| e));
                if let Some(event) = a {
                    now = event.time;
                }
            }
        }
        while let Some(Reverse(b)) = heap.pop() {
            let a = queue.pop().expect("same length");
            assert_eq!((a.time, a.target, a.wake), b);
        }
        assert!(queue.pop().is_none());
    }
}
