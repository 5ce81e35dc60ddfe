//! The output ports: a FIFO served at line rate whose departures are known at enqueue (see the
//! module documentation of `sim`, "Time and queues"), the purge that answers "how long is this
//! queue now", and the enqueue that drops at a full switch buffer, marks ECN and keeps the
//! per-stage statistics and Ofan's edge-uplink bound.

use super::packet::{Packet, ECN_FLAG};
use super::Sim;
use crate::report::Stage;
use crate::wires::{Layout, RingHandle, Wires, INITIAL_CAPACITY_LOG};

/// With trimming ([`crate::ModelConfig::trim`]), a switch port holds frames up to this many
/// buffers' worth, what goes beyond one buffer being trimmed headers and ACKs (htsim queues
/// both apart from the DATA, in up to twice the buffer).
const HEADER_ROOM: u64 = 3;

/// A frame in an output port: queued, being transmitted, or propagating; it reaches the peer at
/// `arrival` and finished transmission at `arrival − propagation`.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Flight {
    pub(super) arrival: u64,
    pub(super) packet: Packet,
}

/// The state of an output port that every event touches, frames and bytes carried included:
/// one cache line.
///
/// Its wire (every frame enqueued and not yet arrived at the peer, in order) is a ring in
/// [`Wires`]: `pushed − popped` frames from position `popped`; the first `sent` of them have
/// finished transmission, the rest form the queue.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Port {
    /// Frames ever enqueued: the frames the port carried, and the ring position of the next.
    pub(super) pushed: u64,
    /// Bytes in the queue.
    pub(super) bytes: u64,
    /// When the last enqueued frame finishes transmission.
    pub(super) free_at: u64,
    /// When the first frame of the queue (`sent` after the front) finishes transmission, while
    /// the queue is not empty: [`Port::purge`] reads the wire only once that time has passed.
    pub(super) head_finish: u64,
    /// Frame bytes ever enqueued.
    pub(super) carried_bytes: u64,
    /// Ring position of the frame that arrives next (wrapping).
    pub(super) popped: u32,
    pub(super) sent: u32,
    /// Data frames in the queue.
    pub(super) data: u32,
    pub(super) peer: u32,
    pub(super) wire_base: u32,
    pub(super) peer_port: u16,
    pub(super) wire_capacity_log: u8,
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
    /// A port of `stage` whose wire is the next ring of `layout` (for a fresh [`Wires`]), at the
    /// stage's [initial capacity](Self::initial_capacity_log).
    pub(super) fn new(layout: &mut Layout, peer: u32, peer_port: u16, stage: Stage) -> Self {
        let wire = layout.ring(Self::initial_capacity_log(stage));
        Self {
            pushed: 0,
            bytes: 0,
            free_at: 0,
            head_finish: 0,
            carried_bytes: 0,
            popped: 0,
            sent: 0,
            data: 0,
            peer,
            wire_base: wire.base,
            peer_port,
            wire_capacity_log: wire.capacity_log,
            stage,
        }
    }

    /// The capacity a port's ring starts with, as a log of two: [`INITIAL_CAPACITY_LOG`] (64
    /// entries) for a switch's port, 32 for a host's NIC, which carries the host's paced DATA
    /// and its ACKs only (12 DATA frames of 0.5 µs of propagation at 800 Gb/s and the ACKs
    /// between them; in the 1 MiB permutation at k = 12, 16 and 24 no NIC's ring ever needs
    /// more, while nine in ten of the downward stages' rings need 64). A ring that fills up
    /// grows; a smaller one is written over more often, so fewer of its lines leave the cache
    /// between two frames.
    fn initial_capacity_log(stage: Stage) -> u8 {
        if stage == Stage::HostUp {
            INITIAL_CAPACITY_LOG - 1
        } else {
            INITIAL_CAPACITY_LOG
        }
    }

    #[inline(always)]
    fn ring(&self) -> RingHandle {
        RingHandle {
            base: self.wire_base,
            capacity_log: self.wire_capacity_log,
        }
    }

    /// Frames on the wire: queued, being transmitted or propagating.
    #[inline(always)]
    pub(super) fn wire_len(&self) -> u32 {
        (self.pushed as u32).wrapping_sub(self.popped)
    }

    /// The `index`-th frame on the wire from the front.
    #[inline(always)]
    pub(super) fn wire_get<'w>(&self, wires: &'w Wires<Flight>, index: u32) -> Option<&'w Flight> {
        (index < self.wire_len()).then(|| wires.at(self.ring(), self.popped.wrapping_add(index)))
    }

    /// Where the `index`-th frame from the front of the wire is, or would go (`index` =
    /// [`Port::wire_len`]: the slot of the next enqueued frame, unless the ring grows first).
    /// For prefetching only: the slot may hold no frame, or a stale one.
    #[inline(always)]
    pub(super) fn wire_address(&self, wires: &Wires<Flight>, index: u32) -> *const Flight {
        wires.address(wires.slot(self.ring(), self.popped.wrapping_add(index)))
    }

    /// The slot in `wires` of the `index`-th frame from the front of the wire (as
    /// [`Port::wire_address`], for looking ahead: it holds that frame only while the ring does
    /// not grow).
    #[inline(always)]
    pub(super) fn wire_slot(&self, wires: &Wires<Flight>, index: u32) -> usize {
        wires.slot(self.ring(), self.popped.wrapping_add(index))
    }

    /// Takes the frame at the front of the wire (it arrives at the peer).
    #[inline(always)]
    pub(super) fn wire_pop(&mut self, wires: &Wires<Flight>) -> Option<Flight> {
        let flight = *self.wire_get(wires, 0)?;
        self.popped = self.popped.wrapping_add(1);
        Some(flight)
    }

    /// Drops every frame on the wire (a failing link).
    pub(super) fn wire_clear(&mut self) {
        self.popped = self.pushed as u32;
    }

    #[inline(always)]
    fn wire_push(&mut self, wires: &mut Wires<Flight>, flight: Flight) {
        let len = self.wire_len();
        if len == 1u32 << self.wire_capacity_log {
            let grown = wires.grow(self.ring(), self.popped, len);
            self.wire_base = grown.base;
            self.wire_capacity_log = grown.capacity_log;
        }
        wires.set(self.ring(), self.pushed as u32, flight);
        self.pushed += 1;
    }

    /// Moves the frames whose transmission ended by `now` out of the queue.
    #[inline]
    pub(super) fn purge(&mut self, wires: &Wires<Flight>, now: u64, propagation: u64) {
        // The last enqueued frame finishes at `free_at` and the first at `head_finish`, so
        // unless some but not all of the queue has finished, the answer needs no look at the
        // wire (which is rarely in cache).
        if self.free_at <= now {
            self.sent = self.wire_len();
            self.bytes = 0;
            self.data = 0;
            return;
        }
        // The last frame has not finished, so it follows every finished one in the queue.
        while self.head_finish <= now {
            let Some(finished) = self.wire_get(wires, self.sent) else {
                break;
            };
            self.bytes -= u64::from(finished.packet.frame);
            self.data -= u32::from(!finished.packet.is_ack());
            self.sent += 1;
            let Some(head) = self.wire_get(wires, self.sent) else {
                break;
            };
            self.head_finish = head.arrival - propagation;
        }
    }

    /// Frames in the queue (after [`Port::purge`]).
    #[inline]
    pub(super) fn queued(&self) -> u32 {
        self.wire_len() - self.sent
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

    /// [`EcnAt::Dequeue`]: `packet`, a frame of port `port_id` reaching the next hop now, is
    /// marked CE if it is DATA (not a trimmed header: htsim queues those apart, unmarked) from
    /// a switch port that still holds the threshold behind it (the queue as it is now, a
    /// propagation delay after the frame left).
    ///
    /// [`EcnAt::Dequeue`]: crate::EcnAt::Dequeue
    #[cold]
    #[inline(never)]
    pub(super) fn mark_on_dequeue(&mut self, port_id: usize, packet: &mut Packet) {
        let port = &mut self.ports[port_id];
        if packet.is_ack() || packet.frame == self.trim_frame || !port.stage.is_switch() {
            return;
        }
        port.purge(&self.wires, self.now, self.propagation);
        if port.bytes >= self.ecn_dequeue {
            packet.seq_flags |= ECN_FLAG;
            self.counts.ecn_marks += 1;
        }
    }

    /// Puts `packet` on output port `port_id` at the current time (or drops it).
    // Not inlined: the hosts' four callers share one copy; forwarding, which makes most of the
    // calls, has its own ([`Sim::enqueue_inline`]).
    #[inline(never)]
    pub(super) fn enqueue(&mut self, port_id: usize, packet: Packet) {
        self.enqueue_inline(port_id, packet);
    }

    /// [`Sim::enqueue`], inlined into the switches' forwarding: the call's register saves and
    /// restores were a tenth of its instructions.
    #[inline(always)]
    pub(super) fn enqueue_inline(&mut self, port_id: usize, mut packet: Packet) {
        let (now, propagation) = (self.now, self.propagation);
        let serialization = self.port_serialization(port_id, packet.frame);
        let port = &mut self.ports[port_id];
        port.purge(&self.wires, now, propagation);
        let frame = u64::from(packet.frame);
        let data = !packet.is_ack();
        if port.stage.is_switch() {
            if port.bytes.saturating_add(frame) > self.buffer {
                let trimming = self.trim_frame != 0;
                if trimming && data && packet.frame != self.trim_frame {
                    // UEC's trimming: the frame goes on as its header.
                    self.counts.trimmed += 1;
                    packet.frame = self.trim_frame;
                    self.enqueue(port_id, packet);
                    return;
                }
                // Headers and ACKs (with trimming) and PULLs are taken beyond the buffer, as
                // into htsim's separate queue of twice the buffer for them.
                if !(trimming || packet.is_pull()) || port.bytes + frame > HEADER_ROOM * self.buffer
                {
                    self.drops_buffer += 1;
                    if let Some(window) = self.arf_windows.get_mut(port_id) {
                        window.drops += 1;
                    }
                    return;
                }
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
        let idle = port.wire_len() == 0;
        port.wire_push(&mut self.wires, Flight { arrival, packet });
        port.carried_bytes += frame;
        if let Some(window) = self.arf_windows.get_mut(port_id) {
            window.bytes += frame + u64::from(self.config.link.gap_bytes);
            window.max_bytes = window.max_bytes.max(port.bytes);
            if self.arf_flow && data {
                let hash = Self::flow_hash(&packet);
                if let Some(sketch) = self.arf.as_mut().and_then(|arf| arf.flows.get_mut(port_id)) {
                    sketch.record((packet.flow, hash), frame);
                }
            }
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
            self.push_arrival(arrival, port_id as u32, packet.hint());
        }
    }
}

#[cfg(test)]
mod tests {
    use ofan_topology::{Topology, TopologyKind};

    use super::super::build::{choose_failures, host_weighted_matrix};
    use super::super::Sim;
    use crate::config::{BufferLimit, EcnAt, FlowSpec, ModelConfig, Workload};

    /// CE-marked frames that reached host 0 by `frames` frame times when hosts 1 and 2, on its
    /// edge switch (k = 8), send it 1 MiB each: no CCA, unlimited buffers, a threshold of 20
    /// frames, marks decided at `at`. The edge's port to host 0 is the only queue.
    fn marks_by(at: EcnAt, frames: u64) -> u64 {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 8 };
        config.buffer_limit = BufferLimit::Unlimited;
        let frame = u64::from(config.link.payload_bytes + config.link.header_bytes);
        config.ecn_threshold_bytes = 20 * frame;
        config.ecn_at = at;
        let specs: Vec<FlowSpec> = [1, 2]
            .into_iter()
            .map(|src| FlowSpec {
                src,
                dst: 0,
                bytes: 1 << 20,
            })
            .collect();
        config.workload = Workload::Matrix {
            flows: specs.clone(),
        };
        let topology = Topology::new(config.topology).expect("topology");
        let matrix = host_weighted_matrix(&topology, &specs);
        let (failures, _) = choose_failures(&topology, &config, &matrix).expect("no failures");
        let mut sim = Sim::new(&topology, &config, &failures, &specs, 1.0).expect("builds");
        sim.stop_after = frames * sim.ser_data;
        sim.start();
        sim.run_loop();
        // Marked frames still on a wire (queued, or between two nodes) have not arrived.
        let on_wires: u64 = sim
            .ports
            .iter()
            .map(|port| {
                (0..port.wire_len())
                    .filter(|&i| port.wire_get(&sim.wires, i).is_some_and(|f| f.packet.ecn()))
                    .count() as u64
            })
            .sum();
        sim.counts.ecn_marks - on_wires
    }

    /// The destination's port grows while both hosts send. Marked on enqueue, the first marked
    /// frame is the one that finds 20 frames queued, and it reaches host 0 only once those 20
    /// have left; marked on dequeue (htsim's rule), it is the one that leaves 20 behind, and it
    /// arrives at once: the receiver (and, through its ACKs, the senders) hears of the queue a
    /// drain time earlier.
    #[test]
    fn marks_on_dequeue_come_a_queue_earlier_than_on_enqueue() {
        let (enqueue, dequeue) = (marks_by(EcnAt::Enqueue, 80), marks_by(EcnAt::Dequeue, 80));
        // Measured: 0 and 25 (the first marked frame arrives about 35 frame times earlier).
        assert_eq!(
            enqueue, 0,
            "no frame marked on enqueue has left the queue yet"
        );
        assert!(
            dequeue >= 10,
            "{dequeue} marked frames arrived by 80 frame times"
        );
        // Over the whole run both mark the frames of the same queue: about as many.
        let (enqueue, dequeue) = (
            marks_by(EcnAt::Enqueue, 10_000),
            marks_by(EcnAt::Dequeue, 10_000),
        );
        assert!(enqueue > 400 && dequeue > 400, "{enqueue} / {dequeue}");
    }
}
