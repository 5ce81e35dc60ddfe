//! Root smoke test of `ofan-lab bench forward`: the benchmark behind README's forwarding table
//! still measures something — one short round of every candidate that needs nothing beyond the
//! project (`testpmd` is optional and left out), with `--check`, which fails when an ofan-switch
//! candidate (`ofan`, and `xdp`: the fast path) forwards less than half of what `bare` forwards
//! in the same round, and (with or
//! without it) when a candidate's drop counters explain its loss (a neighbour never resolved,
//! frames without a route). A functional check, not a timing target: half of `bare` leaves room
//! for any machine's noise.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::process::Command;
use std::time::{Duration, Instant};

use ofan_tests::{binary, namespaces_with_prefix, ofan_xdp_programs, serial, Lab};

/// Runs one short round of `ofan-lab bench forward --check` with `extra` arguments, prints its
/// output and fails unless it succeeded; returns the output.
fn bench_forward(extra: &[&str]) -> String {
    let output = Command::new(binary("ofan-lab"))
        .args([
            "bench",
            "forward",
            "--runs=1",
            "--seconds=1",
            "--warmup=0.5",
            "--check",
        ])
        .args(extra)
        .output()
        .expect("ofan-lab bench forward");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{text}");
    assert!(
        output.status.success(),
        "bench forward {extra:?} failed:\n{text}"
    );
    text
}

fn bench_forward_smoke_forwards_and_checks_against_bare() {
    let _machine = serial();
    let text = bench_forward(&["--candidates=ofan,xdp,bare,redirect"]);
    assert!(text.contains("check passed"), "{text}");
    // Every candidate measured, none unavailable.
    for candidate in ["`ofan`", "`xdp`", "`bare`", "`redirect`"] {
        let row = text
            .lines()
            .find(|line| line.starts_with(&format!("| {candidate}")))
            .unwrap_or_else(|| panic!("no row for {candidate}:\n{text}"));
        assert!(!row.contains("unavailable"), "{row}");
    }
    let left = namespaces_with_prefix("ofan-bench-");
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    assert_no_programs_left();
}

/// A run takes away what it built: its namespaces and processes, and with them the XDP
/// programs on their interfaces (the kernel dismantles a deleted namespace asynchronously: give
/// it 5 s; another lab's programs, if one is up, cannot be told from the run's). A program that
/// outlives its namespace means a process that still holds it.
fn assert_no_programs_left() {
    if !namespaces_with_prefix("ofan-").is_empty() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut programs = ofan_xdp_programs();
    while !programs.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        programs = ofan_xdp_programs();
    }
    assert!(
        programs.is_empty(),
        "XDP programs left loaded: {programs:?}"
    );
}

/// With two queues per veth, as on a NIC with RSS: the generator spreads its flows over both,
/// each ofan-switch candidate receives on both queues of p0 (a worker each) and sends on both
/// queues of p1 (each worker on its own), and the sink receives on both.
fn bench_forward_with_two_queues_uses_every_queue_both_ways() {
    let _machine = serial();
    let json = std::env::temp_dir().join(format!("ofan-bench-queues-{}.json", std::process::id()));
    bench_forward(&[
        "--queues=2",
        "--gen=afxdp",
        "--candidates=ofan,bare",
        &format!("--json={}", json.display()),
    ]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("--json")).unwrap();
    let _ = std::fs::remove_file(&json);
    for candidate in report["candidates"].as_array().unwrap() {
        let sample = &candidate["samples"][0];
        for field in ["queues", "dut_received_by_queue", "dut_sent_by_queue"] {
            let counts: Vec<u64> = sample[field]
                .as_array()
                .unwrap_or_else(|| panic!("{field}: {sample}"))
                .iter()
                .map(|count| count.as_u64().unwrap())
                .collect();
            assert!(
                counts.len() == 2 && counts.iter().all(|&count| count > 1000),
                "{}: {field} {counts:?}",
                candidate["name"]
            );
        }
    }
    assert_no_programs_left();
}

/// `bench forward --ports IN,OUT`, as on a box with real NICs: run inside a namespace whose
/// p0 and p1 lead to an outside generator and sink (here two more namespaces, with the
/// benchmark's own agents started by hand), it measures every candidate from the interfaces'
/// counters; interfaces that are not there are refused by name, before anything starts.
fn bench_forward_on_given_ports_measures_from_the_interfaces() {
    let _machine = serial();
    let missing = Command::new(binary("ofan-lab"))
        .args(["bench", "forward", "--ports", "ofan-nosuch0,ofan-nosuch1"])
        .output()
        .expect("ofan-lab");
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no interface `ofan-nosuch0`"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );

    let mut lab = Lab::new("ports");
    for ns in ["gen", "dut", "sink"] {
        lab.add_ns(ns);
        lab.exec(ns, &["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
    }
    lab.exec("dut", &["sysctl", "-qw", "net.ipv4.ip_forward=0"]);
    lab.link("gen", "eth0", "dut", "p0");
    lab.link("dut", "p1", "sink", "eth0");
    lab.addr("gen", "eth0", "10.0.0.2/24");
    lab.addr("dut", "p0", "10.0.0.1/24");
    lab.addr("dut", "p1", "10.0.1.1/24");
    lab.addr("sink", "eth0", "10.0.1.2/24");
    let mac = |ns: &str, ifname: &str| {
        let out = lab.exec(ns, &["cat", &format!("/sys/class/net/{ifname}/address")]);
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let (sink_mac, p0_mac) = (mac("sink", "eth0"), mac("dut", "p0"));
    lab.exec(
        "dut",
        &[
            "ip",
            "neigh",
            "replace",
            "10.0.1.2",
            "lladdr",
            &sink_mac,
            "dev",
            "p1",
            "nud",
            "permanent",
        ],
    );
    lab.exec(
        "dut",
        &[
            "ip",
            "route",
            "add",
            "10.1.0.0/16",
            "via",
            "10.0.1.2",
            "dev",
            "p1",
        ],
    );
    // The outside world: a sink and a generator that run until their stdin closes (when the lab
    // drops, or when it kills them).
    let ofan_lab = binary("ofan-lab").display().to_string();
    lab.spawn_held_open(
        "sink",
        "sink",
        &[&ofan_lab, "bench", "sink", "--interface", "eth0"],
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    lab.spawn_held_open(
        "gen",
        "gen",
        &[
            &ofan_lab,
            "bench",
            "gen",
            "--interface",
            "eth0",
            "--dst-mac",
            &p0_mac,
            "--cpu",
            "0",
        ],
    );
    let output = lab.try_exec(
        "dut",
        &[
            &ofan_lab,
            "bench",
            "forward",
            "--ports",
            "p0,p1",
            "--runs=1",
            "--seconds=1",
            "--warmup=0.5",
            "--candidates=ofan,xdp,bare,redirect",
            "--check",
        ],
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!("{text}");
    assert!(
        output.status.success(),
        "bench forward --ports failed:\n{text}\ngen: {}\nsink: {}",
        lab.log("gen"),
        lab.log("sink")
    );
    assert!(text.contains("check passed"), "{text}");
    for candidate in ["`ofan`", "`xdp`", "`bare`", "`redirect`"] {
        let row = text
            .lines()
            .find(|line| line.starts_with(&format!("| {candidate}")))
            .unwrap_or_else(|| panic!("no row for {candidate}:\n{text}"));
        let mpps: f64 = row.split("**").nth(1).and_then(|v| v.parse().ok()).unwrap();
        assert!(mpps > 0.01, "{row}");
    }
    drop(lab);
    assert_no_programs_left();
}

ofan_tests::root_tests!(
    bench_forward_smoke_forwards_and_checks_against_bare,
    bench_forward_with_two_queues_uses_every_queue_both_ways,
    bench_forward_on_given_ports_measures_from_the_interfaces
);
