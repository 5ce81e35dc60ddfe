//! Switch processes: started in their namespace and their own session, logged to the state
//! directory, identified by pid *and* start time so that a reused pid is never signalled.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::state::{LabState, Process, StateDir};
use super::{plan, sys};

/// `/proc/PID/stat` field 22 (start time in clock ticks since boot).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after it follow the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is a zombie (exited, not reaped yet).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = &stat[stat.rfind(')')? + 1..];
            after.split_whitespace().next().map(|state| state == "Z")
        })
        .unwrap_or(false)
}

/// Whether the recorded process still is the one the lab started: same start time, and its
/// command line is the switch (or the `ip netns exec` that is about to become it).
pub fn is_ours(process: &Process) -> bool {
    if start_time(process.pid) != Some(process.start_time) || zombie(process.pid) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", process.pid)).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    cmdline.contains("ofan-switch") || cmdline.contains("netns\0exec\0ofan-")
}

/// Whether the recorded process has not finished exiting yet (same start time, not a zombie).
/// Unlike [`is_ours`] this does not look at the command line, which is empty while a killed
/// process is still releasing its sockets.
fn still_running(process: &Process) -> bool {
    start_time(process.pid) == Some(process.start_time) && !zombie(process.pid)
}

/// The command line of switch `node` of lab `state`.
fn switch_args(state: &LabState, dir: &StateDir, node: &str) -> Vec<String> {
    let params = &state.params;
    let mut args = vec![
        "--topology".to_owned(),
        dir.topology_file().display().to_string(),
        "--node".to_owned(),
        node.to_owned(),
        "--lb".to_owned(),
        params.lb.clone(),
        "--pipe-size".to_owned(),
        params.pipe_size.to_string(),
        "--link-rate".to_owned(),
        params.link_rate.clone(),
        "--buffer".to_owned(),
        params.buffer.clone(),
        // The lab's one seed: every switch derives its own from it and its node name.
        "--seed".to_owned(),
        params.seed.to_string(),
        "--poll".to_owned(),
        "wakeup".to_owned(),
        "--ring-size".to_owned(),
        "256".to_owned(),
        "--metrics".to_owned(),
        "off".to_owned(),
        "--admin-socket".to_owned(),
        dir.socket(node).display().to_string(),
    ];
    if params.rt_priority > 0 {
        args.push("--rt-priority".to_owned());
        args.push(params.rt_priority.to_string());
    }
    if params.catch_up {
        args.push("--catch-up".to_owned());
    }
    args.shrink_to_fit();
    args
}

/// Starts switch `node` in its namespace, in a new session, appending to its log; returns the
/// record to keep in the state.
///
/// # Errors
/// When the log cannot be opened or the process cannot be started.
pub fn start_switch(state: &LabState, dir: &StateDir, node: &str) -> anyhow::Result<Process> {
    use anyhow::Context;
    let log_path = dir.log(node);
    let log = File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("cannot open {}", log_path.display()))?;
    let _ = std::fs::remove_file(dir.socket(node));
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &plan::namespace(&state.name, node)])
        .arg(&state.params.switch_bin)
        .args(switch_args(state, dir, node))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    sys::new_session(&mut command);
    let child = command
        .spawn()
        .with_context(|| format!("cannot start the switch of {node}"))?;
    let pid = child.id();
    // The child is not waited for: it outlives this process and is reparented to init.
    drop(child);
    let start_time = start_time(pid).unwrap_or(0);
    Ok(Process {
        node: node.to_owned(),
        pid,
        start_time,
    })
}

/// Stops the given processes: SIGTERM to each that is still ours, then SIGKILL to whatever
/// is left after `grace`. Returns how many were signalled.
pub fn stop(processes: &[Process], grace: Duration) -> usize {
    let ours: Vec<&Process> = processes.iter().filter(|p| is_ours(p)).collect();
    for process in &ours {
        let _ = sys::signal(process.pid, sys::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && ours.iter().any(|p| still_running(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    for process in &ours {
        if still_running(process) {
            let _ = sys::signal(process.pid, sys::SIGKILL);
        }
    }
    // A killed process may take a moment to release its AF_XDP sockets and XDP links: wait
    // until it is really gone, so that `down` returning means nothing is left.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && ours.iter().any(|p| still_running(p)) {
        std::thread::sleep(Duration::from_millis(10));
    }
    ours.len()
}

/// Kills (SIGKILL) processes found inside a lab's namespaces by pid, checking the start time
/// right before so that an exited pid is not reused under us.
pub fn kill_pids(pids: &[u32]) {
    let records: Vec<(u32, Option<u64>)> = pids.iter().map(|&pid| (pid, start_time(pid))).collect();
    for (pid, started) in &records {
        if started.is_some() && start_time(*pid) == *started {
            let _ = sys::signal(*pid, sys::SIGKILL);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline
        && records.iter().any(|(pid, started)| {
            started.is_some() && start_time(*pid) == *started && !zombie(*pid)
        })
    {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until every admin socket in `sockets` accepts a connection, or `timeout`. Returns
/// the ones that did not.
pub fn wait_for_sockets(
    sockets: &[(String, std::path::PathBuf)],
    timeout: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<&(String, std::path::PathBuf)> = sockets.iter().collect();
    loop {
        pending.retain(|(_, path)| std::os::unix::net::UnixStream::connect(path).is_err());
        if pending.is_empty() || Instant::now() > deadline {
            return pending.iter().map(|(node, _)| node.clone()).collect();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `ofan-switch` binary: `$OFAN_SWITCH`, else next to this executable, else on `PATH`.
pub fn switch_binary() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("OFAN_SWITCH") {
        return path.into();
    }
    if let Ok(exe) = std::env::current_exe() {
        let sibling = exe.with_file_name("ofan-switch");
        if sibling.exists() {
            return sibling;
        }
    }
    Path::new("ofan-switch").to_owned()
}

/// Waits (up to 3 s) until no `ip netns add <prefix>…` process is running: an `up` killed
/// while creating namespaces leaves these children behind, and they would otherwise create a
/// namespace after `down` has looked.
pub fn wait_for_namespace_creators(prefix: &str) {
    let creating = || {
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries.filter_map(Result::ok).any(|entry| {
                    let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                        return false;
                    };
                    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
                    args.len() >= 4
                        && args[1] == b"netns"
                        && args[2] == b"add"
                        && args[3].starts_with(prefix.as_bytes())
                })
            })
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline && creating() {
        std::thread::sleep(Duration::from_millis(20));
    }
}
