//! The candidates in the `dut` namespace: starting each one until it forwards, asking it what it
//! counted, stopping it — and what testpmd needs first (the binary, DPDK's AF_XDP PMD,
//! hugepages).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use ofan_control::admin::Client;

use super::{Candidate, Options, Setup};
use crate::process::{pause, Agent, Daemon};

/// A running candidate in the dut namespace.
pub(super) enum Dut {
    Switch { daemon: Daemon, socket: PathBuf },
    Testpmd(Daemon),
    Redirect(Agent),
}

impl Dut {
    /// Starts `candidate` for round `round` and waits until it is ready to forward.
    ///
    /// # Errors
    /// When it cannot start or does not come up in time (10 s; testpmd 20 s).
    pub(super) fn start(
        setup: &Setup<'_>,
        candidate: Candidate,
        round: usize,
    ) -> anyhow::Result<Self> {
        let options = setup.options;
        let label = format!("{}-{round}", candidate.name());
        let (input, output) = setup.dut_ports;
        match candidate {
            Candidate::Ofan | Candidate::Xdp | Candidate::Bare => {
                let config = setup.dir.join("switch.toml");
                std::fs::write(&config, format!("[xdp]\ncpus = [{}]\n", options.dut_cpu))
                    .context("writing switch.toml")?;
                let socket = setup.dir.join(format!("{label}.sock"));
                let mut command = setup.dut_command(setup.switch);
                // The run's own veths allow only copy mode; on given ports (a NIC, usually)
                // zero-copy where the driver offers it, as a switch there would run.
                let xdp_mode = if options.ports.is_some() {
                    "auto"
                } else {
                    "copy"
                };
                // The fast path forwards in the XDP program, on the CPU that receives: its
                // workers only see what it leaves them, so they sleep until then.
                let poll = if candidate == Candidate::Xdp {
                    "wakeup"
                } else {
                    "busy"
                };
                command
                    .arg("--config")
                    .arg(&config)
                    .args(["--port", &format!("{input}:host")])
                    .args(["--port", &format!("{output}:host"), "--poll", poll])
                    .args(["--queues", &options.queues.to_string()])
                    .args(["--xdp-mode", xdp_mode, "--log", "warn", "--admin-socket"])
                    .arg(&socket);
                match candidate {
                    Candidate::Bare => {
                        command.arg("--bare");
                    }
                    Candidate::Xdp => {
                        command.args(["--lb", "pofan", "--fast-path", "xdp"]);
                    }
                    _ => {
                        command.args(["--lb", "pofan"]);
                    }
                }
                let mut daemon = Daemon::spawn(&label, command, setup.dir)?;
                let deadline = Instant::now() + Duration::from_secs(10);
                while std::os::unix::net::UnixStream::connect(&socket).is_err() {
                    daemon.check_running()?;
                    if Instant::now() > deadline {
                        bail!("ofan-switch did not come up:\n{}", daemon.log_tail());
                    }
                    pause(Duration::from_millis(50))?;
                }
                Ok(Self::Switch { daemon, socket })
            }
            Candidate::Testpmd => {
                let lcores = format!("{},{}", options.gen_cpu, options.dut_cpu);
                let prefix = format!("ofan-bench-{}", std::process::id());
                // The AF_XDP PMD loads its XDP program through libxdp, which wants a bpffs: mount
                // one in a private mount namespace (it vanishes with the process).
                // Likewise a hugetlbfs for the EAL.
                let huge = setup.dir.join("hugepages");
                std::fs::create_dir_all(&huge).context("hugetlbfs mount point")?;
                let huge = huge.display();
                let script = format!(
                    "mount -t bpf bpf /sys/fs/bpf 2>/dev/null; \
                     mount -t hugetlbfs nodev {huge} || exit 1; \
                     exec dpdk-testpmd -l {lcores} --main-lcore {gen} -n 1 --no-pci \
                     --huge-dir {huge} --file-prefix {prefix} \
                     --vdev net_af_xdp0,iface={input},start_queue=0,queue_count={queues} \
                     --vdev net_af_xdp1,iface={output},start_queue=0,queue_count={queues} \
                     -- --forward-mode=io --nb-cores=1 --rxq={queues} --txq={queues} --stats-period 1",
                    gen = options.gen_cpu,
                    queues = options.queues,
                );
                // A mount namespace of its own for those mounts (`ip netns exec` makes one too;
                // on real ports nothing else would keep them off the machine).
                let mut command = setup.dut_command("unshare");
                command.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
                let mut daemon = Daemon::spawn(&label, command, setup.dir)?;
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
                Ok(Self::Testpmd(daemon))
            }
            Candidate::Redirect => {
                let mut command = setup.dut_command(&options.ofan_lab);
                command.args(["bench", "redirect", "--from", input, "--to", output]);
                Ok(Self::Redirect(Agent::start(&label, command, setup.dir)?))
            }
        }
    }

    /// What the candidate itself counts, if it counts (an ofan-switch).
    pub(super) fn counters(&mut self, ports: (&str, &str)) -> anyhow::Result<Option<DutCounters>> {
        let Self::Switch { daemon, socket } = self else {
            return Ok(None);
        };
        daemon.check_running()?;
        let stats = Client::new(socket.as_path())
            .stats()
            .context("ofan-switch stats")?;
        let port = |name: &str| stats.data_path.ports.iter().find(|port| port.name == name);
        let sent = port(ports.1).map_or(0, |port| port.tx_packets);
        // With several queues: what each queue of p0 received and each of p1 sent.
        let received_by_queue = port(ports.0)
            .map(|port| port.queues.iter().map(|q| q.rx_packets).collect())
            .unwrap_or_default();
        let sent_by_queue = port(ports.1)
            .map(|port| port.queues.iter().map(|q| q.tx_packets).collect())
            .unwrap_or_default();
        let faults = stats
            .data_path
            .counters
            .iter()
            .chain(&stats.steering)
            .filter(|(name, _)| name.starts_with("drop_"))
            .cloned()
            .collect();
        Ok(Some(DutCounters {
            sent,
            received_by_queue,
            sent_by_queue,
            faults,
            unresolved: stats.fib.unresolved,
            unresolved_for_ms: stats.fib.unresolved_for_ms,
        }))
    }

    /// Fails if the candidate's process has exited.
    pub(super) fn check_running(&mut self) -> anyhow::Result<()> {
        match self {
            Self::Switch { daemon, .. } | Self::Testpmd(daemon) => daemon.check_running(),
            Self::Redirect(_) => Ok(()),
        }
    }

    /// Stops the candidate; returns the end of its log (or the redirect agent's `done` line).
    pub(super) fn stop(self) -> anyhow::Result<String> {
        match self {
            Self::Switch { daemon, .. } | Self::Testpmd(daemon) => Ok(daemon.stop()),
            Self::Redirect(agent) => agent.finish(),
        }
    }
}

/// What an ofan-switch candidate counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct DutCounters {
    /// Frames sent out of the DUT's output port (p1).
    pub sent: u64,
    /// With several queues: frames received on each queue of p0 (its workers' share).
    pub received_by_queue: Vec<u64>,
    /// With several queues: frames sent on each queue of p1.
    pub sent_by_queue: Vec<u64>,
    /// Its drop counters (`drop_*`: the data path's and the XDP program's), by name. The
    /// generator sends well-formed UDP frames to a routed address, so every one of them counts
    /// a fault — a frame the switch should have forwarded — not a frame it had no room for
    /// (those are its ports' buffer drops and its sockets' ring drops).
    pub faults: Vec<(String, u64)>,
    /// Next hops without a MAC address (`10.0.1.2 on p1`).
    pub unresolved: Vec<String>,
    /// How long the oldest of them has been unresolved.
    pub unresolved_for_ms: Option<u64>,
}

impl DutCounters {
    /// The fault counters that grew since `before`, with how much, largest first.
    pub fn faults_since(&self, before: &Self) -> Vec<(String, u64)> {
        let mut grown: Vec<(String, u64)> = self
            .faults
            .iter()
            .map(|(name, value)| {
                let old = before
                    .faults
                    .iter()
                    .find(|(other, _)| other == name)
                    .map_or(0, |(_, old)| *old);
                (name.clone(), value.saturating_sub(old))
            })
            .filter(|(_, grown)| *grown > 0)
            .collect();
        grown.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        grown
    }

    /// What the switch says about frames it did not forward, in a sentence (empty when it has
    /// nothing to say): the fault counters that grew since `before`, and its unresolved next
    /// hops.
    pub fn diagnosis(&self, before: &Self) -> String {
        let mut parts = Vec::new();
        let grown = self.faults_since(before);
        if !grown.is_empty() {
            let list: Vec<String> = grown.iter().map(|(n, v)| format!("{n}={v}")).collect();
            parts.push(format!("the switch dropped {}", list.join(" ")));
        }
        if !self.unresolved.is_empty() {
            parts.push(format!(
                "its next hop{} {} {} unresolved{}",
                if self.unresolved.len() == 1 { "" } else { "s" },
                self.unresolved.join(", "),
                if self.unresolved.len() == 1 {
                    "is"
                } else {
                    "are"
                },
                self.unresolved_for_ms
                    .map(|ms| format!(" (for {:.1} s)", ms as f64 / 1000.0))
                    .unwrap_or_default()
            ));
        }
        parts.join("; ")
    }
}

/// The `ofan-switch` to measure: `--switch`, else the one next to `ofan-lab`, else on PATH.
///
/// # Errors
/// When there is none.
pub(super) fn find_switch(options: &Options) -> anyhow::Result<PathBuf> {
    if let Some(path) = &options.switch {
        return Ok(path.clone());
    }
    let sibling = options.ofan_lab.with_file_name("ofan-switch");
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

/// Readies testpmd: its binary and AF_XDP PMD are installed, and at least `pages` hugepages
/// exist (the guard, if any, gives the ones added back). The reason when testpmd cannot run.
pub(super) fn prepare_testpmd(pages: u32) -> Result<Option<Hugepages>, String> {
    testpmd_available()?;
    Hugepages::ensure(pages).map_err(|error| format!("hugepages: {error:#}"))
}

/// A one-line reason from an error with a log tail: DPDK's `Cause:` line if there is one,
/// else the first line.
pub(super) fn reason_of(text: &str) -> String {
    text.lines()
        .find_map(|line| line.trim().strip_prefix("Cause: "))
        .or_else(|| text.lines().next())
        .unwrap_or_default()
        .to_owned()
}

/// Sets `vm.nr_hugepages` to at least `pages` and restores the old value on drop.
#[derive(Debug)]
pub(super) struct Hugepages {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_prefer_dpdks_cause_line() {
        assert_eq!(
            reason_of(
                "testpmd-0 exited (1):\nEAL: Error - exiting with code: 1\n  Cause: No hugepages\n"
            ),
            "No hugepages"
        );
        assert_eq!(reason_of("did not come up\nlog"), "did not come up");
        assert_eq!(reason_of(""), "");
    }
}
