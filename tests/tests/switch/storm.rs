//! Bad input and overload (issue 17, part B): a storm of malformed and hostile frames from one
//! host while another sends a steady flow, and one port offered far more than its shaped rate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ofan_tests::{binary, key_values, serial, Lab};
use serde_json::Value;

use crate::fixtures::*;

/// IGMP reports the hosts' kernels may send during the storm (IGMPv3: each group joined is
/// reported twice, at random times within a second of the interface coming up, and again when
/// the querier asks); they pass the steering program as multicast like the storm's.
const KERNEL_MULTICAST_SLACK: u64 = 8;

/// ARP frames of the kernels' own that reach the switch's port during the storm: the switch
/// keeps its neighbours as managed entries, which its kernel re-probes (a unicast request
/// every 15–45 s, and the host answers; seen: 1 in a 12-s storm), and the host's kernel may
/// confirm its own gateway entry the same way.
const KERNEL_ARP_SLACK: u64 = 4;

/// h1 (p0), h2 (p1), h3 (p2) around one switch, IPv4 10.0.N.0/31 and IPv6 fd00:N::/127 on
/// port pN. The neighbours of hosts and switch are set up permanent, so no one ARPs or solicits
/// during a run — but for the switch's, which its FIB mirror then asks to be managed (the
/// kernel drops an entry's permanence when it becomes managed, and re-probes it:
/// [`KERNEL_ARP_SLACK`]).
/// `switch_args` are the switch's ports and options; returns its pid.
fn three_hosts(lab: &mut Lab, switch_args: &[&str]) -> u32 {
    for ns in ["h1", "sw", "h2", "h3"] {
        lab.add_ns(ns);
    }
    let hosts = [("h1", "p0", 0), ("h2", "p1", 1), ("h3", "p2", 2)];
    for (host, port, _) in hosts {
        lab.link(host, "eth0", "sw", port);
    }
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    lab.exec("sw", &["sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"]);
    for (host, port, n) in hosts {
        lab.addr("sw", port, &format!("10.0.{n}.0/31"));
        lab.host(
            host,
            "eth0",
            &format!("10.0.{n}.1/31"),
            &format!("10.0.{n}.0"),
        );
        lab.exec(
            "sw",
            &[
                "ip",
                "-6",
                "addr",
                "add",
                &format!("fd00:{n}::/127"),
                "dev",
                port,
                "nodad",
            ],
        );
        lab.exec(
            host,
            &[
                "ip",
                "-6",
                "addr",
                "add",
                &format!("fd00:{n}::1/127"),
                "dev",
                "eth0",
                "nodad",
            ],
        );
        lab.exec(
            host,
            &[
                "ip",
                "-6",
                "route",
                "add",
                "default",
                "via",
                &format!("fd00:{n}::"),
            ],
        );
        // And the switch's neighbours, so its kernel never ARPs a host either (a host's reply
        // would land in `pass_arp` beside the storm's).
        let host_mac = String::from_utf8_lossy(
            &lab.exec(host, &["cat", "/sys/class/net/eth0/address"])
                .stdout,
        )
        .trim()
        .to_owned();
        for address in [format!("10.0.{n}.1"), format!("fd00:{n}::1")] {
            lab.exec(
                "sw",
                &[
                    "ip",
                    "neigh",
                    "replace",
                    &address,
                    "lladdr",
                    &host_mac,
                    "dev",
                    port,
                    "nud",
                    "permanent",
                ],
            );
        }
        let mac = switch_mac(lab, port);
        for gateway in [format!("10.0.{n}.0"), format!("fd00:{n}::")] {
            lab.exec(
                host,
                &[
                    "ip",
                    "neigh",
                    "replace",
                    &gateway,
                    "lladdr",
                    &mac,
                    "dev",
                    "eth0",
                    "nud",
                    "permanent",
                ],
            );
        }
    }
    start_switch(lab, "sw", switch_args, &[])
}

const THREE_PORTS: [&str; 6] = [
    "--port", "p0:host", "--port", "p1:host", "--port", "p2:host",
];

fn switch_mac(lab: &Lab, port: &str) -> String {
    let path = format!("/sys/class/net/{port}/address");
    String::from_utf8_lossy(&lab.exec("sw", &["cat", &path]).stdout)
        .trim()
        .to_owned()
}

/// A counter by name from the data path's counters or the steering program's.
fn any_counter(stats: &Value, name: &str) -> u64 {
    stats["data_path"]["counters"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(stats["steering"].as_array().into_iter().flatten())
        .filter(|pair| pair[0] == name)
        .filter_map(|pair| pair[1].as_u64())
        .sum()
}

fn port_value(stats: &Value, port_name: &str, field: &str) -> u64 {
    port(stats, port_name)[field].as_u64().unwrap_or(0)
}

fn socket_drops(stats: &Value, port_name: &str) -> u64 {
    let drops = &port(stats, port_name)["socket_drops"];
    drops["rx_dropped"].as_u64().unwrap_or(0) + drops["rx_ring_full"].as_u64().unwrap_or(0)
}

/// VmRSS of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap_or(0)
}

/// A value from a namespace's `/proc/net/snmp` (e.g. `Icmp`, `OutTimeExcds`).
fn snmp(lab: &Lab, ns: &str, group: &str, field: &str) -> u64 {
    let text =
        String::from_utf8_lossy(&lab.exec(ns, &["cat", "/proc/net/snmp"]).stdout).into_owned();
    let prefix = format!("{group}:");
    let mut lines = text.lines().filter(|line| line.starts_with(&prefix));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == field)
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0)
}

fn link_counter(lab: &Lab, ns: &str, ifname: &str, counter: &str) -> u64 {
    let path = format!("/sys/class/net/{ifname}/statistics/{counter}");
    String::from_utf8_lossy(&lab.exec(ns, &["cat", &path]).stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

fn number(report: &BTreeMap<String, String>, key: &str) -> u64 {
    report
        .get(key)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {report:?}"))
}

pub(crate) fn storm_of_bad_frames_is_counted_by_kind_and_spares_the_good_flow() {
    let _machine = serial();
    let mut lab = Lab::new("storm");
    // h1 may send frames above the switch port's MTU: the veth drops them (see `oversized`).
    let switch_pid = three_hosts(&mut lab, &THREE_PORTS);
    lab.exec("h1", &["ip", "link", "set", "eth0", "mtu", "3000"]);
    // As the lab does (`lab::net`): no ICMP rate limit, so what a TTL flood costs is visible.
    lab.exec("sw", &["sysctl", "-qw", "net.ipv4.icmp_ratelimit=0"]);
    lab.exec(
        "sw",
        &["sysctl", "-qw", "net.ipv4.icmp_msgs_per_sec=100000"],
    );
    assert!(ping(&lab, "h3", "10.0.1.1", 2) && ping(&lab, "h1", "10.0.2.1", 2));
    // The data path learns fd00:2::1 (the IPv6 storm frames go there) from the kernel.
    assert!(lab.wait_for(Duration::from_secs(5), || ping(&lab, "h1", "fd00:2::1", 1)));
    // Let neighbour discovery, MLD reports and the like settle.
    std::thread::sleep(Duration::from_secs(2));

    let udp = binary("ofan-udp");
    let udp = udp.to_str().unwrap().to_owned();
    let storm = binary("ofan-storm");
    let storm = storm.to_str().unwrap().to_owned();
    // The good flow: h3 → h2, 20,000 datagrams/s of 200 B for 12 s, around the 10 s storm.
    let (good_rate, good_count) = (20_000u64, 240_000u64);
    lab.spawn(
        "h2",
        "good-recv",
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9000",
            "--count",
            &good_count.to_string(),
            "--timeout-ms",
            "4000",
        ],
    );
    // The spoofed datagrams' receiver (they come "from h2").
    lab.spawn(
        "h3",
        "spoofed-recv",
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9003",
            "--count",
            "1000000000",
            "--timeout-ms",
            "6000",
        ],
    );
    assert!(lab.wait_for(Duration::from_secs(5), || lab
        .log("good-recv")
        .contains("ready")
        && lab.log("spoofed-recv").contains("ready")));

    let h1_tx_dropped = link_counter(&lab, "h1", "eth0", "tx_dropped");
    let h3_tx_dropped = link_counter(&lab, "h3", "eth0", "tx_dropped");
    let icmp_out = snmp(&lab, "sw", "Icmp", "OutTimeExcds");
    let icmp_in = snmp(&lab, "h1", "Icmp", "InTimeExcds");
    let unreachable_out = snmp(&lab, "sw", "Icmp", "OutDestUnreachs");
    let before = stats(&lab, "sw");
    let rss_before = rss_kib(switch_pid);
    lab.spawn(
        "h3",
        "good-send",
        &[
            &udp,
            "send",
            "--to",
            "10.0.1.1:9000",
            "--count",
            &good_count.to_string(),
            "--size",
            "200",
            "--rate",
            &good_rate.to_string(),
        ],
    );
    std::thread::sleep(Duration::from_secs(1));
    let switch_mac = switch_mac(&lab, "p0");
    lab.spawn(
        "h1",
        "storm",
        &[
            &storm,
            "--dev",
            "eth0",
            "--switch-mac",
            &switch_mac,
            "--seconds",
            "10",
        ],
    );
    // Throughout: the admin socket answers (each `stats` within 5 s: the time counts starting
    // the `stats` process in the namespace on two CPUs the storm keeps busy — up to 2.8 s in a
    // clean-clone CI run — while a socket the storm starved would not answer at all) and the
    // RSS stays flat.
    let (mut slowest, mut rss_max, mut polls) = (Duration::ZERO, rss_before, 0u32);
    while !lab.log("storm").contains("seconds=") {
        let asked = Instant::now();
        let _ = stats(&lab, "sw");
        slowest = slowest.max(asked.elapsed());
        rss_max = rss_max.max(rss_kib(switch_pid));
        polls += 1;
        assert!(
            lab.running("switch-sw"),
            "the switch died:\n{}",
            lab.log("switch-sw")
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(lab.wait_for(Duration::from_secs(10), || lab
        .log("good-send")
        .contains("sent=")));
    assert!(lab.wait_for(Duration::from_secs(10), || lab
        .log("good-recv")
        .contains("received=")
        && lab.log("spoofed-recv").contains("received=")));
    // Steering counters are refreshed every 100 ms.
    std::thread::sleep(Duration::from_millis(300));
    let after = stats(&lab, "sw");
    let rss_after = rss_kib(switch_pid);
    let sent = key_values(&lab.log("storm"));
    let good_sent = key_values(&lab.log("good-send"));
    let good = key_values(&lab.log("good-recv"));
    let spoofed = key_values(&lab.log("spoofed-recv"));
    let delta = |name: &str| any_counter(&after, name) - any_counter(&before, name);
    let port_delta = |port_name: &str, field: &str| {
        port_value(&after, port_name, field) - port_value(&before, port_name, field)
    };
    // Frames of a kind the sender's kernel took: those it refused (the send failed) never left
    // h1, and are in its `tx_dropped` (below).
    let refused_of = |name: &str| {
        sent.get(&format!("refused_{name}"))
            .map_or(0, |value| value.parse::<u64>().unwrap())
    };
    let kind = |name: &str| number(&sent, name) - refused_of(name);
    let oversized_dropped = link_counter(&lab, "h1", "eth0", "tx_dropped") - h1_tx_dropped;
    let icmp_sent = snmp(&lab, "sw", "Icmp", "OutTimeExcds") - icmp_out;
    let icmp_received = snmp(&lab, "h1", "Icmp", "InTimeExcds") - icmp_in;
    let unreachable_sent = snmp(&lab, "sw", "Icmp", "OutDestUnreachs") - unreachable_out;
    eprintln!("storm sent: {sent:?}");
    eprintln!(
        "counters: pass_malformed {} drop_bad_ipv4_header {} drop_bad_ipv4_checksum {} pass_ttl {} \
         pass_v6_hop_by_hop {} pass_non_ip {} pass_local {} pass_arp {} pass_nd {} pass_multicast {} \
         redirected {} forwarded {}; p2 tx {}; h1 eth0 tx_dropped {oversized_dropped}; \
         socket drops p0 {} p2 {}",
        delta("pass_malformed"),
        delta("drop_bad_ipv4_header"),
        delta("drop_bad_ipv4_checksum"),
        delta("pass_ttl"),
        delta("pass_v6_hop_by_hop"),
        delta("pass_non_ip"),
        delta("pass_local"),
        delta("pass_arp"),
        delta("pass_nd"),
        delta("pass_multicast"),
        delta("redirected"),
        delta("forwarded"),
        port_delta("p2", "tx_packets"),
        socket_drops(&after, "p0") - socket_drops(&before, "p0"),
        socket_drops(&after, "p2") - socket_drops(&before, "p2"),
    );
    eprintln!(
        "good flow: {good_sent:?} → {good:?}; spoofed received {spoofed:?}; \
         ICMP time exceeded: switch sent {icmp_sent}, h1 received {icmp_received} \
         for {} TTL 0/1 frames; destination unreachable sent {unreachable_sent} for {} UDP \
         datagrams to the switch's address",
        kind("ttl_0") + kind("ttl_1"),
        kind("to_switch_address")
    );
    eprintln!(
        "switch: RSS {rss_before} KiB before, max {rss_max}, {rss_after} after; \
         {polls} stats polls, slowest {slowest:?}"
    );

    // Same process, still answering.
    assert!(lab.running("switch-sw"), "{}", lab.log("switch-sw"));
    // The sender's kernel refuses every oversized frame (the veth's drop is the send's error).
    // It may refuse a few of the others too: a veth whose peer runs an XDP program drops a
    // frame when the peer's ring (256 frames) is full, which happens when the storm outruns
    // the peer's softirq on a loaded machine (seen in CI: 24–42 of 110,144 per kind, 0.04 %).
    // Those never reach the switch; the expected counts below are of the frames sent.
    assert_eq!(refused_of("oversized"), number(&sent, "oversized"));
    assert_eq!(kind("oversized"), 0);
    let mut refused_total = 0;
    for name in sent.keys().filter(|key| {
        key.as_str() != "seconds" && !key.starts_with("refused_") && key.as_str() != "oversized"
    }) {
        let refused = refused_of(name);
        assert!(
            refused * 100 <= number(&sent, name),
            "{name}: {refused} of {} refused by the sender's kernel (at most 1 % expected)",
            number(&sent, name)
        );
        refused_total += refused;
    }

    // Every kind the steering program passes to the kernel, exactly in its counter — but for
    // a few frames of the kernels' own in two of them: IGMP membership reports (at random
    // times after an interface comes up) pass as multicast, re-probes of managed neighbours as
    // ARP.
    let passed = [
        (
            "pass_malformed",
            kind("truncated_ipv4") + kind("ihl_4") + kind("truncated_ipv6"),
            0,
        ),
        ("pass_ttl", kind("ttl_0") + kind("ttl_1"), 0),
        ("pass_v6_hop_by_hop", kind("ipv6_hop_by_hop"), 0),
        ("pass_non_ip", kind("unknown_ether_type"), 0),
        ("pass_local", kind("to_switch_address"), 0),
        ("pass_arp", kind("arp_broadcast"), KERNEL_ARP_SLACK),
        (
            "pass_multicast",
            kind("ip_broadcast"),
            KERNEL_MULTICAST_SLACK,
        ),
    ];
    let mut kernels_own = 0;
    for (counter, expected, slack) in passed {
        let seen = delta(counter);
        assert!(
            (expected..=expected + slack).contains(&seen),
            "{counter}: {seen}, expected {expected} (+ at most {slack} of the kernels' own)"
        );
        kernels_own += seen - expected;
    }
    // Oversized and refused frames never reach the switch: the veth drops them (the sender's
    // tx_dropped).
    assert_eq!(
        oversized_dropped,
        refused_of("oversized") + refused_total,
        "h1's tx_dropped = oversized + refused frames"
    );
    // The redirected kinds: into p0's AF_XDP socket, where the kernel may drop some when the
    // RX ring is full (the port's `socket_drops`, counted by the kernel and published by the
    // switch); the rest in the data path's counter of each kind. The two forwarded kinds
    // leave on p2, which carries nothing else.
    let ring_drops = socket_drops(&after, "p0") - socket_drops(&before, "p0");
    let redirected = [
        ("drop_bad_ipv4_header", kind("bad_total_length")),
        ("drop_bad_ipv4_checksum", kind("bad_checksum")),
    ];
    let forwarded_storm = port_delta("p2", "tx_packets");
    for (counter, expected) in redirected {
        let landed = delta(counter);
        assert!(
            landed <= expected && expected - landed <= ring_drops,
            "{counter}: {landed} of {expected}, {ring_drops} ring drops"
        );
    }
    assert!(forwarded_storm <= kind("ipv6_extension_chain") + kind("spoofed_source"));
    assert_eq!(
        redirected
            .iter()
            .map(|(counter, _)| delta(counter))
            .sum::<u64>()
            + forwarded_storm
            + ring_drops,
        kind("bad_total_length")
            + kind("bad_checksum")
            + kind("ipv6_extension_chain")
            + kind("spoofed_source"),
        "redirected storm frames"
    );
    assert_eq!(
        delta("forwarded"),
        forwarded_storm + port_delta("p1", "tx_packets"),
        "forwarded = storm on p2 + good flow on p1"
    );
    // The census: every frame sent is in exactly one of the counters above.
    let total: u64 = sent
        .iter()
        .filter(|(key, _)| key.as_str() != "seconds" && !key.starts_with("refused_"))
        .map(|(_, value)| value.parse::<u64>().unwrap())
        .sum();
    let counted: u64 = passed
        .iter()
        .map(|(counter, _, _)| delta(counter))
        .sum::<u64>()
        + redirected
            .iter()
            .map(|(counter, _)| delta(counter))
            .sum::<u64>()
        + forwarded_storm
        + ring_drops
        + oversized_dropped;
    // The kernels' own IGMP reports and ARP probes (checked above to be at most their
    // slacks) are no frames of the storm's.
    eprintln!(
        "census: {total} sent, {counted} counted ({ring_drops} in p0's socket drops, \
         {kernels_own} IGMP reports and ARP probes of the kernels)"
    );
    assert_eq!(
        counted - kernels_own,
        total,
        "census: sent = sum of the counters they landed in"
    );

    // The good flow kept its rate: sent on time (the sender paces itself, so all 240,000 in
    // 12 s), and at least 98 % received. What it loses is lost at p2's AF_XDP socket when the
    // one worker, busy with the storm, does not empty p2's RX ring in time (0, 0, 0.21, 0, 0
    // and 0.61 % in six runs on the 2-core machine shared with other work, load average 4–5;
    // the bound is three times the worst), or, on a loaded machine, at h3's veth: the data path
    // forwards the rest, exactly.
    let good_received = number(&good, "received");
    let good_ring_drops = socket_drops(&after, "p2") - socket_drops(&before, "p2");
    // Like h1's (above), h3's veth drops a frame when the switch port's XDP ring is full, and
    // a UDP send does not report it: those frames are in h3's `tx_dropped`. (It may also count
    // a frame of h3's kernel, so the forwarded count has it as a lower bound.)
    let good_veth_drops = link_counter(&lab, "h3", "eth0", "tx_dropped") - h3_tx_dropped;
    assert!(
        good_veth_drops * 100 <= good_count,
        "h3's veth dropped {good_veth_drops} of {good_count}"
    );
    assert_eq!(number(&good_sent, "sent"), good_count);
    let good_seconds: f64 = good_sent["seconds"].parse().unwrap();
    assert!(
        good_seconds < 12.5,
        "the good sender fell behind: {good_sent:?}"
    );
    let good_forwarded = port_delta("p1", "tx_packets");
    assert!(
        (good_count - good_ring_drops - good_veth_drops..=good_count - good_ring_drops)
            .contains(&good_forwarded),
        "good flow: forwarded {good_forwarded} = {good_count} sent − {good_ring_drops} dropped \
         at p2's socket − up to {good_veth_drops} dropped by h3's veth"
    );
    assert!(
        good_received * 100 >= good_count * 98,
        "good flow lost more than 2 %: {good_received} of {good_count}"
    );
    // No amplification: at most one ICMP error per TTL-expired frame.
    assert!(icmp_sent <= kind("ttl_0") + kind("ttl_1"));
    assert!(unreachable_sent <= kind("to_switch_address"));
    // Even with the lab's sysctls the kernel's global ICMP limiter holds: icmp_msgs_burst (50)
    // per refill, measured ≈ 2,500 errors/s of both types together; 3,000/s over 11 s is the
    // bound.
    assert!(
        icmp_sent + unreachable_sent <= 3_000 * 11,
        "{icmp_sent} + {unreachable_sent} ICMP errors"
    );
    // Memory flat (the UMEM is pinned, so resident, from the start).
    assert!(
        rss_max <= rss_before + 2048,
        "RSS grew from {rss_before} to {rss_max} KiB"
    );
    assert!(slowest < Duration::from_secs(5), "stats took {slowest:?}");
}

/// The UMEM census of a snapshot, `(frames, accounted)`, with the places for messages.
fn umem(stats: &Value) -> (u64, u64, String) {
    let umem = &stats["data_path"]["umem"];
    let place = |name: &str| umem[name].as_u64().unwrap_or(0);
    let accounted = [
        "pool", "caches", "fill", "tx", "egress", "inbox", "in_batch",
    ]
    .iter()
    .map(|name| place(name))
    .sum();
    (place("frames"), accounted, umem.to_string())
}

/// Offered load per sender (datagrams/s of 1400 B) and run length of the overload test.
const OVERLOAD_RATE: u64 = 8_550;
const OVERLOAD_SECONDS: u64 = 30;

pub(crate) fn overloaded_port_tail_drops_exactly_and_leaks_no_frame() {
    let _machine = serial();
    let mut lab = Lab::new("ovl");
    // p1 shaped to 2 Mbit/s with a 30,000-byte buffer; p0 and p2 unshaped.
    let config = lab.dir().join("overload.toml");
    std::fs::write(
        &config,
        "[[ports]]\nname = \"p0\"\nrole = \"host\"\n\
         [[ports]]\nname = \"p1\"\nrole = \"host\"\nlink_rate = \"2mbit\"\nbuffer = \"30000\"\n\
         [[ports]]\nname = \"p2\"\nrole = \"host\"\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let switch_pid = three_hosts(&mut lab, &["--config", &config]);
    assert!(ping(&lab, "h1", "10.0.1.1", 2) && ping(&lab, "h3", "10.0.1.1", 2));
    assert!(ping(&lab, "h2", "10.0.2.1", 2));
    std::thread::sleep(Duration::from_millis(500));

    let udp = binary("ofan-udp");
    let udp = udp.to_str().unwrap().to_owned();
    let count = (OVERLOAD_RATE * OVERLOAD_SECONDS).to_string();
    let rate = OVERLOAD_RATE.to_string();
    // The other port's flow: h2 → h3 (egress p2), 5,000 datagrams/s of 200 B for the run.
    let other_count = (5_000 * OVERLOAD_SECONDS).to_string();
    lab.spawn(
        "h2",
        "overload-recv",
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9000",
            "--count",
            "1000000000",
            "--timeout-ms",
            "3000",
        ],
    );
    lab.spawn(
        "h3",
        "other-recv",
        &[
            &udp,
            "recv",
            "--bind",
            "0.0.0.0:9001",
            "--count",
            &other_count,
            "--timeout-ms",
            "3000",
        ],
    );
    assert!(lab.wait_for(Duration::from_secs(5), || lab
        .log("overload-recv")
        .contains("ready")
        && lab.log("other-recv").contains("ready")));
    let before = stats(&lab, "sw");
    let rss_before = rss_kib(switch_pid);
    let (frames, accounted_before, places_before) = umem(&before);
    assert!(
        frames > 0 && accounted_before == frames,
        "idle census before: {places_before}"
    );

    // Two senders at 8,550 × 1400 B/s each: 2 × 100 Mbit/s on the wire, 100 × the 2 Mbit/s.
    for sender in ["h1", "h3"] {
        lab.spawn(
            sender,
            &format!("overload-{sender}"),
            &[
                &udp,
                "send",
                "--to",
                "10.0.1.1:9000",
                "--count",
                &count,
                "--size",
                "1400",
                "--rate",
                &rate,
            ],
        );
    }
    lab.spawn(
        "h2",
        "other-send",
        &[
            &udp,
            "send",
            "--to",
            "10.0.2.1:9001",
            "--count",
            &other_count,
            "--size",
            "200",
            "--rate",
            "5000",
        ],
    );
    let deadline = Duration::from_secs(OVERLOAD_SECONDS + 15);
    assert!(
        lab.wait_for(deadline, || ["overload-h1", "overload-h3", "other-send"]
            .iter()
            .all(|label| lab.log(label).contains("sent=")))
    );
    assert!(lab.wait_for(Duration::from_secs(10), || lab
        .log("overload-recv")
        .contains("received=")
        && lab.log("other-recv").contains("received=")));
    std::thread::sleep(Duration::from_millis(300));
    let after = stats(&lab, "sw");
    let rss_after = rss_kib(switch_pid);
    let (_, accounted_after, places_after) = umem(&after);

    let offered: u64 = ["overload-h1", "overload-h3"]
        .iter()
        .map(|label| number(&key_values(&lab.log(label)), "sent"))
        .sum();
    let received = number(&key_values(&lab.log("overload-recv")), "received");
    let other_sent = key_values(&lab.log("other-send"));
    let other = key_values(&lab.log("other-recv"));
    let port_delta = |port_name: &str, field: &str| {
        port_value(&after, port_name, field) - port_value(&before, port_name, field)
    };
    let drops_buffer = port_delta("p1", "drops_buffer");
    let drops_handoff = port_delta("p1", "drops_handoff");
    let ring_drops: u64 = ["p0", "p2"]
        .iter()
        .map(|p| socket_drops(&after, p) - socket_drops(&before, p))
        .sum();
    let max_depth = port_value(&after, "p1", "max_depth_bytes");
    eprintln!(
        "overload: offered {offered}, received {received}, p1 tx {}, drops_buffer {drops_buffer}, \
         drops_handoff {drops_handoff}, socket drops p0+p2 {ring_drops}, max depth {max_depth} B; \
         other port: {other_sent:?} → {other:?}, p2 drops_buffer {}",
        port_delta("p1", "tx_packets"),
        port_delta("p2", "drops_buffer"),
    );
    eprintln!("UMEM before {places_before}\nUMEM after  {places_after}");
    eprintln!("RSS {rss_before} KiB before, {rss_after} KiB after");
    let p1 = port(&after, "p1");
    eprintln!(
        "p1 shaper lateness p50 {} ns, p99 {} ns, max {} ns",
        p1["lateness_p50_ns"], p1["lateness_p99_ns"], p1["max_lateness_ns"]
    );

    assert!(lab.running("switch-sw"), "{}", lab.log("switch-sw"));
    assert_eq!(
        offered,
        2 * OVERLOAD_RATE * OVERLOAD_SECONDS,
        "the senders could not send"
    );
    // Every frame not received is a counted drop, by name.
    assert_eq!(
        port_delta("p1", "tx_packets"),
        received,
        "p1 sent = h2 received"
    );
    assert_eq!(
        offered - received,
        drops_buffer + drops_handoff + ring_drops,
        "lost = tail drops + hand-off drops + socket drops"
    );
    assert!(
        drops_buffer > offered * 9 / 10,
        "mostly tail drops: {drops_buffer}"
    );
    // The queue never above its buffer.
    assert!(
        max_depth <= 30_000,
        "max depth {max_depth} B above the 30,000 B buffer"
    );
    assert!(
        max_depth > 30_000 - 1500,
        "the buffer should fill: {max_depth} B"
    );
    // No UMEM frame leaked.
    assert_eq!(accounted_after, frames, "idle census after: {places_after}");
    // The other port is unaffected: all sent on time, all received, no drops on p2.
    let other_seconds: f64 = other_sent["seconds"].parse().unwrap();
    assert!(
        other_seconds < OVERLOAD_SECONDS as f64 + 0.5,
        "{other_sent:?}"
    );
    assert_eq!(
        other["received"], other_count,
        "other port's flow: {other:?}"
    );
    assert_eq!(port_delta("p2", "drops_buffer"), 0);
    assert!(
        rss_after <= rss_before + 2048,
        "RSS {rss_before} → {rss_after} KiB"
    );
}
