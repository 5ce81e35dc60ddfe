//! Host-side load balancing: which entropy (UDP source port) each DATA packet carries — pure
//! decisions from a seeded RNG and the ACKs seen so far.
//!
//! Entropies are indices `0..pool` into the agent's pool of UDP sockets, each bound to its own
//! source port; a switch running `ecmp` hashes the 5-tuple, so a different source port is a
//! (pseudo-)random different path.
//!
//! * [`HostLb::None`]: flow `i` of this host always uses entropy `i mod pool` (the pool has one
//!   port per flow) — classic per-flow ECMP.
//! * [`HostLb::Spray`]: a uniformly random entropy per packet — random packet spraying (RPS),
//!   host-side.
//! * [`HostLb::Reps`]: recycled entropy packet spraying (Bonato et al., "REPS: Recycled Entropy
//!   Packet Spraying for Adaptive Load Balancing and Failure Mitigation", EuroSys 2026,
//!   arXiv:2407.21625). Each flow keeps a FIFO of at most [`REPS_CACHE`] entropies. An ACK
//!   whose CE-echo flag is clear pushes its (echoed) entropy at the back; when the FIFO is full
//!   the oldest entry is dropped. Each packet pops the oldest cached entropy, or — when the FIFO
//!   is empty, as at the start of a flow (REPS's exploration) — draws a fresh uniformly random
//!   one. CE-marked ACKs recycle nothing, so congested paths are abandoned. REPS's freezing
//!   mode (for losses and failures) is not modelled: a retransmission chooses its entropy like
//!   any departure.

use ofan_dataplane::lb::LbRng;

/// Entropies a REPS flow caches (REPS uses a small circular buffer of recycled entropies).
pub const REPS_CACHE: usize = 8;

/// Host-side load balancing, `--host-lb`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostLb {
    /// One fixed entropy (source port) per flow.
    None,
    /// A random entropy per packet (host random packet spraying).
    Spray,
    /// Recycled entropy packet spraying: reuse entropies of ACKs without CE, else a fresh one.
    Reps,
}

/// A bounded FIFO of recycled entropies.
#[derive(Debug, Clone, Default)]
struct RepsCache {
    entries: [u16; REPS_CACHE],
    head: usize,
    len: usize,
}

impl RepsCache {
    fn push(&mut self, entropy: u16) {
        if self.len == REPS_CACHE {
            self.head = (self.head + 1) % REPS_CACHE;
            self.len -= 1;
        }
        self.entries[(self.head + self.len) % REPS_CACHE] = entropy;
        self.len += 1;
    }

    fn pop(&mut self) -> Option<u16> {
        if self.len == 0 {
            return None;
        }
        let entropy = self.entries[self.head];
        self.head = (self.head + 1) % REPS_CACHE;
        self.len -= 1;
        Some(entropy)
    }
}

/// Chooses the entropy of every DATA packet of one host's flows (`0..flows`, local indices).
#[derive(Debug, Clone)]
pub struct EntropySelector {
    policy: HostLb,
    pool: u16,
    rng: LbRng,
    reps: Vec<RepsCache>,
    /// Packets sent with a recycled entropy (REPS).
    pub recycled: u64,
    /// Packets sent with a freshly drawn entropy (spray, REPS).
    pub fresh: u64,
}

impl EntropySelector {
    /// A selector for `flows` local flows over `pool` (> 0) entropies.
    #[must_use]
    pub fn new(policy: HostLb, flows: usize, pool: u16, seed: u64) -> Self {
        assert!(pool > 0, "the entropy pool cannot be empty");
        Self {
            policy,
            pool,
            rng: LbRng::new(seed),
            reps: if policy == HostLb::Reps {
                vec![RepsCache::default(); flows]
            } else {
                Vec::new()
            },
            recycled: 0,
            fresh: 0,
        }
    }

    /// The pool size a policy needs for `flows` flows, given `--entropies`.
    #[must_use]
    pub fn pool_size(policy: HostLb, flows: usize, entropies: u16) -> u16 {
        match policy {
            HostLb::None => u16::try_from(flows.max(1)).unwrap_or(u16::MAX),
            HostLb::Spray | HostLb::Reps => entropies.max(1),
        }
    }

    /// The entropy for the next packet of local flow `flow`.
    pub fn choose(&mut self, flow: usize) -> u16 {
        match self.policy {
            HostLb::None => (flow % usize::from(self.pool)) as u16,
            HostLb::Spray => self.fresh(),
            HostLb::Reps => match self.reps[flow].pop() {
                Some(entropy) => {
                    self.recycled += 1;
                    entropy
                }
                None => self.fresh(),
            },
        }
    }

    /// An ACK of local flow `flow` came back carrying `entropy`, CE-marked or not.
    pub fn on_ack(&mut self, flow: usize, entropy: u16, ce: bool) {
        if self.policy == HostLb::Reps && !ce && entropy < self.pool {
            self.reps[flow].push(entropy);
        }
    }

    fn fresh(&mut self) -> u16 {
        self.fresh += 1;
        self.rng.below(u32::from(self.pool)) as u16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_is_fixed_per_flow() {
        let pool = EntropySelector::pool_size(HostLb::None, 3, 64);
        assert_eq!(pool, 3);
        let mut selector = EntropySelector::new(HostLb::None, 3, pool, 1);
        for _ in 0..10 {
            assert_eq!(
                (0..3).map(|f| selector.choose(f)).collect::<Vec<_>>(),
                [0, 1, 2]
            );
        }
        assert_eq!(EntropySelector::pool_size(HostLb::None, 0, 64), 1);
    }

    #[test]
    fn spray_covers_the_pool_and_is_seeded() {
        let mut a = EntropySelector::new(HostLb::Spray, 1, 16, 7);
        let mut b = EntropySelector::new(HostLb::Spray, 1, 16, 7);
        let xs: Vec<u16> = (0..1600).map(|_| a.choose(0)).collect();
        let ys: Vec<u16> = (0..1600).map(|_| b.choose(0)).collect();
        assert_eq!(xs, ys);
        for entropy in 0..16 {
            let count = xs.iter().filter(|&&x| x == entropy).count();
            assert!((50..150).contains(&count), "{entropy}: {count}");
        }
    }

    #[test]
    fn reps_recycles_clean_acks_in_fifo_order_and_drops_marked_ones() {
        let mut selector = EntropySelector::new(HostLb::Reps, 2, 64, 3);
        selector.on_ack(0, 5, false);
        selector.on_ack(0, 9, true); // CE: not recycled
        selector.on_ack(0, 11, false);
        selector.on_ack(1, 40, false); // another flow's cache
        assert_eq!(selector.choose(0), 5);
        assert_eq!(selector.choose(0), 11);
        assert_eq!(selector.recycled, 2);
        let fresh = selector.choose(0); // empty: explore
        assert!(fresh < 64);
        assert_eq!(selector.fresh, 1);
        assert_eq!(selector.choose(1), 40);
        selector.on_ack(0, 999, false); // outside the pool: ignored
        let _ = selector.choose(0);
        assert_eq!(selector.fresh, 2);
    }

    #[test]
    fn reps_cache_keeps_the_newest_entries() {
        let mut selector = EntropySelector::new(HostLb::Reps, 1, 64, 3);
        for entropy in 0..(REPS_CACHE as u16 + 3) {
            selector.on_ack(0, entropy, false);
        }
        let reused: Vec<u16> = (0..REPS_CACHE).map(|_| selector.choose(0)).collect();
        assert_eq!(reused, (3..REPS_CACHE as u16 + 3).collect::<Vec<_>>());
        assert_eq!(selector.recycled, REPS_CACHE as u64);
    }

    #[test]
    fn acks_are_ignored_outside_reps() {
        let mut selector = EntropySelector::new(HostLb::None, 1, 1, 3);
        selector.on_ack(0, 0, false);
        assert_eq!(selector.choose(0), 0);
        assert_eq!(selector.recycled, 0);
    }
}
