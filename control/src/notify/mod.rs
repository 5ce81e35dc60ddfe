//! Adaptive-routing congestion notifications (the framework draft's "Congestion Notify"):
//! [`wire`] is the message format and its one codec. Detection, the congestion table and the
//! path-quality view are pure and shared with the model: [`ofan_dataplane::arf`].

pub mod wire;

pub use ofan_dataplane::arf::detect;
