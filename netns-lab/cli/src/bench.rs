//! `ofan-lab bench`: the forwarding benchmark and the agents it runs in its namespaces — flags
//! parsed into [`ofan_lab_bench`]'s typed options, its progress lines, its table and its JSON
//! file.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use ofan_dataplane::afxdp::bench::live::LiveConfig;
use ofan_lab::{HostLinks, Switches, TopologySource};
use ofan_lab_bench::agents::{self, parse_mac, GenKind, GenOptions};
use ofan_lab_bench::forward::{self, Candidate, Options, Report};
use ofan_lab_bench::lab as lab_bench;
use ofan_lab_bench::report::{self, Interval, Outcome, Row, Sample};
use ofan_lab_experiment::stalls;
use ofan_topology::TopologyKind;
use serde_json::{json, Value};

use super::units::{parse_rate, parse_size};

const FORWARD_LONG_ABOUT: &str = "\
Mpps of small frames through one forwarding core on veth (AF_XDP copy mode), from one run with \
the candidates interleaved:

  ofan      ofan-switch --lb pofan (parse, L3 lookup, balancing, TTL/checksum/MAC rewrite,
            egress queue), one busy-polling worker
  xdp       ofan-switch --lb pofan --fast-path xdp: the same decisions in the XDP program
            (LPM lookup, pOfan with per-CPU pointers, rewrite, XDP_REDIRECT), no user space
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

const STALLS_LONG_ABOUT: &str = "\
How quiet this machine is: the share of each CPU's time a spinning thread loses, and the \
longest stall.

One thread pinned to each CPU spins reading the monotonic clock for --seconds, all at once, and \
counts every gap of 10 µs or more between two reads as lost time. Per CPU: lost (the share of \
the time in such gaps), ran (the share the guest ran the thread, by its CPU clock: other \
processes had the rest), hidden (lost time the guest counted as the thread's own: interrupt \
work, or on a virtual machine the hypervisor holding the virtual CPU without reporting it), \
steal (what the hypervisor did report, /proc/stat), the longest gap and the gaps over 1 ms. A \
CPU that loses more than 1 % is not quiet: a lab's faithful runs allow its agents to miss their \
rate by 1 %, and a stall longer than a quarter of a packet time shows as shaper lateness. \
`bench lab` runs the same probe before each rate. No root needed; it takes every CPU while it \
runs.

Example: target/release/ofan-lab bench stalls --seconds 10";

const LAB_LONG_ABOUT: &str = "\
The highest link rate at which a lab stays faithful on this machine, and what it costs.

For each rate of --rates (in order) it builds a fat tree (--k, named --name: none may exist),
runs a permutation of --size per host at load 1 through it with --lb (the experiment of \
`ofan-lab run`, --repeat times), reads each run's fidelity and removes the lab. Per rate: CCT \
over the lower bound, the agents' lowest achieved/requested rate, how far the slowest agent \
of any run fell behind its schedule (`agent lost`: a few ms where a rate was missed is a stall \
of the agents' sender, not a rate the lab cannot carry), the worst shaper lateness p99 \
(packet times), the smallest receiver-window ratio, faithful runs (the run's own verdict: \
lateness within 0.25 packet times, agents within 1 %, no window compressed by more than 1 %, no route changed, no frame lost to the emulation), \
the CPUs' busy share over the runs (/proc/stat), the part of it the switches' keep-awake \
threads and the runs' stall watches spun (`awake`: idle time they filled, see `ofan-switch \
group --keep-awake-by`; a group whose idle CPUs poll has no such threads), the part a group's pool threads spun to departures too near to sleep \
for with nothing to forward (`spin`: the price of punctual departures), CPU time per frame the \
switches forwarded (agents and kernel included, both kinds of spinning not) and `CPUs full`: \
the median over the runs of the share of the traffic's 10-ms windows in which no CPU had time \
to spare (the runs' watches and the keep-awake threads got under 5 % of every CPU; the pool's \
spinning counts as busy there, so read it beside `spin`) — where it nears 100 % the lab needs more CPU than the machine \
has at that rate, which an average busy share hides. It ends with the highest rate whose every run was faithful and whose median CCT over the bound (column `CCT median`; the mean is in the JSON) stayed within one point of the lowest rate's (column `CCT kept`, `ref` on that lowest rate: a run's own verdict judges the emulation, not the CCT, and one lost frame costs a retransmission timeout of 20-40 s; so list a low rate such as 1mbit first, or a bench of one rate judges no CCT).

Run it on a quiet machine: anything else running takes CPU from the lab and shows as lateness. \
Before each rate's runs, with its lab built and idle, it probes for --probe seconds how quiet \
the machine is (as `bench stalls` does): column `stalls` is the largest share of a CPU's time \
a spinning thread lost and the longest stall; a machine that loses over 1 % can fail runs by \
itself (a faithful run's agents may miss their rate by 1 %). Column `run stalls` is the longest \
stall hidden from the kernel's scheduler during the runs themselves (each run's `machine` \
record, watched by an idle-priority thread per CPU). Each run's results directory goes \
under --out.

Example: sudo target/release/ofan-lab bench lab --rates 1mbit,2mbit,5mbit,10mbit --size 1MB";

/// `ofan-lab bench …` (flattened into `ofan-lab`'s commands).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Forwarding benchmarks (needs root): `ofan-lab bench forward`, and the generator, sink
    /// and redirect agents it runs inside its namespaces.
    Bench {
        /// What to run.
        #[command(subcommand)]
        command: BenchCommand,
    },
}

/// The benchmark subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Mpps of 64-byte frames through one forwarding core on veth (copy mode): ofan-switch,
    /// ofan-switch --bare, dpdk-testpmd (AF_XDP PMD) and XDP_REDIRECT, interleaved.
    #[command(long_about = FORWARD_LONG_ABOUT)]
    Forward(ForwardArgs),
    /// The highest link rate at which a whole lab stays faithful: per rate, a fat tree built,
    /// a permutation at load 1 run through it, its fidelity and its CPU per forwarded frame.
    #[command(long_about = LAB_LONG_ABOUT)]
    Lab(LabArgs),
    /// How quiet this machine is: the share of each CPU's time a spinning thread loses to
    /// stalls, and the longest stall — what `bench lab` probes before each rate.
    #[command(long_about = STALLS_LONG_ABOUT)]
    Stalls(StallsArgs),
    /// Agent: send prebuilt UDP frames on an interface — in the kernel with XDP live frames
    /// (`--gen live`, default) or with an AF_XDP TX-only socket (`--gen afxdp`) — until stdin
    /// closes (each stdin line asks for the frames sent so far).
    Gen(GenArgs),
    /// Agent: count and drop every frame arriving on an interface with the XDP program
    /// `ofan_sink` until stdin closes (each stdin line asks for the count).
    Sink(SinkArgs),
    /// Agent: XDP_REDIRECT every frame from one interface to another until stdin closes.
    Redirect(RedirectArgs),
}

/// The candidates (`--candidates`): a [`Candidate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CandidateName {
    /// ofan-switch with pOfan, L3 lookup and the egress queue.
    Ofan,
    /// ofan-switch --fast-path xdp: the switch's decisions in its XDP program.
    Xdp,
    /// ofan-switch --bare (port 2i ↔ 2i+1, no lookup).
    Bare,
    /// dpdk-testpmd io forwarding with the AF_XDP PMD.
    Testpmd,
    /// XDP_REDIRECT through a devmap.
    Redirect,
}

impl CandidateName {
    /// The library's candidate.
    #[must_use]
    pub const fn candidate(self) -> Candidate {
        match self {
            Self::Ofan => Candidate::Ofan,
            Self::Xdp => Candidate::Xdp,
            Self::Bare => Candidate::Bare,
            Self::Testpmd => Candidate::Testpmd,
            Self::Redirect => Candidate::Redirect,
        }
    }
}

/// How the generator sends (`--gen`): a [`GenKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenName {
    /// XDP live-frames mode: `BPF_PROG_RUN` runs `ofan_gen`, which transmits (`XDP_TX`) copies
    /// of the frame in the kernel, without skbs (Linux ≥ 5.18; the peer needs an XDP program).
    Live,
    /// An AF_XDP TX-only socket in copy mode (an skb per frame: slow, but works everywhere).
    Afxdp,
}

impl GenName {
    /// The library's kind.
    #[must_use]
    pub const fn kind(self) -> GenKind {
        match self {
            Self::Live => GenKind::Live,
            Self::Afxdp => GenKind::Afxdp,
        }
    }
}

/// Arguments of `bench lab`.
#[derive(Debug, Clone, Args)]
pub struct LabArgs {
    /// Link rates to measure, comma-separated, in order (e.g. 1mbit,5mbit,20mbit). Default:
    /// 0.5, 1, 2.5, 5 and 10 times the lab's default link rate (`up --link-rate`), which
    /// follows its size: 4mbit,8mbit,20mbit,40mbit,80mbit at k = 4, 500kbit to 10mbit at k = 8.
    #[arg(long)]
    pub rates: Option<String>,
    /// Fat-tree radix.
    #[arg(long, default_value_t = 4)]
    pub k: u16,
    /// Bytes per flow of the permutation. A flow lasts about size × 8 / rate (1 MB: 0.4 s at
    /// 20 Mbit/s); runs under a second can miss the kernel's once-a-second budgets and pass
    /// where longer ones stop (the bench says so): judge a rate on the sizes you will use.
    #[arg(long, default_value = "1MB")]
    pub size: String,
    /// Switch algorithm.
    #[arg(long, default_value = "pofan")]
    pub lb: String,
    /// Repetitions per rate (each with its own permutation).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Seed of the first repetition's permutation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Egress buffer per switch port.
    #[arg(long, default_value = "2MB")]
    pub buffer: String,
    /// MTU of every link, 68..=9216; the DATA packets fill it. What costs CPU is frames, not
    /// bytes: a larger MTU carries the same link rate in fewer frames.
    #[arg(long, default_value_t = 1500)]
    pub mtu: u32,
    /// Name of the labs it builds (one at a time).
    #[arg(long = "name", value_name = "LAB", default_value = "benchlab")]
    pub name: String,
    /// How the labs run their switches, comma-separated: each rate is measured in each mode
    /// in turn (group: one process, a worker thread per CPU; process: one per switch).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "group")]
    pub switches: Vec<super::lab::SwitchesArg>,
    /// Groups carry frames between their switches in the process, as `up --splice` (the
    /// default); `false`: over the veths (the group of earlier measurements).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub splice: bool,
    /// What carries the agents' frames in groups, as `up --host-links` (processes: veth).
    /// Default: as `up`'s — shared with --mtu ≤ 3506, veth above.
    #[arg(long, value_enum)]
    pub host_links: Option<super::lab::HostLinksArg>,
    /// Directory of the runs' results (default: ./ofan-results/bench-lab-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seconds to probe the machine's stalls before each rate's runs, with its lab built and
    /// idle (as `bench stalls` does; 0: no probe). The `stalls` column shows what it saw.
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0)]
    pub probe: f64,
    /// The agents make up for late sends, as `run --agent-catch-up` (the default); `false`:
    /// strict agents, which lose their wake-up jitter (`ofan-lab`'s default before
    /// 2026-12-02, in the measurements of earlier docs).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub agent_catch_up: bool,
    /// The agents spin this many µs before each departure, as `run --agent-spin-us` (default:
    /// 0 when they catch up, 20 when strict).
    #[arg(long, value_name = "US")]
    pub agent_spin_us: Option<u64>,
    /// Build the labs with `up --tune-machine` (machine-wide settings changed for fidelity,
    /// put back after each lab).
    #[arg(long)]
    pub tune_machine: bool,
    /// Also write the table as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// `bench lab`'s rates when none are given: around the lab's default link rate, from half of it
/// (the reference its CCT is judged against) to ten times it.
fn default_rates(topology: &TopologySource) -> anyhow::Result<Vec<u64>> {
    let rate = topology.default_link_rate_bps()?;
    Ok([1, 2, 5, 10, 20].map(|halves| rate * halves / 2).to_vec())
}

impl LabArgs {
    fn options(&self) -> anyhow::Result<lab_bench::Options> {
        let rates = match &self.rates {
            Some(rates) => rates
                .split(',')
                .map(|rate| parse_rate(rate.trim()))
                .collect::<anyhow::Result<Vec<_>>>()?,
            None => default_rates(&TopologySource::Kind(TopologyKind::FatTree { k: self.k }))?,
        };
        if rates.contains(&0) {
            anyhow::bail!("--rates: a lab without shaping (0) cannot be faithful or not");
        }
        // Before any lab is built, with the reason `up` would give.
        ofan_lab::spec::check_mtu(self.mtu)?;
        let probe = probe_duration(self.probe).context("--probe")?;
        let out = match &self.out {
            Some(out) => out.clone(),
            None => ofan_lab_experiment::results_dir("bench-lab")?,
        };
        Ok(lab_bench::Options {
            rates,
            k: self.k,
            bytes: parse_size(&self.size)?,
            lb: self.lb.clone(),
            repeat: self.repeat,
            seed: self.seed,
            buffer_bytes: parse_size(&self.buffer)?,
            mtu: self.mtu,
            name: self.name.clone(),
            out,
            switches: self.switches.iter().map(|s| s.switches()).collect(),
            splice: self.splice,
            host_links: self.host_links.map_or_else(
                || HostLinks::for_lab(Switches::Group, self.mtu),
                super::lab::HostLinksArg::host_links,
            ),
            probe,
            agent_catch_up: self.agent_catch_up,
            agent_spin_us: self.agent_spin_us.unwrap_or(
                ofan_lab_experiment::default_agent_spin_us(self.agent_catch_up),
            ),
            tune_machine: self.tune_machine,
        })
    }
}

/// Seconds of a stall probe, 0 to 60.
fn probe_duration(seconds: f64) -> anyhow::Result<Duration> {
    if !(0.0..=60.0).contains(&seconds) {
        anyhow::bail!("{seconds} s: a probe takes every CPU, give 0 to 60 seconds");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Arguments of `bench stalls`.
#[derive(Debug, Clone, Args)]
pub struct StallsArgs {
    /// Seconds to spin on every CPU.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Also write what each CPU saw as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
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
        default_value = "ofan,xdp,bare,testpmd,redirect"
    )]
    pub candidates: Vec<CandidateName>,
    /// Frame size on the wire, FCS included (64 = minimum-size Ethernet frames).
    #[arg(long, default_value_t = 64)]
    pub frame_size: u32,
    /// Flows (UDP source ports) the generator cycles through.
    #[arg(long, default_value_t = 256)]
    pub flows: u32,
    /// How the generator sends: XDP live frames in the kernel (`live`), or an AF_XDP TX-only
    /// socket in copy mode (`afxdp`, slower).
    #[arg(long = "gen", value_enum, default_value = "live")]
    pub gen: GenName,
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
    /// Forward between these two real interfaces of this network namespace, IN,OUT, instead of
    /// the run's own namespaces, generator and sink: the traffic comes from an outside
    /// generator into IN, the candidates forward it out of OUT, and the rates are the
    /// interfaces' counters (IN's rx_packets offered, OUT's tx_packets forwarded) and the
    /// switch's own. Routes and neighbours are this namespace's (docs/nic.md).
    #[arg(long, value_name = "IN,OUT")]
    pub ports: Option<String>,
    /// Queues of the DUT's veths (p0, p1 and their peers): the ofan-switch candidates serve
    /// them all (`--queues N`, a worker per queue, all on --dut-cpu), testpmd too, and the
    /// generator spreads its flows over them (needs --gen afxdp: a veth puts a live frame on
    /// the queue of the CPU that sends it). The sink counts frames per RX queue. With --ports:
    /// queues 0..N of the given interfaces, which the NIC's RSS fills (`ethtool -L IF combined
    /// N`).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub queues: u32,
    /// Fail (exit status 1) when in some round an ofan-switch candidate forwarded less than
    /// half of what `bare` forwarded in the same round — a functional check for CI, not a
    /// speed target (`bare` must be among the candidates). Runs whose drop counters explain
    /// the loss fail with or without it.
    #[arg(long)]
    pub check: bool,
}

impl ForwardArgs {
    /// The benchmark's options; `ofan_lab` is the binary that runs the agents.
    ///
    /// # Errors
    /// When `--seconds` or `--warmup` is negative or not a number (the rest is checked by
    /// [`Options::validate`]).
    pub fn options(&self, ofan_lab: PathBuf) -> anyhow::Result<Options> {
        let duration = |seconds: f64| {
            Duration::try_from_secs_f64(seconds)
                .map_err(|_| anyhow!("--seconds must be in (0, 600] and --warmup in [0, 60]"))
        };
        Ok(Options {
            rounds: self.runs,
            measurement: duration(self.seconds)?,
            warmup: duration(self.warmup)?,
            candidates: self
                .candidates
                .iter()
                .map(|name| name.candidate())
                .collect(),
            frame_size: self.frame_size,
            flows: self.flows,
            generator: self.gen.kind(),
            rate_mpps: self.rate,
            gen_cpu: self.gen_cpu,
            dut_cpu: self.dut_cpu,
            ofan_lab,
            switch: self.switch.clone(),
            nice: self.nice,
            hugepages: self.hugepages,
            queues: self.queues,
            ports: self
                .ports
                .as_deref()
                .map(forward::Ports::parse)
                .transpose()?,
        })
    }
}

/// `bench gen`.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// How to send.
    #[arg(long = "gen", value_enum, default_value = "live")]
    pub kind: GenName,
    /// Interface to send on.
    #[arg(long, value_name = "IF")]
    pub interface: String,
    /// Destination MAC (the next hop's, aa:bb:cc:dd:ee:ff).
    #[arg(long, value_name = "MAC")]
    pub dst_mac: String,
    /// Source IPv4 address.
    #[arg(long, default_value = "10.0.0.2")]
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long, default_value = "10.1.0.1")]
    pub dst_ip: Ipv4Addr,
    /// Frame size on the wire, FCS included (64 = the smallest Ethernet frame).
    #[arg(long, default_value_t = 64)]
    pub frame_size: u32,
    /// Flows (UDP source ports 1024, 1025, …).
    #[arg(long, default_value_t = 256)]
    pub flows: u32,
    /// Pin the sending thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// TX ring size (`afxdp`).
    #[arg(long, default_value_t = 2048)]
    pub ring_size: u32,
    /// Frames per batch the kernel runs and transmits at once (`live`, 1 to 256).
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Frames per `BPF_PROG_RUN` call (`live`; each call sets up and tears down a page pool).
    #[arg(long, default_value_t = LiveConfig::new("").chunk)]
    pub chunk: u32,
    /// Send at most this many million frames per second (`live`; default: as fast as the CPU
    /// allows).
    #[arg(long, value_name = "MPPS")]
    pub rate: Option<f64>,
    /// TX queues to spread the flows over, flow f on queue f mod N (`afxdp`: one socket and
    /// thread per queue; a veth's peer receives them on the same queue).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub queues: u32,
}

impl GenArgs {
    /// The generator's options.
    ///
    /// # Errors
    /// When `--dst-mac` is not a MAC address.
    pub fn options(&self) -> anyhow::Result<GenOptions> {
        Ok(GenOptions {
            kind: self.kind.kind(),
            interface: self.interface.clone(),
            dst_mac: parse_mac(&self.dst_mac)?,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            frame_size: self.frame_size,
            flows: self.flows,
            cpu: self.cpu,
            ring_size: self.ring_size,
            batch_size: self.batch_size,
            chunk: self.chunk,
            rate_mpps: self.rate,
            queues: self.queues,
        })
    }
}

/// `bench sink`.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Interface to count on.
    #[arg(long, value_name = "IF")]
    pub interface: String,
}

/// `bench redirect`.
#[derive(Debug, Args)]
pub struct RedirectArgs {
    /// Ingress interface.
    #[arg(long, value_name = "IF")]
    pub from: String,
    /// Egress interface.
    #[arg(long, value_name = "IF")]
    pub to: String,
}

/// Runs a benchmark subcommand.
///
/// # Errors
/// What the benchmark or agent reports.
pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Bench { command } = command;
    // The agents talk to `bench forward` over their stdin and stdout.
    let (stdin, stdout) = (std::io::stdin, std::io::stdout);
    match command {
        BenchCommand::Forward(args) => run_forward(&args),
        BenchCommand::Lab(args) => run_lab(&args),
        BenchCommand::Stalls(args) => run_stalls(&args),
        BenchCommand::Gen(args) => agents::gen(&args.options()?, stdin().lock(), stdout()),
        BenchCommand::Sink(args) => agents::sink(&args.interface, stdin().lock(), stdout()),
        BenchCommand::Redirect(args) => {
            agents::redirect(&args.from, &args.to, stdin().lock(), stdout())
        }
    }
}

/// `bench lab`: runs it, printing progress, then the table and the highest faithful rate.
fn run_lab(args: &LabArgs) -> anyhow::Result<()> {
    if !ofan_lab::is_root() {
        anyhow::bail!("bench lab builds labs: run it as root");
    }
    let options = args.options()?;
    let rows = lab_bench::run(&options, &mut super::Stderr)?;
    println!(
        "fat tree k={}, permutation of {} per host at load 1, lb {}, MTU {}, buffer {}, {} (spin {} µs), groups {}, host links {}, machine {}",
        options.k,
        args.size,
        options.lb,
        options.mtu,
        args.buffer,
        if options.agent_catch_up {
            "agents catch up"
        } else {
            "strict agents"
        },
        options.agent_spin_us,
        if options.splice {
            "splice"
        } else {
            "over the veths"
        },
        options.host_links.name(),
        if options.tune_machine {
            "tuned (--tune-machine)"
        } else {
            "as it was"
        }
    );
    print!("{}", lab_table(&rows));
    for &switches in &options.switches {
        match lab_bench::highest_faithful(&rows, switches) {
            Some(rate) => println!(
                "highest faithful rate ({}): {}",
                switches.name(),
                ofan_topology::units::format_rate(rate)
            ),
            None => println!("no rate was faithful ({})", switches.name()),
        }
    }
    let short = lab_bench::sub_second_rates(&options.rates, options.bytes);
    if let Some(&(_, seconds)) = short.first() {
        let rates: Vec<String> = short
            .iter()
            .map(|&(rate, _)| ofan_topology::units::format_rate(rate))
            .collect();
        println!(
            "note: at {} a {} flow lasts under a second ({seconds:.2} s at {}): the kernel keeps \
             its real-time and fair-class budgets per second, so runs this short can pass where \
             longer ones stop; judge a rate on the sizes your experiments use (--size)",
            rates.join(", "),
            args.size,
            rates[0]
        );
    }
    println!("results: {}", options.out.display());
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// `bench stalls`: probes every CPU, prints a line per CPU and the verdict.
fn run_stalls(args: &StallsArgs) -> anyhow::Result<()> {
    let duration = probe_duration(args.seconds).context("--seconds")?;
    let stalls = stalls::probe(duration).context("probing the CPUs")?;
    print!("{}", stalls_table(&stalls));
    if stalls.quiet() {
        println!(
            "quiet: no CPU lost more than {:.0} %",
            stalls::QUIET_LOST * 100.0
        );
    } else {
        println!(
            "not quiet: a CPU lost {:.2} % (more than {:.0} %, the share by which a faithful \
             run's agents may miss their rate); lab runs here may be judged unfaithful for the \
             machine, not the lab",
            stalls.worst_lost() * 100.0,
            stalls::QUIET_LOST * 100.0
        );
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&stalls)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// The table of `bench stalls`.
fn stalls_table(stalls: &stalls::Stalls) -> String {
    let mut text = format!(
        "{:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>12} {:>10}\n",
        "cpu", "seconds", "lost", "hidden", "ran", "steal", "longest ms", "gaps >1ms"
    );
    for cpu in &stalls.cpus {
        text.push_str(&format!(
            "{:>4} {:>8.1} {:>7.2}% {:>7.2}% {:>7.2}% {:>7.2}% {:>12.2} {:>10}\n",
            cpu.cpu,
            cpu.seconds,
            cpu.lost * 100.0,
            cpu.hidden() * 100.0,
            cpu.ran * 100.0,
            cpu.steal * 100.0,
            cpu.max_gap_ms,
            cpu.gaps_over_1ms
        ));
    }
    text
}

/// The table of `bench lab`.
fn lab_table(rows: &[lab_bench::RateRow]) -> String {
    let mut text = format!(
        "{:>10} {:>8} {:>5} {:>12} {:>9} {:>11} {:>11} {:>11} {:>10} {:>9} {:>9} {:>6} {:>6} {:>12} {:>9} {:>8} {:>15} {:>10}\n",
        "rate",
        "switches",
        "runs",
        "CCT median",
        "CCT kept",
        "agent rate",
        "agent lost",
        "shaper p99",
        "rx window",
        "faithful",
        "CPU busy",
        "awake",
        "spin",
        "µs CPU/frame",
        "CPUs full",
        "seconds",
        "stalls",
        "run stalls"
    );
    for row in rows {
        text.push_str(&format!(
            "{:>10} {:>8} {:>5} {:>12} {:>9} {:>11.3} {:>11} {:>11.2} {:>10.3} {:>9} {:>8.0}% {:>5.0}% {:>5.0}% {:>12} {:>9} {:>8.1} {:>15} {:>10}\n",
            ofan_topology::units::format_rate(row.rate_bps),
            row.switches,
            row.runs,
            row.cct_increase
                .map_or_else(|| "—".to_owned(), |i| format!("{:+.1} %", i * 100.0)),
            match (row.cct_reference, row.cct_kept) {
                // The lowest rate is what the others are judged against.
                (true, _) => "ref",
                (false, true) => "yes",
                (false, false) => "no",
            },
            row.agent_rate_ratio_min,
            format!("{:.1}ms", row.agent_lost_ms_max),
            row.shaper_late_p99_packet_times,
            row.receiver_window_ratio_min,
            format!("{}/{}", row.faithful, row.runs),
            row.cpu_busy * 100.0,
            row.keep_awake_busy * 100.0,
            row.pool_spin * 100.0,
            row.cpu_us_per_frame
                .map_or_else(|| "—".to_owned(), |us| format!("{us:.1}")),
            row.cpus_full_median
                .map_or_else(|| "—".to_owned(), |full| format!("{:.1}%", full * 100.0)),
            row.seconds,
            row.stalls.as_ref().map_or_else(
                || "—".to_owned(),
                |stalls| format!(
                    "{:.1}% {:.1}ms",
                    stalls.worst_lost() * 100.0,
                    stalls.max_gap_ms()
                )
            ),
            row.run_stall_ms_max
                .map_or_else(|| "—".to_owned(), |ms| format!("{ms:.1}ms"))
        ));
    }
    text
}

/// `bench forward`: runs it, printing progress, then the table, and writes the JSON file.
fn run_forward(args: &ForwardArgs) -> anyhow::Result<()> {
    let me = std::env::current_exe().context("path of ofan-lab")?;
    let options = args.options(me)?;
    if args.check && !options.candidates.contains(&Candidate::Bare) {
        bail!("--check compares with `bare`: add it to --candidates");
    }
    let report = forward::run(&options, &mut Progress::default())?;
    println!("\n{}", report::table(&report.rows));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&json(&report))? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    if args.check {
        let names: Vec<&str> = Candidate::SWITCHES.iter().map(|c| c.name()).collect();
        let found = report::shortfalls(&report.rows, &names, Candidate::Bare.name(), CHECK_FLOOR);
        if !found.is_empty() {
            let list: Vec<String> = found
                .iter()
                .map(|s| {
                    format!(
                        "{} in round {} at {:.2} × bare",
                        s.candidate,
                        s.round + 1,
                        s.ratio
                    )
                })
                .collect();
            bail!(
                "check failed: forwarded less than {CHECK_FLOOR} × bare in the same round: {}",
                list.join("; ")
            );
        }
        println!("check passed: every ofan-switch candidate forwarded at least {CHECK_FLOOR} × bare in every round");
    }
    Ok(())
}

/// `--check`'s floor: an ofan-switch candidate forwards at least this times `bare`.
const CHECK_FLOOR: f64 = 0.5;

/// Prints a run's header and one line per measurement, to stdout.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Rounds of the run (known once it started).
    rounds: usize,
}

impl forward::Observer for Progress {
    fn started(&mut self, options: &Options, load_average: Option<f64>) {
        self.rounds = options.rounds;
        if let Some(ports) = &options.ports {
            println!(
                "ofan-lab bench forward on real ports: traffic from outside into {} -> candidate \
                 -> {}; rates from the interfaces' counters ({} rx_packets offered, {} \
                 tx_packets forwarded); {} rounds x {} s (+{} s warm-up); nice {}; forwarding \
                 worker on CPU {}",
                ports.input,
                ports.output,
                ports.input,
                ports.output,
                options.rounds,
                options.measurement.as_secs_f64(),
                options.warmup.as_secs_f64(),
                options.nice,
                options.dut_cpu,
            );
            return;
        }
        println!(
            "ofan-lab bench forward: {}-byte UDP frames, {} flows, gen -> dut p0 -> p1 -> sink \
             (veth, AF_XDP copy mode); generator {}; {} rounds x {} s (+{} s warm-up); nice {}\n\
             placement: {}",
            options.frame_size,
            options.flows,
            match options.rate_mpps {
                Some(rate) => format!("{} at {rate} Mpps", options.generator.name()),
                None => options.generator.name().to_owned(),
            },
            options.rounds,
            options.measurement.as_secs_f64(),
            options.warmup.as_secs_f64(),
            options.nice,
            options.placement(),
        );
        if let Some(load) = load_average.filter(|&load| load > 0.5) {
            println!(
                "note: load average {load:.2} before the run: other work competes for the cores"
            );
        }
    }

    fn measured(&mut self, round: usize, candidate: Candidate, sample: &Sample) {
        println!("{}", progress_line(round, self.rounds, candidate, sample));
    }

    fn unavailable(&mut self, candidate: Candidate, error: &anyhow::Error) {
        println!("{} unavailable: {error:#}", candidate.name());
    }
}

/// `round 2/5 ofan     1.234 Mpps (offered 1.500, DUT counted 1.234)`: `round` 0-based of
/// `rounds`.
fn progress_line(round: usize, rounds: usize, candidate: Candidate, sample: &Sample) -> String {
    format!(
        "round {}/{} {:<8} {:.3} Mpps (offered {:.3}{})",
        round + 1,
        rounds,
        candidate.name(),
        sample.mpps,
        sample.offered_mpps,
        sample
            .dut_mpps
            .map(|m| format!(", DUT counted {m:.3}"))
            .unwrap_or_default(),
    ) + &queue_shares("per RX queue at the sink", &sample.queues)
        + &queue_shares("received per queue", &sample.dut_queues.received)
}

/// `; <what> 50 % 50 %` for counts of more than one queue.
fn queue_shares(what: &str, queues: &[u64]) -> String {
    let total: u64 = queues.iter().sum();
    if queues.len() < 2 || total == 0 {
        return String::new();
    }
    let shares: Vec<String> = queues
        .iter()
        .map(|&frames| format!("{:.0} %", frames as f64 * 100.0 / total as f64))
        .collect();
    format!("; {what} {}", shares.join(" "))
}

/// The JSON document of a run: its settings, the machine, every sample, the ratios.
fn json(report: &Report) -> Value {
    let options = &report.options;
    let rows = &report.rows;
    let find = |name: &str| {
        rows.iter()
            .find(|r| r.name == name)
            .and_then(Row::median_mpps)
    };
    json!({
        "benchmark": "forward",
        "date": report.machine.date,
        "machine": {
            "kernel": report.machine.kernel,
            "cpu": report.machine.cpu,
            "cpus": report.machine.cpus,
        },
        "frame_size": options.frame_size,
        "flows": options.flows,
        "generator": options.generator.name(),
        "rate_mpps": options.rate_mpps,
        "runs": options.rounds,
        "seconds": options.measurement.as_secs_f64(),
        "warmup": options.warmup.as_secs_f64(),
        "placement": options.placement(),
        "nice": options.nice,
        "load_average": {
            "before": report.load_average[0],
            "after": report.load_average[1],
        },
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
                    "queues": s.queues,
                    "dut_received_by_queue": s.dut_queues.received,
                    "dut_sent_by_queue": s.dut_queues.sent,
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
            "xdp_redirect": report::ratio(find("xdp"), find("redirect")),
            "bare_redirect": report::ratio(find("bare"), find("redirect")),
            "testpmd_redirect": report::ratio(find("testpmd"), find("redirect")),
        },
        "targets": report::TARGETS.iter().map(|t| (t.key(), json!(t.at_least))).collect::<serde_json::Map<_, _>>(),
        "paired_ratios": report::TARGETS.iter().map(|t| {
            (t.key(), json!(report::paired_ratio_of(rows, t.candidate, t.baseline)))
        }).collect::<serde_json::Map<_, _>>(),
        "paired_intervals": report::TARGETS.iter().map(|t| {
            (t.key(), interval_json(report::interval_of(rows, t.candidate, t.baseline)))
        }).collect::<serde_json::Map<_, _>>(),
    })
}

/// A per-round ratio interval as JSON (geometric mean, 95 % bounds, rounds), or null.
fn interval_json(interval: Option<Interval>) -> Value {
    interval.map_or(Value::Null, |i| {
        json!({
            "geometric_mean": i.estimate,
            "low_95": i.low,
            "high_95": i.high,
            "rounds": i.rounds,
        })
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn parse(args: &[&str]) -> BenchCommand {
        let cli = crate::Cli::try_parse_from(["ofan-lab", "bench"].iter().chain(args))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let crate::Command::Bench(Command::Bench { command }) = cli.command else {
            panic!("not a bench command");
        };
        command
    }

    #[test]
    fn bench_lab_rates_default_around_the_labs_default_link_rate() {
        let rates = |k| default_rates(&TopologySource::Kind(TopologyKind::FatTree { k })).unwrap();
        assert_eq!(
            rates(4),
            [4_000_000, 8_000_000, 20_000_000, 40_000_000, 80_000_000]
        );
        assert_eq!(
            rates(8),
            [500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000]
        );
    }

    fn gen_options(args: &[String]) -> GenOptions {
        let args: Vec<&str> = std::iter::once("gen")
            .chain(args.iter().map(String::as_str))
            .collect();
        let BenchCommand::Gen(gen) = parse(&args) else {
            panic!("not gen");
        };
        gen.options().unwrap()
    }

    #[test]
    fn gen_defaults_are_the_librarys() {
        let mac = [2, 0, 0, 0, 0, 1];
        let options = gen_options(&[
            "--interface=eth0".into(),
            "--dst-mac=02:00:00:00:00:01".into(),
        ]);
        assert_eq!(options, GenOptions::new("eth0", mac));
    }

    #[test]
    fn the_generators_command_line_parses_back_to_its_options() {
        // What `bench forward` passes to `ofan-lab bench gen`, every field away from its default.
        let options = GenOptions {
            kind: GenKind::Afxdp,
            src_ip: Ipv4Addr::new(10, 9, 0, 2),
            dst_ip: Ipv4Addr::new(10, 9, 1, 1),
            frame_size: 128,
            flows: 3,
            cpu: Some(1),
            ring_size: 512,
            batch_size: 16,
            chunk: 1000,
            rate_mpps: Some(0.1),
            ..GenOptions::new("p9", [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        };
        assert_eq!(gen_options(&options.args()), options);
        let live = GenOptions::new("eth0", [2, 0, 0, 0, 0, 1]);
        assert_eq!(gen_options(&live.args()), live);
    }

    #[test]
    fn forward_flags_become_typed_options() {
        let BenchCommand::Forward(args) = parse(&[
            "forward",
            "--runs=2",
            "--seconds=0.5",
            "--warmup=0",
            "--candidates=redirect,ofan",
            "--rate=0.25",
        ]) else {
            panic!("not forward");
        };
        let options = args.options(PathBuf::from("/x/ofan-lab")).unwrap();
        assert_eq!(options.rounds, 2);
        assert_eq!(options.measurement, Duration::from_millis(500));
        assert_eq!(options.warmup, Duration::ZERO);
        assert_eq!(options.candidates, [Candidate::Redirect, Candidate::Ofan]);
        assert_eq!(options.generator, GenKind::Live);
        assert_eq!(options.rate_mpps, Some(0.25));
        assert_eq!(
            (options.gen_cpu, options.dut_cpu, options.nice),
            (0, 1, -20)
        );

        let BenchCommand::Forward(args) = parse(&["forward", "--warmup=-1"]) else {
            panic!("not forward");
        };
        assert!(args.options(PathBuf::new()).is_err());
    }

    #[test]
    fn bench_lab_agents_catch_up_unless_told_not_to_and_spin_as_run_does() {
        for (flags, expected, spin) in [
            (&[][..], true, 0),
            (&["--agent-catch-up=false"][..], false, 20),
            (
                &["--agent-catch-up", "true", "--agent-spin-us", "5"][..],
                true,
                5,
            ),
        ] {
            let args: Vec<&str> = ["lab", "--out=/tmp/x"]
                .iter()
                .chain(flags)
                .copied()
                .collect();
            let BenchCommand::Lab(args) = parse(&args) else {
                panic!("not lab");
            };
            let options = args.options().unwrap();
            assert_eq!(options.agent_catch_up, expected, "{flags:?}");
            assert_eq!(options.agent_spin_us, spin, "{flags:?}");
        }
    }

    #[test]
    fn the_stall_probe_takes_zero_to_sixty_seconds() {
        let BenchCommand::Lab(args) = parse(&["lab", "--out=/tmp/x", "--probe=0"]) else {
            panic!("not lab");
        };
        assert_eq!(args.options().unwrap().probe, Duration::ZERO);
        let BenchCommand::Lab(args) = parse(&["lab", "--out=/tmp/x"]) else {
            panic!("not lab");
        };
        assert_eq!(args.options().unwrap().probe, Duration::from_secs(1));
        for bad in ["--probe=-1", "--probe=61", "--probe=NaN"] {
            let BenchCommand::Lab(args) = parse(&["lab", "--out=/tmp/x", bad]) else {
                panic!("not lab");
            };
            let error = format!("{:#}", args.options().unwrap_err());
            assert!(error.starts_with("--probe: "), "{bad}: {error}");
        }
        let BenchCommand::Stalls(args) = parse(&["stalls", "--seconds=0.5"]) else {
            panic!("not stalls");
        };
        assert_eq!(
            probe_duration(args.seconds).unwrap(),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn the_stalls_table_has_a_line_per_cpu() {
        let gaps = stalls::Gaps {
            lost_ns: 40_000_000,
            max_ns: 19_000_000,
            count: 7,
            over_1ms: 3,
        };
        let probed = stalls::Stalls {
            cpus: vec![
                stalls::CpuStalls::new(0, &gaps, 1_000_000_000, 990_000_000, 0.0),
                stalls::CpuStalls::new(1, &gaps, 1_000_000_000, 960_000_000, 0.0),
            ],
        };
        let table = stalls_table(&probed);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert_eq!(
            lines[1].split_whitespace().collect::<Vec<_>>(),
            ["0", "1.0", "4.00%", "3.00%", "99.00%", "0.00%", "19.00", "3"]
        );
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["1", "1.0", "4.00%", "0.00%", "96.00%", "0.00%", "19.00", "3"]
        );
    }
}
