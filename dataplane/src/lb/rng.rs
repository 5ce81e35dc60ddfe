//! A small, fast, seedable random number generator for load-balancing decisions.
//!
//! Decisions need randomness (random tie-breaks, RSQ, DRILL samples, pointer start values) that
//! is cheap enough for the per-packet path and exactly reproducible from a seed, so that the
//! deterministic model and the tests replay bit for bit. `wyrand` gives both; it is not a
//! cryptographic generator and nothing here needs one.

/// The `wyrand` generator (Wang Yi): one 64-bit state, one add and one 128-bit multiply per draw.
#[derive(Debug, Clone)]
pub struct LbRng {
    state: u64,
}

impl LbRng {
    /// A generator whose whole future output is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            state: mix64(seed ^ 0x6f66_616e_5f72_6e67),
        }
    }

    /// The next 64 uniformly distributed bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
        let product = u128::from(self.state) * u128::from(self.state ^ 0xe703_7ed1_a0b4_28db);
        ((product >> 64) as u64) ^ (product as u64)
    }

    /// A uniform value in `0..bound` (`bound` > 0).
    ///
    /// Lemire's multiply-shift on 32 random bits, without the rejection step: the bias is at most
    /// `bound / 2³²`, below 2·10⁻⁸ for the port counts a switch has (≤ 64).
    #[inline]
    pub fn below(&mut self, bound: u32) -> u32 {
        debug_assert!(bound > 0);
        (((self.next_u64() >> 32) * u64::from(bound)) >> 32) as u32
    }
}

pub use ofan_topology::mix64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let mut a = LbRng::new(7);
        let mut b = LbRng::new(7);
        let mut c = LbRng::new(8);
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut rng = LbRng::new(1);
        let mut counts = [0u32; 6];
        for _ in 0..60_000 {
            counts[rng.below(6) as usize] += 1;
        }
        for &count in &counts {
            // 10,000 expected per bucket; 5 standard deviations is about ±460.
            assert!((9_500..10_500).contains(&count), "{counts:?}");
        }
    }
}
