//! Adaptive-routing congestion notifications (the framework draft's "Remote Congestion
//! Detection" and "Congestion Notify"): [`detect`] turns a port's window of measurements into
//! one of 16 quality levels with hysteresis and says when congestion is detected or cleared;
//! [`wire`] is the message format and its one codec. The sender and receiver in the switch's
//! control thread, the congestion table and the adaptive-routing modes come next (issue 15).

pub mod detect;
pub mod wire;
