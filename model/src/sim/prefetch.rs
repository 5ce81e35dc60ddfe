//! Prefetching: the event loop is bound by dependent cache misses on a working set of megabytes,
//! and the events due at the current picosecond are final, so it loads what the next of them
//! will touch while it works on this one (`docs/model.md`, "Prefetching").

use ofan_dataplane::lb::DestKey;
use ofan_topology::Role;

use super::packet::{Packet, NO_VIA};
use super::Sim;
use crate::sys;

/// How many events ahead [`Sim::prefetch_ahead`] prefetches the port line, the head frame and
/// the next hop's output port.
const PREFETCH_PORT: usize = 12;
const PREFETCH_FRAME: usize = 8;
const PREFETCH_NEXT_HOP: usize = 4;
/// How many events ahead [`Sim::prefetch_ahead`] prefetches the queue head and tail of the next
/// hop's output port (whose line it prefetched [`PREFETCH_NEXT_HOP`] events ahead).
const PREFETCH_NEXT_WIRE: usize = 2;

impl Sim<'_> {
    /// Prefetches what the events a few places ahead will touch, in three stages, so that their
    /// cache misses overlap with the work on this one: the port line of the event
    /// [`PREFETCH_PORT`] places ahead, the head frame of the one [`PREFETCH_FRAME`] ahead (its
    /// port line is cached by now), and the output port that the one [`PREFETCH_NEXT_HOP`]
    /// ahead will enqueue on when that is known without a balancer decision (its frame is
    /// cached by now). Only events due at the current picosecond are looked at: those are final.
    // Always inlined: it runs for every event; once the hosts recovered losses the compiler
    // moved it out of line, which cost 4 % more instructions (cachegrind, k = 12).
    #[inline(always)]
    pub(super) fn prefetch_ahead(&self) {
        if let Some(ahead) = self.queue.peek_due(PREFETCH_PORT) {
            if !ahead.wake {
                sys::prefetch(&self.ports[ahead.target as usize]);
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_FRAME) {
            if !ahead.wake {
                // The head frame and the next one, whose arrival is scheduled when the head
                // arrives (24-byte entries: often on the next line).
                let wire = &self.ports[ahead.target as usize].wire;
                if let Some(flight) = wire.front() {
                    sys::prefetch(flight);
                }
                if let Some(flight) = wire.get(1) {
                    sys::prefetch(flight);
                }
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_NEXT_HOP) {
            if !ahead.wake {
                let port = &self.ports[ahead.target as usize];
                if let Some(flight) = port.wire.front() {
                    for out in self.next_hop_ports(port.peer, &flight.packet) {
                        sys::prefetch(&self.ports[out]);
                    }
                    self.prefetch_balancer(port.peer, port.peer_port, &flight.packet);
                }
            }
        }
        if let Some(ahead) = self.queue.peek_due(PREFETCH_NEXT_WIRE) {
            if !ahead.wake {
                let port = &self.ports[ahead.target as usize];
                if let Some(flight) = port.wire.front() {
                    for out in self.next_hop_ports(port.peer, &flight.packet) {
                        // The queue head, which the purge reads, and the slot the frame goes to.
                        let wire = &self.ports[out].wire;
                        if let Some(head) = wire.get(self.ports[out].sent) {
                            sys::prefetch(head);
                        }
                        sys::prefetch(wire.next_slot());
                    }
                }
            }
        }
    }

    /// Prefetches the balancer state that switch `node` will read to send `packet`, received
    /// on `in_port`, up (nothing when it goes down or is source-routed).
    #[inline]
    fn prefetch_balancer(&self, node: u32, in_port: u16, packet: &Packet) {
        let info = &self.nodes[node as usize];
        if info.role == Role::Host || packet.via != NO_VIA {
            return;
        }
        let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
        let target = &self.places[dst as usize];
        if self.down_port(info, node, target).is_some() {
            return;
        }
        let key = if info.role == Role::Edge {
            target.edge_number
        } else {
            u32::from(target.pod)
        };
        let pipe = in_port / self.pipe_ports;
        let balancer = &self.balancers[(info.lb_base + u32::from(pipe)) as usize];
        for address in balancer.hot_addresses(DestKey(key), Self::size_class(packet)) {
            sys::prefetch(address);
        }
    }

    /// The output ports that `node` may put `packet` on when it receives it: the one port when
    /// it follows from the destination, every up-port when a balancer decides.
    #[inline(always)]
    fn next_hop_ports(&self, node: u32, packet: &Packet) -> std::ops::Range<usize> {
        let info = &self.nodes[node as usize];
        let (first, count) = if info.role == Role::Host {
            (0, u16::from(!packet.is_ack()))
        } else {
            let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
            match self.down_port(info, node, &self.places[dst as usize]) {
                Some(out) => (out, 1),
                None => (info.up_first, u16::from(info.up_count)),
            }
        };
        let first = (info.port_base + u32::from(first)) as usize;
        first..first + usize::from(count)
    }
}
