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
//! - `ofan_fast` ([`fast`]): `ofan_steer` with the switch's forwarding in it (`--fast-path
//!   xdp`): what the data path would get it forwards itself where it can (lookup, balancing,
//!   rewrite, `XDP_REDIRECT` out of the egress port), the rest goes to the AF_XDP sockets as
//!   under `ofan_steer`.
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

mod fast;
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
    classify, xsk_index, FrameView, LocalV4, LocalV6, PortId, StatIndex, MAX_LOCAL_ADDRS,
    MAX_PORTS, PORT_ARRAY_IFINDEXES, REDIRECT_ENTRIES, XSKS_ENTRIES,
};

/// Ingress ifindex → switch port.
#[map]
static PORTS: HashMap<u32, PortId> = HashMap::with_max_entries(MAX_PORTS, 0);
/// Ingress ifindex (below `PORT_ARRAY_IFINDEXES`) → switch port + 1.
#[map]
static PORT_OF_IFINDEX: Array<u32> = Array::with_max_entries(PORT_ARRAY_IFINDEXES, 0);
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
pub(crate) static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(StatIndex::COUNT, 0);
/// `ofan_redirect`: ingress ifindex → egress ifindex.
#[map]
static REDIRECT: DevMapHash = DevMapHash::with_max_entries(REDIRECT_ENTRIES, 0);

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
    match admit(ctx) {
        Ok(port) => to_socket(ctx, port),
        Err(decided) => decided,
    }
}

/// The switch port of a frame that belongs to the data path, or its action and counter: a
/// frame of an unknown or blackholed port, and what [`classify`] gives the kernel.
#[inline(always)]
fn admit(ctx: &XdpContext) -> Result<u32, (u32, StatIndex)> {
    let port = port_of(ctx)?;
    if let Err(reason) = classify(&Frame(ctx)) {
        return Err((XDP_PASS, reason));
    }
    Ok(port)
}

/// The switch port a frame came in on, or its action and counter: an unknown port's frames go
/// to the kernel, a blackholed port's are dropped.
#[inline(always)]
pub(crate) fn port_of(ctx: &XdpContext) -> Result<u32, (u32, StatIndex)> {
    let ifindex = ctx.ingress_ifindex() as u32;
    let port = if ifindex < PORT_ARRAY_IFINDEXES {
        PORT_OF_IFINDEX
            .get(ifindex)
            .and_then(|&entry| entry.checked_sub(1))
    } else {
        raw::lookup(&PORTS, &ifindex).map(|PortId(port)| port)
    };
    let Some(port) = port else {
        return Err((XDP_PASS, StatIndex::PassUnknownPort));
    };
    if PORT_DROP.get(port).is_some_and(|&flag| flag != 0) {
        return Err((XDP_DROP, StatIndex::DropBlackhole));
    }
    Ok(port)
}

/// The steering of a frame of `port` that the fast path did not forward: what [`classify`]
/// gives the kernel to the kernel, the rest to the AF_XDP socket of its queue.
#[inline(always)]
pub(crate) fn steer_from(ctx: &XdpContext, port: u32) -> (u32, StatIndex) {
    match classify(&Frame(ctx)) {
        Ok(()) => to_socket(ctx, port),
        Err(reason) => (XDP_PASS, reason),
    }
}

/// Redirects a data-path frame that arrived on `port` into the AF_XDP socket of its RX queue
/// (the kernel when there is none).
#[inline(always)]
pub(crate) fn to_socket(ctx: &XdpContext, port: u32) -> (u32, StatIndex) {
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

/// The frame of one program run, as the steering rules read it.
pub(crate) struct Frame<'a>(pub(crate) &'a XdpContext);

impl FrameView for Frame<'_> {
    #[inline(always)]
    fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
        raw::read::<[u8; N]>(self.0, offset)
    }

    #[inline(always)]
    fn is_local_v4(&self, address: &LocalV4) -> bool {
        raw::lookup(&LOCAL_V4, address).is_some()
    }

    #[inline(always)]
    fn is_local_v6(&self, address: &LocalV6) -> bool {
        raw::lookup(&LOCAL_V6, address).is_some()
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {}
}
