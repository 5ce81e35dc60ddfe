//! The agent's I/O: sockets, the paced sender thread and the receiver (which ACKs DATA and
//! collects ACKs), and the report.
//!
//! Two threads: the sender owns the departure schedule, the loss recovery
//! ([`ofan_transport::SelectiveRepeat`]: it decides which packet goes next — a packet whose
//! retransmission timer expired first, else the next new one), the entropy choice and the send
//! side of the socket pool; the receiver owns the receive socket and all exactly-once
//! accounting. They share only a stop flag and a channel carrying every new ACK (flow,
//! sequence number, arrival time, entropy, CE) from the receiver to the sender.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};
use ofan_transport::{RecoveryConfig, RecoveryStats, SelectiveRepeat};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::collective::Plan;
use super::entropy::{EntropySelector, HostLb};
use super::pacing::{achieved_bps, HostLink, Lateness, Pacer};
use super::report::{AgentReport, EntropyReport, FlowReport, Ignored, PacingReport, SourceReport};
use super::sys;
use super::track::{Seen, SeqSet};
use super::wire::{self, Flags, Header, Kind, ECN_ECT0, HEADER_LEN};

/// Receive buffer of the agent's socket: room for bursts of DATA and ACKs.
const RECV_BUFFER: usize = 8 << 20;
/// How often the receiver checks the stop flag and the deadline.
const RECV_POLL: Duration = Duration::from_millis(10);
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
    /// Run the sender thread SCHED_FIFO at this priority.
    pub realtime: Option<i32>,
    /// How long to keep answering after completing.
    pub linger: Linger,
    /// The longest round trip that loses nothing (every queue on the path full), ns: the
    /// retransmission timers never fire sooner ([`RecoveryConfig::for_round_trip`]).
    pub max_round_trip_ns: u64,
    /// Created when the agent completes.
    pub done_file: Option<std::path::PathBuf>,
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
    packets: u32,
    /// UDP payload of the last packet.
    last_payload: u32,
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

/// How long the sender waits for an ACK at most when it has nothing to send (it also checks
/// the stop flag and the deadline this often).
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
    realtime: bool,
    recycled: u64,
    fresh: u64,
    recovery: RecoveryStats,
}

/// What the receiver measured.
#[derive(Debug)]
struct ReceiverStats {
    acked: Vec<SeqSet>,
    ack_ce: Vec<u64>,
    last_ack: Vec<Option<u64>>,
    received: Vec<SeqSet>,
    arrivals: Vec<u64>,
    data_ce: Vec<u64>,
    first_data: Vec<Option<u64>>,
    last_data: Vec<Option<u64>>,
    ignored: Ignored,
    acks_sent: u64,
    complete: bool,
    timed_out: bool,
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

/// Runs one agent to completion (or its timeout) and returns its report.
///
/// # Errors
/// When sockets cannot be set up or a send fails for another reason than a full buffer.
pub fn run_agent(config: &AgentConfig) -> anyhow::Result<AgentReport> {
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
                packets,
                last_payload,
            }
        })
        .collect();
    let in_packets: Vec<u32> = plan
        .flows
        .iter()
        .filter(|flow| flow.dst == me)
        .map(|flow| packetize(flow.bytes, config.payload).0)
        .collect();

    // The receive socket: DATA in, ACKs out, ACKs in.
    let receiver = udp_socket().context("receive socket")?;
    receiver
        .bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, config.port).into())
        .with_context(|| format!("cannot bind UDP port {} (another agent?)", config.port))?;
    receiver.set_recv_tos(true).context("IP_RECVTOS")?;
    if sys::set_recv_buffer_force(&receiver, RECV_BUFFER).is_err() {
        receiver
            .set_recv_buffer_size(RECV_BUFFER)
            .context("receive buffer")?;
    }
    receiver
        .set_read_timeout(Some(RECV_POLL))
        .context("receive timeout")?;

    // The entropy pool: one socket per source port, DATA marked ECT(0), never fragmented.
    let pool_size = EntropySelector::pool_size(config.host_lb, out_flows.len(), config.entropies);
    let mut pool = Vec::with_capacity(usize::from(pool_size));
    let mut ports = Vec::with_capacity(usize::from(pool_size));
    for _ in 0..pool_size {
        let socket = udp_socket().context("pool socket")?;
        socket
            .bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into())
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

    let ready_ns = sys::monotonic_ns();
    if ready_ns > config.start_at_ns {
        eprintln!(
            "ofan-lab agent: ready {:.1} ms after --start-at: DATA that peers sent before may have \
             been lost (start agents earlier)",
            (ready_ns - config.start_at_ns) as f64 / 1e6
        );
    }
    let deadline_ns = config
        .start_at_ns
        .saturating_add(u64::try_from(config.timeout.as_nanos()).unwrap_or(u64::MAX));
    let stop = AtomicBool::new(false);
    let link = HostLink::new(config.link_rate_bps as f64);
    let (feedback_tx, feedback_rx) = mpsc::channel();

    let (sent, received) = std::thread::scope(|scope| {
        let (flows, pool, stop, link) = (&out_flows, &pool, &stop, &link);
        let sender = scope.spawn(move || {
            let result = send_loop(config, flows, pool, &feedback_rx, link, stop, deadline_ns);
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            result
        });
        let received = receive_loop(
            config,
            &roles,
            &out_flows,
            &in_packets,
            &receiver,
            &feedback_tx,
            link,
            stop,
            deadline_ns,
        );
        stop.store(true, Ordering::Relaxed);
        let sent = sender.join().expect("sender thread panicked");
        (sent, received)
    });
    let sent = sent?;
    let received = received?;
    let mut report = report(config, &out_flows, &ports, &sent, &received);
    report.ready_ns = ready_ns;
    report.pacing.ack_wire_bytes = link.ack_bytes();
    Ok(report)
}

/// Waits until `due_ns`: sleeps until `spin_ns` before it, then spins. Returns the time.
fn wait_until(due_ns: u64, spin_ns: u64) -> u64 {
    loop {
        let now = sys::monotonic_ns();
        if now >= due_ns {
            return now;
        }
        if due_ns - now > spin_ns {
            sys::sleep_until_ns(due_ns - spin_ns);
        } else {
            std::hint::spin_loop();
        }
    }
}

fn send_loop(
    config: &AgentConfig,
    flows: &[OutFlow],
    pool: &[Socket],
    feedback: &mpsc::Receiver<Feedback>,
    link: &HostLink,
    stop: &AtomicBool,
    deadline_ns: u64,
) -> anyhow::Result<SenderStats> {
    let total: u64 = flows.iter().map(|f| u64::from(f.packets)).sum();
    let mut stats = SenderStats {
        realtime: false,
        first_send: vec![None; flows.len()],
        last_send: vec![None; flows.len()],
        retransmits: vec![0; flows.len()],
        lateness: Lateness::with_capacity(usize::try_from(total).unwrap_or(0)),
        ..SenderStats::default()
    };
    // Wake-ups as close to the asked time as the kernel allows (the default slack is 50 µs).
    let _ = sys::set_timer_slack_ns(1);
    if let Some(priority) = config.realtime {
        match sys::set_realtime(priority) {
            Ok(()) => stats.realtime = true,
            Err(e) => eprintln!("ofan-lab agent: no real-time priority ({e}); pacing may suffer"),
        }
    }
    let paced_bps = config.load * config.link_rate_bps as f64;
    let mut pacer = Pacer::new(paced_bps, config.start_at_ns).with_catch_up(config.catch_up);
    let mut selector = EntropySelector::new(
        config.host_lb,
        flows.len(),
        pool.len() as u16,
        config.seed ^ (u64::from(config.host) << 32),
    );
    let packets: Vec<u32> = flows.iter().map(|flow| flow.packets).collect();
    let mut recovery = SelectiveRepeat::new(recovery_config(config), &packets);
    let mut buf = vec![0u8; config.payload as usize];
    let mut next_sequence = vec![0u32; flows.len()];
    let mut active: Vec<usize> = (0..flows.len()).filter(|&i| flows[i].packets > 0).collect();
    let mut cursor = 0;
    // The sender waited for a timer or an ACK with nothing to send: the next departure is not
    // late, it resumes the schedule from now.
    let mut idle = false;
    // ACK wire bytes already charged to the host link.
    let mut acks_charged = 0;

    while !stop.load(Ordering::Relaxed) {
        take_acks(feedback, &mut recovery, &mut selector);
        if recovery.complete() {
            break;
        }
        let due = pacer.due_ns();
        if due > deadline_ns {
            break;
        }
        let now = wait_until(due, config.spin_ns);
        take_acks(feedback, &mut recovery, &mut selector);
        if recovery.complete() {
            break;
        }
        // What goes next: a packet whose timer expired, else a new one.
        let (local, sequence, retransmission) = if let Some((flow, seq)) = recovery.next_lost(now) {
            (flow as usize, seq, true)
        } else if let Some(&local) = active.get(cursor) {
            (local, next_sequence[local], false)
        } else {
            // Nothing to send until a timer expires or an ACK completes the flows.
            let wake = recovery
                .next_deadline()
                .unwrap_or(u64::MAX)
                .min(deadline_ns);
            let wait = Duration::from_nanos(wake.saturating_sub(sys::monotonic_ns()));
            if let Ok(ack) = feedback.recv_timeout(wait.min(IDLE_POLL)) {
                on_feedback(ack, &mut recovery, &mut selector);
            }
            idle = true;
            continue;
        };
        let flow = &flows[local];
        let len = if sequence + 1 == flow.packets {
            flow.last_payload
        } else {
            config.payload
        };
        if idle {
            pacer.resume(now);
            idle = false;
        } else {
            stats.lateness.record(now - due);
        }

        let entropy = selector.choose(local);
        let copy = recovery.transmissions(local as u32, sequence);
        Header {
            kind: Kind::Data,
            flags: Flags::of_copy(copy),
            collective: config.plan.collective,
            flow: flow.id,
            sequence,
            entropy,
        }
        .write(&mut buf);
        let socket = &pool[usize::from(entropy)];
        loop {
            match socket.send_to(&buf[..len as usize], &flow.dst) {
                Ok(_) => break,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.raw_os_error() == Some(libc::ENOBUFS) =>
                {
                    stats.send_retries += 1;
                    std::thread::sleep(SEND_RETRY_WAIT);
                }
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    bail!(
                        "--payload {}: the DATA packet does not fit the path MTU ({e})",
                        config.payload
                    )
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("sending flow {} to {:?}", flow.id, flow.dst.as_socket())
                    })
                }
            }
        }
        recovery.on_send(local as u32, sequence, now);
        let wire = wire::wire_bytes(u64::from(len));
        // The ACKs sent since the previous departure took their share of the host link.
        let acks = link.ack_bytes();
        let ack_wire = acks - acks_charged;
        acks_charged = acks;
        pacer.sent_with_acks(now, wire, link.ack_delay_ps(ack_wire, wire, &pacer));

        stats.first_send[local].get_or_insert(now);
        stats.last_send[local] = Some(now);
        stats.packets += 1;
        stats.wire_bytes += wire;
        // The paced phase lasts while new packets remain (see `SenderStats`).
        let paced_phase = !active.is_empty();
        if paced_phase {
            stats.ack_bytes_at_first.get_or_insert(acks);
            stats.ack_bytes_at_last = acks;
            stats.first_ns.get_or_insert(now);
            if stats.last_ns.is_some() {
                stats.wire_bytes_but_last = stats.paced_wire_bytes;
            }
            stats.last_ns = Some(now);
            stats.paced_wire_bytes += wire;
        }

        if retransmission {
            stats.retransmits[local] += 1;
            continue;
        }
        next_sequence[local] += 1;
        if next_sequence[local] == flow.packets {
            active.remove(cursor);
        } else {
            cursor += 1;
        }
        if cursor >= active.len() {
            cursor = 0;
        }
    }
    stats.recycled = selector.recycled;
    stats.fresh = selector.fresh;
    stats.recovery = recovery.stats();
    Ok(stats)
}

/// The retransmission timers of `config`'s agent, as the model's: one full DATA frame's wire
/// time at the link rate and the longest round trip that loses nothing
/// (`RecoveryConfig::for_round_trip`).
fn recovery_config(config: &AgentConfig) -> RecoveryConfig {
    let frame_ns = wire::wire_bytes(u64::from(config.payload)) as f64 * 8.0 * 1e9
        / config.link_rate_bps as f64;
    RecoveryConfig::for_round_trip(frame_ns.ceil() as u64, config.max_round_trip_ns)
}

/// Applies every ACK the receiver has passed on so far.
fn take_acks(
    feedback: &mpsc::Receiver<Feedback>,
    recovery: &mut SelectiveRepeat,
    selector: &mut EntropySelector,
) {
    while let Ok(ack) = feedback.try_recv() {
        on_feedback(ack, recovery, selector);
    }
}

fn on_feedback(ack: Feedback, recovery: &mut SelectiveRepeat, selector: &mut EntropySelector) {
    recovery.on_ack_echo(ack.flow, ack.sequence, ack.copy, ack.at_ns);
    selector.on_ack(ack.flow as usize, ack.entropy, ack.ce);
}

#[allow(clippy::too_many_arguments)]
fn receive_loop(
    config: &AgentConfig,
    roles: &[Role],
    out_flows: &[OutFlow],
    in_packets: &[u32],
    socket: &Socket,
    feedback: &mpsc::Sender<Feedback>,
    link: &HostLink,
    stop: &AtomicBool,
    deadline_ns: u64,
) -> anyhow::Result<ReceiverStats> {
    let outs = out_flows.len();
    let ins = in_packets.len();
    let mut stats = ReceiverStats {
        acked: out_flows.iter().map(|f| SeqSet::new(f.packets)).collect(),
        ack_ce: vec![0; outs],
        last_ack: vec![None; outs],
        received: in_packets.iter().map(|&n| SeqSet::new(n)).collect(),
        arrivals: vec![0; ins],
        data_ce: vec![0; ins],
        first_data: vec![None; ins],
        last_data: vec![None; ins],
        ignored: Ignored::default(),
        acks_sent: 0,
        complete: false,
        timed_out: false,
    };
    let mut outs_done = stats.acked.iter().filter(|s| s.complete()).count();
    let mut ins_done = stats.received.iter().filter(|s| s.complete()).count();
    // Only the header is read; the rest of a DATA packet is truncated away.
    let mut buf = [0u8; 64];
    let mut ack = [0u8; HEADER_LEN];
    // Since when nothing arrived, once complete.
    let mut quiet_since = 0;

    loop {
        if !stats.complete && outs_done == outs && ins_done == ins {
            stats.complete = true;
            quiet_since = sys::monotonic_ns();
            if let Some(path) = &config.done_file {
                std::fs::write(path, b"")
                    .with_context(|| format!("cannot create {}", path.display()))?;
            }
        }
        if stats.complete {
            let done = match &config.linger {
                Linger::Quiet(quiet) => {
                    sys::monotonic_ns().saturating_sub(quiet_since) >= quiet.as_nanos() as u64
                }
                Linger::UntilFile(path) => path.exists(),
            };
            if done {
                break;
            }
        } else if stop.load(Ordering::Relaxed) {
            break;
        }
        if sys::monotonic_ns() > deadline_ns {
            stats.timed_out = !stats.complete;
            break;
        }
        let datagram = match sys::recv_with_tos(socket, &mut buf) {
            Ok(datagram) => datagram,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e).context("receiving"),
        };
        let now = sys::monotonic_ns();
        quiet_since = now;
        let Ok(header) = wire::Header::parse(&buf[..datagram.len]) else {
            stats.ignored.malformed += 1;
            continue;
        };
        if header.collective != config.plan.collective {
            stats.ignored.foreign_collective += 1;
            continue;
        }
        let role = roles
            .get(header.flow as usize)
            .copied()
            .unwrap_or(Role::Other);
        match (header.kind, role) {
            (Kind::Data, Role::In(local)) => {
                let local = local as usize;
                // One ACK per DATA packet, duplicates included, echoing CE.
                header.ack(datagram.tos).write(&mut ack);
                let to = SocketAddrV4::new(*datagram.from.ip(), config.port);
                if socket.send_to(&ack, &to.into()).is_err() {
                    stats.ignored.ack_send_errors += 1;
                } else {
                    stats.acks_sent += 1;
                    link.ack_sent(wire::wire_bytes(HEADER_LEN as u64));
                }
                let set = &mut stats.received[local];
                match set.insert(header.sequence) {
                    Seen::OutOfRange => {
                        stats.ignored.out_of_range += 1;
                        continue;
                    }
                    Seen::New if set.complete() => ins_done += 1,
                    Seen::New | Seen::Duplicate => {}
                }
                stats.arrivals[local] += 1;
                if datagram.tos.is_some_and(wire::is_ce) {
                    stats.data_ce[local] += 1;
                }
                stats.first_data[local].get_or_insert(now);
                stats.last_data[local] = Some(now);
            }
            (Kind::Ack, Role::Out(local)) => {
                let local = local as usize;
                let ce = header.flags.ce();
                let set = &mut stats.acked[local];
                match set.insert(header.sequence) {
                    Seen::OutOfRange => {
                        stats.ignored.out_of_range += 1;
                        continue;
                    }
                    Seen::Duplicate => continue,
                    Seen::New => {
                        if set.complete() {
                            outs_done += 1;
                        }
                    }
                }
                stats.last_ack[local] = Some(now);
                if ce {
                    stats.ack_ce[local] += 1;
                }
                let _ = feedback.send(Feedback {
                    flow: local as u32,
                    sequence: header.sequence,
                    copy: header.flags.copy(),
                    at_ns: now,
                    entropy: header.entropy,
                    ce,
                });
            }
            _ => stats.ignored.unknown_flow += 1,
        }
    }
    // What is still in the socket would be dropped silently with it: read and count it.
    if socket.set_nonblocking(true).is_ok() {
        while sys::recv_with_tos(socket, &mut buf).is_ok() {
            stats.ignored.drained += 1;
        }
    }
    Ok(stats)
}

fn report(
    config: &AgentConfig,
    out_flows: &[OutFlow],
    ports: &[u16],
    sent: &SenderStats,
    received: &ReceiverStats,
) -> AgentReport {
    let plan = &config.plan;
    let me = config.host;
    let flows = out_flows
        .iter()
        .enumerate()
        .map(|(local, flow)| {
            let spec = plan.flows[flow.id as usize];
            FlowReport {
                flow: flow.id,
                dst: plan.hosts[spec.dst as usize].name.clone(),
                bytes: spec.bytes,
                packets: flow.packets,
                acks: received.acked[local].distinct(),
                duplicate_acks: received.acked[local].duplicates(),
                ce_marks: received.ack_ce[local],
                retransmits: sent.retransmits[local],
                first_send_ns: sent.first_send[local],
                last_send_ns: sent.last_send[local],
                last_ack_ns: received.last_ack[local],
            }
        })
        .collect();

    // Incoming flows, grouped by source host in host order.
    let incoming: Vec<u32> = plan
        .flows
        .iter()
        .filter(|flow| flow.dst == me)
        .map(|flow| flow.src)
        .collect();
    let mut sources: Vec<u32> = incoming.clone();
    sources.sort_unstable();
    sources.dedup();
    let received_report = sources
        .iter()
        .map(|&src| {
            let locals: Vec<usize> = incoming
                .iter()
                .enumerate()
                .filter(|(_, &s)| s == src)
                .map(|(local, _)| local)
                .collect();
            let sum = |f: &dyn Fn(usize) -> u64| locals.iter().map(|&l| f(l)).sum::<u64>();
            SourceReport {
                src: plan.hosts[src as usize].name.clone(),
                flows: locals.len() as u32,
                expected: sum(&|l| {
                    u64::from(received.received[l].distinct() + received.received[l].missing())
                }),
                packets: sum(&|l| received.arrivals[l]),
                duplicates: sum(&|l| received.received[l].duplicates()),
                missing: sum(&|l| u64::from(received.received[l].missing())),
                ce_marks: sum(&|l| received.data_ce[l]),
                first_ns: locals.iter().filter_map(|&l| received.first_data[l]).min(),
                last_ns: locals.iter().filter_map(|&l| received.last_data[l]).max(),
            }
        })
        .collect();

    let lateness = sent.lateness.summary();
    let host = &plan.hosts[me as usize];
    AgentReport {
        host: host.name.clone(),
        address: host.address,
        collective: plan.collective,
        host_lb: format!("{:?}", config.host_lb).to_lowercase(),
        payload: config.payload,
        link_rate_bps: config.link_rate_bps,
        load: config.load,
        start_ns: config.start_at_ns,
        ready_ns: 0,
        first_send_ns: sent.first_ns,
        last_ack_ns: received.last_ack.iter().flatten().copied().max(),
        complete: received.complete,
        timed_out: received.timed_out,
        flows,
        received: received_report,
        acks_sent: received.acks_sent,
        recovery: sent.recovery,
        ignored: received.ignored.clone(),
        pacing: PacingReport {
            requested_bps: config.load * config.link_rate_bps as f64,
            achieved_bps: match (sent.first_ns, sent.last_ns) {
                (Some(first), Some(last)) => achieved_bps(first, last, sent.wire_bytes_but_last),
                _ => None,
            },
            ack_wire_bytes: 0,
            link_bps: match (sent.first_ns, sent.last_ns, sent.ack_bytes_at_first) {
                (Some(first), Some(last), Some(acks)) => achieved_bps(
                    first,
                    last,
                    sent.wire_bytes_but_last + (sent.ack_bytes_at_last - acks),
                ),
                _ => None,
            },
            expected_link_bps: match (sent.first_ns, sent.last_ns, sent.ack_bytes_at_first) {
                (Some(first), Some(last), Some(acks)) if last > first => {
                    let ack_bps =
                        (sent.ack_bytes_at_last - acks) as f64 * 8.0 * 1e9 / (last - first) as f64;
                    (config.load * config.link_rate_bps as f64 + ack_bps)
                        .min(config.link_rate_bps as f64)
                }
                _ => config.load * config.link_rate_bps as f64,
            },
            packets: sent.packets,
            wire_bytes: sent.wire_bytes,
            first_send_ns: sent.first_ns,
            last_send_ns: sent.last_ns,
            late_p50_ns: lateness.p50_ns,
            late_p99_ns: lateness.p99_ns,
            late_max_ns: lateness.max_ns,
            spin_ns: config.spin_ns,
            catch_up: config.catch_up,
            realtime: sent.realtime,
            send_retries: sent.send_retries,
        },
        entropy: EntropyReport {
            pool: ports.len() as u16,
            ports: ports.to_vec(),
            recycled: sent.recycled,
            fresh: sent.fresh,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packetize_counts_data_bytes_after_the_header() {
        // 1472-byte payloads carry 1454 data bytes.
        assert_eq!(packetize(1454, 1472), (1, 1472));
        assert_eq!(packetize(1455, 1472), (2, 19));
        assert_eq!(packetize(1 << 20, 1472), (722, 18 + 1_048_576 - 721 * 1454));
        assert_eq!(packetize(1, 1472), (1, 19));
    }
}
