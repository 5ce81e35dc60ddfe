//! `ofan-lab status`: the lab's switches, links, counters and fidelity as tables or JSON.

use std::fmt::Write as _;

use ofan_lab::status::{LabStatus, SwitchState, FAITHFUL_LATENESS, LATENESS_MIN_PACKETS};
use ofan_lab::up::tail;
use ofan_lab::{LinkState, Routing};

/// The JSON of `status --json`.
///
/// # Errors
/// Never in practice (serialization of plain values).
pub fn json(status: &LabStatus<'_>) -> serde_json::Result<String> {
    let lab = status.lab;
    let value = serde_json::json!({
        "name": lab.state.name,
        "phase": lab.state.phase,
        "params": lab.state.params,
        "up_seconds": lab.state.up_seconds,
        "faithful": status.faithful,
        "worst_lateness_p99_packet_times": status.worst_lateness,
        "switches": status.switches.iter().map(|(name, s)| {
            let mut switch = serde_json::json!({
                "name": name,
                "state": s.state.label(),
                "pid": lab.process(name).map(|p| p.pid),
                "lateness_p99_packet_times": s.lateness,
                "fib": s.stats.as_ref().map(|stats| &stats.fib),
            });
            if let Some(bgp) = &s.bgp {
                switch["bgp"] = serde_json::json!(bgp);
            }
            if let Some(convergence) = &s.convergence {
                switch["convergence"] = serde_json::json!({
                    "converged": convergence.done(),
                    "fib_is_plan": convergence.fib,
                    "paths_source": convergence.paths_source,
                    "bmp_peers_complete": convergence.bmp_peers.map(|(c, _)| c),
                    "bmp_peers": convergence.bmp_peers.map(|(_, all)| all),
                    "paths_are_plan": convergence.paths,
                });
            }
            switch
        }).collect::<Vec<_>>(),
        "links": status.links.iter().map(|link| serde_json::json!({
            "id": link.link.id.0,
            "a": format!("{}:{}", lab.topology.node(link.link.a.0).name, link.a_if),
            "b": format!("{}:{}", lab.topology.node(link.link.b.0).name, link.b_if),
            "up": link.state == LinkState::Up,
            "state": link.state,
            "a_to_b_packets": link.a_to_b,
            "b_to_a_packets": link.b_to_a,
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&value)
}

/// The tables of `status`.
#[must_use]
pub fn table(status: &LabStatus<'_>) -> String {
    let lab = status.lab;
    let params = &lab.state.params;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab `{}` ({:?}): {}, lb {}{}, link rate {}, buffer {} (ECN {}), MTU {}, seed {}, routing {}{}, {} shapers{}",
        lab.state.name,
        lab.state.phase,
        params.topo,
        ofan_lab::lb_map::label(&params.lb, &params.lb_map),
        if params.arf_combine.is_min() {
            String::new()
        } else {
            format!(" (arf-combine {})", params.arf_combine)
        },
        params.link_rate,
        params.buffer,
        params.ecn_threshold.as_deref().unwrap_or("off"),
        params.mtu,
        params.seed,
        params.routing,
        params
            .bgp_daemon
            .as_ref()
            .map(|daemon| {
                let mut said = daemon.clone();
                if let Some(bfd) = params.bfd {
                    said = format!("{said}, {bfd}");
                }
                if params.asns() != ofan_topology::plan::AsnPlan::Unique {
                    said = format!("{said}, {} ASNs", params.asns());
                }
                format!(" ({said})")
            })
            .unwrap_or_default(),
        if params.catch_up { "catch-up" } else { "strict" },
        lab.state
            .up_seconds
            .map(|s| format!(", built in {s:.1} s"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        out,
        "state: {}   namespaces: ofan-{}-<node>   hosts: {}",
        lab.dir.root().display(),
        lab.state.name,
        lab.topology.hosts().len()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<10} {:<14} {:>8} {:>6} {:>7} {:>10} {:>12} {:>12} {:>8} {:>9}",
        "switch",
        "state",
        "pid",
        "fib",
        "routes",
        "unresolved",
        "rx pkts",
        "tx pkts",
        "drops",
        "late p99"
    );
    for switch in lab.topology.switches() {
        let status = &status.switches[&switch.name];
        let pid = lab
            .process(&switch.name)
            .map_or("-".to_owned(), |p| p.pid.to_string());
        let (generation, routes, unresolved, rx, tx, drops) = match &status.stats {
            Some(stats) => {
                let ports = &stats.data_path.ports;
                let sum = |field: fn(&_) -> u64| ports.iter().map(field).sum::<u64>();
                (
                    stats.fib.generation.to_string(),
                    stats.fib.routes.0.to_string(),
                    stats.fib.unresolved.len().to_string(),
                    sum(|p| p.rx_packets).to_string(),
                    sum(|p| p.tx_packets).to_string(),
                    (sum(|p| p.drops_buffer) + sum(|p| p.drops_handoff)).to_string(),
                )
            }
            None => Default::default(),
        };
        let late = status
            .lateness
            .map_or("-".to_owned(), |t| format!("{t:.3} pt"));
        let _ = writeln!(
            out,
            "{:<10} {:<14} {:>8} {:>6} {:>7} {:>10} {:>12} {:>12} {:>8} {:>9}",
            switch.name,
            status.state.label(),
            pid,
            generation,
            routes,
            unresolved,
            rx,
            tx,
            drops,
            late
        );
        if status.state == SwitchState::Crashed {
            let log = std::fs::read_to_string(lab.dir.log(&switch.name)).unwrap_or_default();
            let _ = writeln!(
                out,
                "           log {}:\n{}",
                lab.dir.log(&switch.name).display(),
                tail(&log, 3)
            );
        }
    }
    if params.routing == Routing::Bgp.name() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<10} {:>13} {:>9} {:>10} {:>9}  state",
            "switch", "bgp sessions", "prefixes", "paths", "fib"
        );
        for switch in lab.topology.switches() {
            let (sessions, prefixes) = match &status.switches[&switch.name].bgp {
                Some(bgp) => (
                    format!("{}/{}", bgp.established, bgp.total),
                    bgp.prefixes.to_string(),
                ),
                None => ("-".to_owned(), "-".to_owned()),
            };
            let (paths, fib, state) = match &status.switches[&switch.name].convergence {
                Some(c) => (
                    match (c.bmp_peers, c.paths) {
                        (Some((complete, all)), Some(same)) => {
                            format!("bmp {complete}/{all}{}", if same { "" } else { " ≠" })
                        }
                        _ => c.paths_source.to_string(),
                    },
                    if c.fib { "= plan" } else { "≠ plan" },
                    if c.done() { "converged" } else { "converging" },
                ),
                None => ("-".to_owned(), "-", "-"),
            };
            let _ = writeln!(
                out,
                "{:<10} {sessions:>13} {prefixes:>9} {paths:>10} {fib:>9}  {state}",
                switch.name
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<5} {:<22} {:<22} {:<9} {:>12} {:>12}",
        "link", "a", "b", "state", "a→b pkts", "b→a pkts"
    );
    let show = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    for link in &status.links {
        let _ = writeln!(
            out,
            "{:<5} {:<22} {:<22} {:<9} {:>12} {:>12}",
            link.link.id.0,
            format!("{}:{}", lab.topology.node(link.link.a.0).name, link.a_if),
            format!("{}:{}", lab.topology.node(link.link.b.0).name, link.b_if),
            link.state.label(),
            show(link.a_to_b),
            show(link.b_to_a)
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{}/{} switches running, {} crashed, {} stopped, {} links down, {} blackholed",
        status.count(SwitchState::Running),
        status.switches.len(),
        status.count(SwitchState::Crashed),
        lab.state.stopped.len(),
        status.failures.len(),
        status
            .links
            .iter()
            .filter(|link| link.state == LinkState::Blackholed)
            .count()
    );
    let worst = status.worst_lateness;
    if params.link_rate_bps == 0 {
        let _ = writeln!(out, "links are unshaped (--link-rate 0): no fidelity claim");
    } else if status.faithful {
        let _ = writeln!(out, "emulation faithful: worst shaper lateness p99 {worst:.3} packet times (limit {FAITHFUL_LATENESS}; ports with >= {LATENESS_MIN_PACKETS} frames sent)");
    } else {
        let _ = writeln!(
            out,
            "WARNING: emulation NOT faithful: worst shaper lateness p99 {worst:.3} packet times > {FAITHFUL_LATENESS}; use a lower --link-rate, or check that the machine is quiet (`ofan-lab bench stalls`: a virtual machine's stalls make shapers late too)"
        );
    }
    out
}
