//! The output ports: a FIFO served at line rate whose departures are known at enqueue (see the
//! module documentation of `sim`, "Time and queues"), the purge that answers "how long is this
//! queue now", and the enqueue that drops at a full switch buffer, marks ECN and keeps the
//! per-stage statistics and Ofan's edge-uplink bound.

use super::packet::{Packet, ECN_FLAG};
use super::Sim;
use crate::report::Stage;
use crate::ring::Ring;

/// A frame in an output port: queued, being transmitted, or propagating; it reaches the peer at
/// `arrival` and finished transmission at `arrival − propagation`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Flight {
    pub(super) arrival: u64,
    pub(super) packet: Packet,
}

/// The state of an output port that every event touches: one cache line.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Port {
    /// Every frame enqueued and not yet arrived at the peer, in order; the first `sent` have
    /// finished transmission, the rest form the queue.
    pub(super) wire: Ring<Flight>,
    pub(super) sent: u32,
    /// Data frames in the queue.
    pub(super) data: u32,
    /// Bytes in the queue.
    pub(super) bytes: u64,
    /// When the last enqueued frame finishes transmission.
    pub(super) free_at: u64,
    /// When the first frame of the queue (`wire[sent]`) finishes transmission, while the queue
    /// is not empty: [`Port::purge`] reads the wire only once that time has passed.
    pub(super) head_finish: u64,
    pub(super) peer: u32,
    pub(super) peer_port: u16,
    pub(super) stage: Stage,
}

const _: () = assert!(
    std::mem::size_of::<Port>() == 64,
    "a port is one cache line"
);

/// What the output ports of one stage measure. The report only needs maxima and sums over a
/// stage, so they are accumulated per stage (six entries that stay in cache) rather than per
/// port; only the frames carried are kept per port (the busiest link, utilization).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct StageStats {
    pub(super) max_packets: u32,
    pub(super) max_data: u32,
    pub(super) max_bytes: u64,
    pub(super) area_packets: u128,
    pub(super) area_bytes: u128,
}

impl Port {
    /// Moves the frames whose transmission ended by `now` out of the queue.
    #[inline]
    pub(super) fn purge(&mut self, now: u64, propagation: u64) {
        // The last enqueued frame finishes at `free_at` and the first at `head_finish`, so
        // unless some but not all of the queue has finished, the answer needs no look at the
        // wire (which is rarely in cache).
        if self.free_at <= now {
            self.sent = self.wire.len();
            self.bytes = 0;
            self.data = 0;
            return;
        }
        // The last frame has not finished, so it follows every finished one in the queue.
        while self.head_finish <= now {
            let Some(finished) = self.wire.get(self.sent) else {
                break;
            };
            self.bytes -= u64::from(finished.packet.frame);
            self.data -= u32::from(!finished.packet.is_ack());
            self.sent += 1;
            let Some(head) = self.wire.get(self.sent) else {
                break;
            };
            self.head_finish = head.arrival - propagation;
        }
    }

    /// Frames in the queue (after [`Port::purge`]).
    #[inline]
    pub(super) fn queued(&self) -> u32 {
        self.wire.len() - self.sent
    }
}

impl Sim<'_> {
    #[inline]
    pub(super) fn serialization(&self, frame: u32) -> u64 {
        if frame == self.data_frame {
            self.ser_data
        } else if frame == self.ack_frame {
            self.ser_ack
        } else {
            self.config
                .link
                .serialization_ps(u64::from(frame) + u64::from(self.config.link.gap_bytes))
        }
    }

    /// The wire time of `frame` on port `port_id`: [`Sim::serialization`], slower on a
    /// degraded link.
    #[inline]
    fn port_serialization(&self, port_id: usize, frame: u32) -> u64 {
        let line = self.serialization(frame);
        match self.port_ppm.get(port_id) {
            Some(&ppm) if ppm != 1_000_000 => {
                (u128::from(line) * 1_000_000).div_ceil(u128::from(ppm)) as u64
            }
            _ => line,
        }
    }

    /// Puts `packet` on output port `port_id` at the current time (or drops it).
    #[inline]
    pub(super) fn enqueue(&mut self, port_id: usize, mut packet: Packet) {
        let (now, propagation) = (self.now, self.propagation);
        let serialization = self.port_serialization(port_id, packet.frame);
        let port = &mut self.ports[port_id];
        port.purge(now, propagation);
        let frame = u64::from(packet.frame);
        let data = !packet.is_ack();
        if port.stage.is_switch() {
            if port.bytes.saturating_add(frame) > self.buffer {
                self.drops_buffer += 1;
                if let Some(window) = self.arf_windows.get_mut(port_id) {
                    window.drops += 1;
                }
                return;
            }
            if data && port.bytes >= self.ecn {
                packet.seq_flags |= ECN_FLAG;
                self.counts.ecn_marks += 1;
            }
        }
        let finish = now.max(port.free_at) + serialization;
        if port.queued() == 0 {
            port.head_finish = finish;
        }
        port.free_at = finish;
        port.bytes += frame;
        port.data += u32::from(data);
        let arrival = finish + propagation;
        let idle = port.wire.is_empty();
        port.wire.push_back(Flight { arrival, packet });
        let carried = &mut self.carried[port_id];
        carried[0] += frame;
        carried[1] += 1;
        if let Some(window) = self.arf_windows.get_mut(port_id) {
            window.bytes += frame + u64::from(self.config.link.gap_bytes);
            window.max_bytes = window.max_bytes.max(port.bytes);
        }
        let stats = &mut self.stage_stats[port.stage as usize];
        stats.max_packets = stats.max_packets.max(port.queued());
        stats.max_data = stats.max_data.max(port.data);
        stats.max_bytes = stats.max_bytes.max(port.bytes);
        let residence = u128::from(finish - now);
        stats.area_packets += residence;
        stats.area_bytes += residence * u128::from(frame);
        if data && port.stage == Stage::EdgeUp {
            self.edge_max_data = self.edge_max_data.max(port.data);
            if port.data > self.edge_bound {
                self.edge_violations += 1;
            }
        }
        if idle {
            self.push(arrival, port_id as u32, false);
        }
    }
}
