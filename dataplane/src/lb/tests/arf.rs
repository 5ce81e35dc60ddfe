//! The adaptive-routing framework's modes: what path quality does to their choices.

use super::*;
use crate::arf::detect::Thresholds;
use crate::arf::flows::FlowRedirect;
use crate::arf::{
    CongestionTable, Kind, LinkId, PathQuality, Quality, Redirect, RemoteHop, RemotePaths, Update,
};

/// A view of `up_ports` ports and one key where the remote level of `port` is `level` and every
/// other path is at its best, built the way the control thread builds it.
fn remote_view(up_ports: u8, port: u8, level: u8) -> Arc<PathQuality> {
    view_with(up_ports, port, Kind::CongestionDetected, level)
}

/// The same with the link reported as `kind`.
fn view_with(up_ports: u8, port: u8, kind: Kind, level: u8) -> Arc<PathQuality> {
    let mut paths = RemotePaths::new(up_ports, 1);
    for p in 0..up_ports {
        paths.set(
            DestKey(0),
            p,
            RemoteHop {
                neighbour: 100 + u32::from(p),
                next_next: vec![7],
            },
        );
    }
    let mut table = CongestionTable::default();
    table.apply(
        &Update {
            link: LinkId {
                near: 100 + u32::from(port),
                far: 7,
            },
            kind,
            quality: Quality::new(level).unwrap(),
            hold_ns: u64::MAX,
            epoch: 0,
            sequence: 1,
        },
        0,
    );
    Arc::new(PathQuality::build(
        &vec![Quality::BEST; usize::from(up_ports)],
        &table,
        &paths,
        1,
    ))
}

fn flow(hash: u32, valid: PortMask) -> Northbound {
    Northbound {
        flow_hash: hash,
        ..packet(0, SizeClass::Data, valid)
    }
}

/// Share of `flows` flows each port gets.
fn flow_shares(pipe: &mut PipeBalancer, ports: u8, flows: u32) -> Vec<f64> {
    let mut counts = vec![0u32; usize::from(ports)];
    for hash in 0..flows {
        let port = pipe
            .choose(
                &flow(hash.wrapping_mul(0x9e37_79b9), PortMask::all(ports)),
                &mut [],
            )
            .unwrap();
        counts[usize::from(port.0)] += 1;
    }
    counts
        .iter()
        .map(|&c| f64::from(c) / f64::from(flows))
        .collect()
}

#[test]
fn arf_wcmp_spreads_flows_evenly_until_a_path_degrades_then_by_weight() {
    let mut pipe = pipe0(config(Algorithm::ArfWcmp, 4, 1, 1, 5));
    for share in flow_shares(&mut pipe, 4, 40_000) {
        assert!((share - 0.25).abs() < 0.02, "uniform quality: {share}");
    }
    // Port 2's remote link at level 0: weight 1 against 16 for the others.
    pipe.switch().set_path_quality(remote_view(4, 2, 0));
    let shares = flow_shares(&mut pipe, 4, 40_000);
    let expected = 1.0 / 49.0;
    assert!(
        (shares[2] - expected).abs() < 0.01,
        "degraded port: {shares:?}"
    );
    // A flow is stable while the view is.
    let f = flow(12_345, PortMask::all(4));
    let first = pipe.choose(&f, &mut []).unwrap();
    assert!((0..100).all(|_| pipe.choose(&f, &mut []).unwrap() == first));
}

#[test]
fn arf_flow_pins_flows_and_moves_only_a_named_flow() {
    let mut pipe = pipe0(config(Algorithm::ArfFlow, 4, 1, 1, 9));
    pipe.set_clock(1_000);
    // 400 flows in distinct slots of the table (a collision re-places the older flow, which the
    // assertions below would see as a move).
    let mut slots = std::collections::HashSet::new();
    let flows: Vec<Northbound> = (0..)
        .map(|h: u32| flow(h.wrapping_mul(0x85eb_ca6b), PortMask::all(4)))
        .filter(|f| slots.insert(FlowTable::slot(pipe.switch().flow_point(f))))
        .take(400)
        .collect();
    let before: Vec<u8> = flows
        .iter()
        .map(|f| pipe.choose(f, &mut []).unwrap().0)
        .collect();
    let choose_all = |pipe: &mut PipeBalancer| -> Vec<u8> {
        flows
            .iter()
            .map(|f| pipe.choose(f, &mut []).unwrap().0)
            .collect()
    };
    // Port 1's path congested (level 2): no pinned flow moves for that alone (no herding).
    pipe.switch().set_path_quality(remote_view(4, 1, 2));
    assert_eq!(choose_all(&mut pipe), before);
    assert_eq!(pipe.flows_moved(), 0);
    // Two flows pinned on port 1; a neighbour names the first: it alone moves, off port 1.
    let on_1: Vec<usize> = (0..flows.len()).filter(|&i| before[i] == 1).collect();
    assert!(on_1.len() > 50, "{} flows on port 1", on_1.len());
    let (named, other) = (on_1[0], on_1[1]);
    let mut view = (*remote_view(4, 1, 2)).clone();
    view.redirects = Box::new([FlowRedirect {
        flow_hash: flows[named].flow_hash,
        key: DestKey(0),
        avoid: PortMask::EMPTY.with(1),
    }]);
    pipe.switch().set_path_quality(Arc::new(view.clone()));
    let after = choose_all(&mut pipe);
    assert_ne!(after[named], 1, "the named flow moved");
    assert_eq!(after[other], 1, "the other flow on the path stayed");
    for i in (0..flows.len()).filter(|&i| i != named) {
        assert_eq!(after[i], before[i], "flow {i} moved unnamed");
    }
    assert_eq!(pipe.flows_moved(), 1);
    assert_eq!(choose_all(&mut pipe), after, "moved flows stay pinned");
    // A request for a flow this pipe does not carry on the named port changes nothing.
    view.redirects = Box::new([FlowRedirect {
        flow_hash: flows[other].flow_hash,
        key: DestKey(0),
        avoid: PortMask::EMPTY.with(3),
    }]);
    pipe.switch().set_path_quality(Arc::new(view));
    assert_eq!(choose_all(&mut pipe), after);
    assert_eq!(pipe.flows_moved(), 1);
    // Idle past the timeout, flows are placed afresh (by weight: none on the congested port's
    // 1/49 share for most of them).
    pipe.set_clock(1_000 + FLOW_IDLE_NS);
    let fresh = flows
        .iter()
        .filter(|f| pipe.choose(f, &mut []).unwrap().0 == 1)
        .count();
    assert!(
        fresh < 30,
        "{fresh} fresh flows placed on the congested path"
    );
    // A flow placed afresh while a request names it avoids the named port.
    pipe.set_clock(1_000 + 3 * FLOW_IDLE_NS);
    assert_ne!(pipe.choose(&flows[other], &mut []).unwrap().0, 3);
}

#[test]
fn every_mode_leaves_out_a_path_reported_failed_but_not_one_merely_congested() {
    for algorithm in [Algorithm::ArfWcmp, Algorithm::ArfFlow, Algorithm::ArfPacket] {
        let mut pipe = pipe0(config(algorithm, 4, 1, 1, 11));
        let uses_port_2 = |pipe: &mut PipeBalancer| {
            (0..4_000u32)
                .filter(|&hash| {
                    let mut loads = [PortLoad::default(); 4];
                    let f = flow(hash.wrapping_mul(0x9e37_79b9), PortMask::all(4));
                    pipe.choose(&f, &mut loads) == Some(UpPort(2))
                })
                .count()
        };
        // Congested at level 0, port 2 still carries some (weight 1, or the lesser evil).
        pipe.switch()
            .set_path_quality(view_with(4, 2, Kind::CongestionDetected, 0));
        let congested = uses_port_2(&mut pipe);
        // Failed (whatever the level the message carried): never, while others are valid —
        // also for flows arf-flow had pinned there before.
        pipe.switch()
            .set_path_quality(view_with(4, 2, Kind::FailureDetected, 9));
        assert_eq!(uses_port_2(&mut pipe), 0, "{algorithm:?} used a dead path");
        // The only valid port dead: the frame still goes (the routing plane has not withdrawn
        // it yet), rather than nowhere.
        let only = flow(5, PortMask::EMPTY.with(2));
        assert_eq!(
            pipe.choose(&only, &mut [PortLoad::default(); 4]),
            Some(UpPort(2))
        );
        if algorithm == Algorithm::ArfWcmp {
            assert!(congested > 0, "arf-wcmp keeps weight 1 on a congested path");
        }
    }
}

#[test]
fn arf_flow_moves_by_the_configured_thresholds_and_holds_a_moved_flow_down() {
    let mut pipe = pipe0(config(Algorithm::ArfFlow, 2, 1, 1, 9));
    pipe.set_clock(1_000);
    let f = flow(0x1234_5678, PortMask::all(2));
    let first = pipe.choose(&f, &mut []).unwrap().0;
    let other = 1 - first;
    let named = |avoid: u8, level_elsewhere: u8, rule: Redirect| {
        // The avoided path at its best, the other at `level_elsewhere`.
        let mut view = (*remote_view(2, 1 - avoid, level_elsewhere)).clone();
        view.redirect = rule;
        view.redirects = Box::new([FlowRedirect {
            flow_hash: f.flow_hash,
            key: DestKey(0),
            avoid: PortMask::EMPTY.with(avoid),
        }]);
        Arc::new(view)
    };
    // Named, but the only target is at level 7: congested for a detector set to detect at 8,
    // so the flow stays; the default detector (5) lets it go.
    let thresholds = Thresholds {
        congested_at: Quality::new(8).unwrap(),
        cleared_at: Quality::new(11).unwrap(),
        ..Thresholds::default()
    };
    let strict = Redirect::of(&thresholds, 50_000_000);
    pipe.switch().set_path_quality(named(first, 7, strict));
    assert_eq!(pipe.choose(&f, &mut []).unwrap().0, first);
    assert_eq!(pipe.flows_moved(), 0);
    let rule = Redirect::of(&Thresholds::default(), 50_000_000);
    pipe.switch().set_path_quality(named(first, 7, rule));
    assert_eq!(pipe.choose(&f, &mut []).unwrap().0, other);
    assert_eq!(pipe.flows_moved(), 1);
    // Named again on its new path at once: held down for T (50 ms here) since the move…
    pipe.switch().set_path_quality(named(other, 15, rule));
    pipe.set_clock(1_000 + 49_999_999);
    assert_eq!(pipe.choose(&f, &mut []).unwrap().0, other, "held down");
    assert_eq!(pipe.flows_moved(), 1);
    // …then free to move again.
    pipe.set_clock(1_000 + 50_000_000);
    assert_eq!(pipe.choose(&f, &mut []).unwrap().0, first);
    assert_eq!(pipe.flows_moved(), 2);
}

#[test]
fn arf_flow_never_pins_a_flow_to_a_port_that_stopped_being_valid() {
    let mut pipe = pipe0(config(Algorithm::ArfFlow, 4, 1, 1, 9));
    let f = flow(77, PortMask::all(4));
    let port = pipe.choose(&f, &mut []).unwrap().0;
    let without = Northbound {
        valid: PortMask::all(4).without(port),
        ..f
    };
    assert_ne!(pipe.choose(&without, &mut []).unwrap().0, port);
}

/// Local queues of two up-ports, in bytes.
fn queues(port0: u32, port1: u32) -> [PortLoad; 2] {
    [port0, port1].map(|bytes| PortLoad { packets: 0, bytes })
}

#[test]
fn arf_packet_weighs_remote_quality_against_local_queues() {
    let mut pipe = pipe0(config(Algorithm::ArfPacket, 2, 1, 1, 3));
    pipe.switch().set_path_quality(remote_view(2, 0, 0));
    let buffer = 800_000u32;
    // Equal local queues: the remotely congested port 0 is avoided every time.
    for _ in 0..50 {
        let mut loads = queues(10_000, 10_000);
        assert_eq!(
            pipe.choose(&packet(0, SizeClass::Data, PortMask::all(2)), &mut loads),
            Some(UpPort(1))
        );
    }
    // Port 1's local queue longer than a quarter buffer more: port 0 is the lesser evil.
    let mut loads = queues(0, buffer / 4 + 1_000);
    assert_eq!(
        pipe.choose(&packet(0, SizeClass::Data, PortMask::all(2)), &mut loads),
        Some(UpPort(0))
    );
    // The penalty is per destination: key 0's view says nothing about a key out of its range.
    let mut loads = queues(0, 1);
    assert_eq!(
        pipe.choose(&packet(5, SizeClass::Data, PortMask::all(2)), &mut loads),
        Some(UpPort(0))
    );
}

#[test]
fn a_published_view_reaches_every_pipe_and_other_algorithms_ignore_it() {
    let switch = SwitchBalancer::new(config(Algorithm::ArfWcmp, 4, 1, 2, 1)).unwrap();
    let view = remote_view(4, 3, 0);
    switch.set_path_quality(Arc::clone(&view));
    assert!(Arc::ptr_eq(&switch.path_quality(), &view));
    // Ofan with the same view decides exactly as without it.
    let plain = pipe0(config(Algorithm::Ofan, 4, 1, 1, 4));
    let viewed = pipe0(config(Algorithm::Ofan, 4, 1, 1, 4));
    viewed.switch().set_path_quality(view);
    let (mut plain, mut viewed) = (plain, viewed);
    let pkt = packet(0, SizeClass::Data, PortMask::all(4));
    assert_eq!(draw(&mut plain, &pkt, 64), draw(&mut viewed, &pkt, 64));
}

#[test]
fn batched_arf_decisions_equal_one_by_one_decisions() {
    for algorithm in [Algorithm::ArfWcmp, Algorithm::ArfFlow, Algorithm::ArfPacket] {
        let make = || {
            let pipe = pipe0(config(algorithm, 4, 1, 1, 11));
            pipe.switch().set_path_quality(remote_view(4, 2, 3));
            pipe
        };
        let packets: Vec<Northbound> = (0..150u32)
            .map(|i| {
                let valid = if i % 7 == 0 {
                    PortMask::EMPTY
                } else if i % 5 == 0 {
                    PortMask::all(4).without(1)
                } else {
                    PortMask::all(4)
                };
                flow(i % 23, valid)
            })
            .collect();
        let (mut one_by_one, mut batched) = (make(), make());
        let mut loads_one = [PortLoad::default(); 4];
        let sequential: Vec<Option<UpPort>> = packets
            .iter()
            .map(|p| one_by_one.choose(p, &mut loads_one))
            .collect();
        let mut loads_batch = [PortLoad::default(); 4];
        let mut out = vec![None; packets.len()];
        batched.choose_batch(&packets, &mut loads_batch, &mut out);
        assert_eq!(sequential, out, "{algorithm}");
        assert_eq!(loads_one, loads_batch, "{algorithm}");
    }
}
