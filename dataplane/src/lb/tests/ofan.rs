//! Ofan and pOfan: one pointer per destination and size class, rotating over the F.2 order
//! of the valid ports, checked against the paper's formula written out independently.

use super::*;

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
