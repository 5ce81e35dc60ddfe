//! Adaptive-routing notifications (issues 15, 44): a switch with a host port and a fabric port
//! takes a notification only from the fabric neighbour, with TTL 255, about a link the
//! neighbour is an end of; a restarted neighbour's new epoch is taken at once.

use std::time::Duration;

use ofan_tests::{binary, serial, Lab};
use serde_json::Value;

use crate::fixtures::*;

/// The fabric neighbour's router ID (configured on the switch by hand: no plan, no BGP).
const N1: &str = "10.255.0.1";

/// One notification: link `near`→`far` at level 3, epoch and sequence given.
struct Note<'a> {
    near: &'a str,
    far: &'a str,
    epoch: u32,
    sequence: u32,
}

/// Sends `note` from `ns` to `to` with `ttl`.
fn notify(lab: &Lab, ns: &str, to: &str, ttl: u8, note: &Note<'_>) {
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
            "--near",
            note.near,
            "--far",
            note.far,
            "--quality",
            "3",
            "--epoch",
            &note.epoch.to_string(),
            "--seq",
            &note.sequence.to_string(),
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

/// The congestion table: (near, far, level, sequence).
fn table(arf: &Value) -> Vec<(String, String, u64, u64)> {
    arf["table"]
        .as_array()
        .map(|links| {
            links
                .iter()
                .map(|l| {
                    (
                        l["near"].as_str().unwrap_or("").to_owned(),
                        l["far"].as_str().unwrap_or("").to_owned(),
                        l["quality"].as_u64().unwrap_or(99),
                        l["sequence"].as_u64().unwrap_or(0),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn holds(arf: &Value, near: &str) -> bool {
    table(arf).iter().any(|(n, _, _, _)| n == near)
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
    let config = lab.dir().join("sw.toml");
    std::fs::write(
        &config,
        format!(
            "[[adaptive_routing.neighbours]]\nport = \"p1\"\naddr = \"10.0.1.1\"\n\
             router_id = \"{N1}\"\nasn = 65001\n"
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    start_switch(
        &mut lab,
        "sw",
        &["--port", "p0:host", "--port", "p1:up"],
        &[
            "--config",
            &config,
            "--lb",
            "arf-wcmp",
            "--metrics",
            "127.0.0.1:9100",
        ],
    );
    let arf = |lab: &Lab| stats(lab, "sw")["adaptive_routing"].clone();
    assert!(arf(&lab).is_object(), "arf-wcmp must turn notifications on");

    // From the fabric neighbour with TTL 255: applied. (Resent with a new sequence number
    // until the switch steers its own addresses to the kernel, a few 100 ms after start.)
    let mut sequence = 100;
    let applied = lab.wait_for(Duration::from_secs(10), || {
        sequence += 1;
        let note = Note {
            near: N1,
            far: "10.255.0.2",
            epoch: 5,
            sequence,
        };
        notify(&lab, "n1", "10.0.1.0", 255, &note);
        std::thread::sleep(Duration::from_millis(100));
        table(&arf(&lab))
            .iter()
            .any(|(near, far, level, _)| near == N1 && far == "10.255.0.2" && *level == 3)
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
    assert!(text.contains("10.255.0.1 → 10.255.0.2  level  3"), "{text}");

    // The neighbour restarts: a new epoch, its sequence from 1 again — taken at once.
    let restarted = Note {
        near: N1,
        far: "10.255.0.2",
        epoch: 6,
        sequence: 1,
    };
    notify(&lab, "n1", "10.0.1.0", 255, &restarted);
    let taken = lab.wait_for(Duration::from_secs(3), || {
        table(&arf(&lab))
            .iter()
            .any(|(near, _, _, seq)| near == N1 && *seq == 1)
    });
    assert!(
        taken,
        "the restarted speaker's message was stale: {:#}",
        arf(&lab)
    );

    // The fabric neighbour speaking for a link it is no end of: refused, the table unchanged.
    let forged = Note {
        near: "10.255.0.50",
        far: "10.255.0.51",
        epoch: 1,
        sequence: 1,
    };
    notify(&lab, "n1", "10.0.1.0", 255, &forged);
    let refused = lab.wait_for(Duration::from_secs(3), || {
        pairs(&arf(&lab), "rejected", "untrusted") >= 1
    });
    let report = arf(&lab);
    assert!(refused, "no untrusted rejection: {report:#}");
    assert!(!holds(&report, "10.255.0.50"), "{report:#}");

    // The same from the host port: refused, the table unchanged.
    let host_before = pairs(&report, "rejected", "host_port");
    let from_host = Note {
        near: "10.255.0.60",
        far: "10.255.0.2",
        epoch: 1,
        sequence: 1,
    };
    notify(&lab, "h1", "10.0.0.0", 255, &from_host);
    let refused = lab.wait_for(Duration::from_secs(3), || {
        pairs(&arf(&lab), "rejected", "host_port") > host_before
    });
    let report = arf(&lab);
    assert!(refused, "no host_port rejection: {report:#}");
    assert!(!holds(&report, "10.255.0.60"), "{report:#}");

    // From the fabric neighbour with TTL 64: refused.
    let ttl_64 = Note {
        near: N1,
        far: "10.255.0.3",
        epoch: 7,
        sequence: 1,
    };
    notify(&lab, "n1", "10.0.1.0", 64, &ttl_64);
    let refused = lab.wait_for(Duration::from_secs(3), || {
        pairs(&arf(&lab), "rejected", "ttl") >= 1
    });
    let report = arf(&lab);
    assert!(refused, "no ttl rejection: {report:#}");
    assert!(
        !table(&report)
            .iter()
            .any(|(_, far, _, _)| far == "10.255.0.3"),
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
