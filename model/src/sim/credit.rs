//! Receiver credits (`--receiver-credit`): the receiver of a flow paces its senders, as htsim's
//! UEC source does by default beside its sender-side CCA (`_receiver_based_cc`, UEC's
//! receiver credit-based congestion control): a sender starts with one window of credit
//! (speculative data), and beyond it sends a new packet only with credit *and* room in its
//! window; each receiver runs a pull pacer that sends one of its senders a PULL, one data
//! frame of credit, once per data frame time of its own link, round robin over the flows it
//! has seen and that still have new data; it skips a flow whose sender already holds (with the
//! PULLs on their way) what htsim's pull target asks for: the new data left, at most the window
//! and a frame, divided among the flows the sender's NIC serves. A receiver then takes at most
//! its link's rate of new data after the first windows, and a many-to-one incast does not
//! keep its port overflowing.
//!
//! Simplifications, against htsim: the receiver reads its senders' pull targets at once (htsim
//! carries them in the data frames, a one-way delay old); a retransmission is sent without
//! waiting for credit and paid back by the next PULLs (htsim adds it to the backlog it asks
//! credit for); a PULL is an ACK-sized control frame in the same FIFOs as the data (htsim serves
//! control frames first), taken beyond a full buffer as trimmed headers are (up to three
//! buffers; a PULL lost even so is sent again once `lost_after` has passed); ECN stays on at
//! the edge switches' ports to the hosts (htsim turns it off there in this mode).

use std::collections::VecDeque;

/// Bit of a wake event's target that marks a receiver's pull pacer (host indices stay below
/// it; checked after the flows' start events, whose flow indices may have it set).
pub(super) const PULL_BIT: u32 = 1 << 26;

/// Whether `flow` may send new data as far as receiver credits go (always without them).
#[inline]
pub(super) fn allows(credits: Option<&Credits>, flow: u32) -> bool {
    credits.is_none_or(|credits| credits.has_credit(flow))
}

/// The receivers' pull pacers and the senders' credit.
#[derive(Debug)]
pub(super) struct Credits {
    /// Per flow: credit left at its sender, in data frames; below zero after retransmissions
    /// sent without credit (new data waits until PULLs pay that back).
    credit: Vec<i64>,
    /// Per flow: PULLs sent and not yet at the sender.
    in_flight: Vec<u32>,
    /// Per flow: when its receiver last sent it a PULL.
    last_pull: Vec<u64>,
    /// PULLs counted on their way for longer than this are taken as lost (a full buffer or a
    /// failing link dropped them): the receiver pulls again.
    lost_after: u64,
    /// Per flow: in its receiver's round robin.
    listed: Vec<bool>,
    /// Per receiving host: flows it pulls for, in round-robin order.
    round: Vec<VecDeque<u32>>,
    /// Per receiving host: a pull event is pending.
    pacing: Vec<bool>,
    /// PULLs sent.
    pub(super) pulls: u64,
}

impl Credits {
    /// Credits for `flows` flows received by `hosts` hosts, each starting with `initial` data
    /// frames of credit.
    pub(super) fn new(initial: u32, flows: usize, hosts: usize, lost_after: u64) -> Box<Self> {
        Box::new(Self {
            credit: vec![i64::from(initial); flows],
            in_flight: vec![0; flows],
            last_pull: vec![0; flows],
            lost_after,
            listed: vec![false; flows],
            round: vec![VecDeque::new(); hosts],
            pacing: vec![false; hosts],
            pulls: 0,
        })
    }

    /// Whether `flow`'s sender holds credit for a new packet.
    #[inline]
    pub(super) fn has_credit(&self, flow: u32) -> bool {
        self.credit[flow as usize] > 0
    }

    /// `flow`'s sender sends a packet: one frame of credit used (a retransmission goes
    /// without credit, and the next PULLs pay it back before new data).
    #[inline]
    pub(super) fn spend(&mut self, flow: u32) {
        self.credit[flow as usize] -= 1;
    }

    /// A PULL for `flow` reached its sender.
    pub(super) fn grant(&mut self, flow: u32) {
        let index = flow as usize;
        self.credit[index] += 1;
        self.in_flight[index] = self.in_flight[index].saturating_sub(1);
    }

    /// The first frame of `flow` reached its receiver `host`, which pulls for it from now on
    /// while it has new data to send. Returns whether the host's pull pacer must be started.
    pub(super) fn first_frame(&mut self, host: u32, flow: u32) -> bool {
        let index = flow as usize;
        if std::mem::replace(&mut self.listed[index], true) {
            return false;
        }
        self.round[host as usize].push_back(flow);
        !std::mem::replace(&mut self.pacing[host as usize], true)
    }

    /// `host`'s pull pacer fires: the flow it sends a PULL to now, the next in round robin
    /// whose sender holds (with the PULLs on their way) less credit than `target` says it
    /// can use; `target` is `None` for a flow with no new data left, which leaves the round.
    /// `None` when no flow needs credit now; the pacer stops once its round is empty. PULLs
    /// still on their way `lost_after` the flow's last one are taken as lost.
    pub(super) fn next_pull(
        &mut self,
        host: u32,
        now: u64,
        target: impl Fn(u32) -> Option<i64>,
    ) -> Option<u32> {
        let round = &mut self.round[host as usize];
        for _ in 0..round.len() {
            let Some(flow) = round.pop_front() else {
                break;
            };
            let index = flow as usize;
            let Some(target) = target(flow) else {
                self.listed[index] = false;
                continue;
            };
            round.push_back(flow);
            if self.in_flight[index] > 0 && now - self.last_pull[index] > self.lost_after {
                self.in_flight[index] = 0;
            }
            if self.credit[index] + i64::from(self.in_flight[index]) < target {
                self.in_flight[index] += 1;
                self.last_pull[index] = now;
                self.pulls += 1;
                return Some(flow);
            }
        }
        if round.is_empty() {
            self.pacing[host as usize] = false;
        }
        None
    }

    /// Whether `host`'s pull pacer runs.
    pub(super) fn pacing(&self, host: u32) -> bool {
        self.pacing[host as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::Credits;

    #[test]
    fn a_receiver_pulls_round_robin_up_to_what_each_sender_can_use() {
        // Two flows into host 0, 2 frames of initial credit each; flow 0's sender could use 4
        // frames of credit, flow 1's 3.
        let mut credits = Credits::new(2, 2, 1, 100);
        assert!(credits.first_frame(0, 0), "starts the pacer");
        assert!(!credits.first_frame(0, 1), "already running");
        let targets = [Some(4), Some(3)];
        let mut order = Vec::new();
        while let Some(flow) = credits.next_pull(0, 10, |flow| targets[flow as usize]) {
            order.push(flow);
        }
        assert_eq!(order, [0, 1, 0], "PULLs on their way count as credit");
        // Flow 1's PULL never arrives: 100 after it, the receiver pulls again.
        assert_eq!(
            credits.next_pull(0, 110, |flow| targets[flow as usize]),
            None
        );
        assert_eq!(
            credits.next_pull(0, 111, |flow| targets[flow as usize]),
            Some(1)
        );
        credits.grant(1);
        assert!(
            credits.pacing(0),
            "both flows still have data: the pacer keeps running"
        );
        // New data spends credit; a retransmission runs it below zero.
        for _ in 0..4 {
            credits.spend(1);
        }
        assert!(!credits.has_credit(1));
        credits.grant(1);
        assert!(
            !credits.has_credit(1),
            "the PULL paid the retransmission back"
        );
        // Flows with no new data leave the round; the pacer stops.
        assert_eq!(credits.next_pull(0, 300, |_| None), None);
        assert!(!credits.pacing(0));
    }
}
