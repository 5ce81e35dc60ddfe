//! Root integration tests of `ofan-switch` in network namespaces.
//!
//! Each test builds its own namespaces with a unique prefix through [`Lab`], which deletes
//! exactly what it made and kills exactly the processes it started, also on failure. Tests check
//! the data path's own counters, not only that traffic arrives: with forwarding enabled in the
//! switch namespace the kernel could otherwise forward frames the data path failed to take.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::time::Duration;

use ofan_tests::{binary, key_values, serial, Lab};
use serde_json::Value;

/// host h1 — switch — host h2, the switch's ports on 10.0.0.0/31 and 10.0.1.0/31.
fn two_hosts(lab: &mut Lab, extra_args: &[&str]) {
    lab.add_ns("h1");
    lab.add_ns("sw");
    lab.add_ns("h2");
    lab.link("h1", "eth0", "sw", "p0");
    lab.link("h2", "eth0", "sw", "p1");
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("h2", "eth0", "10.0.1.1/31", "10.0.1.0");
    // IPv6 beside IPv4: fd00:0::/127 and fd00:1::/127.
    lab.exec("sw", &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    for (ns, ifname, cidr) in [
        ("sw", "p0", "fd00:0::/127"),
        ("sw", "p1", "fd00:1::/127"),
        ("h1", "eth0", "fd00:0::1/127"),
        ("h2", "eth0", "fd00:1::1/127"),
    ] {
        lab.exec(
            ns,
            &["ip", "-6", "addr", "add", cidr, "dev", ifname, "nodad"],
        );
    }
    lab.exec(
        "h1",
        &["ip", "-6", "route", "add", "default", "via", "fd00:0::"],
    );
    lab.exec(
        "h2",
        &["ip", "-6", "route", "add", "default", "via", "fd00:1::"],
    );
    start_switch(
        lab,
        "sw",
        &["--port", "p0:host", "--port", "p1:host"],
        extra_args,
    );
}

fn socket(lab: &Lab, ns: &str) -> String {
    lab.dir().join(format!("{ns}.sock")).display().to_string()
}

fn start_switch(lab: &mut Lab, ns: &str, ports: &[&str], extra_args: &[&str]) {
    let switch = binary("ofan-switch");
    assert!(
        switch.exists(),
        "build the binaries first: cargo build --workspace --bins"
    );
    let socket = socket(lab, ns);
    let mut command = vec![
        switch.to_str().unwrap(),
        "--admin-socket",
        socket.as_str(),
        "--log",
        "info",
    ];
    command.extend_from_slice(ports);
    command.extend_from_slice(extra_args);
    let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    lab.spawn(ns, &format!("switch-{ns}"), &command);
    let up = lab.wait_for(Duration::from_secs(10), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    assert!(
        up,
        "switch in {ns} did not come up:\n{}",
        lab.log(&format!("switch-{ns}"))
    );
}

fn stats(lab: &Lab, ns: &str) -> Value {
    let output = std::process::Command::new(binary("ofan-switch"))
        .args(["stats", "--json", "--socket", &socket(lab, ns)])
        .output()
        .expect("ofan-switch stats");
    assert!(
        output.status.success(),
        "stats failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stats JSON")
}

fn counter(stats: &Value, name: &str) -> u64 {
    stats["data_path"]["counters"]
        .as_array()
        .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
        .and_then(|pair| pair[1].as_u64())
        .unwrap_or(0)
}

fn port<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["data_path"]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no port {name} in stats"))
}

fn ping(lab: &Lab, from: &str, to: &str, count: u32) -> bool {
    lab.try_exec(
        from,
        &[
            "ping",
            "-c",
            &count.to_string(),
            "-i",
            "0.05",
            "-W",
            "1",
            to,
        ],
    )
    .status
    .success()
}

/// Sends `count` UDP datagrams from `from` to `to_addr` and returns the receiver's report.
fn udp_burst(
    lab: &mut Lab,
    from: &str,
    to: &str,
    to_addr: &str,
    count: u64,
    rate: u64,
) -> std::collections::BTreeMap<String, String> {
    let udp = binary("ofan-udp");
    let udp = udp.to_str().unwrap().to_owned();
    let label = format!("recv-{to}-{count}");
    let count_text = count.to_string();
    lab.spawn(
        to,
        &label,
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9000",
            "--count",
            &count_text,
            "--timeout-ms",
            "3000",
        ],
    );
    assert!(lab.wait_for(Duration::from_secs(5), || lab.log(&label).contains("ready")));
    let target = format!("{to_addr}:9000");
    let sent = lab.exec(
        from,
        &[
            &udp,
            "send",
            "--to",
            &target,
            "--count",
            &count_text,
            "--size",
            "200",
            "--rate",
            &rate.to_string(),
            "--flows",
            "8",
        ],
    );
    let sent = key_values(&String::from_utf8_lossy(&sent.stdout));
    assert_eq!(
        sent["sent"], count_text,
        "sender could not send everything: {sent:?}"
    );
    assert!(lab.wait_for(Duration::from_secs(15), || lab
        .log(&label)
        .contains("received=")));
    key_values(&lab.log(&label))
}

fn host_switch_host_ping_udp_and_tcp() {
    let _machine = serial();
    let mut lab = Lab::new("fwd");
    two_hosts(&mut lab, &[]);
    assert!(
        ping(&lab, "h1", "10.0.1.1", 5),
        "ping h1 → h2 failed:\n{}",
        lab.log("switch-sw")
    );
    // The first IPv6 packets wait for neighbour discovery (the kernel does it; the mirror asks).
    let v6_up = lab.wait_for(Duration::from_secs(5), || ping(&lab, "h1", "fd00:1::1", 1));
    assert!(
        v6_up && ping(&lab, "h1", "fd00:1::1", 5),
        "IPv6 ping h1 → h2 failed:\n{}\n{}",
        stats(&lab, "sw")["fib"],
        String::from_utf8_lossy(&lab.exec("sw", &["ip", "-6", "neigh"]).stdout)
    );
    let before = stats(&lab, "sw");
    assert!(
        counter(&before, "forwarded") >= 20,
        "ping was not forwarded by the data path: {before}"
    );

    // 100,000 datagrams at 50,000/s, unshaped: every one arrives exactly once.
    let report = udp_burst(&mut lab, "h1", "h2", "10.0.1.1", 100_000, 50_000);
    assert_eq!(
        report["received"],
        "100000",
        "{report:?}\n{}",
        stats(&lab, "sw")
    );
    assert_eq!(report["duplicates"], "0");
    let after = stats(&lab, "sw");
    assert!(counter(&after, "forwarded") - counter(&before, "forwarded") >= 100_000);
    assert_eq!(port(&after, "p1")["drops_buffer"], 0);

    // TCP through the switch.
    lab.spawn("h2", "iperf-server", &["iperf3", "-s", "-1"]);
    std::thread::sleep(Duration::from_millis(300));
    let tcp = lab.exec("h1", &["iperf3", "-c", "10.0.1.1", "-t", "2", "-J"]);
    let tcp: Value = serde_json::from_slice(&tcp.stdout).expect("iperf3 JSON");
    let bps = tcp["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(
        bps > 50e6,
        "TCP through the switch only reached {bps} bit/s"
    );
    eprintln!(
        "TCP through one ofan-switch (copy mode): {:.0} Mbit/s",
        bps / 1e6
    );

    // Clean exit: SIGTERM → exit 0 (frames all accounted for), no XDP program left.
    assert_eq!(
        lab.signal("switch-sw", "TERM"),
        Some(0),
        "{}",
        lab.log("switch-sw")
    );
    assert!(lab.log("switch-sw").contains("every frame accounted for"));
    assert_eq!(lab.xdp_attached("sw"), Vec::<String>::new());
}

fn restart_after_kill_9_works() {
    let _machine = serial();
    let mut lab = Lab::new("kill");
    two_hosts(&mut lab, &[]);
    assert!(ping(&lab, "h1", "10.0.1.1", 2));
    lab.signal("switch-sw", "KILL");
    // A new switch on the same ports: a stale program of ours is replaced, the socket reused.
    start_switch(
        &mut lab,
        "sw",
        &["--port", "p0:host", "--port", "p1:host"],
        &[],
    );
    assert!(ping(&lab, "h1", "10.0.1.1", 3), "{}", lab.log("switch-sw"));
    let forwarded = counter(&stats(&lab, "sw"), "forwarded");
    assert!(
        forwarded >= 2,
        "the restarted switch forwarded {forwarded} frames"
    );
}

fn shaped_port_runs_at_the_link_rate_and_queues_build_under_contention() {
    let _machine = serial();
    let mut lab = Lab::new("shape");
    lab.add_ns("h1");
    lab.add_ns("h3");
    lab.add_ns("sw");
    lab.add_ns("h2");
    lab.link("h1", "eth0", "sw", "p0");
    lab.link("h3", "eth0", "sw", "p2");
    lab.link("h2", "eth0", "sw", "p1");
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.addr("sw", "p2", "10.0.2.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("h2", "eth0", "10.0.1.1/31", "10.0.1.0");
    lab.host("h3", "eth0", "10.0.2.1/31", "10.0.2.0");
    start_switch(
        &mut lab,
        "sw",
        &[
            "--port", "p0:host", "--port", "p1:host", "--port", "p2:host",
        ],
        // Busy polling: at 100 Mbit/s a frame leaves every ~117 µs, finer than this machine's
        // timer wake-ups (~65 µs late), so the shaper must spin to stay within 2 %.
        &[
            "--link-rate",
            "100mbit",
            "--buffer",
            "100KB",
            "--poll",
            "busy",
        ],
    );
    assert!(ping(&lab, "h1", "10.0.1.1", 2));

    // One UDP sender at 130 Mbit/s offered for 2 s into a 100 Mbit/s port: the receiver gets
    // the link rate (measured by iperf3 at the receiver).
    lab.spawn("h2", "iperf-server", &["iperf3", "-s", "-1"]);
    std::thread::sleep(Duration::from_millis(300));
    let udp = lab.exec(
        "h1",
        &[
            "iperf3", "-c", "10.0.1.1", "-u", "-b", "130M", "-l", "1400", "-t", "3", "-J",
        ],
    );
    let udp: Value = serde_json::from_slice(&udp.stdout).expect("iperf3 JSON");
    let sent = udp["end"]["sum"]["bytes"].as_f64().unwrap_or(0.0);
    let lost = udp["end"]["sum"]["lost_percent"].as_f64().unwrap_or(0.0);
    let seconds = udp["end"]["sum"]["seconds"].as_f64().unwrap_or(1.0);
    let received_bps = sent * 8.0 * (1.0 - lost / 100.0) / seconds;
    // Goodput excludes Ethernet/IP/UDP headers and the 20-byte gap the shaper counts:
    // 1400 B of payload ride in 1400 + 8 + 20 + 14 + 20 = 1462 B on the emulated wire.
    let wire_bps = received_bps * 1462.0 / 1400.0;
    eprintln!(
        "shaped port: {:.2} Mbit/s on the wire (goodput {:.2})",
        wire_bps / 1e6,
        received_bps / 1e6
    );
    assert!(
        (wire_bps - 100e6).abs() <= 2e6,
        "{wire_bps} bit/s is not within 2 % of 100 Mbit/s"
    );
    let shaped = stats(&lab, "sw");
    let p1 = port(&shaped, "p1");
    eprintln!(
        "shaper lateness p50 {} ns, p99 {} ns, max {} ns",
        p1["lateness_p50_ns"], p1["lateness_p99_ns"], p1["max_lateness_ns"]
    );

    // Two senders share the 100 Mbit/s egress port, each at ~67 Mbit/s: the queue builds up
    // to the buffer and the excess is dropped, counted at that port.
    let before = stats(&lab, "sw");
    let udp = binary("ofan-udp");
    let udp = udp.to_str().unwrap().to_owned();
    lab.spawn(
        "h3",
        "second-sender",
        &[
            &udp,
            "send",
            "--to",
            "10.0.1.1:9001",
            "--count",
            "12000",
            "--size",
            "1400",
            "--rate",
            "6000",
        ],
    );
    lab.exec(
        "h1",
        &[
            &udp,
            "send",
            "--to",
            "10.0.1.1:9001",
            "--count",
            "12000",
            "--size",
            "1400",
            "--rate",
            "6000",
        ],
    );
    assert!(lab.wait_for(Duration::from_secs(5), || lab
        .log("second-sender")
        .contains("sent=12000")));
    let after = stats(&lab, "sw");
    let (p1_before, p1_after) = (port(&before, "p1"), port(&after, "p1"));
    let drops =
        p1_after["drops_buffer"].as_u64().unwrap() - p1_before["drops_buffer"].as_u64().unwrap();
    let max_depth = p1_after["max_depth_bytes"].as_u64().unwrap();
    eprintln!("two senders into one port: {drops} drops, max queue {max_depth} B");
    assert!(
        max_depth > 90_000,
        "the 100 KB buffer should fill: {max_depth} B"
    );
    assert!(
        drops > 1_000,
        "≈ 1/4 of 24,000 frames must be dropped, saw {drops}"
    );
}

/// h1 — s1 — s2 — s3 — h2, each switch routing by static routes in its namespace.
fn routed_chain_of_three_switches_and_traceroute() {
    let _machine = serial();
    let mut lab = Lab::new("chain");
    for ns in ["h1", "s1", "s2", "s3", "h2"] {
        lab.add_ns(ns);
    }
    lab.link("h1", "eth0", "s1", "p0");
    lab.link("s1", "p1", "s2", "p0");
    lab.link("s2", "p1", "s3", "p0");
    lab.link("s3", "p1", "h2", "eth0");
    lab.addr("s1", "p0", "10.0.0.0/31");
    lab.addr("s1", "p1", "100.64.0.0/31");
    lab.addr("s2", "p0", "100.64.0.1/31");
    lab.addr("s2", "p1", "100.64.0.2/31");
    lab.addr("s3", "p0", "100.64.0.3/31");
    lab.addr("s3", "p1", "10.0.1.0/31");
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("h2", "eth0", "10.0.1.1/31", "10.0.1.0");
    for (ns, routes) in [
        ("s1", vec![("10.0.1.0/31", "100.64.0.1")]),
        (
            "s2",
            vec![("10.0.0.0/31", "100.64.0.0"), ("10.0.1.0/31", "100.64.0.3")],
        ),
        ("s3", vec![("10.0.0.0/31", "100.64.0.2")]),
    ] {
        lab.exec(ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        for (prefix, via) in routes {
            lab.exec(ns, &["ip", "route", "add", prefix, "via", via]);
        }
    }
    for ns in ["s1", "s2", "s3"] {
        start_switch(
            &mut lab,
            ns,
            &["--port", "p0:down", "--port", "p1:down"],
            &[],
        );
    }
    assert!(
        ping(&lab, "h1", "10.0.1.1", 5),
        "ping across three switches failed"
    );
    for ns in ["s1", "s2", "s3"] {
        let forwarded = counter(&stats(&lab, ns), "forwarded");
        assert!(
            forwarded >= 10,
            "{ns} forwarded only {forwarded} frames by its data path"
        );
    }
    let trace = lab.exec(
        "h1",
        &["traceroute", "-n", "-q", "1", "-w", "2", "10.0.1.1"],
    );
    let trace = String::from_utf8_lossy(&trace.stdout);
    let hops: Vec<&str> = trace
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        hops,
        vec!["10.0.0.0", "100.64.0.1", "100.64.0.3", "10.0.1.1"],
        "{trace}"
    );
    // Steering counters are refreshed every 100 ms.
    std::thread::sleep(Duration::from_millis(300));
    let ttl_passed: u64 = ["s1", "s2", "s3"]
        .iter()
        .map(|ns| {
            stats(&lab, ns)["steering"]
                .as_array()
                .and_then(|c| c.iter().find(|p| p[0] == "pass_ttl"))
                .and_then(|p| p[1].as_u64())
                .unwrap_or(0)
        })
        .sum();
    assert!(
        ttl_passed >= 3,
        "TTL-expiring probes must reach the kernels ({ttl_passed})"
    );
}

/// A switch with one host port and four up-ports towards sink namespaces n1..n4 that only count
/// (their kernels drop the frames: not for them, no forwarding).
fn fan_out(lab: &mut Lab, algorithm: &str, extra: &[&str]) {
    lab.add_ns("h1");
    lab.add_ns("sw");
    lab.link("h1", "eth0", "sw", "p0");
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    let mut hops = Vec::new();
    for i in 1..=4 {
        let ns = format!("n{i}");
        lab.add_ns(&ns);
        lab.link("sw", &format!("p{i}"), &ns, "eth0");
        lab.addr("sw", &format!("p{i}"), &format!("100.64.0.{}/31", 2 * i));
        lab.addr(&ns, "eth0", &format!("100.64.0.{}/31", 2 * i + 1));
        hops.push(format!("100.64.0.{}", 2 * i + 1));
    }
    for prefix in ["10.9.0.0/24", "10.9.1.0/24"] {
        let mut args = vec!["ip", "route", "add", prefix];
        for hop in &hops {
            args.extend(["nexthop", "via", hop.as_str()]);
        }
        lab.exec("sw", &args);
    }
    let config = lab.dir().join("sw.toml");
    std::fs::write(
        &config,
        r#"
[keys]
count = 2
table = [{ prefix = "10.9.0.0/24", key = 0 }, { prefix = "10.9.1.0/24", key = 1 }]
"#,
    )
    .unwrap();
    let config = config.display().to_string();
    let mut args = vec!["--config", config.as_str(), "--lb", algorithm];
    args.extend_from_slice(extra);
    start_switch(
        lab,
        "sw",
        &[
            "--port", "p0:host", "--port", "p1:up", "--port", "p2:up", "--port", "p3:up", "--port",
            "p4:up",
        ],
        &args,
    );
    // Every next hop resolved (the mirror asks the kernel; no manual neighbour entries).
    let resolved = lab.wait_for(Duration::from_secs(5), || {
        stats(lab, "sw")["fib"]["unresolved"]
            .as_array()
            .is_some_and(|u| u.is_empty())
    });
    assert!(
        resolved,
        "next hops not resolved: {}",
        stats(lab, "sw")["fib"]
    );
}

fn tx_per_up_port(stats: &Value) -> Vec<u64> {
    (1..=4)
        .map(|i| {
            port(stats, &format!("p{i}"))["tx_packets"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn send_udp(lab: &Lab, to: &str, count: u64, flows: u32) {
    let udp = binary("ofan-udp");
    lab.exec(
        "h1",
        &[
            udp.to_str().unwrap(),
            "send",
            "--to",
            to,
            "--count",
            &count.to_string(),
            "--size",
            "100",
            "--rate",
            "20000",
            "--flows",
            &flows.to_string(),
        ],
    );
}

fn each_algorithm_splits_an_ecmp_group_by_its_definition() {
    let _machine = serial();
    for (algorithm, pipe_size) in [
        ("ofan", "5"),
        ("pofan", "1"),
        ("rr", "5"),
        ("ecmp", "5"),
        ("rsq", "5"),
        ("jsq", "5"),
        ("ar", "5"),
        ("drill", "5"),
    ] {
        let mut lab = Lab::new(&format!("lb{algorithm}"));
        fan_out(&mut lab, algorithm, &["--pipe-size", pipe_size]);
        let before = tx_per_up_port(&stats(&lab, "sw"));
        // 4,000 datagrams to each of the two destination keys, over 16 flows.
        send_udp(&lab, "10.9.0.7:9000", 4000, 16);
        let after_key0 = tx_per_up_port(&stats(&lab, "sw"));
        send_udp(&lab, "10.9.1.9:9000", 4000, 16);
        std::thread::sleep(Duration::from_millis(200));
        let after_key1 = tx_per_up_port(&stats(&lab, "sw"));
        let key0: Vec<u64> = after_key0.iter().zip(&before).map(|(a, b)| a - b).collect();
        let key1: Vec<u64> = after_key1
            .iter()
            .zip(&after_key0)
            .map(|(a, b)| a - b)
            .collect();
        eprintln!("{algorithm:>5}: key 0 {key0:?}, key 1 {key1:?}");
        assert_eq!(
            key0.iter().sum::<u64>(),
            4000,
            "{algorithm}: every datagram of key 0 left on an up-port"
        );
        assert_eq!(key1.iter().sum::<u64>(), 4000, "{algorithm}");
        match algorithm {
            // One pointer per destination key: exactly 1,000 per port and key.
            "ofan" | "pofan" => {
                assert_eq!(key0, vec![1000; 4], "{algorithm}");
                assert_eq!(key1, vec![1000; 4], "{algorithm}");
            }
            // One pointer for everything: exactly even over the whole run.
            "rr" => {
                let total: Vec<u64> = key0.iter().zip(&key1).map(|(a, b)| a + b).collect();
                assert_eq!(total, vec![2000; 4], "rr");
            }
            // 16 flows hashed: every flow pinned, so per-port counts are multiples of 250.
            "ecmp" => {
                for count in key0.iter().chain(&key1) {
                    assert_eq!(
                        count % 250,
                        0,
                        "ecmp moved a flow between ports: {key0:?} {key1:?}"
                    );
                }
            }
            // Per-packet random (or random tie-breaks of equal, empty queues): every port used,
            // none far from 1,000 (binomial sd ≈ 27; the bound is 8 sd). Through this switch
            // jsq, ar and drill cannot be told from rsq: the up-ports are unshaped, so a frame
            // leaves as soon as it is queued, the queues are practically always empty when a
            // batch is decided, and each algorithm falls back to its random tie-break. What only each of them does is tested at the pure level with synthetic
            // queue loads, against all eight algorithms: `dataplane::lb` tests
            // `only_jsq_always_takes_the_shortest_queue_in_bytes`,
            // `only_ar_is_indifferent_within_a_level_and_strict_across_levels`,
            // `only_drill_takes_the_shorter_of_two_samples_and_its_memory`, and the forwarder's
            // `queue_aware_choices_read_the_loads_by_up_position` (the loads the worker passes,
            // by up position). This test checks that the switch runs them end to end.
            _ => {
                for count in key0.iter().chain(&key1) {
                    assert!(
                        (780..=1220).contains(count),
                        "{algorithm}: {key0:?} {key1:?}"
                    );
                }
            }
        }
    }
}

fn route_changes_and_link_down_take_effect_within_100ms() {
    let _machine = serial();
    let mut lab = Lab::new("reroute");
    fan_out(&mut lab, "ofan", &[]);
    let udp = binary("ofan-udp");
    let udp = udp.to_str().unwrap().to_owned();
    // A steady stream: 10,000 datagrams/s for 4 s.
    lab.spawn(
        "h1",
        "stream",
        &[
            &udp,
            "send",
            "--to",
            "10.9.0.7:9000",
            "--count",
            "40000",
            "--size",
            "100",
            "--rate",
            "10000",
            "--flows",
            "4",
        ],
    );
    std::thread::sleep(Duration::from_millis(800));
    let moving = tx_per_up_port(&stats(&lab, "sw"));
    assert!(
        moving.iter().all(|&c| c > 0),
        "all four up-ports carry traffic: {moving:?}"
    );

    // Route changed to a single next hop: the other three ports must go quiet within 100 ms.
    lab.exec(
        "sw",
        &["ip", "route", "replace", "10.9.0.0/24", "via", "100.64.0.3"],
    );
    let changed = std::time::Instant::now();
    let settled = quiet_within(&lab, &[1, 2, 3], Duration::from_millis(100));
    eprintln!(
        "route change followed after at most {:?}",
        changed.elapsed()
    );
    assert!(
        settled,
        "ports p2..p4 still forwarding 100 ms after the route change"
    );

    // Back to four next hops, then carrier loss on p3: p3 leaves the group.
    lab.exec(
        "sw",
        &[
            "ip",
            "route",
            "replace",
            "10.9.0.0/24",
            "nexthop",
            "via",
            "100.64.0.3",
            "nexthop",
            "via",
            "100.64.0.5",
            "nexthop",
            "via",
            "100.64.0.7",
            "nexthop",
            "via",
            "100.64.0.9",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    lab.exec("n3", &["ip", "link", "set", "eth0", "down"]);
    let settled = quiet_within(&lab, &[2], Duration::from_millis(100));
    assert!(
        settled,
        "p3 still forwarding 100 ms after its link went down"
    );
    let after = tx_per_up_port(&stats(&lab, "sw"));
    std::thread::sleep(Duration::from_millis(300));
    let later = tx_per_up_port(&stats(&lab, "sw"));
    for i in [0, 1, 3] {
        assert!(
            later[i] > after[i],
            "p{} stopped although it is up: {after:?} → {later:?}",
            i + 1
        );
    }
    assert!(
        lab.signal("switch-sw", "TERM") == Some(0),
        "{}",
        lab.log("switch-sw")
    );
}

/// Whether the up-ports at `indexes` (0-based) stop sending within `limit`: their counters do not
/// move between two samples taken after `limit`.
fn quiet_within(lab: &Lab, indexes: &[usize], limit: Duration) -> bool {
    std::thread::sleep(limit);
    let first = tx_per_up_port(&stats(lab, "sw"));
    std::thread::sleep(Duration::from_millis(200));
    let second = tx_per_up_port(&stats(lab, "sw"));
    indexes.iter().all(|&i| first[i] == second[i])
}

fn malformed_frames_are_counted_and_good_traffic_flows() {
    let _machine = serial();
    let mut lab = Lab::new("bad");
    two_hosts(&mut lab, &[]);
    assert!(ping(&lab, "h1", "10.0.1.1", 2));
    let mac =
        String::from_utf8_lossy(&lab.exec("sw", &["cat", "/sys/class/net/p0/address"]).stdout)
            .trim()
            .to_owned();
    let before = stats(&lab, "sw");
    // Raw frames from h1 (python3's AF_PACKET): truncated IPv4, IHL 4, IPv4 options, a fragment,
    // TTL 0, an unknown EtherType, a bad IPv4 checksum, and an Ethernet header with nothing after.
    let script = format!(
        r#"
import socket, struct
def csum(h):
    s = sum(struct.unpack('!%dH' % (len(h)//2), h))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff
dst = bytes.fromhex('{mac}'.replace(':', ''))
src = open('/sys/class/net/eth0/address').read().strip().replace(':', '')
eth = dst + bytes.fromhex(src)
def ip(ihl=5, ttl=64, frag=0, options=b'', good=True, payload=b'x'*20):
    total = ihl*4 + len(payload)
    h = struct.pack('!BBHHHBBH4s4s', 0x40|ihl, 0, total, 1, frag, ttl, 17, 0,
                    socket.inet_aton('10.0.0.1'), socket.inet_aton('10.0.1.1')) + options
    c = csum(h) if good else 0x1234
    h = h[:10] + struct.pack('!H', c) + h[12:]
    return eth + b'\x08\x00' + h + payload
frames = [
    eth + b'\x08\x00' + b'\x45\x00\x00',            # truncated IPv4 header
    ip(ihl=4),                                    # IHL below 5
    ip(ihl=6, options=b'\x01\x01\x01\x01'),       # IPv4 options
    ip(frag=0x2000),                              # more-fragments set
    ip(ttl=0),                                    # TTL 0
    eth + b'\x88\xb5' + b'x'*46,                  # unknown EtherType
    ip(good=False),                               # bad header checksum
    eth + b'\x08\x00',                             # Ethernet header only
]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(('eth0', 0))
for _ in range(10):
    for f in frames:
        s.send(f)
print('injected', 10 * len(frames))
"#
    );
    let out = lab.exec("h1", &["python3", "-c", &script]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("injected 80"));
    // Good traffic still flows, and the bad frames show up in the counters.
    assert!(ping(&lab, "h1", "10.0.1.1", 3));
    std::thread::sleep(Duration::from_millis(200));
    let after = stats(&lab, "sw");
    let delta = |name: &str| {
        let all = |s: &Value| -> u64 {
            s["data_path"]["counters"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(s["steering"].as_array().into_iter().flatten())
                .filter(|pair| pair[0] == name)
                .filter_map(|pair| pair[1].as_u64())
                .sum()
        };
        all(&after) - all(&before)
    };
    let counted: u64 = [
        "pass_malformed",
        "pass_ipv4_options_or_fragment",
        "pass_ttl",
        "pass_non_ip",
        "drop_bad_ipv4_checksum",
        "drop_bad_ipv4_header",
        "drop_truncated",
    ]
    .iter()
    .map(|name| delta(name))
    .sum();
    eprintln!(
        "malformed: pass_malformed {} options/fragments {} ttl {} non-IP {} bad checksum {} (of 80 injected)",
        delta("pass_malformed"),
        delta("pass_ipv4_options_or_fragment"),
        delta("pass_ttl"),
        delta("pass_non_ip"),
        delta("drop_bad_ipv4_checksum")
    );
    assert_eq!(
        counted, 80,
        "every malformed frame is counted exactly once somewhere"
    );
    assert_eq!(
        delta("drop_bad_ipv4_checksum"),
        10,
        "bad checksums are the data path's to catch"
    );
    assert!(
        lab.running("switch-sw"),
        "the switch must survive malformed input"
    );
}

fn multi_queue_ports_bind_one_socket_per_queue() {
    let _machine = serial();
    let mut lab = Lab::new("mq");
    for ns in ["h1", "sw", "h2"] {
        lab.add_ns(ns);
    }
    lab.link_queues("h1", "eth0", "sw", "p0", 2);
    lab.link_queues("h2", "eth0", "sw", "p1", 2);
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("h2", "eth0", "10.0.1.1/31", "10.0.1.0");
    let config = lab.dir().join("mq.toml");
    std::fs::write(
        &config,
        "[[ports]]\nname = \"p0\"\nrole = \"host\"\nqueues = 2\n[[ports]]\nname = \"p1\"\nrole = \"host\"\nqueues = 2\n",
    )
    .unwrap();
    let config = config.display().to_string();
    start_switch(&mut lab, "sw", &["--config", &config], &[]);
    // Many flows, so the sender's transmit queues (and thus the switch's RX queues) both carry
    // traffic; every datagram must arrive whichever queue it came in on.
    let report = udp_burst(&mut lab, "h1", "h2", "10.0.1.1", 20_000, 20_000);
    assert_eq!(report["received"], "20000", "{report:?}");
    assert_eq!(
        lab.signal("switch-sw", "TERM"),
        Some(0),
        "{}",
        lab.log("switch-sw")
    );
    assert!(lab.log("switch-sw").contains("every frame accounted for"));
}

ofan_tests::root_tests!(
    host_switch_host_ping_udp_and_tcp,
    restart_after_kill_9_works,
    shaped_port_runs_at_the_link_rate_and_queues_build_under_contention,
    routed_chain_of_three_switches_and_traceroute,
    each_algorithm_splits_an_ecmp_group_by_its_definition,
    route_changes_and_link_down_take_effect_within_100ms,
    malformed_frames_are_counted_and_good_traffic_flows,
    multi_queue_ports_bind_one_socket_per_queue,
);
