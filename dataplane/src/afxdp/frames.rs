//! Frame ownership: where every UMEM frame is.
//!
//! A frame is at every moment in exactly one place: the shared free pool, a worker's local
//! cache, a device fill ring, an RX ring or a worker batch (between receive and decision), an
//! egress queue, a worker inbox (handed to the owner of another port), a TX ring, or a
//! completion ring. The pool and the caches are counted directly; the rings are counted as
//! "given to the kernel minus returned by it", per ring; queues and inboxes know their length.
//! [`FrameCensus`] adds them up; the runtime checks that the sum is the UMEM's frame count when
//! it stops (and tests check it after traffic), which catches any leak or double free.

use crossbeam_queue::ArrayQueue;

/// The address of a frame's first byte in the UMEM (a multiple of the frame size; the kernel
/// may hand back addresses with an offset inside the frame, which [`FrameAddr::base`] strips).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameAddr(pub u64);

impl FrameAddr {
    /// The start of the frame that contains `addr`.
    #[inline]
    pub fn base(addr: u64, frame_size: u32) -> Self {
        FrameAddr(addr - addr % u64::from(frame_size))
    }
}

/// The free frames not held by any worker: a lock-free bounded queue every worker can take from
/// and give back to.
#[derive(Debug)]
pub struct FramePool {
    free: ArrayQueue<FrameAddr>,
    total: u32,
}

impl FramePool {
    /// A pool holding all `frames` frames of `frame_size` bytes.
    pub fn new(frames: u32, frame_size: u32) -> Self {
        let free = ArrayQueue::new(frames as usize);
        for index in 0..frames {
            free.push(FrameAddr(u64::from(index) * u64::from(frame_size)))
                .expect("the pool has room for every frame");
        }
        Self {
            free,
            total: frames,
        }
    }

    /// Number of frames in the UMEM.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Frames in the pool now.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// Takes one free frame (any thread: a splice sender takes the receiver's).
    #[inline]
    pub fn take(&self) -> Option<FrameAddr> {
        self.free.pop()
    }

    /// Gives back a frame taken with [`FramePool::take`].
    #[inline]
    pub fn give(&self, frame: FrameAddr) {
        // The pool has room for every frame of the UMEM.
        let _ = self.free.push(frame);
    }
}

/// A worker's private stock of free frames, refilled from and spilled to the shared pool in
/// bulk so the pool's atomics are touched rarely.
#[derive(Debug)]
pub struct FrameCache {
    frames: Vec<FrameAddr>,
    high: usize,
}

impl FrameCache {
    /// A cache that refills to `high` frames when empty and spills back down to `high` when it
    /// holds twice that.
    pub fn new(high: usize) -> Self {
        Self {
            frames: Vec::with_capacity(high * 2 + 1),
            high,
        }
    }

    /// Frames held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Takes one frame, refilling from the pool when low.
    #[inline]
    pub fn take(&mut self, pool: &FramePool) -> Option<FrameAddr> {
        if self.frames.is_empty() {
            self.refill(pool);
        }
        self.frames.pop()
    }

    /// Gives back one frame, spilling to the pool when high.
    #[inline]
    pub fn give(&mut self, frame: FrameAddr, pool: &FramePool) {
        self.frames.push(frame);
        if self.frames.len() > self.high * 2 {
            self.spill(pool);
        }
    }

    /// Brings the cache up to `high` from the pool (as far as the pool has frames).
    pub fn refill(&mut self, pool: &FramePool) {
        while self.frames.len() < self.high {
            match pool.free.pop() {
                Some(frame) => self.frames.push(frame),
                None => break,
            }
        }
    }

    /// Returns frames above `high` to the pool.
    fn spill(&mut self, pool: &FramePool) {
        while self.frames.len() > self.high {
            let frame = self.frames.pop().expect("len > high ≥ 0");
            if let Err(frame) = pool.free.push(frame) {
                // Cannot happen (the pool has room for every frame), but never lose one.
                self.frames.push(frame);
                break;
            }
        }
    }

    /// Returns every frame to the pool (on shutdown).
    pub fn return_all(&mut self, pool: &FramePool) {
        while let Some(frame) = self.frames.pop() {
            if let Err(frame) = pool.free.push(frame) {
                self.frames.push(frame);
                break;
            }
        }
    }
}

pub use crate::telemetry::FrameCensus;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_moves_frames_in_bulk_and_loses_none() {
        let pool = FramePool::new(100, 2048);
        let mut cache = FrameCache::new(16);
        let mut held = Vec::new();
        for _ in 0..50 {
            held.push(cache.take(&pool).unwrap());
        }
        assert_eq!(held.len() + cache.len() + pool.len(), 100);
        for frame in held.drain(..) {
            cache.give(frame, &pool);
        }
        assert!(cache.len() <= 32);
        assert_eq!(cache.len() + pool.len(), 100);
        cache.return_all(&pool);
        assert_eq!(pool.len(), 100);
    }

    #[test]
    fn exhausted_pool_yields_none() {
        let pool = FramePool::new(3, 2048);
        let mut cache = FrameCache::new(2);
        let taken: Vec<_> = std::iter::from_fn(|| cache.take(&pool)).collect();
        assert_eq!(taken.len(), 3);
        let mut unique: Vec<u64> = taken.iter().map(|f| f.0).collect();
        unique.sort_unstable();
        assert_eq!(unique, vec![0, 2048, 4096]);
    }

    #[test]
    fn frame_base_strips_the_offset() {
        assert_eq!(FrameAddr::base(4096 + 256, 2048), FrameAddr(4096));
        assert_eq!(FrameAddr::base(2047, 2048), FrameAddr(0));
    }
}
