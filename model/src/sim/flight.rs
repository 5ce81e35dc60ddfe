//! The frames in flight on the output ports' wires, each stored in 16 bytes instead of the 24
//! of a [`Flight`] (a picosecond time and a [`Packet`]).
//!
//! Why: from a few thousand hosts on, the event loop waits on memory, and the wire slab is a
//! third of the state (at 3,456 hosts 20,736 ports × 64 entries). A 16-byte [`Slot`] is four
//! to a cache line and never straddles two.
//!
//! How the 24 bytes fit in 16 ([`Slot::pack`]):
//! * the arrival keeps its low 32 bits. Every frame on a wire arrives no earlier than the
//!   current time (a wire's head arrives exactly when its event is due), so the arrival is
//!   `now + (low − now) mod 2³²` as long as it was less than 2³² ps (4.3 ms) ahead of the time
//!   it was written: later reads only come closer to it;
//! * the frame size takes 14 bits (frames below 16 KiB);
//! * a packet carries either host entropy (spray, REPS) or a DRB source route, not both, so
//!   one 16-bit field holds whichever is set, and a bit says which.
//!
//! A frame outside these ranges — a slow or degraded link with a queue more than 4.3 ms deep,
//! jumbo frames, entropy and a route together (DRB over several planes) — is *spilled*: its
//! slot holds an index into [`Spill`], a side table of full [`Flight`]s whose entries are
//! reused once their frame leaves the wire. The spill is exact, so every result is the same
//! either way; it only costs a second lookup.

use super::packet::{Packet, ACK_FLAG, NO_VIA};
use crate::wires::Wires;

/// A frame on a wire: it reaches the peer at `arrival` and finished transmission at
/// `arrival − propagation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Flight {
    pub(super) arrival: u64,
    pub(super) packet: Packet,
}

/// A [`Flight`] packed in 16 bytes (see the module documentation), or the index of its
/// spilled copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(16))]
pub(super) struct Slot {
    /// The arrival's low 32 bits.
    arrival: u32,
    /// [`Packet::flow`], or the spill index when [`SPILLED`] is set.
    flow: u32,
    seq_flags: u32,
    /// [`SPILLED`], [`TAG_IS_VIA`], the frame size in bits 16–29 and the tag in bits 0–15:
    /// [`Packet::via`] with [`TAG_IS_VIA`] (the entropy is 0), else [`Packet::entropy`] (no
    /// source route).
    packed: u32,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 16, "a slot is 16 bytes");

/// [`Slot::packed`]: the slot holds an index into [`Spill`].
const SPILLED: u32 = 1 << 31;
/// [`Slot::packed`]: the tag is the source route.
const TAG_IS_VIA: u32 = 1 << 30;
const FRAME_SHIFT: u32 = 16;
/// Frame sizes below this fit a slot.
pub(super) const FRAME_LIMIT: u32 = 1 << 14;
/// Arrivals less than this far ahead of the time they are written fit a slot.
pub(super) const ARRIVAL_LIMIT: u64 = 1 << 32;

/// Full [`Flight`]s of the frames that do not fit a [`Slot`], with a free list.
#[derive(Debug, Default)]
pub(super) struct Spill {
    flights: Vec<Flight>,
    free: Vec<u32>,
    /// Spill every frame (tests: the spilled path gives the same run).
    #[cfg(test)]
    force: bool,
}

impl Spill {
    /// Frames spilled and still on a wire.
    pub(super) fn len(&self) -> usize {
        self.flights.len() - self.free.len()
    }

    /// The most frames spilled at once.
    #[cfg(test)]
    fn most(&self) -> usize {
        self.flights.len()
    }
}

/// Every output port's wire: the rings of slots and the spilled frames they name.
#[derive(Debug)]
pub(super) struct FlightWires {
    pub(super) rings: Wires<Slot>,
    pub(super) spill: Spill,
}

impl FlightWires {
    /// `rings` empty wires ([`Wires::new`]).
    pub(super) fn new(rings: usize) -> Self {
        Self {
            rings: Wires::new(rings),
            spill: Spill::default(),
        }
    }
}

impl Slot {
    /// `flight`, written at time `now` (no later than its arrival), as a slot; spilled when it
    /// does not fit.
    #[inline(always)]
    pub(super) fn pack(flight: Flight, now: u64, spill: &mut Spill) -> Self {
        debug_assert!(flight.arrival >= now, "a frame arrives after it is written");
        #[cfg(test)]
        if spill.force {
            return Self::spill(flight, spill);
        }
        let packet = flight.packet;
        let tag = if packet.via == NO_VIA {
            Some(u32::from(packet.entropy))
        } else if packet.entropy == 0 {
            Some(TAG_IS_VIA | u32::from(packet.via))
        } else {
            None
        };
        match tag {
            Some(tag) if flight.arrival - now < ARRIVAL_LIMIT && packet.frame < FRAME_LIMIT => {
                Self {
                    arrival: flight.arrival as u32,
                    flow: packet.flow,
                    seq_flags: packet.seq_flags,
                    packed: packet.frame << FRAME_SHIFT | tag,
                }
            }
            _ => Self::spill(flight, spill),
        }
    }

    #[cold]
    #[inline(never)]
    fn spill(flight: Flight, spill: &mut Spill) -> Self {
        let index = match spill.free.pop() {
            Some(index) => {
                spill.flights[index as usize] = flight;
                index
            }
            None => {
                spill.flights.push(flight);
                u32::try_from(spill.flights.len() - 1).expect("fewer than 2^32 spilled frames")
            }
        };
        Self {
            flow: index,
            packed: SPILLED,
            ..Self::default()
        }
    }

    #[inline(always)]
    fn spilled(self) -> bool {
        self.packed & SPILLED != 0
    }

    /// The flight, read at time `now`, no later than its arrival and no earlier than it was
    /// written.
    #[inline(always)]
    pub(super) fn unpack(self, now: u64, spill: &Spill) -> Flight {
        if self.spilled() {
            return spill.flights[self.flow as usize];
        }
        let tag = self.packed as u16;
        let (entropy, via) = if self.packed & TAG_IS_VIA != 0 {
            (0, tag)
        } else {
            (tag, NO_VIA)
        };
        Flight {
            arrival: now + u64::from(self.arrival.wrapping_sub(now as u32)),
            packet: Packet {
                flow: self.flow,
                seq_flags: self.seq_flags,
                frame: (self.packed >> FRAME_SHIFT) & (FRAME_LIMIT - 1),
                entropy,
                via,
            },
        }
    }

    /// The frame size and whether the frame is an ACK (what a queue's purge reads).
    #[inline(always)]
    pub(super) fn frame_and_ack(self, spill: &Spill) -> (u32, bool) {
        if self.spilled() {
            let packet = spill.flights[self.flow as usize].packet;
            return (packet.frame, packet.is_ack());
        }
        (
            (self.packed >> FRAME_SHIFT) & (FRAME_LIMIT - 1),
            self.seq_flags & ACK_FLAG != 0,
        )
    }

    /// The slot's frame left the wire: its spilled copy, if any, may be reused.
    #[inline(always)]
    pub(super) fn release(self, spill: &mut Spill) {
        if self.spilled() {
            spill.free.push(self.flow);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{BufferLimit, ModelConfig};
    use crate::report::RunReport;
    use crate::sim::packet::ECN_FLAG;
    use crate::sim::run_inspected;
    use ofan_topology::{Topology, TopologyKind};

    fn flight(arrival: u64, frame: u32, entropy: u16, via: u16) -> Flight {
        Flight {
            arrival,
            packet: Packet {
                flow: u32::MAX - 3,
                seq_flags: ACK_FLAG | ECN_FLAG | 0x7f_ffff,
                frame,
                entropy,
                via,
            },
        }
    }

    /// Packs `flight` at `now`, checks whether it spilled, and reads it back at `now` and at
    /// its arrival.
    fn round_trip(flight: Flight, now: u64, spilled: bool) {
        let mut spill = Spill::default();
        let slot = Slot::pack(flight, now, &mut spill);
        assert_eq!(slot.spilled(), spilled, "{flight:?} at {now}");
        assert_eq!(spill.len(), usize::from(spilled));
        for read in [now, now + (flight.arrival - now) / 2, flight.arrival] {
            assert_eq!(slot.unpack(read, &spill), flight, "read at {read}");
        }
        assert_eq!(
            slot.frame_and_ack(&spill),
            (flight.packet.frame, flight.packet.is_ack())
        );
        slot.release(&mut spill);
        assert_eq!(spill.len(), 0);
    }

    /// Each range at its limit fits a slot; one past it spills, and the spilled frame reads
    /// back the same.
    #[test]
    fn slots_round_trip_at_the_range_limits() {
        for now in [0, 1 << 32, u64::MAX - (1 << 33), 0xdead_beef_0000_0001] {
            round_trip(flight(now, 4158, 0xbeef, NO_VIA), now, false);
            round_trip(flight(now + ARRIVAL_LIMIT - 1, 64, 0, NO_VIA), now, false);
            round_trip(flight(now + ARRIVAL_LIMIT, 64, 0, NO_VIA), now, true);
            round_trip(flight(now + ARRIVAL_LIMIT + 1, 64, 7, NO_VIA), now, true);
            round_trip(
                flight(now + 5, FRAME_LIMIT - 1, u16::MAX, NO_VIA),
                now,
                false,
            );
            round_trip(flight(now + 5, FRAME_LIMIT, 0, NO_VIA), now, true);
            round_trip(flight(now + 5, u32::MAX, 0, NO_VIA), now, true);
            round_trip(flight(now + 5, 4158, 0, 0), now, false);
            round_trip(flight(now + 5, 4158, 0, 0x7f7f), now, false);
            round_trip(flight(now + 5, 4158, 1, 0x0102), now, true);
            round_trip(flight(now + 5, 0, u16::MAX, NO_VIA - 1), now, true);
        }
    }

    /// Spilled frames keep their own copies while on the wire, and a released copy is reused.
    #[test]
    fn spilled_frames_are_kept_apart_and_reused() {
        let mut spill = Spill::default();
        let far = |i: u64| flight(ARRIVAL_LIMIT + i, 4158, i as u16 + 1, 0x0101);
        let slots: Vec<Slot> = (0..5).map(|i| Slot::pack(far(i), 0, &mut spill)).collect();
        assert_eq!(spill.len(), 5);
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(slot.unpack(0, &spill), far(i as u64));
        }
        slots[1].release(&mut spill);
        slots[3].release(&mut spill);
        let again = Slot::pack(far(9), 0, &mut spill);
        assert_eq!(spill.len(), 4);
        assert_eq!(spill.flights.len(), 5, "a released copy is reused");
        assert_eq!(again.unpack(0, &spill), far(9));
        for i in [0, 2, 4] {
            assert_eq!(slots[i].unpack(0, &spill), far(i as u64));
        }
    }

    /// Runs `config` with its frames packed as usual and with every frame spilled; returns
    /// the two reports and the most frames spilled at once in each.
    fn packed_and_spilled(config: &ModelConfig) -> [(RunReport, usize); 2] {
        let topology = Topology::new(config.topology).expect("topology");
        [false, true].map(|force| {
            run_inspected(
                &topology,
                config,
                |sim| sim.wires.spill.force = force,
                |sim| sim.wires.spill.most(),
            )
            .expect("runs")
        })
    }

    /// Every frame spilled gives the same run as frames packed in slots: the schemes with
    /// entropy and with source routes, a full buffer, a degraded link, a link failing during
    /// the run (its wires cleared with spilled frames on them).
    #[test]
    fn spilling_every_frame_changes_no_result() {
        let mut configs = Vec::new();
        for scheme in ["ofan", "spray", "reps", "drb", "jsq"] {
            let mut config = ModelConfig::paper();
            config.topology = TopologyKind::FatTree { k: 4 };
            config.message_bytes = 256 << 10;
            config.scheme = scheme.parse().expect("scheme");
            configs.push(config);
        }
        let mut config = configs[0].clone();
        config.buffer_bytes = 60_000;
        config.buffer_limit = BufferLimit::Enforced;
        configs.push(config);
        let mut config = configs[0].clone();
        config.degraded = vec!["a-p0-0/c-0:0.25".parse().expect("degraded link")];
        configs.push(config);
        let mut config = configs[0].clone();
        config.topology = TopologyKind::FatTree { k: 8 };
        config.message_bytes = 1 << 20;
        config.fail_at = vec!["a-p0-0/c-0@5".parse().expect("failing link")];
        configs.push(config);
        for config in &configs {
            let [(packed, packed_most), (spilled, spilled_most)] = packed_and_spilled(config);
            assert_eq!(packed_most, 0, "{config:?}");
            assert!(spilled_most > 0);
            assert_eq!(packed, spilled, "{config:?}");
        }
    }

    /// A link slowed to 10⁻⁴ of 800 Gb/s (0.4 ms per frame) holds frames due more than 4.3 ms
    /// ahead: they spill by themselves, and the run is the one with every frame spilled.
    #[test]
    fn a_very_slow_link_spills_its_far_frames() {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 4 };
        config.message_bytes = 64 << 10;
        config.degraded = vec!["a-p0-0/c-0:0.0001".parse().expect("degraded link")];
        let [(packed, packed_most), (spilled, _)] = packed_and_spilled(&config);
        assert!(packed_most > 0, "no frame spilled by itself");
        assert_eq!(packed, spilled);
    }
}
