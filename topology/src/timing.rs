//! Link timing and the collective-completion-time (CCT) lower bound.
//!
//! Time is integer picoseconds everywhere.
//!
//! # The lower bound
//!
//! Take one flow of `m` bytes over a shortest path of `h` links, on an otherwise idle network
//! with no queueing. With payload `P`, header `H`, inter-frame gap `G` and ACK size `A`:
//!
//! * the flow is `n = ⌈m / P⌉` packets, all of `P` bytes except the last, of
//!   `ℓ = m − (n−1)·P` bytes; a packet occupies `payload + H + G` bytes on the wire;
//! * the source puts all of them on its host link back to back, which takes
//!   `(n−1)·S(P+H+G) + S(ℓ+H+G)`, where `S(b)` is the serialization time of `b` bytes rounded
//!   up to a picosecond ([`LinkParams::serialization_ps`]);
//! * the last packet then propagates over the first link (`D`), and is stored and forwarded at
//!   each of the `h−1` further hops: `(h−1)·(S(ℓ+H+G) + D)`;
//! * its ACK travels back over the `h` links, stored and forwarded at each:
//!   `h·(S(A+G) + D)`.
//!
//! Summing, `T = (n−1)·S(P+H+G) + h·(S(ℓ+H+G) + D) + h·(S(A+G) + D)`, and the bound for a set
//! of flows is the largest `T`. No schedule finishes earlier: the last packet cannot leave the
//! source before the others, nor be forwarded before it is fully received.
//!
//! Worked number, with [`LinkParams::paper`] (800 Gb/s, 0.5 µs, 4096 B payload, 62 B header,
//! 64 B ACK, 20 B gap), a 1 MiB message between pods (`h = 6`): `n = 256` full packets of
//! 4 178 wire bytes, `S = 33 424 bit / 800 Gb/s = 41 780 ps`, `S(ACK) = 672 bit / 800 Gb/s =
//! 840 ps`, so `T = 255·41 780 + 6·(41 780 + 500 000) + 6·(840 + 500 000) = 10 653 900 +
//! 3 250 680 + 3 005 040 = 16 909 620 ps ≈ 16.91 µs`.

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

impl Topology {
    /// A lower bound on the completion time of `flows`, each sending `message_bytes`, in
    /// picoseconds; see the [module documentation](crate::timing) for the derivation. Flows
    /// from a host to itself and empty messages take no time. Saturates at `u64::MAX`.
    ///
    /// # Panics
    ///
    /// If a flow endpoint is not a host, or `params` has a zero rate or payload.
    #[must_use]
    pub fn cct_lower_bound_ps(
        &self,
        params: &LinkParams,
        flows: &[(NodeId, NodeId)],
        message_bytes: u64,
    ) -> u64 {
        assert!(params.payload_bytes > 0, "packets need a non-zero payload");
        if message_bytes == 0 {
            return 0;
        }
        let payload = u64::from(params.payload_bytes);
        let packets = message_bytes.div_ceil(payload);
        let last_payload = message_bytes - (packets - 1) * payload;
        let wire = |payload: u64| {
            let bytes = payload + u64::from(params.header_bytes) + u64::from(params.gap_bytes);
            u128::from(params.serialization_ps(bytes))
        };
        let full = wire(payload);
        let last = wire(last_payload);
        let ack = u128::from(
            params.serialization_ps(u64::from(params.ack_bytes) + u64::from(params.gap_bytes)),
        );
        let propagation = u128::from(params.propagation_ps);
        let source = u128::from(packets - 1) * full;

        let bound = flows
            .iter()
            .map(|&(src, dst)| {
                let hops = u128::from(self.hop_count(src, dst));
                if hops == 0 {
                    return 0;
                }
                source + hops * (last + propagation) + hops * (ack + propagation)
            })
            .max()
            .unwrap_or(0);
        u64::try_from(bound).unwrap_or(u64::MAX)
    }
}

impl Topology {
    /// A lower bound on the completion time of a collective whose flows carry different sizes
    /// or share hosts, in picoseconds: each flow's own bound ([`Self::cct_lower_bound_ps`]),
    /// and for every host the serialization of all packets it sends (or receives) back to back
    /// followed by the longest tail among its flows — a host link carries one packet at a
    /// time, so a host with several flows cannot finish sooner. For a permutation it equals
    /// [`Self::cct_lower_bound_ps`].
    ///
    /// `flows` are `(source host, destination host, bytes)`; empty flows and self-flows are
    /// ignored.
    ///
    /// # Panics
    ///
    /// If a flow endpoint is not a host, or `params` has a zero rate or payload.
    #[must_use]
    pub fn collective_lower_bound_ps(
        &self,
        params: &LinkParams,
        flows: &[(NodeId, NodeId, u64)],
    ) -> u64 {
        let payload = u64::from(params.payload_bytes);
        let full = params.serialization_ps(
            payload + u64::from(params.header_bytes) + u64::from(params.gap_bytes),
        );
        // Per node id: (packets, longest tail) as a sender and as a receiver.
        let mut out: std::collections::HashMap<NodeId, (u64, u64)> = Default::default();
        let mut inn: std::collections::HashMap<NodeId, (u64, u64)> = Default::default();
        let mut bound = 0u64;
        for &(src, dst, bytes) in flows {
            if bytes == 0 || src == dst {
                continue;
            }
            let flow_bound = self.cct_lower_bound_ps(params, &[(src, dst)], bytes);
            bound = bound.max(flow_bound);
            let packets = bytes.div_ceil(payload);
            let tail = flow_bound.saturating_sub((packets - 1).saturating_mul(full));
            for (side, host) in [(&mut out, src), (&mut inn, dst)] {
                let entry = side.entry(host).or_default();
                entry.0 += packets;
                entry.1 = entry.1.max(tail);
            }
        }
        for (packets, tail) in out.into_values().chain(inn.into_values()) {
            bound = bound.max((packets - 1).saturating_mul(full).saturating_add(tail));
        }
        bound
    }
}

#[cfg(test)]
mod collective_bound_tests {
    use super::*;

    fn params() -> LinkParams {
        LinkParams {
            rate_bps: 1_000_000,
            propagation_ps: 0,
            payload_bytes: 1454,
            header_bytes: 60,
            ack_bytes: 60,
            gap_bytes: 20,
        }
    }

    #[test]
    fn permutation_bound_equals_the_flow_bound() {
        let topology = Topology::fat_tree(4).unwrap();
        let hosts = topology.hosts();
        let pairs: Vec<_> = (0..hosts.len())
            .map(|i| (hosts[i].id, hosts[(i + 5) % hosts.len()].id))
            .collect();
        let flows: Vec<_> = pairs.iter().map(|&(s, d)| (s, d, 1 << 20)).collect();
        assert_eq!(
            topology.collective_lower_bound_ps(&params(), &flows),
            topology.cct_lower_bound_ps(&params(), &pairs, 1 << 20)
        );
    }

    #[test]
    fn a_host_with_two_flows_serializes_both() {
        let topology = Topology::fat_tree(4).unwrap();
        let hosts = topology.hosts();
        let (a, b, c) = (hosts[0].id, hosts[5].id, hosts[9].id);
        let one = topology.collective_lower_bound_ps(&params(), &[(a, b, 100_000)]);
        let two =
            topology.collective_lower_bound_ps(&params(), &[(a, b, 100_000), (a, c, 100_000)]);
        let full = params().serialization_ps(1454 + 60 + 20);
        // 69 packets per flow: the second flow adds its 69 packets to the host's link.
        assert!(two >= one + 69 * full, "{two} vs {one}");
        // Fan-in is bounded the same way.
        let fan_in =
            topology.collective_lower_bound_ps(&params(), &[(b, a, 100_000), (c, a, 100_000)]);
        assert_eq!(fan_in, two);
        assert_eq!(
            topology.collective_lower_bound_ps(&params(), &[(a, a, 5), (a, b, 0)]),
            0
        );
    }
}
