//! Longest-prefix match: one open-addressing hash table per prefix length present, searched
//! from the longest length down.
//!
//! A fat tree's tables use a handful of lengths (host /32 or /128, edge /24, pod /16, default),
//! so a lookup is a few multiply-shift hashes and a few cache lines, allocation-free. Tables are
//! at most half full (linear probing finds an empty slot after ~1.5 probes on a miss).

use std::fmt;
use std::ops::BitAnd;

/// Address bits an [`Lpm`] can be keyed by (`u32` for IPv4, `u128` for IPv6).
pub(crate) trait LpmBits: Copy + Eq + BitAnd<Output = Self> + fmt::Debug {
    /// Address width.
    const BITS: u8;

    /// The mask of a prefix of `len` bits (`len ≤ BITS`).
    fn prefix_mask(len: u8) -> Self;

    /// A 64-bit hash whose high bits depend on every input bit.
    fn hash(self) -> u64;
}

/// Fibonacci hashing constant (2⁶⁴ / φ, odd).
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl LpmBits for u32 {
    const BITS: u8 = 32;

    #[inline]
    fn prefix_mask(len: u8) -> Self {
        u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
    }

    #[inline]
    fn hash(self) -> u64 {
        u64::from(self).wrapping_mul(GOLDEN)
    }
}

impl LpmBits for u128 {
    const BITS: u8 = 128;

    #[inline]
    fn prefix_mask(len: u8) -> Self {
        u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
    }

    #[inline]
    fn hash(self) -> u64 {
        let high = (self >> 64) as u64;
        let low = (self as u64)
            .wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            .rotate_left(32);
        (high ^ low).wrapping_mul(GOLDEN)
    }
}

/// The prefixes of one length.
#[derive(Clone)]
struct LengthTable<A, V> {
    len: u8,
    mask: A,
    /// `64 - log2(slots.len())`: the hash's top bits index the table.
    shift: u32,
    slots: Box<[Option<(A, V)>]>,
}

impl<A: LpmBits, V: Copy> LengthTable<A, V> {
    fn new(len: u8, entries: &[(A, V)]) -> Self {
        // Power of two, at least 2, at most half full.
        let capacity = (entries.len() * 2).next_power_of_two().max(2);
        let mut table = Self {
            len,
            mask: A::prefix_mask(len),
            shift: 64 - capacity.trailing_zeros(),
            slots: vec![None; capacity].into_boxed_slice(),
        };
        for &(key, value) in entries {
            let index_mask = table.slots.len() - 1;
            let mut index = table.home(key);
            loop {
                match &mut table.slots[index] {
                    slot @ None => {
                        *slot = Some((key, value));
                        break;
                    }
                    Some((existing, stored)) if *existing == key => {
                        *stored = value;
                        break;
                    }
                    Some(_) => index = (index + 1) & index_mask,
                }
            }
        }
        table
    }

    #[inline]
    fn home(&self, key: A) -> usize {
        (key.hash() >> self.shift) as usize
    }

    #[inline]
    fn get(&self, addr: A) -> Option<V> {
        let key = addr & self.mask;
        let index_mask = self.slots.len() - 1;
        let mut index = self.home(key);
        // The table is at most half full, so the probe ends at an empty slot.
        loop {
            match self.slots.get(index)? {
                None => return None,
                Some((stored, value)) if *stored == key => return Some(*value),
                Some(_) => index = (index + 1) & index_mask,
            }
        }
    }
}

/// A longest-prefix-match table from prefixes of `A` to values `V`.
#[derive(Clone)]
pub(crate) struct Lpm<A, V> {
    /// One table per length present, longest first.
    tables: Box<[LengthTable<A, V>]>,
    entries: usize,
}

impl<A: LpmBits, V: Copy> Lpm<A, V> {
    /// An empty table.
    pub(crate) fn empty() -> Self {
        Self {
            tables: Box::default(),
            entries: 0,
        }
    }

    /// Builds the table from `(prefix bits, length, value)`; the prefix's host bits must be
    /// zero; a repeated prefix keeps the last value.
    pub(crate) fn build(entries: impl IntoIterator<Item = (A, u8, V)>) -> Self {
        let mut by_len: Vec<Vec<(A, V)>> = vec![Vec::new(); usize::from(A::BITS) + 1];
        for (prefix, len, value) in entries {
            debug_assert!(len <= A::BITS && prefix & A::prefix_mask(len) == prefix);
            by_len[usize::from(len)].push((prefix, value));
        }
        let tables: Box<[_]> = by_len
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, entries)| !entries.is_empty())
            .map(|(len, entries)| LengthTable::new(len as u8, entries))
            .collect();
        let entries = tables
            .iter()
            .map(|table| table.slots.iter().flatten().count())
            .sum();
        Self { tables, entries }
    }

    /// The value of the longest prefix containing `addr`.
    #[inline]
    pub(crate) fn lookup(&self, addr: A) -> Option<V> {
        self.tables.iter().find_map(|table| table.get(addr))
    }

    /// The value of the longest prefix of at most `max_len` bits containing `addr`.
    pub(crate) fn lookup_within(&self, addr: A, max_len: u8) -> Option<V> {
        self.tables
            .iter()
            .filter(|table| table.len <= max_len)
            .find_map(|table| table.get(addr))
    }

    /// Every prefix, as (prefix bits, length).
    pub(crate) fn prefixes(&self) -> impl Iterator<Item = (A, u8)> + '_ {
        self.tables.iter().flat_map(|table| {
            table
                .slots
                .iter()
                .flatten()
                .map(move |&(prefix, _)| (prefix, table.len))
        })
    }

    /// Every entry, as (prefix bits, length, value).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (A, u8, V)> + '_ {
        self.tables.iter().flat_map(|table| {
            table
                .slots
                .iter()
                .flatten()
                .map(move |&(prefix, value)| (prefix, table.len, value))
        })
    }

    /// The value of exactly this prefix.
    pub(crate) fn get_exact(&self, prefix: A, len: u8) -> Option<V> {
        self.tables
            .iter()
            .find(|table| table.len == len)
            .and_then(|table| table.get(prefix))
    }

    /// Number of prefixes.
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    /// The prefix lengths present, longest first.
    pub(crate) fn lengths(&self) -> impl Iterator<Item = u8> + '_ {
        self.tables.iter().map(|table| table.len)
    }
}

impl<A: LpmBits, V: Copy> fmt::Debug for Lpm<A, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lpm")
            .field("entries", &self.entries)
            .field("lengths", &self.lengths().collect::<Vec<_>>())
            .finish()
    }
}
