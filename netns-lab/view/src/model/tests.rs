//! The view models from hand-made snapshots of a k = 4 fat tree.

use std::collections::BTreeMap;

use ofan_control::admin::Stats;
use ofan_dataplane::telemetry::{PortSnapshot, SwitchSnapshot};
use ofan_topology::{LinkId, Topology};

use super::*;

fn port(name: &str) -> PortSnapshot {
    PortSnapshot {
        name: name.to_owned(),
        ..PortSnapshot::default()
    }
}

fn stats(name: &str, ports: Vec<PortSnapshot>) -> Stats {
    Stats {
        switch: name.to_owned(),
        algorithm: "pofan".to_owned(),
        uptime_s: 3.0,
        data_path: SwitchSnapshot {
            time_ns: 0,
            ports,
            counters: vec![("forwarded".to_owned(), 7)],
            umem: None,
        },
        steering: Vec::new(),
        fib: Default::default(),
        paths: Default::default(),
        bmp: None,
        endpoints: Default::default(),
        adaptive_routing: None,
    }
}

/// Every switch of `topology` running with all ports idle, every link up, at `at_s`.
fn idle(topology: &Topology, at_s: u64) -> Sample {
    let switches = topology
        .switches()
        .iter()
        .map(|switch| {
            let ports = switch.ports.iter().map(|p| port(&p.ifname)).collect();
            let stats = stats(&switch.name, ports);
            (switch.name.clone(), (SwitchState::Running, Some(stats)))
        })
        .collect::<BTreeMap<_, _>>();
    Sample {
        at_ns: at_s * 1_000_000_000,
        switches,
        links: vec![LinkState::Up; topology.links().len()],
        progress: None,
    }
}

fn port_mut<'a>(sample: &'a mut Sample, switch: &str, ifname: &str) -> &'a mut PortSnapshot {
    let (_, stats) = sample.switches.get_mut(switch).unwrap();
    let ports = &mut stats.as_mut().unwrap().data_path.ports;
    ports.iter_mut().find(|p| p.name == ifname).unwrap()
}

fn input<'a>(
    topology: &'a Topology,
    before: Option<&'a Sample>,
    now: &'a Sample,
) -> FrameInput<'a> {
    FrameInput {
        topology,
        before,
        now,
        rate_bps: 1_000_000,
        buffer_bytes: 64_000,
        seq: 2,
    }
}

/// The link between two named nodes, and the interface names at its ends (a, b).
fn link_of(topology: &Topology, a: &str, b: &str) -> (LinkId, String, String) {
    let id = |name: &str| topology.nodes().iter().find(|n| n.name == name).unwrap().id;
    let link = topology.link(topology.link_between(id(a), id(b)).unwrap());
    let a_if = topology.port(link.a.0, link.a.1).ifname.clone();
    let b_if = topology.port(link.b.0, link.b.1).ifname.clone();
    (link.id, a_if, b_if)
}

#[test]
fn a_k4_fat_tree_is_drawn_in_four_tiers_with_pods_apart() {
    let topology = Topology::fat_tree(4).unwrap();
    let view = TopologyView::of("vw", &topology);
    assert_eq!(view.kind, "fat-tree");
    assert_eq!(view.tiers, ["core", "aggregation", "edge", "host"]);
    assert_eq!(view.nodes.iter().filter(|n| n.switch).count(), 20);
    assert_eq!(view.nodes.iter().filter(|n| !n.switch).count(), 16);
    assert_eq!(view.links.len(), 48);
    let tier = |t: usize| -> Vec<&NodeView> { view.nodes.iter().filter(|n| n.tier == t).collect() };
    assert_eq!(tier(0).len(), 4);
    assert!(tier(0).iter().all(|n| n.role == "core"));
    assert_eq!(tier(3).len(), 16);
    for t in 0..4 {
        let mut xs: Vec<f64> = tier(t).iter().map(|n| n.x).collect();
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)), "{xs:?}");
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        assert_eq!(xs.len(), tier(t).len(), "tier {t}: two nodes at one place");
    }
    // Pods are apart: the gap between pod 0's last edge and pod 1's first is wider than
    // between two edges of one pod.
    let x = |name: &str| view.nodes.iter().find(|n| n.name == name).unwrap().x;
    assert!(x("e-p1-0") - x("e-p0-1") > 1.2 * (x("e-p0-1") - x("e-p0-0")));
    // Every link runs from a lower tier to the next one up.
    for link in &view.links {
        assert_eq!(view.nodes[link.a].tier, view.nodes[link.b].tier + 1);
    }
}

#[test]
fn a_leaf_spine_has_three_tiers_named_leaf_and_spine() {
    let topology = Topology::leaf_spine(4).unwrap();
    let view = TopologyView::of("vw", &topology);
    assert_eq!(view.kind, "leaf-spine");
    assert_eq!(view.tiers, ["spine", "leaf", "host"]);
    assert!(view.nodes.iter().all(|n| n.tier < 3));
    assert!(view.nodes.iter().any(|n| n.role == "spine" && n.tier == 0));
    for link in &view.links {
        assert_eq!(view.nodes[link.a].tier, view.nodes[link.b].tier + 1);
    }
    let frame = frame(&input(&topology, None, &idle(&topology, 1)));
    let names: Vec<&str> = frame.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["leaf ↑", "spine ↓", "leaf ↓"]);
}

#[test]
fn utilization_each_way_comes_from_the_sending_end_and_from_a_host_s_switch() {
    let topology = Topology::fat_tree(4).unwrap();
    let before = idle(&topology, 10);
    let mut now = idle(&topology, 11);
    // e-p0-0 → a-p0-0: 62 500 bytes in 1 s on a 1 Mbit/s link = 50 %.
    let (up_link, e_if, a_if) = link_of(&topology, "e-p0-0", "a-p0-0");
    port_mut(&mut now, "e-p0-0", &e_if).tx_bytes = 62_500;
    // a-p0-0 → e-p0-0 at a slowed port's own rate: 62 500 bytes at 500 kbit/s = 100 %.
    let a_port = port_mut(&mut now, "a-p0-0", &a_if);
    a_port.tx_bytes = 62_500;
    a_port.link_rate_bps = 500_000;
    // A host's sending: what its edge received, 25 %.
    let (host_link, _, edge_if) = link_of(&topology, "h-p0-e0-h0", "e-p0-0");
    port_mut(&mut now, "e-p0-0", &edge_if).rx_bytes = 31_250;

    let frame = frame(&input(&topology, Some(&before), &now));
    assert!((frame.interval_s - 1.0).abs() < 1e-9);
    let link = &frame.links[up_link.0 as usize];
    assert!((link.util_ab.unwrap() - 0.5).abs() < 1e-9, "{link:?}");
    assert!((link.util_ba.unwrap() - 1.0).abs() < 1e-9, "{link:?}");
    assert!((link.bps_ab.unwrap() - 500_000.0).abs() < 1e-6);
    let host = &frame.links[host_link.0 as usize];
    assert!((host.util_ab.unwrap() - 0.25).abs() < 1e-9, "{host:?}");
    assert_eq!(host.util_ba, Some(0.0));
    assert!(host.queue_a.is_none(), "a host's queue is not visible");
    assert!(host.queue_b.is_some());
    assert_eq!(frame.totals.busy_directions, 3);
    assert!((frame.totals.max_util - 1.0).abs() < 1e-9);
    assert_eq!(frame.totals.switches, 20);
    assert_eq!(frame.totals.hosts, 16);
    assert_eq!(frame.totals.links, 48);
}

#[test]
fn the_first_frame_and_a_reset_have_no_negative_rates() {
    let topology = Topology::fat_tree(4).unwrap();
    let mut before = idle(&topology, 10);
    let (id, e_if, _) = link_of(&topology, "e-p0-0", "a-p0-0");
    port_mut(&mut before, "e-p0-0", &e_if).tx_bytes = 1_000_000;
    let first = frame(&input(&topology, None, &before));
    assert_eq!(first.interval_s, 0.0);
    assert!(first
        .links
        .iter()
        .all(|l| l.util_ab.is_none() && l.util_ba.is_none()));
    // Counters reset (a `run` starts): what was counted since the reset is the interval's.
    let mut now = idle(&topology, 11);
    port_mut(&mut now, "e-p0-0", &e_if).tx_bytes = 12_500;
    let after = frame(&input(&topology, Some(&before), &now));
    assert!((after.links[id.0 as usize].util_ab.unwrap() - 0.1).abs() < 1e-9);
}

#[test]
fn queues_are_averaged_over_the_interval_and_summed_by_stage() {
    let topology = Topology::fat_tree(4).unwrap();
    let mut before = idle(&topology, 10);
    let mut now = idle(&topology, 11);
    let (id, a_if, _) = link_of(&topology, "a-p0-0", "c-0");
    for (sample, packet_ns, byte_ns, until) in [
        (&mut before, 0, 0, 1_000),
        (&mut now, 4_000, 6_000_000, 2_000),
    ] {
        let port = port_mut(sample, "a-p0-0", &a_if);
        port.depth_packet_ns = packet_ns;
        port.depth_byte_ns = byte_ns;
        port.integrated_until_ns = until;
        port.depth_packets = 9;
        port.drops_buffer = 2;
    }
    let frame = frame(&input(&topology, Some(&before), &now));
    let queue = frame.links[id.0 as usize].queue_a.unwrap();
    // 4 000 frame·ns over 1 000 ns: 4 frames on average (not the 9 queued at the end).
    assert!((queue.packets - 4.0).abs() < 1e-9, "{queue:?}");
    assert!((queue.bytes - 6_000.0).abs() < 1e-9);
    assert!((queue.fill - 6_000.0 / 64_000.0).abs() < 1e-9);
    assert_eq!(queue.drops, 2);
    let stage = frame
        .stages
        .iter()
        .find(|s| s.name == "aggregation ↑")
        .unwrap();
    assert_eq!(stage.ports, 16);
    assert!((stage.queued_packets - 4.0).abs() < 1e-9);
    assert!((stage.max_packets - 4.0).abs() < 1e-9);
    let names: Vec<&str> = frame.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "edge ↑",
            "aggregation ↑",
            "core ↓",
            "aggregation ↓",
            "edge ↓"
        ]
    );
    // The first frame shows the depth queued now.
    let first = super::frame(&input(&topology, None, &now));
    assert!((first.links[id.0 as usize].queue_a.unwrap().packets - 9.0).abs() < 1e-9);
}

#[test]
fn stopped_and_crashed_switches_and_links_down_are_reported() {
    let topology = Topology::fat_tree(4).unwrap();
    let mut now = idle(&topology, 1);
    now.switches
        .insert("c-0".into(), (SwitchState::Stopped, None));
    now.switches
        .insert("c-1".into(), (SwitchState::Crashed, None));
    let (id, _, _) = link_of(&topology, "e-p0-0", "a-p0-0");
    now.links[id.0 as usize] = LinkState::Down;
    let (black, _, _) = link_of(&topology, "e-p1-0", "a-p1-0");
    now.links[black.0 as usize] = LinkState::Blackholed;
    let frame = frame(&input(&topology, None, &now));
    let state = |name: &str| frame.switches.iter().find(|s| s.name == name).unwrap();
    assert_eq!(state("c-0").state, "stopped");
    assert_eq!(state("c-1").state, "CRASHED");
    assert_eq!(state("c-1").algorithm, None);
    assert_eq!(state("c-2").algorithm.as_deref(), Some("pofan"));
    assert_eq!(state("c-2").counters, [("forwarded".to_owned(), 7)]);
    assert_eq!(frame.totals.running, 18);
    assert_eq!(frame.totals.links_down, 2);
    assert_eq!(frame.links[id.0 as usize].state, LinkState::Down);
    // A stopped core's links have no queue at its end.
    let (core_link, _, _) = link_of(&topology, "a-p0-0", "c-0");
    assert!(frame.links[core_link.0 as usize].queue_b.is_none());
}

#[test]
fn the_lab_metrics_parse_and_label_every_switch() {
    let topology = Topology::fat_tree(4).unwrap();
    let mut sample = idle(&topology, 1);
    sample
        .switches
        .insert("c-0".into(), (SwitchState::Crashed, None));
    let (e_link, e_if, _) = link_of(&topology, "e-p0-0", "a-p0-0");
    port_mut(&mut sample, "e-p0-0", &e_if).tx_packets = 42;
    sample.links[e_link.0 as usize] = LinkState::Down;
    let text = super::super::metrics::render(&topology, &sample);
    let lines = text.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("a valid exposition");
    let value = |name: &str, labels: &[(&str, &str)]| -> Vec<f64> {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
            .collect()
    };
    assert_eq!(value("ofan_switch_up", &[]).len(), 20);
    assert_eq!(value("ofan_switch_up", &[("switch", "c-0")]), [0.0]);
    assert_eq!(value("ofan_switch_up", &[("switch", "c-1")]), [1.0]);
    assert_eq!(
        value(
            "ofan_port_tx_packets_total",
            &[("switch", "e-p0-0"), ("port", &e_if), ("peer", "a-p0-0")]
        ),
        [42.0]
    );
    // 19 answering switches × 4 ports.
    assert_eq!(value("ofan_port_tx_packets_total", &[]).len(), 19 * 4);
    assert_eq!(
        value(
            "ofan_forward_total",
            &[("switch", "a-p3-1"), ("reason", "forwarded")]
        ),
        [7.0]
    );
    assert_eq!(value("ofan_link_up", &[]).len(), 48);
    assert_eq!(
        value(
            "ofan_link_up",
            &[("a", "e-p0-0"), ("b", "a-p0-0"), ("state", "down")]
        ),
        [0.0]
    );
    assert_eq!(
        value(
            "ofan_switch_info",
            &[("switch", "e-p0-0"), ("algorithm", "pofan")]
        ),
        [1.0]
    );
    assert!(scrape.docs.contains_key("ofan_port_queue_packets"));
}

#[test]
fn rates_are_over_the_switch_s_own_snapshot_times() {
    let topology = Topology::fat_tree(4).unwrap();
    let mut before = idle(&topology, 10);
    let mut now = idle(&topology, 11);
    // The sampler read e-p0-0 1 s apart, but its snapshots were taken 0.5 s apart.
    for (sample, at_ns) in [(&mut before, 10_250_000_000), (&mut now, 10_750_000_000)] {
        let (_, stats) = sample.switches.get_mut("e-p0-0").unwrap();
        stats.as_mut().unwrap().data_path.time_ns = at_ns;
    }
    let (id, e_if, _) = link_of(&topology, "e-p0-0", "a-p0-0");
    port_mut(&mut now, "e-p0-0", &e_if).tx_bytes = 62_500;
    let frame = frame(&input(&topology, Some(&before), &now));
    let util = frame.links[id.0 as usize].util_ab.unwrap();
    assert!((util - 1.0).abs() < 1e-9, "{util}");
}

/// Two planes: each switch tier plane by plane, plane 0 left of plane 1, every switch
/// labelled with its plane; the hosts in one row, each linked to one edge switch per plane.
#[test]
fn a_two_plane_fabric_draws_its_planes_side_by_side() {
    let topology = Topology::new(ofan_topology::TopologyKind::MultiPlane {
        plane: ofan_topology::PlaneKind::FatTree,
        planes: 2,
        k: 4,
    })
    .unwrap();
    let view = TopologyView::of("lab", &topology);
    assert_eq!(view.kind, "fat-tree");
    for tier in 0..3 {
        let at = |plane: u8| -> Vec<f64> {
            view.nodes
                .iter()
                .filter(|node| node.tier == tier && node.plane == Some(plane))
                .map(|node| node.x)
                .collect()
        };
        let (left, right) = (at(0), at(1));
        assert!(!left.is_empty() && left.len() == right.len(), "tier {tier}");
        let rightmost = left.iter().copied().fold(f64::MIN, f64::max);
        let leftmost = right.iter().copied().fold(f64::MAX, f64::min);
        assert!(rightmost < leftmost, "tier {tier}: plane 0 left of plane 1");
    }
    let hosts: Vec<usize> = (0..view.nodes.len())
        .filter(|&index| !view.nodes[index].switch)
        .collect();
    assert_eq!(hosts.len(), 16);
    for host in hosts {
        assert_eq!(view.nodes[host].plane, None);
        let mut planes: Vec<u8> = view
            .links
            .iter()
            .filter(|link| link.a == host)
            .map(|link| view.nodes[link.b].plane.expect("an edge switch's plane"))
            .collect();
        planes.sort_unstable();
        assert_eq!(planes, [0, 1], "{}", view.nodes[host].name);
    }
}
