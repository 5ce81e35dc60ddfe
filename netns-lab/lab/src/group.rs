//! The lab's side of `ofan-switch group` (the default way a lab runs its switches: one process,
//! one worker thread per CPU): its control socket's requests — member status, stop, start.
//!
//! The state records the group as a process of node [`GROUP`] and every member as a process of
//! its own node with the group's pid, so that whatever asks "is switch X's process ours"
//! works in both modes; [`super::procs::switch_running`] also asks the group whether the member
//! runs.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Deserialize;

use super::state::{LabState, Process, StateDir};

/// The node name under which the state records the group process (and names its log).
pub const GROUP: &str = "group";

/// A member's state, as the group reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum MemberState {
    /// Forwarding.
    Running,
    /// Stopped on request.
    Stopped,
    /// Ended with an error.
    Failed {
        /// Why.
        error: String,
    },
}

#[derive(Debug, Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    members: Option<std::collections::BTreeMap<String, MemberState>>,
    #[serde(default)]
    pool: Option<PoolState>,
}

/// The group's shared worker threads, as its `status` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct PoolState {
    /// Threads (one per CPU).
    pub threads: usize,
    /// Nanoseconds they have spun to departures with nothing to forward, summed: busy CPU
    /// time that is the price of punctual departures, not of forwarding.
    pub spun_ns: u64,
}

fn request(dir: &StateDir, line: &str) -> anyhow::Result<Reply> {
    let path = dir.group_control();
    let mut stream = UnixStream::connect(&path).with_context(|| {
        format!(
            "the lab's switch group does not answer at {}",
            path.display()
        )
    })?;
    // A stop waits for the member to finish (its workers drain, its program detaches).
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    writeln!(stream, "{line}")?;
    let mut reply = String::new();
    BufReader::new(&stream).read_line(&mut reply)?;
    let reply: Reply = serde_json::from_str(reply.trim())
        .with_context(|| format!("bad reply from the switch group: {reply:?}"))?;
    if !reply.ok {
        bail!(
            "switch group: {}",
            reply.error.as_deref().unwrap_or("request refused")
        );
    }
    Ok(reply)
}

/// Every member's state.
///
/// # Errors
/// The group does not answer.
pub fn members(dir: &StateDir) -> anyhow::Result<std::collections::BTreeMap<String, MemberState>> {
    Ok(request(dir, "status")?.members.unwrap_or_default())
}

/// The group's worker pool (`None` from a group too old to report it).
///
/// # Errors
/// The group does not answer.
pub fn pool(dir: &StateDir) -> anyhow::Result<Option<PoolState>> {
    Ok(request(dir, "status")?.pool)
}

/// Whether member `node` runs (false when the group does not answer).
#[must_use]
pub fn member_running(dir: &StateDir, node: &str) -> bool {
    members(dir).is_ok_and(|members| members.get(node) == Some(&MemberState::Running))
}

/// Stops member `node` (returns once it has stopped).
///
/// # Errors
/// The group does not answer or refuses.
pub fn stop_member(dir: &StateDir, node: &str) -> anyhow::Result<()> {
    request(dir, &format!("stop {node}")).map(drop)
}

/// Kills member `node` as a crash would (its sockets close, its program stays attached and
/// drops what arrives), returning once it has ended.
///
/// # Errors
/// The group does not answer or refuses.
pub fn kill_member(dir: &StateDir, node: &str) -> anyhow::Result<()> {
    request(dir, &format!("kill {node}")).map(drop)
}

/// Starts member `node` again; returns its record (the group's pid).
///
/// # Errors
/// No group recorded or running; the group refuses.
pub fn start_member(state: &LabState, dir: &StateDir, node: &str) -> anyhow::Result<Process> {
    let group = state
        .processes
        .iter()
        .find(|p| p.node == GROUP && super::procs::is_ours(p))
        .context("the lab's switch group is not running (ofan-lab down, then up)")?;
    request(dir, &format!("start {node}"))?;
    Ok(Process {
        node: node.to_owned(),
        pid: group.pid,
        start_time: group.start_time,
    })
}
