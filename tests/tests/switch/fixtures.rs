//! Namespaces, switches and traffic the switch tests share.

use std::time::Duration;

use ofan_tests::{binary, key_values, Lab};
use serde_json::Value;

/// host h1 — switch — host h2, the switch's ports on 10.0.0.0/31 and 10.0.1.0/31.
pub(crate) fn two_hosts(lab: &mut Lab, extra_args: &[&str]) {
    lab.add_ns("h1");
    lab.add_ns("sw");
    lab.add_ns("h2");
    lab.link("h1", "eth0", "sw", "p0");
    lab.link("h2", "eth0", "sw", "p1");
    address_two_hosts(lab);
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

/// Addresses of h1 —p0 sw p1— h2 (IPv4 /31s, h1 and h2 routed through sw), on links made.
pub(crate) fn address_two_hosts(lab: &Lab) {
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("h2", "eth0", "10.0.1.1/31", "10.0.1.0");
}

/// SIGTERM to the switch in `sw`: it exits 0 and says every frame was accounted for.
pub(crate) fn stops_cleanly(lab: &mut Lab) {
    assert_eq!(
        lab.signal("switch-sw", "TERM"),
        Some(0),
        "{}",
        lab.log("switch-sw")
    );
    assert!(lab.log("switch-sw").contains("every frame accounted for"));
}

pub(crate) fn socket(lab: &Lab, ns: &str) -> String {
    lab.dir().join(format!("{ns}.sock")).display().to_string()
}

/// Starts `ofan-switch` in `ns` and waits for its admin socket; returns its pid.
pub(crate) fn start_switch(lab: &mut Lab, ns: &str, ports: &[&str], extra_args: &[&str]) -> u32 {
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
    let pid = lab.spawn(ns, &format!("switch-{ns}"), &command);
    let up = lab.wait_for(Duration::from_secs(10), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    assert!(
        up,
        "switch in {ns} did not come up:\n{}",
        lab.log(&format!("switch-{ns}"))
    );
    pid
}

pub(crate) fn stats(lab: &Lab, ns: &str) -> Value {
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

pub(crate) fn counter(stats: &Value, name: &str) -> u64 {
    stats["data_path"]["counters"]
        .as_array()
        .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
        .and_then(|pair| pair[1].as_u64())
        .unwrap_or(0)
}

pub(crate) fn port<'a>(stats: &'a Value, name: &str) -> &'a Value {
    stats["data_path"]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == name))
        .unwrap_or_else(|| panic!("no port {name} in stats"))
}

pub(crate) fn ping(lab: &Lab, from: &str, to: &str, count: u32) -> bool {
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
pub(crate) fn udp_burst(
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
            // 32 source ports: every one of two transmit queues gets some flow but with
            // probability 2⁻³¹ (with 8, 1 in 128 — a CI run once saw all on one queue).
            "--flows",
            "32",
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

/// Two seconds of TCP from h1 to h2 (10.0.1.1) with iperf3: the received rate in bit/s (0 if
/// the run failed) and iperf3's JSON report.
pub(crate) fn tcp_h1_to_h2(lab: &mut Lab) -> (f64, Value) {
    lab.spawn("h2", "iperf-server", &["iperf3", "-s", "-1"]);
    std::thread::sleep(Duration::from_millis(300));
    let tcp = lab.exec("h1", &["iperf3", "-c", "10.0.1.1", "-t", "2", "-J"]);
    let tcp: Value = serde_json::from_slice(&tcp.stdout).expect("iperf3 JSON");
    let bps = tcp["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap_or_default();
    (bps, tcp)
}
