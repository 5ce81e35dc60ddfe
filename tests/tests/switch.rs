//! Root integration tests of `ofan-switch` in network namespaces.
//!
//! Each test builds its own namespaces with a unique prefix through [`Lab`], which deletes
//! exactly what it made and kills exactly the processes it started, also on failure. Tests check
//! the data path's own counters, not only that traffic arrives: with forwarding enabled in the
//! switch namespace the kernel could otherwise forward frames the data path failed to take.
//!
//! Skipped (with a message) when not run as root.

use std::time::Duration;

use ofan_tests::{binary, key_values, require_root, serial, Lab};
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

#[test]
fn host_switch_host_ping_udp_and_tcp() {
    if !require_root("host_switch_host_ping_udp_and_tcp") {
        return;
    }
    let _machine = serial();
    let mut lab = Lab::new("fwd");
    two_hosts(&mut lab, &[]);
    assert!(
        ping(&lab, "h1", "10.0.1.1", 5),
        "ping h1 → h2 failed:\n{}",
        lab.log("switch-sw")
    );
    let before = stats(&lab, "sw");
    assert!(
        counter(&before, "forwarded") >= 10,
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

#[test]
fn restart_after_kill_9_works() {
    if !require_root("restart_after_kill_9_works") {
        return;
    }
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

#[test]
fn shaped_port_runs_at_the_link_rate_and_queues_build_under_contention() {
    if !require_root("shaped_port_runs_at_the_link_rate") {
        return;
    }
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
