//! Prefetching: the event loop is bound by dependent cache misses on a working set that outgrows
//! the caches with the fabric, and the events due at the current picosecond are final, so it
//! loads what the next of them will touch while it works on this one (`docs/model.md`,
//! "Speed and memory").
//!
//! What an event touches is a chain: its port, the frame at the head of the port's wire, the
//! frame's destination, where that host hangs, the balancer of the switch it reaches and the
//! pointer the balancer will take, the output port the frame goes to and that port's wire.
//! Each link needs the one before it in the cache, so the loop walks the chain in stages, each
//! a few events after the previous one: the stage `d` events ahead reads only what the stage
//! before prefetched, and prefetches the next link. What a stage learns about an event is kept
//! in [`Ahead`] until the next stage needs it. Nothing here changes the simulation: an event is
//! processed from the simulator's state alone, and a stage that finds the chain broken (an
//! event it has not seen before) does nothing.

use ofan_dataplane::lb::DestKey;
use ofan_topology::Role;

use super::packet::{Packet, NO_VIA};
use super::Sim;
use crate::sys;

/// Lookahead records kept (a power of two above [`PORT`]).
pub(super) const AHEAD: usize = 32;
const AHEAD_MASK: usize = AHEAD - 1;

/// How many events ahead each stage runs: the event's port line; the head frame on its wire
/// and the receiving node; the flow's ends; the destination's place and the pipe's balancer;
/// the switch's shared balancer state (or, going down, the output port); the pointer; the
/// output port chosen; the output port's queue head and the slot the frame goes to.
const PORT: usize = 22;
const FRAME: usize = 18;
const ROUTE: usize = 14;
const PLACE: usize = 11;
const SWITCH: usize = 8;
const POINTER: usize = 6;
const OUTPUT: usize = 4;
const WIRE: usize = 2;

/// How far the chain of an event has been walked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Step {
    /// Not an arrival being walked (a pacer, a timer, a control-plane event, or not seen).
    #[default]
    None,
    Port,
    Frame,
    Route,
    Place,
    /// The balancer's shared state is on its way; the output port is still to be chosen.
    Switch,
    Pointer,
    /// `out` is the output port.
    Output,
}

/// What the stages learnt about one event ahead.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Ahead {
    /// [`EventQueue::peek_due_stamped`](crate::queue::EventQueue::peek_due_stamped)'s name of
    /// the event.
    stamp: u64,
    step: Step,
    port: u32,
    node: u32,
    in_port: u16,
    packet: Packet,
    dst: u32,
    out: u32,
}

impl Sim<'_> {
    /// Walks the chains of the events a few places ahead one stage further each, so that their
    /// cache misses overlap with the work on this one. Only events due at the current
    /// picosecond are looked at: those are final.
    // Always inlined: it runs for every event.
    #[inline(always)]
    pub(super) fn prefetch_ahead(&mut self) {
        self.stage_port();
        self.stage_frame();
        self.stage_route();
        self.stage_place();
        self.stage_switch();
        self.stage_pointer();
        self.stage_output();
        self.stage_wire();
    }

    /// The record of the event `distance` places ahead if its chain was walked to `step`.
    #[inline(always)]
    fn ahead_at(&self, distance: usize, step: Step) -> Option<usize> {
        let (stamp, _) = self.queue.peek_due_stamped(distance)?;
        let index = stamp as usize & AHEAD_MASK;
        let ahead = &self.ahead[index];
        (ahead.stamp == stamp && ahead.step == step).then_some(index)
    }

    #[inline(always)]
    fn stage_port(&mut self) {
        let Some((stamp, event)) = self.queue.peek_due_stamped(PORT) else {
            return;
        };
        let ahead = &mut self.ahead[stamp as usize & AHEAD_MASK];
        ahead.stamp = stamp;
        ahead.step = if event.wake {
            Step::None
        } else {
            sys::prefetch(&self.ports[event.target as usize]);
            ahead.port = event.target;
            Step::Port
        };
    }

    #[inline(always)]
    fn stage_frame(&mut self) {
        let Some(index) = self.ahead_at(FRAME, Step::Port) else {
            return;
        };
        let ahead = &mut self.ahead[index];
        let port = &self.ports[ahead.port as usize];
        let Some(flight) = port.wire_get(&self.wires, 0) else {
            // A frame lost with its link.
            ahead.step = Step::None;
            return;
        };
        // The head frame and the next one, whose arrival is scheduled when the head arrives
        // (24-byte entries: often on the next line).
        sys::prefetch(flight);
        if let Some(next) = port.wire_get(&self.wires, 1) {
            sys::prefetch(next);
        }
        sys::prefetch(&self.nodes[port.peer as usize]);
        ahead.node = port.peer;
        ahead.in_port = port.peer_port;
        ahead.step = Step::Frame;
    }

    #[inline(always)]
    fn stage_route(&mut self) {
        let Some(index) = self.ahead_at(ROUTE, Step::Frame) else {
            return;
        };
        let ahead = &mut self.ahead[index];
        let Some(flight) = self.ports[ahead.port as usize].wire_get(&self.wires, 0) else {
            ahead.step = Step::None;
            return;
        };
        ahead.packet = flight.packet;
        sys::prefetch(&self.flow_ends[flight.packet.flow as usize]);
        ahead.step = Step::Route;
    }

    #[inline(always)]
    fn stage_place(&mut self) {
        let Some(index) = self.ahead_at(PLACE, Step::Route) else {
            return;
        };
        let ahead = &mut self.ahead[index];
        let packet = &ahead.packet;
        let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
        ahead.dst = dst;
        let info = &self.nodes[ahead.node as usize];
        if info.role == Role::Host {
            ahead.step = Step::None;
            return;
        }
        sys::prefetch(&self.places[dst as usize]);
        if packet.via == NO_VIA && info.role != Role::Core {
            let pipe = ahead.in_port / self.pipe_ports;
            sys::prefetch(&self.balancers[(info.lb_base + u32::from(pipe)) as usize]);
        }
        ahead.step = Step::Place;
    }

    #[inline(always)]
    fn stage_switch(&mut self) {
        let Some(index) = self.ahead_at(SWITCH, Step::Place) else {
            return;
        };
        let ahead = self.ahead[index];
        let info = &self.nodes[ahead.node as usize];
        let target = &self.places[ahead.dst as usize];
        let out = match self.down_port(info, ahead.node, target) {
            Some(out) => Some(out),
            None if ahead.packet.via != NO_VIA => Some(
                info.up_first
                    + u16::from(if info.role == Role::Edge {
                        ahead.packet.via as u8
                    } else {
                        (ahead.packet.via >> 8) as u8
                    }),
            ),
            None => None,
        };
        let record = &mut self.ahead[index];
        if let Some(out) = out {
            let out = info.port_base + u32::from(out);
            sys::prefetch(&self.ports[out as usize]);
            record.out = out;
            record.step = Step::Output;
        } else {
            let pipe = ahead.in_port / self.pipe_ports;
            let balancer = &self.balancers[(info.lb_base + u32::from(pipe)) as usize];
            for address in balancer.shared_addresses() {
                sys::prefetch(address);
            }
            record.step = Step::Switch;
        }
    }

    #[inline(always)]
    fn stage_pointer(&mut self) {
        let Some(index) = self.ahead_at(POINTER, Step::Switch) else {
            return;
        };
        let ahead = self.ahead[index];
        let info = &self.nodes[ahead.node as usize];
        let pipe = ahead.in_port / self.pipe_ports;
        let balancer = &self.balancers[(info.lb_base + u32::from(pipe)) as usize];
        let key = self.balancer_key(info.role, ahead.dst);
        sys::prefetch(balancer.pointer_address(DestKey(key), Self::size_class(&ahead.packet)));
        self.ahead[index].step = Step::Pointer;
    }

    #[inline(always)]
    fn stage_output(&mut self) {
        let Some(index) = self.ahead_at(OUTPUT, Step::Pointer) else {
            return;
        };
        let ahead = self.ahead[index];
        let info = self.nodes[ahead.node as usize];
        let first = (info.port_base + u32::from(info.up_first)) as usize;
        let predicted = if self.uses_queues {
            // The decision reads every up-port's queue.
            for port in &self.ports[first..first + usize::from(info.up_count)] {
                sys::prefetch(port);
            }
            None
        } else {
            let pipe = ahead.in_port / self.pipe_ports;
            let balancer = &self.balancers[(info.lb_base + u32::from(pipe)) as usize];
            let key = self.balancer_key(info.role, ahead.dst);
            balancer.predict(&self.northbound(&info, key, &ahead.packet))
        };
        let record = &mut self.ahead[index];
        match predicted {
            Some(position) => {
                let out = first as u32 + u32::from(position.0);
                sys::prefetch(&self.ports[out as usize]);
                record.out = out;
                record.step = Step::Output;
            }
            None => record.step = Step::None,
        }
    }

    #[inline(always)]
    fn stage_wire(&mut self) {
        let Some(index) = self.ahead_at(WIRE, Step::Output) else {
            return;
        };
        let port = &self.ports[self.ahead[index].out as usize];
        // The queue head, which the purge reads, and the slot the frame goes to.
        if let Some(head) = port.wire_get(&self.wires, port.sent) {
            sys::prefetch(head);
        }
        sys::prefetch(port.wire_next_slot(&self.wires));
        self.ahead[index].step = Step::None;
    }

    /// The destination key a balancer of a switch of `role` decides on for host `dst`.
    #[inline(always)]
    fn balancer_key(&self, role: Role, dst: u32) -> u32 {
        let target = &self.places[dst as usize];
        if role == Role::Edge {
            target.edge_number
        } else {
            u32::from(target.pod)
        }
    }
}
