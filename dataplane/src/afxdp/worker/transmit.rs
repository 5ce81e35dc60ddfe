//! Egress, step 3 of a worker's loop: each owned port sends what its shaper allows, by one of
//! four paths — its TX ring ([`to_ring`]); its bypass for the frames it takes, the TX ring for
//! the rest ([`to_bypass_or_ring`]); the peer switch's end of an
//! in-process splice ([`to_splice`]); or, for packets spanning several frames, the TX ring a
//! packet at a time ([`to_ring_multi`]) — and kicks the kernel.

use xdpilone::xdp::XdpDesc;

use super::Worker;
use crate::afxdp::bypass::{self, Bypass};
use crate::afxdp::frames::{FrameCache, FramePool};
use crate::afxdp::splice::{self, Offer, SpliceEnd};
use crate::afxdp::sys::{monotonic_ns, OwnedFrame, UmemArea};
use crate::afxdp::Buffers;
use crate::egress::EgressQueue;
use crate::fib::Fib;
use crate::lb::MAX_BATCH;

/// Where a port's transmit pass put the frames that left its egress queue.
#[derive(Debug, Default, Clone, Copy)]
struct Sent {
    /// Descriptors written to the TX ring.
    ring: u32,
    /// Frames the splice took (or dropped, as a link would).
    spliced: u32,
    /// Frames the bypass took (or lost).
    diverted: u32,
}

/// The frames of a packet that left by another way than the TX ring: back to the free frames.
fn give_back(frame: OwnedFrame, frame_size: u32, cache: &mut FrameCache, pool: &FramePool) {
    for frame in frame.into_frames(frame_size) {
        cache.give(frame, pool);
    }
}

impl Worker {
    /// Sends what every owned port's shaper allows; returns the frames moved (and those still
    /// to write: the worker comes back for them at once).
    pub(super) fn transmit_all(&mut self) -> usize {
        // Nothing queued and nothing waiting for a kick: no clock read, no system call (and no
        // read of a TX ring, which the kernel's page holds, while nothing is outstanding).
        if self.ports.iter().all(|port| {
            let queue = &port.queues[0];
            port.egress.is_empty()
                && port.tx_rest.is_empty()
                && (queue.tx_outstanding == 0
                    || queue.tx.as_ref().is_none_or(|tx| tx.pending() == 0))
        }) {
            return 0;
        }
        let now = monotonic_ns();
        let mut total = 0;
        for port in &mut self.ports {
            let queue = &mut port.queues[0];
            let Some(tx) = queue.tx.as_mut() else {
                continue;
            };
            let room = self.tx_ring_size.saturating_sub(queue.tx_outstanding);
            let mut sent = Sent::default();
            // Only a port with a frame due looks up where it goes (its peer's end and FIB, its
            // bypass): for queues their shapers held, those lookups were a third of a k = 8
            // lab's time in `Worker::step`, on every step of every switch.
            let due = port.egress.next_departure_ns().is_some_and(|at| at <= now);
            if room > 0 && (due || !port.tx_rest.is_empty()) {
                let mut writer = tx.transmit(room.min(MAX_BATCH as u32));
                let capacity = writer.capacity();
                let mut insert = |desc| {
                    let inserted = writer.insert_once(desc);
                    debug_assert!(inserted, "reserved TX slots are guaranteed");
                    sent.ring += 1;
                };
                let frames = Frames {
                    umem: &self.umem,
                    cache: &mut self.cache,
                    pool: &self.pool,
                };
                // An in-process link to the peer, while both ends take frames (`splice`; a
                // splice carries single frames only).
                let splice = port
                    .splice
                    .as_ref()
                    .filter(|_| self.buffers == Buffers::Single)
                    .and_then(|slot| splice::sending(slot, &self.fib, port.id));
                // The bypass takes what it carries while it takes frames at all.
                let bypass = port.bypass.as_deref().filter(|bypass| bypass.diverting());
                match (self.buffers, &splice, bypass) {
                    (Buffers::Single, None, Some(bypass)) => {
                        let (diverted, lost) = to_bypass_or_ring(
                            &mut port.egress,
                            now,
                            capacity,
                            bypass,
                            frames,
                            &mut insert,
                        );
                        sent.diverted = diverted;
                        port.drops_bypass += lost;
                    }
                    (Buffers::Single, None, None) => {
                        to_ring(&mut port.egress, now, capacity, &mut insert);
                    }
                    (Buffers::Single, Some((end, peer_fib)), _) => {
                        sent.spliced = to_splice(
                            &mut port.egress,
                            now,
                            capacity,
                            (end, peer_fib),
                            frames,
                            &mut insert,
                        );
                    }
                    (Buffers::Multi, _, _) => {
                        to_ring_multi(
                            &mut port.egress,
                            &mut port.tx_rest,
                            now,
                            capacity,
                            &mut insert,
                        );
                    }
                }
                // Every frame written or spliced left the egress queue or `tx_rest`.
                port.egress_frames -=
                    u64::from(sent.ring) + u64::from(sent.spliced) + u64::from(sent.diverted);
                writer.commit();
            }
            total += sent.spliced as usize + sent.diverted as usize;
            queue.tx_outstanding += sent.ring;
            // Frames still to write count as work: the worker comes back for them at once.
            total += sent.ring as usize + port.tx_rest.len();
            // Copy mode needs a kick for every 32 descriptors (one sendto sends at most 32).
            let mut kicks = 0;
            while queue.tx_outstanding > 0 && tx.pending() > 0 && kicks < 8 {
                tx.wake();
                kicks += 1;
            }
        }
        total
    }
}

/// The worker's frame memory, for the paths that read a frame or give it back.
struct Frames<'a> {
    umem: &'a UmemArea,
    cache: &'a mut FrameCache,
    pool: &'a FramePool,
}

/// Every due frame (up to `capacity`) into the TX ring.
fn to_ring(
    egress: &mut EgressQueue<OwnedFrame>,
    now: u64,
    capacity: u32,
    insert: &mut impl FnMut(XdpDesc),
) {
    egress.dequeue(now, capacity as usize, |frame, _len| {
        frame.into_tx(&mut *insert);
    });
}

/// Every due frame (up to `capacity`): to the port's bypass if it takes it, else into the TX
/// ring. Returns the frames diverted and, of those, the ones the bypass lost.
fn to_bypass_or_ring(
    egress: &mut EgressQueue<OwnedFrame>,
    now: u64,
    capacity: u32,
    to: &dyn Bypass,
    frames: Frames<'_>,
    insert: &mut impl FnMut(XdpDesc),
) -> (u32, u64) {
    let Frames { umem, cache, pool } = frames;
    let frame_size = umem.frame_size();
    let (mut diverted, mut lost) = (0, 0);
    egress.dequeue(now, capacity as usize, |mut frame, _len| {
        match to.offer(umem.data(&mut frame)) {
            bypass::Offer::Passed => {
                frame.into_tx(&mut *insert);
                return;
            }
            bypass::Offer::Taken => {}
            bypass::Offer::Lost => lost += 1,
        }
        diverted += 1;
        give_back(frame, frame_size, cache, pool);
    });
    (diverted, lost)
}

/// Every due frame (up to `capacity`) to the peer switch's end of the splice, which takes it,
/// drops it (as the link would), or sends it back to the veth: then into the TX ring. Returns
/// the frames the splice took or dropped.
fn to_splice(
    egress: &mut EgressQueue<OwnedFrame>,
    now: u64,
    capacity: u32,
    (end, peer_fib): (&SpliceEnd, &Fib),
    frames: Frames<'_>,
    insert: &mut impl FnMut(XdpDesc),
) -> u32 {
    let Frames { umem, cache, pool } = frames;
    let frame_size = umem.frame_size();
    let mut spliced = 0;
    egress.dequeue(now, capacity as usize, |mut frame, _len| {
        let count = frame.frames();
        match end.offer(peer_fib, umem.data(&mut frame), count) {
            Offer::Veth => frame.into_tx(&mut *insert),
            Offer::Spliced | Offer::Dropped => {
                spliced += 1;
                give_back(frame, frame_size, cache, pool);
            }
        }
    });
    spliced
}

/// Packets that may span several frames, into the TX ring one at a time. A packet's frames may
/// not all fit the reserved slots (the ring reserves what its cached view of the kernel's
/// progress shows free, which can be fewer than a packet): the rest waits in `tx_rest` (the
/// port's) and goes first next time — the kernel joins a packet's descriptors across transmit
/// calls — and packets leave one at a time, so that only one is ever split. (Never spliced: a
/// splice carries single frames.)
fn to_ring_multi(
    egress: &mut EgressQueue<OwnedFrame>,
    tx_rest: &mut Vec<XdpDesc>,
    now: u64,
    mut capacity: u32,
    insert: &mut impl FnMut(XdpDesc),
) {
    let rest = tx_rest.len().min(capacity as usize);
    for desc in tx_rest.drain(..rest) {
        insert(desc);
    }
    capacity -= rest as u32;
    while capacity > 0 && tx_rest.is_empty() {
        let left = egress.dequeue(now, 1, |frame, _len| {
            frame.into_tx(|desc| {
                if capacity > 0 {
                    insert(desc);
                    capacity -= 1;
                } else {
                    tx_rest.push(desc);
                }
            });
        });
        if left == 0 {
            break;
        }
    }
}
