//! `bench forward`: its flags, its progress lines, its table and its JSON file.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use ofan_lab_bench::forward::{self, Candidate, Options, Report};
use ofan_lab_bench::report::{self, Interval, Outcome, Row, Sample};
use serde_json::{json, Value};

use super::agents::GenName;

pub(super) const FORWARD_LONG_ABOUT: &str = "\
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
    /// How the generator sends: XDP live frames in the kernel (`live`), an AF_XDP TX-only
    /// socket in copy mode (`afxdp`, slower), or live frames where the kernel runs them and
    /// the socket where it refuses them (`auto`: old kernels, sandboxes; the run says which).
    #[arg(long = "gen", value_enum, default_value = "auto")]
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
    /// generator spreads its flows over them (not with --gen live: a veth puts a live frame on
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

/// `bench forward`: runs it, printing progress, then the table, and writes the JSON file.
pub(super) fn run_forward(args: &ForwardArgs) -> anyhow::Result<()> {
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
    use ofan_lab_bench::agents::GenKind;

    use super::super::{parse, BenchCommand};
    use super::*;

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
        assert_eq!(
            options.generator,
            GenKind::Auto,
            "live where the kernel allows it"
        );
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
}
