//! The admin socket (`ofan-switch stats`, `reset`) and the Prometheus text endpoint.
//!
//! Both run on their own threads and only read published telemetry: nothing here touches the
//! workers.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use metrics_exporter_prometheus::PrometheusHandle;
use ofan_control::mirror::MirrorStatus;
use ofan_dataplane::afxdp::monotonic_ns;
use ofan_dataplane::telemetry::{SwitchSnapshot, SwitchTelemetry};
use serde::{Deserialize, Serialize};

/// What `stats` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    /// Switch name.
    pub switch: String,
    /// Load-balancing algorithm.
    pub algorithm: String,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Ports and forwarding counters.
    pub data_path: SwitchSnapshot,
    /// The XDP steering program's counters.
    pub steering: Vec<(String, u64)>,
    /// The FIB mirror.
    pub fib: MirrorStatus,
}

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
    /// Steering counters, refreshed by the main thread.
    pub steering: Mutex<Vec<(String, u64)>>,
    /// The mirror's status.
    pub mirror: Arc<Mutex<MirrorStatus>>,
}

impl AdminState {
    /// Everything, now.
    pub fn stats(&self) -> Stats {
        Stats {
            switch: self.name.clone(),
            algorithm: self.algorithm.clone(),
            uptime_s: self.started.elapsed().as_secs_f64(),
            data_path: self.telemetry.snapshot(monotonic_ns()),
            steering: self.steering.lock().map(|s| s.clone()).unwrap_or_default(),
            fib: self.mirror.lock().map(|s| s.clone()).unwrap_or_default(),
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

/// Binds the admin socket and serves it on a thread until `stop`.
///
/// # Errors
/// When the socket cannot be created (another switch is using the path, no permission…).
pub fn serve(
    path: &Path,
    state: Arc<AdminState>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<AdminSocket> {
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
    let listener = UnixListener::bind(path)
        .with_context(|| format!("cannot bind admin socket {}", path.display()))?;
    // A blocking accept: an idle switch must not wake up to poll. The thread ends with the
    // process; `stop` is checked after each connection.
    std::thread::Builder::new()
        .name("ofan-admin".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    let _ = answer(stream, &state);
                }
            }
        })?;
    Ok(AdminSocket {
        path: path.to_owned(),
    })
}

fn answer(stream: UnixStream, state: &AdminState) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    let reply = match line.trim() {
        "stats" => serde_json::to_string(&state.stats())
            .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
        "reset" => {
            state.telemetry.request_reset();
            "{\"ok\":true}".to_owned()
        }
        other => format!(
            "{{\"error\":\"unknown command `{}`\"}}",
            other.escape_default()
        ),
    };
    let mut stream = stream;
    writeln!(stream, "{reply}")
}

/// Sends one command to a running switch and returns its JSON reply.
///
/// # Errors
/// When no switch answers at `path`.
pub fn request(path: &Path, command: &str) -> anyhow::Result<String> {
    let mut stream = UnixStream::connect(path).with_context(|| {
        format!(
            "no switch answers at {} (is it running? see --socket)",
            path.display()
        )
    })?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    writeln!(stream, "{command}")?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(reply.trim_end().to_owned())
}

/// Publishes the telemetry as Prometheus metrics once a second and serves `GET /metrics`.
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
    listener.set_nonblocking(true)?;
    std::thread::Builder::new().name("ofan-metrics".into()).spawn(move || {
        let mut last = Instant::now() - Duration::from_secs(10);
        while !stop.load(Ordering::Relaxed) {
            if last.elapsed() >= Duration::from_secs(1) {
                record(&state.stats());
                last = Instant::now();
            }
            match listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    let mut request = String::new();
                    let _ = BufReader::new(&stream).read_line(&mut request);
                    let (status, body) = if request.starts_with("GET /metrics") {
                        ("200 OK", handle.render())
                    } else {
                        ("404 Not Found", "try GET /metrics\n".to_owned())
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    })?;
    Ok(())
}

fn record(stats: &Stats) {
    for port in &stats.data_path.ports {
        let labels = [("port", port.name.clone())];
        metrics::counter!("ofan_port_rx_packets_total", &labels).absolute(port.rx_packets);
        metrics::counter!("ofan_port_rx_bytes_total", &labels).absolute(port.rx_bytes);
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
    }
    for (name, value) in &stats.data_path.counters {
        metrics::counter!("ofan_forward_total", "reason" => name.clone()).absolute(*value);
    }
    for (name, value) in &stats.steering {
        metrics::counter!("ofan_steering_total", "decision" => name.clone()).absolute(*value);
    }
    metrics::gauge!("ofan_fib_generation").set(stats.fib.generation as f64);
}
