//! Experiments on a lab: `ofan-lab run` (one collective, one algorithm, repeated) and
//! `ofan-lab compare` (a grid of algorithms × host load balancing × message sizes), reporting
//! the collective completion time (CCT) against the topology's lower bound, queues per stage,
//! utilization, drops, exactly-once delivery and emulation fidelity — all measured on the real
//! data path: the agents' reports and the switches' own telemetry.
//!
//! Layers:
//! - [`metrics`] (pure): one repetition's report from agent reports and switch snapshots.
//! - [`summary`] (pure): mean ± SEM over repetitions, the growth-exponent fit, the table.
//! - [`kernel`]: the namespaces' kernel loss counters (parsing pure, reading in the namespace).
//! - [`runner`] (I/O): reset and snapshot switches, start and wait for the agents.
//! - [`output`] (I/O): results directory, JSON, CSV, SVG plots.

pub mod kernel;
pub mod metrics;
pub mod output;
pub mod runner;
pub mod summary;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::agent::collective::{self, Plan};
use crate::agent::entropy::HostLb;
use crate::agent::{parse_size, read_matrix};
use crate::lab::{self, Loaded};
use metrics::{LabSetup, RunReport};
use runner::AgentOptions;
use summary::{Summarized, Variant};

/// Default SCHED_FIFO priority of the agents' senders: above the switches' workers
/// ([`lab::DEFAULT_SWITCH_RT_PRIORITY`]). With agents below the switches, sixteen agents on 2
/// vCPUs were late by 0.2–0.8 ms at the median and lost 3–5 % of their rate; above, 6–16 µs
/// and within 0.2 %.
pub const AGENT_RT_PRIORITY: u8 = 30;

const RUN_AFTER_HELP: &str = "\
Examples:
  # on the running lab `lab`: ten 1 MB permutations under ofan
  ofan-lab run permutation --size 1MB --repeat 10 --lb ofan
  # build a k=4 lab for this run (removed afterwards unless --keep), write the results
  ofan-lab run permutation --k 4 --size 256KB --repeat 3 --lb pofan --json run.json
  # host-side random spraying over ecmp switches
  ofan-lab run permutation --lb ecmp --host-lb spray --size 1MB

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
    /// Link rate of a lab built for the run.
    #[arg(long, value_name = "RATE", default_value = lab::DEFAULT_LINK_RATE)]
    pub link_rate: String,
    /// Egress buffer per switch port of a lab built for the run: large, so that queues show
    /// their growth instead of drops (paper Fig. 4); with smaller buffers the agents recover
    /// every drop by retransmission, and the drops cost time.
    #[arg(long, value_name = "BYTES", default_value = lab::EXPERIMENT_BUFFER)]
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
    /// ρ: every source sends at ρ × link rate.
    #[arg(long, value_name = "RHO", default_value_t = 1.0)]
    pub load: f64,
    /// Repetitions (each with its own permutation seed).
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// Seed of the first repetition's permutation.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// UDP payload of a full DATA packet (default: fills the lab's MTU).
    #[arg(long, value_name = "BYTES")]
    pub payload: Option<u32>,
    /// Ring stride for `ring`.
    #[arg(long, default_value_t = 1)]
    pub stride: u32,
    /// Byte matrix for `matrix` (CSV or JSON; see docs/agent.md).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// SCHED_FIFO priority of the agents' sender threads (0 = ordinary scheduling). Above the
    /// switches' workers (20): an agent is the host's NIC and its departures must be on time,
    /// a switch's late wake-up is measured by its shaper.
    #[arg(long, value_name = "PRIO", default_value_t = AGENT_RT_PRIORITY)]
    pub agent_rt_priority: u8,
    /// Let agents make up for late sends (sch_fq style; gaps down to half a wire time). Off by
    /// default: a late agent continues at line rate from now, like a NIC.
    #[arg(long)]
    pub agent_catch_up: bool,
    /// Agents spin this many µs before each departure (real-time senders wake up within a
    /// few µs; spinning costs CPU that the switches need).
    #[arg(long, value_name = "US", default_value_t = 20)]
    pub agent_spin_us: u64,
    /// Results directory (default ./ofan-results/<command>-<time>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The collectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CollectiveName {
    /// Seeded random derangement: every host sends --size to one other host.
    Permutation,
    /// Every host sends --size to every other host, round-robin over its flows.
    AllToAll,
    /// Host i sends --size to host i + --stride.
    Ring,
    /// Bytes from a host-to-host matrix (--matrix FILE).
    Matrix,
}

impl CollectiveName {
    fn name(self) -> &'static str {
        match self {
            CollectiveName::Permutation => "permutation",
            CollectiveName::AllToAll => "all-to-all",
            CollectiveName::Ring => "ring",
            CollectiveName::Matrix => "matrix",
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
    pub host_lb: HostLb,
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
            collective: CollectiveName::Permutation,
            lab: LabOptions {
                name: name.to_owned(),
                k: None,
                link_rate: lab::DEFAULT_LINK_RATE.to_owned(),
                buffer: lab::EXPERIMENT_BUFFER.to_owned(),
                keep: true,
                catch_up: true,
            },
            traffic: TrafficOptions {
                load: 1.0,
                repeat,
                seed: 1,
                payload: None,
                stride: 1,
                matrix: None,
                agent_rt_priority: AGENT_RT_PRIORITY,
                agent_catch_up: false,
                agent_spin_us: 20,
                out: None,
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
    if !crate::lab::is_root() {
        bail!("experiments need root (network namespaces, XDP): run with sudo");
    }
    match command {
        Command::Run(args) => run_command(&args),
        Command::Compare(args) => compare_command(&args).map(|_| ()),
    }
}

/// One cell of a grid: a variant at a message size.
#[derive(Debug, Clone)]
struct Cell {
    variant: Variant,
    bytes: u64,
}

/// Everything an experiment needs to run its cells.
struct Experiment<'a> {
    collective: CollectiveName,
    traffic: &'a TrafficOptions,
    matrix: Option<String>,
    out: PathBuf,
    command: &'static str,
}

fn run_command(args: &RunArgs) -> anyhow::Result<()> {
    let bytes = parse_size(&args.size)?;
    let matrix = read_matrix_option(args.collective, &args.traffic)?;
    let session = LabSession::open(&args.lab)?;
    let lb = args
        .lb
        .clone()
        .unwrap_or_else(|| session.original_lb.clone());
    let variant = Variant::new(&lb, args.host_lb)?;
    let experiment = Experiment::new(args.collective, &args.traffic, matrix, "run")?;
    let results = experiment.execute_and_close(session, &[Cell { variant, bytes }])?;
    if let Some(path) = &args.json {
        std::fs::copy(experiment.out.join("results.json"), path)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", summary::table(&results));
    println!("results: {}", experiment.out.display());
    Ok(())
}

/// Runs `compare` and returns the results directory (the demo prints it).
pub fn compare_command(args: &CompareArgs) -> anyhow::Result<PathBuf> {
    let sizes = args
        .sizes
        .split(',')
        .map(|s| parse_size(s.trim()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut variants = Vec::new();
    for host_lb in args.host_lb.split(',').map(str::trim) {
        let host_lb: HostLb = clap::ValueEnum::from_str(host_lb, true)
            .map_err(|_| anyhow::anyhow!("--host-lb `{host_lb}`: none, spray or reps"))?;
        match host_lb {
            HostLb::None => {
                for lb in args.lb.split(',').map(str::trim) {
                    variants.push(Variant::new(lb, HostLb::None)?);
                }
            }
            _ => variants.push(Variant::new("ecmp", host_lb)?),
        }
    }
    if variants.is_empty() || sizes.is_empty() {
        bail!("nothing to compare: give --lb and --sizes");
    }
    let matrix = read_matrix_option(args.collective, &args.traffic)?;
    // Variants on the same switch algorithm run back to back: fewer restarts.
    let mut cells = Vec::new();
    for variant in &variants {
        for &bytes in &sizes {
            cells.push(Cell {
                variant: variant.clone(),
                bytes,
            });
        }
    }
    cells.sort_by(|a, b| a.variant.lb.cmp(&b.variant.lb));
    let session = LabSession::open(&args.lab)?;
    let experiment = Experiment::new(args.collective, &args.traffic, matrix, "compare")?;
    let results = experiment.execute_and_close(session, &cells)?;
    print!("{}", summary::table(&results));
    let plots = output::plots(&experiment.out, &results)?;
    for fit in summary::growth_exponents(&results) {
        println!("{fit}");
    }
    println!("results: {}", experiment.out.display());
    for plot in plots {
        println!("plot: {}", plot.display());
    }
    Ok(experiment.out)
}

impl<'a> Experiment<'a> {
    fn new(
        collective: CollectiveName,
        traffic: &'a TrafficOptions,
        matrix: Option<String>,
        command: &'static str,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            collective,
            traffic,
            matrix,
            out: results_dir(traffic, command)?,
            command,
        })
    }

    /// Runs the cells, then closes the session whatever happened (a lab built for the
    /// experiment is removed also after an error).
    fn execute_and_close(&self, session: LabSession, cells: &[Cell]) -> anyhow::Result<Summarized> {
        let result = self.execute(&session, cells);
        let closed = session.close();
        let results = result?;
        closed?;
        Ok(results)
    }

    /// Runs every cell `--repeat` times on the lab and writes the results.
    fn execute(&self, session: &LabSession, cells: &[Cell]) -> anyhow::Result<Summarized> {
        let traffic = self.traffic;
        if !(traffic.load > 0.0 && traffic.load <= 1.0) {
            bail!("--load {}: must be in (0, 1]", traffic.load);
        }
        if traffic.repeat == 0 {
            bail!("--repeat must be at least 1");
        }
        std::fs::create_dir_all(&self.out)
            .with_context(|| format!("cannot create {}", self.out.display()))?;
        let lab = session.load()?;
        let payload = traffic.payload.unwrap_or(lab.state.params.mtu - 28);
        if payload + metrics::FRAME_OVERHEAD > lab.state.params.mtu + 14 {
            bail!(
                "--payload {payload}: DATA frames would exceed the lab's MTU {}",
                lab.state.params.mtu
            );
        }
        if lab.state.params.link_rate_bps == 0 {
            bail!("the lab's links are unshaped (--link-rate 0): experiments need a link rate");
        }
        let options = AgentOptions {
            rt_priority: traffic.agent_rt_priority,
            catch_up: traffic.agent_catch_up,
            spin_us: traffic.agent_spin_us,
            entropies: 64,
            port: 7000,
        };
        let total = cells.len() * traffic.repeat as usize;
        let started = Instant::now();
        let mut reports: Vec<RunReport> = Vec::with_capacity(total);
        let mut done = 0usize;
        for cell in cells {
            session.ensure_lb(&cell.variant.lb)?;
            let lab = session.load()?;
            for repetition in 0..traffic.repeat {
                let seed = traffic.seed + u64::from(repetition);
                let plan = self.plan(&lab, cell.bytes, seed)?;
                let setup = LabSetup {
                    lab: lab.state.name.clone(),
                    collective: self.collective.name().to_owned(),
                    lb: cell.variant.lb.clone(),
                    host_lb: cell.variant.host_lb_name().to_owned(),
                    message_bytes: cell.bytes,
                    load: traffic.load,
                    link_rate_bps: lab.state.params.link_rate_bps,
                    payload,
                    buffer: lab.state.params.buffer.clone(),
                    catch_up: lab.state.params.catch_up,
                    repetition,
                    seed,
                };
                let dir = self.out.join("runs").join(format!(
                    "{}-{}-r{repetition}",
                    cell.variant.name(),
                    summary::size_label(cell.bytes)
                ));
                let report = runner::run_repetition(&lab, &plan, setup, &options, &dir)?;
                done += 1;
                eprintln!(
                    "{}",
                    summary::progress_line(done, total, started.elapsed(), &cell.variant, &report)
                );
                reports.push(report);
            }
        }
        let results = summary::summarize(reports);
        output::write_results(&self.out, self.command, &results)?;
        Ok(results)
    }

    fn plan(&self, lab: &Loaded, bytes: u64, seed: u64) -> anyhow::Result<Plan> {
        let hosts = collective::topology_hosts(&lab.topology);
        // A fresh collective id per run: stale packets of an earlier run are ignored.
        let id = (crate::agent::monotonic_now_ns() as u32) | 1;
        Ok(match self.collective {
            CollectiveName::Permutation => collective::permutation(id, hosts, bytes, seed),
            CollectiveName::AllToAll => collective::all_to_all(id, hosts, bytes),
            CollectiveName::Ring => collective::ring(id, hosts, bytes, self.traffic.stride),
            CollectiveName::Matrix => collective::matrix(
                id,
                hosts,
                self.matrix
                    .as_deref()
                    .context("matrix needs --matrix FILE")?,
            ),
        }?)
    }
}

fn read_matrix_option(
    collective: CollectiveName,
    traffic: &TrafficOptions,
) -> anyhow::Result<Option<String>> {
    match (collective, &traffic.matrix) {
        (CollectiveName::Matrix, Some(path)) => read_matrix(path).map(Some),
        (CollectiveName::Matrix, None) => bail!("matrix needs --matrix FILE"),
        (_, Some(_)) => bail!("--matrix is only for the matrix collective"),
        (_, None) => Ok(None),
    }
}

fn results_dir(traffic: &TrafficOptions, command: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &traffic.out {
        return Ok(dir.clone());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    Ok(PathBuf::from("ofan-results").join(format!("{command}-{}", output::timestamp(now))))
}

/// The lab an experiment runs on; restores or removes it when closed.
struct LabSession {
    name: String,
    built: bool,
    keep: bool,
    original_lb: String,
}

impl LabSession {
    fn open(options: &LabOptions) -> anyhow::Result<Self> {
        let exists = lab::exists(&options.name);
        if exists {
            let loaded = lab::load(&options.name)?;
            if let Some(k) = options.k {
                if loaded.topology.k() != k {
                    bail!(
                        "lab `{}` has k={}, not --k {k}: remove it (ofan-lab down --name {}) or drop --k",
                        options.name,
                        loaded.topology.k(),
                        options.name
                    );
                }
            }
            return Ok(Self {
                name: options.name.clone(),
                built: false,
                keep: true,
                original_lb: loaded.state.params.lb,
            });
        }
        let k = options.k.unwrap_or(4);
        eprintln!(
            "building lab `{}` (fat tree k={k}, {} links, buffer {}) for this experiment; \
             if it is interrupted, remove it with: ofan-lab down --name {}",
            options.name, options.link_rate, options.buffer, options.name
        );
        let args = lab::UpArgs {
            lab: lab::LabName {
                name: options.name.clone(),
            },
            topo: "fat-tree".to_owned(),
            k,
            lb: "pofan".to_owned(),
            pipe_size: None,
            link_rate: options.link_rate.clone(),
            buffer: options.buffer.clone(),
            mtu: 1500,
            seed: 1,
            rt_priority: lab::DEFAULT_SWITCH_RT_PRIORITY,
            catch_up: options.catch_up,
            routing: lab::Routing::Static,
            switch_bin: None,
        };
        lab::up(&args)?;
        Ok(Self {
            name: options.name.clone(),
            built: true,
            keep: options.keep,
            original_lb: "pofan".to_owned(),
        })
    }

    fn load(&self) -> anyhow::Result<Loaded> {
        lab::load(&self.name)
    }

    /// Switches every switch to `lb` unless it already runs it, then waits for the FIBs.
    fn ensure_lb(&self, lb: &str) -> anyhow::Result<()> {
        let current = self.load()?.state.params.lb;
        if current != lb {
            eprintln!("switching lab `{}` from {current} to {lb} …", self.name);
            lab::set_lb(&self.name, lb)?;
            let loaded = self.load()?;
            lab::wait_for_fibs(&loaded.topology, &loaded.dir, Duration::from_secs(20));
        }
        Ok(())
    }

    /// Removes a lab built for the experiment (unless kept), or puts an existing lab back on
    /// the algorithm it ran before.
    fn close(self) -> anyhow::Result<()> {
        if self.built && !self.keep {
            return lab::down_quiet(&self.name);
        }
        if !self.built {
            let current = self.load()?.state.params.lb;
            if current != self.original_lb {
                eprintln!("putting lab `{}` back on {}", self.name, self.original_lb);
                lab::set_lb(&self.name, &self.original_lb)?;
            }
        }
        Ok(())
    }
}
