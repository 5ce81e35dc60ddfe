//! Arbitrary bytes through parse-and-decide.
//!
//! The input's first byte picks the algorithm, the state of the Up ports and how the rest is
//! cut into frames: one frame, or a batch of length-prefixed frames (up to 80, so batches cross
//! `lb::MAX_BATCH`). Every frame goes through `Forwarder::process_batch` against a small fixed
//! table (a three-port edge switch: one host port, two Up ports in a northbound group).
//! Checked: no panic; a forwarded frame parsed before, still parses, keeps its addresses and
//! ports and has its TTL / hop limit decremented by exactly one (an IPv4 frame that parses
//! after the rewrite also has a correct header checksum); a frame that is not forwarded is not
//! touched.
#![no_main]

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ofan_dataplane::fib::{
    Fib, FibBuilder, IpPrefix, NextHop, Port, PortId, PortRole, RouteTarget,
};
use ofan_dataplane::forward::{Forwarder, ForwarderConfig, FrameRef, Verdict};
use ofan_dataplane::lb::{Algorithm, DestKey, LbConfig, PortLoad, SwitchBalancer};
use ofan_dataplane::wire;

/// The fixed table, in four port states: all usable, Up position 0 down, Up position 1
/// unresolved, nothing usable up.
fn tables() -> &'static [Fib; 4] {
    static TABLES: OnceLock<[Fib; 4]> = OnceLock::new();
    TABLES.get_or_init(|| {
        [
            table([true, true], [true, true]),
            table([false, true], [true, true]),
            table([true, true], [true, false]),
            table([false, true], [true, false]),
        ]
    })
}

fn table(oper_up: [bool; 2], resolved: [bool; 2]) -> Fib {
    let prefix = |text: &str| text.parse::<IpPrefix>().unwrap();
    let mut builder = FibBuilder::new();
    builder.port(
        PortId(0),
        Port {
            ifindex: 10,
            mac: [2, 0, 0, 0, 0, 10],
            role: PortRole::Host,
            up_position: None,
            oper_up: true,
        },
    );
    for position in 0..2u8 {
        builder.port(
            PortId(1 + u16::from(position)),
            Port {
                ifindex: 11 + u32::from(position),
                mac: [2, 0, 0, 0, 0, 11 + position],
                role: PortRole::Up,
                up_position: Some(position),
                oper_up: oper_up[usize::from(position)],
            },
        );
    }
    let up = builder.group((0..2u8).map(|i| NextHop {
        port: PortId(1 + u16::from(i)),
        gateway: IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1 + i)),
        mac: resolved[usize::from(i)].then_some([2, 0, 0, 0, 1, i]),
    }));
    let host = builder.group([NextHop {
        port: PortId(0),
        gateway: "10.0.0.2".parse().unwrap(),
        mac: Some([2, 0, 0, 0, 2, 2]),
    }]);
    builder
        .route(prefix("0.0.0.0/0"), RouteTarget::Group(up))
        .route(prefix("10.0.0.0/24"), RouteTarget::Group(host))
        .route(prefix("10.0.0.128/25"), RouteTarget::Local)
        .route(prefix("10.9.0.0/16"), RouteTarget::Unreachable)
        .route(prefix("::/0"), RouteTarget::Group(up))
        .route(prefix("fd00::/64"), RouteTarget::Group(host))
        .dest_key(prefix("10.0.0.0/8"), DestKey(0))
        .dest_key(prefix("10.1.0.0/16"), DestKey(1))
        .dest_key(prefix("fd00::/16"), DestKey(2))
        .dest_keys(3)
        .local_address("10.0.0.1".parse().unwrap())
        .local_address("fd00::1".parse().unwrap());
    builder.build().unwrap()
}

fn forwarder(algorithm: Algorithm) -> Forwarder {
    let switch = SwitchBalancer::new(LbConfig {
        algorithm,
        up_ports: 2,
        dest_keys: 3,
        pipes: 1,
        buffer_bytes: 1 << 20,
        seed: 7,
    })
    .unwrap();
    Forwarder::new(
        switch.pipe(0).unwrap(),
        ForwarderConfig {
            max_frame_len: 1518,
            ..ForwarderConfig::default()
        },
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    // Bits 5–7 pick the algorithm and bit 3 the half of the list, so all eleven are reachable
    // (bit 0 cuts the input, bits 1–2 pick the FIB, bit 4 hands each frame over as the first
    // buffer of a multi-buffer packet: its first half, the packet's length its whole).
    let algorithm = Algorithm::ALL
        [(usize::from(control >> 5) + usize::from(control >> 3 & 1) * 8) % Algorithm::ALL.len()];
    let fib = &tables()[usize::from(control >> 1) & 3];

    // Cut the input into frames.
    let mut frames: Vec<Vec<u8>> = Vec::new();
    if control & 1 == 0 {
        frames.push(rest.to_vec());
    } else {
        let mut rest = rest;
        while let Some((&len, tail)) = rest.split_first() {
            if frames.len() == 80 {
                break;
            }
            let len = usize::from(len).min(tail.len());
            frames.push(tail[..len].to_vec());
            rest = &tail[len..];
        }
    }

    let split = control & 0x10 != 0;
    let head_len = |frame: &[u8]| {
        if split {
            frame.len().div_ceil(2)
        } else {
            frame.len()
        }
    };
    let before = frames.clone();
    let mut refs: Vec<FrameRef<'_>> = frames
        .iter_mut()
        .map(|data| {
            let (len, head) = (data.len() as u32, head_len(data));
            FrameRef {
                ingress: PortId(0),
                len,
                data: &mut data[..head],
            }
        })
        .collect();
    let mut verdicts = vec![Verdict::Forward { port: PortId(0) }; refs.len()];
    let mut loads = [PortLoad::default(); 2];
    let mut forwarder = forwarder(algorithm);
    forwarder.process_batch(fib, &mut refs, &mut loads, &mut verdicts);

    for ((old, new), verdict) in before.iter().zip(&frames).zip(&verdicts) {
        match verdict {
            Verdict::Forward { .. } => {
                let head = head_len(old);
                // Only the first buffer is read or written.
                assert_eq!(old[head..], new[head..], "past the first buffer untouched");
                let old =
                    wire::parse_head(&old[..head], old.len()).expect("a forwarded frame parsed");
                let new = wire::parse_head(&new[..head], new.len())
                    .expect("a forwarded frame still parses");
                assert_eq!(
                    new.hop_limit,
                    old.hop_limit - 1,
                    "TTL decremented by exactly one"
                );
                assert_eq!((new.src, new.dst, new.ports), (old.src, old.dst, old.ports));
            }
            _ => assert_eq!(old, new, "a frame that is not forwarded is not touched"),
        }
    }
    let counters = forwarder.counters();
    assert_eq!(
        counters.frames,
        counters.forwarded + counters.total_drops() + counters.to_kernel.iter().sum::<u64>()
    );
});
