//! A running lab loaded from its state directory, and what changes it: reprogramming routes
//! after a failure, setting links up and down.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ofan_topology::{FailedLinks, Node, NodeId, Topology};

use super::net::Namespace;
use super::state::{self, LabState, StateDir};
use super::up::{self, install_routes};
use super::{check_name, plan, procs, Routing};

/// How long BGP took to reconverge after a change, counted from the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconvergence {
    /// Until every running switch's kernel FIB was the plan's (the last one's time).
    pub fibs: Duration,
    /// The switches asked about (those at the ends of a changed link): when each one's FIB
    /// became the plan's — the failure as the switches next to it saw it.
    pub ends: Vec<(String, Duration)>,
}

/// A running lab as recorded in its state directory.
#[derive(Debug)]
pub struct Loaded {
    /// Its state directory.
    pub dir: StateDir,
    /// Its state.
    pub state: LabState,
    /// Its topology.
    pub topology: Topology,
}

/// Loads lab `name` (its state and topology).
///
/// # Errors
/// No such lab, an unreadable state.
pub fn load(name: &str) -> anyhow::Result<Loaded> {
    check_name(name)?;
    let dir = StateDir::of(name);
    if !dir.exists() {
        let labs = StateDir::all_labs();
        bail!(
            "no lab `{name}` (running labs: {}); start one with ofan-lab up --name {name}",
            if labs.is_empty() {
                "none".to_owned()
            } else {
                labs.join(", ")
            }
        );
    }
    let state = dir.load()?;
    let text = std::fs::read_to_string(dir.topology_file())
        .with_context(|| format!("cannot read {}", dir.topology_file().display()))?;
    let topology = Topology::from_json(&text)?;
    Ok(Loaded {
        dir,
        state,
        topology,
    })
}

/// Whether lab `name` has a state directory.
#[must_use]
pub fn exists(name: &str) -> bool {
    check_name(name).is_ok() && StateDir::of(name).exists()
}

/// The node called `name`.
///
/// # Errors
/// No such node (the message shows what names look like).
pub fn find_node<'a>(topology: &'a Topology, name: &str) -> anyhow::Result<&'a Node> {
    topology
        .nodes()
        .iter()
        .find(|node| node.name == name)
        .with_context(|| {
            format!(
                "no node `{name}` (nodes look like {}, {}, {})",
                topology.hosts()[0].name,
                topology.edges()[0].name,
                topology.cores()[0].name
            )
        })
}

impl Loaded {
    /// The links that are down: failed ones and those of stopped switches.
    pub fn failures(&self) -> FailedLinks {
        plan::effective_failures(
            &self.topology,
            &self.state.failed_links,
            &self.state.stopped,
        )
    }

    /// Stops the processes recorded for `node` (verified by start time) and forgets them; the
    /// caller saves the state.
    pub(crate) fn stop_process(&mut self, node: &str) {
        if self.state.params.switches == super::spec::Switches::Group && node != super::group::GROUP
        {
            // The group lives on; only its member stops.
            if let Err(error) = super::group::stop_member(&self.dir, node) {
                eprintln!("warning: cannot stop {node}: {error:#}");
            }
            self.state.processes.retain(|p| p.node != node);
            return;
        }
        stop_recorded(&mut self.state.processes, node);
    }

    /// The process recorded for `node`.
    pub fn process(&self, node: &str) -> Option<&state::Process> {
        self.state.processes.iter().find(|p| p.node == node)
    }

    /// Opens the namespaces of `nodes` (for reprogramming).
    pub(crate) fn open(&self, node: NodeId) -> anyhow::Result<Namespace> {
        let mut space = Namespace::open(&plan::namespace(
            &self.state.name,
            &self.topology.node(node).name,
        ))?;
        space.refresh_links()?;
        Ok(space)
    }

    /// The forwarding IPv4 routes of `node`'s kernel FIB (main table) with their next-hop
    /// counts.
    ///
    /// # Errors
    /// The namespace cannot be opened or its routes listed.
    pub fn kernel_routes(&self, node: NodeId) -> anyhow::Result<Vec<super::net::RouteWidth>> {
        Ok(self.open(node)?.routes()?)
    }

    /// The links BGP must route around: those that are down ([`Loaded::failures`]) and the
    /// blackholed ones, whose carrier is up but which carry nothing.
    pub fn routing_failures(&self) -> FailedLinks {
        let mut failures = self.failures();
        failures.extend(
            self.state
                .blackholed_links
                .iter()
                .map(|&id| ofan_topology::LinkId(id)),
        );
        failures
    }

    /// Under BGP, waits (up to `timeout`) until every running switch's kernel FIB is the plan
    /// under [`Loaded::routing_failures`] (and, with BMP, its path table complete), and says
    /// how long that took counted from `since` (the change), in total and for each switch in
    /// `watch`; `None` for other routing. The FIBs are read every 10 ms.
    ///
    /// # Errors
    /// A namespace that cannot be read; not converged by `timeout`.
    pub(crate) fn converge(
        &self,
        since: Instant,
        timeout: Duration,
        watch: &[NodeId],
    ) -> anyhow::Result<Option<Reconvergence>> {
        if self.state.params.routing != Routing::Bgp.name() {
            return Ok(None);
        }
        let running = self.running_switches();
        let mut spaces = running
            .iter()
            .map(|switch| self.open(switch.id))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let failures = self.routing_failures();
        // When each switch's FIB last became the plan's (`None`: it differs now).
        let mut since_plan: Vec<Option<Duration>> = vec![None; running.len()];
        let deadline = Instant::now() + timeout;
        loop {
            for ((switch, space), matched) in running.iter().zip(&mut spaces).zip(&mut since_plan) {
                if up::fib_is_plan(&self.topology, &failures, switch, space)? {
                    matched.get_or_insert_with(|| since.elapsed());
                } else {
                    *matched = None;
                }
            }
            if since_plan.iter().all(Option::is_some) {
                break;
            }
            if Instant::now() > deadline {
                let late = running[since_plan.iter().position(Option::is_none).unwrap_or(0)];
                bail!(
                    "BGP has not converged after {timeout:?}: the routes of {} differ from the plan",
                    late.name
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let fibs = since_plan
            .iter()
            .flatten()
            .max()
            .copied()
            .unwrap_or_default();
        let ends = watch
            .iter()
            .filter_map(|id| {
                let position = running.iter().position(|switch| switch.id == *id)?;
                Some((running[position].name.clone(), since_plan[position]?))
            })
            .collect();
        self.complete_path_tables(timeout)?;
        Ok(Some(Reconvergence { fibs, ends }))
    }

    /// Under BGP, waits (until `deadline`) until every running switch's FIB is the plan
    /// ([`Loaded::converge`]) **and** its routes have been still for `still`: a fabric at rest.
    /// The plan alone can hold for a moment in the middle of a recovery — measured beside two
    /// busy loops, c-0's neighbours' routes came back after its starved bfdd resumed and
    /// changed 2–3 times more within 1.5 s (c-0's daemons acting late on the sessions'
    /// failure); a run started at the first moment counted those changes. Returns at once on a
    /// fabric whose routes last changed longer than `still` ago. A switch whose stats cannot be
    /// read is not waited for (the run reports it).
    ///
    /// # Errors
    /// As [`Loaded::converge`]; routes still changing at `deadline`.
    pub fn settle(&self, since: Instant, still: Duration, deadline: Instant) -> anyhow::Result<()> {
        if self.state.params.routing != Routing::Bgp.name() {
            return Ok(());
        }
        loop {
            self.converge(
                since,
                deadline.saturating_duration_since(Instant::now()),
                &[],
            )?;
            // The switch whose routes need the longest to have been still for `still`.
            let restless = self
                .running_switches()
                .into_iter()
                .filter_map(|switch| {
                    let still_for = up::switch_client(&self.dir, &switch.name)
                        .stats()
                        .ok()?
                        .fib
                        .routes_still_ms?;
                    let left = still.checked_sub(Duration::from_millis(still_for))?;
                    (!left.is_zero()).then_some((left, &switch.name))
                })
                .max();
            let Some((left, switch)) = restless else {
                return Ok(());
            };
            if Instant::now() + left > deadline {
                bail!("the routes of {switch} were still changing when the wait for BGP ended");
            }
            std::thread::sleep(left);
        }
    }

    /// The switches not stopped by `node stop`.
    fn running_switches(&self) -> Vec<&Node> {
        self.topology
            .switches()
            .iter()
            .filter(|switch| !self.state.stopped.contains(&switch.name))
            .collect()
    }

    /// Under FRR, waits (up to `timeout`) until every running switch's BMP path table is
    /// complete, refreshing the routes of those that are not (a switch restarted while its
    /// daemons ran sees sessions that were already up: see [`up::complete_path_tables`]).
    ///
    /// # Errors
    /// vtysh cannot run; a table still incomplete at `timeout`.
    pub(crate) fn complete_path_tables(&self, timeout: Duration) -> anyhow::Result<()> {
        let params = &self.state.params;
        if params.routing != Routing::Bgp.name()
            || params.bgp_daemon.as_deref() == Some(super::bgp::BgpDaemon::Bird.name())
        {
            return Ok(());
        }
        let running = self.running_switches();
        up::complete_path_tables(&self.state.name, &self.dir, &running, timeout)?
            .map_err(|warning| anyhow::anyhow!(warning))?;
        Ok(())
    }

    /// Stops the routing daemons of `node` and forgets them; the caller saves the state.
    pub(crate) fn stop_daemons(&mut self, node: &str) {
        stop_recorded(&mut self.state.daemons, node);
    }

    /// Reprograms every switch whose routes differ between `before` and `after` (and the
    /// switches in `force` completely). Returns the number of route changes.
    pub(crate) fn reroute(
        &self,
        before: &FailedLinks,
        after: &FailedLinks,
        force: &[NodeId],
    ) -> anyhow::Result<usize> {
        if self.state.params.routing != Routing::Static.name() {
            return Ok(0);
        }
        let mut changed = 0;
        for switch in self.topology.switches() {
            let old = plan::switch_routes(&self.topology, before, switch.id);
            let new = plan::switch_routes(&self.topology, after, switch.id);
            let forced = force.contains(&switch.id);
            if old == new && !forced {
                continue;
            }
            if self.state.stopped.contains(&switch.name) {
                continue;
            }
            let mut space = self.open(switch.id)?;
            changed += install_routes(&self.topology, &mut space, switch, &new, &old, forced)?;
        }
        Ok(changed)
    }

    /// Sets both ends of link `link` up or down. A host's end coming up gets its default route
    /// and its gateway's managed neighbour entry back once both ends are up: the kernel
    /// removed them with the carrier (an edge switch stopped and started again otherwise left
    /// its hosts unreachable).
    pub(crate) fn set_link(&self, link: ofan_topology::LinkId, up: bool) -> anyhow::Result<()> {
        let link = self.topology.link(link);
        for (node, port) in [link.a, link.b] {
            let mut space = self.open(node)?;
            space.set_link(&self.topology.port(node, port).ifname, up)?;
        }
        for (node, port) in [link.a, link.b] {
            if up && self.topology.node(node).role == ofan_topology::Role::Host {
                let mut space = self.open(node)?;
                let ifname = &self.topology.port(node, port).ifname;
                for route in plan::host_routes(&self.topology, node) {
                    if &route.ifname == ifname {
                        space.set_route(route.prefix, route.len, &[(ifname, route.gateway)])?;
                    }
                }
                let gateway = plan::host_gateway_in(&self.topology, node, port.0 as u8);
                space.keep_neighbor(ifname, gateway)?;
            }
        }
        Ok(())
    }
}

/// Stops the processes of `node` among `recorded` and removes them from it.
fn stop_recorded(recorded: &mut Vec<state::Process>, node: &str) {
    let stopping: Vec<_> = recorded
        .iter()
        .filter(|p| p.node == node)
        .cloned()
        .collect();
    procs::stop(&stopping, Duration::from_secs(3));
    recorded.retain(|p| p.node != node);
}
