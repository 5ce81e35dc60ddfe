//! `down`: a lab removed — exactly what it created, from its state file alone, or from the
//! namespace prefix when the state is gone — and `down --all`.

use std::time::{Duration, Instant};

use super::net::{self, Rtnl};
use super::state::StateDir;
use super::{bgp, check_name, plan, procs};

/// What [`down`] removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Removed {
    /// Whether the lab had a state directory.
    pub had_state: bool,
    /// Switch processes stopped.
    pub stopped: usize,
    /// Routing daemons stopped.
    pub daemons: usize,
    /// Processes the lab started that had not exited when `down` gave up waiting for them
    /// (5 s after SIGKILL: a process stuck in the kernel), as `node (pid N)`.
    pub lingering: Vec<String>,
    /// Other processes found in its namespaces and killed.
    pub strays: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
    /// How long it took.
    pub seconds: f64,
}

/// What [`down_all`] removed besides the labs.
#[derive(Debug, Clone, PartialEq)]
pub struct RemovedAll {
    /// Each lab with a state directory, by name.
    pub labs: Vec<(String, Removed)>,
    /// Namespaces named `ofan-*` left after the labs.
    pub namespaces: usize,
    /// Processes in them.
    pub strays: usize,
    /// Root-namespace links named `ofan-*`.
    pub links: usize,
}

/// Removes lab `name`: its recorded processes (verified), anything else running in its
/// namespaces, its namespaces (which removes its veths and XDP programs), its state directory.
/// Idempotent; works from the state file alone, or from the namespace prefix when the state is
/// gone.
///
/// # Errors
/// An invalid name, a namespace or the state directory that cannot be removed.
pub fn down(name: &str) -> anyhow::Result<Removed> {
    check_name(name)?;
    let started = Instant::now();
    let dir = StateDir::of(name);
    let state = dir.load().ok();
    procs::wait_for_namespace_creators(&plan::namespace_prefix(name));
    let mut namespaces: Vec<String> = state
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    for extra in net::namespaces_with_prefix(&plan::namespace_prefix(name)) {
        if !namespaces.contains(&extra) {
            namespaces.push(extra);
        }
    }
    // A switch group is recorded once per member and once as itself: count the switches.
    let stopped = state.as_ref().map_or(0, |s| {
        let stopped = procs::stop(&s.processes, Duration::from_secs(3));
        let groups = s
            .processes
            .iter()
            .filter(|p| p.node == super::group::GROUP)
            .count();
        stopped.saturating_sub(groups)
    });
    let daemons = state
        .as_ref()
        .map_or(0, |s| procs::stop(&s.daemons, Duration::from_secs(3)));
    // `stop` waits until each is gone, up to 5 s after SIGKILL: what is left will not die.
    let lingering: Vec<String> = state
        .as_ref()
        .map(|s| procs::lingering(s.processes.iter().chain(&s.daemons)))
        .unwrap_or_default();
    let strays = net::pids_in_namespaces(&namespaces);
    procs::kill_pids(&strays.iter().map(|(pid, _)| *pid).collect::<Vec<_>>());
    let mut removed = 0;
    for namespace in &namespaces {
        if net::namespace_exists(namespace) {
            net::delete_namespace(namespace)?;
            removed += 1;
        }
        remove_frr_run_dir(namespace)?;
    }
    dir.remove()?;
    super::machine::restore_if_no_lab()?;
    Ok(Removed {
        had_state: state.is_some(),
        stopped,
        daemons,
        lingering,
        strays: strays.len(),
        namespaces: removed,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// `down --all`: every lab with a state directory, then every namespace and root-namespace
/// link named `ofan-*` and every process inside those namespaces.
///
/// # Errors
/// Something that cannot be removed.
pub fn down_all() -> anyhow::Result<RemovedAll> {
    let mut labs = Vec::new();
    for name in StateDir::all_labs() {
        if plan::valid_lab_name(&name) {
            labs.push((name.clone(), down(&name)?));
        } else {
            StateDir::of(&name).remove()?;
        }
    }
    procs::wait_for_namespace_creators("ofan-");
    let namespaces = net::namespaces_with_prefix("ofan-");
    let strays = net::pids_in_namespaces(&namespaces);
    procs::kill_pids(&strays.iter().map(|(pid, _)| *pid).collect::<Vec<_>>());
    for namespace in &namespaces {
        net::delete_namespace(namespace)?;
    }
    // FRR run directories of namespaces already gone (a crash between the two).
    for entry in std::fs::read_dir(bgp::FRR_RUN_DIR)
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("ofan-") {
            remove_frr_run_dir(&name)?;
        }
    }
    super::machine::restore_if_no_lab()?;
    let mut root = Rtnl::open()?;
    let links: Vec<_> = root
        .links()?
        .into_iter()
        .filter(|link| link.name.starts_with("ofan-"))
        .collect();
    for link in &links {
        // Deleting one end of a veth deletes the pair; the peer may already be gone.
        let _ = root.request(|seq| ofan_netlink::delete_link_request(seq, link.index));
    }
    Ok(RemovedAll {
        labs,
        namespaces: namespaces.len(),
        strays: strays.len(),
        links: links.len(),
    })
}

/// Removes FRR's run directory of `namespace` (sockets of daemons that are gone), if any.
fn remove_frr_run_dir(namespace: &str) -> anyhow::Result<()> {
    let dir = bgp::run_dir(namespace);
    match std::fs::remove_dir_all(&dir) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(anyhow::anyhow!("cannot remove {}: {error}", dir.display()))
        }
        _ => Ok(()),
    }
}
