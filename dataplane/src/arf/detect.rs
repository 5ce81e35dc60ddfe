//! Congestion detection: a port's state over one window → one of 16 quality levels, with
//! hysteresis, and the notifications a level change calls for (pure: measurements in, levels
//! and events out; the control thread feeds it each window, the model its simulated ports).
//!
//! **The level.** The draft defines quality by available bandwidth or buffer use, 16 levels,
//! lower is poorer ("on a 400G interface level 0 could represent 25G and level 15 400G"). Ours
//! is the port's headroom over the window, `(1 − utilization) × (1 − queue / buffer)`, scaled
//! to 0–15: an idle port is 15, a port sending at line rate with an empty queue about 0 — as is
//! a half-used port with a half-full buffer — and any drop in the window makes it 0. Utilization
//! is what the port sent over what it could have; the queue is the window's largest depth, so a
//! standing queue counts even while the port drains it at line rate.
//!
//! **Hysteresis.** The reported level follows the measured one only after it has differed for
//! [`Thresholds::windows_to_change`] windows in a row, or at once when it differs by more than
//! [`Thresholds::jump`] levels (a sudden collapse is news). Congestion is *detected* when the
//! reported level falls to [`Thresholds::congested_at`] or below and *cleared* when it rises to
//! [`Thresholds::cleared_at`] or above; between the two nothing changes, so a level hovering at
//! one threshold does not flap.

use super::quality::{Kind, Quality, QUALITY_LEVELS};

/// The detector's settings (`[adaptive_routing]` in the switch's config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Congestion is detected at this reported level or below.
    pub congested_at: Quality,
    /// Congestion is cleared at this reported level or above (above `congested_at`).
    pub cleared_at: Quality,
    /// Windows in a row a new level must be measured before it is reported.
    pub windows_to_change: u8,
    /// A change by more than this many levels is reported at once.
    pub jump: u8,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            congested_at: Quality::new(5).unwrap_or(Quality::POOREST),
            cleared_at: Quality::new(9).unwrap_or(Quality::BEST),
            windows_to_change: 2,
            jump: 4,
        }
    }
}

/// Why thresholds are unusable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    /// `cleared_at` must be above `congested_at`, or every level would be both.
    #[error("cleared_at {cleared} must be above congested_at {congested}")]
    Band {
        /// `congested_at`.
        congested: u8,
        /// `cleared_at`.
        cleared: u8,
    },
    /// At least one window.
    #[error("windows_to_change must be at least 1")]
    Windows,
}

impl Thresholds {
    /// Checks the settings.
    ///
    /// # Errors
    /// An empty or inverted hysteresis band, zero windows.
    pub fn validate(self) -> Result<Self, ThresholdError> {
        if self.cleared_at <= self.congested_at {
            return Err(ThresholdError::Band {
                congested: self.congested_at.level(),
                cleared: self.cleared_at.level(),
            });
        }
        if self.windows_to_change == 0 {
            return Err(ThresholdError::Windows);
        }
        Ok(self)
    }
}

/// One port's measurements over one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Bytes sent over bytes the line rate allows in the window, 0–1 (more is clamped).
    pub utilization: f64,
    /// The window's largest queue over the port's buffer, 0–1 (more is clamped).
    pub queue_fraction: f64,
    /// Frames the port dropped in the window.
    pub drops: u64,
}

/// The measured level of `window`, before hysteresis.
#[must_use]
pub fn measured_level(window: &Window) -> Quality {
    if window.drops > 0 {
        return Quality::POOREST;
    }
    let clamp = |x: f64| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) };
    let headroom = (1.0 - clamp(window.utilization)) * (1.0 - clamp(window.queue_fraction));
    let top = f64::from(QUALITY_LEVELS - 1);
    // Rounded to the nearest level: 0.5 of headroom is level 8 (7.5 rounds up).
    let level = (headroom * top).round() as u8;
    Quality::new(level.min(QUALITY_LEVELS - 1)).unwrap_or(Quality::BEST)
}

/// One port's detector: the reported level and the congestion state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detector {
    thresholds: Thresholds,
    reported: Quality,
    congested: bool,
    /// A level measured differently from `reported`, and for how many windows in a row.
    pending: Option<(Quality, u8)>,
}

impl Detector {
    /// A detector of an idle, uncongested port.
    #[must_use]
    pub const fn new(thresholds: Thresholds) -> Self {
        Self {
            thresholds,
            reported: Quality::BEST,
            congested: false,
            pending: None,
        }
    }

    /// The reported level.
    #[must_use]
    pub const fn level(&self) -> Quality {
        self.reported
    }

    /// Whether the port is congested now.
    #[must_use]
    pub const fn congested(&self) -> bool {
        self.congested
    }

    /// Takes one window; returns the notification kind it calls for, if the congestion state
    /// changed (a changed level alone is carried by the next refresh).
    pub fn observe(&mut self, window: &Window) -> Option<Kind> {
        let measured = measured_level(window);
        if measured == self.reported {
            self.pending = None;
        } else {
            let jump = measured.level().abs_diff(self.reported.level()) > self.thresholds.jump;
            let windows = match self.pending {
                Some((level, n)) if level == measured => n.saturating_add(1),
                _ => 1,
            };
            if jump || windows >= self.thresholds.windows_to_change {
                self.reported = measured;
                self.pending = None;
            } else {
                self.pending = Some((measured, windows));
            }
        }
        match (self.congested, self.reported) {
            (false, level) if level <= self.thresholds.congested_at => {
                self.congested = true;
                Some(Kind::CongestionDetected)
            }
            (true, level) if level >= self.thresholds.cleared_at => {
                self.congested = false;
                Some(Kind::CongestionCleared)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(utilization: f64, queue_fraction: f64) -> Window {
        Window {
            utilization,
            queue_fraction,
            drops: 0,
        }
    }

    fn level(n: u8) -> Quality {
        Quality::new(n).unwrap()
    }

    #[test]
    fn levels_follow_headroom() {
        assert_eq!(measured_level(&window(0.0, 0.0)), Quality::BEST);
        assert_eq!(measured_level(&window(1.0, 0.0)), Quality::POOREST);
        assert_eq!(measured_level(&window(0.5, 0.0)), level(8));
        assert_eq!(measured_level(&window(0.5, 0.5)), level(4));
        assert_eq!(measured_level(&window(0.0, 1.0)), Quality::POOREST);
        // Out of range and NaN measurements are clamped (NaN counts as full).
        assert_eq!(measured_level(&window(-3.0, 7.0)), Quality::POOREST);
        assert_eq!(measured_level(&window(f64::NAN, 0.0)), Quality::POOREST);
        let dropped = Window {
            drops: 1,
            ..window(0.0, 0.0)
        };
        assert_eq!(measured_level(&dropped), Quality::POOREST);
    }

    #[test]
    fn levels_fall_monotonically_with_load() {
        let mut last = Quality::BEST;
        for step in 0..=100 {
            let now = measured_level(&window(f64::from(step) / 100.0, 0.2));
            assert!(now <= last, "step {step}: {now:?} after {last:?}");
            last = now;
        }
    }

    #[test]
    fn a_sudden_collapse_is_detected_at_once_and_cleared_after_two_windows() {
        let mut detector = Detector::new(Thresholds::default());
        assert_eq!(detector.observe(&window(0.1, 0.0)), None);
        // 15 → 0: a jump, reported at once.
        assert_eq!(
            detector.observe(&window(1.0, 0.3)),
            Some(Kind::CongestionDetected)
        );
        assert!(detector.congested());
        // Back to idle: a jump too, cleared at once.
        assert_eq!(
            detector.observe(&window(0.0, 0.0)),
            Some(Kind::CongestionCleared)
        );
        // Within the band (levels 6–8) nothing changes either way.
        let mut detector = Detector::new(Thresholds {
            jump: 15,
            ..Thresholds::default()
        });
        assert_eq!(detector.observe(&window(0.75, 0.0)), None, "first window");
        assert_eq!(
            detector.observe(&window(0.75, 0.0)),
            Some(Kind::CongestionDetected),
            "second window at level 4"
        );
        for _ in 0..5 {
            assert_eq!(
                detector.observe(&window(0.5, 0.0)),
                None,
                "level 8: in the band"
            );
        }
        assert!(detector.congested());
        assert_eq!(detector.observe(&window(0.3, 0.0)), None);
        assert_eq!(
            detector.observe(&window(0.3, 0.0)),
            Some(Kind::CongestionCleared),
            "level 11, twice"
        );
    }

    #[test]
    fn a_level_flickering_between_two_values_is_not_reported() {
        let mut detector = Detector::new(Thresholds {
            jump: 15,
            ..Thresholds::default()
        });
        for i in 0..20 {
            let load = if i % 2 == 0 { 0.7 } else { 0.3 };
            assert_eq!(detector.observe(&window(load, 0.0)), None, "window {i}");
        }
        assert_eq!(detector.level(), Quality::BEST);
    }

    #[test]
    fn thresholds_are_checked() {
        let bad = Thresholds {
            congested_at: level(9),
            cleared_at: level(9),
            ..Thresholds::default()
        };
        assert_eq!(
            bad.validate(),
            Err(ThresholdError::Band {
                congested: 9,
                cleared: 9
            })
        );
        let zero = Thresholds {
            windows_to_change: 0,
            ..Thresholds::default()
        };
        assert_eq!(zero.validate(), Err(ThresholdError::Windows));
        assert!(Thresholds::default().validate().is_ok());
    }
}
