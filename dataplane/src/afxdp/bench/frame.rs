//! The generator's frames: Ethernet + IPv4 + UDP with valid IPv4 header and UDP checksums, one
//! frame per flow. Pure: built once, before the first packet is sent.

use std::net::Ipv4Addr;

use crate::wire::checksum;

const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// Ethernet frame check sequence: counted in a frame size (a "64-byte frame"), but not part
/// of what the generator writes (the NIC or veth does not carry it).
pub const FCS_LEN: u32 = 4;
/// The smallest frame size: 64 bytes on the wire, 60 without the FCS.
pub const MIN_FRAME_SIZE: u32 = 64;
/// The largest frame size: 1518 bytes on the wire (1500-byte MTU).
pub const MAX_FRAME_SIZE: u32 = 1518;

/// What every frame of a benchmark flow set shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFlows {
    /// Source MAC (the generator's interface).
    pub src_mac: [u8; 6],
    /// Destination MAC (the device under test's ingress port).
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address (routed by the device under test).
    pub dst_ip: Ipv4Addr,
    /// First UDP source port; flow `i` uses `first_src_port + i`.
    pub first_src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// Frame size on the wire, FCS included (64 for "64-byte frames").
    pub frame_size: u32,
}

/// Why a flow set cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame size is outside `MIN_FRAME_SIZE..=MAX_FRAME_SIZE`.
    #[error("frame size {0} is outside {MIN_FRAME_SIZE}..={MAX_FRAME_SIZE} bytes (FCS included)")]
    Size(u32),
    /// More flows than source ports above `first_src_port`.
    #[error("{flows} flows from source port {first} run past port 65535")]
    Flows {
        /// Flows asked for.
        flows: u32,
        /// First source port.
        first: u16,
    },
}

impl UdpFlows {
    /// Bytes the generator writes per frame: the frame size without the FCS.
    pub fn len(&self) -> usize {
        (self.frame_size - FCS_LEN) as usize
    }

    /// Whether the frames are empty (never: the size is checked in [`Self::frames`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frames of `flows` flows, in flow order.
    ///
    /// # Errors
    /// [`FrameError`] for a frame size out of range or too many flows.
    pub fn frames(&self, flows: u32) -> Result<Vec<Vec<u8>>, FrameError> {
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&self.frame_size) {
            return Err(FrameError::Size(self.frame_size));
        }
        if u32::from(self.first_src_port) + flows > 65536 {
            return Err(FrameError::Flows {
                flows,
                first: self.first_src_port,
            });
        }
        Ok((0..flows)
            .map(|flow| self.frame(self.first_src_port + flow as u16))
            .collect())
    }

    /// One frame with UDP source port `src_port` (size already checked).
    fn frame(&self, src_port: u16) -> Vec<u8> {
        let len = self.len();
        let mut frame = vec![0u8; len];
        frame[0..6].copy_from_slice(&self.dst_mac);
        frame[6..12].copy_from_slice(&self.src_mac);
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());

        let ip_len = (len - ETH_LEN) as u16;
        let ip = &mut frame[ETH_LEN..ETH_LEN + IPV4_LEN];
        ip[0] = 0x45; // version 4, 5-word header
        ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
        ip[6] = 0x40; // don't fragment
        ip[8] = 64; // TTL
        ip[9] = 17; // UDP
        ip[12..16].copy_from_slice(&self.src_ip.octets());
        ip[16..20].copy_from_slice(&self.dst_ip.octets());
        let ip_checksum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&ip_checksum.to_be_bytes());

        let udp_len = ip_len - IPV4_LEN as u16;
        let l4 = ETH_LEN + IPV4_LEN;
        frame[l4..l4 + 2].copy_from_slice(&src_port.to_be_bytes());
        frame[l4 + 2..l4 + 4].copy_from_slice(&self.dst_port.to_be_bytes());
        frame[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
        for (index, byte) in frame[l4 + UDP_LEN..].iter_mut().enumerate() {
            *byte = index as u8;
        }
        let udp_checksum = match checksum::checksum(&self.udp_pseudo_and_datagram(&frame[l4..])) {
            0 => 0xffff, // 0 means "no checksum" in UDP over IPv4
            sum => sum,
        };
        frame[l4 + 6..l4 + 8].copy_from_slice(&udp_checksum.to_be_bytes());
        frame
    }

    /// The IPv4 pseudo-header followed by the datagram (checksum field zero), for its checksum.
    fn udp_pseudo_and_datagram(&self, datagram: &[u8]) -> Vec<u8> {
        let mut covered = Vec::with_capacity(12 + datagram.len());
        covered.extend_from_slice(&self.src_ip.octets());
        covered.extend_from_slice(&self.dst_ip.octets());
        covered.extend_from_slice(&[0, 17]);
        covered.extend_from_slice(&(datagram.len() as u16).to_be_bytes());
        covered.extend_from_slice(datagram);
        covered
    }
}

/// Flows between two fixed test addresses, for unit tests of the frame builders.
#[cfg(test)]
pub(crate) fn test_flows(frame_size: u32) -> UdpFlows {
    UdpFlows {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: Ipv4Addr::new(10, 0, 0, 2),
        dst_ip: Ipv4Addr::new(10, 1, 0, 1),
        first_src_port: 1024,
        dst_port: 9,
        frame_size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Ipv4Packet;

    fn flows(frame_size: u32) -> UdpFlows {
        test_flows(frame_size)
    }

    #[test]
    fn a_64_byte_frame_is_60_bytes_with_valid_checksums() {
        let frames = flows(64).frames(3).unwrap();
        assert_eq!(frames.len(), 3);
        for (flow, frame) in frames.iter().enumerate() {
            assert_eq!(frame.len(), 60);
            assert_eq!(&frame[0..6], &[2, 0, 0, 0, 0, 2]);
            let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
            assert!(ip.verify_checksum());
            let mut covered = flows(64).udp_pseudo_and_datagram(&frame[34..]);
            // The checksum field is included now: a correct datagram sums to 0xFFFF.
            assert!(checksum::verify(&covered));
            covered.clear();
            let src_port = u16::from_be_bytes([frame[34], frame[35]]);
            assert_eq!(src_port, 1024 + flow as u16);
            assert_eq!(u16::from_be_bytes([frame[38], frame[39]]), 60 - 34);
        }
    }

    #[test]
    fn sizes_and_flow_counts_are_checked() {
        assert_eq!(flows(63).frames(1), Err(FrameError::Size(63)));
        assert_eq!(flows(1519).frames(1), Err(FrameError::Size(1519)));
        assert_eq!(flows(1518).frames(1).unwrap()[0].len(), 1514);
        assert!(flows(64).frames(64512).is_ok());
        assert!(matches!(
            flows(64).frames(64513),
            Err(FrameError::Flows { .. })
        ));
    }
}
