//! `up`: a [`LabSpec`] turned into namespaces, veths, addresses, routes and running switches —
//! every object recorded in the state directory before it is created, everything removed again
//! when a step fails.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ofan_control::admin::Client;
use ofan_dataplane::afxdp::FastPathMode;
use ofan_topology::{FailedLinks, Node, NodeId, Role, Topology};

use super::net::{self, Namespace, NsKind, Rtnl};
use super::state::{LabState, Phase, StateDir};
use super::{bgp, down, neighbours, plan, procs, LabSpec, Observer, Routing};

fn namespaces_of(topology: &Topology, lab: &str) -> Vec<String> {
    topology
        .nodes()
        .iter()
        .map(|node| plan::namespace(lab, &node.name))
        .collect()
}

/// Builds the lab `spec` describes and returns its state; on failure everything created so far
/// is removed again. Steps and the summary go to `observer`.
///
/// # Errors
/// An invalid spec, a lab or namespaces of that name existing, any step failing.
pub fn up(spec: &LabSpec, observer: &mut dyn Observer) -> anyhow::Result<LabState> {
    spec.validate()?;
    let name = &spec.name;
    let topology = spec.topology.load()?;
    if topology.planes() > 1 {
        super::spec::check_multi_plane(spec.routing, spec.host_links)?;
    }
    super::lb_map::check(&spec.lb_map, &topology)?;
    let dir = StateDir::of(name);
    if dir.exists() {
        bail!("lab `{name}` exists (see ofan-lab status --name {name}); remove it first with ofan-lab down --name {name}");
    }
    let leftovers = net::namespaces_with_prefix(&plan::namespace_prefix(name));
    if !leftovers.is_empty() {
        bail!(
            "{} namespaces named ofan-{name}-* exist without a lab state (e.g. {}); remove them with ofan-lab down --name {name}",
            leftovers.len(),
            leftovers[0]
        );
    }
    let switch_bin = spec.switch_bin.clone().unwrap_or_else(procs::switch_binary);
    let params = spec.params(&topology, switch_bin);
    // What a crashed lab left changed (its records outlive it), put back before this lab
    // decides what to change: only while no lab runs, each setting on its own.
    if let Err(error) = super::machine::restore_if_no_lab() {
        observer.note(&format!("ofan-lab: warning: {error:#}"));
    }
    dir.create()?;
    std::fs::write(dir.topology_file(), topology.to_json_pretty())
        .with_context(|| format!("cannot write {}", dir.topology_file().display()))?;
    let mut state = LabState::new(name, params);
    dir.save(&state)?;
    let started = Instant::now();
    match build(&topology, &mut state, &dir, spec.routing, started, observer) {
        Ok(()) => Ok(state),
        Err(error) => {
            observer.note(&format!(
                "ofan-lab: up failed ({error:#}); removing what was created"
            ));
            let _ = down::down(name);
            Err(error)
        }
    }
}

fn build(
    topology: &Topology,
    state: &mut LabState,
    dir: &StateDir,
    routing: Routing,
    started: Instant,
    observer: &mut dyn Observer,
) -> anyhow::Result<()> {
    let lab = state.name.clone();
    let mtu = state.params.mtu;
    let step = |observer: &mut dyn Observer, what: &str| observer.step(started.elapsed(), what);

    // Room in the machine's neighbour table for the lab's entries (one at each end of each
    // link), before the first is made: raised with --tune-machine, else checked.
    let entries = neighbours::lab_entries(topology.links().len());
    if state.params.tune_machine {
        let room = neighbours::make_room(entries)?;
        if let Some(refused) = &room.refused {
            observer.note(&format!(
                "ofan-lab: warning: could not raise the machine's neighbour table for the lab's \
                 entries ({refused}); it fits under gc_thresh3 (see docs/lab.md, The machine's \
                 settings)"
            ));
        }
        if room.to != room.from {
            let (from, to) = (room.from, room.to);
            observer.note(&format!(
                "ofan-lab: the machine's neighbour table raised to hold the lab's entries \
                 (net.ipv4.neigh.default.gc_thresh1/2/3 {}/{}/{} -> {}/{}/{}, until the last lab goes down)",
                from.gc_thresh1, from.gc_thresh2, from.gc_thresh3, to.gc_thresh1, to.gc_thresh2, to.gc_thresh3
            ));
        }
    } else {
        neighbours::check_room(entries)?;
    }

    // Namespaces: recorded first, then created all at once.
    let names = namespaces_of(topology, &lab);
    state.namespaces = names.clone();
    dir.save(state)?;
    net::create_namespaces(&names)?;
    let mut spaces: Vec<Namespace> = names
        .iter()
        .map(|name| Namespace::open(name))
        .collect::<Result<_, _>>()?;
    for (node, space) in topology.nodes().iter().zip(&mut spaces) {
        space.configure(if node.role.is_switch() {
            NsKind::Switch
        } else {
            NsKind::Host
        })?;
    }
    step(observer, &format!("{} namespaces", names.len()));

    // Veths, created directly in their namespaces from here.
    state.veths = topology
        .links()
        .iter()
        .flat_map(|link| [link.a, link.b])
        .map(|(node, port)| {
            format!(
                "{}/{}",
                names[node.index()],
                topology.port(node, port).ifname
            )
        })
        .collect();
    dir.save(state)?;
    let mut root = Rtnl::open().context("netlink socket")?;
    for link in topology.links() {
        let (a, b) = (link.a, link.b);
        net::create_veth(
            &mut root,
            (&spaces[a.0.index()], &topology.port(a.0, a.1).ifname),
            (&spaces[b.0.index()], &topology.port(b.0, b.1).ifname),
            mtu,
        )?;
    }
    step(observer, &format!("{} veth pairs", topology.links().len()));

    // Addresses; hosts get a default route and TX checksum offload off.
    for (node, space) in topology.nodes().iter().zip(&mut spaces) {
        space.refresh_links()?;
        for port in &node.ports {
            space.set_link(&port.ifname, true)?;
            space.add_address(&port.ifname, port.address, port.prefix_len)?;
        }
        if node.role == Role::Host {
            let ifname = &node.ports[0].ifname;
            space.tx_checksum_off(ifname)?;
            if state.params.fast_path != FastPathMode::Off {
                // Frames an edge switch's XDP program redirects into the host's veth need NAPI
                // on the host's end: an XDP program there, or GRO.
                space.gro_on(ifname)?;
            }
            for port in &node.ports[1..] {
                space.tx_checksum_off(&port.ifname)?;
                if state.params.fast_path != FastPathMode::Off {
                    space.gro_on(&port.ifname)?;
                }
            }
            for route in plan::host_routes(topology, node.id) {
                space.set_route(route.prefix, route.len, &[(&route.ifname, route.gateway)])?;
            }
        }
    }
    // Every host's gateway a managed neighbour entry, once every link is up: a veth whose
    // peer comes up later loses its carrier a moment, and with it its neighbour entries. (The
    // switches make theirs managed too: their FIB mirror.)
    for (node, space) in topology.nodes().iter().zip(&mut spaces) {
        if node.role == Role::Host {
            for (plane, port) in node.ports.iter().enumerate() {
                let gateway = plan::host_gateway_in(topology, node.id, plane as u8);
                space.keep_neighbor(&port.ifname, gateway)?;
            }
        }
    }
    step(observer, "addresses, host routes");

    if routing == Routing::Static {
        let none = FailedLinks::new();
        for switch in topology.switches() {
            let routes = plan::switch_routes(topology, &none, switch.id);
            install_routes(
                topology,
                &mut spaces[switch.id.index()],
                switch,
                &routes,
                &BTreeMap::new(),
                true,
            )?;
        }
        step(observer, "switch routes");
    }

    // With --tune-machine: the kernel's network processing must not wait behind the lab's
    // real-time threads, nor stop for the rest of a second once real-time work filled the CPUs
    // for 95 % of it.
    if state.params.tune_machine && state.params.rt_priority > 0 {
        super::softirq::raise(super::softirq::KSOFTIRQD_RT_PRIORITY)?;
        match super::rt_throttle::lift()? {
            super::rt_throttle::Lifted::Lifted { from } => observer.note(&format!(
                "ofan-lab: the kernel's real-time throttling lifted (kernel.sched_rt_runtime_us \
                 {from} -> -1; its fair server still keeps 5 % of each CPU for ordinary tasks), \
                 until the last lab goes down"
            )),
            super::rt_throttle::Lifted::Refused { error } => observer.note(&format!(
                "ofan-lab: warning: could not lift the kernel's real-time throttling ({error}); \
                 a run that fills the CPUs for over 0.95 s stops for the rest of that second \
                 (see docs/lab.md, The machine's settings)"
            )),
            super::rt_throttle::Lifted::AlreadyOff | super::rt_throttle::Lifted::Kept => {}
        }
    }
    // Switches.
    if state.params.switches == super::spec::Switches::Group {
        let members: Vec<String> = topology.switches().iter().map(|s| s.name.clone()).collect();
        let group = procs::start_group(state, dir, &members)?;
        for member in &members {
            state.processes.push(super::state::Process {
                node: member.clone(),
                ..group.clone()
            });
        }
        state.processes.push(group);
        dir.save(state)?;
    } else {
        for switch in topology.switches() {
            let process = procs::start_switch(state, dir, &switch.name)?;
            state.processes.push(process);
            dir.save(state)?;
        }
    }
    let sockets: Vec<(String, PathBuf)> = topology
        .switches()
        .iter()
        .map(|switch| (switch.name.clone(), dir.socket(&switch.name)))
        .collect();
    let timeout = Duration::from_secs(30) + Duration::from_millis(250) * sockets.len() as u32;
    let missing = procs::wait_for_sockets(&sockets, timeout);
    if !missing.is_empty() {
        let log = std::fs::read_to_string(dir.log(&missing[0])).unwrap_or_default();
        bail!(
            "{} switches did not come up ({}…); log of {}:\n{}",
            missing.len(),
            missing[0],
            missing[0],
            tail(&log, 10)
        );
    }
    step(observer, &format!("{} switches running", sockets.len()));
    if routing == Routing::Bgp {
        // After the switches: bgpd finds each switch's BMP station listening, so the station
        // sees every session come up and every path from the start.
        start_routing(topology, state, dir, topology.switches())?;
        let mut daemon = state.params.bgp_daemon.clone().unwrap_or_default();
        if let Some(bfd) = state.params.bfd {
            daemon = format!("{daemon}, {bfd}");
        }
        let started = format!("{} routing daemons ({daemon})", state.daemons.len());
        step(observer, &started);
        let none = FailedLinks::new();
        let mut switches: Vec<(NodeId, Namespace)> = topology
            .switches()
            .iter()
            .map(|switch| Ok((switch.id, Namespace::open(&names[switch.id.index()])?)))
            .collect::<anyhow::Result<_>>()?;
        let converged = wait_for_routes(topology, &none, &mut switches, Duration::from_secs(60))?;
        match converged {
            Ok(()) => step(observer, "BGP converged: every kernel FIB is the plan's"),
            Err(warning) => observer.note(&warning),
        }
        if state.params.bgp_daemon.as_deref() != Some(bgp::BgpDaemon::Bird.name()) {
            let switches: Vec<&Node> = topology.switches().iter().collect();
            match complete_path_tables(&lab, dir, &switches, Duration::from_secs(20))? {
                Ok(refreshed) => step(
                    observer,
                    &format!(
                        "BMP path tables complete ({refreshed} switches needed a route refresh)"
                    ),
                ),
                Err(warning) => observer.note(&warning),
            }
        }
    }
    if routing != Routing::None {
        if let Some(warning) = wait_for_fibs(topology, dir, Duration::from_secs(20)) {
            observer.note(&warning);
        }
        step(observer, "FIBs complete");
    }
    state.phase = Phase::Up;
    state.up_seconds = Some(started.elapsed().as_secs_f64());
    dir.save(state)?;
    observer.note(&format!(
        "lab `{lab}` up in {:.1} s: {} hosts, {} switches, {} links ({}, lb {}, link rate {}, MTU {}, {}{})",
        started.elapsed().as_secs_f64(),
        topology.hosts().len(),
        topology.switches().len(),
        topology.links().len(),
        state.params.topo,
        super::lb_map::label(&state.params.lb, &state.params.lb_map),
        state.params.link_rate,
        mtu,
        match (state.params.switches, state.params.splice) {
            (super::spec::Switches::Group, true) => "one group, links spliced",
            (super::spec::Switches::Group, false) => "one group, links over veths",
            (super::spec::Switches::Process, _) => "a process per switch",
        },
        match state.params.host_links {
            super::spec::HostLinks::Shared => ", host links in shared memory",
            super::spec::HostLinks::Veth => "",
        }
    ));
    Ok(())
}

/// Waits until the kernel FIB of every switch holds exactly the plan's routes under `failures`
/// with the plan's number of next hops each (full ECMP width): what BGP converges to. `Ok(Err)`
/// names a switch still different at `timeout`. Only `switches` (with their open namespaces)
/// are checked.
///
/// # Errors
/// A namespace's routes cannot be read.
pub fn wait_for_routes(
    topology: &Topology,
    failures: &FailedLinks,
    switches: &mut [(NodeId, Namespace)],
    timeout: Duration,
) -> anyhow::Result<Result<(), String>> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut different = None;
        for (id, space) in switches.iter_mut() {
            let switch = topology.node(*id);
            if !fib_is_plan(topology, failures, switch, space)? {
                different = Some(switch.name.clone());
                break;
            }
        }
        match different {
            None => return Ok(Ok(())),
            Some(switch) if Instant::now() > deadline => {
                return Ok(Err(format!(
                    "warning: BGP has not converged after {timeout:?}: the routes of {switch} differ from the plan"
                )))
            }
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Whether the kernel FIB of `switch` (its open namespace `space`) holds exactly the plan's
/// routes to the edges' `/24`s under `failures`, each with the plan's number of next hops.
///
/// # Errors
/// The routes cannot be read.
pub fn fib_is_plan(
    topology: &Topology,
    failures: &FailedLinks,
    switch: &Node,
    space: &mut Namespace,
) -> anyhow::Result<bool> {
    let plan: BTreeMap<(Ipv4Addr, u8), usize> = plan::switch_routes(topology, failures, switch.id)
        .into_iter()
        .map(|(prefix, hops)| (prefix, hops.len()))
        .collect();
    let fib: BTreeMap<(Ipv4Addr, u8), usize> = space
        .routes()?
        .into_iter()
        .filter(|(prefix, _)| {
            topology
                .edges()
                .iter()
                .any(|edge| topology.edge_prefix(edge.id) == *prefix)
        })
        .collect();
    Ok(fib == plan)
}

/// Starts the routing daemons of every switch in `switches` (zebra, bfdd with `--bfd`, bgpd;
/// or bird), recording each process before the next.
pub(crate) fn start_routing(
    topology: &Topology,
    state: &mut LabState,
    dir: &StateDir,
    switches: &[Node],
) -> anyhow::Result<()> {
    let kind = state
        .params
        .bgp_daemon
        .as_deref()
        .and_then(bgp::BgpDaemon::from_name)
        .unwrap_or(bgp::BgpDaemon::Frr);
    for switch in switches {
        start_daemons(
            topology,
            state,
            dir,
            switch,
            bgp::daemons(kind, state.params.bfd),
            procs::DaemonStart::Fresh,
        )?;
    }
    Ok(())
}

/// Starts `daemons` of `switch` in order, recording each process before the next.
pub(crate) fn start_daemons(
    topology: &Topology,
    state: &mut LabState,
    dir: &StateDir,
    switch: &Node,
    daemons: &[bgp::Daemon],
    start: procs::DaemonStart,
) -> anyhow::Result<()> {
    let zserv = bgp::run_dir(&plan::namespace(&state.name, &switch.name)).join("zserv.api");
    for &daemon in daemons {
        if daemon == bgp::Daemon::Zebra {
            // A stopped zebra leaves its socket behind; bgpd must not take it for the new one.
            let _ = std::fs::remove_file(&zserv);
        }
        let process = procs::start_daemon(state, dir, topology, switch, daemon, start)?;
        state.daemons.push(process);
        dir.save(state)?;
        if daemon == bgp::Daemon::Zebra {
            // bgpd started before zebra listens cannot register its next hops and retries
            // only 10 s later (measured: a restarted switch converged in 10 s, not 2.4).
            let deadline = Instant::now() + Duration::from_secs(5);
            while !zserv.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    Ok(())
}

/// The last `lines` lines of `text` (a log's tail).
#[must_use]
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Installs `routes` into a switch namespace: replaces routes that differ from `old` (all of
/// them with `force`) and deletes routes `old` had and `routes` lacks.
pub(crate) fn install_routes(
    topology: &Topology,
    space: &mut Namespace,
    switch: &Node,
    routes: &plan::RouteTable,
    old: &plan::RouteTable,
    force: bool,
) -> anyhow::Result<usize> {
    let mut changed = 0;
    for ((dst, len), _) in old
        .iter()
        .filter(|(prefix, _)| !routes.contains_key(*prefix))
    {
        space.delete_route(*dst, *len)?;
        changed += 1;
    }
    for ((dst, len), hops) in routes {
        if !force && old.get(&(*dst, *len)) == Some(hops) {
            continue;
        }
        let hops: Vec<(&str, Ipv4Addr)> = hops
            .iter()
            .map(|hop| {
                (
                    topology.port(switch.id, hop.port).ifname.as_str(),
                    hop.gateway,
                )
            })
            .collect();
        space.set_route(*dst, *len, &hops)?;
        changed += 1;
    }
    Ok(changed)
}

/// Waits until every switch's FIB mirror holds its routes with every next hop resolved.
/// Returns a warning when some are still incomplete at `timeout`.
#[must_use]
pub fn wait_for_fibs(topology: &Topology, dir: &StateDir, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    let none = FailedLinks::new();
    let mut pending: Vec<&Node> = topology.switches().iter().collect();
    while !pending.is_empty() && Instant::now() < deadline {
        pending.retain(|switch| {
            let expected = plan::switch_routes(topology, &none, switch.id).len();
            match switch_client(dir, &switch.name).stats() {
                Ok(stats) => stats.fib.routes.0 < expected || !stats.fib.unresolved.is_empty(),
                Err(_) => true,
            }
        });
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    (!pending.is_empty()).then(|| {
        format!(
            "warning: {} switches have incomplete FIBs after {:?} (e.g. {})",
            pending.len(),
            timeout,
            pending[0].name
        )
    })
}

/// Under FRR, waits until every switch in `switches` reports a complete BMP path table (every
/// monitored peer's paths seen, see `ofan_control::bmp::rib`). A session that came up before its
/// switch's station connected (bgpd connects to BMP 100 ms after it starts, a session can be
/// faster) is completed by one route refresh. Returns how many switches needed one; `Err` names
/// a switch still incomplete at `timeout`.
///
/// # Errors
/// vtysh cannot run.
pub(crate) fn complete_path_tables(
    lab: &str,
    dir: &StateDir,
    switches: &[&Node],
    timeout: Duration,
) -> anyhow::Result<Result<usize, String>> {
    let deadline = Instant::now() + timeout;
    let complete = |switch: &Node| {
        switch_client(dir, &switch.name)
            .stats()
            .ok()
            .and_then(|stats| stats.bmp)
            .is_some_and(|bmp| bmp.complete() && !bmp.session.peers.is_empty())
    };
    let mut pending: Vec<&Node> = switches.iter().copied().filter(|s| !complete(s)).collect();
    let namespaces: Vec<String> = pending
        .iter()
        .map(|switch| plan::namespace(lab, &switch.name))
        .collect();
    bgp::refresh_routes(&namespaces)?;
    let refreshed = pending.len();
    while !pending.is_empty() {
        if Instant::now() > deadline {
            return Ok(Err(format!(
                "warning: the BMP path table of {} is incomplete after {timeout:?}",
                pending[0].name
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
        pending.retain(|switch| !complete(switch));
    }
    Ok(Ok(refreshed))
}

/// The admin client of switch `node` (3 s per reply: a lab switch answers at once or is stuck).
pub(crate) fn switch_client(dir: &StateDir, node: &str) -> Client {
    Client::new(dir.socket(node)).with_timeout(Duration::from_secs(3))
}
