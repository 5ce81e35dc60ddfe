//! # ofan-ebpf — the XDP programs of the ofan switch
//!
//! - `ofan_steer`: one program for every port of the switch. It decides, per frame, whether the
//!   frame belongs to the user-space data path (redirected into the AF_XDP socket of its port and
//!   RX queue) or to the kernel (`XDP_PASS`): ARP, IPv6 neighbour discovery, BGP, traffic to the
//!   switch's own addresses, expiring TTLs (so the kernel sends ICMP time exceeded), IPv4 options
//!   and fragments, multicast, IPv6 hop-by-hop options, non-IP and malformed frames. A port
//!   whose `PORT_DROP` flag is set drops every frame it receives (a blackholed link). Every
//!   frame increments exactly one per-CPU counter ([`StatIndex`]) naming the decision.
//! - `ofan_steer_sg`: the same program built for multi-buffer packets (`xdp.frags`), for ports
//!   whose frames do not fit one page (jumbo MTUs). It reads only the headers, which lie in the
//!   first buffer; the sockets it redirects to are bound with `XDP_USE_SG`. Drivers refuse a
//!   program without fragment support on such ports (veth above MTU 3506); with it, a veth no
//!   longer turns its peer's segmentation offloads off, which is why `ofan_steer` stays the
//!   default.
//! - `ofan_redirect`: plain `XDP_REDIRECT` from the ingress ifindex to the egress ifindex of a
//!   devmap: the no-user-space ceiling for forwarding benchmarks.
//! - `ofan_sink` ([`sink`]): counts every frame per CPU and drops it: the receiving end of the
//!   forwarding benchmark.
//! - `ofan_gen` ([`gen`]): the forwarding benchmark's traffic generator, run by `BPF_PROG_RUN` in
//!   live-frames mode: gives each copy of a prebuilt UDP frame the next flow's source port and
//!   transmits it (`XDP_TX`).
//!
//! Maps, names and counter indices come from `ofan-ebpf-common`. All `unsafe` lives in [`raw`].
//! Built by `ofan-dataplane`'s `build.rs` (feature `afxdp`) with nightly for `bpfel-unknown-none`.
#![no_std]
#![no_main]
#![deny(clippy::undocumented_unsafe_blocks)]

mod gen;
mod raw;
mod sink;

use aya_ebpf::{
    bindings::xdp_action::{XDP_DROP, XDP_PASS},
    macros::{map, xdp},
    maps::{Array, DevMapHash, HashMap, PerCpuArray, XskMap},
    programs::XdpContext,
};
use ofan_ebpf_common::{
    xsk_index, LocalV4, LocalV6, PortId, StatIndex, MAX_LOCAL_ADDRS, MAX_PORTS, REDIRECT_ENTRIES,
    XSKS_ENTRIES,
};

/// Ingress ifindex → switch port.
#[map]
static PORTS: HashMap<u32, PortId> = HashMap::with_max_entries(MAX_PORTS, 0);
/// The switch's own IPv4 addresses (value unused).
#[map]
static LOCAL_V4: HashMap<LocalV4, u8> = HashMap::with_max_entries(MAX_LOCAL_ADDRS, 0);
/// The switch's own IPv6 addresses (value unused).
#[map]
static LOCAL_V6: HashMap<LocalV6, u8> = HashMap::with_max_entries(MAX_LOCAL_ADDRS, 0);
/// AF_XDP sockets, slot `port * MAX_QUEUES + rx_queue_index`.
#[map]
static XSKS: XskMap = XskMap::with_max_entries(XSKS_ENTRIES, 0);
/// Switch port → nonzero when every frame it receives is dropped.
#[map]
static PORT_DROP: Array<u32> = Array::with_max_entries(MAX_PORTS, 0);
/// One per-CPU packet counter per [`StatIndex`].
#[map]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(StatIndex::COUNT, 0);
/// `ofan_redirect`: ingress ifindex → egress ifindex.
#[map]
static REDIRECT: DevMapHash = DevMapHash::with_max_entries(REDIRECT_ENTRIES, 0);

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

/// The steering program: see the crate documentation.
#[xdp]
pub fn ofan_steer(ctx: XdpContext) -> u32 {
    let (action, stat) = steer(&ctx);
    raw::count(&STATS, stat.index());
    action
}

/// The steering program for multi-buffer packets (see the crate documentation).
#[xdp(frags)]
pub fn ofan_steer_sg(ctx: XdpContext) -> u32 {
    let (action, stat) = steer(&ctx);
    raw::count(&STATS, stat.index());
    action
}

/// The benchmark program: redirect to the devmap entry of the ingress ifindex, else pass.
#[xdp]
pub fn ofan_redirect(ctx: XdpContext) -> u32 {
    let ifindex = ctx.ingress_ifindex() as u32;
    match REDIRECT.redirect(ifindex, u64::from(XDP_PASS)) {
        Ok(action) | Err(action) => action,
    }
}

/// The XDP action for one frame and the counter that records why.
#[inline(always)]
fn steer(ctx: &XdpContext) -> (u32, StatIndex) {
    let ifindex = ctx.ingress_ifindex() as u32;
    let Some(PortId(port)) = raw::lookup(&PORTS, &ifindex) else {
        return (XDP_PASS, StatIndex::PassUnknownPort);
    };
    if PORT_DROP.get(port).is_some_and(|&flag| flag != 0) {
        return (XDP_DROP, StatIndex::DropBlackhole);
    }
    if let Err(reason) = classify(ctx) {
        return (XDP_PASS, reason);
    }
    let queue = ctx.rx_queue_index();
    let Some(slot) = xsk_index(port, queue) else {
        return (XDP_PASS, StatIndex::PassNoXskSlot);
    };
    // With no socket in the slot the helper returns the fallback action in the flags.
    match XSKS.redirect(slot, u64::from(XDP_PASS)) {
        Ok(action) => (action, StatIndex::Redirected),
        Err(action) => (action, StatIndex::PassNoSocket),
    }
}

/// `Ok` when the frame belongs to the data path, else the reason it goes to the kernel.
#[inline(always)]
fn classify(ctx: &XdpContext) -> Result<(), StatIndex> {
    let mut ether_type = be16(raw::read::<[u8; 2]>(ctx, 12))?;
    let mut l3 = ETH_HDR_LEN;
    if ether_type == ETH_P_8021Q {
        ether_type = be16(raw::read::<[u8; 2]>(ctx, ETH_HDR_LEN + 2))?;
        l3 += VLAN_HDR_LEN;
    }
    match ether_type {
        ETH_P_ARP => Err(StatIndex::PassArp),
        ETH_P_IP => classify_ipv4(ctx, l3),
        ETH_P_IPV6 => classify_ipv6(ctx, l3),
        _ => Err(StatIndex::PassNonIp),
    }
}

#[inline(always)]
fn classify_ipv4(ctx: &XdpContext, l3: usize) -> Result<(), StatIndex> {
    // The fixed header, copied out of the packet once.
    let header = raw::read::<[u8; IPV4_HDR_LEN]>(ctx, l3).ok_or(StatIndex::PassMalformed)?;
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
    if raw::lookup(&LOCAL_V4, &destination).is_some() {
        return Err(StatIndex::PassLocal);
    }
    if protocol == IPPROTO_TCP && is_bgp(ctx, l3 + IPV4_HDR_LEN)? {
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
fn classify_ipv6(ctx: &XdpContext, l3: usize) -> Result<(), StatIndex> {
    let first = raw::read::<[u8; 8]>(ctx, l3).ok_or(StatIndex::PassMalformed)?;
    if first[0] >> 4 != 6 {
        return Err(StatIndex::PassMalformed);
    }
    let next_header = first[6];
    let hop_limit = first[7];
    let destination = LocalV6(raw::read::<[u8; 16]>(ctx, l3 + 24).ok_or(StatIndex::PassMalformed)?);
    let l4 = l3 + IPV6_HDR_LEN;
    if next_header == IPPROTO_ICMPV6 {
        let icmp_type = raw::read::<u8>(ctx, l4).ok_or(StatIndex::PassMalformed)?;
        if ND_TYPES.contains(&icmp_type) {
            return Err(StatIndex::PassNd);
        }
    }
    if raw::lookup(&LOCAL_V6, &destination).is_some() {
        return Err(StatIndex::PassLocal);
    }
    if next_header == IPPROTO_TCP && is_bgp(ctx, l4)? {
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
fn is_bgp(ctx: &XdpContext, l4: usize) -> Result<bool, StatIndex> {
    let ports = raw::read::<[u8; 4]>(ctx, l4).ok_or(StatIndex::PassMalformed)?;
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

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
