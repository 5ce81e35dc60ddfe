//! Worker inboxes: the queues through which a worker hands a packet to the worker that owns its
//! egress port, and the number of UMEM frames in them.
//!
//! A packet may span several frames (jumbo frames, [`OwnedFrame::frames`]), so the length of the
//! queues — packets — is not what the frame census needs. [`Inboxes`] counts frames as they go
//! in and out, one count per inbox on the inbox's own cache line (the producers and the
//! consumer touch that line for the queue anyway; one shared count would add a line bouncing
//! between every pair of workers). The count is added before a push and subtracted after a pop:
//! the push (release) and the pop (acquire) order the two, so a count never goes below the
//! frames actually queued and never underflows; a failed push takes its frames back out.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;

use super::worker::Handoff;

/// One bounded inbox per worker, with the frames in it.
pub struct Inboxes {
    inboxes: Box<[Inbox]>,
}

/// A worker's inbox and its frame count, aligned to keep other inboxes' counts off its lines.
#[repr(align(128))]
struct Inbox {
    queue: ArrayQueue<Handoff>,
    frames: AtomicU64,
}

impl Inboxes {
    /// `workers` inboxes of `capacity` packets each.
    pub fn new(workers: usize, capacity: usize) -> Self {
        Self {
            inboxes: (0..workers)
                .map(|_| Inbox {
                    queue: ArrayQueue::new(capacity),
                    frames: AtomicU64::new(0),
                })
                .collect(),
        }
    }

    /// Hands `handoff` to `worker`; gives it back when that inbox is full.
    pub fn push(&self, worker: usize, handoff: Handoff) -> Result<(), Handoff> {
        let inbox = &self.inboxes[worker];
        let frames = handoff.frame.frames() as u64;
        inbox.frames.fetch_add(frames, Ordering::Relaxed);
        inbox.queue.push(handoff).inspect_err(|_| {
            inbox.frames.fetch_sub(frames, Ordering::Relaxed);
        })
    }

    /// The oldest packet handed to `worker`.
    pub fn pop(&self, worker: usize) -> Option<Handoff> {
        let inbox = &self.inboxes[worker];
        let handoff = inbox.queue.pop()?;
        inbox
            .frames
            .fetch_sub(handoff.frame.frames() as u64, Ordering::Relaxed);
        Some(handoff)
    }

    /// Whether nothing waits for `worker`.
    pub fn is_empty(&self, worker: usize) -> bool {
        self.inboxes[worker].queue.is_empty()
    }

    /// UMEM frames in every inbox (the census's `inbox`).
    pub fn frames(&self) -> u64 {
        self.inboxes
            .iter()
            .map(|inbox| inbox.frames.load(Ordering::Relaxed))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::afxdp::sys::OwnedFrame;
    use crate::afxdp::worker::HandoffKind;
    use crate::fib::PortId;

    fn packet(frames: u64) -> Handoff {
        let mut frame = OwnedFrame::for_test(256, 3840);
        for i in 1..frames {
            frame
                .append(OwnedFrame::for_test(i * 4096 + 256, 100))
                .unwrap();
        }
        Handoff {
            port: PortId(1),
            frame,
            kind: HandoffKind::Forwarded,
        }
    }

    #[test]
    fn the_count_is_of_frames_not_packets() {
        let inboxes = Inboxes::new(2, 4);
        inboxes.push(0, packet(3)).unwrap();
        inboxes.push(1, packet(1)).unwrap();
        inboxes.push(1, packet(2)).unwrap();
        assert_eq!(inboxes.frames(), 6);
        assert!(!inboxes.is_empty(0));
        assert_eq!(inboxes.pop(0).unwrap().frame.frames(), 3);
        assert_eq!(inboxes.frames(), 3);
        assert!(inboxes.is_empty(0));
        assert!(inboxes.pop(0).is_none());
        assert_eq!(inboxes.pop(1).unwrap().frame.frames(), 1);
        assert_eq!(inboxes.pop(1).unwrap().frame.frames(), 2);
        assert_eq!(inboxes.frames(), 0);
    }

    #[test]
    fn a_full_inbox_gives_the_packet_back_and_counts_nothing() {
        let inboxes = Inboxes::new(1, 1);
        inboxes.push(0, packet(2)).unwrap();
        let refused = inboxes.push(0, packet(3)).unwrap_err();
        assert_eq!(refused.frame.frames(), 3);
        assert_eq!(inboxes.frames(), 2);
    }

    #[test]
    fn frames_moving_between_threads_balance() {
        let inboxes = std::sync::Arc::new(Inboxes::new(1, 64));
        let producer = {
            let inboxes = std::sync::Arc::clone(&inboxes);
            std::thread::spawn(move || {
                let mut pushed = 0;
                for i in 0..10_000u64 {
                    let mut handoff = packet(1 + i % 3);
                    loop {
                        match inboxes.push(0, handoff) {
                            Ok(()) => break,
                            Err(back) => {
                                handoff = back;
                                std::thread::yield_now();
                            }
                        }
                    }
                    pushed += 1 + i % 3;
                }
                pushed
            })
        };
        let total: u64 = (0..10_000u64).map(|i| 1 + i % 3).sum();
        let mut popped = 0;
        while popped < total {
            assert!(inboxes.frames() < 1 << 32, "the count underflowed");
            if let Some(handoff) = inboxes.pop(0) {
                popped += handoff.frame.frames() as u64;
            }
        }
        assert_eq!(producer.join().unwrap(), total);
        assert_eq!(inboxes.frames(), 0);
    }
}
