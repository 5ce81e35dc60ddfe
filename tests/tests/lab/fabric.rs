//! The lab itself: up, ping, traceroute, links down, spliced and shared links, kill -9, two labs, the neighbour table.

use super::*;

/// A traceroute from pod 0's first host to pod 3's last (k = 4) answers from an edge, an
/// aggregation switch, a core, an aggregation switch, an edge and the host: 5 switch hops.
pub(super) fn traceroute_crosses_pods(lab: &LabGuard) {
    let topology = Topology::fat_tree(4).unwrap();
    let dst = topology.hosts().last().unwrap();
    let trace = traceroute(lab, "h-p0-e0-h0", &dst.loopback.to_string());
    let roles: Vec<Role> = trace
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(1)?.parse().ok())
        .map(|addr| topology.role(topology.node_by_addr(addr).expect("a lab address")))
        .collect();
    assert_eq!(
        roles,
        [
            Role::Edge,
            Role::Aggregation,
            Role::Core,
            Role::Aggregation,
            Role::Edge,
            Role::Host
        ],
        "{trace}"
    );
}

/// rx + tx packets of port `ifname` of switch `node`.
fn port_packets(lab: &LabGuard, node: &str, ifname: &str) -> u64 {
    let stats = lab.stats(node);
    let port = stats["data_path"]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == ifname))
        .unwrap_or_else(|| panic!("no port {ifname} at {node}"));
    port["rx_packets"].as_u64().unwrap() + port["tx_packets"].as_u64().unwrap()
}

/// The k=4 lab end to end: up, all 240 ordered pairs ping, traceroute across pods shows
/// edge–aggregation–core–aggregation–edge, the data path (not the kernel) forwarded, and down
/// leaves no namespace, link, process or XDP program. The switches run in one `ofan-switch
/// group` (the default): one process, recorded for every switch; a member killed alone is
/// reported crashed, keeps its program attached (a crash's black hole) while the others
/// forward, and starts again.
pub(super) fn k4_lab_up_pingall_traceroute_down() {
    let _machine = serial();
    let lab = LabGuard::new("a");
    let started = Instant::now();
    lab.ok(&["up", "--topo", "fat-tree", "--k", "4"]);
    eprintln!("k=4 lab up in {:.2} s", started.elapsed().as_secs_f64());
    let pids = lab.switch_pids();
    // 20 switches and the group itself, all one process.
    assert_eq!(pids.len(), 21);
    let mut distinct = pids.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 1, "one process for every switch: {pids:?}");

    let before =
        counter(&lab.stats("c-0"), "forwarded") + counter(&lab.stats("e-p0-0"), "forwarded");
    pingall_passes(&lab, 240);
    let after =
        counter(&lab.stats("c-0"), "forwarded") + counter(&lab.stats("e-p0-0"), "forwarded");
    assert!(
        after - before >= 30,
        "the data path forwarded only {} frames",
        after - before
    );

    traceroute_crosses_pods(&lab);
    every_neighbour_is_managed(&lab);

    // Status: every switch running, faithful or not is reported.
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("20/20 switches running, 0 crashed"),
        "{status}"
    );

    // The XDP program is attached inside the lab before down.
    let xdp = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{}e-p0-0", lab.prefix()),
            "ip",
            "-d",
            "link",
            "show",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&xdp.stdout).contains("xdp"));

    // One member killed: crashed in status, its program still attached, the rest forwards.
    lab.ok(&["node", "c-1", "kill"]);
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("19/20 switches running, 1 crashed"),
        "{status}"
    );
    let xdp = Command::new("ip")
        .args(["netns", "exec", &format!("{}c-1", lab.prefix())])
        .args(["ip", "-d", "link", "show", "p0"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&xdp.stdout).contains("xdp"),
        "a killed member leaves its program attached, as a killed process does"
    );
    // Hosts of one pod reach each other without the core.
    let out = lab.lab(&[
        "exec",
        "h-p0-e0-h0",
        "--",
        "ping",
        "-c",
        "3",
        "-i",
        "0.2",
        "10.0.1.1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    lab.ok(&["node", "c-1", "start"]);
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("20/20 switches running, 0 crashed"),
        "{status}"
    );
    pingall_passes(&lab, 240);
    lab.down_and_check(&pids);
    // Idempotent.
    lab.ok(&["down"]);
}

/// A port of a switch's stats (`rx_packets`, `rx_spliced`, ...).
pub(super) fn port_stats(lab: &LabGuard, node: &str, ifname: &str) -> Value {
    let stats = lab.stats(node);
    stats["data_path"]["ports"]
        .as_array()
        .and_then(|ports| ports.iter().find(|p| p["name"] == ifname))
        .cloned()
        .unwrap_or_else(|| panic!("no port {ifname} at {node}"))
}

/// A steering program counter of a switch (`redirected`, `drop_blackhole`, ...). A switch
/// copies them into its stats every 100 ms: one that just started may not have yet.
pub(super) fn steering_counter(lab: &LabGuard, node: &str, name: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let value = lab.stats(node)["steering"]
            .as_array()
            .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
            .and_then(|pair| pair[1].as_u64());
        match value {
            Some(value) => return value,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            None => panic!("no steering counter {name} at {node}"),
        }
    }
}

/// [`steering_counter`] once it reaches `at_least`, or after 2 s as it is: the stats copy the
/// program's counters every 100 ms, so frames just counted there may not show yet.
pub(super) fn steering_counter_reaching(
    lab: &LabGuard,
    node: &str,
    name: &str,
    at_least: u64,
) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let value = steering_counter(lab, node, name);
        if value >= at_least || Instant::now() >= deadline {
            return value;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Links between switches of a group are spliced (the default): data frames reach the next
/// switch in the process (counted in `rx_spliced`, not by its steering program), while what
/// its kernel answers still crosses the veth (traceroute). A link set down carries nothing,
/// spliced or not, until it is up again; a blackholed link's receiving end drops in its
/// program what its peer now sends over the veth. `--splice false` puts every frame back on
/// the veths.
pub(super) fn spliced_links_carry_data_and_stop_at_a_link_down_or_blackhole() {
    let _machine = serial();
    let lab = LabGuard::new("s");
    lab.ok(&["up", "--k", "4"]);
    pingall_passes(&lab, 240);
    let agg = port_stats(&lab, "a-p0-0", "p0");
    let spliced = agg["rx_spliced"].as_u64().unwrap();
    assert!(spliced >= 10, "a-p0-0:p0 spliced {spliced}: {agg}");
    assert_eq!(spliced, agg["rx_packets"].as_u64().unwrap(), "{agg}");
    traceroute_crosses_pods(&lab);

    // Down: nothing crosses it at either end, pings route around it.
    lab.ok(&["link", "e-p0-0", "a-p0-0", "down"]);
    std::thread::sleep(Duration::from_millis(300));
    let before = (
        port_packets(&lab, "e-p0-0", "p2"),
        port_packets(&lab, "a-p0-0", "p0"),
    );
    pingall_passes(&lab, 240);
    pingall_passes(&lab, 240);
    let after = (
        port_packets(&lab, "e-p0-0", "p2"),
        port_packets(&lab, "a-p0-0", "p0"),
    );
    assert_eq!(
        before, after,
        "traffic crossed the dead link (e-p0-0:p2, a-p0-0:p0)"
    );
    lab.ok(&["link", "e-p0-0", "a-p0-0", "up"]);
    std::thread::sleep(Duration::from_millis(500));
    pingall_passes(&lab, 240);
    let spliced_again = port_stats(&lab, "a-p0-0", "p0")["rx_spliced"]
        .as_u64()
        .unwrap();
    assert!(
        spliced_again > spliced,
        "splicing did not resume: {spliced_again}"
    );

    // Blackholed (static routes keep using it): what e-p0-0 sends to a-p0-0 now takes the
    // veth and dies in a-p0-0's program.
    lab.ok(&["link", "e-p0-0", "a-p0-0", "blackhole"]);
    let (rx_before, dropped_before) = (
        port_stats(&lab, "a-p0-0", "p0")["rx_packets"]
            .as_u64()
            .unwrap(),
        steering_counter(&lab, "a-p0-0", "drop_blackhole"),
    );
    let _ = lab.lab(&[
        "exec",
        "h-p0-e0-h0",
        "--",
        "ping",
        "-c",
        "20",
        "-i",
        "0.05",
        "-W",
        "1",
        "10.2.0.1",
    ]);
    let (rx_after, dropped_after) = (
        port_stats(&lab, "a-p0-0", "p0")["rx_packets"]
            .as_u64()
            .unwrap(),
        steering_counter_reaching(&lab, "a-p0-0", "drop_blackhole", dropped_before + 1),
    );
    assert_eq!(rx_before, rx_after, "a blackholed port received frames");
    assert!(
        dropped_after > dropped_before,
        "nothing reached a-p0-0's program: {dropped_before} → {dropped_after}"
    );
    lab.ok(&["link", "e-p0-0", "a-p0-0", "up"]);
    lab.ok(&["down"]);

    // Over the veths: the same pings, each received by the steering program.
    lab.ok(&["up", "--k", "4", "--splice", "false"]);
    let redirected = steering_counter(&lab, "a-p0-0", "redirected");
    pingall_passes(&lab, 240);
    let agg = port_stats(&lab, "a-p0-0", "p0");
    assert_eq!(agg["rx_spliced"], 0, "{agg}");
    let now = steering_counter_reaching(&lab, "a-p0-0", "redirected", redirected + 10);
    assert!(
        now >= redirected + 10,
        "redirected {redirected} → {now}: {agg}"
    );
    let pids = lab.switch_pids();
    lab.down_and_check(&pids);
}

/// A link taken down: pingall still passes (routes avoid it) and its counters stop; back up,
/// pingall passes again. With one switch process per switch (`--switches process`, what runs
/// on a real box), whose edge switch also stops and starts again: its hosts get their default
/// routes back.
pub(super) fn link_down_is_routed_around_and_its_counters_stop() {
    let _machine = serial();
    let lab = LabGuard::new("b");
    lab.ok(&[
        "up",
        "--topo",
        "fat-tree",
        "--k",
        "4",
        "--switches",
        "process",
    ]);
    assert_eq!(lab.switch_pids().len(), 20, "one process per switch");
    pingall_passes(&lab, 240);
    let out = lab.lab(&["link", "e-p0-0", "a-p0-0", "down"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // e-p0-0's port 2 leads to a-p0-0's port 0.
    std::thread::sleep(Duration::from_millis(300));
    let (edge_before, agg_before) = (
        port_packets(&lab, "e-p0-0", "p2"),
        port_packets(&lab, "a-p0-0", "p0"),
    );
    pingall_passes(&lab, 240);
    pingall_passes(&lab, 240);
    let (edge_after, agg_after) = (
        port_packets(&lab, "e-p0-0", "p2"),
        port_packets(&lab, "a-p0-0", "p0"),
    );
    assert_eq!(
        edge_before, edge_after,
        "traffic crossed the dead link at e-p0-0:p2"
    );
    assert_eq!(
        agg_before, agg_after,
        "traffic crossed the dead link at a-p0-0:p0"
    );
    let status = lab.ok(&["status"]);
    assert!(status.contains("1 links down"), "{status}");

    lab.ok(&["link", "e-p0-0", "a-p0-0", "up"]);
    std::thread::sleep(Duration::from_millis(500));
    pingall_passes(&lab, 240);
    assert!(
        port_packets(&lab, "e-p0-0", "p2") > edge_after,
        "the restored link carries no traffic"
    );
    // The link's ends lost their neighbour entries with their carrier; whichever end's kernel
    // learnt the other from its ARP request, both switches made them managed again.
    every_neighbour_is_managed(&lab);
    lab.ok(&["node", "e-p0-0", "stop"]);
    lab.ok(&["node", "e-p0-0", "start"]);
    pingall_passes(&lab, 240);
    // Its hosts' links went down and up with it: their gateways are managed entries again.
    every_neighbour_is_managed(&lab);
    let pids = lab.switch_pids();
    lab.down_and_check(&pids);
}

/// `kill -9` of every switch process: status shows them crashed, and down still removes
/// everything. Then an `up` killed halfway: down removes what it had made.
pub(super) fn down_after_kill_9_of_every_switch_and_of_up_itself() {
    let _machine = serial();
    let lab = LabGuard::new("c");
    lab.ok(&["up", "--topo", "fat-tree", "--k", "4"]);
    let pids = lab.switch_pids();
    for pid in &pids {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    std::thread::sleep(Duration::from_millis(300));
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("0/20 switches running, 20 crashed"),
        "{status}"
    );
    lab.down_and_check(&pids);

    // `up` killed while building (after 0.15 s, 0.3 s, … whatever it had made by then).
    for delay_ms in [150u64, 400] {
        let mut up = Command::new(binary("ofan-lab"))
            .args(["up", "--k", "4", "--name", &lab.name])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = up.kill();
        let _ = up.wait();
        let pids = if lab.state_dir().join("state.json").exists() {
            lab.switch_pids()
        } else {
            Vec::new()
        };
        lab.down_and_check(&pids);
    }
}

/// The machine's neighbour-table thresholds (`net.ipv4.neigh.default.gc_thresh1..3`), put
/// back as they were when dropped (the test lowers them).
struct NeighbourThresholds([String; 3]);

impl NeighbourThresholds {
    fn read() -> [String; 3] {
        GC_THRESH.map(|path| std::fs::read_to_string(path).unwrap().trim().to_owned())
    }

    fn write(values: &[String; 3]) -> std::io::Result<()> {
        for (path, value) in GC_THRESH.iter().zip(values) {
            std::fs::write(path, value)?;
        }
        Ok(())
    }

    fn lower_to(values: [&str; 3]) -> Self {
        let original = Self::read();
        Self::write(&values.map(str::to_owned)).unwrap();
        Self(original)
    }
}

impl Drop for NeighbourThresholds {
    fn drop(&mut self) {
        let _ = Self::write(&self.0);
    }
}

/// The kernel's refusals of new neighbour entries ("neighbor table overflow"): the last
/// column of `/proc/net/stat/arp_cache`, summed over the CPUs.
fn neighbour_table_fulls() -> u64 {
    let text = std::fs::read_to_string("/proc/net/stat/arp_cache").unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let column = header.iter().position(|h| *h == "table_fulls").unwrap();
    lines
        .map(|line| u64::from_str_radix(line.split_whitespace().nth(column).unwrap(), 16).unwrap())
        .sum()
}

/// The machine's neighbour table (one for every namespace) is left alone by a lab built
/// without `--tune-machine` — which is refused, naming the flag, when its entries would not fit
/// — and given room by one built with it, put back by its `down`: with the thresholds lowered
/// below a k = 4 lab's 96 entries (hard limit 64), the kernel would refuse a third of them and
/// `pingall` fail.
pub(super) fn neighbour_table_holds_the_lab_and_is_put_back() {
    let _machine = serial();
    let others = std::fs::read_dir("/run/ofan/labs").map_or(0, |dir| dir.count());
    assert_eq!(
        others, 0,
        "another lab runs on this machine: only the last lab's down puts the table back"
    );
    let low = ["16", "24", "64"];
    let _thresholds = NeighbourThresholds::lower_to(low);
    let refused = neighbour_table_fulls();
    let lab = LabGuard::new("n");
    let output = lab.lab(&["up", "--k", "4"]);
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "up without room succeeded:\n{said}"
    );
    assert!(
        said.contains("gc_thresh3") && said.contains("--tune-machine"),
        "the refusal names the limit and the flag:\n{said}"
    );
    assert_eq!(NeighbourThresholds::read(), low.map(str::to_owned));
    assert!(!lab.state_dir().exists(), "a refused up left its state");
    let output = lab.lab(&["up", "--k", "4", "--tune-machine"]);
    let up = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "up failed:\n{up}");
    pingall_passes(&lab, 240);
    assert_eq!(
        neighbour_table_fulls(),
        refused,
        "the kernel refused neighbour entries"
    );
    let raised: Vec<u32> = NeighbourThresholds::read()
        .iter()
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(
        raised[0] >= 96 && raised[1] >= 96 && raised[2] > raised[1],
        "{raised:?}\n{up}"
    );
    assert!(up.contains("neighbour table raised"), "{up}");
    let pids = lab.switch_pids();
    lab.down_and_check(&pids);
    assert_eq!(NeighbourThresholds::read(), low.map(str::to_owned));
    assert!(!std::path::Path::new("/run/ofan/neighbour-table.json").exists());
}

/// Two labs with different names at once: both work; removing one leaves the other intact.
/// The machine-wide settings too: a lab built without `--tune-machine` changes none; one built
/// with it changes them (real-time throttling lifted where the kernel has the fair server,
/// ksoftirqd real-time), and they stay so until the last lab goes down, which puts them back.
pub(super) fn two_labs_at_once() {
    let _machine = serial();
    let alone = std::fs::read_dir("/run/ofan/labs").map_or(0, |dir| dir.count()) == 0;
    let lifts = alone && rt_throttle::kernel_has_fair_server().expect("the kernel's release");
    let before = MachineSettings::read();
    let first = LabGuard::new("d");
    let second = LabGuard::new("e");
    second.ok(&["up", "--topo", "fat-tree", "--k", "4", "--lb", "ecmp"]);
    if alone {
        assert_eq!(
            MachineSettings::read(),
            before,
            "a lab without --tune-machine changes no machine-wide setting"
        );
    }
    first.ok(&["up", "--topo", "leaf-spine", "--k", "4", "--tune-machine"]);
    let tuned = MachineSettings::read();
    assert!(tuned.ksoftirqd_realtime(), "{tuned:?}");
    if lifts {
        assert_eq!(
            tuned.rt_runtime_us, "-1",
            "a tuned lab lifts the throttling"
        );
    }
    pingall_passes(&first, 56);
    pingall_passes(&second, 240);
    let pids = first.switch_pids();
    first.down_and_check(&pids);
    assert_eq!(
        MachineSettings::read(),
        tuned,
        "changed while a lab runs, even one that did not ask"
    );
    pingall_passes(&second, 240);
    let pids = second.switch_pids();
    second.down_and_check(&pids);
    if alone {
        assert_eq!(
            MachineSettings::read(),
            before,
            "the last down puts them back"
        );
        for record in ["rt-runtime", "ksoftirqd", "neighbour-table"] {
            let path = format!("/run/ofan/{record}.json");
            assert!(!std::path::Path::new(&path).exists(), "{path} left");
        }
    }
}

/// Every neighbour a switch forwards to is a *managed* kernel entry — also those its kernel
/// learnt from the peer's ARP request before the mirror asked — and so is every host's
/// gateway (the lab makes it one), so that the kernel re-probes them and its garbage
/// collection leaves them alone: it deletes ordinary entries the kernel never sends through
/// once the machine holds more than 128, and unconfirmed ones above 512 (a k = 8 lab dropped
/// frames to switches' next hops deleted that way).
fn every_neighbour_is_managed(lab: &LabGuard) {
    let namespaces = namespaces_with_prefix(&lab.prefix());
    assert_eq!(namespaces.len(), 36, "{namespaces:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut ordinary = Vec::new();
        for namespace in &namespaces {
            let output = Command::new("ip")
                .args(["netns", "exec", namespace])
                .args(["ip", "-4", "neigh", "show"])
                .output()
                .expect("ip neigh");
            let text = String::from_utf8_lossy(&output.stdout);
            ordinary.extend(
                text.lines()
                    .filter(|line| line.contains("lladdr") && !line.contains("managed"))
                    .map(|line| format!("{namespace}: {line}")),
            );
        }
        if ordinary.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "neighbours the kernel may delete:\n{}",
            ordinary.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The answer of the lab's `ofan-switch group` to `status` on its control socket.
pub(super) fn group_status(lab: &LabGuard) -> Value {
    use std::io::{BufRead, Write};
    let path = lab.state_dir().join("sock").join("group.ctl");
    let mut stream = std::os::unix::net::UnixStream::connect(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    writeln!(stream, "status").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(&stream)
        .read_line(&mut line)
        .unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}
