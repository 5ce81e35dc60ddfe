//! Root end-to-end tests of a BGP lab under RFC 7938's ASNs (`ofan-lab up --routing bgp
//! --asn-plan rfc7938`): the cores share one ASN and each pod's aggregation switches one, so an
//! AS_PATH names tiers; the switches learn their next-next hops by router ID from the routes'
//! next-next-hop tags (docs/adaptive-routing.md, "Next-next hops from BGP").
//!
//! Every lab is owned by a [`LabGuard`] (removed and checked also when a test fails). A root
//! suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::time::{Duration, Instant};

use ofan_lab::bgp::{expected_paths, reported_paths, AsnPlan};
use ofan_tests::serial;
use ofan_topology::{FailedLinks, Topology};

#[path = "lab/guard.rs"]
mod guard;
use guard::{pingall_passes, run_results, LabGuard};

/// The lab's topology, as its state directory keeps it.
fn lab_topology(lab: &LabGuard) -> Topology {
    let text = std::fs::read_to_string(lab.state_dir().join("topo.json")).expect("topo.json");
    Topology::from_json(&text).expect("a topology")
}

/// Waits (at most 10 s) until every switch's path table is the plan's under `failed` (pairs
/// of node names) with `asns`: each FIB next hop with its neighbour and the neighbour's own next
/// hops, by ASN and by router ID. Returns how long it took.
fn path_tables_match(lab: &LabGuard, asns: AsnPlan, failed: &[(&str, &str)]) -> Duration {
    let topology = lab_topology(lab);
    let id = |name: &str| topology.nodes().iter().find(|n| n.name == name).unwrap().id;
    let failures: FailedLinks = failed
        .iter()
        .map(|(a, b)| topology.link_between(id(a), id(b)).expect("a link"))
        .collect();
    let started = Instant::now();
    loop {
        let mismatch = topology.switches().iter().find_map(|switch| {
            let report: ofan_control::paths::PathReport =
                serde_json::from_value(lab.stats(&switch.name)["paths"].clone())
                    .expect("a path report");
            let (got, want) = (
                reported_paths(&report),
                expected_paths(&topology, asns, &failures, switch),
            );
            (got != want).then(|| (switch.name.clone(), got, want))
        });
        match mismatch {
            None => return started.elapsed(),
            Some((switch, got, want)) if started.elapsed() > Duration::from_secs(10) => {
                panic!("path table of {switch} after 10 s:\n{got:#?}\nplan:\n{want:#?}")
            }
            Some(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// `up` of a k = 4 FRR lab under `asns` running `arf-wcmp`, which must converge.
fn up_bgp_lab(lab: &LabGuard, asns: AsnPlan) {
    let up = lab.lab(&[
        "up",
        "--topo",
        "fat-tree",
        "--k",
        "4",
        "--routing",
        "bgp",
        "--asn-plan",
        asns.name(),
        "--lb",
        "arf-wcmp",
    ]);
    let stderr = String::from_utf8_lossy(&up.stderr);
    assert!(
        up.status.success(),
        "up --asn-plan {asns} failed:\n{stderr}"
    );
    assert!(stderr.contains("BGP converged"), "{stderr}");
    assert!(stderr.contains("BMP path tables complete"), "{stderr}");
}

/// A short `arf-wcmp` permutation on `lab`: it must deliver every packet exactly once; returns
/// its CCT (picoseconds).
fn permutation_cct(lab: &LabGuard, tag: &str) -> u64 {
    let output = run_results(lab, tag, &["permutation", "--size", "64KB", "--seed", "3"]);
    let run = &output.results["runs"][0];
    assert_eq!(run["setup"]["lb"], "arf-wcmp", "{run}");
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    assert_eq!(run["packets"]["flows_complete"], 16, "{}", run["packets"]);
    run["cct_ps"].as_u64().expect("a complete run has a CCT")
}

/// Under RFC 7938's ASNs a k = 4 FRR lab converges to the plan's routes without `allowas-in`,
/// every switch's path table names its next-next hops by router ID as the plan does — also after
/// a remote failure and its repair —, pingall passes, and an `arf-wcmp` permutation delivers
/// every packet exactly once.
fn rfc7938_lab_names_next_next_hops_by_router_id() {
    let _machine = serial();
    let lab = LabGuard::new("asn");
    let asns = AsnPlan::Rfc7938;
    up_bgp_lab(&lab, asns);
    let state = lab.state();
    assert_eq!(
        state["params"]["asn_plan"], "rfc7938",
        "{}",
        state["params"]
    );
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("routing bgp (frr, rfc7938 ASNs)"),
        "{status}"
    );
    let topology = lab_topology(&lab);
    let node = |name: &str| topology.nodes().iter().find(|n| n.name == name).unwrap();

    // The daemons were configured with the shared ASNs.
    let bgpd = std::fs::read_to_string(lab.state_dir().join("routing/a-p0-1/bgpd.conf"))
        .expect("a-p0-1's bgpd.conf");
    let pod_0 = asns.asn(&topology, node("a-p0-0"));
    assert!(bgpd.contains(&format!("router bgp {pod_0}\n")), "{bgpd}");
    assert!(!bgpd.contains("allowas-in"));

    assert_eq!(lab.stats("e-p0-0")["paths"]["source"], "bmp");
    let took = path_tables_match(&lab, asns, &[]);
    eprintln!(
        "rfc7938: path tables = plan {:.2} s after up",
        took.as_secs_f64()
    );
    // e-p0-0 towards pod 3: through each aggregation switch, one ASN (the cores') and two
    // router IDs behind it — what only the tags can say.
    let report: ofan_control::paths::PathReport =
        serde_json::from_value(lab.stats("e-p0-0")["paths"].clone()).unwrap();
    let route = report
        .routes
        .iter()
        .find(|route| route.prefix == "10.3.1.0/24")
        .expect("a route to 10.3.1.0/24");
    assert_eq!(route.hops.len(), 2, "{route:?}");
    for hop in &route.hops {
        assert_eq!(hop.next_next.len(), 1, "{hop:?}");
        assert_eq!(hop.next_next_ids.len(), 2, "{hop:?}");
    }
    // The switch's own identity in notifications is the plan's shared ASN.
    if let Some(asn) = lab.stats("a-p0-1")["adaptive_routing"]["asn"].as_u64() {
        assert_eq!(asn, u64::from(pod_0));
    }

    pingall_passes(&lab, 240);

    // A remote failure: a-p0-0 climbs through c-1 only, and its tags say so.
    lab.ok(&["link", "a-p0-0", "c-0", "down"]);
    let took = path_tables_match(&lab, asns, &[("a-p0-0", "c-0")]);
    eprintln!(
        "rfc7938: path tables follow a remote failure {:.2} s after convergence",
        took.as_secs_f64()
    );
    lab.ok(&["link", "a-p0-0", "c-0", "up"]);
    path_tables_match(&lab, asns, &[]);

    let cct = permutation_cct(&lab, "rfc7938");
    eprintln!(
        "rfc7938: arf-wcmp permutation CCT {:.3} ms",
        cct as f64 * 1e-9
    );
    let mut pids = lab.switch_pids();
    pids.sort_unstable();
    pids.dedup();
    lab.down_and_check(&pids);
}

/// The same permutation under `arf-wcmp` on a unique-ASN lab and an RFC 7938 lab: both complete
/// and deliver exactly once (the CCTs are printed, not compared: one run each, on a shared
/// machine).
fn arf_wcmp_runs_under_both_asn_plans() {
    let _machine = serial();
    let mut ccts: Vec<(AsnPlan, u64)> = Vec::new();
    for asns in AsnPlan::ALL {
        let lab = LabGuard::new(match asns {
            AsnPlan::Unique => "pu",
            AsnPlan::Rfc7938 => "pr",
        });
        up_bgp_lab(&lab, asns);
        path_tables_match(&lab, asns, &[]);
        ccts.push((asns, permutation_cct(&lab, asns.name())));
        let mut pids = lab.switch_pids();
        pids.sort_unstable();
        pids.dedup();
        lab.down_and_check(&pids);
    }
    let said: Vec<String> = ccts
        .iter()
        .map(|(asns, cct)| format!("{asns} {:.3} ms", *cct as f64 * 1e-9))
        .collect();
    eprintln!("arf-wcmp permutation CCT: {}", said.join(", "));
    assert_eq!(ccts.len(), 2);
}

/// `--asn-plan rfc7938` without BGP is refused before anything is built.
fn asn_plans_need_bgp() {
    let lab = LabGuard::new("asnx");
    let refused = lab.lab(&["up", "--asn-plan", "rfc7938"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        said.contains("--asn-plan rfc7938 needs --routing bgp"),
        "{said}"
    );
    assert!(!lab.state_dir().exists());
}

ofan_tests::root_tests!(
    asn_plans_need_bgp,
    rfc7938_lab_names_next_next_hops_by_router_id,
    arf_wcmp_runs_under_both_asn_plans,
);
