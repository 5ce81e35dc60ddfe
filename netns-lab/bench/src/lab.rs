//! `bench lab`: how fast a lab can run and still be faithful. For each link rate of a list it
//! builds a k-ary fat tree, runs a permutation at load 1 through it (the experiment layer, as
//! `ofan-lab run` does) and reports the run's fidelity — CCT against its lower bound, the agents'
//! achieved rate ratio, the shapers' lateness, the receivers' windows, the verdict — with what
//! the run cost the machine: the CPUs' busy share (`/proc/stat`) and CPU time per forwarded
//! frame (over the switches' `forwarded` counters). The highest rate whose every repetition was
//! faithful is the lab's capacity on this machine.
//!
//! Measure on a quiet machine: everything else running takes CPU from the lab and shows up as
//! lateness. Before each rate's runs, with its lab built and idle, [`stalls::probe`] measures how
//! quiet the machine is (the share of each CPU a spinning thread loses, the longest stall), so
//! a verdict lost to the machine is told apart from one lost to the lab.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;

use ofan_dataplane::lb::Algorithm;
use ofan_topology::TopologyKind;

use ofan_lab::{self as lab, HostLinks, LabSpec, Shaping, Switches, TopologySource};
use ofan_lab_agent::collective::Collective;
use ofan_lab_agent::entropy::HostLb;
use ofan_lab_experiment::stalls::{self, Stalls};
use ofan_lab_experiment::summary::{Summarized, Variant};
use ofan_lab_experiment::Observer;
use ofan_lab_experiment::{Cell, Experiment, LabChoice, LabSession, Traffic};

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Link rates, bit/s, in the order to run them.
    pub rates: Vec<u64>,
    /// Fat-tree radix.
    pub k: u16,
    /// Bytes per flow of the permutation.
    pub bytes: u64,
    /// Switch algorithm.
    pub lb: String,
    /// Repetitions per rate.
    pub repeat: u32,
    /// Seed of the first repetition's permutation.
    pub seed: u64,
    /// Egress buffer per port, bytes.
    pub buffer_bytes: u64,
    /// MTU of every link (the DATA packets fill it).
    pub mtu: u32,
    /// The name of the labs built (one at a time; none may exist already).
    pub name: String,
    /// Where the runs' results directories go (one per rate and mode).
    pub out: PathBuf,
    /// The ways to run the switches, each measured at every rate.
    pub switches: Vec<Switches>,
    /// Whether groups splice their links (`up --splice`).
    pub splice: bool,
    /// What carries the agents' frames in groups (`up --host-links`; processes: the veths).
    pub host_links: HostLinks,
    /// How long to probe the machine's stalls before each rate's runs (zero: not at all).
    pub probe: std::time::Duration,
    /// The agents make up for late sends ([`Traffic::agent_catch_up`]).
    pub agent_catch_up: bool,
    /// The agents spin this long before each departure, µs ([`Traffic::agent_spin_us`]).
    pub agent_spin_us: u64,
    /// Whether the labs may change machine-wide settings (`up --tune-machine`).
    pub tune_machine: bool,
}

/// One rate's measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateRow {
    /// The link rate, bit/s.
    pub rate_bps: u64,
    /// The links' MTU.
    pub mtu: u32,
    /// How the switches ran (`group` or `process`).
    pub switches: &'static str,
    /// Whether the group spliced its links (`up --splice`; never for processes).
    pub splice: bool,
    /// What carried the agents' frames (`up --host-links`: `veth` or `shared`).
    pub host_links: &'static str,
    /// Repetitions.
    pub runs: usize,
    /// Repetitions with every packet delivered exactly once.
    pub exactly_once: usize,
    /// Repetitions judged faithful.
    pub faithful: usize,
    /// Median CCT over its lower bound − 1 (over the exactly-once repetitions): a median, so
    /// that one run the machine stalled does not move the rate's figure.
    pub cct_increase: Option<f64>,
    /// The mean of the same.
    pub cct_increase_mean: Option<f64>,
    /// Whether the median is within [`CCT_TOLERANCE`] of the lowest rate's in the same mode
    /// (the reference: a rate that runs faithfully keeps its CCT).
    pub cct_kept: bool,
    /// This row is that reference (its mode's lowest rate): its CCT is kept by definition,
    /// judged against nothing — a bench of one rate judges no CCT at all.
    pub cct_reference: bool,
    /// Lowest agent rate ratio (achieved / requested) of any repetition.
    pub agent_rate_ratio_min: f64,
    /// Longest time a repetition's slowest agent fell behind its schedule, ms
    /// (`fidelity.slowest_agent_lost_ns`): a few ms in a run that missed its rate is a stall
    /// of the agents' sender, not a rate the lab cannot carry.
    pub agent_lost_ms_max: f64,
    /// Worst shaper lateness p99 of any repetition, packet times.
    pub shaper_late_p99_packet_times: f64,
    /// Smallest receiver-window ratio of any repetition.
    pub receiver_window_ratio_min: f64,
    /// Share of all CPUs busy during the runs (user, system, interrupts), 0–1.
    pub cpu_busy: f64,
    /// Frames the switches forwarded during the runs.
    pub forwarded: u64,
    /// Share of all CPUs the runs' stall watches spun (SCHED_IDLE: time no one else wanted;
    /// counted in `cpu_busy`, not in `cpu_us_per_frame`), 0–1.
    pub watch_busy: f64,
    /// Share of all CPUs a group's pool threads spun to departures nearer than a sleep with
    /// nothing to forward (counted in `cpu_busy` and in the runs' `CPUs full`, not in
    /// `cpu_us_per_frame`), 0–1.
    pub pool_spin: f64,
    /// CPU time (all CPUs, agents and kernel included, the keep-awake threads' and the pool's
    /// spinning not) per forwarded frame, µs.
    pub cpu_us_per_frame: Option<f64>,
    /// Wall time of the runs, s.
    pub seconds: f64,
    /// How quiet the machine was just before the runs (`None`: not probed).
    pub stalls: Option<Stalls>,
    /// The longest stall hidden from the guest's scheduler during any of the runs, ms (their
    /// `machine` records; `None`: none was watched).
    pub run_stall_ms_max: Option<f64>,
    /// The median over the runs of the share of the traffic's 10-ms windows in which the CPUs
    /// had no time to spare (`cpus_full` of their `machine` records), 0–1; `None`: none was
    /// watched. Near 1, the lab needs more CPU than the machine has at this rate (the switches
    /// spinning to departures nearer than a sleep count as busy: a faithful rate can show half
    /// its windows full; `pool_spin` says how much of the CPUs that spinning took).
    pub cpus_full_median: Option<f64>,
}

/// Runs the benchmark: one lab per rate, built, measured and removed in turn.
///
/// # Errors
/// A lab of that name exists already; a lab cannot be built; a run fails.
pub fn run(options: &Options, observer: &mut dyn Observer) -> anyhow::Result<Vec<RateRow>> {
    if options.rates.is_empty() {
        bail!("no link rates to measure");
    }
    if lab::exists(&options.name) {
        bail!(
            "lab `{}` exists: bench lab builds its own labs (remove it, or give --name)",
            options.name
        );
    }
    if options.switches.is_empty() {
        bail!("no switch mode to measure");
    }
    let mut rows = Vec::new();
    for &rate in &options.rates {
        for &switches in &options.switches {
            rows.push(one_rate(options, rate, switches, observer)?);
        }
    }
    judge_cct(&mut rows);
    Ok(rows)
}

/// The span over which the kernel keeps its once-a-second budgets — real-time throttling
/// (`kernel.sched_rt_runtime_us` of every `sched_rt_period_us`) and the fair class's share
/// (its deadline server) — seconds. A run shorter than that can fall between two of their
/// interventions and pass where a longer one at the same rate stops.
pub const KERNEL_BUDGET_PERIOD_S: f64 = 1.0;

/// The rates (bit/s) at which a flow of `bytes` lasts less than [`KERNEL_BUDGET_PERIOD_S`] at
/// the link rate (its payload alone: the run lasts a little longer), with that duration,
/// seconds.
#[must_use]
pub fn sub_second_rates(rates: &[u64], bytes: u64) -> Vec<(u64, f64)> {
    rates
        .iter()
        .map(|&rate| (rate, bytes as f64 * 8.0 / rate as f64))
        .filter(|&(_, seconds)| seconds < KERNEL_BUDGET_PERIOD_S)
        .collect()
}

/// How far a rate's median CCT over the bound may exceed the lowest rate's and still count as
/// kept: one percentage point. A run's own verdict judges the emulation (shapers, agents,
/// windows), not the CCT: a run that lost one frame waits 20–40 s for its retransmission and
/// can still be "faithful".
pub const CCT_TOLERANCE: f64 = 0.01;

/// Sets [`RateRow::cct_kept`]: each mode's rows against that mode's lowest rate.
pub fn judge_cct(rows: &mut [RateRow]) {
    // Each mode's reference: its lowest rate.
    let lowest: Vec<bool> = rows
        .iter()
        .map(|row| {
            rows.iter()
                .filter(|other| other.switches == row.switches)
                .all(|other| other.rate_bps >= row.rate_bps)
        })
        .collect();
    let references: Vec<Option<f64>> = rows
        .iter()
        .map(|row| {
            rows.iter()
                .zip(&lowest)
                .find(|(other, &lowest)| lowest && other.switches == row.switches)
                .and_then(|(other, _)| other.cct_increase)
        })
        .collect();
    for ((row, reference), lowest) in rows.iter_mut().zip(references).zip(lowest) {
        row.cct_reference = lowest;
        row.cct_kept = match (row.cct_increase, reference) {
            (Some(increase), Some(reference)) => increase <= reference + CCT_TOLERANCE,
            _ => false,
        };
    }
}

/// The highest rate whose every repetition was faithful and whose CCT was kept
/// ([`judge_cct`]) with the switches run `switches`, if any.
#[must_use]
pub fn highest_faithful(rows: &[RateRow], switches: Switches) -> Option<u64> {
    rows.iter()
        .filter(|row| row.switches == switches.name())
        .filter(|row| row.runs > 0 && row.faithful == row.runs && row.cct_kept)
        .map(|row| row.rate_bps)
        .max()
}

fn one_rate(
    options: &Options,
    rate: u64,
    switches: Switches,
    observer: &mut dyn Observer,
) -> anyhow::Result<RateRow> {
    let algorithm: Algorithm = options
        .lb
        .parse()
        .map_err(|e| anyhow::anyhow!("--lb {}: {e}", options.lb))?;
    // Built here with the algorithm (so no restart resets the counters), kept by the session
    // until its counters are read, removed below whatever happened.
    let spec = LabSpec {
        topology: TopologySource::Kind(TopologyKind::FatTree { k: options.k }),
        algorithm,
        link_rate_bps: rate,
        buffer_bytes: options.buffer_bytes,
        mtu: options.mtu,
        shaping: Shaping::CatchUp,
        switches,
        splice: options.splice,
        host_links: if switches == Switches::Group {
            options.host_links
        } else {
            HostLinks::Veth
        },
        tune_machine: options.tune_machine,
        ..LabSpec::new(&options.name)
    };
    observer.note(&format!(
        "building lab `{}` at {} (remove it with `ofan-lab down --name {}` if interrupted)",
        options.name,
        ofan_topology::units::format_rate(rate),
        options.name
    ));
    let measured =
        lab::up(&spec, observer).and_then(|_| measure(options, rate, switches, observer));
    let removed = lab::down(&options.name);
    let row = measured?;
    removed.with_context(|| format!("removing lab `{}`", options.name))?;
    Ok(row)
}

fn measure(
    options: &Options,
    rate: u64,
    switches: Switches,
    observer: &mut dyn Observer,
) -> anyhow::Result<RateRow> {
    let choice = LabChoice {
        name: options.name.clone(),
        k: Some(options.k),
        link_rate_bps: Some(rate),
        buffer_bytes: options.buffer_bytes,
        keep: true,
        shaping: Shaping::CatchUp,
    };
    let session = LabSession::open(&choice, observer)?;
    let stalls = probe_stalls(options.probe, observer)?;
    let traffic = Traffic {
        repeat: options.repeat,
        seed: options.seed,
        agent_catch_up: options.agent_catch_up,
        agent_spin_us: options.agent_spin_us,
        ..Traffic::default()
    };
    let out = options.out.join(format!("{rate}bps-{}", switches.name()));
    let experiment = Experiment::new(Collective::Permutation, traffic, Some(out), "bench-lab")?;
    let cells = [Cell {
        variant: Variant::new(&options.lb, HostLb::None)?,
        bytes: options.bytes,
    }];
    let before = Sample::take(&options.name)?;
    let started = Instant::now();
    let results = experiment.execute_and_close(session, &cells, observer)?;
    let seconds = started.elapsed().as_secs_f64();
    let after = Sample::take(&options.name)?;
    Ok(RateRow {
        stalls,
        splice: options.splice && switches == Switches::Group,
        host_links: if switches == Switches::Group {
            options.host_links.name()
        } else {
            HostLinks::Veth.name()
        },
        ..row(
            rate,
            options.mtu,
            switches,
            &results,
            &before,
            &after,
            seconds,
        )
    })
}

/// Probes the machine's stalls for `duration` (none when zero) and says what it saw.
fn probe_stalls(
    duration: std::time::Duration,
    observer: &mut dyn Observer,
) -> anyhow::Result<Option<Stalls>> {
    if duration.is_zero() {
        return Ok(None);
    }
    let stalls = stalls::probe(duration).context("probing the machine's stalls")?;
    observer.note(&format!(
        "machine: the CPUs lost up to {:.2} % of {:.1} s to stalls (longest {:.2} ms){}",
        stalls.worst_lost() * 100.0,
        duration.as_secs_f64(),
        stalls.max_gap_ms(),
        if stalls.quiet() {
            ""
        } else {
            " — not quiet: runs may be judged unfaithful for the machine, not the lab"
        }
    ));
    Ok(Some(stalls))
}

/// CPU times and forwarded frames at one instant.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cpu: CpuTimes,
    /// Nanoseconds the group's pool threads have spun to departures with nothing to forward
    /// (0 for switch processes, which sleep to them).
    pool_spun_ns: u64,
    forwarded: u64,
}

impl Sample {
    fn take(name: &str) -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        let cpu = CpuTimes::parse(&stat).context("no `cpu` line in /proc/stat")?;
        let loaded = lab::load(name)?;
        let mut pids: Vec<u32> = loaded.state.processes.iter().map(|p| p.pid).collect();
        // A group is one process recorded once per member.
        pids.sort_unstable();
        pids.dedup();
        let pool_spun_ns = if loaded.state.params.switches == Switches::Group {
            lab::group::pool(&loaded.dir)
                .context("the lab's switch group")?
                .map_or(0, |pool| pool.spun_ns)
        } else {
            0
        };
        let status = lab::status::gather(&loaded);
        let forwarded = status
            .switches
            .values()
            .filter_map(|switch| switch.stats.as_ref())
            .flat_map(|stats| &stats.data_path.counters)
            .filter(|(counter, _)| counter == "forwarded")
            .map(|(_, value)| value)
            .sum();
        Ok(Self {
            cpu,
            pool_spun_ns,
            forwarded,
        })
    }
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq + steal.
    pub busy: u64,
    /// busy + idle + iowait.
    pub total: u64,
    /// CPUs counted (`cpuN` lines).
    pub cpus: u32,
}

impl CpuTimes {
    /// Parses `/proc/stat`'s text.
    #[must_use]
    pub fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().find(|line| line.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .map_while(|field| field.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal [guest guest_nice: within user]
        let at = |i: usize| ticks.get(i).copied().unwrap_or(0);
        if ticks.len() < 4 {
            return None;
        }
        let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
        let cpus = stat
            .lines()
            .filter(|line| {
                line.strip_prefix("cpu")
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count() as u32;
        Some(Self {
            busy,
            total: busy + at(3) + at(4),
            cpus,
        })
    }
}

/// The share of all CPUs some threads spent spinning: their CPU seconds over the CPU seconds
/// of the runs, at most the busy share left to them (`NaN` or no time: none).
fn spinning_share(spun_seconds: f64, cpu_seconds: f64, busy: f64) -> f64 {
    let share = spun_seconds / cpu_seconds;
    if share.is_finite() {
        share.min(busy)
    } else {
        0.0
    }
}

/// The median and the mean of some values (`None` for none).
fn median_and_mean(values: &[f64]) -> (Option<f64>, Option<f64>) {
    let mean = (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
    (super::report::median(values.iter().copied()), mean)
}

fn row(
    rate: u64,
    mtu: u32,
    switches: Switches,
    results: &Summarized,
    before: &Sample,
    after: &Sample,
    seconds: f64,
) -> RateRow {
    let labs: Vec<_> = results.runs.iter().filter_map(|run| run.lab()).collect();
    let increases: Vec<f64> = results
        .runs
        .iter()
        .filter(|run| run.lab().is_some_and(|lab| lab.delivery.exactly_once))
        .filter_map(|run| run.cct_increase)
        .collect();
    let (cct_increase, cct_increase_mean) = median_and_mean(&increases);
    let fold = |f: fn(&ofan_model::report::Fidelity) -> f64, min: bool| {
        labs.iter()
            .map(|lab| f(&lab.fidelity))
            .fold(None, |acc: Option<f64>, v| {
                Some(acc.map_or(v, |a| if min { a.min(v) } else { a.max(v) }))
            })
            .unwrap_or(f64::NAN)
    };
    let busy = after.cpu.busy.saturating_sub(before.cpu.busy) as f64;
    let total = after.cpu.total.saturating_sub(before.cpu.total) as f64;
    let cpu_busy = if total > 0.0 { busy / total } else { 0.0 };
    let cpus = f64::from(after.cpu.cpus.max(1));
    // The runs' stall watches spun through the idle time (their threads are gone by now:
    // their records say how long they ran).
    let watch_seconds: f64 = labs
        .iter()
        .filter_map(|lab| lab.machine.as_ref())
        .map(|machine| machine.watched * machine.seconds * machine.cpus as f64)
        .sum();
    let watch_busy = spinning_share(watch_seconds, cpus * seconds, cpu_busy);
    // The pool's spinning is its own busy time: what is left after the watches'.
    let pool_spin = spinning_share(
        after.pool_spun_ns.saturating_sub(before.pool_spun_ns) as f64 / 1e9,
        cpus * seconds,
        cpu_busy - watch_busy,
    );
    let forwarded = after.forwarded.saturating_sub(before.forwarded);
    // Busy CPU seconds without the spinning: the share of all CPUs over the wall time.
    let busy_seconds = (cpu_busy - watch_busy - pool_spin) * cpus * seconds;
    RateRow {
        rate_bps: rate,
        mtu,
        switches: switches.name(),
        splice: false,
        host_links: HostLinks::Veth.name(),
        runs: labs.len(),
        exactly_once: labs.iter().filter(|lab| lab.delivery.exactly_once).count(),
        faithful: labs.iter().filter(|lab| lab.fidelity.faithful).count(),
        cct_increase,
        cct_increase_mean,
        cct_kept: false,
        cct_reference: false,
        agent_rate_ratio_min: fold(|f| f.agent_rate_ratio_min, true),
        agent_lost_ms_max: fold(|f| f.slowest_agent_lost_ns as f64 / 1e6, false),
        shaper_late_p99_packet_times: fold(|f| f.shaper_late_p99_packet_times, false),
        receiver_window_ratio_min: fold(|f| f.receiver_window_ratio_min, true),
        cpu_busy,
        watch_busy,
        pool_spin,
        forwarded,
        cpu_us_per_frame: (forwarded > 0).then(|| busy_seconds * 1e6 / forwarded as f64),
        seconds,
        stalls: None,
        run_stall_ms_max: labs
            .iter()
            .filter_map(|lab| lab.machine.as_ref())
            .map(|machine| machine.hidden_ms_max)
            .reduce(f64::max),
        cpus_full_median: super::report::median(
            labs.iter()
                .filter_map(|lab| lab.machine.as_ref()?.cpus_full),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rates_cct_is_the_median_of_its_runs_with_the_mean_beside_it() {
        // One run the machine stalled (+25 %) moves the mean by 7 points, the median not at all.
        let (median, mean) = median_and_mean(&[0.03, 0.25, 0.04]);
        assert_eq!(median, Some(0.04));
        assert!((mean.unwrap() - 0.32 / 3.0).abs() < 1e-12);
        assert_eq!(median_and_mean(&[0.02, 0.04]).0, Some(0.03));
        assert_eq!(median_and_mean(&[]), (None, None));
    }

    #[test]
    fn a_spinning_share_is_of_all_cpus_and_at_most_the_busy_share() {
        // Keep-awake threads and watches ran 5 of the 20 CPU seconds.
        assert!((spinning_share(5.0, 20.0, 0.9) - 0.25).abs() < 1e-12);
        // Never more than the CPUs were busy, and nothing from no time at all.
        assert_eq!(spinning_share(32.0, 20.0, 0.9), 0.9);
        assert_eq!(spinning_share(f64::NAN, 20.0, 0.9), 0.0);
        assert_eq!(spinning_share(0.0, 0.0, 0.9), 0.0);
    }

    #[test]
    fn cpu_per_frame_leaves_out_the_pools_spinning() {
        let sample = |busy, total, pool_s: u64, forwarded| Sample {
            cpu: CpuTimes {
                busy,
                total,
                cpus: 2,
            },
            pool_spun_ns: pool_s * 1_000_000_000,
            forwarded,
        };
        // 10 s on 2 CPUs, 1 000 ticks each: 80 % busy = 16 CPU seconds, of which the pool's
        // spinning 4 (no run watched: no watch spinning), over 1 000 000 frames.
        let before = sample(0, 0, 0, 0);
        let after = sample(1600, 2000, 4, 1_000_000);
        let results = Summarized {
            cells: Vec::new(),
            runs: Vec::new(),
        };
        let row = super::row(
            1_000_000,
            1500,
            Switches::Group,
            &results,
            &before,
            &after,
            10.0,
        );
        assert!((row.cpu_busy - 0.8).abs() < 1e-12, "{row:?}");
        assert_eq!(row.watch_busy, 0.0, "{row:?}");
        assert!((row.pool_spin - 0.2).abs() < 1e-12, "{row:?}");
        // (16 − 4) s over 10⁶ frames.
        let per_frame = row.cpu_us_per_frame.unwrap();
        assert!((per_frame - 12.0).abs() < 1e-9, "{per_frame}");
    }

    #[test]
    fn proc_stat_busy_and_total() {
        let stat = "cpu  100 5 50 1000 20 3 7 2 0 0\ncpu0 50 2 25 500 10 1 3 1 0 0\n\
                    cpu1 50 3 25 500 10 2 4 1 0 0\nintr 12345\nctxt 999\n";
        assert_eq!(
            CpuTimes::parse(stat),
            Some(CpuTimes {
                busy: 100 + 5 + 50 + 3 + 7 + 2,
                total: 167 + 1000 + 20,
                cpus: 2,
            })
        );
        assert_eq!(CpuTimes::parse("intr 1\n"), None);
    }

    /// A row of one run at `rate_bps`, faithful, with its CCT kept.
    fn row(rate_bps: u64, switches: Switches) -> RateRow {
        RateRow {
            rate_bps,
            mtu: 1500,
            switches: switches.name(),
            splice: switches == Switches::Group,
            host_links: "veth",
            runs: 1,
            exactly_once: 1,
            faithful: 1,
            cct_increase: Some(0.05),
            cct_increase_mean: Some(0.05),
            cct_kept: true,
            cct_reference: false,
            agent_rate_ratio_min: 1.0,
            agent_lost_ms_max: 0.0,
            shaper_late_p99_packet_times: 0.1,
            receiver_window_ratio_min: 1.0,
            cpu_busy: 0.5,
            watch_busy: 0.0,
            pool_spin: 0.0,
            forwarded: 10,
            cpu_us_per_frame: Some(1.0),
            seconds: 1.0,
            stalls: None,
            run_stall_ms_max: None,
            cpus_full_median: None,
        }
    }

    #[test]
    fn the_highest_rate_whose_every_run_was_faithful_per_mode() {
        let row = |rate_bps, switches: Switches, faithful| RateRow {
            runs: 2,
            exactly_once: 2,
            faithful,
            ..row(rate_bps, switches)
        };
        let (group, process) = (Switches::Group, Switches::Process);
        let rows = [
            row(1_000_000, group, 2),
            row(1_000_000, process, 2),
            row(5_000_000, group, 2),
            row(5_000_000, process, 1),
            row(10_000_000, group, 1),
        ];
        assert_eq!(highest_faithful(&rows, group), Some(5_000_000));
        assert_eq!(highest_faithful(&rows, process), Some(1_000_000));
        assert_eq!(highest_faithful(&[row(1_000_000, group, 1)], group), None);
        assert_eq!(highest_faithful(&rows[..1], process), None);
    }

    #[test]
    fn runs_shorter_than_the_kernels_budget_period_are_named() {
        const MBIT: u64 = 1_000_000;
        // 1 MB: 8 s at 1 Mbit/s, 0.4 s at 20.
        let short = sub_second_rates(&[MBIT, 8 * MBIT, 20 * MBIT], 1_000_000);
        assert_eq!(short, [(20 * MBIT, 0.4)]);
        assert!(sub_second_rates(&[20 * MBIT], 4_000_000).is_empty());
    }

    #[test]
    fn a_faithful_rate_must_also_keep_the_lowest_rates_cct() {
        let row = |rate_bps, switches: Switches, increase: Option<f64>| RateRow {
            exactly_once: usize::from(increase.is_some()),
            cct_increase: increase,
            cct_kept: false,
            ..row(rate_bps, switches)
        };
        let (group, process) = (Switches::Group, Switches::Process);
        // Listed out of order: the reference is each mode's lowest rate, not the first row.
        let mut rows = [
            row(5_000_000, group, Some(0.021)),
            row(1_000_000, group, Some(0.012)),
            row(10_000_000, group, Some(0.023)),
            row(1_000_000, process, Some(0.03)),
            row(5_000_000, process, Some(0.035)),
            row(10_000_000, process, None),
        ];
        judge_cct(&mut rows);
        let kept: Vec<bool> = rows.iter().map(|row| row.cct_kept).collect();
        assert_eq!(kept, [true, true, false, true, true, false]);
        let references: Vec<bool> = rows.iter().map(|row| row.cct_reference).collect();
        assert_eq!(references, [false, true, false, true, false, false]);
        assert_eq!(highest_faithful(&rows, group), Some(5_000_000));
        assert_eq!(highest_faithful(&rows, process), Some(5_000_000));
    }
}
