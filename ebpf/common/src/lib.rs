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
//! | [`PORT_OF_IFINDEX_MAP`] | array | ingress ifindex below [`PORT_ARRAY_IFINDEXES`] | port + 1 (`u32`; 0: none) |
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

pub mod fast;

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
/// Name of the array from ingress ifindex to switch port + 1 (0: not a port), for ifindexes
/// below [`PORT_ARRAY_IFINDEXES`]: what the programs look up first, an array lookup being an
/// indexed load where a hash lookup hashes and walks a bucket. Larger ifindexes are in
/// [`PORTS_MAP`] only.
pub const PORT_OF_IFINDEX_MAP: &str = "PORT_OF_IFINDEX";
/// Entries of [`PORT_OF_IFINDEX_MAP`]. Interface indices count up per network namespace, so a
/// switch's ports are below it unless its namespace has made thousands of interfaces.
pub const PORT_ARRAY_IFINDEXES: u32 = 4096;
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
/// Slot of the benchmark sink's counters (`SINK`) that counts frames other than IPv4; slots
/// below it count IPv4 frames by the RX queue they arrived on.
pub const SINK_OTHER_SLOT: u32 = MAX_QUEUES;
/// Entries of the benchmark sink's per-CPU counter array.
pub const SINK_SLOTS: u32 = SINK_OTHER_SLOT + 1;
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

/// What `ofan_gen` sends: frame `n` (counted per CPU) gets the headers `head` and UDP source
/// port `first_src_port + n % flows`; frames leave at least `gap_ns` apart on average. The value
/// of the [`GEN_SETTINGS_MAP`].
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
    /// The prebuilt frame's Ethernet and IPv4 headers, written into every copy: live-frames
    /// mode recycles a page without rewriting it, and a forwarder that rewrites frames in place
    /// (an XDP one: MACs, TTL, checksum) changes the page the next copy is sent from.
    pub head: [u8; GEN_HEAD_LEN],
    /// Padding to a multiple of 8 bytes.
    pub reserved: [u8; 6],
}

/// Bytes of [`GenSettings::head`]: an Ethernet header and an IPv4 header without options.
pub const GEN_HEAD_LEN: usize = 34;

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
    /// The fast path (`ofan_fast`, [`fast`]) forwarded it: rewritten and sent with
    /// `XDP_REDIRECT` out of its egress port.
    FastForwarded = "fast_forwarded",
    /// The fast path decided an egress port the devmap has no interface for (a loader bug):
    /// dropped, since the frame was already rewritten.
    DropFastNoEgress = "drop_fast_no_egress",
}

/// What the steering rules read of a frame: its bytes and whether an address is the switch's.
///
/// The XDP program implements it over its context (a bounds-checked packet read, the
/// `LOCAL_V4`/`LOCAL_V6` maps), the data path over a frame in user space (an in-process link
/// between two switches of one process, which skips the veth and so the program): both run
/// [`classify`], so the rules are written once.
pub trait FrameView {
    /// The `N` bytes at `offset`, or `None` when they run past the frame's end.
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]>;
    /// Whether `address` is one of the switch's own IPv4 addresses.
    fn is_local_v4(&self, address: &LocalV4) -> bool;
    /// Whether `address` is one of the switch's own IPv6 addresses.
    fn is_local_v6(&self, address: &LocalV6) -> bool;
}

/// [`FrameView::bytes`] of a frame in memory: the `N` bytes at `offset` of `frame`.
#[inline]
pub fn bytes_at<const N: usize>(frame: &[u8], offset: usize) -> Option<[u8; N]> {
    frame.get(offset..offset.checked_add(N)?)?.try_into().ok()
}

const ETH_HDR_LEN: usize = 14;
const VLAN_HDR_LEN: usize = 4;
const IPV4_HDR_LEN: usize = 20;
const IPV6_HDR_LEN: usize = 40;

const ETH_P_IP: u16 = 0x0800;
const ETH_P_ARP: u16 = 0x0806;
const ETH_P_8021Q: u16 = 0x8100;
const ETH_P_IPV6: u16 = 0x86dd;

const IPPROTO_HOPOPTS: u8 = 0;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_ICMPV6: u8 = 58;

const BGP_PORT: u16 = 179;
/// ICMPv6 router solicitation (133) … redirect (137): neighbour discovery.
const ND_TYPES: core::ops::RangeInclusive<u8> = 133..=137;

/// `Ok` when the frame belongs to the user-space data path, else the reason it goes to the
/// kernel: ARP, IPv6 neighbour discovery, BGP, the switch's own addresses, multicast, TTL or hop
/// limit ≤ 1, IPv4 options and fragments, IPv6 hop-by-hop options, non-IP and malformed frames.
#[inline(always)]
pub fn classify(frame: &impl FrameView) -> Result<(), StatIndex> {
    let mut ether_type = be16(frame.bytes::<2>(12))?;
    let mut l3 = ETH_HDR_LEN;
    if ether_type == ETH_P_8021Q {
        ether_type = be16(frame.bytes::<2>(ETH_HDR_LEN + 2))?;
        l3 += VLAN_HDR_LEN;
    }
    match ether_type {
        ETH_P_ARP => Err(StatIndex::PassArp),
        ETH_P_IP => classify_ipv4(frame, l3),
        ETH_P_IPV6 => classify_ipv6(frame, l3),
        _ => Err(StatIndex::PassNonIp),
    }
}

#[inline(always)]
fn classify_ipv4(frame: &impl FrameView, l3: usize) -> Result<(), StatIndex> {
    // The fixed header, copied out of the packet once.
    let header = frame
        .bytes::<IPV4_HDR_LEN>(l3)
        .ok_or(StatIndex::PassMalformed)?;
    let version = header[0] >> 4;
    let ihl = header[0] & 0x0f;
    if version != 4 || ihl < 5 {
        return Err(StatIndex::PassMalformed);
    }
    let fragment = u16::from_be_bytes([header[6], header[7]]) & 0x3fff; // MF | offset
    if ihl != 5 || fragment != 0 {
        return Err(StatIndex::PassIpv4OptionsOrFragment);
    }
    let ttl = header[8];
    let protocol = header[9];
    let destination = LocalV4([header[16], header[17], header[18], header[19]]);
    if frame.is_local_v4(&destination) {
        return Err(StatIndex::PassLocal);
    }
    if protocol == IPPROTO_TCP && is_bgp(frame, l3 + IPV4_HDR_LEN)? {
        return Err(StatIndex::PassBgp);
    }
    if destination.0[0] >= 224 {
        return Err(StatIndex::PassMulticast);
    }
    if ttl <= 1 {
        return Err(StatIndex::PassTtl);
    }
    Ok(())
}

#[inline(always)]
fn classify_ipv6(frame: &impl FrameView, l3: usize) -> Result<(), StatIndex> {
    let first = frame.bytes::<8>(l3).ok_or(StatIndex::PassMalformed)?;
    if first[0] >> 4 != 6 {
        return Err(StatIndex::PassMalformed);
    }
    let next_header = first[6];
    let hop_limit = first[7];
    let destination = LocalV6(frame.bytes::<16>(l3 + 24).ok_or(StatIndex::PassMalformed)?);
    let l4 = l3 + IPV6_HDR_LEN;
    if next_header == IPPROTO_ICMPV6 {
        let [icmp_type] = frame.bytes::<1>(l4).ok_or(StatIndex::PassMalformed)?;
        if ND_TYPES.contains(&icmp_type) {
            return Err(StatIndex::PassNd);
        }
    }
    if frame.is_local_v6(&destination) {
        return Err(StatIndex::PassLocal);
    }
    if next_header == IPPROTO_TCP && is_bgp(frame, l4)? {
        return Err(StatIndex::PassBgp);
    }
    if destination.0[0] == 0xff {
        return Err(StatIndex::PassMulticast);
    }
    if next_header == IPPROTO_HOPOPTS {
        return Err(StatIndex::PassV6HopByHop);
    }
    if hop_limit <= 1 {
        return Err(StatIndex::PassTtl);
    }
    Ok(())
}

/// Whether the TCP header at `l4` has source or destination port 179.
#[inline(always)]
fn is_bgp(frame: &impl FrameView, l4: usize) -> Result<bool, StatIndex> {
    let ports = frame.bytes::<4>(l4).ok_or(StatIndex::PassMalformed)?;
    let source = u16::from_be_bytes([ports[0], ports[1]]);
    let destination = u16::from_be_bytes([ports[2], ports[3]]);
    Ok(source == BGP_PORT || destination == BGP_PORT)
}

#[inline(always)]
fn be16(bytes: Option<[u8; 2]>) -> Result<u16, StatIndex> {
    bytes
        .map(u16::from_be_bytes)
        .ok_or(StatIndex::PassMalformed)
}

/// `aya::Pod` for the map key and value types, so the loader can read and write the maps.
#[cfg(feature = "user")]
#[allow(unsafe_code)]
mod pod {
    use super::fast::{FastConfig, FastDestination, FastGroup, FastHop, FastRow};
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
    // SAFETY: `GenSettings` is `#[repr(C)]`: two `u32`s, a `u64` at offset 8, then 34 + 6 bytes
    // (56 in all, a multiple of its alignment 8), so no padding; `Copy`, and every bit pattern
    // is a valid value.
    unsafe impl aya::Pod for GenSettings {}
    // SAFETY: `FastConfig` is `#[repr(C)]`: six `u32`s (24 bytes), then two `u64`s at offsets 24
    // and 32, so no padding; `Copy`, and every bit pattern is a valid value.
    unsafe impl aya::Pod for FastConfig {}
    // SAFETY: `FastDestination` is `#[repr(C)]` around six `u32`s: no padding, `Copy`, every bit
    // pattern valid.
    unsafe impl aya::Pod for FastDestination {}
    // SAFETY: `FastHop` is `#[repr(C)]`: a `u32` then two `[u8; 6]` (16 bytes, alignment 4), no
    // padding; `Copy`, every bit pattern valid.
    unsafe impl aya::Pod for FastHop {}
    // SAFETY: `FastRow` is `#[repr(C)]`: a `u32` then 64 bytes (68 bytes, alignment 4), no
    // padding; `Copy`, every bit pattern valid.
    unsafe impl aya::Pod for FastRow {}
    // SAFETY: `FastGroup` is `#[repr(C)]`: four `u32`s, two 64-byte arrays, then 64 `FastHop`s
    // at offset 144 (alignment 4): 1168 bytes, no padding; `Copy`, every bit pattern valid.
    unsafe impl aya::Pod for FastGroup {}
}

#[cfg(test)]
mod tests {
    use super::{bytes_at, classify, FrameView, LocalV4, LocalV6, StatIndex};

    /// A frame in memory, with one local address of each family.
    struct Bytes<'a>(&'a [u8]);

    const LOCAL_V4: [u8; 4] = [10, 0, 0, 1];
    const LOCAL_V6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

    impl FrameView for Bytes<'_> {
        fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
            bytes_at(self.0, offset)
        }
        fn is_local_v4(&self, address: &LocalV4) -> bool {
            address.0 == LOCAL_V4
        }
        fn is_local_v6(&self, address: &LocalV6) -> bool {
            address.0 == LOCAL_V6
        }
    }

    /// Ethernet + IPv4 (20-byte header) + 8 bytes of L4, to `dst` with `ttl` and `protocol`.
    fn ipv4(dst: [u8; 4], ttl: u8, protocol: u8, ports: [u16; 2]) -> [u8; 42] {
        let mut frame = [0u8; 42];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame[14] = 0x45;
        frame[22] = ttl;
        frame[23] = protocol;
        frame[30..34].copy_from_slice(&dst);
        frame[34..36].copy_from_slice(&ports[0].to_be_bytes());
        frame[36..38].copy_from_slice(&ports[1].to_be_bytes());
        frame
    }

    /// Ethernet + IPv6 + 8 bytes of L4.
    fn ipv6(dst: [u8; 16], hop_limit: u8, next: u8, first_l4: u8) -> [u8; 62] {
        let mut frame = [0u8; 62];
        frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        frame[14] = 0x60;
        frame[20] = next;
        frame[21] = hop_limit;
        frame[38..54].copy_from_slice(&dst);
        frame[54] = first_l4;
        frame
    }

    fn verdict(frame: &[u8]) -> Result<(), StatIndex> {
        classify(&Bytes(frame))
    }

    #[test]
    fn forwarded_unicast_belongs_to_the_data_path() {
        assert_eq!(verdict(&ipv4([10, 2, 0, 1], 64, 17, [1, 2])), Ok(()));
        assert_eq!(verdict(&ipv4([10, 2, 0, 1], 2, 6, [40000, 5001])), Ok(()));
        let mut dst = LOCAL_V6;
        dst[15] = 2;
        assert_eq!(verdict(&ipv6(dst, 64, 17, 0)), Ok(()));
        // Behind one 802.1Q tag.
        let plain = ipv4([10, 2, 0, 1], 64, 17, [1, 2]);
        let mut tagged = [0u8; 46];
        tagged[..12].copy_from_slice(&plain[..12]);
        tagged[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        tagged[16..].copy_from_slice(&plain[12..]);
        assert_eq!(verdict(&tagged), Ok(()));
    }

    #[test]
    fn control_traffic_and_expiring_ttls_go_to_the_kernel() {
        let remote = [10, 2, 0, 1];
        let mut arp = [0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        let mut options = ipv4(remote, 64, 17, [1, 2]);
        options[14] = 0x46;
        let mut fragment = ipv4(remote, 64, 17, [1, 2]);
        fragment[20] = 0x20; // more fragments
        let mut bad_version = ipv4(remote, 64, 17, [1, 2]);
        bad_version[14] = 0x65;
        let truncated = ipv4(remote, 64, 17, [1, 2]);
        let mut lldp = [0u8; 60];
        lldp[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
        let mut remote6 = LOCAL_V6;
        remote6[15] = 2;
        let mut multicast6 = remote6;
        multicast6[0] = 0xff;
        let mut bgp6 = ipv6(remote6, 64, 6, 0);
        bgp6[56..58].copy_from_slice(&179u16.to_be_bytes());
        let cases: [(&[u8], StatIndex); 20] = [
            (&arp, StatIndex::PassArp),
            (&ipv4(LOCAL_V4, 64, 1, [0, 0]), StatIndex::PassLocal),
            (&ipv4(remote, 64, 6, [179, 50000]), StatIndex::PassBgp),
            (&ipv4(remote, 64, 6, [50000, 179]), StatIndex::PassBgp),
            (
                &ipv4([224, 0, 0, 5], 64, 17, [1, 2]),
                StatIndex::PassMulticast,
            ),
            (&ipv4(remote, 1, 17, [1, 2]), StatIndex::PassTtl),
            (&ipv4(remote, 0, 17, [1, 2]), StatIndex::PassTtl),
            (&options, StatIndex::PassIpv4OptionsOrFragment),
            (&fragment, StatIndex::PassIpv4OptionsOrFragment),
            (&bad_version, StatIndex::PassMalformed),
            (&truncated[..30], StatIndex::PassMalformed),
            (&[0u8; 10], StatIndex::PassMalformed),
            (&lldp, StatIndex::PassNonIp),
            (&ipv6(remote6, 255, 58, 135), StatIndex::PassNd),
            (&ipv6(LOCAL_V6, 64, 58, 128), StatIndex::PassLocal),
            (&ipv6(remote6, 1, 17, 0), StatIndex::PassTtl),
            (&ipv6(remote6, 64, 0, 0), StatIndex::PassV6HopByHop),
            (&ipv6(multicast6, 64, 17, 0), StatIndex::PassMulticast),
            (&bgp6, StatIndex::PassBgp),
            (&ipv6(remote6, 64, 58, 128)[..50], StatIndex::PassMalformed),
        ];
        for (index, (frame, expected)) in cases.into_iter().enumerate() {
            assert_eq!(verdict(frame), Err(expected), "case {index}");
        }
    }

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
            "fast_forwarded",
            "drop_fast_no_egress",
        ];
        assert_eq!(StatIndex::ALL.len(), names.len());
        assert_eq!(StatIndex::COUNT as usize, names.len());
        for (index, (&stat, name)) in StatIndex::ALL.iter().zip(names).enumerate() {
            assert_eq!((stat.index() as usize, stat.name()), (index, name));
        }
    }
}
