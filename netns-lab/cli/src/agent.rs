//! `ofan-lab agent`: run one host agent from its flags, or its helpers (`plan`, `clock`, `cct`).
//! Flags are checked and turned into an [`AgentConfig`] here; the agent itself is
//! [`ofan_lab_agent::traffic`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use ofan_lab::{ops::open_namespace, TopologySource};
use ofan_lab_agent::collective::{self, Plan, PlanHost};
use ofan_lab_agent::traffic::{self, AgentConfig};
use ofan_lab_agent::{monotonic_now_ns, report, wire, write_atomically};

use super::units::{parse_duration, parse_rate, parse_size};
use super::{CollectiveName, CollectiveOptions, HostLbArg};

const AGENT_ABOUT: &str = "\
Host traffic agent: sends this host's flows of a collective plan at ρ × link rate and ACKs \
every DATA packet it receives (one per lab host namespace); `agent plan` writes plans.";

const AGENT_LONG_ABOUT: &str = "\
Host traffic agent. Runs inside one host namespace, with the same --plan and --start-at as \
every other host's agent — or, with several --host, as the agent of all those hosts in one \
process (a shared agent: one sender thread paces every host's departures, one receiver thread \
serves every host's socket; with --lab, each host's sockets are created in its lab namespace \
while the process stays in the root namespace; reports go to --out-dir). The lab's runner \
starts one shared agent by default (ofan-lab run --agents shared|per-host).

At --start-at (CLOCK_MONOTONIC ns, shared by all namespaces) it sends the plan's flows whose \
source is this host: UDP DATA packets of --payload bytes (18-byte header + padding), ECT(0), \
round-robin over its flows, each departure one wire time (frame + 20 B gap at --load × \
--link-rate) after the previous one, and when late it continues from now, never bursting. It \
answers every DATA packet with one 64-byte ACK echoing CE and the copy it answers. A packet \
not ACKed within its retransmission timeout (RFC 6298 from the echoed round trips, never \
below --max-round-trip) is sent again before new ones: selective repeat, no congestion \
control. It completes when its flows are all ACKed and its incoming flows all received, then \
keeps answering (--linger, or until --stop-file exists) and writes a JSON report (--out): \
per-flow first send, last ACK and retransmissions, duplicates and missing packets per source, \
pacing accuracy, the recovery's round-trip estimate. The run's CCT = max(last_ack_ns) − \
min(first_send_ns) over all agents' reports.

Host-side load balancing (--host-lb) picks the UDP source port (the entropy the switches' ecmp \
hashes): none = one port per flow, spray = a random port per packet, reps = reuse the ports of \
ACKs that came back without CE, else a fresh random one (REPS, Bonato et al.).

See docs/agent.md for the packet, plan and report formats.";

const AGENT_EXAMPLES: &str = "\
Examples:
  # a plan for a k=4 fat tree: a random permutation of 1 MB messages
  ofan-lab agent plan permutation --topo fat-tree --k 4 --size 1MB --seed 7 --out plan.json
  # in every host namespace, the same start time (now + 2 s):
  START=$(ofan-lab agent clock --plus 2s)
  ip netns exec ofan-lab-h-p0-e0-h0 ofan-lab agent --plan plan.json --start-at $START \\
      --link-rate 20mbit --load 1.0 --host-lb spray --out h-p0-e0-h0.json
  # or one process for hosts of lab `lab` (sockets in their namespaces), reports in out/:
  ofan-lab agent --plan plan.json --lab lab --host h-p0-e0-h0 --host h-p0-e0-h1 \\
      --start-at $START --link-rate 20mbit --out-dir out";

/// Agent subcommands (flattened into `ofan-lab`'s commands).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    #[command(about = AGENT_ABOUT, long_about = AGENT_LONG_ABOUT, after_help = AGENT_EXAMPLES)]
    Agent(AgentArgs),
}

/// `ofan-lab agent`: run an agent, or one of its helpers.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    helper: Option<Helper>,
    #[command(flatten)]
    run: RunArgs,
}

/// Helpers for starting agents by hand.
#[derive(Debug, clap::Subcommand)]
enum Helper {
    /// Write a collective plan: the JSON file every agent of a run reads.
    Plan(PlanArgs),
    /// Print CLOCK_MONOTONIC (plus an offset) in ns: a --start-at for agents started by hand.
    Clock {
        /// Offset to add (e.g. 2s, 500ms).
        #[arg(long, value_name = "DURATION", default_value = "0s")]
        plus: String,
    },
    /// Print the collective completion time of a run from all its agents' reports:
    /// max(last_ack_ns) − min(first_send_ns).
    Cct {
        /// Every agent's --out file.
        #[arg(required = true, value_name = "REPORT")]
        reports: Vec<PathBuf>,
    },
}

/// Running the agent.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The plan of the run (JSON: collective id, hosts, flows; see `ofan-lab agent plan`).
    #[arg(long, value_name = "FILE", required = true)]
    plan: Option<PathBuf>,
    /// This host's name in the plan (default: the plan host whose address is configured in
    /// this namespace). Repeat it to run several hosts in this one process (a shared agent:
    /// one sender and one receiver thread for all of them; needs --out-dir).
    #[arg(long, value_name = "NAME")]
    host: Vec<String>,
    /// Create each host's sockets in its namespace of this lab (`ofan-lab-<lab>-<host>`-style,
    /// as `ofan-lab up --name` made them) instead of the current one; the process itself stays
    /// where it was started. Needs root.
    #[arg(long, value_name = "NAME")]
    lab: Option<String>,
    /// The k-th --host starts k × this many ns after --start-at (spreads the hosts' departures
    /// so that they do not all fall due at the same instant).
    #[arg(long, value_name = "NS", default_value_t = 0)]
    stagger_ns: u64,
    /// When the first packet is due: CLOCK_MONOTONIC nanoseconds (all namespaces share that
    /// clock; see `ofan-lab agent clock`), or +DURATION from now (e.g. +2s).
    #[arg(long, value_name = "NS|+DURATION", required = true)]
    start_at: Option<String>,
    /// Link rate R of the host's link (e.g. 20mbit, 1gbit, 50000000).
    #[arg(long, value_name = "RATE", required = true)]
    link_rate: Option<String>,
    /// ρ: send at ρ × R, in (0, 1].
    #[arg(long, value_name = "RHO", default_value_t = 1.0)]
    load: f64,
    /// UDP payload of a full DATA packet, 18-byte header included; 1472 fills a 1500-byte MTU.
    /// Every agent of a run needs the same value.
    #[arg(long, value_name = "BYTES", default_value_t = 1472)]
    payload: u32,
    /// Host-side load balancing: the entropy (UDP source port) of each DATA packet.
    #[arg(long, value_enum, default_value = "none")]
    host_lb: HostLbArg,
    /// Multi-plane hosts (a plan whose hosts have an address per plane): how each host spreads
    /// its packets over its planes — plane-hash (one plane per flow), plane-spray (per packet,
    /// round robin), plane-arf (per packet, weighted by the CE marks and losses each plane's
    /// ACKs report and, with --topology, by the path quality the edges notify), entropy (per
    /// packet, a set of entropy values per plane: a loss retires one, a mark skips its turn).
    /// The model's policies (docs/model.md, "Multi-plane fabrics").
    #[arg(long, value_name = "POLICY", default_value = "plane-spray")]
    host_planes: String,
    /// With --host-planes plane-arf: the lab's topology file, whose edge switches pass their
    /// adaptive-routing notifications on to the hosts (`ofan-switch --arf-notify-hosts`): each
    /// host listens on --arf-port on each plane's address and steers by what its edges tell
    /// (docs/adaptive-routing.md, "Multi-plane fabrics in the lab"). Without it, plane-arf
    /// steers by ECN and losses alone.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// The switches' notification port (adaptive_routing.port).
    #[arg(long, value_name = "PORT", default_value_t = traffic::endpoint::DEFAULT_PORT)]
    arf_port: u16,
    /// How the edge switches combine a path's local and remote levels (their --arf-combine).
    #[arg(long, value_name = "RULE", default_value = "min")]
    arf_combine: ofan_dataplane::arf::Combine,
    /// Source ports in the pool for spray and reps (none uses one per flow).
    #[arg(long, value_name = "N", default_value_t = 64)]
    entropies: u16,
    /// Seed of the entropy choices (mixed with the host index).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// UDP port every agent of the run receives DATA and ACKs on.
    #[arg(long, default_value_t = 7000)]
    port: u16,
    /// Give up this many seconds after --start-at (the report says timed_out).
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    timeout: f64,
    /// Spin this many µs before each departure instead of sleeping (precision vs. CPU).
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
    /// After a late send, shorten the next gap by the lateness (at most half a wire time), as
    /// Linux sch_fq does: keeps the average rate under scheduling jitter, but allows gaps down to
    /// half a wire time. Default: continue from now at ρ × R, losing the time.
    #[arg(long)]
    catch_up: bool,
    /// Run the sender thread SCHED_FIFO at this priority (1..=99; 0 = off), the receiver one
    /// below: a departure then preempts ordinary tasks (and the receiver) the moment it is due,
    /// and arrivals are read and ACKed while real-time switches forward. Needs root.
    #[arg(long, value_name = "PRIO", default_value_t = 0)]
    rt_priority: u8,
    /// Where to write the JSON report (one host).
    #[arg(long, value_name = "FILE", required_unless_present = "out_dir")]
    out: Option<PathBuf>,
    /// Write each host's report to DIR/<host>.json and create DIR/<host>.done the moment the
    /// host completes (instead of --out and --done-file; needed with several --host).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "done_file"])]
    out_dir: Option<PathBuf>,
    /// After completing, keep answering DATA with ACKs (a peer whose last ACK was lost
    /// retransmits) until no frame has arrived for this long — or, with --stop-file, until that
    /// file exists. The report is written at exit.
    #[arg(long, value_name = "DURATION", default_value = "500ms")]
    linger: String,
    /// The longest round trip a packet and its ACK can take without being lost (every queue on
    /// the path full): retransmission timers never fire sooner, so a network that loses
    /// nothing sees no retransmission (the lab's runner passes its fabric's; 0: timers from the
    /// frame time alone, 16 frame times at least).
    #[arg(long, value_name = "DURATION", default_value = "0s")]
    max_round_trip: String,
    /// Congestion control of every flow: none (the pacer alone), dctcp (RFC 8257: ECN
    /// fraction), nscc (Ultra Ethernet NSCC: ECN and delay), mswift (Swift's delay target on
    /// the median of recent RTTs). With one, a packet sent a smoothed RTT before one already
    /// ACKed is resent at once, and the timers wait four unloaded round trips, not
    /// --max-round-trip. Needs --base-rtt.
    #[arg(long, value_name = "CCA", default_value = "none")]
    cc: String,
    /// The unloaded round trip of the longest path (a full DATA frame there store-and-forward,
    /// its ACK back): what the congestion control scales its window and delay target to
    /// (`ofan-lab run` passes its fabric's).
    #[arg(long, value_name = "DURATION")]
    base_rtt: Option<String>,
    /// Create this file the moment the agent completes (the lab's runner waits for every
    /// agent's before it stops them all).
    #[arg(long, value_name = "FILE")]
    done_file: Option<PathBuf>,
    /// Linger after completing until this file exists (instead of --linger's quiet time), so
    /// that no peer is left retransmitting to a closed port.
    #[arg(long, value_name = "FILE")]
    stop_file: Option<PathBuf>,
    /// Send and receive through each host's shared-memory link to its edge switch,
    /// DIR/<host>.link (made by `ofan-switch group --host-links DIR`), instead of the host's
    /// UDP sockets: the agent writes whole frames (Ethernet, IPv4, UDP) the switch reads as
    /// received on the host's port, and reads the datagrams the switch sends to --port.
    #[arg(long, value_name = "DIR")]
    host_links: Option<PathBuf>,
}

/// `ofan-lab agent plan`.
#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// The collective.
    #[arg(value_enum)]
    collective: CollectiveName,
    /// Hosts from a topology: fat-tree, leaf-spine, or a topology file (ofan-lab topo --out).
    #[arg(
        long,
        value_name = "fat-tree|leaf-spine|FILE",
        default_value = "fat-tree"
    )]
    topo: String,
    /// Radix for fat-tree and leaf-spine.
    #[arg(long, default_value_t = 4)]
    k: u16,
    /// Hosts from a file instead, one `NAME ADDRESS` per line.
    #[arg(long, value_name = "FILE", conflicts_with = "topo")]
    hosts: Option<PathBuf>,
    /// Message size per flow (e.g. 1MB = 2^20 bytes, 64KB, 1500).
    #[arg(long, value_name = "BYTES", default_value = "1MB")]
    size: String,
    /// Seed of the permutation (the same seed gives the model's permutation).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    shape: CollectiveOptions,
    /// Collective id carried in every packet (use a fresh one per run).
    #[arg(long, value_name = "ID", default_value_t = 1)]
    collective_id: u32,
    /// Output file (default: stdout).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs an agent subcommand.
///
/// # Errors
/// Bad arguments, unreadable files, socket failures.
pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Agent(args) = command;
    match args.helper {
        Some(Helper::Plan(plan)) => write_plan(&plan),
        Some(Helper::Clock { plus }) => {
            let plus = parse_duration(&plus)?;
            println!("{}", monotonic_now_ns() + plus.as_nanos() as u64);
            Ok(())
        }
        Some(Helper::Cct { reports }) => print_cct(&reports),
        None => run_agent(&args.run),
    }
}

fn print_cct(paths: &[PathBuf]) -> anyhow::Result<()> {
    let reports = paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{}: not an agent report", path.display()))
        })
        .collect::<anyhow::Result<Vec<report::AgentReport>>>()?;
    let complete = reports.iter().all(|r| r.complete);
    let missing: u64 = reports
        .iter()
        .flat_map(|r| &r.received)
        .map(|s| s.missing)
        .sum();
    let duplicates: u64 = reports
        .iter()
        .flat_map(|r| &r.received)
        .map(|s| s.duplicates)
        .sum();
    let ce: u64 = reports
        .iter()
        .flat_map(|r| &r.flows)
        .map(|f| f.ce_marks)
        .sum();
    let cct = report::collective_cct_ns(&reports);
    println!(
        "agents={} complete={complete} cct_ns={} missing={missing} duplicates={duplicates} ce_marks={ce}",
        reports.len(),
        cct.map_or_else(|| "none".to_owned(), |c| c.to_string()),
    );
    if !complete {
        bail!("not every agent completed");
    }
    Ok(())
}

fn run_agent(args: &RunArgs) -> anyhow::Result<()> {
    let plan_path = args.plan.as_deref().context("--plan is required")?;
    let text = std::fs::read_to_string(plan_path)
        .with_context(|| format!("--plan {}", plan_path.display()))?;
    let plan = Plan::from_json(&text).with_context(|| format!("--plan {}", plan_path.display()))?;
    let hosts: Vec<u32> = if args.host.is_empty() {
        if args.lab.is_some() {
            bail!("--lab needs --host (which hosts of the lab)");
        }
        vec![traffic::local_host(&plan)?]
    } else {
        args.host
            .iter()
            .map(|name| {
                plan.host_index(name)
                    .with_context(|| format!("--host {name}: not a host of the plan"))
            })
            .collect::<anyhow::Result<_>>()?
    };
    let mut sorted = hosts.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() < hosts.len() {
        bail!("a --host is given twice");
    }
    // Where each host's report goes.
    let outs: Vec<PathBuf> = match (&args.out, &args.out_dir) {
        (Some(out), None) if hosts.len() == 1 => vec![out.clone()],
        (Some(_), None) => bail!("several --host need --out-dir (one report per host)"),
        (None, Some(dir)) => hosts
            .iter()
            .map(|&host| dir.join(format!("{}.json", plan.hosts[host as usize].name)))
            .collect(),
        _ => bail!("--out or --out-dir is required"),
    };
    let start_at = args.start_at.as_deref().context("--start-at is required")?;
    let start_at_ns = match start_at.strip_prefix('+') {
        Some(offset) => monotonic_now_ns() + parse_duration(offset)?.as_nanos() as u64,
        None => start_at
            .parse()
            .with_context(|| format!("--start-at `{start_at}`: not ns or +DURATION"))?,
    };
    let link_rate = args
        .link_rate
        .as_deref()
        .context("--link-rate is required")?;
    let link_rate_bps = parse_rate(link_rate)?;
    if link_rate_bps == 0 {
        bail!("--link-rate must be positive (the agent paces at ρ × it)");
    }
    if !(args.load > 0.0 && args.load <= 1.0) {
        bail!("--load {}: must be in (0, 1]", args.load);
    }
    // Frames of at most 128 bytes are ACKs to the switches: full DATA frames must be larger.
    let min_payload = 128 - wire::frame_bytes(0) + 1;
    if !(min_payload..=65_507).contains(&u64::from(args.payload)) {
        bail!(
            "--payload {}: must be in {min_payload}..=65507 (DATA frames above the 128-byte ACK class)",
            args.payload
        );
    }
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        bail!("--timeout {}: must be positive", args.timeout);
    }
    if args.entropies == 0 {
        bail!("--entropies must be at least 1");
    }
    let cc = congestion_control(args, link_rate_bps)?;
    let host_planes: ofan_dataplane::lb::planes::PlanePolicy = args
        .host_planes
        .parse()
        .map_err(|e| anyhow::anyhow!("--host-planes: {e}"))?;
    let topology = match (&args.topology, host_planes) {
        (Some(path), ofan_dataplane::lb::planes::PlanePolicy::PlaneArf) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--topology {}", path.display()))?;
            Some(
                ofan_topology::Topology::from_json(&text)
                    .with_context(|| format!("--topology {}", path.display()))?,
            )
        }
        _ => None,
    };
    let config = AgentConfig {
        plan,
        host: hosts[0],
        start_at_ns,
        link_rate_bps,
        load: args.load,
        payload: args.payload,
        host_lb: args.host_lb.into(),
        host_planes,
        entropies: args.entropies,
        seed: args.seed,
        port: args.port,
        timeout: Duration::from_secs_f64(args.timeout),
        spin_ns: args.spin_us.saturating_mul(1000),
        catch_up: args.catch_up,
        realtime: (args.rt_priority > 0).then_some(i32::from(args.rt_priority.min(99))),
        linger: match &args.stop_file {
            Some(path) => traffic::Linger::UntilFile(path.clone()),
            None => traffic::Linger::Quiet(
                parse_duration(&args.linger)
                    .with_context(|| format!("--linger {}", args.linger))?,
            ),
        },
        done_file: args.done_file.clone(),
        max_round_trip_ns: u64::try_from(
            parse_duration(&args.max_round_trip)
                .with_context(|| format!("--max-round-trip {}", args.max_round_trip))?
                .as_nanos(),
        )
        .unwrap_or(u64::MAX),
        cc,
        host_link: None,
        endpoint: None,
    };
    let configs: Vec<AgentConfig> = hosts
        .iter()
        .enumerate()
        .map(|(k, &host)| {
            let name = &config.plan.hosts[host as usize].name;
            AgentConfig {
                host,
                start_at_ns: start_at_ns + k as u64 * args.stagger_ns,
                done_file: match &args.out_dir {
                    Some(dir) => Some(dir.join(format!("{name}.done"))),
                    None => config.done_file.clone(),
                },
                host_link: args
                    .host_links
                    .as_ref()
                    .map(|dir| dir.join(format!("{name}.link"))),
                endpoint: topology.as_ref().and_then(|topology| {
                    traffic::endpoint::EndpointConfig::from_topology(
                        topology,
                        host,
                        args.arf_port,
                        args.arf_combine,
                    )
                }),
                ..config.clone()
            }
        })
        .collect();
    let namespaces = configs
        .iter()
        .map(|config| {
            let name = &config.plan.hosts[config.host as usize].name;
            args.lab
                .as_deref()
                .map(|lab| {
                    open_namespace(lab, name)
                        .with_context(|| format!("--lab {lab}: the namespace of host {name}"))
                })
                .transpose()
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let reports = traffic::run_agents(&configs, &namespaces)?;

    let mut incomplete = Vec::new();
    for (report, out) in reports.iter().zip(&outs) {
        write_atomically(out, &serde_json::to_string_pretty(report)?)?;
        let sent: u64 = report.flows.iter().map(|f| u64::from(f.packets)).sum();
        let acked: u64 = report.flows.iter().map(|f| u64::from(f.acks)).sum();
        let received: u64 = report.received.iter().map(|r| r.packets).sum();
        let duplicates: u64 = report.received.iter().map(|r| r.duplicates).sum();
        let missing: u64 = report.received.iter().map(|r| r.missing).sum();
        println!(
            "host={} complete={} packets={} acked={} received={} duplicates={} missing={} \
             requested_bps={:.0} achieved_bps={:.0} late_p50_ns={} late_p99_ns={} cct_ns={}",
            report.host,
            report.complete,
            sent,
            acked,
            received,
            duplicates,
            missing,
            report.pacing.requested_bps,
            report.pacing.achieved_bps.unwrap_or(0.0),
            report.pacing.late_p50_ns,
            report.pacing.late_p99_ns,
            report
                .own_cct_ns()
                .map_or_else(|| "none".to_owned(), |c| c.to_string()),
        );
        if !report.complete {
            incomplete.push(format!(
                "{}: {} (report written to {})",
                report.host,
                if report.timed_out {
                    "timed out"
                } else {
                    "stopped"
                },
                out.display()
            ));
        }
    }
    if !incomplete.is_empty() {
        bail!("incomplete: {}", incomplete.join("; "));
    }
    Ok(())
}

fn write_plan(args: &PlanArgs) -> anyhow::Result<()> {
    let hosts = match &args.hosts {
        Some(path) => read_hosts(path)?,
        None => collective::topology_hosts(&TopologySource::parse(&args.topo, args.k).load()?),
    };
    let bytes = parse_size(&args.size)?;
    let id = args.collective_id;
    let collective = args.shape.collective(args.collective)?;
    let plan = collective.plan(id, hosts, bytes, args.seed)?;
    let json = plan.to_json();
    eprintln!(
        "plan: collective {}, {} hosts, {} flows, {} bytes",
        plan.collective,
        plan.hosts.len(),
        plan.flows.len(),
        plan.total_bytes()
    );
    match &args.out {
        Some(path) => write_atomically(path, &json),
        None => {
            println!("{json}");
            Ok(())
        }
    }
}

/// Reads `NAME ADDRESS` lines (blank lines and `#` comments skipped).
fn read_hosts(path: &Path) -> anyhow::Result<Vec<PlanHost>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--hosts {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let line = line.split('#').next().unwrap_or("").trim();
            (!line.is_empty()).then_some((n + 1, line))
        })
        .map(|(n, line)| {
            let mut fields = line.split_whitespace();
            match (fields.next(), fields.next(), fields.next()) {
                (Some(name), Some(address), None) => Ok(PlanHost {
                    name: name.to_owned(),
                    planes: Vec::new(),
                    address: address.parse().with_context(|| {
                        format!(
                            "--hosts {} line {n}: `{address}` is not an IPv4 address",
                            path.display()
                        )
                    })?,
                }),
                _ => bail!(
                    "--hosts {} line {n}: expected `NAME ADDRESS`",
                    path.display()
                ),
            }
        })
        .collect()
}

/// `--cc` and `--base-rtt`: one configuration for every flow, in ns (`None` for none).
fn congestion_control(
    args: &RunArgs,
    link_rate_bps: u64,
) -> anyhow::Result<Option<ofan_transport::CcConfig>> {
    let kind: ofan_transport::CcKind = args.cc.parse().map_err(|e| anyhow::anyhow!("--cc: {e}"))?;
    if kind.is_none() {
        return Ok(None);
    }
    let Some(base_rtt) = &args.base_rtt else {
        bail!(
            "--cc {kind} needs --base-rtt: the unloaded round trip of the longest path, which \
             its window and delay target are scaled to (`ofan-lab run` passes its fabric's)"
        );
    };
    let base_rtt_ns = parse_duration(base_rtt)
        .with_context(|| format!("--base-rtt {base_rtt}"))?
        .as_nanos();
    if base_rtt_ns == 0 {
        bail!("--base-rtt {base_rtt}: must be positive");
    }
    let base_rtt_ns = u64::try_from(base_rtt_ns).unwrap_or(u64::MAX);
    Ok(ofan_lab_agent::cc_config(
        kind,
        args.payload,
        base_rtt_ns,
        link_rate_bps,
    ))
}
