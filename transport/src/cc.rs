//! Congestion control per flow: how many bytes a sender may have in flight, from the ACKs it
//! gets back (their ECN echo and their round-trip time) and from its losses.
//!
//! # Contract
//! Pure, like [`crate::recovery`]: no I/O, no clock, integer arithmetic only (the model's
//! determinism contract). Time is a [`Time`] in the caller's unit — nanoseconds in the lab
//! agent, picoseconds in the model — and every duration in a [`CcConfig`] is in that unit too
//! ([`PathParams`] says what the caller measured: frame size, unloaded round trip, line rate).
//! One [`Controller`] per flow. The caller owns the wire and the pacer:
//!
//! * before sending a packet of `bytes`, it asks [`CongestionControl::can_send`] with the
//!   bytes it has in flight (sent, not yet ACKed, not declared lost —
//!   [`crate::SelectiveRepeat::outstanding`] counts them in packets). The model asks for
//!   retransmissions too: a packet declared lost left the flight, so it normally fits, and a
//!   burst of retransmissions into the queue that dropped the originals is what a window cut
//!   by the loss is for (htsim's `can_send_NSCC` lets its retransmission queue through
//!   instead; a caller may do either);
//! * inside the window it sends at its pacer's rate (line rate: the window limits how much is
//!   in flight, the pacer how fast it leaves);
//! * for every ACK of a packet not ACKed before it calls [`CongestionControl::on_ack`] with
//!   an [`AckEvent`]: the packet's bytes, whether the ACK echoed a CE mark, the round trip of
//!   the copy it answers (`None` when the ACK may answer an older copy: Karn's rule), and now;
//! * when the recovery declares a packet lost before its timer (a reordering-tolerant rule,
//!   [`crate::SelectiveRepeat::with_reordering_window`]) it calls
//!   [`CongestionControl::on_loss`]; when a retransmission timer expires,
//!   [`CongestionControl::on_timeout`].
//!
//! **From the lab agent** (time in ns): build one [`CcConfig`] per run with
//! [`CcConfig::new`]`(kind, PathParams { mss, base_rtt, rate_bps })` (`mss` the full DATA frame
//! on the wire, `base_rtt` the unloaded round trip of the longest path in ns), one
//! [`Controller`] per flow with [`CcConfig::controller`], and drive it from the agent's real
//! ACKs: the ACK header must echo the CE mark of the DATA packet it answers and either the DATA
//! packet's send timestamp or its copy number (the sender then looks up that copy's send time,
//! as the model does with [`crate::SelectiveRepeat::on_ack_sample`]); the RTT is
//! `now − send time` of that copy. Nothing here depends on the unit as long as `PathParams` and
//! the times share it.
//!
//! # Algorithms
//! [`CcKind`] names them; windows are bytes, never below one `mss` nor above `max_window`
//! (1.5 × the bandwidth-delay product, htsim's `_maxwnd` for NSCC; the same cap for all, so
//! that no algorithm wins by holding more than the fabric can carry). No slow start: a
//! collective's flows start together at line rate. NSCC starts at one BDP (htsim's
//! `initNscc`) and its fast increase takes it to the cap within a round trip of empty
//! queues; DCTCP and MSwift start at the cap (htsim's `UecSrc` default `_cwnd = _maxwnd`) —
//! a window of exactly one BDP is short of the round trip as soon as any queue forms (the
//! hosts' own ACKs, store and forward), and DCTCP's one packet per RTT would not make up the
//! difference within a 7-RTT message.
//!
//! * **`none`** — [`NoControl`]: an infinite window; the caller's pacer alone decides, as
//!   before congestion control existed (the model does not even call it: `none` is the old
//!   code path, event for event).
//! * **`dctcp`** — [`Dctcp`], RFC 8257 §3.3–3.5: the sender counts the bytes ACKed and the
//!   bytes ACKed with ECE over an observation window of about one RTT (it ends at the first ACK
//!   of a packet sent after it began, §3.3's "ACK covers the window's last byte"), then
//!   updates `α ← (1 − g)·α + g·M` with `M` the marked fraction and `g = 1/16` (§4.2's
//!   recommended gain); on an ACK with ECE it cuts `cwnd ← cwnd · (1 − α/2)` at most once per
//!   window of data (§3.4); otherwise congestion avoidance adds one `mss` per window of ACKed
//!   bytes. Losses follow standard TCP (§3.5, RFC 5681): a loss halves the window once per
//!   window (`ssthresh = cwnd/2`), a timeout drops it to one `mss` with `ssthresh = cwnd/2`
//!   (timers expiring within one RTT of that count as the same timeout: the per-packet timers
//!   of one window expire together), and below `ssthresh` every ACKed byte adds a byte (slow
//!   start). `α` starts at 1, the
//!   conservative value Linux's `dctcp_alpha_on_init` defaults to, kept as a fraction of 1024.
//!   Simplified: no delayed-ACK state machine (every packet is ACKed with its own echo, so the
//!   receiver side of §3.2 is exact), no CWR handshake.
//! * **`nscc`** — [`Nscc`], the Ultra Ethernet 1.0 network-signal congestion control, as
//!   the UEC's reference simulator implements it (htsim `uec.cpp`, `updateCwndOnAck_NSCC`,
//!   `initNsccParams`; paper refs [18], [81]). The queueing delay of an ACK is its RTT less
//!   the unloaded round trip (the smaller of `base_rtt` and the smallest RTT the flow saw:
//!   shorter paths have shorter round trips), and each ACK falls in a quadrant of (ECN, delay
//!   vs `target_qdelay`):
//!   - no ECN, delay < target: **proportional increase** `inc += α·(target − delay)·acked`
//!     plus the fair increase, or **fast increase** (`cwnd += fi_scale·acked`) once a whole
//!     window was ACKed with a delay under `fast_delay`;
//!   - no ECN, delay ≥ target: **fair increase** `inc += fi·mss·acked`;
//!   - ECN, delay ≥ target: **multiplicative decrease** on the smoothed delay
//!     (`avg ← avg + 0.0125·(delay − avg)`): `cwnd ← cwnd · max(1 − γ·(avg − target)/avg, ½)`,
//!     γ = 0.8, at most once per base RTT;
//!   - ECN, delay < target: **no change** (the path, not the flow, is congested).
//!
//!   Accumulated increases are applied every `adjust_bytes` ACKed bytes or every base RTT
//!   (`cwnd += min(acked since, inc / cwnd)`), plus `eta` every base RTT; **quick adapt**: on a
//!   loss, a timeout, or a delay above 4 × target, at most once per (base RTT + target),
//!   `cwnd ← max(bytes ACKed in the last such period, mss)`; a loss also takes its bytes off
//!   the window. Constants scale as htsim's `initNsccParams` does, from its reference network
//!   (100 Gb/s, 12 µs): `a = BDP / 150 kB`, `b = target / 12 µs`, `α = 4ab·mss/target`,
//!   `fi = 5a`, `eta = 0.15·mss·a`, `fi_scale = a/4`, `adjust_bytes = 16000·b`. Simplified:
//!   the target is `base_rtt / 2` (htsim's 6 µs default against its 12 µs reference RTT),
//!   `fast_delay` is `target / 6` (htsim's 1 µs against 6 µs); no receiver credit (RCCC), no
//!   trimming or NACKs (the model drops tails), no path (entropy) penalties — load balancing is
//!   the switches' or REPS's, not the CCA's.
//! * **`mswift`** — [`Mswift`]: Swift (Kumar et al., SIGCOMM 2020, §3.1–3.3, Algorithm 1)
//!   with the median feedback of MSwift (Gerstein, Silberstein, Keslassy, arXiv 2509.07907,
//!   paper ref [32]). Swift compares the RTT with a fabric delay target (`base_rtt +
//!   target_qdelay`); below it, additive increase `cwnd += ai·mss·acked/cwnd` (ai per RTT);
//!   above it, multiplicative decrease `cwnd ← cwnd · max(1 − β·(delay − target)/delay,
//!   1 − max_mdf)`, β = 0.8, max_mdf = ½, at most once per RTT (`now − last decrease ≥ rtt`).
//!   A loss cuts by `max_mdf` (once per RTT); a timeout too, and after
//!   `retx_reset` consecutive timeouts (at least an RTT apart: the per-packet timers of one
//!   window expire together) the window falls to one `mss`. MSwift's change for
//!   sprayed traffic: the delay Swift reacts to is the **median of the last `median_samples`
//!   RTT samples** (9 by default, odd so the median is one sample), not the latest one — a few
//!   packets that crossed a congested path no longer throttle a flow whose other paths are
//!   empty. Simplified: no flow-based target scaling, no pacing below one packet per RTT (the
//!   window never drops below one `mss`), no separate endpoint-delay loop (the model's hosts
//!   do not queue); Swift's topology (hop-count) scaling of the target is taken from the path
//!   itself: the target is the flow's smallest RTT so far plus the queueing allowance
//!   (`target_delay − base_rtt`), at most `target_delay` — a flow on a 2-link path aims at
//!   the same queue as one on a 6-link path, instead of filling the queue until the long
//!   path's target is exceeded. The allowance is a quarter of `base_rtt`, half NSCC's target
//!   (the paper: "MSwift targets smaller queues than NSCC").
//!
//! # Example
//! ```
//! use ofan_transport::cc::{AckEvent, CcConfig, CcKind, CongestionControl, PathParams};
//!
//! // 1 000-byte packets, a 10 ns round trip (in ps) at 8 Tb/s: a BDP of ten packets.
//! let path = PathParams { mss: 1_000, base_rtt: 10_000, rate_bps: 8_000_000_000_000 };
//! let config = CcConfig::new(CcKind::Dctcp, path);
//! let mut flow = config.controller();
//! let window = flow.window();
//! assert!(flow.can_send(0, 1_000));
//! flow.on_ack(AckEvent { bytes: 1_000, ecn: true, rtt: Some(10_000), now: 10_000 });
//! assert_eq!(flow.window(), window / 2); // α starts at 1: the first mark halves the window
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::recovery::Time;

mod flows;
pub use flows::{recovery_config, FlowWindows, REORDER_WINDOW_PERMILLE, RTO_FLOOR_RTTS};

/// Which congestion-control algorithm a sender runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CcKind {
    /// No congestion control: the pacer alone (the default).
    #[default]
    None,
    /// DCTCP (RFC 8257).
    Dctcp,
    /// Ultra Ethernet NSCC.
    Nscc,
    /// Swift with MSwift's median feedback.
    Mswift,
}

impl CcKind {
    /// Every algorithm, `none` first.
    pub const ALL: [CcKind; 4] = [CcKind::None, CcKind::Dctcp, CcKind::Nscc, CcKind::Mswift];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            CcKind::None => "none",
            CcKind::Dctcp => "dctcp",
            CcKind::Nscc => "nscc",
            CcKind::Mswift => "mswift",
        }
    }

    /// Whether this is [`CcKind::None`].
    #[must_use]
    pub const fn is_none(&self) -> bool {
        matches!(self, CcKind::None)
    }
}

impl fmt::Display for CcKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`CcKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control {name:?}: expected none, dctcp, nscc or mswift")]
pub struct UnknownCc {
    /// The name given.
    pub name: String,
}

impl FromStr for CcKind {
    type Err = UnknownCc;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        CcKind::ALL
            .into_iter()
            .find(|kind| kind.name().eq_ignore_ascii_case(text.trim()))
            .ok_or_else(|| UnknownCc {
                name: text.to_owned(),
            })
    }
}

/// What the caller knows of the paths its flows take, in its own units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathParams {
    /// Bytes of one full DATA packet on the wire (the window's unit step).
    pub mss: u64,
    /// Unloaded round trip of the longest path (DATA there, its ACK back, no queue).
    pub base_rtt: Time,
    /// Line rate of the sender's link, bits per second.
    pub rate_bps: u64,
}

impl PathParams {
    /// Bandwidth-delay product, bytes: what one flow keeps in flight to fill its link with no
    /// queue (`rate × base_rtt`, with `base_rtt` in the same unit as `ticks_per_second`).
    #[must_use]
    pub fn bdp(&self, ticks_per_second: u64) -> u64 {
        let bytes = u128::from(self.rate_bps / 8) * u128::from(self.base_rtt)
            / u128::from(ticks_per_second.max(1));
        (bytes as u64).max(self.mss)
    }
}

/// DCTCP's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DctcpParams {
    /// `g = 2^-g_shift` (RFC 8257 §4.2: 1/16).
    pub g_shift: u32,
}

/// NSCC's parameters (htsim's names), after scaling to the caller's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NsccParams {
    /// Queueing-delay target.
    pub target_qdelay: Time,
    /// A delay under this counts towards fast increase.
    pub fast_delay: Time,
    /// Quick adapt fires on a delay above this (4 × target).
    pub qa_threshold: Time,
    /// Proportional increase `α`, bytes per unit of time, × 2^16.
    pub alpha_fp: u64,
    /// Fair increase `fi`, × 2^16.
    pub fi_fp: u64,
    /// Fast increase `fi_scale`, × 2^16.
    pub fi_scale_fp: u64,
    /// Window added every base RTT, bytes.
    pub eta: u64,
    /// γ of the multiplicative decrease, per mille.
    pub gamma_permille: u64,
    /// Accumulated increases are applied after this many ACKed bytes.
    pub adjust_bytes: u64,
}

/// Swift's (MSwift's) parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MswiftParams {
    /// Fabric target: the RTT above which Swift decreases (`base_rtt` + queueing target).
    pub target_delay: Time,
    /// Additive increase, `mss` per RTT, × 2^16.
    pub ai_fp: u64,
    /// β of the multiplicative decrease, per mille.
    pub beta_permille: u64,
    /// Largest decrease at once, per mille of the window.
    pub max_mdf_permille: u64,
    /// Consecutive timeouts after which the window falls to one `mss`.
    pub retx_reset: u32,
    /// RTT samples the median is taken over (MSwift), at most [`MEDIAN_MAX`].
    pub median_samples: u32,
}

/// The longest median window [`Mswift`] keeps.
pub const MEDIAN_MAX: usize = 32;

/// One congestion-control configuration, parsed and scaled once, shared by every flow of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CcConfig {
    /// The algorithm.
    pub kind: CcKind,
    /// What the caller measured of its paths.
    pub path: PathParams,
    /// The caller's time unit per second (1e9 for ns, 1e12 for ps).
    pub ticks_per_second: u64,
    /// Initial window, bytes (1.5 BDP; one BDP for NSCC).
    pub initial_window: u64,
    /// Largest window, bytes (1.5 BDP).
    pub max_window: u64,
    /// The algorithm's own parameters (`None` for `none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dctcp: Option<DctcpParams>,
    /// NSCC's, when `kind` is `nscc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nscc: Option<NsccParams>,
    /// MSwift's, when `kind` is `mswift`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mswift: Option<MswiftParams>,
}

/// Fixed-point unit of the `_fp` parameters.
const FP: u64 = 1 << 16;
/// `α` of DCTCP equal to 1.
pub const ALPHA_ONE: u64 = 1024;

impl CcConfig {
    /// The defaults of `kind` scaled to `path` (see the module documentation), with time in
    /// picoseconds. For nanoseconds use [`CcConfig::with_unit`].
    #[must_use]
    pub fn new(kind: CcKind, path: PathParams) -> Self {
        Self::with_unit(kind, path, 1_000_000_000_000)
    }

    /// As [`CcConfig::new`], with `ticks_per_second` units of time per second (1e9 in the lab
    /// agent, 1e12 in the model).
    #[must_use]
    pub fn with_unit(kind: CcKind, path: PathParams, ticks_per_second: u64) -> Self {
        let path = PathParams {
            mss: path.mss.max(1),
            base_rtt: path.base_rtt.max(1),
            rate_bps: path.rate_bps.max(8),
        };
        let ticks = ticks_per_second.max(1);
        let bdp = path.bdp(ticks);
        let mss = path.mss;
        let micros = |us: u64| (u128::from(us) * u128::from(ticks) / 1_000_000) as u64;
        let max_window = (bdp + bdp / 2).max(mss);
        let mut config = Self {
            kind,
            path,
            ticks_per_second: ticks,
            initial_window: max_window,
            max_window,
            dctcp: None,
            nscc: None,
            mswift: None,
        };
        match kind {
            CcKind::None => {
                config.initial_window = u64::MAX;
                config.max_window = u64::MAX;
            }
            CcKind::Dctcp => config.dctcp = Some(DctcpParams { g_shift: 4 }),
            CcKind::Nscc => {
                config.initial_window = bdp;
                // htsim initNsccParams: reference 100 Gb/s × 12 µs.
                let reference_bdp = 150_000u128;
                let reference_rtt = u128::from(micros(12)).max(1);
                let target = (path.base_rtt / 2).max(1);
                // a = bdp / reference_bdp, b = target / reference_rtt, in 2^16 units.
                let a_fp = (u128::from(bdp) * u128::from(FP) / reference_bdp) as u64;
                let b_fp = (u128::from(target) * u128::from(FP) / reference_rtt) as u64;
                // α = 4·a·b·mss / target (bytes per tick), × 2^16.
                let alpha_fp = (4 * u128::from(a_fp) * u128::from(b_fp) * u128::from(mss)
                    / u128::from(FP)
                    / u128::from(target)) as u64;
                config.nscc = Some(NsccParams {
                    target_qdelay: target,
                    fast_delay: (target / 6).max(1),
                    qa_threshold: target.saturating_mul(4),
                    alpha_fp,
                    fi_fp: 5 * a_fp,
                    fi_scale_fp: a_fp / 4,
                    eta: (u128::from(mss) * 15 * u128::from(a_fp) / 100 / u128::from(FP)) as u64,
                    gamma_permille: 800,
                    adjust_bytes: ((16_000 * u128::from(b_fp)) / u128::from(FP)).max(1) as u64,
                });
            }
            CcKind::Mswift => {
                config.mswift = Some(MswiftParams {
                    target_delay: path.base_rtt + (path.base_rtt / 4).max(1),
                    ai_fp: FP,
                    beta_permille: 800,
                    max_mdf_permille: 500,
                    retx_reset: 5,
                    median_samples: 9,
                });
            }
        }
        config
    }

    /// A fresh controller for one flow.
    #[must_use]
    pub fn controller(&self) -> Controller {
        match self.kind {
            CcKind::None => Controller::None(NoControl),
            CcKind::Dctcp => Controller::Dctcp(Dctcp::new(self)),
            CcKind::Nscc => Controller::Nscc(Nscc::new(self)),
            CcKind::Mswift => Controller::Mswift(Mswift::new(self)),
        }
    }
}

/// What an ACK of a packet not ACKed before tells the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckEvent {
    /// Bytes of the packet it acknowledges.
    pub bytes: u64,
    /// The ACK echoed a CE mark (the DATA packet crossed a queue above its ECN threshold).
    pub ecn: bool,
    /// Round trip of the copy it answers, when known (`None`: it may answer an older copy).
    pub rtt: Option<Time>,
    /// When it arrived.
    pub now: Time,
}

/// A sender's congestion control for one flow.
pub trait CongestionControl {
    /// Congestion window, bytes: at least one `mss`.
    fn window(&self) -> u64;

    /// Whether a new packet of `bytes` may leave with `in_flight` bytes outstanding: it fits
    /// the window, or nothing is in flight (a window never stalls a flow completely).
    fn can_send(&self, in_flight: u64, bytes: u64) -> bool {
        in_flight == 0 || in_flight.saturating_add(bytes) <= self.window()
    }

    /// The first ACK of a packet.
    fn on_ack(&mut self, ack: AckEvent);

    /// A packet of `bytes` was declared lost at `now` before its timer (reordering-tolerant
    /// detection).
    fn on_loss(&mut self, now: Time, bytes: u64);

    /// A retransmission timer expired at `now`.
    fn on_timeout(&mut self, now: Time);
}

/// One flow's controller, any algorithm (an enum, so that a run's flows sit in one `Vec`
/// without a box each).
#[derive(Debug, Clone)]
pub enum Controller {
    /// `none`.
    None(NoControl),
    /// `dctcp`.
    Dctcp(Dctcp),
    /// `nscc`.
    Nscc(Nscc),
    /// `mswift`.
    Mswift(Mswift),
}

impl CongestionControl for Controller {
    #[inline]
    fn window(&self) -> u64 {
        match self {
            Controller::None(c) => c.window(),
            Controller::Dctcp(c) => c.window(),
            Controller::Nscc(c) => c.window(),
            Controller::Mswift(c) => c.window(),
        }
    }

    #[inline]
    fn on_ack(&mut self, ack: AckEvent) {
        match self {
            Controller::None(c) => c.on_ack(ack),
            Controller::Dctcp(c) => c.on_ack(ack),
            Controller::Nscc(c) => c.on_ack(ack),
            Controller::Mswift(c) => c.on_ack(ack),
        }
    }

    fn on_loss(&mut self, now: Time, bytes: u64) {
        match self {
            Controller::None(c) => c.on_loss(now, bytes),
            Controller::Dctcp(c) => c.on_loss(now, bytes),
            Controller::Nscc(c) => c.on_loss(now, bytes),
            Controller::Mswift(c) => c.on_loss(now, bytes),
        }
    }

    fn on_timeout(&mut self, now: Time) {
        match self {
            Controller::None(c) => c.on_timeout(now),
            Controller::Dctcp(c) => c.on_timeout(now),
            Controller::Nscc(c) => c.on_timeout(now),
            Controller::Mswift(c) => c.on_timeout(now),
        }
    }
}

/// `none`: an infinite window.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoControl;

impl CongestionControl for NoControl {
    fn window(&self) -> u64 {
        u64::MAX
    }
    fn can_send(&self, _in_flight: u64, _bytes: u64) -> bool {
        true
    }
    fn on_ack(&mut self, _ack: AckEvent) {}
    fn on_loss(&mut self, _now: Time, _bytes: u64) {}
    fn on_timeout(&mut self, _now: Time) {}
}

/// `cwnd · num / den`, rounded down, in u128.
fn scale(cwnd: u64, num: u64, den: u64) -> u64 {
    (u128::from(cwnd) * u128::from(num) / u128::from(den.max(1))) as u64
}

/// DCTCP (RFC 8257) for one flow.
#[derive(Debug, Clone)]
pub struct Dctcp {
    cwnd: u64,
    ssthresh: u64,
    mss: u64,
    max_window: u64,
    g_shift: u32,
    /// `α` × [`ALPHA_ONE`].
    alpha: u64,
    acked_bytes: u64,
    marked_bytes: u64,
    /// Congestion avoidance: ACKed bytes not yet turned into window.
    avoidance_bytes: u64,
    /// The observation window ends at the first ACK of a packet sent at or after this time.
    window_start: Time,
    /// The window was already cut for congestion in this observation window.
    reduced: bool,
    /// No second loss cut before this time (one round trip after the last).
    loss_end: Time,
    /// Latest RTT sample.
    rtt: Time,
}

impl Dctcp {
    fn new(config: &CcConfig) -> Self {
        Self {
            cwnd: config.initial_window,
            // Congestion avoidance from the start (the window starts at one BDP).
            ssthresh: config.initial_window,
            mss: config.path.mss,
            max_window: config.max_window,
            g_shift: config.dctcp.map_or(4, |p| p.g_shift),
            alpha: ALPHA_ONE,
            acked_bytes: 0,
            marked_bytes: 0,
            avoidance_bytes: 0,
            window_start: 0,
            reduced: false,
            loss_end: 0,
            rtt: config.path.base_rtt,
        }
    }

    /// `α` × [`ALPHA_ONE`].
    #[must_use]
    pub fn alpha(&self) -> u64 {
        self.alpha
    }

    fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(self.mss, self.max_window.max(self.mss));
    }
}

impl CongestionControl for Dctcp {
    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_ack(&mut self, ack: AckEvent) {
        self.acked_bytes += ack.bytes;
        if ack.ecn {
            self.marked_bytes += ack.bytes;
        }
        // §3.3: the observation window ends when the ACK covers data sent after it began.
        if let Some(rtt) = ack.rtt {
            self.rtt = rtt;
        }
        let sent = ack.rtt.map(|rtt| ack.now.saturating_sub(rtt));
        if sent.is_some_and(|sent| sent >= self.window_start) {
            // α ← (1 − g)·α + g·M, M = marked / acked (fixed point, ALPHA_ONE = 1).
            let fraction = scale(ALPHA_ONE, self.marked_bytes, self.acked_bytes);
            self.alpha = self.alpha - (self.alpha >> self.g_shift) + (fraction >> self.g_shift);
            self.acked_bytes = 0;
            self.marked_bytes = 0;
            self.window_start = ack.now;
            self.reduced = false;
        }
        if ack.ecn {
            // §3.4: cut by α/2, at most once per window of data.
            if !self.reduced {
                self.cwnd -= scale(self.cwnd, self.alpha, 2 * ALPHA_ONE);
                self.ssthresh = self.cwnd;
                self.reduced = true;
                self.window_start = ack.now;
                self.clamp();
            }
            return;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += ack.bytes; // slow start (after a timeout)
        } else {
            // Congestion avoidance: one mss per window of ACKed bytes.
            self.avoidance_bytes += ack.bytes;
            if self.avoidance_bytes >= self.cwnd {
                self.avoidance_bytes -= self.cwnd;
                self.cwnd += self.mss;
            }
        }
        self.clamp();
    }

    fn on_loss(&mut self, now: Time, _bytes: u64) {
        if now >= self.loss_end {
            self.cwnd /= 2;
            self.ssthresh = self.cwnd.max(self.mss);
            // Once per window of data: the next cut waits one round trip.
            self.loss_end = now + self.rtt;
            self.window_start = now;
            self.reduced = true;
            self.clamp();
        }
    }

    fn on_timeout(&mut self, now: Time) {
        // The timers of the packets sent in one window expire together: one event, as one
        // RTO is for TCP (RFC 5681 §3.1 resets the window once, then backs off).
        if now < self.loss_end {
            return;
        }
        self.ssthresh = (self.cwnd / 2).max(self.mss);
        self.cwnd = self.mss;
        self.loss_end = now + self.rtt;
        self.window_start = now;
    }
}

/// NSCC (Ultra Ethernet) for one flow.
#[derive(Debug, Clone)]
pub struct Nscc {
    params: NsccParams,
    cwnd: u64,
    mss: u64,
    max_window: u64,
    base_rtt: Time,
    /// Smallest RTT seen (the flow's own unloaded round trip, at most `base_rtt`).
    min_rtt: Time,
    /// Smoothed queueing delay (EWMA with gain 1/80 ≈ htsim's 0.0125).
    avg_delay: Time,
    /// Pending increase, bytes² × 2^16 (applied as `inc / cwnd`).
    inc_fp: u128,
    /// Bytes ACKed since the last adjustment.
    received: u64,
    last_adjust: Time,
    last_eta: Time,
    last_decrease: Option<Time>,
    /// Fast increase: bytes ACKed in a row with a delay under `fast_delay`.
    fast_count: u64,
    fast_increasing: bool,
    /// Quick adapt: bytes ACKed in the current period, and when it ends.
    achieved: u64,
    qa_end: Time,
    qa_trigger: bool,
}

/// What quadrant an ACK fell in (for tests and traces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quadrant {
    /// No ECN, delay below target.
    ProportionalIncrease,
    /// No ECN, delay at or above target.
    FairIncrease,
    /// ECN, delay at or above target.
    MultiplicativeDecrease,
    /// ECN, delay below target.
    NoChange,
}

impl Nscc {
    fn new(config: &CcConfig) -> Self {
        let params = config.nscc.unwrap_or_else(|| {
            CcConfig::with_unit(CcKind::Nscc, config.path, config.ticks_per_second)
                .nscc
                .expect("nscc parameters")
        });
        Self {
            params,
            cwnd: config.initial_window,
            mss: config.path.mss,
            max_window: config.max_window,
            base_rtt: config.path.base_rtt,
            min_rtt: config.path.base_rtt,
            avg_delay: 0,
            inc_fp: 0,
            received: 0,
            last_adjust: 0,
            last_eta: 0,
            last_decrease: None,
            fast_count: 0,
            fast_increasing: false,
            achieved: 0,
            qa_end: 0,
            qa_trigger: false,
        }
    }

    /// The quadrant of an ACK with this ECN echo and queueing delay.
    #[must_use]
    pub fn quadrant(&self, ecn: bool, delay: Time) -> Quadrant {
        match (ecn, delay >= self.params.target_qdelay) {
            (false, false) => Quadrant::ProportionalIncrease,
            (false, true) => Quadrant::FairIncrease,
            (true, true) => Quadrant::MultiplicativeDecrease,
            (true, false) => Quadrant::NoChange,
        }
    }

    fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(self.mss, self.max_window.max(self.mss));
    }

    /// Quick adapt (htsim `quick_adapt`): at the end of each period, a loss or a very long
    /// delay sets the window to what the last period delivered.
    fn quick_adapt(&mut self, now: Time, loss: bool, delay: Time) -> bool {
        if now <= self.qa_end {
            return false;
        }
        let fire = self.qa_end != 0
            && (self.qa_trigger || loss || delay > self.params.qa_threshold)
            && self.achieved < self.cwnd;
        self.qa_end = now + self.base_rtt + self.params.target_qdelay;
        if fire {
            self.cwnd = self.achieved.max(self.mss);
            self.qa_trigger = false;
        }
        self.achieved = 0;
        fire
    }
}

impl CongestionControl for Nscc {
    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_ack(&mut self, ack: AckEvent) {
        self.achieved += ack.bytes;
        self.received += ack.bytes;
        let Some(rtt) = ack.rtt else {
            return;
        };
        self.min_rtt = self.min_rtt.min(rtt);
        let delay = rtt - self.min_rtt;
        // avg ← avg + (delay − avg)/80.
        self.avg_delay = if delay >= self.avg_delay {
            self.avg_delay + (delay - self.avg_delay) / 80
        } else {
            self.avg_delay - (self.avg_delay - delay) / 80
        };
        if self.quick_adapt(ack.now, false, delay) {
            return;
        }
        let p = self.params;
        let fair = u128::from(p.fi_fp) * u128::from(self.mss) * u128::from(ack.bytes);
        match self.quadrant(ack.ecn, delay) {
            Quadrant::ProportionalIncrease => {
                if delay < p.fast_delay {
                    self.fast_count += ack.bytes;
                    if self.fast_count > self.cwnd || self.fast_increasing {
                        self.cwnd += scale(ack.bytes, p.fi_scale_fp, FP);
                        self.fast_increasing = true;
                        self.clamp();
                        return;
                    }
                } else {
                    self.fast_count = 0;
                }
                self.fast_increasing = false;
                self.inc_fp += u128::from(p.alpha_fp)
                    * u128::from(p.target_qdelay - delay)
                    * u128::from(ack.bytes)
                    + fair;
            }
            Quadrant::FairIncrease => self.inc_fp += fair,
            Quadrant::MultiplicativeDecrease => {
                self.fast_increasing = false;
                self.fast_count = 0;
                let avg = self.avg_delay;
                let once = self
                    .last_decrease
                    .is_none_or(|last| ack.now - last > self.base_rtt);
                if avg > p.target_qdelay && once {
                    // cwnd · max(1 − γ·(avg − target)/avg, ½)
                    let cut = scale(
                        self.cwnd,
                        p.gamma_permille * (avg - p.target_qdelay),
                        1000 * avg,
                    )
                    .min(self.cwnd / 2);
                    self.cwnd -= cut;
                    self.last_decrease = Some(ack.now);
                }
            }
            Quadrant::NoChange => {}
        }
        self.clamp();
        if self.received > p.adjust_bytes || ack.now - self.last_adjust > self.base_rtt {
            let inc = (self.inc_fp / u128::from(FP) / u128::from(self.cwnd)) as u64;
            self.cwnd += inc.min(self.received);
            self.inc_fp = 0;
            self.received = 0;
            self.last_adjust = ack.now;
        }
        if ack.now - self.last_eta > self.base_rtt {
            self.cwnd += p.eta;
            self.last_eta = ack.now;
        }
        self.clamp();
    }

    fn on_loss(&mut self, now: Time, bytes: u64) {
        self.cwnd = self.cwnd.saturating_sub(bytes);
        self.clamp();
        self.qa_trigger = true;
        let avg = self.avg_delay;
        self.quick_adapt(now, true, avg);
    }

    fn on_timeout(&mut self, now: Time) {
        self.on_loss(now, self.mss);
    }
}

/// Swift with MSwift's median feedback, for one flow.
#[derive(Debug, Clone)]
pub struct Mswift {
    params: MswiftParams,
    cwnd: u64,
    mss: u64,
    max_window: u64,
    /// Additive increase: pending bytes × 2^16 (applied as `/ cwnd`).
    ai_fp: u128,
    last_decrease: Option<Time>,
    /// Latest RTT sample (the "once per RTT" of decreases).
    rtt: Time,
    /// Smallest RTT seen: the flow's own unloaded path (at most `base_rtt`).
    min_rtt: Time,
    /// `target_delay − base_rtt`: the queueing the target allows above a path's own base.
    target_queue: Time,
    timeouts: u32,
    samples: [Time; MEDIAN_MAX],
    next: usize,
    filled: usize,
}

impl Mswift {
    fn new(config: &CcConfig) -> Self {
        let mut params = config.mswift.unwrap_or_else(|| {
            CcConfig::with_unit(CcKind::Mswift, config.path, config.ticks_per_second)
                .mswift
                .expect("mswift parameters")
        });
        params.median_samples = params.median_samples.clamp(1, MEDIAN_MAX as u32);
        Self {
            params,
            cwnd: config.initial_window,
            mss: config.path.mss,
            max_window: config.max_window,
            ai_fp: 0,
            last_decrease: None,
            rtt: config.path.base_rtt,
            min_rtt: config.path.base_rtt,
            target_queue: params.target_delay.saturating_sub(config.path.base_rtt),
            timeouts: 0,
            samples: [0; MEDIAN_MAX],
            next: 0,
            filled: 0,
        }
    }

    /// The median of the last `median_samples` RTT samples (MSwift's feedback).
    #[must_use]
    pub fn median_delay(&self) -> Option<Time> {
        if self.filled == 0 {
            return None;
        }
        let mut window = self.samples;
        let window = &mut window[..self.filled];
        let middle = (self.filled - 1) / 2;
        Some(*window.select_nth_unstable(middle).1)
    }

    /// Swift's `can_decrease`: at most one decrease per RTT.
    fn can_decrease(&self, now: Time) -> bool {
        self.last_decrease
            .is_none_or(|last| now.saturating_sub(last) >= self.rtt)
    }

    fn decrease_by(&mut self, now: Time, permille: u64) {
        self.cwnd -= scale(self.cwnd, permille, 1000);
        self.cwnd = self.cwnd.max(self.mss);
        self.last_decrease = Some(now);
    }
}

impl CongestionControl for Mswift {
    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_ack(&mut self, ack: AckEvent) {
        self.timeouts = 0;
        let Some(rtt) = ack.rtt else {
            return;
        };
        self.rtt = rtt;
        self.min_rtt = self.min_rtt.min(rtt);
        self.samples[self.next] = rtt;
        self.next = (self.next + 1) % self.params.median_samples as usize;
        self.filled = (self.filled + 1).min(self.params.median_samples as usize);
        let delay = self.median_delay().unwrap_or(rtt);
        // Swift's topology scaling: the target grows with the path (its unloaded RTT).
        let target = self
            .params
            .target_delay
            .min(self.min_rtt + self.target_queue);
        if delay < target {
            // cwnd += ai · mss · acked / cwnd
            self.ai_fp +=
                u128::from(self.params.ai_fp) * u128::from(self.mss) * u128::from(ack.bytes);
            let step = u128::from(FP) * u128::from(self.cwnd);
            let inc = self.ai_fp / step;
            self.ai_fp %= step;
            self.cwnd = (self.cwnd + inc as u64).min(self.max_window.max(self.mss));
        } else if self.can_decrease(ack.now) {
            // cwnd · max(1 − β·(delay − target)/delay, 1 − max_mdf)
            let cut = (self.params.beta_permille * (delay - target) / delay.max(1))
                .min(self.params.max_mdf_permille);
            self.decrease_by(ack.now, cut);
        }
    }

    fn on_loss(&mut self, now: Time, _bytes: u64) {
        if self.can_decrease(now) {
            self.decrease_by(now, self.params.max_mdf_permille);
        }
    }

    fn on_timeout(&mut self, now: Time) {
        // Timers expiring within one RTT of the last decrease are one timeout event.
        if !self.can_decrease(now) {
            return;
        }
        self.timeouts += 1;
        if self.timeouts >= self.params.retx_reset {
            self.cwnd = self.mss;
            self.last_decrease = Some(now);
        } else if self.can_decrease(now) {
            self.decrease_by(now, self.params.max_mdf_permille);
        }
    }
}

#[cfg(test)]
mod tests;
