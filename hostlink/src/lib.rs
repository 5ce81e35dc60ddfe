//! # ofan-hostlink — shared-memory host links
//!
//! The link between an edge switch of a group and a host's traffic agent in the lab, as three
//! rings of frames in a file both processes map, instead of a veth. The lab's agent
//! (`netns-lab/agent`) attaches to it ([`HostLink::attach`]); `ofan-switch group --host-links`
//! serves it ([`HostLink::serve`]) and plugs it into the port's worker as the port's bypass
//! (`ofan_dataplane::afxdp::bypass`), which is all the data path knows of it.
//!
//! Over a veth every frame a host sends or receives costs the kernel a `sendto` or a receive,
//! an skb, the host's IP and UDP stack, veth's copy for the switch's XDP program and the copy
//! into the switch's UMEM (or the AF_XDP transmit, an skb and the host's stack the other way),
//! and a socket wake-up: measured (`perf`, k = 4 at 20 Mbit/s on spliced links) as the agents'
//! quarter of the lab's CPU and much of the group's kernel time. A host link carries the same
//! Ethernet frames through shared memory: the agent writes whole frames (Ethernet, IPv4, UDP,
//! its own header) into a ring the switch's worker reads as if its port's RX ring had
//! delivered them, and the worker writes the frames it transmits to the agent's UDP port into
//! a ring the agent reads. What a host's kernel does besides — ARP, ping, TCP, everything to
//! another port — keeps the veth, which stays in place.
//!
//! # The file
//! One file per host (`HOST.link`, made by the switch, mode 0600), little-endian:
//! - the header: magic, version, slot size, each ring's slot count and the switch port's MAC
//!   (so that the agent addresses its frames to it); then the agent's pid while one is attached
//!   (0 otherwise) and the UDP port it receives on;
//! - three rings — [`RingId::Down`] (switch → agent), [`RingId::UpData`] and [`RingId::UpAck`]
//!   (agent → switch: the agent's sender and receiver threads each produce into their own) —
//!   each a head (the producer's count), a tail (the consumer's) and a "consumer sleeping" flag,
//!   on cache lines of their own;
//! - the slots: a 4-byte length, then the frame.
//!
//! Each ring has one producer and one consumer (single-producer single-consumer: the producer
//! writes a slot, then publishes it with a release store of the head; the consumer reads it
//! after an acquire load of the head and frees it with a release store of the tail). A consumer
//! about to sleep sets its flag and looks at the ring once more; a producer, after publishing,
//! clears a set flag and writes a byte to the ring's wake-up FIFO (`HOST.link-down`,
//! `HOST.link-up`), which the consumer's epoll watches: no system call while the consumer is
//! awake.
//!
//! # Restarts
//! A switch that starts (again) opens the file that exists and discards what waits in the rings
//! it reads: frames sent to a stopped switch are lost, as on a veth. An agent that attaches
//! discards what waits in the ring it reads; detaching (or dying) leaves the rings to the next
//! agent. The switch diverts frames into the down ring only while an agent is attached.
#![deny(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, Ordering};

use ofan_dataplane::wire::{self, EtherType, IpProtocol, MacAddr};
use sys::{make_fifo, SharedMap};

#[allow(unsafe_code)]
mod sys;

/// `OFANHLK1`.
const MAGIC: [u8; 8] = *b"OFANHLK1";
const VERSION: u32 = 1;
/// Where the slots begin: the header and the rings' counters fit in a page.
const SLOTS_OFFSET: usize = 4096;
const ATTACHED: usize = 64;
const PORT: usize = 68;
const RINGS: usize = 128;
const RING_STRIDE: usize = 192;
const HEAD: usize = 0;
const TAIL: usize = 64;
const SLEEPING: usize = 128;
/// A slot's length field.
const LEN_BYTES: usize = 4;

/// Slots of each ring, in [`RingId`] order: the down ring holds what the switch transmits to
/// the host while the agent's receiver is away (256 full frames: 31 ms at 100 Mbit/s); the
/// switch drains the up rings at every pass, so they need less.
const SLOTS: [u32; 3] = [256, 128, 128];

/// One of a host link's rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingId {
    /// Switch → agent: the frames the switch transmits to the agent's port.
    Down = 0,
    /// Agent → switch: the agent's DATA (its sender thread).
    UpData = 1,
    /// Agent → switch: the agent's ACKs (its receiver thread).
    UpAck = 2,
}

impl RingId {
    /// The rings the switch reads.
    pub const UP: [RingId; 2] = [RingId::UpData, RingId::UpAck];
}

/// Why a host link cannot be served or attached.
#[derive(Debug, thiserror::Error)]
pub enum HostLinkError {
    /// The file or a FIFO cannot be made, opened or mapped.
    #[error("host link {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file is not a host link of this version (or was made for other frames).
    #[error("host link {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// What became of a frame pushed into a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// In the ring.
    Queued,
    /// The ring is full (its consumer fell behind): the frame is not in it.
    Full,
    /// Larger than a slot: never fits.
    TooLarge,
}

/// What came out of a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pop {
    /// Nothing waits.
    Empty,
    /// A frame of this many bytes, copied out.
    Frame(usize),
    /// A slot whose length is larger than the slot or the buffer (a producer's bug): skipped.
    Malformed,
}

/// A ring's place in the file.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    counters: usize,
    slots: usize,
    count: u32,
}

/// One end of a host link, mapped: the switch's ([`HostLink::serve`]) or the agent's
/// ([`HostLink::attach`]).
#[derive(Debug)]
pub struct HostLink {
    map: SharedMap,
    path: PathBuf,
    slot_size: u32,
    rings: [Geometry; 3],
    /// Wakes the agent (the down ring's consumer).
    down_wake: File,
    /// Wakes the switch's worker (the up rings' consumer).
    up_wake: File,
    /// Whether this end is the agent's (it detaches when dropped).
    agent: bool,
}

impl HostLink {
    /// The switch's end: opens the host link at `path`, or makes it (with its FIFOs) with slots
    /// of `slot_size` bytes (the length field included) for the port whose MAC is `mac`.
    /// Frames waiting for an earlier switch are discarded.
    ///
    /// # Errors
    /// When the file cannot be made or mapped, or exists with another layout.
    pub fn serve(path: &Path, slot_size: u32, mac: MacAddr) -> Result<Self, HostLinkError> {
        let io_error = |source| HostLinkError::Io {
            path: path.to_owned(),
            source,
        };
        let len = file_len(slot_size);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io_error)?;
        let size = file.metadata().map_err(io_error)?.len();
        let fresh = size == 0;
        if fresh {
            file.set_len(len as u64).map_err(io_error)?;
        } else if size != len as u64 {
            // Mapped as it is, a shorter file would fault where its rings should be.
            return Err(HostLinkError::Invalid {
                path: path.to_owned(),
                reason: format!(
                    "{size} bytes, not the {len} of {slot_size}-byte slots (remove it to start over)"
                ),
            });
        }
        let map = SharedMap::new(&file, len).map_err(io_error)?;
        if fresh {
            let mut header = [0u8; 34];
            header[..8].copy_from_slice(&MAGIC);
            header[8..12].copy_from_slice(&VERSION.to_le_bytes());
            header[12..16].copy_from_slice(&slot_size.to_le_bytes());
            for (ring, count) in SLOTS.iter().enumerate() {
                header[16 + 4 * ring..20 + 4 * ring].copy_from_slice(&count.to_le_bytes());
            }
            header[28..34].copy_from_slice(&mac);
            map.write(0, &header);
        }
        let link = Self::open(map, path, false)?;
        if link.slot_size != slot_size {
            return Err(link.invalid(format!(
                "made for {}-byte slots, not {slot_size} (remove it to start over)",
                link.slot_size
            )));
        }
        // The MAC may have changed with the link (a lab rebuilt over an old file).
        link.map.write(28, &mac);
        for ring in RingId::UP {
            link.discard(ring);
        }
        Ok(link)
    }

    /// The agent's end: opens the host link the switch made at `path`, discards what waits in
    /// the down ring and attaches: from now on the switch sends the frames for UDP port `port`
    /// through the link. Dropping the end detaches.
    ///
    /// # Errors
    /// When there is no such host link, or it is not one of this version.
    pub fn attach(path: &Path, port: u16) -> Result<Self, HostLinkError> {
        let io_error = |source| HostLinkError::Io {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io_error)?;
        let len = usize::try_from(file.metadata().map_err(io_error)?.len()).unwrap_or(0);
        if len < SLOTS_OFFSET {
            return Err(HostLinkError::Invalid {
                path: path.to_owned(),
                reason: "too short to be a host link".into(),
            });
        }
        let map = SharedMap::new(&file, len).map_err(io_error)?;
        let link = Self::open(map, path, true)?;
        link.discard(RingId::Down);
        link.map
            .atomic_u32(PORT)
            .store(u32::from(port), Ordering::Relaxed);
        link.map
            .atomic_u32(ATTACHED)
            .store(std::process::id(), Ordering::SeqCst);
        Ok(link)
    }

    /// The agent's end detaches: the switch sends what it sent through the link over the
    /// veth again. (Only this process's attachment: a later agent's is not undone.)
    pub fn detach(&self) {
        let _ = self.map.atomic_u32(ATTACHED).compare_exchange(
            std::process::id(),
            0,
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
    }

    /// Checks the header of a mapped file and opens its FIFOs.
    fn open(map: SharedMap, path: &Path, agent: bool) -> Result<Self, HostLinkError> {
        let invalid = |reason: String| HostLinkError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let mut header = [0u8; 28];
        map.read(0, &mut header);
        if header[..8] != MAGIC {
            return Err(invalid("not a host link (wrong magic)".into()));
        }
        let word = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        if word(8) != VERSION {
            return Err(invalid(format!("version {}, not {VERSION}", word(8))));
        }
        let slot_size = word(12);
        if !(64..=65_536).contains(&slot_size) || slot_size % 8 != 0 {
            return Err(invalid(format!("a slot size of {slot_size} bytes")));
        }
        let mut rings = [Geometry {
            counters: 0,
            slots: 0,
            count: 0,
        }; 3];
        let mut slots = SLOTS_OFFSET;
        for (index, ring) in rings.iter_mut().enumerate() {
            let count = word(16 + 4 * index);
            if count == 0 || count > 1 << 16 {
                return Err(invalid(format!("a ring of {count} slots")));
            }
            *ring = Geometry {
                counters: RINGS + RING_STRIDE * index,
                slots,
                count,
            };
            slots += count as usize * slot_size as usize;
        }
        if slots > map.size() {
            return Err(invalid(format!(
                "{} bytes, its rings need {slots}",
                map.size()
            )));
        }
        let fifo = |suffix: &str| -> Result<File, HostLinkError> {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let fifo = PathBuf::from(name);
            let io_error = |source| HostLinkError::Io {
                path: fifo.clone(),
                source,
            };
            make_fifo(&fifo).map_err(io_error)?;
            // Read-write: never blocks opening, never sees an end of file, and a write succeeds
            // while the other side is away (the byte then waits for it).
            OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .map_err(io_error)
        };
        Ok(Self {
            down_wake: fifo("-down")?,
            up_wake: fifo("-up")?,
            map,
            path: path.to_owned(),
            slot_size,
            rings,
            agent,
        })
    }

    fn invalid(&self, reason: String) -> HostLinkError {
        HostLinkError::Invalid {
            path: self.path.clone(),
            reason,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The largest frame a slot holds, bytes.
    pub fn max_frame(&self) -> usize {
        self.slot_size as usize - LEN_BYTES
    }

    /// The switch port's MAC: where the agent addresses its frames.
    pub fn switch_mac(&self) -> MacAddr {
        let mut mac = [0u8; 6];
        self.map.read(28, &mut mac);
        mac
    }

    /// The UDP port the switch sends through the link, while an agent is attached.
    #[inline]
    pub fn agent_port(&self) -> Option<u16> {
        if self.map.atomic_u32(ATTACHED).load(Ordering::Acquire) == 0 {
            return None;
        }
        u16::try_from(self.map.atomic_u32(PORT).load(Ordering::Relaxed)).ok()
    }

    fn counter(&self, ring: RingId, which: usize) -> &AtomicU32 {
        self.map
            .atomic_u32(self.rings[ring as usize].counters + which)
    }

    /// Frees every slot of `ring` (its consumer starting over).
    fn discard(&self, ring: RingId) {
        let head = self.counter(ring, HEAD).load(Ordering::Acquire);
        self.counter(ring, TAIL).store(head, Ordering::Release);
    }

    /// Whether frames wait in `ring`.
    #[inline]
    pub fn pending(&self, ring: RingId) -> bool {
        self.counter(ring, HEAD).load(Ordering::Acquire)
            != self.counter(ring, TAIL).load(Ordering::Relaxed)
    }

    /// Produces `frame` into `ring` (its producer only) and wakes its consumer if it sleeps.
    pub fn push(&self, ring: RingId, frame: &[u8]) -> Push {
        if frame.len() > self.max_frame() {
            return Push::TooLarge;
        }
        let geometry = self.rings[ring as usize];
        let head = self.counter(ring, HEAD).load(Ordering::Relaxed);
        let tail = self.counter(ring, TAIL).load(Ordering::Acquire);
        if head.wrapping_sub(tail) >= geometry.count {
            return Push::Full;
        }
        let slot = geometry.slots + (head % geometry.count) as usize * self.slot_size as usize;
        self.map.write(slot, &(frame.len() as u32).to_le_bytes());
        self.map.write(slot + LEN_BYTES, frame);
        self.counter(ring, HEAD)
            .store(head.wrapping_add(1), Ordering::Release);
        // Pairs with the fence in `sleep`: either the consumer's last look saw this frame, or
        // this load sees its flag.
        fence(Ordering::SeqCst);
        if self.counter(ring, SLEEPING).load(Ordering::Relaxed) != 0
            && self.counter(ring, SLEEPING).swap(0, Ordering::AcqRel) != 0
        {
            let wake = match ring {
                RingId::Down => &self.down_wake,
                RingId::UpData | RingId::UpAck => &self.up_wake,
            };
            // A full pipe means a wake-up is pending already.
            let _ = (&*wake).write(&[1]);
        }
        Push::Queued
    }

    /// Consumes the oldest frame of `ring` (its consumer only) into `out`.
    pub fn pop(&self, ring: RingId, out: &mut [u8]) -> Pop {
        let geometry = self.rings[ring as usize];
        let tail = self.counter(ring, TAIL).load(Ordering::Relaxed);
        let head = self.counter(ring, HEAD).load(Ordering::Acquire);
        if head == tail {
            return Pop::Empty;
        }
        let slot = geometry.slots + (tail % geometry.count) as usize * self.slot_size as usize;
        let mut len = [0u8; LEN_BYTES];
        self.map.read(slot, &mut len);
        let len = u32::from_le_bytes(len) as usize;
        let popped = if len > self.max_frame() || len > out.len() {
            Pop::Malformed
        } else {
            self.map.read(slot + LEN_BYTES, &mut out[..len]);
            Pop::Frame(len)
        };
        self.counter(ring, TAIL)
            .store(tail.wrapping_add(1), Ordering::Release);
        popped
    }

    /// The consumer of `rings` announces that it sleeps until a producer writes to their
    /// FIFO ([`Self::wake_fd`]). `false`: a frame came in the meantime — do not sleep.
    pub fn sleep(&self, rings: &[RingId]) -> bool {
        for &ring in rings {
            self.counter(ring, SLEEPING).store(1, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
        !rings.iter().any(|&ring| self.pending(ring))
    }

    /// The consumer of `rings` is awake again: producers need not wake it.
    pub fn woke(&self, rings: &[RingId]) {
        for &ring in rings {
            self.counter(ring, SLEEPING).store(0, Ordering::Relaxed);
        }
    }

    /// The FIFO whose readability wakes the consumer of `ring`.
    pub fn wake_fd(&self, ring: RingId) -> BorrowedFd<'_> {
        match ring {
            RingId::Down => self.down_wake.as_fd(),
            RingId::UpData | RingId::UpAck => self.up_wake.as_fd(),
        }
    }

    /// Empties the FIFO of `ring`'s consumer after it woke.
    pub fn clear_wake(&self, ring: RingId) {
        let mut fifo = match ring {
            RingId::Down => &self.down_wake,
            RingId::UpData | RingId::UpAck => &self.up_wake,
        };
        let mut bytes = [0u8; 64];
        while matches!(fifo.read(&mut bytes), Ok(n) if n > 0) {}
    }
}

impl Drop for HostLink {
    fn drop(&mut self) {
        if self.agent {
            self.detach();
        }
    }
}

/// The file's length for slots of `slot_size` bytes.
fn file_len(slot_size: u32) -> usize {
    SLOTS_OFFSET + SLOTS.iter().map(|&count| count as usize).sum::<usize>() * slot_size as usize
}

/// The slot size of a switch whose UMEM frames are `frame_size` bytes: a frame and its length.
pub fn slot_size_for(frame_size: u32) -> u32 {
    frame_size + 64
}

/// Whether a frame the switch transmits goes to the agent: an untagged IPv4 UDP datagram, not a
/// fragment, to `port`.
#[inline]
pub fn is_for_agent(frame: &[u8], port: u16) -> bool {
    wire::parse(frame).is_ok_and(|parsed| {
        parsed.vlan.is_none()
            && parsed.ethertype == EtherType::IPV4
            && parsed.protocol == IpProtocol::UDP
            && parsed.ports.is_some_and(|ports| ports.dst == port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("ofan-hostlink-")
            .tempdir()
            .unwrap()
    }

    /// A switch's end served in a fresh directory, and an agent attached for `port`.
    fn linked(port: u16) -> (tempfile::TempDir, HostLink, HostLink) {
        let dir = temp_dir();
        let path = dir.path().join("h0.link");
        let switch = HostLink::serve(&path, slot_size_for(2048), MAC).unwrap();
        assert_eq!(switch.agent_port(), None, "no agent yet");
        let agent = HostLink::attach(&path, port).unwrap();
        (dir, switch, agent)
    }

    const MAC: MacAddr = [2, 0, 0, 0, 0, 7];

    #[test]
    fn frames_cross_in_order_and_a_full_ring_refuses() {
        let (_dir, switch, agent) = linked(4791);
        assert_eq!(switch.agent_port(), Some(4791));
        assert_eq!(agent.switch_mac(), MAC);

        for n in 0..SLOTS[1] {
            assert_eq!(agent.push(RingId::UpData, &n.to_le_bytes()), Push::Queued);
        }
        assert_eq!(agent.push(RingId::UpData, &[0]), Push::Full);
        assert_eq!(
            agent.push(RingId::UpAck, &vec![0; switch.max_frame() + 1]),
            Push::TooLarge
        );
        let mut out = [0u8; 64];
        for n in 0..SLOTS[1] {
            assert_eq!(switch.pop(RingId::UpData, &mut out), Pop::Frame(4));
            assert_eq!(out[..4], n.to_le_bytes());
        }
        assert_eq!(switch.pop(RingId::UpData, &mut out), Pop::Empty);
        // A frame larger than the reader's buffer is skipped, not truncated.
        assert_eq!(switch.push(RingId::Down, &[9; 100]), Push::Queued);
        assert_eq!(agent.pop(RingId::Down, &mut out), Pop::Malformed);
        assert_eq!(agent.pop(RingId::Down, &mut out), Pop::Empty);

        drop(agent);
        assert_eq!(
            switch.agent_port(),
            None,
            "dropping the agent's end detaches"
        );
    }

    #[test]
    fn a_sleeping_consumer_is_woken_once_and_an_awake_one_not_at_all() {
        let (_dir, switch, agent) = linked(1);
        assert_eq!(switch.push(RingId::Down, &[1]), Push::Queued);
        assert!(!woken(&agent, RingId::Down), "awake: no byte written");
        assert!(!agent.sleep(&[RingId::Down]), "a frame waits: do not sleep");
        let mut out = [0u8; 8];
        assert_eq!(agent.pop(RingId::Down, &mut out), Pop::Frame(1));
        assert!(agent.sleep(&[RingId::Down]));
        assert_eq!(switch.push(RingId::Down, &[2]), Push::Queued);
        assert_eq!(switch.push(RingId::Down, &[3]), Push::Queued);
        assert!(woken(&agent, RingId::Down), "the sleeper is woken");
        assert!(!woken(&agent, RingId::Down), "one wake-up for both frames");
        assert!(!agent.sleep(&[RingId::Down]), "frames wait");
        agent.woke(&[RingId::Down]);
        assert_eq!(switch.push(RingId::Down, &[4]), Push::Queued);
        assert!(!woken(&agent, RingId::Down), "awake again: no byte");

        // The switch sleeps on both up rings through one FIFO.
        assert!(switch.sleep(&RingId::UP));
        assert_eq!(agent.push(RingId::UpAck, &[4]), Push::Queued);
        assert!(woken(&switch, RingId::UpData));
        switch.clear_wake(RingId::UpData);
    }

    #[test]
    fn a_restarted_switch_discards_what_waited_and_keeps_the_attachment() {
        let dir = temp_dir();
        let path = dir.path().join("h0.link");
        let first = HostLink::serve(&path, slot_size_for(2048), MAC).unwrap();
        let agent = HostLink::attach(&path, 7).unwrap();
        assert_eq!(agent.push(RingId::UpData, &[1]), Push::Queued);
        drop(first);
        let second = HostLink::serve(&path, slot_size_for(2048), [2, 0, 0, 0, 0, 8]).unwrap();
        assert!(
            !second.pending(RingId::UpData),
            "sent to a stopped switch: lost"
        );
        assert_eq!(second.agent_port(), Some(7));
        assert_eq!(agent.switch_mac(), [2, 0, 0, 0, 0, 8]);
        assert_eq!(agent.push(RingId::UpData, &[2]), Push::Queued);
        let mut out = [0u8; 8];
        assert_eq!(second.pop(RingId::UpData, &mut out), Pop::Frame(1));
        assert_eq!(out[0], 2);
        assert!(matches!(
            HostLink::serve(&path, slot_size_for(4096), MAC),
            Err(HostLinkError::Invalid { .. })
        ));
        std::fs::write(dir.path().join("junk.link"), vec![0u8; 8192]).unwrap();
        assert!(matches!(
            HostLink::attach(&dir.path().join("junk.link"), 1),
            Err(HostLinkError::Invalid { .. })
        ));
        assert!(matches!(
            HostLink::attach(&dir.path().join("none.link"), 1),
            Err(HostLinkError::Io { .. })
        ));
    }

    #[test]
    fn both_ends_write_every_slot_without_a_page_fault() {
        // On tmpfs, as the lab's links under /run: there a fresh file has no pages until they
        // are faulted in, and a fault in the switch's push lands on a pool thread.
        let Ok(dir) = tempfile::Builder::new()
            .prefix("ofan-hostlink-")
            .tempdir_in("/dev/shm")
        else {
            eprintln!("SKIPPED: no tmpfs at /dev/shm");
            return;
        };
        let path = dir.path().join("h0.link");
        let switch = HostLink::serve(&path, slot_size_for(2048), MAC).unwrap();
        let agent = HostLink::attach(&path, 9).unwrap();
        let frame = vec![0x5a; switch.max_frame()];
        let mut out = vec![0; switch.max_frame()];
        let before = minor_faults();
        for _ in 0..SLOTS[0] {
            assert_eq!(switch.push(RingId::Down, &frame), Push::Queued);
        }
        for ring in RingId::UP {
            while agent.push(ring, &frame) == Push::Queued {}
        }
        while let Pop::Frame(_) = agent.pop(RingId::Down, &mut out) {}
        let faults = minor_faults() - before;
        // Without the population at map time: one per page of slots written, 273 (2026-12-07).
        assert!(faults < 8, "{faults} page faults writing the rings");
    }

    /// This thread's minor page faults so far (/proc/thread-self/stat, field 10).
    fn minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        after_comm.split(' ').nth(7).unwrap().parse().unwrap()
    }

    /// Whether a wake-up byte waits in the FIFO of `ring`'s consumer (read, so consumed).
    fn woken(link: &HostLink, ring: RingId) -> bool {
        let suffix = if ring == RingId::Down { "-down" } else { "-up" };
        let mut name = link.path().as_os_str().to_owned();
        name.push(suffix);
        let mut fifo = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(PathBuf::from(name))
            .unwrap();
        let mut bytes = [0u8; 64];
        matches!(fifo.read(&mut bytes), Ok(n) if n > 0)
    }
}
