//! `value mod divisor` for the port counts a switch has, without a division instruction.

use super::MAX_PORTS;

/// Remainders by a small divisor without a division instruction (Lemire, Kaser and Kurz,
/// "Faster remainder by direct computation", 2019): two multiplications per 32-bit step.
///
/// A 64-bit division costs tens of cycles and every pointer decision needs a remainder by the
/// number of ports, so the divisors a switch uses (1..=64) are prepared once.
#[derive(Debug, Clone, Copy)]
struct FastMod {
    divisor: u64,
    magic: u64,
    /// 2³² mod divisor, to fold the high half of a 64-bit numerator.
    wrap: u32,
}

impl FastMod {
    const fn new(divisor: u32) -> Self {
        assert!(divisor >= 1 && divisor <= 1 << 16);
        Self {
            divisor: divisor as u64,
            magic: (u64::MAX / divisor as u64).wrapping_add(1),
            wrap: ((1u64 << 32) % divisor as u64) as u32,
        }
    }

    #[inline]
    fn of_u32(&self, value: u32) -> u32 {
        let low = self.magic.wrapping_mul(u64::from(value));
        ((u128::from(low) * u128::from(self.divisor)) >> 64) as u32
    }

    #[inline]
    fn of_u64(&self, value: u64) -> u32 {
        let high = self.of_u32((value >> 32) as u32);
        // high · wrap + low mod d < d² + d ≤ 2³² for d ≤ 2¹⁶.
        self.of_u32(high * self.wrap + self.of_u32(value as u32))
    }
}

/// `FastMod` for every divisor 0..=64 (index 0 unused).
const FAST_MODS: [FastMod; MAX_PORTS + 1] = {
    let mut table = [FastMod::new(1); MAX_PORTS + 1];
    let mut divisor = 1;
    while divisor <= MAX_PORTS {
        table[divisor] = FastMod::new(divisor as u32);
        divisor += 1;
    }
    table
};

/// `value mod divisor` for 1 ≤ divisor ≤ 64, without dividing.
///
/// Pointer counts stay below 2³² for billions of packets, so the 32-bit remainder (a third of
/// the work) is tried first.
#[inline]
pub(super) fn mod_small(value: u64, divisor: u32) -> u32 {
    let fast_mod = &FAST_MODS[divisor as usize];
    match u32::try_from(value) {
        Ok(small) => fast_mod.of_u32(small),
        Err(_) => fast_mod.of_u64(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn fast_mod_equals_the_remainder(value in any::<u64>(), divisor in 1u32..=64) {
            prop_assert_eq!(u64::from(mod_small(value, divisor)), value % u64::from(divisor));
        }

        #[test]
        fn fast_mod_of_32_bit_values_equals_the_remainder(value in any::<u32>(), divisor in 1u32..=64) {
            let value = u64::from(value);
            prop_assert_eq!(u64::from(mod_small(value, divisor)), value % u64::from(divisor));
        }
    }

    #[test]
    fn fast_mod_at_the_edges() {
        for divisor in 1..=64u32 {
            for value in [
                0,
                1,
                u64::from(divisor) - 1,
                u64::from(divisor),
                u64::from(u32::MAX),
                u64::MAX,
                u64::MAX - 1,
            ] {
                assert_eq!(
                    u64::from(mod_small(value, divisor)),
                    value % u64::from(divisor),
                    "{value} mod {divisor}"
                );
            }
        }
    }
}
