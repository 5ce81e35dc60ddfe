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
//! [`report::table`](crate::report::table) shows per candidate the median over the
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
use ofan_lab::netns::Namespaces;

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
    /// Real interfaces to forward between instead of the run's namespaces: `(in, out)` in this
    /// network namespace, the traffic from an outside generator ([`Ports`]).
    pub ports: Option<Ports>,
}

/// The DUT's two interfaces of a run on real ports (`--ports IN,OUT`): no namespaces, generator
/// or sink are made; the traffic comes from outside into `input`, the candidates forward it out
/// of `output`, and the rates are the interfaces' own counters (and the switch's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ports {
    /// Where the traffic comes in.
    pub input: String,
    /// Where it leaves.
    pub output: String,
}

impl Ports {
    /// Parses `IN,OUT`.
    ///
    /// # Errors
    /// Not two distinct interface names.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let Some((input, output)) = text.split_once(',') else {
            bail!("--ports {text}: give two interfaces, IN,OUT");
        };
        let valid = |name: &str| !name.is_empty() && name.len() < 16 && !name.contains(['/', ' ']);
        if !valid(input) || !valid(output) {
            bail!("--ports {text}: interface names are 1 to 15 characters, no '/' or space");
        }
        if input == output {
            bail!("--ports {text}: the traffic must leave by another interface than it came in");
        }
        Ok(Self {
            input: input.to_owned(),
            output: output.to_owned(),
        })
    }

    /// Fails unless both interfaces exist in this network namespace.
    ///
    /// # Errors
    /// The first one missing, by name.
    pub fn check_present(&self) -> anyhow::Result<()> {
        for name in [&self.input, &self.output] {
            if !Path::new("/sys/class/net").join(name).exists() {
                bail!(
                    "--ports: no interface `{name}` in this network namespace (ip link shows \
                     what there is)"
                );
            }
        }
        Ok(())
    }
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
            if self.generator == GenKind::Afxdp {
                bail!("--rate needs --gen live (or auto, which then sends live frames only)");
            }
        }
        if self.candidates.is_empty() {
            bail!("--candidates is empty");
        }
        let max = ofan_dataplane::afxdp::MAX_QUEUES;
        if !(1..=max).contains(&self.queues) {
            bail!("--queues {}: 1 to {max}", self.queues);
        }
        if self.queues > 1 && self.generator == GenKind::Live && self.ports.is_none() {
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
        if self.ports.is_some() && self.rate_mpps.is_some() {
            bail!(
                "--rate paces the run's own generator: with --ports the traffic comes from outside"
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
             candidates, CPU {gen} for redirect and xdp)",
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
    /// The run's namespaces, or none on real ports (the candidates run here).
    namespaces: Option<&'a Namespaces>,
    /// The DUT's interfaces: traffic in, traffic out.
    dut_ports: (&'a str, &'a str),
    /// The ofan-switch binary.
    switch: &'a Path,
    /// The run's scratch directory (logs, the switch's configuration and admin sockets).
    dir: &'a Path,
}

impl Setup<'_> {
    /// `program` where the DUT runs (the run's `dut` namespace, or here on real ports), as a
    /// child of the run ([`process::child`]).
    fn dut_command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match self.namespaces {
            Some(namespaces) => process::child(namespaces, "dut", self.options.nice, program),
            None => process::child_here(self.options.nice, program),
        }
    }
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
    if let Some(ports) = &options.ports {
        ports.check_present()?;
    }
    if !ofan_lab::is_root() {
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

    let load_before;
    if let Some(ports) = &options.ports {
        // Real ports: the candidates run here, the traffic is the user's.
        load_before = load_average();
        observer.started(options, load_before);
        let setup = Setup {
            options,
            namespaces: None,
            dut_ports: (&ports.input, &ports.output),
            switch: &switch,
            dir: &dir,
        };
        let mut rounds = rounds::Rounds::on_ports(&setup);
        rounds.run(&mut rows, observer)?;
        rounds.finish()?;
    } else {
        let mut namespaces = Namespaces::new(format!("ofan-bench-{pid}"));
        let fabric = fabric::build(&mut namespaces, options.queues)?;
        load_before = load_average();
        observer.started(options, load_before);
        let setup = Setup {
            options,
            namespaces: Some(&namespaces),
            dut_ports: ("p0", "p1"),
            switch: &switch,
            dir: &dir,
        };
        let mut rounds = rounds::Rounds::start(&setup, &fabric)?;
        rounds.run(&mut rows, observer)?;
        rounds.finish()?;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_two_distinct_interface_names() {
        let ports = Ports::parse("eth1,eth2").unwrap();
        assert_eq!(
            (ports.input.as_str(), ports.output.as_str()),
            ("eth1", "eth2")
        );
        for (text, says) in [
            ("eth1", "two interfaces"),
            ("eth1,eth1", "another interface"),
            (",eth2", "1 to 15 characters"),
            ("eth1,a-name-far-too-long", "1 to 15 characters"),
            ("eth1,a/b", "no '/'"),
        ] {
            let error = Ports::parse(text).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
        let missing = Ports::parse("ofan-nosuch0,lo").unwrap().check_present();
        assert!(missing
            .unwrap_err()
            .to_string()
            .contains("no interface `ofan-nosuch0`"));
    }

    #[test]
    fn options_refuse_what_a_run_cannot_do() {
        let base = Options {
            rounds: 1,
            measurement: Duration::from_secs(1),
            warmup: Duration::ZERO,
            candidates: vec![Candidate::Ofan, Candidate::Bare],
            frame_size: 64,
            flows: 256,
            generator: GenKind::Live,
            rate_mpps: None,
            gen_cpu: 0,
            dut_cpu: 0,
            ofan_lab: PathBuf::from("ofan-lab"),
            switch: None,
            nice: 0,
            hugepages: 0,
            queues: 1,
            ports: None,
        };
        let refused = |options: Options, says: &str| {
            let error = options.validate().unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        };
        refused(base.clone(), "must differ");
        let ok = Options { dut_cpu: 1, ..base };
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            ok.validate().unwrap();
        }
        refused(
            Options {
                queues: 2,
                ..ok.clone()
            },
            "needs --gen afxdp",
        );
        refused(
            Options {
                queues: 9,
                ..ok.clone()
            },
            "1 to 8",
        );
        refused(
            Options {
                rate_mpps: Some(1.0),
                ports: Some(Ports::parse("a,b").unwrap()),
                ..ok.clone()
            },
            "comes from outside",
        );
        // On given ports the queues are the NIC's (RSS spreads the outside traffic): no
        // generator of the run's to spread them.
        if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
            Options {
                queues: 4,
                ports: Some(Ports::parse("a,b").unwrap()),
                ..ok.clone()
            }
            .validate()
            .unwrap();
        }
    }
}
