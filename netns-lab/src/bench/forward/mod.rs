//! `bench forward`: Mpps through one forwarding core, candidate against candidate.
//!
//! ```text
//!  ns gen                 ns dut                      ns sink
//!  eth0 ──── veth ──── p0 [candidate] p1 ──── veth ──── eth0
//!  bench gen (XDP live     forwards p0 → p1             bench sink (XDP ofan_sink:
//!  frames, gen_cpu)        on dut_cpu                   count per CPU, drop)
//! ```
//!
//! One measurement: start the candidate, start the generator, wait until the sink's count moves,
//! warm up, read the sink (and the generator, and the candidate's own counters) before and
//! after the measured time, stop both. Rounds interleave the candidates (ofan, bare, testpmd,
//! redirect, ofan, …); the [`Report`] holds every sample, and
//! [`report::table`](crate::bench::report::table) shows per candidate the median over the
//! rounds.
//!
//! [`run`] takes typed [`Options`] and tells an [`Observer`] what happens while it runs; it
//! prints nothing. Its parts, one job each: `fabric` (the namespaces and veths), `candidates`
//! (starting, reading and stopping each candidate; testpmd's prerequisites), `rounds` (the
//! rounds and one measurement).

mod candidates;
mod fabric;
mod rounds;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};

use super::agents::GenKind;
use super::process;
use super::report::{Outcome, Row, Sample};
use crate::netns::Namespaces;

/// What `bench forward` can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidate {
    /// ofan-switch with pOfan, L3 lookup and the egress queue.
    Ofan,
    /// ofan-switch --fast-path xdp: pOfan and the L3 lookup in the XDP program.
    Xdp,
    /// ofan-switch --bare (port 2i ↔ 2i+1, no lookup).
    Bare,
    /// dpdk-testpmd io forwarding with the AF_XDP PMD.
    Testpmd,
    /// XDP_REDIRECT through a devmap.
    Redirect,
}

impl Candidate {
    /// The candidates that are ofan-switch forwarding by lookup: what `--check` holds against
    /// `bare`.
    pub const SWITCHES: &'static [Candidate] = &[Self::Ofan, Self::Xdp];

    /// Its short name (the table's and the JSON's).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ofan => "ofan",
            Self::Xdp => "xdp",
            Self::Bare => "bare",
            Self::Testpmd => "testpmd",
            Self::Redirect => "redirect",
        }
    }

    /// What it is, in a few words.
    #[must_use]
    pub const fn description(self) -> &'static str {
        match self {
            Self::Ofan => "ofan-switch (pofan + L3 lookup + egress queue)",
            Self::Xdp => "ofan-switch --fast-path xdp (pofan + L3 lookup in XDP)",
            Self::Bare => "ofan-switch --bare (port to port)",
            Self::Testpmd => "dpdk-testpmd io, AF_XDP PMD",
            Self::Redirect => "XDP_REDIRECT devmap (ceiling)",
        }
    }
}

/// What `bench forward` measures, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Rounds; each round measures every candidate once.
    pub rounds: usize,
    /// Time measured per measurement (0 to 600 s).
    pub measurement: Duration,
    /// Traffic before each measurement starts (up to 60 s).
    pub warmup: Duration,
    /// The candidates, in the first round's order (round r begins with candidate r mod n).
    pub candidates: Vec<Candidate>,
    /// Frame size on the wire, FCS included.
    pub frame_size: u32,
    /// Flows (UDP source ports) the generator cycles through.
    pub flows: u32,
    /// How the generator sends.
    pub generator: GenKind,
    /// Offered load in million frames per second ([`GenKind::Live`] only); `None`: as much as
    /// the generator's CPU can send.
    pub rate_mpps: Option<f64>,
    /// CPU of the generator's sending thread.
    pub gen_cpu: usize,
    /// CPU of the forwarding worker (ofan-switch xdp.cpus, testpmd's forwarding lcore).
    pub dut_cpu: usize,
    /// The `ofan-lab` binary whose `bench gen|sink|redirect` run inside the namespaces.
    pub ofan_lab: PathBuf,
    /// The ofan-switch binary; `None`: the one next to `ofan_lab`, else on PATH.
    pub switch: Option<PathBuf>,
    /// Nice value of the generator, the sink and the candidates (and of their session's
    /// autogroup).
    pub nice: i32,
    /// Hugepages (2 MB) to make available for testpmd (restored afterwards).
    pub hugepages: u32,
    /// Queues of the DUT's veths, all served by the candidates; the generator spreads its
    /// flows over them ([`GenKind::Afxdp`] only).
    pub queues: u32,
}

impl Options {
    /// Checks what the types do not.
    ///
    /// # Errors
    /// The first option out of range, named by its `ofan-lab bench forward` flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.rounds == 0 {
            bail!("--runs must be at least 1");
        }
        let measurement_ok =
            !self.measurement.is_zero() && self.measurement <= Duration::from_secs(600);
        if !measurement_ok || self.warmup > Duration::from_secs(60) {
            bail!("--seconds must be in (0, 600] and --warmup in [0, 60]");
        }
        if let Some(rate) = self.rate_mpps {
            if !(rate.is_finite() && rate > 0.0) {
                bail!("--rate must be a positive number of Mpps");
            }
            if self.generator != GenKind::Live {
                bail!("--rate needs --gen live");
            }
        }
        if self.candidates.is_empty() {
            bail!("--candidates is empty");
        }
        let max = ofan_dataplane::afxdp::MAX_QUEUES;
        if !(1..=max).contains(&self.queues) {
            bail!("--queues {}: 1 to {max}", self.queues);
        }
        if self.queues > 1 && self.generator != GenKind::Afxdp {
            bail!(
                "--queues {} needs --gen afxdp: a veth puts a live frame on the RX queue of the CPU \
                 that sends it, so one live generator fills one queue",
                self.queues
            );
        }
        if self.queues > self.flows {
            bail!(
                "--queues {} is more than --flows {}",
                self.queues,
                self.flows
            );
        }
        if self.gen_cpu == self.dut_cpu {
            bail!(
                "--gen-cpu and --dut-cpu must differ (the generator would steal the worker's core)"
            );
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        if self.gen_cpu.max(self.dut_cpu) >= cpus {
            bail!("--gen-cpu/--dut-cpu must be below the {cpus} CPUs of this machine");
        }
        Ok(())
    }

    /// Where the work runs, in a sentence (the run's header and the JSON's `placement`).
    #[must_use]
    pub fn placement(&self) -> String {
        format!(
            "generator thread on CPU {gen}; forwarding worker (ofan-switch xdp.cpus, testpmd \
             forwarding lcore) on CPU {dut}. Kernel work runs in softirq on the CPU that transmits: \
             dut p0's XDP (steering into the AF_XDP socket, or the redirect) on CPU {gen} with the \
             generator, the sink's XDP on the CPU that sends out of p1 (CPU {dut} for the AF_XDP \
             candidates, CPU {gen} for redirect)",
            gen = self.gen_cpu,
            dut = self.dut_cpu
        )
    }
}

/// What a run tells its user while it works. The CLI prints it; others may ignore it.
pub trait Observer {
    /// The namespaces are up and the first round begins; `load_average` is the machine's
    /// 1-minute load average, if readable.
    fn started(&mut self, _options: &Options, _load_average: Option<f64>) {}
    /// `candidate` was measured in `round` (0-based).
    fn measured(&mut self, _round: usize, _candidate: Candidate, _sample: &Sample) {}
    /// `candidate` failed and is left out of the remaining rounds (testpmd only: ofan's own
    /// candidates failing end the run).
    fn unavailable(&mut self, _candidate: Candidate, _error: &anyhow::Error) {}
}

/// An [`Observer`] that ignores everything.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl Observer for Quiet {}

/// The machine a run measured on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// When the run ended, UTC, `YYYY-MM-DDThh:mm:ssZ` (empty if unknown).
    pub date: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name.
    pub cpu: String,
    /// CPUs available to the run.
    pub cpus: usize,
}

impl Machine {
    /// Reads the date, the kernel release and the CPU model (empty where unreadable).
    #[must_use]
    pub fn read() -> Self {
        let date = Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_owned();
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
            .unwrap_or_default();
        Self {
            date,
            kernel,
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// What was asked for.
    pub options: Options,
    /// Where.
    pub machine: Machine,
    /// The 1-minute load average before the first and after the last measurement.
    pub load_average: [Option<f64>; 2],
    /// One row per candidate, in the order asked for.
    pub rows: Vec<Row>,
}

/// What every process of a run needs.
struct Setup<'a> {
    options: &'a Options,
    namespaces: &'a Namespaces,
    /// The ofan-switch binary.
    switch: &'a Path,
    /// The run's scratch directory (logs, the switch's configuration and admin sockets).
    dir: &'a Path,
}

/// Runs `bench forward`: builds the namespaces `ofan-bench-<pid>-gen|dut|sink`, measures every
/// candidate in every round, and takes everything away again (also on an error, a panic, or
/// SIGINT/SIGTERM, which end the run at the next step).
///
/// # Errors
/// When the options are invalid, this process is not root, the namespaces cannot be built, or
/// one of ofan's own candidates (or the redirect) fails.
pub fn run(options: &Options, observer: &mut impl Observer) -> anyhow::Result<Report> {
    options.validate()?;
    if !crate::lab::is_root() {
        bail!("bench forward needs root (namespaces, XDP, AF_XDP)");
    }
    process::catch_interrupts()?;
    let switch = candidates::find_switch(options)?;
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("ofan-bench-{pid}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _dir_guard = RemoveDir(dir.clone());

    let mut rows: Vec<(Candidate, Outcome)> = options
        .candidates
        .iter()
        .map(|&c| (c, Outcome::Measured(Vec::new())))
        .collect();
    let mut _hugepages = None;
    if let Some((_, outcome)) = rows.iter_mut().find(|(c, _)| *c == Candidate::Testpmd) {
        match candidates::prepare_testpmd(options.hugepages) {
            Ok(guard) => _hugepages = guard,
            Err(reason) => *outcome = Outcome::Unavailable(reason),
        }
    }

    let mut namespaces = Namespaces::new(format!("ofan-bench-{pid}"));
    let fabric = fabric::build(&mut namespaces, options.queues)?;
    let load_before = load_average();
    observer.started(options, load_before);
    let setup = Setup {
        options,
        namespaces: &namespaces,
        switch: &switch,
        dir: &dir,
    };
    let mut rounds = rounds::Rounds::start(&setup, &fabric)?;
    rounds.run(&mut rows, observer)?;
    rounds.finish()?;
    Ok(Report {
        options: options.clone(),
        machine: Machine::read(),
        load_average: [load_before, load_average()],
        rows: rows
            .into_iter()
            .map(|(candidate, outcome)| Row {
                name: candidate.name(),
                description: candidate.description(),
                outcome,
            })
            .collect(),
    })
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

/// Removes the run's scratch directory (logs, configuration) and DPDK's runtime directory of
/// this run on drop.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/ofan-bench-{}", std::process::id()));
    }
}
