//! Prefetching: the event loop is bound by dependent cache misses on a working set that outgrows
//! the caches with the fabric, and the events due at the current picosecond are final, so it
//! loads what the next of them will touch while it works on this one (`docs/model.md`,
//! "Speed and memory").
//!
//! What an event touches is a chain. A frame's arrival at a switch: its port, the frame at the
//! head of the port's wire, the frame's destination, where that host hangs, the balancer of the
//! switch and the pointer it will take, the output port and that port's wire. At a host: the
//! flow, the host, the delivered bit or the sender's recovery state, the host's NIC. A pacer
//! event: the host, its next flow, the flow's recovery state, the NIC. Each link needs the one
//! before it in the cache, so the loop walks the chains in stages, each a few events after the
//! previous one: the stage `d` events ahead reads only what the stage before prefetched (or
//! what stays in cache: the node table), and prefetches the next link. What a stage learns
//! about an event is kept in [`Ahead`] until the next stage needs it.
//!
//! Every stage costs instructions on every event, so the chains are kept short: an arrival
//! event carries its frame's flow and direction (its [`hint`](super::packet::Packet::hint),
//! which the scheduler had in hand), so the first stage loads the port and the flow's ends
//! together, and the second reads the small node table directly instead of waiting a stage
//! for it. Nothing here changes the simulation: an event is processed from the simulator's
//! state alone, and a stage that finds a chain broken (an event it has not seen before, a
//! frame lost with its link) does nothing. A prefetch of any address is harmless, so what is
//! only prefetched is addressed without a bounds check ([`prefetch_element`]); only what a
//! stage reads is checked.
//!
//! Walking chains pays only where their links miss the caches. In a fabric small enough that
//! the routing state stays in the L2 ([`CHAIN_HOSTS`]), the loop loads ahead only what leaves
//! it first — the head frames of the wires and the pacing hosts' lines — in one stage without
//! records ([`Depth`]).

use ofan_dataplane::lb::DestKey;
use ofan_topology::Role;

use super::host::HOST_HOT_BYTES;
use super::packet::{Packet, ACK_FLAG, NO_VIA};
use super::port::Port;
use super::{Sim, ARF_BIT, FAIL_BIT, START_BIT, TIMER_BIT};
use crate::sys;

/// Lookahead records kept (a power of two above the first stage's distance).
const AHEAD: usize = 32;
const AHEAD_MASK: usize = AHEAD - 1;

/// From this many hosts on the loop walks every event's chain ([`Depth::Chains`]); below, only
/// the wire entries and the pacing hosts ([`Depth::Wires`]). Below it the routing state (ports,
/// nodes, places, balancers: about 200 KB at 432 hosts) stays in the L2 and the whole model in
/// the L3, so a chain's links cost the loop little, and walking them ahead cost more than it
/// saved: at 432 hosts the six stages took 275 of 706 instructions per event, and with them
/// switched off the event loop was no slower (`docs/model.md`); from 1,024 hosts on, without
/// them it took up to 1.3× as long, and 2× at 3,456. The same size as
/// [`super::HUGE_PAGE_HOSTS`], for the same reason: what fits the caches.
const CHAIN_HOSTS: usize = 1024;

/// [`Depth::Wires`]: how many events ahead the wire entries are loaded.
const WIRES_AHEAD: usize = 4;

/// How many events ahead each stage runs (see [`Step`] for what each does).
const STAGE_1: usize = 20;
const STAGE_2: usize = 16;
const STAGE_3: usize = 12;
const STAGE_4: usize = 8;
const STAGE_5: usize = 5;
const STAGE_6: usize = 2;

/// How far the chain of an event has been walked: the step names what the last stage
/// prefetched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Step {
    /// Nothing (left) to walk: a timer or control-plane event, an event not seen from the
    /// start, or a finished chain.
    #[default]
    None,
    /// Arrival, stage 1: the port line and the flow's ends (from the event's hint).
    Port,
    /// Stage 2, at a switch: the head frame on the wire, the destination's place and the
    /// pipe's balancer.
    Place,
    /// Stage 3, going up with a balancer decision: the switch's shared balancer state.
    Switch,
    /// Stage 4: the pointer the balancer will take.
    Pointer,
    /// Stage 3 (known output port) or 5 (predicted): the output port `out`; stage 6 then
    /// prefetches its queue head and the slot the frame goes to.
    Output,
    /// Stage 2, at a host: the head frame, the flow and the host.
    HostPlace,
    /// Stage 3, at a host: the delivered bit and the NIC (DATA) or the sender's recovery state
    /// of the flow (ACK).
    HostFlow,
    /// Pacer, stage 1: the host and its node.
    Wake,
    /// Pacer, stage 2: the cursor's entry of the active flows and the NIC's port line.
    WakeHost,
    /// Pacer, stage 3: the flow.
    WakeFlow,
    /// Pacer, stage 4: the flow's recovery state, the NIC's queue head and next slot.
    WakeRecovery,
}

/// What the stages learnt about the events ahead, by their position among the present
/// picosecond's events modulo [`AHEAD`].
///
/// Only stage 1 starts a record, for the event at its position, and the last stage (or a
/// broken chain) ends it, 18 positions later, before stage 1 reaches the next event with the
/// same record; every record is ended when a new picosecond begins. So a record that has a
/// step is its position's event's. (Events whose stages are skipped — timers, the control
/// plane, frames lost with their link do not run them — can leave a record behind: its
/// prefetches are wasted, never wrong.)
#[derive(Debug)]
pub(super) struct Lookahead {
    depth: Depth,
    /// Per record, how far its event's chain has been walked: apart from the records, so that
    /// every stage's first test reads one byte of one line.
    steps: [Step; AHEAD],
    records: [Ahead; AHEAD],
    /// The picosecond whose events the records describe ([`EventQueue::time_number`]).
    ///
    /// [`EventQueue::time_number`]: crate::queue::EventQueue::time_number
    time: u32,
}

/// How much of an event the loop loads ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// Every link of every chain, in six stages (large fabrics).
    Chains,
    /// Only the head frame (and the next) of an arrival's wire and a pacing host's own lines,
    /// [`WIRES_AHEAD`] events ahead: the state that leaves the L2 first (fabrics below
    /// [`CHAIN_HOSTS`] hosts).
    Wires,
}

impl Lookahead {
    /// The lookahead for a fabric of `hosts` hosts.
    pub(super) fn new(hosts: usize) -> Self {
        Self {
            depth: if hosts >= CHAIN_HOSTS {
                Depth::Chains
            } else {
                Depth::Wires
            },
            steps: [Step::None; AHEAD],
            records: [Ahead::default(); AHEAD],
            time: u32::MAX,
        }
    }
}

/// What the stages learnt about one event ahead.
#[derive(Debug, Clone, Copy, Default)]
struct Ahead {
    /// The port whose wire the frame arrives from, or the pacing host.
    target: u32,
    node: u32,
    in_port: u16,
    /// The frame: its flow and direction from the event's hint (stage 1), all of it once read
    /// off the wire (stage 3).
    packet: Packet,
    /// The destination host (the pacing host's cursor in its active flows).
    dst: u32,
    out: u32,
    /// The head frame's slot in `Sim::wires`.
    slot: u32,
    /// Going up: the pipe's balancer in `Sim::balancers` and the destination key it decides
    /// on.
    balancer: u32,
    key: u32,
}

impl Sim<'_> {
    /// Walks the chains of the events a few places ahead one stage further each, so that their
    /// cache misses overlap with the work on this one. Only events due at the current
    /// picosecond are looked at: those are final.
    // Always inlined: it runs for every event.
    #[inline(always)]
    pub(super) fn prefetch_ahead(&mut self) {
        if self.ahead.depth == Depth::Wires {
            self.prefetch_wires();
            return;
        }
        if self.queue.time_number() != self.ahead.time {
            self.prime_ahead();
        }
        self.stages(0);
    }

    /// [`Depth::Wires`]: loads the wire entries of the arrival [`WIRES_AHEAD`] events ahead
    /// (or the lines of the pacing host); at the first event of a picosecond, of every event
    /// up to there.
    #[inline(always)]
    fn prefetch_wires(&mut self) {
        if self.queue.time_number() != self.ahead.time {
            self.ahead.time = self.queue.time_number();
            for distance in 0..WIRES_AHEAD {
                self.prefetch_wire(distance);
            }
        }
        self.prefetch_wire(WIRES_AHEAD);
    }

    /// The head frame and the next one on the wire of the event `distance` places ahead, or
    /// the pacing host's lines.
    #[inline(always)]
    fn prefetch_wire(&self, distance: usize) {
        let Some(event) = self.queue.peek_due(distance) else {
            return;
        };
        if !event.wake {
            if let Some(port) = self.ports.get(event.target as usize) {
                let head = port.wire_slot(&self.wires, 0);
                sys::prefetch(self.wires.address(head));
                sys::prefetch(self.wires.address(head + 1));
            }
        } else if event.target & (TIMER_BIT | ARF_BIT | FAIL_BIT | START_BIT) == 0 {
            prefetch_bytes(
                self.hosts.as_ptr().wrapping_add(event.target as usize),
                HOST_HOT_BYTES,
            );
        }
    }

    /// Every stage, for the events at its distance less `behind`.
    #[inline(always)]
    fn stages(&mut self, behind: usize) {
        let distance = |stage: usize| stage.checked_sub(behind);
        if let Some(d) = distance(STAGE_1) {
            self.stage_1(d);
        }
        if let Some(d) = distance(STAGE_2) {
            self.stage_2(d);
        }
        if let Some(d) = distance(STAGE_3) {
            self.stage_3(d);
        }
        if let Some(d) = distance(STAGE_4) {
            self.stage_4(d);
        }
        if let Some(d) = distance(STAGE_5) {
            self.stage_5(d);
        }
        if let Some(d) = distance(STAGE_6) {
            self.stage_6(d);
        }
    }

    /// The first event of a picosecond: the events after it were never in reach of the
    /// stages (those of the previous picosecond were final, these were not yet). Runs the
    /// stages as they would have run had these events been queued behind others, back to
    /// back: each event's chain is walked in order, with less time between the stages.
    #[cold]
    #[inline(never)]
    fn prime_ahead(&mut self) {
        // The records name positions in the previous picosecond's events.
        self.ahead.time = self.queue.time_number();
        self.ahead.steps = [Step::None; AHEAD];
        let due = self.queue.due_after_head();
        // Stage 1 reaches the events at `STAGE_1 - behind`, which must be due.
        for behind in (STAGE_1.saturating_sub(due) + 1..STAGE_1).rev() {
            self.stages(behind);
        }
    }

    /// The record of the event `distance` places ahead and its step, if the stages have
    /// followed it since the first (see [`Lookahead`]).
    #[inline(always)]
    fn ahead_at(&self, distance: usize) -> Option<(usize, Step)> {
        let index = self.queue.position_ahead(distance) & AHEAD_MASK;
        let step = self.ahead.steps[index];
        (step != Step::None).then_some((index, step))
    }

    #[inline(always)]
    fn stage_1(&mut self, distance: usize) {
        let Some(event) = self.queue.peek_due(distance) else {
            return;
        };
        let index = self.queue.position_ahead(distance) & AHEAD_MASK;
        let record = &mut self.ahead.records[index];
        record.target = event.target;
        self.ahead.steps[index] = if !event.wake {
            let flow = event.hint & !ACK_FLAG;
            prefetch_element(&self.ports, event.target as usize);
            prefetch_element(&self.flow_ends, flow as usize);
            record.packet.flow = flow;
            record.packet.seq_flags = event.hint & ACK_FLAG;
            Step::Port
        } else if event.target & (TIMER_BIT | ARF_BIT | FAIL_BIT | START_BIT) == 0 {
            prefetch_bytes(
                self.hosts.as_ptr().wrapping_add(event.target as usize),
                HOST_HOT_BYTES,
            );
            prefetch_element(&self.nodes, event.target as usize);
            Step::Wake
        } else {
            Step::None
        };
    }

    #[inline(always)]
    fn stage_2(&mut self, distance: usize) {
        let Some((index, step)) = self.ahead_at(distance) else {
            return;
        };
        self.ahead.steps[index] = match step {
            Step::Port => self.stage_2_arrival(index),
            Step::Wake => {
                let record = &mut self.ahead.records[index];
                let host = &self.hosts[record.target as usize];
                let nic = self.nodes[record.target as usize].port_base;
                prefetch_element(&self.ports, nic as usize);
                record.out = nic;
                if host.active.is_empty() {
                    Step::None
                } else {
                    let cursor = if host.cursor >= host.active.len() {
                        0
                    } else {
                        host.cursor
                    };
                    prefetch_element(&host.active, cursor);
                    record.dst = cursor as u32;
                    Step::WakeHost
                }
            }
            _ => Step::None,
        };
    }

    /// Stage 2 of an arrival: from the port and the flow's ends, the head frame on the wire
    /// and the next one (whose arrival is scheduled when the head arrives; 24-byte entries,
    /// often on the next line), and what the receiving node reads next — at a switch the
    /// destination's place and the pipe's balancer, at a host the flow, the host and its
    /// deliveries.
    #[inline(always)]
    fn stage_2_arrival(&mut self, index: usize) -> Step {
        let record = &mut self.ahead.records[index];
        let port = &self.ports[record.target as usize];
        let Some(ends) = self.flow_ends.get(record.packet.flow as usize) else {
            return Step::None;
        };
        if port.wire_len() == 0 {
            // A frame lost with its link.
            return Step::None;
        }
        let head = port.wire_slot(&self.wires, 0);
        sys::prefetch(self.wires.address(head));
        sys::prefetch(self.wires.address(head + 1));
        let (node, in_port) = (port.peer, port.peer_port);
        let is_ack = record.packet.is_ack();
        let dst = ends[usize::from(!is_ack)];
        record.slot = head as u32;
        record.node = node;
        record.in_port = in_port;
        record.dst = dst;
        // The node table is small and read by every event: it stays in cache.
        let info = &self.nodes[node as usize];
        if info.role == Role::Host {
            prefetch_element(&self.flows, record.packet.flow as usize);
            prefetch_bytes(
                self.hosts.as_ptr().wrapping_add(node as usize),
                HOST_HOT_BYTES,
            );
            if !is_ack {
                prefetch_element(&self.deliveries, node as usize);
            }
            Step::HostPlace
        } else {
            let place = u32::from(info.plane) * self.host_count + dst;
            prefetch_element(&self.places, place as usize);
            if info.role != Role::Core {
                // Wasted for a source-routed frame (DRB), whose route is read at stage 3.
                let balancer = info.lb_base + u32::from(in_port / self.pipe_ports);
                prefetch_element(&self.balancers, balancer as usize);
                record.balancer = balancer;
            }
            Step::Place
        }
    }

    #[inline(always)]
    fn stage_3(&mut self, distance: usize) {
        let Some((index, step)) = self.ahead_at(distance) else {
            return;
        };
        self.ahead.steps[index] = match step {
            Step::Place | Step::HostPlace => {
                let record = &mut self.ahead.records[index];
                // The head frame stays where stage 2 found it unless its ring grew meanwhile
                // (then this reads another frame, and the prefetches are wasted).
                let Some(flight) = self.wires.get(record.slot as usize) else {
                    self.ahead.steps[index] = Step::None;
                    return;
                };
                record.packet = flight.packet;
                if step == Step::Place {
                    self.stage_3_switch(index)
                } else {
                    self.stage_3_host(index)
                }
            }
            Step::WakeHost => {
                let record = &mut self.ahead.records[index];
                let host = &self.hosts[record.target as usize];
                match host.active.get(record.dst as usize) {
                    Some(&flow) => {
                        prefetch_element(&self.flows, flow as usize);
                        record.packet.flow = flow;
                        Step::WakeFlow
                    }
                    None => Step::None,
                }
            }
            _ => Step::None,
        };
    }

    /// Stage 3 at a switch: the output port when the destination or a source route names it,
    /// else the switch's shared balancer state.
    #[inline(always)]
    fn stage_3_switch(&mut self, index: usize) -> Step {
        let ahead = self.ahead.records[index];
        let info = &self.nodes[ahead.node as usize];
        let target = *self.place_of(info, ahead.dst);
        let out = match self.down_port(info, ahead.node, &target) {
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
        let record = &mut self.ahead.records[index];
        if let Some(out) = out {
            let out = info.port_base + u32::from(out);
            prefetch_element(&self.ports, out as usize);
            record.out = out;
            Step::Output
        } else {
            record.key = if info.role == Role::Edge {
                target.edge_number
            } else {
                u32::from(target.pod)
            };
            let balancer = &self.balancers[ahead.balancer as usize];
            for address in balancer.shared_addresses() {
                sys::prefetch(address);
            }
            Step::Switch
        }
    }

    /// Stage 3 at a host: the sender's recovery state of the flow (an ACK), or the delivered
    /// bit and the NIC that sends the ACK (DATA).
    #[inline(always)]
    fn stage_3_host(&mut self, index: usize) -> Step {
        let record = &mut self.ahead.records[index];
        let Some(flow) = self.flows.get(record.packet.flow as usize) else {
            return Step::None;
        };
        if record.packet.is_ack() {
            let recovery = &self.hosts[record.node as usize].recovery;
            sys::prefetch(recovery.flow_address(flow.local));
        } else {
            let bit = flow.delivered_base + record.packet.seq() as usize;
            prefetch_element(&self.delivered, bit / 64);
            let nic = self.nodes[record.node as usize].port_base;
            prefetch_element(&self.ports, nic as usize);
            record.out = nic;
        }
        Step::HostFlow
    }

    #[inline(always)]
    fn stage_4(&mut self, distance: usize) {
        let Some((index, step)) = self.ahead_at(distance) else {
            return;
        };
        let ahead = &self.ahead.records[index];
        self.ahead.steps[index] = match step {
            Step::Switch => {
                let balancer = &self.balancers[ahead.balancer as usize];
                let class = Self::size_class(&ahead.packet);
                sys::prefetch(balancer.pointer_address(DestKey(ahead.key), class));
                Step::Pointer
            }
            Step::HostFlow => {
                if ahead.packet.is_ack() {
                    let flow = &self.flows[ahead.packet.flow as usize];
                    let recovery = &self.hosts[ahead.node as usize].recovery;
                    for address in recovery.packet_addresses(flow.local, ahead.packet.seq()) {
                        sys::prefetch(address);
                    }
                } else {
                    self.prefetch_queue_ends(&self.ports[ahead.out as usize]);
                }
                Step::None
            }
            Step::WakeFlow => {
                let flow = &self.flows[ahead.packet.flow as usize];
                let recovery = &self.hosts[ahead.target as usize].recovery;
                sys::prefetch(recovery.flow_address(flow.local));
                self.prefetch_queue_ends(&self.ports[ahead.out as usize]);
                Step::WakeRecovery
            }
            // Output ports known at stage 3 wait for stage 6.
            Step::Output => Step::Output,
            _ => Step::None,
        };
    }

    #[inline(always)]
    fn stage_5(&mut self, distance: usize) {
        let Some((index, step)) = self.ahead_at(distance) else {
            return;
        };
        let ahead = self.ahead.records[index];
        self.ahead.steps[index] = match step {
            Step::Pointer => {
                let info = self.nodes[ahead.node as usize];
                let first = (info.port_base + u32::from(info.up_first)) as usize;
                let predicted = if self.uses_queues {
                    // The decision reads every up-port's queue.
                    for port in first..first + usize::from(info.up_count) {
                        prefetch_element(&self.ports, port);
                    }
                    None
                } else {
                    let balancer = &self.balancers[ahead.balancer as usize];
                    balancer.predict(&self.northbound(&info, ahead.key, &ahead.packet))
                };
                match predicted {
                    Some(position) => {
                        let out = first as u32 + u32::from(position.0);
                        prefetch_element(&self.ports, out as usize);
                        self.ahead.records[index].out = out;
                        Step::Output
                    }
                    None => Step::None,
                }
            }
            Step::WakeRecovery => {
                let flow = &self.flows[ahead.packet.flow as usize];
                let recovery = &self.hosts[ahead.target as usize].recovery;
                for address in recovery.packet_addresses(flow.local, flow.next_seq) {
                    sys::prefetch(address);
                }
                Step::None
            }
            Step::Output => Step::Output,
            _ => Step::None,
        };
    }

    #[inline(always)]
    fn stage_6(&mut self, distance: usize) {
        let Some((index, step)) = self.ahead_at(distance) else {
            return;
        };
        if step == Step::Output {
            self.prefetch_queue_ends(&self.ports[self.ahead.records[index].out as usize]);
        }
        self.ahead.steps[index] = Step::None;
    }

    /// Prefetches what an enqueue on `port` (whose line is cached) reads and writes on its
    /// wire: the queue head, which the purge reads, and the slot the frame goes to.
    #[inline(always)]
    fn prefetch_queue_ends(&self, port: &Port) {
        sys::prefetch(port.wire_address(&self.wires, port.sent));
        sys::prefetch(port.wire_address(&self.wires, port.wire_len()));
    }
}

/// Prefetches `slice[index]`'s first line. Without a bounds check: the index may be stale (read
/// ahead of the events that change it), and a prefetch of any address is harmless.
#[inline(always)]
fn prefetch_element<T>(slice: &[T], index: usize) {
    sys::prefetch(slice.as_ptr().wrapping_add(index));
}

/// Prefetches the first `bytes` at `value`, line by line.
#[inline(always)]
fn prefetch_bytes<T>(value: *const T, bytes: usize) {
    let start = value.cast::<u8>();
    let mut offset = 0;
    while offset < bytes {
        sys::prefetch(start.wrapping_add(offset));
        offset += 64;
    }
}
