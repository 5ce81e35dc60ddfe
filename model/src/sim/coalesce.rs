//! Coalesced ACKs (`--ack-every N`): a receiver acknowledges a flow's data once per N frames
//! instead of once per frame, as htsim's UEC sink does (one selective ACK per
//! `-sack_threshold` bytes, 16 KB by default: four 4 KB frames). Fewer ACKs take less of the
//! receiver's host link, which its own data shares; the paper's evaluation ran on such sinks.
//!
//! The receiver of a flow sends an ACK at once for a CE-marked frame, a duplicate, the flow's
//! first frame and the frame that completes the flow, and for a frame whose sender asked for
//! one (htsim's "ACK request": a retransmission, the flow's last new frame, a frame that
//! fills the flow's window — without it a sender that waits for its window would wait for
//! its timer whenever fewer than N frames were in flight), and otherwise when N frames have
//! come since its last ACK. An ACK carries what the receiver has received and the sender has not
//! yet learnt, up to the frame that triggered it, like a selective ACK's bitmap: a lost ACK
//! is made good by the next one, and an ACK that arrives after a later one tells nothing new.
//! The simulator keeps that knowledge per flow as the frames received and not yet conveyed,
//! in arrival order ([`Coalesce::pending`]); the ACK frame itself carries only its trigger
//! (the sequence and copy number it echoes), which names how far its knowledge goes.

use std::collections::VecDeque;

use super::packet::{ACK_FLAG, AR_FLAG, ECN_FLAG};

/// The bits of a frame's `seq_flags` that name one transmission of one packet of a flow:
/// sequence and copy number, without the flags.
const TRANSMISSION_MASK: u32 = !(ACK_FLAG | ECN_FLAG | AR_FLAG);

/// The receivers' side and the senders' view of coalesced ACKs.
#[derive(Debug)]
pub(super) struct Coalesce {
    /// Frames per ACK.
    every: u32,
    /// Per flow: the frames received (`seq_flags`, with their CE flag) whose ACK the sender
    /// has not received yet, oldest first.
    pending: Vec<VecDeque<u32>>,
    /// Per flow: frames received since the receiver's last ACK.
    since_ack: Vec<u32>,
}

/// What made a receiver acknowledge a frame at once, whatever the count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Urgent {
    /// The frame was CE-marked (the sender's congestion control hears of it without delay).
    pub(super) marked: bool,
    /// Its packet had been received before: the sender is confused, tell it now.
    pub(super) duplicate: bool,
    /// The flow's first frame, or the one that completes it.
    pub(super) edge: bool,
    /// The sender asked for it ([`AR_FLAG`]).
    pub(super) requested: bool,
}

impl Coalesce {
    /// One ACK per `every` frames for `flows` flows; `None` when every frame is acknowledged
    /// (the simulator's default path, which keeps no such state).
    pub(super) fn new(every: u32, flows: usize) -> Option<Box<Self>> {
        (every > 1).then(|| {
            Box::new(Self {
                every,
                pending: vec![VecDeque::new(); flows],
                since_ack: vec![0; flows],
            })
        })
    }

    /// The receiver of `flow` got the frame `seq_flags`: whether it sends an ACK for it now.
    pub(super) fn on_data(&mut self, flow: u32, seq_flags: u32, urgent: Urgent) -> bool {
        let flow = flow as usize;
        self.pending[flow].push_back(seq_flags & !ACK_FLAG);
        let count = &mut self.since_ack[flow];
        *count += 1;
        let now = urgent.marked
            || urgent.duplicate
            || urgent.edge
            || urgent.requested
            || *count >= self.every;
        if now {
            *count = 0;
        }
        now
    }

    /// An ACK of `flow` that echoes the frame `trigger` reached the sender: moves into `out`
    /// (cleared first) every frame the receiver had received when it sent that ACK and the
    /// sender has not learnt yet, oldest first — nothing when a later ACK told it already.
    pub(super) fn on_ack(&mut self, flow: u32, trigger: u32, out: &mut Vec<u32>) {
        out.clear();
        let pending = &mut self.pending[flow as usize];
        let wanted = trigger & TRANSMISSION_MASK;
        if let Some(last) = pending
            .iter()
            .position(|&frame| frame & TRANSMISSION_MASK == wanted)
        {
            out.extend(pending.drain(..=last));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CALM: Urgent = Urgent {
        marked: false,
        duplicate: false,
        edge: false,
        requested: false,
    };

    #[test]
    fn one_ack_per_n_frames_unless_a_frame_is_urgent() {
        let mut coalesce = Coalesce::new(4, 1).expect("coalescing");
        let sent: Vec<bool> = (0..8).map(|s| coalesce.on_data(0, s, CALM)).collect();
        assert_eq!(sent, [false, false, false, true, false, false, false, true]);
        let marked = Urgent {
            marked: true,
            ..CALM
        };
        assert!(coalesce.on_data(0, 8 | ECN_FLAG, marked));
        // The count starts again after an urgent ACK.
        assert!(!coalesce.on_data(0, 9, CALM));
        for urgent in [
            Urgent {
                duplicate: true,
                ..CALM
            },
            Urgent { edge: true, ..CALM },
            Urgent {
                requested: true,
                ..CALM
            },
        ] {
            assert!(coalesce.on_data(0, 10, urgent));
        }
        assert!(Coalesce::new(1, 1).is_none(), "every frame: no state");
    }

    #[test]
    fn an_ack_conveys_everything_up_to_its_trigger_once() {
        let mut coalesce = Coalesce::new(4, 2).expect("coalescing");
        for seq in 0..8 {
            coalesce.on_data(1, seq, CALM);
        }
        let mut out = Vec::new();
        // The second ACK (trigger 7) overtakes the first (trigger 3): it tells all eight.
        coalesce.on_ack(1, 7 | ACK_FLAG, &mut out);
        assert_eq!(out, (0..8).collect::<Vec<_>>());
        coalesce.on_ack(1, 3 | ACK_FLAG, &mut out);
        assert!(out.is_empty(), "the late ACK tells nothing new");
        // A lost ACK is made good by the next; the CE flag of each frame is kept, and the
        // trigger is matched without it.
        for seq in 8..12 {
            coalesce.on_data(1, seq | if seq == 9 { ECN_FLAG } else { 0 }, CALM);
        }
        coalesce.on_data(1, 12, CALM);
        coalesce.on_ack(1, 12 | ACK_FLAG | ECN_FLAG, &mut out);
        assert_eq!(out, [8, 9 | ECN_FLAG, 10, 11, 12]);
        // Another flow's frames are its own, and a copy number tells transmissions apart.
        coalesce.on_data(0, 5, CALM);
        coalesce.on_ack(0, 5 | (1 << super::super::packet::COPY_SHIFT), &mut out);
        assert!(out.is_empty(), "another copy of the packet");
        coalesce.on_ack(0, 5, &mut out);
        assert_eq!(out, [5]);
    }
}
