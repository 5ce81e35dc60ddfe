//! Switch processes: started in their namespace and their own session, logged to the state
//! directory, identified by pid *and* start time so that a reused pid is never signalled.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ofan_topology::plan::AsnPlan;

use super::bgp::{self, Daemon};
use super::spec::Switches;
use super::state::{LabState, Process, StateDir};
use super::{plan, sys};

/// A `/proc/PID/stat` (or `/proc/PID/task/TID/stat`) line split at its command, field 2, which
/// may hold spaces and parentheses: the command, and the fields from 3 (the state) on.
pub fn split_stat(stat: &str) -> Option<(&str, std::str::SplitWhitespace<'_>)> {
    let end = stat.rfind(')')?;
    let start = stat[..end].find('(')?;
    Some((&stat[start + 1..end], stat[end + 1..].split_whitespace()))
}

/// `/proc/PID/stat` field 22 (start time in clock ticks since boot).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    split_stat(&stat)?.1.nth(19)?.parse().ok()
}

/// Whether a stat line's state (field 3) is `Z`: exited, not reaped yet.
fn zombie_stat(stat: &str) -> bool {
    split_stat(stat).and_then(|(_, mut fields)| fields.next()) == Some("Z")
}

/// Whether `pid` is a zombie (exited, not reaped yet).
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| zombie_stat(&stat))
}

/// Whether the recorded process still is the one the lab started: same start time, and its
/// command line is the switch (or the `ip netns exec` that is about to become it).
pub fn is_ours(process: &Process) -> bool {
    if start_time(process.pid) != Some(process.start_time) || zombie(process.pid) {
        return false;
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", process.pid)).unwrap_or_default();
    let cmdline = String::from_utf8_lossy(&cmdline);
    cmdline.contains("ofan-switch")
        || cmdline.contains("netns\0exec\0ofan-")
        || cmdline.starts_with(super::bgp::FRR_DIR)
        || cmdline.starts_with(super::bgp::BIRD)
}

/// The recorded processes that have not finished exiting, as `node (pid N)`, each once (a
/// group is recorded once per member).
pub fn lingering<'a>(processes: impl IntoIterator<Item = &'a Process>) -> Vec<String> {
    let mut pids = std::collections::BTreeSet::new();
    processes
        .into_iter()
        .filter(|p| still_running(p) && pids.insert(p.pid))
        .map(|p| format!("{} (pid {})", p.node, p.pid))
        .collect()
}

/// Whether the recorded process has not finished exiting yet (same start time, not a zombie).
/// Unlike [`is_ours`] this does not look at the command line, which is empty while a killed
/// process is still releasing its sockets.
fn still_running(process: &Process) -> bool {
    start_time(process.pid) == Some(process.start_time)
        && (!zombie(process.pid) || threads_left(process.pid))
}

/// Whether a process whose main thread has exited still has threads that have not (a thread
/// group's leader is a zombie until its last thread is gone: an `ofan-switch group` stopping
/// has its members' threads in their namespaces for a moment longer).
fn threads_left(pid: u32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| {
        tasks.filter_map(Result::ok).any(|task| {
            std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| {
                split_stat(&stat)
                    .and_then(|(_, mut fields)| fields.next())
                    .is_some_and(|state| state != "Z")
            })
        })
    })
}

/// The command line of switch `node` of lab `state`.
fn switch_args(state: &LabState, dir: &StateDir, node: &str) -> Vec<String> {
    let mut args = vec!["--node".to_owned(), node.to_owned()];
    args.extend(common_args(state, dir, Some(node)));
    args.push("--admin-socket".to_owned());
    args.push(dir.socket(node).display().to_string());
    args
}

/// The flags every switch of lab `state` gets (all but its node and admin socket); with `node`,
/// its own algorithm (`lb_map`) for `--lb`.
fn common_args(state: &LabState, dir: &StateDir, node: Option<&str>) -> Vec<String> {
    let params = &state.params;
    let mut args = vec![
        "--topology".to_owned(),
        dir.topology_file().display().to_string(),
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
        super::spec::SWITCH_RING_SIZE.to_string(),
        "--frames-per-port".to_owned(),
        super::spec::switch_frames_per_port(
            params.mtu,
            ofan_topology::units::parse_size(&params.buffer).unwrap_or(u64::MAX),
        )
        .to_string(),
        "--metrics".to_owned(),
        "off".to_owned(),
    ];
    if params.dragonfly {
        args.extend(["--dragonfly".to_owned(), params.lb.clone()]);
        args.extend(["--lb".to_owned(), "ecmp".to_owned()]);
    } else {
        let own = node.and_then(|node| params.lb_map.get(node));
        args.extend(["--lb".to_owned(), own.unwrap_or(&params.lb).clone()]);
    }
    if let Some(threshold) = &params.ecn_threshold {
        args.push("--ecn-threshold".to_owned());
        args.push(threshold.clone());
    }
    if params.rt_priority > 0 {
        args.push("--rt-priority".to_owned());
        args.push(params.rt_priority.to_string());
    }
    if params.catch_up {
        args.push("--catch-up".to_owned());
    }
    if params.notifies_hosts() {
        // The edges pass their plane's notifications on to the hosts (the endpoint plane):
        // the agents' `plane-arf` reads them.
        args.push("--arf-notify-hosts".to_owned());
    }
    if !params.arf_combine.is_min() {
        args.push("--arf-combine".to_owned());
        args.push(params.arf_combine.name().to_owned());
    }
    if params.fast_path != ofan_dataplane::afxdp::FastPathMode::Off {
        args.push("--fast-path".to_owned());
        args.push(params.fast_path.name().to_owned());
    }
    if let Some(filter) = &params.switch_log {
        args.push("--log".to_owned());
        args.push(filter.clone());
    }
    if let Some(asns) = params.asn_plan.filter(|&asns| asns != AsnPlan::Unique) {
        // The switch names its neighbours' ASNs in notifications and resolves ASN-only next
        // hops through the plan: the lab's numbering, not the default.
        args.push("--asn-plan".to_owned());
        args.push(asns.name().to_owned());
    }
    let bird = Some(super::spec::BgpDaemon::Bird.name());
    if params.routing == super::spec::Routing::Bgp.name() && params.bgp_daemon.as_deref() != bird {
        // FRR's bgpd reports to the switch's BMP station (BIRD 2.0 has no BMP: the switch
        // takes its path information from the topology plan).
        args.push("--bmp".to_owned());
        args.push(format!("{}:{}", super::bgp::BMP_HOST, super::bgp::BMP_PORT));
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
    let _ = std::fs::remove_file(dir.socket(node));
    if state.params.switches == Switches::Group {
        return super::group::start_member(state, dir, node);
    }
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &plan::namespace(&state.name, node)])
        .arg(&state.params.switch_bin)
        .args(switch_args(state, dir, node));
    spawn_logged(command, &dir.log(node), node)
        .with_context(|| format!("cannot start the switch of {node}"))
}

/// Starts the lab's `ofan-switch group` with `members` (in the root namespace; each member's
/// thread enters its own), logging to `logs/group.log` (each member's log is a link to it);
/// returns the group's record (node [`super::group::GROUP`]).
///
/// # Errors
/// When the log cannot be opened or the process cannot be started.
pub fn start_group(
    state: &LabState,
    dir: &StateDir,
    members: &[String],
) -> anyhow::Result<Process> {
    use anyhow::Context;
    let _ = std::fs::remove_file(dir.group_control());
    let mut command = Command::new(&state.params.switch_bin);
    command.arg("group").args(common_args(state, dir, None));
    for member in members {
        let _ = std::fs::remove_file(dir.socket(member));
        command.args(["--member", member]);
        if let Some(lb) = state.params.lb_map.get(member) {
            command.args(["--member-lb", &format!("{member}={lb}")]);
        }
    }
    command
        .args(["--netns", &plan::namespace(&state.name, "{node}")])
        .args([
            "--admin-socket",
            &dir.socket("{node}").display().to_string(),
        ])
        .args(["--control", &dir.group_control().display().to_string()])
        // veth: copy mode (Auto would look for a device in the root namespace's sysfs).
        .args(["--xdp-mode", "copy"]);
    if state.params.splice {
        command.arg("--splice");
    }
    if state.params.host_links == super::spec::HostLinks::Shared {
        command.arg("--host-links").arg(dir.host_links());
    }
    if state.params.rt_priority > 0 {
        // The pool serves every switch: above their own workers' priority, below the host
        // agents and the kernel's ksoftirqd (see `spec::GROUP_RT_PRIORITY`).
        command.args([
            "--pool-rt-priority",
            &super::spec::GROUP_RT_PRIORITY.to_string(),
        ]);
        // A real-time pool that never runs out of work leaves the CPUs to ordinary tasks in
        // short rests (see `spec::GROUP_FAIR_SHARE_US`).
        command.args([
            "--fair-share-us",
            &super::spec::GROUP_FAIR_SHARE_US.to_string(),
        ]);
    }
    // A VM's CPUs kept awake while frames flow (see `spec::GROUP_KEEP_AWAKE_US`).
    command.args([
        "--keep-awake-us",
        &super::spec::GROUP_KEEP_AWAKE_US.to_string(),
    ]);
    let log = dir.log(super::group::GROUP);
    let process = spawn_logged(command, &log, super::group::GROUP)
        .context("cannot start the lab's ofan-switch group")?;
    for member in members {
        let link = dir.log(member);
        let _ = std::fs::remove_file(&link);
        let _ = std::os::unix::fs::symlink(format!("{}.log", super::group::GROUP), &link);
    }
    Ok(process)
}

/// Whether switch `process.node` runs: its process is ours, and in a group, the group says the
/// member runs.
pub fn switch_running(state: &LabState, dir: &StateDir, process: &Process) -> bool {
    is_ours(process)
        && (state.params.switches != Switches::Group
            || super::group::member_running(dir, &process.node))
}

/// Starts `command` in its own session with stdin closed and stdout and stderr appended to
/// `log`; returns the record of process of `node` (pid and start time). The child is not
/// waited for: it outlives this process and is reparented to init.
pub(crate) fn spawn_logged(
    mut command: Command,
    log: &Path,
    node: &str,
) -> anyhow::Result<Process> {
    use anyhow::Context;
    let file = File::options()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("cannot open {}", log.display()))?;
    command
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    sys::new_session(&mut command);
    let pid = command.spawn()?.id();
    Ok(Process {
        node: node.to_owned(),
        pid,
        start_time: start_time(pid).unwrap_or(0),
    })
}

/// How a routing daemon starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonStart {
    /// With the lab or its switch: nothing to recover.
    Fresh,
    /// After its predecessor crashed (`node S routing-restart`): the kernel FIB still holds the
    /// routes it installed, its neighbours keep theirs as stale. BIRD starts in graceful-restart
    /// recovery (`-R`: its kernel protocol keeps the routes until BGP has recovered); FRR's
    /// zebra with kernel-level graceful restart (`-K`: the kernel's routes stay until bgpd
    /// replaces them, or [`bgp::RESTART_TIME_S`]), and its bgpd in `update-delay` read-only
    /// mode until every neighbour has sent End-of-RIB (FRR 8.4's bgpd has no flag that says
    /// it restarts).
    ///
    /// Measured alternative: restarting bgpd alone, with zebra keeping the routes of its
    /// graceful-restart client, lost every route of the switch for 20-60 ms at each restart
    /// (1.2 s with the default `coalesce-time`): the new bgpd tells zebra "route update
    /// complete" on its neighbours' End-of-RIB, which comes before their routes.
    AfterCrash,
}

/// Starts routing daemon `daemon` of switch `node` in its namespace and its own session, with
/// its configuration written to the state directory and its own FRR path space; returns the
/// record to keep in the state.
///
/// # Errors
/// When the files cannot be written or the process cannot be started.
pub fn start_daemon(
    state: &LabState,
    dir: &StateDir,
    topology: &ofan_topology::Topology,
    node: &ofan_topology::Node,
    daemon: Daemon,
    start: DaemonStart,
) -> anyhow::Result<Process> {
    use anyhow::Context;
    let binary = daemon.binary();
    if !binary.exists() {
        anyhow::bail!(
            "{} not found: --routing bgp needs {} (scripts/setup installs it)",
            binary.display(),
            if daemon.is_frr() {
                "the frr package"
            } else {
                "the bird2 package"
            }
        );
    }
    let namespace = plan::namespace(&state.name, &node.name);
    let conf_dir = dir.routing_dir(&node.name);
    std::fs::create_dir_all(&conf_dir)
        .with_context(|| format!("cannot create {}", conf_dir.display()))?;
    let conf = conf_dir.join(format!("{}.conf", daemon.name()));
    let bfd = state.params.bfd;
    let asns = state.params.asns();
    let text = match daemon {
        Daemon::Zebra => bgp::zebra_conf(node),
        Daemon::Bgpd => {
            let mut conf = bgp::bgpd_conf(topology, asns, node);
            conf.push_str(&bgp::bgpd_graceful_restart_conf(
                topology,
                asns,
                node,
                start == DaemonStart::AfterCrash,
            ));
            if bfd.is_some() {
                conf.push_str(&bgp::bgpd_bfd_conf(topology, asns, node));
            }
            conf
        }
        Daemon::Bfdd => bgp::bfdd_conf(node, bfd.unwrap_or(bgp::Bfd::FAST)),
        Daemon::Bird => bgp::bird_conf(topology, asns, node, bfd),
    };
    std::fs::write(&conf, text).with_context(|| format!("cannot write {}", conf.display()))?;
    let pid_file = conf_dir.join(format!("{}.pid", daemon.name()));
    let mut command = Command::new("ip");
    command.args(["netns", "exec", &namespace]).arg(&binary);
    if daemon.is_frr() {
        // FRR drops to its `frr` user: it must read the files and own its run directory.
        let run_dir = bgp::run_dir(&namespace);
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("cannot create {}", run_dir.display()))?;
        let (uid, gid) = bgp::frr_ids()?;
        for path in [run_dir.as_path(), conf_dir.as_path(), conf.as_path()] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .with_context(|| format!("cannot give {} to the frr user", path.display()))?;
        }
        command
            .args(["-N", &namespace, "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(&pid_file)
            .args(["--log", "stdout", "--log-level", "notifications"]);
        if daemon == Daemon::Bgpd {
            // BMP (RFC 7854) towards the switch's station: its path table.
            command.args(["-M", "bmp"]);
        }
        if daemon == Daemon::Zebra && start == DaemonStart::AfterCrash {
            // Kernel-level graceful restart: the routes the killed zebra installed stay in the
            // kernel (and zebra's table) until bgpd replaces them, or for this long.
            command.args(["-K", &bgp::RESTART_TIME_S.to_string()]);
        }
    } else {
        // In the foreground (-f), its control socket in the lab's state directory.
        command
            .args(["-f", "-c"])
            .arg(&conf)
            .arg("-s")
            .arg(bgp::bird_socket(&conf_dir))
            .arg("-P")
            .arg(&pid_file);
        if start == DaemonStart::AfterCrash {
            command.arg("-R");
        }
    }
    let log = dir.log(&format!("{}-{}", node.name, daemon.name()));
    spawn_logged(command, &log, &node.name)
        .with_context(|| format!("cannot start {} of {}", daemon.name(), node.name))
}

/// Whether the recorded process runs `binary` (after `ip netns exec` replaced itself by it).
pub fn runs(process: &Process, binary: &Path) -> bool {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", process.pid)).unwrap_or_default();
    cmdline.split(|&b| b == 0).next() == Some(binary.as_os_str().as_encoded_bytes())
}

/// Kills the given processes that are still ours at once (SIGKILL: like a crash, nothing is
/// cleaned up) and waits until they are gone.
pub fn crash(processes: &[Process]) {
    let ours: Vec<&Process> = processes.iter().filter(|p| is_ours(p)).collect();
    for process in &ours {
        let _ = sys::signal(process.pid, sys::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && ours.iter().any(|p| still_running(p)) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Stops the given processes: SIGTERM to each that is still ours, then SIGKILL to whatever
/// is left after `grace`. Returns how many were signalled.
pub fn stop(processes: &[Process], grace: Duration) -> usize {
    let ours: Vec<&Process> = processes.iter().filter(|p| is_ours(p)).collect();
    // Killed ones still exiting (their command line is already empty: an `ofan-switch group`
    // releasing twenty switches' sockets and UMEMs takes a moment): nothing to signal, but
    // `down` must not return before they are gone.
    let dying: Vec<&Process> = processes
        .iter()
        .filter(|p| !is_ours(p) && still_running(p))
        .collect();
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
    while Instant::now() < deadline && ours.iter().chain(&dying).any(|p| still_running(p)) {
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
        pending.retain(|(_, path)| !ofan_control::admin::Client::new(path).is_listening());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_splits_after_the_last_parenthesis_of_its_command() {
        let (comm, mut fields) = split_stat("7 (a) b (c)) Z 1 7").unwrap();
        assert_eq!(comm, "a) b (c)");
        assert_eq!(fields.next(), Some("Z"));
        assert!(zombie_stat("7 (a) b (c)) Z 1 7"));
        assert!(!zombie_stat("7 (ofan-switch) S 1 7"));
        assert!(split_stat("no command").is_none());
        // This test process: running, started after boot.
        assert!(!zombie(std::process::id()));
        assert!(start_time(std::process::id()).is_some_and(|ticks| ticks > 0));
    }
}
