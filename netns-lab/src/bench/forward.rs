//! `ofan-lab bench forward`: the orchestration.
//!
//! ```text
//!  ns gen                 ns dut                      ns sink
//!  eth0 ──── veth ──── p0 [candidate] p1 ──── veth ──── eth0
//!  bench gen (XDP live     forwards p0 → p1             bench sink (XDP ofan_sink:
//!  frames, --gen-cpu)      on --dut-cpu                 count per CPU, drop)
//! ```
//!
//! One measurement: start the candidate, start the generator, wait until the sink's count moves,
//! warm up, read the sink (and the generator, and the candidate's own counters) before and
//! after `--seconds`, stop both. Rounds interleave the candidates (ofan, bare, testpmd,
//! redirect, ofan, …); the table shows per candidate the median over the rounds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};

use super::agents::GenKind;
use super::netns::{self, pause, Agent, Daemon, Namespaces, Reading};
use super::report::{self, Outcome, Row, Sample};

pub(super) const LONG_ABOUT: &str = "\
Mpps of small frames through one forwarding core on veth (AF_XDP copy mode), from one run with \
the candidates interleaved:

  ofan      ofan-switch --lb pofan (parse, L3 lookup, balancing, TTL/checksum/MAC rewrite,
            egress queue), one busy-polling worker
  bare      ofan-switch --bare: port 0 -> port 1 with no lookup, balancing or rewrite
  testpmd   dpdk-testpmd io forwarding with its AF_XDP PMD (only if installed: Debian packages
            dpdk, dpdk-dev, librte-net-af-xdp23; uses hugepages)
  redirect  XDP_REDIRECT p0 -> p1 through a devmap (no user space): the ceiling

Topology (namespaces ofan-bench-<pid>-gen|dut|sink, deleted afterwards, also on Ctrl-C):
gen eth0 -- veth -- p0 dut p1 -- veth -- eth0 sink. The generator is `ofan-lab bench gen` pinned
to --gen-cpu: by default (--gen live) the kernel's XDP live-frames mode transmits copies of a
prebuilt UDP frame (many flows: the program sets each copy's source port) as xdp_frames, without
skbs; --gen afxdp uses an AF_XDP TX-only socket instead (copy mode, an skb per frame: too slow to
rank the candidates on a small machine). The sink is `ofan-lab bench sink` (XDP program ofan_sink:
counts per CPU and drops). The candidate forwards on --dut-cpu. Mpps is the sink's count over the
measured seconds. Needs root; build with `cargo build --release`.

Example: sudo target/release/ofan-lab bench forward --runs 5 --seconds 3 --json bench.json";

/// What `bench forward` can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Candidate {
    /// ofan-switch with pOfan, L3 lookup and the egress queue.
    Ofan,
    /// ofan-switch --bare (port 2i ↔ 2i+1, no lookup).
    Bare,
    /// dpdk-testpmd io forwarding with the AF_XDP PMD.
    Testpmd,
    /// XDP_REDIRECT through a devmap.
    Redirect,
}

impl Candidate {
    fn name(self) -> &'static str {
        match self {
            Self::Ofan => "ofan",
            Self::Bare => "bare",
            Self::Testpmd => "testpmd",
            Self::Redirect => "redirect",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Self::Ofan => "ofan-switch (pofan + L3 lookup + egress queue)",
            Self::Bare => "ofan-switch --bare (port to port)",
            Self::Testpmd => "dpdk-testpmd io, AF_XDP PMD",
            Self::Redirect => "XDP_REDIRECT devmap (ceiling)",
        }
    }
}

/// Arguments of `bench forward`.
#[derive(Debug, Clone, Args)]
pub struct ForwardArgs {
    /// Rounds; each round measures every candidate once.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Seconds of traffic before each measurement starts.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Candidates. The first round measures them in this order, and each next round starts one
    /// candidate later (round r begins with candidate r mod n), so that no candidate is always
    /// measured first or always right after the same other one.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "ofan,bare,testpmd,redirect"
    )]
    pub candidates: Vec<Candidate>,
    /// Frame size on the wire, FCS included (64 = minimum-size Ethernet frames).
    #[arg(long, default_value_t = 64)]
    pub frame_size: u32,
    /// Flows (UDP source ports) the generator cycles through.
    #[arg(long, default_value_t = 256)]
    pub flows: u32,
    /// How the generator sends: XDP live frames in the kernel (`live`), or an AF_XDP TX-only
    /// socket in copy mode (`afxdp`, slower).
    #[arg(long = "gen", value_enum, default_value = "live")]
    pub gen: GenKind,
    /// Offer at most this many million frames per second (`--gen live`; default: as many as
    /// the generator's CPU can send). Below a candidate's limit it should forward them all.
    #[arg(long, value_name = "MPPS")]
    pub rate: Option<f64>,
    /// CPU of the generator's sending thread.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// CPU of the forwarding worker (ofan-switch xdp.cpus, testpmd's forwarding lcore).
    #[arg(long, default_value_t = 1)]
    pub dut_cpu: usize,
    /// Also write every sample and the summary as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The ofan-switch binary (default: next to this ofan-lab, else on PATH).
    #[arg(long, value_name = "PATH")]
    pub switch: Option<PathBuf>,
    /// Nice value of the generator, the sink and the candidates (−20 = highest; with autogroup
    /// scheduling also their session group's): on a machine that also builds or runs other
    /// work, they then get their cores almost whole.
    #[arg(long, default_value_t = -20, allow_negative_numbers = true)]
    pub nice: i32,
    /// Hugepages (2 MB) to make available for testpmd (restored afterwards).
    #[arg(long, default_value_t = 512)]
    pub hugepages: u32,
}

const GEN_IP: &str = "10.0.0.2";
const DUT_P0: &str = "10.0.0.1/24";
const DUT_P1: &str = "10.0.1.1/24";
const NEXT_HOP: &str = "10.0.1.2";
const ROUTED: &str = "10.1.0.0/16";
const DEST_IP: &str = "10.1.0.1";

/// Runs `bench forward`.
///
/// # Errors
/// When the topology cannot be built or one of ofan's own candidates fails.
pub fn run(args: &ForwardArgs) -> anyhow::Result<()> {
    validate(args)?;
    if !is_root() {
        bail!("bench forward needs root (namespaces, XDP, AF_XDP)");
    }
    netns::catch_interrupts()?;
    let me = std::env::current_exe().context("path of ofan-lab")?;
    let switch = find_switch(args, &me)?;
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ofan-bench-{pid}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _dir_guard = RemoveDir(dir.clone());

    let mut rows: Vec<(Candidate, Outcome)> = args
        .candidates
        .iter()
        .map(|&c| (c, Outcome::Measured(Vec::new())))
        .collect();
    let mut _hugepages = None;
    if let Some((_, outcome)) = rows.iter_mut().find(|(c, _)| *c == Candidate::Testpmd) {
        match testpmd_available() {
            Ok(()) => match Hugepages::ensure(args.hugepages) {
                Ok(guard) => _hugepages = Some(guard),
                Err(error) => *outcome = Outcome::Unavailable(format!("hugepages: {error:#}")),
            },
            Err(reason) => *outcome = Outcome::Unavailable(reason),
        }
    }

    let mut namespaces = Namespaces::new(format!("ofan-bench-{pid}"));
    let topology = build(&mut namespaces)?;
    let placement = format!(
        "generator thread on CPU {gen}; forwarding worker (ofan-switch xdp.cpus, testpmd \
         forwarding lcore) on CPU {dut}. Kernel work runs in softirq on the CPU that transmits: \
         dut p0's XDP (steering into the AF_XDP socket, or the redirect) on CPU {gen} with the \
         generator, the sink's XDP on the CPU that sends out of p1 (CPU {dut} for the AF_XDP \
         candidates, CPU {gen} for redirect)",
        gen = args.gen_cpu,
        dut = args.dut_cpu
    );
    println!(
        "ofan-lab bench forward: {}-byte UDP frames, {} flows, gen -> dut p0 -> p1 -> sink \
         (veth, AF_XDP copy mode); generator {}; {} rounds x {} s (+{} s warm-up); nice {}\n\
         placement: {placement}",
        args.frame_size,
        args.flows,
        match args.rate {
            Some(rate) => format!("{} at {rate} Mpps", args.gen.name()),
            None => args.gen.name().to_owned(),
        },
        args.runs,
        args.seconds,
        args.warmup,
        args.nice
    );
    let load_before = load_average();
    if let Some(load) = load_before.filter(|&load| load > 0.5) {
        println!("note: load average {load:.2} before the run: other work competes for the cores");
    }

    let sink = Agent::start(
        "sink",
        {
            let mut command = child(&namespaces, "sink", args.nice, &me);
            command.args(["bench", "sink", "--interface", "eth0"]);
            command
        },
        &dir,
    )?;
    let mut bench = Bench {
        args,
        namespaces: &namespaces,
        topology: &topology,
        me: &me,
        switch: &switch,
        dir: &dir,
        sink,
    };
    for round in 0..args.runs {
        let count = rows.len();
        for step in 0..count {
            let (candidate, outcome) = &mut rows[(round + step) % count];
            let Outcome::Measured(samples) = outcome else {
                continue;
            };
            netns::interrupted()?;
            match bench.measure(*candidate, round) {
                Ok(sample) => {
                    println!(
                        "round {}/{} {:<8} {:.3} Mpps (offered {:.3}{})",
                        round + 1,
                        args.runs,
                        candidate.name(),
                        sample.mpps,
                        sample.offered_mpps,
                        sample
                            .dut_mpps
                            .map(|m| format!(", DUT counted {m:.3}"))
                            .unwrap_or_default()
                    );
                    samples.push(sample);
                }
                Err(error) if *candidate == Candidate::Testpmd => {
                    println!("testpmd unavailable: {error:#}");
                    *outcome = Outcome::Unavailable(reason_of(&format!("{error:#}")));
                }
                Err(error) => return Err(error.context(format!("measuring {}", candidate.name()))),
            }
        }
    }
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|(candidate, outcome)| Row {
            name: candidate.name(),
            description: candidate.description(),
            outcome,
        })
        .collect();
    let load_after = load_average();
    let table = report::table(&rows);
    println!("\n{table}");
    if let Some(path) = &args.json {
        let mut document = to_json(args, &placement, &rows);
        document["load_average"] = json!({ "before": load_before, "after": load_after });
        std::fs::write(path, serde_json::to_string_pretty(&document)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    bench.sink.finish()?;
    Ok(())
}

fn validate(args: &ForwardArgs) -> anyhow::Result<()> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let seconds_ok = args.seconds > 0.0 && args.seconds <= 600.0;
    if !seconds_ok || !(0.0..=60.0).contains(&args.warmup) {
        bail!("--seconds must be in (0, 600] and --warmup in [0, 60]");
    }
    if let Some(rate) = args.rate {
        if !(rate.is_finite() && rate > 0.0) {
            bail!("--rate must be a positive number of Mpps");
        }
        if args.gen != GenKind::Live {
            bail!("--rate needs --gen live");
        }
    }
    if args.candidates.is_empty() {
        bail!("--candidates is empty");
    }
    if args.gen_cpu == args.dut_cpu {
        bail!("--gen-cpu and --dut-cpu must differ (the generator would steal the worker's core)");
    }
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if args.gen_cpu.max(args.dut_cpu) >= cpus {
        bail!("--gen-cpu/--dut-cpu must be below the {cpus} CPUs of this machine");
    }
    Ok(())
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

fn find_switch(args: &ForwardArgs, me: &Path) -> anyhow::Result<PathBuf> {
    if let Some(path) = &args.switch {
        return Ok(path.clone());
    }
    let sibling = me.with_file_name("ofan-switch");
    if sibling.exists() {
        return Ok(sibling);
    }
    on_path("ofan-switch").context(
        "no ofan-switch next to ofan-lab or on PATH: build it (cargo build --release) or pass --switch",
    )
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    })
}

/// A one-line reason from an error with a log tail: DPDK's `Cause:` line if there is one,
/// else the first line.
fn reason_of(text: &str) -> String {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("Cause: "))
        .or_else(|| text.lines().next())
        .unwrap_or_default()
        .to_owned()
}

/// Removes the run's scratch directory (logs, configuration) and DPDK's runtime directory of
/// this run on drop.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/ofan-bench-{}", std::process::id()));
    }
}

/// What the measurements need to know about the topology.
#[derive(Debug)]
struct Topology {
    /// MAC of dut p0: the generator's destination MAC.
    p0_mac: String,
}

fn mac_of(namespaces: &Namespaces, ns: &str, interface: &str) -> anyhow::Result<String> {
    let text = namespaces.exec(ns, &["cat", &format!("/sys/class/net/{interface}/address")])?;
    Ok(text.trim().to_owned())
}

/// gen eth0 — p0 dut p1 — eth0 sink, addresses, the route and a permanent neighbour.
fn build(namespaces: &mut Namespaces) -> anyhow::Result<Topology> {
    for ns in ["gen", "dut", "sink"] {
        namespaces.add(ns)?;
        // No IPv6: router solicitations and MLD reports would reach the sink and be counted.
        for key in ["all", "default"] {
            namespaces.exec(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ],
            )?;
        }
    }
    // The kernel must not forward what the data path passes to it (it would look like
    // forwarding by the candidate).
    namespaces.exec("dut", &["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
    let (gen, dut, sink) = (
        namespaces.name("gen"),
        namespaces.name("dut"),
        namespaces.name("sink"),
    );
    netns::run(Command::new("ip").args([
        "link", "add", "eth0", "netns", &gen, "type", "veth", "peer", "name", "p0", "netns", &dut,
    ]))?;
    netns::run(Command::new("ip").args([
        "link", "add", "p1", "netns", &dut, "type", "veth", "peer", "name", "eth0", "netns", &sink,
    ]))?;
    for (ns, interface) in [
        ("gen", "eth0"),
        ("dut", "p0"),
        ("dut", "p1"),
        ("sink", "eth0"),
    ] {
        namespaces.exec(ns, &["ip", "link", "set", interface, "up"])?;
    }
    namespaces.exec(
        "gen",
        &["ip", "addr", "add", &format!("{GEN_IP}/24"), "dev", "eth0"],
    )?;
    namespaces.exec("dut", &["ip", "addr", "add", DUT_P0, "dev", "p0"])?;
    namespaces.exec("dut", &["ip", "addr", "add", DUT_P1, "dev", "p1"])?;
    namespaces.exec(
        "sink",
        &[
            "ip",
            "addr",
            "add",
            &format!("{NEXT_HOP}/24"),
            "dev",
            "eth0",
        ],
    )?;
    let sink_mac = mac_of(namespaces, "sink", "eth0")?;
    namespaces.exec(
        "dut",
        &[
            "ip",
            "neigh",
            "replace",
            NEXT_HOP,
            "lladdr",
            &sink_mac,
            "dev",
            "p1",
            "nud",
            "permanent",
        ],
    )?;
    namespaces.exec(
        "dut",
        &["ip", "route", "add", ROUTED, "via", NEXT_HOP, "dev", "p1"],
    )?;
    Ok(Topology {
        p0_mac: mac_of(namespaces, "dut", "p0")?,
    })
}

/// Sets `vm.nr_hugepages` to at least `pages` and restores the old value on drop.
#[derive(Debug)]
struct Hugepages {
    before: u32,
}

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

impl Hugepages {
    fn ensure(pages: u32) -> anyhow::Result<Option<Self>> {
        let before: u32 = std::fs::read_to_string(NR_HUGEPAGES)
            .with_context(|| format!("reading {NR_HUGEPAGES}"))?
            .trim()
            .parse()
            .context("parsing nr_hugepages")?;
        if before >= pages {
            return Ok(None);
        }
        std::fs::write(NR_HUGEPAGES, pages.to_string())
            .with_context(|| format!("writing {NR_HUGEPAGES}"))?;
        let guard = Self { before };
        let now: u32 = std::fs::read_to_string(NR_HUGEPAGES)?.trim().parse()?;
        if now < pages / 2 {
            bail!("asked for {pages} hugepages, the kernel gave {now}");
        }
        Ok(Some(guard))
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        let _ = std::fs::write(NR_HUGEPAGES, self.before.to_string());
    }
}

/// Whether testpmd and the AF_XDP PMD are installed; the reason if not.
fn testpmd_available() -> Result<(), String> {
    if on_path("dpdk-testpmd").is_none() {
        return Err(
            "dpdk-testpmd not on PATH (Debian: apt-get install dpdk dpdk-dev librte-net-af-xdp23)"
                .into(),
        );
    }
    let pmd = std::fs::read_dir("/usr/lib/x86_64-linux-gnu/dpdk")
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|dir| {
            std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .any(|file| {
            file.file_name()
                .to_string_lossy()
                .starts_with("librte_net_af_xdp.so")
        });
    if !pmd {
        return Err("DPDK's AF_XDP PMD is missing (Debian: librte-net-af-xdp23)".into());
    }
    Ok(())
}

/// `program` inside namespace `ns` as a child of the benchmark: in a session of its own (so a
/// Ctrl-C at the terminal reaches only `ofan-lab`, which then stops it), at the benchmark's
/// nice value. With autogroup scheduling (`kernel.sched_autogroup_enabled`) a nice value only
/// ranks threads within their session's group, so the new session's group gets it too.
fn child(
    namespaces: &Namespaces,
    ns: &str,
    nice: i32,
    program: impl AsRef<std::ffi::OsStr>,
) -> Command {
    let mut command = namespaces.command(ns, "setsid");
    command
        .arg("sh")
        .arg("-c")
        .arg(format!(
            "echo {nice} > /proc/self/autogroup 2>/dev/null; exec nice -n {nice} \"$0\" \"$@\""
        ))
        .arg(program);
    command
}

/// The 1-minute load average (other work competing for the cores), if readable.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Everything one measurement needs.
struct Bench<'a> {
    args: &'a ForwardArgs,
    namespaces: &'a Namespaces,
    topology: &'a Topology,
    me: &'a Path,
    switch: &'a Path,
    dir: &'a Path,
    sink: Agent,
}

/// A running candidate in the dut namespace.
enum Dut {
    Switch { daemon: Daemon, socket: PathBuf },
    Testpmd(Daemon),
    Redirect(Agent),
}

impl Dut {
    /// Frames the candidate itself counts as sent out of p1, if it counts.
    fn sent(&mut self, switch: &Path) -> anyhow::Result<Option<u64>> {
        let Self::Switch { daemon, socket } = self else {
            return Ok(None);
        };
        daemon.check_running()?;
        let output = netns::run(
            Command::new(switch)
                .args(["stats", "--json", "--socket"])
                .arg(socket.as_os_str()),
        )?;
        let stats: Value = serde_json::from_str(&output).context("ofan-switch stats JSON")?;
        Ok(stats["data_path"]["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|port| port["name"] == "p1"))
            .and_then(|port| port["tx_packets"].as_u64()))
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        match self {
            Self::Switch { daemon, .. } | Self::Testpmd(daemon) => daemon.check_running(),
            Self::Redirect(_) => Ok(()),
        }
    }

    fn stop(self) -> anyhow::Result<String> {
        match self {
            Self::Switch { daemon, .. } | Self::Testpmd(daemon) => Ok(daemon.stop()),
            Self::Redirect(agent) => agent.finish(),
        }
    }
}

impl Bench<'_> {
    fn start(&self, candidate: Candidate, round: usize) -> anyhow::Result<Dut> {
        let label = format!("{}-{round}", candidate.name());
        match candidate {
            Candidate::Ofan | Candidate::Bare => {
                let config = self.dir.join("switch.toml");
                std::fs::write(&config, format!("[xdp]\ncpus = [{}]\n", self.args.dut_cpu))
                    .context("writing switch.toml")?;
                let socket = self.dir.join(format!("{label}.sock"));
                let mut command = child(self.namespaces, "dut", self.args.nice, self.switch);
                command
                    .arg("--config")
                    .arg(&config)
                    .args(["--port", "p0:host", "--port", "p1:host", "--poll", "busy"])
                    .args(["--xdp-mode", "copy", "--log", "warn", "--admin-socket"])
                    .arg(&socket);
                if candidate == Candidate::Bare {
                    command.arg("--bare");
                } else {
                    command.args(["--lb", "pofan"]);
                }
                let mut daemon = Daemon::spawn(&label, command, self.dir)?;
                let deadline = Instant::now() + Duration::from_secs(10);
                while std::os::unix::net::UnixStream::connect(&socket).is_err() {
                    daemon.check_running()?;
                    if Instant::now() > deadline {
                        bail!("ofan-switch did not come up:\n{}", daemon.log_tail());
                    }
                    pause(Duration::from_millis(50))?;
                }
                Ok(Dut::Switch { daemon, socket })
            }
            Candidate::Testpmd => {
                let lcores = format!("{},{}", self.args.gen_cpu, self.args.dut_cpu);
                let prefix = format!("ofan-bench-{}", std::process::id());
                // The AF_XDP PMD loads its XDP program through libxdp, which wants a bpffs;
                // `ip netns exec` gives the command a private mount namespace without one, so
                // mount one there (it vanishes with the process).
                // Likewise a hugetlbfs for the EAL.
                let huge = self.dir.join("hugepages");
                std::fs::create_dir_all(&huge).context("hugetlbfs mount point")?;
                let huge = huge.display();
                let script = format!(
                    "mount -t bpf bpf /sys/fs/bpf 2>/dev/null; \
                     mount -t hugetlbfs nodev {huge} || exit 1; \
                     exec dpdk-testpmd -l {lcores} --main-lcore {gen} -n 1 --no-pci \
                     --huge-dir {huge} --file-prefix {prefix} \
                     --vdev net_af_xdp0,iface=p0,start_queue=0,queue_count=1 \
                     --vdev net_af_xdp1,iface=p1,start_queue=0,queue_count=1 \
                     -- --forward-mode=io --nb-cores=1 --rxq=1 --txq=1 --stats-period 1",
                    gen = self.args.gen_cpu,
                );
                let mut command = child(self.namespaces, "dut", self.args.nice, "sh");
                command.args(["-c", &script]);
                let mut daemon = Daemon::spawn(&label, command, self.dir)?;
                let deadline = Instant::now() + Duration::from_secs(20);
                while !daemon.log().contains("Port statistics") {
                    daemon.check_running()?;
                    if Instant::now() > deadline {
                        bail!(
                            "dpdk-testpmd did not start forwarding:\n{}",
                            daemon.log_tail()
                        );
                    }
                    pause(Duration::from_millis(100))?;
                }
                Ok(Dut::Testpmd(daemon))
            }
            Candidate::Redirect => {
                let mut command = child(self.namespaces, "dut", self.args.nice, self.me);
                command.args(["bench", "redirect", "--from", "p0", "--to", "p1"]);
                Ok(Dut::Redirect(Agent::start(&label, command, self.dir)?))
            }
        }
    }

    fn generator(&self, label: &str) -> anyhow::Result<Agent> {
        let mut command = child(self.namespaces, "gen", self.args.nice, self.me);
        command
            .args(["bench", "gen", "--gen", self.args.gen.name()])
            .args(["--interface", "eth0", "--dst-mac"])
            .arg(&self.topology.p0_mac)
            .args(["--src-ip", GEN_IP, "--dst-ip", DEST_IP])
            .arg(format!("--frame-size={}", self.args.frame_size))
            .arg(format!("--flows={}", self.args.flows))
            .arg(format!("--cpu={}", self.args.gen_cpu));
        if let Some(rate) = self.args.rate {
            command.arg(format!("--rate={rate}"));
        }
        Agent::start(label, command, self.dir)
    }

    fn measure(&mut self, candidate: Candidate, round: usize) -> anyhow::Result<Sample> {
        let mut dut = self.start(candidate, round)?;
        let result = self.measure_running(&mut dut, candidate, round);
        let log = dut.stop();
        match (result, log) {
            (Ok(sample), Ok(_)) => Ok(sample),
            (Ok(_), Err(error)) => Err(error),
            (Err(error), Ok(log)) if !log.is_empty() => Err(error.context(log)),
            (Err(error), _) => Err(error),
        }
    }

    fn measure_running(
        &mut self,
        dut: &mut Dut,
        candidate: Candidate,
        round: usize,
    ) -> anyhow::Result<Sample> {
        let mut generator = self.generator(&format!("gen-{}-{round}", candidate.name()))?;
        // Forwarding has begun once the sink's count moves.
        let first = self.sink.read()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            pause(Duration::from_millis(50))?;
            dut.check_running()?;
            if self.sink.read()?.count > first.count {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} forwarded nothing within 10 s (generator sent {} frames)",
                    candidate.name(),
                    generator.read()?.count
                );
            }
        }
        pause(Duration::from_secs_f64(self.args.warmup))?;
        let (sink0, gen0, dut0) = (self.sink.read()?, generator.read()?, dut.sent(self.switch)?);
        pause(Duration::from_secs_f64(self.args.seconds))?;
        let (sink1, gen1, dut1) = (self.sink.read()?, generator.read()?, dut.sent(self.switch)?);
        generator.finish()?;
        let rate = |a: Reading, b: Reading| {
            (b.count - a.count) as f64 / ((b.ns - a.ns) as f64 / 1e9) / 1e6
        };
        let window_s = (sink1.ns - sink0.ns) as f64 / 1e9;
        Ok(Sample {
            round,
            mpps: rate(sink0, sink1),
            offered_mpps: rate(gen0, gen1),
            dut_mpps: dut0
                .zip(dut1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / window_s / 1e6),
        })
    }
}

fn to_json(args: &ForwardArgs, placement: &str, rows: &[Row]) -> Value {
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_default();
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .and_then(Row::median_mpps)
    };
    json!({
        "benchmark": "forward",
        "date": date,
        "machine": {
            "kernel": kernel,
            "cpu": cpu_model,
            "cpus": std::thread::available_parallelism().map_or(1, usize::from),
        },
        "frame_size": args.frame_size,
        "flows": args.flows,
        "generator": args.gen.name(),
        "rate_mpps": args.rate,
        "runs": args.runs,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "placement": placement,
        "nice": args.nice,
        "candidates": rows.iter().map(|row| match &row.outcome {
            Outcome::Measured(samples) => json!({
                "name": row.name,
                "description": row.description,
                "median_mpps": row.median_mpps(),
                "samples": samples.iter().map(|s| json!({
                    "round": s.round,
                    "mpps": s.mpps,
                    "offered_mpps": s.offered_mpps,
                    "dut_mpps": s.dut_mpps,
                })).collect::<Vec<_>>(),
            }),
            Outcome::Unavailable(reason) => json!({
                "name": row.name,
                "description": row.description,
                "unavailable": reason,
            }),
        }).collect::<Vec<_>>(),
        "ratios": {
            "ofan_bare": report::ratio(find("ofan"), find("bare")),
            "ofan_testpmd": report::ratio(find("ofan"), find("testpmd")),
            "ofan_redirect": report::ratio(find("ofan"), find("redirect")),
            "bare_redirect": report::ratio(find("bare"), find("redirect")),
            "testpmd_redirect": report::ratio(find("testpmd"), find("redirect")),
        },
        "paired_ratios": {
            "ofan_bare": report::paired_ofan_ratio(rows, "bare"),
            "ofan_testpmd": report::paired_ofan_ratio(rows, "testpmd"),
        },
        "paired_intervals": {
            "ofan_bare": interval_json(report::ofan_interval(rows, "bare")),
            "ofan_testpmd": interval_json(report::ofan_interval(rows, "testpmd")),
        },
    })
}

/// A per-round ratio interval as JSON (geometric mean, 95 % bounds, rounds), or null.
fn interval_json(interval: Option<report::Interval>) -> Value {
    interval.map_or(Value::Null, |i| {
        json!({
            "geometric_mean": i.estimate,
            "low_95": i.low,
            "high_95": i.high,
            "rounds": i.rounds,
        })
    })
}
