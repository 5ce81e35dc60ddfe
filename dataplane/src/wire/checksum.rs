//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are ones'-complement sums of big-endian 16-bit words; a trailing odd byte is padded
//! with a zero byte. A checksum field holds the complement of the sum of every other word, so
//! a correct header sums (checksum included) to `0xFFFF`.

/// Folds the carries of a wide sum back into 16 bits (end-around carry), in four fixed steps:
/// 64 → 33 → 32 bits, then 32 → 17 → 16 bits (each step adds the carries back in, and a sum of
/// two halves exceeds the half width by at most one carry, which the next step absorbs).
#[inline]
const fn fold(sum: u64) -> u16 {
    let sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    let sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    let sum = (sum & 0xFFFF) + (sum >> 16);
    let sum = (sum & 0xFFFF) + (sum >> 16);
    sum as u16
}

/// The ones'-complement sum of `data`, not complemented.
///
/// Never `0x0000` unless every word of `data` is zero: end-around carry turns a sum that is a
/// multiple of `0xFFFF` into `0xFFFF` ("negative zero").
///
/// The sum does not depend on byte order (RFC 1071 §2(B)), so it is taken over 32-bit words in
/// the machine's order — two 16-bit words per addition, the carry out of the low one landing in
/// the high one as end-around carry would — and the folded result's bytes, in memory order, are
/// the network-order sum.
#[inline]
pub fn ones_complement_sum(data: &[u8]) -> u16 {
    let mut sum = 0u64;
    let mut words = data.chunks_exact(4);
    for word in &mut words {
        sum += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
    }
    // 0 to 3 bytes left; an odd last byte is the high byte of a word padded with zero.
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    sum += u64::from(u32::from_ne_bytes(tail));
    u16::from_be_bytes(fold(sum).to_ne_bytes())
}

/// The checksum to store for `data` (its checksum field counted as zero): the complement of
/// [`ones_complement_sum`].
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !ones_complement_sum(data)
}

/// Whether `data`, checksum field included, sums to `0xFFFF`.
#[inline]
pub fn verify(data: &[u8]) -> bool {
    ones_complement_sum(data) == 0xFFFF
}

/// The checksum after one 16-bit word of the covered data changed from `old` to `new`, by
/// RFC 1624 equation 3: `HC' = ~(~HC + ~m + m')`.
///
/// Unlike equation 2 (`HC' = HC - ~m - m'`, RFC 1141), this never yields `0xFFFF` where a full
/// recomputation yields `0x0000` (RFC 1624 §3): the sum in parentheses is `0x0000` only when all
/// three terms are zero, which would need `old = 0xFFFF, new = 0x0000` and `HC = 0xFFFF`.
#[inline]
pub const fn update(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = (!checksum) as u64 + (!old) as u64 + new as u64;
    !fold(sum)
}
