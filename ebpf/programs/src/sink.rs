//! `ofan_sink`: the receiving end of the forwarding benchmark. Counts every frame (per CPU, no
//! lock) and drops it — the cheapest place a frame can be counted, so the sink never limits the
//! rate it measures. Also satisfies veth's rule that frames XDP redirects into a veth need an XDP
//! program on the far end.

use aya_ebpf::{
    bindings::xdp_action::XDP_DROP,
    macros::{map, xdp},
    maps::PerCpuArray,
    programs::XdpContext,
};

use crate::raw;

/// Slot of [`SINK`] that counts frames.
const SINK_FRAMES: u32 = 0;

/// `ofan_sink`'s per-CPU frame counter (one slot: frames seen).
#[map]
static SINK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The sink program: count, drop.
#[xdp]
pub fn ofan_sink(_ctx: XdpContext) -> u32 {
    raw::count(&SINK, SINK_FRAMES);
    XDP_DROP
}
