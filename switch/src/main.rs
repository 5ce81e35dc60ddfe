//! `ofan-switch`: one load-balancing switch — what runs on a real box, or in one namespace of a
//! lab.
//!
//! It attaches the XDP steering program to its ports, opens one AF_XDP socket per (port, queue)
//! on a shared UMEM, mirrors the namespace's kernel FIB (whatever `ip route`, the lab or a BGP
//! daemon put there) and forwards with one worker per pipe, balancing northbound packets with the
//! configured algorithm. SIGINT/SIGTERM stop it cleanly: workers stop, the program is detached,
//! every frame is accounted for, the admin socket is removed.

mod admin;
mod arf;
mod group;
mod running;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ofan_control::admin::{Client, Request};
use ofan_control::event::EventLoop;
use ofan_control::paths::PathSource;
use ofan_dataplane::afxdp::Threads;
use ofan_dataplane::forward::DropReason;
use ofan_dataplane::telemetry::drop_counter_name;
use ofan_switch::config;

use running::Running;

/// One AF_XDP load-balancing switch (Ofan, pOfan and the algorithms they are measured against).
#[derive(Debug, Parser)]
#[command(
    name = "ofan-switch",
    version,
    about,
    args_conflicts_with_subcommands = true,
    after_long_help = config::REFERENCE
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the switch (the default when no subcommand is given).
    Run(RunArgs),
    /// Print a running switch's counters, queues and FIB state.
    Stats {
        /// Admin socket of the switch.
        #[arg(long, default_value = "/run/ofan/ofan-switch.sock")]
        socket: PathBuf,
        /// Print the raw JSON (for scripts) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Clear a running switch's queue maxima and histograms (counters stay monotonic).
    Reset {
        /// Admin socket of the switch.
        #[arg(long, default_value = "/run/ofan/ofan-switch.sock")]
        socket: PathBuf,
    },
    /// Validate a configuration and print what it resolves to, without touching any interface.
    CheckConfig(RunArgs),
    /// Run several switches in one process — each in its network namespace, with its own FIB
    /// mirror, admin socket and counters — their pipes served by a shared pool of worker
    /// threads (one per CPU): a whole lab forwarding without a wake-up per frame per hop.
    #[command(long_about = group::LONG_ABOUT)]
    Group(group::GroupArgs),
}

#[derive(Debug, Clone, Default, clap::Args)]
struct RunArgs {
    /// Configuration file (see the reference below; flags override it).
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    overrides: config::Overrides,
    /// Log filter (e.g. info, debug, ofan_dataplane=trace).
    #[arg(long, default_value = "info")]
    log: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => run(cli.run),
        Some(Command::Run(args)) => run(args),
        Some(Command::CheckConfig(args)) => check_config(&args),
        Some(Command::Group(args)) => group::run(args),
        Some(Command::Stats { socket, json }) => stats(&socket, json),
        Some(Command::Reset { socket }) => {
            let reply = Client::new(&socket).exchange(Request::Reset);
            reply.map(|line| println!("{line}")).map_err(Into::into)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.downcast_ref::<config::ConfigError>().is_some() => {
            eprintln!("ofan-switch: configuration error: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("ofan-switch: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn check_config(args: &RunArgs) -> anyhow::Result<()> {
    let config = config::load(args.config.as_deref(), &args.overrides)?;
    println!("{config:#?}");
    Ok(())
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = config::load(args.config.as_deref(), &args.overrides)?;
    init_logging(&args.log)?;
    let stop = stop_on_signals()?;
    run_switch(config, &stop, Threads::Own)
}

/// Logs to stderr with filter `filter`, in colour only on a terminal (a log file — a lab's, a
/// service's — gets plain `key=value` text).
fn init_logging(filter: &str) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter).context("--log")?)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}

/// A flag that SIGINT and SIGTERM set.
fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install signal handlers")?;
    }
    Ok(stop)
}

/// Runs one switch until `stop` is set (or its data path fails), then stops it cleanly: its
/// control sources in one loop on this thread, its workers on `threads`.
fn run_switch(
    config: config::SwitchConfig,
    stop: &AtomicBool,
    threads: Threads,
) -> anyhow::Result<()> {
    let mut control = EventLoop::new().context("cannot create the control loop")?;
    // A signal wakes the loop, which then sees `stop`.
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let waker = control.handle().waker().context("control loop waker")?;
        signal_hook::low_level::pipe::register(signal, waker)
            .context("cannot install signal handlers")?;
    }
    let switch = Running::start(config, threads, &control.handle())?;
    control
        .run_until(|| stop.load(Ordering::Relaxed) || switch.failed())
        .context("control loop")?;
    // Its sources (the admin socket among them) close with it.
    drop(control);
    switch.stop()
}

fn stats(socket: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let client = Client::new(socket);
    if json {
        println!("{}", client.exchange(Request::Stats)?);
        return Ok(());
    }
    let stats = client.stats()?;
    println!(
        "{} ({}), up {:.0} s, FIB generation {}, {} + {} routes, {} groups",
        stats.switch,
        stats.algorithm,
        stats.uptime_s,
        stats.fib.generation,
        stats.fib.routes.0,
        stats.fib.routes.1,
        stats.fib.groups
    );
    if !stats.fib.unresolved.is_empty() {
        let unresolved_counter = drop_counter_name(DropReason::NeighborUnresolved);
        let dropped = stats
            .data_path
            .counters
            .iter()
            .find(|(name, _)| *name == unresolved_counter)
            .map_or(0, |&(_, value)| value);
        println!(
            "WARNING: {} next hop{} unresolved{}: {} — frames routed only through {} are \
             dropped ({}={dropped}); its neighbour does not answer ARP/neighbour discovery",
            stats.fib.unresolved.len(),
            if stats.fib.unresolved.len() == 1 {
                ""
            } else {
                "s"
            },
            stats
                .fib
                .unresolved_for_ms
                .map(|ms| format!(" for {:.1} s", ms as f64 / 1000.0))
                .unwrap_or_default(),
            stats.fib.unresolved.join(", "),
            if stats.fib.unresolved.len() == 1 {
                "it"
            } else {
                "them"
            },
            unresolved_counter,
        );
    }
    println!(
        "{:<8} {:>12} {:>12} {:>10} {:>8} {:>8} {:>10} {:>12}",
        "port", "rx pkts", "tx pkts", "drops", "queue", "max q", "ecn", "late p99 µs"
    );
    for port in &stats.data_path.ports {
        println!(
            "{:<8} {:>12} {:>12} {:>10} {:>8} {:>8} {:>10} {:>12.1}",
            port.name,
            port.rx_packets,
            port.tx_packets,
            port.drops_buffer + port.drops_handoff,
            port.depth_packets,
            port.max_depth_packets,
            port.ecn_marked,
            port.lateness_p99_ns as f64 / 1000.0
        );
        for queue in &port.queues {
            println!(
                "{:<8} {:>12} {:>12} {:>10} {:>8}",
                format!(" q{}", queue.queue),
                queue.rx_packets,
                queue.tx_packets,
                queue.drops_buffer + queue.drops_handoff,
                queue.depth_packets,
            );
        }
    }
    let nonzero: Vec<String> = stats
        .data_path
        .counters
        .iter()
        .chain(stats.steering.iter())
        .filter(|(_, value)| *value > 0)
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    println!("counters: {}", nonzero.join(" "));
    print_paths(&stats);
    if let Some(arf) = &stats.adaptive_routing {
        print_adaptive_routing(arf);
    }
    Ok(())
}

/// The adaptive-routing section: local levels, neighbours, the congestion table, counters,
/// latency, the last notifications.
fn print_adaptive_routing(arf: &ofan_control::notify::report::ArfReport) {
    let identity = match (arf.asn, &arf.router_id) {
        (Some(asn), Some(id)) => format!("AS{asn} {id}"),
        _ => "no ASN: receiving only".to_owned(),
    };
    println!(
        "adaptive routing: {identity}, udp {}, window {} ms, refresh {} ms (hold {} ms), paths by {}, view generation {}",
        arf.port,
        arf.window_ms,
        arf.refresh_ms,
        3 * arf.refresh_ms,
        arf.combine,
        arf.generation
    );
    let ports: Vec<String> = arf
        .ports
        .iter()
        .map(|p| {
            format!(
                "{} {}{}",
                p.name,
                p.level,
                if p.congested { " congested" } else { "" }
            )
        })
        .collect();
    println!("  local levels: {}", ports.join(", "));
    let neighbours: Vec<String> = arf
        .neighbours
        .iter()
        .map(|n| format!("{} {} AS{}", n.port, n.addr, n.asn))
        .collect();
    println!("  neighbours: {}", neighbours.join(", "));
    println!("  congestion table ({} links):", arf.table.len());
    for link in &arf.table {
        println!(
            "    {} → {}  level {:>2}{}  seq {}  expires in {} ms",
            link.near,
            link.far,
            link.quality,
            if link.failed { " failed" } else { "" },
            link.sequence,
            link.expires_in_ms
        );
    }
    let counters: Vec<String> = arf
        .counters
        .iter()
        .map(|(name, value)| format!("{name}={value}"))
        .chain(
            arf.rejected
                .iter()
                .map(|(name, value)| format!("rejected_{name}={value}")),
        )
        .collect();
    println!("  counters: {}", counters.join(" "));
    let us = |ns: i64| ns as f64 / 1000.0;
    println!(
        "  notification-to-table latency: {} samples, last {:.1} µs, min {:.1}, median {:.1}, max {:.1}",
        arf.latency.count,
        us(arf.latency.last_ns),
        us(arf.latency.min_ns),
        us(arf.latency.median_ns),
        us(arf.latency.max_ns)
    );
    for (label, recent) in [
        ("sent", &arf.recent_sent),
        ("received", &arf.recent_received),
    ] {
        let last: Vec<String> = recent
            .iter()
            .rev()
            .take(5)
            .map(|m| {
                format!(
                    "{} {} {}→{} level {} seq {}",
                    m.peer, m.what, m.near, m.far, m.quality, m.sequence
                )
            })
            .collect();
        println!("  last {label}: {}", last.join(" | "));
    }
}

/// The path table: per prefix, each next hop with its next-next hops (ASNs).
fn print_paths(stats: &ofan_control::admin::Stats) {
    let source = match (&stats.paths.source, &stats.bmp) {
        (PathSource::Bmp, Some(bmp)) => {
            let peers = &bmp.session.peers;
            format!(
                "bmp on {} ({}, {} peers, {} complete, {} updates, {} errors)",
                bmp.listen,
                if bmp.connected {
                    "connected"
                } else {
                    "no daemon connected"
                },
                peers.len(),
                peers.iter().filter(|p| p.complete).count(),
                bmp.session.updates,
                bmp.session.errors
            )
        }
        (PathSource::Plan, _) => "plan (topology; no BMP station configured)".to_owned(),
        (source, _) => source.to_string(),
    };
    println!("paths: {source}");
    for route in &stats.paths.routes {
        let hops: Vec<String> = route
            .hops
            .iter()
            .map(|hop| {
                let behind: Vec<String> = if hop.next_next_ids.is_empty() {
                    hop.next_next.iter().map(u32::to_string).collect()
                } else {
                    hop.next_next_ids
                        .iter()
                        .map(std::net::Ipv4Addr::to_string)
                        .collect()
                };
                format!(
                    "{} {} AS{} → [{}]",
                    hop.port,
                    hop.gateway,
                    hop.asn
                        .map_or_else(|| "?".to_owned(), |asn| asn.to_string()),
                    behind.join(" ")
                )
            })
            .collect();
        println!("  {:<18} {}", route.prefix, hops.join(" | "));
    }
}
