//! The live view, jumbo frames, the XDP fast path and `bench lab`.

use super::*;

/// `ofan-lab view` of lab `lab`, on a port of its choosing; killed (by pid) on drop.
struct ViewGuard {
    child: std::process::Child,
    addr: String,
    /// The view's stderr, kept open: a closed pipe would fail its next line.
    _stderr: std::io::BufReader<std::process::ChildStderr>,
}

impl ViewGuard {
    fn start(lab: &LabGuard) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(binary("ofan-lab"))
            .args(["view", "--name", &lab.name, "--listen", "127.0.0.1:0"])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("cannot start ofan-lab view");
        // "lab `X`: live view on http://127.0.0.1:PORT/ (…)"
        let mut line = String::new();
        let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
        stderr.read_line(&mut line).expect("the view's first line");
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        Self {
            child,
            addr,
            _stderr: stderr,
        }
    }

    /// `GET path` (HTTP/1.0): the body.
    fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.addr).expect("connect to the view");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\n\r\n").unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.0 200"), "GET {path}: {reply}");
        reply.split_once("\r\n\r\n").unwrap().1.to_owned()
    }
}

impl Drop for ViewGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Headless Chromium (Debian's `chromium`, installed by scripts/setup) on the view's page: the
/// page stops listening after `?frames=3`, so that the virtual-time budget ends and Chromium
/// dumps the DOM or takes the screenshot.
struct Browser {
    profile: PathBuf,
}

impl Browser {
    /// `None` when chromium is not installed — a failure under `CI=true`.
    fn find(dir: &std::path::Path) -> Option<Self> {
        let found = Command::new("chromium")
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success());
        if !found {
            assert!(
                !ofan_tests::is_ci(),
                "chromium is not installed (scripts/setup installs it), and CI=true forbids \
                 skipping the browser test"
            );
            return None;
        }
        Some(Self {
            profile: dir.join("chromium-profile"),
        })
    }

    fn run(&self, url: &str, extra: &[&str]) -> Output {
        let output = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--virtual-time-budget=3000",
            ])
            .arg(format!("--user-data-dir={}", self.profile.display()))
            .args(extra)
            .arg(with_frames(url))
            .output()
            .expect("cannot run chromium");
        assert!(
            output.status.success(),
            "chromium failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }

    /// The page's DOM after three frames.
    fn dom(&self, view: &ViewGuard) -> String {
        self.dom_of(view, "")
    }

    /// The DOM of the page with `fragment` (`#NODE` or `#A~B`: what a click selects).
    fn dom_of(&self, view: &ViewGuard, fragment: &str) -> String {
        let url = format!("http://{}/{fragment}", view.addr);
        let output = self.run(&url, &["--dump-dom"]);
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn screenshot(&self, view: &ViewGuard, path: &std::path::Path, size: &str) {
        self.run(
            &format!("http://{}/", view.addr),
            &[
                &format!("--screenshot={}", path.display()),
                &format!("--window-size={size}"),
            ],
        );
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        assert!(bytes > 10_000, "{}: {bytes} bytes", path.display());
    }
}

/// `url` with `?frames=3` before its fragment.
fn with_frames(url: &str) -> String {
    match url.split_once('#') {
        Some((page, fragment)) => format!("{page}?frames=3#{fragment}"),
        None => format!("{url}?frames=3"),
    }
}

/// The `data-NAME` attribute of the drawing (`<svg id="fabric" …>`) in a dumped DOM.
fn fabric_attr(dom: &str, name: &str) -> Option<String> {
    let start = dom.find("<svg id=\"fabric\"")?;
    let tag = &dom[start..start + dom[start..].find('>')?];
    let key = format!(" data-{name}=\"");
    let at = tag.find(&key)? + key.len();
    Some(tag[at..at + tag[at..].find('"')?].to_owned())
}

/// The live view in a real browser: a k = 4 lab drawn with its 20 switches, 16 hosts and 48
/// links, a link taken down drawn down, a collective's traffic drawn as utilization (and its
/// progress shown), `/metrics` labelled by switch; screenshots in the test's temp dir.
pub(super) fn view_draws_the_lab_live_in_a_browser() {
    let _machine = serial();
    let lab = LabGuard::new("v");
    let dir = std::env::temp_dir().join(format!("{}-view", lab.name));
    std::fs::create_dir_all(&dir).unwrap();
    let Some(browser) = Browser::find(&dir) else {
        eprintln!("skipped: chromium is not installed (scripts/setup installs it)");
        return;
    };
    // The rate its collective's length is meant for: long enough for several frames of the view.
    lab.ok(&["up", "--k", "4", "--buffer", "2MB", "--link-rate", "2mbit"]);
    let view = ViewGuard::start(&lab);

    let started = Instant::now();
    let dom = browser.dom(&view);
    eprintln!(
        "DOM after 3 frames in {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let attr = |dom: &str, name: &str| {
        fabric_attr(dom, name).unwrap_or_else(|| panic!("no data-{name} in the drawing"))
    };
    assert_eq!(attr(&dom, "switches"), "20");
    assert_eq!(attr(&dom, "hosts"), "16");
    assert_eq!(attr(&dom, "links"), "48");
    assert_eq!(attr(&dom, "links-down"), "0");
    assert_eq!(dom.matches("<g class=\"link\"").count(), 48);
    assert_eq!(dom.matches("<g class=\"node\"").count(), 36);
    assert_eq!(dom.matches("data-algorithm=\"pofan\"").count(), 20);
    // What a click shows: a switch's state and algorithm, a link's two directions.
    let switch = browser.dom_of(&view, "#c-0");
    assert!(switch.contains("core c-0</h2>"), "no details of c-0");
    assert!(switch.contains("<td>algorithm</td><td class=\"n\">pofan</td>"));
    let link = browser.dom_of(&view, "#e-p0-0~a-p0-0");
    assert!(
        link.contains("Link e-p0-0 — a-p0-0</h2>"),
        "no details of the link"
    );
    assert!(link.contains("<td>e-p0-0 → a-p0-0</td>"));
    browser.screenshot(&view, &dir.join("idle.png"), "1280,760");
    browser.screenshot(&view, &dir.join("phone.png"), "390,844");

    // Prometheus: every switch, labelled.
    let metrics = view.get("/metrics");
    assert_eq!(
        metrics.matches("\nofan_switch_up{switch=").count(),
        20,
        "{metrics}"
    );
    assert!(
        metrics.contains("ofan_switch_up{switch=\"c-0\"} 1"),
        "{metrics}"
    );
    assert!(metrics
        .contains("ofan_port_tx_packets_total{switch=\"e-p0-0\",port=\"p2\",peer=\"a-p0-0\"}"));

    // A link down is drawn down.
    lab.ok(&["link", "e-p0-0", "a-p0-0", "down"]);
    let topology = Topology::fat_tree(4).unwrap();
    let id = |name: &str| topology.nodes().iter().find(|n| n.name == name).unwrap().id;
    let down = topology.link_between(id("e-p0-0"), id("a-p0-0")).unwrap();
    let dom = browser.dom(&view);
    assert_eq!(attr(&dom, "links-down"), "1");
    assert!(
        dom.contains(&format!(
            "<g class=\"link\" data-id=\"{}\" data-state=\"down\"",
            down.0
        )),
        "link {} not drawn down",
        down.0
    );
    assert!(metrics_link_down(&view.get("/metrics")));

    // A collective: the links light up while it runs, and its progress shows.
    let mut run = Command::new(binary("ofan-lab"))
        .args([
            "run",
            "permutation",
            "--size",
            "512KB",
            "--name",
            &lab.name,
            "--out",
        ])
        .arg(dir.join("run"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("cannot start ofan-lab run");
    // The most link directions drawn busy in one frame while a link ran above half its rate
    // (the first frame that busy may catch the collective starting: sampled to its end).
    let mut busy: Option<(u32, f64)> = None;
    let mut progress = false;
    while run.try_wait().expect("run").is_none() {
        let dom = browser.dom(&view);
        progress |= dom.contains("data-flows=\"16\"");
        let max_util: f64 = attr(&dom, "max-util").parse().unwrap();
        if max_util > 0.5 {
            let directions: u32 = attr(&dom, "busy").parse().unwrap();
            if busy.is_none() {
                browser.screenshot(&view, &dir.join("collective.png"), "1280,760");
            }
            if busy.is_none_or(|(most, _)| directions > most) {
                busy = Some((directions, max_util));
            }
        }
    }
    let status = run.wait().expect("run");
    assert!(status.success(), "ofan-lab run failed");
    let (busy, max_util) = busy.expect("no utilization drawn while the collective ran");
    eprintln!(
        "during the collective: up to {busy} link directions busy, max utilization {:.1} %, \
         progress seen: {progress}; screenshots in {}",
        100.0 * max_util,
        dir.display()
    );
    assert!(busy >= 16, "{busy} busy directions");
    drop(view);
    let pids = lab.switch_pids();
    lab.down_and_check(&pids);
}

/// Whether `/metrics` says one link is down (e-p0-0 — a-p0-0).
fn metrics_link_down(metrics: &str) -> bool {
    metrics.lines().any(|line| {
        line.starts_with("ofan_link_up{")
            && line.contains("a=\"e-p0-0\",b=\"a-p0-0\",state=\"down\"")
            && line.ends_with(" 0")
    })
}

/// A lab of jumbo frames (MTU 9000): every switch carries a packet in three 4096-byte UMEM
/// frames (multi-buffer AF_XDP), the agents fill the MTU, and a permutation is delivered
/// exactly once in as many DATA frames as that payload needs, nothing dropped, every frame
/// accounted for.
pub(super) fn jumbo_lab_delivers_full_frames_exactly_once() {
    let _machine = serial();
    let lab = LabGuard::new("m");
    lab.ok(&[
        "up",
        "--mtu",
        "9000",
        "--buffer",
        "2MB",
        "--link-rate",
        "10mbit",
    ]);
    // 9000-byte packets do not fit a host link's one UMEM frame: the veths carry them.
    assert_eq!(lab.state()["params"]["host_links"], "veth");
    let pids = lab.switch_pids();
    pingall_passes(&lab, 240);
    let full = lab.lab(&[
        "exec",
        "h-p0-e0-h0",
        "--",
        "ping",
        "-c",
        "2",
        "-M",
        "do",
        "-s",
        "8972",
        "10.3.1.3",
    ]);
    assert!(
        full.status.success(),
        "9000-byte pings across the fabric failed: {}",
        String::from_utf8_lossy(&full.stdout)
    );
    let output = run_results(&lab, "mtu", &["permutation", "--size", "256KB"]);
    let run = &output.results["runs"][0];
    let report = ofan_model::report::RunReport::from_json(&run.to_string())
        .unwrap_or_else(|e| panic!("{e}: {run}"));
    let lab_run = report.lab().expect("a lab report");
    assert_eq!(lab_run.census.unaccounted, 0, "{:?}", lab_run.census);
    assert_eq!(run["drops"]["total"], 0, "{}", run["drops"]);
    let delivery = &run["delivery"];
    assert_eq!(delivery["exactly_once"], true, "{delivery}");
    // 9000 − 28 bytes of UDP payload, 18 of them the agent's header: 8954 data bytes per
    // frame, 30 frames per 256 KiB flow (at MTU 1500, 181).
    assert_eq!(delivery["data_expected"], 16 * 30, "{delivery}");
    assert_queues_are_consistent(run, 9000 + 14);
    lab.down_and_check(&pids);
}

/// A fabric whose switches forward in their XDP programs (`up --fast-path xdp`): unshaped, over
/// the veths, pingall and a traceroute across pods answer as on any lab, the programs (not the
/// workers) forward the data, and a permutation at the hosts' given rate arrives exactly once;
/// a link rate with the fast path is refused.
pub(super) fn fast_path_lab_forwards_in_xdp_pings_traces_and_runs() {
    let _machine = serial();
    let lab = LabGuard::new("x");
    let refused = lab.lab(&["up", "--fast-path", "xdp", "--link-rate", "8mbit"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no shaper"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    lab.ok(&["up", "--fast-path", "xdp"]);
    let params = lab.state()["params"].clone();
    assert_eq!(
        (
            &params["fast_path"],
            &params["link_rate_bps"],
            &params["splice"],
            &params["host_links"]
        ),
        (
            &Value::from("xdp"),
            &Value::from(0),
            &Value::from(false),
            &Value::from("veth")
        ),
        "{params}"
    );
    let pids = lab.switch_pids();
    pingall_passes(&lab, 240);
    traceroute_crosses_pods(&lab);
    // The echoes crossed c-0 and e-p0-0 in their programs: they count them as forwarded
    // there, and their workers forwarded none of them.
    for node in ["e-p0-0", "c-0"] {
        let fast = steering_counter_reaching(&lab, node, "fast_forwarded", 1);
        assert!(fast > 0, "{node} forwarded nothing in XDP");
    }
    let output = run_results(
        &lab,
        "fast",
        &["permutation", "--size", "64KB", "--host-rate", "20mbit"],
    );
    let run = &output.results["runs"][0];
    assert_eq!(run["delivery"]["exactly_once"], true, "{}", run["delivery"]);
    assert_eq!(run["drops"]["total"], 0, "{}", run["drops"]);
    let forwarded: u64 = ["e-p0-0", "e-p1-0", "e-p2-0", "e-p3-0"]
        .iter()
        .map(|node| steering_counter(&lab, node, "fast_forwarded"))
        .sum();
    // 16 flows of 64 KiB (45 frames each) and their ACKs leave and enter through the edges.
    assert!(
        forwarded > 16 * 45,
        "the edges' programs forwarded {forwarded} frames"
    );
    let workers: u64 = ["e-p0-0", "c-0"]
        .iter()
        .map(|node| counter(&lab.stats(node), "forwarded"))
        .sum();
    assert!(
        workers < forwarded / 10,
        "the AF_XDP workers forwarded {workers} frames, the programs {forwarded}"
    );
    lab.down_and_check(&pids);
}

/// `bench lab` end to end on one small rate: it builds its own lab under the name given,
/// probes the machine, runs the permutation, writes a row whose figures come from the run (a
/// median CCT that is the one run's, frames forwarded, a probe of every CPU) and removes the
/// lab; `bench stalls` probes every CPU alone.
pub(super) fn bench_lab_measures_a_rate_and_probes_the_machine() {
    let _machine = serial();
    let lab = LabGuard::new("b");
    let dir = std::env::temp_dir().join(format!("ofan-bench-lab-{}", lab.name));
    let json = dir.join("bench.json");
    let (out, json_arg) = (dir.join("out"), json.to_str().unwrap().to_owned());
    let stdout = lab.ok(&[
        "bench",
        "lab",
        "--rates",
        "2mbit",
        "--size",
        "64KB",
        "--probe",
        "0.2",
        "--out",
        out.to_str().unwrap(),
        "--json",
        &json_arg,
    ]);
    assert!(
        stdout.contains("highest faithful rate (group): 2mbit")
            || stdout.contains("no rate was faithful (group)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("CCT median") && stdout.contains("stalls"),
        "{stdout}"
    );
    // Its lab is gone, as the guard would check.
    assert!(namespaces_with_prefix(&lab.prefix()).is_empty());
    assert!(!lab.state_dir().exists());

    let rows: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["rate_bps"], 2_000_000, "{row}");
    assert_eq!(
        (row["runs"].as_u64(), row["exactly_once"].as_u64()),
        (Some(1), Some(1)),
        "{row}"
    );
    // One run: its median is its mean, and it is the reference that judges nothing.
    let median = row["cct_increase"].as_f64().expect("a CCT");
    assert_eq!(row["cct_increase_mean"].as_f64(), Some(median), "{row}");
    assert!(median > 0.0 && median < 1.0, "{row}");
    assert_eq!(row["cct_reference"], true, "{row}");
    // 16 hosts × 45 DATA frames of 64 KB, each forwarded by 1 to 5 switches, and their ACKs.
    let forwarded = row["forwarded"].as_u64().unwrap();
    assert!(
        (2 * 16 * 45..=2 * 5 * 16 * 45).contains(&forwarded),
        "{row}"
    );
    assert!(row["pool_spin"].as_f64().is_some(), "{row}");
    let cpus = std::thread::available_parallelism().unwrap().get();
    // The run was watched (a group's), whether or not the machine stalled.
    assert!(row["run_stall_ms_max"].as_f64().is_some(), "{row}");
    let probed = row["stalls"]["cpus"].as_array().expect("a probe");
    assert_eq!(probed.len(), cpus, "{row}");
    for cpu in probed {
        let seconds = cpu["seconds"].as_f64().unwrap();
        assert!((0.2..5.0).contains(&seconds), "{cpu}");
        assert!(
            (0.0..=1.0).contains(&cpu["lost"].as_f64().unwrap()),
            "{cpu}"
        );
        assert!(cpu["ran"].as_f64().unwrap() > 0.0, "{cpu}");
    }
    let _ = std::fs::remove_dir_all(&dir);

    let output = Command::new(binary("ofan-lab"))
        .args(["bench", "stalls", "--seconds", "0.2"])
        .output()
        .expect("ofan-lab bench stalls");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    // A header, a line per CPU, the verdict.
    assert_eq!(stdout.lines().count(), cpus + 2, "{stdout}");
    assert!(stdout.contains("quiet"), "{stdout}");
}
