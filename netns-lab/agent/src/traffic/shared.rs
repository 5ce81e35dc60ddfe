//! A host's end of its shared-memory link to its edge switch (`ofan-lab up --host-links
//! shared`, `ofan-switch group --host-links`; the rings are
//! [`ofan_hostlink`]'s): what the host's kernel did for the agent's UDP
//! sockets, done here instead — Ethernet, IPv4 and UDP headers on the way out (from the host's
//! own MAC and address to the switch port's MAC), the checks a host's IP stack makes on the
//! way in (an IPv4 header with a correct checksum, UDP to the agent's port).
//!
//! The sockets stay open beside it: they hold the ports (so nothing else on the host takes
//! them) and carry what the switch sends over the veth (nothing, while the link is attached).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use anyhow::Context;
use ofan_dataplane::wire::MacAddr;
use ofan_hostlink::{HostLink, Pop, Push, RingId};

use super::sys;
use super::udp4::{self, Udp4Addresses, UDP4_HEADERS};

/// The largest frame the switch puts in a slot (a 4096-byte UMEM frame's).
pub(super) const FRAME_MAX: usize = 4096 + 64;

/// One host's attached end of its link.
pub(super) struct SharedLink {
    link: HostLink,
    host_mac: MacAddr,
    own: Ipv4Addr,
}

impl std::fmt::Debug for SharedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLink")
            .field("path", &self.link.path())
            .field("own", &self.own)
            .finish_non_exhaustive()
    }
}

/// What a send through the link needs besides the payload.
#[derive(Debug, Clone, Copy)]
pub(super) struct Datagram {
    pub src_port: u16,
    pub dst: SocketAddrV4,
    pub tos: u8,
}

impl SharedLink {
    /// Attaches to the link at `path` for the host whose address is `own` and whose interface
    /// (in the calling thread's namespace) has that address: the switch sends datagrams for
    /// UDP `port` through the link from now on, until this end is dropped.
    ///
    /// # Errors
    /// When the link does not exist (the lab was not built with host links) or the host's MAC
    /// cannot be read.
    pub(super) fn attach(path: &Path, port: u16, own: Ipv4Addr) -> anyhow::Result<Self> {
        let host_mac = ofan_lab_sys::rtnl::Rtnl::open()
            .and_then(|mut rtnl| rtnl.mac_of_address(own.into()))
            .with_context(|| format!("the MAC of the interface with {own}"))?;
        let link = HostLink::attach(path, port)?;
        Ok(Self {
            link,
            host_mac,
            own,
        })
    }

    /// Sends `payload` as `datagram` through `ring` (the sender's DATA or the receiver's
    /// ACKs), built in `frame`. `WouldBlock`: the ring is full (the switch fell behind; retry).
    ///
    /// # Errors
    /// `WouldBlock` as said; `EMSGSIZE` for a frame larger than a slot.
    pub(super) fn send(
        &self,
        ring: RingId,
        frame: &mut [u8; FRAME_MAX],
        datagram: Datagram,
        ident: u16,
        payload: &[u8],
    ) -> io::Result<()> {
        let len = UDP4_HEADERS + payload.len();
        if len > frame.len() {
            return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
        }
        let addresses = Udp4Addresses {
            src_mac: self.host_mac,
            dst_mac: self.link.switch_mac(),
            src: SocketAddrV4::new(self.own, datagram.src_port),
            dst: datagram.dst,
        };
        udp4::write_udp4_headers(frame, &addresses, datagram.tos, ident, payload.len());
        frame[UDP4_HEADERS..len].copy_from_slice(payload);
        match self.link.push(ring, &frame[..len]) {
            Push::Queued => Ok(()),
            Push::Full => Err(io::ErrorKind::WouldBlock.into()),
            Push::TooLarge => Err(io::Error::from_raw_os_error(libc::EMSGSIZE)),
        }
    }

    /// Receives the next datagram from the switch: its payload's first bytes copied into
    /// `out` (as a truncating `recvmsg` would), its source and TOS byte. `None`: nothing waits.
    /// Frames that are not a well-formed IPv4 UDP datagram are skipped and counted in
    /// `malformed`, as the host's kernel would drop them.
    pub(super) fn recv(
        &self,
        frame: &mut [u8; FRAME_MAX],
        out: &mut [u8],
        malformed: &mut u64,
    ) -> Option<sys::Received> {
        loop {
            let len = match self.link.pop(RingId::Down, frame) {
                Pop::Empty => return None,
                Pop::Malformed => {
                    *malformed += 1;
                    continue;
                }
                Pop::Frame(len) => len,
            };
            let Some(datagram) = udp4::parse_udp4(&frame[..len]) else {
                *malformed += 1;
                continue;
            };
            let payload = &frame[datagram.payload];
            let copied = payload.len().min(out.len());
            out[..copied].copy_from_slice(&payload[..copied]);
            return Some(sys::Received {
                len: copied,
                from: datagram.from,
                tos: Some(datagram.tos),
            });
        }
    }

    /// The host finished: the switch sends over the veth again (to the closed socket, where
    /// the kernel counts what still comes).
    pub(super) fn detach(&self) {
        self.link.detach();
    }

    /// Whether frames wait.
    pub(super) fn pending(&self) -> bool {
        self.link.pending(RingId::Down)
    }
}

/// A zeroed frame buffer.
pub(super) fn frame_buffer() -> Box<[u8; FRAME_MAX]> {
    Box::new([0u8; FRAME_MAX])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_dataplane::wire;

    /// A link served in a fresh directory (removed on drop).
    struct Served {
        dir: tempfile::TempDir,
        switch: HostLink,
    }

    impl Served {
        fn new() -> Self {
            let dir = tempfile::Builder::new()
                .prefix("ofan-shared-")
                .tempdir()
                .unwrap();
            let switch =
                HostLink::serve(&dir.path().join("h.link"), 2048 + 64, [2, 0, 0, 0, 0, 9]).unwrap();
            Self { dir, switch }
        }
    }

    #[test]
    fn a_datagram_crosses_as_the_kernel_would_have_sent_and_received_it() {
        let served = Served::new();
        // The loopback address: its interface (lo) exists in every namespace.
        let agent =
            SharedLink::attach(&served.dir.path().join("h.link"), 7000, Ipv4Addr::LOCALHOST)
                .expect("attach");
        assert_eq!(served.switch.agent_port(), Some(7000));
        let mut frame = frame_buffer();
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 3, 1, 2), 7000);
        let datagram = Datagram {
            src_port: 40_001,
            dst,
            tos: 0x02,
        };
        agent
            .send(RingId::UpData, &mut frame, datagram, 5, b"hello, switch")
            .unwrap();

        // What the switch reads: a frame its parser takes, addressed to its port's MAC.
        let mut out = [0u8; 256];
        let Pop::Frame(len) = served.switch.pop(RingId::UpData, &mut out) else {
            panic!("nothing in the up ring");
        };
        let parsed = wire::parse(&out[..len]).expect("a valid frame");
        assert_eq!(out[..6], [2, 0, 0, 0, 0, 9]);
        assert_eq!(parsed.src, std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(parsed.dst, std::net::IpAddr::V4(*dst.ip()));
        assert_eq!(parsed.ports.map(|p| (p.src, p.dst)), Some((40_001, 7000)));
        assert_eq!(out[wire::ETHERNET_HEADER_LEN + 1], 0x02, "ECT(0)");
        assert_eq!(&out[UDP4_HEADERS..len], b"hello, switch");

        // What the agent reads back: source, TOS, the payload cut to its buffer.
        assert_eq!(served.switch.push(RingId::Down, &out[..len]), Push::Queued);
        let mut garbage = out;
        garbage[wire::ETHERNET_HEADER_LEN + 10] ^= 0xff;
        assert_eq!(
            served.switch.push(RingId::Down, &garbage[..len]),
            Push::Queued
        );
        let mut payload = [0u8; 5];
        let mut malformed = 0;
        let received = agent
            .recv(&mut frame, &mut payload, &mut malformed)
            .expect("a datagram");
        assert_eq!(
            received.from,
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_001)
        );
        assert_eq!((received.len, received.tos), (5, Some(0x02)));
        assert_eq!(&payload, b"hello");
        assert!(agent
            .recv(&mut frame, &mut payload, &mut malformed)
            .is_none());
        assert_eq!(
            malformed, 1,
            "a bad header checksum is dropped, as a kernel would"
        );

        agent.detach();
        assert_eq!(served.switch.agent_port(), None);
    }
}
