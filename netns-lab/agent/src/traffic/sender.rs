//! The sender thread: paced departures, loss recovery, entropy choice — for one host or for
//! every host of a shared agent.
//!
//! Each host's sending state is a [`HostSender`]: its pacer, recovery, entropy selector and
//! statistics, with [`HostSender::next_wake`] (when it next has something to do) and
//! [`HostSender::step`] (do it: send one packet, or find there is nothing to send yet). The
//! thread ([`send_loop`]) sleeps until the earliest host's wake-up minus the spin window,
//! spins, and steps every host that is due in one pass, earliest first; which hosts those are
//! is decided by the pure [`earliest`] and [`due_hosts`].
//!
//! With catch-up, the passes fall on a grid ([`departure_grid_ns`], [`on_grid`]): a pass
//! wakes at the first grid point at or after the earliest departure and serves every host due
//! by then. One wake-up serves the departures of all hosts that fall within a grid step, each
//! late by less than the step — an eighth of a frame's wire time, which the next gap makes up
//! (catch-up shortens it by up to half a wire time), so no host's rate changes and a host's
//! own departures are never sent together. Without the grid, a shared agent woke for each
//! departure that came due alone, preempting the switches' pool each time: in a 512 KB
//! permutation at k = 8 and 2 Mbit/s (128 hosts, ≈ 21 000 departures a second) `perf sched`
//! counted 13 596 context switches of the sender and 853 ms of its CPU, against 2 732–3 286 and
//! 179–214 ms with the grid.

use super::*;

/// Waits until `due_ns`: sleeps until `spin_ns` before it, then spins. Returns the time.
pub(super) fn wait_until(due_ns: u64, spin_ns: u64) -> u64 {
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

/// The wire time of one full DATA frame at the link rate, ns (rounded up; a rate of 0 counts
/// as 1 bit/s).
pub(super) fn frame_wire_ns(config: &AgentConfig) -> u64 {
    let wire_bits = wire::wire_bytes(u64::from(config.payload)) * 8;
    (wire_bits * 1_000_000_000).div_ceil(config.link_rate_bps.max(1))
}

/// How many grid steps a full DATA frame's wire time spans ([`departure_grid_ns`]).
pub(super) const GRID_STEPS_PER_FRAME: u64 = 8;

/// The step of the grid the passes fall on, ns: an eighth of a full DATA frame's wire time at
/// the link rate — with catch-up only (0: no grid; a strict pacer would lose each step's
/// lateness).
pub(super) fn departure_grid_ns(config: &AgentConfig) -> u64 {
    if !config.catch_up || config.link_rate_bps == 0 {
        return 0;
    }
    frame_wire_ns(config) / GRID_STEPS_PER_FRAME
}

/// The first point of a grid of step `grid_ns` at or after `at` (`at` itself without a grid).
pub(super) fn on_grid(at: u64, grid_ns: u64) -> u64 {
    if grid_ns == 0 {
        at
    } else {
        at.div_ceil(grid_ns).saturating_mul(grid_ns)
    }
}

/// The host whose wake-up comes first and when (`None`: every host has finished). Ties go to
/// the lowest index.
pub(super) fn earliest(wakes: &[Option<u64>]) -> Option<(usize, u64)> {
    wakes
        .iter()
        .enumerate()
        .filter_map(|(host, wake)| wake.map(|at| (host, at)))
        .min_by_key(|&(host, at)| (at, host))
}

/// Whether a host waking at `wake` is due at `now` (a finished host never is).
pub(super) fn is_due(wake: Option<u64>, now: u64) -> bool {
    wake.is_some_and(|at| at <= now)
}

/// Replaces `due` with the hosts due at `now`, earliest wake-up first (ties: lowest index), so
/// that a pass that serves several hosts serves them in the order their departures fell due.
pub(super) fn due_hosts(wakes: &[Option<u64>], now: u64, due: &mut Vec<usize>) {
    due.clear();
    due.extend((0..wakes.len()).filter(|&host| is_due(wakes[host], now)));
    due.sort_by_key(|&host| (wakes[host], host));
}

/// What a host sends DATA through: its entropy pool's sockets (one per source port), or its
/// shared-memory link with those sockets' ports as the source ports.
#[derive(Debug, Clone, Copy)]
pub(super) struct Endpoints<'a> {
    pub pool: &'a [Socket],
    pub ports: &'a [u16],
    pub shared: Option<&'a SharedLink>,
}

/// One host's sending state.
pub(super) struct HostSender<'a> {
    config: &'a AgentConfig,
    flows: &'a [OutFlow],
    endpoints: Endpoints<'a>,
    /// The frame a DATA packet is built in for the host link, and its IPv4 identification.
    frame: Box<[u8; shared::FRAME_MAX]>,
    ident: u16,
    link: &'a HostLink,
    deadline_ns: u64,
    pacer: Pacer,
    selector: EntropySelector,
    recovery: SelectiveRepeat,
    /// The flows' congestion windows (`None`: no congestion control).
    windows: Option<FlowWindows>,
    /// Every window was full (or held the packets to resend back): idle until an ACK opens
    /// one, looked at again from this time on ([`BLOCKED_POLL_STEPS`]).
    blocked_until: Option<u64>,
    /// Since when the windows have held back a host with new packets left, and the ACK wire
    /// bytes its link had carried then.
    blocked_since: Option<(u64, u64)>,
    buf: Vec<u8>,
    next_sequence: Vec<u32>,
    /// Own flows with new packets left, served round-robin from `cursor`.
    active: Vec<usize>,
    cursor: usize,
    /// Own flows that wait for an incoming flow's arrival ([`OutFlow::after`]).
    waiting: Vec<usize>,
    /// The sender waited for a timer or an ACK with nothing to send: the next departure is not
    /// late, it resumes the schedule from then.
    idle: bool,
    /// The deadline passed while nothing was left to send.
    finished: bool,
    /// ACK wire bytes already charged to the host link.
    acks_charged: u64,
    /// A multi-plane host's planes (`None`: one plane).
    planes: Option<super::planes::PlaneSender>,
    stats: SenderStats,
}

impl<'a> HostSender<'a> {
    pub(super) fn new(
        config: &'a AgentConfig,
        flows: &'a [OutFlow],
        endpoints: Endpoints<'a>,
        link: &'a HostLink,
        deadline_ns: u64,
    ) -> Self {
        let total: u64 = flows.iter().map(|f| u64::from(f.packets)).sum();
        let stats = SenderStats {
            realtime: false,
            first_send: vec![None; flows.len()],
            last_send: vec![None; flows.len()],
            retransmits: vec![0; flows.len()],
            lateness: Lateness::with_capacity(usize::try_from(total).unwrap_or(0)),
            ..SenderStats::default()
        };
        let planes = config.plan.hosts[config.host as usize].planes.len();
        // A multi-plane host paces its P ports together (each port is paced by itself too:
        // `planes`).
        let paced_bps = config.load * config.link_rate_bps as f64 * planes.max(1) as f64;
        let packets: Vec<u32> = flows.iter().map(|flow| flow.packets).collect();
        let planes = (planes > 1).then(|| {
            let mut sender = super::planes::PlaneSender::new(
                config.host_planes,
                planes as u8,
                flows
                    .iter()
                    .map(|flow| u64::from(flow.id) ^ config.seed.rotate_left(32)),
                &packets,
            );
            if let Some(endpoint) = &config.endpoint {
                // Each own flow's destination keys at the host's edges.
                let keys = flows.iter().map(|flow| {
                    let dst = config.plan.flows[flow.id as usize].dst as usize;
                    endpoint.keys.get(dst).cloned().unwrap_or_default()
                });
                sender.with_views(endpoint, keys);
            }
            sender
        });
        let pool = endpoints.pool;
        Self {
            config,
            flows,
            endpoints,
            frame: shared::frame_buffer(),
            ident: 0,
            link,
            deadline_ns,
            pacer: Pacer::new(paced_bps, config.start_at_ns).with_catch_up(config.catch_up),
            selector: EntropySelector::new(
                config.host_lb,
                flows.len(),
                pool.len() as u16,
                config.seed ^ (u64::from(config.host) << 32),
            ),
            recovery: new_recovery(config, &packets),
            windows: config
                .cc
                .as_ref()
                .map(|cc| FlowWindows::new(cc, flows.len())),
            blocked_until: None,
            blocked_since: None,
            buf: vec![0u8; config.payload as usize],
            next_sequence: vec![0u32; flows.len()],
            active: (0..flows.len())
                .filter(|&i| flows[i].packets > 0 && flows[i].after.is_none())
                .collect(),
            cursor: 0,
            waiting: (0..flows.len())
                .filter(|&i| flows[i].packets > 0 && flows[i].after.is_some())
                .collect(),
            idle: false,
            finished: false,
            acks_charged: 0,
            planes,
            stats,
        }
    }

    /// When this host next has something to do (`None`: it is done — every packet ACKed, or
    /// past its deadline). Its next paced departure; when idle (only ACKs or retransmission
    /// timers outstanding), the next timer or the deadline.
    pub(super) fn next_wake(&mut self) -> Option<u64> {
        if self.finished || self.recovery.complete() {
            return None;
        }
        let due = self.pacer.due_ns();
        if due > self.deadline_ns {
            return None;
        }
        if self.idle {
            if self.blocked_until.is_none() && !self.active.is_empty() {
                // A flow that waited for an arrival may start: at once.
                return Some(due);
            }
            let timer = match self.blocked_until {
                // Waiting for room in a window: the packets that wait for it are not due, an
                // ACK (looked for from `until` on) or an expired timer is.
                Some(until) => self.recovery.next_timer().unwrap_or(u64::MAX).min(until),
                None => self.recovery.next_deadline().unwrap_or(u64::MAX),
            };
            return Some(timer.min(self.deadline_ns).max(due));
        }
        Some(due)
    }

    /// Applies what the receiver passed on.
    pub(super) fn on_event(&mut self, event: Event) {
        match event {
            Event::Ack(ack) => self.on_feedback(ack),
            Event::Arrived(flow) => self.on_arrived(flow),
            Event::View { plane, view } => {
                if let Some(planes) = &mut self.planes {
                    planes.set_view(plane, view);
                }
            }
        }
    }

    /// Incoming flow `flow` has arrived: the own flows that waited for it join the round
    /// robin.
    fn on_arrived(&mut self, flow: u32) {
        let (flows, active) = (self.flows, &mut self.active);
        self.waiting.retain(|&local| {
            let starts = flows[local].after == Some(flow);
            if starts {
                active.push(local);
            }
            !starts
        });
    }

    /// Applies an ACK the receiver passed on.
    pub(super) fn on_feedback(&mut self, ack: Feedback) {
        match &mut self.windows {
            Some(windows) => {
                windows.on_ack(
                    &mut self.recovery,
                    ack.flow,
                    ack.sequence,
                    ack.copy,
                    ack.ce,
                    ack.at_ns,
                );
            }
            None => {
                self.recovery
                    .on_ack_echo(ack.flow, ack.sequence, ack.copy, ack.at_ns);
            }
        }
        self.selector.on_ack(ack.flow as usize, ack.entropy, ack.ce);
        if let Some(planes) = &mut self.planes {
            planes.on_ack(ack.flow as usize, ack.sequence, ack.ce);
        }
    }

    /// At `now` (at or after [`next_wake`](Self::next_wake)): sends the next packet — one whose
    /// retransmission timer expired, else the next new one — or, with nothing to send, turns
    /// idle (or finishes, past the deadline).
    ///
    /// # Errors
    /// When a send fails for another reason than a full buffer.
    pub(super) fn step(&mut self, now: u64) -> anyhow::Result<()> {
        if self.recovery.complete() {
            return Ok(());
        }
        let due = self.pacer.due_ns();
        self.blocked_until = None;
        let lost = match &mut self.windows {
            Some(windows) => windows.next_lost(&mut self.recovery, now),
            None => self.recovery.next_lost(now),
        };
        if lost.is_none() {
            if let Some(windows) = &self.windows {
                match windows.first_open(&self.recovery, &self.active, self.cursor) {
                    Some(open) => self.cursor = open,
                    // Every window full (or nothing new left): idle until an ACK opens one.
                    None => {
                        self.blocked_until = Some(now + self.blocked_poll_ns());
                        if !self.active.is_empty() {
                            // Held back since its departure fell due (the pass that found
                            // it full may come up to a grid step later).
                            let acks = self.link.ack_bytes();
                            self.blocked_since.get_or_insert((due.min(now), acks));
                        }
                    }
                }
            }
        }
        let (local, sequence, retransmission) = if let Some((flow, seq)) = lost {
            if let Some(planes) = &mut self.planes {
                planes.on_loss(flow as usize, seq);
            }
            (flow as usize, seq, true)
        } else if let (None, Some(&local)) = (self.blocked_until, self.active.get(self.cursor)) {
            (local, self.next_sequence[local], false)
        } else {
            // Nothing to send until a timer expires, an ACK opens a window or completes the
            // flows, or a flow that waits for an arrival may start. That wait is the
            // collective's, not the pacer's: it is left out of the paced phase as a window's.
            self.idle = true;
            if self.active.is_empty() && !self.waiting.is_empty() {
                let acks = self.link.ack_bytes();
                self.blocked_since.get_or_insert((due.min(now), acks));
            }
            if now >= self.deadline_ns {
                self.finished = true;
            }
            return Ok(());
        };
        // A multi-plane host: the packet's plane; a new packet waits (idle) while that plane's
        // port is busy, a retransmission leaves at once.
        let slack = if retransmission {
            u64::MAX / 2
        } else {
            self.blocked_poll_ns()
        };
        let plane_choice = match &mut self.planes {
            None => None,
            Some(planes) => match planes.choose(local, now, slack) {
                Ok(choice) => Some(choice),
                Err(until) => {
                    self.idle = true;
                    self.blocked_until = Some(until);
                    return Ok(());
                }
            },
        };
        let flow = &self.flows[local];
        let len = if sequence + 1 == flow.packets {
            flow.last_payload
        } else {
            self.config.payload
        };
        if let Some((since, acks)) = self.blocked_since.take() {
            self.stats.blocked_ns += now.saturating_sub(since);
            self.stats.blocked_ack_bytes += self.link.ack_bytes().saturating_sub(acks);
        }
        if self.idle {
            self.pacer.resume(now);
            self.idle = false;
            // The ACKs sent while the host waited had its link to themselves: they delay no
            // departure.
            self.acks_charged = self.link.ack_bytes();
        } else {
            self.stats.lateness.record(now.saturating_sub(due), now);
        }

        let mut entropy = self.selector.choose(local);
        if let (Some(choice), Some(planes)) = (plane_choice, &self.planes) {
            if planes.policy() == PlanePolicy::Entropy {
                // The policy's entropy value names the source port.
                entropy = choice.entropy % self.endpoints.pool.len() as u16;
            }
        }
        let dst = plane_choice.map_or(&flow.dst, |choice| {
            &flow.dst_planes[usize::from(choice.plane)]
        });
        let copy = self.recovery.transmissions(local as u32, sequence);
        Header {
            kind: Kind::Data,
            flags: Flags::of_copy(copy),
            collective: self.config.plan.collective,
            flow: flow.id,
            sequence,
            entropy,
        }
        .write(&mut self.buf);
        let socket = &self.endpoints.pool[usize::from(entropy)];
        let send_start = sys::monotonic_ns();
        self.ident = self.ident.wrapping_add(1);
        loop {
            let sent = match self.endpoints.shared {
                Some(shared) => shared.send(
                    RingId::UpData,
                    &mut self.frame,
                    shared::Datagram {
                        src_port: self.endpoints.ports[usize::from(entropy)],
                        dst: flow.dst_v4,
                        tos: ECN_ECT0,
                    },
                    self.ident,
                    &self.buf[..len as usize],
                ),
                None => socket.send_to(&self.buf[..len as usize], dst).map(drop),
            };
            match sent {
                Ok(()) => break,
                // The switch has not read its host link for the ring's 128 frame times: it is
                // stopped or far behind. The frame is lost there, as at a full RX ring of a
                // switch on a veth, and counted (`host.link_full`); recovery resends it.
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock && self.endpoints.shared.is_some() =>
                {
                    self.stats.host_link_drops += 1;
                    break;
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.raw_os_error() == Some(libc::ENOBUFS) =>
                {
                    self.stats.send_retries += 1;
                    std::thread::sleep(SEND_RETRY_WAIT);
                }
                Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                    bail!(
                        "--payload {}: the DATA packet does not fit the path MTU ({e})",
                        self.config.payload
                    )
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("sending flow {} to {:?}", flow.id, flow.dst.as_socket())
                    })
                }
            }
        }
        self.stats.send_ns += sys::monotonic_ns().saturating_sub(send_start);
        self.recovery.on_send(local as u32, sequence, now);
        let wire = wire::wire_bytes(u64::from(len));
        if let (Some(choice), Some(planes)) = (plane_choice, &mut self.planes) {
            let port_ns = (wire * 8 * 1_000_000_000).div_ceil(self.config.link_rate_bps.max(1));
            planes.sent(local, sequence, choice, now, wire, port_ns);
        }
        // The ACKs sent since the previous departure took their share of the host link.
        let acks = self.link.ack_bytes();
        let ack_wire = acks - self.acks_charged;
        self.acks_charged = acks;
        let delay = self.link.ack_delay_ps(ack_wire, wire, &self.pacer);
        self.pacer.sent_with_acks(now, wire, delay);

        let stats = &mut self.stats;
        stats.first_send[local].get_or_insert(now);
        stats.last_send[local] = Some(now);
        stats.packets += 1;
        stats.wire_bytes += wire;
        // The paced phase lasts while new packets remain (see `SenderStats`).
        if !self.active.is_empty() {
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
            return Ok(());
        }
        self.next_sequence[local] += 1;
        if self.next_sequence[local] == flow.packets {
            self.active.remove(self.cursor);
        } else {
            self.cursor += 1;
        }
        if self.cursor >= self.active.len() {
            self.cursor = 0;
        }
        Ok(())
    }

    /// How long a host whose windows are all full waits before it looks for an opened one: a
    /// step of the departure grid (an eighth of a full frame's wire time; the same without a
    /// grid), so that an ACK's room is used within the lateness the pacer allows anyway.
    fn blocked_poll_ns(&self) -> u64 {
        (frame_wire_ns(self.config) / BLOCKED_POLL_STEPS).max(1)
    }

    /// What this host's sender measured.
    pub(super) fn finish(mut self, realtime: bool) -> SenderStats {
        self.stats.realtime = realtime;
        self.stats.recycled = self.selector.recycled;
        self.stats.fresh = self.selector.fresh;
        self.stats.recovery = self.recovery.stats();
        self.stats.reordering = self.recovery.reordering();
        self.stats.mean_window = self.windows.as_ref().map(FlowWindows::mean_window);
        self.stats.planes = self.planes.map(|planes| planes.report());
        (self.stats.lost_ns, self.stats.lost_sends) = self.pacer.lost();
        self.stats
    }
}

/// Runs every host's sender until each is done or `stop` is set: sleeps until the grid point
/// at or after the earliest wake-up ([`on_grid`], step `grid_ns`; 0: the wake-up itself) less
/// `spin_ns`, spins, and steps every host due. ACKs (tagged with their host's index) are
/// applied before each pass. Returns whether the thread ran real-time.
///
/// # Errors
/// A host's send error, naming the host.
pub(super) fn send_loop(
    hosts: &mut [HostSender<'_>],
    feedback: &mpsc::Receiver<(usize, Event)>,
    stop: &AtomicBool,
    spin_ns: u64,
    grid_ns: u64,
    realtime: Option<i32>,
) -> anyhow::Result<bool> {
    // Wake-ups as close to the asked time as the kernel allows (the default slack is 50 µs).
    let _ = sys::set_timer_slack_ns(1);
    let mut is_realtime = false;
    if let Some(priority) = realtime {
        match sys::set_realtime(priority) {
            Ok(()) => is_realtime = true,
            Err(e) => eprintln!("ofan-lab agent: no real-time priority ({e}); pacing may suffer"),
        }
    }
    let mut wakes: Vec<Option<u64>> = vec![None; hosts.len()];
    let mut due = Vec::with_capacity(hosts.len());
    while !stop.load(Ordering::Relaxed) {
        take_events(feedback, hosts);
        for (wake, host) in wakes.iter_mut().zip(hosts.iter_mut()) {
            *wake = host.next_wake();
        }
        let Some((_, earliest_at)) = earliest(&wakes) else {
            break;
        };
        let at = on_grid(earliest_at, grid_ns);
        // Never sleep longer than IDLE_POLL: the stop flag is checked that often.
        let poll_end = sys::monotonic_ns() + IDLE_POLL.as_nanos() as u64;
        if at > poll_end {
            // Parked, not asleep: the receiver unparks the sender when a flow others wait
            // for has arrived (a spurious wake-up only loops once more).
            let now = sys::monotonic_ns();
            std::thread::park_timeout(Duration::from_nanos(poll_end.saturating_sub(now)));
            continue;
        }
        let now = wait_until(at, spin_ns);
        take_events(feedback, hosts);
        due_hosts(&wakes, now, &mut due);
        for &index in &due {
            let host = &mut hosts[index];
            // An ACK may have completed the host since its wake-up was computed.
            if host.next_wake().is_none() {
                continue;
            }
            host.step(sys::monotonic_ns()).with_context(|| {
                format!(
                    "host {}",
                    host.config.plan.hosts[host.config.host as usize].name
                )
            })?;
        }
    }
    Ok(is_realtime)
}

/// Steps of a full frame's wire time a host whose windows are full waits between looks for an
/// opened one (as [`GRID_STEPS_PER_FRAME`]).
const BLOCKED_POLL_STEPS: u64 = GRID_STEPS_PER_FRAME;

/// The loss recovery of `config`'s agent for flows of `packets`, as the model's: timers from
/// one full DATA frame's wire time at the link rate and the longest round trip that loses
/// nothing (`RecoveryConfig::for_round_trip`); under congestion control, from a few unloaded
/// round trips (`ofan_transport::cc::recovery_config`) with the reordering window — adaptive
/// here, unlike the model's: at the lab's few Mbit/s a 6-hop round trip is only ~6 frame
/// times (~80 in the model at 800 Gb/s), so one path's queue of ten frames reorders by more
/// than a smoothed RTT, and a fixed window resent 93 packets that were only late in a k = 4
/// RSQ permutation under DCTCP (0 drops; reordering up to 2.4 base RTTs).
fn new_recovery(config: &AgentConfig, packets: &[u32]) -> SelectiveRepeat {
    let frame_ns = frame_wire_ns(config);
    match &config.cc {
        Some(cc) => SelectiveRepeat::new(
            ofan_transport::cc::recovery_config(frame_ns, cc.path.base_rtt),
            packets,
        )
        .with_adaptive_reordering_window(ofan_transport::cc::REORDER_WINDOW_PERMILLE),
        None => SelectiveRepeat::new(
            RecoveryConfig::for_round_trip(frame_ns, config.max_round_trip_ns),
            packets,
        ),
    }
}

/// Applies everything the receiver has passed on so far (ACKs, arrivals), each to its host.
fn take_events(feedback: &mpsc::Receiver<(usize, Event)>, hosts: &mut [HostSender<'_>]) {
    while let Ok((host, event)) = feedback.try_recv() {
        if let Some(host) = hosts.get_mut(host) {
            host.on_event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_wake_up_comes_first_and_ties_go_to_the_lowest_host() {
        assert_eq!(earliest(&[Some(30), Some(10), Some(20)]), Some((1, 10)));
        assert_eq!(earliest(&[Some(10), Some(5), Some(5)]), Some((1, 5)));
    }

    #[test]
    fn every_host_due_at_once_is_due_in_the_same_pass() {
        let wakes = [Some(100), Some(90), None, Some(101)];
        let due: Vec<usize> = (0..wakes.len())
            .filter(|&h| is_due(wakes[h], 100))
            .collect();
        assert_eq!(due, [0, 1]);
    }

    #[test]
    fn a_finished_host_drops_out_and_all_finished_ends_the_loop() {
        assert_eq!(earliest(&[None, Some(7)]), Some((1, 7)));
        assert!(!is_due(None, u64::MAX));
        assert_eq!(earliest(&[None, None]), None);
        assert_eq!(earliest(&[]), None);
    }

    #[test]
    fn passes_fall_on_a_grid_of_an_eighth_of_a_frame_time_with_catch_up_only() {
        let mut config = loopback_config(1, Duration::from_millis(5));
        assert_eq!(departure_grid_ns(&config), 0, "strict pacing: no grid");
        config.catch_up = true;
        // 1538 wire bytes at 10 Mbit/s: 1.2304 ms, an eighth of it.
        assert_eq!(departure_grid_ns(&config), 153_800);
        assert_eq!(on_grid(1_000_001, 0), 1_000_001);
        assert_eq!(on_grid(153_800, 153_800), 153_800);
        assert_eq!(on_grid(153_801, 153_800), 307_600);
        // One pass at the grid point serves every host due by then, earliest first.
        let wakes = [Some(260), Some(150), Some(101), None];
        let (_, at) = earliest(&wakes).unwrap();
        let mut due = Vec::new();
        due_hosts(&wakes, on_grid(at, 100), &mut due);
        assert_eq!(due, [2, 1]);
    }

    /// One host with one 3-packet flow to a port nobody listens on (the sends go nowhere), a
    /// socket of its own and a 10 Mbit/s link.
    struct OneFlow {
        config: AgentConfig,
        flows: Vec<OutFlow>,
        pool: [Socket; 1],
        link: HostLink,
    }

    impl OneFlow {
        fn new(config: AgentConfig, last_payload: u32) -> Self {
            let to = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 9);
            let socket = udp_socket().unwrap();
            socket
                .bind(&SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0).into())
                .unwrap();
            Self {
                config,
                flows: vec![OutFlow {
                    id: 0,
                    dst: to.into(),
                    dst_v4: to,
                    dst_planes: Vec::new(),
                    packets: 3,
                    last_payload,
                    after: None,
                }],
                pool: [socket],
                link: HostLink::new(1e7),
            }
        }

        /// Its sender, done at `deadline`.
        fn sender(&self, deadline: u64) -> HostSender<'_> {
            let endpoints = Endpoints {
                pool: &self.pool,
                ports: &[0],
                shared: None,
            };
            HostSender::new(&self.config, &self.flows, endpoints, &self.link, deadline)
        }
    }

    #[test]
    fn a_departure_late_by_its_grid_step_keeps_the_host_on_its_schedule() {
        let mut config = loopback_config(1, Duration::from_millis(10));
        config.catch_up = true;
        let grid = departure_grid_ns(&config);
        let host = OneFlow::new(config, 1472);
        let mut host = host.sender(host.config.start_at_ns + 10_000_000);
        host.step(1_000_000).unwrap();
        assert_eq!(host.next_wake(), Some(2_230_400));
        // Served at the next grid point, 76.6 µs late: the next departure is still due one
        // frame time after the first was, not after this one.
        let served = on_grid(2_230_400, grid);
        assert_eq!(served, 2_307_000);
        host.step(served).unwrap();
        assert_eq!(host.next_wake(), Some(3_460_800));
        let stats = host.finish(false);
        assert_eq!(stats.lateness.summary().max_ns, 76_600);
    }

    fn loopback_config(flows: usize, timeout: Duration) -> AgentConfig {
        let hosts = (0..2)
            .map(|i| super::super::super::collective::PlanHost {
                name: format!("h{i}"),
                planes: Vec::new(),
                address: Ipv4Addr::new(127, 0, 0, i + 1),
            })
            .collect();
        let mut plan = super::super::super::collective::ring(3, hosts, 3000, 1).unwrap();
        plan.flows.truncate(flows);
        AgentConfig {
            plan,
            host: 0,
            start_at_ns: 1_000_000,
            link_rate_bps: 10_000_000,
            load: 1.0,
            payload: 1472,
            host_lb: HostLb::None,
            host_planes: PlanePolicy::default(),
            entropies: 1,
            seed: 1,
            port: 9,
            timeout,
            spin_ns: 0,
            catch_up: false,
            realtime: None,
            linger: Linger::Quiet(Duration::ZERO),
            max_round_trip_ns: 0,
            cc: None,
            done_file: None,
            host_link: None,
            endpoint: None,
        }
    }

    #[test]
    fn a_full_window_holds_the_host_back_until_an_ack_opens_it() {
        let mut config = loopback_config(1, Duration::from_millis(10));
        // DCTCP whose cap is two full frames: 1.5 BDP of 1 518-byte frames at 10 Mbit/s
        // needs a BDP of 2 024 bytes, a base RTT of 1.62 ms.
        config.cc = crate::cc_config(ofan_transport::CcKind::Dctcp, 1472, 1_619_200, 10_000_000);
        assert_eq!(config.cc.unwrap().max_window, 3_036);
        let fixture = OneFlow::new(config, 1472);
        let mut host = fixture.sender(fixture.config.start_at_ns + 10_000_000);
        host.step(1_000_000).unwrap();
        host.step(2_230_400).unwrap();
        assert_eq!(host.next_wake(), Some(3_460_800), "paced as before");
        host.step(3_460_800).unwrap();
        // Two frames in flight fill the window: idle, looking again an eighth of a frame
        // time later (1.2304 ms / 8), the pacer's schedule not late.
        let blocked = host.next_wake().unwrap();
        assert_eq!(blocked, 3_460_800 + 153_800);
        host.step(blocked).unwrap();
        assert_eq!(host.next_wake(), Some(blocked + 153_800), "still full");
        host.on_feedback(Feedback {
            flow: 0,
            sequence: 0,
            copy: 0,
            at_ns: 3_700_000,
            entropy: 0,
            ce: false,
        });
        let open = host.next_wake().unwrap();
        host.step(open).unwrap();
        let stats = host.finish(false);
        assert_eq!(stats.packets, 3, "the ACK let the third out");
        assert_eq!(stats.blocked_ns, open - 3_460_800);
        assert_eq!(
            stats.lateness.summary().max_ns,
            0,
            "a held-back host is not late"
        );
        assert!(stats.mean_window.is_some());
    }

    #[test]
    fn a_flow_that_waits_for_an_arrival_starts_at_once_when_it_arrives() {
        let mut fixture = OneFlow::new(loopback_config(1, Duration::from_millis(50)), 1472);
        fixture.flows[0].after = Some(1);
        let deadline = fixture.config.start_at_ns + 50_000_000;
        let mut host = fixture.sender(deadline);
        host.step(1_000_000).unwrap();
        // Nothing to send and no timer running: idle until the deadline.
        assert_eq!(host.next_wake(), Some(deadline));
        host.on_event(Event::Arrived(7));
        assert_eq!(host.next_wake(), Some(deadline), "another flow's arrival");
        host.on_event(Event::Arrived(1));
        let due = host.next_wake().unwrap();
        assert!(due <= 5_000_000, "due at once, not at the deadline");
        host.step(5_000_000).unwrap();
        assert_eq!(host.next_wake(), Some(6_230_400), "paced from its start");
        host.step(6_230_400).unwrap();
        host.step(7_460_800).unwrap();
        let stats = host.finish(false);
        assert_eq!(stats.packets, 3);
        assert_eq!(stats.first_ns, Some(5_000_000));
        // The wait was the collective's: out of the paced phase, and not lateness.
        assert_eq!(stats.blocked_ns, 4_000_000);
        assert_eq!(stats.lateness.summary().max_ns, 0);
    }

    #[test]
    fn a_host_paces_its_departures_and_stops_at_its_deadline() {
        let fixture = OneFlow::new(loopback_config(1, Duration::from_millis(5)), 100);
        let config = &fixture.config;
        let deadline = config.start_at_ns + 5_000_000;
        let mut host = fixture.sender(deadline);
        assert_eq!(
            host.next_wake(),
            Some(1_000_000),
            "first departure at the start"
        );
        host.step(1_000_000).unwrap();
        // 1472 + 66 B of headers, FCS, preamble and gap at 10 Mbit/s: 1.2304 ms later.
        assert_eq!(host.next_wake(), Some(2_230_400));
        host.step(2_230_400).unwrap();
        host.step(3_460_800).unwrap();
        // Every packet sent, none ACKed: idle until the first retransmission timer (at least
        // 16 frame times, ~19 ms) or the deadline, whichever comes first.
        host.step(3_500_000).unwrap();
        assert_eq!(host.next_wake(), Some(deadline));
        // At the deadline with nothing to send: done, the scheduler drops it.
        host.step(deadline).unwrap();
        assert_eq!(host.next_wake(), None);
        let stats = host.finish(false);
        assert_eq!(stats.packets, 3);
        assert_eq!(stats.first_ns, Some(1_000_000));
        assert_eq!(stats.last_ns, Some(3_460_800));
        assert_eq!(stats.lateness.summary().max_ns, 0);
    }
}
