//! In-process links: a frame one switch of a process sends to another switch of the same
//! process is copied into the receiver's UMEM and handed to the worker of its ingress port,
//! skipping the veth between them.
//!
//! Over a veth in copy mode every hop costs the kernel a `sendto`, an skb, a copy for the
//! peer's XDP program (the skb an AF_XDP socket builds has too little headroom), a copy into
//! the receiver's UMEM and a completion: measured (`perf`, k = 4 at 10 Mbit/s) as most of a
//! lab's CPU. In an `ofan-switch group` both ends of a link between two members are in one
//! process, so the sender can do what the kernel would, once: copy the frame into a free frame
//! of the receiver's UMEM and push it into the inbox of the receiver's worker as a frame
//! received on the peer port.
//!
//! What the veth and the receiver's XDP program did, a splice does too or leaves to them:
//! - **Steering**: only frames the receiver's program would redirect to its socket are spliced
//!   (the same rules, [`ofan_ebpf_common::classify`], with the receiver's own addresses from its
//!   FIB); an expiring TTL, traffic to the receiver itself or anything else for its kernel takes
//!   the veth as before, as does a packet of several frames (jumbo MTUs).
//! - **Link state**: a frame is spliced only while both ports are up in their switches' FIBs
//!   (mirrored from the kernel: a link set down stops splicing when the mirrors see it, within
//!   milliseconds) and the receiving port is not blackholed; otherwise the veth decides.
//! - **Switches stopping**: a switch publishes the receiving ends of its ports
//!   ([`SpliceSlot::open`]) once its workers exist and withdraws them ([`SpliceSlot::close`]) before
//!   they stop, waiting for senders that still hold an end; frames already in its inboxes are
//!   counted and freed by its workers like any hand-off. A stopped or killed switch's peers
//!   send over the veth again.
//! - **Counters**: the receiver counts a spliced frame as received on its port (and in
//!   `rx_spliced`); one it had no free frame or inbox room for counts as a hand-off drop there.
//!   The veths' own counters (`ip -s link`) and `tcpdump` on them do not see spliced frames.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use ofan_ebpf_common::{bytes_at, classify, FrameView, LocalV4, LocalV6};

use super::frames::FramePool;
use super::inbox::Inboxes;
use super::sys::{EventFd, UmemArea};
use super::worker::{Handoff, HandoffKind};
use crate::fib::{Fib, PortId, SharedFib};
use crate::telemetry::SwitchTelemetry;

/// Where the receiving end of one port of one switch is published: the switch's while it
/// runs, empty otherwise. Both switches of a link hold both slots of it ([`SplicePort`]).
#[derive(Debug, Default)]
pub struct SpliceSlot {
    end: ArcSwapOption<SpliceEnd>,
}

/// The two slots of a switch port whose link leads to another switch of the process.
#[derive(Debug, Clone)]
pub struct SplicePort {
    /// Where this switch publishes the port's receiving end.
    pub own: Arc<SpliceSlot>,
    /// Where the peer switch publishes the receiving end of the link's other port.
    pub peer: Arc<SpliceSlot>,
}

/// How long [`SpliceSlot::close`] waits for senders to let go of an end (a sender holds it for
/// one transmit pass: microseconds).
const CLOSE_WAIT: Duration = Duration::from_secs(2);

impl SpliceSlot {
    /// Publishes `end`: peers splice into it from now on.
    pub(super) fn open(&self, end: SpliceEnd) {
        self.end.store(Some(Arc::new(end)));
    }

    /// Withdraws the end and waits until no sender holds it, so that nothing enters the
    /// switch's inboxes after this returns.
    pub(super) fn close(&self) {
        let Some(mut end) = self.end.swap(None) else {
            return;
        };
        let deadline = Instant::now() + CLOSE_WAIT;
        loop {
            match Arc::try_unwrap(end) {
                Ok(_) => return,
                Err(held) if Instant::now() < deadline => {
                    end = held;
                    std::thread::yield_now();
                }
                Err(_) => {
                    tracing::error!("a splice sender still holds an end after {CLOSE_WAIT:?}");
                    return;
                }
            }
        }
    }

    /// The published end, held for one transmit pass.
    #[inline]
    pub(super) fn load(&self) -> Option<Arc<SpliceEnd>> {
        self.end.load_full()
    }
}

/// The end that port `port` of a switch whose FIB is `own_fib` sends to over `slot` now, with
/// the receiver's FIB loaded for the pass: published, `port` up in its own FIB, the receiving
/// port up in the receiver's and not blackholed. `None`: the veth carries what the port sends.
#[inline]
pub(super) fn sending(
    slot: &SpliceSlot,
    own_fib: &SharedFib,
    port: PortId,
) -> Option<(Arc<SpliceEnd>, arc_swap::Guard<Arc<Fib>>)> {
    if !own_fib.load().port(port).is_some_and(|own| own.oper_up) {
        return None;
    }
    let end = slot.load()?;
    let fib = end.fib.load();
    end.accepting(&fib).then_some((end, fib))
}

/// A switch's receiving end of one port: what a sender needs to put a frame where a frame
/// received on that port would be.
pub(super) struct SpliceEnd {
    /// The receiving port.
    pub port: PortId,
    /// Its worker.
    pub owner: usize,
    /// The switch's worker inboxes, wake-ups and sleeping flags.
    pub inboxes: Arc<Inboxes>,
    pub wakers: Arc<[EventFd]>,
    pub sleeping: Arc<[AtomicBool]>,
    /// The switch's free frames and their memory.
    pub pool: Arc<FramePool>,
    pub umem: Arc<UmemArea>,
    /// The switch's FIB: its addresses and its ports' link state.
    pub fib: Arc<SharedFib>,
    /// The switch's counters.
    pub telemetry: Arc<SwitchTelemetry>,
    /// Whether the port drops everything it receives (`blackhole`).
    pub blackholed: Arc<AtomicBool>,
}

impl std::fmt::Debug for SpliceEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpliceEnd")
            .field("port", &self.port)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// What became of a frame offered to a splice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offer {
    /// Copied into the receiver's inbox: the sender frees its frame.
    Spliced,
    /// Lost: the receiver had no free frame or no inbox room (counted there); the sender frees
    /// its frame.
    Dropped,
    /// Not for a splice (for the receiver's kernel, several frames, larger than the receiver's
    /// frames): the sender transmits it over the veth.
    Veth,
}

impl SpliceEnd {
    /// Whether the receiving port takes frames now: up in its switch's FIB and not blackholed.
    #[inline]
    pub fn accepting(&self, fib: &Fib) -> bool {
        !self.blackholed.load(Ordering::Relaxed)
            && fib.port(self.port).is_some_and(|port| port.oper_up)
    }

    /// Offers a packet of `frames` frames whose (first frame's) bytes are `bytes` to the
    /// receiver. `fib` is the receiver's, loaded for the pass.
    #[inline]
    pub fn offer(&self, fib: &Fib, bytes: &[u8], frames: usize) -> Offer {
        if frames != 1 || classify(&Receiver { bytes, fib }).is_err() {
            return Offer::Veth;
        }
        let Some(free) = self.pool.take() else {
            self.telemetry
                .port(usize::from(self.port.0))
                .add_handoff_drops(1);
            return Offer::Dropped;
        };
        let Some(copy) = self.umem.fill_free_frame(free, bytes) else {
            self.pool.give(free);
            return Offer::Veth;
        };
        let handoff = Handoff {
            port: self.port,
            frame: copy,
            kind: HandoffKind::Received,
        };
        match self.inboxes.push(self.owner, handoff) {
            Ok(()) => {
                if self.sleeping[self.owner].load(Ordering::SeqCst) {
                    self.wakers[self.owner].notify();
                }
                Offer::Spliced
            }
            Err(refused) => {
                for frame in refused.frame.into_frames(self.umem.frame_size()) {
                    self.pool.give(frame);
                }
                self.telemetry
                    .port(usize::from(self.port.0))
                    .add_handoff_drops(1);
                Offer::Dropped
            }
        }
    }
}

/// A frame as the receiver's steering program would read it.
struct Receiver<'a> {
    bytes: &'a [u8],
    fib: &'a Fib,
}

impl FrameView for Receiver<'_> {
    #[inline]
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        bytes_at(self.bytes, offset)
    }

    #[inline]
    fn is_local_v4(&self, address: &LocalV4) -> bool {
        self.fib.is_local(IpAddr::V4(Ipv4Addr::from(address.0)))
    }

    #[inline]
    fn is_local_v6(&self, address: &LocalV6) -> bool {
        self.fib.is_local(IpAddr::V6(Ipv6Addr::from(address.0)))
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::fib::{Port, PortRole};
    use crate::wire::fixtures::ipv4_udp;

    const FRAMES: u32 = 8;
    const FRAME_SIZE: u32 = 2048;

    /// The end of a receiving switch: one port, up or down, with address 10.0.0.1, `FRAMES`
    /// free frames, an inbox of `inbox` packets.
    fn receiving(oper_up: bool, inbox: usize) -> SpliceEnd {
        let mut fib = Fib::builder();
        fib.port(
            PortId(0),
            Port {
                ifindex: 10,
                mac: [2, 0, 0, 0, 0, 1],
                role: PortRole::Down,
                up_position: None,
                oper_up,
            },
        )
        .local_address("10.0.0.1".parse::<IpAddr>().unwrap());
        SpliceEnd {
            port: PortId(0),
            owner: 0,
            inboxes: Arc::new(Inboxes::new(1, inbox)),
            wakers: vec![EventFd::new().unwrap()].into(),
            sleeping: vec![AtomicBool::new(true)].into(),
            pool: Arc::new(FramePool::new(FRAMES, FRAME_SIZE)),
            umem: Arc::new(UmemArea::new(FRAMES, FRAME_SIZE).unwrap()),
            fib: Arc::new(SharedFib::from_pointee(fib.build().unwrap())),
            telemetry: Arc::new(SwitchTelemetry::new(vec!["p0".into()], 1, 1, &[])),
            blackholed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn data_frame(dst: &str, ttl: u8) -> Vec<u8> {
        ipv4_udp(
            "10.1.0.1".parse().unwrap(),
            dst.parse().unwrap(),
            ttl,
            (1000, 2000),
            100,
        )
    }

    fn offer(end: &SpliceEnd, bytes: &[u8]) -> Offer {
        end.offer(&end.fib.load(), bytes, 1)
    }

    #[test]
    fn a_data_frame_arrives_as_received_on_the_peer_port() {
        let end = receiving(true, 4);
        let frame = data_frame("10.2.0.1", 63);
        assert!(end.accepting(&end.fib.load()));
        assert_eq!(offer(&end, &frame), Offer::Spliced);
        assert_eq!(end.pool.len(), FRAMES as usize - 1);
        assert_eq!(end.inboxes.frames(), 1);
        let mut handoff = end.inboxes.pop(0).expect("in the owner's inbox");
        assert_eq!(
            (handoff.port, handoff.kind),
            (PortId(0), HandoffKind::Received)
        );
        assert_eq!(end.umem.data(&mut handoff.frame), &frame[..]);
    }

    #[test]
    fn what_the_peers_program_gives_its_kernel_takes_the_veth() {
        let end = receiving(true, 4);
        for frame in [
            data_frame("10.0.0.1", 63), // the receiver's own address
            data_frame("10.2.0.1", 1),  // its TTL expires there
            data_frame("224.0.0.5", 63),
        ] {
            assert_eq!(offer(&end, &frame), Offer::Veth);
        }
        // A packet of several frames.
        let frame = data_frame("10.2.0.1", 63);
        assert_eq!(end.offer(&end.fib.load(), &frame, 2), Offer::Veth);
        // Larger than the receiver's frames.
        let large = ipv4_udp(
            "10.1.0.1".parse().unwrap(),
            "10.2.0.1".parse().unwrap(),
            63,
            (1, 2),
            FRAME_SIZE as usize,
        );
        assert_eq!(offer(&end, &large), Offer::Veth);
        assert_eq!(end.pool.len(), FRAMES as usize, "no frame kept");
        assert_eq!(end.inboxes.frames(), 0);
    }

    #[test]
    fn a_port_down_or_blackholed_accepts_nothing() {
        let end = receiving(false, 4);
        assert!(!end.accepting(&end.fib.load()));
        let end = receiving(true, 4);
        end.blackholed.store(true, Ordering::SeqCst);
        assert!(!end.accepting(&end.fib.load()));
    }

    #[test]
    fn no_free_frame_or_no_inbox_room_drops_and_counts_at_the_receiver() {
        let end = receiving(true, 2);
        let frame = data_frame("10.2.0.1", 63);
        assert_eq!(offer(&end, &frame), Offer::Spliced);
        assert_eq!(offer(&end, &frame), Offer::Spliced);
        // The inbox is full: the copy goes back to the free frames.
        assert_eq!(offer(&end, &frame), Offer::Dropped);
        assert_eq!(end.pool.len(), FRAMES as usize - 2);
        assert_eq!(end.telemetry.snapshot(0).ports[0].drops_handoff, 1);
        // No free frame at all.
        let end = receiving(true, 16);
        while end.pool.take().is_some() {}
        assert_eq!(offer(&end, &frame), Offer::Dropped);
        assert_eq!(end.telemetry.snapshot(0).ports[0].drops_handoff, 1);
        assert_eq!(end.inboxes.frames(), 0);
    }

    #[test]
    fn closing_waits_for_the_senders_that_hold_the_end() {
        let slot = Arc::new(SpliceSlot::default());
        slot.close(); // nothing published: nothing to wait for
        slot.open(receiving(true, 4));
        let held = slot.load().expect("published");
        let released = Arc::new(AtomicBool::new(false));
        let sender = {
            let released = Arc::clone(&released);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                released.store(true, Ordering::SeqCst);
                drop(held);
            })
        };
        slot.close();
        assert!(
            released.load(Ordering::SeqCst),
            "close returned while a sender held the end"
        );
        assert!(slot.load().is_none(), "withdrawn");
        sender.join().unwrap();
    }
}
