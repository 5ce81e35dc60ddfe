//! Hand-computed traces of each algorithm, and invariants over random event sequences.

use proptest::prelude::*;

use super::*;

/// 1 000-byte packets, a 10 000-tick round trip at 8 Tb/s with ticks of 1 ps: a BDP of
/// 10 000 bytes (ten packets), windows capped at 15 000 — where DCTCP and MSwift start (NSCC
/// starts at the BDP).
const PATH: PathParams = PathParams {
    mss: 1_000,
    base_rtt: 10_000,
    rate_bps: 8_000_000_000_000,
};

fn ack(ecn: bool, rtt: Option<Time>, now: Time) -> AckEvent {
    AckEvent {
        bytes: 1_000,
        ecn,
        rtt,
        now,
    }
}

fn dctcp() -> Dctcp {
    match CcConfig::new(CcKind::Dctcp, PATH).controller() {
        Controller::Dctcp(dctcp) => dctcp,
        other => panic!("expected dctcp, got {other:?}"),
    }
}

fn nscc() -> Nscc {
    match CcConfig::new(CcKind::Nscc, PATH).controller() {
        Controller::Nscc(nscc) => nscc,
        other => panic!("expected nscc, got {other:?}"),
    }
}

fn mswift() -> Mswift {
    match CcConfig::new(CcKind::Mswift, PATH).controller() {
        Controller::Mswift(mswift) => mswift,
        other => panic!("expected mswift, got {other:?}"),
    }
}

#[test]
fn names_parse_and_unknown_names_say_what_is_expected() {
    for kind in CcKind::ALL {
        assert_eq!(kind.name().parse::<CcKind>(), Ok(kind));
    }
    assert_eq!("DCTCP".parse::<CcKind>(), Ok(CcKind::Dctcp));
    let error = "cubic".parse::<CcKind>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown congestion control \"cubic\": expected none, dctcp, nscc or mswift"
    );
}

#[test]
fn windows_start_at_the_cap_or_one_bdp_and_are_capped_at_one_and_a_half() {
    let config = CcConfig::new(CcKind::Dctcp, PATH);
    assert_eq!(config.initial_window, 15_000);
    assert_eq!(config.max_window, 15_000);
    assert_eq!(CcConfig::new(CcKind::Nscc, PATH).initial_window, 10_000);
    // The lab's unit: the same path in ns has the same BDP.
    let ns = PathParams {
        base_rtt: 10,
        ..PATH
    };
    assert_eq!(
        CcConfig::with_unit(CcKind::Nscc, ns, 1_000_000_000).initial_window,
        10_000
    );
    let none = CcConfig::new(CcKind::None, PATH).controller();
    assert!(none.can_send(u64::MAX / 2, 1_000));
}

#[test]
fn dctcp_alpha_follows_the_marked_fraction_of_each_window() {
    let mut flow = dctcp();
    assert_eq!(flow.alpha(), 1024);
    // Window 1: four ACKs, the second marked. ACKs without an RTT never end a window; the
    // fourth (sent at its arrival time, after the window began at 0) does.
    flow.on_ack(ack(false, None, 10));
    flow.on_ack(ack(true, None, 20));
    // α = 1 at the mark: the window is halved, once.
    assert_eq!(flow.window(), 7_500);
    flow.on_ack(ack(false, None, 30));
    flow.on_ack(ack(false, Some(0), 40));
    // M = 1/4 = 256/1024: α = 1024 − 1024/16 + 256/16 = 1024 − 64 + 16 = 976.
    assert_eq!(flow.alpha(), 976);
    // Windows 2–4: one unmarked ACK each (M = 0): α ← α − α/16 (rounded down):
    // 976 − 61 = 915, 915 − 57 = 858, 858 − 53 = 805.
    for now in [50, 60, 70] {
        flow.on_ack(ack(false, Some(0), now));
    }
    assert_eq!(flow.alpha(), 805);
    // The six unmarked ACKs so far (at 10, 30 … 70) are less than one window of 7 500 bytes:
    // congestion avoidance has not added a packet yet.
    assert_eq!(flow.window(), 7_500);
    // Window 5: two ACKs, both marked (M = 1): 805 − 50 + 64 = 819 — and one cut by α/2 with
    // the α in force at the mark (805): 7 500 − ⌊7 500 · 805 / 2048⌋ = 7 500 − 2 947 = 4 553.
    flow.on_ack(ack(true, None, 80));
    assert_eq!(flow.window(), 4_553);
    flow.on_ack(ack(true, Some(0), 90));
    assert_eq!(flow.alpha(), 819);
    // That ACK ended the window of the cut (it answers a packet sent after the cut), so its
    // mark starts the next reduction, with the new α: 4 553 − ⌊4 553 · 819 / 2048⌋ = 2 733.
    assert_eq!(flow.window(), 2_733);
}

#[test]
fn dctcp_cuts_at_most_once_per_window_and_adds_one_packet_per_window() {
    let mut flow = dctcp();
    flow.on_ack(ack(true, None, 10));
    flow.on_ack(ack(true, None, 20));
    flow.on_ack(ack(true, None, 30));
    assert_eq!(
        flow.window(),
        7_500,
        "one cut for three marks in one window"
    );
    // Congestion avoidance from 7 500: eight unmarked 1 000-byte ACKs (8 000 ≥ 7 500 bytes)
    // add one mss.
    for now in 40..47 {
        flow.on_ack(ack(false, None, now));
    }
    assert_eq!(flow.window(), 7_500);
    flow.on_ack(ack(false, None, 47));
    assert_eq!(flow.window(), 8_500);
}

#[test]
fn dctcp_timeout_restarts_from_one_packet_in_slow_start() {
    let mut flow = dctcp();
    flow.on_timeout(100);
    assert_eq!(flow.window(), 1_000);
    // ssthresh = 15 000 / 2 = 7 500: slow start adds every ACKed byte while below it —
    // 1 000 → 7 000 after six ACKs, 8 000 after the seventh —
    for now in 101..=107 {
        flow.on_ack(ack(false, None, now));
    }
    assert_eq!(flow.window(), 8_000);
    // — then congestion avoidance: one ACK adds nothing yet.
    flow.on_ack(ack(false, None, 108));
    assert_eq!(flow.window(), 8_000, "congestion avoidance above ssthresh");
}

#[test]
fn nscc_classifies_each_ack_into_its_quadrant() {
    let flow = nscc();
    // target = base_rtt / 2 = 5 000.
    assert_eq!(flow.params.target_qdelay, 5_000);
    assert_eq!(flow.quadrant(false, 4_999), Quadrant::ProportionalIncrease);
    assert_eq!(flow.quadrant(false, 5_000), Quadrant::FairIncrease);
    assert_eq!(flow.quadrant(true, 5_000), Quadrant::MultiplicativeDecrease);
    assert_eq!(flow.quadrant(true, 4_999), Quadrant::NoChange);
}

#[test]
fn nscc_quadrants_move_the_window_as_computed_by_hand() {
    // a = BDP / 150 000 = 1/15; fi = 5a = 1/3: a fair increase adds
    // fi · mss · acked / cwnd = (1/3) · 1 000 · 1 000 / 10 000 = 33 bytes (rounded down).
    // Times stay below one base RTT so that no periodic eta is added.
    let mut fair = nscc();
    fair.on_ack(ack(false, Some(10_000 + 6_000), 1_000)); // delay 6 000 ≥ target
    assert_eq!(fair.window(), 10_033);

    // Proportional increase: the fair increase plus α·(target − delay)·acked / cwnd, at
    // least as much.
    let mut proportional = nscc();
    proportional.on_ack(ack(false, Some(10_000 + 2_000), 1_000)); // delay 2 000 < target
    assert!(proportional.window() >= 10_033, "{}", proportional.window());

    // No change: ECN with a delay under target (another path is congested, not this flow).
    let mut none = nscc();
    none.on_ack(ack(true, Some(10_000 + 2_000), 1_000));
    assert_eq!(none.window(), 10_000);

    // Multiplicative decrease on the smoothed delay: one ACK of delay 800 000 makes
    // avg = 800 000 / 80 = 10 000 > target 5 000, and
    // cwnd · (1 − 0.8 · (10 000 − 5 000) / 10 000) = 10 000 · 0.6 = 6 000.
    let mut decrease = nscc();
    decrease.on_ack(ack(true, Some(10_000 + 800_000), 1_000));
    assert_eq!(decrease.window(), 6_000);
    // At most once per base RTT: the same signal 5 000 later changes nothing; after more
    // than a base RTT it cuts again, at most by half.
    decrease.on_ack(ack(true, Some(10_000 + 800_000), 6_000));
    assert_eq!(decrease.window(), 6_000);
}

#[test]
fn nscc_fast_increase_after_a_window_of_empty_queues() {
    let mut flow = nscc();
    // delay 0 < fast_delay: fast_count passes cwnd (10 000) at the 11th ACK, which adds
    // acked · fi_scale = 1 000 · a/4 = 1 000 / 60 = 16 bytes; the ten before only
    // accumulate proportional and fair increases (33 bytes each, applied per ACK).
    for now in 1..=10 {
        flow.on_ack(ack(false, Some(10_000), now));
    }
    let before = flow.window();
    flow.on_ack(ack(false, Some(10_000), 11));
    assert_eq!(flow.window(), before + 16);
}

#[test]
fn nscc_loss_takes_its_bytes_off_the_window() {
    let mut flow = nscc();
    flow.on_loss(1_000, 1_000);
    assert_eq!(flow.window(), 9_000);
}

#[test]
fn swift_decreases_at_most_once_per_rtt() {
    let mut flow = mswift();
    // target = base + base/4 = 12 500; every sample 25 000, so the median is 25 000:
    // cwnd · (1 − 0.8 · (25 000 − 12 500) / 25 000) = 15 000 · 0.6 = 9 000.
    flow.on_ack(ack(false, Some(25_000), 100_000));
    assert_eq!(flow.window(), 9_000);
    // Half an RTT later: no second decrease.
    flow.on_ack(ack(false, Some(25_000), 112_500));
    assert_eq!(flow.window(), 9_000);
    // One RTT after the first: 9 000 · 0.6 = 5 400.
    flow.on_ack(ack(false, Some(25_000), 125_000));
    assert_eq!(flow.window(), 5_400);
    // Another RTT later: 5 400 · 0.6 = 3 240.
    flow.on_ack(ack(false, Some(25_000), 150_000));
    assert_eq!(flow.window(), 3_240);
    // A very long delay cuts by at most max_mdf = ½: 1 − 0.8 · (10⁷ − 12 500) / 10⁷ < ½.
    let mut fresh = mswift();
    fresh.on_ack(ack(false, Some(10_000_000), 100_000));
    assert_eq!(fresh.window(), 7_500);
}

#[test]
fn mswift_reacts_to_the_median_not_to_one_congested_path() {
    let mut flow = mswift();
    // From half the cap, eight ACKs from empty paths (RTT = base 10 000 < target): additive
    // increase, 1 mss per window: 8 · 1 000 · 1 000 / ~7 500 ≈ 1 000 bytes.
    flow.on_timeout(0);
    for now in 1..=8 {
        flow.on_ack(ack(false, Some(10_000), now * 100));
    }
    let before = flow.window();
    assert!(before > 7_500, "{before}");
    // One ACK from a congested path: Swift alone would cut by 40 %; the median of the last
    // nine samples is still 10 000, so the window keeps growing.
    flow.on_ack(ack(false, Some(25_000), 900));
    assert!(flow.window() >= before, "{} < {before}", flow.window());
    assert_eq!(flow.median_delay(), Some(10_000));
}

#[test]
fn swift_timeouts_cut_then_reset_to_one_packet() {
    let mut flow = mswift();
    flow.on_timeout(0);
    assert_eq!(flow.window(), 7_500);
    // The other timers of the same window, expiring within the RTT: the same event.
    flow.on_timeout(10);
    assert_eq!(flow.window(), 7_500);
    for now in 1..=4 {
        flow.on_timeout(now * 1_000_000);
    }
    assert_eq!(flow.window(), 1_000);
}

/// A random event for the invariant tests.
#[derive(Debug, Clone)]
enum Event {
    Ack { ecn: bool, rtt: Option<Time> },
    Loss,
    Timeout,
}

fn events() -> impl Strategy<Value = Vec<(Event, Time)>> {
    let event = prop_oneof![
        6 => (any::<bool>(), proptest::option::of(0u64..2_000_000))
            .prop_map(|(ecn, rtt)| Event::Ack { ecn, rtt }),
        1 => Just(Event::Loss),
        1 => Just(Event::Timeout),
    ];
    proptest::collection::vec((event, 0u64..50_000), 1..400)
}

proptest! {
    /// Whatever happens, every algorithm's window stays within one packet and its cap, and a
    /// flow with nothing in flight may always send.
    #[test]
    fn windows_stay_between_one_packet_and_the_cap(events in events(), kind in 1usize..4) {
        let config = CcConfig::new(CcKind::ALL[kind], PATH);
        let mut flow = config.controller();
        let mut now = 0;
        for (event, gap) in events {
            now += gap;
            match event {
                Event::Ack { ecn, rtt } => flow.on_ack(AckEvent { bytes: 1_000, ecn, rtt, now }),
                Event::Loss => flow.on_loss(now, 1_000),
                Event::Timeout => flow.on_timeout(now),
            }
            prop_assert!(flow.window() >= PATH.mss, "{} below one packet", flow.window());
            prop_assert!(flow.window() <= config.max_window);
            prop_assert!(flow.can_send(0, PATH.mss));
        }
    }
}
