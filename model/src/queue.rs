//! The event queue: a binary heap ordered by (time, insertion sequence number), so that events
//! due at the same picosecond (collectives run in lockstep, so there are many) pop in the order
//! they were scheduled, the same way in every run.
//!
//! The heap stays small however many frames are in flight: it holds one event per busy output
//! port (the next arrival off its wire) and one per sending host (its pacer). A timing wheel was
//! tried and measured no faster: lockstep traffic puts hundreds of events in one bucket.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
    heap: BinaryHeap<Event>,
    order: u64,
}

impl EventQueue {
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::with_capacity(4096),
            order: 0,
        }
    }

    /// Schedules an event at `time` (not before the last popped event).
    #[inline]
    pub(crate) fn push(&mut self, time: u64, target: u32, wake: bool) {
        self.order += 1;
        self.heap.push(Event {
            time,
            order: self.order,
            target,
            wake,
        });
    }

    /// The earliest event by (time, sequence number).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::lb::LbRng;

    /// Events pop by (time, sequence): ties in time pop in scheduling order.
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
                heap.push(Event {
                    time: now + ahead,
                    order,
                    target: step,
                    wake: false,
                });
            }
            if rng.below(2) == 0 {
                let (a, b) = (wheel.pop(), heap.pop());
                assert_eq!(
                    a.map(|e| (e.time, e.order, e.target)),
                    b.map(|e| (e.time, e.order, e.target))
                );
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
