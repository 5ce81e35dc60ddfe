//! Adaptive-routing notifications (issue 15): a switch with a host port and a fabric port takes
//! a notification only from the fabric neighbour, with TTL 255.

use std::time::Duration;

use ofan_tests::{binary, serial, Lab};
use serde_json::Value;

use crate::fixtures::*;

/// Sends one notification of link `near`→`far` at `quality` from `ns` to `to` with `ttl`.
fn notify(lab: &Lab, ns: &str, to: &str, ttl: u8, near: u32, sequence: u32) {
    let udp = binary("ofan-udp");
    let output = lab.exec(
        ns,
        &[
            udp.to_str().unwrap(),
            "notify",
            "--to",
            &format!("{to}:7415"),
            "--ttl",
            &ttl.to_string(),
            "--near-asn",
            &near.to_string(),
            "--far-asn",
            "65100",
            "--quality",
            "3",
            "--seq",
            &sequence.to_string(),
        ],
    );
    assert!(
        output.status.success(),
        "ofan-udp notify: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn pairs(arf: &Value, section: &str, name: &str) -> u64 {
    arf[section]
        .as_array()
        .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
        .and_then(|pair| pair[1].as_u64())
        .unwrap_or(0)
}

fn table(arf: &Value) -> Vec<(u64, u64, u64)> {
    arf["table"]
        .as_array()
        .map(|links| {
            links
                .iter()
                .map(|l| {
                    (
                        l["near"].as_u64().unwrap_or(0),
                        l["far"].as_u64().unwrap_or(0),
                        l["quality"].as_u64().unwrap_or(99),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn notifications_are_taken_only_from_fabric_neighbours_with_ttl_255() {
    let _machine = serial();
    let mut lab = Lab::new("arf");
    for ns in ["h1", "sw", "n1"] {
        lab.add_ns(ns);
    }
    lab.link("h1", "eth0", "sw", "p0");
    lab.link("n1", "eth0", "sw", "p1");
    lab.addr("sw", "p0", "10.0.0.0/31");
    lab.addr("sw", "p1", "10.0.1.0/31");
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.host("h1", "eth0", "10.0.0.1/31", "10.0.0.0");
    lab.host("n1", "eth0", "10.0.1.1/31", "10.0.1.0");
    start_switch(
        &mut lab,
        "sw",
        &["--port", "p0:host", "--port", "p1:up"],
        &["--lb", "arf-wcmp", "--metrics", "127.0.0.1:9100"],
    );
    let arf = |lab: &Lab| stats(lab, "sw")["adaptive_routing"].clone();
    assert!(arf(&lab).is_object(), "arf-wcmp must turn notifications on");

    // From the fabric neighbour with TTL 255: applied. (Resent with a new sequence number
    // until the switch steers its own addresses to the kernel, a few 100 ms after start.)
    let mut sequence = 0;
    let applied = lab.wait_for(Duration::from_secs(10), || {
        sequence += 1;
        notify(&lab, "n1", "10.0.1.0", 255, 65001, sequence);
        std::thread::sleep(Duration::from_millis(100));
        table(&arf(&lab)).contains(&(65001, 65100, 3))
    });
    let report = arf(&lab);
    assert!(
        applied,
        "the fabric neighbour's notification was not applied: {report:#}\n{}",
        lab.log("switch-sw")
    );
    assert!(pairs(&report, "counters", "applied") >= 1, "{report:#}");
    assert!(pairs(&report, "counters", "published") >= 1, "{report:#}");
    let latency = &report["latency"];
    assert!(latency["count"].as_u64().unwrap_or(0) >= 1, "{report:#}");
    let last_ns = latency["last_ns"].as_i64().unwrap_or(-1);
    assert!(
        (0..1_000_000_000).contains(&last_ns),
        "notification-to-table latency {last_ns} ns"
    );
    println!(
        "notification-to-table latency: last {} ns, min {} ns, median {} ns, max {} ns",
        latency["last_ns"], latency["min_ns"], latency["median_ns"], latency["max_ns"]
    );
    let text = std::process::Command::new(binary("ofan-switch"))
        .args(["stats", "--socket", &socket(&lab, "sw")])
        .output()
        .expect("ofan-switch stats");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("AS65001 → AS65100  level  3"), "{text}");

    // The same from the host port: refused, the table unchanged.
    let host_before = pairs(&report, "rejected", "host_port");
    notify(&lab, "h1", "10.0.0.0", 255, 65002, 1);
    let refused = lab.wait_for(Duration::from_secs(3), || {
        pairs(&arf(&lab), "rejected", "host_port") > host_before
    });
    let report = arf(&lab);
    assert!(refused, "no host_port rejection: {report:#}");
    assert!(
        !table(&report).iter().any(|&(near, _, _)| near == 65002),
        "{report:#}"
    );

    // From the fabric neighbour with TTL 64: refused.
    notify(&lab, "n1", "10.0.1.0", 64, 65003, 1);
    let refused = lab.wait_for(Duration::from_secs(3), || {
        pairs(&arf(&lab), "rejected", "ttl") >= 1
    });
    let report = arf(&lab);
    assert!(refused, "no ttl rejection: {report:#}");
    assert!(
        !table(&report).iter().any(|&(near, _, _)| near == 65003),
        "{report:#}"
    );

    // The same counters as Prometheus metrics (recorded once a second).
    let metrics_seen = lab.wait_for(Duration::from_secs(4), || {
        let body = lab.try_exec("sw", &["curl", "-s", "http://127.0.0.1:9100/metrics"]);
        let body = String::from_utf8_lossy(&body.stdout);
        body.contains("ofan_arf_rejected_total{reason=\"ttl\"} 1")
            && body.contains("ofan_arf_applied_total")
            && body.contains("ofan_arf_table_entries 1")
            && body.contains("ofan_arf_latency_seconds{stat=\"max\"}")
    });
    assert!(
        metrics_seen,
        "{}",
        String::from_utf8_lossy(
            &lab.try_exec("sw", &["curl", "-s", "http://127.0.0.1:9100/metrics"])
                .stdout
        )
    );

    assert_eq!(
        lab.signal("switch-sw", "TERM"),
        Some(0),
        "{}",
        lab.log("switch-sw")
    );
}
