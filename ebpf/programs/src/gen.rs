//! `ofan_gen`: the forwarding benchmark's traffic generator. Never attached: user space runs it
//! with `BPF_PROG_RUN` in live-frames mode (`BPF_F_TEST_XDP_LIVE_FRAMES`), which runs it `repeat`
//! times on copies of one prebuilt frame, in batches, with `ingress_ifindex` set to the
//! generator's interface. It returns `XDP_TX`, which live-frames mode turns into a redirect out
//! of that interface: on veth the peer gets the `xdp_frame` straight into its receive ring — no
//! skb and no AF_XDP copy-mode transmit path, so the generator is cheap.
//!
//! Each frame gets the next source port of its [`GenSettings`] (per CPU, round-robin), with the
//! UDP checksum updated to match. Live-frames mode recycles pages without rewriting them, so the
//! frame may hold the prebuilt port or one this program wrote earlier: the update starts from
//! whatever port and checksum the frame holds, which is correct either way.
//!
//! Paced (`gap_ns` > 0), a copy that comes before the next departure time is dropped instead —
//! `XDP_DROP` recycles its page at once, so this spins cheaply — and each frame sent moves the
//! departure time on by one gap, catching up at most [`GEN_CATCH_UP_FRAMES`] gaps after a pause.

use aya_ebpf::{
    bindings::xdp_action::{XDP_ABORTED, XDP_DROP, XDP_TX},
    macros::{map, xdp},
    maps::{Array, PerCpuArray},
    programs::XdpContext,
};
use ofan_ebpf_common::{udp_checksum_with_port, GenSettings, GEN_CATCH_UP_FRAMES};

use crate::raw;

/// Slot of [`GEN_COUNT`] that counts frames.
const GEN_FRAMES: u32 = 0;
/// Offset of the UDP source port in the generator's frames (Ethernet, IPv4 without options).
const UDP_SOURCE_PORT: usize = 14 + 20;
/// Offset of the UDP checksum.
const UDP_CHECKSUM: usize = UDP_SOURCE_PORT + 6;

/// The flows to cycle through and the pace (one entry, written by user space before the first
/// run).
#[map]
static GEN_SETTINGS: Array<GenSettings> = Array::with_max_entries(1, 0);
/// Frames sent, per CPU (one slot).
#[map]
static GEN_COUNT: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);
/// When paced: the earliest departure time of the next frame, per CPU (one slot).
#[map]
static GEN_CLOCK: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

/// The generator program: when the pace allows, give the frame its flow's source port and
/// transmit it.
#[xdp]
pub fn ofan_gen(ctx: XdpContext) -> u32 {
    let Some(&GenSettings {
        first_src_port,
        flows,
        gap_ns,
        head,
        ..
    }) = GEN_SETTINGS.get(0)
    else {
        return XDP_ABORTED;
    };
    if gap_ns > 0 {
        let now = raw::now_ns();
        let departs = raw::update(&GEN_CLOCK, 0, |next| {
            if now < next {
                next
            } else {
                next.max(now.saturating_sub(GEN_CATCH_UP_FRAMES * gap_ns)) + gap_ns
            }
        });
        match departs {
            Some(next) if now >= next => {}
            _ => return XDP_DROP,
        }
    }
    let (Some(port), Some(checksum)) = (
        raw::read::<[u8; 2]>(&ctx, UDP_SOURCE_PORT),
        raw::read::<[u8; 2]>(&ctx, UDP_CHECKSUM),
    ) else {
        return XDP_ABORTED;
    };
    let Some(sequence) = raw::update(&GEN_COUNT, GEN_FRAMES, |count| count + 1) else {
        return XDP_ABORTED;
    };
    // The headers as built: a forwarder that rewrote this page in place (MACs, TTL) changed
    // what the next copy from it would carry.
    raw::write(&ctx, 0, head);
    if flows > 1 {
        let old_port = u16::from_be_bytes(port);
        let new_port = (first_src_port + (sequence % u64::from(flows)) as u32) as u16;
        let checksum = udp_checksum_with_port(u16::from_be_bytes(checksum), old_port, new_port);
        raw::write(&ctx, UDP_SOURCE_PORT, new_port.to_be_bytes());
        raw::write(&ctx, UDP_CHECKSUM, checksum.to_be_bytes());
    }
    XDP_TX
}
