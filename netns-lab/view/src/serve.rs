//! The view's server: one sampler thread that reads the lab every interval, and the routes of
//! [`ofan_control::endpoint::serve_routes`] that hand out what it read.
//!
//! | route | what |
//! |---|---|
//! | `GET /` | the page ([`PAGE`]: HTML, CSS and JS in one file, compiled into the binary) |
//! | `GET /api/topology` | [`TopologyView`] as JSON |
//! | `GET /api/frame` | the latest [`Frame`] as JSON |
//! | `GET /api/switch/NAME` | switch NAME's latest typed stats as JSON (what `ofan-switch stats --json` prints) |
//! | `GET /events` | server-sent events: `frame` (a [`Frame`]) after every sample, `gone` when the lab is removed |
//! | `GET /metrics` | the whole lab in the Prometheus text format ([`super::metrics`]) |
//!
//! The sampler is the only reader of the switches, whatever the number of pages and scrapers:
//! each request answers from its latest sample.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ofan_control::endpoint::{self, EndpointCounters, EventSink, HttpReply, Limits};

use super::metrics;
use super::model::{frame, Frame, FrameInput, Sample, TopologyView};
use ofan_lab::{self as lab, status, Loaded};
use ofan_lab_experiment::progress;

/// The page, served at `/`.
pub const PAGE: &str = include_str!("page.html");

/// The view's default address: loopback only (the counters are the lab's, not the world's).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The default sampling interval: 2 frames a second.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(500);
/// The shortest sampling interval: every switch is asked at every sample.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);
/// Pages and scrapers served at once (an open page holds one for its event stream).
pub const MAX_CLIENTS: usize = 16;

/// How a view is served.
#[derive(Debug, Clone, Copy)]
pub struct ViewOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// How often the lab is sampled (and a frame pushed); at least [`MIN_INTERVAL`].
    pub interval: Duration,
}

/// Why a view cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The lab does not exist or cannot be read.
    #[error("{0:#}")]
    Lab(anyhow::Error),
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the view's threads: {0}")]
    Thread(std::io::Error),
}

/// What the sampler last read.
struct Latest {
    seq: u64,
    frame_json: Arc<String>,
    sample: Option<Arc<SampleOf>>,
    gone: Option<String>,
}

struct Shared {
    topology_json: String,
    latest: Mutex<Latest>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Latest> {
        self.latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running view; stops (its threads end within an interval) when dropped.
#[derive(Debug)]
pub struct RunningView {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    /// Set by the sampler when the lab is gone.
    gone: Arc<AtomicBool>,
}

impl RunningView {
    /// The address it listens on (the port chosen, when asked for port 0).
    #[must_use]
    pub const fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Blocks until the lab is gone (`ofan-lab down`), and a second more, so that every open
    /// page is told (its `gone` event). Without that the command line runs until Ctrl-C.
    pub fn wait(&self) {
        while !self.gone.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

impl Drop for RunningView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Serves the live view of lab `name`.
///
/// # Errors
/// No such lab, the address taken, no threads.
pub fn serve(name: &str, options: ViewOptions) -> Result<RunningView, ViewError> {
    let loaded = lab::load(name).map_err(ViewError::Lab)?;
    let listener = TcpListener::bind(options.listen).map_err(|source| ViewError::Listen {
        addr: options.listen,
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| ViewError::Listen {
        addr: options.listen,
        source,
    })?;
    let view = TopologyView::of(&loaded.state.name, &loaded.topology);
    let shared = Arc::new(Shared {
        topology_json: serde_json::to_string(&view).unwrap_or_default(),
        latest: Mutex::new(Latest {
            seq: 0,
            frame_json: Arc::new(String::new()),
            sample: None,
            gone: None,
        }),
        changed: Condvar::new(),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let interval = options.interval.max(MIN_INTERVAL);
    // The first sample before the first request, so that no page waits for it.
    let mut sampler = Sampler::new(loaded);
    sampler.step(&shared);
    let gone = Arc::new(AtomicBool::new(false));
    let (sampler_shared, sampler_stop) = (Arc::clone(&shared), Arc::clone(&stop));
    let sampler_gone = Arc::clone(&gone);
    std::thread::Builder::new()
        .name("ofan-view-sample".into())
        .spawn(move || {
            let mut next = Instant::now() + interval;
            while !sampler_stop.load(Ordering::Relaxed) {
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                next += interval;
                if !sampler.step(&sampler_shared) {
                    sampler_gone.store(true, Ordering::Relaxed);
                    break;
                }
            }
        })
        .map_err(ViewError::Thread)?;
    let routes_shared = Arc::clone(&shared);
    let routes = move |path: &str| route(&routes_shared, path);
    let limits = Limits {
        max_clients: MAX_CLIENTS,
        deadline: Duration::from_secs(2),
    };
    endpoint::serve_routes(
        listener,
        limits,
        Arc::new(EndpointCounters::default()),
        Arc::new(routes),
        Arc::clone(&stop),
    )
    .map_err(ViewError::Thread)?;
    Ok(RunningView { addr, stop, gone })
}

const JSON: &str = "application/json";

fn route(shared: &Arc<Shared>, path: &str) -> HttpReply {
    match path {
        "/" | "/index.html" => HttpReply::ok("text/html; charset=utf-8", PAGE),
        "/api/topology" => HttpReply::ok(JSON, shared.topology_json.clone()),
        "/api/frame" => HttpReply::ok(JSON, shared.lock().frame_json.as_str()),
        "/metrics" => {
            let sample = shared.lock().sample.clone();
            match sample {
                Some(sample) => HttpReply::ok(
                    endpoint::PROMETHEUS_TEXT,
                    metrics::render(&sample.topology, &sample.sample),
                ),
                None => HttpReply::not_found("no sample yet\n"),
            }
        }
        "/events" => {
            let shared = Arc::clone(shared);
            HttpReply::Events(Box::new(move |sink| events(&shared, sink)))
        }
        _ => match path.strip_prefix("/api/switch/") {
            Some(name) => {
                let sample = shared.lock().sample.clone();
                let stats = sample.as_ref().and_then(|s| s.sample.switches.get(name));
                match stats {
                    Some((state, stats)) => HttpReply::ok(
                        JSON,
                        serde_json::json!({ "name": name, "state": state.label(), "stats": stats })
                            .to_string(),
                    ),
                    None => HttpReply::not_found("no such switch\n"),
                }
            }
            None => HttpReply::not_found(
                "try / (the page), /events, /metrics, /api/topology, /api/frame, /api/switch/NAME\n",
            ),
        },
    }
}

/// One page's event stream: every new frame as it comes, until the client leaves.
fn events(shared: &Shared, sink: &mut EventSink<'_>) {
    let mut seen = 0;
    loop {
        let (seq, json, gone) = {
            let latest = shared.lock();
            let (latest, _) = shared
                .changed
                .wait_timeout_while(latest, Duration::from_secs(5), |latest| {
                    latest.seq == seen && latest.gone.is_none()
                })
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            (
                latest.seq,
                Arc::clone(&latest.frame_json),
                latest.gone.clone(),
            )
        };
        if sink.stopped() {
            return;
        }
        let sent = if seq != seen {
            seen = seq;
            sink.send("frame", &json)
        } else if let Some(why) = gone {
            let _ = sink.send("gone", &why);
            return;
        } else {
            // Nothing new for 5 s: a comment-free keep-alive the page ignores.
            sink.send("idle", "{}")
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Reads the lab each interval and keeps the previous sample for the rates.
struct Sampler {
    loaded: Loaded,
    previous: Option<Arc<SampleOf>>,
    seq: u64,
}

/// A sample with the topology it belongs to (for `/metrics`).
struct SampleOf {
    topology: ofan_topology::Topology,
    sample: Sample,
}

impl Sampler {
    const fn new(loaded: Loaded) -> Self {
        Self {
            loaded,
            previous: None,
            seq: 0,
        }
    }

    /// One sample, published; `false` once the lab is gone.
    fn step(&mut self, shared: &Shared) -> bool {
        let lab = &mut self.loaded;
        match lab.dir.load() {
            Ok(state) => lab.state = state,
            Err(error) => {
                let mut latest = shared.lock();
                latest.gone = Some(format!("lab `{}` is gone: {error}", lab.state.name));
                shared.changed.notify_all();
                return false;
            }
        }
        let sample = read(lab);
        let params = &lab.state.params;
        let buffer_bytes = ofan_topology::units::parse_size(&params.buffer).unwrap_or(0);
        self.seq += 1;
        let frame: Frame = frame(&FrameInput {
            topology: &lab.topology,
            before: self.previous.as_ref().map(|p| &p.sample),
            now: &sample,
            rate_bps: params.link_rate_bps,
            buffer_bytes,
            seq: self.seq,
        });
        let json = serde_json::to_string(&frame).unwrap_or_default();
        let current = Arc::new(SampleOf {
            topology: lab.topology.clone(),
            sample,
        });
        self.previous = Some(Arc::clone(&current));
        let mut latest = shared.lock();
        latest.seq = self.seq;
        latest.frame_json = Arc::new(json);
        latest.sample = Some(current);
        shared.changed.notify_all();
        true
    }
}

/// Every switch's state and stats, every link's state, the running collective's progress.
fn read(lab: &Loaded) -> Sample {
    let failures = lab.failures();
    let switches = lab
        .topology
        .switches()
        .iter()
        .map(|switch| (switch.name.clone(), status::ask(lab, &switch.name)))
        .collect();
    let links = lab
        .topology
        .links()
        .iter()
        .map(|link| status::link_state(lab, &failures, link))
        .collect();
    Sample {
        at_ns: ofan_lab_agent::monotonic_now_ns(),
        switches,
        links,
        progress: progress::read(lab.dir.root()),
    }
}
