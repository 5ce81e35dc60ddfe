//! Unit and property tests of the load-balancing core.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn config(algorithm: Algorithm, up_ports: u8, dest_keys: u32, pipes: u16, seed: u64) -> LbConfig {
    LbConfig {
        algorithm,
        up_ports,
        dest_keys,
        pipes,
        buffer_bytes: 800_000,
        seed,
    }
}

fn pipe0(cfg: LbConfig) -> PipeBalancer {
    SwitchBalancer::new(cfg).unwrap().pipe(0).unwrap()
}

fn packet(key: u32, class: SizeClass, valid: PortMask) -> Northbound {
    Northbound {
        key: DestKey(key),
        class,
        valid,
        flow_hash: key.wrapping_mul(2_654_435_761),
        frame_len: 1000,
    }
}

/// Chooses `count` packets of one pointer and returns the ports.
fn draw(pipe: &mut PipeBalancer, pkt: &Northbound, count: usize) -> Vec<u8> {
    (0..count)
        .map(|_| pipe.choose(pkt, &mut []).unwrap().0)
        .collect()
}

/// Asserts that every window of `valid.count()` consecutive ports (aligned on rounds) uses each
/// valid port exactly once.
fn assert_rounds(ports: &[u8], valid: PortMask) {
    let v = valid.count() as usize;
    for (round, window) in ports.chunks_exact(v).enumerate() {
        let mut seen = PortMask::EMPTY;
        for &port in window {
            assert!(
                valid.contains(port),
                "round {round}: invalid port {port} in {window:?}"
            );
            assert!(
                !seen.contains(port),
                "round {round}: port {port} twice in {window:?}"
            );
            seen = seen.with(port);
        }
        assert_eq!(seen, valid, "round {round}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// From any start (any seed, any number of packets already sent), each up-port is chosen
    /// exactly once per w consecutive packets of one pointer, for every w in 1..=64.
    #[test]
    fn pointer_visits_each_port_once_per_w_packets(
        algorithm in prop_oneof![Just(Algorithm::Ofan), Just(Algorithm::Pofan)],
        width in 1u8..=64,
        seed in any::<u64>(),
        key in 0u32..40,
        ack in any::<bool>(),
        skip in 0usize..200,
    ) {
        let mut pipe = pipe0(config(algorithm, width, 40, 1, seed));
        let class = if ack { SizeClass::Ack } else { SizeClass::Data };
        let pkt = packet(key, class, PortMask::all(width));
        draw(&mut pipe, &pkt, skip);
        let ports = draw(&mut pipe, &pkt, 3 * usize::from(width));
        // Every window of w consecutive packets, aligned or not, is a permutation.
        for start in 0..=(ports.len() - usize::from(width)) {
            assert_rounds(&ports[start..start + usize::from(width)], PortMask::all(width));
        }
    }

    /// With failed ports, each remaining valid port gets exactly one packet per round.
    #[test]
    fn pointer_skips_failed_ports(
        algorithm in prop_oneof![Just(Algorithm::Ofan), Just(Algorithm::Pofan)],
        width in 1u8..=64,
        failed in any::<u64>(),
        seed in any::<u64>(),
        key in 0u32..40,
        skip in 0usize..100,
    ) {
        let valid = PortMask(PortMask::all(width).0 & !failed);
        prop_assume!(!valid.is_empty());
        let mut pipe = pipe0(config(algorithm, width, 40, 1, seed));
        let pkt = packet(key, SizeClass::Data, valid);
        draw(&mut pipe, &pkt, skip);
        let v = valid.count() as usize;
        let ports = draw(&mut pipe, &pkt, 3 * v);
        for start in 0..=(ports.len() - v) {
            assert_rounds(&ports[start..start + v], valid);
        }
    }

    /// Data and ACK pointers of every key start ⌊w/2⌋ apart, for Ofan and for every pOfan pipe.
    #[test]
    fn ack_pointer_starts_half_a_rotation_after_data(width in 1u8..=64, seed in any::<u64>()) {
        let keys = 32u32;
        let ofan = SwitchBalancer::new(config(Algorithm::Ofan, width, keys, 1, seed)).unwrap();
        let pofan = SwitchBalancer::new(config(Algorithm::Pofan, width, keys, 4, seed)).unwrap();
        let half = u64::from(width / 2);
        for key in 0..keys {
            let data = slot_of(DestKey(key), SizeClass::Data);
            let ack = slot_of(DestKey(key), SizeClass::Ack);
            let d = ofan.shared_pointer(data).load(Ordering::Relaxed);
            let a = ofan.shared_pointer(ack).load(Ordering::Relaxed);
            prop_assert!(d < u64::from(width));
            prop_assert_eq!(a, (d + half) % u64::from(width));
            for pipe in 0..4 {
                let p = pofan.pipe(pipe).unwrap();
                prop_assert_eq!(p.own_pointers[ack].count, (p.own_pointers[data].count + half) % u64::from(width));
                prop_assert_eq!(u64::from(p.own_pointers[ack].position), p.own_pointers[ack].count);
            }
        }
    }

    /// Batched Ofan and pOfan decisions equal one-by-one decisions from the same seed.
    #[test]
    fn batch_equals_sequential(
        algorithm in prop_oneof![Just(Algorithm::Ofan), Just(Algorithm::Pofan)],
        width in 1u8..=16,
        seed in any::<u64>(),
        keys in proptest::collection::vec((0u32..6, any::<bool>(), any::<u16>()), 1..200),
    ) {
        let packets: Vec<Northbound> = keys
            .iter()
            .map(|&(key, ack, mask)| {
                let class = if ack { SizeClass::Ack } else { SizeClass::Data };
                // Key-dependent failure pattern: the valid set is a function of the key.
                let valid = if mask % 3 == 0 {
                    PortMask(PortMask::all(width).0 & !(1u64 << (key % u32::from(width))))
                } else {
                    PortMask::all(width)
                };
                packet(key, class, valid)
            })
            .collect();
        let mut one_by_one = pipe0(config(algorithm, width, 6, 1, seed));
        let sequential: Vec<Option<UpPort>> =
            packets.iter().map(|p| one_by_one.choose(p, &mut [])).collect();
        let mut batched = pipe0(config(algorithm, width, 6, 1, seed));
        let mut out = vec![None; packets.len()];
        batched.choose_batch(&packets, &mut [], &mut out);
        prop_assert_eq!(sequential, out);
    }
}

/// Paper appendix F.2 written out from its formula, independently of `order.rs`: no
/// [`PortOrder`], [`id_bits`] or pointer-id helper of the crate is used, only the basis table
/// (the paper's global constant `P`, drawn offline).
mod f2 {
    use super::SizeClass;

    /// `b = ⌈log₂ w⌉`: the smallest `b` with `2^b ≥ w`.
    fn ceil_log2(width: u32) -> u32 {
        let mut bits = 0;
        while (1u32 << bits) < width {
            bits += 1;
        }
        bits
    }

    /// `id = d + N_d · t`: destination `d` of `N_d`, packet type `t` (0 data, 1 ACK).
    pub fn pointer_id(destination: u32, destinations: u32, class: SizeClass) -> u32 {
        let packet_type = match class {
            SizeClass::Data => 0,
            SizeClass::Ack => 1,
        };
        destination + destinations * packet_type
    }

    /// `π_id(0), …, π_id(w−1)` with `π_id(i) = (xor_w(P[i], id₁) + id₂) mod w`, where
    /// `xor_w(v, x) = v ⊕ x` if that is `< w`, else `v`; `id₁` is the low `b` bits of `id` and
    /// `id₂` its high bits, taken mod `w`.
    pub fn port_order(basis: &[u8], id: u32) -> Vec<u8> {
        let width = basis.len() as u32;
        let bits = ceil_log2(width);
        let id1 = id % (1 << bits);
        let id2 = (id >> bits) % width;
        basis
            .iter()
            .map(|&value| {
                let value = u32::from(value);
                let flipped = value ^ id1;
                let xor_w = if flipped < width { flipped } else { value };
                ((xor_w + id2) % width) as u8
            })
            .collect()
    }
}

/// The pointer rule of the module documentation over the F.2 orders of [`f2`]: the packet that
/// draws value `n` from the pointer of `(key, class)` takes the `(n mod v)`-th valid port in
/// that pointer's order, with a true `%`. Nothing of the balancer is used but where each
/// pointer starts, which is the balancer's seeded random choice (paper F.2: "starting at a
/// random position"); it is read from the balancer's state before any packet, and checked
/// against the documented rule (data in `0..w`, the ACK pointer `⌊w/2⌋` after it).
struct ReferencePointers {
    /// Per `(key, class)`, at `key · 2 + class`: the port order.
    orders: Vec<Vec<u8>>,
    /// Per `(key, class)`: the next pointer value.
    counts: Vec<u64>,
}

impl ReferencePointers {
    /// The pointers `pipe` will use (for Ofan, its switch's shared ones), as they start.
    fn of(pipe: &PipeBalancer) -> Self {
        let cfg = pipe.switch().config();
        let (width, keys) = (cfg.up_ports, cfg.dest_keys);
        let mut orders = Vec::new();
        let mut counts = Vec::new();
        for key in 0..keys {
            for class in [SizeClass::Data, SizeClass::Ack] {
                let id = f2::pointer_id(key, keys, class);
                orders.push(f2::port_order(BASIS[usize::from(width)], id));
                let slot = slot_of(DestKey(key), class);
                counts.push(match cfg.algorithm {
                    Algorithm::Ofan => pipe.switch.shared_pointer(slot).load(Ordering::Relaxed),
                    _ => pipe.own_pointers[slot].count,
                });
            }
        }
        let w = u64::from(width);
        for pair in counts.chunks(2) {
            assert!(
                pair[0] < w,
                "a data pointer starts at {} ≥ w = {w}",
                pair[0]
            );
            assert_eq!(pair[1], (pair[0] + w / 2) % w, "ACK start of {pair:?}");
        }
        Self { orders, counts }
    }

    fn choose(&mut self, packet: &Northbound) -> Option<UpPort> {
        if packet.valid.is_empty() {
            return None;
        }
        let class = match packet.class {
            SizeClass::Data => 0,
            SizeClass::Ack => 1,
        };
        let pointer = packet.key.0 as usize * 2 + class;
        let n = self.counts[pointer];
        self.counts[pointer] += 1;
        let rank = n % u64::from(packet.valid.count());
        self.orders[pointer]
            .iter()
            .copied()
            .filter(|&port| packet.valid.contains(port))
            .nth(rank as usize)
            .map(UpPort)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    /// The implementation's port sequences are the F.2 formula's, for every width and any id.
    #[test]
    fn port_orders_are_the_f2_formula(width in 1u8..=64, id in any::<u32>()) {
        let order = PortOrder::new(width);
        prop_assert_eq!(
            order.sequence(order.id(id)),
            f2::port_order(BASIS[usize::from(width)], id)
        );
    }
}

/// Packets over `keys` keys, each with every port valid, a random subset (possibly empty), or
/// every port but one.
fn mixed_packets(width: u8, spec: &[(u32, bool, u8, u64)]) -> Vec<Northbound> {
    spec.iter()
        .map(|&(key, ack, mode, bits)| {
            let all = PortMask::all(width);
            let valid = match mode % 4 {
                0 => PortMask(all.0 & bits),
                1 => all.without((bits % u64::from(width)) as u8),
                _ => all,
            };
            let class = if ack { SizeClass::Ack } else { SizeClass::Data };
            packet(key, class, valid)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Ofan and pOfan decide exactly what the plain rule over the F.2 formula decides
    /// ([`ReferencePointers`]): through every fast path (port table, kept positions, pOfan's
    /// batch loop, Ofan's grouped batches), one by one and in batches of any size, with and
    /// without failed ports, for every w, key count, pipe and seed.
    #[test]
    fn pointers_follow_the_f2_reference_through_every_fast_path(
        algorithm in prop_oneof![Just(Algorithm::Ofan), Just(Algorithm::Pofan)],
        width in 1u8..=64,
        keys in 1u32..10,
        pipes in 1u16..4,
        pipe_pick in any::<u16>(),
        seed in any::<u64>(),
        spec in proptest::collection::vec((0u32..10, any::<bool>(), any::<u8>(), any::<u64>()), 1..300),
        chunk in 1usize..150,
    ) {
        let pipe = pipe_pick % pipes;
        let spec: Vec<_> = spec.into_iter().map(|(key, ack, mode, bits)| (key % keys, ack, mode, bits)).collect();
        let packets = mixed_packets(width, &spec);
        let cfg = config(algorithm, width, keys, pipes, seed);
        let switch = SwitchBalancer::new(cfg.clone()).unwrap();
        let mut one_by_one = switch.pipe(pipe).unwrap();
        let mut reference = ReferencePointers::of(&one_by_one);
        let expected: Vec<Option<UpPort>> = packets.iter().map(|p| reference.choose(p)).collect();

        let sequential: Vec<Option<UpPort>> =
            packets.iter().map(|p| one_by_one.choose(p, &mut [])).collect();
        prop_assert_eq!(&sequential, &expected);

        let switch = SwitchBalancer::new(cfg).unwrap();
        let mut batched = switch.pipe(pipe).unwrap();
        let mut out = vec![Some(UpPort(u8::MAX)); packets.len()];
        for (packets, out) in packets.chunks(chunk).zip(out.chunks_mut(chunk)) {
            batched.choose_batch(packets, &mut [], out);
        }
        prop_assert_eq!(&out, &expected);
    }
}

#[test]
fn ofan_group_marks_survive_the_chunk_number_wrapping() {
    let mut pipe = pipe0(config(Algorithm::Ofan, 6, 5, 1, 4));
    let mut reference = ReferencePointers::of(&pipe);
    let mut rng = LbRng::new(8);
    let spec: Vec<_> = (0..64 * 8)
        .map(|_| {
            (
                rng.below(5),
                rng.below(4) == 0,
                rng.below(8) as u8,
                rng.next_u64(),
            )
        })
        .collect();
    let packets = mixed_packets(6, &spec);
    let mut batches = packets.chunks(64);
    let mut out = [None; 64];
    let mut check = |pipe: &mut PipeBalancer, batch: &[Northbound]| {
        pipe.choose_batch(batch, &mut [], &mut out[..batch.len()]);
        let expected: Vec<_> = batch.iter().map(|p| reference.choose(p)).collect();
        assert_eq!(&out[..batch.len()], &expected[..]);
    };
    check(&mut pipe, batches.next().unwrap());
    // Stale marks from chunk 1 would alias the first chunk after the wrap if not cleared.
    pipe.ofan_groups.chunk = CHUNK_WRAP - 3;
    for batch in batches {
        check(&mut pipe, batch);
    }
    assert!(pipe.ofan_groups.chunk < 10, "the chunk number wrapped");
}

#[test]
fn pofan_with_one_pipe_of_all_ports_equals_ofan() {
    for width in [1u8, 2, 4, 6, 8, 32] {
        let mut ofan = pipe0(config(Algorithm::Ofan, width, 10, 1, 99));
        let mut pofan = pipe0(config(Algorithm::Pofan, width, 10, 1, 99));
        let mut rng = LbRng::new(5);
        for _ in 0..2_000 {
            let class = if rng.below(4) == 0 {
                SizeClass::Ack
            } else {
                SizeClass::Data
            };
            let pkt = packet(rng.below(10), class, PortMask::all(width));
            assert_eq!(ofan.choose(&pkt, &mut []), pofan.choose(&pkt, &mut []));
        }
    }
}

#[test]
fn pofan_pipes_keep_independent_pointers() {
    let switch = SwitchBalancer::new(config(Algorithm::Pofan, 8, 4, 2, 3)).unwrap();
    let mut a = switch.pipe(0).unwrap();
    let mut b = switch.pipe(1).unwrap();
    let pkt = packet(1, SizeClass::Data, PortMask::all(8));
    let before = b.own_pointers.clone();
    draw(&mut a, &pkt, 5);
    assert_eq!(
        b.own_pointers, before,
        "pipe 1 must not see pipe 0's packets"
    );
    // Each pipe on its own still rotates perfectly.
    assert_rounds(&draw(&mut b, &pkt, 16), PortMask::all(8));
}

#[test]
fn pointers_of_different_keys_follow_different_orders() {
    // w = 6 at an aggregation switch of a k = 12 fat tree: 12 pod keys.
    let switch = SwitchBalancer::new(config(Algorithm::Ofan, 6, 12, 1, 0)).unwrap();
    let orders: std::collections::HashSet<Vec<u8>> = (0..12)
        .map(|key| {
            switch
                .table
                .rows()
                .ports(switch.slots[slot_of(DestKey(key), SizeClass::Data)].row)
                .to_vec()
        })
        .map(|seq| {
            let zero = seq.iter().position(|&p| p == 0).unwrap();
            [&seq[zero..], &seq[..zero]].concat()
        })
        .collect();
    assert!(
        orders.len() >= 10,
        "only {} distinct cyclic orders for 12 keys",
        orders.len()
    );
}

#[test]
fn multithreaded_ofan_loses_no_increment() {
    const THREADS: u16 = 4;
    const PACKETS: usize = 20_000;
    const KEYS: u32 = 7;
    const WIDTH: u8 = 6;
    let width = WIDTH;
    fn valid_of(key: u32) -> PortMask {
        if key == 3 {
            PortMask::all(WIDTH).without(2)
        } else {
            PortMask::all(WIDTH)
        }
    }
    fn stream(thread: u16) -> Vec<Northbound> {
        let mut rng = LbRng::new(u64::from(thread));
        (0..PACKETS)
            .map(|_| {
                let key = rng.below(KEYS);
                let class = if rng.below(3) == 0 {
                    SizeClass::Ack
                } else {
                    SizeClass::Data
                };
                packet(key, class, valid_of(key))
            })
            .collect()
    }
    let count = |tallies: &mut HashMap<(u32, SizeClass, u8), u64>,
                 pkts: &[Northbound],
                 out: &[Option<UpPort>]| {
        for (pkt, choice) in pkts.iter().zip(out) {
            *tallies
                .entry((pkt.key.0, pkt.class, choice.unwrap().0))
                .or_default() += 1;
        }
    };

    // One thread handles every packet.
    let mut single = pipe0(config(Algorithm::Ofan, width, KEYS, THREADS, 11));
    let mut expected = HashMap::new();
    for thread in 0..THREADS {
        let pkts = stream(thread);
        let mut out = vec![None; pkts.len()];
        single.choose_batch(&pkts, &mut [], &mut out);
        count(&mut expected, &pkts, &out);
    }

    // Four workers share the pointers, each batching its own stream.
    let switch = SwitchBalancer::new(config(Algorithm::Ofan, width, KEYS, THREADS, 11)).unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let mut pipe = switch.pipe(thread).unwrap();
            std::thread::spawn(move || {
                let pkts = stream(thread);
                let mut out = vec![None; pkts.len()];
                for (chunk, out_chunk) in pkts.chunks(32).zip(out.chunks_mut(32)) {
                    pipe.choose_batch(chunk, &mut [], out_chunk);
                }
                (pkts, out)
            })
        })
        .collect();
    let mut actual = HashMap::new();
    for handle in handles {
        let (pkts, out) = handle.join().unwrap();
        count(&mut actual, &pkts, &out);
    }
    assert_eq!(expected, actual);
    // And the counts are the perfect split: per (key, class), ports differ by at most one.
    for key in 0..KEYS {
        for class in [SizeClass::Data, SizeClass::Ack] {
            let per_port: Vec<u64> = valid_of(key)
                .iter()
                .map(|port| actual.get(&(key, class, port)).copied().unwrap_or(0))
                .collect();
            let spread = per_port.iter().max().unwrap() - per_port.iter().min().unwrap();
            assert!(spread <= 1, "key {key} {class:?}: {per_port:?}");
        }
    }
}

#[test]
fn ecmp_pins_each_flow_and_spreads_flows() {
    let mut pipe = pipe0(config(Algorithm::Ecmp, 8, 1, 1, 1));
    let mut per_port = [0u32; 8];
    for flow in 0..8_000u32 {
        let pkt = Northbound {
            flow_hash: flow.wrapping_mul(0x9e37_79b9),
            ..packet(0, SizeClass::Data, PortMask::all(8))
        };
        let first = pipe.choose(&pkt, &mut []).unwrap();
        for _ in 0..3 {
            assert_eq!(pipe.choose(&pkt, &mut []), Some(first), "flow {flow} moved");
        }
        per_port[usize::from(first.0)] += 1;
    }
    for count in per_port {
        assert!((850..1150).contains(&count), "{per_port:?}");
    }
    // A different switch salt sends the same flow elsewhere for some flows.
    let mut other = pipe0(config(Algorithm::Ecmp, 8, 1, 1, 2));
    let moved = (0..100u32)
        .filter(|&flow| {
            let pkt = Northbound {
                flow_hash: flow,
                ..packet(0, SizeClass::Data, PortMask::all(8))
            };
            pipe.choose(&pkt, &mut []) != other.choose(&pkt, &mut [])
        })
        .count();
    assert!(moved > 50, "salt has no effect: {moved}");
}

#[test]
fn rsq_is_uniform_over_valid_ports_only() {
    let valid = PortMask::all(6).without(4);
    let mut pipe = pipe0(config(Algorithm::Rsq, 6, 1, 1, 4));
    let mut per_port = [0u32; 6];
    for _ in 0..50_000 {
        per_port[usize::from(
            pipe.choose(&packet(0, SizeClass::Data, valid), &mut [])
                .unwrap()
                .0,
        )] += 1;
    }
    assert_eq!(per_port[4], 0);
    for port in valid.iter() {
        assert!(
            (9_400..10_600).contains(&per_port[usize::from(port)]),
            "{per_port:?}"
        );
    }
}

#[test]
fn rr_rotates_one_pointer_across_all_destinations() {
    let mut pipe = pipe0(config(Algorithm::Rr, 4, 8, 1, 4));
    let ports: Vec<u8> = (0..16)
        .map(|i| {
            pipe.choose(&packet(i % 8, SizeClass::Data, PortMask::all(4)), &mut [])
                .unwrap()
                .0
        })
        .collect();
    assert_rounds(&ports, PortMask::all(4));
    // Consecutive packets take consecutive ports, whatever their destination.
    for pair in ports.windows(2) {
        assert_eq!(pair[1], (pair[0] + 1) % 4, "{ports:?}");
    }
}

/// Simple RR keeps one pointer per size class: ACKs interleaved at any points do not shift the
/// data packets' rotation (paper §3.3: with w paced senders, a sender's next data packet finds
/// the pointer back on its port), every pipe shares the switch's pointers, and the ACK pointer
/// starts half a rotation after the data pointer.
#[test]
fn rr_keeps_data_and_ack_rotations_apart() {
    let w = 6u8;
    let switch = SwitchBalancer::new(config(Algorithm::Rr, w, 8, 2, 9)).unwrap();
    assert_eq!(switch.pointer_count(), 2);
    let mut pipes = [switch.pipe(0).unwrap(), switch.pipe(1).unwrap()];
    let mut rng = LbRng::new(5);
    let (mut data, mut acks) = (Vec::new(), Vec::new());
    for i in 0..600u32 {
        let class = if rng.below(3) == 0 {
            SizeClass::Ack
        } else {
            SizeClass::Data
        };
        let pipe = &mut pipes[(i % 2) as usize];
        let port = pipe
            .choose(&packet(i % 8, class, PortMask::all(w)), &mut [])
            .unwrap()
            .0;
        match class {
            SizeClass::Data => data.push(port),
            SizeClass::Ack => acks.push(port),
        }
    }
    for ports in [&data, &acks] {
        for pair in ports.windows(2) {
            assert_eq!(pair[1], (pair[0] + 1) % w, "{ports:?}");
        }
    }
    assert_eq!(acks[0], (data[0] + w / 2) % w);
}

#[test]
fn jsq_takes_the_shortest_queue_and_breaks_ties_at_random() {
    let mut pipe = pipe0(config(Algorithm::Jsq, 4, 1, 1, 4));
    let valid = PortMask::all(4);
    let mut loads = [
        PortLoad {
            packets: 3,
            bytes: 3000,
        },
        PortLoad {
            packets: 1,
            bytes: 500,
        },
        PortLoad {
            packets: 2,
            bytes: 2000,
        },
        PortLoad {
            packets: 1,
            bytes: 500,
        },
    ];
    let mut picks = [0u32; 4];
    for _ in 0..1_000 {
        let mut scratch = loads;
        picks[usize::from(
            pipe.choose(&packet(0, SizeClass::Data, valid), &mut scratch)
                .unwrap()
                .0,
        )] += 1;
    }
    assert_eq!(picks[0] + picks[2], 0, "{picks:?}");
    assert!(picks[1] > 400 && picks[3] > 400, "{picks:?}");
    // The chosen queue grows by the packet, so the next choice moves on.
    let first = pipe
        .choose(&packet(0, SizeClass::Data, valid), &mut loads)
        .unwrap()
        .0;
    let second = pipe
        .choose(&packet(0, SizeClass::Data, valid), &mut loads)
        .unwrap()
        .0;
    assert_ne!(first, second);
    assert_eq!(
        loads[usize::from(first)],
        PortLoad {
            packets: 2,
            bytes: 1500
        }
    );
    // A shorter but invalid port is never taken.
    let pick = pipe.choose(
        &packet(0, SizeClass::Data, valid.without(1).without(3)),
        &mut loads,
    );
    assert_eq!(pick, Some(UpPort(2)));
}

#[test]
fn ar_quantizes_queues_to_four_levels() {
    let buffer = 100_000;
    assert_eq!(ar_level(0, buffer), 0);
    assert_eq!(ar_level(4_999, buffer), 0);
    assert_eq!(ar_level(5_000, buffer), 1);
    assert_eq!(ar_level(9_999, buffer), 1);
    assert_eq!(ar_level(10_000, buffer), 2);
    assert_eq!(ar_level(19_999, buffer), 2);
    assert_eq!(ar_level(20_000, buffer), 3);
    assert_eq!(ar_level(u32::MAX, buffer), 3);

    // Queues of 1 kB and 4 kB are both level 0 for AR (so it picks at random between them)
    // while JSQ always takes the 1 kB one.
    let mut ar = pipe0(LbConfig {
        buffer_bytes: buffer,
        ..config(Algorithm::Ar, 3, 1, 1, 8)
    });
    let loads = [
        PortLoad {
            packets: 1,
            bytes: 1_000,
        },
        PortLoad {
            packets: 4,
            bytes: 4_000,
        },
        PortLoad {
            packets: 30,
            bytes: 30_000,
        },
    ];
    let mut picks = [0u32; 3];
    for _ in 0..1_000 {
        let mut scratch = loads;
        picks[usize::from(
            ar.choose(&packet(0, SizeClass::Data, PortMask::all(3)), &mut scratch)
                .unwrap()
                .0,
        )] += 1;
    }
    assert_eq!(picks[2], 0, "{picks:?}");
    assert!(picks[0] > 400 && picks[1] > 400, "{picks:?}");
}

/// Loads of `width` ports whose byte counts rank them as `ranking` says (`ranking[r]` is the
/// port with the `r`-th shortest queue: `1000 · (r + 1)` bytes), while their packet counts rank
/// them the other way round (`width − r` packets), so that a choice by bytes and a choice by
/// packets differ.
fn ranked_loads(ranking: &[u8]) -> Vec<PortLoad> {
    let mut loads = vec![PortLoad::default(); ranking.len()];
    for (rank, &port) in ranking.iter().enumerate() {
        loads[usize::from(port)] = PortLoad {
            packets: (ranking.len() - rank) as u32,
            bytes: 1000 * (rank as u32 + 1),
        };
    }
    loads
}

/// A uniformly random order of the ports `0..width`.
fn shuffled(rng: &mut LbRng, width: u8) -> Vec<u8> {
    let mut ports: Vec<u8> = (0..width).collect();
    for i in (1..ports.len()).rev() {
        ports.swap(i, rng.below(i as u32 + 1) as usize);
    }
    ports
}

/// One decision over a copy of `loads` (queues do not grow between decisions), with a flow hash
/// that changes from call to call so that ECMP is not pinned to one port by the test.
fn decide(pipe: &mut PipeBalancer, loads: &[PortLoad], draw: u32) -> u8 {
    let width = loads.len() as u8;
    let packet = Northbound {
        flow_hash: mix64(u64::from(draw)) as u32,
        ..packet(0, SizeClass::Data, PortMask::all(width))
    };
    let mut scratch = loads.to_vec();
    pipe.choose(&packet, &mut scratch).unwrap().0
}

/// JSQ: every decision takes the queue shortest in bytes (not in packets), wherever it is.
fn jsq_behaviour(algorithm: Algorithm) -> Result<(), String> {
    let mut pipe = pipe0(config(algorithm, 8, 1, 1, 31));
    let mut rng = LbRng::new(1);
    for draw in 0..400 {
        let ranking = shuffled(&mut rng, 8);
        let port = decide(&mut pipe, &ranked_loads(&ranking), draw);
        if port != ranking[0] {
            return Err(format!(
                "draw {draw}: port {port}, not the shortest queue {} of {ranking:?}",
                ranking[0]
            ));
        }
    }
    Ok(())
}

/// AR: queues of the same level (< 5 %, < 10 %, < 20 %, ≥ 20 % of the buffer) are equal to it,
/// so it picks between two level-0 queues of 0.5 and 4 kB at random, and never a queue of a
/// higher level (7 kB: level 1; 50 kB: level 3), wherever the four queues are.
fn ar_behaviour(algorithm: Algorithm) -> Result<(), String> {
    let mut pipe = pipe0(LbConfig {
        buffer_bytes: 100_000,
        ..config(algorithm, 4, 1, 1, 32)
    });
    let mut rng = LbRng::new(2);
    let bytes = [500, 4_000, 7_000, 50_000];
    let mut picks = [0u32; 4];
    for draw in 0..2_000 {
        let ranking = shuffled(&mut rng, 4);
        let mut loads = vec![PortLoad::default(); 4];
        for (&port, &queue) in ranking.iter().zip(&bytes) {
            loads[usize::from(port)] = PortLoad {
                packets: queue / 500,
                bytes: queue,
            };
        }
        let port = decide(&mut pipe, &loads, draw);
        picks[ranking.iter().position(|&p| p == port).unwrap()] += 1;
    }
    // 1,000 expected for each level-0 queue; the binomial sd is 22.
    if (900..=1100).contains(&picks[0])
        && (900..=1100).contains(&picks[1])
        && picks[2] + picks[3] == 0
    {
        Ok(())
    } else {
        Err(format!(
            "picks of the 0.5 / 4 / 7 / 50 kB queues: {picks:?}"
        ))
    }
}

/// DRILL(2, 1). Without memory (a fresh balancer's first decision) it takes the shorter of two
/// uniform samples drawn with replacement, so it takes the queue of rank `r` (of `w`) with
/// probability `((w−r)² − (w−r−1)²) / w²`: 15/64 for the shortest of 8, 1/64 for the longest;
/// neither always the shortest (JSQ) nor uniform (random choice), nor the distribution of one
/// sample or three. With memory, over fixed queues, the remembered port is always a candidate,
/// so a decision is never worse than the one before.
fn drill_behaviour(algorithm: Algorithm) -> Result<(), String> {
    const WIDTH: u8 = 8;
    const FRESH: u32 = 4_000;
    let mut rng = LbRng::new(3);
    let mut by_rank = [0u32; WIDTH as usize];
    for draw in 0..FRESH {
        let mut pipe = pipe0(config(algorithm, WIDTH, 1, 1, u64::from(draw)));
        let ranking = shuffled(&mut rng, WIDTH);
        let port = decide(&mut pipe, &ranked_loads(&ranking), draw);
        by_rank[ranking.iter().position(|&p| p == port).unwrap()] += 1;
    }
    let w = f64::from(WIDTH);
    for (rank, &count) in by_rank.iter().enumerate() {
        let above = w - rank as f64;
        let p = (above * above - (above - 1.0) * (above - 1.0)) / (w * w);
        let expected = f64::from(FRESH) * p;
        let sd = (expected * (1.0 - p)).sqrt();
        if (f64::from(count) - expected).abs() > 5.0 * sd {
            return Err(format!(
                "first decisions by queue rank {by_rank:?}: rank {rank} {count} times, expected \
                 {expected:.0} ± {sd:.0}"
            ));
        }
    }
    let mut pipe = pipe0(config(algorithm, WIDTH, 1, 1, 33));
    let ranking = shuffled(&mut rng, WIDTH);
    let loads = ranked_loads(&ranking);
    let mut previous = u32::MAX;
    for draw in 0..200 {
        let port = decide(&mut pipe, &loads, draw);
        let bytes = loads[usize::from(port)].bytes;
        if bytes > previous {
            return Err(format!(
                "decision {draw} took a {bytes} B queue after a {previous} B one"
            ));
        }
        previous = bytes;
    }
    Ok(())
}

/// Runs `behaviour` for every algorithm: `owner` must show it, and no other algorithm may.
fn assert_only(owner: Algorithm, behaviour: fn(Algorithm) -> Result<(), String>) {
    for algorithm in Algorithm::ALL {
        match behaviour(algorithm) {
            Ok(()) => assert_eq!(algorithm, owner, "{algorithm} shows {owner}'s behaviour"),
            Err(why) => assert_ne!(algorithm, owner, "{owner}: {why}"),
        }
    }
}

#[test]
fn only_jsq_always_takes_the_shortest_queue_in_bytes() {
    assert_only(Algorithm::Jsq, jsq_behaviour);
}

#[test]
fn only_ar_is_indifferent_within_a_level_and_strict_across_levels() {
    assert_only(Algorithm::Ar, ar_behaviour);
}

#[test]
fn only_drill_takes_the_shorter_of_two_samples_and_its_memory() {
    assert_only(Algorithm::Drill, drill_behaviour);
}

#[test]
fn no_valid_port_means_no_choice() {
    for algorithm in Algorithm::ALL {
        let mut pipe = pipe0(config(algorithm, 4, 2, 1, 0));
        let mut loads = [PortLoad::default(); 4];
        assert_eq!(
            pipe.choose(&packet(1, SizeClass::Data, PortMask::EMPTY), &mut loads),
            None,
            "{algorithm}"
        );
        let mut out = [Some(UpPort(0)); 2];
        pipe.choose_batch(
            &[packet(1, SizeClass::Data, PortMask::EMPTY); 2],
            &mut loads,
            &mut out,
        );
        assert_eq!(out, [None, None], "{algorithm}");
    }
}

#[test]
fn every_algorithm_only_picks_valid_ports() {
    for algorithm in Algorithm::ALL {
        let mut pipe = pipe0(config(algorithm, 8, 4, 1, 21));
        let mut loads = [PortLoad::default(); 8];
        let mut rng = LbRng::new(3);
        for _ in 0..2_000 {
            let valid = PortMask(rng.next_u64() & 0xff);
            let choice = pipe.choose(&packet(rng.below(4), SizeClass::Data, valid), &mut loads);
            match choice {
                Some(UpPort(port)) => {
                    assert!(valid.contains(port), "{algorithm}: {port} ∉ {valid:?}")
                }
                None => assert!(valid.is_empty()),
            }
        }
    }
}

#[test]
fn same_seed_same_decisions() {
    for algorithm in Algorithm::ALL {
        let run = || {
            let mut pipe = pipe0(config(algorithm, 6, 5, 1, 77));
            let mut loads = [PortLoad::default(); 6];
            let mut rng = LbRng::new(9);
            (0..500)
                .map(|_| {
                    let pkt = Northbound {
                        flow_hash: rng.below(1000),
                        ..packet(rng.below(5), SizeClass::Data, PortMask::all(6))
                    };
                    pipe.choose(&pkt, &mut loads).unwrap().0
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run(), "{algorithm}");
    }
}

#[test]
fn configuration_errors_are_named() {
    assert_eq!(
        SwitchBalancer::new(config(Algorithm::Ofan, 0, 1, 1, 0)).unwrap_err(),
        LbError::UpPorts {
            up_ports: 0,
            max: 64
        }
    );
    assert_eq!(
        SwitchBalancer::new(config(Algorithm::Ofan, 65, 1, 1, 0)).unwrap_err(),
        LbError::UpPorts {
            up_ports: 65,
            max: 64
        }
    );
    assert_eq!(
        SwitchBalancer::new(config(Algorithm::Ofan, 4, 1, 0, 0)).unwrap_err(),
        LbError::NoPipes
    );
    let switch = SwitchBalancer::new(config(Algorithm::Pofan, 4, 1, 2, 0)).unwrap();
    assert_eq!(
        switch.pipe(2).unwrap_err(),
        LbError::NoSuchPipe { pipe: 2, pipes: 2 }
    );
    assert_eq!(
        "spray".parse::<Algorithm>().unwrap_err().to_string(),
        "unknown load-balancing algorithm `spray` (expected one of: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan)"
    );
    for algorithm in Algorithm::ALL {
        assert_eq!(algorithm.name().parse::<Algorithm>(), Ok(algorithm));
    }
}

#[test]
fn size_classes_quantize_frame_lengths() {
    assert_eq!(
        SizeClass::of_frame(64, SizeClass::DEFAULT_ACK_MAX_FRAME),
        SizeClass::Ack
    );
    assert_eq!(
        SizeClass::of_frame(128, SizeClass::DEFAULT_ACK_MAX_FRAME),
        SizeClass::Ack
    );
    assert_eq!(
        SizeClass::of_frame(129, SizeClass::DEFAULT_ACK_MAX_FRAME),
        SizeClass::Data
    );
    assert_eq!(
        SizeClass::of_frame(1514, SizeClass::DEFAULT_ACK_MAX_FRAME),
        SizeClass::Data
    );
}

#[test]
fn port_mask_select_and_iterate() {
    let mask = PortMask(0b1011_0010);
    assert_eq!(mask.count(), 4);
    assert_eq!(
        (0..4).map(|r| mask.nth(r)).collect::<Vec<_>>(),
        vec![1, 4, 5, 7]
    );
    assert_eq!(mask.iter().collect::<Vec<_>>(), vec![1, 4, 5, 7]);
    assert_eq!(PortMask::all(64).count(), 64);
    assert_eq!(PortMask::all(3), PortMask(0b111));
}

/// The balancers of the edge and aggregation switches of a fat tree of radix `k`, seeded as
/// the lab and the model seed them: each switch's own seed from the run seed and its name
/// (`seed_of(run_seed, name)`).
fn fabric(
    k: u16,
    algorithm: Algorithm,
    seed_of: impl Fn(&str) -> u64,
) -> Vec<(ofan_topology::Role, PipeBalancer)> {
    let topology = ofan_topology::Topology::fat_tree(k).unwrap();
    topology
        .switches()
        .iter()
        .filter(|switch| switch.role != ofan_topology::Role::Core)
        .map(|switch| {
            let keys = topology.dest_key_count(switch.id);
            let up_ports = (k / 2) as u8;
            let cfg = config(algorithm, up_ports, keys, 1, seed_of(&switch.name));
            (switch.role, pipe0(cfg))
        })
        .collect()
}

/// The up-port an ECMP balancer picks for flow hash `hash`.
fn ecmp_port(pipe: &mut PipeBalancer, hash: u32) -> u8 {
    let pkt = Northbound {
        flow_hash: hash,
        ..packet(
            0,
            SizeClass::Data,
            PortMask::all(pipe.switch().config().up_ports),
        )
    };
    pipe.choose(&pkt, &mut []).unwrap().0
}

/// The port of the first data packet to every key: where each Ofan data pointer starts (up to
/// the key's permutation, the same at every switch of the tier).
fn ofan_starts(pipe: &mut PipeBalancer) -> Vec<u8> {
    let config = pipe.switch().config().clone();
    (0..config.dest_keys)
        .map(|key| {
            let all = PortMask::all(config.up_ports);
            pipe.choose(&packet(key, SizeClass::Data, all), &mut [])
                .unwrap()
                .0
        })
        .collect()
}

/// How often two ECMP switches pick the same up-port rank, over 4 096 flows.
fn rank_agreement(a: &mut PipeBalancer, b: &mut PipeBalancer) -> f64 {
    let same = (0..4096u64)
        .filter(|&i| {
            let hash = mix64(i) as u32;
            ecmp_port(a, hash) == ecmp_port(b, hash)
        })
        .count();
    same as f64 / 4096.0
}

/// Per-switch seeds (`ofan_topology::switch_seed`) give the 16 balancing switches of a k = 4
/// fat tree different ECMP salts and Ofan pointer starts: no hash polarization between an edge
/// switch and an aggregation switch (they agree on the rank for about half of the flows, not
/// all), pointer starts that differ between switches of a tier. The run seed used as is by
/// every switch (the lab before) fails each check; the test shows that too.
#[test]
fn per_switch_seeds_decorrelate_ecmp_salts_and_ofan_pointer_starts() {
    use ofan_topology::{switch_seed, Role};
    for run_seed in [1, 2, 0x5eed] {
        // ECMP: the ports of 64 flows are a signature of the salt; all 16 differ.
        let mut ecmp = fabric(4, Algorithm::Ecmp, |name| switch_seed(run_seed, name));
        let signatures: std::collections::HashSet<u64> = ecmp
            .iter_mut()
            .map(|(_, pipe)| {
                (0..64u64).fold(0, |bits, i| {
                    bits | u64::from(ecmp_port(pipe, mix64(i ^ 0xf10e) as u32)) << i
                })
            })
            .collect();
        assert_eq!(signatures.len(), 16, "run seed {run_seed}");
        // No polarization: an edge switch and each aggregation switch of its pod pick the same
        // rank for a flow about half the time (independent hashes; ±6 standard deviations).
        let (edges, aggs) = ecmp.split_at_mut(8);
        assert!(edges.len() == 8 && aggs.iter().all(|(role, _)| *role == Role::Aggregation));
        for (index, (_, edge)) in edges.iter_mut().enumerate() {
            let pod = index / 2;
            for (_, agg) in &mut aggs[pod * 2..pod * 2 + 2] {
                let agreement = rank_agreement(edge, agg);
                assert!(
                    (0.45..=0.55).contains(&agreement),
                    "run seed {run_seed}: edge {index} and an aggregation of its pod agree on \
                     {agreement}"
                );
            }
        }

        // Ofan: within each tier, not every switch starts its pointers at the same ports.
        let mut ofan = fabric(4, Algorithm::Ofan, |name| switch_seed(run_seed, name));
        for tier in [Role::Edge, Role::Aggregation] {
            let starts: std::collections::HashSet<Vec<u8>> = ofan
                .iter_mut()
                .filter(|(role, _)| *role == tier)
                .map(|(_, pipe)| ofan_starts(pipe))
                .collect();
            assert!(
                starts.len() > 1,
                "run seed {run_seed}: {tier:?} starts {starts:?}"
            );
        }
        // At k = 8 the start vectors are long enough (4^32 at an edge, 4^8 at an aggregation)
        // to tell every switch apart: all 32 edges and all 32 aggregations differ.
        let mut wide = fabric(8, Algorithm::Ofan, |name| switch_seed(run_seed, name));
        for tier in [Role::Edge, Role::Aggregation] {
            let starts: std::collections::HashSet<Vec<u8>> = wide
                .iter_mut()
                .filter(|(role, _)| *role == tier)
                .map(|(_, pipe)| ofan_starts(pipe))
                .collect();
            assert_eq!(starts.len(), 32, "run seed {run_seed}: {tier:?}");
        }
    }

    // The same checks fail when every switch takes the run seed as is.
    let mut shared = fabric(4, Algorithm::Ecmp, |_| 1);
    let (edges, aggs) = shared.split_at_mut(8);
    assert_eq!(rank_agreement(&mut edges[0].1, &mut aggs[0].1), 1.0);
    let mut shared = fabric(4, Algorithm::Ofan, |_| 1);
    let first = ofan_starts(&mut shared[0].1);
    assert!(shared[1..8]
        .iter_mut()
        .all(|(_, pipe)| ofan_starts(pipe) == first));
}
