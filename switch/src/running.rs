//! A running switch: its data path and the control sources it has in a control loop.
//!
//! [`Running::start`] builds everything a switch is — the FIB mirror, the BMP station, the data
//! path, the adaptive-routing notifier, the admin socket — on the calling thread, so that every
//! socket is opened in that thread's network namespace, and hands the control sources to a
//! loop ([`ofan_control::event`]): a standalone `ofan-switch`'s own loop on its main thread, or
//! the one loop of an `ofan-switch group`. Nothing of the switch's control runs on a thread of
//! its own unless it is listed below as still threaded.
//!
//! The sources: the FIB mirror's follower ([`ofan_control::mirror::Follower`]), the admin
//! socket ([`ofan_control::endpoint::AdminServer`], which reads counters when a request asks
//! for them), and the switch's [`Housekeeping`] (once a second: a dead worker, and the local
//! addresses the mirror found, for the steering program), and with adaptive routing the
//! notifier ([`arf::NotifierSource`]), and under BGP the BMP station
//! ([`ofan_control::bmp::StationSource`]). Only the metrics endpoint, when configured, keeps
//! threads of its own (an HTTP server with a thread per client; a lab does not use it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use arc_swap::ArcSwap;
use ofan_control::bmp::Station;
use ofan_control::event::{Interest, LoopHandle, Source, SourceId};
use ofan_control::mirror::{Mirror, MirrorStatus};
use ofan_control::paths::{LearnedPaths, PathSource};
use ofan_dataplane::afxdp::{Runtime, Threads};
use ofan_dataplane::fib::{Fib, SharedFib};
use ofan_switch::config;

use crate::admin::{self, PathInfo};
use crate::arf;

/// The data path, shared by the admin socket (counters on demand, blackholes), the
/// housekeeping and the stop; `None` once stopped.
pub type DataPath = Arc<Mutex<Option<Runtime>>>;

/// Locks `data_path` (a panicked holder left it usable: the runtime has no invariant a panic
/// in a reader could break).
pub fn lock(data_path: &DataPath) -> std::sync::MutexGuard<'_, Option<Runtime>> {
    data_path
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A switch forwarding, its control in a loop.
pub struct Running {
    name: String,
    data_path: DataPath,
    control: LoopHandle,
    sources: Vec<SourceId>,
    failed: Arc<AtomicBool>,
    mirror: Mirror,
    station: Option<Station>,
    /// Ends the metrics endpoint's threads.
    metrics_stop: Arc<AtomicBool>,
    _socket: admin::AdminSocket,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Running {
    /// Starts the switch `config` describes, its workers on `threads` and its control sources
    /// in `control`'s loop; every socket is opened in the calling thread's namespace.
    ///
    /// # Errors
    /// Whatever part cannot start (the others are stopped again).
    pub fn start(
        config: config::SwitchConfig,
        threads: Threads,
        control: &LoopHandle,
    ) -> anyhow::Result<Self> {
        let shared: Arc<SharedFib> = Arc::new(SharedFib::from_pointee(
            Fib::builder().build().context("empty forwarding table")?,
        ));
        let (mirror, follower) = Mirror::open(config.mirror.clone(), Arc::clone(&shared))
            .context("cannot mirror the kernel FIB")?;
        // Bound before the data path starts, so a BGP daemon started next finds the station.
        let (station, station_source) = match config.bmp {
            Some(addr) => {
                let (station, source) = Station::open(addr)
                    .with_context(|| format!("cannot listen for BMP on {addr} (bgp.bmp)"))?;
                (Some(station), Some(source))
            }
            None => (None, None),
        };
        let paths = match (&station, &config.plan_paths) {
            (Some(station), _) => PathInfo {
                source: PathSource::Bmp,
                learned: station.learned(),
                station: Some(station.status_handle()),
            },
            (None, Some(plan)) => PathInfo {
                source: PathSource::Plan,
                learned: Arc::new(ArcSwap::from_pointee(plan.clone())),
                station: None,
            },
            (None, None) => PathInfo {
                source: PathSource::None,
                learned: Arc::new(ArcSwap::from_pointee(LearnedPaths::default())),
                station: None,
            },
        };
        let runtime = Runtime::start_on(config.runtime.clone(), Arc::clone(&shared), threads)
            .context("cannot start the data path")?;
        if let Some(fast) = runtime.fast_path() {
            // Every table the mirror publishes goes into the XDP program's maps as well.
            mirror.on_publish(Box::new(move |fib| {
                let Ok(mut fast) = fast.lock() else { return };
                if let Err(error) = fast.publish(fib) {
                    tracing::error!(%error, "XDP fast path off until the next table: cannot publish");
                }
            }));
        }
        let notifier = match &config.adaptive_routing {
            Some(settings) => Some(
                arf::Notifier::open(arf::Inputs {
                    settings: settings.clone(),
                    ports: config
                        .runtime
                        .ports
                        .iter()
                        .zip(&config.mirror.ports)
                        .map(|(spec, port)| arf::PortInfo {
                            name: spec.name.clone(),
                            fabric: port.role != ofan_dataplane::fib::PortRole::Host,
                            full_frame_bytes: full_frame_bytes(&spec.name),
                        })
                        .collect(),
                    telemetry: Arc::clone(runtime.telemetry()),
                    balancer: Arc::clone(runtime.balancer()),
                    fib: Arc::clone(&shared),
                    learned: Arc::clone(&paths.learned),
                })
                .context("cannot start adaptive-routing notifications")?,
            ),
            None => None,
        };
        let telemetry = Arc::clone(runtime.telemetry());
        let (frame_size, frames_per_packet) =
            (runtime.frame_size(), runtime.layout().frames_per_packet);
        let data_path: DataPath = Arc::new(Mutex::new(Some(runtime)));
        let state = Arc::new(admin::AdminState {
            name: config.name.clone(),
            algorithm: config.runtime.lb.algorithm.to_string(),
            started: Instant::now(),
            telemetry,
            data_path: Arc::clone(&data_path),
            mirror: mirror.status_handle(),
            fib: Arc::clone(&shared),
            port_names: config.mirror.ports.iter().map(|p| p.name.clone()).collect(),
            paths,
            endpoints: admin::Endpoints::default(),
            adaptive_routing: notifier.as_ref().map(|(n, _)| Arc::clone(&n.report)),
        });
        let (server, socket) = admin::server(&config.admin_socket, Arc::clone(&state))?;
        let metrics_stop = Arc::new(AtomicBool::new(false));
        if let Some(addr) = config.metrics {
            admin::serve_metrics(addr, Arc::clone(&state), Arc::clone(&metrics_stop))?;
        }
        let failed = Arc::new(AtomicBool::new(false));
        let mut housekeeping = Housekeeping {
            name: config.name.clone(),
            data_path: Arc::clone(&data_path),
            mirror: mirror.status_handle(),
            local_addresses: Vec::new(),
            failed: Arc::clone(&failed),
            next: Instant::now(),
        };
        housekeeping.sync_local_addresses();
        housekeeping.next = next_tick(Instant::now());
        // A source that panics is dropped by the loop and fails the switch, as a dead worker
        // does: it is stopped, the group's other members go on.
        let add = |source: Box<dyn Source>| control.add_watched(source, Some(Arc::clone(&failed)));
        let mut sources = vec![add(Box::new(follower)), add(Box::new(server))];
        if let Some((_, source)) = notifier {
            sources.push(add(Box::new(source)));
        }
        if let Some(source) = station_source {
            sources.push(add(Box::new(source)));
        }
        sources.push(add(Box::new(housekeeping)));
        tracing::info!(
            switch = %config.name,
            algorithm = %config.runtime.lb.algorithm,
            ports = config.runtime.ports.len(),
            pipes = config.runtime.pipes.len(),
            frame_size,
            frames_per_packet,
            link_rate = %ofan_topology::units::format_rate(config.runtime.ports.first().map_or(0, |p| p.egress.link_rate_bps)),
            socket = %config.admin_socket.display(),
            "forwarding"
        );
        // The program's load left tens of MB freed but held by the allocator.
        ofan_dataplane::afxdp::release_free_memory();
        Ok(Self {
            name: config.name,
            data_path,
            control: control.clone(),
            sources,
            failed,
            mirror,
            station,
            metrics_stop,
            _socket: socket,
        })
    }

    /// Whether a worker or a control source died (the switch should be stopped).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Takes the sources out of the loop and stops the control parts; the data path's runtime.
    fn halt(&mut self) -> Option<Runtime> {
        self.control.remove(&std::mem::take(&mut self.sources));
        self.metrics_stop.store(true, Ordering::Relaxed);
        lock(&self.data_path).take()
    }

    /// Stops the switch cleanly: workers stop, the program is detached, every frame is
    /// accounted for, the admin socket is removed.
    ///
    /// # Errors
    /// A worker died, or the frames do not balance.
    pub fn stop(mut self) -> anyhow::Result<()> {
        tracing::info!("stopping");
        let failed = self.failed();
        let report = self.halt().map(Runtime::stop);
        let Self {
            name,
            mirror,
            station,
            ..
        } = self;
        mirror.stop();
        if let Some(station) = station {
            station.stop();
        }
        if failed {
            anyhow::bail!("{name}: a worker or a control source died (see the log above)");
        }
        match report {
            Some(report) if !report.frames_balanced() => anyhow::bail!(
                "frame accounting is off after stop: {} frames, {} accounted for ({:?})",
                report.frames,
                report.census.total(),
                report.census
            ),
            Some(report) => {
                tracing::info!(frames = report.frames, "stopped; every frame accounted for");
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Ends the switch as a killed process would ([`Runtime::abandon`]: sockets closed, the
    /// program left attached with every port dropping, nothing else cleaned up).
    pub fn abandon(mut self) {
        tracing::warn!(switch = %self.name, "killed: data path abandoned, program left attached");
        if let Some(runtime) = self.halt() {
            runtime.abandon();
        }
        let Self {
            mirror, station, ..
        } = self;
        mirror.stop();
        if let Some(station) = station {
            station.stop();
        }
    }
}

/// How often the housekeeping looks.
const TICK: Duration = Duration::from_secs(1);

/// The next whole [`TICK`] of the monotonic clock after `now`: the housekeeping of every member
/// of a group comes due at once, one wake-up for all.
fn next_tick(now: Instant) -> Instant {
    let ns = ofan_dataplane::afxdp::monotonic_ns();
    let tick = TICK.as_nanos() as u64;
    now + Duration::from_nanos(tick - ns % tick)
}

/// What a switch checks without being asked: whether a worker died, and whether the mirror
/// found other local addresses (frames to them go to the kernel, not the data path).
struct Housekeeping {
    name: String,
    data_path: DataPath,
    mirror: Arc<Mutex<MirrorStatus>>,
    /// What the steering program has.
    local_addresses: Vec<std::net::IpAddr>,
    failed: Arc<AtomicBool>,
    next: Instant,
}

impl Housekeeping {
    /// Keeps the steering program's local-address sets equal to the addresses the FIB mirror
    /// last saw, so that frames to the switch's own addresses — BFD, ping — go to its kernel
    /// instead of the data path, which would drop them.
    fn sync_local_addresses(&mut self) {
        let Ok(mut wanted) = self.mirror.lock().map(|s| s.local_addresses.clone()) else {
            return;
        };
        wanted.sort_unstable();
        if wanted == self.local_addresses {
            return;
        }
        let mut data_path = lock(&self.data_path);
        let Some(steering) = data_path.as_mut().and_then(Runtime::steering_mut) else {
            return;
        };
        match steering.set_local_addrs(&wanted) {
            Ok(()) => {
                tracing::info!(
                    addresses = wanted.len(),
                    "local addresses steered to the kernel"
                );
                self.local_addresses = wanted;
            }
            Err(error) => tracing::warn!(%error, "cannot update the local addresses"),
        }
    }
}

impl Source for Housekeeping {
    fn interests(&self, _out: &mut Vec<(std::os::fd::RawFd, Interest)>) {}

    fn on_ready(&mut self, _fd: std::os::fd::RawFd, _now: Instant) {}

    fn deadline(&self) -> Option<Instant> {
        (!self.failed.load(Ordering::Relaxed)).then_some(self.next)
    }

    fn on_timer(&mut self, now: Instant) {
        self.next = next_tick(now);
        if lock(&self.data_path).as_mut().is_some_and(Runtime::failed) {
            tracing::error!(switch = %self.name, "a worker died: stopping the switch");
            self.failed.store(true, Ordering::Relaxed);
            return;
        }
        self.sync_local_addresses();
    }
}

/// A full-size frame on interface `name`: its MTU (in the switch's namespace) plus the 14-byte
/// Ethernet header; 1 514 when the MTU cannot be read.
fn full_frame_bytes(name: &str) -> u32 {
    ofan_dataplane::afxdp::mtu(name).map_or(1_514, |mtu| mtu + 14)
}
