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

mod arf;
mod baselines;
mod dragonfly;
mod dragonfly_router;
mod ofan;
