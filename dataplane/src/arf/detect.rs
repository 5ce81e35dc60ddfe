//! Congestion detection: a port's state over one window → one of 16 quality levels, with
//! hysteresis, and the notifications a level change calls for (pure: measurements in, levels
//! and events out; the control thread feeds it each window, the model its simulated ports).
//!
//! **The level.** The draft defines quality by available bandwidth or buffer use, 16 levels,
//! lower is poorer ("on a 400G interface level 0 could represent 25G and level 15 400G"). Ours
//! is buffer use: the window's largest queue `q`, in full-size frames, against
//! [`Thresholds::queue_frames`] (`Q`, default 8): `round(15 · (1 − min(q / Q, 1)))`, and 0 when
//! the port dropped anything in the window. An empty queue is 15, a standing queue of `Q` frames
//! or more is 0.
//!
//! Why not available bandwidth: a fabric at load 1 runs every link near line rate, so a level by
//! headroom (`(1 − utilization) × (1 − queue / buffer)`, our first definition) rated every link
//! of such a fabric 0 — in the lab the one slowed core link was no poorer than the rest, and
//! `arf-wcmp` could not tell where the bottleneck was; in the model it kept 0.92 of its share. A
//! busy link that keeps no standing queue is not congested; one whose queue grows is, whatever
//! its utilization — which is what a slowed link, or one offered more than its rate, shows.
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
    /// A standing queue of this many full-size frames is level 0 (`Q` in the module docs).
    pub queue_frames: u16,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            congested_at: Quality::new(5).unwrap_or(Quality::POOREST),
            cleared_at: Quality::new(9).unwrap_or(Quality::BEST),
            windows_to_change: 2,
            jump: 4,
            queue_frames: 8,
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
    /// At least one frame.
    #[error("queue_frames must be at least 1")]
    QueueFrames,
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
        if self.queue_frames == 0 {
            return Err(ThresholdError::QueueFrames);
        }
        Ok(self)
    }
}

/// One port's measurements over one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The window's largest queue, bytes (the queue standing at its start included).
    pub max_queue_bytes: u64,
    /// Bytes of a full-size frame on this port (the unit of [`Thresholds::queue_frames`]).
    pub full_frame_bytes: u32,
    /// Frames the port dropped in the window.
    pub drops: u64,
}

/// The measured level of `window` under `thresholds`, before hysteresis.
#[must_use]
pub fn measured_level(window: &Window, thresholds: &Thresholds) -> Quality {
    if window.drops > 0 {
        return Quality::POOREST;
    }
    let reference =
        u64::from(thresholds.queue_frames.max(1)) * u64::from(window.full_frame_bytes.max(1));
    let queue = window.max_queue_bytes.min(reference);
    let top = u64::from(QUALITY_LEVELS - 1);
    // 15 · (1 − queue / reference), rounded to the nearest level (halves up).
    let level = (top * (reference - queue) * 2 + reference) / (2 * reference);
    Quality::new(level as u8).unwrap_or(Quality::BEST)
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
        let measured = measured_level(window, &self.thresholds);
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

    /// A window whose largest queue was `frames` full 1 500-byte frames.
    fn window(frames: f64) -> Window {
        Window {
            max_queue_bytes: (frames * 1500.0) as u64,
            full_frame_bytes: 1500,
            drops: 0,
        }
    }

    fn level(n: u8) -> Quality {
        Quality::new(n).unwrap()
    }

    fn measured(frames: f64) -> Quality {
        measured_level(&window(frames), &Thresholds::default())
    }

    #[test]
    fn levels_follow_the_standing_queue() {
        assert_eq!(measured(0.0), Quality::BEST);
        assert_eq!(measured(8.0), Quality::POOREST);
        assert_eq!(measured(800.0), Quality::POOREST);
        // Half the reference queue: 7.5 rounds up to 8.
        assert_eq!(measured(4.0), level(8));
        assert_eq!(measured(2.0), level(11));
        // Any drop is the poorest level, whatever the queue.
        let dropped = Window {
            drops: 1,
            ..window(0.0)
        };
        assert_eq!(
            measured_level(&dropped, &Thresholds::default()),
            Quality::POOREST
        );
        // The reference is the thresholds': 4 frames of queue against 16.
        let lenient = Thresholds {
            queue_frames: 16,
            ..Thresholds::default()
        };
        assert_eq!(measured_level(&window(4.0), &lenient), level(11));
    }

    #[test]
    fn levels_fall_monotonically_with_the_queue() {
        let mut last = Quality::BEST;
        for tenth in 0..=100 {
            let now = measured(f64::from(tenth) / 10.0);
            assert!(now <= last, "{tenth}/10 frames: {now:?} after {last:?}");
            last = now;
        }
    }

    #[test]
    fn a_sudden_collapse_is_detected_at_once_and_cleared_after_two_windows() {
        let mut detector = Detector::new(Thresholds::default());
        assert_eq!(detector.observe(&window(0.5)), None);
        // 15 → 0: a jump, reported at once.
        assert_eq!(
            detector.observe(&window(20.0)),
            Some(Kind::CongestionDetected)
        );
        assert!(detector.congested());
        // Back to empty: a jump too, cleared at once.
        assert_eq!(
            detector.observe(&window(0.0)),
            Some(Kind::CongestionCleared)
        );
        // Within the band (levels 6–8) nothing changes either way.
        let mut detector = Detector::new(Thresholds {
            jump: 15,
            ..Thresholds::default()
        });
        assert_eq!(detector.observe(&window(6.0)), None, "first window");
        assert_eq!(
            detector.observe(&window(6.0)),
            Some(Kind::CongestionDetected),
            "second window at level 4"
        );
        for _ in 0..5 {
            assert_eq!(detector.observe(&window(4.0)), None, "level 8: in the band");
        }
        assert!(detector.congested());
        assert_eq!(detector.observe(&window(1.5)), None);
        assert_eq!(
            detector.observe(&window(1.5)),
            Some(Kind::CongestionCleared),
            "level 12, twice"
        );
    }

    #[test]
    fn a_level_flickering_between_two_values_is_not_reported() {
        let mut detector = Detector::new(Thresholds {
            jump: 15,
            ..Thresholds::default()
        });
        for i in 0..20 {
            let frames = if i % 2 == 0 { 5.0 } else { 2.0 };
            assert_eq!(detector.observe(&window(frames)), None, "window {i}");
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
        let no_queue = Thresholds {
            queue_frames: 0,
            ..Thresholds::default()
        };
        assert_eq!(no_queue.validate(), Err(ThresholdError::QueueFrames));
        assert!(Thresholds::default().validate().is_ok());
    }
}
