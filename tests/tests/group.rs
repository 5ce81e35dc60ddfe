//! Root tests of `ofan-switch group` — several switches in one process, their workers served by
//! one shared pool of threads — and of that pool (`ofan_dataplane::afxdp::pool`) on its own.
//!
//! The group's tests build their network from namespaces of their own, not through `ofan-lab`:
//! four members — two leaves and both spines of a radix-4 leaf-spine — with four hosts, the
//! topology's addresses and static routes, and one `ofan-switch group` process (started in a
//! namespace of its own) running the four. Each member is read through its own admin socket,
//! the group through its control socket, its threads through `/proc`. The pool's test (`group/pool.rs`) runs switch data
//! paths in this process on a pool of one thread.
//!
//! Every namespace carries the test process's unique prefix and is deleted by [`Lab`], which
//! also stops the processes it started (by pid), also when a test fails; a member's XDP program
//! goes with its namespace.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use ofan_tests::{binary, key_values, serial, Lab};
use ofan_topology::{Role, Topology};
use serde_json::Value;

#[path = "group/pool.rs"]
mod pool;

use pool::pool_thread_serves_switches_in_turn_sleeps_when_idle_and_lets_one_restart;

/// The members: two leaves and both spines of a radix-4 leaf-spine (leaves 2 and 3 are stubs:
/// namespaces that only hold the spines' links to them).
const MEMBERS: [&str; 4] = ["leaf-0", "leaf-1", "spine-0", "spine-1"];
const STUBS: [&str; 2] = ["leaf-2", "leaf-3"];
/// The hosts of the two member leaves.
const HOSTS: [&str; 4] = ["h-l0-h0", "h-l0-h1", "h-l1-h0", "h-l1-h1"];
/// Every member's ports (a leaf's p0 and p1 lead to its hosts, p2 and p3 to spine-0 and
/// spine-1; a spine's p0 … p3 to leaf-0 … leaf-3).
const PORTS: usize = 4;

/// The fabric and the running group.
struct Fabric {
    lab: Lab,
    topology: Topology,
    /// The group's process (`ip netns exec` execs it: the pid spawned).
    group: u32,
}

impl Fabric {
    /// The namespaces of the members, their hosts and the stubs, linked and addressed as the
    /// topology's plan says, with static routes that keep the paths apart: leaf-0 reaches
    /// leaf-1's hosts through spine-0 only, leaf-1 reaches leaf-0's through spine-1 only. Then
    /// the group is started and every member's next hops are resolved.
    fn up(tag: &str) -> Self {
        let topology = Topology::leaf_spine(4).expect("k = 4");
        let mut lab = Lab::new(tag);
        lab.add_ns("ctl");
        let present: Vec<&str> = MEMBERS
            .iter()
            .chain(&STUBS)
            .chain(&HOSTS)
            .copied()
            .collect();
        for node in &present {
            lab.add_ns(node);
        }
        for link in topology.links() {
            let [(a, a_port), (b, b_port)] = [link.a, link.b];
            let (a_node, b_node) = (topology.node(a), topology.node(b));
            if !present.contains(&a_node.name.as_str()) || !present.contains(&b_node.name.as_str())
            {
                continue;
            }
            let (a_port, b_port) = (topology.port(a, a_port), topology.port(b, b_port));
            lab.link(&a_node.name, &a_port.ifname, &b_node.name, &b_port.ifname);
            for (node, port) in [(a_node, a_port), (b_node, b_port)] {
                let cidr = format!("{}/{}", port.address, port.prefix_len);
                if node.role == Role::Host {
                    // Its gateway: the leaf's end of the link.
                    let other = if node.id == a { b_port } else { a_port };
                    lab.host(&node.name, &port.ifname, &cidr, &other.address.to_string());
                } else {
                    lab.addr(&node.name, &port.ifname, &cidr);
                }
            }
        }
        let mut fabric = Fabric {
            lab,
            topology,
            group: 0,
        };
        for member in MEMBERS {
            // As in a lab: the kernel answers expired TTLs (traceroute). The tests read the data
            // path's own counters, since the kernel would forward what it is passed.
            fabric
                .lab
                .exec(member, &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
        }
        for (member, prefix, port) in [
            ("leaf-0", "10.0.1.0/24", "p2"),
            ("leaf-1", "10.0.0.0/24", "p3"),
            ("spine-0", "10.0.0.0/24", "p0"),
            ("spine-0", "10.0.1.0/24", "p1"),
            ("spine-1", "10.0.0.0/24", "p0"),
            ("spine-1", "10.0.1.0/24", "p1"),
        ] {
            let via = fabric.peer_address(member, port);
            fabric.lab.exec(
                member,
                &["ip", "route", "add", prefix, "via", &via, "dev", port],
            );
        }
        fabric.start_group();
        fabric
    }

    /// The address of the far end of `node`'s port `ifname`.
    fn peer_address(&self, node: &str, ifname: &str) -> String {
        let node = self
            .topology
            .nodes()
            .iter()
            .find(|n| n.name == node)
            .expect("a node of the topology");
        let port = node
            .ports
            .iter()
            .find(|p| p.ifname == ifname)
            .expect("a port of the node");
        self.topology
            .port(port.peer, port.peer_port)
            .address
            .to_string()
    }

    /// The address of host `host`.
    fn address(&self, host: &str) -> String {
        self.topology
            .hosts()
            .iter()
            .find(|n| n.name == host)
            .map(|n| n.loopback.to_string())
            .expect("a host of the topology")
    }

    fn control_path(&self) -> String {
        self.lab.dir().join("group.sock").display().to_string()
    }

    fn admin_socket(&self, member: &str) -> String {
        self.lab
            .dir()
            .join(format!("{member}.sock"))
            .display()
            .to_string()
    }

    /// Starts the group in namespace `ctl` (its members enter their own namespaces) on two pool
    /// threads, and waits until every member runs and has resolved its next hops.
    fn start_group(&mut self) {
        let switch = binary("ofan-switch");
        assert!(
            switch.exists(),
            "build the binaries first: cargo build --release --workspace --bins"
        );
        let topology = self.lab.dir().join("topology.json");
        std::fs::write(&topology, self.topology.to_json()).expect("topology file");
        let topology = topology.display().to_string();
        let netns = self.lab.ns("{node}");
        let admin = self.admin_socket("{node}");
        let control = self.control_path();
        let mut command = vec![
            switch.to_str().unwrap(),
            "group",
            "--topology",
            &topology,
            "--netns",
            &netns,
            "--admin-socket",
            &admin,
            "--control",
            &control,
            "--workers",
            "2",
            // veth: copy mode (auto would look for the device in this mount namespace's sysfs).
            "--xdp-mode",
            "copy",
            "--lb",
            "ecmp",
            "--log",
            "info",
        ];
        for member in MEMBERS {
            command.extend(["--member", member]);
        }
        let command: Vec<String> = command.iter().map(|s| s.to_string()).collect();
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        self.group = self.lab.spawn("ctl", "group", &command);
        let listening = self.lab.wait_for(Duration::from_secs(10), || {
            std::path::Path::new(&self.control_path()).exists()
        });
        assert!(listening, "no control socket:\n{}", self.lab.log("group"));
        self.wait_up();
    }

    /// Waits until every member runs and has resolved its next hops.
    fn wait_up(&self) {
        let up = self.lab.wait_for(Duration::from_secs(20), || {
            MEMBERS.iter().all(|m| self.running(m) && self.resolved(m))
        });
        assert!(
            up,
            "the group did not come up: {}\n{}",
            self.control_ok("status"),
            self.lab.log("group")
        );
    }

    /// The names of the group's threads, once no member is starting or stopping (no `sw-`
    /// thread: those live only for that) and two looks 200 ms apart agree, or after 5 s.
    fn settled_threads(&self) -> Vec<String> {
        let look = || {
            let tasks = format!("/proc/{}/task", self.group);
            let mut names: Vec<String> = std::fs::read_dir(&tasks)
                .unwrap_or_else(|e| panic!("{tasks}: {e}"))
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect();
            names.sort();
            names
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut last = look();
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = look();
            let settled = now == last && !now.iter().any(|name| name.starts_with("sw-"));
            if settled || std::time::Instant::now() > deadline {
                return now;
            }
            last = now;
        }
    }

    /// Whether the group says `member` runs; a member that failed fails the test.
    fn running(&self, member: &str) -> bool {
        let status = self.control_ok("status");
        let state = &status["members"][member];
        assert_ne!(state["state"], "failed", "{member} failed: {status}");
        state["state"] == "running"
    }

    /// Whether `member` answers on its admin socket with every next hop resolved.
    fn resolved(&self, member: &str) -> bool {
        std::path::Path::new(&self.admin_socket(member)).exists()
            && self.stats(member)["fib"]["unresolved"]
                .as_array()
                .is_some_and(Vec::is_empty)
    }

    /// One request on the group's control socket: its JSON reply.
    fn control(&self, request: &str) -> Value {
        let mut stream = UnixStream::connect(self.control_path())
            .unwrap_or_else(|e| panic!("group control socket: {e}\n{}", self.lab.log("group")));
        // A stop or kill waits for the member to end.
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        writeln!(stream, "{request}").unwrap();
        let mut reply = String::new();
        BufReader::new(&stream).read_line(&mut reply).unwrap();
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("reply {reply:?}: {e}"))
    }

    /// A request that must succeed.
    fn control_ok(&self, request: &str) -> Value {
        let reply = self.control(request);
        assert_eq!(
            reply["ok"],
            true,
            "`{request}`: {reply}\n{}",
            self.lab.log("group")
        );
        reply
    }

    /// `ofan-switch stats --json` of one member, through its own admin socket.
    fn stats(&self, member: &str) -> Value {
        let output = std::process::Command::new(binary("ofan-switch"))
            .args(["stats", "--json", "--socket", &self.admin_socket(member)])
            .output()
            .expect("ofan-switch stats");
        assert!(
            output.status.success(),
            "stats of {member} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("stats JSON")
    }

    /// The counters of the members given, now.
    fn counters(&self, members: &[&'static str]) -> BTreeMap<&'static str, Counters> {
        members
            .iter()
            .map(|&m| (m, Counters::of(&self.stats(m))))
            .collect()
    }

    /// Starts a receiver on host `to` for `count` datagrams (it reports after the last, or
    /// after 3 s without one); returns its log label.
    fn receive(&mut self, to: &str, count: u64, label: &str) -> String {
        let udp = binary("ofan-udp").display().to_string();
        let label = format!("recv-{label}");
        let count = count.to_string();
        self.lab.spawn(
            to,
            &label,
            &[
                &udp,
                "recv",
                "--bind",
                "0.0.0.0:9000",
                "--count",
                &count,
                "--timeout-ms",
                "3000",
            ],
        );
        let ready = self.lab.wait_for(Duration::from_secs(5), || {
            self.lab.log(&label).contains("ready")
        });
        assert!(
            ready,
            "receiver {label} did not start: {}",
            self.lab.log(&label)
        );
        label
    }

    /// An `ofan-udp send` of `count` datagrams at `rate` per second to host `to`.
    fn send_command(&self, to: &str, count: u64, rate: u64) -> Vec<String> {
        [
            binary("ofan-udp").display().to_string(),
            "send".into(),
            "--to".into(),
            format!("{}:9000", self.address(to)),
            "--count".into(),
            count.to_string(),
            "--size".into(),
            "200".into(),
            "--rate".into(),
            rate.to_string(),
            "--flows".into(),
            "4".into(),
        ]
        .into()
    }

    /// The receiver's report once it has one (`received=`, `duplicates=`).
    fn report(&self, label: &str) -> BTreeMap<String, String> {
        let done = self.lab.wait_for(Duration::from_secs(30), || {
            self.lab.log(label).contains("received=")
        });
        assert!(done, "receiver {label} never reported");
        let report = key_values(&self.lab.log(label));
        assert_eq!(report["duplicates"], "0", "{label}: {report:?}");
        report
    }

    /// Sends `count` datagrams from host `from` to host `to` at 5,000/s and returns how many
    /// arrived (each once: a duplicate fails the test).
    fn udp(&mut self, from: &str, to: &str, count: u64, label: &str) -> u64 {
        let label = self.receive(to, count, label);
        let command = self.send_command(to, count, 5_000);
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let sent = self.lab.exec(from, &command);
        let sent = key_values(&String::from_utf8_lossy(&sent.stdout));
        assert_eq!(sent["sent"], count.to_string(), "{sent:?}");
        self.report(&label)["received"].parse().expect("a count")
    }

    /// Whether host `from` reaches host `to` with ping (3 of 3).
    fn ping(&self, from: &str, to: &str) -> bool {
        self.lab
            .try_exec(
                from,
                &[
                    "ping",
                    "-c",
                    "3",
                    "-i",
                    "0.05",
                    "-W",
                    "1",
                    &self.address(to),
                ],
            )
            .status
            .success()
    }

    /// SIGTERM to the group: it exits 0, `stops` members stopped with every frame accounted
    /// for (a killed member's end is not a stop), and no member's interface keeps an XDP
    /// program.
    fn stops_cleanly(&mut self, stops: usize) {
        let code = self.lab.signal("group", "TERM");
        let log = self.lab.log("group");
        assert_eq!(code, Some(0), "{log}");
        let accounted = log.matches("every frame accounted for").count();
        assert_eq!(accounted, stops, "{log}");
        for member in MEMBERS {
            assert_eq!(
                self.lab.xdp_attached(member),
                Vec::<String>::new(),
                "{member} kept its program"
            );
        }
    }
}

/// One member's counters, as its admin socket reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counters {
    /// Frames its data path forwarded.
    forwarded: u64,
    /// Frames received (`rx`) and sent (`tx`) on each of its ports p0 … p3.
    rx: [u64; PORTS],
    tx: [u64; PORTS],
    /// Seconds its switch has run (this member's, not the group's).
    uptime_s: f64,
}

impl Counters {
    fn of(stats: &Value) -> Self {
        let counter = |name: &str| {
            stats["data_path"]["counters"]
                .as_array()
                .and_then(|pairs| pairs.iter().find(|pair| pair[0] == name))
                .and_then(|pair| pair[1].as_u64())
                .unwrap_or_else(|| panic!("no counter {name} in {stats}"))
        };
        let port = |index: usize, field: &str| {
            stats["data_path"]["ports"]
                .as_array()
                .and_then(|ports| ports.iter().find(|p| p["name"] == format!("p{index}")))
                .and_then(|p| p[field].as_u64())
                .unwrap_or_else(|| panic!("no port p{index} in {stats}"))
        };
        Self {
            forwarded: counter("forwarded"),
            rx: std::array::from_fn(|i| port(i, "rx_packets")),
            tx: std::array::from_fn(|i| port(i, "tx_packets")),
            uptime_s: stats["uptime_s"].as_f64().expect("uptime_s"),
        }
    }

    /// What moved since `before` (an earlier reading of the same switch).
    fn since(&self, before: &Self) -> Self {
        Self {
            forwarded: self.forwarded - before.forwarded,
            rx: std::array::from_fn(|i| self.rx[i] - before.rx[i]),
            tx: std::array::from_fn(|i| self.tx[i] - before.tx[i]),
            uptime_s: self.uptime_s - before.uptime_s,
        }
    }
}

/// The members' counters between two readings.
fn moved(
    before: &BTreeMap<&'static str, Counters>,
    after: &BTreeMap<&'static str, Counters>,
) -> BTreeMap<&'static str, Counters> {
    after
        .iter()
        .map(|(&m, now)| (m, now.since(&before[m])))
        .collect()
}

/// Packets the kernel of namespace `ns` forwarded (`Ip: ForwDatagrams` of /proc/net/snmp).
fn kernel_forwarded(lab: &Lab, ns: &str) -> u64 {
    let snmp = lab.exec(ns, &["cat", "/proc/net/snmp"]);
    let snmp = String::from_utf8_lossy(&snmp.stdout);
    let mut ip = snmp.lines().filter(|line| line.starts_with("Ip:"));
    let (names, values) = (
        ip.next().expect("Ip: names"),
        ip.next().expect("Ip: values"),
    );
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "ForwDatagrams")
        .and_then(|(_, value)| value.parse().ok())
        .expect("ForwDatagrams")
}

/// A flow between two hosts and the members it crosses, each with the port it enters by and
/// the port it leaves by.
struct Flow {
    from: &'static str,
    to: &'static str,
    path: &'static [(&'static str, usize, usize)],
}

/// h-l0-h0 → h-l1-h0: leaf-0, spine-0, leaf-1.
const THROUGH_SPINE_0: Flow = Flow {
    from: "h-l0-h0",
    to: "h-l1-h0",
    path: &[("leaf-0", 0, 2), ("spine-0", 0, 1), ("leaf-1", 2, 0)],
};
/// h-l1-h1 → h-l0-h1: leaf-1, spine-1, leaf-0.
const THROUGH_SPINE_1: Flow = Flow {
    from: "h-l1-h1",
    to: "h-l0-h1",
    path: &[("leaf-1", 1, 3), ("spine-1", 1, 0), ("leaf-0", 3, 1)],
};
/// h-l0-h1 → h-l0-h0: leaf-0 alone.
const WITHIN_LEAF_0: Flow = Flow {
    from: "h-l0-h1",
    to: "h-l0-h0",
    path: &[("leaf-0", 1, 0)],
};

/// A group of four forwards between the hosts, and each member's own admin socket counts
/// exactly the traffic that crossed that member: a flow moves the counters of the members on
/// its path, on the ports it enters and leaves by, and no other counter of any member.
fn group_of_four_forwards_and_counts_each_member_on_its_own() {
    let _machine = serial();
    let mut fabric = Fabric::up("grp");
    let status = fabric.control_ok("status");
    assert_eq!(status["pool"]["threads"], 2, "{status}");
    for from in HOSTS {
        for to in HOSTS.iter().filter(|&&to| to != from) {
            assert!(
                fabric.ping(from, to),
                "ping {from} → {to} failed:\n{}",
                fabric.lab.log("group")
            );
        }
    }

    const N: u64 = 2_000;
    for flow in [THROUGH_SPINE_0, THROUGH_SPINE_1, WITHIN_LEAF_0] {
        let before = fabric.counters(&MEMBERS);
        let label = format!("{}-{}", flow.from, flow.to);
        let received = fabric.udp(flow.from, flow.to, N, &label);
        assert_eq!(received, N, "{label}:\n{}", fabric.lab.log("group"));
        let moved = moved(&before, &fabric.counters(&MEMBERS));
        for member in MEMBERS {
            let counted = moved[member];
            let (mut rx, mut tx, mut forwarded) = ([0; PORTS], [0; PORTS], 0);
            if let Some(&(_, port_in, port_out)) = flow.path.iter().find(|(m, _, _)| *m == member) {
                rx[port_in] = N;
                tx[port_out] = N;
                forwarded = N;
            }
            assert_eq!(
                (counted.forwarded, counted.rx, counted.tx),
                (forwarded, rx, tx),
                "{label}: counters of {member} (forwarded, rx and tx by port); all: {moved:?}"
            );
        }
    }
    fabric.stops_cleanly(MEMBERS.len());
}

/// One member killed through the group's control socket (`kill spine-0`: as a crash would end
/// it, its sockets closed and its program left attached) and started again (`start spine-0`):
/// the flow through it forwards again, on the new switch's counters, while two flows that do
/// not cross it — one through the other spine, on the same pool thread, one within a leaf —
/// lose nothing across the kill and the restart, and the other members are never restarted
/// and count on.
fn member_killed_and_restarted_forwards_again_and_the_others_never_stop() {
    let _machine = serial();
    let mut fabric = Fabric::up("kill");
    const N: u64 = 500;
    let (from, to) = (THROUGH_SPINE_0.from, THROUGH_SPINE_0.to);
    assert_eq!(fabric.udp(from, to, N, "before"), N);
    let others = ["leaf-0", "leaf-1", "spine-1"];
    let before = fabric.counters(&others);
    let started = std::time::Instant::now();

    // 15 s of traffic on the paths that avoid spine-0, across the kill and the restart.
    const RATE: u64 = 500;
    const BACKGROUND: u64 = 15 * RATE;
    let mut background = Vec::new();
    for flow in [THROUGH_SPINE_1, WITHIN_LEAF_0] {
        let receiver = fabric.receive(flow.to, BACKGROUND, &format!("bg-{}", flow.to));
        let command = fabric.send_command(flow.to, BACKGROUND, RATE);
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let sender = format!("send-bg-{}", flow.from);
        fabric.lab.spawn(flow.from, &sender, &command);
        background.push((receiver, sender));
    }
    std::thread::sleep(Duration::from_secs(1));

    fabric.control_ok("kill spine-0");
    let status = fabric.control_ok("status");
    assert_eq!(
        status["members"]["spine-0"],
        serde_json::json!({"state": "failed", "error": "killed"}),
        "{status}"
    );
    for member in others {
        assert_eq!(status["members"][member]["state"], "running", "{status}");
    }
    assert!(
        !fabric.lab.xdp_attached("spine-0").is_empty(),
        "a killed member leaves its program attached"
    );
    // A crash's black hole: nothing crosses the killed member, neither through its program nor
    // through its namespace's kernel (which forwards what the program passes it).
    let kernel_before = kernel_forwarded(&fabric.lab, "spine-0");
    let while_killed = fabric.udp(from, to, N, "killed");
    let kernel_forwarded = kernel_forwarded(&fabric.lab, "spine-0") - kernel_before;
    assert_eq!(
        (while_killed, kernel_forwarded),
        (0, 0),
        "while spine-0 was killed, {while_killed} of {N} datagrams crossed it and its kernel \
         forwarded {kernel_forwarded} packets:\n{}",
        fabric.lab.log("group")
    );

    fabric.control_ok("start spine-0");
    let restarted = fabric.lab.wait_for(Duration::from_secs(20), || {
        fabric.running("spine-0") && fabric.resolved("spine-0")
    });
    assert!(
        restarted,
        "spine-0 did not come back:\n{}",
        fabric.lab.log("group")
    );
    // Every member runs: the kill and the restart took no other down.
    let status = fabric.control_ok("status");
    for member in MEMBERS {
        assert_eq!(status["members"][member]["state"], "running", "{status}");
    }
    let since_kill = started.elapsed().as_secs_f64();
    let fresh = fabric.counters(&["spine-0"])["spine-0"];
    assert!(
        fresh.uptime_s < since_kill,
        "spine-0 runs since {} s, the kill was {since_kill} s ago",
        fresh.uptime_s
    );
    let through = fabric
        .lab
        .wait_for(Duration::from_secs(5), || fabric.ping(from, to));
    assert!(through, "no ping through the restarted spine-0");
    let before_restart = fabric.counters(&["spine-0"]);
    assert_eq!(
        fabric.udp(from, to, N, "after"),
        N,
        "through the restarted spine-0"
    );
    let counted = moved(&before_restart, &fabric.counters(&["spine-0"]))["spine-0"];
    assert_eq!(
        (counted.forwarded, counted.rx[0], counted.tx[1]),
        (N, N, N),
        "the restarted spine-0 counts the flow through it: {counted:?}"
    );

    // The kill and the restart fell within the background flows, which lost nothing.
    for (_, sender) in &background {
        assert!(
            fabric.lab.running(sender),
            "{sender} ended before the restart was done: make the background flows longer"
        );
    }
    for (receiver, _) in &background {
        let report = fabric.report(receiver);
        assert_eq!(
            report["received"],
            BACKGROUND.to_string(),
            "{receiver}: a flow not through spine-0 lost datagrams: {report:?}\n{}",
            fabric.lab.log("group")
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    let moved = moved(&before, &fabric.counters(&others));
    for (member, flows) in [("leaf-0", 2), ("leaf-1", 1), ("spine-1", 1)] {
        let counted = moved[member];
        assert!(
            counted.uptime_s >= elapsed - 1.0,
            "{member} was restarted: up {} s more over {elapsed} s",
            counted.uptime_s
        );
        assert!(
            counted.forwarded >= flows * BACKGROUND,
            "{member} forwarded {} of the background flows' {}: {moved:?}",
            counted.forwarded,
            flows * BACKGROUND
        );
    }
    fabric.stops_cleanly(MEMBERS.len());
}

/// The group's control work — admin sockets, FIB mirrors, notifications, BMP — runs on one
/// loop whatever the number of members: with one member running the group has exactly the
/// threads it has with four (the data path's are the pool's, fixed by --workers), and none of
/// them is a member's.
fn control_threads_do_not_grow_with_the_members() {
    let _machine = serial();
    let mut fabric = Fabric::up("thr");
    let four = fabric.settled_threads();
    for member in &MEMBERS[1..] {
        fabric.control_ok(&format!("stop {member}"));
    }
    let one = fabric.settled_threads();
    assert_eq!(
        four.len(),
        one.len(),
        "threads with four members: {four:?}; with one: {one:?}"
    );
    for member in &MEMBERS[1..] {
        fabric.control_ok(&format!("start {member}"));
    }
    fabric.wait_up();
    let again = fabric.settled_threads();
    assert_eq!(
        four, again,
        "threads before and after three members restarted"
    );
    for name in &four {
        assert!(
            !MEMBERS.iter().any(|member| name.contains(member)),
            "thread {name} is a member's: {four:?}"
        );
    }
    println!(
        "group threads with 4 members and with 1: {}: {four:?}",
        four.len()
    );
    // Three stopped on request, then all four at SIGTERM.
    fabric.stops_cleanly(MEMBERS.len() + 3);
}

ofan_tests::root_tests!(
    group_of_four_forwards_and_counts_each_member_on_its_own,
    control_threads_do_not_grow_with_the_members,
    member_killed_and_restarted_forwards_again_and_the_others_never_stop,
    pool_thread_serves_switches_in_turn_sleeps_when_idle_and_lets_one_restart,
);
