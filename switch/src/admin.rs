//! The admin socket (`ofan-switch stats`, `reset`) and the Prometheus text endpoint.
//!
//! The admin socket is a source of the switch's control loop ([`server`]); the metrics endpoint
//! runs on threads of its own. Neither touches the workers: `stats` reads the published
//! telemetry and, at the time of the request, the steering program's per-CPU counters; a
//! `blackhole` is applied to the steering program at once.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusHandle;
pub use ofan_control::admin::Stats;
use ofan_control::admin::{Reply, Request};
use ofan_control::bmp::StationStatus;
use ofan_control::endpoint::{self, AdminServer, EndpointCounters, EndpointsReport, Limits};
use ofan_control::mirror::MirrorStatus;
use ofan_control::paths::{self, LearnedPaths, PathSource};
use ofan_dataplane::afxdp::monotonic_ns;
use ofan_dataplane::fib::SharedFib;
use ofan_dataplane::telemetry::SwitchTelemetry;

use crate::running::{self, DataPath};

/// State the admin threads read.
#[derive(Debug)]
pub struct AdminState {
    /// Switch name.
    pub name: String,
    /// Algorithm name.
    pub algorithm: String,
    /// Start time.
    pub started: Instant,
    /// Data-path telemetry.
    pub telemetry: Arc<SwitchTelemetry>,
    /// The data path: its steering counters are read when `stats` asks, and `blackhole`
    /// changes its program.
    pub data_path: DataPath,
    /// The mirror's status.
    pub mirror: Arc<Mutex<MirrorStatus>>,
    /// The forwarding table (the path table is joined onto it).
    pub fib: Arc<SharedFib>,
    /// Interface names in port-id order.
    pub port_names: Vec<String>,
    /// Where the path information comes from.
    pub paths: PathInfo,
    /// What the admin socket and the metrics endpoint served and refused.
    pub endpoints: Endpoints,
    /// The adaptive-routing notifier's report, when enabled.
    pub adaptive_routing: Option<Arc<Mutex<ofan_control::notify::report::ArfReport>>>,
}

/// The counters of the switch's endpoints.
#[derive(Debug, Default)]
pub struct Endpoints {
    /// The admin socket's.
    pub admin: Arc<EndpointCounters>,
    /// The metrics endpoint's (all zero when it is off).
    pub metrics: Arc<EndpointCounters>,
}

/// The switch's path information: the table and its source.
#[derive(Debug)]
pub struct PathInfo {
    /// BMP, the plan or nothing.
    pub source: PathSource,
    /// The learned table (replaced atomically by the BMP station; fixed for the plan).
    pub learned: Arc<ArcSwap<LearnedPaths>>,
    /// The BMP station's status, with BMP.
    pub station: Option<Arc<Mutex<StationStatus>>>,
}

impl AdminState {
    /// Makes port `port` drop every frame it receives (`blackhole`), or pass them again.
    fn blackhole(&self, port: &str, blackhole: bool) -> Reply {
        let Some(index) = self.port_names.iter().position(|name| name == port) else {
            return Reply::Error(format!(
                "no port `{port}` (ports: {})",
                self.port_names.join(", ")
            ));
        };
        let mut data_path = running::lock(&self.data_path);
        let Some(runtime) = data_path.as_mut() else {
            return Reply::Error("the switch is stopping".to_owned());
        };
        match runtime.set_blackhole(index as u16, blackhole) {
            Ok(()) => {
                tracing::info!(port = %port, blackhole, "port blackhole");
                Reply::Done
            }
            Err(error) => Reply::Error(error.to_string()),
        }
    }

    /// The steering program's counters, read now; the fast path's per-port counters are
    /// published into the telemetry on the way.
    fn steering(&self) -> Vec<(String, u64)> {
        let data_path = running::lock(&self.data_path);
        data_path.as_ref().map_or_else(Vec::new, |runtime| {
            runtime.publish_fast_counters();
            runtime.steering_counters()
        })
    }

    /// Shapes port `port` at `bps` bit/s from its next frame on (no control-thread round trip:
    /// the port's owner picks the rate up through the telemetry's rate epoch).
    fn set_link_rate(&self, port: &str, bps: u64) -> Reply {
        let Some(index) = self.port_names.iter().position(|name| name == port) else {
            return Reply::Error(format!(
                "no port `{port}` (ports: {})",
                self.port_names.join(", ")
            ));
        };
        if self.telemetry.request_link_rate(index, bps) {
            tracing::info!(port, rate = %ofan_topology::units::format_rate(bps), "link rate");
            Reply::Done
        } else {
            Reply::Error(format!(
                "port `{port}` is not shaped: it has no link rate to change"
            ))
        }
    }

    /// Everything, now.
    pub fn stats(&self) -> Stats {
        let steering = self.steering();
        Stats {
            switch: self.name.clone(),
            algorithm: self.algorithm.clone(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            data_path: self.telemetry.snapshot(monotonic_ns()),
            steering,
            fib: self.mirror.lock().map(|s| s.report()).unwrap_or_default(),
            paths: paths::report(
                &self.fib.load(),
                &self.paths.learned.load(),
                self.paths.source,
                &self.port_names,
            ),
            bmp: self
                .paths
                .station
                .as_ref()
                .and_then(|status| status.lock().ok().map(|s| s.clone())),
            endpoints: EndpointsReport {
                admin: self.endpoints.admin.status(),
                metrics: self.endpoints.metrics.status(),
            },
            adaptive_routing: self
                .adaptive_routing
                .as_ref()
                .and_then(|report| report.lock().ok().map(|r| r.clone())),
        }
    }
}

/// A bound admin socket; the file is removed on drop.
#[derive(Debug)]
pub struct AdminSocket {
    path: PathBuf,
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the admin socket (mode 0600), to be served by the switch's control loop: every peer
/// may read (`stats`), only root and the switch's own user may change (`ofan_control::endpoint`).
///
/// # Errors
/// When the socket cannot be created (another switch is using the path, no permission…).
pub fn server(path: &Path, state: Arc<AdminState>) -> anyhow::Result<(AdminServer, AdminSocket)> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            anyhow::bail!(
                "admin socket {} is in use by a running switch",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("cannot remove stale {}", path.display()))?;
    }
    let counters = Arc::clone(&state.endpoints.admin);
    let handler = move |request| match request {
        Request::Stats => Reply::Stats(Box::new(state.stats())),
        Request::Reset => {
            state.telemetry.request_reset();
            Reply::Done
        }
        Request::Blackhole { port, blackhole } => state.blackhole(&port, blackhole),
        Request::LinkRate { port, bps } => state.set_link_rate(&port, bps),
    };
    let server = AdminServer::bind(path, Limits::default(), counters, Arc::new(handler))
        .with_context(|| format!("cannot bind admin socket {}", path.display()))?;
    Ok((
        server,
        AdminSocket {
            path: path.to_owned(),
        },
    ))
}

/// Publishes the telemetry as Prometheus metrics once a second and serves `GET /metrics`
/// (`ofan_control::endpoint::serve_http`: a deadline per request, bounded clients).
///
/// # Errors
/// When the address cannot be bound.
pub fn serve_metrics(
    addr: std::net::SocketAddr,
    state: Arc<AdminState>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle: PrometheusHandle = recorder.handle();
    metrics::set_global_recorder(recorder).context("a metrics recorder is already installed")?;
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("cannot bind metrics endpoint {addr}"))?;
    let counters = Arc::clone(&state.endpoints.metrics);
    // Rendered by the client threads, recorded by this one: a slow client delays neither.
    let render = move || handle.render();
    endpoint::serve_http(
        listener,
        Limits::default(),
        counters,
        Arc::new(render),
        Arc::clone(&stop),
    )?;
    std::thread::Builder::new()
        .name("ofan-metrics-record".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                record(&state.stats());
                std::thread::sleep(Duration::from_secs(1));
            }
        })?;
    Ok(())
}

fn record(stats: &Stats) {
    for port in &stats.data_path.ports {
        let labels = [("port", port.name.clone())];
        metrics::counter!("ofan_port_rx_packets_total", &labels).absolute(port.rx_packets);
        metrics::counter!("ofan_port_rx_bytes_total", &labels).absolute(port.rx_bytes);
        metrics::counter!("ofan_port_rx_spliced_total", &labels).absolute(port.rx_spliced);
        metrics::counter!("ofan_port_rx_host_link_total", &labels).absolute(port.rx_host_link);
        metrics::counter!("ofan_port_drops_host_link_total", &labels)
            .absolute(port.drops_host_link);
        metrics::counter!("ofan_port_tx_packets_total", &labels).absolute(port.tx_packets);
        metrics::counter!("ofan_port_tx_bytes_total", &labels).absolute(port.tx_bytes);
        metrics::counter!("ofan_port_drops_buffer_total", &labels).absolute(port.drops_buffer);
        metrics::counter!("ofan_port_drops_handoff_total", &labels).absolute(port.drops_handoff);
        metrics::counter!("ofan_port_ecn_marked_total", &labels).absolute(port.ecn_marked);
        metrics::gauge!("ofan_port_queue_packets", &labels).set(port.depth_packets as f64);
        metrics::gauge!("ofan_port_queue_bytes", &labels).set(port.depth_bytes as f64);
        metrics::gauge!("ofan_port_queue_max_packets", &labels).set(port.max_depth_packets as f64);
        metrics::gauge!("ofan_port_shaper_lateness_p99_seconds", &labels)
            .set(port.lateness_p99_ns as f64 / 1e9);
        metrics::counter!("ofan_port_shaper_lost_nanoseconds_total", &labels)
            .absolute(port.lost_link_ns);
        metrics::counter!("ofan_port_busy_nanoseconds_total", &labels).absolute(port.busy_link_ns);
        metrics::counter!("ofan_port_fast_rx_packets_total", &labels)
            .absolute(port.fast_rx_packets);
        metrics::counter!("ofan_port_fast_tx_packets_total", &labels)
            .absolute(port.fast_tx_packets);
        for queue in &port.queues {
            let labels = [
                ("port", port.name.clone()),
                ("queue", queue.queue.to_string()),
            ];
            metrics::counter!("ofan_queue_rx_packets_total", &labels).absolute(queue.rx_packets);
            metrics::counter!("ofan_queue_tx_packets_total", &labels).absolute(queue.tx_packets);
            metrics::counter!("ofan_queue_drops_buffer_total", &labels)
                .absolute(queue.drops_buffer);
            metrics::counter!("ofan_queue_socket_drops_total", &labels)
                .absolute(queue.socket_rx_dropped);
        }
    }
    for (name, value) in &stats.data_path.counters {
        metrics::counter!("ofan_forward_total", "reason" => name.clone()).absolute(*value);
    }
    for (name, value) in &stats.steering {
        metrics::counter!("ofan_steering_total", "decision" => name.clone()).absolute(*value);
    }
    if let Some(umem) = &stats.data_path.umem {
        metrics::gauge!("ofan_umem_frames").set(umem.frames as f64);
        for (place, frames) in umem.places.places() {
            metrics::gauge!("ofan_umem_frames_by_place", "place" => place).set(frames as f64);
        }
    }
    metrics::gauge!("ofan_fib_generation").set(stats.fib.generation as f64);
    metrics::counter!("ofan_fib_route_changes_total").absolute(stats.fib.route_changes);
    if let Some(bmp) = &stats.bmp {
        let session = &bmp.session;
        metrics::gauge!("ofan_bmp_connected").set(f64::from(u8::from(bmp.connected)));
        metrics::counter!("ofan_bmp_connections_total").absolute(bmp.connections);
        metrics::counter!("ofan_bmp_messages_total").absolute(session.messages);
        metrics::counter!("ofan_bmp_updates_total").absolute(session.updates);
        metrics::counter!("ofan_bmp_errors_total").absolute(session.errors);
        metrics::counter!("ofan_bmp_stale_peer_downs_total").absolute(session.stale_peer_down);
        let complete = session.peers.iter().filter(|p| p.complete).count();
        metrics::gauge!("ofan_bmp_peers", "complete" => "true").set(complete as f64);
        metrics::gauge!("ofan_bmp_peers", "complete" => "false")
            .set((session.peers.len() - complete) as f64);
    }
    metrics::gauge!("ofan_path_routes").set(stats.paths.routes.len() as f64);
    if let Some(arf) = &stats.adaptive_routing {
        for (name, value) in &arf.counters {
            metrics::counter!(format!("ofan_arf_{name}_total")).absolute(*value);
        }
        for (reason, value) in &arf.rejected {
            metrics::counter!("ofan_arf_rejected_total", "reason" => reason.clone())
                .absolute(*value);
        }
        metrics::gauge!("ofan_arf_table_entries").set(arf.table.len() as f64);
        metrics::gauge!("ofan_arf_view_generation").set(arf.generation as f64);
        for port in &arf.ports {
            metrics::gauge!("ofan_arf_port_level", "port" => port.name.clone())
                .set(f64::from(port.level));
        }
        let latency = &arf.latency;
        metrics::counter!("ofan_arf_latency_samples_total").absolute(latency.count);
        for (stat, ns) in [
            ("last", latency.last_ns),
            ("min", latency.min_ns),
            ("median", latency.median_ns),
            ("max", latency.max_ns),
        ] {
            metrics::gauge!("ofan_arf_latency_seconds", "stat" => stat).set(ns as f64 / 1e9);
        }
    }
}
