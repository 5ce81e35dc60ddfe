//! Unit tests of [`SelectiveRepeat`] on hand-made sequences, and properties against a lossy,
//! reordering toy network.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use proptest::prelude::*;

use super::*;

/// Timeouts that are easy to follow by hand.
const CONFIG: RecoveryConfig = RecoveryConfig {
    rto_min: 10,
    rto_initial: 100,
    rto_max: 1000,
};

#[test]
fn defaults_scale_with_the_frame_time() {
    let config = RecoveryConfig::for_frame_time(1_000);
    assert_eq!(config.rto_min, 16_000);
    assert_eq!(config.rto_initial, 64_000);
    assert_eq!(config.rto_max, 4_096_000);
    assert_eq!(config.validate(), Ok(()));
    assert_eq!(RecoveryConfig::for_frame_time(0).rto_min, 16);
}

#[test]
fn round_trip_bound_is_added_to_every_timeout() {
    let config = RecoveryConfig::for_round_trip(1_000, 250_000);
    assert_eq!(config.rto_min, 16_000 + 250_000);
    assert_eq!(config.rto_initial, 64_000 + 250_000);
    assert_eq!(config.rto_max, 4_096_000 + 250_000);
    assert_eq!(
        RecoveryConfig::for_round_trip(1_000, 0),
        RecoveryConfig::for_frame_time(1_000)
    );
}

#[test]
fn invalid_configs_are_rejected_and_normalized() {
    let bad = RecoveryConfig {
        rto_min: 0,
        rto_initial: 5000,
        rto_max: 100,
    };
    assert!(matches!(
        bad.validate(),
        Err(RecoveryError::InvalidTimeouts { rto_min: 0, .. })
    ));
    let fixed = bad.normalized();
    assert_eq!(
        fixed,
        RecoveryConfig {
            rto_min: 1,
            rto_initial: 100,
            rto_max: 100
        }
    );
    assert_eq!(fixed.validate(), Ok(()));
    assert_eq!(CONFIG.normalized(), CONFIG);
}

#[test]
fn no_loss_means_no_retransmission() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[3, 2]);
    assert!(!recovery.complete());
    assert_eq!(recovery.next_deadline(), None);
    for (now, (flow, seq)) in [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)]
        .into_iter()
        .enumerate()
    {
        recovery.on_send(flow, seq, now as Time);
    }
    assert_eq!(recovery.next_deadline(), Some(100));
    for (now, (flow, seq)) in [(1, 0), (0, 0), (1, 1), (0, 2), (0, 1)]
        .into_iter()
        .enumerate()
    {
        assert_eq!(recovery.next_lost(20 + now as Time), None);
        assert_eq!(recovery.on_ack(flow, seq, 20 + now as Time), Ack::New);
    }
    assert!(recovery.flow_complete(0) && recovery.flow_complete(1) && recovery.complete());
    assert_eq!(recovery.next_deadline(), None);
    assert_eq!(recovery.next_lost(Time::MAX), None);
    let stats = recovery.stats();
    assert_eq!(stats.retransmissions, 0);
    assert_eq!(stats.timeouts, 0);
    assert_eq!(stats.rtt_samples, 5);
}

#[test]
fn a_dropped_packet_is_retransmitted_once_after_the_rto() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[3]);
    for seq in 0..3 {
        recovery.on_send(0, seq, Time::from(seq));
    }
    // Packet 1 is lost; 0 and 2 come back after 20.
    assert_eq!(recovery.on_ack(0, 0, 20), Ack::New);
    assert_eq!(recovery.on_ack(0, 2, 22), Ack::New);
    assert!(!recovery.flow_complete(0));
    // Samples 20, 20: srtt 20, rttvar (3·10 + 0) / 4 = 7, rto = 20 + 28 = 48.
    assert_eq!(recovery.rto(), 48);
    assert_eq!(recovery.next_deadline(), Some(1 + 48));
    assert_eq!(recovery.next_lost(48), None);
    assert_eq!(recovery.next_lost(49), Some((0, 1)));
    assert_eq!(recovery.next_lost(49), None, "reported once");
    recovery.on_send(0, 1, 49);
    assert_eq!(recovery.next_deadline(), Some(49 + 2 * 48));
    assert_eq!(recovery.on_ack(0, 1, 70), Ack::New);
    assert!(recovery.complete());
    assert_eq!(recovery.next_lost(Time::MAX), None);
    let stats = recovery.stats();
    assert_eq!((stats.retransmissions, stats.timeouts), (1, 1));
    assert_eq!(
        stats.rtt_samples, 2,
        "the retransmitted packet gives no sample"
    );
}

#[test]
fn each_timeout_of_a_packet_doubles_its_timeout_up_to_rto_max() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[1]);
    recovery.on_send(0, 0, 0);
    let mut now = 0;
    let mut waits = Vec::new();
    for _ in 0..6 {
        let deadline = recovery.next_deadline().expect("outstanding");
        waits.push(deadline - now);
        assert_eq!(recovery.next_lost(deadline - 1), None);
        assert_eq!(recovery.next_lost(deadline), Some((0, 0)));
        now = deadline;
        recovery.on_send(0, 0, now);
    }
    assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
    assert_eq!(recovery.stats().timeouts, 6);
    assert_eq!(recovery.stats().retransmissions, 6);
}

#[test]
fn karn_a_retransmitted_packet_gives_no_rtt_sample() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[1]);
    recovery.on_send(0, 0, 0);
    assert_eq!(recovery.next_lost(100), Some((0, 0)));
    recovery.on_send(0, 0, 100);
    // The ACK may answer the first copy (RTT 130) or the second (30): no sample either way.
    assert_eq!(recovery.on_ack(0, 0, 130), Ack::New);
    assert_eq!(recovery.stats().rtt_samples, 0);
    assert_eq!(recovery.stats().srtt, None);
    assert_eq!(recovery.rto(), 100);
    assert_eq!(recovery.on_ack(0, 0, 131), Ack::Duplicate);
    assert_eq!(recovery.stats().duplicate_acks, 1);
}

#[test]
fn rto_follows_rfc_6298_on_a_hand_sequence() {
    let mut recovery = SelectiveRepeat::new(
        RecoveryConfig {
            rto_min: 10,
            rto_initial: 1000,
            rto_max: 2000,
        },
        &[5],
    );
    // (sent, acked): RTTs 100, 200, 50, 1, 2000.
    let rtts = [100, 200, 50, 1, 2000];
    // R = 100: srtt 100, rttvar 50, rto 100 + 200 = 300.
    // R = 200: rttvar (150 + 100) / 4 = 62, srtt (700 + 200) / 8 = 112, rto 112 + 248 = 360.
    // R = 50: rttvar (186 + 62) / 4 = 62, srtt (784 + 50) / 8 = 104, rto 104 + 248 = 352.
    // R = 1: rttvar (186 + 103) / 4 = 72, srtt (728 + 1) / 8 = 91, rto 91 + 288 = 379.
    // R = 2000: rttvar (216 + 1909) / 4 = 531, srtt (637 + 2000) / 8 = 329,
    //   rto 329 + 2124 = 2453, capped at 2000.
    let expected = [
        (100, 50, 300),
        (112, 62, 360),
        (104, 62, 352),
        (91, 72, 379),
        (329, 531, 2000),
    ];
    let mut now = 0;
    for (seq, (rtt, (srtt, rttvar, rto))) in rtts.into_iter().zip(expected).enumerate() {
        recovery.on_send(0, seq as u32, now);
        assert_eq!(recovery.on_ack(0, seq as u32, now + rtt), Ack::New);
        let stats = recovery.stats();
        assert_eq!(
            (stats.srtt, stats.rttvar, recovery.rto()),
            (Some(srtt), Some(rttvar), rto),
            "after sample {rtt}"
        );
        now += rtt + 1;
    }
}

#[test]
fn rto_never_goes_below_rto_min() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[1]);
    recovery.on_send(0, 0, 0);
    recovery.on_ack(0, 0, 1);
    // srtt 1, rttvar 0 (1 / 2 rounded down): 1 + 0 < rto_min.
    assert_eq!(recovery.rto(), CONFIG.rto_min);
}

#[test]
fn acks_of_nothing_sent_are_out_of_range() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[2]);
    assert_eq!(recovery.on_ack(0, 0, 5), Ack::OutOfRange, "never sent");
    assert_eq!(recovery.on_ack(0, 2, 5), Ack::OutOfRange);
    assert_eq!(recovery.on_ack(1, 0, 5), Ack::OutOfRange);
    recovery.on_send(7, 0, 0); // ignored
    recovery.on_send(0, 9, 0); // ignored
    assert_eq!(recovery.next_deadline(), None);
    assert_eq!(recovery.stats().out_of_range_acks, 3);
    assert!(!recovery.flow_complete(5));
}

#[test]
fn the_oldest_expired_packet_comes_first() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[2, 2]);
    recovery.on_send(0, 0, 0);
    recovery.on_send(1, 0, 1);
    recovery.on_send(0, 1, 2);
    recovery.on_send(1, 1, 3);
    assert_eq!(recovery.on_ack(0, 1, 5), Ack::New); // srtt 3, rttvar 1: rto = rto_min = 10
    assert_eq!(recovery.rto(), 10);
    // Both flows' first packets expired; the first sent comes first.
    assert_eq!(recovery.next_lost(1000), Some((0, 0)));
    // Each timeout doubles every timer until the next RTT sample (RFC 6298 §5.5).
    recovery.on_send(0, 0, 1000); // one timeout so far: deadline 1000 + 10 · 2
    assert_eq!(recovery.next_lost(1000), Some((1, 0)));
    recovery.on_send(1, 0, 1000); // two: 1000 + 10 · 4
    assert_eq!(recovery.next_lost(1000), Some((1, 1)));
    recovery.on_send(1, 1, 1001); // three: 1001 + 10 · 8
    assert_eq!(recovery.next_deadline(), Some(1020));
    assert_eq!(recovery.next_lost(1019), None);
    assert_eq!(recovery.next_lost(1081), Some((0, 0)));
    assert_eq!(recovery.next_lost(1081), Some((1, 0)));
    assert_eq!(recovery.next_lost(1081), Some((1, 1)));
    assert_eq!(recovery.next_lost(1081), None);
}

#[test]
fn sending_again_replaces_the_packets_timer() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[1]);
    recovery.on_send(0, 0, 0);
    assert_eq!(recovery.next_lost(100), Some((0, 0)));
    recovery.on_send(0, 0, 100); // timer at 100 + 200
    recovery.on_send(0, 0, 150); // sent once more without a timeout: timer at 150 + 200
    assert_eq!(recovery.next_deadline(), Some(350));
    assert_eq!(recovery.next_lost(349), None);
    assert_eq!(recovery.next_lost(350), Some((0, 0)));
    assert_eq!(recovery.stats().retransmissions, 2);
}

#[test]
fn given_up_packets_are_no_longer_offered() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[1]).give_up_after(2);
    recovery.on_send(0, 0, 0);
    assert_eq!(recovery.next_lost(100), Some((0, 0)));
    recovery.on_send(0, 0, 100);
    assert_eq!(recovery.next_lost(300), Some((0, 0)));
    recovery.on_send(0, 0, 300);
    assert_eq!(recovery.next_lost(700), None);
    assert_eq!(recovery.next_deadline(), None);
    assert_eq!(recovery.stats().abandoned, 1);
    assert!(!recovery.complete());
    assert_eq!(
        recovery.on_ack(0, 0, 800),
        Ack::New,
        "a late ACK still counts"
    );
    assert!(recovery.complete());
}

/// A small deterministic generator for the toy network.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

/// What a toy run saw.
#[derive(Debug)]
struct Outcome {
    recovery: SelectiveRepeat,
    transmissions: u64,
    drops: u64,
    deliveries: Vec<Vec<u32>>,
}

/// One sender with `packets` per flow, a frame time of 10, round-robin over its flows, and a
/// network that loses each transmission (DATA or its ACK) with probability `loss_percent` %
/// and otherwise returns its ACK after a uniform delay in `1..=max_delay`: reordering as the
/// delays vary.
fn toy_run(packets: &[u32], loss_percent: u64, max_delay: Time, seed: u64) -> Outcome {
    const FRAME: Time = 10;
    let mut recovery = SelectiveRepeat::new(RecoveryConfig::for_frame_time(FRAME), packets);
    let mut rng = SplitMix(seed);
    let mut next_seq = vec![0u32; packets.len()];
    let mut deliveries: Vec<Vec<u32>> = packets.iter().map(|&n| vec![0; n as usize]).collect();
    let mut acks = BinaryHeap::new();
    let (mut now, mut cursor, mut transmissions, mut drops) = (0, 0, 0, 0);
    for _ in 0..1_000_000 {
        while let Some(&Reverse((at, flow, seq))) = acks.peek() {
            if at > now {
                break;
            }
            acks.pop();
            recovery.on_ack(flow, seq, at);
        }
        if recovery.complete() {
            break;
        }
        let fresh = (0..packets.len())
            .map(|i| (cursor + i) % packets.len())
            .find(|&f| next_seq[f] < packets[f]);
        let send = if let Some(lost) = recovery.next_lost(now) {
            lost
        } else if let Some(flow) = fresh {
            cursor = flow + 1;
            next_seq[flow] += 1;
            (flow as u32, next_seq[flow] - 1)
        } else {
            let ack = acks.peek().map(|Reverse((at, _, _))| *at);
            let wake = [ack, recovery.next_deadline()].into_iter().flatten().min();
            now = wake.expect("an incomplete sender waits for an ACK or a timer");
            continue;
        };
        recovery.on_send(send.0, send.1, now);
        transmissions += 1;
        if rng.below(100) < loss_percent {
            drops += 1;
        } else {
            deliveries[send.0 as usize][send.1 as usize] += 1;
            acks.push(Reverse((now + 1 + rng.below(max_delay), send.0, send.1)));
        }
        now += FRAME;
    }
    Outcome {
        recovery,
        transmissions,
        drops,
        deliveries,
    }
}

proptest! {
    #[test]
    fn random_loss_always_ends_complete(
        packets in prop::collection::vec(1u32..60, 1..5),
        loss_percent in 0u64..50,
        max_delay in 1u64..400,
        seed in any::<u64>(),
    ) {
        let mut outcome = toy_run(&packets, loss_percent, max_delay, seed);
        let recovery = &mut outcome.recovery;
        prop_assert!(recovery.complete());
        for flow in 0..packets.len() as u32 {
            prop_assert!(recovery.flow_complete(flow));
        }
        for copies in outcome.deliveries.iter().flatten() {
            prop_assert!(*copies >= 1, "every packet reached the receiver");
        }
        let stats = recovery.stats();
        let total: u64 = packets.iter().map(|&n| u64::from(n)).sum();
        prop_assert_eq!(stats.retransmissions, outcome.transmissions - total);
        prop_assert!(stats.retransmissions >= outcome.drops);
        prop_assert!(stats.timeouts >= outcome.drops);
        prop_assert_eq!(stats.abandoned, 0);
        prop_assert_eq!(recovery.next_deadline(), None);
    }

    #[test]
    fn acks_within_rto_min_never_time_out(
        packets in prop::collection::vec(1u32..100, 1..5),
        max_delay in 1u64..160,
        seed in any::<u64>(),
    ) {
        // rto_min is 16 frame times = 160: every ACK is back before any timer can expire.
        let outcome = toy_run(&packets, 0, max_delay, seed);
        let stats = outcome.recovery.stats();
        let total: u64 = packets.iter().map(|&n| u64::from(n)).sum();
        prop_assert!(outcome.recovery.complete());
        prop_assert_eq!(outcome.transmissions, total);
        prop_assert_eq!(stats.retransmissions, 0);
        prop_assert_eq!(stats.timeouts, 0);
        prop_assert_eq!(stats.rtt_samples, total);
        prop_assert_eq!(stats.duplicate_acks, 0);
    }
}

#[test]
fn an_echoed_ack_of_the_latest_copy_samples_the_rtt_karn_would_not() {
    // One packet times out spuriously (its ACK is just slow), is resent, and the ACK of the
    // second copy comes back 30 after that copy left.
    let config = RecoveryConfig::for_frame_time(10);
    let mut plain = SelectiveRepeat::new(config, &[1]);
    let mut echoed = SelectiveRepeat::new(config, &[1]);
    for recovery in [&mut plain, &mut echoed] {
        assert_eq!(recovery.transmissions(0, 0), 0);
        recovery.on_send(0, 0, 0);
        let lost = recovery.next_lost(config.rto_initial);
        assert_eq!(lost, Some((0, 0)));
        assert_eq!(recovery.transmissions(0, 0), 1);
        recovery.on_send(0, 0, config.rto_initial);
    }
    assert_eq!(plain.on_ack(0, 0, config.rto_initial + 30), Ack::New);
    assert_eq!(
        plain.stats().rtt_samples,
        0,
        "Karn: a retransmitted packet gives no sample"
    );
    // The echo names the second copy (sent after 1 transmission): a sample of exactly 30.
    assert_eq!(
        echoed.on_ack_echo(0, 0, 1, config.rto_initial + 30),
        Ack::New
    );
    assert_eq!(echoed.stats().rtt_samples, 1);
    assert_eq!(echoed.stats().srtt, Some(30));
}

#[test]
fn an_echo_of_an_earlier_copy_gives_no_sample() {
    let config = RecoveryConfig::for_frame_time(10);
    let mut recovery = SelectiveRepeat::new(config, &[1]);
    recovery.on_send(0, 0, 0);
    assert!(recovery.next_lost(config.rto_initial).is_some());
    recovery.on_send(0, 0, config.rto_initial);
    // The first copy's ACK (echo 0) arrives after the second copy left: its RTT is unknown.
    assert_eq!(
        recovery.on_ack_echo(0, 0, 0, config.rto_initial + 5),
        Ack::New
    );
    assert_eq!(recovery.stats().rtt_samples, 0);
    assert!(recovery.complete());
    // Echoes wrap with ECHO_MASK: 129 transmissions later the tag is 1 again.
    assert_eq!(ECHO_MASK, 0x7f);
}

#[test]
fn a_round_trip_beyond_the_timeout_costs_a_few_retransmissions_not_all() {
    // 100 packets back to back, frame time 1 (rto_initial 64, rto_max 4096); every ACK (of the
    // first copy) comes back 2000 later: far beyond the initial timeout.
    let config = RecoveryConfig::for_frame_time(1);
    let mut recovery = SelectiveRepeat::new(config, &[100]);
    let delay = 2000;
    let mut acks: Vec<(Time, u32)> = (0..100).map(|seq| (Time::from(seq) + delay, seq)).collect();
    acks.reverse();
    let mut next = 0u32;
    for now in 0..=(100 + delay) {
        while acks.last().is_some_and(|&(at, _)| at <= now) {
            let (_, seq) = acks.pop().unwrap();
            recovery.on_ack_echo(0, seq, 0, now);
        }
        if let Some((_, seq)) = recovery.next_lost(now) {
            recovery.on_send(0, seq, now);
        } else if next < 100 {
            recovery.on_send(0, next, now);
            next += 1;
        }
    }
    assert!(recovery.complete());
    // Timeouts at 64, +128, +256, +512, +1024: then the ACKs are back (doubling, §5.5).
    let retransmissions = recovery.stats().retransmissions;
    assert!(retransmissions <= 6, "{retransmissions} retransmissions");
    assert!(retransmissions >= 1);
    // The first sample (a packet sent once) restored the measured timeout.
    let srtt = recovery.stats().srtt.unwrap();
    assert!((delay - 10..=delay).contains(&srtt), "srtt {srtt}");
}

/// Sends `times.len()` first transmissions of flow 0 at `times`.
fn send_all(recovery: &mut SelectiveRepeat, times: &[Time]) {
    for (seq, &at) in times.iter().enumerate() {
        recovery.on_send(0, seq as u32, at);
    }
}

/// Timers long enough that none fires in the reordering tests.
const PATIENT: RecoveryConfig = RecoveryConfig {
    rto_min: 10,
    rto_initial: 100_000,
    rto_max: 100_000,
};

#[test]
fn reordering_window_declares_lost_only_what_a_later_packet_overtook_by_the_window() {
    // Window = 500 ‰ of the smoothed RTT.
    let mut recovery = SelectiveRepeat::new(PATIENT, &[6]).with_reordering_window(500);
    send_all(&mut recovery, &[0, 100, 200, 300]);
    // First sample: RTT 1 000, srtt 1 000, window 500.
    let first = recovery.on_ack_sample(0, 0, 0, 1_000);
    assert_eq!(
        (first.ack, first.rtt, first.newly_lost),
        (Ack::New, Some(1_000), 0)
    );
    // Packet 3 (sent at 300) overtakes 1 and 2 by 200 and 100: within the window.
    assert_eq!(recovery.on_ack_sample(0, 3, 0, 1_300).newly_lost, 0);
    assert_eq!(recovery.next_lost(1_300), None);
    // Packet 4 (sent at 900) overtakes them by 800 and 700 > 500: both lost, at once.
    recovery.on_send(0, 4, 900);
    assert_eq!(recovery.outstanding(0), 3);
    let late = recovery.on_ack_sample(0, 4, 0, 1_900);
    assert_eq!(late.newly_lost, 2);
    assert_eq!(
        recovery.outstanding(0),
        0,
        "lost packets are no longer in flight"
    );
    assert_eq!(recovery.next_deadline(), Some(1_900));
    assert_eq!(recovery.next_lost(1_900), Some((0, 1)));
    recovery.on_send(0, 1, 1_900);
    assert_eq!(recovery.next_lost(1_900), Some((0, 2)));
    recovery.on_send(0, 2, 1_901);
    assert_eq!(recovery.outstanding(0), 2);
    assert_eq!(recovery.next_lost(1_901), None);
    let stats = recovery.stats();
    assert_eq!(
        (stats.reorder_losses, stats.timeouts, stats.retransmissions),
        (2, 0, 2)
    );
    // No ACK came back after the ACK of a packet sent later: nothing measured as reordered.
    assert_eq!(recovery.reordering().reordered, 0);
}

/// Packets 1 and 2 are declared lost by packet 4's ACK (window 500 ‰ of srtt ≈ 500), packet
/// 2's first copy comes back 700 late (it was only late), then packet 6, sent 700 after packet 5,
/// is ACKed: how many packets that ACK declares lost.
fn late_then_overtaken(mut recovery: SelectiveRepeat) -> (u32, ReorderStats) {
    send_all(&mut recovery, &[0, 100, 200, 300]);
    recovery.on_ack_sample(0, 0, 0, 1_000);
    recovery.on_ack_sample(0, 3, 0, 1_300);
    recovery.on_send(0, 4, 900);
    assert_eq!(recovery.on_ack_sample(0, 4, 0, 1_900).newly_lost, 2);
    assert_eq!(recovery.next_lost(1_900), Some((0, 1)));
    recovery.on_send(0, 1, 1_900);
    recovery.on_ack_sample(0, 2, 0, 1_950);
    recovery.on_send(0, 5, 1_000);
    recovery.on_send(0, 6, 1_700);
    let lost = recovery.on_ack_sample(0, 6, 0, 2_700).newly_lost;
    (lost, recovery.reordering())
}

#[test]
fn an_adaptive_window_widens_to_the_reordering_a_late_ack_showed() {
    let patient = || SelectiveRepeat::new(PATIENT, &[8]);
    let (fixed, _) = late_then_overtaken(patient().with_reordering_window(500));
    let (adaptive, reordering) =
        late_then_overtaken(patient().with_adaptive_reordering_window(500));
    // Packet 2 came back 700 after packet 4 (sent 700 later) was ACKed.
    assert_eq!((reordering.reordered, reordering.max), (1, 700));
    // Packet 5 was overtaken by 700: beyond a window of srtt/2 ≈ 540, within 700 + 700/8.
    assert_eq!((fixed, adaptive), (1, 0));
}

#[test]
fn without_a_reordering_window_only_timers_declare_losses() {
    let mut recovery = SelectiveRepeat::new(PATIENT, &[6]).track_reordering();
    send_all(&mut recovery, &[0, 100, 200, 300]);
    recovery.on_ack_sample(0, 0, 0, 1_000);
    recovery.on_send(0, 4, 900);
    assert_eq!(recovery.on_ack_sample(0, 4, 0, 1_900).newly_lost, 0);
    assert_eq!(recovery.stats().reorder_losses, 0);
    // Packet 3 comes back after packet 4, sent 600 later: reordered by 600.
    recovery.on_ack_sample(0, 3, 0, 1_950);
    let reordering = recovery.reordering();
    assert_eq!((reordering.reordered, reordering.max), (1, 600));
    // 600 has 10 significant bits: the bound of its quantile is 1 024.
    assert_eq!(reordering.quantile_bound(0.99), Some(1_024));
}

#[test]
fn outstanding_counts_packets_in_flight_through_acks_and_timeouts() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[3]);
    send_all(&mut recovery, &[0, 1, 2]);
    assert_eq!(recovery.outstanding(0), 3);
    assert_eq!(recovery.on_ack(0, 1, 50), Ack::New);
    assert_eq!(recovery.outstanding(0), 2);
    assert_eq!(recovery.on_ack(0, 1, 51), Ack::Duplicate);
    assert_eq!(recovery.outstanding(0), 2);
    // rto = max(10, 50 + 4·25) = 150: packet 0 expires at 150 and leaves the flight…
    assert_eq!(recovery.next_lost(150), Some((0, 0)));
    assert_eq!(recovery.outstanding(0), 1);
    // … and re-enters it when sent again.
    recovery.on_send(0, 0, 150);
    assert_eq!(recovery.outstanding(0), 2);
    assert_eq!(recovery.outstanding(7), 0);
}

#[test]
fn a_nack_of_the_latest_copy_declares_the_packet_lost_before_any_timer() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[3]);
    send_all(&mut recovery, &[0, 1, 2]);
    // No timer has expired at 5 (rto_initial 100), but the NACK of packet 1's first copy
    // declares it lost at once: it leaves the flight and is offered first.
    assert!(recovery.on_nack(0, 1, 0, 5));
    assert_eq!(recovery.outstanding(0), 2);
    assert_eq!(recovery.next_deadline(), Some(5));
    assert_eq!(recovery.next_lost(5), Some((0, 1)));
    assert_eq!(recovery.stats().nack_losses, 1);
    assert_eq!(recovery.stats().timeouts, 0);
    // A second NACK of that copy (it is no longer in flight) changes nothing.
    assert!(!recovery.on_nack(0, 1, 0, 6));
    recovery.on_send(0, 1, 7);
    assert_eq!(recovery.outstanding(0), 3);
    // A late NACK of the first copy says nothing about the second …
    assert!(!recovery.on_nack(0, 1, 0, 8));
    // … a NACK of the second does.
    assert!(recovery.on_nack(0, 1, 1, 9));
    // ACKed packets and packets never sent are not NACKed.
    assert_eq!(recovery.on_ack(0, 0, 10), Ack::New);
    assert_eq!(recovery.on_ack(0, 2, 10), Ack::New);
    assert!(!recovery.on_nack(0, 0, 0, 11));
    assert!(!recovery.on_nack(0, 3, 0, 11));
    assert!(!recovery.on_nack(5, 0, 0, 11));
    assert_eq!(recovery.stats().nack_losses, 2);
    // The second copy waits to be sent again (a window was full): it is offered once, and
    // the timer it had while in flight no longer fires, however long it waits.
    assert_eq!(recovery.next_lost(5_000), Some((0, 1)));
    assert_eq!(recovery.next_lost(5_000), None);
    assert_eq!(recovery.stats().timeouts, 0);
}

/// Flow 0 sends packets 0–7 at 0, 10, …, 70; packet 0 is ACKed at 100 (srtt 100), the other
/// seven are lost together; packet 8 leaves at 400. CONFIG's rto after the sample:
/// max(10, 100 + 4·50) = 300, so packet 1's timer expires at 310.
fn whole_window_lost(recovery: &mut SelectiveRepeat) {
    send_all(recovery, &[0, 10, 20, 30, 40, 50, 60, 70]);
    assert_eq!(recovery.on_ack_sample(0, 0, 0, 100).rtt, Some(100));
    recovery.on_send(0, 8, 400);
}

#[test]
fn an_expired_timer_declares_the_flows_older_flight_lost_with_it() {
    // Window 1 000 ‰ of srtt: a packet is lost at the expiry if it left 200 before.
    let mut recovery = SelectiveRepeat::new(CONFIG, &[9]).with_reordering_window(1_000);
    whole_window_lost(&mut recovery);
    assert_eq!(recovery.outstanding(0), 8);
    assert_eq!(recovery.next_lost(309), None);
    assert_eq!(recovery.next_lost(310), Some((0, 1)));
    // Packets 2–7 left 240–290 before: lost with it, offered at once and no longer in flight;
    // packet 8 (sent 90 before) is not.
    assert_eq!(recovery.outstanding(0), 1);
    assert_eq!(recovery.next_deadline(), Some(310));
    for seq in 2..8 {
        assert_eq!(recovery.next_lost(310), Some((0, seq)));
        recovery.on_send(0, seq, 310);
    }
    assert_eq!(recovery.next_lost(310), None);
    let stats = recovery.stats();
    assert_eq!(
        (
            stats.timeouts,
            stats.timeout_flight_losses,
            stats.reorder_losses
        ),
        (1, 6, 0)
    );
}

#[test]
fn without_a_reordering_window_each_lost_packet_waits_for_its_own_backed_off_timer() {
    let mut recovery = SelectiveRepeat::new(CONFIG, &[9]);
    whole_window_lost(&mut recovery);
    assert_eq!(recovery.next_lost(310), Some((0, 1)));
    assert_eq!(recovery.outstanding(0), 7);
    assert_eq!(recovery.next_lost(310), None);
    // Packet 2's timer runs rto · 2 after the first timeout: 20 + 600.
    assert_eq!(recovery.next_deadline(), Some(620));
    assert_eq!(recovery.stats().timeout_flight_losses, 0);
}
