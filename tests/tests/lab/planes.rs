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

/// `up` of a k = 4 fat tree × 2 planes under `lb`: 2 MB buffers, 1 Mbit/s links.
fn up_two_planes(lab: &LabGuard, lb: &str) {
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
        lb,
        "--buffer",
        "2MB",
        "--link-rate",
        "1mbit",
    ]);
}

/// A k = 4 fat tree × 2 planes: 16 hosts with two veths each (one to each plane's edge
/// switch, with that plane's address), pingall over both planes, then a 64 KB permutation
/// under `plane-spray` — every byte arrives exactly once and both planes carry half of it —
/// and one under `plane-hash` — every flow (one per host) uses exactly one plane, and both
/// planes are used by some flow. Then `down` leaves nothing behind.
pub(super) fn multi_plane_lab_sprays_over_both_planes_and_hashes_one_per_flow() {
    let _machine = serial();
    let lab = LabGuard::new("mp");
    up_two_planes(&lab, "ofan");
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

/// Plane 0's share of the DATA wire bytes of every repetition of `run`.
fn plane_0_shares(run: &RunOutput) -> Vec<f64> {
    plane_records(&run.results)
        .iter()
        .map(|planes| {
            let bytes: Vec<f64> = planes["wire_bytes"]
                .as_array()
                .expect("per-plane bytes")
                .iter()
                .map(|b| b.as_u64().unwrap() as f64)
                .collect();
            bytes[0] / bytes.iter().sum::<f64>()
        })
        .collect()
}

/// Plane 0's share of the DATA wire bytes the hosts whose names start with `prefix` sent, in
/// every repetition of `run` (their agents' reports, `runs/<repetition>/<host>.json`).
fn plane_0_shares_of(run: &RunOutput, prefix: &str) -> Vec<f64> {
    let mut repetitions: Vec<PathBuf> = std::fs::read_dir(run.dir.join("runs"))
        .expect("the repetitions' directories")
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_dir())
        .collect();
    repetitions.sort();
    repetitions
        .iter()
        .map(|repetition| {
            let mut bytes = [0.0; 2];
            for entry in std::fs::read_dir(repetition).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if !(name.starts_with(prefix) && name.ends_with(".json")) {
                    continue;
                }
                let report: Value =
                    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
                for (plane, sum) in bytes.iter_mut().enumerate() {
                    *sum += report["planes"]["wire_bytes"][plane].as_u64().unwrap() as f64;
                }
            }
            assert!(
                bytes[0] + bytes[1] > 0.0,
                "no report of {prefix}* in {repetition:?}"
            );
            bytes[0] / (bytes[0] + bytes[1])
        })
        .collect()
}

/// The endpoint plane in the lab: a k = 4 fat tree × 2 planes of `arf-wcmp` switches (so
/// notifications are on, and the lab has the edges pass them on to their hosts), one plane-0
/// link slowed to a quarter — `e-p0-0@0 ↔ a-p0-0@0`, the link the model's
/// `plane_arf_steers_by_the_views_its_edges_pass_on` slows: an edge's up-link, which its
/// edge and the edges next to it know (a core link is beyond every edge's two hops of remote
/// paths, and the aggregation switch routes around one of its two). No ECN marking and 2 MB
/// buffers, so that the notifications are all `plane-arf` hears. The same 256 KB permutation
/// (seeds 1 and 2, in which the two hosts under `e-p0-0@0` send beyond their edge) under
/// `plane-spray` and `plane-arf`: the hosts receive the relayed notifications, and the hosts
/// under `e-p0-0@0` — whose edge's own up-link it is, so every path of theirs in plane 0 is
/// rated by it — send a smaller share of their bytes through plane 0 under `plane-arf` than
/// under `plane-spray`: at least 3 points less on the mean. (All 16 hosts together moved
/// about a point: 48.3–49.4 % against 50.0 in four sittings, too close to the noise for a
/// bound — a first one of a point held with 0.05 to spare once; only 4 of 16 senders can
/// hear of this link.) Without the relay (the switches' `--arf-notify-hosts`) the hosts
/// hear nothing and `plane-arf` splits as `plane-spray` does (50.1 % of all bytes).
pub(super) fn multi_plane_arf_hosts_hear_their_edges_and_send_less_through_a_slowed_plane() {
    let _machine = serial();
    let lab = LabGuard::new("mpa");
    up_two_planes(&lab, "arf-wcmp");
    let pids = lab.switch_pids();
    lab.ok(&["link", "e-p0-0@0", "a-p0-0@0", "rate", "250kbit"]);
    let run = |tag: &str, policy: &str| {
        run_results(
            &lab,
            tag,
            &[
                "permutation",
                "--size",
                "256KB",
                "--repeat",
                "2",
                "--host-planes",
                policy,
            ],
        )
    };
    let spray = run("spray", "plane-spray");
    let arf = run("arf", "plane-arf");
    for output in [&spray, &arf] {
        for run in output.results["runs"].as_array().expect("runs") {
            assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
        }
    }
    // The edges passed notifications on, and the hosts took them, in plane 0 above all.
    let edge = lab.stats("e-p0-1@0");
    let relayed = arf_counter(&edge, "counters", "host_relayed");
    let told = arf_counter(&lab.stats("e-p0-0@0"), "counters", "host_told");
    assert!(relayed > 0 && told > 0, "relayed {relayed}, told {told}");
    let records = plane_records(&arf.results);
    for planes in &records {
        assert_eq!(planes["policy"], "plane-arf", "{planes}");
        let heard = &planes["notifications"];
        assert!(
            heard[0].as_u64().unwrap_or(0) > 0,
            "no notification reached a host in plane 0: {planes}"
        );
    }
    let mean = |shares: Vec<f64>| shares.iter().sum::<f64>() / shares.len() as f64;
    let (spray_all, arf_all) = (mean(plane_0_shares(&spray)), mean(plane_0_shares(&arf)));
    let under = "h-p0-e0-";
    let (spray_share, arf_share) = (
        mean(plane_0_shares_of(&spray, under)),
        mean(plane_0_shares_of(&arf, under)),
    );
    eprintln!(
        "plane 0's share of the bytes, all hosts: plane-spray {spray_all:.4}, plane-arf \
         {arf_all:.4}; hosts under e-p0-0: plane-spray {spray_share:.4}, plane-arf \
         {arf_share:.4}; plane-arf's planes records: {records:?}"
    );
    assert!(
        arf_share < spray_share - 0.03,
        "hosts under e-p0-0: plane-arf {arf_share:.4} against plane-spray {spray_share:.4}"
    );
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
