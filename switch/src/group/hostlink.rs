//! `--host-links`: a member's shared-memory links to its hosts' agents ([`ofan_hostlink`]),
//! plugged into its ports' workers as their bypasses ([`ofan_dataplane::afxdp::bypass`]).
//!
//! The switch serves each host's file when the member's runtime starts (slots for its UMEM
//! frames, the port's MAC in the header). Its worker then reads the agent's two up rings as
//! the port's two inputs, and offers the link each frame the port transmits: the link takes
//! the frames for the attached agent's UDP port ([`ofan_hostlink::is_for_agent`]) into the down
//! ring, and leaves the rest — and everything while no agent is attached — to the veth.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ofan_dataplane::afxdp::bypass::{Bypass, BypassError, BypassPort, Offer, OpenBypass, Take};
use ofan_hostlink::{is_for_agent, slot_size_for, HostLink, Pop, Push, RingId};
use ofan_topology::{Role, Topology};

/// The host links of `members` of `topology` in `dir`: for each member, by the name of each
/// port that leads to a host, the link in the file `dir/HOST.link`.
pub(super) fn host_links_of(
    topology: &Topology,
    members: &[String],
    dir: &Path,
) -> BTreeMap<String, BTreeMap<String, Arc<dyn OpenBypass>>> {
    let mut links: BTreeMap<String, BTreeMap<String, Arc<dyn OpenBypass>>> = BTreeMap::new();
    for link in topology.links() {
        for (this, other) in [(link.a, link.b), (link.b, link.a)] {
            let (node, host) = (topology.node(this.0), topology.node(other.0));
            if host.role != Role::Host || !members.contains(&node.name) {
                continue;
            }
            links.entry(node.name.clone()).or_default().insert(
                topology.port(this.0, this.1).ifname.clone(),
                Arc::new(ServeHostLink {
                    path: dir.join(format!("{}.link", host.name)),
                }),
            );
        }
    }
    links
}

/// Serves the host link in a file when its port's runtime starts.
#[derive(Debug, Clone)]
struct ServeHostLink {
    /// `DIR/HOST.link`.
    path: PathBuf,
}

impl OpenBypass for ServeHostLink {
    fn open(&self, port: &BypassPort<'_>) -> Result<Box<dyn Bypass>, BypassError> {
        let link = HostLink::serve(&self.path, slot_size_for(port.frame_size), port.mac)?;
        Ok(Box::new(HostLinkBypass {
            link,
            agent_port: Cell::new(None),
        }))
    }
}

/// The switch's end of a host link, as its port's bypass.
#[derive(Debug)]
struct HostLinkBypass {
    link: HostLink,
    /// The attached agent's UDP port as [`Bypass::diverting`] read it at the start of the
    /// transmit pass: the pass's frames are offered against it, without reading the link's
    /// header again per frame (an agent that detaches mid-pass loses the rest of the pass's
    /// frames, as a link going down would).
    agent_port: Cell<Option<u16>>,
}

impl Bypass for HostLinkBypass {
    fn inputs(&self) -> usize {
        RingId::UP.len()
    }

    #[inline]
    fn pending(&self, input: usize) -> bool {
        self.link.pending(RingId::UP[input])
    }

    #[inline]
    fn take(&self, input: usize, out: &mut [u8]) -> Take {
        match self.link.pop(RingId::UP[input], out) {
            Pop::Empty => Take::Empty,
            Pop::Frame(len) => Take::Frame(len),
            Pop::Malformed => Take::Malformed,
        }
    }

    fn diverting(&self) -> bool {
        self.agent_port.set(self.link.agent_port());
        self.agent_port.get().is_some()
    }

    #[inline]
    fn offer(&self, frame: &[u8]) -> Offer {
        let Some(agent_port) = self.agent_port.get() else {
            return Offer::Passed;
        };
        if !is_for_agent(frame, agent_port) {
            return Offer::Passed;
        }
        match self.link.push(RingId::Down, frame) {
            Push::Queued => Offer::Taken,
            Push::Full => Offer::Lost,
            Push::TooLarge => Offer::Passed,
        }
    }

    fn set_sleeping(&self, sleeping: bool) {
        if sleeping {
            // Whether a frame raced with it the worker sees in `pending`.
            let _ = self.link.sleep(&RingId::UP);
        } else {
            self.link.woke(&RingId::UP);
        }
    }

    fn wake_fd(&self) -> BorrowedFd<'_> {
        // Both up rings wake the switch through one FIFO.
        self.link.wake_fd(RingId::UpData)
    }

    fn clear_wake(&self) {
        self.link.clear_wake(RingId::UpData);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 7];

    /// An IPv4 UDP frame to `port` (addresses 0, payload 4 bytes).
    fn udp_to(port: u16) -> Vec<u8> {
        let mut frame = vec![0u8; 14 + 20 + 8 + 4];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame[14] = 0x45;
        frame[16..18].copy_from_slice(&(20u16 + 8 + 4).to_be_bytes());
        frame[22] = 64;
        frame[23] = 17;
        frame[36..38].copy_from_slice(&port.to_be_bytes());
        frame[38..40].copy_from_slice(&12u16.to_be_bytes());
        let sum = ofan_dataplane::wire::checksum::checksum(&frame[14..34]);
        frame[24..26].copy_from_slice(&sum.to_be_bytes());
        frame
    }

    #[test]
    fn the_bypass_takes_the_attached_agents_frames_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h0.link");
        let bypass = ServeHostLink { path: path.clone() }
            .open(&BypassPort {
                name: "p0",
                mac: MAC,
                frame_size: 2048,
            })
            .unwrap();
        assert_eq!(bypass.inputs(), 2);
        assert!(!bypass.diverting(), "no agent attached");
        assert_eq!(bypass.offer(&udp_to(4791)), Offer::Passed);

        let agent = HostLink::attach(&path, 4791).unwrap();
        assert_eq!(agent.switch_mac(), MAC);
        assert!(bypass.diverting());
        assert_eq!(bypass.offer(&udp_to(4791)), Offer::Taken);
        assert_eq!(bypass.offer(&udp_to(4792)), Offer::Passed);
        assert_eq!(bypass.offer(&vec![0; 4096]), Offer::Passed, "not IPv4");
        let mut out = [0u8; 128];
        assert_eq!(agent.pop(RingId::Down, &mut out), Pop::Frame(46));

        assert!(!bypass.pending(1));
        assert_eq!(agent.push(RingId::UpAck, &[1, 2, 3]), Push::Queued);
        assert!(!bypass.pending(0) && bypass.pending(1));
        assert_eq!(bypass.take(1, &mut out), Take::Frame(3));
        assert_eq!(bypass.take(1, &mut out), Take::Empty);

        drop(agent);
        assert!(!bypass.diverting(), "detached");
    }
}
