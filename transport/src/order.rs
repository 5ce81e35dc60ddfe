//! How out of order a receiver got its packets: the measure a report gives per run, so that a
//! load balancer's reordering — which the receiver must absorb (the adaptive-routing draft makes
//! the receiving end responsible for it in per-packet modes) — sits beside its completion time.
//!
//! Per flow the receiver keeps one number, the highest sequence number that has arrived so far.
//! A packet's **first transmission** arriving for the first time below it is *out of order*,
//! and its *reorder distance* is how far below: `highest − seq` packets, which is RFC 4737's
//! reorder gap in sequence numbers (§4.2.2's "reordering extent" counts arrivals instead; the
//! gap needs no arrival log and bounds the receiver's reassembly buffer in packets).
//! Retransmissions and copies that arrive again are left out: a retransmission arrives late
//! because its first copy was lost, which is loss, not reordering — both the model and the lab
//! agent tell them apart by the copy number the DATA header carries.

use serde::{Deserialize, Serialize};

/// Out-of-order arrivals at the receivers of a run (or of one receiver); see the
/// [module documentation](self). [`Reordering::merge`] adds receivers up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reordering {
    /// First arrivals of first transmissions: the packets the measure looked at.
    pub arrivals: u64,
    /// Of those, packets that arrived after a higher sequence number of their flow.
    pub out_of_order: u64,
    /// Largest reorder distance, packets (0: everything in order).
    pub max_distance: u32,
    /// Sum of the out-of-order packets' distances, packets (the mean is this over
    /// `out_of_order`).
    pub distance_sum: u64,
}

impl Reordering {
    /// Records the first arrival of the first transmission of packet `seq` of a flow whose
    /// arrival state is `flow` ([`FlowOrder::default`] before its first packet).
    #[inline]
    pub fn record(&mut self, flow: &mut FlowOrder, seq: u32) {
        self.arrivals += 1;
        match flow.0.checked_sub(1) {
            Some(highest) if seq < highest => {
                let distance = highest - seq;
                self.out_of_order += 1;
                self.distance_sum += u64::from(distance);
                self.max_distance = self.max_distance.max(distance);
            }
            _ => flow.0 = flow.0.max(seq.saturating_add(1)),
        }
    }

    /// Adds `other`'s counts (another receiver's, another flow's).
    pub fn merge(&mut self, other: &Self) {
        self.arrivals += other.arrivals;
        self.out_of_order += other.out_of_order;
        self.max_distance = self.max_distance.max(other.max_distance);
        self.distance_sum += other.distance_sum;
    }

    /// `out_of_order / arrivals` (0 when nothing arrived).
    #[must_use]
    pub fn fraction(&self) -> f64 {
        if self.arrivals == 0 {
            0.0
        } else {
            self.out_of_order as f64 / self.arrivals as f64
        }
    }

    /// Mean reorder distance of the out-of-order packets, packets (0 when none).
    #[must_use]
    pub fn mean_distance(&self) -> f64 {
        if self.out_of_order == 0 {
            0.0
        } else {
            self.distance_sum as f64 / self.out_of_order as f64
        }
    }
}

/// One flow's arrival state at its receiver: the highest sequence number arrived, plus one
/// (0: nothing yet). Four bytes, so a receiver can keep one per flow beside its other state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowOrder(u32);

#[cfg(test)]
mod tests {
    use super::*;

    fn measure(arrivals: &[u32]) -> Reordering {
        let mut order = Reordering::default();
        let mut flow = FlowOrder::default();
        for &seq in arrivals {
            order.record(&mut flow, seq);
        }
        order
    }

    #[test]
    fn in_order_arrivals_are_not_reordered_even_with_gaps() {
        let order = measure(&[0, 1, 2, 5, 9]);
        assert_eq!(
            (order.arrivals, order.out_of_order, order.max_distance),
            (5, 0, 0)
        );
        assert_eq!(order.fraction(), 0.0);
    }

    #[test]
    fn a_late_packet_counts_once_with_its_distance_below_the_highest() {
        // 3 overtaken by 4 and 5 (distance 5 − 3 = 2); 0 by 1..5 (distance 5).
        let order = measure(&[1, 2, 4, 5, 3, 0, 6]);
        assert_eq!((order.arrivals, order.out_of_order), (7, 2));
        assert_eq!((order.max_distance, order.distance_sum), (5, 7));
        assert!((order.mean_distance() - 3.5).abs() < 1e-12);
        assert!((order.fraction() - 2.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn a_late_packet_does_not_lower_the_highest() {
        // After 9 then 2, 5 is still late (distance 4), not in order after 2.
        let order = measure(&[9, 2, 5]);
        assert_eq!((order.out_of_order, order.max_distance), (2, 7));
    }

    #[test]
    fn flows_are_measured_apart_and_merge_adds_receivers() {
        let mut total = Reordering::default();
        let (mut a, mut b) = (FlowOrder::default(), FlowOrder::default());
        total.record(&mut a, 10);
        total.record(&mut b, 0); // another flow: not below flow a's 10
        assert_eq!(total.out_of_order, 0);
        let mut other = measure(&[3, 1]);
        other.merge(&total);
        assert_eq!(
            (other.arrivals, other.out_of_order, other.max_distance),
            (4, 1, 2)
        );
    }
}
