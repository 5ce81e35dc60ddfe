//! The baselines: ECMP, random (rsq), simple round-robin, JSQ, adaptive routing (ar), DRILL.

use super::*;

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

/// Runs `behaviour` for every algorithm: the `owners` must show it, and no other algorithm may.
fn assert_only(owners: &[Algorithm], behaviour: fn(Algorithm) -> Result<(), String>) {
    for algorithm in Algorithm::ALL {
        match behaviour(algorithm) {
            Ok(()) => assert!(
                owners.contains(&algorithm),
                "{algorithm} shows the behaviour of {owners:?}"
            ),
            Err(why) => assert!(!owners.contains(&algorithm), "{algorithm}: {why}"),
        }
    }
}

#[test]
fn only_jsq_always_takes_the_shortest_queue_in_bytes() {
    // arf-packet with no remote congestion known is JSQ by design (its penalty is 0).
    assert_only(&[Algorithm::Jsq, Algorithm::ArfPacket], jsq_behaviour);
}

#[test]
fn only_ar_is_indifferent_within_a_level_and_strict_across_levels() {
    assert_only(&[Algorithm::Ar], ar_behaviour);
}

#[test]
fn only_drill_takes_the_shorter_of_two_samples_and_its_memory() {
    assert_only(&[Algorithm::Drill], drill_behaviour);
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
        "unknown load-balancing algorithm `spray` (expected one of: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan, arf-wcmp, arf-flow, arf-packet)"
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

/// `predict` names the port the next `choose` takes, for every algorithm that decides without
/// the queues, under any valid set, and changes nothing (the decisions are those of a pipe
/// that never predicted).
#[test]
fn predict_names_the_next_choice_and_changes_nothing() {
    let predicting = [
        Algorithm::Ecmp,
        Algorithm::Rsq,
        Algorithm::Rr,
        Algorithm::Ofan,
        Algorithm::Pofan,
    ];
    for algorithm in Algorithm::ALL {
        let mut pipe = pipe0(config(algorithm, 8, 5, 2, 31));
        let mut twin = pipe0(config(algorithm, 8, 5, 2, 31));
        let mut rng = LbRng::new(17);
        for i in 0..3_000u32 {
            let valid = if i % 3 == 0 {
                PortMask(rng.next_u64() & 0xff)
            } else {
                PortMask::all(8)
            };
            let class = if rng.below(4) == 0 {
                SizeClass::Ack
            } else {
                SizeClass::Data
            };
            let pkt = Northbound {
                flow_hash: rng.below(100_000),
                ..packet(rng.below(5), class, valid)
            };
            let predicted = pipe.predict(&pkt);
            let (mut a, mut b) = ([PortLoad::default(); 8], [PortLoad::default(); 8]);
            let chosen = pipe.choose(&pkt, &mut a);
            assert_eq!(chosen, twin.choose(&pkt, &mut b), "{algorithm}");
            if predicting.contains(&algorithm) {
                assert_eq!(predicted, chosen, "{algorithm}, packet {i}");
            } else {
                assert_eq!(predicted, None, "{algorithm}");
            }
        }
    }
}
