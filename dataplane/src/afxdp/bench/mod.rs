//! Building blocks of the forwarding benchmark (`ofan-lab bench forward`): a traffic generator
//! and a sink of the project's own, both AF_XDP/XDP based, so a benchmark needs nothing but the
//! kernel (Debian's `xdp-trafficgen` fails on the kernels ofan targets, and pktgen is often not
//! built).
//!
//! - [`frame`]: the frames the generator sends — prebuilt Ethernet/IPv4/UDP frames with valid
//!   checksums, one per flow (flows differ in their UDP source port). Pure.
//! - [`live`]: [`live::LiveGen`], the default generator: the kernel's XDP live-frames mode
//!   (`BPF_PROG_RUN` with `BPF_F_TEST_XDP_LIVE_FRAMES`) runs `ofan_gen` on copies of flow 0's
//!   frame, which gives each the next flow's source port and transmits it (`XDP_TX`). On veth
//!   the frames reach the peer as `xdp_frame`s, without an skb, so the generator's CPU is left
//!   mostly to the receive work it shares with the device under test.
//! - [`gen`]: [`gen::TrafficGen`], a TX-only AF_XDP socket (copy mode) that sends the prebuilt
//!   frames round-robin as fast as the kernel takes them. Every frame becomes an skb, so on a
//!   small machine it, not the device under test, sets the rate (about 0.4 Mpps here).
//! - [`sink`]: [`sink::XdpSink`], the loader of `ofan_sink`, an XDP program that counts every
//!   frame per CPU and drops it: the cheapest point at which a frame can be counted.
//!
//! The plain `XDP_REDIRECT` ceiling lives beside the steering loader, in
//! [`super::redirect`].
//!
//! No `unsafe` here: the AF_XDP generator's UMEM is filled through `afxdp::sys`
//! (`UmemArea::new_with`), and aya wraps `BPF_PROG_RUN`.
#![forbid(unsafe_code)]

pub mod frame;
pub mod gen;
pub mod live;
pub mod sink;
