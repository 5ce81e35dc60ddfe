//! The discrete-event loop: output-queued store-and-forward switches, paced hosts.
//!
//! # Time and queues
//! Time is integer picoseconds. Every output port is a FIFO served at line rate, and a frame
//! occupies the wire for the serialization time of its bytes plus the inter-frame gap. Because
//! a FIFO never reorders, a frame's departure is known the moment it is enqueued:
//! `start = max(now, port free)`, `finish = start + serialization`; it then arrives at the peer
//! (fully received, store-and-forward) at `finish + propagation`. So each hop costs one event
//! (the arrival), and the port keeps the finish times of its backlog to answer "how long is
//! this queue now" exactly (JSQ, AR, DRILL, drops, ECN, statistics) by discarding the frames
//! whose transmission ended. The time-averaged queue is exact too: each frame adds
//! `finish − enqueue time` to the port's queue-time area.
//!
//! Events are ordered by (time, sequence number of insertion), so ties resolve the same way in
//! every run.
//!
//! # Hosts
//! A host's NIC is an output port like any other, and its link carries the host's data and the
//! ACKs it sends (one per data frame received, at once; with [`ModelConfig::ack_every`] N > 1,
//! one per N frames of a flow as htsim's UEC sink does, see `coalesce.rs`). The pacer fixes when each data frame
//! leaves, taking the host's flows in round-robin order; `load` ρ means what it means for the
//! lab agent (`netns-lab/agent/src/pacing.rs`): data at ρ × the reference rate, and only the
//! ACK airtime that does not fit in the idle time this leaves pushes data back, so that at
//! ρ = 1 data and ACKs fill the link exactly and never overload it. Frame i + 1 is due
//! `gap_i` after frame i, with `paced = frame time / ρ`:
//!
//! * [`AckAirtime::Charged`] (the agent's rule): `gap_i = paced + max(0, A_i − (paced −
//!   frame time))`, where `A_i` is the airtime of the ACKs the host sent since frame i − 1
//!   left. The period follows the ACKs the host happens to send, and so does its phase.
//! * [`AckAirtime::Reserved`] (a rate limiter that leaves room for the ACKs):
//!   `gap_i = max(paced, frame time + a × ACK time)`, `a` = ACKs the host sends per data frame
//!   it sends, at most 1: data departures are strictly periodic.
//!
//! The NIC sends a data frame exactly when it is due: an ACK goes on the link at once only if
//! it ends by then, and otherwise waits for the room the pacer leaves after that frame (as in
//! the lab, where a host's ACKs never delay its paced data). Hosts start at t = 0
//! ([`StartPhase::Synchronous`]) or each at a seeded random time within one frame time of it
//! ([`StartPhase::Random`]), which keeps frames of different hosts from tying in time.
//!
//! # Loss recovery
//! Each host recovers the frames its flows lose with [`ofan_transport::SelectiveRepeat`], the
//! lab agent's own selective repeat (per-packet timers after RFC 6298, no NACK on gaps: packet
//! spraying reorders). Its timers are [`ModelConfig::recovery`] or, by default,
//! [`RecoveryConfig::for_round_trip`] of the full DATA frame's wire time at line rate and of
//! the longest round trip a packet can take without being lost (`default_recovery`): a timer
//! fires only once its packet can no longer be in a queue. At each paced departure the host
//! sends the oldest packet whose timer expired, else its next new packet; a retransmission
//! takes a paced slot like any data frame and, under spray, REPS and DRB, a fresh entropy or
//! waypoint. Once a host has sent every packet once, it arms a timer for its earliest deadline
//! (no earlier than its pacer allows); a timer that finds an expired packet sends it and
//! re-arms, one that finds none only re-arms, and one of a host with nothing outstanding is
//! dropped. Timer events are not counted in [`ModelRun::events`] and only move the clock when
//! they act, so a run that loses nothing (and has no spurious timeout) is the same, event for
//! event, as without recovery. Receivers ACK every data frame they get, copies included, and
//! count distinct packets in a bitset; a flow is done at the first ACK of its last
//! unacknowledged packet. Each first arrival of a first transmission feeds the report's
//! reordering measure ([`ofan_transport::order`]: out-of-order arrivals and their distance).
//!
//! With [`ModelConfig::trim`] (UEC's packet trimming, on by default in htsim's switches) a
//! switch port whose buffer cannot take a DATA frame cuts it to its header
//! (`link.header_bytes`, with no payload: no real DATA frame is that short) and queues the
//! header; headers and ACKs may fill the port up to three buffers (htsim keeps them in a
//! queue of their own, twice the buffer, served first). The receiver answers a header with a
//! NACK at once (an ACK frame with `NACK_FLAG` set, never coalesced, nothing
//! delivered); the sender declares that copy lost
//! ([`ofan_transport::SelectiveRepeat::on_nack`]), tells its controller as of a loss (NSCC:
//! the window shrinks by the packet, as htsim's NSCC on a NACK) and sends it again first, as
//! its window allows. Not modelled: htsim serves headers and ACKs with strict priority over
//! DATA; here they wait in the same FIFO, behind at most a buffer of DATA.
//!
//! # Congestion control
//! [`ModelConfig::cc`] `none` (the default) is everything above, event for event. With a CCA
//! ([`ofan_transport::cc`]: `dctcp`, `nscc`, `mswift`) every flow has its own controller,
//! built from one [`CcConfig`] scaled to the fabric: the base RTT is the unloaded round trip
//! of the longest path (DATA there, its ACK back, every hop store-and-forward at line rate,
//! plus propagation), the packet is the full DATA frame. The pacer still lets a frame leave at
//! most every frame time (line rate); a new packet leaves only if its flow's window has room
//! for it beyond its outstanding packets (sent, not ACKed, not declared lost), taking the
//! host's flows in round-robin order from the cursor; a packet declared lost is sent again
//! under the same rule, first (its bytes left the flight, so the window normally has room).
//! When no flow may send, the host is *blocked*: no pacer event is pending, its ACKs leave at
//! once, and the next ACK that opens a window (or a retransmission timer) wakes it, no earlier
//! than its pacer allows. The receiver's ACK echoes the DATA packet's CE mark and its copy
//! number; the sender knows when it sent each copy, so the ACK of the latest copy gives the
//! exact RTT — the same delay a send timestamp echoed in the ACK would give, without growing
//! the 16-byte frame (the lab's header can carry the timestamp itself). Every first ACK calls
//! the controller with its ECN echo and RTT; a timer that expires calls `on_timeout`.
//! Loss detection adds a reordering window
//! ([`SelectiveRepeat::with_reordering_window`](ofan_transport::SelectiveRepeat::with_reordering_window),
//! [`ModelConfig::reorder_window_permille`], default one smoothed RTT, chosen from the
//! reordering the model measures: docs/model.md), whose losses call `on_loss`; the timers'
//! floor is four unloaded round trips plus 16 frame times (RFC 6298's `srtt + 4·rttvar`
//! above it), not a full buffer's round trip. The report's `cc` section gives the parameters
//! and what loss detection did.
//!
//! # Adaptive routing
//! Under the `arf-*` schemes every switch runs the adaptive-routing framework's control plane
//! ([`ofan_dataplane::arf`], the switch's own code; `arf.rs` here only feeds it). Each port
//! towards another switch has a [`Detector`] that takes a window every [`ArfConfig::window_ps`]
//! of simulated time: utilization = wire bytes accepted in the window over what the port's
//! rate (a degraded port's own) can send in it, queue = the window's largest queue over
//! `buffer_bytes`, drops = frames the full buffer refused. All switches close their windows
//! in the same event, in node order. A detector's state change — and, every
//! [`ArfConfig::refresh_windows`] windows, every port's state — becomes a notification about
//! link N → F (level, hold = [`ArfConfig::hold_ps`], the switch's next sequence number) to every
//! switch neighbour of N but F, delivered [`ArfConfig::delay_ps`] later (one event per batch;
//! the delay is constant, so batches arrive in order). A recipient applies it to its
//! [`CongestionTable`], expires what aged out, and, if its table or its own up-ports' levels
//! changed, builds a [`PathQuality`] from its up-ports' levels, the table and its
//! [`RemotePaths`] (from the topology; switch ids are node ids) and publishes it with
//! `SwitchBalancer::set_path_quality`. `arf-flow` balancers are given the simulated time
//! (ns) before each decision. Notifications travel out of band: they take no room on the links.
//! Windows stop once every flow is done (or nothing but the control plane is left in the event
//! queue: flows that gave up); these events are not counted in [`ModelRun::events`].
//!
//! # Degraded links
//! [`ModelConfig::degraded`] slows chosen link directions to a fraction of line rate: their
//! frames take `serialization / rate` on the wire (rounded up to the picosecond). The CCT lower
//! bound ignores it (it is the bound of the healthy fabric); the default retransmission timers
//! add, twice (DATA one way, ACK back), what a full queue and a DATA frame take longer on the
//! slowest link.
//!
//! # Links failing during a run
//! [`ModelConfig::fail_at`] names switch-to-switch links that go down, both directions, at a
//! simulated time. Three events per failure ([`FailureTiming`]): at the failure both ports
//! lose every frame they hold — queued (the one being sent included; `link.down.queued`) and
//! sent but still propagating (`link.down.in_flight`); the arrival events of those frames find
//! an empty wire and do nothing. Until a switch knows, its balancer keeps the dead port among
//! its valid ones, and what it sends there is lost (`link.down.unaware`). At
//! `detect_ps` after the failure the two adjacent switches know: their valid up-port masks are
//! those of the topology without the link (for an adjacent switch that removes exactly its
//! own dead port), and a frame whose only way is the dead port (a core towards the pod
//! behind it) is dropped as `switch.no_route`; under `arf-*` each sends the framework's
//! *failure detected* (level 0) to its switch neighbours but the other end, applied
//! [`ArfConfig::delay_ps`] later and refreshed every T as long as the link is down. At
//! `reroute_ps` after the failure every switch's masks (and DRB's waypoints, and the `arf-*`
//! remote path information) are those of the topology without the link: routing
//! (BGP in the lab) has reconverged. The hosts' recovery resends what was lost; they give a
//! packet up only after 64 timeouts more than fit (at `rto_min` each) before the last
//! reroute. The CCT bound is the intact fabric's: a failure only removes capacity, so it
//! stays a lower bound. These events are not counted in [`ModelRun::events`].
//!
//! # Several planes
//! On a multi-plane fabric ([`TopologyKind::MultiPlane`]) a host has one NIC port per plane,
//! each an output port like a single plane's NIC, and `load` ρ is per port: the pacer lets
//! a data frame leave every `frame time / (ρ · P)`, P × a single port's rate. Each frame's
//! plane (and entropy) is the host policy's choice ([`ModelConfig::host_planes`], the pure
//! [`crate::planes::HostPlanes`]), made when the frame leaves; a retransmission first tells
//! the policy that its previous copy's path lost it. The pacer never gives a port more than
//! its line rate: the frame after one sent on port i is due no earlier than port i has at
//! most one data frame left to send. (So plane-hash, one port per flow, sends at one port's
//! rate.) A receiver ACKs on the plane the DATA came on, at once: the ACK joins that port's
//! queue and the pacer's rule above makes room for it (no held ACKs, no airtime charge); the
//! sender learns the ACK's plane from the port it arrives on, and its CE echo.
//!
//! Switches forward within their plane: the hosts' attachment is kept per plane
//! (`places[plane · hosts + host]`), and the destination keys are per plane. `plane-arf`
//! hosts also read what their edge switches know: the switches' adaptive-routing control
//! plane (detectors, notifications, tables, below) then runs whatever the switches' scheme,
//! and every time an edge switch's path-quality view changes (its own up-ports' levels, or
//! a notification it applied), it passes the view on to its hosts, who hold it
//! [`ArfConfig::delay_ps`] later — what hosts that each applied the notifications the edge
//! forwards would know, kept once per edge (its hosts would hold identical tables). The
//! switches' balancers take the views only under `arf-*`. With one plane nothing of this
//! runs: a one-plane fabric is the plane itself, event for event. Host-based switch schemes
//! (`spray`, `reps`, `drb`) and congestion control are refused on several planes.
//!
//! # Files
//! * `mod.rs`: the simulator's state (`Sim`), the entry points [`run`] and [`run_on`], and
//!   the event loop.
//! * `build.rs`: from a configuration to the state at t = 0 — failures, ports, balancers,
//!   hosts, flows, recovery timers.
//! * `packet.rs`: the frame in flight and its flag bits.
//! * `port.rs`: the output ports — FIFO, purge, enqueue with drops, ECN and statistics.
//! * `forward.rs`: where a switch sends a frame — down by the destination, up by the
//!   load-balancing core or a DRB source route.
//! * `host.rs`: the hosts — pacer, retransmission timers, ACKs, receiving.
//! * `planes.rs`: the hosts of a multi-plane fabric — their policy's choices, what ACKs,
//!   losses and the edges' views tell it, the report's `planes` section.
//! * `coalesce.rs`: coalesced ACKs — when a receiver acknowledges, what an ACK tells its
//!   sender.
//! * `cc.rs`: the hosts' congestion control — windows, blocked pacers, the ACK path with a
//!   CCA, the report's `cc` section.
//! * `credit.rs`: receiver credits beside a CCA — the receivers' pull pacers, the senders'
//!   credit.
//! * `prefetch.rs`: what the next events will touch, loaded ahead.
//! * `arf.rs`: the adaptive-routing framework's control plane (detectors, notifications,
//!   tables, path-quality views).
//! * `failure.rs`: links failing during the run — the failure, detection and reroute events,
//!   the losses they cause and what each switch knows.
//! * `report.rs`: the [`RunReport`] of a finished run.
//!
//! [`AckAirtime::Charged`]: crate::AckAirtime::Charged
//! [`AckAirtime::Reserved`]: crate::AckAirtime::Reserved
//! [`RecoveryConfig::for_round_trip`]: ofan_transport::RecoveryConfig::for_round_trip
//! [`ModelRun::events`]: crate::report::ModelRun::events
//! [`Detector`]: ofan_dataplane::arf::detect::Detector
//! [`CongestionTable`]: ofan_dataplane::arf::CongestionTable
//! [`PathQuality`]: ofan_dataplane::arf::PathQuality
//! [`RemotePaths`]: ofan_dataplane::arf::RemotePaths
//! [`ArfConfig::window_ps`]: crate::ArfConfig::window_ps
//! [`ArfConfig::refresh_windows`]: crate::ArfConfig::refresh_windows
//! [`ArfConfig::hold_ps`]: crate::ArfConfig::hold_ps
//! [`ArfConfig::delay_ps`]: crate::ArfConfig::delay_ps
//! [`ModelConfig::degraded`]: crate::ModelConfig::degraded
//! [`ModelConfig::fail_at`]: crate::ModelConfig::fail_at
//! [`FailureTiming`]: crate::FailureTiming
//! [`ModelConfig::cc`]: crate::ModelConfig::cc
//! [`ModelConfig::host_planes`]: crate::ModelConfig::host_planes
//! [`TopologyKind::MultiPlane`]: ofan_topology::TopologyKind::MultiPlane
//! [`ModelConfig::reorder_window_permille`]: crate::ModelConfig::reorder_window_permille
//! [`CcConfig`]: ofan_transport::CcConfig

mod arf;
mod build;
mod cc;
mod coalesce;
mod credit;
mod deps;
mod failure;
mod forward;
mod host;
mod packet;
mod planes;
mod port;
mod prefetch;
mod report;

use ofan_dataplane::lb::{mix64, PipeBalancer};
use ofan_topology::{Role, Topology};

use crate::config::{ModelConfig, Pacing, Scheme, StartPhase};
use crate::error::ModelError;
use crate::queue::EventQueue;
use crate::report::{PacketCounts, RunReport, Stage};
use crate::workload;

use crate::wires::Wires;
use arf::{Arf, PortWindow, ARF_BIT};
use build::{choose_failures, host_weighted_matrix};
use coalesce::Coalesce;
use deps::{Deps, START_BIT};
use failure::{LinkFailures, FAIL_BIT};
use forward::{NodeInfo, Place};
use host::{Flow, Host, TIMER_BIT};
use port::{Flight, Port, StageStats};
use prefetch::Lookahead;

/// Salt of the hosts' start phases.
const PHASE_SALT: u64 = 0x0070_6861_7365;

/// The state of one run: the fabric's ports and switches, the hosts and their flows, the event
/// queue and the clock, and what the report counts.
struct Sim<'a> {
    topology: &'a Topology,
    config: &'a ModelConfig,
    scheme: Scheme,
    uses_queues: bool,
    /// Some switch's algorithm reads the flow hash ([`Algorithm::uses_flow_hash`]).
    ///
    /// [`Algorithm::uses_flow_hash`]: ofan_dataplane::lb::Algorithm::uses_flow_hash
    uses_flow_hash: bool,
    fat_tree: bool,
    w: u8,
    nodes: Vec<NodeInfo>,
    ports: Vec<Port>,
    /// Every port's wire ([`Port`]).
    wires: Wires<Flight>,
    /// Per [`Stage`] (by discriminant).
    stage_stats: [StageStats; Stage::ALL.len()],
    /// Per port: its link id.
    port_links: Vec<u32>,
    hosts: Vec<Host>,
    /// Per plane and host (`plane · hosts + host`): where the host is attached in that plane.
    places: Vec<Place>,
    /// Planes of the fabric (a host's NIC ports).
    planes: u8,
    /// Hosts in the fabric (the stride of `places`).
    host_count: u32,
    /// The hosts' plane policy and what it learns, with several planes.
    host_planes: Option<Box<planes::Planes>>,
    flows: Vec<Flow>,
    /// Per flow: (source, destination) host, so that forwarding reads 8 bytes per frame.
    flow_ends: Vec<[u32; 2]>,
    balancers: Vec<PipeBalancer>,
    /// Valid up-port masks per (switch, key) under failures; empty without failures.
    masks: Vec<u64>,
    /// Per link id: failed.
    dead: Vec<bool>,
    failed: bool,
    queue: EventQueue,
    data_frame: u32,
    ack_frame: u32,
    /// With [`ModelConfig::trim`]: the size of a trimmed DATA frame (its header); 0 otherwise
    /// (no frame is that short).
    trim_frame: u32,
    ser_data: u64,
    ser_ack: u64,
    rate_ppm: u64,
    propagation: u64,
    buffer: u64,
    /// CE mark on enqueue at this many queued bytes (`u64::MAX`: never).
    ecn: u64,
    /// CE mark on dequeue ([`EcnAt::Dequeue`]) at this many bytes left behind (`u64::MAX`:
    /// never).
    ecn_dequeue: u64,
    pipe_ports: u16,
    counts: PacketCounts,
    /// The receivers' arrival order ([`ofan_transport::order`]).
    reordering: ofan_transport::Reordering,
    /// Frames dropped at a full switch buffer.
    drops_buffer: u64,
    /// Frames dropped because no up-port was valid.
    drops_no_route: u64,
    edge_bound: u32,
    edge_violations: u64,
    edge_max_data: u32,
    /// Per host: first and last data arrival (first = `u64::MAX` before any).
    deliveries: Vec<(u64, u64)>,
    /// One bit per data packet of every flow: received at least once.
    delivered: Vec<u64>,
    delivered_wire_bytes: u64,
    events: u64,
    now: u64,
    /// Flows whose every packet was ACKed.
    flows_done: usize,
    /// The adaptive-routing framework's control plane (`arf-*` schemes).
    arf: Option<Box<Arf>>,
    /// Per port: its counters in the current detection window (empty unless `arf-*`).
    arf_windows: Vec<PortWindow>,
    /// `arf-flow`: the balancers age their flow tables by the simulated time.
    arf_flow: bool,
    /// Per port: its rate in millionths of line rate (empty when no link is degraded).
    port_ppm: Vec<u32>,
    /// Links failing during the run, and what the switches know of them (`None`: none fail).
    link_failures: Option<LinkFailures>,
    /// What the prefetch stages learnt about the events ahead (`prefetch.rs`).
    ahead: Lookahead,
    /// Congestion control, when the hosts run one (`host.rs`, `cc.rs`).
    cc: Option<Box<cc::HostCc>>,
    /// Flows that wait for a time or a trigger, when the workload has dependencies
    /// (`deps.rs`).
    deps: Option<Box<Deps>>,
    /// Coalesced ACKs, when a receiver acknowledges several frames at once (`coalesce.rs`).
    coalesce: Option<Box<Coalesce>>,
    /// Receiver credits (`credit.rs`), when senders need them for new data.
    credits: Option<Box<credit::Credits>>,
    /// The frames one coalesced ACK tells its sender (reused).
    conveyed: Vec<u32>,
    /// Tests: the loop stops before the first event after this time.
    #[cfg(test)]
    stop_after: u64,
}

/// From this many hosts on, the per-host state on malloc's heap is moved to huge pages once it
/// is built ([`crate::sys::collapse_heap_into_huge_pages`]). Below, the model's state (a few
/// megabytes at 432 hosts) stays within what the TLB reaches with 4 KiB pages, and the collapse
/// (a copy, about a millisecond there) would cost more than it saves.
const HUGE_PAGE_HOSTS: usize = 1024;

/// Runs one configuration to completion.
///
/// # Errors
/// As [`ModelConfig::validate`], plus topology, workload, failure and load-balancer setup
/// errors.
pub fn run(config: &ModelConfig) -> Result<RunReport, ModelError> {
    config.validate()?;
    let topology = Topology::new(config.topology)?;
    run_on(&topology, config)
}

/// Runs one configuration on an already built topology (which must be `config.topology`).
///
/// # Errors
/// As [`run`].
pub fn run_on(topology: &Topology, config: &ModelConfig) -> Result<RunReport, ModelError> {
    config.validate()?;
    let graph = workload::graph(
        topology,
        &config.workload,
        config.message_bytes,
        config.seed,
    )?;
    let specs = match &graph {
        Some(graph) => graph.specs(),
        None => workload::flows(
            topology,
            &config.workload,
            config.message_bytes,
            config.seed,
        )?,
    };
    let matrix = host_weighted_matrix(topology, &specs);
    let (failures, rho_max) = choose_failures(topology, config, &matrix)?;
    let rho_max = match (config.pacing, rho_max) {
        (_, Some(rho)) => Some(rho),
        (Pacing::RhoMax, None) => Some(topology.rho_max(&failures, &matrix)?),
        (Pacing::Offered, None) => None,
    };
    let send_rate = match config.pacing {
        Pacing::Offered => config.load,
        Pacing::RhoMax => config.load * rho_max.unwrap_or(1.0),
    };
    let mut sim = Sim::new(topology, config, &failures, &specs, send_rate)?;
    if let Some(graph) = &graph {
        sim.install_deps(graph)?;
    }
    if topology.hosts().len() >= HUGE_PAGE_HOSTS {
        crate::sys::collapse_heap_into_huge_pages();
    }
    sim.start();
    sim.run_loop();
    Ok(sim.report(&failures, &specs, send_rate, rho_max))
}

impl Sim<'_> {
    #[inline]
    fn push(&mut self, time: u64, target: u32, wake: bool) {
        self.queue.push(time, target, wake);
    }

    /// Schedules the arrival of the frame at the head of `port`'s wire, whose
    /// [`hint`](packet::Packet::hint) is `hint`.
    #[inline]
    fn push_arrival(&mut self, time: u64, port: u32, hint: u32) {
        self.queue.push_hinted(time, port, false, hint);
    }

    fn start(&mut self) {
        // Collectives are synchronous (paper §2.1): every host starts at t = 0, or within one
        // data frame time of it.
        for host in 0..self.hosts.len() as u32 {
            if self.hosts[host as usize].active.is_empty() {
                continue;
            }
            let phase = match self.config.start_phase {
                StartPhase::Synchronous => 0,
                StartPhase::Random => {
                    mix64(self.config.seed ^ mix64(PHASE_SALT ^ u64::from(host))) % self.ser_data
                }
            };
            self.hosts[host as usize].due = phase;
            self.push_pacer(phase, host);
        }
        self.arf_start();
        self.failures_start();
    }

    fn run_loop(&mut self) {
        while let Some(event) = self.queue.pop() {
            #[cfg(test)]
            if event.time > self.stop_after {
                break;
            }
            if event.wake && event.target & START_BIT != 0 {
                // A flow's start time: not counted in `events` (it moves no frame).
                self.now = event.time;
                self.start_flow(event.target & !START_BIT);
                continue;
            }
            if event.wake && event.target & credit::PULL_BIT != 0 {
                // Not counted in `events`, as the timers.
                self.now = event.time;
                self.pull(event.target & !credit::PULL_BIT);
                continue;
            }
            if event.wake && event.target & TIMER_BIT != 0 {
                self.timer(event.target & !TIMER_BIT, event.time);
                continue;
            }
            if event.wake && event.target & ARF_BIT != 0 {
                // Not counted in `events`: a run's traffic events are the same with or without
                // the control plane's.
                self.now = event.time;
                self.arf_event(event.target & !ARF_BIT);
                continue;
            }
            if event.wake && event.target & FAIL_BIT != 0 {
                // Not counted in `events`, as the control plane's.
                self.now = event.time;
                self.failure_event(event.target & !FAIL_BIT);
                continue;
            }
            if !event.wake && self.ports[event.target as usize].wire_len() == 0 {
                // The arrival of a frame lost with its link (a failing link empties its wire).
                continue;
            }
            self.now = event.time;
            self.events += 1;
            self.prefetch_ahead();
            if event.wake {
                self.wake(event.target);
                continue;
            }
            let port = &mut self.ports[event.target as usize];
            let flight = port
                .wire_pop(&self.wires)
                .expect("a wire event has a frame");
            debug_assert_eq!(flight.arrival, event.time);
            let next = port
                .wire_get(&self.wires, 0)
                .map(|next| (next.arrival, next.packet.hint()));
            if port.sent > 0 {
                port.sent -= 1;
            } else {
                // Not purged yet: it leaves the queue now, and the next frame heads it.
                port.bytes -= u64::from(flight.packet.frame);
                port.data -= u32::from(!flight.packet.is_ack());
                if let Some((next, _)) = next {
                    port.head_finish = next - self.propagation;
                }
            }
            let mut packet = flight.packet;
            if self.ecn_dequeue != u64::MAX {
                self.mark_on_dequeue(event.target as usize, &mut packet);
            }
            let port = &self.ports[event.target as usize];
            let (node, in_port) = (port.peer, port.peer_port);
            if let Some((next, hint)) = next {
                self.push_arrival(next, event.target, hint);
            }
            if self.nodes[node as usize].role == Role::Host {
                self.receive(node, in_port, packet);
            } else {
                self.forward(node, in_port, packet);
            }
        }
    }
}
