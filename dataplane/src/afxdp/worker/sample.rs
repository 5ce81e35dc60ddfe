//! `arf-flow`'s flow sampling on the way out: one forwarded frame in
//! [`SAMPLE_EVERY`](crate::arf::flows::SAMPLE_EVERY) is counted, by five-tuple, in a
//! space-saving sketch of its egress port ([`crate::arf::flows`]); the worker hands its
//! sketches to the telemetry with its counters, without waiting (a sketch the detector holds at
//! that instant is kept for the next try). The detector names a congested port's heaviest flows
//! from them. The cost on the hot path: a countdown per frame, and per sampled frame a header
//! read and at most eight comparisons.

use crate::arf::flows::{FiveTuple, FlowSketch, SAMPLE_EVERY};
use crate::fib::PortId;
use crate::telemetry::SwitchTelemetry;

/// One worker's sampler.
#[derive(Debug)]
pub(super) struct FlowSampler {
    countdown: u32,
    /// Per switch port (by id): the flows sampled since the last hand-over.
    ports: Vec<FlowSketch<FiveTuple>>,
    /// Some sketch holds flows not handed over yet.
    held: bool,
}

impl FlowSampler {
    /// A sampler for a switch of `ports` ports.
    pub(super) fn new(ports: usize) -> Self {
        Self {
            countdown: SAMPLE_EVERY,
            ports: vec![FlowSketch::default(); ports],
            held: false,
        }
    }

    /// One frame forwarded out of `port`.
    #[inline]
    pub(super) fn frame(&mut self, port: PortId, frame: &[u8]) {
        self.countdown -= 1;
        if self.countdown != 0 {
            return;
        }
        self.countdown = SAMPLE_EVERY;
        if let (Some(flow), Some(sketch)) = (
            FiveTuple::of_frame(frame),
            self.ports.get_mut(usize::from(port.0)),
        ) {
            sketch.record(flow, frame.len() as u64);
            self.held = true;
        }
    }

    /// Hands the sampled flows to the telemetry (scaled by the sampling rate).
    pub(super) fn publish(&mut self, telemetry: &SwitchTelemetry) {
        if !self.held {
            return;
        }
        self.held = false;
        for (index, sketch) in self.ports.iter_mut().enumerate() {
            if sketch.total() == 0 {
                continue;
            }
            if telemetry.merge_flows(index, sketch, u64::from(SAMPLE_EVERY)) {
                sketch.clear();
            } else {
                self.held = true;
            }
        }
    }
}
