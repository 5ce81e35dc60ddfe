//! Experiments on a lab: result files, ECMP on every core link, drops and congestion control, interrupts, chaos, shared host links.

use super::*;

/// `ofan-lab run` on a k=4 lab: a 256 KB permutation (2.3 s at 1 Mbit/s: long enough that one
/// millisecond-scale scheduling hiccup costs an agent well under 1 % of its rate), two
/// repetitions, produces a complete
/// result file (every repetition delivered exactly once, CCT above the topology's bound, every
/// stage's queues, no drops), the agents pace at no more than the requested rate and the run
/// discloses whether they kept within 1 % of it, and afterwards ping, traceroute and iperf3
/// still work between hosts.
pub(super) fn small_permutation_produces_a_complete_result_file() {
    let _machine = serial();
    let lab = LabGuard::new("x");
    // The rate its comments and its iperf3 range are about, whatever the default.
    lab.ok(&[
        "up",
        "--k",
        "4",
        "--lb",
        "ofan",
        "--buffer",
        "2MB",
        "--link-rate",
        "1mbit",
    ]);
    let pids = lab.switch_pids();
    // As a user would: check the fabric first (this also resolves every host's gateway).
    pingall_passes(&lab, 240);
    let output = run_results(
        &lab,
        "run",
        &["permutation", "--size", "256KB", "--repeat", "2"],
    );
    let (table, results, out) = (&output.table, &output.results, &output.dir);
    assert!(table.contains("ofan") && table.contains("256KB"), "{table}");
    // The group's pool spun to some of the runs' thousands of shaped departures (its window
    // is at least 30 µs), and its `status` says how long: what `bench lab` leaves out of the
    // CPU per frame.
    let pool = group_status(&lab)["pool"].clone();
    assert_eq!(
        pool["threads"].as_u64(),
        Some(std::thread::available_parallelism().unwrap().get() as u64),
        "{pool}"
    );
    assert!(pool["spun_ns"].as_u64().is_some_and(|ns| ns > 0), "{pool}");
    assert_eq!(results["schema"], "ofan.lab-results/1");
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (i, run) in runs.iter().enumerate() {
        // The one report type reads every run back.
        let report = ofan_model::report::RunReport::from_json(&run.to_string())
            .unwrap_or_else(|e| panic!("{e}: {run}"));
        let lab_run = report.lab().expect("a lab report");
        assert_eq!(lab_run.census.unaccounted, 0, "{:?}", lab_run.census);
        assert_eq!(lab_run.census.frames_lost, 0, "{:?}", lab_run.census);
        assert_eq!(lab_run.census.frames_queued, 0, "{:?}", lab_run.census);
        assert_eq!(report.packets.retransmissions, 0, "{:?}", report.packets);
        assert_eq!(report.packets.flows_complete, 16, "{:?}", report.packets);
        // Nothing retransmitted: the reordering measure saw every packet once.
        let order = report.reordering;
        eprintln!("ofan permutation, repetition {i}: {order:?}");
        assert_eq!(order.arrivals, 16 * 181, "{order:?}");
        assert_eq!(
            order.out_of_order == 0,
            order.max_distance == 0,
            "{order:?}"
        );
        assert!(order.out_of_order < order.arrivals, "{order:?}");
        assert_eq!(run["source"], "lab");
        assert_eq!(run["setup"]["lb"], "ofan");
        assert_eq!(run["setup"]["repetition"], i as u64);
        let delivery = &run["delivery"];
        assert_eq!(delivery["exactly_once"], true, "{delivery}");
        assert_eq!(delivery["data_expected"], 16 * 181, "{delivery}");
        assert_eq!(delivery["late_agents"], 0, "{delivery}");
        assert_eq!(run["drops"]["total"], 0, "{}", run["drops"]);
        let cct = run["cct_ps"].as_u64().expect("a CCT");
        let bound = run["lower_bound_ps"].as_u64().unwrap();
        assert!(cct > bound && cct < 3 * bound, "CCT {cct} vs bound {bound}");
        // The stall watch of a group's repetition: every CPU, over the repetition (at least
        // its CCT), within what it could have seen.
        let machine = &run["machine"];
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert_eq!(machine["cpus"].as_u64(), Some(cpus as u64), "{machine}");
        let seconds = machine["seconds"].as_f64().unwrap();
        assert!(seconds * 1e12 >= cct as f64 && seconds < 60.0, "{machine}");
        let watched = machine["watched"].as_f64().unwrap();
        assert!(watched > 0.0 && watched <= 1.0, "{machine}");
        assert!(
            machine["hidden_ms_max"].as_f64().unwrap() <= seconds * 1e3,
            "{machine}"
        );
        let stages: Vec<&str> = run["queues"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["stage"].as_str().unwrap())
            .collect();
        assert_eq!(
            stages,
            [
                "host_up",
                "edge_up",
                "agg_up",
                "core_down",
                "agg_down",
                "edge_down"
            ]
        );
        assert_queues_are_consistent(run, MAX_FRAME);
        // Pacing: never faster than the link (an invariant of the pacer: uncharged ACKs would
        // put the link at 1.055), not far below it, and a run whose slowest agent missed its
        // rate by more than 1 % says so. Whether an agent keeps within 1 % is up to the
        // machine: the agents catch up (by default) only half a wire time per late send, and
        // this VM stalls a spinning nice −20 thread for 1–40 ms a few times in 5 s (CI saw
        // 0.9888 with strict agents, p99 lateness 3.2 ms). So it is measured, not tested:
        // every run discloses it in `fidelity` (docs/experiments.md).
        let fidelity = &run["fidelity"];
        let ratio = fidelity["agent_rate_ratio_min"].as_f64().unwrap();
        assert!(
            (0.9..=1.001).contains(&ratio),
            "an agent paced at {ratio:.4} × the requested rate: {fidelity}"
        );
        if ratio < 0.99 {
            assert_eq!(fidelity["faithful"], false, "{fidelity}");
        }
        // Static routes, no fault: no switch's routes changed while it ran.
        assert_eq!(fidelity["route_changes"], 0, "{fidelity}");
    }
    let cell = &results["cells"][0];
    assert_eq!(cell["runs"], 2);
    assert_eq!(cell["exactly_once_runs"], 2);
    assert!(cell["metrics"]["cct_s"]["sem"].as_f64().is_some());
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let fields = |line: &str| line.split(',').count();
    let header = csv.lines().next().unwrap();
    assert!(
        header.ends_with(",route_changes,faithful,out_of_order,reorder_distance_max"),
        "{header}"
    );
    assert!(
        csv.lines().all(|row| fields(row) == fields(header)),
        "a row without a field per column: {csv}"
    );
    assert!(out.join("runs/ofan-256KB-r1/result.json").exists());

    // No experiment running: ping, traceroute and iperf3 between hosts.
    pingall_passes(&lab, 240);
    let trace = traceroute(&lab, "h-p0-e0-h0", "10.3.1.3");
    assert!(trace.lines().count() >= 6, "{trace}");
    let server = Command::new("ip")
        .args(["netns", "exec", &format!("{}h-p3-e1-h1", lab.prefix())])
        .args(["iperf3", "-s", "-1", "-B", "10.3.1.3"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("iperf3");
    let mut server = KillOnDrop(server);
    std::thread::sleep(Duration::from_millis(500));
    let client = lab.ok(&[
        "exec",
        "h-p0-e0-h0",
        "--",
        "iperf3",
        "-c",
        "10.3.1.3",
        "-t",
        "2",
        "-J",
    ]);
    let client: Value = serde_json::from_str(&client).expect("iperf3 JSON");
    let bps = client["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    // TCP through five shaped 1 Mbit/s hops.
    assert!((0.3e6..1.05e6).contains(&bps), "iperf3: {bps} bit/s");
    let _ = server.0.wait();

    // Queue-aware algorithms on every switch, cores (no up-ports) included: a core's worker
    // once panicked on its first frame under jsq and left the process running as a black hole.
    lab.ok(&["set", "--lb", "jsq"]);
    pingall_passes(&lab, 240);
    let status = lab.ok(&["status"]);
    assert!(
        status.contains("20/20 switches running, 0 crashed"),
        "{status}"
    );
    lab.down_and_check(&pids);
}

/// The largest frame of a lab run at MTU 1500: a DATA frame, 1,472 B of UDP payload + 42 B of
/// headers.
const MAX_FRAME: u64 = 1514;
/// The smallest: an ACK, the 18-byte agent header + 42 B of headers.
const MIN_FRAME: u64 = 60;
/// The buffer of every switch port in `small_permutation_produces_a_complete_result_file`
/// (`--buffer 2MB`: binary prefixes).
const BUFFER: u64 = 2 << 20;

/// Checks what the switches' queue telemetry must satisfy in a drop-free repetition of a k = 4
/// fat tree (each stage's statistics come from a different set of ports and switches):
///
/// * every stage's deepest queue fits in the port's buffer (tail drop admits only frames that
///   fit), and holds between `MIN_FRAME` and `max_frame` bytes per frame of its deepest packet
///   count (the run's frames are DATA and ACKs only; the byte maximum is reached with at most
///   the packet maximum of frames, and the packet maximum with at least `MIN_FRAME` bytes
///   each); the report's maxima are the stages' maxima;
/// * what goes up comes down: every frame that leaves an edge switch upwards (E→A) enters an
///   edge switch from above exactly once (A→E), and every frame sent to a core (A→C) leaves it
///   (C→A), so with nothing dropped and nothing in flight the two stages of each pair sent the
///   same wire bytes. `utilization` is a stage's wire bits over (rate × CCT), averaged over its
///   ports, so `utilization × ports` is proportional to those bytes. A switch that forwarded a
///   frame back up, duplicated or lost one, or telemetry that counted a port in the wrong
///   stage or missed a worker's frames, breaks the equality.
pub(super) fn assert_queues_are_consistent(run: &Value, max_frame: u64) {
    let stage = |name: &str| -> &Value {
        run["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["stage"] == name)
            .unwrap_or_else(|| panic!("no stage {name}: {run}"))
    };
    let mut deepest = (0, 0);
    for name in ["edge_up", "agg_up", "core_down", "agg_down", "edge_down"] {
        let queues = stage(name);
        let packets = queues["max_packets"].as_u64().unwrap();
        let bytes = queues["max_bytes"].as_u64().unwrap();
        assert!(
            bytes <= BUFFER,
            "{name}: {bytes} B queued in a {BUFFER} B buffer"
        );
        assert!(
            (MIN_FRAME * packets..=max_frame * packets).contains(&bytes),
            "{name}: a deepest queue of {bytes} B does not fit its deepest {packets} frames: {queues}"
        );
        eprintln!("{name}: deepest queue {packets} frames, {bytes} B");
        deepest = (deepest.0.max(packets), deepest.1.max(bytes));
    }
    assert_eq!(
        (
            run["max_queue_packets"].as_u64().unwrap(),
            run["max_queue_bytes"].as_u64().unwrap()
        ),
        deepest,
        "{run}"
    );
    let wire = |name: &str| {
        let queues = stage(name);
        queues["utilization"].as_f64().unwrap() * queues["ports"].as_f64().unwrap()
    };
    for (up, down) in [("edge_up", "agg_down"), ("agg_up", "core_down")] {
        let (sent_up, sent_down) = (wire(up), wire(down));
        eprintln!("{up} {sent_up:.6} vs {down} {sent_down:.6} (link × CCT of wire bits)");
        assert!(sent_up > 0.0, "{up} carried nothing: {run}");
        assert!(
            (sent_up - sent_down).abs() <= 1e-9 * sent_up,
            "{up} sent {sent_up} link-CCTs of wire bits, {down} {sent_down}: {}",
            run["queues"]
        );
    }
}

/// Kills a child process that is still running when the test ends.
pub(super) struct KillOnDrop(pub(super) std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// tx packets of every port of switch `node`, by interface name.
pub(super) fn port_tx(lab: &LabGuard, node: &str) -> BTreeMap<String, u64> {
    lab.stats(node)["data_path"]["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("no ports in the stats of {node}"))
        .iter()
        .map(|port| {
            let name = port["name"].as_str().expect("a port name").to_owned();
            (name, port["tx_packets"].as_u64().expect("tx_packets"))
        })
        .collect()
}

/// tx packets of every aggregation–core direction: (switch, port) → count, for every
/// aggregation's up ports (towards the cores) and every core port (towards the aggregations).
fn core_link_tx(lab: &LabGuard, topology: &Topology) -> Vec<(String, String, u64)> {
    let mut directions = Vec::new();
    for node in topology.aggregations().iter().chain(topology.cores()) {
        let tx = port_tx(lab, &node.name);
        for port in &node.ports {
            let towards_core = topology.role(port.peer) == Role::Core;
            let towards_agg = topology.role(port.peer) == Role::Aggregation;
            if (node.role == Role::Aggregation && towards_core)
                || (node.role == Role::Core && towards_agg)
            {
                let count = *tx
                    .get(&port.ifname)
                    .unwrap_or_else(|| panic!("no port {} at {}", port.ifname, node.name));
                directions.push((node.name.clone(), port.ifname.clone(), count));
            }
        }
    }
    directions
}

/// Plain ECMP is not hash-polarized: every switch salts its hash differently, so an
/// aggregation switch's choice is independent of its edge switch's, and inter-pod traffic
/// reaches every core. With one seed shared by all switches, an edge switch and the
/// aggregation switch it chose pick the same rank, and only cores c-0 and c-3 of k = 4 carry
/// traffic: 16 of the 32 aggregation–core directions stay dark.
///
/// Why an all-to-all and not a permutation: a directed link agg(p, a) → core is used by the
/// DATA of flows leaving pod p and by the ACKs of flows entering it, each choosing one of the
/// pod's 4 (aggregation, core) uplink pairs uniformly. A permutation of 16 hosts has about 3
/// flows out of and 3 into each pod, so a given direction stays dark with probability about
/// (3/4)^6 ≈ 0.18, and some of the 32 does almost surely (≈ 5.7 expected): that test could
/// not pass even without polarization. In an all-to-all every pod sends 4 × 12 = 48 inter-pod
/// flows and receives 48: a direction stays dark with probability (3/4)^96 ≈ 1e-12, all 32
/// light up except with probability ≈ 3e-11. One 4 KB all-to-all (3 packets per flow, 0.6 s
/// at 1 Mbit/s) is enough.
pub(super) fn ecmp_lab_lights_every_core_link() {
    let _machine = serial();
    let lab = LabGuard::new("s");
    lab.ok(&["up", "--k", "4", "--lb", "ecmp", "--buffer", "2MB"]);
    let pids = lab.switch_pids();
    pingall_passes(&lab, 240);
    let topology = Topology::fat_tree(4).unwrap();
    let before = core_link_tx(&lab, &topology);
    let output = run_results(
        &lab,
        "ecmp",
        &["all-to-all", "--size", "4KB", "--repeat", "1"],
    );
    let run = &output.results["runs"][0];
    assert_eq!(run["setup"]["lb"], "ecmp", "{run}");
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    // The lab's bound holds for an all-to-all too (every host sends and receives 15 flows).
    let cct = run["cct_ps"].as_u64().expect("a CCT");
    let bound = run["lower_bound_ps"].as_u64().unwrap();
    eprintln!("all-to-all CCT {cct} ps, lower bound {bound} ps");
    assert!(cct >= bound, "CCT {cct} below the bound {bound}");
    // The receivers' reordering measure: every first arrival looked at once, and a flow that
    // ECMP pins to one path of FIFO queues arrives in order.
    let order = &run["reordering"];
    assert_eq!(
        order["arrivals"], run["packets"]["data_delivered"],
        "{order}"
    );
    assert_eq!(order["arrivals"], 240 * 3, "{order}");
    assert_eq!(
        (&order["out_of_order"], &order["max_distance"]),
        (&0.into(), &0.into())
    );
    let after = core_link_tx(&lab, &topology);
    assert_eq!(after.len(), 32);
    let dark: Vec<String> = before
        .iter()
        .zip(&after)
        .filter(|((_, _, before), (_, _, after))| after <= before)
        .map(|((node, port, _), _)| format!("{node}:{port}"))
        .collect();
    let carried: Vec<u64> = before
        .iter()
        .zip(&after)
        .map(|((_, _, before), (_, _, after))| after - before)
        .collect();
    eprintln!("frames per aggregation–core direction: {carried:?}");
    assert!(
        dark.is_empty(),
        "{} of 32 aggregation–core directions carried nothing: {dark:?} (tx per direction: \
         {carried:?})",
        dark.len()
    );
    lab.down_and_check(&pids);
}

/// A drop costs time, not the run: two hosts send 64 KB each to a third at the full link rate,
/// so the receiver's edge port gets twice what it can carry and its 4 KB buffer (two DATA frames)
/// overflows whatever the algorithm. The agents retransmit every lost packet, the run completes
/// exactly once, and the census accounts for every frame: the frames the agents sent and never
/// received are exactly the frames the switches counted as dropped.
pub(super) fn fan_in_drops_are_recovered_and_every_frame_is_accounted() {
    let _machine = serial();
    let lab = LabGuard::new("d");
    lab.ok(&["up", "--k", "4", "--lb", "pofan", "--buffer", "4KB"]);
    let pids = lab.switch_pids();
    pingall_passes(&lab, 240);
    // Hosts in topology order: rows are sources, columns destinations.
    let mut rows = vec![vec!["0"; 16]; 16];
    rows[0][5] = "65536";
    rows[1][5] = "65536";
    let matrix = std::env::temp_dir().join(format!("{}-fan-in.csv", lab.name));
    let text: String = rows.iter().map(|row| row.join(",") + "\n").collect();
    std::fs::write(&matrix, text).unwrap();
    let output = run_results(
        &lab,
        "fan-in",
        &["matrix", "--matrix", matrix.to_str().unwrap()],
    );
    let run = &output.results["runs"][0];
    let report = ofan_model::report::RunReport::from_json(&run.to_string())
        .unwrap_or_else(|e| panic!("{e}: {run}"));
    let lab_run = report.lab().expect("a lab report");
    let dropped = report.drops.get("switch.buffer");
    eprintln!(
        "fan-in: {dropped} dropped, {:?}, {:?}, CCT {:?} ps vs bound {} ps",
        report.packets, lab_run.census, report.cct_ps, report.lower_bound_ps
    );
    assert!(
        dropped > 0,
        "2:1 into a 4 KB buffer must drop: {:?}",
        report.drops
    );
    let cct = report
        .cct_ps
        .expect("drops are recovered: the run completes");
    assert!(cct > report.lower_bound_ps);
    assert!(lab_run.delivery.exactly_once, "{:?}", lab_run.delivery);
    assert_eq!(report.packets.flows_complete, 2);
    // Only DATA is dropped (the ACKs' way is idle): each drop is retransmitted at least once.
    assert!(
        report.packets.retransmissions >= dropped,
        "{dropped} dropped, {:?}",
        report.packets
    );
    assert_eq!(lab_run.census.unaccounted, 0, "{:?}", lab_run.census);
    // 200 ms after the agents the queues are empty: the idle switches published their last
    // frames' slots ending.
    assert_eq!(lab_run.census.frames_queued, 0, "{:?}", lab_run.census);
    assert_eq!(
        lab_run.census.frames_lost, report.drops.total,
        "every lost frame is a counted drop: {:?}, {:?}",
        lab_run.census, report.drops
    );
    let _ = std::fs::remove_file(&matrix);
    lab.down_and_check(&pids);
}

/// The agents' reports of the one repetition a `run` wrote under `output.dir`.
fn agent_reports(output: &RunOutput) -> Vec<Value> {
    let runs = output.dir.join("runs");
    let repetition = std::fs::read_dir(&runs)
        .expect("runs/")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.is_dir())
        .expect("a repetition's directory");
    std::fs::read_dir(&repetition)
        .expect("the repetition's files")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "json")
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with("h-"))
        })
        .map(|path| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
        .collect()
}

/// `run --cc dctcp`: a 4:1 incast into a 16 KB buffer (ECN marks above a tenth of it), once
/// without congestion control and once with DCTCP. With it, the switches' CE marks come back
/// in the ACKs and cut the senders' windows: the senders are held back, fewer frames are
/// dropped, every drop is recovered, and the report names the CCA and its parameters.
pub(super) fn congestion_control_holds_an_incast_back_and_recovers_every_drop() {
    let _machine = serial();
    let lab = LabGuard::new("cc");
    lab.ok(&["up", "--k", "4", "--lb", "pofan", "--buffer", "16KB"]);
    let pids = lab.switch_pids();
    let status = lab.ok(&["status"]);
    assert!(status.contains("(ECN 1638B)"), "a tenth of 16 KB: {status}");
    let mut rows = vec![vec!["0"; 16]; 16];
    for source in [0, 8, 12, 15] {
        rows[source][5] = "131072";
    }
    let matrix = std::env::temp_dir().join(format!("{}-incast.csv", lab.name));
    let text: String = rows.iter().map(|row| row.join(",") + "\n").collect();
    std::fs::write(&matrix, text).unwrap();
    let mut drops = Vec::new();
    for cc in ["none", "dctcp"] {
        let output = run_results(
            &lab,
            cc,
            &["matrix", "--matrix", matrix.to_str().unwrap(), "--cc", cc],
        );
        let run = &output.results["runs"][0];
        let report = ofan_model::report::RunReport::from_json(&run.to_string())
            .unwrap_or_else(|e| panic!("{e}: {run}"));
        let lab_run = report.lab().expect("a lab report");
        let agents = agent_reports(&output);
        let blocked: u64 = agents
            .iter()
            .filter_map(|agent| agent["cc"]["blocked_ns"].as_u64())
            .sum();
        eprintln!(
            "{cc}: {:?}, {:?}, CCT {:?} ps, held back {:.1} ms in all",
            report.drops,
            report.packets,
            report.cct_ps,
            blocked as f64 * 1e-6
        );
        assert!(
            lab_run.delivery.exactly_once,
            "{cc}: {:?}",
            lab_run.delivery
        );
        assert_eq!(report.packets.flows_complete, 4, "{cc}");
        assert!(
            report.packets.ecn_marks > 0,
            "{cc}: the queue passed 1.6 KB"
        );
        match cc {
            "none" => {
                assert_eq!(lab_run.setup.cc, None);
                assert!(agents.iter().all(|agent| agent.get("cc").is_none()));
            }
            _ => {
                let config = lab_run.setup.cc.expect("setup.cc");
                assert_eq!(config.kind, ofan_transport::CcKind::Dctcp);
                assert_eq!(config.path.rate_bps, 8_000_000);
                assert!(output.table.contains("pofan/dctcp"), "{}", output.table);
                assert!(blocked > 0, "the windows held the senders back");
            }
        }
        drops.push(report.drops.total);
    }
    assert!(
        drops[1] < drops[0],
        "DCTCP drops fewer frames than constant-rate senders: {drops:?}"
    );
    let _ = std::fs::remove_file(&matrix);
    lab.down_and_check(&pids);
}

/// `run` interrupted (SIGTERM, as Ctrl-C's SIGINT) while its agents send, on a lab it built
/// for the run: it stops its agents, removes the lab and says so — nothing is left.
pub(super) fn an_interrupted_run_removes_the_lab_it_built_and_its_agents() {
    let _machine = serial();
    let lab = LabGuard::new("int");
    let out = std::env::temp_dir().join(format!("{}-interrupted", lab.name));
    let mut run = Command::new(binary("ofan-lab"))
        .args([
            "run",
            "permutation",
            "--size",
            "4MB",
            "--name",
            &lab.name,
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ofan-lab run");
    // The agents run once the progress file is there.
    let progress = lab.state_dir().join("progress.json");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !progress.exists() {
        assert!(
            Instant::now() < deadline,
            "no repetition started within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = lab.switch_pids();
    std::thread::sleep(Duration::from_millis(500));
    send_signal(run.id(), libc::SIGTERM);
    let status = run.wait().expect("wait for run");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success(), "an interrupted run fails: {said}");
    assert!(said.contains("interrupted"), "{said}");
    assert_nothing_left(&lab.prefix(), &lab.state_dir(), &pids);
    // No agent is left sending: no process with `agent … --lab <this lab>` is alive.
    let flag = format!("\0--lab\0{}\0", lab.name);
    let agents: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).into_owned())
        .filter(|cmdline| cmdline.contains("\0agent\0") && cmdline.contains(&flag))
        .collect();
    assert!(agents.is_empty(), "agents left: {agents:?}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `run --chaos`: every repetition meets its fault (a link flap, a switch killed with SIGKILL
/// and started again) while the collective runs, and says either that every packet was
/// accounted for or which fault voided it — never neither. Afterwards every switch runs,
/// pingall passes, and `down` leaves nothing (no namespace, link, process, state, FRR
/// directory or XDP program).
pub(super) fn chaos_run_accounts_for_every_repetition_or_names_its_fault() {
    let _machine = serial();
    let lab = LabGuard::new("x");
    lab.ok(&["up", "--topo", "fat-tree", "--k", "4"]);
    // Seeds 1 and 2 of chaos seed 1 draw a switch kill and a link flap (checked below).
    let output = run_results(
        &lab,
        "chaos",
        &[
            "permutation",
            "--size",
            "128KB",
            "--repeat",
            "2",
            "--chaos",
            "1",
        ],
    );
    let runs = output.results["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    let mut kinds = Vec::new();
    for run in runs {
        let chaos = &run["chaos"];
        let kind = chaos["kind"]
            .as_str()
            .expect("a chaos record per repetition");
        kinds.push(kind.to_owned());
        assert!(chaos["applied_s"].is_number(), "not applied: {chaos}");
        assert!(chaos["restored_s"].is_number(), "not restored: {chaos}");
        if kind == "link-flap" {
            // The switches at its ends were rerouted, and the report says so (a fault that
            // changes routes on purpose: they do not decide `faithful`).
            let fidelity = &run["fidelity"];
            assert!(
                fidelity["route_changes"].as_u64().unwrap() >= 2,
                "{fidelity}"
            );
            let fault = chaos["fault"].as_str().unwrap();
            let rerouted = fidelity["rerouted_switches"].as_array().unwrap();
            assert!(
                rerouted
                    .iter()
                    .any(|name| fault.contains(name.as_str().unwrap())),
                "{fault}: {fidelity}"
            );
        }
        let clean = run["delivery"]["exactly_once"] == true
            && run["census"]["unaccounted"] == 0
            && kind != "switch-kill";
        match chaos["outcome"].as_str() {
            Some("accounted") => {
                assert!(clean, "accounted, but: {run}");
                assert!(chaos.get("reason").is_none(), "{chaos}");
            }
            Some("voided") => {
                assert!(!clean, "voided without cause: {run}");
                let reason = chaos["reason"]
                    .as_str()
                    .expect("a voided repetition says why");
                if kind == "switch-kill" {
                    let fault = chaos["fault"].as_str().unwrap();
                    let switch = fault
                        .split_whitespace()
                        .nth(3)
                        .unwrap()
                        .trim_end_matches(',');
                    assert!(reason.contains(switch), "{reason} does not name {switch}");
                }
            }
            other => panic!("outcome {other:?}: {chaos}"),
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["link-flap", "switch-kill"], "the faults drawn");
    assert!(
        output.table.contains("chaos: fault kind"),
        "{}",
        output.table
    );
    let pids = lab.member_pids();
    assert_eq!(pids.len(), 20);
    assert!(
        pids.iter().all(|&pid| alive(pid)),
        "a switch not running after chaos"
    );
    pingall_passes(&lab, 240);
    lab.down_and_check(&pids);
}

/// Shared-memory host links (`up --host-links shared`): every frame the agents send reaches
/// the edge switches through their links (the switches count exactly the runs' frames there),
/// the run is exactly once with every frame accounted, ping and traceroute still take the
/// veths, a switch killed and restarted mid-run serves its links again, and `down` leaves
/// nothing (the link files live in the lab's state directory).
pub(super) fn shared_host_links_carry_every_agent_frame_and_survive_a_switch_kill() {
    let _machine = serial();
    let lab = LabGuard::new("h");
    // Only a group shares memory with the agents.
    let refused = lab.lab(&[
        "up",
        "--k",
        "4",
        "--switches",
        "process",
        "--host-links",
        "shared",
    ]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("--switches group"),
        "{said}"
    );
    // A group whose MTU fits one UMEM frame gets shared links without asking.
    lab.ok(&["up", "--k", "4", "--buffer", "2MB"]);
    assert_eq!(lab.state()["params"]["host_links"], "shared");
    pingall_passes(&lab, 240);
    traceroute_crosses_pods(&lab);
    let topology = lab_topology(&lab);
    let host_ports: Vec<(String, String)> = topology
        .links()
        .iter()
        .filter(|link| topology.role(link.a.0) == Role::Host)
        .map(|link| {
            (
                topology.node(link.b.0).name.clone(),
                topology.port(link.b.0, link.b.1).ifname.clone(),
            )
        })
        .collect();
    assert_eq!(host_ports.len(), 16);
    let through_links = |lab: &LabGuard| -> u64 {
        host_ports
            .iter()
            .map(|(node, ifname)| {
                port_stats(lab, node, ifname)["rx_host_link"]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    assert_eq!(through_links(&lab), 0, "pings took the veths");

    let output = run_results(
        &lab,
        "shared",
        &["permutation", "--size", "256KB", "--repeat", "1"],
    );
    let run = &output.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{run}");
    assert_eq!(run["census"]["unaccounted"], 0, "{run}");
    assert_eq!(run["drops"]["total"], 0, "{run}");
    let sent = run["census"]["frames_sent"].as_u64().unwrap();
    assert!(sent > 16 * 180, "{sent} frames sent");
    assert_eq!(
        through_links(&lab),
        sent,
        "every DATA and ACK frame of the run crossed a host link, nothing else did"
    );

    // Seed 1 of chaos 1 kills a switch mid-run and restarts it (see the chaos test): its
    // links are served again, and both repetitions are accounted or name their fault.
    let output = run_results(
        &lab,
        "shared-chaos",
        &[
            "permutation",
            "--size",
            "128KB",
            "--repeat",
            "2",
            "--chaos",
            "1",
        ],
    );
    for run in output.results["runs"].as_array().expect("runs") {
        let chaos = &run["chaos"];
        match chaos["outcome"].as_str() {
            Some("accounted") => {
                assert_eq!(run["delivery"]["exactly_once"], true, "{run}");
                assert_eq!(run["census"]["unaccounted"], 0, "{run}");
            }
            Some("voided") => assert!(chaos["reason"].is_string(), "{chaos}"),
            other => panic!("outcome {other:?}: {chaos}"),
        }
    }
    // An edge switch killed like a crash and started again serves its hosts' links again.
    lab.ok(&["node", "e-p0-0", "kill"]);
    lab.ok(&["node", "e-p0-0", "start"]);
    pingall_passes(&lab, 240);
    let before = through_links(&lab);
    let output = run_results(
        &lab,
        "shared-after",
        &["permutation", "--size", "128KB", "--repeat", "1"],
    );
    let run = &output.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{run}");
    assert_eq!(
        through_links(&lab) - before,
        run["census"]["frames_sent"].as_u64().unwrap(),
        "after the restart every frame crossed a host link again"
    );
    assert!(
        port_stats(&lab, "e-p0-0", "p0")["rx_host_link"]
            .as_u64()
            .unwrap()
            > 0,
        "the restarted edge switch did not serve its host's link"
    );
    assert!(lab.state_dir().join("hostlinks").is_dir());
    let pids = lab.member_pids();
    lab.down_and_check(&pids);
}
