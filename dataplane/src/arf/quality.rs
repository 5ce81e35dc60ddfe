//! The vocabulary of adaptive routing: the 16 quality levels and the four events a
//! notification can carry.

/// Quality levels: 0 (poorest) to `QUALITY_LEVELS - 1` (best).
pub const QUALITY_LEVELS: u8 = 16;

/// What happened on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The link's quality fell below the congestion threshold.
    CongestionDetected,
    /// It recovered.
    CongestionCleared,
    /// The link failed.
    FailureDetected,
    /// It is back.
    FailureCleared,
}

impl Kind {
    /// Its code on the wire.
    #[must_use]
    pub const fn code(self) -> u8 {
        match self {
            Self::CongestionDetected => 1,
            Self::CongestionCleared => 2,
            Self::FailureDetected => 3,
            Self::FailureCleared => 4,
        }
    }

    /// The kind with code `code`.
    #[must_use]
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::CongestionDetected),
            2 => Some(Self::CongestionCleared),
            3 => Some(Self::FailureDetected),
            4 => Some(Self::FailureCleared),
            _ => None,
        }
    }
}

/// A quality level, 0 (poorest) to 15 (best).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quality(u8);

impl Quality {
    /// The best level.
    pub const BEST: Self = Self(QUALITY_LEVELS - 1);
    /// The poorest level.
    pub const POOREST: Self = Self(0);

    /// Level `level`, if it is one.
    #[must_use]
    pub const fn new(level: u8) -> Option<Self> {
        if level < QUALITY_LEVELS {
            Some(Self(level))
        } else {
            None
        }
    }

    /// The level.
    #[must_use]
    pub const fn level(self) -> u8 {
        self.0
    }
}
