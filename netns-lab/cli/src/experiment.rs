//! `ofan-lab run` and `ofan-lab compare`: flags turned into an [`Experiment`] on a
//! [`LabSession`], results printed as tables.

use std::path::PathBuf;

use anyhow::{bail, Context};
use ofan_lab::Shaping;
use ofan_lab_agent::collective::Collective;
use ofan_lab_agent::entropy::HostLb;
use ofan_lab_experiment::chaos::{Chaos, FaultKind};
use ofan_lab_experiment::summary::{self, Variant};
use ofan_lab_experiment::{
    default_agent_spin_us, grid, output, AgentMode, Cell, Experiment, LabChoice, LabSession, Load,
    Traffic, AGENT_RT_PRIORITY,
};

use super::lab::EXPERIMENT_BUFFER;
use super::units::{parse_rate, parse_size};
use super::{results, CollectiveName, CollectiveOptions, HostLbArg, Stderr};

const RUN_AFTER_HELP: &str = "\
Examples:
  # on the running lab `lab`: ten 1 MB permutations under ofan
  ofan-lab run permutation --size 1MB --repeat 10 --lb ofan
  # build a k=4 lab for this run (removed afterwards unless --keep), write the results
  ofan-lab run permutation --k 4 --size 256KB --repeat 3 --lb pofan --json run.json
  # host-side random spraying over ecmp switches
  ofan-lab run permutation --lb ecmp --host-lb spray --size 1MB
  # one seeded fault per repetition (link flap, switch kill, routing restart on BGP labs)
  ofan-lab run permutation --size 256KB --repeat 12 --chaos 5

Repetition i uses the permutation of seed --seed + i, so two runs with the same seed and
--repeat see the same traffic. Before each repetition the switches' maxima and histograms are
reset; counters are read before and after. Results: --out DIR (default ./ofan-results/run-TIME)
holds result.json, runs.csv and, per repetition, the plan, every agent's report and log.";

const COMPARE_AFTER_HELP: &str = "\
Examples:
  ofan-lab compare --lb ecmp,rsq,jsq,ofan,pofan --sizes 1MB --repeat 3
  ofan-lab compare --lb rsq,ofan --sizes 64KB,256KB,1MB,4MB --repeat 2
  ofan-lab compare --lb ecmp,ofan --host-lb none,spray,reps --sizes 256KB

Variants: every --lb with --host-lb none, and for spray / reps the host-based baselines over
ecmp switches (the paper's RPS and REPS). Every variant sees the same permutations (seed
--seed + repetition). The results directory gets results.json, runs.csv, summary.csv and
plots: max-queue-vs-size.svg (paper Fig. 4), cct-increase.svg, queue-per-stage.svg (Fig. 3).";

/// Where the experiment runs: an existing lab, or one built for it.
#[derive(Debug, Clone, clap::Args)]
pub struct LabOptions {
    /// Lab to run on; if it does not exist, one is built (fat tree of radix --k) and removed
    /// afterwards.
    #[arg(long = "name", value_name = "LAB", default_value = "lab")]
    pub name: String,
    /// Radix of the fat tree to build when the lab does not exist (default 4).
    #[arg(long)]
    pub k: Option<u16>,
    /// Link rate of a lab built for the run (default: as `up --link-rate`, 8mbit up to k = 4,
    /// less for larger labs).
    #[arg(long, value_name = "RATE")]
    pub link_rate: Option<String>,
    /// Egress buffer per switch port of a lab built for the run: large, so that queues show
    /// their growth instead of drops (paper Fig. 4); with smaller buffers the agents recover
    /// every drop by retransmission, and the drops cost time.
    #[arg(long, value_name = "BYTES", default_value = EXPERIMENT_BUFFER)]
    pub buffer: String,
    /// Keep a lab built for the run instead of removing it.
    #[arg(long)]
    pub keep: bool,
    /// Shapers of a lab built for the run catch up on late departures (`up --catch-up`).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub catch_up: bool,
}

/// Traffic and agent settings shared by `run` and `compare`.
#[derive(Debug, Clone, clap::Args)]
pub struct TrafficOptions {
    /// ρ: every source sends at ρ × link rate, in (0, 1]; or `rho-max`: per repetition ρ_max
    /// of its traffic matrix under the lab's failed links and stopped switches (paper §6.2:
    /// the largest rate at which every flow fits when switches split evenly over valid ports).
    #[arg(long, value_name = "RHO|rho-max", default_value = "1")]
    pub load: Load,
    /// Repetitions (each with its own permutation seed).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Seed of the first repetition's permutation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// UDP payload of a full DATA packet (default: fills the lab's MTU).
    #[arg(long, value_name = "BYTES")]
    pub payload: Option<u32>,
    #[command(flatten)]
    pub shape: CollectiveOptions,
    /// SCHED_FIFO priority of the agents' sender threads (0 = ordinary scheduling). Above the
    /// switches' workers (20): an agent is the host's NIC and its departures must be on time,
    /// a switch's late wake-up is measured by its shaper.
    #[arg(long, value_name = "PRIO", default_value_t = AGENT_RT_PRIORITY)]
    pub agent_rt_priority: u8,
    /// Agents make up for late sends as the lab's shapers do (sch_fq style: the gap after a
    /// late send shrinks by its lateness, at most half a wire time), so the machine's wake-up
    /// jitter costs no rate: measured at 20 Mbit/s, MTU 9000, strict agents kept 0.994-0.998
    /// of their rate and a run whose agent lost 1 % was not faithful; catching up, 0.9999-1.
    /// `false`: the strict rule of a NIC (a late send continues at line rate from now).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub agent_catch_up: bool,
    /// Agents spin this many µs before each departure instead of sleeping to it. Default: 0
    /// when they catch up (a late wake-up is made up, and spinning at a real-time priority
    /// takes CPU the switches need), 20 with --agent-catch-up false (every late wake-up would
    /// cost rate).
    #[arg(long, value_name = "US")]
    pub agent_spin_us: Option<u64>,
    /// How the hosts' agents run: shared = one process in the root namespace serving every
    /// host from one sender and one receiver thread (each host's sockets in its namespace;
    /// few wake-ups on a small machine), per-host = one process per host namespace.
    #[arg(long, value_enum, default_value = "shared")]
    pub agents: AgentsArg,
    /// Do not watch the machine for stalls during the repetitions. By default, on a lab whose
    /// switches run as a group, an idle-priority thread per CPU counts the stalls the kernel's
    /// scheduler did not see (each repetition's `machine` record, `machine stalled` in its
    /// progress line, the table's `stalled` column); labs of switch processes are never
    /// watched.
    #[arg(long)]
    pub no_stall_watch: bool,
    /// On a multi-plane lab (up --topo multi-plane): how each host spreads its packets over
    /// its planes — plane-hash, plane-spray, plane-arf or entropy (`ofan-lab agent
    /// --host-planes`; docs/lab.md, Multi-plane labs). Ignored on a lab of one plane.
    #[arg(long, value_name = "POLICY", default_value = "plane-spray")]
    pub host_planes: String,
    /// Results directory (default ./ofan-results/<command>-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Inject one fault into every repetition, drawn from this seed and the repetition's
    /// permutation seed (so every variant of a `compare` meets the same one), 20–50 % into the
    /// traffic: a fabric link down for 0.5–2 s, a switch killed (SIGKILL) and started again
    /// 0.5–2 s later, or a switch's routing daemons crashed and restarted (BGP labs). Each
    /// repetition then says whether every packet was accounted for (delivered exactly once,
    /// every loss counted by name) or which fault voided it, and how.
    #[arg(long, value_name = "SEED")]
    pub chaos: Option<u64>,
    /// The fault kinds --chaos draws from, comma-separated (default: all the lab supports).
    #[arg(
        long,
        value_name = "KINDS",
        value_enum,
        value_delimiter = ',',
        requires = "chaos"
    )]
    pub chaos_faults: Vec<FaultKindArg>,
    /// The rate the hosts send at, on a lab whose switches do not shape (`up --link-rate 0`,
    /// `up --fast-path xdp`): the fabric forwards as fast as the machine can, and the CCT's
    /// lower bound takes links of this rate. Refused on a shaped lab, whose link rate rules.
    #[arg(long, value_name = "RATE")]
    pub host_rate: Option<String>,
}

/// `--agents`: how the hosts' agents run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentsArg {
    /// One agent process serving every host.
    Shared,
    /// One agent process per host namespace.
    PerHost,
}

impl From<AgentsArg> for AgentMode {
    fn from(agents: AgentsArg) -> Self {
        match agents {
            AgentsArg::Shared => Self::Shared,
            AgentsArg::PerHost => Self::PerHost,
        }
    }
}

/// A fault kind of `--chaos-faults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultKindArg {
    /// A switch-to-switch link down, then up again.
    LinkFlap,
    /// A switch process killed (SIGKILL), then started again.
    SwitchKill,
    /// A switch's routing daemons crashed and restarted (BGP labs).
    RoutingRestart,
}

impl From<FaultKindArg> for FaultKind {
    fn from(kind: FaultKindArg) -> Self {
        match kind {
            FaultKindArg::LinkFlap => Self::LinkFlap,
            FaultKindArg::SwitchKill => Self::SwitchKill,
            FaultKindArg::RoutingRestart => Self::RoutingRestart,
        }
    }
}

/// `ofan-lab run`.
#[derive(Debug, clap::Args)]
#[command(after_help = RUN_AFTER_HELP)]
pub struct RunArgs {
    /// The collective.
    #[arg(value_enum)]
    pub collective: CollectiveName,
    /// Message size per flow (1MB = 2^20 bytes, as in the model).
    #[arg(long, value_name = "BYTES", default_value = "1MB")]
    pub size: String,
    /// Switch algorithm (default: the lab's; others by a rolling restart of the switches).
    #[arg(long, value_name = "ALGO")]
    pub lb: Option<String>,
    /// Host-side load balancing of the agents.
    #[arg(long, value_enum, default_value = "none")]
    pub host_lb: HostLbArg,
    /// The hosts' congestion control: none (each host sends at ρ × the link rate, whatever
    /// the queues), dctcp (RFC 8257: the fraction of CE-marked ACKs; mark with `up
    /// --ecn-threshold`), nscc (Ultra Ethernet NSCC: ECN and queueing delay together), mswift
    /// (Swift's delay target on the median of the last 9 RTTs). With one, a lost packet is
    /// resent once a packet sent a smoothed RTT after it was ACKed, and timers wait four
    /// unloaded round trips (docs/experiments.md, "Congestion control").
    #[arg(long, value_name = "CCA", default_value = "none")]
    pub cc: String,
    /// Also write the results (JSON) here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub lab: LabOptions,
    #[command(flatten)]
    pub traffic: TrafficOptions,
}

/// `ofan-lab compare`.
#[derive(Debug, clap::Args)]
#[command(after_help = COMPARE_AFTER_HELP)]
pub struct CompareArgs {
    /// Switch algorithms, comma-separated.
    #[arg(long, value_name = "ALGOS", default_value = "ecmp,rsq,jsq,ofan,pofan")]
    pub lb: String,
    /// Host load balancing, comma-separated: none (the switch algorithms), spray, reps (over
    /// ecmp switches).
    #[arg(long, value_name = "LIST", default_value = "none")]
    pub host_lb: String,
    /// Message sizes, comma-separated.
    #[arg(long, value_name = "SIZES", default_value = "1MB")]
    pub sizes: String,
    /// The hosts' congestion control, comma-separated: none, dctcp, nscc, mswift (see `run
    /// --help`); every variant runs under each.
    #[arg(long, value_name = "CCAS", default_value = "none")]
    pub cc: String,
    /// The collective.
    #[arg(long, value_enum, default_value = "permutation")]
    pub collective: CollectiveName,
    #[command(flatten)]
    pub lab: LabOptions,
    #[command(flatten)]
    pub traffic: TrafficOptions,
}

impl CompareArgs {
    /// The demo's comparison on its lab `name`: a permutation, default traffic options,
    /// results under ./ofan-results/demo-TIME.
    #[must_use]
    pub fn for_demo(name: &str, lb: &str, sizes: &str, repeat: u32) -> Self {
        Self {
            lb: lb.to_owned(),
            host_lb: "none".to_owned(),
            sizes: sizes.to_owned(),
            cc: "none".to_owned(),
            collective: CollectiveName::Permutation,
            lab: LabOptions {
                name: name.to_owned(),
                k: None,
                link_rate: None,
                buffer: EXPERIMENT_BUFFER.to_owned(),
                keep: true,
                catch_up: true,
            },
            traffic: TrafficOptions {
                load: Load::Fixed(1.0),
                repeat,
                seed: 1,
                payload: None,
                shape: CollectiveOptions::default(),
                agent_rt_priority: AGENT_RT_PRIORITY,
                agent_catch_up: true,
                agent_spin_us: None,
                agents: AgentsArg::Shared,
                no_stall_watch: false,
                host_planes: "plane-spray".to_owned(),
                out: None,
                chaos: None,
                chaos_faults: Vec::new(),
                host_rate: None,
            },
        }
    }
}

/// Experiment subcommands (flattened into `ofan-lab`'s commands).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run a collective on the lab (repeatedly) and report CCT, queues per stage,
    /// utilization, drops and fidelity.
    Run(RunArgs),
    /// Run a grid of algorithms × host load balancing × message sizes; write JSON, CSV and
    /// plots and print a table.
    Compare(CompareArgs),
}

/// Runs an experiment subcommand.
///
/// # Errors
/// Bad arguments, no lab and none can be built, a switch or an agent failing.
pub fn run(command: Command) -> anyhow::Result<()> {
    if !ofan_lab::is_root() {
        bail!("experiments need root (network namespaces, XDP): run with sudo");
    }
    match command {
        Command::Run(args) => run_command(&args),
        Command::Compare(args) => compare_command(&args).map(|_| ()),
    }
}

impl LabOptions {
    fn choice(&self) -> anyhow::Result<LabChoice> {
        Ok(LabChoice {
            name: self.name.clone(),
            k: self.k,
            link_rate_bps: self.link_rate.as_deref().map(parse_rate).transpose()?,
            buffer_bytes: ofan_topology::units::parse_size(&self.buffer)
                .map_err(|e| anyhow::anyhow!("--buffer {e}"))?,
            keep: self.keep,
            shaping: Shaping::from_catch_up(self.catch_up),
        })
    }
}

impl TrafficOptions {
    fn traffic(&self) -> anyhow::Result<Traffic> {
        Ok(Traffic {
            load: self.load,
            repeat: self.repeat,
            seed: self.seed,
            payload: self.payload,
            agent_rt_priority: self.agent_rt_priority,
            agent_catch_up: self.agent_catch_up,
            agent_spin_us: self
                .agent_spin_us
                .unwrap_or(default_agent_spin_us(self.agent_catch_up)),
            agents: self.agents.into(),
            stall_watch: !self.no_stall_watch,
            chaos: self.chaos.map(|seed| Chaos {
                seed,
                kinds: self.chaos_faults.iter().map(|&k| k.into()).collect(),
            }),
            host_rate_bps: self.host_rate.as_deref().map(parse_rate).transpose()?,
            host_planes: self
                .host_planes
                .parse()
                .map_err(|e| anyhow::anyhow!("--host-planes: {e}"))?,
        })
    }

    fn collective(&self, name: CollectiveName) -> anyhow::Result<Collective> {
        self.shape.collective(name)
    }
}

/// One name of `--cc`.
fn parse_cc(text: &str) -> anyhow::Result<ofan_transport::CcKind> {
    text.trim()
        .parse()
        .map_err(|e| anyhow::anyhow!("--cc `{}`: {e}", text.trim()))
}

fn run_command(args: &RunArgs) -> anyhow::Result<()> {
    ofan_lab_experiment::interrupt::catch()?;
    let bytes = parse_size(&args.size)?;
    let collective = args.traffic.collective(args.collective)?;
    let mut observer = Stderr;
    let session = LabSession::open(&args.lab.choice()?, &mut observer)?;
    let lb = args
        .lb
        .clone()
        .unwrap_or_else(|| session.original_lb().to_owned());
    let variant = Variant::new(&lb, args.host_lb.into())?.with_cc(parse_cc(&args.cc)?);
    let out = args.traffic.out.clone();
    let experiment = Experiment::new(collective, args.traffic.traffic()?, out, "run")?;
    let cells = [Cell { variant, bytes }];
    let results = experiment.execute_and_close(session, &cells, &mut observer)?;
    if let Some(path) = &args.json {
        std::fs::copy(experiment.out.join("results.json"), path)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", results::table(&results));
    print!("{}", results::chaos_summary(&results));
    println!("results: {}", experiment.out.display());
    Ok(())
}

/// Runs `compare` and returns the results directory (the demo prints it).
pub fn compare_command(args: &CompareArgs) -> anyhow::Result<PathBuf> {
    ofan_lab_experiment::interrupt::catch()?;
    let sizes = args
        .sizes
        .split(',')
        .map(|s| parse_size(s.trim()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut variants = Vec::new();
    for host_lb in args.host_lb.split(',').map(str::trim) {
        let host_lb: HostLb = <HostLbArg as clap::ValueEnum>::from_str(host_lb, true)
            .map_err(|_| anyhow::anyhow!("--host-lb `{host_lb}`: none, spray or reps"))?
            .into();
        match host_lb {
            HostLb::None => {
                for lb in args.lb.split(',').map(str::trim) {
                    variants.push(Variant::new(lb, HostLb::None)?);
                }
            }
            _ => variants.push(Variant::new("ecmp", host_lb)?),
        }
    }
    let ccs = args
        .cc
        .split(',')
        .map(parse_cc)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let variants: Vec<Variant> = ccs
        .iter()
        .flat_map(|&cc| variants.iter().map(move |v| v.clone().with_cc(cc)))
        .collect();
    if variants.is_empty() || sizes.is_empty() {
        bail!("nothing to compare: give --lb and --sizes");
    }
    let collective = args.traffic.collective(args.collective)?;
    let cells = grid(&variants, &sizes);
    let mut observer = Stderr;
    let session = LabSession::open(&args.lab.choice()?, &mut observer)?;
    let out = args.traffic.out.clone();
    let experiment = Experiment::new(collective, args.traffic.traffic()?, out, "compare")?;
    let results = experiment.execute_and_close(session, &cells, &mut observer)?;
    print!("{}", results::table(&results));
    print!("{}", results::chaos_summary(&results));
    let plots = output::plots(&experiment.out, &results)?;
    for fit in summary::growth_exponents(&results) {
        println!("{}", results::growth_line(&fit));
    }
    println!("results: {}", experiment.out.display());
    for plot in plots {
        println!("plot: {}", plot.display());
    }
    Ok(experiment.out)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn run_args(flags: &[&str]) -> RunArgs {
        let args = ["ofan-lab", "run", "permutation"].iter().chain(flags);
        let cli = crate::Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        let crate::Command::Experiment(Command::Run(args)) = cli.command else {
            panic!("not run");
        };
        args
    }

    /// The agents' settings `run` derives from these flags.
    fn traffic(flags: &[&str]) -> Traffic {
        run_args(flags).traffic.traffic().unwrap()
    }

    #[test]
    fn agents_catch_up_by_default_and_a_flag_makes_them_strict() {
        assert!(traffic(&[]).agent_catch_up);
        assert!(Traffic::default().agent_catch_up);
        assert!(traffic(&["--agent-catch-up", "true"]).agent_catch_up);
        assert!(!traffic(&["--agent-catch-up", "false"]).agent_catch_up);
        assert!(!traffic(&["--agent-catch-up=false"]).agent_catch_up);
        // A value is required (as for --catch-up): a bare flag is not silently read as true.
        let bare = ["ofan-lab", "run", "--agent-catch-up", "permutation"];
        assert!(crate::Cli::try_parse_from(bare).is_err());
        // The spin follows catch-up unless given.
        assert_eq!(traffic(&[]).agent_spin_us, 0);
        assert_eq!(Traffic::default().agent_spin_us, 0);
        assert_eq!(traffic(&["--agent-catch-up", "false"]).agent_spin_us, 20);
        let strict_spin_3 = ["--agent-catch-up", "false", "--agent-spin-us", "3"];
        assert_eq!(traffic(&strict_spin_3).agent_spin_us, 3);
        let demo = CompareArgs::for_demo("demo", "pofan", "1MB", 1)
            .traffic
            .traffic()
            .unwrap();
        assert!(demo.agent_catch_up);
        assert_eq!(demo.agent_spin_us, 0);
    }
}
