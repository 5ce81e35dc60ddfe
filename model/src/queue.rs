//! The event queue: a timing wheel ordered by (time, insertion sequence number).
//!
//! Almost every event of the model is due within one frame time plus one propagation delay of
//! the present (the head arrival of each port's wire, each host's pacer), so a wheel of
//! [`WHEEL`] buckets of 2^[`SHIFT`] ps holds them all and pushing or popping touches one or two
//! cache lines, where a binary heap of thousands of events walks a dozen levels. Events further
//! ahead wait in an overflow heap and enter the wheel when its window reaches them. Within a
//! bucket the earliest (time, sequence) event is found by a scan, so the order is exactly that
//! of a heap keyed by (time, sequence).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// log₂ of the bucket width in ps (1.024 ns).
const SHIFT: u32 = 10;
/// Buckets in the wheel (a window of ≈ 4.2 µs).
const WHEEL: u64 = 4096;

/// One event: the next arrival off the wire of output port `target` (`wake == false`), or the
/// pacer timer of host `target`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Event {
    pub(crate) time: u64,
    pub(crate) order: u64,
    pub(crate) target: u32,
    pub(crate) wake: bool,
}

impl Event {
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.time, self.order)
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that the overflow max-heap pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

#[derive(Debug)]
pub(crate) struct EventQueue {
    buckets: Vec<Vec<Event>>,
    /// Bucket number (`time >> SHIFT`) of the present: every event in the wheel has a bucket
    /// number in `cursor..cursor + WHEEL`, so slot `n % WHEEL` holds only bucket `n`.
    cursor: u64,
    in_wheel: usize,
    overflow: BinaryHeap<Event>,
    order: u64,
}

impl EventQueue {
    pub(crate) fn new() -> Self {
        Self {
            buckets: (0..WHEEL).map(|_| Vec::with_capacity(8)).collect(),
            cursor: 0,
            in_wheel: 0,
            overflow: BinaryHeap::new(),
            order: 0,
        }
    }

    /// Schedules an event at `time` (not before the last popped event).
    #[inline]
    pub(crate) fn push(&mut self, time: u64, target: u32, wake: bool) {
        self.order += 1;
        let event = Event {
            time,
            order: self.order,
            target,
            wake,
        };
        let bucket = time >> SHIFT;
        debug_assert!(bucket >= self.cursor, "events are never scheduled in the past");
        if bucket < self.cursor + WHEEL {
            self.buckets[(bucket % WHEEL) as usize].push(event);
            self.in_wheel += 1;
        } else {
            self.overflow.push(event);
        }
    }

    /// The earliest event by (time, sequence number).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        loop {
            let bucket = &mut self.buckets[(self.cursor % WHEEL) as usize];
            if !bucket.is_empty() {
                let mut best = 0;
                for (index, event) in bucket.iter().enumerate().skip(1) {
                    if event.key() < bucket[best].key() {
                        best = index;
                    }
                }
                self.in_wheel -= 1;
                return Some(bucket.swap_remove(best));
            }
            if self.in_wheel == 0 {
                self.cursor = self.overflow.peek()?.time >> SHIFT;
            } else {
                self.cursor += 1;
            }
            while let Some(event) = self.overflow.peek() {
                let bucket = event.time >> SHIFT;
                if bucket >= self.cursor + WHEEL {
                    break;
                }
                let event = self.overflow.pop().expect("peeked");
                self.buckets[(bucket % WHEEL) as usize].push(event);
                self.in_wheel += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::lb::LbRng;

    /// The wheel pops exactly what a binary heap keyed by (time, sequence) pops, including
    /// events far beyond the window and events pushed into the current bucket.
    #[test]
    fn pops_in_heap_order() {
        let mut rng = LbRng::new(3);
        let mut wheel = EventQueue::new();
        let mut heap = BinaryHeap::new();
        let mut order = 0;
        let mut now = 0u64;
        for step in 0..20_000u32 {
            let pushes = rng.below(3);
            for _ in 0..pushes {
                let ahead = match rng.below(4) {
                    0 => u64::from(rng.below(2000)),
                    1 => u64::from(rng.below(600_000)),
                    2 => 0,
                    _ => u64::from(rng.below(1 << 30)),
                };
                order += 1;
                wheel.push(now + ahead, step, false);
                heap.push(Event { time: now + ahead, order, target: step, wake: false });
            }
            if rng.below(2) == 0 {
                let (a, b) = (wheel.pop(), heap.pop());
                assert_eq!(a.map(|e| (e.time, e.order, e.target)), b.map(|e| (e.time, e.order, e.target)));
                if let Some(event) = a {
                    now = event.time;
                }
            }
        }
        while let Some(b) = heap.pop() {
            let a = wheel.pop().expect("same length");
            assert_eq!((a.time, a.order), (b.time, b.order));
        }
        assert!(wheel.pop().is_none());
    }
}
