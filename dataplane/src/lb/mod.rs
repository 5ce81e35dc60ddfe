//! The load-balancing core: which uplink a northbound packet leaves on.
//!
//! In a fat tree the only freedom is on the way up; the way down is fixed by the destination.
//! This module makes that one choice, for every algorithm ofan implements or is measured
//! against, as a pure function of its inputs:
//!
//! | input | type |
//! |---|---|
//! | the switch's shared state and the pipe's own state | [`SwitchBalancer`], [`PipeBalancer`] |
//! | destination key (destination edge switch at an edge, destination pod at an aggregation switch) | [`DestKey`] |
//! | size class (data / ACK, from the frame length) | [`SizeClass`] |
//! | the up-ports that still reach the destination | [`PortMask`] |
//! | local egress queue lengths of the up-ports | [`PortLoad`] slice |
//! | a flow hash (5-tuple) | `u32` |
//! | a seeded random generator | [`LbRng`], owned by the pipe |
//!
//! No clock, no I/O, no allocation per packet: the AF_XDP worker, the property tests and the
//! deterministic model all run exactly this code. Southbound forwarding is not a choice and
//! never comes here.
//!
//! ## Pointers (Ofan, pOfan, Simple RR)
//! A rotation pointer is a packet counter `n`. The packet that draws value `n` from a pointer
//! with valid up-port set `V` (|V| = v) takes the `(n mod v)`-th valid port in the pointer's
//! port order. With every port valid that is the paper's pointer position `n mod w` mapped
//! through the F.2 permutation; with failed ports it is the paper's "skip ports that cannot
//! reach the destination": each of the `v` valid ports receives exactly one packet in every `v`
//! consecutive packets. Counting packets rather than positions is what lets several workers
//! share a pointer without a lock: a batch reserves `g` consecutive values with a single
//! `fetch_add(g)` and hands one to each of its packets ([`PipeBalancer::choose_batch`], the
//! software form of the combining pipeline of paper §7).
//!
//! On the hot path a pointer also keeps `n mod w` beside `n`, and the F.2 permutations of the
//! switch are written out once as a table (one row of `w` ports per permutation), so a packet to
//! which every port is valid costs a load, an increment and a compare, with no remainder and no
//! permutation arithmetic. The tests hold every fast path equal to the plain rule above.
//!
//! Data pointers start at a seeded random value in `0..w`; the ACK pointer of the same key
//! starts `⌊w/2⌋` after it. The pointer id that selects the port permutation is
//! `key + keys · class` (paper F.2: `id = d + N_d · t`). Simple RR has one pointer per size
//! class for the whole switch (the same start rule, identity port order).

pub mod dragonfly;
mod fastmod;
mod flow_table;
mod order;
pub mod planes;
mod rng;
mod types;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use fastmod::mod_small;
use flow_table::FlowTable;
pub use flow_table::FLOW_IDLE_NS;

use crate::arf::PathQuality;
use order::{OrderRow, PortRows, PortTable};

pub use ofan_topology::DestKey;
pub use order::{
    distinct_cyclic_orders, id_bits, OrderId, PortOrder, BASIS, BASIS_ORDER_COUNTS, MAX_PORTS,
};
pub use rng::{mix64, LbRng};
pub use types::{Algorithm, LbConfig, LbError, Northbound, PortLoad, PortMask, SizeClass, UpPort};

/// The part of a switch's balancer that all its pipes share: configuration, port orders, the
/// Ofan pointers and the Simple RR pointers (atomics, so workers share them without locks).
#[derive(Debug)]
pub struct SwitchBalancer {
    config: LbConfig,
    /// Every permutation of the switch's [`PortOrder`] written out, so that a pointer value maps
    /// to its port in one load; one table per width, shared by all switches of that width.
    table: Arc<PortTable>,
    /// Per pointer slot (slot = key · 2 + class): its row of `table` and, for Ofan, the shared
    /// pointer, side by side so that a decision misses the cache once. Packed: padding the
    /// pointers to a cache line each made no measurable difference with two workers, since a
    /// batch touches each pointer with a single `fetch_add`.
    slots: Box<[PointerSlot]>,
    /// The Simple RR pointers, one per size class.
    rr_pointers: [AtomicU64; SizeClass::COUNT as usize],
    /// ECMP hash salt of this switch.
    salt: u32,
    /// Every up-port: the valid set when nothing has failed.
    all_ports: PortMask,
    /// The adaptive-routing framework's path quality (`arf-*` modes), swapped whole by the
    /// control thread; a decision loads it without waiting.
    quality: ArcSwap<PathQuality>,
}

impl SwitchBalancer {
    /// Builds a switch's shared balancer state.
    ///
    /// # Errors
    /// [`LbError::UpPorts`] or [`LbError::NoPipes`] for an invalid configuration.
    pub fn new(config: LbConfig) -> Result<Arc<Self>, LbError> {
        config.validate()?;
        let order = PortOrder::new(config.up_ports);
        let table = shared_table(config.up_ports);
        let slots = (0..config.dest_keys as usize * SizeClass::COUNT as usize)
            .map(|slot| PointerSlot {
                pointer: AtomicU64::new(if config.algorithm == Algorithm::Ofan {
                    pointer_start(config.seed, 0, slot, config.up_ports)
                } else {
                    0
                }),
                row: table.row(order.id(pointer_id(slot, config.dest_keys))),
            })
            .collect();
        let rr_start = mix64(config.seed ^ 0x7272) % u64::from(config.up_ports);
        Ok(Arc::new(Self {
            salt: mix64(config.seed ^ 0x6563_6d70) as u32,
            all_ports: PortMask::all(config.up_ports),
            rr_pointers: [
                AtomicU64::new(rr_start),
                AtomicU64::new(
                    (rr_start + u64::from(config.up_ports / 2)) % u64::from(config.up_ports),
                ),
            ],
            table,
            slots,
            quality: ArcSwap::from_pointee(PathQuality::uniform(config.up_ports, config.dest_keys)),
            config,
        }))
    }

    /// Publishes a new path-quality view for the `arf-*` modes (every pipe sees it from its next
    /// decision on). Other algorithms never read it.
    pub fn set_path_quality(&self, quality: Arc<PathQuality>) {
        self.quality.store(quality);
    }

    /// The path-quality view the `arf-*` modes read now.
    pub fn path_quality(&self) -> Arc<PathQuality> {
        self.quality.load_full()
    }

    /// The configuration this balancer was built from.
    pub fn config(&self) -> &LbConfig {
        &self.config
    }

    /// The salt of this switch's ECMP choice (`ecmp`'s `mix64(flow_hash ^ salt)`).
    pub fn ecmp_salt(&self) -> u32 {
        self.salt
    }

    /// The port order `π(0), …, π(w−1)` of the pointer of `(key, class)`: the packet that draws
    /// value `n` goes to the `(n mod v)`-th valid port in this order. `None` for a key past the
    /// balancer's. For a data path that keeps pointers of its own (the XDP fast path).
    pub fn pointer_order(&self, key: DestKey, class: SizeClass) -> Option<&[u8]> {
        let slot = self.slots.get(slot_of(key, class))?;
        Some(self.table.rows().ports(slot.row))
    }

    /// The value pipe `pipe`'s pOfan pointer of `(key, class)` starts at ([`Self::pipe`] uses
    /// the same): for a data path that keeps pOfan pointers of its own, one pipe per CPU.
    pub fn pofan_start(&self, pipe: u16, key: DestKey, class: SizeClass) -> u64 {
        pointer_start(
            self.config.seed,
            pipe,
            slot_of(key, class),
            self.config.up_ports,
        )
    }

    /// Number of pointers this switch holds in total (shared plus every pipe's own).
    pub fn pointer_count(&self) -> usize {
        let slots = self.config.dest_keys as usize * SizeClass::COUNT as usize;
        match self.config.algorithm {
            Algorithm::Ofan => slots,
            Algorithm::Pofan => slots * usize::from(self.config.pipes),
            Algorithm::Rr => SizeClass::COUNT as usize,
            _ => 0,
        }
    }

    /// The balancer of pipe `pipe`, to be owned by that pipe's worker.
    ///
    /// # Errors
    /// [`LbError::NoSuchPipe`] when `pipe` ≥ the configured number of pipes.
    pub fn pipe(self: &Arc<Self>, pipe: u16) -> Result<PipeBalancer, LbError> {
        if pipe >= self.config.pipes {
            return Err(LbError::NoSuchPipe {
                pipe,
                pipes: self.config.pipes,
            });
        }
        let slots = self.slots.len();
        let own_pointers = if self.config.algorithm == Algorithm::Pofan {
            (0..slots)
                .map(|slot| {
                    let start = pointer_start(self.config.seed, pipe, slot, self.config.up_ports);
                    Rotation::new(start, self.slots[slot].row, self.config.up_ports)
                })
                .collect()
        } else {
            Box::default()
        };
        let ofan_groups = Box::new(OfanGroups {
            marks: if self.config.algorithm == Algorithm::Ofan {
                vec![0; slots].into_boxed_slice()
            } else {
                Box::default()
            },
            chunk: 0,
            slot: [0; MAX_BATCH],
            size: [0; MAX_BATCH],
            cursor: [Rotation::default(); MAX_BATCH],
            packet_group: [NO_GROUP; MAX_BATCH],
        });
        Ok(PipeBalancer {
            switch: Arc::clone(self),
            own_pointers,
            ofan_groups,
            rng: LbRng::new(mix64(self.config.seed ^ 0x7069_7065) ^ u64::from(pipe)),
            drill_last: None,
            flows: if self.config.algorithm == Algorithm::ArfFlow {
                FlowTable::new()
            } else {
                FlowTable::default()
            },
        })
    }

    /// Ofan's shared pointer of `slot`.
    #[inline]
    fn shared_pointer(&self, slot: usize) -> &AtomicU64 {
        &self.slots[slot].pointer
    }

    /// The port of the packet that draws value `n` from the pointer of `slot`.
    #[inline]
    fn pointer_port(&self, n: u64, slot: usize, valid: PortMask) -> u8 {
        let (rows, row) = (self.table.rows(), self.slots[slot].row);
        if valid == self.all_ports {
            rows.port(row, mod_small(n, u32::from(rows.width())) as u8)
        } else {
            valid_port(rows.ports(row), n, valid)
        }
    }

    /// pOfan over a batch: each packet advances its pipe's own pointer; no dispatch per packet.
    fn pofan_batch(
        &self,
        pointers: &mut [Rotation],
        packets: &[Northbound],
        out: &mut [Option<UpPort>],
    ) {
        let (rows, all_ports) = (self.table.rows(), self.all_ports);
        for (packet, choice) in packets.iter().zip(out.iter_mut()) {
            let slot = slot_of(packet.key, packet.class);
            // Every port valid (the common case) first: it is never empty.
            *choice = if packet.valid == all_ports {
                Some(UpPort(pointers[slot].take_any(rows)))
            } else if packet.valid.is_empty() {
                None
            } else {
                Some(UpPort(pointers[slot].take(rows, packet.valid, all_ports)))
            };
        }
    }

    /// A flow's point in `0..2⁶⁴`: its 5-tuple hash under this switch's salt (ECMP's hash, so
    /// that `arf-wcmp` with every path at the same quality spreads flows as evenly as ECMP).
    #[inline]
    fn flow_point(&self, packet: &Northbound) -> u64 {
        mix64(u64::from(packet.flow_hash ^ self.salt))
    }

    /// Maps an ordinal of a Simple RR pointer onto a valid port (identity order).
    #[inline]
    fn rr_port(n: u64, valid: PortMask) -> u8 {
        valid.nth(mod_small(n, valid.count()))
    }
}

/// A pointer slot of a [`SwitchBalancer`]: the row of its permutation and Ofan's shared pointer.
#[derive(Debug)]
struct PointerSlot {
    pointer: AtomicU64,
    row: OrderRow,
}

/// The port table of [`PortOrder::new`]`(width)`, built once per width and shared by every
/// switch of that width (the tables are identical, and one copy stays in cache).
fn shared_table(width: u8) -> Arc<PortTable> {
    static TABLES: [OnceLock<Arc<PortTable>>; MAX_PORTS + 1] =
        [const { OnceLock::new() }; MAX_PORTS + 1];
    Arc::clone(
        TABLES[usize::from(width)].get_or_init(|| Arc::new(PortTable::new(&PortOrder::new(width)))),
    )
}

/// The pointer id that selects a slot's port permutation: `key + keys · class`.
fn pointer_id(slot: usize, dest_keys: u32) -> u32 {
    let key = (slot / SizeClass::COUNT as usize) as u32;
    let class = (slot % SizeClass::COUNT as usize) as u32;
    key.wrapping_add(dest_keys.wrapping_mul(class))
}

/// Seeded start of a pointer: data pointers uniform in `0..w`, the ACK pointer `⌊w/2⌋` after the
/// data pointer of the same key (and pipe).
fn pointer_start(seed: u64, pipe: u16, slot: usize, width: u8) -> u64 {
    let key = (slot / SizeClass::COUNT as usize) as u64;
    let data_start = mix64(seed ^ mix64((u64::from(pipe) << 40) ^ key)) % u64::from(width);
    if slot % SizeClass::COUNT as usize == SizeClass::Ack as usize {
        (data_start + u64::from(width / 2)) % u64::from(width)
    } else {
        data_start
    }
}

/// The slot of the pointer for `(key, class)`.
#[inline]
fn slot_of(key: DestKey, class: SizeClass) -> usize {
    key.0 as usize * SizeClass::COUNT as usize + class as usize
}

/// AR's quantization of a queue against the buffer: 0 below 5 %, 1 below 10 %, 2 below 20 %,
/// 3 at or above 20 %.
#[inline]
pub fn ar_level(queue_bytes: u32, buffer_bytes: u32) -> u8 {
    let scaled = u64::from(queue_bytes) * 100;
    let buffer = u64::from(buffer_bytes.max(1));
    if scaled < 5 * buffer {
        0
    } else if scaled < 10 * buffer {
        1
    } else if scaled < 20 * buffer {
        2
    } else {
        3
    }
}

/// The `(n mod v)`-th port of `valid` (|valid| = v > 0) in a pointer's permutation `order`
/// (`π(0), …, π(w−1)`): the general rule, which with every port valid is simply `π(n mod w)`.
///
/// Kept out of line: it is the failure path, and inlining it would push the all-valid path of
/// [`Rotation::take`] out of the batch loops.
#[inline(never)]
fn valid_port(order: &[u8], n: u64, valid: PortMask) -> u8 {
    let rank = mod_small(n, valid.count());
    // A walk that stops at the wanted port mispredicts its exit about once per packet; this one
    // always visits all w positions and selects without branching.
    let mut seen = 0u32;
    let mut chosen = None;
    for &port in order {
        let is_valid = valid.0 >> (port & 63) & 1 != 0;
        if is_valid && seen == rank {
            chosen = Some(port);
        }
        seen += u32::from(is_valid);
    }
    chosen.expect("rank < number of valid ports")
}

/// A pointer walking its rotation: the packet count `n`, `n mod w` kept beside it so that the
/// common case (every port valid) needs no remainder, and the row of the pointer's permutation.
///
/// pOfan pointers are `Rotation`s owned by their pipe; an Ofan batch turns each range of values
/// it reserved with one `fetch_add` into a `Rotation` and walks it the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Rotation {
    count: u64,
    row: OrderRow,
    position: u8,
}

impl Rotation {
    /// The rotation about to hand out value `count`.
    #[inline]
    fn new(count: u64, row: OrderRow, width: u8) -> Self {
        Self {
            count,
            row,
            position: mod_small(count, u32::from(width)) as u8,
        }
    }

    /// The port of the packet that draws the current value; advances to the next value.
    ///
    /// `position` stays `count mod w` (until `count` wraps after 2⁶⁴ packets).
    #[inline(always)]
    fn take(&mut self, rows: PortRows<'_>, valid: PortMask, all_ports: PortMask) -> u8 {
        if valid == all_ports {
            self.take_any(rows)
        } else {
            let port = valid_port(rows.ports(self.row), self.count, valid);
            self.advance(rows.width());
            port
        }
    }

    /// [`take`](Self::take) for a packet to which every port is valid: `π(n mod w)`.
    #[inline(always)]
    fn take_any(&mut self, rows: PortRows<'_>) -> u8 {
        let port = rows.port(self.row, self.position);
        self.advance(rows.width());
        port
    }

    #[inline(always)]
    fn advance(&mut self, width: u8) {
        self.count = self.count.wrapping_add(1);
        let next = self.position + 1;
        self.position = if next == width { 0 } else { next };
    }
}

/// A pipe's scratch for Ofan's combining step, kept between chunks so that no chunk pays for
/// initializing it: the group, in the current chunk, of every pointer slot the chunk uses
/// (stamped with the chunk's number, so it never needs clearing) and the per-group and
/// per-packet arrays of the chunk.
#[derive(Debug)]
struct OfanGroups {
    /// `chunk << 8 | group` per slot: the slot is the chunk's group `group` iff `chunk` is the
    /// current chunk.
    marks: Box<[u32]>,
    /// Number of the current chunk, in `1..CHUNK_WRAP`.
    chunk: u32,
    /// Per group: its pointer slot.
    slot: [u32; MAX_BATCH],
    /// Per group: its number of packets.
    size: [u32; MAX_BATCH],
    /// Per group: the range of pointer values it reserved, as a rotation to walk.
    cursor: [Rotation; MAX_BATCH],
    /// Per packet: its group, or [`NO_GROUP`] when no port is valid.
    packet_group: [u8; MAX_BATCH],
}

/// Chunk numbers use the 24 bits above a mark's group byte; at this value the marks are cleared
/// and numbering restarts at 1.
const CHUNK_WRAP: u32 = 1 << 24;

/// `packet_group` of a packet with no valid port.
const NO_GROUP: u8 = u8::MAX;

/// The most packets one call of [`PipeBalancer::choose_batch`] combines at once.
pub const MAX_BATCH: usize = 64;

/// The balancer state a pipe's worker owns: its pOfan pointers, its random generator and DRILL's
/// memory, plus a handle on the switch's shared state.
#[derive(Debug)]
pub struct PipeBalancer {
    switch: Arc<SwitchBalancer>,
    own_pointers: Box<[Rotation]>,
    ofan_groups: Box<OfanGroups>,
    rng: LbRng,
    drill_last: Option<u8>,
    flows: FlowTable,
}

impl PipeBalancer {
    /// The switch this pipe belongs to.
    pub fn switch(&self) -> &Arc<SwitchBalancer> {
        &self.switch
    }

    /// Sets the time `arf-flow` ages its flow table by (ns, any fixed origin: the worker's
    /// monotonic clock, the model's simulated time). Other algorithms read no clock.
    #[inline]
    pub fn set_clock(&mut self, now_ns: u64) {
        self.flows.now_ns = now_ns;
    }

    /// Flows `arf-flow` moved off a congested path so far (this pipe).
    pub fn flows_moved(&self) -> u64 {
        self.flows.moved
    }

    /// Chooses the up-port of one northbound packet; `None` when no port is valid.
    ///
    /// `loads` holds the local egress queue of each up-port (index = up-port position) and must
    /// have `w` entries for the queue-aware algorithms ([`Algorithm::uses_queues`]); the chosen
    /// port's entry is increased by this packet so that later decisions see it. Other
    /// algorithms ignore `loads` (it may be empty).
    // Always inlined: the model calls it once per packet in its event loop.
    #[inline(always)]
    pub fn choose(&mut self, packet: &Northbound, loads: &mut [PortLoad]) -> Option<UpPort> {
        if packet.valid.is_empty() {
            return None;
        }
        let switch = &*self.switch;
        let port = match switch.config.algorithm {
            Algorithm::Ecmp => {
                let hash = mix64(u64::from(packet.flow_hash ^ switch.salt));
                packet.valid.nth(mod_small(hash, packet.valid.count()))
            }
            Algorithm::Rsq => packet.valid.nth(self.rng.below(packet.valid.count())),
            Algorithm::Rr => {
                let n = switch.rr_pointers[packet.class as usize].fetch_add(1, Ordering::Relaxed);
                SwitchBalancer::rr_port(n, packet.valid)
            }
            Algorithm::Jsq => shortest(&mut self.rng, packet.valid, loads, |_, load| load.bytes),
            Algorithm::Ar => {
                let buffer = switch.config.buffer_bytes;
                shortest(&mut self.rng, packet.valid, loads, |_, load| {
                    u32::from(ar_level(load.bytes, buffer))
                })
            }
            Algorithm::ArfWcmp | Algorithm::ArfFlow | Algorithm::ArfPacket => arf_port(
                switch,
                &mut self.flows,
                &mut self.rng,
                packet,
                loads,
                &switch.quality.load(),
            ),
            Algorithm::Drill => drill(&mut self.rng, &mut self.drill_last, packet.valid, loads),
            Algorithm::Ofan => {
                let slot = slot_of(packet.key, packet.class);
                let n = switch.shared_pointer(slot).fetch_add(1, Ordering::Relaxed);
                switch.pointer_port(n, slot, packet.valid)
            }
            Algorithm::Pofan => {
                let pointer = &mut self.own_pointers[slot_of(packet.key, packet.class)];
                pointer.take(switch.table.rows(), packet.valid, switch.all_ports)
            }
        };
        if switch.config.algorithm.uses_queues() {
            add_load(loads, port, packet.frame_len);
        }
        Some(UpPort(port))
    }

    /// The up-port that [`choose`](Self::choose) would pick for `packet` if it were called now,
    /// for the algorithms that decide without the queues and without the path-quality view
    /// (ECMP, RSQ, Simple RR, Ofan, pOfan); `None` for the others, and when no port is valid.
    ///
    /// Reads the state and changes nothing: a caller that knows its next decisions ahead
    /// (the model, which prefetches the chosen port's queue before the decision) learns where
    /// each will go as long as no other decision of this pipe or switch comes in between.
    #[inline]
    pub fn predict(&self, packet: &Northbound) -> Option<UpPort> {
        if packet.valid.is_empty() {
            return None;
        }
        let switch = &*self.switch;
        let port = match switch.config.algorithm {
            Algorithm::Ecmp => {
                let hash = mix64(u64::from(packet.flow_hash ^ switch.salt));
                packet.valid.nth(mod_small(hash, packet.valid.count()))
            }
            Algorithm::Rsq => packet
                .valid
                .nth(self.rng.clone().below(packet.valid.count())),
            Algorithm::Rr => {
                let n = switch.rr_pointers[packet.class as usize].load(Ordering::Relaxed);
                SwitchBalancer::rr_port(n, packet.valid)
            }
            Algorithm::Ofan => {
                let slot = slot_of(packet.key, packet.class);
                let n = switch.shared_pointer(slot).load(Ordering::Relaxed);
                switch.pointer_port(n, slot, packet.valid)
            }
            Algorithm::Pofan => {
                let mut pointer = self.own_pointers[slot_of(packet.key, packet.class)];
                pointer.take(switch.table.rows(), packet.valid, switch.all_ports)
            }
            Algorithm::Jsq
            | Algorithm::Ar
            | Algorithm::Drill
            | Algorithm::ArfWcmp
            | Algorithm::ArfFlow
            | Algorithm::ArfPacket => return None,
        };
        Some(UpPort(port))
    }

    /// Where the switch's shared part lives, which every decision reads: its first and last
    /// byte. Reads only the pipe, so that a caller can prefetch the shared part before it asks
    /// [`pointer_address`](Self::pointer_address), which reads it. For callers that prefetch
    /// (the model, whose fabric does not fit in the cache); the addresses are only ever
    /// compared or prefetched.
    #[inline]
    pub fn shared_addresses(&self) -> [*const u8; 2] {
        let switch = Arc::as_ptr(&self.switch).cast::<u8>();
        [
            switch,
            switch.wrapping_add(std::mem::size_of::<SwitchBalancer>() - 1),
        ]
    }

    /// Where the pointer that [`choose`](Self::choose) takes for a packet to `key` of `class`
    /// lives (Ofan's shared one, pOfan's own; the switch's shared part for the algorithms
    /// without one). Reads the pipe and the shared part. As
    /// [`shared_addresses`](Self::shared_addresses), for prefetching only.
    #[inline]
    pub fn pointer_address(&self, key: DestKey, class: SizeClass) -> *const u8 {
        let slot = slot_of(key, class);
        match self.own_pointers.get(slot) {
            Some(own) => std::ptr::from_ref(own).cast(),
            None => self
                .switch
                .slots
                .get(slot)
                .map_or(Arc::as_ptr(&self.switch).cast::<u8>(), |shared| {
                    std::ptr::from_ref(shared).cast()
                }),
        }
    }

    /// Chooses the up-ports of a batch of packets, in order; `out[i]` is the choice for
    /// `packets[i]`.
    ///
    /// The decisions are exactly those of calling [`choose`](Self::choose) on each packet in
    /// turn, except that for `ofan` each shared pointer is advanced once per batch (chunks of
    /// [`MAX_BATCH`]) by the number of packets that use it, with one atomic `fetch_add`, and each
    /// packet gets its own value out of the reserved range. Concurrent workers therefore never
    /// lose or repeat a pointer value.
    ///
    /// # Panics
    /// If `out` is shorter than `packets`.
    pub fn choose_batch(
        &mut self,
        packets: &[Northbound],
        loads: &mut [PortLoad],
        out: &mut [Option<UpPort>],
    ) {
        assert!(
            out.len() >= packets.len(),
            "output slice shorter than the batch"
        );
        match self.switch.config.algorithm {
            Algorithm::Ofan => {
                for (chunk, out_chunk) in packets.chunks(MAX_BATCH).zip(out.chunks_mut(MAX_BATCH)) {
                    self.switch
                        .combine_ofan(&mut self.ofan_groups, chunk, out_chunk);
                }
            }
            Algorithm::Pofan => {
                self.switch
                    .pofan_batch(&mut self.own_pointers, packets, &mut out[..packets.len()]);
            }
            algorithm if algorithm.uses_path_quality() => {
                // The view once per batch, not once per packet.
                let quality = self.switch.path_quality();
                let switch = &*self.switch;
                for (packet, choice) in packets.iter().zip(out.iter_mut()) {
                    *choice = (!packet.valid.is_empty()).then(|| {
                        let port = arf_port(
                            switch,
                            &mut self.flows,
                            &mut self.rng,
                            packet,
                            loads,
                            &quality,
                        );
                        if algorithm.uses_queues() {
                            add_load(loads, port, packet.frame_len);
                        }
                        UpPort(port)
                    });
                }
            }
            _ => {
                for (packet, choice) in packets.iter().zip(out.iter_mut()) {
                    *choice = self.choose(packet, loads);
                }
            }
        }
    }
}

/// Shortest queue among `valid` by `metric`, ties broken uniformly at random.
#[inline]
fn shortest(
    rng: &mut LbRng,
    valid: PortMask,
    loads: &[PortLoad],
    metric: impl Fn(u8, &PortLoad) -> u32,
) -> u8 {
    let mut best = 0u8;
    let mut best_value = u32::MAX;
    let mut ties = 0u32;
    for port in valid.iter() {
        let value = metric(port, &loads[usize::from(port)]);
        if value < best_value {
            best = port;
            best_value = value;
            ties = 1;
        } else if value == best_value {
            // Reservoir sampling: the k-th tied port replaces the pick with probability 1/k.
            ties += 1;
            if rng.below(ties) == 0 {
                best = port;
            }
        }
    }
    best
}

/// Counts a packet of `frame_len` bytes just sent to `port` in its local queue, so that later
/// decisions of the batch see it.
#[inline]
fn add_load(loads: &mut [PortLoad], port: u8, frame_len: u32) {
    let load = &mut loads[usize::from(port)];
    load.packets += 1;
    load.bytes = load.bytes.saturating_add(frame_len);
}

/// The port the `arf-*` mode of `switch` picks for `packet` (one valid port at least) under the
/// view `quality`.
#[inline]
fn arf_port(
    switch: &SwitchBalancer,
    flows: &mut FlowTable,
    rng: &mut LbRng,
    packet: &Northbound,
    loads: &[PortLoad],
    quality: &PathQuality,
) -> u8 {
    let live = Northbound {
        valid: live_ports(packet.valid, packet.key, quality),
        ..*packet
    };
    let packet = &live;
    match switch.config.algorithm {
        Algorithm::ArfFlow => flows.choose(packet, quality, switch.flow_point(packet)),
        Algorithm::ArfPacket => {
            let unit = switch.config.buffer_bytes / REMOTE_PENALTY_DIVISOR;
            shortest(rng, packet.valid, loads, |port, load| {
                let poorness = u32::from(QUALITY_TOP - quality.remote(packet.key, port));
                load.bytes.saturating_add(poorness.saturating_mul(unit))
            })
        }
        // arf-wcmp (the only other caller).
        _ => weighted(packet.valid, packet.key, quality, switch.flow_point(packet)),
    }
}

/// The ports of `valid` whose path towards `key` is not dead ([`PathQuality::dead`]); all of
/// `valid` when none would remain (the routing plane has not withdrawn them yet, and the frames
/// must go somewhere).
#[inline]
fn live_ports(valid: PortMask, key: DestKey, quality: &PathQuality) -> PortMask {
    if !quality.any_dead() {
        return valid;
    }
    let live = valid.iter().fold(PortMask::EMPTY, |mask, port| {
        if quality.dead(key, port) {
            mask
        } else {
            mask.with(port)
        }
    });
    if live.is_empty() {
        valid
    } else {
        live
    }
}

/// The top quality level (15).
const QUALITY_TOP: u8 = crate::arf::QUALITY_LEVELS - 1;

/// `arf-packet`: a remote level of 0 weighs like a local queue of `buffer / 4` (15 steps of
/// `buffer / 60`), enough to send a packet around a remote bottleneck unless the local queues
/// differ by more.
const REMOTE_PENALTY_DIVISOR: u32 = 4 * QUALITY_TOP as u32;

/// Weighted flow placement (`arf-wcmp`, and `arf-flow`'s placement): the flow's `point` picks a
/// port of `valid` with probability proportional to `1 + path quality`.
#[inline]
fn weighted(valid: PortMask, key: DestKey, quality: &PathQuality, point: u64) -> u8 {
    let weight = |port| 1 + u32::from(quality.path(key, port));
    let total: u32 = valid.iter().map(weight).sum();
    let mut rank = (point % u64::from(total)) as u32;
    for port in valid.iter() {
        let w = weight(port);
        if rank < w {
            return port;
        }
        rank -= w;
    }
    unreachable!("rank < total weight")
}

/// DRILL(2, 1): two random valid ports and the remembered one; the least loaded wins (ties at
/// random) and is remembered.
#[inline]
fn drill(rng: &mut LbRng, last: &mut Option<u8>, valid: PortMask, loads: &[PortLoad]) -> u8 {
    let count = valid.count();
    let mut candidates = PortMask::EMPTY
        .with(valid.nth(rng.below(count)))
        .with(valid.nth(rng.below(count)));
    if let Some(remembered) = last.filter(|&port| valid.contains(port)) {
        candidates = candidates.with(remembered);
    }
    let port = shortest(rng, candidates, loads, |_, load| load.bytes);
    *last = Some(port);
    port
}

impl SwitchBalancer {
    /// Ofan's combining step for one chunk of at most [`MAX_BATCH`] packets: group the packets
    /// by pointer, reserve each group's values with one `fetch_add`, then walk each group's
    /// reserved range in packet order.
    fn combine_ofan(
        &self,
        groups: &mut OfanGroups,
        packets: &[Northbound],
        out: &mut [Option<UpPort>],
    ) {
        debug_assert!(packets.len() <= MAX_BATCH);
        let OfanGroups {
            marks,
            chunk,
            slot: group_slot,
            size: group_size,
            cursor: group_cursor,
            packet_group,
        } = groups;
        *chunk += 1;
        if *chunk == CHUNK_WRAP {
            marks.fill(0);
            *chunk = 1;
        }
        let chunk = *chunk;
        // The slice itself, not the box: its address and length then stay in registers.
        let marks = &mut **marks;
        let mut group_count = 0usize;
        for (packet, group_of) in packets.iter().zip(packet_group.iter_mut()) {
            if packet.valid.is_empty() {
                *group_of = NO_GROUP;
                continue;
            }
            let slot = slot_of(packet.key, packet.class);
            let mark = &mut marks[slot];
            let group = if *mark >> 8 == chunk {
                let group = (*mark & 0xff) as usize;
                group_size[group] += 1;
                group
            } else {
                let group = group_count;
                *mark = chunk << 8 | group as u32;
                group_slot[group] = slot as u32;
                group_size[group] = 1;
                group_count += 1;
                group
            };
            *group_of = group as u8;
        }
        let width = self.config.up_ports;
        for ((cursor, &slot), &size) in group_cursor
            .iter_mut()
            .zip(group_slot.iter())
            .zip(group_size.iter())
            .take(group_count)
        {
            let slot = slot as usize;
            let base = self
                .shared_pointer(slot)
                .fetch_add(u64::from(size), Ordering::Relaxed);
            *cursor = Rotation::new(base, self.slots[slot].row, width);
        }
        let (rows, all_ports) = (self.table.rows(), self.all_ports);
        for ((packet, &group), choice) in
            packets.iter().zip(packet_group.iter()).zip(out.iter_mut())
        {
            let cursor = usize::from(group);
            *choice = if packet.valid == all_ports {
                Some(UpPort(group_cursor[cursor].take_any(rows)))
            } else if group == NO_GROUP {
                None
            } else {
                Some(UpPort(group_cursor[cursor].take(
                    rows,
                    packet.valid,
                    all_ports,
                )))
            };
        }
    }
}

#[cfg(test)]
mod tests;
