//! The FIB mirror: what the kernel of the switch's namespace forwards by, the data path forwards
//! by.
//!
//! The mirror's [`Follower`] — a source of the switch's control loop ([`crate::event`]), or of a
//! loop on a thread of its own ([`Mirror::start`]) — dumps links, addresses, routes, next-hop
//! objects and neighbours over rtnetlink, turns them into an immutable [`Fib`] and publishes it with one atomic swap; the
//! workers pick it up at their next batch. It then listens to the kernel's change notifications
//! and rebuilds whenever one arrives (after a 2 ms pause that lets a burst of changes settle),
//! and dumps again without one every [`RESYNC_RESOLVING`] while some next hop waits for its MAC
//! address, every [`RESYNC_QUIET`] otherwise (a safety net: a lost notification shows as an
//! error on the socket, which rebuilds at once). Whoever writes the kernel FIB — `ip route`, the
//! lab, FRR's zebra for BGP — is thereby the data path's routing source.
//!
//! Next hops whose MAC address the kernel does not know yet are resolved through the kernel: the
//! mirror asks for a *managed* neighbour entry (the kernel resolves it and keeps it fresh) and, if
//! the kernel refuses that, sends a one-off UDP probe out of the port. It asks for the same for
//! every neighbour the table forwards to that is resolved already (say, learnt from the peer's
//! own ARP request): the kernel never sends through them itself — the data path does — so an
//! ordinary entry goes stale and the kernel's garbage collection deletes it once the machine's
//! neighbour table holds more than `gc_thresh1` entries (128; all namespaces count), and frames
//! to it are dropped until it is resolved again. A managed entry is re-probed and left alone.
//! (Seen in a k = 8 lab, 768 entries: each switch's ordinary entries deleted about a minute
//! after `up`, while its first runs were running.) A *permanent* entry — an administrator's,
//! with its address — is never aged, probed or deleted, so it is used as it is and never
//! replaced: a managed entry would have to be resolved again, and a neighbour that does not
//! answer ARP (the forwarding benchmark's sink drops everything) would then never be.
//!
//! A next hop that stays unresolved is said loudly: in the status (`unresolved`, and
//! `unresolved_for_ms` for the oldest), which `ofan-switch stats` prints as a warning with the
//! frames dropped for it, and once in the log after [`UNRESOLVED_WARN_AFTER`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ofan_dataplane::fib::{
    Fib, FibError, IpPrefix, NextHop, Port, PortId, PortRole, RouteTarget, SharedFib,
};
use ofan_dataplane::lb::DestKey;

use ofan_netlink::{
    dump_request, managed_neighbor_request, Dump, Group, IpFamily, NeighborKind, QueryError,
    RouteHop, RouteKind, RouteSocket,
};

use crate::event::{self, Interest, Source};
use crate::kernel::KernelState;
use crate::sys;

/// How long a dump waits for each datagram of the kernel's answer.
const DUMP_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the mirror waits for the kernel to acknowledge a managed neighbour.
const ACK_TIMEOUT: Duration = Duration::from_millis(100);

/// One port as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// Interface name.
    pub name: String,
    /// Where it leads.
    pub role: PortRole,
}

/// What the mirror needs besides the kernel's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorConfig {
    /// The switch's ports, in `PortId` order.
    pub ports: Vec<PortConfig>,
    /// Destination prefix → key (paper §4.1 consolidation).
    pub keys: Vec<(IpPrefix, DestKey)>,
    /// Number of destination keys.
    pub dest_keys: u32,
}

/// Why the mirror could not build a table.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// Netlink I/O failed.
    #[error("rtnetlink: {0}")]
    Netlink(#[from] io::Error),
    /// A configured port does not exist in the namespace.
    #[error("port `{name}` does not exist in this network namespace")]
    NoSuchPort {
        /// The interface name.
        name: String,
    },
    /// The table is inconsistent.
    #[error("cannot build the forwarding table: {0}")]
    Fib(#[from] FibError),
}

/// The mirror's view of itself, for `stats` and tests.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MirrorStatus {
    /// Tables published so far.
    pub generation: u64,
    /// Tables published since the first because the kernel's routes changed (routes or
    /// next-hop objects: a routing daemon's update, a link's routes going with it) — not for a
    /// neighbour or an address. A run over a stable fabric sees none.
    #[serde(default)]
    pub route_changes: u64,
    /// Routes in the current table (IPv4, IPv6).
    pub routes: (usize, usize),
    /// Next-hop groups in the current table.
    pub groups: usize,
    /// Next hops whose MAC address is not known yet (`10.0.1.2 on p1`): frames routed only
    /// through them are dropped (`neighbor_unresolved`).
    pub unresolved: Vec<String>,
    /// How long the oldest of them has been unresolved, milliseconds as of this report (`None`
    /// when every next hop is resolved). A next hop is resolved within milliseconds when its
    /// neighbour answers ARP or neighbour discovery; seconds mean it does not.
    #[serde(default)]
    pub unresolved_for_ms: Option<u64>,
    /// Routes skipped because none of their hops leaves through a port.
    pub routes_not_via_ports: usize,
    /// The last error, if the latest rebuild failed.
    pub last_error: Option<String>,
    /// The namespace's own addresses in the current table: the switch passes frames to them
    /// to its kernel already in the XDP program (BFD, ping).
    #[serde(default)]
    pub local_addresses: Vec<IpAddr>,
    /// How long the routes have been still, milliseconds as of this report: since the last
    /// table published for a route change, `None` if none was since the first table. The lab
    /// starts a repetition only when every switch's routes have been still for a while.
    #[serde(default)]
    pub routes_still_ms: Option<u64>,
    /// When the last table for a route change was published.
    #[serde(skip)]
    last_route_change: Option<Instant>,
    /// Since when the oldest unresolved next hop has been unresolved.
    #[serde(skip)]
    unresolved_since: Option<Instant>,
}

impl MirrorStatus {
    /// The status as of now, for a report: [`Self::routes_still_ms`] filled in.
    #[must_use]
    pub fn report(&self) -> Self {
        let ms_since = |at: Instant| u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
        Self {
            routes_still_ms: self.last_route_change.map(ms_since),
            unresolved_for_ms: self.unresolved_since.map(ms_since),
            ..self.clone()
        }
    }
}

/// Dumps everything the mirror reads.
///
/// # Errors
/// Netlink errors.
pub fn dump(socket: &mut RouteSocket) -> io::Result<KernelState> {
    let mut state = KernelState::default();
    for what in [
        Dump::Links,
        Dump::Addresses,
        Dump::Nexthops,
        Dump::Routes(IpFamily::V4),
        Dump::Routes(IpFamily::V6),
        Dump::Neighbors,
    ] {
        match socket.query(
            |seq| dump_request(what, seq),
            DUMP_TIMEOUT,
            |message| state.absorb(message),
        ) {
            Ok(()) => {}
            // Next-hop objects need kernel 5.3; an older kernel just has none.
            Err(QueryError::Refused(_)) if what == Dump::Nexthops => {}
            Err(error) => return Err(error.into()),
        }
    }
    Ok(state)
}

/// What [`build_fib`] produced besides the table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildNotes {
    /// `(interface index, interface name, gateway)` of hops without a MAC address.
    pub unresolved: Vec<(u32, String, IpAddr)>,
    /// The same of every neighbour the table forwards to whose entry the kernel's neighbour
    /// discovery keeps, resolved or not (a superset of `unresolved`), sorted: the entries the
    /// mirror looks after. A permanent entry is an administrator's, never aged or deleted, and
    /// is left alone ([`NeighborKind::Permanent`]).
    pub dynamic_neighbors: Vec<(u32, String, IpAddr)>,
    /// Routes none of whose hops leaves through a port.
    pub routes_not_via_ports: usize,
    /// The namespace's own addresses.
    pub local_addresses: Vec<IpAddr>,
}

/// Turns the kernel's state into the data path's table.
///
/// # Errors
/// [`MirrorError::NoSuchPort`] for a configured port the namespace lacks, [`MirrorError::Fib`]
/// if the result is inconsistent.
pub fn build_fib(
    state: &KernelState,
    config: &MirrorConfig,
) -> Result<(Fib, BuildNotes), MirrorError> {
    let mut builder = Fib::builder();
    let mut port_of_ifindex = HashMap::new();
    let mut up_position = 0u8;
    for (id, port) in config.ports.iter().enumerate() {
        let link = state
            .links
            .values()
            .find(|link| link.name == port.name)
            .ok_or_else(|| MirrorError::NoSuchPort {
                name: port.name.clone(),
            })?;
        let position = (port.role == PortRole::Up).then(|| {
            up_position += 1;
            up_position - 1
        });
        builder.port(
            PortId(id as u16),
            Port {
                ifindex: link.index,
                mac: link.mac,
                role: port.role,
                up_position: position,
                oper_up: link.oper_up,
            },
        );
        port_of_ifindex.insert(link.index, (PortId(id as u16), link.name.clone()));
    }
    let mut notes = BuildNotes::default();
    for address in &state.addresses {
        builder.local_address(address.addr);
        notes.local_addresses.push(address.addr);
    }
    for &(prefix, key) in &config.keys {
        builder.dest_key(prefix, key);
    }
    builder.dest_keys(config.dest_keys);

    // Among routes to the same prefix, the lowest metric wins (as in the kernel).
    let mut best: BTreeMap<IpPrefix, (u32, RouteTarget)> = BTreeMap::new();
    let mut groups: HashMap<Vec<HopKey>, ofan_dataplane::fib::GroupId> = HashMap::new();
    let key_of = |hops: &[NextHop]| -> Vec<HopKey> {
        hops.iter().map(|h| (h.port.0, h.gateway, h.mac)).collect()
    };
    fn offer(
        best: &mut BTreeMap<IpPrefix, (u32, RouteTarget)>,
        prefix: IpPrefix,
        metric: u32,
        target: RouteTarget,
    ) {
        match best.get(&prefix) {
            Some(&(existing, _)) if existing <= metric => {}
            _ => {
                best.insert(prefix, (metric, target));
            }
        }
    }
    for route in &state.routes {
        let Ok(prefix) = IpPrefix::new(route.dst, route.prefix_len) else {
            continue;
        };
        match &route.kind {
            RouteKind::Local => offer(&mut best, prefix, 0, RouteTarget::Local),
            RouteKind::Reject => offer(&mut best, prefix, route.metric, RouteTarget::Unreachable),
            RouteKind::Other => {}
            RouteKind::Unicast { hops, nh_id } => {
                let Some(hops) = state.hops_of(hops, *nh_id) else {
                    offer(&mut best, prefix, route.metric, RouteTarget::Unreachable);
                    continue;
                };
                let mut next_hops = Vec::new();
                for hop in &hops {
                    let Some((port, name)) = port_of_ifindex.get(&hop.ifindex) else {
                        continue;
                    };
                    let Some(gateway) = gateway_of(state, &prefix, hop) else {
                        // A connected subnet wider than a point-to-point link: its neighbours get
                        // host routes below.
                        continue;
                    };
                    let entry = state.neighbors.get(&(hop.ifindex, gateway));
                    let mac = entry.and_then(|entry| entry.mac);
                    if mac.is_none() {
                        notes.unresolved.push((hop.ifindex, name.clone(), gateway));
                    }
                    if entry.is_none_or(|entry| entry.kind == NeighborKind::Dynamic) {
                        notes
                            .dynamic_neighbors
                            .push((hop.ifindex, name.clone(), gateway));
                    }
                    next_hops.push(NextHop {
                        port: *port,
                        gateway,
                        mac,
                    });
                }
                if next_hops.is_empty() {
                    notes.routes_not_via_ports += 1;
                    continue;
                }
                next_hops.sort_by_key(|hop| (hop.port, hop.gateway));
                next_hops.dedup();
                let group = *groups
                    .entry(key_of(&next_hops))
                    .or_insert_with(|| builder.group(next_hops.iter().copied()));
                offer(&mut best, prefix, route.metric, RouteTarget::Group(group));
            }
        }
    }
    // Neighbours on connected multi-access subnets: host routes, unless a route exists.
    for (&(ifindex, addr), entry) in &state.neighbors {
        let (Some((port, name)), Some(mac)) = (port_of_ifindex.get(&ifindex), entry.mac) else {
            continue;
        };
        let prefix = IpPrefix::host(addr);
        if best.contains_key(&prefix) || is_link_local(addr) {
            continue;
        }
        if entry.kind == NeighborKind::Dynamic {
            notes.dynamic_neighbors.push((ifindex, name.clone(), addr));
        }
        let hop = NextHop {
            port: *port,
            gateway: addr,
            mac: Some(mac),
        };
        let group = *groups
            .entry(key_of(&[hop]))
            .or_insert_with(|| builder.group([hop]));
        offer(&mut best, prefix, u32::MAX, RouteTarget::Group(group));
    }
    for (prefix, (_, target)) in best {
        builder.route(prefix, target);
    }
    notes.unresolved.sort();
    notes.unresolved.dedup();
    notes.dynamic_neighbors.sort();
    notes.dynamic_neighbors.dedup();
    Ok((builder.build()?, notes))
}

/// A next hop as a hashable key, to share one group between routes with the same hops.
type HopKey = (u16, IpAddr, Option<[u8; 6]>);

fn is_link_local(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

/// The neighbour a hop forwards to: its gateway, or for a directly connected point-to-point
/// prefix (/31, /32, /127, /128) the other end of the link.
fn gateway_of(state: &KernelState, prefix: &IpPrefix, hop: &RouteHop) -> Option<IpAddr> {
    if let Some(gateway) = hop.gateway {
        return Some(gateway);
    }
    match (prefix.addr(), prefix.prefix_len()) {
        (IpAddr::V4(_), 32) | (IpAddr::V6(_), 128) => Some(prefix.addr()),
        (IpAddr::V4(_), 31) | (IpAddr::V6(_), 127) => {
            // The peer is the address of the pair that is not ours.
            let ours = state
                .addresses
                .iter()
                .find(|a| a.index == hop.ifindex && prefix.contains(a.addr))?
                .addr;
            Some(match ours {
                IpAddr::V4(v4) => IpAddr::V4((v4.to_bits() ^ 1).into()),
                IpAddr::V6(v6) => IpAddr::V6((v6.to_bits() ^ 1).into()),
            })
        }
        _ => None,
    }
}

/// A running mirror: its status and its listener (its [`Follower`] is in a control loop).
pub struct Mirror {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    status: Arc<Mutex<MirrorStatus>>,
    shared: Arc<SharedFib>,
    listener: Arc<Mutex<Option<Listener>>>,
}

/// What the mirror calls with every table it publishes, on the thread of its loop, right after
/// the swap: for a data path that keeps a copy of the table of its own (the XDP fast path's maps).
pub type Listener = Box<dyn Fn(&Fib) + Send>;

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("running", &self.handle.is_some())
            .finish_non_exhaustive()
    }
}

impl Mirror {
    /// Builds the first table (so the data path starts with the kernel's routes), publishes it
    /// into `shared`, and starts a thread that follows the kernel from then on.
    ///
    /// # Errors
    /// Netlink errors, or a first table that cannot be built.
    pub fn start(config: MirrorConfig, shared: Arc<SharedFib>) -> Result<Self, MirrorError> {
        let (mut mirror, follower) = Self::open(config, shared)?;
        let stop = Arc::new(AtomicBool::new(false));
        // The longest a stop waits: the follower's own deadline is often seconds away.
        let check = Duration::from_millis(200);
        mirror.handle = Some(event::spawn(
            "ofan-mirror",
            Box::new(follower),
            Arc::clone(&stop),
            check,
        )?);
        mirror.stop = stop;
        Ok(mirror)
    }

    /// Builds the first table as [`Self::start`] does, and returns the mirror with its
    /// [`Follower`] for the caller's control loop to drive (every socket of it opened here, in
    /// the calling thread's network namespace). The mirror stops when the loop drops the
    /// follower.
    ///
    /// # Errors
    /// Netlink errors, or a first table that cannot be built.
    pub fn open(
        config: MirrorConfig,
        shared: Arc<SharedFib>,
    ) -> Result<(Self, Follower), MirrorError> {
        let events = RouteSocket::subscribed(&[
            Group::Link,
            Group::Neighbor,
            Group::Ipv4Address,
            Group::Ipv4Route,
            Group::Ipv6Address,
            Group::Ipv6Route,
            Group::Nexthop,
        ])?;
        let mut requests = RouteSocket::open()?;
        let probes = sys::NeighborProbes::open();
        let state = dump(&mut requests)?;
        let (fib, notes) = build_fib(&state, &config)?;
        shared.store(Arc::new(fib));
        let status = Arc::new(Mutex::new(MirrorStatus::default()));
        let listener = Arc::new(Mutex::new(None));
        let mut follower = Follower {
            config,
            shared: Arc::clone(&shared),
            listener: Arc::clone(&listener),
            requests,
            events,
            probes,
            buffer: vec![0u8; 1 << 16],
            status: Arc::clone(&status),
            last_state: state,
            resolving: HashMap::new(),
            managed: HashSet::new(),
            pending: None,
            unresolved: BTreeMap::new(),
            last_refresh: Instant::now(),
            settle: None,
        };
        follower.note(&notes, None);
        follower.resolve(&notes);
        Ok((
            Self {
                stop: Arc::new(AtomicBool::new(false)),
                handle: None,
                status,
                shared,
                listener,
            },
            follower,
        ))
    }

    /// Calls `listener` with the table in use now, and then with every table the mirror
    /// publishes (on the mirror's loop, after the swap); replaces an earlier listener. No
    /// table is missed: one published while this runs reaches the listener after it.
    pub fn on_publish(&self, listener: Listener) {
        let mut slot = self
            .listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        listener(&self.shared.load());
        *slot = Some(listener);
    }

    /// A handle on the mirror's status that other threads can read.
    pub fn status_handle(&self) -> Arc<Mutex<MirrorStatus>> {
        Arc::clone(&self.status)
    }

    /// The mirror's current status.
    pub fn status(&self) -> MirrorStatus {
        self.status.lock().map(|s| s.report()).unwrap_or_default()
    }

    /// Stops its thread, if it has one ([`Self::start`]; one from [`Self::open`] stops when its
    /// loop drops the follower).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.halt();
    }
}

/// How often the mirror dumps the kernel's state without a notification while some next hop
/// has no MAC address or waits to be asked for again ([`Follower::resolve`]).
pub const RESYNC_RESOLVING: Duration = Duration::from_secs(1);

/// ... and while every next hop is resolved. Not once a second: six dumps of a namespace cost
/// about a millisecond, and a k = 8 lab's 80 mirrors took 8.1 % of a CPU with nothing changing
/// (81 ticks of their threads in 10 s; 51 with this: the rest is the notifications of managed
/// neighbours the kernel re-probes, and the receive timeouts). While a lab's real-time threads
/// hold the CPUs, that work queues and the kernel then runs it in one block ahead of them
/// (`ofan_lab_experiment::starvation::Starvation`): 38 ms of the control threads' work stopped a k = 8
/// lab's agents and shapers at 1 Mbit/s per link (`perf record -e sched:sched_switch`,
/// 2026-12-03).
pub const RESYNC_QUIET: Duration = Duration::from_secs(10);

/// How long a next hop may stay without a MAC address before the mirror logs it: a neighbour
/// that answers is resolved within a round trip, and the kernel gives up on one that does not
/// after three probes a second apart (`mcast_solicit`, `retrans_time_ms`).
pub const UNRESOLVED_WARN_AFTER: Duration = Duration::from_secs(3);

/// A next hop without a MAC address.
#[derive(Debug)]
struct UnresolvedHop {
    /// Its port's name.
    port: String,
    /// Since when.
    since: Instant,
    /// Whether the log has said so.
    logged: bool,
}

/// The mirror's control-loop source: waits for the kernel's change notifications, lets a burst
/// settle for [`SETTLE`], then dumps and rebuilds; dumps without one after [`RESYNC_QUIET`] (or
/// [`RESYNC_RESOLVING`]).
pub struct Follower {
    config: MirrorConfig,
    shared: Arc<SharedFib>,
    /// Called with every table published ([`Mirror::on_publish`]).
    listener: Arc<Mutex<Option<Listener>>>,
    requests: RouteSocket,
    events: RouteSocket,
    /// The probes' sockets, opened with the others (in the switch's namespace).
    probes: sys::NeighborProbes,
    buffer: Vec<u8>,
    status: Arc<Mutex<MirrorStatus>>,
    last_state: KernelState,
    /// When each neighbour was last asked for as a managed entry.
    resolving: HashMap<(u32, IpAddr), Instant>,
    /// Resolved neighbours asked for as managed entries (the kernel keeps them since, or
    /// refused: then only their resolution is asked for, when they lose their address); a
    /// neighbour leaves the set when the kernel's entry goes or loses its address.
    managed: HashSet<(u32, IpAddr)>,
    /// The last build's notes when [`Self::resolve`] left some neighbour for later (it had
    /// asked for it under a second before): the next refresh asks again.
    pending: Option<BuildNotes>,
    /// The last table's next hops without a MAC address, by (interface index, gateway).
    unresolved: BTreeMap<(u32, IpAddr), UnresolvedHop>,
    last_refresh: Instant,
    /// When the current burst of notifications has settled: the rebuild is due.
    settle: Option<Instant>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("unresolved", &self.unresolved.len())
            .finish_non_exhaustive()
    }
}

/// How long the follower lets a burst of notifications settle before it rebuilds.
pub const SETTLE: Duration = Duration::from_millis(2);

impl Source for Follower {
    fn interests(&self, out: &mut Vec<(RawFd, Interest)>) {
        out.push((self.events.as_fd().as_raw_fd(), Interest::Read));
    }

    fn on_ready(&mut self, _fd: RawFd, now: Instant) {
        // Whatever is queued (an error — ENOBUFS: notifications lost — is a change too).
        while matches!(
            self.events.recv(&mut self.buffer, Duration::ZERO),
            Ok(Some(_))
        ) {}
        self.settle.get_or_insert(now + SETTLE);
    }

    fn deadline(&self) -> Option<Instant> {
        let resync = if !self.unresolved.is_empty() || self.pending.is_some() {
            RESYNC_RESOLVING
        } else {
            RESYNC_QUIET
        };
        Some(self.settle.unwrap_or(self.last_refresh + resync))
    }

    fn on_timer(&mut self, _now: Instant) {
        self.settle = None;
        self.refresh();
    }
}

impl Follower {
    fn refresh(&mut self) {
        self.last_refresh = Instant::now();
        let state = match dump(&mut self.requests) {
            Ok(state) => state,
            Err(error) => {
                tracing::warn!(%error, "rtnetlink dump failed");
                return;
            }
        };
        if state == self.last_state {
            // Neighbours the last build left for later (asked for under a second before) are
            // asked for now: nothing else may change to bring them up again.
            if let Some(notes) = self.pending.take() {
                self.resolve(&notes);
            }
            // A next hop that stays unresolved changes nothing either: say so once it is late.
            self.warn_unresolved(Instant::now());
            return;
        }
        match build_fib(&state, &self.config) {
            Ok((fib, notes)) => {
                self.shared.store(Arc::new(fib));
                if let Ok(listener) = self.listener.lock() {
                    if let Some(listener) = listener.as_ref() {
                        listener(&self.shared.load());
                    }
                }
                if state.routes_differ(&self.last_state) {
                    if let Ok(mut status) = self.status.lock() {
                        status.route_changes += 1;
                        status.last_route_change = Some(Instant::now());
                    }
                }
                self.note(&notes, None);
                // A neighbour the kernel deleted (a link down flushes them) may come back as
                // an ordinary entry (learnt from the peer's ARP request): ask again then.
                self.managed.retain(|key| {
                    state
                        .neighbors
                        .get(key)
                        .is_some_and(|entry| entry.mac.is_some())
                });
                self.resolve(&notes);
                self.last_state = state;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot build the forwarding table; keeping the previous one");
                self.note(&BuildNotes::default(), Some(error.to_string()));
            }
        }
    }

    fn note(&mut self, notes: &BuildNotes, error: Option<String>) {
        if error.is_none() {
            self.track_unresolved(&notes.unresolved);
        }
        let fib = self.shared.load();
        if let Ok(mut status) = self.status.lock() {
            if error.is_none() {
                status.generation += 1;
            }
            status.routes = fib.route_count();
            status.groups = fib.groups().len();
            status.unresolved = notes
                .unresolved
                .iter()
                .map(|(_, name, gateway)| format!("{gateway} on {name}"))
                .collect();
            status.routes_not_via_ports = notes.routes_not_via_ports;
            status.unresolved_since = self.unresolved.values().map(|hop| hop.since).min();
            if error.is_none() {
                status.local_addresses.clone_from(&notes.local_addresses);
            }
            status.last_error = error;
        }
    }

    /// Follows which next hops are unresolved (`unresolved`: the latest build's), and says in
    /// the log when one has been for [`UNRESOLVED_WARN_AFTER`] and when it is resolved again.
    fn track_unresolved(&mut self, unresolved: &[(u32, String, IpAddr)]) {
        let now = Instant::now();
        self.unresolved.retain(|key, hop| {
            let still = unresolved
                .iter()
                .any(|(ifindex, _, gateway)| (*ifindex, *gateway) == *key);
            if !still && hop.logged {
                tracing::info!(
                    gateway = %key.1,
                    port = %hop.port,
                    after_s = format!("{:.1}", now.duration_since(hop.since).as_secs_f64()),
                    "next hop resolved: frames to it are forwarded again"
                );
            }
            still
        });
        for (ifindex, port, gateway) in unresolved {
            self.unresolved
                .entry((*ifindex, *gateway))
                .or_insert_with(|| UnresolvedHop {
                    port: port.clone(),
                    since: now,
                    logged: false,
                });
        }
        self.warn_unresolved(now);
    }

    /// Logs, once per next hop, those unresolved for [`UNRESOLVED_WARN_AFTER`] or longer.
    fn warn_unresolved(&mut self, now: Instant) {
        for ((_, gateway), hop) in &mut self.unresolved {
            let late = now.duration_since(hop.since);
            if hop.logged || late < UNRESOLVED_WARN_AFTER {
                continue;
            }
            hop.logged = true;
            tracing::warn!(
                %gateway,
                port = %hop.port,
                for_s = late.as_secs(),
                "next hop unresolved: its neighbour does not answer ARP/neighbour discovery, and \
                 every frame routed only through it is dropped (counter neighbor_unresolved); \
                 check the neighbour, or give it a permanent entry (ip neigh replace … nud permanent)"
            );
        }
    }

    /// Asks the kernel for a managed entry of every neighbour the table forwards to: those
    /// without a MAC address at most once a second each until they have one (with a probe out
    /// of the port when the kernel refuses), resolved ones once (see the module docs: an
    /// ordinary entry the data path alone uses is deleted by the kernel's garbage collection).
    fn resolve(&mut self, notes: &BuildNotes) {
        let now = Instant::now();
        let mut left = false;
        for hop in &notes.dynamic_neighbors {
            let (ifindex, name, gateway) = hop;
            let key = (*ifindex, *gateway);
            let unresolved = notes.unresolved.binary_search(hop).is_ok();
            if !unresolved && self.managed.contains(&key) {
                continue;
            }
            if self
                .resolving
                .get(&key)
                .is_some_and(|asked| now.duration_since(*asked) < Duration::from_secs(1))
            {
                left = true;
                continue;
            }
            self.resolving.insert(key, now);
            let managed = self.requests.request(
                |seq| managed_neighbor_request(seq, *ifindex, *gateway),
                ACK_TIMEOUT,
            );
            match managed {
                Ok(_) => {
                    self.managed.insert(key);
                }
                Err(error) if unresolved => {
                    tracing::debug!(%error, %gateway, port = %name, "no managed neighbour: probing");
                    if let Err(error) = self.probes.probe(name, *gateway) {
                        tracing::debug!(%error, %gateway, port = %name, "neighbour probe failed");
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, %gateway, port = %name, "no managed neighbour");
                    self.managed.insert(key);
                }
            }
        }
        self.pending = left.then(|| notes.clone());
    }
}

#[cfg(test)]
mod build_tests {
    use std::net::Ipv4Addr;

    use ofan_netlink::{Link, Route};

    use super::*;
    use crate::kernel::NeighborEntry;

    const SINK_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    /// A switch with ports p0 (ifindex 2) and p1 (3), a route to 10.1.0.0/16 via 10.0.1.2 on
    /// p1, and that neighbour's entry as given.
    fn state(neighbor: Option<NeighborEntry>) -> (KernelState, MirrorConfig) {
        let mut state = KernelState::default();
        for (index, name) in [(2, "p0"), (3, "p1")] {
            state.links.insert(
                index,
                Link {
                    index,
                    name: name.into(),
                    mac: [2, 0, 0, 0, 1, index as u8],
                    oper_up: true,
                },
            );
        }
        let gateway = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2));
        state.routes.push(Route {
            dst: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 0)),
            prefix_len: 16,
            table: ofan_netlink::RT_TABLE_MAIN,
            metric: 0,
            kind: RouteKind::Unicast {
                hops: vec![RouteHop {
                    ifindex: 3,
                    gateway: Some(gateway),
                }],
                nh_id: None,
            },
        });
        if let Some(entry) = neighbor {
            state.neighbors.insert((3, gateway), entry);
        }
        let config = MirrorConfig {
            ports: ["p0", "p1"]
                .map(|name| PortConfig {
                    name: name.into(),
                    role: PortRole::Host,
                })
                .into(),
            keys: Vec::new(),
            dest_keys: 0,
        };
        (state, config)
    }

    fn next_hop_mac(fib: &Fib) -> Option<[u8; 6]> {
        let destination = fib.destination(IpAddr::V4(Ipv4Addr::new(10, 1, 2, 3)));
        let Some(RouteTarget::Group(group)) = destination.route else {
            panic!("no route: {destination:?}");
        };
        fib.group(group)?.hop(0)?.mac
    }

    #[test]
    fn a_permanent_neighbour_is_used_and_left_alone() {
        let (state, config) = state(Some(NeighborEntry {
            mac: Some(SINK_MAC),
            kind: NeighborKind::Permanent,
        }));
        let (fib, notes) = build_fib(&state, &config).unwrap();
        assert_eq!(next_hop_mac(&fib), Some(SINK_MAC));
        assert!(notes.unresolved.is_empty(), "{notes:?}");
        // Nothing for the mirror to look after: no managed entry replaces it.
        assert!(notes.dynamic_neighbors.is_empty(), "{notes:?}");
    }

    #[test]
    fn dynamic_neighbours_resolved_or_not_are_looked_after() {
        let gateway = (3, "p1".to_owned(), IpAddr::V4(Ipv4Addr::new(10, 0, 1, 2)));
        let resolved = NeighborEntry {
            mac: Some(SINK_MAC),
            kind: NeighborKind::Dynamic,
        };
        let (state_resolved, config) = state(Some(resolved));
        let (fib, notes) = build_fib(&state_resolved, &config).unwrap();
        assert_eq!(next_hop_mac(&fib), Some(SINK_MAC));
        assert_eq!(notes.dynamic_neighbors, std::slice::from_ref(&gateway));
        assert!(notes.unresolved.is_empty());

        for missing in [
            None,
            Some(NeighborEntry {
                mac: None,
                kind: NeighborKind::Dynamic,
            }),
        ] {
            let (state, config) = state(missing);
            let (fib, notes) = build_fib(&state, &config).unwrap();
            assert_eq!(next_hop_mac(&fib), None);
            assert_eq!(notes.unresolved, std::slice::from_ref(&gateway));
            assert_eq!(notes.dynamic_neighbors, std::slice::from_ref(&gateway));
        }
    }
}

#[cfg(test)]
mod status_tests {
    use super::*;

    #[test]
    fn routes_are_still_until_they_change_and_then_for_as_long_as_they_do_not() {
        let mut status = MirrorStatus::default();
        assert_eq!(status.report().routes_still_ms, None);
        status.last_route_change = Some(Instant::now() - Duration::from_millis(1500));
        let still = status
            .report()
            .routes_still_ms
            .expect("a change was published");
        assert!((1500..60_000).contains(&still), "{still}");
        // The report is computed when asked, not stored.
        assert_eq!(status.routes_still_ms, None);
    }
}
