//! The receiver: ACKs every DATA packet from the flow's source, collects ACKs from the flow's
//! destination for the sender, and keeps the exactly-once accounting — for one host or for
//! every host of a shared agent, over one epoll set of their receive sockets.

use super::*;
use ofan_control::notify::host::HostView;
use ofan_control::notify::transport::NotifySocket;
use ofan_dataplane::arf::{Applied, PathQuality};

/// Whether a packet of `kind` for flow `flow` from `from` comes from where it must: DATA from
/// the flow's source host, an ACK from its destination host, at any of its addresses (one per
/// plane); `false` for no such flow.
pub(super) fn expected_peer(plan: &Plan, flow: u32, kind: Kind, from: Ipv4Addr) -> bool {
    let Some(flow) = plan.flows.get(flow as usize) else {
        return false;
    };
    let host = match kind {
        Kind::Data => flow.src,
        Kind::Ack => flow.dst,
    };
    plan.hosts
        .get(host as usize)
        .is_some_and(|host| host.has_address(from))
}

/// The receiver's line to the sender: the events it sends, and the thread it wakes when a
/// flow others wait for has arrived (the sender may be asleep until its next departure).
pub(super) struct ToSender<'a> {
    pub events: &'a mpsc::Sender<(usize, Event)>,
    pub thread: &'a std::thread::Thread,
}

impl ToSender<'_> {
    fn ack(&self, host: usize, feedback: Feedback) {
        let _ = self.events.send((host, Event::Ack(feedback)));
    }

    fn arrived(&self, host: usize, flow: u32) {
        let _ = self.events.send((host, Event::Arrived(flow)));
        self.thread.unpark();
    }

    fn view(&self, host: usize, plane: usize, view: &std::sync::Arc<PathQuality>) {
        let _ = self.events.send((
            host,
            Event::View {
                plane: plane as u8,
                view: std::sync::Arc::clone(view),
            },
        ));
    }
}

/// The epoll token of host `host`'s notification socket of plane `plane` (a host's receive
/// socket's token is its index).
fn notify_token(host: usize, plane: usize) -> u64 {
    NOTIFY_TOKEN | ((host as u64) << 8) | plane as u64
}

/// Marks a notification socket's token.
const NOTIFY_TOKEN: u64 = 1 << 40;

/// One host's receiving state.
pub(super) struct HostReceiver<'a> {
    /// The host's index among the agent's hosts (tags its ACK feedback).
    index: usize,
    config: &'a AgentConfig,
    roles: &'a [Role],
    /// Per incoming flow: whether an own flow waits for its arrival.
    gates: &'a [bool],
    socket: &'a Socket,
    /// The host link that carries DATA and ACKs instead of the socket, and the frame ACKs are
    /// built in (and arrivals read into) for it.
    shared: Option<&'a SharedLink>,
    /// `plane-arf` with notifications: a socket per plane, and what the host made of them.
    notify: &'a [NotifySocket],
    view: Option<HostView>,
    frame: Box<[u8; shared::FRAME_MAX]>,
    ident: u16,
    link: &'a HostLink,
    deadline_ns: u64,
    stats: ReceiverStats,
    outs_done: usize,
    ins_done: usize,
    /// Since when nothing arrived, once complete.
    quiet_since: u64,
    finished: bool,
}

impl<'a> HostReceiver<'a> {
    pub(super) fn new(index: usize, host: &'a HostSetup<'a>) -> Self {
        let stats = ReceiverStats {
            acked: host
                .out_flows
                .iter()
                .map(|f| SeqSet::new(f.packets))
                .collect(),
            ack_ce: vec![0; host.out_flows.len()],
            last_ack: vec![None; host.out_flows.len()],
            received: host.in_packets.iter().map(|&n| SeqSet::new(n)).collect(),
            arrivals: vec![0; host.in_packets.len()],
            order: vec![Default::default(); host.in_packets.len()],
            data_ce: vec![0; host.in_packets.len()],
            first_data: vec![None; host.in_packets.len()],
            last_data: vec![None; host.in_packets.len()],
            ignored: Ignored::default(),
            acks_sent: 0,
            complete: false,
            timed_out: false,
            notifications: vec![0; host.notify.len()],
            notifications_rejected: 0,
        };
        Self {
            index,
            config: host.config,
            roles: &host.roles,
            gates: &host.in_gates,
            socket: &host.receiver,
            shared: host.shared.as_ref(),
            notify: &host.notify,
            view: host
                .config
                .endpoint
                .as_ref()
                .filter(|_| !host.notify.is_empty())
                .map(endpoint::EndpointConfig::view),
            frame: shared::frame_buffer(),
            ident: 0,
            link: &host.link,
            deadline_ns: host.deadline_ns,
            outs_done: stats.acked.iter().filter(|s| s.complete()).count(),
            ins_done: stats.received.iter().filter(|s| s.complete()).count(),
            stats,
            quiet_since: 0,
            finished: false,
        }
    }

    /// Notes completion (creating the done file), and decides at `now` whether this host is
    /// finished: lingered enough after completing, stopped before, or past its deadline.
    /// `release` answers whether a [`Linger::UntilFile`] file exists (`None`: not asked now; a
    /// sweep asks).
    fn check(
        &mut self,
        now: u64,
        stop: &AtomicBool,
        release: Option<&mut Release>,
    ) -> anyhow::Result<bool> {
        let stats = &mut self.stats;
        if !stats.complete
            && self.outs_done == stats.acked.len()
            && self.ins_done == stats.received.len()
        {
            stats.complete = true;
            self.quiet_since = now;
            if let Some(path) = &self.config.done_file {
                std::fs::write(path, b"")
                    .with_context(|| format!("cannot create {}", path.display()))?;
            }
        }
        if stats.complete {
            let done = match &self.config.linger {
                Linger::Quiet(quiet) => {
                    now.saturating_sub(self.quiet_since) >= quiet.as_nanos() as u64
                }
                Linger::UntilFile(path) => release.is_some_and(|release| release.exists(path)),
            };
            if done {
                return Ok(true);
            }
        } else if stop.load(Ordering::Relaxed) {
            return Ok(true);
        }
        if now > self.deadline_ns {
            stats.timed_out = !stats.complete;
            return Ok(true);
        }
        Ok(false)
    }

    /// Handles one datagram that arrived at `now`: ACKs DATA, records it, passes new ACKs on.
    fn on_datagram(
        &mut self,
        packet: &[u8],
        datagram: sys::Received,
        now: u64,
        to_sender: &ToSender<'_>,
    ) {
        let stats = &mut self.stats;
        self.quiet_since = now;
        let Ok(header) = wire::Header::parse(packet) else {
            stats.ignored.malformed += 1;
            return;
        };
        let plan = &self.config.plan;
        if header.collective != plan.collective {
            stats.ignored.foreign_collective += 1;
            return;
        }
        let role = self
            .roles
            .get(header.flow as usize)
            .copied()
            .unwrap_or(Role::Other);
        // Only the flow's peer may speak for it: otherwise any host that knows the collective
        // id could fake delivery (a forged DATA would be ACKed and recorded) or completion (a
        // forged ACK). Rejected before any ACK is sent or anything recorded.
        if role != Role::Other
            && !expected_peer(plan, header.flow, header.kind, *datagram.from.ip())
        {
            stats.ignored.wrong_source += 1;
            return;
        }
        match (header.kind, role) {
            (Kind::Data, Role::In(local)) => {
                let local = local as usize;
                // One ACK per DATA packet, duplicates included, echoing CE.
                let mut ack = [0u8; HEADER_LEN];
                header.ack(datagram.tos).write(&mut ack);
                let to = SocketAddrV4::new(*datagram.from.ip(), self.config.port);
                let sent = match self.shared {
                    Some(shared) => {
                        self.ident = self.ident.wrapping_add(1);
                        let datagram = shared::Datagram {
                            src_port: self.config.port,
                            dst: to,
                            tos: 0,
                        };
                        shared.send(RingId::UpAck, &mut self.frame, datagram, self.ident, &ack)
                    }
                    None => self.socket.send_to(&ack, &to.into()).map(drop),
                };
                if sent.is_err() {
                    stats.ignored.ack_send_errors += 1;
                } else {
                    stats.acks_sent += 1;
                    self.link.ack_sent(wire::wire_bytes(HEADER_LEN as u64));
                }
                let set = &mut stats.received[local];
                let seen = set.insert(header.sequence);
                match seen {
                    Seen::OutOfRange => {
                        stats.ignored.out_of_range += 1;
                        return;
                    }
                    Seen::New if set.complete() => {
                        self.ins_done += 1;
                        if self.gates[local] {
                            to_sender.arrived(self.index, header.flow);
                        }
                    }
                    Seen::New | Seen::Duplicate => {}
                }
                if seen == Seen::New && header.flags.copy() == 0 {
                    let (flow, reordering) = &mut stats.order[local];
                    reordering.record(flow, header.sequence);
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
                        return;
                    }
                    Seen::Duplicate => return,
                    Seen::New => {
                        if set.complete() {
                            self.outs_done += 1;
                        }
                    }
                }
                stats.last_ack[local] = Some(now);
                if ce {
                    stats.ack_ce[local] += 1;
                }
                to_sender.ack(
                    self.index,
                    Feedback {
                        flow: local as u32,
                        sequence: header.sequence,
                        copy: header.flags.copy(),
                        at_ns: now,
                        entropy: header.entropy,
                        ce,
                    },
                );
            }
            _ => stats.ignored.unknown_flow += 1,
        }
    }

    /// Handles everything waiting in the socket (or the host link: the receiver reads it again
    /// at its next poll, [`LINK_POLL`]).
    fn drain(&mut self, buf: &mut [u8], to_sender: &ToSender<'_>) -> anyhow::Result<()> {
        if let Some(shared) = self.shared {
            while let Some(datagram) =
                shared.recv(&mut self.frame, buf, &mut self.stats.ignored.malformed)
            {
                let now = sys::monotonic_ns();
                self.on_datagram(&buf[..datagram.len], datagram, now, to_sender);
            }
            return Ok(());
        }
        loop {
            let datagram = match sys::recv_with_tos(self.socket, buf) {
                Ok(datagram) => datagram,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("receiving"),
            };
            let now = sys::monotonic_ns();
            self.on_datagram(&buf[..datagram.len], datagram, now, to_sender);
        }
    }

    /// Handles what waits in the socket or the host link, then notes completion (and creates
    /// the done file) as soon as it is all read, and closes the host once it has finished.
    fn take_input(
        &mut self,
        buf: &mut [u8],
        to_sender: &ToSender<'_>,
        stop: &AtomicBool,
        epoll: &sys::Epoll,
    ) -> anyhow::Result<()> {
        self.drain(buf, to_sender)
            .with_context(|| format!("host {}", self.name()))?;
        if self
            .check(sys::monotonic_ns(), stop, None)
            .with_context(|| format!("host {}", self.name()))?
        {
            self.unwatch(epoll);
            self.close(buf);
        }
        Ok(())
    }

    /// The host finished: what is still in the socket would be dropped silently with it, so
    /// it is read and counted.
    fn close(&mut self, buf: &mut [u8]) {
        self.finished = true;
        if let Some(shared) = self.shared {
            shared.detach();
            let mut malformed = 0;
            while shared.recv(&mut self.frame, buf, &mut malformed).is_some() {
                self.stats.ignored.drained += 1;
            }
            self.stats.ignored.malformed += malformed;
        }
        while sys::recv_with_tos(self.socket, buf).is_ok() {
            self.stats.ignored.drained += 1;
        }
    }

    /// Stops watching the host's sockets (a host link is polled, not watched).
    fn unwatch(&self, epoll: &sys::Epoll) {
        if self.shared.is_none() {
            let _ = epoll.remove(self.socket);
        }
        for socket in self.notify {
            let _ = epoll.remove(socket);
        }
    }

    /// Takes what waits in plane `plane`'s notification socket; a view that changed goes to
    /// the sender.
    fn take_notifications(&mut self, plane: usize, to_sender: &ToSender<'_>) {
        let (Some(socket), Some(view)) = (self.notify.get(plane), self.view.as_mut()) else {
            return;
        };
        let mut buffer = [0u8; 128];
        while let Ok(Some(received)) = socket.try_receive(&mut buffer) {
            // A truncated datagram is longer than any message: the length check refuses it.
            let bytes = &buffer[..if received.truncated {
                buffer.len()
            } else {
                received.len
            }];
            let now = sys::monotonic_ns();
            match view.receive(plane, *received.from.ip(), received.ttl, bytes, now) {
                // A flow message: not a link state, nothing taken.
                Ok(None) => {}
                Ok(Some(applied)) => {
                    self.stats.notifications[plane] += 1;
                    if applied == Applied::Changed {
                        to_sender.view(self.index, plane, view.view(plane));
                    }
                }
                Err(_) => self.stats.notifications_rejected += 1,
            }
        }
    }

    /// Ages the host's view at `now`; the planes whose view changed go to the sender.
    fn expire_views(&mut self, now: u64, to_sender: &ToSender<'_>) {
        if let Some(view) = self.view.as_mut() {
            for plane in view.expire(now) {
                to_sender.view(self.index, plane, view.view(plane));
            }
        }
    }

    /// What this host's receiver measured.
    pub(super) fn finish(self) -> ReceiverStats {
        self.stats
    }

    fn name(&self) -> &str {
        &self.config.plan.hosts[self.config.host as usize].name
    }
}

/// Whether the files that end lingering ([`Linger::UntilFile`]) exist, asked once per sweep
/// of the hosts: every host of a shared agent lingers on the runner's one file.
#[derive(Debug, Default)]
pub(super) struct Release {
    asked: Vec<(std::path::PathBuf, bool)>,
}

impl Release {
    fn exists(&mut self, path: &std::path::Path) -> bool {
        if let Some((_, exists)) = self.asked.iter().find(|(asked, _)| asked == path) {
            return *exists;
        }
        let exists = path.exists();
        self.asked.push((path.to_owned(), exists));
        exists
    }
}

/// Receives for every host until each has finished ([`HostReceiver::check`]): waits on all
/// receive sockets at once and drains each socket that has input, reads every host link that
/// has frames every [`LINK_POLL`]; sweeps every host (stop flag, linger, deadlines) every
/// `RECV_POLL`, not at every wake-up. (At every wake-up, each host that had completed asked
/// the file system whether the runner's release file existed: 127 `stat` calls per received
/// frame at the end of a k = 8 run, in the agents' real-time receiver, above the switches.)
///
/// Host links are polled rather than woken: a link that woke the receiver for its frames cost
/// the switch's worker a FIFO `write` and the receiver a wake-up for (nearly) every frame — a
/// context switch each, preempting the worker: 11 500 a second in a k = 8 lab at 2 Mbit/s
/// (`perf` of the scheduler's switches over a run), 3 000 polling. Polled every `LINK_POLL`,
/// the receiver wakes at most 5 000 times a second whatever the rate, and a frame waits for it
/// at most that long: an arrival is timestamped, and its
/// ACK sent, up to `LINK_POLL` late (a 1 MB flow at 20 Mbit/s lasts 0.4 s: 0.05 % of it).
///
/// # Errors
/// A receive error or an uncreatable done file, naming the host.
pub(super) fn receive_loop(
    hosts: &mut [HostReceiver<'_>],
    events: &mpsc::Sender<(usize, Event)>,
    stop: &AtomicBool,
    sender: &std::thread::Thread,
) -> anyhow::Result<()> {
    let to_sender = &ToSender {
        events,
        thread: sender,
    };
    let epoll = sys::Epoll::new().context("epoll")?;
    for (index, host) in hosts.iter().enumerate() {
        host.socket
            .set_nonblocking(true)
            .and_then(|()| match host.shared {
                Some(_) => Ok(()),
                None => epoll.add(host.socket, index as u64),
            })
            .with_context(|| format!("host {}: watching the receive socket", host.name()))?;
        for (plane, socket) in host.notify.iter().enumerate() {
            epoll
                .add(socket, notify_token(index, plane))
                .with_context(|| {
                    format!(
                        "host {}: watching plane {plane}'s notifications",
                        host.name()
                    )
                })?;
        }
    }
    let polled = hosts.iter().any(|host| host.shared.is_some());
    // Only the header is read; the rest of a DATA packet is truncated away.
    let mut buf = [0u8; 64];
    let mut ready = Vec::with_capacity(hosts.len());
    let mut next_sweep = 0;
    let mut next_poll = 0;
    loop {
        let now = sys::monotonic_ns();
        if polled && now >= next_poll {
            next_poll = now + LINK_POLL.as_nanos() as u64;
            for host in hosts.iter_mut().filter(|host| !host.finished) {
                if !host.shared.is_some_and(SharedLink::pending) {
                    continue;
                }
                host.take_input(&mut buf, to_sender, stop, &epoll)?;
            }
        }
        if now >= next_sweep {
            next_sweep = now + RECV_POLL.as_nanos() as u64;
            let mut release = Release::default();
            for host in hosts.iter_mut().filter(|host| !host.finished) {
                host.expire_views(now, to_sender);
                if host
                    .check(now, stop, Some(&mut release))
                    .with_context(|| format!("host {}", host.name()))?
                {
                    host.unwatch(&epoll);
                    host.close(&mut buf);
                }
            }
            if hosts.iter().all(|host| host.finished) {
                return Ok(());
            }
        }
        if polled {
            // Host links: sleep to the next poll (what sockets any host has, epoll hands over
            // without waiting).
            sys::sleep_until_ns(next_poll.min(next_sweep));
            epoll
                .wait(&mut ready, Duration::ZERO)
                .context("epoll_wait")?;
        } else {
            // Whole milliseconds (what epoll takes), rounded up: a wait cut to 0 would spin.
            let until_sweep = next_sweep
                .saturating_sub(sys::monotonic_ns())
                .div_ceil(1_000_000);
            epoll
                .wait(&mut ready, Duration::from_millis(until_sweep))
                .context("epoll_wait")?;
        }
        for &token in &ready {
            let index = if token & NOTIFY_TOKEN != 0 {
                (token & !NOTIFY_TOKEN) >> 8
            } else {
                token
            };
            let Some(host) = hosts.get_mut(index as usize) else {
                continue;
            };
            if host.finished {
                continue;
            }
            if token & NOTIFY_TOKEN != 0 {
                host.take_notifications((token & 0xff) as usize, to_sender);
            } else {
                host.take_input(&mut buf, to_sender, stop, &epoll)?;
            }
        }
    }
}
