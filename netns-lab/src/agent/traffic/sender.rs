//! The sender thread: paced departures, loss recovery, entropy choice.

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

pub(super) fn send_loop(
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
