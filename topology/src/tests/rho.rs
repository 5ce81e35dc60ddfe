//! ρ_max: the largest load every host can send at under failures, against hand computations.

use super::*;

// ---------------------------------------------------------------------------------------------
// ρ_max

/// Pairs every host with the host at the same (edge, slot) of pod `pod ^ 1`.
fn pod_swap(t: &Topology) -> TrafficMatrix {
    let pairs: Vec<(NodeId, NodeId)> = t
        .hosts()
        .iter()
        .map(|h| {
            let name = h.name.replacen(
                &format!("h-p{}-", h.pod.unwrap()),
                &format!("h-p{}-", h.pod.unwrap() ^ 1),
                1,
            );
            (h.id, by_name(t, &name))
        })
        .collect();
    TrafficMatrix::permutation(&pairs)
}

fn permutation_strategy(t: &Topology) -> impl Strategy<Value = TrafficMatrix> {
    let hosts: Vec<NodeId> = t.hosts().iter().map(|h| h.id).collect();
    Just(hosts.clone()).prop_shuffle().prop_map(move |dsts| {
        let pairs: Vec<_> = hosts.iter().copied().zip(dsts).collect();
        TrafficMatrix::permutation(&pairs)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn rho_is_exactly_one_for_permutations_without_failures(
        (k, leaf, matrix) in (prop_oneof![Just(4_u16), Just(6), Just(8)], any::<bool>())
            .prop_flat_map(|(k, leaf)| {
                let t = if leaf { leaf_spine(k) } else { fat_tree(k) };
                (Just(k), Just(leaf), permutation_strategy(&t))
            }),
    ) {
        let t = if leaf { leaf_spine(k) } else { fat_tree(k) };
        let none = FailedLinks::new();
        prop_assert_eq!(t.rho_max(&none, &matrix).unwrap(), 1.0);
        let loads = t.link_loads(&none, &matrix).unwrap();
        prop_assert!(loads.iter().all(|l| l.up <= 1.0 && l.down <= 1.0));
    }
}

#[test]
fn rho_hand_computed_edge_agg_failure_k4() {
    // Every host of pod 0 sends to its twin in pod 1 and back (likewise pods 2 and 3). With
    // e-p0-0 – a-p0-0 failed, e-p0-0 sends both its flows through a-p0-1 (load 2), and every
    // edge of pod 1 sends the flows for e-p0-0 through a-p1-1 only (load 2): ρ = 1/2.
    let t = fat_tree(4);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let matrix = pod_swap(&t);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 0.5);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    let load = |a, b| loads[link(&t, a, b).index()];
    assert_eq!(load("e-p0-0", "a-p0-1").up, 2.0);
    assert_eq!(load("e-p1-0", "a-p1-1").up, 2.0);
    assert_eq!(load("e-p1-0", "a-p1-0").up, 0.0);
    // a-p0-1 carries 2 (from e-p0-0) + 1 (half of e-p0-1's): 1.5 per core.
    assert_eq!(load("a-p0-1", "c-2").up, 1.5);
    assert_eq!(load("a-p0-0", "c-0").up, 0.5);
    // Down into e-p0-0 only from a-p0-1.
    assert_eq!(load("e-p0-0", "a-p0-1").down, 2.0);
    assert_eq!(load("h-p0-e0-h0", "e-p0-0").down, 1.0);
    // Without the failure everything is at exactly line rate.
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 1.0);
}

#[test]
fn rho_hand_computed_agg_core_failure_k4() {
    // a-p0-0 – c-0 failed: e-p0-0 and e-p0-1 each still send half of their 2 units through
    // a-p0-0 (c-1 is valid), which can only use c-1: load 2 on a-p0-0 → c-1, ρ = 1/2.
    let t = fat_tree(4);
    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    let matrix = pod_swap(&t);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    assert_eq!(loads[link(&t, "a-p0-0", "c-1").index()].up, 2.0);
    assert_eq!(loads[link(&t, "a-p0-0", "c-0").index()].up, 0.0);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 0.5);
}

#[test]
fn rho_hand_computed_edge_agg_failure_k6() {
    // k = 6, pods swapped as above, e-p0-0 – a-p0-0 failed. e-p0-0 splits its 3 units over 2
    // aggregations (1.5 each); e-p1-0 sends the 3 units for e-p0-0 through a-p1-1 and a-p1-2
    // (1.5 each). a-p1-1 gets 1.5 + 1 + 1 = 3.5 for pod 0, i.e. 7/6 per core. Max load 1.5:
    // ρ = 2/3.
    let t = fat_tree(6);
    let failures = failed(&t, &[("e-p0-0", "a-p0-0")]);
    let matrix = pod_swap(&t);
    let loads = t.link_loads(&failures, &matrix).unwrap();
    let load = |a, b| loads[link(&t, a, b).index()];
    assert_eq!(load("e-p0-0", "a-p0-1").up, 1.5);
    assert_eq!(load("e-p1-0", "a-p1-2").up, 1.5);
    assert_eq!(load("a-p1-1", "c-3").up, 7.0 / 6.0);
    assert_eq!(load("a-p0-1", "c-4").up, 7.0 / 6.0);
    assert_eq!(load("e-p0-1", "a-p0-1").up, 1.0);
    assert_eq!(t.rho_max(&failures, &matrix).unwrap(), 1.0 / 1.5);
}

#[test]
fn rho_counts_weights_and_host_links() {
    let t = fat_tree(4);
    let (a, b, c) = (
        by_name(&t, "h-p0-e0-h0"),
        by_name(&t, "h-p1-e0-h0"),
        by_name(&t, "h-p2-e0-h0"),
    );
    let mut matrix = TrafficMatrix::new();
    matrix.push(a, b, 0.5);
    matrix.push(a, c, 0.5);
    matrix.push(a, a, 7.0); // to itself: no load
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 1.0);
    matrix.push(a, b, 1.0);
    // Host link of a carries 2.
    assert_eq!(t.rho_max(&FailedLinks::new(), &matrix).unwrap(), 0.5);
    // Incast: three flows into b.
    let incast = TrafficMatrix::permutation(&[(a, b), (c, b), (by_name(&t, "h-p3-e1-h1"), b)]);
    assert_eq!(t.rho_max(&FailedLinks::new(), &incast).unwrap(), 1.0 / 3.0);
    assert_eq!(
        t.rho_max(&FailedLinks::new(), &TrafficMatrix::new())
            .unwrap(),
        1.0
    );
}

#[test]
fn rho_reports_disconnected_and_invalid_flows() {
    let t = fat_tree(4);
    let (src, dst) = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p1-e0-h0"));
    let matrix = TrafficMatrix::permutation(&[(dst, src), (src, dst)]);
    let cut = failed(&t, &[("e-p0-0", "a-p0-0"), ("e-p0-0", "a-p0-1")]);
    let error = t.rho_max(&cut, &matrix).unwrap_err();
    assert!(
        matches!(error, TopologyError::NoValidPath { src: s, dst: d } if (s, d) == (dst, src)),
        "{error}"
    );
    // A failed host link disconnects its host too.
    let cut = failed(&t, &[("h-p1-e0-h0", "e-p1-0")]);
    assert!(matches!(
        t.rho_max(&cut, &matrix),
        Err(TopologyError::NoValidPath { .. })
    ));
    // Cores 0 and 1 both lost towards pod 1: aggregation 0 of pod 0 cannot reach it, but
    // aggregation 1 can, so the flow survives.
    let partial = failed(&t, &[("a-p1-0", "c-0"), ("a-p1-0", "c-1")]);
    assert!(t.rho_max(&partial, &matrix).is_ok());

    let edge = by_name(&t, "e-p0-0");
    let bad_role = TrafficMatrix::permutation(&[(src, edge)]);
    assert!(matches!(
        t.rho_max(&FailedLinks::new(), &bad_role),
        Err(TopologyError::UnexpectedRole { node, expected: Role::Host, found: Role::Edge }) if node == edge
    ));
    let unknown = TrafficMatrix::permutation(&[(src, NodeId(999))]);
    assert!(matches!(
        t.rho_max(&FailedLinks::new(), &unknown),
        Err(TopologyError::UnknownNode { .. })
    ));
    for weight in [-1.0, f64::NAN, f64::INFINITY] {
        let mut matrix = TrafficMatrix::new();
        matrix.push(src, dst, weight);
        assert!(matches!(
            t.rho_max(&FailedLinks::new(), &matrix),
            Err(TopologyError::InvalidWeight { .. })
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// JSON

#[test]
fn json_round_trip() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(4), leaf_spine(8)] {
        assert_eq!(Topology::from_json(&t.to_json()).unwrap(), t);
        assert_eq!(Topology::from_json(&t.to_json_pretty()).unwrap(), t);
        let via_serde: Topology = serde_json::from_str(&t.to_json()).unwrap();
        assert_eq!(via_serde, t);
        // The cached dimensions are rebuilt: queries work on the copy.
        assert_eq!(via_serde.hosts().len(), t.hosts().len());
    }
    let t = fat_tree(4);
    let json: serde_json::Value = serde_json::from_str(&t.to_json()).unwrap();
    assert_eq!(json["kind"], serde_json::json!({ "fat_tree": { "k": 4 } }));
    assert_eq!(json["nodes"][0]["loopback"], "10.0.0.1");
    assert_eq!(json["nodes"][16]["role"], "edge");

    let failures = failed(&t, &[("a-p0-0", "c-0")]);
    let text = serde_json::to_string(&failures).unwrap();
    assert_eq!(
        serde_json::from_str::<FailedLinks>(&text).unwrap(),
        failures
    );
    let matrix = pod_swap(&t);
    let text = serde_json::to_string(&matrix).unwrap();
    assert_eq!(
        serde_json::from_str::<TrafficMatrix>(&text).unwrap(),
        matrix
    );
}

/// Applies `edit` to the JSON of a k = 4 fat tree and parses the result.
fn corrupted(edit: impl FnOnce(&mut serde_json::Value)) -> Result<Topology, TopologyError> {
    let mut json: serde_json::Value = serde_json::from_str(&fat_tree(4).to_json()).unwrap();
    edit(&mut json);
    Topology::from_json(&json.to_string())
}

#[test]
fn corrupted_json_is_rejected() {
    // A link end pointing at a port that does not exist.
    let error = corrupted(|j| j["links"][20]["b"][1] = 99.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink {
                link: LinkId(20),
                port: PortIndex(99),
                ..
            }
        ),
        "{error}"
    );
    // A link end pointing at a node that does not exist.
    let error = corrupted(|j| j["links"][3]["a"][0] = 5000.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink {
                link: LinkId(3),
                ..
            }
        ),
        "{error}"
    );
    // Two links swapped between ports: every link end is attached, but a port names the
    // wrong link.
    let error = corrupted(|j| {
        let ports = &mut j["nodes"][16]["ports"];
        let link0 = ports[0]["link"].clone();
        ports[0]["link"] = ports[1]["link"].clone();
        ports[1]["link"] = link0;
    })
    .unwrap_err();
    assert!(
        matches!(error, TopologyError::DanglingLink { .. }),
        "{error}"
    );
    // A peer that does not point back.
    let error = corrupted(|j| j["nodes"][16]["ports"][0]["peer_port"] = 1.into()).unwrap_err();
    assert!(
        matches!(
            error,
            TopologyError::DanglingLink { .. } | TopologyError::AsymmetricPeer { .. }
        ),
        "{error}"
    );
    // Ids that are not positions.
    let error = corrupted(|j| j["nodes"][7]["id"] = 8.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::NodeIdMismatch { position: 7, .. }),
        "{error}"
    );
    let error = corrupted(|j| j["links"][7]["id"] = 8.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::LinkIdMismatch { position: 7, .. }),
        "{error}"
    );
    // Consistent but not canonical: a changed address.
    let error = corrupted(|j| j["nodes"][33]["loopback"] = "10.255.9.9".into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::NonCanonical { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("loopback"), "{error}");
    // Wrong counts, wrong radix, not a topology at all.
    let error = corrupted(|j| {
        j["nodes"].as_array_mut().unwrap().pop();
    })
    .unwrap_err();
    assert!(
        matches!(error, TopologyError::CountMismatch { what: "nodes", .. }),
        "{error}"
    );
    let error = corrupted(|j| j["kind"]["fat_tree"]["k"] = 5.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::OddOrOutOfRangeK { k: 5 }),
        "{error}"
    );
    let error = corrupted(|j| j["kind"]["fat_tree"]["k"] = 6.into()).unwrap_err();
    assert!(
        matches!(error, TopologyError::CountMismatch { .. }),
        "{error}"
    );
    assert!(matches!(
        Topology::from_json("{"),
        Err(TopologyError::Parse { .. })
    ));
    assert!(matches!(
        Topology::from_json(r#"{"kind":{"fat_tree":{"k":4}},"nodes":[],"links":[],"x":1}"#),
        Err(TopologyError::Parse { .. })
    ));
    // serde's own entry point validates too.
    let mut json: serde_json::Value = serde_json::from_str(&fat_tree(4).to_json()).unwrap();
    json["links"][20]["b"][1] = 99.into();
    assert!(serde_json::from_value::<Topology>(json).is_err());
}

// ---------------------------------------------------------------------------------------------
// Timing

#[test]
fn serialization_rounds_up() {
    let paper = LinkParams::paper();
    // 4 178 B = 33 424 bit at 800 Gb/s = 41.78 ns.
    assert_eq!(paper.serialization_ps(4096 + 62 + 20), 41_780);
    // 84 B = 672 bit = 0.84 ns.
    assert_eq!(paper.serialization_ps(64 + 20), 840);
    assert_eq!(paper.serialization_ps(0), 0);
    // 1 B at 3 Gb/s = 8/3 ns = 2 666.67 ps, rounded up.
    let slow = LinkParams {
        rate_bps: 3_000_000_000,
        ..paper
    };
    assert_eq!(slow.serialization_ps(1), 2_667);
    assert_eq!(slow.serialization_ps(3), 8_000);
}

#[test]
fn cct_lower_bound_hand_computed() {
    // 115 000 ps per full frame, 25 000 ps per ACK, 1 000 ps propagation (see HAND_PARAMS).
    let params = crate::timing::HAND_PARAMS;
    let t = fat_tree(4);
    let bound = |flows: &[(NodeId, NodeId)], bytes| {
        t.cct_lower_bound_ps(
            &params,
            &BoundSystem::STORE_AND_FORWARD_AT_LINE_RATE,
            flows,
            bytes,
        )
    };
    let same_pod = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p0-e1-h0"));
    let other_pod = (by_name(&t, "h-p0-e0-h1"), by_name(&t, "h-p3-e1-h0"));
    // 250 B = 3 packets of 100, 100 and 50 B; the last frame is 65 B (65 000 ps).
    // Same pod, 4 hops: 2·115 000 (first two packets) + 65 000 (last packet) + 1 000
    // (propagation, hop 1) + 3·(65 000 + 1 000) (hops 2–4) + 4·(25 000 + 1 000) (ACK)
    // = 230 000 + 66 000 + 198 000 + 104 000 = 598 000.
    assert_eq!(bound(&[same_pod], 250), 598_000);
    // Between pods, 6 hops: 230 000 + 6·66 000 + 6·26 000 = 782 000; the bound is the max.
    assert_eq!(bound(&[same_pod, other_pod], 250), 782_000);
    // One packet under one edge (2 hops): 2·(65 000 + 1 000) + 2·26 000 = 184 000.
    let same_edge = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p0-e0-h1"));
    assert_eq!(bound(&[same_edge], 50), 184_000);
    assert_eq!(bound(&[same_edge], 0), 0);
    assert_eq!(bound(&[(same_edge.0, same_edge.0)], 250), 0);
    assert_eq!(bound(&[], 250), 0);
}

#[test]
fn cct_lower_bound_paper_worked_number() {
    // The numbers worked out in the `timing` module documentation.
    let t = fat_tree(12);
    let flow = (by_name(&t, "h-p0-e0-h0"), by_name(&t, "h-p11-e5-h5"));
    let bound = |send_rate| {
        let system = BoundSystem {
            send_rate,
            forwarding: Forwarding::StoreAndForward,
        };
        t.cct_lower_bound_ps(&LinkParams::paper(), &system, &[flow], 1 << 20)
    };
    assert_eq!(
        bound(SendRate::LINE),
        255 * 41_780 + 6 * (41_780 + 500_000) + 6 * (840 + 500_000)
    );
    assert_eq!(bound(SendRate::LINE), 16_909_620);
    assert_eq!(bound(SendRate::nearest(0.8)), 19_573_095);
}

#[test]
fn topology_kind_and_accessors() {
    let t = fat_tree(6);
    assert_eq!(t.kind(), TopologyKind::FatTree { k: 6 });
    assert_eq!(
        Topology::new(TopologyKind::LeafSpine { k: 6 }).unwrap(),
        leaf_spine(6)
    );
    let host = by_name(&t, "h-p2-e1-h2");
    assert_eq!(t.node(t.host_edge(host)).name, "e-p2-1");
    assert_eq!(t.get_node(NodeId(100_000)), None);
    assert_eq!(t.role(host), Role::Host);
    assert!(!Role::Host.is_switch() && Role::Core.is_switch());
}

#[test]
fn link_numbering_contract() {
    for t in [fat_tree(4), fat_tree(6), leaf_spine(6)] {
        let shape = t.shape();
        for host in t.hosts() {
            assert_eq!(shape.host_link(host.id), host.ports[0].link);
            assert_eq!(host.ports[0].link.index(), host.id.index());
        }
        for (number, edge) in (0..).zip(t.edges()) {
            for (up, port) in (0..).zip(t.up_ports(edge.id)) {
                assert_eq!(shape.edge_up_link(number, up), port.link, "{}", edge.name);
            }
        }
        for agg in t.aggregations() {
            let (pod, index) = (u32::from(agg.pod.unwrap()), u32::from(agg.index));
            for (up, port) in (0..).zip(t.up_ports(agg.id)) {
                assert_eq!(shape.agg_up_link(pod, index, up), port.link, "{}", agg.name);
            }
        }
        // Links are sorted by tier of their lower end.
        assert!(t
            .links()
            .windows(2)
            .all(|l| t.role(l[0].a.0) <= t.role(l[1].a.0)));
    }
}
