//! Multi-plane labs: every host a veth per plane, agents that choose each packet's plane.

use super::*;

/// The results' `planes` record of every repetition: per plane DATA bytes, and flows by the
/// number of planes they used.
fn plane_records(results: &Value) -> Vec<Value> {
    results["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|run| run["planes"].clone())
        .collect()
}

/// A k = 4 fat tree × 2 planes: 16 hosts with two veths each (one to each plane's edge
/// switch, with that plane's address), pingall over both planes, then a 64 KB permutation
/// under `plane-spray` — every byte arrives exactly once and both planes carry half of it —
/// and one under `plane-hash` — every flow (one per host) uses exactly one plane, and both
/// planes are used by some flow. Then `down` leaves nothing behind.
pub(super) fn multi_plane_lab_sprays_over_both_planes_and_hashes_one_per_flow() {
    let _machine = serial();
    let lab = LabGuard::new("mp");
    lab.ok(&[
        "up",
        "--topo",
        "multi-plane",
        "--planes",
        "2",
        "--plane-topo",
        "fat-tree",
        "--k",
        "4",
        "--lb",
        "ofan",
        "--buffer",
        "2MB",
        "--link-rate",
        "1mbit",
    ]);
    let pids = lab.switch_pids();
    let topology = Topology::from_json(
        &std::fs::read_to_string(lab.state_dir().join("topo.json")).expect("topo.json"),
    )
    .unwrap();
    assert_eq!(topology.planes(), 2);
    // Each host: one address per plane on its two ports.
    let host = &topology.hosts()[0];
    let namespace = format!("{}{}", lab.prefix(), host.name);
    let addresses = Command::new("ip")
        .args(["netns", "exec", &namespace, "ip", "-br", "-4", "addr"])
        .output()
        .expect("ip addr");
    let addresses = String::from_utf8_lossy(&addresses.stdout);
    for port in &host.ports {
        assert!(
            addresses.contains(&port.address.to_string()),
            "{} on {}: {addresses}",
            port.address,
            port.ifname
        );
    }
    // Every ordered pair reachable in each plane.
    pingall_passes(&lab, 240);

    let spray = run_results(
        &lab,
        "spray",
        &[
            "permutation",
            "--size",
            "64KB",
            "--host-planes",
            "plane-spray",
        ],
    );
    let run = &spray.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    assert_eq!(run["packets"]["flows_complete"], 16, "{}", run["packets"]);
    let planes = &plane_records(&spray.results)[0];
    assert_eq!(planes["policy"], "plane-spray", "{planes}");
    let bytes: Vec<u64> = planes["wire_bytes"]
        .as_array()
        .expect("per-plane bytes")
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    assert_eq!(bytes.len(), 2, "{planes}");
    let total: u64 = bytes.iter().sum();
    for (plane, &plane_bytes) in bytes.iter().enumerate() {
        // Round robin per flow: each plane within a packet per flow of half.
        assert!(
            plane_bytes * 5 >= total * 2,
            "plane {plane} carried {plane_bytes} of {total} bytes"
        );
    }
    assert_eq!(planes["flows_by_planes_used"][2], 16, "{planes}");
    // The switches of both planes forwarded DATA: each plane's edge switches sent frames up.
    for plane in 0..2 {
        let edge = format!("e-p0-0@{plane}");
        let up: u64 = port_tx(&lab, &edge)
            .iter()
            .filter(|(port, _)| {
                topology
                    .node(node_id(&topology, &edge))
                    .ports
                    .iter()
                    .any(|p| &p.ifname == *port && topology.node(p.peer).role.is_switch())
            })
            .map(|(_, tx)| tx)
            .sum();
        assert!(up > 0, "{edge} sent nothing up");
    }

    let hash = run_results(
        &lab,
        "hash",
        &[
            "permutation",
            "--size",
            "64KB",
            "--host-planes",
            "plane-hash",
        ],
    );
    let run = &hash.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    let planes = &plane_records(&hash.results)[0];
    assert_eq!(planes["policy"], "plane-hash", "{planes}");
    // One flow per host, each on exactly one plane; between them, both planes.
    assert_eq!(planes["flows_by_planes_used"][1], 16, "{planes}");
    assert_eq!(planes["flows_by_planes_used"][2], 0, "{planes}");
    for plane in 0..2 {
        assert!(
            planes["wire_bytes"][plane].as_u64().unwrap() > 0,
            "no flow hashed to plane {plane}: {planes}"
        );
    }
    lab.down_and_check(&pids);
}

fn node_id(topology: &Topology, name: &str) -> ofan_topology::NodeId {
    topology
        .nodes()
        .iter()
        .find(|node| node.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .id
}
