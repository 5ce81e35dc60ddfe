//! Every drop and kernel reason reached and counted, under names that never change.

use super::*;

/// Frames that reach every drop and kernel reason, with the reason they must reach.
pub(super) fn one_frame_per_reason() -> Vec<(Vec<u8>, Verdict)> {
    let good = v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 100);
    let fixed = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut frame = good.clone();
        edit(&mut frame);
        refill_ipv4_checksum(&mut frame, 14);
        frame
    };
    let parse = |error| Verdict::Drop(DropReason::Parse(error));
    let drop = Verdict::Drop;
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut bad_version = good.clone();
    bad_version[12..14].copy_from_slice(&[0x86, 0xdd]);
    let mut bad_checksum = good.clone();
    bad_checksum[24] ^= 0x40;
    let mut bad_v6 = v6("fd00::2", "fd00:0:0:1::5", 64, 10);
    bad_v6[19] = 200;
    vec![
        (good[..20].to_vec(), parse(ParseError::Truncated)),
        (arp, parse(ParseError::UnknownEtherType)),
        (
            tagged(&tagged(&good, 1), 2),
            parse(ParseError::UnsupportedVlan),
        ),
        (bad_version, parse(ParseError::BadVersion)),
        (fixed(&|f| f[14] = 0x44), parse(ParseError::BadIpv4Header)),
        (fixed(&|f| f[14] = 0x46), parse(ParseError::Ipv4Options)),
        (bad_checksum, parse(ParseError::BadIpv4Checksum)),
        (fixed(&|f| f[20] = 0x20), parse(ParseError::Fragment)),
        (bad_v6, parse(ParseError::BadIpv6Header)),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1500),
            drop(DropReason::FrameTooLarge),
        ),
        (
            v4([10, 0, 0, 2], [224, 0, 0, 5], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v4([10, 0, 0, 2], [255, 255, 255, 255], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v4([127, 0, 0, 1], [10, 0, 1, 5], 64, 10),
            drop(DropReason::Martian),
        ),
        (
            v6("fe80::2", "fd00:0:0:1::5", 64, 10),
            drop(DropReason::Martian),
        ),
        (v6("fd00::2", "ff02::1", 64, 10), drop(DropReason::Martian)),
        (
            v4([10, 0, 0, 2], [192, 0, 2, 1], 64, 10),
            drop(DropReason::NoRoute),
        ),
        (
            v6("fd00::2", "2001:db8::1", 64, 10),
            drop(DropReason::NoRoute),
        ),
        (
            v4([10, 0, 0, 2], [10, 9, 0, 1], 64, 10),
            drop(DropReason::Unreachable),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 1, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 1, 5], 0, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v6("fd00::2", "fd00:0:0:1::5", 1, 10),
            drop(DropReason::TtlExpired),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 0, 1], 1, 10),
            Verdict::Kernel(KernelReason::LocalAddress),
        ),
        (
            v6("fd00::2", "fd00::1", 64, 10),
            Verdict::Kernel(KernelReason::LocalAddress),
        ),
        (
            v4([10, 0, 0, 2], [10, 0, 0, 254], 64, 10),
            Verdict::Kernel(KernelReason::LocalRoute),
        ),
    ]
}

#[test]
fn every_drop_and_kernel_reason_is_reached_and_counted() {
    let mut cases = one_frame_per_reason();
    // Port-state reasons need their own tables; frames whose choice would be up.
    let down = fib(UpState {
        oper_up: [false; 2],
        resolved: [true; 2],
    });
    let unresolved = fib(UpState {
        oper_up: [true; 2],
        resolved: [false; 2],
    });
    let half = fib(UpState {
        oper_up: [false, true],
        resolved: [true, false],
    });
    let mut fwd = forwarder();
    for (table, reason) in [
        (&down, DropReason::PortDown),
        (&unresolved, DropReason::NeighborUnresolved),
        (&half, DropReason::NeighborUnresolved),
    ] {
        for frame in [
            v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 10),
            v4([10, 0, 0, 2], [10, 0, 3, 5], 64, 10),
        ] {
            let (verdict, out) = run_one(&mut fwd, table, frame.clone());
            assert_eq!(verdict, Verdict::Drop(reason));
            assert_eq!(out, frame, "dropped frames are not touched");
        }
    }

    let table = fib(ALL_UP);
    let (mut frames, expected): (Vec<_>, Vec<_>) = cases.drain(..).unzip();
    let originals = frames.clone();
    let verdicts = run(&mut fwd, &table, &mut frames);
    assert_eq!(verdicts, expected);
    assert_eq!(frames, originals, "frames not forwarded are not touched");

    let seen: HashSet<Verdict> = verdicts
        .iter()
        .copied()
        .chain([DropReason::PortDown, DropReason::NeighborUnresolved].map(Verdict::Drop))
        .collect();
    for reason in DropReason::ALL {
        assert!(
            seen.contains(&Verdict::Drop(reason)),
            "{} never reached",
            reason.name()
        );
    }
    for reason in KernelReason::ALL {
        assert!(
            seen.contains(&Verdict::Kernel(reason)),
            "{} never reached",
            reason.name()
        );
    }
    let counters = fwd.counters();
    assert_eq!(counters.dropped(DropReason::Martian), 5);
    assert_eq!(counters.dropped(DropReason::TtlExpired), 3);
    assert_eq!(counters.dropped(DropReason::PortDown), 2);
    assert_eq!(counters.dropped(DropReason::NeighborUnresolved), 4);
    assert_eq!(counters.kernel(KernelReason::LocalAddress), 2);
    assert_eq!(counters.forwarded, 0);
    assert_eq!(
        counters.frames,
        counters.total_drops() + counters.to_kernel.iter().sum::<u64>()
    );
}

#[test]
fn reason_indices_and_names_are_distinct() {
    let mut names = HashSet::new();
    for (index, reason) in DropReason::ALL.into_iter().enumerate() {
        assert_eq!(reason.as_index(), index);
        assert!(names.insert(reason.name()), "{}", reason.name());
    }
    for (index, reason) in KernelReason::ALL.into_iter().enumerate() {
        assert_eq!(reason.as_index(), index);
        assert!(names.insert(reason.name()), "{}", reason.name());
    }
}

/// The reasons' names reach users — `drop_<name>` and `kernel_<name>` in the admin `stats` and
/// Prometheus' `reason` label, `switch.<name>` in the lab reports' `by_reason` — and the index
/// order is the order they are published in: a rename or a reorder must fail here.
#[test]
fn reason_names_are_pinned_in_index_order() {
    assert_eq!(
        DropReason::ALL.map(DropReason::name),
        [
            "truncated",
            "unknown_ether_type",
            "unsupported_vlan",
            "bad_version",
            "bad_ipv4_header",
            "ipv4_options",
            "bad_ipv4_checksum",
            "fragment",
            "bad_ipv6_header",
            "frame_too_large",
            "martian",
            "no_route",
            "unreachable",
            "ttl_expired",
            "port_down",
            "neighbor_unresolved",
        ]
    );
    assert_eq!(
        KernelReason::ALL.map(KernelReason::name),
        ["local_address", "local_route"]
    );
}
