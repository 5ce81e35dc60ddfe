//! Per-switch seeds: one run seed, a different seed for every switch.
//!
//! A lab or a model run has one seed. Every switch derives its own from it and its node name
//! ([`switch_seed`]), and seeds everything random in it from that: its ECMP hash salt, its
//! pointer starts, its random streams (RSQ, JSQ/AR/DRILL tie-breaks) and its forwarder's salt.
//! Were the run seed used as is, every switch would salt its hash the same way, and ECMP would
//! be hash-polarized: an aggregation switch would pick the same up-port rank as the edge switch
//! before it, and inter-pod traffic would reach only w of the w² cores.
//!
//! The derivation is written out here and stable: the same (seed, name) gives the same switch
//! seed in every build, on every machine and in every crate that asks (the `ofan-switch`
//! process, the model), so a lab switch and its model twin make the same random choices. It
//! uses no `std::hash::Hasher`, whose output may change between Rust releases.

/// The seed of switch `node` (its name, e.g. `e-p0-0`) in a run of seed `seed`:
/// `mix64(seed ⊕ mix64(fnv1a64(node)))`, with FNV-1a (64 bit) over the name's UTF-8 bytes and
/// `mix64` the SplitMix64 finalizer.
///
/// For one run seed, two switches get the same seed only if the FNV-1a hashes of their names
/// collide (the finalizer is a bijection); no two node names of any fat tree or leaf-spine of
/// this crate do (a unit test checks every one up to k = 64).
#[must_use]
pub fn switch_seed(seed: u64, node: &str) -> u64 {
    mix64(seed ^ mix64(fnv1a64(node.as_bytes())))
}

/// FNV-1a, 64 bit (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
const fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut index = 0;
    while index < bytes.len() {
        hash ^= bytes[index] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        index += 1;
    }
    hash
}

/// The SplitMix64 finalizer (Steele, Lea and Flood, 2014): a bijective, well-mixing 64-bit
/// hash. Every seeded value of ofan (switch seeds here; pointer starts, hash salts and the
/// model's streams in `ofan_dataplane::lb`, which re-exports it) is derived with it, so that
/// values do not depend on the order in which they are asked for.
#[must_use]
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::Topology;

    #[test]
    fn fnv1a_and_splitmix_match_their_reference_values() {
        // FNV-1a test vectors (Fowler, Noll, Vo: the empty string is the offset basis).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        // SplitMix64 seeded with 0: its first output is the finalizer of the golden gamma.
        assert_eq!(mix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
    }

    #[test]
    fn the_switches_of_a_k4_fat_tree_get_pairwise_different_seeds() {
        let topology = Topology::fat_tree(4).unwrap();
        for seed in [0, 1, 2, u64::MAX] {
            let seeds: HashSet<u64> = topology
                .switches()
                .iter()
                .map(|switch| switch_seed(seed, &switch.name))
                .collect();
            assert_eq!(seeds.len(), 20, "seed {seed}");
            // And none is the run seed itself (the seed every switch used to share).
            assert!(!seeds.contains(&seed), "seed {seed}");
        }
        // The run seed matters: another seed moves every switch.
        for switch in topology.switches() {
            assert_ne!(switch_seed(1, &switch.name), switch_seed(2, &switch.name));
        }
    }

    #[test]
    fn no_two_node_names_of_any_topology_share_a_name_hash() {
        // Then, whatever the run seed, the switches of any topology get distinct seeds.
        for k in (4..=64).step_by(2) {
            for topology in [Topology::fat_tree(k), Topology::leaf_spine(k)] {
                let topology = topology.unwrap();
                let hashes: HashSet<u64> = topology
                    .nodes()
                    .iter()
                    .map(|node| fnv1a64(node.name.as_bytes()))
                    .collect();
                assert_eq!(hashes.len(), topology.nodes().len(), "k = {k}");
            }
        }
    }
}
