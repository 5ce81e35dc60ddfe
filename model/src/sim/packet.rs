//! The frame in flight: a 16-byte `Copy` value, stored inline in the ports' wire queues, with
//! its sequence number, copy number and flags packed in one word.

use ofan_transport::ECHO_MASK;

/// `via` of a packet that is not source-routed.
pub(super) const NO_VIA: u16 = u16::MAX;

/// Flag bits of [`Packet::seq_flags`].
pub(super) const ACK_FLAG: u32 = 1 << 31;
pub(super) const ECN_FLAG: u32 = 1 << 30;
/// The copy number of a data frame (its transmissions before it, modulo 128; echoed by its
/// ACK, as the lab agent's header does) in bits 23–29.
pub(super) const COPY_SHIFT: u32 = 23;
/// A data frame whose sender asks for an ACK at once (with coalesced ACKs only: a
/// retransmission, a flow's last new frame, a frame that fills its window), bit 22.
pub(super) const AR_FLAG: u32 = 1 << 22;
/// On an ACK, bit 22 (a data frame's [`AR_FLAG`]) makes it a NACK: a switch trimmed the copy
/// it names ([`crate::ModelConfig::trim`]).
pub(super) const NACK_FLAG: u32 = AR_FLAG;
/// A NACK whose sequence number is this (never a packet's: flows have fewer than 2^22 − 1
/// packets) is a PULL: one data frame of credit for its flow ([`crate::ModelConfig::receiver_credit`]).
pub(super) const PULL_SEQ: u32 = SEQ_MASK;
/// Sequence numbers use the low 22 bits.
pub(super) const SEQ_MASK: u32 = AR_FLAG - 1;

/// A frame in flight: 16 bytes, `Copy`, stored inline in the ports' wire queues.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Packet {
    pub(super) flow: u32,
    /// Sequence number (low 22 bits), [`AR_FLAG`], copy number ([`COPY_SHIFT`]),
    /// [`ACK_FLAG`], [`ECN_FLAG`] (CE mark; echoed by ACKs).
    pub(super) seq_flags: u32,
    /// Frame bytes (header + payload, or the ACK), without the inter-frame gap.
    pub(super) frame: u32,
    /// Host-chosen entropy (spray, reps; echoed by ACKs), 0 otherwise.
    pub(super) entropy: u16,
    /// DRB source route: low byte = edge up-port position, high byte = aggregation up-port
    /// position; [`NO_VIA`] when the switches decide.
    pub(super) via: u16,
}

impl Packet {
    #[inline]
    pub(super) const fn is_ack(&self) -> bool {
        self.seq_flags & ACK_FLAG != 0
    }

    /// A PULL ([`PULL_SEQ`]): one data frame of credit for its flow.
    #[inline]
    pub(super) const fn is_pull(&self) -> bool {
        self.seq_flags & (ACK_FLAG | NACK_FLAG | SEQ_MASK) == ACK_FLAG | NACK_FLAG | PULL_SEQ
    }

    #[inline]
    pub(super) const fn ecn(&self) -> bool {
        self.seq_flags & ECN_FLAG != 0
    }

    #[inline]
    pub(super) const fn seq(&self) -> u32 {
        self.seq_flags & SEQ_MASK
    }

    #[inline]
    pub(super) const fn copy(&self) -> u32 {
        (self.seq_flags >> COPY_SHIFT) & ECHO_MASK
    }

    /// The hint an arrival event of this frame carries (`queue.rs`): its flow in the low 31
    /// bits, [`ACK_FLAG`] for an ACK. For prefetching only: a flow id of 2^31 or more (a
    /// flow table of 128 GiB) would only prefetch the wrong flow.
    #[inline]
    pub(super) const fn hint(&self) -> u32 {
        self.flow | self.seq_flags & ACK_FLAG
    }
}
