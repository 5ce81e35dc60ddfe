//! The host traffic agent: runs in every host namespace of a lab and generates the collective
//! traffic whose completion time (CCT) the experiments measure (paper §2.1–§2.2).
//!
//! The agent is collective-agnostic. The lab writes one [`collective::Plan`] per run (hosts and
//! flows); every agent sends the flows whose source is its host — at ρ × link rate,
//! round-robin over its flows, never faster, and with a congestion control ([`cc_config`],
//! `ofan_transport::cc`: DCTCP, NSCC or MSwift, the model's own code) only as much as each
//! flow's window lets it — and acknowledges every DATA
//! packet it receives with one 64-byte ACK that echoes ECN CE and the copy it answers. A packet
//! whose ACK does not come back within its retransmission timeout is sent again, before new
//! ones (selective repeat, `ofan_transport::SelectiveRepeat`, the model's hosts' own code), so a
//! drop costs time and never voids a run. All agents start at one CLOCK_MONOTONIC instant
//! (`--start-at`); an agent that completed keeps answering until every agent has (`--stop-file`)
//! and then writes a JSON [`report::AgentReport`]; the CCT of the run is
//! [`report::collective_cct_ns`] over them. One process may be the agent of several hosts
//! ([`traffic::run_agents`], the lab's default): each host's sockets are created in its
//! namespace, and one sender and one receiver thread serve them all.
//!
//! Layers (pure unless noted):
//! - [`collective`]: plans — permutation, all-to-all, ring, matrix — in the model's flow order.
//! - [`wire`]: the 18-byte header of DATA and ACK packets.
//! - [`pacing`]: the departure schedule `t_k = max(t_{k−1} + wire_time, now)` and lateness.
//! - [`entropy`]: host-side load balancing (none, spray, REPS) over a pool of source ports.
//! - [`track`]: exactly-once accounting of sequence numbers.
//! - [`traffic`] (I/O): sockets, the sender and receiver threads, the report.
//! - [`sys`] (`ofan_lab_sys::agent`, where the `unsafe` is): clock, absolute sleep, timer slack,
//!   `recvmsg` with IP_TOS, epoll.
//!
//! The wire format, plan and report formats and the pacing method are in `docs/agent.md`.

#![forbid(unsafe_code)]

pub mod collective;
pub mod entropy;
pub mod pacing;
pub mod report;
pub use ofan_lab_sys::agent as sys;
pub mod track;
pub mod traffic;
pub mod wire;

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// CLOCK_MONOTONIC now, nanoseconds: the clock of `--start-at`.
#[must_use]
pub fn monotonic_now_ns() -> u64 {
    sys::monotonic_ns()
}

/// The congestion control of a run's flows, in ns (`None` for `none`): `kind` scaled to a
/// full DATA packet of `payload` UDP bytes (its Ethernet frame), the unloaded round trip of
/// the longest path `base_rtt_ns` and the hosts' link rate. The agents and the run report
/// (`setup.cc`) build it here, so they say the same.
#[must_use]
pub fn cc_config(
    kind: ofan_transport::CcKind,
    payload: u32,
    base_rtt_ns: u64,
    link_rate_bps: u64,
) -> Option<ofan_transport::CcConfig> {
    let path = ofan_transport::PathParams {
        mss: wire::frame_bytes(u64::from(payload)),
        base_rtt: base_rtt_ns,
        rate_bps: link_rate_bps,
    };
    (!kind.is_none()).then(|| ofan_transport::CcConfig::with_unit(kind, path, 1_000_000_000))
}

/// The text of a `--matrix` file.
pub fn read_matrix(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("--matrix {}", path.display()))
}

/// Writes `text` and a newline to `path` through a temporary file and a rename, so a reader
/// never sees half a file.
///
/// # Errors
/// When the file cannot be written.
pub fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("cannot write {}", tmp.display()))?;
    file.write_all(text.as_bytes())?;
    file.write_all(b"\n")?;
    drop(file);
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}
