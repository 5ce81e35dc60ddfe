//! Root integration tests of the host traffic agent (`ofan-lab agent`) in network namespaces.
//!
//! Two host namespaces `a` (10.0.0.1) and `b`, joined by one veth (or, for the ECN test, by an
//! `ofan-switch` that marks CE). Each test writes a plan with `ofan-lab agent plan`, starts one
//! agent per host at a common CLOCK_MONOTONIC instant and checks the agents' JSON reports.
//! [`Lab`] deletes exactly the namespaces and kills exactly the processes a test made.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail. Build first:
//! `cargo build --release -p ofan-lab-cli` (and `--workspace --bins` for the switch test).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ofan_tests::{binary, serial, Lab};
use serde_json::Value;

/// Link rate the agents pace at.
const RATE: &str = "50mbit";
const RATE_BPS: f64 = 50e6;
/// Wire bytes of a full DATA packet (1472 B UDP payload: 1518 B frame + 20 B gap).
const WIRE_BYTES: f64 = 1538.0;
/// Data bytes per full packet (payload minus the 18-byte agent header).
const SEGMENT: u64 = 1454;

fn ofan_lab() -> String {
    let path = binary("ofan-lab");
    assert!(
        path.exists(),
        "build the binaries first: cargo build --release -p ofan-lab-cli"
    );
    path.display().to_string()
}

/// `ofan-lab ARGS…`, which must succeed; returns stdout.
fn lab_cli(args: &[&str]) -> String {
    let output = Command::new(ofan_lab())
        .args(args)
        .output()
        .expect("run ofan-lab");
    assert!(
        output.status.success(),
        "ofan-lab {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// a — veth — b on 10.0.0.0/31.
fn veth_pair(lab: &mut Lab) -> [(&'static str, &'static str); 2] {
    lab.add_ns("a");
    lab.add_ns("b");
    lab.link("a", "eth0", "b", "eth0");
    lab.addr("a", "eth0", "10.0.0.1/31");
    lab.addr("b", "eth0", "10.0.0.0/31");
    [("a", "10.0.0.1"), ("b", "10.0.0.0")]
}

/// Writes the hosts file and a matrix plan (`matrix` rows are sources, columns destinations).
fn plan(lab: &Lab, hosts: &[(&str, &str)], matrix: &str) -> PathBuf {
    let hosts_file = lab.dir().join("hosts");
    let text: String = hosts
        .iter()
        .map(|(name, addr)| format!("{name} {addr}\n"))
        .collect();
    std::fs::write(&hosts_file, text).unwrap();
    let matrix_file = lab.dir().join("matrix.csv");
    std::fs::write(&matrix_file, matrix).unwrap();
    let plan = lab.dir().join("plan.json");
    lab_cli(&[
        "agent",
        "plan",
        "matrix",
        "--hosts",
        hosts_file.to_str().unwrap(),
        "--matrix",
        matrix_file.to_str().unwrap(),
        "--collective-id",
        "42",
        "--out",
        plan.to_str().unwrap(),
    ]);
    plan
}

/// Starts one agent per host at one instant (1 s ahead), waits for all, returns their reports.
fn run_agents(lab: &mut Lab, plan: &Path, hosts: &[&str], extra: &[&str]) -> Vec<Value> {
    run_agents_with(lab, plan, hosts, extra, |_| {})
}

/// [`run_agents`], calling `during` once the agents are started (before `--start-at`).
fn run_agents_with(
    lab: &mut Lab,
    plan: &Path,
    hosts: &[&str],
    extra: &[&str],
    during: impl FnOnce(&mut Lab),
) -> Vec<Value> {
    let bin = ofan_lab();
    let start = lab_cli(&["agent", "clock", "--plus", "1s"])
        .trim()
        .to_owned();
    let outs: Vec<PathBuf> = hosts
        .iter()
        .map(|host| lab.dir().join(format!("{host}.json")))
        .collect();
    for (host, out) in hosts.iter().zip(&outs) {
        let mut command = vec![
            bin.as_str(),
            "agent",
            "--plan",
            plan.to_str().unwrap(),
            "--host",
            host,
            "--start-at",
            &start,
            "--link-rate",
            RATE,
            "--timeout",
            "20",
            "--out",
            out.to_str().unwrap(),
        ];
        command.extend_from_slice(extra);
        lab.spawn(host, &format!("agent-{host}"), &command);
    }
    during(lab);
    let deadline = Instant::now() + Duration::from_secs(40);
    while hosts
        .iter()
        .any(|host| lab.running(&format!("agent-{host}")))
    {
        assert!(Instant::now() < deadline, "agents did not finish");
        std::thread::sleep(Duration::from_millis(50));
    }
    hosts
        .iter()
        .zip(&outs)
        .map(|(host, out)| {
            let text = std::fs::read_to_string(out).unwrap_or_else(|_| {
                panic!(
                    "agent {host} wrote no report:\n{}",
                    lab.log(&format!("agent-{host}"))
                )
            });
            serde_json::from_str(&text).expect("report JSON")
        })
        .collect()
}

fn u64_of(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not a u64"))
}

fn tx_counters(lab: &Lab, ns: &str) -> (u64, u64) {
    let read = |name: &str| -> u64 {
        let path = format!("/sys/class/net/eth0/statistics/{name}");
        let out = lab.exec(ns, &["cat", &path]);
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    };
    (read("tx_bytes"), read("tx_packets"))
}

/// The default schedule (continue from now when late) never sends faster than requested and,
/// on the sender's real-time thread, loses little, and the agent's wire-byte count agrees with
/// the kernel's interface counters. How close to the rate an agent keeps is the machine's
/// business, not an invariant: it is measured, not tested (every `ofan-lab run` reports it as
/// `fidelity.agent_rate_ratio_min`; see docs/experiments.md), so this checks a loose bound.
fn agent_default_pacing_never_exceeds_the_rate() {
    let _machine = serial();
    let mut lab = Lab::new("pace0");
    let hosts = veth_pair(&mut lab);
    let bytes = 2_000 * SEGMENT; // ~0.5 s
    let plan = plan(&lab, &hosts, &format!("0,{bytes}\n0,0\n"));
    let before = tx_counters(&lab, "a");
    // Spinning through the whole 240 µs gap between departures: a sender that sleeps lets
    // this VM's CPU halt, and waking a halted virtual CPU waits for the hypervisor — with the
    // default 50 µs spin the sender kept only 0.67–0.86 of its rate on a busy host
    // (2026-12-01), 0.95+ on a quiet one. The schedule under test is the same either way.
    let reports = run_agents(
        &mut lab,
        &plan,
        &["a", "b"],
        &["--rt-priority", "10", "--spin-us", "300"],
    );
    let after = tx_counters(&lab, "a");
    let pacing = &reports[0]["pacing"];
    assert_eq!(pacing["requested_bps"].as_f64(), Some(RATE_BPS), "{pacing}");
    let ratio = pacing["achieved_bps"].as_f64().unwrap() / RATE_BPS;
    // Never above; below only by what a busy machine's late wake-ups cost (a clean-clone CI
    // run kept 0.874 on 2026-12-02, with the build's tail on the other CPU): 0.75 still fails a
    // schedule that waits a gap too many.
    assert!((0.75..=1.000_01).contains(&ratio), "{ratio:.4}: {pacing}");
    assert_eq!(pacing["catch_up"], false);
    // The mean lateness lies within what the percentiles bound, and every send took time.
    let field = |name: &str| pacing[name].as_u64().unwrap();
    assert!(field("late_mean_ns") <= field("late_max_ns"), "{pacing}");
    assert!(field("send_mean_ns") > 0, "{pacing}");
    // Paced departures: 2000 DATA packets and any spurious retransmission (a late timer on a
    // busy machine; nothing is lost on a veth pair).
    let retransmits = u64_of(&reports[0]["flows"][0]["retransmits"]);
    assert_eq!(u64_of(&pacing["packets"]), 2_000 + retransmits, "{pacing}");
    assert_eq!(reports[0]["complete"], true, "{}", reports[0]);

    // The kernel saw the same bytes: frames without FCS, so add 4 + 20 per packet. Only `a`
    // transmits DATA (b sends the ACKs); a few ARP frames may add to the count.
    let frames = after.1 - before.1;
    let kernel_wire = (after.0 - before.0) + frames * 24;
    let agent_wire = u64_of(&pacing["wire_bytes"]);
    assert!(
        kernel_wire >= agent_wire && kernel_wire - agent_wire < 1_000,
        "kernel {kernel_wire} B vs agent {agent_wire} B on the wire"
    );
}

/// A 1 MB flow each way: every sequence number arrives exactly once, every packet is ACKed,
/// and the CCT is recorded and not below the serialization bound.
///
/// Nothing is lost on a veth pair, so a retransmission can only be spurious: a timer (`rto_min`
/// is 16 frame times, 3.9 ms at 50 Mbit/s — a datacenter transport's) that fired while the
/// machine did not run the receiver or the sender's ACK path. That is the transport working as
/// specified on a busy machine, not a bug, so it is allowed and must be accounted exactly: each
/// one reaches the other side as a counted duplicate (never a second delivery) and comes back
/// as a duplicate ACK. The agents run at real-time priority to make such late wake-ups rare.
fn agent_delivers_each_packet_exactly_once_and_records_cct() {
    let _machine = serial();
    let mut lab = Lab::new("once");
    let hosts = veth_pair(&mut lab);
    let plan = plan(&lab, &hosts, "0,1048576\n1048576,0\n");
    let extra = ["--host-lb", "spray", "--rt-priority", "10"];
    let reports = run_agents(&mut lab, &plan, &["a", "b"], &extra);
    let packets = 1_048_576_u64.div_ceil(SEGMENT); // 722
    for (report, peer) in reports.iter().zip(reports.iter().rev()) {
        assert_eq!(report["complete"], true, "{report}");
        assert_eq!(report["collective"], 42);
        let flow = &report["flows"][0];
        assert_eq!(u64_of(&flow["packets"]), packets, "{flow}");
        assert_eq!(u64_of(&flow["acks"]), packets, "{flow}");
        assert!(u64_of(&flow["first_send_ns"]) >= u64_of(&report["start_ns"]));
        assert!(u64_of(&flow["last_ack_ns"]) > u64_of(&flow["last_send_ns"]));
        let received = &report["received"][0];
        assert_eq!(u64_of(&received["expected"]), packets, "{received}");
        // `packets` counts every arrival, a spurious retransmission's duplicate too.
        let arrivals = u64_of(&received["packets"]);
        assert_eq!(
            arrivals - u64_of(&received["duplicates"]),
            packets,
            "{received}"
        );
        assert_eq!(u64_of(&received["missing"]), 0, "{received}");
        for (counter, value) in report["ignored"].as_object().unwrap() {
            assert_eq!(value, 0, "ignored.{counter} in {report}");
        }
        assert!(
            u64_of(&report["entropy"]["pool"]) > 1,
            "spray uses a pool of source ports"
        );

        // Spurious retransmissions (see above), each accounted on both sides.
        let spurious = u64_of(&flow["retransmits"]);
        let duplicates = u64_of(&peer["received"][0]["duplicates"]);
        assert_eq!(duplicates, spurious, "{flow} vs {}", peer["received"][0]);
        assert_eq!(u64_of(&flow["duplicate_acks"]), spurious, "{flow}");
        // A timer shorter than the round trip would retransmit nearly every packet; a stall of
        // the machine retransmits the packets in flight when it began and those sent while it
        // lasted, 16 per rto_min (3.9 ms) — one 10-packet burst failed a 1 % bound in a
        // clean-clone CI on 2026-12-02, on a VM that lost 3-5 % of each CPU in stalls of up to
        // 40 ms (`ofan-lab bench stalls`). 10 % still fails a broken timer.
        assert!(
            spurious <= packets / 10,
            "{spurious} spurious retransmissions: {flow}"
        );
        if spurious > 0 {
            eprintln!("note: {spurious} spurious retransmission(s) (late timer on a busy machine)");
        }
    }

    let a = lab.dir().join("a.json");
    let b = lab.dir().join("b.json");
    let summary = ofan_tests::key_values(&lab_cli(&[
        "agent",
        "cct",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]));
    assert_eq!(summary["complete"], "true");
    let cct_ns: f64 = summary["cct_ns"].parse().unwrap();
    // Lower bound: 722 packets back to back at 50 Mbit/s (the last one shorter).
    let bound_ns = (packets - 1) as f64 * WIRE_BYTES * 8.0 / RATE_BPS * 1e9;
    assert!(
        cct_ns >= bound_ns && cct_ns < 5.0 * bound_ns,
        "CCT {cct_ns} ns vs serialization bound {bound_ns} ns"
    );
}

/// a (10.0.0.1) — `ofan-switch` in `sw`, ports p0 and p1, with `switch_args` — b (10.0.1.1).
/// Returns the switch's admin socket once it answers.
fn switch_between(lab: &mut Lab, switch_args: &[&str]) -> String {
    let switch = binary("ofan-switch");
    assert!(
        switch.exists(),
        "build the binaries first: cargo build --release --workspace --bins"
    );
    lab.add_ns("a");
    lab.add_ns("sw");
    lab.add_ns("b");
    lab.link("a", "eth0", "sw", "p0");
    lab.link("b", "eth0", "sw", "p1");
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("a", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("b", "eth0", "10.0.1.1/31", "10.0.1.0");
    let socket = lab.dir().join("sw.sock").display().to_string();
    let mut command = vec![
        switch.to_str().unwrap(),
        "--admin-socket",
        &socket,
        "--port",
        "p0:host",
        "--port",
        "p1:host",
    ];
    command.extend_from_slice(switch_args);
    lab.spawn("sw", "switch", &command);
    let up = lab.wait_for(Duration::from_secs(10), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    assert!(up, "switch did not come up:\n{}", lab.log("switch"));
    socket
}

/// Through an `ofan-switch` that shapes to 40 Mbit/s and marks CE above 3 KB, DATA sent at
/// 50 Mbit/s gets CE-marked; the receiver echoes every mark in its ACK, and REPS recycles only
/// entropies of unmarked ACKs.
fn agent_echoes_ce_through_a_marking_switch() {
    let _machine = serial();
    let mut lab = Lab::new("ecn");
    switch_between(
        &mut lab,
        &["--link-rate", "40mbit", "--ecn-threshold", "3KB"],
    );

    let hosts = [("a", "10.0.0.1"), ("b", "10.0.1.1")];
    let plan = plan(&lab, &hosts, "0,1048576\n0,0\n");
    let reports = run_agents(&mut lab, &plan, &["a", "b"], &["--host-lb", "reps"]);
    let (a, b) = (&reports[0], &reports[1]);
    assert_eq!(a["complete"], true, "{a}");
    assert_eq!(b["complete"], true, "{b}");
    let flow = &a["flows"][0];
    let packets = u64_of(&flow["packets"]);
    let marked = u64_of(&flow["ce_marks"]);
    assert!(
        marked > 0 && marked < packets,
        "{marked} of {packets} ACKs echo CE"
    );
    // Every CE-marked DATA packet gets a CE-echo ACK. A spurious retransmission (a late timer
    // on a busy machine) arrives as a duplicate, marked too, whose echo comes back as a
    // duplicate ACK the sender does not count again: at most one uncounted echo per duplicate.
    let received = &b["received"][0];
    let marked_at_b = u64_of(&received["ce_marks"]);
    let duplicates = u64_of(&received["duplicates"]);
    assert!(
        marked <= marked_at_b && marked_at_b - marked <= duplicates,
        "{marked} CE echoes for {marked_at_b} marked arrivals, {duplicates} duplicates: {flow} vs {received}"
    );
    assert_eq!(
        duplicates,
        u64_of(&flow["retransmits"]),
        "{flow} vs {received}"
    );
    let entropy = &a["entropy"];
    let (recycled, fresh) = (u64_of(&entropy["recycled"]), u64_of(&entropy["fresh"]));
    // One entropy per departure, retransmissions included.
    let departures = packets + u64_of(&flow["retransmits"]);
    assert_eq!(recycled + fresh, departures, "{entropy}");
    assert!(fresh > 0, "REPS explores at the start: {entropy}");
    assert!(
        recycled <= packets - marked,
        "only unmarked ACKs are recycled: {entropy}, {marked} marked"
    );
}

/// Through an `ofan-switch` port shaped to 40 Mbit/s with an 8 KB buffer, DATA sent at 50 Mbit/s
/// overflows the buffer and is tail-dropped: the sender's selective repeat retransmits every
/// lost packet after its timeout, the flow completes with every packet delivered, and the drops
/// the switch counted are all made up for (each dropped DATA frame is retransmitted at least
/// once; only DATA is dropped here, the ACK direction carries 64-byte frames at a fifth of its
/// rate).
fn agent_recovers_every_packet_a_switch_drops() {
    let _machine = serial();
    let mut lab = Lab::new("loss");
    let socket = switch_between(&mut lab, &["--link-rate", "40mbit", "--buffer", "8KB"]);

    let hosts = [("a", "10.0.0.1"), ("b", "10.0.1.1")];
    let plan = plan(&lab, &hosts, "0,1048576\n0,0\n");
    let reports = run_agents(&mut lab, &plan, &["a", "b"], &[]);
    let (a, b) = (&reports[0], &reports[1]);
    assert_eq!(a["complete"], true, "{a}");
    assert_eq!(b["complete"], true, "{b}");
    let flow = &a["flows"][0];
    let packets = u64_of(&flow["packets"]);
    assert_eq!(u64_of(&flow["acks"]), packets, "{flow}");
    let retransmits = u64_of(&flow["retransmits"]);
    let received = &b["received"][0];
    assert_eq!(u64_of(&received["missing"]), 0, "{received}");
    assert!(
        u64_of(&received["duplicates"]) <= retransmits,
        "every duplicate is a retransmitted copy: {received}, {retransmits} retransmitted"
    );

    let output = Command::new(binary("ofan-switch"))
        .args(["stats", "--json", "--socket", &socket])
        .output()
        .expect("ofan-switch stats");
    let stats: Value = serde_json::from_slice(&output.stdout).expect("stats JSON");
    let p1 = stats["data_path"]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|port| port["name"] == "p1"))
        .unwrap_or_else(|| panic!("no port p1 in {stats}"));
    let dropped = u64_of(&p1["drops_buffer"]);
    assert!(
        dropped > 0,
        "50 Mbit/s into 40 with 8 KB of buffer must drop: {p1}"
    );
    assert!(
        retransmits >= dropped,
        "{dropped} DATA frames dropped, only {retransmits} retransmitted"
    );
    eprintln!(
        "{packets} packets, {dropped} dropped at the switch, {retransmits} retransmitted, {} \
         duplicates, recovery {}",
        received["duplicates"], a["recovery"]
    );
    let recovery = &a["recovery"];
    assert_eq!(
        u64_of(&recovery["retransmissions"]),
        retransmits,
        "{recovery}"
    );
    assert!(u64_of(&recovery["rtt_samples"]) > 0, "{recovery}");
    // The drops cost time: the CCT exceeds the 1 MB's serialization at the switch's 40 Mbit/s.
    let cct_ns = u64_of(&flow["last_ack_ns"]) - u64_of(&flow["first_send_ns"]);
    let bottleneck_ns = (packets - 1) as f64 * WIRE_BYTES * 8.0 / 40e6 * 1e9;
    assert!(
        cct_ns as f64 > bottleneck_ns,
        "CCT {cct_ns} ns vs {bottleneck_ns} ns"
    );
}

/// A third namespace `m`, one hop from `b`, sends DATA packets of the run's collective and
/// flow (a → b) during the run, sequence numbers 0…199, from its own address: `b` must neither
/// ACK nor record them (else they could fake the delivery of a's packets) and counts each as
/// `ignored.wrong_source`; 50 more of another collective are counted as foreign. The real flow
/// is delivered exactly as without them.
fn agent_rejects_forged_data_from_a_third_host() {
    let _machine = serial();
    let mut lab = Lab::new("forge");
    let hosts = veth_pair(&mut lab);
    lab.add_ns("m");
    lab.link("b", "eth1", "m", "eth0");
    lab.addr("b", "eth1", "10.0.2.0/31");
    lab.host("m", "eth0", "10.0.2.1/31", "10.0.2.0");
    let plan = plan(&lab, &hosts, "0,1048576\n0,0\n");
    let udp = binary("ofan-udp").display().to_string();
    let reports = run_agents_with(
        &mut lab,
        &plan,
        &["a", "b"],
        &["--rt-priority", "10"],
        |lab| {
            // Once b's agent listens (its socket queues what comes before its start).
            let bound = lab.wait_for(Duration::from_secs(5), || {
                let out = lab.exec("b", &["ss", "-Hnlu", "sport = :7000"]);
                !String::from_utf8_lossy(&out.stdout).trim().is_empty()
            });
            assert!(bound, "b's agent never bound UDP 7000");
            for (collective_flow, count) in [("42:0", "200"), ("41:0", "50")] {
                let out = lab.exec(
                    "m",
                    &[
                        &udp,
                        "send",
                        "--to",
                        "10.0.0.0:7000",
                        "--count",
                        count,
                        "--size",
                        "1472",
                        "--agent-data",
                        collective_flow,
                    ],
                );
                let sent = ofan_tests::key_values(&String::from_utf8_lossy(&out.stdout));
                assert_eq!(sent["sent"], count, "{sent:?}");
            }
        },
    );
    let (a, b) = (&reports[0], &reports[1]);
    assert_eq!(a["complete"], true, "{a}");
    assert_eq!(b["complete"], true, "{b}");
    let ignored = &b["ignored"];
    assert_eq!(u64_of(&ignored["wrong_source"]), 200, "{ignored}");
    assert_eq!(u64_of(&ignored["foreign_collective"]), 50, "{ignored}");
    let packets = 1_048_576_u64.div_ceil(SEGMENT);
    let received = &b["received"][0];
    let flow = &a["flows"][0];
    assert_eq!(u64_of(&received["expected"]), packets, "{received}");
    assert_eq!(u64_of(&received["missing"]), 0, "{received}");
    // Only a's own (spurious) retransmissions may arrive twice; no forged packet is recorded.
    let retransmits = u64_of(&flow["retransmits"]);
    assert_eq!(
        u64_of(&received["packets"]),
        packets + u64_of(&received["duplicates"]),
        "{received}"
    );
    assert_eq!(
        u64_of(&received["duplicates"]),
        retransmits,
        "{received} vs {flow}"
    );
    assert_eq!(u64_of(&b["acks_sent"]), packets + retransmits, "{b}");
    assert_eq!(u64_of(&a["ignored"]["wrong_source"]), 0, "{a}");
}

ofan_tests::root_tests!(
    agent_rejects_forged_data_from_a_third_host,
    agent_default_pacing_never_exceeds_the_rate,
    agent_delivers_each_packet_exactly_once_and_records_cct,
    agent_echoes_ce_through_a_marking_switch,
    agent_recovers_every_packet_a_switch_drops,
);
