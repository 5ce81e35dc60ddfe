//! Exactly-once accounting: which sequence numbers of a flow have been seen.

/// What [`SeqSet::insert`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// First time.
    New,
    /// Seen before.
    Duplicate,
    /// Beyond the flow's packet count.
    OutOfRange,
}

/// The set of sequence numbers `0..len` seen so far, as a bitmap.
#[derive(Debug, Clone)]
pub struct SeqSet {
    bits: Vec<u64>,
    len: u32,
    distinct: u32,
    duplicates: u64,
}

impl SeqSet {
    /// An empty set for a flow of `len` packets.
    #[must_use]
    pub fn new(len: u32) -> Self {
        Self {
            bits: vec![0; (len as usize).div_ceil(64)],
            len,
            distinct: 0,
            duplicates: 0,
        }
    }

    /// Marks `sequence` as seen.
    pub fn insert(&mut self, sequence: u32) -> Seen {
        if sequence >= self.len {
            return Seen::OutOfRange;
        }
        let (word, bit) = ((sequence / 64) as usize, sequence % 64);
        if self.bits[word] & (1 << bit) != 0 {
            self.duplicates += 1;
            return Seen::Duplicate;
        }
        self.bits[word] |= 1 << bit;
        self.distinct += 1;
        Seen::New
    }

    /// Distinct sequence numbers seen.
    #[must_use]
    pub const fn distinct(&self) -> u32 {
        self.distinct
    }

    /// Sequence numbers seen more than once (each extra sighting counts).
    #[must_use]
    pub const fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Sequence numbers never seen.
    #[must_use]
    pub const fn missing(&self) -> u32 {
        self.len - self.distinct
    }

    /// Whether every sequence number has been seen.
    #[must_use]
    pub const fn complete(&self) -> bool {
        self.distinct == self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_new_duplicate_missing() {
        let mut set = SeqSet::new(130);
        assert!(!set.complete());
        assert_eq!(set.insert(0), Seen::New);
        assert_eq!(set.insert(129), Seen::New);
        assert_eq!(set.insert(129), Seen::Duplicate);
        assert_eq!(set.insert(129), Seen::Duplicate);
        assert_eq!(set.insert(130), Seen::OutOfRange);
        assert_eq!(
            (set.distinct(), set.duplicates(), set.missing()),
            (2, 2, 128)
        );
        for sequence in 0..130 {
            set.insert(sequence);
        }
        assert!(set.complete());
        assert_eq!(set.missing(), 0);
        assert_eq!(set.duplicates(), 4);
        assert!(SeqSet::new(0).complete());
    }
}
