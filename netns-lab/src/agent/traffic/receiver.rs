//! The receiver: ACKs every DATA packet from the flow's source, collects ACKs from the flow's
//! destination for the sender, and keeps the exactly-once accounting.

use super::*;

/// The address a packet of `kind` for flow `flow` must come from: DATA from the flow's
/// source host, an ACK from its destination host (`None`: no such flow).
pub(super) fn expected_peer(plan: &Plan, flow: u32, kind: Kind) -> Option<Ipv4Addr> {
    let flow = plan.flows.get(flow as usize)?;
    let host = match kind {
        Kind::Data => flow.src,
        Kind::Ack => flow.dst,
    };
    plan.hosts.get(host as usize).map(|host| host.address)
}

#[allow(clippy::too_many_arguments)]
pub(super) fn receive_loop(
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
        // Only the flow's peer may speak for it: otherwise any host that knows the collective
        // id could fake delivery (a forged DATA would be ACKed and recorded) or completion (a
        // forged ACK). Rejected before any ACK is sent or anything recorded.
        if role != Role::Other
            && expected_peer(&config.plan, header.flow, header.kind) != Some(*datagram.from.ip())
        {
            stats.ignored.wrong_source += 1;
            continue;
        }
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
