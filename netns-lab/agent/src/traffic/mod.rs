//! The agent's I/O: sockets, the paced sender thread and the receiver (which ACKs DATA and
//! collects ACKs), and the report — for one host ([`run_agent`]) or for every host of a lab in
//! one process ([`run_agents`], the shared agent; a one-host agent is a shared agent of one).
//!
//! Two threads, whatever the number of hosts: the sender owns every host's departure schedule,
//! loss recovery ([`ofan_transport::SelectiveRepeat`]: it decides which packet goes next — a
//! packet whose retransmission timer expired first, else the next new one), entropy choice and
//! the send side of its socket pool, and serves the hosts in the order their departures fall
//! due; the receiver owns every host's receive socket (one epoll set) and all exactly-once
//! accounting. They share only a stop flag and a channel carrying every new ACK (host, flow,
//! sequence number, arrival time, entropy, CE) from the receiver to the sender — and, for
//! plans whose flows wait for others ([`PlanFlow::after`]), the arrival of each flow another
//! waits for, with a wake-up of the sender so that the next ring step leaves at once.
//!
//! [`PlanFlow::after`]: super::collective::PlanFlow::after

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};
use ofan_transport::{
    CcConfig, FlowOrder, FlowWindows, RecoveryConfig, RecoveryStats, Reordering, SelectiveRepeat,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::collective::Plan;
use super::entropy::{EntropySelector, HostLb};
use super::pacing::{achieved_bps, HostLink, Lateness, Pacer};
use super::report::{
    AgentReport, CcReport, EntropyReport, FlowReport, Ignored, PacingReport, PlanesReport,
    SourceReport,
};
use super::sys;
use super::track::{Seen, SeqSet};
use super::wire::{self, Flags, Header, Kind, ECN_ECT0, HEADER_LEN};

pub mod endpoint;
mod planes;
mod receiver;
mod reporting;
mod sender;
mod shared;
mod udp4;

use ofan_dataplane::lb::planes::PlanePolicy;

use ofan_hostlink::RingId;
use receiver::{receive_loop, HostReceiver};
use reporting::report;
use sender::{departure_grid_ns, send_loop, Endpoints, HostSender};
use shared::SharedLink;

/// Receive buffer of the agent's socket: room for bursts of DATA and ACKs.
const RECV_BUFFER: usize = 8 << 20;
/// How often the receiver checks the stop flag, lingering and the deadlines when no socket has
/// input.
const RECV_POLL: Duration = Duration::from_millis(10);
/// How often the receiver reads the host links (see `receiver::receive_loop`).
const LINK_POLL: Duration = Duration::from_micros(200);
/// Wait before retrying a send the kernel had no buffer for.
const SEND_RETRY_WAIT: Duration = Duration::from_micros(20);

/// A validated agent configuration.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The run's plan.
    pub plan: Plan,
    /// This host's index in the plan.
    pub host: u32,
    /// When the first packet is due (CLOCK_MONOTONIC ns).
    pub start_at_ns: u64,
    /// Link rate R, bits per second.
    pub link_rate_bps: u64,
    /// ρ in (0, 1].
    pub load: f64,
    /// UDP payload of a full DATA packet, header included.
    pub payload: u32,
    /// Host-side load balancing.
    pub host_lb: HostLb,
    /// How a multi-plane host (plan hosts with [`PlanHost::planes`]) spreads its packets over
    /// its planes ([`planes`]); ignored with one plane.
    ///
    /// [`PlanHost::planes`]: super::collective::PlanHost::planes
    pub host_planes: PlanePolicy,
    /// Pool size for spray and REPS.
    pub entropies: u16,
    /// Seed of the entropy choices.
    pub seed: u64,
    /// UDP port every agent receives on.
    pub port: u16,
    /// Give up this long after the start.
    pub timeout: Duration,
    /// Spin (instead of sleeping) this long before each departure.
    pub spin_ns: u64,
    /// Compensate late sends up to half a wire time (sch_fq style) instead of losing the time.
    pub catch_up: bool,
    /// Run the sender thread SCHED_FIFO at this priority, the receiver one below
    /// ([`receiver_priority`]).
    pub realtime: Option<i32>,
    /// How long to keep answering after completing.
    pub linger: Linger,
    /// The longest round trip that loses nothing (every queue on the path full), ns: the
    /// retransmission timers never fire sooner ([`RecoveryConfig::for_round_trip`]).
    pub max_round_trip_ns: u64,
    /// Congestion control of every flow (time in ns; `None`: none, the pacer alone). With one,
    /// loss detection adds the reordering window and the timers' floor is a few unloaded
    /// round trips (`ofan_transport::cc::recovery_config`), not `max_round_trip_ns`.
    pub cc: Option<CcConfig>,
    /// Created when the agent completes.
    pub done_file: Option<std::path::PathBuf>,
    /// The host's shared-memory link to its edge switch (`None`: its UDP sockets carry the
    /// traffic; see [`shared`]).
    pub host_link: Option<std::path::PathBuf>,
    /// `plane-arf` on a multi-plane host: hear the notifications the edge switches pass on
    /// and steer by them ([`endpoint`]); `None`: ECN and losses alone.
    pub endpoint: Option<endpoint::EndpointConfig>,
}

/// How long an agent that completed keeps receiving and ACKing: a peer whose last ACK was lost
/// retransmits, and only an ACK lets it complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linger {
    /// Until no frame has arrived for this long.
    Quiet(Duration),
    /// Until this file exists (the runner creates it once every agent completed).
    UntilFile(std::path::PathBuf),
}

/// An own flow as the sender sees it.
#[derive(Debug, Clone)]
struct OutFlow {
    id: u32,
    dst: SockAddr,
    /// `dst`, as the host link's frames carry it.
    dst_v4: SocketAddrV4,
    /// In a multi-plane fabric: the destination in each plane (empty: `dst` alone).
    dst_planes: Vec<SockAddr>,
    packets: u32,
    /// UDP payload of the last packet.
    last_payload: u32,
    /// The incoming flow (plan flow id) whose arrival starts this one (`None`: at the start).
    after: Option<u32>,
}

/// Where a flow id leads on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Not this host's flow.
    Other,
    /// Own flow, local index.
    Out(u32),
    /// Incoming flow, local index.
    In(u32),
}

/// What the receiver tells the sender about one of its hosts.
#[derive(Debug, Clone)]
enum Event {
    /// A new ACK.
    Ack(Feedback),
    /// Every packet of this incoming flow (plan flow id) has arrived: the flows that wait for
    /// it may start.
    Arrived(u32),
    /// The host's view of plane `plane`'s edge changed (its notifications, [`endpoint`]).
    View {
        plane: u8,
        view: std::sync::Arc<ofan_dataplane::arf::PathQuality>,
    },
}

/// A new ACK, from the receiver to the sender (recovery, and REPS's entropy feedback).
#[derive(Debug, Clone, Copy)]
struct Feedback {
    flow: u32,
    sequence: u32,
    /// The copy number the ACK echoes (which transmission it answers).
    copy: u32,
    at_ns: u64,
    entropy: u16,
    ce: bool,
}

/// The longest the sender sleeps at once when no host is due sooner: it checks the stop flag
/// this often, and sees ACKs that completed a host this soon.
const IDLE_POLL: Duration = Duration::from_millis(5);

/// What the sender measured. The rate statistics (`first_ns`, `last_ns`,
/// `wire_bytes_but_last`, the ACK bytes) cover the paced phase — from the first departure to
/// the last first transmission, retransmissions in between included; retransmissions after it
/// follow idle waits for a timer and say nothing about the pacer.
#[derive(Debug, Default)]
struct SenderStats {
    first_send: Vec<Option<u64>>,
    last_send: Vec<Option<u64>>,
    retransmits: Vec<u64>,
    lateness: Lateness,
    /// What late sends cost the schedule ([`Pacer::lost`]): ns, and sends.
    lost_ns: u64,
    lost_sends: u64,
    packets: u64,
    wire_bytes: u64,
    wire_bytes_but_last: u64,
    /// DATA wire bytes of the paced phase.
    paced_wire_bytes: u64,
    /// ACK wire bytes the host link had carried at the first and the last DATA departure.
    ack_bytes_at_first: Option<u64>,
    ack_bytes_at_last: u64,
    first_ns: Option<u64>,
    last_ns: Option<u64>,
    send_retries: u64,
    /// DATA frames lost at a full host link (the switch did not read it).
    host_link_drops: u64,
    /// Time spent in DATA send calls (retries' waits included), ns.
    send_ns: u64,
    realtime: bool,
    recycled: u64,
    fresh: u64,
    recovery: RecoveryStats,
    /// How far out of order the ACKs came back (measured under congestion control).
    reordering: ofan_transport::ReorderStats,
    /// The flows' mean congestion window at the end, bytes (`None`: no congestion control).
    mean_window: Option<u64>,
    /// Time the windows held the host back while it had new packets to send, ns, and the ACK
    /// wire bytes its link carried meanwhile (left out of the paced phase's rates).
    blocked_ns: u64,
    blocked_ack_bytes: u64,
    /// A multi-plane host's planes.
    planes: Option<PlanesReport>,
}

/// What the receiver measured.
#[derive(Debug)]
struct ReceiverStats {
    acked: Vec<SeqSet>,
    ack_ce: Vec<u64>,
    last_ack: Vec<Option<u64>>,
    received: Vec<SeqSet>,
    arrivals: Vec<u64>,
    /// Per incoming flow: its arrival order and what it showed of reordering.
    order: Vec<(FlowOrder, Reordering)>,
    data_ce: Vec<u64>,
    first_data: Vec<Option<u64>>,
    last_data: Vec<Option<u64>>,
    ignored: Ignored,
    acks_sent: u64,
    complete: bool,
    timed_out: bool,
    /// `plane-arf` with notifications: per plane, the notifications taken; and the datagrams
    /// refused.
    notifications: Vec<u64>,
    notifications_rejected: u64,
}

/// Packets of a flow of `bytes` with `segment` data bytes per packet, and the UDP payload of
/// the last one.
fn packetize(bytes: u64, payload: u32) -> (u32, u32) {
    let segment = u64::from(payload) - HEADER_LEN as u64;
    let packets = bytes.div_ceil(segment);
    let last = bytes - (packets - 1) * segment + HEADER_LEN as u64;
    (u32::try_from(packets).unwrap_or(u32::MAX), last as u32)
}

fn udp_socket() -> io::Result<Socket> {
    Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))
}

/// The plan host whose address is configured in this namespace (binding to it succeeds).
///
/// # Errors
/// When none or several are.
pub fn local_host(plan: &Plan) -> anyhow::Result<u32> {
    let local: Vec<u32> = plan
        .hosts
        .iter()
        .enumerate()
        .filter(|(_, host)| UdpSocket::bind(SocketAddrV4::new(host.address, 0)).is_ok())
        .map(|(index, _)| index as u32)
        .collect();
    match local.as_slice() {
        [one] => Ok(*one),
        [] => bail!("no plan host's address is configured here; pass --host"),
        many => bail!(
            "several plan hosts' addresses are configured here ({}); pass --host",
            many.iter()
                .map(|&i| plan.hosts[i as usize].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One host's sockets and flows, set up (in the host's namespace) before the run starts.
pub(super) struct HostSetup<'a> {
    config: &'a AgentConfig,
    roles: Vec<Role>,
    out_flows: Vec<OutFlow>,
    in_packets: Vec<u32>,
    /// Per incoming flow: whether an own flow waits for its arrival ([`Event::Arrived`]).
    in_gates: Vec<bool>,
    /// The receive socket: DATA in, ACKs out, ACKs in.
    receiver: Socket,
    /// The entropy pool and its source ports.
    pool: Vec<Socket>,
    ports: Vec<u16>,
    /// The shared-memory link that carries DATA and ACKs instead of the sockets.
    shared: Option<SharedLink>,
    /// `plane-arf` with notifications: one socket per plane ([`endpoint`]).
    notify: Vec<ofan_control::notify::transport::NotifySocket>,
    link: HostLink,
    ready_ns: u64,
    deadline_ns: u64,
}

impl<'a> HostSetup<'a> {
    /// Creates `config`'s host's sockets in the calling thread's network namespace.
    fn open(config: &'a AgentConfig) -> anyhow::Result<Self> {
        let plan = &config.plan;
        let me = config.host;
        let roles: Vec<Role> = {
            let (mut outs, mut ins) = (0u32, 0u32);
            plan.flows
                .iter()
                .map(|flow| {
                    if flow.src == me {
                        outs += 1;
                        Role::Out(outs - 1)
                    } else if flow.dst == me {
                        ins += 1;
                        Role::In(ins - 1)
                    } else {
                        Role::Other
                    }
                })
                .collect()
        };
        let out_flows: Vec<OutFlow> = plan
            .flows
            .iter()
            .enumerate()
            .filter(|(_, flow)| flow.src == me)
            .map(|(id, flow)| {
                let (packets, last_payload) = packetize(flow.bytes, config.payload);
                let dst = plan.hosts[flow.dst as usize].address;
                OutFlow {
                    id: id as u32,
                    dst: SocketAddrV4::new(dst, config.port).into(),
                    dst_v4: SocketAddrV4::new(dst, config.port),
                    dst_planes: plan.hosts[flow.dst as usize]
                        .planes
                        .iter()
                        .map(|&address| SocketAddrV4::new(address, config.port).into())
                        .collect(),
                    packets,
                    last_payload,
                    after: flow.after,
                }
            })
            .collect();
        let in_packets: Vec<u32> = plan
            .flows
            .iter()
            .filter(|flow| flow.dst == me)
            .map(|flow| packetize(flow.bytes, config.payload).0)
            .collect();
        let in_gates: Vec<bool> = (0..plan.flows.len() as u32)
            .filter(|&id| plan.flows[id as usize].dst == me)
            .map(|id| out_flows.iter().any(|flow| flow.after == Some(id)))
            .collect();

        // Every socket is bound to this host's plan address, so every packet leaves with the
        // source address its peers check (`receiver::expected_peer`). A multi-plane host's
        // are bound to no address: the kernel gives each packet the source address of the
        // plane (port) its destination address routes it to, and the receive socket takes
        // every plane's (see `planes`).
        let planes = plan.hosts[me as usize].planes.len().max(1);
        if planes > 1 && config.host_link.is_some() {
            bail!("a multi-plane host sends through its veths: no shared host link");
        }
        let own = if planes > 1 {
            Ipv4Addr::UNSPECIFIED
        } else {
            plan.hosts[me as usize].address
        };
        let receiver = udp_socket().context("receive socket")?;
        receiver
            .bind(&SocketAddrV4::new(own, config.port).into())
            .with_context(|| {
                format!(
                    "cannot bind {own}:{} (another agent, or the address is not here?)",
                    config.port
                )
            })?;
        receiver.set_recv_tos(true).context("IP_RECVTOS")?;
        if sys::set_recv_buffer_force(&receiver, RECV_BUFFER).is_err() {
            receiver
                .set_recv_buffer_size(RECV_BUFFER)
                .context("receive buffer")?;
        }

        // The entropy pool: one socket per source port, DATA marked ECT(0), never fragmented.
        let pool_size =
            EntropySelector::pool_size(config.host_lb, out_flows.len(), config.entropies);
        let mut pool = Vec::with_capacity(usize::from(pool_size));
        let mut ports = Vec::with_capacity(usize::from(pool_size));
        for _ in 0..pool_size {
            let socket = udp_socket().context("pool socket")?;
            socket
                .bind(&SocketAddrV4::new(own, 0).into())
                .context("binding a source port")?;
            socket.set_tos(u32::from(ECN_ECT0)).context("IP_TOS")?;
            sys::set_dont_fragment(&socket).context("IP_MTU_DISCOVER")?;
            let port = socket
                .local_addr()?
                .as_socket_ipv4()
                .map_or(0, |addr| addr.port());
            ports.push(port);
            pool.push(socket);
        }

        let notify = match &config.endpoint {
            Some(endpoint) if planes > 1 => {
                endpoint::open_sockets(&plan.hosts[me as usize].planes, endpoint.port)?
            }
            _ => Vec::new(),
        };

        // Attached last: the switch diverts the agent's port to the link from now on.
        let shared = config
            .host_link
            .as_deref()
            .map(|path| SharedLink::attach(path, config.port, own))
            .transpose()
            .context("host link")?;

        let ready_ns = sys::monotonic_ns();
        if ready_ns > config.start_at_ns {
            eprintln!(
                "ofan-lab agent: {}: ready {:.1} ms after --start-at: DATA that peers sent before \
                 may have been lost (start agents earlier)",
                plan.hosts[me as usize].name,
                (ready_ns - config.start_at_ns) as f64 / 1e6
            );
        }
        Ok(Self {
            config,
            roles,
            out_flows,
            in_packets,
            in_gates,
            receiver,
            pool,
            ports,
            shared,
            notify,
            // A multi-plane host's ACKs share its P ports.
            link: HostLink::new(config.link_rate_bps as f64 * planes as f64),
            ready_ns,
            deadline_ns: config
                .start_at_ns
                .saturating_add(u64::try_from(config.timeout.as_nanos()).unwrap_or(u64::MAX)),
        })
    }
}

/// The receiver's real-time priority for a sender at `sender`: one below it (at least 1).
///
/// Real-time, because as an ordinary thread beside the lab's real-time switches and sender it
/// got too little CPU at 10 Mbit/s per link: its sockets overflowed (44 k `host.udp_rcvbuf`
/// drops in a 16 MB permutation, CCT +149 %); below the switch group's pool (30 against 40) it
/// read DATA up to 300 ms late, which the CCT counts (+17 … +30 % at 1 MB). Below the sender,
/// because a due departure must preempt it, and at one SCHED_FIFO priority a running thread is
/// never preempted by another.
#[must_use]
pub fn receiver_priority(sender: i32) -> i32 {
    (sender - 1).max(1)
}

/// Runs one agent to completion (or its timeout) and returns its report.
///
/// # Errors
/// When sockets cannot be set up or a send fails for another reason than a full buffer.
pub fn run_agent(config: &AgentConfig) -> anyhow::Result<AgentReport> {
    let mut reports = run_agents(std::slice::from_ref(config), &[None])?;
    Ok(reports.remove(0))
}

/// Runs the agents of several hosts in this one process — one sender thread paces every
/// host's departures, one receiver thread serves every host's receive socket — and returns
/// their reports in the order of `configs`. Host i's sockets are created in `namespaces[i]`
/// (an open `/run/netns/NAME`; `None`: the current namespace), the process stays where it is.
/// Every host keeps its own schedule, recovery, entropy choice, link accounting, done file
/// and deadline: its report means what a one-host agent's means. The sender runs at the first
/// config's real-time priority and spin window, the receiver one priority below.
///
/// # Errors
/// When a namespace cannot be entered, sockets cannot be set up, or a send or receive fails
/// (every error names its host).
///
/// # Panics
/// If `namespaces` is not as long as `configs`.
pub fn run_agents(
    configs: &[AgentConfig],
    namespaces: &[Option<std::fs::File>],
) -> anyhow::Result<Vec<AgentReport>> {
    assert_eq!(configs.len(), namespaces.len(), "one namespace per host");
    let Some(first) = configs.first() else {
        return Ok(Vec::new());
    };
    let host_name = |config: &AgentConfig| config.plan.hosts[config.host as usize].name.clone();
    let setups = configs
        .iter()
        .zip(namespaces)
        .map(|(config, namespace)| {
            let setup = match namespace {
                // Sockets keep the namespace they were created in.
                Some(namespace) => {
                    ofan_lab_sys::lab::in_netns(namespace, || HostSetup::open(config))
                        .context("cannot enter the host's namespace")
                        .and_then(|setup| setup)
                }
                None => HostSetup::open(config),
            };
            setup.with_context(|| format!("host {}", host_name(config)))
        })
        .collect::<anyhow::Result<Vec<HostSetup<'_>>>>()?;

    let stop = AtomicBool::new(false);
    let (feedback_tx, feedback_rx) = mpsc::channel();
    let mut senders: Vec<HostSender<'_>> = setups
        .iter()
        .map(|host| {
            HostSender::new(
                host.config,
                &host.out_flows,
                Endpoints {
                    pool: &host.pool,
                    ports: &host.ports,
                    shared: host.shared.as_ref(),
                },
                &host.link,
                host.deadline_ns,
            )
        })
        .collect();
    let mut receivers: Vec<HostReceiver<'_>> = setups
        .iter()
        .enumerate()
        .map(|(index, host)| HostReceiver::new(index, host))
        .collect();

    let (realtime, received) = std::thread::scope(|scope| {
        let (stop, senders) = (&stop, &mut senders);
        let sender = scope.spawn(move || {
            let grid_ns = departure_grid_ns(first);
            let result = send_loop(
                senders,
                &feedback_rx,
                stop,
                first.spin_ns,
                grid_ns,
                first.realtime,
            );
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            result
        });
        // The receiver wakes the sender when a flow others wait for has arrived.
        let sender_thread = sender.thread().clone();
        let (receivers, feedback_tx) = (&mut receivers, &feedback_tx);
        let receiver = scope.spawn(move || {
            if let Some(priority) = first.realtime.map(receiver_priority) {
                if let Err(e) = sys::set_realtime(priority) {
                    eprintln!("ofan-lab agent: receiver without real-time priority ({e})");
                }
            }
            let received = receive_loop(receivers, feedback_tx, stop, &sender_thread);
            stop.store(true, Ordering::Relaxed);
            received
        });
        let received = receiver.join().expect("receiver thread panicked");
        let realtime = sender.join().expect("sender thread panicked");
        (realtime, received)
    });
    let realtime = realtime?;
    received?;
    Ok(setups
        .iter()
        .zip(senders)
        .zip(receivers)
        .map(|((host, sender), receiver)| {
            let sent = sender.finish(realtime);
            let received = receiver.finish();
            let mut report = report(host.config, &host.out_flows, &host.ports, &sent, &received);
            report.ready_ns = host.ready_ns;
            report.pacing.ack_wire_bytes = host.link.ack_bytes();
            report
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_must_come_from_the_flow_source_and_acks_from_its_destination() {
        let hosts = (0..3)
            .map(|i| super::super::collective::PlanHost {
                name: format!("h{i}"),
                // h2 is a two-plane host.
                planes: if i == 2 {
                    vec![Ipv4Addr::new(10, 0, 0, 5), Ipv4Addr::new(10, 4, 0, 5)]
                } else {
                    Vec::new()
                },
                address: Ipv4Addr::new(10, 0, 0, 2 * i + 1),
            })
            .collect();
        let plan = super::super::collective::ring(7, hosts, 1000, 1).unwrap();
        // Flow 1 is h1 → h2.
        let expected = |flow, kind, from| receiver::expected_peer(&plan, flow, kind, from);
        assert!(expected(1, Kind::Data, Ipv4Addr::new(10, 0, 0, 3)));
        assert!(!expected(1, Kind::Data, Ipv4Addr::new(10, 0, 0, 5)));
        assert!(expected(1, Kind::Ack, Ipv4Addr::new(10, 0, 0, 5)));
        assert!(
            expected(1, Kind::Ack, Ipv4Addr::new(10, 4, 0, 5)),
            "plane 1's address"
        );
        assert!(!expected(1, Kind::Ack, Ipv4Addr::new(10, 4, 0, 3)));
        assert!(!expected(3, Kind::Data, Ipv4Addr::new(10, 0, 0, 3)));
    }

    #[test]
    fn the_receiver_runs_just_below_the_sender() {
        assert_eq!(receiver_priority(42), 41);
        assert_eq!(receiver_priority(2), 1);
        assert_eq!(receiver_priority(1), 1);
    }

    #[test]
    fn packetize_counts_data_bytes_after_the_header() {
        // 1472-byte payloads carry 1454 data bytes.
        assert_eq!(packetize(1454, 1472), (1, 1472));
        assert_eq!(packetize(1455, 1472), (2, 19));
        assert_eq!(packetize(1 << 20, 1472), (722, 18 + 1_048_576 - 721 * 1454));
        assert_eq!(packetize(1, 1472), (1, 19));
    }
}
