//! The congestion-notification wire format (adaptive-routing framework, draft-…-framework §6:
//! "Congestion Notify"). The draft defines the messages' content but no encoding; this is ours,
//! specified in `docs/adaptive-routing.md`. One UDP datagram to a one-hop neighbour per
//! message, sent with IP TTL 255 and accepted only with TTL 255 (GTSM, RFC 5082: the TTL is the
//! socket's business, not this module's).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |    Version    |     Type      |     Flags     |    Quality    |   0
//! +---------------+---------------+---------------+---------------+
//! |            Length             |        Hold time (ms)         |   4
//! +-------------------------------+-------------------------------+
//! |                        Sequence number                        |   8
//! +---------------------------------------------------------------+
//! |                            Epoch                              |  12
//! +---------------------------------------------------------------+
//! |                  Timestamp (ns since the Unix epoch)          |  16
//! |                                                               |
//! +---------------------------------------------------------------+
//! |                     Originator router ID                      |  24
//! +---------------------------------------------------------------+
//! |                    Near end router ID                         |  28
//! +---------------------------------------------------------------+
//! |                     Far end router ID                         |  32
//! +---------------------------------------------------------------+
//! |                        Near end ASN                           |  36
//! +---------------------------------------------------------------+
//! |                         Far end ASN                           |  40
//! +---------------------------------------------------------------+
//! |                     Near end port index                       |  44
//! +---------------------------------------------------------------+   48 = HEADER_LEN
//! | Flow (Flags bit 0 set): source address, destination address,  |
//! | source port, destination port, protocol, 3 bytes zero         |  48..64
//! +---------------------------------------------------------------+
//! ```
//!
//! - **Type**: congestion detected (1) / cleared (2), failure detected (3) / cleared (4). The
//!   companion notification drafts the framework cites were not available to us; these values
//!   are ours and say so in the docs.
//! - **Quality**: the link's quality level, 0–15, lower is poorer (the framework's definition).
//! - **Link**: named by router IDs (the draft's neighbour ID: what receivers key links by, since
//!   an ASN names a whole tier under RFC 7938's shared ASNs) and, for people, by ASNs.
//! - **Epoch and sequence**: the sequence number counts the originator's messages from 0 at
//!   its start; the epoch, drawn at start (its start time in 1/10 s), orders a restarted
//!   originator's messages after its earlier ones (receivers compare the epoch first).
//! - **Hold time**: how long the receiver keeps this state without a refresh (the sender
//!   refreshes every third of it), so a lost "cleared" ages out.
//! - The message is exactly `Length` bytes: 48 without a flow, 64 with one. Everything else is
//!   refused, by name ([`WireError`]). Version 1 (44 bytes, no epoch) is refused.
//!
//! Pure: bytes in, a typed [`Notification`] out, and back; no allocation. Fuzzed
//! (`fuzz/fuzz_targets/notification.rs`).

use std::net::Ipv4Addr;

pub use ofan_dataplane::arf::{Kind, Quality, QUALITY_LEVELS};

/// The version this module speaks.
pub const VERSION: u8 = 2;

/// Bytes of a message without a flow.
pub const HEADER_LEN: usize = 48;

/// Bytes of the optional flow (the draft's second message type: the congested flow's
/// five-tuple, for flow redirection).
pub const FLOW_LEN: usize = 16;

/// Flags bit 0: a flow follows the header.
const FLAG_FLOW: u8 = 0x01;

/// The link a notification is about, seen from the switch that detected it (the near end).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkRef {
    /// The near end's router ID.
    pub near: Ipv4Addr,
    /// The far end's router ID.
    pub far: Ipv4Addr,
    /// The near end's ASN.
    pub near_asn: u32,
    /// The far end's ASN.
    pub far_asn: u32,
    /// The near end's port index.
    pub port: u32,
}

pub use ofan_dataplane::arf::flows::FiveTuple;

/// One congestion notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Notification {
    /// What happened.
    pub kind: Kind,
    /// The link's quality now.
    pub quality: Quality,
    /// How long the receiver keeps it without a refresh, ms.
    pub hold_ms: u16,
    /// The originator's sequence number (per originator, wrapping).
    pub sequence: u32,
    /// The originator's epoch (drawn at its start; compared before the sequence).
    pub epoch: u32,
    /// When the originator sent it, ns since the Unix epoch.
    pub timestamp_ns: u64,
    /// The router ID of the switch that detected it.
    pub originator: Ipv4Addr,
    /// The link.
    pub link: LinkRef,
    /// The congested flow, for flow redirection.
    pub flow: Option<FiveTuple>,
}

/// Why bytes are not a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than a header.
    #[error("{0} bytes, shorter than the 48-byte header")]
    Truncated(usize),
    /// Another version.
    #[error("version {0}, expected 2")]
    Version(u8),
    /// An unknown type.
    #[error("unknown type {0}")]
    Kind(u8),
    /// A quality level above 15.
    #[error("quality level {0} above 15")]
    Quality(u8),
    /// Flags other than the flow bit.
    #[error("unknown flags {0:#04x}")]
    Flags(u8),
    /// `Length` disagrees with the flow flag or the datagram.
    #[error("length field {field}, datagram {datagram} bytes, expected {expected}")]
    Length {
        /// The length field.
        field: u16,
        /// The datagram's length.
        datagram: usize,
        /// What the flags call for.
        expected: usize,
    },
    /// A zero hold time (the state would age out at once).
    #[error("hold time 0")]
    HoldTime,
    /// Nonzero padding after the flow's protocol.
    #[error("nonzero padding")]
    Padding,
}

impl Notification {
    /// Bytes on the wire.
    #[must_use]
    pub const fn len(&self) -> usize {
        if self.flow.is_some() {
            HEADER_LEN + FLOW_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Never empty; for clippy's `len_without_is_empty`.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Parses one datagram.
    ///
    /// # Errors
    /// Anything but exactly one well-formed message, by name.
    pub fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let Some(header) = bytes.get(..HEADER_LEN) else {
            return Err(WireError::Truncated(bytes.len()));
        };
        let u16_at = |at: usize| u16::from_be_bytes([header[at], header[at + 1]]);
        let u32_at = |at: usize| {
            u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
        };
        if header[0] != VERSION {
            return Err(WireError::Version(header[0]));
        }
        let kind = Kind::from_code(header[1]).ok_or(WireError::Kind(header[1]))?;
        let flags = header[2];
        if flags & !FLAG_FLOW != 0 {
            return Err(WireError::Flags(flags));
        }
        let quality = Quality::new(header[3]).ok_or(WireError::Quality(header[3]))?;
        let expected = if flags & FLAG_FLOW != 0 {
            HEADER_LEN + FLOW_LEN
        } else {
            HEADER_LEN
        };
        let field = u16_at(4);
        if usize::from(field) != expected || bytes.len() != expected {
            return Err(WireError::Length {
                field,
                datagram: bytes.len(),
                expected,
            });
        }
        let hold_ms = u16_at(6);
        if hold_ms == 0 {
            return Err(WireError::HoldTime);
        }
        let timestamp_ns = u64::from(u32_at(16)) << 32 | u64::from(u32_at(20));
        let flow = if flags & FLAG_FLOW != 0 {
            let flow = &bytes[HEADER_LEN..];
            if flow[13..16] != [0, 0, 0] {
                return Err(WireError::Padding);
            }
            Some(FiveTuple {
                src: Ipv4Addr::new(flow[0], flow[1], flow[2], flow[3]),
                dst: Ipv4Addr::new(flow[4], flow[5], flow[6], flow[7]),
                src_port: u16::from_be_bytes([flow[8], flow[9]]),
                dst_port: u16::from_be_bytes([flow[10], flow[11]]),
                protocol: flow[12],
            })
        } else {
            None
        };
        Ok(Self {
            kind,
            quality,
            hold_ms,
            sequence: u32_at(8),
            epoch: u32_at(12),
            timestamp_ns,
            originator: Ipv4Addr::from(u32_at(24)),
            link: LinkRef {
                near: Ipv4Addr::from(u32_at(28)),
                far: Ipv4Addr::from(u32_at(32)),
                near_asn: u32_at(36),
                far_asn: u32_at(40),
                port: u32_at(44),
            },
            flow,
        })
    }

    /// Writes the message into `buffer` and returns its length ([`Self::len`]); `None` if the
    /// buffer is shorter.
    pub fn emit(&self, buffer: &mut [u8]) -> Option<usize> {
        let len = self.len();
        let out = buffer.get_mut(..len)?;
        out[0] = VERSION;
        out[1] = self.kind.code();
        out[2] = if self.flow.is_some() { FLAG_FLOW } else { 0 };
        out[3] = self.quality.level();
        out[4..6].copy_from_slice(&(len as u16).to_be_bytes());
        out[6..8].copy_from_slice(&self.hold_ms.to_be_bytes());
        out[8..12].copy_from_slice(&self.sequence.to_be_bytes());
        out[12..16].copy_from_slice(&self.epoch.to_be_bytes());
        out[16..24].copy_from_slice(&self.timestamp_ns.to_be_bytes());
        out[24..28].copy_from_slice(&self.originator.octets());
        out[28..32].copy_from_slice(&self.link.near.octets());
        out[32..36].copy_from_slice(&self.link.far.octets());
        out[36..40].copy_from_slice(&self.link.near_asn.to_be_bytes());
        out[40..44].copy_from_slice(&self.link.far_asn.to_be_bytes());
        out[44..48].copy_from_slice(&self.link.port.to_be_bytes());
        if let Some(flow) = &self.flow {
            let tail = &mut out[HEADER_LEN..];
            tail[0..4].copy_from_slice(&flow.src.octets());
            tail[4..8].copy_from_slice(&flow.dst.octets());
            tail[8..10].copy_from_slice(&flow.src_port.to_be_bytes());
            tail[10..12].copy_from_slice(&flow.dst_port.to_be_bytes());
            tail[12] = flow.protocol;
            tail[13..16].fill(0);
        }
        Some(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(flow: bool) -> Notification {
        Notification {
            kind: Kind::CongestionDetected,
            quality: Quality::new(3).unwrap(),
            hold_ms: 300,
            sequence: 0x0102_0304,
            epoch: 0x0a0b_0c0d,
            timestamp_ns: 0x1122_3344_5566_7788,
            originator: Ipv4Addr::new(10, 255, 0, 16),
            link: LinkRef {
                near: Ipv4Addr::new(10, 255, 0, 16),
                far: Ipv4Addr::new(10, 255, 0, 8),
                near_asn: 4_200_000_032,
                far_asn: 4_200_000_024,
                port: 2,
            },
            flow: flow.then_some(FiveTuple {
                src: Ipv4Addr::new(10, 0, 0, 3),
                dst: Ipv4Addr::new(10, 3, 1, 3),
                src_port: 40_000,
                dst_port: 7000,
                protocol: 17,
            }),
        }
    }

    /// The bytes of `sample(false)`, by hand from the layout in the module docs.
    const SAMPLE: [u8; HEADER_LEN] = [
        2, 1, 0, 3, // version, type, flags, quality
        0, 48, 0x01, 0x2c, // length 48, hold 300 ms
        1, 2, 3, 4, // sequence
        0x0a, 0x0b, 0x0c, 0x0d, // epoch
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // timestamp
        10, 255, 0, 16, // originator
        10, 255, 0, 16, // near
        10, 255, 0, 8, // far
        0xfa, 0x56, 0xea, 0x20, // near ASN 4 200 000 032
        0xfa, 0x56, 0xea, 0x18, // far ASN 4 200 000 024
        0, 0, 0, 2, // port
    ];

    #[test]
    fn the_layout_is_the_documented_one() {
        let mut buffer = [0; 64];
        assert_eq!(sample(false).emit(&mut buffer), Some(HEADER_LEN));
        assert_eq!(buffer[..HEADER_LEN], SAMPLE);
        assert_eq!(Notification::parse(&SAMPLE), Ok(sample(false)));
    }

    #[test]
    fn both_forms_round_trip() {
        for flow in [false, true] {
            let message = sample(flow);
            let mut buffer = [0xee; 80];
            let len = message.emit(&mut buffer).unwrap();
            assert_eq!(len, message.len());
            assert_eq!(Notification::parse(&buffer[..len]), Ok(message));
        }
        assert_eq!(sample(true).emit(&mut [0; 63]), None, "buffer too short");
    }

    #[test]
    fn every_malformation_is_refused_by_name() {
        let good = SAMPLE;
        let with = |at: usize, value: u8| {
            let mut bytes = good;
            bytes[at] = value;
            Notification::parse(&bytes)
        };
        assert_eq!(
            Notification::parse(&good[..47]),
            Err(WireError::Truncated(47))
        );
        assert_eq!(
            with(0, 1),
            Err(WireError::Version(1)),
            "no epoch in version 1"
        );
        assert_eq!(with(1, 0), Err(WireError::Kind(0)));
        assert_eq!(with(1, 5), Err(WireError::Kind(5)));
        assert_eq!(with(2, 0x02), Err(WireError::Flags(0x02)));
        assert_eq!(with(3, 16), Err(WireError::Quality(16)));
        assert!(matches!(with(5, 60), Err(WireError::Length { .. })));
        // The flow bit without the flow's bytes, and the flow's bytes without the bit.
        let mut flagged = good;
        flagged[2] = 1;
        assert!(matches!(
            Notification::parse(&flagged),
            Err(WireError::Length { expected: 64, .. })
        ));
        let mut long = good.to_vec();
        long.extend_from_slice(&[0; FLOW_LEN]);
        assert!(matches!(
            Notification::parse(&long),
            Err(WireError::Length { expected: 48, .. })
        ));
        let mut zero_hold = good;
        zero_hold[6..8].fill(0);
        assert_eq!(Notification::parse(&zero_hold), Err(WireError::HoldTime));
        let mut buffer = [0; 64];
        sample(true).emit(&mut buffer).unwrap();
        buffer[63] = 1;
        assert_eq!(Notification::parse(&buffer), Err(WireError::Padding));
    }

    #[test]
    fn kinds_and_levels_are_closed() {
        for code in 0..=u8::MAX {
            if let Some(kind) = Kind::from_code(code) {
                assert_eq!(kind.code(), code);
            }
        }
        assert_eq!(Quality::new(15), Some(Quality::BEST));
        assert_eq!(Quality::new(16), None);
        assert!(Quality::POOREST < Quality::BEST);
    }
}
