//! `ofan-switch`: one load-balancing switch — what runs on a real box, or in one namespace of a
//! lab.
//!
//! It attaches the XDP steering program to its ports, opens one AF_XDP socket per (port, queue)
//! on a shared UMEM, mirrors the namespace's kernel FIB (whatever `ip route`, the lab or a BGP
//! daemon put there) and forwards with one worker per pipe, balancing northbound packets with the
//! configured algorithm. SIGINT/SIGTERM stop it cleanly: workers stop, the program is detached,
//! every frame is accounted for, the admin socket is removed.

mod admin;
mod config;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, Subcommand};
use ofan_control::mirror::Mirror;
use ofan_dataplane::afxdp::Runtime;
use ofan_dataplane::fib::{Fib, SharedFib};

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
        Some(Command::Stats { socket, json }) => stats(&socket, json),
        Some(Command::Reset { socket }) => {
            admin::request(&socket, "reset").map(|reply| println!("{reply}"))
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
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&args.log).context("--log")?)
        .with_writer(std::io::stderr)
        .init();

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install signal handlers")?;
    }

    let shared: Arc<SharedFib> = Arc::new(SharedFib::from_pointee(
        Fib::builder().build().context("empty forwarding table")?,
    ));
    let mirror = Mirror::start(config.mirror.clone(), Arc::clone(&shared))
        .context("cannot mirror the kernel FIB")?;
    let runtime = Runtime::start(config.runtime.clone(), Arc::clone(&shared))
        .context("cannot start the data path")?;
    let state = Arc::new(admin::AdminState {
        name: config.name.clone(),
        algorithm: config.runtime.lb.algorithm.to_string(),
        started: Instant::now(),
        telemetry: Arc::clone(runtime.telemetry()),
        steering: Mutex::new(Vec::new()),
        mirror: mirror.status_handle(),
    });
    let admin_stop = Arc::new(AtomicBool::new(false));
    let _socket = admin::serve(
        &config.admin_socket,
        Arc::clone(&state),
        Arc::clone(&admin_stop),
    )?;
    if let Some(addr) = config.metrics {
        admin::serve_metrics(addr, Arc::clone(&state), Arc::clone(&admin_stop))?;
    }
    tracing::info!(
        switch = %config.name,
        algorithm = %config.runtime.lb.algorithm,
        ports = config.runtime.ports.len(),
        pipes = config.runtime.pipes.len(),
        link_rate = %ofan_topology::units::format_rate(config.runtime.ports.first().map_or(0, |p| p.egress.link_rate_bps)),
        socket = %config.admin_socket.display(),
        "forwarding"
    );

    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(mut steering) = state.steering.lock() {
            *steering = runtime
                .steering_counters()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect();
        }
    }

    tracing::info!("stopping");
    admin_stop.store(true, Ordering::Relaxed);
    let report = runtime.stop();
    mirror.stop();
    if report.frames_balanced() {
        tracing::info!(frames = report.frames, "stopped; every frame accounted for");
        Ok(())
    } else {
        anyhow::bail!(
            "frame accounting is off after stop: {} frames, {} accounted for ({:?})",
            report.frames,
            report.census.total(),
            report.census
        )
    }
}

fn stats(socket: &std::path::Path, json: bool) -> anyhow::Result<()> {
    let reply = admin::request(socket, "stats")?;
    if json {
        println!("{reply}");
        return Ok(());
    }
    let stats: admin::Stats =
        serde_json::from_str(&reply).context("the switch sent unexpected JSON")?;
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
        println!("unresolved next hops: {}", stats.fib.unresolved.join(", "));
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
    Ok(())
}
