//! The adaptive-routing notifier: a source of the switch's control loop
//! ([`ofan_control::event`]) that detects congestion on the fabric ports, tells the neighbours,
//! takes what they tell, and publishes the path-quality view the `arf-*` modes read.
//!
//! Every window it reads each fabric port's telemetry (the window's largest queue, in the port's
//! full-size frames, and its drops) into the port's detector
//! ([`Speaker::observe`]), ages the congestion table out, sends what [`Speaker::due`] says, and
//! rebuilds the view when a level changed. Between windows the loop waits on the notification
//! socket for it, so a received notification reaches the balancer at once: it is checked
//! ([`speaker::check`]: fabric port, TTL 255, parses, not about this switch), applied to the
//! table, and a changed table is published (`SwitchBalancer::set_path_quality`) before the next
//! datagram is read. Nothing here touches the workers but that atomic swap.
//!
//! **Hosts** (`notify_hosts`, multi-plane fabrics: the framework's endpoint plane). An edge
//! switch passes its plane's notifications on to the hosts on its host ports, through the same
//! socket and codec: every link message it accepted from a neighbour (changed or refreshed),
//! relayed byte for byte — originator, sequence and epoch stay the originator's —, and every
//! link message it originates about its own links. Flow messages are not passed on (they name
//! a path through the network, which a host does not choose). What a host makes of them is
//! `ofan_control::notify::host`.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use arc_swap::ArcSwap;
use ofan_control::event::{Interest, Source};
use ofan_control::notify::detect::Window;
use ofan_control::notify::report::{ArfMessage, ArfReport, Latency, COUNTERS};
use ofan_control::notify::speaker::{self, Arrival, Neighbour, Reject, Speaker};
use ofan_control::notify::transport::NotifySocket;
use ofan_control::notify::wire::{Notification, Quality};
use ofan_control::paths::LearnedPaths;
use ofan_dataplane::afxdp::monotonic_ns;
use ofan_dataplane::arf::flows::{name_flows, request_move, FiveTuple, FlowRedirect};
use ofan_dataplane::arf::{Applied, CongestionTable, PathQuality, Redirect, RemotePaths};
use ofan_dataplane::fib::{Fib, SharedFib};
use ofan_dataplane::lb::PortMask;
use ofan_dataplane::lb::SwitchBalancer;
use ofan_dataplane::telemetry::SwitchTelemetry;

use crate::config::AdaptiveRouting;

mod report;
use report::{log_message, push_recent};

/// Notifications kept for `stats`, each way.
const RECENT: usize = 16;

/// One port of the switch as the notifier sees it.
#[derive(Debug, Clone)]
pub struct PortInfo {
    /// Interface name.
    pub name: String,
    /// Whether it faces a switch (role up or down).
    pub fabric: bool,
    /// Bytes of a full-size frame on it (MTU + Ethernet header), the unit of the detector's
    /// queue reference.
    pub full_frame_bytes: u32,
}

/// What the notifier reads and writes.
pub struct Inputs {
    /// Settings.
    pub settings: AdaptiveRouting,
    /// Every port, in port-id order.
    pub ports: Vec<PortInfo>,
    /// Data-path telemetry.
    pub telemetry: Arc<SwitchTelemetry>,
    /// The balancer the view is published to.
    pub balancer: Arc<SwitchBalancer>,
    /// The forwarding table (destination keys, up-ports, next hops).
    pub fib: Arc<SharedFib>,
    /// The path table (next-next hops).
    pub learned: Arc<ArcSwap<LearnedPaths>>,
}

/// The notifier: its report, and the [`Source`] that does the work.
pub struct Notifier {
    /// What `stats` shows, refreshed every window.
    pub report: Arc<Mutex<ArfReport>>,
}

impl Notifier {
    /// Binds the socket (in the calling thread's namespace) and returns the notifier with its
    /// source, for the switch's control loop.
    ///
    /// # Errors
    /// When the socket cannot be bound.
    pub fn open(inputs: Inputs) -> anyhow::Result<(Self, NotifierSource)> {
        let socket = NotifySocket::bind(inputs.settings.port).with_context(|| {
            format!(
                "cannot bind the notification port {} (adaptive_routing.port)",
                inputs.settings.port
            )
        })?;
        let report = Arc::new(Mutex::new(ArfReport::default()));
        let state = State::new(inputs, socket, Arc::clone(&report));
        let window = state.inputs.settings.timing.window_ns;
        tracing::info!(
            port = state.socket.port(),
            window_ms = window / 1_000_000,
            "adaptive routing: notifications on"
        );
        Ok((
            Self { report },
            NotifierSource {
                next_window: next_window(window),
                state,
                buffer: [0; 256],
            },
        ))
    }
}

/// The next window boundary: whole windows of the monotonic clock, so that every member of a
/// group with the same window comes due in one wake-up of the loop.
fn next_window(window: u64) -> Instant {
    let now_ns = monotonic_ns();
    let boundary = (now_ns / window + 1) * window;
    Instant::now() + Duration::from_nanos(boundary - now_ns)
}

/// The notifier's control-loop source: the notification socket, and a deadline every window.
pub struct NotifierSource {
    state: State,
    next_window: Instant,
    buffer: [u8; 256],
}

impl Source for NotifierSource {
    fn interests(&self, out: &mut Vec<(RawFd, Interest)>) {
        out.push((self.state.socket.as_raw_fd(), Interest::Read));
    }

    fn on_ready(&mut self, _fd: RawFd, _now: Instant) {
        match self.state.socket.try_receive(&mut self.buffer) {
            Ok(Some(received)) => {
                let bytes = if received.truncated {
                    // Longer than any message: fails the length check.
                    &self.buffer[..]
                } else {
                    &self.buffer[..received.len]
                };
                let state = &mut self.state;
                let arrival = match received
                    .ifindex
                    .and_then(|index| state.ifindex.get(&index))
                    .and_then(|&id| state.inputs.ports.get(id))
                {
                    Some(port) if port.fabric => Arrival::Fabric,
                    Some(_) => Arrival::Host,
                    None => Arrival::Unknown,
                };
                state.receive(arrival, received.ttl, bytes, *received.from.ip());
            }
            Ok(None) => {}
            // Level-triggered: an error that stays would come back at once; the next window
            // tries again.
            Err(error) => tracing::warn!(%error, "adaptive routing: receive"),
        }
    }

    fn deadline(&self) -> Option<Instant> {
        Some(self.next_window)
    }

    fn on_timer(&mut self, _now: Instant) {
        self.state.window(monotonic_ns());
        self.next_window = next_window(self.state.inputs.settings.timing.window_ns);
    }
}

/// Ns since the Unix epoch (the clock notifications are stamped with).
fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Per fabric port: the last window's cumulative readings.
#[derive(Debug, Clone, Copy, Default)]
struct LastReading {
    drops: u64,
    peak: u64,
}

struct State {
    inputs: Inputs,
    socket: NotifySocket,
    report: Arc<Mutex<ArfReport>>,
    speaker: Option<Speaker>,
    table: CongestionTable,
    /// Interface index → port id.
    ifindex: BTreeMap<u32, usize>,
    last: Vec<LastReading>,
    counters: [u64; COUNTERS.len()],
    rejected: [u64; Reject::ALL.len()],
    latency: Latency,
    recent_sent: VecDeque<ArfMessage>,
    recent_received: VecDeque<ArfMessage>,
    generation: u64,
    /// The remote paths and what they were built from.
    paths: Option<(Arc<Fib>, Arc<LearnedPaths>, RemotePaths)>,
    published_local: Vec<Quality>,
    neighbours: Vec<Neighbour>,
    /// Flows neighbours named congested, each until it expires (monotonic ns).
    redirects: Vec<(FlowRedirect, u64)>,
}

fn counter(name: &str) -> usize {
    COUNTERS
        .iter()
        .position(|(n, _)| *n == name)
        .expect("a counter of the list")
}

impl State {
    fn new(inputs: Inputs, socket: NotifySocket, report: Arc<Mutex<ArfReport>>) -> Self {
        let settings = &inputs.settings;
        let speaker = settings.identity.map(|identity| {
            Speaker::new(
                identity,
                settings.timing,
                settings.thresholds,
                &settings.fabric_ports,
                speaker::epoch_now(),
            )
        });
        if speaker.is_none() {
            tracing::warn!(
                "adaptive routing: no ASN (adaptive_routing.asn or a topology); receiving only"
            );
        }
        let ifindex = inputs
            .ports
            .iter()
            .enumerate()
            .filter_map(|(id, port)| Some((ofan_dataplane::afxdp::ifindex(&port.name).ok()?, id)))
            .collect();
        // The first window counts from now, not from the data path's start.
        let last = (0..inputs.ports.len())
            .map(|id| {
                let reading = inputs.telemetry.take_window(id, 0);
                LastReading {
                    drops: reading.drops,
                    peak: reading.peak_depth_bytes,
                }
            })
            .collect();
        Self {
            socket,
            report,
            speaker,
            table: CongestionTable::default(),
            ifindex,
            last,
            counters: [0; COUNTERS.len()],
            rejected: [0; Reject::ALL.len()],
            latency: Latency::default(),
            recent_sent: VecDeque::new(),
            recent_received: VecDeque::new(),
            generation: 0,
            paths: None,
            published_local: Vec::new(),
            neighbours: Vec::new(),
            redirects: Vec::new(),
            inputs,
        }
    }

    fn count(&mut self, name: &str) {
        self.counters[counter(name)] += 1;
    }

    fn receive(&mut self, arrival: Arrival, ttl: Option<u8>, bytes: &[u8], from: Ipv4Addr) {
        self.count("received");
        let own = self.inputs.settings.identity.map(|id| id.router_id);
        if self.neighbours.is_empty() {
            // Before the first window: the neighbours as known now.
            self.neighbours = self.discover_neighbours();
        }
        let sender = self
            .neighbours
            .iter()
            .find(|n| n.addr == from)
            .map(|n| n.id.router_id);
        if self.paths.is_none() {
            self.refresh_paths();
        }
        let no_paths = RemotePaths::new(0, 0);
        let paths = self.paths.as_ref().map_or(&no_paths, |(_, _, paths)| paths);
        let verdict = speaker::check(arrival, ttl, bytes, own).and_then(|message| {
            speaker::trusted(&message, sender, paths)?;
            if message.flow.is_some() {
                // A flow message names a path, not a link state: never a table entry.
                return Ok((message, Applied::Refreshed));
            }
            let now = monotonic_ns();
            match self.table.apply(&speaker::update_of(&message), now) {
                Applied::Stale => Err(Reject::Stale),
                applied => Ok((message, applied)),
            }
        });
        if let Ok((message, _)) = &verdict {
            if message.flow.is_none() {
                self.send_to_hosts(bytes, "host_relayed");
            }
        }
        let logged = match verdict {
            Ok((message, _)) if message.flow.is_some() => {
                self.flow_message(&message);
                log_message(from.to_string(), &message, None)
            }
            Ok((message, Applied::Changed)) => {
                self.count("applied");
                self.publish();
                let latency = unix_ns() as i64 - message.timestamp_ns as i64;
                self.latency.record(latency);
                log_message(from.to_string(), &message, None)
            }
            Ok((message, _)) => {
                self.count("refreshed");
                log_message(from.to_string(), &message, None)
            }
            Err(reason) => {
                self.rejected[Reject::ALL
                    .iter()
                    .position(|r| *r == reason)
                    .unwrap_or_default()] += 1;
                match Notification::parse(bytes) {
                    Ok(message) => log_message(from.to_string(), &message, Some(reason)),
                    Err(_) => ArfMessage {
                        peer: from.to_string(),
                        what: format!("rejected:{}", reason.name()),
                        near: Ipv4Addr::UNSPECIFIED,
                        far: Ipv4Addr::UNSPECIFIED,
                        quality: 0,
                        sequence: 0,
                        timestamp_ns: 0,
                    },
                }
            }
        };
        push_recent(&mut self.recent_received, logged);
    }

    /// A trusted flow message: asks the balancer to move the flow off the up-ports whose
    /// neighbour is the link's near end, towards the flow's destination key, for the message's
    /// hold time; a flow with no such path here (this switch does not carry it there) changes
    /// nothing.
    fn flow_message(&mut self, message: &Notification) {
        self.count("flow_received");
        let Some(flow) = message.flow else {
            return;
        };
        let fib = self.inputs.fib.load();
        // The up-ports whose neighbour is the link's near end: the flow's path crosses the
        // link there.
        let avoid = self
            .neighbours
            .iter()
            .filter(|n| n.id.router_id == message.link.near)
            .filter_map(|n| {
                fib.port(ofan_dataplane::fib::PortId(n.port as u16))?
                    .up_position
            })
            .fold(PortMask::EMPTY, PortMask::with);
        let request = fib
            .dest_key(IpAddr::V4(flow.dst))
            .map(|key| FlowRedirect {
                flow_hash: flow.flow_hash(),
                key,
                avoid,
            })
            .filter(|request| !request.avoid.is_empty());
        let Some(request) = request else {
            self.count("flow_not_carried");
            return;
        };
        self.count("flow_applied");
        let until = monotonic_ns() + u64::from(message.hold_ms) * 1_000_000;
        request_move(&mut self.redirects, request, until);
        self.publish();
    }

    /// Requests moves of the flows `named` on this switch's own congested up-ports; whether
    /// any was requested.
    fn local_redirects(&mut self, named: &[(u32, Vec<FiveTuple>)], now: u64) -> bool {
        let fib = self.inputs.fib.load();
        let hold_ns = u64::from(self.inputs.settings.timing.hold_ms()) * 1_000_000;
        let mut any = false;
        for (port, flows) in named {
            let Some(position) = fib
                .port(ofan_dataplane::fib::PortId(*port as u16))
                .and_then(|p| p.up_position)
            else {
                continue;
            };
            for flow in flows {
                let Some(key) = fib.dest_key(IpAddr::V4(flow.dst)) else {
                    continue;
                };
                let request = FlowRedirect {
                    flow_hash: flow.flow_hash(),
                    key,
                    avoid: PortMask::EMPTY.with(position),
                };
                request_move(&mut self.redirects, request, now + hold_ns);
                self.counters[counter("flow_local")] += 1;
                any = true;
            }
        }
        any
    }

    /// One detection window.
    fn window(&mut self, now: u64) {
        // `arf-flow`: the flows each fabric port carried this window, named when it is told
        // congested.
        let mut named: BTreeMap<u32, Vec<FiveTuple>> = BTreeMap::new();
        for &port in &self.inputs.settings.fabric_ports {
            let id = port as usize;
            let flows = name_flows(&self.inputs.telemetry.take_flows(id));
            if !flows.is_empty() {
                named.insert(port, flows);
            }
            let last = self.last[id];
            let reading = self.inputs.telemetry.take_window(id, last.peak);
            self.last[id] = LastReading {
                drops: reading.drops,
                peak: reading.peak_depth_bytes,
            };
            let observed = Window {
                max_queue_bytes: reading.max_depth_bytes,
                full_frame_bytes: self.inputs.ports[id].full_frame_bytes,
                drops: reading.drops.saturating_sub(last.drops),
            };
            let down = self
                .inputs
                .fib
                .load()
                .port(ofan_dataplane::fib::PortId(port as u16))
                .is_some_and(|p| !p.oper_up);
            if let Some(speaker) = &mut self.speaker {
                if let Some(kind) = speaker.set_down(port, down) {
                    tracing::info!(port = %self.inputs.ports[id].name, ?kind, "adaptive routing: port state");
                }
                if let Some(kind) = speaker.observe(port, &observed) {
                    tracing::debug!(port = %self.inputs.ports[id].name, ?kind, "adaptive routing: local change");
                }
            }
        }
        let expired = self.table.expire(now);
        self.counters[counter("expired")] += expired as u64;
        let requests = self.redirects.len();
        self.redirects.retain(|&(_, until)| until > now);
        let expired = expired + (requests - self.redirects.len());

        self.neighbours = self.discover_neighbours();
        // A neighbour behind a port that is down cannot be reached (it still names the far end
        // of that port's failed link).
        let unreachable: Vec<Ipv4Addr> = {
            let fib = self.inputs.fib.load();
            self.neighbours
                .iter()
                .filter(|n| {
                    fib.port(ofan_dataplane::fib::PortId(n.port as u16))
                        .is_some_and(|p| !p.oper_up)
                })
                .map(|n| n.addr)
                .collect()
        };
        let mut local: Vec<(u32, Vec<FiveTuple>)> = Vec::new();
        let mut told: Vec<Notification> = Vec::new();
        if let Some(speaker) = &mut self.speaker {
            let mut out = speaker.due(now, unix_ns(), &self.neighbours);
            // Every window a port stays congested: one message per flow that fills it.
            let stamp = unix_ns();
            let mut flows = Vec::new();
            for (&port, named) in &named {
                let messages = speaker.flow_messages(port, named, stamp, &self.neighbours);
                if !messages.is_empty() {
                    // The congestion point itself moves those flows off its own up-port (the
                    // draft's local adjustment), as a neighbour's request would.
                    local.push((port, named.clone()));
                }
                flows.extend(messages);
            }
            self.counters[counter("flow_sent")] += flows.len() as u64;
            // Each link message once to every host (the fan-out copied it per neighbour).
            for outgoing in &out {
                if !told.contains(&outgoing.message) {
                    told.push(outgoing.message);
                }
            }
            out.extend(flows);
            let mut buffer = [0u8; 64];
            for outgoing in out.into_iter().filter(|o| !unreachable.contains(&o.to)) {
                let Some(len) = outgoing.message.emit(&mut buffer) else {
                    continue;
                };
                match self.socket.send(outgoing.to, &buffer[..len]) {
                    Ok(()) => self.counters[counter("sent")] += 1,
                    Err(error) => {
                        self.counters[counter("send_errors")] += 1;
                        tracing::debug!(%error, to = %outgoing.to, "adaptive routing: send");
                    }
                }
                push_recent(
                    &mut self.recent_sent,
                    log_message(outgoing.to.to_string(), &outgoing.message, None),
                );
            }
        }
        let mut buffer = [0u8; 64];
        for message in told {
            if let Some(len) = message.emit(&mut buffer) {
                self.send_to_hosts(&buffer[..len], "host_told");
            }
        }
        if self.local_redirects(&local, now) {
            self.publish();
        }
        let paths_changed = self.refresh_paths();
        if expired > 0 || paths_changed || self.local_levels() != self.published_local {
            self.publish();
        }
        self.write_report(now);
    }

    /// The switch neighbours: the plan's, else the FIB's next hops on fabric ports named by the
    /// path table (ASN and BGP identifier).
    fn discover_neighbours(&self) -> Vec<Neighbour> {
        if !self.inputs.settings.plan_neighbours.is_empty() {
            return self.inputs.settings.plan_neighbours.clone();
        }
        let learned = self.inputs.learned.load();
        let id_of: BTreeMap<Ipv4Addr, speaker::Identity> = learned
            .routes
            .values()
            .flat_map(|neighbours| {
                neighbours.iter().map(|(addr, paths)| {
                    (
                        *addr,
                        speaker::Identity {
                            asn: paths.asn,
                            router_id: paths.router_id,
                        },
                    )
                })
            })
            .collect();
        let fib = self.inputs.fib.load();
        let mut found: Vec<Neighbour> = Vec::new();
        for group in fib.groups() {
            for hop in group.hops() {
                let IpAddr::V4(addr) = hop.gateway else {
                    continue;
                };
                let port = u32::from(hop.port.0);
                if !self.inputs.settings.fabric_ports.contains(&port)
                    || found.iter().any(|n| n.addr == addr)
                {
                    continue;
                }
                if let Some(&id) = id_of.get(&addr) {
                    found.push(Neighbour { port, addr, id });
                }
            }
        }
        found
    }

    /// The local level of each up-port position.
    fn local_levels(&self) -> Vec<Quality> {
        let fib = self.inputs.fib.load();
        (0..fib.up_port_count())
            .map(|position| {
                fib.up_port(ofan_dataplane::lb::UpPort(position))
                    .and_then(|port| {
                        self.speaker
                            .as_ref()
                            .and_then(|s| s.level(u32::from(port.0)))
                    })
                    .map_or(Quality::BEST, |(level, _)| level)
            })
            .collect()
    }

    /// Rebuilds the remote paths when the FIB or the path table changed; whether they did.
    fn refresh_paths(&mut self) -> bool {
        let fib = self.inputs.fib.load_full();
        let learned = self.inputs.learned.load_full();
        if let Some((built_fib, built_learned, _)) = &self.paths {
            if Arc::ptr_eq(built_fib, &fib) && Arc::ptr_eq(built_learned, &learned) {
                return false;
            }
        }
        let config = self.inputs.balancer.config();
        let directory = &self.inputs.settings.router_ids;
        let resolve = |asn: u32| directory.get(&asn).copied();
        let paths = ofan_control::paths::remote_paths(
            &fib,
            &learned,
            config.up_ports,
            config.dest_keys,
            &resolve,
        );
        self.paths = Some((fib, learned, paths));
        true
    }

    /// Sends `bytes` (one link message) to every host of `settings.hosts`, counting each
    /// datagram under `counter_name`.
    fn send_to_hosts(&mut self, bytes: &[u8], counter_name: &str) {
        for index in 0..self.inputs.settings.hosts.len() {
            let host = self.inputs.settings.hosts[index];
            match self.socket.send(host, bytes) {
                Ok(()) => self.counters[counter(counter_name)] += 1,
                Err(error) => {
                    self.counters[counter("send_errors")] += 1;
                    tracing::debug!(%error, to = %host, "adaptive routing: send to a host");
                }
            }
        }
    }

    /// Builds and publishes a new view.
    fn publish(&mut self) {
        if self.paths.is_none() {
            self.refresh_paths();
        }
        let Some((_, _, paths)) = &self.paths else {
            return;
        };
        let local = self.local_levels();
        self.generation += 1;
        let mut view = PathQuality::build(&local, &self.table, paths, self.generation);
        let settings = &self.inputs.settings;
        view.redirect = Redirect::of(&settings.thresholds, settings.timing.refresh_ns);
        view.combine = settings.combine;
        view.redirects = self.redirects.iter().map(|&(request, _)| request).collect();
        self.inputs.balancer.set_path_quality(Arc::new(view));
        self.published_local = local;
        self.counters[counter("published")] += 1;
    }
}
