//! Destination keys, shortest paths and the valid-port masks under failures.

use super::*;

// ---------------------------------------------------------------------------------------------
// Destination keys

fn check_dest_keys(t: &Topology) {
    let edge_position: HashMap<NodeId, u32> = t
        .edges()
        .iter()
        .zip(0..)
        .map(|(edge, position)| (edge.id, position))
        .collect();
    for switch in t.switches() {
        let count = t.dest_key_count(switch.id);
        let mut keys_by_edge: HashMap<NodeId, BTreeSet<Option<DestKey>>> = HashMap::new();
        let mut keys_by_pod: HashMap<Option<u16>, BTreeSet<Option<DestKey>>> = HashMap::new();
        for host in t.hosts() {
            let key = t.dest_key(switch.id, host.loopback);
            assert_eq!(key, t.dest_key_for_host(switch.id, host.id));
            assert_eq!(key.is_some(), t.is_northbound(switch.id, host.id));
            let dst_edge = t.host_edge(host.id);
            match switch.role {
                Role::Edge => {
                    let expected =
                        (dst_edge != switch.id).then(|| DestKey(edge_position[&dst_edge]));
                    assert_eq!(key, expected);
                }
                Role::Aggregation => {
                    let expected =
                        (host.pod != switch.pod).then(|| DestKey(u32::from(host.pod.unwrap())));
                    assert_eq!(key, expected);
                }
                Role::Core | Role::Host => assert_eq!(key, None),
            }
            if let Some(key) = key {
                assert!(key.0 < count);
            }
            keys_by_edge.entry(dst_edge).or_default().insert(key);
            keys_by_pod.entry(host.pod).or_default().insert(key);
        }
        // Consolidation: one key per destination edge at edges, per pod at aggregations.
        let per_group: Vec<usize> = match switch.role {
            Role::Edge => keys_by_edge.values().map(BTreeSet::len).collect(),
            _ => keys_by_pod.values().map(BTreeSet::len).collect(),
        };
        assert!(per_group.iter().all(|&n| n == 1));
        let distinct: BTreeSet<_> = keys_by_edge.values().flatten().flatten().collect();
        let expected_distinct = match switch.role {
            Role::Edge => t.edges().len() - 1,
            Role::Aggregation => usize::from(t.num_pods()) - 1,
            _ => 0,
        };
        assert_eq!(distinct.len(), expected_distinct, "{}", switch.name);
        assert!(!t.is_northbound(switch.id, t.hosts()[0].id) || switch.role != Role::Core);
    }
}

#[test]
fn dest_keys_consolidate_per_destination_edge_and_pod() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(6)] {
        check_dest_keys(&t);
    }
}

#[test]
fn dest_key_counts_and_non_host_destinations() {
    let t = fat_tree(8);
    let edge = by_name(&t, "e-p2-1");
    let agg = by_name(&t, "a-p2-1");
    let core = by_name(&t, "c-5");
    let host = by_name(&t, "h-p0-e0-h0");
    assert_eq!(t.dest_key_count(edge), 32);
    assert_eq!(t.dest_key_count(agg), 8);
    assert_eq!(t.dest_key_count(core), 0);
    assert_eq!(t.dest_key_count(host), 0);
    assert_eq!(t.dest_key_count(NodeId(1_000_000)), 0);
    // Loopbacks, link addresses and unassigned addresses are not destinations.
    for dst in [
        t.node(core).loopback,
        t.node(agg).ports[0].address,
        t.node(by_name(&t, "e-p0-0")).ports[0].address,
        Ipv4Addr::new(8, 8, 8, 8),
    ] {
        assert_eq!(t.dest_key(edge, dst), None, "{dst}");
    }
    assert_eq!(
        t.dest_key(edge, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        Some(DestKey(7 * 4 + 3))
    );
    assert_eq!(
        t.dest_key(agg, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        Some(DestKey(7))
    );
    assert_eq!(
        t.dest_key(host, t.node(by_name(&t, "h-p7-e3-h2")).loopback),
        None
    );
    assert!(t.is_northbound(host, by_name(&t, "h-p0-e0-h1")));
    assert!(!t.is_northbound(host, host));

    let t = leaf_spine(8);
    assert_eq!(t.dest_key_count(by_name(&t, "leaf-2")), 8);
    assert_eq!(t.dest_key_count(by_name(&t, "spine-2")), 0);
    let dst = t.node(by_name(&t, "h-l5-h1")).loopback;
    assert_eq!(t.dest_key(by_name(&t, "leaf-2"), dst), Some(DestKey(5)));
    assert_eq!(t.dest_key(by_name(&t, "leaf-5"), dst), None);
}

// ---------------------------------------------------------------------------------------------
// Shortest paths

fn check_shortest_paths(t: &Topology) {
    let w = usize::from(t.k() / 2);
    for src in t.hosts() {
        for dst in t.hosts() {
            let paths = t.shortest_paths(src.id, dst.id);
            let (src_edge, dst_edge) = (t.host_edge(src.id), t.host_edge(dst.id));
            let (count, hops) = if src.id == dst.id {
                (1, 0)
            } else if src_edge == dst_edge {
                (1, 2)
            } else if src.pod == dst.pod {
                (w, 4)
            } else {
                (w * w, 6)
            };
            assert_eq!(paths.len(), count, "{} -> {}", src.name, dst.name);
            assert_eq!(t.hop_count(src.id, dst.id), u32::try_from(hops).unwrap());
            let distinct: HashSet<_> = paths.iter().collect();
            assert_eq!(distinct.len(), count);
            for path in &paths {
                assert_eq!(path.len(), hops + 1);
                assert_eq!((path[0], path[hops]), (src.id, dst.id));
                assert!(path
                    .windows(2)
                    .all(|hop| t.link_between(hop[0], hop[1]).is_some()));
                let unique: HashSet<_> = path.iter().collect();
                assert_eq!(unique.len(), path.len(), "no node repeats");
                // Up then down: roles rise to the middle and fall after it.
                let roles: Vec<Role> = path.iter().map(|&n| t.role(n)).collect();
                assert!(roles[..=hops / 2].windows(2).all(|r| r[0] < r[1]));
                assert!(roles[hops / 2..].windows(2).all(|r| r[0] > r[1]));
            }
        }
    }
}

#[test]
fn shortest_paths_count_length_and_validity() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(6)] {
        check_shortest_paths(&t);
    }
}

// ---------------------------------------------------------------------------------------------
// Failures

/// Every (edge or aggregation switch, key) mask, for comparing whole-network effects.
fn all_masks(t: &Topology, failures: &FailedLinks) -> HashMap<(NodeId, DestKey), u64> {
    let mut masks = HashMap::new();
    for switch in t.switches() {
        for key in 0..t.dest_key_count(switch.id) {
            let key = DestKey(key);
            masks.insert((switch.id, key), t.valid_up_mask(failures, switch.id, key));
        }
    }
    masks
}

#[test]
fn without_failures_every_up_port_is_valid() {
    for t in [fat_tree(4), fat_tree(8), leaf_spine(4), leaf_spine(8)] {
        let w = usize::from(t.k() / 2);
        let none = FailedLinks::new();
        for ((switch, key), mask) in all_masks(&t, &none) {
            let node = t.node(switch);
            let own = match node.role {
                Role::Edge => t.edges()[key.0 as usize].id == switch,
                _ => node.pod == Some(u16::try_from(key.0).unwrap()),
            };
            assert_eq!(
                mask,
                if own { 0 } else { all_ones(w) },
                "{} {key:?}",
                node.name
            );
            let ports = t.valid_up_ports(&none, switch, key);
            assert_eq!(ports.len(), if own { 0 } else { w });
        }
        // Out-of-range keys, cores and hosts have no valid up port.
        let edge = t.edges()[0].id;
        assert_eq!(
            t.valid_up_mask(&none, edge, DestKey(t.dest_key_count(edge))),
            0
        );
        assert_eq!(t.valid_up_mask(&none, t.cores()[0].id, DestKey(0)), 0);
        assert_eq!(t.valid_up_mask(&none, t.hosts()[0].id, DestKey(0)), 0);
    }
}

/// Asserts that exactly the listed (switch, key) masks changed, to the listed values.
fn assert_mask_changes(t: &Topology, failures: &FailedLinks, expected: &[(&str, u32, u64)]) {
    let before = all_masks(t, &FailedLinks::new());
    let after = all_masks(t, failures);
    let changed: BTreeSet<(String, u32, u64)> = after
        .iter()
        .filter(|(entry, mask)| before[entry] != **mask)
        .map(|((switch, key), mask)| (t.node(*switch).name.clone(), key.0, *mask))
        .collect();
    let expected: BTreeSet<(String, u32, u64)> = expected
        .iter()
        .map(|&(name, key, mask)| (name.to_owned(), key, mask))
        .collect();
    assert_eq!(changed, expected);
}

#[test]
fn one_agg_core_failure_removes_exactly_the_right_ports() {
    let t = fat_tree(4);
    // a-p0-0's up port 0 goes to c-0; c-0 is aggregation 0's first core in every pod.
    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    assert_mask_changes(
        &t,
        &failures,
        &[
            // a-p0-0 reaches no pod through c-0 any more.
            ("a-p0-0", 1, 0b10),
            ("a-p0-0", 2, 0b10),
            ("a-p0-0", 3, 0b10),
            // Nobody reaches pod 0 through c-0.
            ("a-p1-0", 0, 0b10),
            ("a-p2-0", 0, 0b10),
            ("a-p3-0", 0, 0b10),
        ],
    );
    // Edges are unaffected: c-1 still joins every aggregation 0.
    let edge = by_name(&t, "e-p0-0");
    assert_eq!(
        t.valid_up_ports(&failures, edge, DestKey(4)),
        [PortIndex(2), PortIndex(3)]
    );
    let agg = by_name(&t, "a-p0-0");
    assert_eq!(t.valid_up_ports(&failures, agg, DestKey(2)), [PortIndex(3)]);
}

#[test]
fn both_cores_of_an_aggregation_failing_moves_edges_off_it() {
    let t = fat_tree(4);
    let failures = failed(&t, &[("a-p0-0", "c-0"), ("a-p0-0", "c-1")]);
    let mut expected = Vec::new();
    for pod in 1..4 {
        expected.push(("a-p0-0", pod, 0));
        // Edges of pod 0 can no longer leave the pod through a-p0-0 …
        for edge in 2 * pod..2 * pod + 2 {
            expected.push(("e-p0-0", edge, 0b10));
            expected.push(("e-p0-1", edge, 0b10));
        }
    }
    // … and no edge elsewhere can enter pod 0 through aggregation 0.
    let names: Vec<String> = (1..4)
        .flat_map(|pod| {
            [
                format!("e-p{pod}-0"),
                format!("e-p{pod}-1"),
                format!("a-p{pod}-0"),
            ]
        })
        .collect();
    for name in &names {
        if name.starts_with('a') {
            expected.push((name.as_str(), 0, 0));
        } else {
            expected.push((name.as_str(), 0, 0b10));
            expected.push((name.as_str(), 1, 0b10));
        }
    }
    assert_mask_changes(&t, &failures, &expected);
}

#[test]
fn edge_agg_failure_removes_exactly_the_right_ports() {
    let t = fat_tree(4);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let mut expected = Vec::new();
    // e-p0-0 (edge number 0) loses up port 0 for every key …
    for key in 1..8 {
        expected.push(("e-p0-0".to_owned(), key, 0b10));
    }
    // … and every other edge loses aggregation 0 for key 0 (a-p?-0 leads to a-p0-0, which no
    // longer reaches e-p0-0).
    for edge in t.edges().iter().skip(1) {
        expected.push((edge.name.clone(), 0, 0b10));
    }
    let expected: Vec<(&str, u32, u64)> = expected
        .iter()
        .map(|(n, k, m)| (n.as_str(), *k, *m))
        .collect();
    assert_mask_changes(&t, &failures, &expected);
}

#[test]
fn leaf_spine_failure_removes_the_spine_for_that_leaf() {
    let t = leaf_spine(4);
    let failures = failed(&t, &[("leaf-1", "spine-0")]);
    let mut expected = vec![
        ("leaf-1", 0, 0b10),
        ("leaf-1", 2, 0b10),
        ("leaf-1", 3, 0b10),
    ];
    expected.extend([
        ("leaf-0", 1, 0b10),
        ("leaf-2", 1, 0b10),
        ("leaf-3", 1, 0b10),
    ]);
    assert_mask_changes(&t, &failures, &expected);
}

/// The up positions at `switch` through which some path leaves, towards `next` on the path.
fn used_positions<'a>(
    t: &Topology,
    switch: NodeId,
    paths: impl IntoIterator<Item = &'a Vec<NodeId>>,
) -> u64 {
    let up = t.up_ports(switch);
    let mut mask = 0;
    for path in paths {
        if let Some(at) = path.iter().position(|&n| n == switch) {
            if let Some(position) = up.iter().position(|p| p.peer == path[at + 1]) {
                mask |= 1 << position;
            }
        }
    }
    mask
}

/// valid_up_mask agrees with valid_paths: at the source edge, a port is valid iff some valid
/// path leaves through it; at an aggregation switch on the way, likewise as soon as the rest of
/// the way down (which the per-pod key cannot see) is alive.
fn check_masks_match_paths(t: &Topology, failures: &FailedLinks) {
    let alive = |a: NodeId, b: NodeId| failures.is_alive(t.link_between(a, b).unwrap());
    for src in t.hosts() {
        for dst in t.hosts() {
            let (src_edge, dst_edge) = (t.host_edge(src.id), t.host_edge(dst.id));
            if src_edge == dst_edge || !alive(src.id, src_edge) || !alive(dst.id, dst_edge) {
                continue;
            }
            let paths = t.valid_paths(failures, src.id, dst.id);
            let key = t.dest_key_for_host(src_edge, dst.id).unwrap();
            let mask = t.valid_up_mask(failures, src_edge, key);
            assert_eq!(
                mask,
                used_positions(t, src_edge, &paths),
                "{} -> {}",
                src.name,
                dst.name
            );
            let ports: Vec<PortIndex> = t
                .up_ports(src_edge)
                .iter()
                .enumerate()
                .filter(|(i, _)| mask >> i & 1 == 1)
                .map(|(_, p)| p.index)
                .collect();
            assert_eq!(t.valid_up_ports(failures, src_edge, key), ports);
            if src.pod == dst.pod || t.aggregations().is_empty() {
                continue;
            }
            for (position, up) in t.up_ports(src_edge).iter().enumerate() {
                let agg = up.peer;
                let dst_agg = t.up_ports(dst_edge)[position].peer;
                if !alive(src_edge, agg) || !alive(dst_agg, dst_edge) {
                    continue;
                }
                let key = t.dest_key_for_host(agg, dst.id).unwrap();
                let through_agg = paths.iter().filter(|path| path[2] == agg);
                assert_eq!(
                    t.valid_up_mask(failures, agg, key),
                    used_positions(t, agg, through_agg),
                    "{} -> {} via {}",
                    src.name,
                    dst.name,
                    t.node(agg).name
                );
            }
        }
    }
}

fn failure_sets(topology: &Topology, max: usize) -> impl Strategy<Value = FailedLinks> {
    let links: Vec<LinkId> = topology.links().iter().map(|l| l.id).collect();
    proptest::sample::subsequence(links, 0..=max).prop_map(FailedLinks::from_iter)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn masks_match_valid_paths_fat_tree_4(failures in failure_sets(&fat_tree(4), 24)) {
        check_masks_match_paths(&fat_tree(4), &failures);
    }

    #[test]
    fn masks_match_valid_paths_fat_tree_6(failures in failure_sets(&fat_tree(6), 60)) {
        check_masks_match_paths(&fat_tree(6), &failures);
    }

    #[test]
    fn masks_match_valid_paths_leaf_spine(
        failures in failure_sets(&leaf_spine(6), 20),
    ) {
        check_masks_match_paths(&leaf_spine(6), &failures);
    }
}
