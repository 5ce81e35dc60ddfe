//! Random frames never panic and never corrupt a batch; martian checks match std.

use super::reasons::one_frame_per_reason;
use super::*;

/// Frames for the random test: random bytes, or a valid frame with a few random bytes
/// changed, so that every stage of the pipeline sees input.
fn random_frame(rng: &mut LbRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 {
        let len = rng.below(160) as usize;
        return (0..len).map(|_| rng.next_u64() as u8).collect();
    }
    let mut frame = seeds[rng.below(seeds.len() as u32) as usize].clone();
    for _ in 0..rng.below(4) {
        let at = rng.below(frame.len() as u32) as usize;
        frame[at] = rng.next_u64() as u8;
    }
    if rng.below(8) == 0 {
        frame.truncate(rng.below(frame.len() as u32 + 1) as usize);
    }
    frame
}

/// The forwarding invariants of one processed batch, as the fuzz target checks them.
fn check_batch(before: &[Vec<u8>], after: &[Vec<u8>], verdicts: &[Verdict]) {
    for ((old, new), verdict) in before.iter().zip(after).zip(verdicts) {
        match verdict {
            Verdict::Forward { .. } => {
                let old = wire::parse(old).expect("a forwarded frame parsed");
                let new = wire::parse(new).expect("a forwarded frame still parses");
                assert_eq!(new.hop_limit, old.hop_limit - 1);
                assert_eq!((new.src, new.dst, new.ports), (old.src, old.dst, old.ports));
            }
            _ => assert_eq!(old, new, "frames not forwarded are not touched"),
        }
    }
}

#[test]
fn hundred_thousand_random_frames_never_panic() {
    let tables = [
        fib(ALL_UP),
        fib(UpState {
            oper_up: [true, false],
            resolved: [true, true],
        }),
        fib(UpState {
            oper_up: [true, true],
            resolved: [false, true],
        }),
    ];
    let mut seeds: Vec<Vec<u8>> = one_frame_per_reason()
        .into_iter()
        .map(|(frame, _)| frame)
        .collect();
    seeds.extend([
        v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 1000),
        v4([10, 0, 0, 2], [10, 0, 3, 5], 2, 60),
        v4([10, 1, 0, 2], [10, 0, 0, 2], 64, 10),
        v6("fd00::2", "fd00:0:0:1::5", 64, 10),
        v6("fd00:0:0:1::5", "fd00::2", 64, 10),
        tagged(&v4([10, 0, 0, 2], [10, 0, 1, 5], 64, 100), 5),
        captured_ipv4_udp(),
        ipv6_tcp_syn(),
    ]);
    let mut rng = LbRng::new(0x0fa0_5eed);
    let mut fwds = [
        forwarder_with(Algorithm::Ofan, 2, 3),
        forwarder_with(Algorithm::Jsq, 2, 3),
        forwarder_with(Algorithm::Ofan, 1, 1),
    ];
    let mut total = 0u64;
    while total < 100_000 {
        let n = 1 + rng.below(80) as usize;
        let before: Vec<_> = (0..n).map(|_| random_frame(&mut rng, &seeds)).collect();
        let mut after = before.clone();
        let which = rng.below(3) as usize;
        let verdicts = run(&mut fwds[which], &tables[rng.below(3) as usize], &mut after);
        check_batch(&before, &after, &verdicts);
        total += n as u64;
    }
    let frames: u64 = fwds.iter().map(|f| f.counters().frames).sum();
    let forwarded: u64 = fwds.iter().map(|f| f.counters().forwarded).sum();
    assert_eq!(frames, total);
    assert!(
        forwarded > total / 10,
        "the random frames reach forwarding too ({forwarded})"
    );
    for fwd in &fwds {
        let c = fwd.counters();
        assert_eq!(
            c.frames,
            c.forwarded + c.total_drops() + c.to_kernel.iter().sum::<u64>()
        );
    }
}

/// The IPv4 martian test on address bits says what the standard library's predicates say.
#[test]
fn martian_bits_match_std_predicates() {
    let std_never =
        |a: Ipv4Addr| a.is_multicast() || a.is_broadcast() || a.is_loopback() || a.is_link_local();
    let edges = [
        0u32,
        1,
        0x7eff_ffff,
        0x7f00_0000,
        0x7fff_ffff,
        0x8000_0000,
        0xa9fd_ffff,
        0xa9fe_0000,
        0xa9fe_ffff,
        0xa9ff_0000,
        0xdfff_ffff,
        0xe000_0000,
        0xefff_ffff,
        0xf000_0000,
        0xffff_fffe,
        0xffff_ffff,
        0x0a00_0001,
    ];
    let mut rng = LbRng::new(5);
    let addresses: Vec<u32> = edges
        .into_iter()
        .chain((0..20_000).map(|_| rng.next_u64() as u32))
        .collect();
    for &src in &addresses {
        for dst in [0x0a00_0105u32, src, addresses[(src % 17) as usize]] {
            let (s, d) = (Ipv4Addr::from(src), Ipv4Addr::from(dst));
            let expected = std_never(s) || std_never(d) || s.is_unspecified() || d.is_unspecified();
            assert_eq!(
                is_martian(IpAddr::V4(s), IpAddr::V4(d)),
                expected,
                "{s} -> {d}"
            );
        }
    }
}
