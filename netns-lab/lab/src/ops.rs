//! Operations on a running lab: run a command in a node, ping every host pair, take links and
//! switches down and up, change the algorithm, capture a port. Each returns what happened; the
//! CLI says it.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_dataplane::lb::Algorithm;
use ofan_topology::{Node, NodeId, Role};

use super::bgp::{self, BgpDaemon, Sessions};
use super::loaded::Reconvergence;
use super::ping::PairResult;
use super::state::{LinkState, Process};
use super::{find_node, load, net, plan, procs, sys, up, Observer, Routing};

/// Runs `command` in `node`'s namespace and returns its exit status.
///
/// # Errors
/// No such lab or node; `ip netns exec` cannot be run.
pub fn exec(name: &str, node: &str, command: &[String]) -> anyhow::Result<ExitStatus> {
    let lab = load(name)?;
    find_node(&lab.topology, node)?;
    std::process::Command::new("ip")
        .args(["netns", "exec", &plan::namespace(name, node)])
        .args(command)
        .status()
        .context("cannot run ip netns exec")
}

/// Opens the namespace of `node` of lab `lab` (for `setns`).
///
/// # Errors
/// When it does not exist.
pub fn open_namespace(lab: &str, node: &str) -> std::io::Result<std::fs::File> {
    std::fs::File::open(Path::new(net::NETNS_DIR).join(plan::namespace(lab, node)))
}

/// Every ordered host pair pinged.
#[derive(Debug, Clone)]
pub struct PingMatrix {
    /// Host names and loopback addresses, in topology order.
    pub hosts: Vec<(String, Ipv4Addr)>,
    /// `results[i][j]`: from host i to host j (the diagonal is unused).
    pub results: Vec<Vec<PairResult>>,
    /// How long it took.
    pub elapsed: Duration,
}

impl PingMatrix {
    /// The pairs that failed.
    #[must_use]
    pub fn failed(&self) -> Vec<(usize, usize)> {
        let n = self.hosts.len();
        (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|&(i, j)| i != j && !self.results[i][j].ok)
            .collect()
    }

    /// Ordered pairs.
    #[must_use]
    pub fn pairs(&self) -> usize {
        self.hosts.len() * self.hosts.len().saturating_sub(1)
    }
}

/// Pings every ordered host pair, `attempts` tries each.
///
/// # Errors
/// No such lab; a namespace that cannot be opened.
pub fn pingall(name: &str, attempts: u32) -> anyhow::Result<PingMatrix> {
    let lab = load(name)?;
    let hosts = lab.topology.hosts();
    let spaces: Vec<std::fs::File> = hosts
        .iter()
        .map(|host| {
            open_namespace(name, &host.name).with_context(|| format!("namespace of {}", host.name))
        })
        .collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    // In a multi-plane fabric every plane is pinged, each at the hosts' addresses in it: a
    // pair is reachable when it is in every plane (its RTT: the planes' mean).
    let mut results: Vec<Vec<super::ping::PairResult>> = Vec::new();
    for plane in 0..lab.topology.planes() {
        let pairs: Vec<(&std::fs::File, Ipv4Addr)> = spaces
            .iter()
            .zip(hosts)
            .map(|(file, host)| (file, host.ports[usize::from(plane)].address))
            .collect();
        let wait = Duration::from_millis(1000);
        let plane_results = super::ping::pingall(&pairs, attempts.max(1), wait)?;
        if results.is_empty() {
            results = plane_results;
            continue;
        }
        let planes = u32::from(plane) + 1;
        for (row, plane_row) in results.iter_mut().zip(plane_results) {
            for (pair, plane_pair) in row.iter_mut().zip(plane_row) {
                pair.ok &= plane_pair.ok;
                pair.rtt = match (pair.rtt, plane_pair.rtt) {
                    (Some(mean), Some(rtt)) => Some((mean * (planes - 1) + rtt) / planes),
                    _ => None,
                };
            }
        }
    }
    Ok(PingMatrix {
        hosts: hosts.iter().map(|h| (h.name.clone(), h.loopback)).collect(),
        results,
        elapsed: started.elapsed(),
    })
}

/// What `link` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkChange {
    /// The link's state now (`Down` when asked for up while an end switch is stopped).
    pub state: LinkState,
    /// Routes reprogrammed (static routing).
    pub routes: usize,
    /// Under BGP: how long, from the change, until every switch's kernel FIB was the plan's
    /// again, and until each end's was.
    pub converged: Option<Reconvergence>,
}

/// Makes the link between nodes `a` and `b` `wanted`: up, down (carrier off at both ends;
/// static routes are recomputed) or blackholed (carrier on, every frame dropped where it is
/// received at both ends; nothing is recomputed: only the routing protocols' timers notice).
///
/// Each change is recorded in the state before it is made. Blackholing sets the drops up
/// before the carrier comes on; leaving a blackhole turns the carrier off (for `down`) before
/// the drops go.
///
/// # Errors
/// No such lab, nodes or link; netlink, `tc` or switch admin failures.
pub fn link(name: &str, a: &str, b: &str, wanted: LinkState) -> anyhow::Result<LinkChange> {
    let mut lab = load(name)?;
    let (node_a, node_b) = (
        find_node(&lab.topology, a)?.id,
        find_node(&lab.topology, b)?.id,
    );
    let link = lab
        .topology
        .link_between(node_a, node_b)
        .with_context(|| format!("{a} and {b} are not linked"))?;
    let before = lab.failures();
    let was_blackholed = lab.state.blackholed_links.contains(&link.0);
    let since = Instant::now();
    let previous = (
        lab.state.failed_links.clone(),
        lab.state.blackholed_links.clone(),
    );
    lab.state.failed_links.retain(|id| *id != link.0);
    lab.state.blackholed_links.retain(|id| *id != link.0);
    match wanted {
        LinkState::Up => {}
        LinkState::Down => lab.state.failed_links.push(link.0),
        LinkState::Blackholed => lab.state.blackholed_links.push(link.0),
    }
    lab.dir.save(&lab.state)?;
    let after = lab.failures();
    let carrier = after.is_alive(link);
    if wanted == LinkState::Blackholed {
        if let Err(error) = lab.set_blackhole(link, true) {
            // Nothing half-made stays: the link is as it was (the carrier is untouched yet).
            let _ = lab.set_blackhole(link, was_blackholed);
            (lab.state.failed_links, lab.state.blackholed_links) = previous;
            lab.dir.save(&lab.state)?;
            return Err(error);
        }
    }
    lab.set_link(link, carrier)?;
    if was_blackholed && wanted != LinkState::Blackholed {
        lab.set_blackhole(link, false)?;
    }
    // The ends' routes are rewritten whole when their carrier changed (the kernel drops routes
    // over a device that goes down); a blackhole coming or going leaves them alone.
    let force = if before.is_alive(link) == carrier {
        Vec::new()
    } else {
        vec![node_a, node_b]
    };
    let routes = lab.reroute(&before, &after, &force)?;
    let converged = lab.converge(since, CONVERGENCE_TIMEOUT, &[node_a, node_b])?;
    Ok(LinkChange {
        state: match (carrier, wanted) {
            (false, _) => LinkState::Down,
            (true, LinkState::Blackholed) => LinkState::Blackholed,
            (true, _) => LinkState::Up,
        },
        routes,
        converged,
    })
}

/// How long `link` and `node` wait for BGP to reconverge.
const CONVERGENCE_TIMEOUT: Duration = Duration::from_secs(30);

/// What `node stop|start` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeChange {
    /// It was stopped already.
    AlreadyStopped,
    /// Stopped; its links are down.
    Stopped {
        /// Routes reprogrammed (static routing).
        routes: usize,
        /// Under BGP: how long until the fabric's FIBs were the plan's again.
        converged: Option<Reconvergence>,
    },
    /// It was running already.
    AlreadyRunning {
        /// Its process.
        pid: u32,
    },
    /// Started and answering.
    Started {
        /// Its process.
        pid: u32,
        /// Routes reprogrammed (static routing).
        routes: usize,
        /// Under BGP: how long until the fabric's FIBs were the plan's again.
        converged: Option<Reconvergence>,
    },
}

/// Stops switch `switch` (its links go down, the fabric routes around it) or starts it again.
///
/// # Errors
/// No such lab or switch, a host, a switch that does not come up.
pub fn node(name: &str, switch: &str, start: bool) -> anyhow::Result<NodeChange> {
    let mut lab = load(name)?;
    let node: Node = find_node(&lab.topology, switch)?.clone();
    if !node.role.is_switch() {
        bail!("{switch} is a host; node stop/start applies to switches");
    }
    let before = lab.failures();
    let since = Instant::now();
    if !start {
        if lab.state.stopped.contains(&node.name) {
            return Ok(NodeChange::AlreadyStopped);
        }
        lab.stop_process(&node.name);
        lab.stop_daemons(&node.name);
        lab.state.stopped.push(node.name.clone());
        lab.dir.save(&lab.state)?;
        for port in &node.ports {
            lab.set_link(port.link, false)?;
        }
        let after = lab.failures();
        let routes = lab.reroute(&before, &after, &[])?;
        let converged = lab.converge(since, CONVERGENCE_TIMEOUT, &[])?;
        return Ok(NodeChange::Stopped { routes, converged });
    }
    if let Some(process) = lab.process(&node.name) {
        if procs::switch_running(&lab.state, &lab.dir, process) {
            return Ok(NodeChange::AlreadyRunning { pid: process.pid });
        }
    }
    lab.state.stopped.retain(|n| *n != node.name);
    lab.state.processes.retain(|p| p.node != node.name);
    let after = lab.failures();
    // Blackholed links come on only once the new switch drops what they bring (below).
    let blackholed = |link: ofan_topology::LinkId| lab.state.blackholed_links.contains(&link.0);
    for port in &node.ports {
        if after.is_alive(port.link) && !blackholed(port.link) {
            lab.set_link(port.link, true)?;
        }
    }
    let mut force: Vec<NodeId> = vec![node.id];
    force.extend(node.ports.iter().map(|p| p.peer));
    let routes = lab.reroute(&before, &after, &force)?;
    let process = procs::start_switch(&lab.state, &lab.dir, &node.name)?;
    let pid = process.pid;
    lab.state.processes.push(process);
    lab.dir.save(&lab.state)?;
    let missing = procs::wait_for_sockets(
        &[(node.name.clone(), lab.dir.socket(&node.name))],
        Duration::from_secs(20),
    );
    if !missing.is_empty() {
        bail!(
            "{switch} (pid {pid}) did not come up; see {}",
            lab.dir.log(&node.name).display()
        );
    }
    lab.reapply_blackholes(&node.name)?;
    lab.reapply_link_rates(&node.name)?;
    for port in &node.ports {
        if after.is_alive(port.link) && lab.state.blackholed_links.contains(&port.link.0) {
            lab.set_link(port.link, true)?;
        }
    }
    if lab.state.params.routing == Routing::Bgp.name() {
        // After the switch, whose BMP station bgpd reports to (see `up`).
        lab.stop_daemons(&node.name);
        super::up::start_routing(
            &lab.topology,
            &mut lab.state,
            &lab.dir,
            std::slice::from_ref(&node),
        )?;
        lab.dir.save(&lab.state)?;
    }
    let converged = lab.converge(since, CONVERGENCE_TIMEOUT, &[])?;
    Ok(NodeChange::Started {
        pid,
        routes,
        converged,
    })
}

/// Kills switch `switch`'s process as a crash would (SIGKILL: its queues, its counters and its
/// AF_XDP sockets go with it; its routing daemons, links and state record stay), waits until it
/// is gone and returns its pid. `node S start` starts it again; `down` removes the lab as usual.
///
/// # Errors
/// No such lab or switch, a host, a switch that is stopped or not running.
pub fn kill_switch(name: &str, switch: &str) -> anyhow::Result<u32> {
    let lab = load(name)?;
    let node = find_node(&lab.topology, switch)?;
    if !node.role.is_switch() {
        bail!("{switch} is a host; node kill applies to switches");
    }
    if lab.state.stopped.contains(&node.name) {
        bail!("{switch} is stopped");
    }
    let process = lab
        .process(&node.name)
        .filter(|process| procs::switch_running(&lab.state, &lab.dir, process))
        .with_context(|| format!("{switch} is not running (node {switch} start)"))?
        .clone();
    if lab.state.params.switches == super::spec::Switches::Group {
        // The group forwards for the others: only the member ends, as a killed process would
        // (its sockets close, its program stays attached and drops what arrives).
        super::group::kill_member(&lab.dir, &node.name)?;
    } else {
        procs::crash(std::slice::from_ref(&process));
    }
    Ok(process.pid)
}

/// Switches every switch of lab `name` to `lb` — a load-balancing algorithm, or on a
/// dragonfly a routing scheme (a rolling restart: one switch at a time, so most of the fabric
/// keeps forwarding); switches that ran an algorithm of their own ([`super::lb_map`]) run `lb`
/// too. Returns the number restarted.
///
/// # Errors
/// No such lab; a name that is not an algorithm (a scheme on a dragonfly) the lab's switches
/// run; a switch that does not come back.
pub fn set_lb(name: &str, lb: &str) -> anyhow::Result<usize> {
    set_lbs(name, lb, &std::collections::BTreeMap::new())
}

/// [`set_lb`], then the switches of `map` (switch → algorithm, as a lab's state records them)
/// on their own algorithms: how an experiment puts a lab back as it found it.
///
/// # Errors
/// As [`set_lb`].
pub fn set_lbs(
    name: &str,
    lb: &str,
    map: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<usize> {
    let mut lab = load(name)?;
    lab.state.params.lb = lb_name(&lab, lb)?;
    lab.state.params.lb_map.clone_from(map);
    restart_all(&mut lab)
}

/// Reconfigures every switch of lab `name` at once (one restart, as [`set_lb`]): its
/// algorithm to `lb` (the lab's own algorithms per switch forgotten), and how `arf-*`
/// switches combine a path's levels to `combine`, each when given. Returns the number
/// restarted.
///
/// # Errors
/// As [`set_lb`]; neither given.
pub fn set_switches(
    name: &str,
    lb: Option<&str>,
    combine: Option<ofan_dataplane::arf::Combine>,
) -> anyhow::Result<usize> {
    if lb.is_none() && combine.is_none() {
        bail!("nothing to set: give --lb or --arf-combine");
    }
    let mut lab = load(name)?;
    if let Some(lb) = lb {
        lab.state.params.lb = lb_name(&lab, lb)?;
        lab.state.params.lb_map.clear();
    }
    if let Some(combine) = combine {
        lab.state.params.arf_combine = combine;
    }
    restart_all(&mut lab)
}

/// `lb` as lab `lab`'s switches name it: an algorithm, or on a dragonfly a routing scheme.
fn lb_name(lab: &super::Loaded, lb: &str) -> anyhow::Result<String> {
    Ok(if lab.state.params.dragonfly {
        let scheme: DragonflyScheme = lb.parse().map_err(|e| anyhow::anyhow!("--lb: {e}"))?;
        let mut spec = super::spec::LabSpec::new(&lab.state.name);
        spec.dragonfly = Some(scheme);
        spec.validate()?;
        scheme.name().to_owned()
    } else {
        let algorithm: Algorithm = lb.parse().map_err(|e| anyhow::anyhow!("--lb: {e}"))?;
        algorithm.name().to_owned()
    })
}

/// Saves lab `lab`'s state and restarts every switch with it.
fn restart_all(lab: &mut super::Loaded) -> anyhow::Result<usize> {
    lab.dir.save(&lab.state)?;
    let switches: Vec<String> = lab
        .topology
        .switches()
        .iter()
        .map(|s| s.name.clone())
        .collect();
    restart_switches(lab, &switches)
}

/// Runs `lb` on switch `switch` of lab `name` alone (`None`: the lab's algorithm again) — an
/// upgrade of one switch of the fabric ([`super::lb_map`]). Restarts it (in a switch group,
/// the group). Returns the lab's algorithms as reports name them.
///
/// # Errors
/// No such lab or balancing switch; an algorithm that cannot run on some switches only; a
/// switch that does not come back.
pub fn set_switch_lb(name: &str, switch: &str, lb: Option<&str>) -> anyhow::Result<String> {
    let mut lab = load(name)?;
    if lab.state.params.dragonfly {
        bail!("a dragonfly lab's routers run one routing scheme: ofan-lab set --lb SCHEME");
    }
    let params = &mut lab.state.params;
    match lb {
        Some(lb) => {
            let scheme = lb.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            let algorithm = super::lb_map::mixable(switch, scheme)?;
            let lab_algorithm: Algorithm = params.lb.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
            if lab_algorithm.uses_path_quality() {
                bail!(
                    "the lab runs {}, of the adaptive-routing framework: every switch or none",
                    params.lb
                );
            }
            let map = super::lb_map::LbMap::from([(switch.to_owned(), algorithm)]);
            super::lb_map::check(&map, &lab.topology)?;
            if algorithm.name() == params.lb {
                params.lb_map.remove(switch);
            } else {
                params
                    .lb_map
                    .insert(switch.to_owned(), algorithm.name().to_owned());
            }
        }
        None => {
            params.lb_map.remove(switch);
        }
    }
    let label = super::lb_map::label(&params.lb, &params.lb_map);
    lab.dir.save(&lab.state)?;
    restart_switches(&mut lab, &[switch.to_owned()])?;
    Ok(label)
}

/// Restarts `switches` with the lab's current parameters, one at a time (a rolling restart:
/// most of the fabric keeps forwarding), or the whole group at once. Returns the number
/// restarted.
fn restart_switches(lab: &mut super::Loaded, switches: &[String]) -> anyhow::Result<usize> {
    if lab.state.params.switches == super::spec::Switches::Group {
        return restart_group(lab);
    }
    let mut restarted = 0;
    for switch in switches {
        if lab.state.stopped.contains(switch) {
            continue;
        }
        let links = find_node(&lab.topology, switch)?
            .ports
            .iter()
            .map(|port| port.link)
            .collect();
        let dark = go_dark(lab, links)?;
        lab.stop_process(switch);
        let process = procs::start_switch(&lab.state, &lab.dir, switch)?;
        lab.state.processes.push(process);
        lab.dir.save(&lab.state)?;
        let log = lab.dir.log(switch);
        switches_back(
            lab,
            std::slice::from_ref(switch),
            Duration::from_secs(20),
            &log,
        )?;
        for link in &dark {
            lab.set_link(*link, true)?;
        }
        restarted += 1;
    }
    // The new switches' BMP stations saw their daemons' sessions already up.
    lab.complete_path_tables(CONVERGENCE_TIMEOUT)?;
    Ok(restarted)
}

/// Turns off the carrier of the blackholed links among `links` that are up, and returns them:
/// a blackholed link must not pass frames while no program drops them, so it stays dark until
/// the restarted switches have their drop flags again ([`switches_back`]).
fn go_dark(
    lab: &mut super::Loaded,
    links: Vec<ofan_topology::LinkId>,
) -> anyhow::Result<Vec<ofan_topology::LinkId>> {
    let dark: Vec<_> = links
        .into_iter()
        .filter(|link| lab.state.blackholed_links.contains(&link.0))
        .filter(|link| lab.failures().is_alive(*link))
        .collect();
    for link in &dark {
        lab.set_link(*link, false)?;
    }
    Ok(dark)
}

/// Waits up to `timeout` for the admin sockets of the restarted `switches`, then gives them
/// back their blackholes and slowed links. `log` is where to look when one does not come back.
fn switches_back(
    lab: &mut super::Loaded,
    switches: &[String],
    timeout: Duration,
    log: &std::path::Path,
) -> anyhow::Result<()> {
    let sockets: Vec<_> = switches
        .iter()
        .map(|switch| (switch.clone(), lab.dir.socket(switch)))
        .collect();
    let missing = procs::wait_for_sockets(&sockets, timeout);
    match missing.as_slice() {
        [] => {}
        [only] => bail!("{only} did not come back; see {}", log.display()),
        [first, ..] => bail!(
            "{} switches did not come back ({first}…); see {}",
            missing.len(),
            log.display()
        ),
    }
    for switch in switches {
        lab.reapply_blackholes(switch)?;
        lab.reapply_link_rates(switch)?;
    }
    Ok(())
}

/// `set` in a group: the group restarts with the new parameters, every running switch at once
/// (one outage of about a second for the whole fabric, instead of one switch at a time).
fn restart_group(lab: &mut super::Loaded) -> anyhow::Result<usize> {
    let members: Vec<String> = lab
        .topology
        .switches()
        .iter()
        .map(|s| s.name.clone())
        .filter(|name| !lab.state.stopped.contains(name))
        .collect();
    let links = lab.topology.links().iter().map(|link| link.id).collect();
    let dark = go_dark(lab, links)?;
    let recorded: Vec<_> = lab
        .state
        .processes
        .iter()
        .filter(|p| p.node == super::group::GROUP)
        .cloned()
        .collect();
    procs::stop(&recorded, Duration::from_secs(5));
    lab.state.processes.clear();
    let group = procs::start_group(&lab.state, &lab.dir, &members)?;
    for member in &members {
        lab.state.processes.push(super::state::Process {
            node: member.clone(),
            ..group.clone()
        });
    }
    lab.state.processes.push(group);
    lab.dir.save(&lab.state)?;
    let log = lab.dir.log(super::group::GROUP);
    switches_back(lab, &members, Duration::from_secs(30), &log)?;
    for link in &dark {
        lab.set_link(*link, true)?;
    }
    lab.complete_path_tables(CONVERGENCE_TIMEOUT)?;
    Ok(members.len())
}

/// Captures `target` (NODE:PORT) to a pcap file with tcpdump until Ctrl-C, `count` packets or
/// `duration` seconds; returns the file and tcpdump's exit status.
///
/// # Errors
/// No such lab, node or port; tcpdump cannot be run.
pub fn capture(
    name: &str,
    target: &str,
    out: Option<PathBuf>,
    count: Option<u64>,
    duration: Option<f64>,
    observer: &mut dyn Observer,
) -> anyhow::Result<(PathBuf, ExitStatus)> {
    let lab = load(name)?;
    let (node_name, ifname) = target
        .split_once(':')
        .with_context(|| format!("`{target}`: expected NODE:PORT, e.g. h-p0-e0-h0:p0"))?;
    let node = find_node(&lab.topology, node_name)?;
    if !node.ports.iter().any(|port| port.ifname == ifname) {
        bail!(
            "{node_name} has no port {ifname} (ports: {})",
            node.ports
                .iter()
                .map(|p| p.ifname.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let out =
        out.unwrap_or_else(|| PathBuf::from(format!("ofan-{name}-{node_name}-{ifname}.pcap")));
    let mut command = std::process::Command::new("ip");
    command
        .args(["netns", "exec", &plan::namespace(name, node_name)])
        .args(["tcpdump", "-n", "-U", "-i", ifname, "-w"])
        .arg(&out);
    if let Some(count) = count {
        command.args(["-c", &count.to_string()]);
    }
    let port = node.ports.iter().find(|p| p.ifname == ifname);
    let spliced = port.is_some_and(|port| {
        lab.state.params.splice && node.role.is_switch() && lab.topology.role(port.peer).is_switch()
    });
    let host_link = lab.state.params.host_links == super::spec::HostLinks::Shared
        && port.is_some_and(|port| {
            node.role == Role::Host || lab.topology.role(port.peer) == Role::Host
        });
    if spliced {
        observer.note(
            "note: this link joins two switches of the lab's group, which carry data frames \
             between them in the process: neither end's veth sees them, only what their kernels \
             send or receive (ARP, BGP, ICMP, TTL expiry). To capture the data, build the lab \
             with `up --splice false`",
        );
    } else if host_link {
        observer.note(
            "note: this link joins a host to its edge switch, and the lab's traffic agents \
             exchange their frames with the switch through shared memory (`up --host-links \
             shared`): the veth sees only what the host's kernel sends or receives (ARP, ping, \
             TCP, traceroute). To capture the agents' traffic, build the lab with \
             `--host-links veth`",
        );
    } else if node.role.is_switch() {
        if let Some(port) = port {
            observer.note(&format!(
                "note: frames the switch forwards through AF_XDP bypass the kernel; capture at the \
                 peer's port to see them ({}:{})",
                lab.topology.node(port.peer).name,
                lab.topology.port(port.peer, port.peer_port).ifname
            ));
        }
    }
    let mut child = command.spawn().context("cannot run tcpdump")?;
    if let Some(seconds) = duration {
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        while Instant::now() < deadline {
            if child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if child.try_wait()?.is_none() {
            // Our own child (ip netns exec becomes tcpdump by exec): stop it like Ctrl-C does.
            let _ = sys::signal(child.id(), sys::SIGINT);
        }
    }
    let status = child.wait()?;
    Ok((out, status))
}

/// How long `routing-restart` keeps watching the switch's FIB after its sessions are back.
pub const RESTART_SETTLE: Duration = Duration::from_secs(3);

/// What `node S routing-restart` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingRestart {
    /// The daemons killed and started again: name, old pid, new pid.
    pub daemons: Vec<(&'static str, u32, u32)>,
    /// From the kill until every BGP session of the switch was established again.
    pub sessions: Duration,
    /// The switches whose kernel FIB was not the plan's — a route or a next hop missing — at
    /// some sample (all running switches, every 10 ms, from the kill until [`RESTART_SETTLE`]
    /// after the sessions were back), each with the first and the last moment it differed,
    /// from the kill. Empty: graceful restart kept every FIB, the switch's own and its
    /// neighbours', whole.
    pub changed: Vec<(String, Duration, Duration)>,
}

/// Kills the routing daemons of switch `switch` as a crash would (all of [`bgp::daemons`]:
/// SIGKILL, no cleanup) and starts them again; graceful restart keeps the kernel FIB, hence
/// forwarding, and the neighbours' routes through the switch while they are gone. Waits until
/// every BGP session of the switch is back and every FIB of the fabric is the plan's.
///
/// FRR: zebra comes back with kernel-level graceful restart (`-K`, see
/// [`procs::DaemonStart::AfterCrash`]) and bgpd in `update-delay` read-only mode; bfdd, with
/// `--bfd`, comes back too (kept alone, it loses bgpd's sessions with the crash and leaves
/// them stuck in Init). Under `--bfd` the neighbours see BFD go down 0.3 s after the crash and
/// flush the switch's routes: BFD and graceful restart do not combine in FRR 8.4 or BIRD 2.0
/// (BIRD's `bfd graceful` would trade the blackhole detection away).
///
/// # Errors
/// No such lab or switch, not a BGP lab, a stopped switch, a daemon that does not start, sessions
/// not back within [`CONVERGENCE_TIMEOUT`].
pub fn routing_restart(name: &str, switch: &str) -> anyhow::Result<RoutingRestart> {
    let mut lab = load(name)?;
    let node: Node = find_node(&lab.topology, switch)?.clone();
    if !node.role.is_switch() {
        bail!("{switch} is a host; routing-restart applies to switches");
    }
    if lab.state.params.routing != Routing::Bgp.name() {
        bail!(
            "lab `{name}` has --routing {}: routing-restart restarts BGP daemons (up --routing bgp)",
            lab.state.params.routing
        );
    }
    if lab.state.stopped.contains(&node.name) {
        bail!("{switch} is stopped (node {switch} start first)");
    }
    let kind = lab
        .state
        .params
        .bgp_daemon
        .as_deref()
        .and_then(BgpDaemon::from_name)
        .unwrap_or(BgpDaemon::Frr);
    let namespace = plan::namespace(name, &node.name);
    let routing_dir = lab.dir.routing_dir(&node.name);
    let failures = lab.routing_failures();
    // Sessions that can come back: to running neighbours over links that carry frames.
    let expected = node
        .ports
        .iter()
        .filter(|port| lab.topology.node(port.peer).role.is_switch())
        .filter(|port| failures.is_alive(port.link))
        .count();
    let running: Vec<Node> = lab
        .topology
        .switches()
        .iter()
        .filter(|s| !lab.state.stopped.contains(&s.name))
        .cloned()
        .collect();
    let mut spaces = running
        .iter()
        .map(|s| lab.open(s.id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // (first, last) moment each switch's FIB differed from the plan.
    let mut differed: Vec<Option<(Duration, Duration)>> = vec![None; running.len()];
    let mut sample = |since: Instant, differed: &mut [Option<(Duration, Duration)>]| {
        for ((switch, space), seen) in running.iter().zip(&mut spaces).zip(differed.iter_mut()) {
            if !up::fib_is_plan(&lab.topology, &failures, switch, space)? {
                let now = since.elapsed();
                *seen = Some(seen.map_or((now, now), |(first, _)| (first, now)));
            }
        }
        anyhow::Ok(())
    };
    sample(Instant::now(), &mut differed)?;
    if let Some(position) = differed.iter().position(Option::is_some) {
        bail!(
            "{}'s FIB is not the plan's before the restart (a failure still converging?)",
            running[position].name
        );
    }

    let since = Instant::now();
    let restarted = bgp::daemons(kind, lab.state.params.bfd);
    let old: Vec<(bgp::Daemon, Vec<Process>)> = restarted
        .iter()
        .map(|&daemon| {
            let processes = lab
                .state
                .daemons
                .iter()
                .filter(|p| p.node == node.name && procs::runs(p, &daemon.binary()))
                .cloned()
                .collect();
            (daemon, processes)
        })
        .collect();
    let killed: Vec<Process> = old.iter().flat_map(|(_, p)| p.iter().cloned()).collect();
    procs::crash(&killed);
    lab.state.daemons.retain(|p| !killed.contains(p));
    lab.dir.save(&lab.state)?;
    up::start_daemons(
        &lab.topology,
        &mut lab.state,
        &lab.dir,
        &node,
        restarted,
        procs::DaemonStart::AfterCrash,
    )?;
    let started = &lab.state.daemons[lab.state.daemons.len() - restarted.len()..];
    let daemons: Vec<(&'static str, u32, u32)> = old
        .iter()
        .zip(started)
        .map(|((daemon, old), new)| (daemon.name(), old.first().map_or(0, |p| p.pid), new.pid))
        .collect();

    // Until the sessions are back, every FIB sampled every 10 ms and the daemon asked every 100.
    let deadline = since + CONVERGENCE_TIMEOUT;
    let mut asked = Instant::now();
    let sessions = loop {
        sample(since, &mut differed)?;
        if asked.elapsed() >= Duration::from_millis(100) {
            asked = Instant::now();
            let up = Sessions::query(kind, &namespace, &routing_dir)
                .map(|s| s.established)
                .unwrap_or(0);
            if up >= expected {
                break since.elapsed();
            }
        }
        if Instant::now() > deadline {
            bail!(
                "{switch}'s BGP sessions are not all back after {CONVERGENCE_TIMEOUT:?}; see {}",
                lab.dir
                    .log(&format!("{}-{}", node.name, daemons[0].0))
                    .display()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The new daemons rewrite the FIBs after their sessions are up: watch that too.
    let settled = Instant::now() + RESTART_SETTLE;
    while Instant::now() < settled {
        sample(since, &mut differed)?;
        std::thread::sleep(Duration::from_millis(10));
    }
    let changed: Vec<(String, Duration, Duration)> = running
        .iter()
        .zip(&differed)
        .filter_map(|(switch, seen)| seen.map(|(first, last)| (switch.name.clone(), first, last)))
        .collect();
    // Returns once every FIB (and with BMP, path table) is the plan's again.
    lab.converge(since, CONVERGENCE_TIMEOUT, &[])?;
    Ok(RoutingRestart {
        daemons,
        sessions,
        changed,
    })
}
