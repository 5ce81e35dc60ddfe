//! The wires of all output ports in one slab: each port's frames in flight are a first-in
//! first-out ring, a power-of-two region of [`Wires::slots`] that the port names by its first
//! index and the log of its capacity.
//!
//! One allocation for every ring keeps a ring's handle at 5 bytes (a `Box<[T]>` or `VecDeque`
//! takes 16 or 32), so that the port's hot state, frames carried included, fits in one cache
//! line, puts the rings of consecutive ports next to each other, and lets the whole slab be
//! backed by huge pages ([`crate::sys::advise_huge_pages`]). A ring that fills up moves to a
//! region twice its size; the region it leaves is reused by the next ring that grows to that
//! size.

/// A switch port's ring capacity at the start, as a log of two: 64 entries, more than a busy
/// port holds at the paper's parameters (0.5 µs of propagation is 12 DATA frame times at
/// 800 Gb/s, about as many ACKs of the other direction's flows share the wire, and Ofan's
/// queues stay a few frames).
pub(crate) const INITIAL_CAPACITY_LOG: u8 = 6;

/// The rings of a fresh [`Wires`], laid out one after the other in the order they are asked
/// for, each at its own initial capacity.
#[derive(Debug, Default)]
pub(crate) struct Layout {
    len: usize,
}

impl Layout {
    /// The next ring, of `1 << capacity_log` entries.
    pub(crate) fn ring(&mut self, capacity_log: u8) -> RingHandle {
        let base = self.len;
        self.len += 1 << capacity_log;
        RingHandle {
            base: u32::try_from(base).expect("fewer than 2^32 wire slots in all"),
            capacity_log,
        }
    }
}

/// Every ring's storage.
#[derive(Debug)]
pub(crate) struct Wires<T> {
    slots: Vec<T>,
    /// Regions left by rings that grew, by capacity log.
    free: Vec<Vec<u32>>,
}

/// A ring's position in [`Wires`] and its counters. The entry `i` from the front is at
/// `base + (popped + i) mod capacity`; the counters wrap, and only their difference (the
/// length) and their residues matter.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RingHandle {
    pub(crate) base: u32,
    pub(crate) capacity_log: u8,
}

impl<T: Copy + Default> Wires<T> {
    /// The rings of `layout`. A quarter more is reserved (address space, not memory, until
    /// rings grow into it), so that growing rings rarely move the slab.
    pub(crate) fn new(layout: &Layout) -> Self {
        let len = layout.len;
        assert!(
            u32::try_from(len).is_ok(),
            "fewer than 2^32 wire slots in all"
        );
        let mut slots = Vec::with_capacity(len + len / 4);
        crate::sys::advise_huge_pages(slots.spare_capacity_mut());
        slots.resize(len, T::default());
        Self {
            slots,
            free: Vec::new(),
        }
    }

    #[inline]
    fn index(handle: RingHandle, position: u32) -> usize {
        handle.base as usize + (position & ((1u32 << handle.capacity_log) - 1)) as usize
    }

    /// The entry at wrapping position `position` of the ring.
    #[inline]
    pub(crate) fn at(&self, handle: RingHandle, position: u32) -> &T {
        &self.slots[Self::index(handle, position)]
    }

    /// The slot of the entry at wrapping position `position` of the ring.
    #[inline]
    pub(crate) fn slot(&self, handle: RingHandle, position: u32) -> usize {
        Self::index(handle, position)
    }

    /// The entry in slot `slot`, if the slab has it (whichever ring holds it now).
    #[inline]
    pub(crate) fn get(&self, slot: usize) -> Option<&T> {
        self.slots.get(slot)
    }

    /// Where slot `slot` is, for prefetching only: computed without a bounds check (a slot may
    /// be stale, and a prefetch of any address is harmless).
    #[inline]
    pub(crate) fn address(&self, slot: usize) -> *const T {
        self.slots.as_ptr().wrapping_add(slot)
    }

    #[inline]
    pub(crate) fn set(&mut self, handle: RingHandle, position: u32, value: T) {
        let index = Self::index(handle, position);
        self.slots[index] = value;
    }

    /// Moves a full ring of `len` entries starting at position `first` to a region twice its
    /// size and returns its new handle.
    #[cold]
    #[inline(never)]
    pub(crate) fn grow(&mut self, handle: RingHandle, first: u32, len: u32) -> RingHandle {
        let capacity_log = handle.capacity_log + 1;
        assert!(capacity_log < 32, "a ring holds fewer than 2^31 entries");
        let class = usize::from(capacity_log);
        if self.free.len() <= class {
            self.free.resize_with(class + 1, Vec::new);
        }
        let base = match self.free[class].pop() {
            Some(base) => base,
            None => {
                let base = self.slots.len();
                let end = base + (1usize << capacity_log);
                assert!(
                    u32::try_from(end).is_ok(),
                    "fewer than 2^32 wire slots in all"
                );
                if end > self.slots.capacity() {
                    // The slab moves: advise its new allocation before the new slots are
                    // written.
                    self.slots.reserve(end - base);
                    crate::sys::advise_huge_pages(self.slots.spare_capacity_mut());
                }
                self.slots.resize(end, T::default());
                base as u32
            }
        };
        let grown = RingHandle { base, capacity_log };
        for offset in 0..len {
            let position = first.wrapping_add(offset);
            let value = *self.at(handle, position);
            self.set(grown, position, value);
        }
        let old = usize::from(handle.capacity_log);
        if self.free.len() <= old {
            self.free.resize_with(old + 1, Vec::new);
        }
        self.free[old].push(handle.base);
        grown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Three rings pushed and popped across growth, wrap-around and reuse of freed regions
    /// behave as three `VecDeque`s.
    #[test]
    fn rings_match_vec_deques() {
        let mut layout = Layout::default();
        let mut rings: Vec<(RingHandle, u32, u32)> =
            [INITIAL_CAPACITY_LOG, 2, INITIAL_CAPACITY_LOG]
                .into_iter()
                .map(|capacity_log| (layout.ring(capacity_log), 0, 0))
                .collect();
        let mut wires = Wires::<u64>::new(&layout);
        let mut models = vec![VecDeque::new(); 3];
        let mut next = 0u64;
        for round in 0..3000u64 {
            let r = (round % 3) as usize;
            let (handle, popped, pushed) = &mut rings[r];
            for _ in 0..(round * 7 % 11) {
                let len = pushed.wrapping_sub(*popped);
                if len == 1 << handle.capacity_log {
                    *handle = wires.grow(*handle, *popped, len);
                }
                wires.set(*handle, *pushed, next);
                *pushed = pushed.wrapping_add(1);
                models[r].push_back(next);
                next += 1;
            }
            for _ in 0..(round * 3 % 10) {
                let value = (pushed != popped).then(|| *wires.at(*handle, *popped));
                if value.is_some() {
                    *popped = popped.wrapping_add(1);
                }
                assert_eq!(value, models[r].pop_front());
            }
            assert_eq!(pushed.wrapping_sub(*popped) as usize, models[r].len());
            for (i, value) in models[r].iter().enumerate() {
                assert_eq!(wires.at(*handle, popped.wrapping_add(i as u32)), value);
            }
        }
    }
}
