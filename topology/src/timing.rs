//! Link timing and the collective-completion-time (CCT) lower bound.
//!
//! Time is integer picoseconds everywhere.
//!
//! # The lower bound — one definition for the model and the lab
//!
//! [`Topology::collective_lower_bound_ps`] bounds from below the CCT of a set of flows (source
//! host, destination host, bytes): the time from t = 0, the first DATA frame sent anywhere, to
//! the last ACK received. It is a bound *for a system*, a [`BoundSystem`] that says what differs
//! between the systems it is applied to:
//!
//! * **send rate** ρ ([`SendRate`]): hosts pace their DATA at ρ × the line rate R, so a host's
//!   next DATA frame leaves no sooner than the paced time of the one before (the model's pacer,
//!   the lab agent's; both only ever add to that gap, for ACK airtime or lateness);
//! * **forwarding** ([`Forwarding`]): what crossing a link costs a frame.
//!   [`Forwarding::StoreAndForward`] (the model): a frame is received whole before it is
//!   forwarded, so each link costs its serialization plus the propagation delay.
//!   [`Forwarding::AtSlotStart`] (the lab): a switch's shaper releases a frame at the *start* of
//!   its slot and the veth delivers it at once; the port is then busy for the frame's time, but
//!   the frame itself is not delayed, so a link costs the propagation delay only (0 on a veth).
//!
//! Notation, with payload `P`, header `H`, inter-frame gap `G`, ACK `A` and propagation `D`
//! ([`LinkParams`]): a flow φ of `m` bytes is `n = ⌈m / P⌉` DATA frames of `F = P + H + G` wire
//! bytes, except the last, `L_φ = ℓ + H + G` with `ℓ = m − (n−1)·P`; an ACK is `A + G`;
//! `h(φ)` is the number of links on a shortest path between its hosts (2, 4 or 6).
//!
//! * `S(b)`: serialization of `b` wire bytes at R, rounded up to a picosecond
//!   ([`LinkParams::serialization_ps`]) — as both systems' links round (the model's ports to the
//!   picosecond, the lab's shapers to the nanosecond);
//! * `Q(b)`: the time of `b` wire bytes at ρ·R, rounded **down** to a picosecond (ρ in
//!   millionths, [`SendRate::paced_floor_ps`]) — the model rounds its paced gaps up and the lab
//!   agent to the nearest picosecond, so rounding down keeps every `Q` at or below both;
//! * `c(b)`: the cost of one link to a frame of `b` bytes: `S(b) + D` store-and-forward, `D` at
//!   slot start; `own(b)`: `S(b)` store-and-forward, `0` at slot start.
//!
//! What both systems obey, and all the bound uses: nothing is sent before t = 0; a host sends
//! each flow's frames in sequence order (so the last frame it sends is the last frame of one of
//! its flows); a receiver ACKs a DATA frame when it arrives; an output port sends one frame at a
//! time, not before it arrived, and is then busy for `S(b)` (the lab's shaper, with or without
//! catch-up, schedules frame i + 1 no sooner than `S` after frame i's scheduled slot).
//!
//! The bound is the largest of two terms over every host `x`:
//!
//! 1. **Sender side.** `x` sends the DATA frames `X` of its flows `Φ_x`. The one it sends last
//!    is `L_φ` of some φ ∈ `Φ_x`; every other frame of `X` left before it, each followed by at
//!    least its paced time, so `L_φ` leaves at `≥ Σ_X Q − Q(L_φ)`; it then crosses `h(φ)`
//!    links, and so does its ACK:
//!    `T_send(x) = min over φ ∈ Φ_x of [Σ_{f ∈ X} Q(f) − Q(L_φ) + h(φ)·(c(L_φ) + c(A + G))]`.
//! 2. **Receiver side.** The link into `x` runs at line rate R (not ρ) and carries the frames
//!    `Y`: the DATA of every flow into `x` and the ACKs of every flow out of `x`. It sends them
//!    one at a time from t ≥ 0, so the last, `f`, starts at `≥ Σ_Y S − S(f)`; it reaches `x`
//!    `own(f) + D` later; if `f` is DATA of flow ψ, its ACK must still cross `h(ψ)` links:
//!    `T_recv(x) = min over f ∈ Y of [Σ_{g ∈ Y} S(g) − S(f) + own(f) + D + tail(f)]`, with
//!    `tail(f) = h(ψ)·c(A + G)` for DATA of ψ and `0` for an ACK.
//!
//! **Several planes.** A host of a multi-plane fabric has P ports, one per plane; the model
//! paces its DATA at P × ρ·R over them (ρ is per port). Both terms then divide the host's
//! sums by P: the sender's last frame leaves at `≥ (Σ_X Q − Q(L_φ)) / P`; on the receiver's
//! side the P links into `x` carry `Y` in parallel, so the frame that finishes last finishes
//! at `≥ Σ_Y S / P`, and reaches `x` `own(f) − S(f) + D` after that:
//! `T_recv(x) = min over f ∈ Y of [Σ_Y S / P − S(f) + own(f) + D + tail(f)]` (the one-plane
//! term for P = 1, whatever the policy that spreads frames over the planes). The dependency
//! chain term ([`Topology::chain_lower_bound_ps`]) likewise lets a flow's frames leave at
//! P × the paced rate.
//!
//! Flows of no bytes or from a host to itself are ignored. For one flow at ρ = 1,
//! store-and-forward, `T_send` is the bound of the paper's appendix A:
//! `(n−1)·S(F) + h·(S(L) + D) + h·(S(A + G) + D)`; a model run of one flow meets it (within the
//! time a short last frame waits behind the full one before it). At slot start with `D = 0`,
//! hops cost nothing and the bound is the paced sending of the slowest host or the line-rate
//! delivery of the busiest receiver, whichever is longer.
//!
//! Worked numbers.
//!
//! * The model at the paper's parameters ([`LinkParams::paper`]: 800 Gb/s, 0.5 µs, 4096 B
//!   payload, 62 B header, 64 B ACK, 20 B gap), one 1 MiB flow between pods (`h = 6`): `n =
//!   256` frames of 4 178 wire bytes, `S(F) = 33 424 bit / 800 Gb/s = 41 780 ps`, `S(ACK) = 672
//!   bit / 800 Gb/s = 840 ps`. At ρ = 1: `T = 255·41 780 + 6·(41 780 + 500 000) + 6·(840 +
//!   500 000) = 10 653 900 + 3 250 680 + 3 005 040 = 16 909 620 ps ≈ 16.91 µs`. At ρ = 0.8,
//!   `Q(F) = 52 225 ps` and `T = 255·52 225 + 3 250 680 + 3 005 040 = 19 573 095 ps`.
//! * The lab at 1 Mbit/s (veth frames: `P = 1 454`, `H = 60`, `A = 60`, `G = 20`, `D = 0`), a
//!   64 KiB permutation: `n = 46`, 45 frames of 1 534 B (`S = 12.272 ms`), the last of 186 B
//!   (1.488 ms), ACKs of 80 B (0.64 ms). Sender side at ρ = 1: `45·12.272 ms = 552.24 ms`.
//!   Receiver side: 46 DATA frames and 46 ACKs, `552.24 + 1.488 + 29.44 = 583.168 ms`, less
//!   the full frame that may come last: `570.896 ms` — the bound at ρ = 1. At ρ = 0.5 the
//!   sender side, `45·24.544 ms = 1 104.48 ms`, is the bound.

use serde::{Deserialize, Serialize};

use crate::model::NodeId;
use crate::topology::Topology;

/// Physical parameters of every link, and the framing of packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkParams {
    /// Line rate, bits per second.
    pub rate_bps: u64,
    /// One-way propagation delay of a link, picoseconds.
    pub propagation_ps: u64,
    /// Payload bytes of a full data packet.
    pub payload_bytes: u32,
    /// Header bytes of a data packet.
    pub header_bytes: u32,
    /// Bytes of an ACK frame.
    pub ack_bytes: u32,
    /// Bytes on the wire between frames (inter-frame gap, preamble, start delimiter).
    pub gap_bytes: u32,
}

impl LinkParams {
    /// The paper's simulation parameters (§6): 800 Gb/s links, 0.5 µs propagation, 4 096 B
    /// payloads with 62 B headers, 64 B ACKs and 20 B gaps (12 B inter-frame gap, 8 B preamble
    /// and start-of-frame delimiter).
    #[must_use]
    pub const fn paper() -> Self {
        Self {
            rate_bps: 800_000_000_000,
            propagation_ps: 500_000,
            payload_bytes: 4096,
            header_bytes: 62,
            ack_bytes: 64,
            gap_bytes: 20,
        }
    }

    /// Time to put `frame_bytes` bytes on the wire, in picoseconds, rounded up (saturating at
    /// `u64::MAX`).
    ///
    /// # Panics
    ///
    /// If `rate_bps` is 0.
    #[must_use]
    pub fn serialization_ps(&self, frame_bytes: u64) -> u64 {
        assert!(self.rate_bps > 0, "a link needs a non-zero rate");
        let bit_ps = u128::from(frame_bytes) * 8 * 1_000_000_000_000;
        let ps = bit_ps.div_ceil(u128::from(self.rate_bps));
        u64::try_from(ps).unwrap_or(u64::MAX)
    }
}

/// The rate at which hosts pace their DATA: a fraction ρ of line rate, held in millionths
/// (1 ..= 1 000 000), so that the bound and a system that paces at it round alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SendRate(u32);

impl SendRate {
    /// Millionths in one line rate.
    pub const SCALE: u32 = 1_000_000;
    /// Line rate: ρ = 1.
    pub const LINE: Self = Self(Self::SCALE);

    /// ρ to the nearest millionth, clamped to `[10⁻⁶, 1]` (NaN counts as 0): the rate at
    /// which the model paces for a `send_rate` of ρ.
    #[must_use]
    pub fn nearest(rho: f64) -> Self {
        Self::clamped((rho * f64::from(Self::SCALE)).round())
    }

    /// ρ rounded up to the next millionth, clamped to `[10⁻⁶, 1]` (NaN counts as 0): for a
    /// system that paces at exactly ρ (the lab's agents), so that the bound never assumes
    /// slower sending than the real one.
    #[must_use]
    pub fn at_least(rho: f64) -> Self {
        Self::clamped((rho * f64::from(Self::SCALE)).ceil())
    }

    fn clamped(ppm: f64) -> Self {
        // `as` saturates and maps NaN to 0.
        Self((ppm as u32).clamp(1, Self::SCALE))
    }

    /// ρ in millionths of line rate.
    #[must_use]
    pub const fn ppm(self) -> u32 {
        self.0
    }

    /// The time `wire_bytes` take at ρ × `params.rate_bps`, picoseconds, rounded down
    /// (`Q` of the [module documentation](crate::timing)); saturates at `u64::MAX`.
    ///
    /// # Panics
    ///
    /// If `params.rate_bps` is 0.
    #[must_use]
    pub fn paced_floor_ps(self, params: &LinkParams, wire_bytes: u64) -> u64 {
        assert!(params.rate_bps > 0, "a link needs a non-zero rate");
        let numerator = u128::from(wire_bytes) * 8 * 1_000_000_000_000 * u128::from(Self::SCALE);
        let denominator = u128::from(params.rate_bps) * u128::from(self.0);
        u64::try_from(numerator / denominator).unwrap_or(u64::MAX)
    }
}

/// What crossing a link costs a frame, besides the propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forwarding {
    /// A frame is received whole before it is forwarded: each link costs its serialization
    /// (the model's switches and host NICs).
    StoreAndForward,
    /// A frame leaves at the start of its slot and arrives at once; the port stays busy for the
    /// frame's time, the frame is not delayed (the lab: shaped egress queues on veths).
    AtSlotStart,
}

/// The system a lower bound is for: what the model and the lab differ in (see the
/// [module documentation](crate::timing)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BoundSystem {
    /// ρ: the fraction of line rate at which hosts pace their DATA.
    pub send_rate: SendRate,
    /// What a hop costs a frame.
    pub forwarding: Forwarding,
}

impl BoundSystem {
    /// The paper's appendix A setting: store-and-forward, hosts at line rate.
    pub const STORE_AND_FORWARD_AT_LINE_RATE: Self = Self {
        send_rate: SendRate::LINE,
        forwarding: Forwarding::StoreAndForward,
    };
}

impl Topology {
    /// A lower bound on the completion time of `flows`, each sending `message_bytes`, in
    /// picoseconds: [`Self::collective_lower_bound_ps`] with every flow carrying the same
    /// message.
    ///
    /// # Panics
    ///
    /// If a flow endpoint is not a host, or `params` has a zero rate or payload.
    #[must_use]
    pub fn cct_lower_bound_ps(
        &self,
        params: &LinkParams,
        system: &BoundSystem,
        flows: &[(NodeId, NodeId)],
        message_bytes: u64,
    ) -> u64 {
        let flows: Vec<_> = flows
            .iter()
            .map(|&(src, dst)| (src, dst, message_bytes))
            .collect();
        self.collective_lower_bound_ps(params, system, &flows)
    }

    /// A lower bound on the completion time of `flows` in `system`, in picoseconds: the
    /// largest sender-side and receiver-side term over all hosts, as defined in the
    /// [module documentation](crate::timing). `flows` are `(source host, destination host,
    /// bytes)`; empty flows and self-flows are ignored. Saturates at `u64::MAX`.
    ///
    /// # Panics
    ///
    /// If a flow endpoint is not a host, or `params` has a zero rate or payload.
    #[must_use]
    pub fn collective_lower_bound_ps(
        &self,
        params: &LinkParams,
        system: &BoundSystem,
        flows: &[(NodeId, NodeId, u64)],
    ) -> u64 {
        assert!(params.payload_bytes > 0, "packets need a payload");
        let payload = u64::from(params.payload_bytes);
        let overhead = u64::from(params.header_bytes) + u64::from(params.gap_bytes);
        let ack_wire = u64::from(params.ack_bytes) + u64::from(params.gap_bytes);
        let line = |wire: u64| u128::from(params.serialization_ps(wire));
        let paced = |wire: u64| u128::from(system.send_rate.paced_floor_ps(params, wire));
        let propagation = u128::from(params.propagation_ps);
        // A host's ports (its planes): it sends and receives over all of them at once.
        let nics = u128::from(self.planes());
        // c(b) and own(b) of the module documentation.
        let link = |wire: u64| match system.forwarding {
            Forwarding::StoreAndForward => line(wire) + propagation,
            Forwarding::AtSlotStart => propagation,
        };
        let own = |wire: u64| match system.forwarding {
            Forwarding::StoreAndForward => line(wire),
            Forwarding::AtSlotStart => 0,
        };
        let full = payload + overhead;
        let ack_link = link(ack_wire);

        struct Flow {
            src: usize,
            dst: usize,
            hops: u128,
            packets: u64,
            last: u64,
        }
        let flows: Vec<Flow> = flows
            .iter()
            .filter(|&&(src, dst, bytes)| bytes > 0 && src != dst)
            .map(|&(src, dst, bytes)| {
                let packets = bytes.div_ceil(payload);
                Flow {
                    src: src.index(),
                    dst: dst.index(),
                    hops: u128::from(self.hop_count(src, dst)),
                    packets,
                    last: bytes - (packets - 1) * payload + overhead,
                }
            })
            .collect();

        // Per host: paced time of the DATA it sends, line time of the frames it receives.
        let hosts = self.nodes().len();
        let mut sent = vec![0u128; hosts];
        let mut received = vec![0u128; hosts];
        for flow in &flows {
            let packets = u128::from(flow.packets);
            sent[flow.src] += (packets - 1) * paced(full) + paced(flow.last);
            received[flow.dst] += (packets - 1) * line(full) + line(flow.last);
            received[flow.src] += packets * line(ack_wire);
        }

        // Each host's terms: the least over the frames it may send, or receive, last.
        let mut send_term = vec![u128::MAX; hosts];
        let mut receive_term = vec![u128::MAX; hosts];
        for flow in &flows {
            let last_sent = (sent[flow.src] - paced(flow.last)) / nics
                + flow.hops * (link(flow.last) + ack_link);
            send_term[flow.src] = send_term[flow.src].min(last_sent);
            let data_tail = propagation + flow.hops * ack_link;
            // Its last frame, or a full one if it has more than one.
            let data_frames = [Some(flow.last), (flow.packets > 1).then_some(full)];
            for wire in data_frames.into_iter().flatten() {
                let last_received =
                    (received[flow.dst] / nics).saturating_sub(line(wire)) + own(wire) + data_tail;
                receive_term[flow.dst] = receive_term[flow.dst].min(last_received);
            }
            let ack_last = (received[flow.src] / nics).saturating_sub(line(ack_wire))
                + own(ack_wire)
                + propagation;
            receive_term[flow.src] = receive_term[flow.src].min(ack_last);
        }
        let bound = send_term
            .into_iter()
            .chain(receive_term)
            .filter(|&term| term != u128::MAX)
            .max()
            .unwrap_or(0);
        u64::try_from(bound).unwrap_or(u64::MAX)
    }

    /// A lower bound on the completion time of `flows` in `system`, ps, when flow `i` may
    /// start only once flow `after[i]` has arrived in full at its destination (a ring step
    /// after the previous step's chunk; `None`: at t = 0) — the **dependency chain** term.
    ///
    /// A flow φ that may start at `t_φ` sends its last frame `L_φ` after its `n − 1` others,
    /// each followed by at least its paced time, and that frame crosses `h(φ)` links; so does
    /// the full frame before it, sent `Q(F)` earlier (it may be the one that arrives last, a
    /// short `L_φ` crossing a store-and-forward hop faster). Every frame of φ has arrived no
    /// sooner than `a_φ = t_φ + max[(n − 1)·Q(F) + h(φ)·c(L_φ), (n − 2)·Q(F) + h(φ)·c(F)]`
    /// (the second term for `n` ≥ 2 only), and `t_φ = a_ψ` for the flow ψ it waits for. The run ends no sooner than the last ACK of
    /// any flow: `max over φ of [a_φ + h(φ)·c(A + G)]`. Each flow counts alone on its hosts'
    /// links — what the flows of a host share is [`Self::collective_lower_bound_ps`]'s term —
    /// so the bound of a workload with dependencies is the larger of the two. Saturates at
    /// `u64::MAX`.
    ///
    /// # Panics
    /// If `after` is not as long as `flows`, names a missing flow or forms a cycle, or as
    /// [`Self::collective_lower_bound_ps`].
    #[must_use]
    pub fn chain_lower_bound_ps(
        &self,
        params: &LinkParams,
        system: &BoundSystem,
        flows: &[(NodeId, NodeId, u64)],
        after: &[Option<u32>],
    ) -> u64 {
        assert_eq!(flows.len(), after.len(), "one dependency slot per flow");
        assert!(params.payload_bytes > 0, "packets need a payload");
        let payload = u64::from(params.payload_bytes);
        let overhead = u64::from(params.header_bytes) + u64::from(params.gap_bytes);
        let ack_wire = u64::from(params.ack_bytes) + u64::from(params.gap_bytes);
        // A host of P planes sends a flow's frames over its P ports at once (module docs).
        let nics = u128::from(self.planes());
        let paced = |wire: u64| u128::from(system.send_rate.paced_floor_ps(params, wire)) / nics;
        let link = |wire: u64| {
            let propagation = u128::from(params.propagation_ps);
            match system.forwarding {
                Forwarding::StoreAndForward => {
                    u128::from(params.serialization_ps(wire)) + propagation
                }
                Forwarding::AtSlotStart => propagation,
            }
        };
        // From a flow's start to the arrival of its last frame, and on to its last ACK.
        let trip = |&(src, dst, bytes): &(NodeId, NodeId, u64)| -> (u128, u128) {
            if bytes == 0 || src == dst {
                return (0, 0);
            }
            let packets = bytes.div_ceil(payload);
            let last = bytes - (packets - 1) * payload + overhead;
            let hops = u128::from(self.hop_count(src, dst));
            let full = payload + overhead;
            // The last frame, sent after the others; and the full frame before it, which a
            // short last frame does not wait for at a store-and-forward hop but which must
            // arrive too.
            let last_frame = u128::from(packets - 1) * paced(full) + hops * link(last);
            let full_frame = if packets > 1 {
                u128::from(packets - 2) * paced(full) + hops * link(full)
            } else {
                0
            };
            (last_frame.max(full_frame), hops * link(ack_wire))
        };
        // Arrivals along each chain, each flow once: walk up to a flow already known (or a
        // chain's first flow), then down again.
        let mut arrival: Vec<Option<u128>> = vec![None; flows.len()];
        let mut chain = Vec::new();
        let mut bound = 0u128;
        for first in 0..flows.len() {
            let mut at = first;
            while arrival[at].is_none() {
                assert!(chain.len() <= flows.len(), "the dependencies form a cycle");
                chain.push(at);
                match after[at] {
                    Some(before) => at = before as usize,
                    None => break,
                }
            }
            while let Some(flow) = chain.pop() {
                let start = after[flow].and_then(|before| arrival[before as usize]);
                let (to_last_frame, ack) = trip(&flows[flow]);
                let arrived = start.unwrap_or(0) + to_last_frame;
                arrival[flow] = Some(arrived);
                bound = bound.max(arrived + ack);
            }
        }
        u64::try_from(bound).unwrap_or(u64::MAX)
    }

    /// [`Self::collective_lower_bound_ps`] for a fabric whose links between switches may run
    /// at other rates than `params.rate_bps` (a degraded link, `ofan-lab link A B rate R`):
    /// `rate_bps(link)` is each link's rate. The larger of the host terms, which no switch link's
    /// rate changes, and the **pod boundary** term below.
    ///
    /// **Pod boundary.** The links with exactly one end in pod P (to the cores in a Clos; a
    /// dragonfly group's global links, its groups being the pods) carry into P every DATA frame of the flows entering P from outside and
    /// every ACK of the flows leaving it: `W` wire bits over `n` links of rates `r_i`. Link i
    /// sends its share `W_i` one frame at a time from t ≥ 0, so its last frame starts no sooner
    /// than `(W_i − b)/r_i`, with `b` the largest frame; the latest of the `n` is at least their
    /// rate-weighted mean, so `T ≥ (W − n·b) / Σ r_i`, whatever the split. The same holds out of
    /// P. With every link at the same rate this term never exceeds the receiving hosts' (a fat
    /// tree is non-blocking), so it only ever tightens the bound of a degraded fabric; the hops
    /// and ACK after the last frame are left out (they only add).
    ///
    /// # Panics
    /// As [`Self::collective_lower_bound_ps`].
    #[must_use]
    pub fn collective_lower_bound_at_rates_ps(
        &self,
        params: &LinkParams,
        system: &BoundSystem,
        flows: &[(NodeId, NodeId, u64)],
        rate_bps: &dyn Fn(crate::LinkId) -> u64,
    ) -> u64 {
        let hosts = self.collective_lower_bound_ps(params, system, flows);
        hosts.max(self.pod_boundary_bound_ps(params, flows, rate_bps))
    }

    /// The pod boundary term of [`Self::collective_lower_bound_at_rates_ps`], ps.
    fn pod_boundary_bound_ps(
        &self,
        params: &LinkParams,
        flows: &[(NodeId, NodeId, u64)],
        rate_bps: &dyn Fn(crate::LinkId) -> u64,
    ) -> u64 {
        let payload = u64::from(params.payload_bytes);
        let overhead = u64::from(params.header_bytes) + u64::from(params.gap_bytes);
        let ack_wire = u64::from(params.ack_bytes) + u64::from(params.gap_bytes);
        let largest = (payload + overhead).max(ack_wire);
        // Per pod: wire bytes in and out.
        let mut inbound: std::collections::BTreeMap<u16, u128> = std::collections::BTreeMap::new();
        let mut outbound: std::collections::BTreeMap<u16, u128> = std::collections::BTreeMap::new();
        for &(src, dst, bytes) in flows {
            let (Some(from), Some(to)) = (self.node(src).pod, self.node(dst).pod) else {
                continue;
            };
            if bytes == 0 || from == to {
                continue;
            }
            let packets = bytes.div_ceil(payload);
            let data = u128::from(bytes + packets * overhead);
            let acks = u128::from(packets * ack_wire);
            *inbound.entry(to).or_default() += data;
            *outbound.entry(from).or_default() += data;
            *inbound.entry(from).or_default() += acks;
            *outbound.entry(to).or_default() += acks;
        }
        let mut bound = 0u128;
        for (pod, bytes_in) in &inbound {
            let bytes_out = outbound.get(pod).copied().unwrap_or(0);
            // The boundary links of the pod and their total rate (the same both ways).
            let (count, total_bps) = self
                .links()
                .iter()
                .filter(|link| {
                    let (a, b) = (self.node(link.a.0).pod, self.node(link.b.0).pod);
                    (a == Some(*pod)) != (b == Some(*pod))
                })
                .fold((0u128, 0u128), |(n, total), link| {
                    (n + 1, total + u128::from(rate_bps(link.id)))
                });
            if count == 0 || total_bps == 0 {
                continue;
            }
            for bytes in [*bytes_in, bytes_out] {
                let bits = bytes.saturating_sub(count * u128::from(largest)) * 8;
                bound = bound.max(bits * 1_000_000_000_000 / total_bps);
            }
        }
        u64::try_from(bound).unwrap_or(u64::MAX)
    }
}

/// Link parameters that are easy to follow by hand, for tests: 8 Gb/s, so one byte takes
/// exactly 1 000 ps at line rate. Full frames 100 + 10 + 5 = 115 B (115 000 ps), ACKs 20 + 5 =
/// 25 B (25 000 ps), propagation 1 000 ps. 250 B is 3 frames: 115, 115 and 65 B.
#[cfg(test)]
pub(crate) const HAND_PARAMS: LinkParams = LinkParams {
    rate_bps: 8_000_000_000,
    propagation_ps: 1_000,
    payload_bytes: 100,
    header_bytes: 10,
    ack_bytes: 20,
    gap_bytes: 5,
};

#[cfg(test)]
mod bound_tests {
    use super::*;

    fn params() -> LinkParams {
        HAND_PARAMS
    }

    fn system(forwarding: Forwarding, rho: f64) -> BoundSystem {
        BoundSystem {
            send_rate: SendRate::at_least(rho),
            forwarding,
        }
    }

    fn host(topology: &Topology, name: &str) -> NodeId {
        topology
            .nodes()
            .iter()
            .find(|node| node.name == name)
            .unwrap()
            .id
    }

    /// Hosts of one k = 4 fat tree: `a` and `a2` share an edge (2 hops), `b` is in `a`'s pod
    /// under another edge (4 hops).
    struct Hosts {
        topology: Topology,
        a: NodeId,
        a2: NodeId,
        b: NodeId,
    }

    fn hosts() -> Hosts {
        let topology = Topology::fat_tree(4).unwrap();
        Hosts {
            a: host(&topology, "h-p0-e0-h0"),
            a2: host(&topology, "h-p0-e0-h1"),
            b: host(&topology, "h-p0-e1-h0"),
            topology,
        }
    }

    #[test]
    fn a_flow_that_waits_starts_when_the_flow_before_it_has_arrived() {
        let Hosts {
            topology, a, a2, ..
        } = hosts();
        // 250 B: frames of 115, 115 and 65 B; a and a2 are 2 links apart.
        let flows = [(a, a2, 250), (a2, a, 250)];
        let store = system(Forwarding::StoreAndForward, 1.0);
        let chain = |after: &[Option<u32>], system: &BoundSystem| {
            topology.chain_lower_bound_ps(&params(), system, &flows, after)
        };
        // Two full frames paced, the last (65 B) across 2 links: 230 000 + 2·66 000; its
        // ACK (25 B) back across 2 links: 2·26 000.
        assert_eq!(chain(&[None, None], &store), 362_000 + 52_000);
        // The second starts when the first has arrived.
        assert_eq!(chain(&[None, Some(0)], &store), 2 * 362_000 + 52_000);
        // At slot start a link costs its propagation only.
        let slot = system(Forwarding::AtSlotStart, 1.0);
        assert_eq!(chain(&[None, Some(0)], &slot), 2 * 232_000 + 2_000);
        // 240 B: frames of 115, 115 and 55 B: the second full frame, sent 115 000 ps after
        // the first, arrives 2·116 000 later — after the short last one (230 000 + 2·56 000).
        let short = [(a, a2, 240)];
        assert_eq!(
            topology.chain_lower_bound_ps(&params(), &store, &short, &[None]),
            115_000 + 2 * 116_000 + 52_000
        );
        // Never below what the flows alone need, dependencies or not.
        assert!(
            chain(&[None, Some(0)], &store)
                > topology.collective_lower_bound_ps(&params(), &store, &flows)
        );
    }

    #[test]
    #[should_panic(expected = "cycle")]
    fn a_cycle_of_dependencies_has_no_bound() {
        let Hosts {
            topology, a, a2, ..
        } = hosts();
        let system = system(Forwarding::StoreAndForward, 1.0);
        let flows = [(a, a2, 250), (a2, a, 250)];
        let _ = topology.chain_lower_bound_ps(&params(), &system, &flows, &[Some(1), Some(0)]);
    }

    #[test]
    fn store_and_forward_one_flow_at_line_rate_and_below() {
        let Hosts { topology, a, b, .. } = hosts();
        let bound = |rho| {
            let system = system(Forwarding::StoreAndForward, rho);
            topology.collective_lower_bound_ps(&params(), &system, &[(a, b, 250)])
        };
        // ρ = 1, 4 hops: 2·115 000 (the full frames leave first) + 4·(65 000 + 1 000) (the
        // last frame, stored and forwarded) + 4·(25 000 + 1 000) (its ACK) = 598 000. The
        // receiver's side, 295 000 + 1 000 + 4·26 000 = 400 000, is shorter.
        assert_eq!(bound(1.0), 598_000);
        // ρ = 0.5: the full frames are paced 230 000 ps apart; the hops still run at line rate:
        // 2·230 000 + 368 000.
        assert_eq!(bound(0.5), 828_000);
        // ρ = 0.3: 115 000 / 0.3 = 383 333.3 ps per full frame, rounded down.
        assert_eq!(bound(0.3), 2 * 383_333 + 368_000);
    }

    #[test]
    fn at_slot_start_a_hop_costs_only_its_propagation() {
        let Hosts { topology, a, b, .. } = hosts();
        let system = system(Forwarding::AtSlotStart, 1.0);
        // Sender: 2·115 000 + 4·1 000 (the last frame) + 4·1 000 (its ACK) = 238 000.
        // Receiver: 295 000 on its link, less a full frame that may arrive last, + 1 000 + the
        // ACK's 4·1 000: 185 000.
        assert_eq!(
            topology.collective_lower_bound_ps(&params(), &system, &[(a, b, 250)]),
            238_000
        );
    }

    #[test]
    fn the_receivers_link_carries_data_and_acks_at_line_rate() {
        let Hosts { topology, a, b, .. } = hosts();
        let params = LinkParams {
            propagation_ps: 0,
            ..params()
        };
        let swap = [(a, b, 250), (b, a, 250)];
        let bound = |rho| {
            let system = system(Forwarding::AtSlotStart, rho);
            topology.collective_lower_bound_ps(&params, &system, &swap)
        };
        // Each host receives 3 DATA frames and 3 ACKs: 295 000 + 75 000 on its link, less a
        // full frame that may come last: 255 000, above the sender's 230 000.
        assert_eq!(bound(1.0), 255_000);
        // At ρ = 0.5 the sending takes longer: 2·230 000. The link into the receiver still
        // runs at line rate, so its term stays 255 000.
        assert_eq!(bound(0.5), 460_000);
    }

    #[test]
    fn a_host_sends_its_flows_in_any_order_and_each_in_sequence() {
        let Hosts {
            topology, a, a2, b, ..
        } = hosts();
        let system = system(Forwarding::StoreAndForward, 1.0);
        // `a` sends 250 B to `a2` (2 hops) and to `b` (4 hops): 6 frames, 590 000 ps of them.
        // Sending b's frames first and a2's last is best: a2's last frame leaves at
        // 590 000 − 65 000 and crosses 2 links, its ACK 2: 525 000 + 2·66 000 + 2·26 000.
        // (A bound that assumed the longer flow's last frame leaves last, 5·115 000 +
        // 4·66 000 + 4·26 000 = 943 000, is above this schedule.)
        let flows = [(a, a2, 250), (a, b, 250)];
        assert_eq!(
            topology.collective_lower_bound_ps(&params(), &system, &flows),
            709_000
        );
        // Fan-in: `a2` and `b` send to `a`, whose link carries 590 000 ps; then the ACK of the
        // frame that came last, at best a2's (2 hops): 590 000 + 1 000 + 2·26 000.
        let fan_in = [(a2, a, 250), (b, a, 250)];
        assert_eq!(
            topology.collective_lower_bound_ps(&params(), &system, &fan_in),
            643_000
        );
    }

    #[test]
    fn empty_flows_self_flows_and_no_flows_take_no_time() {
        let Hosts { topology, a, b, .. } = hosts();
        for forwarding in [Forwarding::StoreAndForward, Forwarding::AtSlotStart] {
            let system = system(forwarding, 0.5);
            let bound = |flows: &[(NodeId, NodeId, u64)]| {
                topology.collective_lower_bound_ps(&params(), &system, flows)
            };
            assert_eq!(bound(&[(a, a, 5), (a, b, 0)]), 0);
            assert_eq!(bound(&[]), 0);
        }
    }

    #[test]
    fn a_permutation_bound_is_its_cct_bound() {
        let topology = Topology::fat_tree(4).unwrap();
        let hosts = topology.hosts();
        let pairs: Vec<_> = (0..hosts.len())
            .map(|i| (hosts[i].id, hosts[(i + 5) % hosts.len()].id))
            .collect();
        let flows: Vec<_> = pairs.iter().map(|&(s, d)| (s, d, 1 << 20)).collect();
        for forwarding in [Forwarding::StoreAndForward, Forwarding::AtSlotStart] {
            let system = system(forwarding, 0.7);
            assert_eq!(
                topology.collective_lower_bound_ps(&params(), &system, &flows),
                topology.cct_lower_bound_ps(&params(), &system, &pairs, 1 << 20)
            );
        }
    }

    #[test]
    fn send_rates_round_as_documented() {
        assert_eq!(SendRate::nearest(0.123_456_4).ppm(), 123_456);
        assert_eq!(SendRate::at_least(0.123_456_4).ppm(), 123_457);
        assert_eq!(SendRate::at_least(0.3).ppm(), 300_000);
        assert_eq!(SendRate::nearest(1.0), SendRate::LINE);
        assert_eq!(SendRate::at_least(2.0), SendRate::LINE);
        assert_eq!(SendRate::nearest(0.0).ppm(), 1);
        assert_eq!(SendRate::at_least(f64::NAN).ppm(), 1);
        // Q rounds down: 115 B at 0.3 × 8 Gb/s is 383 333.3 ps.
        assert_eq!(
            SendRate::at_least(0.3).paced_floor_ps(&params(), 115),
            383_333
        );
        assert_eq!(SendRate::LINE.paced_floor_ps(&params(), 115), 115_000);
    }

    #[test]
    fn a_degraded_core_link_raises_the_bound_through_the_pod_boundary() {
        // Pod 0's four hosts each send 1 000 B (10 frames, 1 150 wire bytes) to one of pod 1's.
        let topology = Topology::fat_tree(4).unwrap();
        let pod = |p: u16| -> Vec<NodeId> {
            topology
                .hosts()
                .iter()
                .filter(|h| h.pod == Some(p))
                .map(|h| h.id)
                .collect()
        };
        let flows: Vec<_> = pod(0)
            .into_iter()
            .zip(pod(1))
            .map(|(s, d)| (s, d, 1_000))
            .collect();
        let system = system(Forwarding::AtSlotStart, 1.0);
        let hosts_only = topology.collective_lower_bound_ps(&params(), &system, &flows);
        let uniform = |_| params().rate_bps;
        assert_eq!(
            topology.collective_lower_bound_at_rates_ps(&params(), &system, &flows, &uniform),
            hosts_only,
            "with every link at the same rate the boundary never binds"
        );
        let slow = topology
            .links()
            .iter()
            .find(|link| {
                topology.node(link.a.0).name == "a-p1-0" && topology.node(link.b.0).name == "c-0"
            })
            .unwrap()
            .id;
        let degraded = |link| {
            if link == slow {
                params().rate_bps / 4
            } else {
                params().rate_bps
            }
        };
        // Into pod 1: 4 × 1 150 B of DATA over 3.25 links' worth of rate, less one full frame
        // (115 B) per link: 4 140 B · 8 / 26 Gb/s = 1 273 846 ps.
        let bound =
            topology.collective_lower_bound_at_rates_ps(&params(), &system, &flows, &degraded);
        assert_eq!(bound, 1_273_846);
        assert!(bound > hosts_only, "{bound} ≤ {hosts_only}");
    }
}
