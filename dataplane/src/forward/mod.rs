//! Parse and decide, for a batch of frames.
//!
//! # Contract
//! A pipe's worker owns one [`Forwarder`] and calls [`Forwarder::process_batch`] with the
//! frames it received, the [`Fib`] it loaded for this batch and the local egress queue lengths
//! of the Up ports. Every frame gets a [`Verdict`], and every verdict is counted in
//! [`Counters`] (one named counter per [`DropReason`] and [`KernelReason`]). Forwarded frames
//! are rewritten in place (MACs, TTL/hop limit, IPv4 checksum); the others are not touched.
//!
//! Like VPP's `ip4_lookup_inline`, a batch (chunks of [`MAX_BATCH`]) goes through three passes
//! over stack arrays, with no allocation, lock, log line or `Result` per frame:
//! 1. parse ([`wire::parse`]), one lookup of the destination ([`Fib::destination`]: local
//!    address, route and destination key), hop-limit check, next-hop group; single-hop and plain
//!    ECMP groups are decided here; northbound choices get their destination key and are
//!    queued;
//! 2. one [`PipeBalancer::choose_batch`] for every queued northbound choice (valid mask = the
//!    group's usable up-ports; key from the destination lookup; size class from the frame
//!    length; the flow hash, computed only for an algorithm that reads it). A northbound
//!    destination without a key (or with a key the balancer does not have) falls back to ECMP
//!    over the usable hops and is counted (`no_key`, `key_out_of_range`);
//! 3. rewrite of every forwarded frame.
//!
//! Everything but the frames themselves is checked per batch, not trusted: a table whose
//! up-port count or key count disagrees with the balancer's configuration cannot make the
//! balancer index out of range (masks are cut to the balancer's width, keys past its key count
//! fall back to ECMP).
//!
//! Frames carrying an 802.1Q tag are forwarded with the tag unchanged.

use std::net::IpAddr;

use crate::counters::named_counters;
use crate::fib::{Fib, GroupId, GroupKind, NextHop, PortId, RouteTarget};
use crate::lb::dragonfly::DragonflyRouter;
use crate::lb::{
    mix64, Northbound, PipeBalancer, PortLoad, PortMask, SizeClass, UpPort, MAX_BATCH,
};
use crate::wire::{self, IpVersion, MacAddr, ParseError};

named_counters! {
    /// Why a frame is dropped. Each reason is one counter.
    ///
    /// AF_XDP cannot hand a frame back to the kernel, so whatever the kernel should see must be
    /// passed to it by the XDP program before it reaches this forwarder; each reason says whether
    /// that is the expected path for such frames (then a count here means the XDP program and the
    /// forwarder disagree).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum DropReason {
        /// The frame is not for the fast path ([`ParseError`]). Non-IP frames (ARP, LLDP:
        /// `unknown_ether_type`) are expected to be passed to the kernel by the XDP program;
        /// the others (options, fragments, bad headers and checksums, stacked tags) are not
        /// expected to be, and are dropped here.
        Parse(ParseError);
        /// Longer than the largest frame the egress links carry
        /// ([`ForwarderConfig::max_frame_len`]). Not expected from the XDP program (it does not
        /// know the egress).
        FrameTooLarge = "frame_too_large",
        /// A source or destination address that is never forwarded: multicast, broadcast,
        /// loopback, link-local or unspecified. Multicast and link-local (ARP, neighbour
        /// discovery) are expected to be passed to the kernel by the XDP program.
        Martian = "martian",
        /// No route to the destination (the kernel would answer ICMP unreachable; not expected
        /// to be passed to it).
        NoRoute = "no_route",
        /// The route is a blackhole or prohibit route.
        Unreachable = "unreachable",
        /// TTL or hop limit ≤ 1: must not be forwarded. Expected to be passed to the kernel by
        /// the XDP program (which answers with ICMP time exceeded), so counts here are frames
        /// that slipped past it.
        TtlExpired = "ttl_expired",
        /// Every hop of the group is on a port that is operationally down.
        PortDown = "port_down",
        /// Some hop's port is up but no usable hop has a resolved neighbour MAC (the control
        /// plane resolves neighbours and publishes a new table).
        NeighborUnresolved = "neighbor_unresolved",
    }
}

named_counters! {
    /// Why a frame is for the switch itself. Both are expected to have been passed to the kernel
    /// by the XDP program already; the forwarder double-checks and counts.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum KernelReason {
        /// The destination is one of the switch's addresses.
        LocalAddress = "local_address",
        /// The route of the destination is a local route.
        LocalRoute = "local_route",
    }
}

/// What happens to a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Send it out of `port` (already rewritten).
    Forward {
        /// The egress port.
        port: PortId,
    },
    /// It is for the switch itself.
    Kernel(KernelReason),
    /// Drop it.
    Drop(DropReason),
}

/// One received frame: where it came in and its bytes (rewritten in place when forwarded).
#[derive(Debug)]
pub struct FrameRef<'a> {
    /// The ingress port. Decisions do not depend on it today (a fat tree has no ingress
    /// policy on the fast path); it is part of the batch so that one can be added without
    /// changing the interface.
    pub ingress: PortId,
    /// The frame's length in bytes: `data.len()`, or more when the packet spans several
    /// buffers (multi-buffer AF_XDP) and `data` is its first, which holds the headers.
    pub len: u32,
    /// The frame (or its first buffer), from the Ethernet header on.
    pub data: &'a mut [u8],
}

impl<'a> FrameRef<'a> {
    /// A frame that is all in `data`.
    pub fn whole(ingress: PortId, data: &'a mut [u8]) -> Self {
        Self {
            ingress,
            len: data.len() as u32,
            data,
        }
    }
}

/// The forwarder's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwarderConfig {
    /// Frames of at most this many bytes are ACKs ([`SizeClass::of_frame`]).
    pub ack_max_frame: u32,
    /// The largest frame (Ethernet header to end of payload, no FCS) the egress links carry.
    pub max_frame_len: u32,
}

impl Default for ForwarderConfig {
    /// ACKs up to [`SizeClass::DEFAULT_ACK_MAX_FRAME`]; 1500-byte MTU with one VLAN tag (1518).
    fn default() -> Self {
        Self {
            ack_max_frame: SizeClass::DEFAULT_ACK_MAX_FRAME,
            max_frame_len: 1518,
        }
    }
}

/// The forwarder's counters: plain integers, owned by the worker, published by it.
///
/// Every processed frame is counted exactly once in `forwarded`, `drops` or `to_kernel`.
/// `northbound`, `no_key` and `key_out_of_range` break down `forwarded`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// Frames processed.
    pub frames: u64,
    /// Frames forwarded.
    pub forwarded: u64,
    /// Forwarded frames whose up-port the load balancer chose.
    pub northbound: u64,
    /// Forwarded frames of a northbound group whose destination has no key: ECMP fallback.
    pub no_key: u64,
    /// Forwarded frames of a northbound group whose key is past the balancer's key count (the
    /// table and the balancer disagree): ECMP fallback.
    pub key_out_of_range: u64,
    /// Frames a dragonfly router sent into the network through an intermediate group (its
    /// scheme's non-minimal choices; see [`DragonflyRouter`]).
    pub detoured: u64,
    /// Drops, indexed by [`DropReason::as_index`].
    pub drops: [u64; DropReason::COUNT],
    /// Frames for the switch itself, indexed by [`KernelReason::as_index`].
    pub to_kernel: [u64; KernelReason::COUNT],
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            frames: 0,
            forwarded: 0,
            northbound: 0,
            no_key: 0,
            key_out_of_range: 0,
            detoured: 0,
            drops: [0; DropReason::COUNT],
            to_kernel: [0; KernelReason::COUNT],
        }
    }
}

impl Counters {
    /// The counters that are not per reason, by metric name (the order they are published in).
    pub fn totals(&self) -> [(&'static str, u64); 6] {
        [
            ("frames", self.frames),
            ("forwarded", self.forwarded),
            ("northbound", self.northbound),
            ("no_key", self.no_key),
            ("key_out_of_range", self.key_out_of_range),
            ("detoured", self.detoured),
        ]
    }

    /// Drops for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.as_index()]
    }

    /// Frames passed up for `reason`.
    pub fn kernel(&self, reason: KernelReason) -> u64 {
        self.to_kernel[reason.as_index()]
    }

    /// All drops.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }

    #[inline]
    fn count(&mut self, verdict: Verdict) {
        match verdict {
            Verdict::Forward { .. } => self.forwarded += 1,
            Verdict::Kernel(reason) => self.to_kernel[reason.as_index()] += 1,
            Verdict::Drop(reason) => self.drops[reason.as_index()] += 1,
        }
    }
}

/// Where a frame decided in pass 1 or 2 goes, and what pass 3 writes.
#[derive(Debug, Clone, Copy)]
struct Egress {
    port: PortId,
    mac: MacAddr,
    l3_offset: u8,
    version: IpVersion,
}

/// A northbound choice queued for pass 2.
#[derive(Debug, Clone, Copy)]
struct Pending {
    frame: u8,
    group: GroupId,
    l3_offset: u8,
    version: IpVersion,
}

const NO_NORTHBOUND: Northbound = Northbound {
    key: crate::lb::DestKey(0),
    class: SizeClass::Data,
    valid: PortMask::EMPTY,
    flow_hash: 0,
    frame_len: 0,
};

const NO_PENDING: Pending = Pending {
    frame: 0,
    group: GroupId(0),
    l3_offset: 0,
    version: IpVersion::V4,
};

/// A pipe's parse-and-decide engine. See the [module documentation](self).
#[derive(Debug)]
pub struct Forwarder {
    balancer: PipeBalancer,
    config: ForwarderConfig,
    /// Salt of the ECMP fallback and of plain ECMP groups (per switch, from the balancer seed).
    salt: u64,
    counters: Counters,
    /// On a dragonfly router: the routing stage that picks the address to look up.
    dragonfly: Option<DragonflyRouter>,
}

impl Forwarder {
    /// A forwarder that makes its northbound choices with `balancer`.
    pub fn new(balancer: PipeBalancer, config: ForwarderConfig) -> Self {
        let salt = ecmp_group_salt(balancer.switch().config().seed);
        Self {
            balancer,
            config,
            salt,
            counters: Counters::default(),
            dragonfly: None,
        }
    }

    /// The same forwarder on a dragonfly router: every frame passes `router`'s stage before
    /// its route lookup.
    #[must_use]
    pub fn on_dragonfly(mut self, router: DragonflyRouter) -> Self {
        self.dragonfly = Some(router);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &ForwarderConfig {
        &self.config
    }

    /// The pipe's balancer.
    pub fn balancer(&self) -> &PipeBalancer {
        &self.balancer
    }

    /// Sets the balancer's clock (ns, monotonic): `arf-flow` ages its flow table by it. The
    /// worker calls it once per batch.
    #[inline]
    pub fn set_clock(&mut self, now_ns: u64) {
        self.balancer.set_clock(now_ns);
    }

    /// The counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Decides every frame of `frames` into `verdicts[..frames.len()]` and rewrites the
    /// forwarded ones.
    ///
    /// `loads[i]` is the local egress queue of up-position `i`; the queue-aware algorithms read
    /// it and add each choice to it, the others ignore it (it may then be empty).
    ///
    /// # Panics
    /// If `verdicts` is shorter than `frames`, or if the balancer's algorithm reads queues and
    /// `loads` is shorter than its number of up-ports.
    pub fn process_batch(
        &mut self,
        fib: &Fib,
        frames: &mut [FrameRef<'_>],
        loads: &mut [PortLoad],
        verdicts: &mut [Verdict],
    ) {
        assert!(
            verdicts.len() >= frames.len(),
            "verdict slice shorter than the batch"
        );
        let lb_config = self.balancer.switch().config();
        assert!(
            !lb_config.algorithm.uses_queues() || loads.len() >= usize::from(lb_config.up_ports),
            "loads must cover every up-port for {}",
            lb_config.algorithm
        );
        for (chunk, out) in frames
            .chunks_mut(MAX_BATCH)
            .zip(verdicts.chunks_mut(MAX_BATCH))
        {
            self.process_chunk(fib, chunk, loads, out);
        }
    }

    fn process_chunk(
        &mut self,
        fib: &Fib,
        frames: &mut [FrameRef<'_>],
        loads: &mut [PortLoad],
        verdicts: &mut [Verdict],
    ) {
        debug_assert!(frames.len() <= MAX_BATCH);
        let lb_config = self.balancer.switch().config();
        let width_mask = PortMask::all(lb_config.up_ports);
        let lb_keys = lb_config.dest_keys;
        let lb_hashes = lb_config.algorithm.uses_flow_hash();

        // Pass 1: parse, look up, decide what needs no choice.
        let mut egress: [Option<Egress>; MAX_BATCH] = [None; MAX_BATCH];
        let mut northbound = [NO_NORTHBOUND; MAX_BATCH];
        let mut pending = [NO_PENDING; MAX_BATCH];
        let mut queued = 0usize;
        for (index, frame) in frames.iter_mut().enumerate() {
            let frame_len = frame.len as usize;
            if frame_len > self.config.max_frame_len as usize {
                verdicts[index] = Verdict::Drop(DropReason::FrameTooLarge);
                continue;
            }
            let parsed = match wire::parse_head(frame.data, frame_len) {
                Ok(parsed) => parsed,
                Err(error) => {
                    verdicts[index] = Verdict::Drop(DropReason::Parse(error));
                    continue;
                }
            };
            if is_martian(parsed.src, parsed.dst) {
                verdicts[index] = Verdict::Drop(DropReason::Martian);
                continue;
            }
            let lookup = match (&mut self.dragonfly, parsed.src, parsed.dst) {
                (Some(router), IpAddr::V4(src), IpAddr::V4(dst)) => {
                    let dscp_at = parsed.l3_offset + 1;
                    let dscp = frame.data[dscp_at] >> 2;
                    let route = router.route(src, dst, dscp, frame_len as u32, loads);
                    if route.dscp != dscp {
                        wire::set_dscp(frame.data, frame_len, parsed.l3_offset, route.dscp);
                    }
                    self.counters.detoured += u64::from(route.detoured);
                    IpAddr::V4(route.lookup)
                }
                _ => parsed.dst,
            };
            let destination = fib.destination(lookup);
            if destination.local {
                verdicts[index] = Verdict::Kernel(KernelReason::LocalAddress);
                continue;
            }
            let group_id = match destination.route {
                Some(RouteTarget::Group(group)) => group,
                Some(RouteTarget::Local) => {
                    verdicts[index] = Verdict::Kernel(KernelReason::LocalRoute);
                    continue;
                }
                Some(RouteTarget::Unreachable) => {
                    verdicts[index] = Verdict::Drop(DropReason::Unreachable);
                    continue;
                }
                None => {
                    verdicts[index] = Verdict::Drop(DropReason::NoRoute);
                    continue;
                }
            };
            if parsed.hop_limit <= 1 {
                verdicts[index] = Verdict::Drop(DropReason::TtlExpired);
                continue;
            }
            let Some(group) = fib.group(group_id) else {
                // Impossible: the builder checks every route's group.
                verdicts[index] = Verdict::Drop(DropReason::NoRoute);
                continue;
            };
            if group.usable_hops() == 0 {
                verdicts[index] = Verdict::Drop(if group.port_up_hops() != 0 {
                    DropReason::NeighborUnresolved
                } else {
                    DropReason::PortDown
                });
                continue;
            }
            // Offsets are 14 or 18.
            let l3_offset = parsed.l3_offset as u8;
            let version = parsed.version();
            let hop = match group.kind() {
                GroupKind::Single => group.hop(0),
                GroupKind::Ecmp => group.hop_by_hash(self.salted(parsed.flow_hash())),
                GroupKind::Northbound => {
                    let valid = PortMask(group.up_mask().0 & width_mask.0);
                    match destination.key {
                        Some(key) if key.0 < lb_keys && !valid.is_empty() => {
                            northbound[queued] = Northbound {
                                key,
                                class: SizeClass::of_frame(
                                    frame_len as u32,
                                    self.config.ack_max_frame,
                                ),
                                valid,
                                flow_hash: if lb_hashes { parsed.flow_hash() } else { 0 },
                                frame_len: frame_len as u32,
                            };
                            pending[queued] = Pending {
                                frame: index as u8,
                                group: group_id,
                                l3_offset,
                                version,
                            };
                            queued += 1;
                            continue;
                        }
                        Some(key) if key.0 >= lb_keys => self.counters.key_out_of_range += 1,
                        // A table wider than the balancer: its usable ports are past the
                        // balancer's width. Fall back rather than choose nothing.
                        Some(_) => {}
                        None => self.counters.no_key += 1,
                    }
                    group.hop_by_hash(self.salted(parsed.flow_hash()))
                }
            };
            set_egress(
                &mut egress[index],
                &mut verdicts[index],
                hop,
                l3_offset,
                version,
            );
        }

        // Pass 2: every northbound choice of the chunk in one call.
        if queued > 0 {
            let mut choices: [Option<UpPort>; MAX_BATCH] = [None; MAX_BATCH];
            self.balancer
                .choose_batch(&northbound[..queued], loads, &mut choices[..queued]);
            for (job, choice) in pending[..queued].iter().zip(choices) {
                let index = usize::from(job.frame);
                let hop = choice.and_then(|port| fib.group(job.group)?.hop_at_up(port));
                if hop.is_some() {
                    self.counters.northbound += 1;
                }
                set_egress(
                    &mut egress[index],
                    &mut verdicts[index],
                    hop,
                    job.l3_offset,
                    job.version,
                );
            }
        }

        // Pass 3: rewrite and count. The verdict is counted from the value just decided, not
        // read back from `verdicts`: a load of an enum stored a moment ago as two narrower
        // stores cannot be forwarded from the store buffer and stalled every frame.
        for ((frame, verdict), egress) in frames.iter_mut().zip(verdicts.iter_mut()).zip(egress) {
            let decided = match egress {
                Some(egress) => match fib.port(egress.port) {
                    Some(port) => {
                        wire::forward_rewrite(
                            frame.data,
                            frame.len as usize,
                            usize::from(egress.l3_offset),
                            egress.version,
                            port.mac,
                            egress.mac,
                        );
                        Verdict::Forward { port: egress.port }
                    }
                    // Impossible: the builder checks every hop's port.
                    None => Verdict::Drop(DropReason::PortDown),
                },
                None => *verdict,
            };
            *verdict = decided;
            self.counters.frames += 1;
            self.counters.count(decided);
        }
    }

    /// The flow hash mixed with the switch's salt, so that tiers do not make correlated ECMP
    /// choices (hash polarization).
    #[inline]
    fn salted(&self, flow_hash: u32) -> u32 {
        (mix64(u64::from(flow_hash) ^ self.salt) >> 32) as u32
    }
}

/// The salt of a switch's ECMP groups and ECMP fallback, from its balancer seed: what
/// [`Forwarder`] mixes into the flow hash (and the XDP fast path with it).
pub fn ecmp_group_salt(seed: u64) -> u64 {
    mix64(seed ^ 0x6f66_616e_6563_6d70)
}

/// Records the chosen hop of a frame, or the drop if there is none.
#[inline]
fn set_egress(
    egress: &mut Option<Egress>,
    verdict: &mut Verdict,
    hop: Option<&NextHop>,
    l3_offset: u8,
    version: IpVersion,
) {
    match hop {
        Some(NextHop {
            port,
            mac: Some(mac),
            ..
        }) => {
            *egress = Some(Egress {
                port: *port,
                mac: *mac,
                l3_offset,
                version,
            });
        }
        // Impossible for usable hops; kept total rather than panicking.
        Some(_) => *verdict = Verdict::Drop(DropReason::NeighborUnresolved),
        None => *verdict = Verdict::Drop(DropReason::PortDown),
    }
}

/// Addresses a router never forwards (RFC 1812 §5.3.7, RFC 4291 §2.5.2–2.5.6, RFC 3927 §7).
/// IPv4 is tested on the address bits (what `Ipv4Addr::is_multicast` and friends test, in one
/// word): multicast 224/4, limited broadcast, loopback 127/8, link-local 169.254/16,
/// unspecified.
#[inline]
fn is_martian(src: IpAddr, dst: IpAddr) -> bool {
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => {
            let never =
                |a: u32| a >> 28 == 0xE || a == u32::MAX || a >> 24 == 127 || a >> 16 == 0xA9FE;
            let (src, dst) = (src.to_bits(), dst.to_bits());
            never(src) || never(dst) || src == 0 || dst == 0
        }
        (IpAddr::V6(src), IpAddr::V6(dst)) => {
            let never = |a: std::net::Ipv6Addr| {
                a.is_multicast()
                    || a.is_loopback()
                    || a.is_unspecified()
                    || a.is_unicast_link_local()
            };
            never(src) || never(dst)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests;
