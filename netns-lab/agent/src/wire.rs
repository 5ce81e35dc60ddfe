//! The agent's packets: an 18-byte header at the start of every UDP payload.
//!
//! ```text
//!  0      2          3       4            8      12         16        18
//! +------+----------+-------+------------+------+----------+---------+----------------+
//! | "of" | ver|kind | flags | collective | flow | sequence | entropy | DATA: padding… |
//! +------+----------+-------+------------+------+----------+---------+----------------+
//! ```
//!
//! All integers are big-endian. `ver|kind` is the version (high nibble, [`VERSION`]) and the
//! kind (low nibble): 0 DATA, 1 ACK — the same numbers as the switch's size classes
//! (`ofan_dataplane::lb::SizeClass`). `flags` bit 0 ([`Flags::CE`]) in an ACK says that the
//! acknowledged DATA packet arrived with the ECN CE codepoint; bits 1–7 ([`Flags::copy`]) number
//! the copy of a DATA packet (0 for the first transmission, modulo 128), and its ACK echoes
//! them, so the sender knows which copy an ACK answers and can time it (the loss recovery's RTT
//! samples, `ofan_transport::SelectiveRepeat::on_ack_echo`). `entropy` is chosen by the
//! sender of a DATA packet (an index into its pool of UDP source ports) and echoed in the ACK.
//!
//! A DATA packet is the header padded with zeros to the configured UDP payload (the last packet
//! of a flow carries only the bytes left). An ACK is the header alone: 18 + 8 (UDP) + 20 (IPv4)
//! + 14 (Ethernet) + 4 (FCS) = 64 bytes, the minimum Ethernet frame ([`ACK_FRAME_BYTES`]).

/// First two bytes of every agent packet: "of".
pub const MAGIC: [u8; 2] = *b"of";
/// Header version.
pub const VERSION: u8 = 1;
/// Header bytes at the start of every UDP payload.
pub const HEADER_LEN: usize = 18;
/// IPv4 (20) and UDP (8) header bytes.
pub const IP_UDP_BYTES: u64 = 28;
/// Ethernet header (14) and frame check sequence (4): a frame is the IP packet plus these.
pub const ETHERNET_BYTES: u64 = 18;
/// Preamble, start delimiter and inter-frame gap: wire bytes beyond the frame.
pub const GAP_BYTES: u64 = 20;
/// Frame bytes of an ACK (including the FCS): the minimum Ethernet frame.
pub const ACK_FRAME_BYTES: u64 = HEADER_LEN as u64 + IP_UDP_BYTES + ETHERNET_BYTES;
const _: () = assert!(ACK_FRAME_BYTES == 64, "an ACK is a minimum Ethernet frame");

/// ECN codepoint ECT(0) in the low two bits of the IPv4 TOS byte.
pub const ECN_ECT0: u8 = 0b10;
/// ECN codepoint CE.
pub const ECN_CE: u8 = 0b11;

/// Ethernet frame bytes (header, IP, UDP, payload, FCS) of a UDP payload of `udp_payload` bytes.
#[must_use]
pub const fn frame_bytes(udp_payload: u64) -> u64 {
    udp_payload + IP_UDP_BYTES + ETHERNET_BYTES
}

/// Bytes a UDP payload of `udp_payload` bytes occupies on the wire (frame plus gap).
#[must_use]
pub const fn wire_bytes(udp_payload: u64) -> u64 {
    frame_bytes(udp_payload) + GAP_BYTES
}

/// Whether an IPv4 TOS byte carries the CE codepoint.
#[must_use]
pub const fn is_ce(tos: u8) -> bool {
    tos & 0b11 == ECN_CE
}

/// Packet kind; the numbers are the switch's size classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Payload of a flow.
    Data = 0,
    /// Acknowledgement of one DATA packet.
    Ack = 1,
}

/// Header flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags(pub u8);

impl Flags {
    /// In an ACK: the acknowledged DATA packet arrived CE-marked.
    pub const CE: u8 = 0b0000_0001;

    /// Whether the CE-echo flag is set.
    #[must_use]
    pub const fn ce(self) -> bool {
        self.0 & Self::CE != 0
    }

    /// Flags of a DATA packet's copy number `copy` (modulo 128).
    #[must_use]
    pub const fn of_copy(copy: u32) -> Self {
        Self(((copy & 0x7f) as u8) << 1)
    }

    /// The copy number (of a DATA packet, or echoed in its ACK), modulo 128.
    #[must_use]
    pub const fn copy(self) -> u32 {
        (self.0 >> 1) as u32
    }
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// DATA or ACK.
    pub kind: Kind,
    /// Flags.
    pub flags: Flags,
    /// Collective id of the run.
    pub collective: u32,
    /// Flow id (position in the plan).
    pub flow: u32,
    /// Packet number within the flow, from 0.
    pub sequence: u32,
    /// Sender-chosen entropy, echoed by the ACK.
    pub entropy: u16,
}

/// Why bytes are not an agent packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Shorter than the header.
    #[error("{len} bytes, shorter than the {HEADER_LEN}-byte header")]
    Truncated {
        /// Length received.
        len: usize,
    },
    /// Not starting with "of".
    #[error("bad magic")]
    Magic,
    /// Another header version.
    #[error("unknown version {0}")]
    Version(u8),
    /// Neither DATA nor ACK.
    #[error("unknown kind {0}")]
    Kind(u8),
}

impl Header {
    /// Parses the header at the start of `bytes`; never panics.
    ///
    /// # Errors
    /// When `bytes` is too short or not an agent packet of this version.
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let Some(header) = bytes.get(..HEADER_LEN) else {
            return Err(WireError::Truncated { len: bytes.len() });
        };
        if header[..2] != MAGIC {
            return Err(WireError::Magic);
        }
        let version = header[2] >> 4;
        if version != VERSION {
            return Err(WireError::Version(version));
        }
        let kind = match header[2] & 0x0f {
            0 => Kind::Data,
            1 => Kind::Ack,
            other => return Err(WireError::Kind(other)),
        };
        let u32_at = |at: usize| {
            u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        Ok(Self {
            kind,
            flags: Flags(header[3]),
            collective: u32_at(4),
            flow: u32_at(8),
            sequence: u32_at(12),
            entropy: u16::from_be_bytes([header[16], header[17]]),
        })
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than the header.
    pub fn write(&self, out: &mut [u8]) {
        let out = &mut out[..HEADER_LEN];
        out[..2].copy_from_slice(&MAGIC);
        out[2] = (VERSION << 4) | self.kind as u8;
        out[3] = self.flags.0;
        out[4..8].copy_from_slice(&self.collective.to_be_bytes());
        out[8..12].copy_from_slice(&self.flow.to_be_bytes());
        out[12..16].copy_from_slice(&self.sequence.to_be_bytes());
        out[16..18].copy_from_slice(&self.entropy.to_be_bytes());
    }

    /// The ACK of this DATA header, received with IPv4 TOS byte `tos` (`None`: unknown, taken
    /// as not CE): same collective, flow, sequence, copy number and entropy, CE echoed.
    #[must_use]
    pub fn ack(&self, tos: Option<u8>) -> Self {
        let ce = tos.is_some_and(is_ce);
        Self {
            kind: Kind::Ack,
            flags: Flags(Flags::of_copy(self.flags.copy()).0 | if ce { Flags::CE } else { 0 }),
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DATA: Header = Header {
        kind: Kind::Data,
        flags: Flags(0),
        collective: 0x0102_0304,
        flow: 7,
        sequence: 0x00aa_bbcc,
        entropy: 0x1234,
    };

    #[test]
    fn byte_layout() {
        let mut buf = [0xffu8; 20];
        DATA.write(&mut buf);
        assert_eq!(
            buf,
            [
                b'o', b'f', 0x10, 0, 1, 2, 3, 4, 0, 0, 0, 7, 0, 0xaa, 0xbb, 0xcc, 0x12, 0x34, 0xff,
                0xff
            ]
        );
        assert_eq!(Header::parse(&buf), Ok(DATA));
        let mut ack = [0u8; HEADER_LEN];
        DATA.ack(Some(ECN_CE)).write(&mut ack);
        assert_eq!(ack[2], 0x11);
        assert_eq!(ack[3], Flags::CE);
    }

    #[test]
    fn ack_frame_is_the_minimum_ethernet_frame() {
        assert_eq!(ACK_FRAME_BYTES, 64);
        // A full data packet at MTU 1500: 1472 B of UDP payload, 1518 B frame, 1538 B on wire.
        assert_eq!(frame_bytes(1472), 1518);
        assert_eq!(wire_bytes(1472), 1538);
    }

    #[test]
    fn ce_echo() {
        assert!(DATA.ack(Some(ECN_CE)).flags.ce());
        assert!(
            DATA.ack(Some(0xb8 | ECN_CE)).flags.ce(),
            "DSCP bits do not matter"
        );
        for tos in [ECN_ECT0, 0b01, 0, 0xb8 | ECN_ECT0] {
            assert!(!DATA.ack(Some(tos)).flags.ce(), "tos {tos:#x}");
        }
        assert!(!DATA.ack(None).flags.ce());
        let ack = DATA.ack(Some(ECN_CE));
        assert_eq!(
            (
                ack.kind,
                ack.collective,
                ack.flow,
                ack.sequence,
                ack.entropy
            ),
            (
                Kind::Ack,
                DATA.collective,
                DATA.flow,
                DATA.sequence,
                DATA.entropy
            )
        );
    }

    #[test]
    fn acks_echo_the_copy_number_beside_ce() {
        let data = Header {
            flags: Flags::of_copy(130),
            ..DATA
        };
        assert_eq!(data.flags.copy(), 2, "copies count modulo 128");
        assert!(!data.flags.ce());
        let ack = data.ack(Some(ECN_CE));
        assert_eq!((ack.flags.copy(), ack.flags.ce()), (2, true));
        let mut buf = [0u8; HEADER_LEN];
        ack.write(&mut buf);
        assert_eq!(buf[3], 0b0000_0101);
        assert_eq!(Header::parse(&buf).unwrap(), ack);
        assert_eq!(DATA.ack(None).flags.copy(), 0);
    }

    #[test]
    fn rejects_foreign_bytes() {
        let mut buf = [0u8; HEADER_LEN];
        DATA.write(&mut buf);
        assert_eq!(
            Header::parse(&buf[..17]),
            Err(WireError::Truncated { len: 17 })
        );
        let mut bad = buf;
        bad[0] = b'x';
        assert_eq!(Header::parse(&bad), Err(WireError::Magic));
        let mut bad = buf;
        bad[2] = 0x20;
        assert_eq!(Header::parse(&bad), Err(WireError::Version(2)));
        let mut bad = buf;
        bad[2] = 0x12;
        assert_eq!(Header::parse(&bad), Err(WireError::Kind(2)));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Header::parse(&bytes);
        }

        #[test]
        fn write_then_parse_round_trips(
            ack in any::<bool>(), flags in any::<u8>(), collective in any::<u32>(),
            flow in any::<u32>(), sequence in any::<u32>(), entropy in any::<u16>(),
        ) {
            let header = Header {
                kind: if ack { Kind::Ack } else { Kind::Data },
                flags: Flags(flags), collective, flow, sequence, entropy,
            };
            let mut buf = [0u8; HEADER_LEN];
            header.write(&mut buf);
            prop_assert_eq!(Header::parse(&buf), Ok(header));
        }
    }
}
