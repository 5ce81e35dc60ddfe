//! `ofan_sink`: the receiving end of the forwarding benchmark. Counts every frame (per CPU, no
//! lock) and drops it — the cheapest place a frame can be counted, so the sink never limits the
//! rate it measures. Also satisfies veth's rule that frames XDP redirects into a veth need an XDP
//! program on the far end.
//!
//! IPv4 frames — the benchmark's — are counted per RX queue they arrived on; every other frame
//! (the forwarder's ARP probes, IPv6 router solicitations) in a slot of its own, so that a
//! forwarder that sends only its own control traffic is not taken for one that forwards.

use aya_ebpf::{
    bindings::xdp_action::XDP_DROP,
    macros::{map, xdp},
    maps::PerCpuArray,
    programs::XdpContext,
};
use ofan_ebpf_common::{SINK_OTHER_SLOT, SINK_SLOTS};

use crate::raw;

/// `ofan_sink`'s per-CPU frame counters: slot q < [`SINK_OTHER_SLOT`] counts IPv4 frames that
/// arrived on RX queue q (the last of them also those of higher queues), [`SINK_OTHER_SLOT`]
/// every other frame.
#[map]
static SINK: PerCpuArray<u64> = PerCpuArray::with_max_entries(SINK_SLOTS, 0);

/// The sink program: count, drop.
#[xdp]
pub fn ofan_sink(ctx: XdpContext) -> u32 {
    let ipv4 = raw::read::<[u8; 2]>(&ctx, 12) == Some(0x0800u16.to_be_bytes());
    let slot = if ipv4 {
        ctx.rx_queue_index().min(SINK_OTHER_SLOT - 1)
    } else {
        SINK_OTHER_SLOT
    };
    raw::count(&SINK, slot);
    XDP_DROP
}
