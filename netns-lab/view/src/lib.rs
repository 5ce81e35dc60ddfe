//! The live view of a lab: a web page that draws the fabric in tiers and redraws it twice a
//! second from server-sent events — every link's utilization each way and queue at each end,
//! links down, stopped or crashed switches, each switch's algorithm, the queues of each stage
//! of the paths and the running collective's progress — and the whole lab as one Prometheus
//! `/metrics`.
//!
//! Layers, bottom up:
//! - [`model`] (pure): [`TopologyView`] (the drawing's nodes and links) and [`Frame`] (one
//!   interval) from two [`Sample`]s of the switches' typed stats.
//! - [`metrics`] (pure): a [`Sample`] as the Prometheus text format, every series labelled
//!   `switch="…"` (why from the typed stats and not from each switch's own exposition: see
//!   there).
//! - [`serve`]: the sampler thread and the routes on `ofan_control::endpoint::serve_routes`
//!   (the bounded HTTP server of the switch's metrics, extended with server-sent events); the
//!   page is `page.html`, compiled in (`include_str!`): plain JS and SVG, no framework, no
//!   network.

#![forbid(unsafe_code)]

pub mod metrics;
pub mod model;
pub mod serve;

pub use model::{Frame, Sample, TopologyView};
pub use serve::{
    serve, RunningView, ViewError, ViewOptions, DEFAULT_INTERVAL, DEFAULT_LISTEN, MIN_INTERVAL,
};
