//! A first-in first-out ring of `Copy` entries with a power-of-two capacity: the wire of an
//! output port.
//!
//! `VecDeque` would do, but its header (capacity, pointer, head, length: 32 bytes) does not
//! leave room in a port's 64-byte line for what the event loop reads on every event; this one
//! takes 24 bytes and indexes with a mask.

/// Entries allocated up front (a power of two).
const INITIAL_CAPACITY: usize = 16;

#[derive(Debug)]
pub(crate) struct Ring<T> {
    /// `slots.len()` is a power of two; entry `i` (from the front) is at `(head + i) & mask`.
    slots: Box<[T]>,
    head: u32,
    len: u32,
}

impl<T: Copy + Default> Ring<T> {
    pub(crate) fn new() -> Self {
        Self {
            slots: vec![T::default(); INITIAL_CAPACITY].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn slot(&self, index: u32) -> usize {
        (self.head.wrapping_add(index) as usize) & (self.slots.len() - 1)
    }

    /// The `index`-th entry from the front.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        (index < self.len).then(|| &self.slots[self.slot(index)])
    }

    #[inline]
    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The slot that [`push_back`](Self::push_back) will write next (unless the ring grows
    /// first), for prefetching: its content is stale.
    #[inline]
    pub(crate) fn next_slot(&self) -> &T {
        &self.slots[self.slot(self.len)]
    }

    #[inline]
    pub(crate) fn push_back(&mut self, value: T) {
        if self.len as usize == self.slots.len() {
            self.grow();
        }
        let slot = self.slot(self.len);
        self.slots[slot] = value;
        self.len += 1;
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let value = *self.front()?;
        self.head = self.head.wrapping_add(1) & (self.slots.len() as u32 - 1);
        self.len -= 1;
        Some(value)
    }

    /// Doubles the capacity, moving the entries to the front of the new slots.
    #[cold]
    fn grow(&mut self) {
        let capacity = self.slots.len() * 2;
        assert!(
            u32::try_from(capacity).is_ok(),
            "a ring holds fewer than 2^32 entries"
        );
        let mut slots = Vec::with_capacity(capacity);
        slots.extend((0..self.len).map(|index| self.slots[self.slot(index)]));
        slots.resize(capacity, T::default());
        self.slots = slots.into_boxed_slice();
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Pushes and pops across growth and wrap-around behave as a `VecDeque`.
    #[test]
    fn matches_vec_deque() {
        let mut ring = Ring::<u64>::new();
        let mut model = VecDeque::new();
        let mut next = 0u64;
        for round in 0..2000u64 {
            for _ in 0..(round * 7 % 5) {
                ring.push_back(next);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..(round * 3 % 4) {
                assert_eq!(ring.pop_front(), model.pop_front());
            }
            assert_eq!(ring.len() as usize, model.len());
            for index in 0..model.len() as u32 + 1 {
                assert_eq!(ring.get(index), model.get(index as usize));
            }
        }
    }
}
