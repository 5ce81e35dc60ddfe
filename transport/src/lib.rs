//! # ofan-transport — what a host's transport does: loss recovery and congestion control
//!
//! The layer between a host's pacer and the network: it decides *what* the host sends next when
//! packets are lost, and *how much* it may have in flight, never *when* (pacing stays with the
//! caller) and never how (no I/O, no clock). Time is a plain [`recovery::Time`] (`u64`) in the caller's unit: nanoseconds in the
//! lab agent (`netns-lab/agent`), picoseconds in the model (`ofan-model`). Both run this same
//! code, so that when buffers drop, the lab and the model recover alike.
//!
//! * [`recovery`]: [`SelectiveRepeat`], per-packet selective repeat over the flows one host
//!   sends, with retransmission timers after RFC 6298 (smoothed RTT and variance, `rto_min`,
//!   Karn's rule) and exponential backoff per packet; [`RecoveryConfig`] scales the timers to
//!   the frame time ([`RecoveryConfig::for_frame_time`]) and, where queues or propagation make
//!   the round trip long, to its bound ([`RecoveryConfig::for_round_trip`]); optionally a
//!   reordering-tolerant loss rule ([`SelectiveRepeat::with_reordering_window`]) that declares
//!   a packet lost once a packet sent sufficiently later was ACKed, without waiting for its
//!   timer.
//! * [`cc`]: congestion control per flow — the [`CongestionControl`] trait and four
//!   algorithms ([`CcKind`]: `none`, `dctcp` after RFC 8257, `nscc` after the Ultra Ethernet
//!   1.0 NSCC, `mswift` after Swift with MSwift's median feedback), one [`CcConfig`] parsed
//!   and scaled once per run; its module documentation says how the lab agent drives it.
//! * [`order`]: what the receiver saw of reordering — [`Reordering`], out-of-order arrivals and
//!   their largest reorder distance, one measure for the model's and the lab's reports.
//!
//! ## The algorithm
//! Every DATA packet is acknowledged on its own (the receivers ACK each packet they get, with its
//! sequence number). The sender keeps one retransmission timer per unacknowledged packet; when a
//! timer expires, that packet — and only that one — is sent again, with its timeout doubled
//! (up to `rto_max`). A flow is complete when every one of its packets has been acknowledged
//! once; later ACKs of the same packet are counted as duplicates.
//!
//! ## Why timeouts, not NACK-on-gap
//! The switches this project studies spray per packet (Ofan, pOfan, JSQ, RSQ, spray, DRB): the
//! packets of one flow take different paths with different queues and arrive out of order as a
//! matter of course. A gap in the sequence numbers at the receiver is therefore not evidence of
//! a loss, and a transport that reacted to gaps — go-back-N as in RoCE, or fast retransmit on
//! duplicate ACKs — would resend on every reordering and load the fabric with copies. A timer
//! per packet fires only when a packet (or its ACK) has been missing for longer than the
//! measured round trip plus four deviations, which reordering alone does not cause.
//!
//! ## Cost
//! The loss-free path is O(1) per send and per ACK with no heap allocation per packet after
//! construction: first transmissions wait in a FIFO in send order (their timers share the
//! current RTO, so the head expires first), retransmissions in a small binary heap, and
//! acknowledged entries are dropped lazily when they reach the front.
#![forbid(unsafe_code)]

pub mod cc;
pub mod order;
pub mod recovery;

pub use cc::{AckEvent, CcConfig, CcKind, CongestionControl, Controller, FlowWindows, PathParams};
pub use order::{FlowOrder, Reordering};
pub use recovery::{
    Ack, AckSample, RecoveryConfig, RecoveryError, RecoveryStats, ReorderStats, SelectiveRepeat,
    Time, ECHO_MASK,
};
