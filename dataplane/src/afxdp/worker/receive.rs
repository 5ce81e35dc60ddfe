//! Ingress, step 2 of a worker's loop: a batch per socket (and per bypass input) read, decided
//! by the forwarder ([`Worker::decide`]: one balancing call per batch), and each forwarded
//! frame queued on an owned port or handed to the owner of its egress port's queue; every
//! other frame freed, counted by its reason.

use super::*;

impl Worker {
    pub(super) fn receive_all(&mut self, rx: RxRings) -> usize {
        let mut total = 0;
        for port_index in 0..self.ports.len() {
            if rx == RxRings::Read {
                for queue_index in 0..self.ports[port_index].queues.len() {
                    total += self.receive(port_index, queue_index);
                }
            }
            let inputs = self.ports[port_index]
                .bypass
                .as_ref()
                .map_or(0, |bypass| bypass.inputs());
            for input in 0..inputs {
                total += self.receive_bypass(port_index, input);
            }
        }
        total
    }

    /// Receives a batch from input `input` of a port's bypass: each frame copied into a free
    /// frame and decided as one its RX ring delivered.
    fn receive_bypass(&mut self, port_index: usize, input: usize) -> usize {
        let port = &mut self.ports[port_index];
        let Some(bypass) = port.bypass.as_deref() else {
            return 0;
        };
        if !bypass.pending(input) {
            return 0;
        }
        let mut frames: [Option<OwnedFrame>; MAX_BATCH] = std::array::from_fn(|_| None);
        let buf = &mut *self.bypass_scratch;
        let (mut received, mut popped, mut bytes) = (0, 0, 0u64);
        while received < MAX_BATCH {
            let len = match bypass.take(input, buf) {
                Take::Empty => break,
                Take::Malformed => {
                    popped += 1;
                    self.rx_drops[RxDropReason::BadDescriptor.as_index()] += 1;
                    continue;
                }
                Take::Frame(len) => len,
            };
            popped += 1;
            let Some(free) = self.cache.take(&self.pool) else {
                port.drops_bypass += 1;
                continue;
            };
            match self.umem.fill_free_frame(free, &buf[..len]) {
                Some(frame) => {
                    frames[received] = Some(frame);
                    received += 1;
                    bytes += len as u64;
                }
                None => {
                    self.cache.give(free, &self.pool);
                    self.rx_drops[RxDropReason::BadDescriptor.as_index()] += 1;
                }
            }
        }
        port.rx_packets += received as u64;
        port.rx_bytes += bytes;
        port.rx_bypass += received as u64;
        let ingress = port.id;
        if received > 0 {
            self.decide(&mut frames, &[ingress; MAX_BATCH], received);
        }
        popped
    }

    fn receive(&mut self, port_index: usize, queue_index: usize) -> usize {
        // An empty ring costs two loads (a worker on its own thread reads every ring at every
        // iteration; a pool thread only those its epoll reported).
        if self.ports[port_index].queues[queue_index].rx.available() == 0 {
            return 0;
        }
        let mut frames: [Option<OwnedFrame>; MAX_BATCH] = std::array::from_fn(|_| None);
        let (received, read) = {
            let queue = &mut self.ports[port_index].queues[queue_index];
            let got = sys::receive(&mut queue.rx, &self.umem, &mut frames);
            queue.fill_outstanding -= (got.frames + got.bad) as u32;
            // Bad descriptors count as work too, so that their counter is published before
            // the worker next sleeps.
            self.rx_drops[RxDropReason::BadDescriptor.as_index()] += got.bad as u64;
            let packets = match self.buffers {
                Buffers::Single => got.frames,
                Buffers::Multi => {
                    let (cache, pool, frame_size) =
                        (&mut self.cache, &*self.pool, self.umem.frame_size());
                    let (packets, dropped) = queue.partial.join(&mut frames, got, |frame| {
                        for frame in frame.into_frames(frame_size) {
                            cache.give(frame, pool);
                        }
                    });
                    self.rx_drops[RxDropReason::TooManyFrames.as_index()] += dropped as u64;
                    packets
                }
            };
            (packets, got.frames + got.bad)
        };
        if received == 0 {
            return read;
        }
        let ingress = self.ports[port_index].id;
        let port = &mut self.ports[port_index];
        port.rx_packets += received as u64;
        port.rx_bytes += frames[..received]
            .iter()
            .flatten()
            .map(|f| u64::from(f.len()))
            .sum::<u64>();
        self.decide(&mut frames, &[ingress; MAX_BATCH], received);
        read
    }

    /// Decides the first `received` packets of `frames` (`ingress[i]`: where packet i came in)
    /// and queues, hands off or frees each.
    pub(super) fn decide(
        &mut self,
        frames: &mut [Option<OwnedFrame>; MAX_BATCH],
        ingress: &[PortId; MAX_BATCH],
        received: usize,
    ) {
        // Queue lengths of the up-ports, for the queue-aware balancers only.
        let mut loads = [PortLoad::default(); crate::lb::MAX_PORTS];
        let ports_for_loads = match self.queue_loads {
            QueueLoads::Read => &self.up_ports[..],
            QueueLoads::Ignored => &[],
        };
        for (position, &port) in ports_for_loads.iter().enumerate() {
            let (owner, local) = self.owner_of[usize::from(port.0)];
            loads[position] = if owner == self.index {
                let stats = self.ports[local].egress.stats();
                PortLoad {
                    packets: stats.depth_packets,
                    bytes: stats.depth_bytes,
                }
            } else {
                let (packets, bytes) = self
                    .telemetry
                    .port_queue(usize::from(port.0), self.queue)
                    .depth();
                PortLoad { packets, bytes }
            };
        }

        let mut verdicts = [Verdict::Drop(DropReason::ALL[0]); MAX_BATCH];
        match self.forwarding {
            Forwarding::Bare => {
                for (verdict, ingress) in verdicts[..received].iter_mut().zip(ingress) {
                    *verdict = Verdict::Forward {
                        port: PortId(ingress.0 ^ 1),
                    };
                }
            }
            Forwarding::Lookup => {
                let fib = self.fib.load();
                let umem = &*self.umem;
                let mut refs: [FrameRef<'_>; MAX_BATCH] =
                    std::array::from_fn(|_| FrameRef::whole(PortId(0), &mut []));
                for ((slot, frame), &ingress) in refs
                    .iter_mut()
                    .zip(frames[..received].iter_mut().flatten())
                    .zip(ingress)
                {
                    *slot = FrameRef {
                        ingress,
                        len: frame.len(),
                        data: umem.data(frame),
                    };
                }
                // `arf-flow` ages its flow table by the clock: one read per batch.
                if self
                    .forwarder
                    .balancer()
                    .switch()
                    .config()
                    .algorithm
                    .uses_clock()
                {
                    self.forwarder.set_clock(monotonic_ns());
                }
                self.forwarder.process_batch(
                    &fib,
                    &mut refs[..received],
                    // A switch without up-ports (a core) balances over one placeholder.
                    &mut loads[..self.up_ports.len().max(1)],
                    &mut verdicts[..received],
                );
            }
        }

        let now = monotonic_ns();
        for (frame, verdict) in frames[..received].iter_mut().zip(&verdicts[..received]) {
            let frame = frame.take().expect("received frames are all present");
            match *verdict {
                Verdict::Forward { port } => {
                    let mut frame = frame;
                    if let Some(sampler) = &mut self.flow_sampler {
                        sampler.frame(port, self.umem.data(&mut frame));
                    }
                    self.forward(port, frame, now);
                }
                _ => self.free(frame),
            }
        }
    }

    /// Queues a forwarded frame on `port` here, or hands it to the port's owner.
    #[inline]
    fn forward(&mut self, port: PortId, frame: OwnedFrame, now: u64) {
        let (owner, _) = self.owner_of[usize::from(port.0)];
        if owner == self.index {
            self.enqueue_local(port, frame, now);
        } else {
            self.hand_off(
                owner,
                Handoff {
                    port,
                    frame,
                    kind: HandoffKind::Forwarded,
                },
            );
        }
    }
}
