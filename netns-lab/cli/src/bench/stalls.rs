//! `bench stalls`: its flags and its table, and the length of a stall probe (`bench lab`'s
//! `--probe` too).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use ofan_lab_experiment::stalls;

pub(super) const STALLS_LONG_ABOUT: &str = "\
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

/// Seconds of a stall probe, 0 to 60.
pub(super) fn probe_duration(seconds: f64) -> anyhow::Result<Duration> {
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

/// `bench stalls`: probes every CPU, prints a line per CPU and the verdict.
pub(super) fn run_stalls(args: &StallsArgs) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
