//! The hosts: the pacer that lets data frames leave (see the module documentation of `sim`,
//! "Hosts"), the retransmission timers ("Loss recovery"), the ACKs a host sends and holds, and
//! what a host does with a frame it receives.

use std::collections::VecDeque;

use ofan_dataplane::lb::LbRng;
use ofan_transport::{Ack, FlowOrder, SelectiveRepeat, ECHO_MASK};

use super::coalesce::Urgent;
use super::credit::PULL_BIT;
use super::packet::{Packet, ACK_FLAG, AR_FLAG, COPY_SHIFT, NACK_FLAG, NO_VIA, PULL_SEQ, SEQ_MASK};
use super::Sim;
use crate::config::{AckAirtime, Scheme};

/// Bit of a wake event's target that marks a host's retransmission timer (rather than its
/// pacer): host indices stay below it.
pub(super) const TIMER_BIT: u32 = 1 << 30;
/// [`Host::timer_at`] when no timer is armed.
pub(super) const NO_TIMER: u64 = u64::MAX;

/// A host. `repr(C)`, in this order, so that what a pacer event and a frame's arrival read
/// sits in the first four cache lines (the host's own fields, then the hot start of
/// [`SelectiveRepeat`]), which the event loop prefetches ahead.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Host {
    /// Flows with data left to send, in round-robin order.
    pub(super) active: Vec<u32>,
    pub(super) cursor: usize,
    /// When the pacer lets the next data frame leave, ps; the NIC is free then (ACKs only
    /// take room that ends by it).
    pub(super) due: u64,
    /// [`AckAirtime::Charged`]: airtime of the ACKs given to the NIC since the last data
    /// departure, ps.
    pub(super) ack_airtime: u64,
    /// [`AckAirtime::Reserved`]: ACK airtime reserved after every data frame, ps.
    pub(super) reserved: u64,
    /// When the armed retransmission timer fires ([`NO_TIMER`]: none); timer events at any
    /// other time are stale.
    pub(super) timer_at: u64,
    /// ACKs that would have delayed the next data frame, oldest first: they leave in the room
    /// the pacer leaves after it.
    pub(super) held_acks: VecDeque<Packet>,
    pub(super) rng: LbRng,
    /// The host's flows by local index.
    pub(super) flows: Vec<u32>,
    /// Loss recovery over the host's flows, by local index ([`Flow::local`]).
    pub(super) recovery: SelectiveRepeat,
}

/// Bytes of a [`Host`] that the event loop prefetches: its own fields and the start of its
/// [`SelectiveRepeat`].
pub(super) const HOST_HOT_BYTES: usize = 256;

/// A flow. `repr(C)`, in this order: what every send, arrival and ACK reads is in the first
/// cache line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Flow {
    /// First bit of the flow's packets in [`Sim::delivered`].
    pub(super) delivered_base: usize,
    pub(super) src: u32,
    pub(super) dst: u32,
    pub(super) packets: u32,
    pub(super) last_frame: u32,
    pub(super) next_seq: u32,
    /// Distinct data packets received.
    pub(super) received: u32,
    /// The receiver's arrival order (highest sequence number so far).
    pub(super) order: FlowOrder,
    /// Packets acknowledged (first ACK of each).
    pub(super) acked: u32,
    /// Index of the flow among its source host's flows.
    pub(super) local: u32,
    pub(super) drb_data: u64,
    pub(super) drb_ack: u64,
    pub(super) done_at: Option<u64>,
    /// REPS: entropies whose ACKs came back unmarked, oldest first.
    pub(super) recycled: VecDeque<u16>,
}

impl Sim<'_> {
    /// Time that data of `serialization` takes at the paced rate.
    #[inline]
    fn paced(&self, serialization: u64) -> u64 {
        if self.rate_ppm == 1_000_000 {
            serialization
        } else {
            (u128::from(serialization) * 1_000_000).div_ceil(u128::from(self.rate_ppm)) as u64
        }
    }

    /// The pacer of `host` after a data frame of `serialization` left: how much later than
    /// that frame the next one is due (see the module documentation, "Hosts").
    fn pacing_gap(&mut self, host: u32, serialization: u64) -> u64 {
        let paced = self.paced(serialization);
        let state = &mut self.hosts[host as usize];
        match self.config.ack_airtime {
            AckAirtime::Charged => {
                // The ACKs sent since the previous departure, less the idle time pacing leaves.
                let charge = state.ack_airtime.saturating_sub(paced - serialization);
                state.ack_airtime = 0;
                paced + charge
            }
            AckAirtime::Reserved => paced.max(serialization + state.reserved),
        }
    }

    /// A host's pacer fires: inject the next data frame — the oldest packet whose timer
    /// expired, else the next new one (the NIC is idle: ACKs only take room that ends by the
    /// due time; the check is a safety net).
    pub(super) fn wake(&mut self, host: u32) {
        let now = self.now;
        if let Some(deps) = self.deps.as_deref_mut() {
            deps.pacer_pending[host as usize] = false;
        }
        if let Some(cc) = self.cc.as_deref_mut() {
            // Whatever it does next, the host is no longer waiting for an ACK.
            cc.blocked[host as usize] = false;
        }
        let mut nic = self.nodes[host as usize].port_base as usize;
        let free_at = self.ports[nic].free_at;
        if self.planes == 1 && free_at > now {
            self.push_pacer(free_at, host);
            return;
        }
        let state = &mut self.hosts[host as usize];
        if state.active.is_empty() && now < state.due {
            // A retry for the NIC that comes before the pacer allows: the timer decides.
            self.arm_timer(host);
            return;
        }
        let lost = if self.cc.is_some() {
            self.next_lost_windowed(host)
        } else {
            state.recovery.next_lost(now)
        };
        if lost.is_none() && !self.open_window(host) {
            // Every window is full: the next ACK (or the timer) brings the host back.
            if let Some(cc) = self.cc.as_deref_mut() {
                cc.blocked[host as usize] = true;
            }
            // Its ACKs no longer wait for room after a data frame.
            self.release_acks(host, nic, u64::MAX);
            self.arm_timer(host);
            return;
        }
        let state = &mut self.hosts[host as usize];
        let (flow_id, seq) = if let Some((local, seq)) = lost {
            (state.flows[local as usize], seq)
        } else if !state.active.is_empty() {
            if state.cursor >= state.active.len() {
                state.cursor = 0;
            }
            let flow_id = state.active[state.cursor];
            let flow = &mut self.flows[flow_id as usize];
            let seq = flow.next_seq;
            flow.next_seq += 1;
            if flow.next_seq == flow.packets {
                state.active.remove(state.cursor);
            } else {
                state.cursor += 1;
            }
            (flow_id, seq)
        } else {
            // A pacer retry for a retransmission whose packet was ACKed meanwhile.
            self.arm_timer(host);
            return;
        };
        if let Some(credits) = self.credits.as_deref_mut() {
            credits.spend(flow_id);
        }
        let state = &mut self.hosts[host as usize];
        let flow = &mut self.flows[flow_id as usize];
        let frame = if seq + 1 == flow.packets {
            flow.last_frame
        } else {
            self.data_frame
        };
        let (mut entropy, drb) = match self.scheme {
            Scheme::Switch(_) => (0, None),
            Scheme::Spray => (state.rng.next_u64() as u16, None),
            Scheme::Reps => {
                let fresh = &mut state.rng;
                (
                    flow.recycled
                        .pop_front()
                        .unwrap_or_else(|| fresh.next_u64() as u16),
                    None,
                )
            }
            Scheme::Drb => {
                let n = flow.drb_data;
                flow.drb_data = n.wrapping_add(1);
                (0, Some((flow.src, flow.dst, n)))
            }
        };
        let copy = state.recovery.transmissions(flow.local, seq) & ECHO_MASK;
        state.recovery.on_send(flow.local, seq, now);
        let via = drb.map_or(NO_VIA, |(src, dst, n)| self.drb_waypoint(src, dst, n));
        if self.planes > 1 {
            let choice = self.plane_choose(host, flow_id, seq, lost.is_some());
            nic += usize::from(choice.plane);
            entropy = choice.entropy;
        }
        let more = !self.hosts[host as usize].active.is_empty();
        self.counts.data_sent += 1;
        let mut seq_flags = seq | copy << COPY_SHIFT;
        if self.coalesce.is_some() && self.asks_for_ack(host, flow_id, seq, lost.is_some()) {
            seq_flags |= AR_FLAG;
        }
        let packet = Packet {
            flow: flow_id,
            seq_flags,
            frame,
            entropy,
            via,
        };
        self.enqueue(nic, packet);
        let gap = if self.planes > 1 {
            // P ports: data at P × the paced rate; each port's ACKs wait in its own queue.
            self.paced(self.serialization(frame))
                .div_ceil(u64::from(self.planes))
        } else {
            self.pacing_gap(host, self.serialization(frame))
        };
        // Several ports: the next frame waits until the port this one took has at most one
        // data frame left, so that no port is given more than its line rate.
        let backlog = if self.planes > 1 {
            self.ports[nic].free_at.saturating_sub(self.ser_data)
        } else {
            0
        };
        // The next frame is due `gap` after this one left, and this one leaves now: later than
        // it was due when the host waited (for its NIC, which its ACKs held while it sent
        // nothing; for a trigger, a window or a timer). Counted from when it was due instead,
        // the pacer would fall behind its NIC for good, and the room it leaves for ACKs (which
        // ends at `due`) would end before the NIC is free: the host's ACKs would wait until it
        // has no new data left — milliseconds in an incast. As in the lab's pacer, a late
        // departure does not catch up.
        let state = &mut self.hosts[host as usize];
        state.due = (state.due.max(now) + gap).max(backlog);
        if more {
            let due = state.due;
            self.release_acks(host, nic, due);
            self.push_pacer(due, host);
        } else {
            // No new data is left: ACKs go out at once, and only a timer brings the host back.
            self.release_acks(host, nic, u64::MAX);
            self.arm_timer(host);
        }
    }

    /// Coalesced ACKs: whether the frame `seq` of `flow`, just handed to the NIC, asks its
    /// receiver for an ACK at once, as htsim's UEC source does: a retransmission, the flow's
    /// last new frame, or a frame after which the flow's window has no room (its sender will
    /// wait for an ACK, which N frames might never make come).
    fn asks_for_ack(&self, host: u32, flow: u32, seq: u32, retransmission: bool) -> bool {
        use ofan_transport::CongestionControl as _;
        let state = &self.flows[flow as usize];
        if retransmission || seq + 1 == state.packets {
            return true;
        }
        self.cc.as_deref().is_some_and(|cc| {
            let recovery = &self.hosts[host as usize].recovery;
            let in_flight = u64::from(recovery.outstanding(state.local)) * cc.mss;
            !cc.flows[flow as usize].can_send(in_flight, cc.mss)
        })
    }

    /// Arms `host`'s retransmission timer for its earliest deadline, but no earlier than its
    /// pacer lets the next frame leave; keeps an armed timer that fires earlier (it re-arms
    /// when it finds nothing expired).
    // Not inlined: it runs once per host at the end of its data and on losses.
    #[inline(never)]
    pub(super) fn arm_timer(&mut self, host: u32) {
        let now = self.queue.now();
        let blocked = self.blocked(host);
        let state = &mut self.hosts[host as usize];
        // A host that waits for room in a window waits for an ACK or a timer, not for the
        // packets that wait for that room.
        let deadline = if blocked {
            state.recovery.next_timer()
        } else {
            state.recovery.next_deadline()
        };
        let Some(deadline) = deadline else {
            return;
        };
        // A deadline already past (an RTT sample shortened the timeout) fires now: an event in
        // the past would turn the clock back (the event queue is monotone).
        let at = deadline.max(state.due).max(now);
        if state.timer_at != NO_TIMER && state.timer_at <= at {
            return;
        }
        state.timer_at = at;
        self.push(at, host | TIMER_BIT, true);
    }

    /// `host`'s retransmission timer event at `time`: sends what expired (through the pacer's
    /// path), or re-arms. Stale timers, and timers of a host with nothing outstanding, are
    /// dropped without touching the clock.
    #[inline(never)]
    pub(super) fn timer(&mut self, host: u32, time: u64) {
        let state = &mut self.hosts[host as usize];
        if state.timer_at != time {
            return;
        }
        state.timer_at = NO_TIMER;
        if self.pacer_pending(host) {
            // A flow started by a dependency woke the pacer, which looks for expired packets
            // first (without dependencies a timer never meets a pending pacer).
            return;
        }
        let state = &mut self.hosts[host as usize];
        if let Some(cc) = self.cc.as_deref() {
            if !state.active.is_empty() && !cc.blocked[host as usize] {
                // The pacer's next event is pending and looks for expired packets first.
                return;
            }
        }
        let Some(deadline) = state.recovery.next_deadline() else {
            return;
        };
        self.now = time;
        if deadline.max(state.due) > time {
            self.arm_timer(host);
        } else {
            self.wake(host);
        }
    }

    /// Puts the held ACKs of `host` on its NIC, oldest first, as long as they end by `until`.
    fn release_acks(&mut self, host: u32, nic: usize, until: u64) {
        while self.ports[nic].free_at.saturating_add(self.ser_ack) <= until {
            let Some(ack) = self.hosts[host as usize].held_acks.pop_front() else {
                break;
            };
            self.enqueue(nic, ack);
        }
    }

    /// `host` acknowledges a data frame that came on its port `in_port`: the NIC sends the ACK
    /// at once unless it would delay the host's next data frame, then it waits for the room
    /// after that frame. With several planes the ACK takes the DATA's plane and joins that
    /// port's queue at once.
    fn send_ack(&mut self, host: u32, in_port: u16, ack: Packet) {
        self.counts.acks_sent += 1;
        let nic = self.nodes[host as usize].port_base as usize;
        if self.planes > 1 {
            self.enqueue(nic + usize::from(in_port), ack);
            return;
        }
        let blocked = self.blocked(host);
        let state = &mut self.hosts[host as usize];
        let sending = !state.active.is_empty() && !blocked;
        if sending {
            // An ACK sent while the host has nothing to send (waiting for a trigger, a window
            // or a timer) has the link to itself and delays no departure, as the lab agent
            // counts it; charged, it would hold back the first frame after the wait.
            state.ack_airtime += self.ser_ack;
        }
        let fits = state.held_acks.is_empty()
            && self.now.max(self.ports[nic].free_at) + self.ser_ack <= state.due;
        if sending && !fits {
            state.held_acks.push_back(ack);
        } else {
            self.enqueue(nic, ack);
        }
    }

    /// Without congestion control: the sender of `flow` hears that the frame `seq_flags` (its
    /// sequence and copy number) arrived. Returns whether that completed the flow's ACKs.
    fn ack_frame(&mut self, host: u32, flow: u32, seq_flags: u32, now: u64) -> bool {
        let flow = &mut self.flows[flow as usize];
        let state = &mut self.hosts[host as usize];
        let (seq, copy) = (seq_flags & SEQ_MASK, (seq_flags >> COPY_SHIFT) & ECHO_MASK);
        match state.recovery.on_ack_echo(flow.local, seq, copy, now) {
            Ack::New => {
                flow.acked += 1;
                if flow.acked == flow.packets {
                    flow.done_at = Some(now);
                    self.flows_done += 1;
                    return true;
                }
            }
            Ack::Duplicate => self.counts.duplicate_acks += 1,
            Ack::OutOfRange => debug_assert!(false, "ACK of a packet never sent"),
        }
        false
    }

    /// Without congestion control, after an ACK: once the host sends no new data its timer
    /// decides (a sample may have shortened the RTO); a flow whose every packet is ACKed may
    /// fire its trigger.
    fn after_ack(&mut self, host: u32, flow: u32, finished: bool) {
        let state = &self.hosts[host as usize];
        if state.active.is_empty() && !state.recovery.complete() {
            self.arm_timer(host);
        }
        if finished {
            self.flow_sent(flow);
        }
    }

    /// A coalesced ACK reached the sender: it learns every frame the receiver had got when it
    /// sent it and the sender had not heard of, oldest first; the congestion control takes
    /// the round trip of the frame that triggered it only (the others waited at the receiver).
    fn coalesced_ack(&mut self, host: u32, packet: Packet, now: u64) {
        let mut conveyed = std::mem::take(&mut self.conveyed);
        self.coalesce
            .as_deref_mut()
            .expect("coalesced ACKs")
            .on_ack(packet.flow, packet.seq_flags, &mut conveyed);
        let mut finished = false;
        let last = conveyed.len().wrapping_sub(1);
        for (i, &frame) in conveyed.iter().enumerate() {
            finished |= if self.cc.is_some() {
                self.ack_frame_cc(host, packet.flow, frame, i == last, now)
            } else {
                self.ack_frame(host, packet.flow, frame, now)
            };
        }
        self.conveyed = conveyed;
        if self.cc.is_some() {
            self.after_ack_cc(host, packet.flow, finished, now);
        } else {
            self.after_ack(host, packet.flow, finished);
        }
    }

    /// A frame reaches its destination host on its port `in_port` (its plane).
    pub(super) fn receive(&mut self, host: u32, in_port: u16, packet: Packet) {
        let now = self.now;
        let flow = &mut self.flows[packet.flow as usize];
        if packet.is_ack() {
            debug_assert_eq!(flow.src, host);
            self.counts.acks_delivered += 1;
            if packet.is_pull() {
                self.pulled(host, packet.flow, now);
                return;
            }
            if packet.seq_flags & NACK_FLAG != 0 {
                self.nacked(host, packet, now);
                return;
            }
            if self.scheme == Scheme::Reps && !packet.ecn() {
                flow.recycled.push_back(packet.entropy);
            }
            if self.planes > 1 {
                self.plane_acked(packet.flow, in_port, packet.entropy, packet.ecn());
            }
            if self.coalesce.is_some() {
                self.coalesced_ack(host, packet, now);
            } else if self.cc.is_some() {
                let finished = self.ack_frame_cc(host, packet.flow, packet.seq_flags, true, now);
                self.after_ack_cc(host, packet.flow, finished, now);
            } else {
                let finished = self.ack_frame(host, packet.flow, packet.seq_flags, now);
                self.after_ack(host, packet.flow, finished);
            }
            return;
        }
        debug_assert_eq!(flow.dst, host);
        if packet.frame == self.trim_frame {
            self.nack(host, in_port, packet);
            return;
        }
        let bit = flow.delivered_base + packet.seq() as usize;
        let (word, mask) = (&mut self.delivered[bit / 64], 1u64 << (bit % 64));
        let mut received = false;
        let new = *word & mask == 0;
        if new {
            *word |= mask;
            flow.received += 1;
            received = flow.received == flow.packets;
            if flow.received == 1 {
                if let Some(credits) = self.credits.as_deref_mut() {
                    if credits.first_frame(host, packet.flow) {
                        // Its pull pacer starts now.
                        self.queue.push(now, host | PULL_BIT, true);
                    }
                }
            }
            if packet.copy() == 0 {
                self.reordering.record(&mut flow.order, packet.seq());
            }
            self.counts.data_delivered += 1;
            self.delivered_wire_bytes +=
                u64::from(packet.frame) + u64::from(self.config.link.gap_bytes);
        } else {
            self.counts.duplicate_data += 1;
        }
        let src = flow.src;
        let window = &mut self.deliveries[host as usize];
        window.0 = window.0.min(now);
        window.1 = now;
        if let Some(coalesce) = self.coalesce.as_deref_mut() {
            let urgent = Urgent {
                marked: packet.ecn(),
                duplicate: !new,
                edge: new && (flow.received == 1 || received),
                requested: packet.seq_flags & AR_FLAG != 0,
            };
            if !coalesce.on_data(packet.flow, packet.seq_flags, urgent) {
                return;
            }
        }
        // An ACK never carries the request flag: on an ACK that bit is the NACK's.
        let ack = self.ack_for(host, src, packet, (packet.seq_flags & !AR_FLAG) | ACK_FLAG);
        self.send_ack(host, in_port, ack);
        if received {
            self.flow_received(packet.flow);
        }
    }

    /// The ACK (or NACK) with `seq_flags` that `host` sends back to `src` for `packet`.
    #[inline]
    fn ack_for(&mut self, host: u32, src: u32, packet: Packet, seq_flags: u32) -> Packet {
        let flow = &mut self.flows[packet.flow as usize];
        let n = flow.drb_ack;
        flow.drb_ack = n.wrapping_add(1);
        let via = if self.scheme == Scheme::Drb {
            self.drb_waypoint(host, src, n)
        } else {
            NO_VIA
        };
        Packet {
            flow: packet.flow,
            seq_flags,
            frame: self.ack_frame,
            entropy: packet.entropy,
            via,
        }
    }

    /// Trimming: `host` received the header of a DATA frame a switch trimmed, and answers it
    /// with a NACK at once (not coalesced, nothing delivered): the copy it names, its CE mark.
    #[cold]
    #[inline(never)]
    fn nack(&mut self, host: u32, in_port: u16, packet: Packet) {
        self.counts.nacks += 1;
        let src = self.flows[packet.flow as usize].src;
        let seq_flags = (packet.seq_flags & !AR_FLAG) | ACK_FLAG | NACK_FLAG;
        let nack = self.ack_for(host, src, packet, seq_flags);
        self.send_ack(host, in_port, nack);
    }

    /// Receiver credits: `host`'s pull pacer fires. It sends a PULL to the next flow that
    /// needs credit and fires again a data frame time later, or stops when no flow needs any.
    #[cold]
    #[inline(never)]
    pub(super) fn pull(&mut self, host: u32) {
        use ofan_transport::CongestionControl as _;
        let mut credits = self.credits.take().expect("receiver credits");
        let cc = self
            .cc
            .as_deref()
            .expect("receiver credits run beside a CCA");
        // As htsim's pull target: the new data the sender has left, at most its window and a
        // frame, shared among the flows its NIC serves.
        let target = |flow: u32| {
            let state = &self.flows[flow as usize];
            let backlog = state.packets - state.next_seq;
            (backlog > 0).then(|| {
                let window = cc.flows[flow as usize].window() / cc.mss + 1;
                let active = self.hosts[state.src as usize].active.len().max(1) as u64;
                (u64::from(backlog).min(window) / active).max(1) as i64
            })
        };
        let pulled = credits.next_pull(host, self.now, target);
        let pacing = credits.pacing(host);
        self.credits = Some(credits);
        if pacing {
            let next = self.now + self.ser_data;
            self.push(next, host | PULL_BIT, true);
        }
        let Some(flow) = pulled else {
            return;
        };
        let src = self.flows[flow as usize].src;
        let entropy = self.hosts[host as usize].rng.next_u64() as u16;
        let template = Packet {
            flow,
            entropy,
            ..Packet::default()
        };
        let pull = self.ack_for(host, src, template, ACK_FLAG | NACK_FLAG | PULL_SEQ);
        self.send_ack(host, 0, pull);
    }

    /// Receiver credits: a PULL for `flow` reached its sender `host`, which may send again if
    /// it waited for credit.
    #[cold]
    #[inline(never)]
    fn pulled(&mut self, host: u32, flow: u32, now: u64) {
        self.credits
            .as_deref_mut()
            .expect("receiver credits")
            .grant(flow);
        self.after_ack_cc(host, flow, false, now);
    }

    /// Trimming: the sender `host` hears that a copy of `packet`'s frame was trimmed. The
    /// packet is lost at once ([`SelectiveRepeat::on_nack`]; a NACK of an older copy, or of a
    /// packet ACKed meanwhile, is ignored); its congestion control takes it as a loss (NSCC: the
    /// window shrinks by the packet, and quick adaptation, as htsim's NSCC does on a NACK); the
    /// host sends it again as ACKs let it: through its pacer, or its timer when it has no new
    /// data left.
    #[cold]
    #[inline(never)]
    fn nacked(&mut self, host: u32, packet: Packet, now: u64) {
        use ofan_transport::CongestionControl as _;
        let local = self.flows[packet.flow as usize].local;
        let state = &mut self.hosts[host as usize];
        if !state
            .recovery
            .on_nack(local, packet.seq(), packet.copy(), now)
        {
            return;
        }
        if let Some(cc) = self.cc.as_deref_mut() {
            cc.flows[packet.flow as usize].on_loss(now, cc.mss);
            self.after_ack_cc(host, packet.flow, false, now);
        } else {
            self.after_ack(host, packet.flow, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use ofan_topology::{Topology, TopologyKind};

    use super::super::build::{choose_failures, host_weighted_matrix};
    use super::super::Sim;
    use crate::config::{FlowSpec, ModelConfig, Workload};

    /// A host whose data frame leaves later than it was due (it waited for its NIC, a trigger,
    /// a window or a timer) is next due a gap after that frame left, when its NIC is free
    /// again — not a gap after the old due time, which left the pacer behind its NIC for good
    /// and the ACKs the host held waiting until it had sent all its data.
    #[test]
    fn a_late_departure_is_followed_by_a_full_gap() {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 4 };
        let flow = |src, dst| FlowSpec {
            src,
            dst,
            bytes: 1 << 20,
        };
        config.workload = Workload::Matrix {
            flows: vec![flow(0, 1), flow(1, 0)],
        };
        let topology = Topology::new(config.topology).expect("topology");
        let Workload::Matrix { flows: specs } = &config.workload else {
            unreachable!()
        };
        let matrix = host_weighted_matrix(&topology, specs);
        let (failures, _) = choose_failures(&topology, &config, &matrix).expect("no failures");
        let mut sim = Sim::new(&topology, &config, &failures, specs, 1.0).expect("builds");
        sim.start();
        let nic = sim.nodes[0].port_base as usize;
        for late in [1, 5, 100] {
            // The pacer was due `late` frame times ago; the NIC has been idle since.
            let due = sim.hosts[0].due;
            sim.now = due + late * sim.ser_data;
            sim.wake(0);
            let free = sim.ports[nic].free_at;
            assert_eq!(free, sim.now + sim.ser_data, "the frame left at once");
            assert_eq!(
                sim.hosts[0].due, free,
                "{late} frame times late: next due when the NIC is free"
            );
        }
    }
}
