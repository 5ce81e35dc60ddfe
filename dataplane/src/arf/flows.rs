//! Flow-specific congestion (the draft's second message type): which flows fill a congested
//! port, and what an upstream switch is asked to do about one.
//!
//! **Naming the flows.** Each fabric port keeps a [`FlowSketch`] over the window: the
//! *space-saving* heavy-hitter summary (Metwally et al., 2005) in [`SKETCH_SLOTS`] slots — a flow
//! already counted adds its bytes, a new one takes a free slot or replaces the smallest count
//! and inherits it as its possible error (so any flow with more than 1/`SKETCH_SLOTS` of the
//! bytes is in it, and its count less its error is a lower bound on its bytes). The switch feeds it one frame in
//! `sample` (a sampled frame counts `sample` times its bytes); the model every frame. When the
//! port's congestion is told, [`name_flows`] names at most [`NAMED_FLOWS`] flows, each with at
//! least 1/[`NAMED_SHARE`] of the window's bytes: the flows that fill the queue, not the mice.
//!
//! **Acting on one.** A switch told that flow F is congested on link A→B asks the balancer to
//! move F off every up-port whose neighbour is A towards F's destination key: a
//! [`FlowRedirect`] in the published view, held for the message's hold time. `arf-flow` moves
//! the flow only if it is pinned on one of those ports, to a port whose path is not congested,
//! weighted by path quality, and not within the hold-down of its last move
//! ([`super::Redirect`]); a flow this switch does not carry there changes nothing.

use std::net::Ipv4Addr;

use ofan_topology::DestKey;

use crate::lb::PortMask;

/// A flow's five-tuple (IPv4): what a flow message names (`ofan-control`'s wire carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol.
    pub protocol: u8,
}

impl FiveTuple {
    /// The five-tuple of an Ethernet frame carrying IPv4 UDP or TCP (options allowed, not a
    /// fragment after the first); `None` for anything else. Reads only the headers.
    #[must_use]
    pub fn of_frame(frame: &[u8]) -> Option<Self> {
        const ETH: usize = 14;
        if frame.get(12..14)? != [0x08, 0x00] {
            return None;
        }
        let ip = frame.get(ETH..ETH + 20)?;
        let header = usize::from(ip[0] & 0x0f) * 4;
        let protocol = ip[9];
        let fragment_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        if ip[0] >> 4 != 4 || header < 20 || fragment_offset != 0 || !matches!(protocol, 6 | 17) {
            return None;
        }
        let ports = frame.get(ETH + header..ETH + header + 4)?;
        Some(Self {
            src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
            dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            src_port: u16::from_be_bytes([ports[0], ports[1]]),
            dst_port: u16::from_be_bytes([ports[2], ports[3]]),
            protocol,
        })
    }

    /// The balancer's flow hash of this five-tuple (what `arf-flow` pins flows by).
    #[must_use]
    pub fn flow_hash(&self) -> u32 {
        crate::wire::flow_hash_v4(
            self.src,
            self.dst,
            crate::wire::IpProtocol(self.protocol),
            Some(crate::wire::L4Ports {
                src: self.src_port,
                dst: self.dst_port,
            }),
        )
    }
}

/// Frames the switch's workers count per sampled one ([`FlowSketch`] input of the data path).
pub const SAMPLE_EVERY: u32 = 16;

/// Slots of a [`FlowSketch`].
pub const SKETCH_SLOTS: usize = 8;

/// At most this many flows are named per congested port and message round.
pub const NAMED_FLOWS: usize = 2;

/// A named flow has at least 1/`NAMED_SHARE` of the port's bytes in the window.
pub const NAMED_SHARE: u64 = 8;

/// The space-saving summary of one port's flows over a window (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSketch<F> {
    /// (flow, count, error): the count over-estimates the flow's bytes by at most the error.
    slots: [Option<(F, u64, u64)>; SKETCH_SLOTS],
    total: u64,
}

impl<F> Default for FlowSketch<F> {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| None),
            total: 0,
        }
    }
}

impl<F: Copy + Eq> FlowSketch<F> {
    /// Counts `bytes` of `flow`.
    #[inline]
    pub fn record(&mut self, flow: F, bytes: u64) {
        self.total += bytes;
        let mut smallest = 0;
        let mut smallest_count = u64::MAX;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            match slot {
                Some((known, count, _)) if *known == flow => {
                    *count += bytes;
                    return;
                }
                Some((_, count, _)) => {
                    if *count < smallest_count {
                        smallest = index;
                        smallest_count = *count;
                    }
                }
                None => {
                    *slot = Some((flow, bytes, 0));
                    return;
                }
            }
        }
        self.slots[smallest] = Some((flow, smallest_count + bytes, smallest_count));
    }

    /// Bytes counted since the last [`FlowSketch::clear`].
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.total
    }

    /// The flows counted, with their (over-)estimated bytes.
    pub fn flows(&self) -> impl Iterator<Item = (F, u64)> + '_ {
        self.slots
            .iter()
            .flatten()
            .map(|&(flow, count, _)| (flow, count))
    }

    /// The flows counted, with the bytes they surely had (count less error).
    pub fn guaranteed(&self) -> impl Iterator<Item = (F, u64)> + '_ {
        self.slots
            .iter()
            .flatten()
            .map(|&(flow, count, error)| (flow, count - error))
    }

    /// Starts a new window.
    pub fn clear(&mut self) {
        *self = Self {
            slots: [None; SKETCH_SLOTS],
            total: 0,
        };
    }
}

/// The flows to name for a congested port whose window is `sketch`: the largest, at most
/// [`NAMED_FLOWS`], each surely with at least 1/[`NAMED_SHARE`] of the window's bytes (its count
/// less its error), largest first (ties in slot order).
#[must_use]
pub fn name_flows<F: Copy + Eq>(sketch: &FlowSketch<F>) -> Vec<F> {
    let floor = sketch.total().div_ceil(NAMED_SHARE).max(1);
    let mut big: Vec<(F, u64)> = sketch.guaranteed().filter(|&(_, n)| n >= floor).collect();
    big.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes));
    big.into_iter().take(NAMED_FLOWS).map(|(f, _)| f).collect()
}

/// A request to move one flow off some up-ports (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRedirect {
    /// The flow (the balancer's flow hash of its five-tuple).
    pub flow_hash: u32,
    /// Its destination key here.
    pub key: DestKey,
    /// The up-ports (positions) whose path crosses the congested link.
    pub avoid: PortMask,
}

/// Adds `request` to `requests`, held until `until`, or renews it when it is there already
/// (the switch's clock in ns, the model's in ps: only the order matters).
pub fn request_move(requests: &mut Vec<(FlowRedirect, u64)>, request: FlowRedirect, until: u64) {
    match requests.iter_mut().find(|(known, _)| *known == request) {
        Some(known) => known.1 = until,
        None => requests.push((request, until)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sketch_keeps_the_heavy_flows_and_names_only_them() {
        let mut sketch = FlowSketch::default();
        // Two elephants among 40 mice: the elephants survive every replacement.
        for round in 0..40u32 {
            sketch.record(1000, 9_000);
            sketch.record(2000, 6_000);
            sketch.record(round, 100);
        }
        assert_eq!(sketch.total(), 40 * 15_100);
        let counts: Vec<(u32, u64)> = sketch.flows().collect();
        assert!(counts.contains(&(1000, 360_000)), "{counts:?}");
        assert!(counts.contains(&(2000, 240_000)), "{counts:?}");
        assert_eq!(name_flows(&sketch), [1000, 2000]);
        // Even flows each with 1/16 of the bytes: none named.
        let mut even = FlowSketch::default();
        for flow in 0..16u32 {
            even.record(flow, 1_000);
        }
        assert!(name_flows(&even).is_empty());
        // One flow alone is named; an empty window names nothing.
        let mut one = FlowSketch::default();
        one.record(7u32, 1);
        assert_eq!(name_flows(&one), [7]);
        one.clear();
        assert!(name_flows(&one).is_empty());
        assert_eq!(one.total(), 0);
    }

    #[test]
    fn a_replaced_slot_inherits_the_smallest_count() {
        let mut sketch = FlowSketch::default();
        for flow in 0..SKETCH_SLOTS as u32 {
            sketch.record(flow, 10 + u64::from(flow));
        }
        sketch.record(99, 5);
        let counts: Vec<(u32, u64)> = sketch.flows().collect();
        assert!(counts.contains(&(99, 15)), "took flow 0's slot: {counts:?}");
        assert!(!counts.iter().any(|&(f, _)| f == 0));
    }
}
