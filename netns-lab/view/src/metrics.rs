//! The whole lab as one Prometheus text exposition: every switch's series with a
//! `switch="…"` label, the links' states and the running collective's progress (pure: a
//! [`Sample`] in, the text out).
//!
//! **Where the series come from.** The lab starts its switches with `--metrics off` and reads
//! each one's typed [`Stats`](ofan_control::admin::Stats) over its admin socket — for `status`,
//! and for the view, which samples every switch twice a second anyway. The exposition is
//! rendered from those same snapshots rather than by scraping each switch's own `/metrics` and
//! adding a label: one request per switch per sample instead of two, no TCP port inside each
//! switch namespace (which the lab's process would have to enter to reach), and a switch that
//! stopped, crashed or does not answer is still a series (`ofan_switch_up 0`). The series keep
//! the names of the switch's own exposition (`switch/src/admin.rs`, `record`) — so a query
//! written for one switch works on the lab with `switch` added — and port series carry the
//! neighbour at the other end as `peer`.
//!
//! Counters are the switches' own: a `run` resets them (as `ofan-switch reset` does), which
//! Prometheus' `rate()` takes as a counter reset.

use std::fmt::Write as _;

use ofan_topology::Topology;

use super::model::Sample;
use ofan_lab::status::SwitchState;
use ofan_lab::LinkState;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

/// One family: its samples as (label set, value), rendered after its `HELP` and `TYPE`.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<(String, String)>,
}

/// The families in the order they were first named.
#[derive(Default)]
struct Exposition {
    families: Vec<Family>,
}

impl Exposition {
    fn family(&mut self, name: &'static str, kind: Kind, help: &'static str) -> &mut Family {
        let index = match self.families.iter().position(|f| f.name == name) {
            Some(index) => index,
            None => {
                self.families.push(Family {
                    name,
                    help,
                    kind,
                    samples: Vec::new(),
                });
                self.families.len() - 1
            }
        };
        &mut self.families[index]
    }

    fn counter(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: u64,
    ) {
        let family = self.family(name, Kind::Counter, help);
        family.samples.push((label_set(labels), value.to_string()));
    }

    fn gauge(
        &mut self,
        name: &'static str,
        help: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        // The text format spells infinities `+Inf`/`-Inf`; none of ours is meant to be one.
        if value.is_finite() {
            let family = self.family(name, Kind::Gauge, help);
            family.samples.push((label_set(labels), value.to_string()));
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        for family in self.families.iter().filter(|f| !f.samples.is_empty()) {
            let kind = match family.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} {kind}", family.name);
            for (labels, value) in &family.samples {
                let _ = writeln!(out, "{}{labels} {value}", family.name);
            }
        }
        out
    }
}

/// `{a="x",b="y"}`, values escaped as the text format says (`\\`, `\"`, `\n`).
fn label_set(labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let mut out = String::from("{");
    for (position, (name, value)) in labels.iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        out.push_str(name);
        out.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

/// The exposition of `sample` of a lab built on `topology`.
#[must_use]
pub fn render(topology: &Topology, sample: &Sample) -> String {
    let mut exposition = Exposition::default();
    let e = &mut exposition;
    for switch in topology.switches() {
        let name = switch.name.as_str();
        let (state, stats) = sample
            .switches
            .get(name)
            .map_or((SwitchState::NeverStarted, None), |(state, stats)| {
                (*state, stats.as_ref())
            });
        let one = [("switch", name)];
        e.gauge(
            "ofan_switch_up",
            "Whether the switch answers its admin socket (0: stopped, crashed, not answering).",
            &one,
            f64::from(u8::from(state == SwitchState::Running)),
        );
        let Some(stats) = stats else { continue };
        e.gauge(
            "ofan_switch_info",
            "Always 1: the switch's load-balancing algorithm as a label.",
            &[("switch", name), ("algorithm", &stats.algorithm)],
            1.0,
        );
        e.gauge(
            "ofan_switch_uptime_seconds",
            "Seconds since the switch process started.",
            &one,
            stats.uptime_s,
        );
        for port in &stats.data_path.ports {
            let peer = switch
                .ports
                .iter()
                .find(|p| p.ifname == port.name)
                .map_or("", |p| topology.node(p.peer).name.as_str());
            let labels = [
                ("switch", name),
                ("port", port.name.as_str()),
                ("peer", peer),
            ];
            let counters: [(&'static str, &'static str, u64); 10] = [
                (
                    "ofan_port_rx_packets_total",
                    "Frames received on the port.",
                    port.rx_packets,
                ),
                (
                    "ofan_port_rx_bytes_total",
                    "Bytes received on the port.",
                    port.rx_bytes,
                ),
                (
                    "ofan_port_rx_spliced_total",
                    "Of the frames received, those from a switch of the same group over a spliced link.",
                    port.rx_spliced,
                ),
                (
                    "ofan_port_rx_host_link_total",
                    "Of the frames received, those from the host's agent over a shared-memory host link.",
                    port.rx_host_link,
                ),
                (
                    "ofan_port_drops_host_link_total",
                    "Frames lost on a shared-memory host link (the agent fell behind, or no free frame).",
                    port.drops_host_link,
                ),
                (
                    "ofan_port_tx_packets_total",
                    "Frames sent on the port.",
                    port.tx_packets,
                ),
                (
                    "ofan_port_tx_bytes_total",
                    "Bytes sent on the port.",
                    port.tx_bytes,
                ),
                (
                    "ofan_port_drops_buffer_total",
                    "Frames dropped because the port's egress buffer was full.",
                    port.drops_buffer,
                ),
                (
                    "ofan_port_drops_handoff_total",
                    "Frames dropped because the hand-off ring to the port's worker was full (or, over a spliced link, the port's switch had no free frame).",
                    port.drops_handoff,
                ),
                (
                    "ofan_port_ecn_marked_total",
                    "Frames marked ECN CE at the port.",
                    port.ecn_marked,
                ),
            ];
            for (metric, help, value) in counters {
                e.counter(metric, help, &labels, value);
            }
            let gauges: [(&'static str, &'static str, f64); 5] = [
                (
                    "ofan_port_queue_packets",
                    "Frames in the port's egress queue now.",
                    port.depth_packets as f64,
                ),
                (
                    "ofan_port_queue_bytes",
                    "Bytes in the port's egress queue now.",
                    port.depth_bytes as f64,
                ),
                (
                    "ofan_port_queue_max_packets",
                    "Largest egress queue since the last reset, frames.",
                    port.max_depth_packets as f64,
                ),
                (
                    "ofan_port_shaper_lateness_p99_seconds",
                    "99th percentile of the port shaper's lateness.",
                    port.lateness_p99_ns as f64 / 1e9,
                ),
                (
                    "ofan_port_link_rate_bps",
                    "The emulated link rate the port's shaper uses, bit/s (0: unshaped).",
                    port.link_rate_bps as f64,
                ),
            ];
            for (metric, help, value) in gauges {
                e.gauge(metric, help, &labels, value);
            }
        }
        for (reason, value) in &stats.data_path.counters {
            e.counter(
                "ofan_forward_total",
                "Frames through the data path, by outcome.",
                &[("switch", name), ("reason", reason)],
                *value,
            );
        }
        for (decision, value) in &stats.steering {
            e.counter(
                "ofan_steering_total",
                "Frames by the XDP steering program's decision.",
                &[("switch", name), ("decision", decision)],
                *value,
            );
        }
        e.gauge(
            "ofan_fib_generation",
            "Generation of the switch's FIB mirror (grows with every route change).",
            &one,
            stats.fib.generation as f64,
        );
        e.gauge(
            "ofan_path_routes",
            "Routes in the switch's path table.",
            &one,
            stats.paths.routes.len() as f64,
        );
    }
    for (link, state) in topology.links().iter().zip(&sample.links) {
        let (a, b) = (&topology.node(link.a.0).name, &topology.node(link.b.0).name);
        let id = link.id.0.to_string();
        e.gauge(
            "ofan_link_up",
            "Whether the link is up (0: down, or blackholed: carrier up, every frame dropped).",
            &[
                ("link", &id),
                ("a", a),
                ("b", b),
                ("state", state_name(*state)),
            ],
            f64::from(u8::from(*state == LinkState::Up)),
        );
    }
    if let Some(progress) = &sample.progress {
        let labels = [("collective", progress.collective.as_str())];
        e.gauge(
            "ofan_run_flows",
            "Flows of the running collective.",
            &labels,
            progress.flows as f64,
        );
        e.gauge(
            "ofan_run_flows_done",
            "Flows of the running collective whose receiver has everything.",
            &labels,
            progress.flows_done as f64,
        );
    }
    exposition.render()
}

const fn state_name(state: LinkState) -> &'static str {
    match state {
        LinkState::Up => "up",
        LinkState::Down => "down",
        LinkState::Blackholed => "blackholed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label_set(&[]), "");
        assert_eq!(
            label_set(&[("a", "x"), ("b", "q\"\\\n")]),
            r#"{a="x",b="q\"\\\n"}"#
        );
    }

    #[test]
    fn each_family_has_one_help_and_type_before_its_samples() {
        let mut e = Exposition::default();
        e.counter("x_total", "X.", &[("s", "1")], 3);
        e.gauge("y", "Y.", &[], 0.5);
        e.counter("x_total", "X.", &[("s", "2")], 4);
        e.gauge("z", "never: not finite", &[], f64::NAN);
        assert_eq!(
            e.render(),
            "# HELP x_total X.\n# TYPE x_total counter\nx_total{s=\"1\"} 3\nx_total{s=\"2\"} 4\n\
             # HELP y Y.\n# TYPE y gauge\ny 0.5\n"
        );
    }
}
