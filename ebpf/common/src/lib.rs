//! # ofan-ebpf-common — what the XDP programs and their loader agree on
//!
//! The XDP programs in `ebpf/programs` (package `ofan-ebpf`, built for `bpfel-unknown-none`) and
//! the loader in `ofan_dataplane::afxdp` both depend on this crate, so map names, map sizes, key
//! layouts and counter indices are written down exactly once.
//!
//! Maps of the steering program `ofan_steer`:
//!
//! | map | kind | key | value |
//! |---|---|---|---|
//! | [`PORTS_MAP`] | hash | ingress ifindex (`u32`) | [`PortId`] |
//! | [`LOCAL_V4_MAP`] | hash | IPv4 address, network byte order ([`LocalV4`]) | `u8` (1) |
//! | [`LOCAL_V6_MAP`] | hash | IPv6 address ([`LocalV6`]) | `u8` (1) |
//! | [`XSKS_MAP`] | XSKMAP | [`xsk_index`]`(port, rx queue)` | AF_XDP socket fd |
//! | [`STATS_MAP`] | per-CPU array | [`StatIndex`] | `u64` packet count |
//! | [`PORT_DROP_MAP`] | array | switch port ([`PortId`]`.0`) | `u32`: nonzero drops every frame the port receives |
//!
//! Map of the benchmark program `ofan_redirect`: [`REDIRECT_MAP`], a devmap-hash from ingress
//! ifindex to egress ifindex.
//!
//! Maps of the benchmark generator `ofan_gen` (run by `BPF_PROG_RUN` in live-frames mode, never
//! attached): [`GEN_SETTINGS_MAP`], a one-entry array holding [`GenSettings`], [`GEN_COUNT_MAP`],
//! a one-slot per-CPU array counting the frames it sent, and [`GEN_CLOCK_MAP`], a one-slot
//! per-CPU array with the earliest time of its next frame when paced. [`udp_checksum_with_port`] is the
//! checksum arithmetic it uses, here so user space can test it against the frames it builds.
//!
//! With the `user` feature the key types implement `aya::Pod`; the eBPF side builds without it.
#![no_std]
#![deny(unsafe_code)]

/// Kernel name of the steering program (at most 15 bytes: the kernel keeps 16 with the NUL).
pub const STEER_PROGRAM: &str = "ofan_steer";
/// Kernel name of the steering program built for multi-buffer packets (`xdp.frags`).
pub const STEER_SG_PROGRAM: &str = "ofan_steer_sg";
/// Kernel name of the plain XDP_REDIRECT benchmark program.
pub const REDIRECT_PROGRAM: &str = "ofan_redirect";
/// Kernel name of the live-frames traffic generator program.
pub const GEN_PROGRAM: &str = "ofan_gen";

/// Name of the map from ingress ifindex to switch port.
pub const PORTS_MAP: &str = "PORTS";
/// Name of the set of the switch's own IPv4 addresses.
pub const LOCAL_V4_MAP: &str = "LOCAL_V4";
/// Name of the set of the switch's own IPv6 addresses.
pub const LOCAL_V6_MAP: &str = "LOCAL_V6";
/// Name of the XSKMAP the steering program redirects into.
pub const XSKS_MAP: &str = "XSKS";
/// Name of the per-CPU counter array of the steering program.
pub const STATS_MAP: &str = "STATS";
/// Name of the steering program's per-port drop flags: a port whose entry is nonzero has every
/// frame it receives dropped (`XDP_DROP`, counted as [`StatIndex::DropBlackhole`]) — a link
/// that fails silently while its carrier stays up (the lab's `link A B blackhole`).
pub const PORT_DROP_MAP: &str = "PORT_DROP";
/// Name of the ingress-ifindex → egress-ifindex devmap of `ofan_redirect`.
pub const REDIRECT_MAP: &str = "REDIRECT";
/// Name of `ofan_gen`'s one-entry array holding its [`GenSettings`].
pub const GEN_SETTINGS_MAP: &str = "GEN_SETTINGS";
/// Name of `ofan_gen`'s per-CPU count of frames sent (slot 0).
pub const GEN_COUNT_MAP: &str = "GEN_COUNT";
/// Name of `ofan_gen`'s per-CPU pacing clock (slot 0: `CLOCK_MONOTONIC` ns before which it
/// sends no frame).
pub const GEN_CLOCK_MAP: &str = "GEN_CLOCK";
/// How many frames' worth of gaps a paced `ofan_gen` may catch up in a burst after a pause
/// (preempted, or between two `BPF_PROG_RUN` calls): a veth peer's XDP ring.
pub const GEN_CATCH_UP_FRAMES: u64 = 256;

/// Largest number of switch ports one steering program serves.
pub const MAX_PORTS: u32 = 64;
/// Largest number of RX queues per port that can have an AF_XDP socket.
pub const MAX_QUEUES: u32 = 8;
/// Entries of the XSKMAP: one slot per (port, queue).
pub const XSKS_ENTRIES: u32 = MAX_PORTS * MAX_QUEUES;
/// Entries of each of the local-address sets.
pub const MAX_LOCAL_ADDRS: u32 = 256;
/// Entries of the `ofan_redirect` devmap.
pub const REDIRECT_ENTRIES: u32 = 256;

/// A switch port number, `0..MAX_PORTS`: the value of the [`PORTS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub u32);

/// An IPv4 address as it appears in the packet (network byte order), key of [`LOCAL_V4_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalV4(pub [u8; 4]);

/// An IPv6 address as it appears in the packet, key of [`LOCAL_V6_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocalV6(pub [u8; 16]);

/// The XSKMAP slot of RX queue `queue` of port `port`: `port * MAX_QUEUES + queue`.
///
/// `None` when the port or the queue is out of range.
#[inline(always)]
pub const fn xsk_index(port: u32, queue: u32) -> Option<u32> {
    if port < MAX_PORTS && queue < MAX_QUEUES {
        Some(port * MAX_QUEUES + queue)
    } else {
        None
    }
}

/// What `ofan_gen` sends: frame `n` (counted per CPU) gets UDP source port
/// `first_src_port + n % flows`; frames leave at least `gap_ns` apart on average. The value of
/// the [`GEN_SETTINGS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GenSettings {
    /// Source port of flow 0.
    pub first_src_port: u32,
    /// Number of flows (source ports), at least 1; `first_src_port + flows - 1` ≤ 65535.
    pub flows: u32,
    /// Nanoseconds between two frames (1e9 / rate); 0: as fast as possible. A copy that comes
    /// too early is dropped (`XDP_DROP`, its page recycled at once) instead of sent.
    pub gap_ns: u64,
}

/// The UDP checksum of a datagram whose source port changes from `old_port` to `new_port`,
/// given its checksum `checksum` before the change (RFC 1624, eqn. 3: `~(~HC + ~m + m')`).
///
/// A checksum of 0 ("none" in UDP over IPv4) stays 0; a computed 0 is sent as `0xFFFF`, as
/// RFC 768 asks, so the result equals a checksum computed from scratch over the new datagram.
#[inline(always)]
pub const fn udp_checksum_with_port(checksum: u16, old_port: u16, new_port: u16) -> u16 {
    if checksum == 0 {
        return 0;
    }
    let mut sum = (!checksum) as u32 + (!old_port) as u32 + new_port as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    match !(sum as u16) {
        0 => 0xffff,
        folded => folded,
    }
}

macro_rules! stat_indices {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// What the steering program decided for a frame: one per-CPU counter each.
        ///
        /// Every frame increments exactly one of these, so they sum to the frames seen.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum StatIndex {
            $($(#[$doc])* $variant,)+
        }

        impl StatIndex {
            /// Every counter, in index order.
            pub const ALL: &'static [StatIndex] = &[$(StatIndex::$variant,)+];
            /// Number of counters: the size of the [`STATS_MAP`].
            pub const COUNT: u32 = Self::ALL.len() as u32;

            /// The counter's name as shown in telemetry (`snake_case`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(StatIndex::$variant => $name,)+
                }
            }

            /// Index into the [`STATS_MAP`].
            #[inline(always)]
            pub const fn index(self) -> u32 {
                self as u32
            }
        }
    };
}

stat_indices! {
    /// `bpf_redirect_map` into the XSKMAP succeeded: an AF_XDP socket is bound at the slot.
    Redirected = "redirected",
    /// A redirect candidate whose XSKMAP slot holds no socket: fell back to the kernel.
    PassNoSocket = "pass_no_socket",
    /// The port is not below `MAX_PORTS` or the RX queue not below `MAX_QUEUES`: no XSKMAP slot,
    /// to the kernel.
    PassNoXskSlot = "pass_no_xsk_slot",
    /// ARP: to the kernel.
    PassArp = "pass_arp",
    /// IPv6 neighbour discovery / router discovery / redirect (ICMPv6 133–137): to the kernel.
    PassNd = "pass_nd",
    /// BGP (TCP source or destination port 179), IPv4 or IPv6: to the kernel.
    PassBgp = "pass_bgp",
    /// Addressed to one of the switch's own addresses: to the kernel.
    PassLocal = "pass_local",
    /// IPv4 TTL ≤ 1 or IPv6 hop limit ≤ 1: to the kernel, which answers ICMP time exceeded.
    PassTtl = "pass_ttl",
    /// IPv4 with options (IHL > 5) or a fragment: to the kernel.
    PassIpv4OptionsOrFragment = "pass_ipv4_options_or_fragment",
    /// IPv4 multicast, reserved or broadcast destination (224.0.0.0/3), or IPv6 multicast
    /// (ff00::/8) that is not ND, e.g. MLD: to the kernel (the data path routes unicast only).
    PassMulticast = "pass_multicast",
    /// IPv6 with a hop-by-hop options header (router alert, jumbograms): to the kernel.
    PassV6HopByHop = "pass_v6_hop_by_hop",
    /// Neither IPv4 nor IPv6 (after at most one 802.1Q tag): to the kernel.
    PassNonIp = "pass_non_ip",
    /// Ingress ifindex not in the [`PORTS_MAP`]: to the kernel.
    PassUnknownPort = "pass_unknown_port",
    /// Too short for the headers its type announces, or a bad IP version: to the kernel.
    PassMalformed = "pass_malformed",
    /// Received on a port whose [`PORT_DROP_MAP`] flag is set: dropped (`XDP_DROP`), whatever
    /// it is — data, ARP, BGP, BFD alike.
    DropBlackhole = "drop_blackhole",
}

/// `aya::Pod` for the map key and value types, so the loader can read and write the maps.
#[cfg(feature = "user")]
#[allow(unsafe_code)]
mod pod {
    use super::{GenSettings, LocalV4, LocalV6, PortId};

    // SAFETY: `PortId` is `#[repr(C)]` around one `u32`: `Copy`, no padding, every bit pattern
    // is a valid value.
    unsafe impl aya::Pod for PortId {}
    // SAFETY: `LocalV4` is `#[repr(C)]` around `[u8; 4]`: `Copy`, no padding, every bit pattern
    // is a valid value.
    unsafe impl aya::Pod for LocalV4 {}
    // SAFETY: `LocalV6` is `#[repr(C)]` around `[u8; 16]`: `Copy`, no padding, every bit pattern
    // is a valid value.
    unsafe impl aya::Pod for LocalV6 {}
    // SAFETY: `GenSettings` is `#[repr(C)]`: two `u32`s then a `u64` at offset 8, so no padding;
    // `Copy`, and every bit pattern is a valid value.
    unsafe impl aya::Pod for GenSettings {}
}

#[cfg(test)]
mod tests {
    use super::StatIndex;

    /// The steering counters' names reach users (the admin `stats`' `steering`, Prometheus'
    /// `decision` label) and their indices are the `STATS` map's layout, shared with the XDP
    /// program: a rename or a reorder must fail here.
    #[test]
    fn stat_names_are_pinned_in_index_order() {
        let names = [
            "redirected",
            "pass_no_socket",
            "pass_no_xsk_slot",
            "pass_arp",
            "pass_nd",
            "pass_bgp",
            "pass_local",
            "pass_ttl",
            "pass_ipv4_options_or_fragment",
            "pass_multicast",
            "pass_v6_hop_by_hop",
            "pass_non_ip",
            "pass_unknown_port",
            "pass_malformed",
            "drop_blackhole",
        ];
        assert_eq!(StatIndex::ALL.len(), names.len());
        assert_eq!(StatIndex::COUNT as usize, names.len());
        for (index, (&stat, name)) in StatIndex::ALL.iter().zip(names).enumerate() {
            assert_eq!((stat.index() as usize, stat.name()), (index, name));
        }
    }
}
