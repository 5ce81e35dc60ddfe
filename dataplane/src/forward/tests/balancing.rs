//! Up-port choices through the forwarder: spreads, masks, loads, fallbacks and batches.

use super::*;

/// Sends `count` frames of one flow in batches of `batch` and counts the egress ports.
fn spread(
    fwd: &mut Forwarder,
    table: &Fib,
    frame: &[u8],
    count: usize,
    batch: usize,
) -> [usize; 3] {
    let mut ports = [0usize; 3];
    let mut sent = 0;
    while sent < count {
        let n = batch.min(count - sent);
        let mut frames = vec![frame.to_vec(); n];
        for verdict in run(fwd, table, &mut frames) {
            let Verdict::Forward { port } = verdict else {
                panic!("{verdict:?}")
            };
            ports[usize::from(port.0)] += 1;
        }
        sent += n;
    }
    ports
}

#[test]
fn ofan_splits_one_flow_exactly_evenly_over_the_up_ports() {
    let table = fib(ALL_UP);
    for batch in [1, 7, 64, 100] {
        let mut fwd = forwarder();
        let data = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
        assert_eq!(
            spread(&mut fwd, &table, &data, 1000, batch),
            [0, 500, 500],
            "batch {batch}"
        );
        // ACK-sized frames of the same destination use their own pointer, also even.
        let ack = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 20);
        assert_eq!(
            spread(&mut fwd, &table, &ack, 1000, batch),
            [0, 500, 500],
            "batch {batch}"
        );
        assert_eq!(fwd.counters().northbound, 2000);
    }
    // Two destinations interleaved in one batch: each pointer still alternates.
    let mut fwd = forwarder();
    let mut frames: Vec<_> = (0..64)
        .map(|i| v4([10, 0, 0, 2], [10, 0, 1 + (i % 2) as u8, 5], 64, 1000))
        .collect();
    let verdicts = run(&mut fwd, &table, &mut frames);
    for key in 0..2 {
        let ports: Vec<_> = verdicts.iter().skip(key).step_by(2).collect();
        assert!(
            ports.windows(2).all(|pair| pair[0] != pair[1]),
            "key {key}: {ports:?}"
        );
    }
}

#[test]
fn ecmp_keeps_a_flow_on_one_port() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder_with(Algorithm::Ecmp, 2, 3);
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let ports = spread(&mut fwd, &table, &frame, 100, 10);
    assert!(ports == [0, 100, 0] || ports == [0, 0, 100], "{ports:?}");
}

#[test]
fn unusable_up_ports_are_never_chosen() {
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let no_key = v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 1000);
    for (state, expected) in [
        (
            UpState {
                oper_up: [false, true],
                resolved: [true; 2],
            },
            [0, 0, 100],
        ),
        (
            UpState {
                oper_up: [true; 2],
                resolved: [false, true],
            },
            [0, 0, 100],
        ),
        (
            UpState {
                oper_up: [true, false],
                resolved: [true; 2],
            },
            [0, 100, 0],
        ),
        (
            UpState {
                oper_up: [true; 2],
                resolved: [true, false],
            },
            [0, 100, 0],
        ),
    ] {
        let table = fib(state);
        for algorithm in [
            Algorithm::Ofan,
            Algorithm::Pofan,
            Algorithm::Ecmp,
            Algorithm::Jsq,
            Algorithm::Drill,
        ] {
            let mut fwd = forwarder_with(algorithm, 2, 3);
            assert_eq!(
                spread(&mut fwd, &table, &frame, 100, 16),
                expected,
                "{algorithm}"
            );
            assert_eq!(
                spread(&mut fwd, &table, &no_key, 100, 16),
                expected,
                "{algorithm} without key"
            );
        }
    }
}

/// The queue-aware algorithms see the worker's `loads` by up position (position 0 is port 1,
/// position 1 port 2 in this table) and count each choice into them: JSQ and AR avoid the
/// longer queue whichever position it is at, and JSQ fills the shorter one until the two are
/// level, then alternates.
#[test]
fn queue_aware_choices_read_the_loads_by_up_position() {
    let table = fib(ALL_UP);
    let frame = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000);
    let frame_len = frame.len() as u32;
    // 60 kB is AR's level 1 of the 1 MiB buffer (≥ 5 %); an empty queue is level 0.
    let long = PortLoad {
        packets: 40,
        bytes: 60_000,
    };
    for algorithm in [Algorithm::Jsq, Algorithm::Ar] {
        for long_at in 0..2 {
            let mut fwd = forwarder_with(algorithm, 2, 3);
            let mut loads = [PortLoad::default(); 2];
            loads[long_at] = long;
            let verdicts =
                run_with_loads(&mut fwd, &table, &mut vec![frame.clone(); 8], &mut loads);
            let short_port = PortId(1 + (1 - long_at as u16));
            assert!(
                verdicts
                    .iter()
                    .all(|v| *v == Verdict::Forward { port: short_port }),
                "{algorithm}, long queue at position {long_at}: {verdicts:?}"
            );
            assert_eq!(loads[long_at], long, "{algorithm}");
            assert_eq!(
                loads[1 - long_at],
                PortLoad {
                    packets: 8,
                    bytes: 8 * frame_len
                },
                "{algorithm}: each choice is counted into the chosen queue"
            );
        }
    }
    // JSQ from queues of 0 and 3 frames: the first three frames level them, then they
    // alternate (ties at random), so 9 frames end at 6 and 6.
    let mut fwd = forwarder_with(Algorithm::Jsq, 2, 3);
    let mut loads = [
        PortLoad::default(),
        PortLoad {
            packets: 3,
            bytes: 3 * frame_len,
        },
    ];
    let verdicts = run_with_loads(&mut fwd, &table, &mut vec![frame.clone(); 9], &mut loads);
    assert!(
        verdicts[..3]
            .iter()
            .all(|v| *v == Verdict::Forward { port: PortId(1) }),
        "{verdicts:?}"
    );
    assert_eq!(loads[0].packets, 6, "{loads:?}");
    assert_eq!(loads[1].packets, 6, "{loads:?}");
}

#[test]
fn destinations_without_key_fall_back_to_ecmp() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder();
    // One flow: one port.
    let frame = v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 1000);
    let ports = spread(&mut fwd, &table, &frame, 50, 10);
    assert!(ports == [0, 50, 0] || ports == [0, 0, 50], "{ports:?}");
    assert_eq!((fwd.counters().no_key, fwd.counters().northbound), (50, 0));
    // Many flows: both ports.
    let mut frames: Vec<_> = (0..64u16)
        .map(|i| {
            ipv4_udp(
                [10, 0, 0, 2].into(),
                [10, 0, 3, 5].into(),
                64,
                (i, 4791),
                100,
            )
        })
        .collect();
    let used: HashSet<_> = run(&mut fwd, &table, &mut frames).into_iter().collect();
    assert_eq!(used.len(), 2, "{used:?}");
}

#[test]
fn table_and_balancer_disagreeing_cannot_break_the_balancer() {
    let table = fib(ALL_UP);
    let frame = v4([10, 0, 0, 2], [10, 1, 0, 5], 64, 1000); // key 2
                                                            // The balancer knows 2 keys: key 2 falls back to ECMP.
    let mut fwd = forwarder_with(Algorithm::Ofan, 2, 2);
    spread(&mut fwd, &table, &frame, 10, 10);
    assert_eq!(
        (fwd.counters().key_out_of_range, fwd.counters().forwarded),
        (10, 10)
    );
    // The balancer has 1 up-port: only up-position 0 (port 1) is chosen.
    let mut fwd = forwarder_with(Algorithm::Ofan, 1, 3);
    assert_eq!(spread(&mut fwd, &table, &frame, 10, 10), [0, 10, 0]);
    // ... and when only up-position 1 is usable, the frame falls back to it.
    let half = fib(UpState {
        oper_up: [false, true],
        resolved: [true; 2],
    });
    assert_eq!(spread(&mut fwd, &half, &frame, 10, 10), [0, 0, 10]);
}

#[test]
fn batches_larger_than_max_batch_are_chunked() {
    let table = fib(ALL_UP);
    let mut fwd = forwarder();
    let mut frames: Vec<_> = (0..150)
        .map(|i| {
            if i % 3 == 0 {
                v4([10, 0, 0, 2], [192, 0, 2, 1], 64, 10)
            } else {
                v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000)
            }
        })
        .collect();
    let verdicts = run(&mut fwd, &table, &mut frames);
    for (i, verdict) in verdicts.iter().enumerate() {
        assert_eq!(
            i % 3 == 0,
            *verdict == Verdict::Drop(DropReason::NoRoute),
            "{i}: {verdict:?}"
        );
    }
    let counters = fwd.counters();
    assert_eq!(
        (counters.frames, counters.forwarded, counters.northbound),
        (150, 100, 100)
    );
}
