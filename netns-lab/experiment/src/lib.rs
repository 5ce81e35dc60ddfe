//! Experiments on a lab: `ofan-lab run` (one collective, one algorithm, repeated) and
//! `ofan-lab compare` (a grid of algorithms × host load balancing × message sizes), reporting
//! the collective completion time (CCT) against the topology's lower bound, queues per stage,
//! utilization, drops, exactly-once delivery and emulation fidelity — all measured on the real
//! data path: the agents' reports and the switches' own telemetry.
//!
//! The API: a [`LabSession`] opens (or builds) the lab, an [`Experiment`] runs [`Cell`]s on it
//! and returns the [`summary::Summarized`] results, reporting progress to an [`Observer`].
//!
//! Layers:
//! - [`metrics`] (pure): one repetition's report from agent reports and switch snapshots.
//! - [`summary`] (pure): mean ± SEM over repetitions, the growth-exponent fit, the table.
//! - [`kernel`]: the namespaces' kernel loss counters (parsing pure, reading in the namespace).
//! - [`runner`] (I/O): reset and snapshot switches, start and wait for the agents.
//! - [`stalls`]: how quiet the machine is — a probe of every CPU before a measurement
//!   (`bench stalls`, `bench lab`), and a watch during each repetition for the stalls the
//!   guest's scheduler did not see (the report's `machine` record).
//! - [`output`] (I/O): results directory, JSON, CSV, SVG plots.

#![forbid(unsafe_code)]

pub mod chaos;
pub mod interrupt;
pub mod kernel;
pub mod metrics;
pub mod output;
pub mod progress;
pub mod runner;
pub mod stalls;
pub mod starvation;
pub mod summary;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use metrics::{LabSetup, RunReport};
use ofan_lab::{self as lab, LabSpec, Loaded, Shaping, TopologySource};
use ofan_lab_agent::collective::{self, Collective, Plan};
pub use runner::AgentMode;
use runner::AgentOptions;
use summary::{Summarized, Variant};

/// Default SCHED_FIFO priority of the agents' senders: above the switches' workers
/// ([`lab::DEFAULT_SWITCH_RT_PRIORITY`], 20) and a switch group's pool
/// ([`lab::spec::GROUP_RT_PRIORITY`], 40), below the kernel's `ksoftirqd` while labs run (45,
/// [`lab::softirq`]). An agent is the host's NIC: its departures must be on time, a switch's
/// late wake-up is measured by its shaper. With agents below the switches, sixteen agents on 2
/// vCPUs were late by 0.2–0.8 ms at the median and lost 3–5 % of their rate; at 30, below the
/// group's pool, a k = 4 permutation at 5 Mbit/s had agents late by 0.3–1.1 ms p99 and at
/// 0.94–0.98 of their rate (0 of 3 runs faithful); at 42, 75–437 µs and 0.986–0.998 (2 of 3).
pub const AGENT_RT_PRIORITY: u8 = 42;

/// How long agents spin before each departure by default, µs: none when they catch up (a
/// wake-up 40–70 µs late on a VM is made up within the next gap, and spinning at a real-time
/// priority above the switches takes the CPU they need: at 10 Mbit/s, MTU 1500, the shapers'
/// p99 lateness fell from 0.37–0.75 to 0.15–0.32 packet times without it, and 11 of 25 runs
/// were faithful instead of 6), 20 when strict (each late wake-up would be lost).
#[must_use]
pub const fn default_agent_spin_us(catch_up: bool) -> u64 {
    if catch_up {
        0
    } else {
        20
    }
}

/// The longest a repetition waits for a BGP fabric to be the plan again before it starts
/// (sessions re-established and routes re-learnt take a few seconds with the lab's timers).
pub const CONVERGE_BEFORE_REPETITION: Duration = Duration::from_secs(30);
/// How long every switch's routes must have been still before a repetition starts under BGP
/// ([`lab::Loaded::settle`]): late changes of a recovery came up to 1.5 s after the plan's routes
/// were back (measured beside two busy loops); twice that.
pub const ROUTES_STILL_BEFORE_REPETITION: Duration = Duration::from_secs(3);
/// A wait for BGP before a repetition longer than this is noted to the user.
const CONVERGE_NOTED: Duration = Duration::from_millis(500);

/// What an experiment tells its user while it runs: the lab's steps and notes, and one call
/// per finished repetition.
pub trait Observer: lab::Observer {
    /// Repetition `done` of `total` finished, `elapsed` after the experiment started.
    fn repetition(
        &mut self,
        _done: usize,
        _total: usize,
        _elapsed: Duration,
        _variant: &Variant,
        _report: &RunReport,
    ) {
    }
}

impl Observer for lab::Quiet {}

/// Where the experiment runs: an existing lab, or one built for it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabChoice {
    /// Lab to run on; if it does not exist, one is built (a fat tree of radix `k`) and removed
    /// afterwards unless `keep`.
    pub name: String,
    /// Radix of the fat tree to build (default 4); an existing lab must have it.
    pub k: Option<u16>,
    /// Link rate of a lab built for the run, bits per second (`None`: the default for its size,
    /// [`lab::default_link_rate_bps`]).
    pub link_rate_bps: Option<u64>,
    /// Egress buffer per switch port of a lab built for the run, bytes.
    pub buffer_bytes: u64,
    /// Keep a lab built for the run.
    pub keep: bool,
    /// Shapers of a lab built for the run.
    pub shaping: Shaping,
}

/// How fast every source sends, as a fraction ρ of the link rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// This ρ, in (0, 1].
    Fixed(f64),
    /// Per repetition, ρ_max of its traffic matrix under the lab's current failures (paper
    /// §6.2): the largest rate at which every flow fits when each switch splits evenly over its
    /// valid up ports ([`ofan_topology::Topology::rho_max`]).
    RhoMax,
}

impl std::str::FromStr for Load {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        if text == "rho-max" {
            return Ok(Self::RhoMax);
        }
        match text.parse::<f64>() {
            Ok(rho) if rho > 0.0 && rho <= 1.0 => Ok(Self::Fixed(rho)),
            _ => Err(format!("`{text}` is neither a load in (0, 1] nor rho-max")),
        }
    }
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fixed(rho) => write!(f, "{rho}"),
            Self::RhoMax => f.write_str("rho-max"),
        }
    }
}

/// Traffic and agent settings of every repetition.
#[derive(Debug, Clone, PartialEq)]
pub struct Traffic {
    /// ρ: every source sends at ρ × link rate.
    pub load: Load,
    /// Repetitions per cell (each with its own permutation seed).
    pub repeat: u32,
    /// Seed of the first repetition's permutation.
    pub seed: u64,
    /// UDP payload of a full DATA packet (`None`: fills the lab's MTU).
    pub payload: Option<u32>,
    /// SCHED_FIFO priority of the agents' sender threads (0 = ordinary scheduling).
    pub agent_rt_priority: u8,
    /// Agents make up for late sends (up to half a wire time each, as the shapers of a lab do).
    pub agent_catch_up: bool,
    /// Agents spin this many µs before each departure.
    pub agent_spin_us: u64,
    /// One shared agent process for every host, or one per host.
    pub agents: AgentMode,
    /// Watch the machine for stalls during each repetition of a group lab (the `machine`
    /// record).
    pub stall_watch: bool,
    /// One fault injected into every repetition (`--chaos SEED`), see [`chaos`].
    pub chaos: Option<chaos::Chaos>,
    /// The rate the hosts send at on a lab whose switches do not shape (`--link-rate 0`);
    /// `None` on a shaped lab, whose link rate the hosts use.
    pub host_rate_bps: Option<u64>,
    /// How multi-plane hosts spread their packets over their planes (ignored on a lab of one
    /// plane).
    pub host_planes: ofan_dataplane::lb::planes::PlanePolicy,
}

impl Default for Traffic {
    fn default() -> Self {
        Self {
            load: Load::Fixed(1.0),
            repeat: 1,
            seed: 1,
            payload: None,
            agent_rt_priority: AGENT_RT_PRIORITY,
            agent_catch_up: true,
            agent_spin_us: default_agent_spin_us(true),
            agents: AgentMode::Shared,
            stall_watch: true,
            chaos: None,
            host_rate_bps: None,
            host_planes: ofan_dataplane::lb::planes::PlanePolicy::default(),
        }
    }
}

/// One cell of a grid: a variant at a message size.
#[derive(Debug, Clone)]
pub struct Cell {
    /// Switch algorithm and host load balancing.
    pub variant: Variant,
    /// Message size per flow.
    pub bytes: u64,
}

/// The cells of a grid, variants on the same switch algorithm back to back (fewer restarts).
#[must_use]
pub fn grid(variants: &[Variant], sizes: &[u64]) -> Vec<Cell> {
    let mut cells = Vec::new();
    for variant in variants {
        for &bytes in sizes {
            cells.push(Cell {
                variant: variant.clone(),
                bytes,
            });
        }
    }
    cells.sort_by(|a, b| a.variant.lb.cmp(&b.variant.lb));
    cells
}

/// Everything an experiment needs to run its cells.
#[derive(Debug)]
pub struct Experiment {
    /// The collective of every repetition.
    pub collective: Collective,
    /// Traffic settings.
    pub traffic: Traffic,
    /// The results directory.
    pub out: PathBuf,
    /// `run` or `compare` (in the results file).
    pub command: &'static str,
}

impl Experiment {
    /// An experiment writing to `out` (default: `./ofan-results/<command>-<time>`).
    ///
    /// # Errors
    /// The clock is before 1970.
    pub fn new(
        collective: Collective,
        traffic: Traffic,
        out: Option<PathBuf>,
        command: &'static str,
    ) -> anyhow::Result<Self> {
        let out = match out {
            Some(out) => out,
            None => results_dir(command)?,
        };
        Ok(Self {
            collective,
            traffic,
            out,
            command,
        })
    }

    /// Runs the cells, then closes the session whatever happened (a lab built for the
    /// experiment is removed also after an error).
    ///
    /// # Errors
    /// Bad traffic settings, a lab that cannot be changed, a repetition that fails.
    pub fn execute_and_close(
        &self,
        session: LabSession,
        cells: &[Cell],
        observer: &mut dyn Observer,
    ) -> anyhow::Result<Summarized> {
        let result = self.execute(&session, cells, observer);
        let closed = session.close(observer);
        let results = result?;
        closed?;
        Ok(results)
    }

    /// Runs every cell `--repeat` times on the lab and writes the results.
    fn execute(
        &self,
        session: &LabSession,
        cells: &[Cell],
        observer: &mut dyn Observer,
    ) -> anyhow::Result<Summarized> {
        let traffic = &self.traffic;
        if let Load::Fixed(rho) = traffic.load {
            if !(rho > 0.0 && rho <= 1.0) {
                bail!("--load {rho}: must be in (0, 1]");
            }
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
        let link_rate_bps = match (lab.state.params.link_rate_bps, traffic.host_rate_bps) {
            (0, Some(rate)) if rate > 0 => rate,
            (0, _) => bail!(
                "lab `{}` does not shape its links (--link-rate 0{}): give --host-rate RATE, the \
                 rate its hosts send at (the switches forward as fast as the machine can; the \
                 CCT's lower bound takes links of that rate)",
                lab.state.name,
                if lab.state.params.fast_path == ofan_dataplane::afxdp::FastPathMode::Off {
                    ""
                } else {
                    ", --fast-path xdp"
                }
            ),
            (rate, None) => rate,
            (rate, Some(_)) => bail!(
                "--host-rate is for labs that do not shape their links; lab `{}` emulates \
                 {} links, and its hosts send at that rate",
                lab.state.name,
                ofan_topology::units::format_rate(rate)
            ),
        };
        let chaos = traffic
            .chaos
            .as_ref()
            .map(|chaos| chaos_for_lab(chaos, &lab))
            .transpose()?;
        let options = AgentOptions {
            rt_priority: traffic.agent_rt_priority,
            catch_up: traffic.agent_catch_up,
            spin_us: traffic.agent_spin_us,
            agents: traffic.agents,
            stall_watch: traffic.stall_watch,
            entropies: 64,
            port: 7000,
            host_planes: traffic.host_planes,
        };
        if lab.state.params.ecn_threshold.is_none() {
            let marked = cells
                .iter()
                .map(|cell| cell.variant.cc.name())
                .find(|cc| matches!(*cc, "dctcp" | "nscc"));
            if let Some(cc) = marked {
                observer.note(&format!(
                    "lab `{}` marks no ECN (up --ecn-threshold off, or built before ECN marking): \
                     {cc} sees no CE mark, only {}",
                    lab.state.name,
                    if cc == "dctcp" {
                        "losses"
                    } else {
                        "delays and losses"
                    }
                ));
            }
        }
        let total = cells.len() * traffic.repeat as usize;
        let started = Instant::now();
        let mut reports: Vec<RunReport> = Vec::with_capacity(total);
        let mut done = 0usize;
        for cell in cells {
            session.ensure_lb(&cell.variant.lb, observer)?;
            let mut lab = session.load()?;
            for repetition in 0..traffic.repeat {
                interrupt::check()?;
                if traffic.chaos.is_some() && repetition > 0 {
                    // The last fault restarted processes and rewrote the state.
                    lab = session.load()?;
                }
                let seed = traffic.seed + u64::from(repetition);
                let plan = self.plan(&lab, cell.bytes, seed)?;
                let load = match traffic.load {
                    Load::Fixed(rho) => rho,
                    Load::RhoMax => metrics::rho_max(&lab.topology, &lab.routing_failures(), &plan)
                        .map_err(anyhow::Error::msg)?,
                };
                let setup = LabSetup {
                    lab: lab.state.name.clone(),
                    collective: self.collective.name().to_owned(),
                    lb: lab::lb_map::label(&cell.variant.lb, &lab.state.params.lb_map),
                    arf_combine: lab.state.params.arf_combine,
                    host_lb: cell.variant.host_lb_name().to_owned(),
                    message_bytes: cell.bytes,
                    load,
                    link_rate_bps,
                    payload,
                    buffer: lab.state.params.buffer.clone(),
                    catch_up: lab.state.params.catch_up,
                    cc: ofan_lab_agent::cc_config(
                        cell.variant.cc,
                        payload,
                        metrics::base_rtt_ns(&lab.topology, &plan, link_rate_bps, payload)
                            .map_err(anyhow::Error::msg)?,
                        link_rate_bps,
                    ),
                    repetition,
                    seed,
                    slowed_links: lab.slowed_links(),
                };
                let dir = self.out.join("runs").join(format!(
                    "{}-{}-r{repetition}",
                    cell.variant.name().replace('/', "-"),
                    summary::size_label(cell.bytes)
                ));
                // Every repetition starts on the fabric it measures: under BGP, every switch's
                // FIB the plan's again (a session that flapped under the last repetition's load,
                // or its fault, may still be coming back; the repetition would count the routes
                // returning, or run without them).
                let waiting = Instant::now();
                lab.settle(
                    waiting,
                    ROUTES_STILL_BEFORE_REPETITION,
                    waiting + CONVERGE_BEFORE_REPETITION,
                )
                .context("before the repetition")?;
                if waiting.elapsed() > CONVERGE_NOTED {
                    observer.note(&format!(
                        "waited {:.1} s for BGP to bring every switch's routes back to the plan and keep them still",
                        waiting.elapsed().as_secs_f64()
                    ));
                }
                let report =
                    runner::run_repetition(&lab, &plan, setup, &options, &dir, chaos.as_ref())?;
                done += 1;
                observer.repetition(done, total, started.elapsed(), &cell.variant, &report);
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
        let id = (ofan_lab_agent::monotonic_now_ns() as u32) | 1;
        Ok(self.collective.plan(id, hosts, bytes, seed)?)
    }
}

/// `chaos` for `lab`: no kinds named means link flaps and switch kills, and routing-daemon
/// crashes on a BGP lab; a routing restart asked for on another lab is an error.
fn chaos_for_lab(chaos: &chaos::Chaos, lab: &Loaded) -> anyhow::Result<chaos::Chaos> {
    let bgp = lab.state.params.routing == lab::Routing::Bgp.name();
    let mut chaos = chaos.clone();
    if chaos.kinds.is_empty() {
        chaos.kinds = chaos::FaultKind::ALL
            .into_iter()
            .filter(|&kind| bgp || kind != chaos::FaultKind::RoutingRestart)
            .collect();
    } else if chaos.kinds.contains(&chaos::FaultKind::RoutingRestart) && !bgp {
        bail!(
            "--chaos-faults routing-restart needs a BGP lab (up --routing bgp); lab `{}` has --routing {}",
            lab.state.name,
            lab.state.params.routing
        );
    }
    Ok(chaos)
}

/// `./ofan-results/<command>-<time>`.
///
/// # Errors
/// The clock is before 1970.
pub fn results_dir(command: &str) -> anyhow::Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("clock before 1970")?
        .as_secs();
    Ok(PathBuf::from("ofan-results").join(format!("{command}-{}", output::timestamp(now))))
}

/// The lab an experiment runs on; restores or removes it when closed.
#[derive(Debug)]
pub struct LabSession {
    name: String,
    built: bool,
    keep: bool,
    original_lb: String,
    /// The switches that ran another algorithm when the session opened the lab.
    original_map: std::collections::BTreeMap<String, String>,
}

impl LabSession {
    /// Opens lab `options.name`, or builds it.
    ///
    /// # Errors
    /// An existing lab of another radix; a lab that cannot be built.
    pub fn open(options: &LabChoice, observer: &mut dyn Observer) -> anyhow::Result<Self> {
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
                original_map: loaded.state.params.lb_map,
            });
        }
        let k = options.k.unwrap_or(4);
        let topology = TopologySource::Kind(ofan_topology::TopologyKind::FatTree { k });
        let link_rate_bps = match options.link_rate_bps {
            Some(rate) => rate,
            None => topology.default_link_rate_bps()?,
        };
        observer.note(&format!(
            "building lab `{}` (fat tree k={k}, {} links, buffer {}) for this experiment; \
             if it is interrupted, remove it with: ofan-lab down --name {}",
            options.name,
            ofan_topology::units::format_rate(link_rate_bps),
            summary::size_label(options.buffer_bytes),
            options.name
        ));
        let spec = LabSpec {
            topology,
            link_rate_bps,
            buffer_bytes: options.buffer_bytes,
            shaping: options.shaping,
            ..LabSpec::new(&options.name)
        };
        lab::up(&spec, observer)?;
        Ok(Self {
            name: options.name.clone(),
            built: true,
            keep: options.keep,
            original_lb: "pofan".to_owned(),
            original_map: std::collections::BTreeMap::new(),
        })
    }

    /// The algorithm the lab ran when the session opened it.
    #[must_use]
    pub fn original_lb(&self) -> &str {
        &self.original_lb
    }

    /// The lab as it is now.
    ///
    /// # Errors
    /// It is gone.
    pub fn load(&self) -> anyhow::Result<Loaded> {
        lab::load(&self.name)
    }

    /// Switches every switch to `lb` unless the lab already runs it (switches of its lb map,
    /// [`lab::lb_map`], keep theirs then), then waits for the FIBs.
    fn ensure_lb(&self, lb: &str, observer: &mut dyn Observer) -> anyhow::Result<()> {
        let current = self.load()?.state.params.lb;
        if current != lb {
            observer.note(&format!(
                "switching lab `{}` from {current} to {lb} …",
                self.name
            ));
            self.set_lb(lb, observer)?;
            let loaded = self.load()?;
            let wait = Duration::from_secs(20);
            if let Some(warning) = lab::wait_for_fibs(&loaded.topology, &loaded.dir, wait) {
                observer.note(&warning);
            }
        }
        Ok(())
    }

    fn set_lb(&self, lb: &str, observer: &mut dyn Observer) -> anyhow::Result<()> {
        let started = Instant::now();
        let restarted = lab::ops::set_lb(&self.name, lb)?;
        observer.note(&format!(
            "{restarted} switches now run {lb} ({:.1} s, rolling restart)",
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Removes a lab built for the experiment (unless kept), or puts an existing lab back on
    /// the algorithm it ran before.
    fn close(self, observer: &mut dyn Observer) -> anyhow::Result<()> {
        if self.built && !self.keep {
            return lab::down(&self.name).map(drop);
        }
        if !self.built {
            let params = self.load()?.state.params;
            if (&params.lb, &params.lb_map) != (&self.original_lb, &self.original_map) {
                let label = lab::lb_map::label(&self.original_lb, &self.original_map);
                observer.note(&format!("putting lab `{}` back on {label}", self.name));
                lab::ops::set_lbs(&self.name, &self.original_lb, &self.original_map)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Load;

    #[test]
    fn load_is_a_fraction_or_rho_max() {
        assert_eq!("0.8".parse::<Load>(), Ok(Load::Fixed(0.8)));
        assert_eq!("rho-max".parse::<Load>(), Ok(Load::RhoMax));
        for bad in ["0", "1.5", "-1", "max", ""] {
            assert!(bad.parse::<Load>().is_err(), "{bad}");
        }
        assert_eq!(Load::RhoMax.to_string(), "rho-max");
    }
}
