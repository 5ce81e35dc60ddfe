//! # ofan-dataplane — the switch data path
//!
//! Layers, from pure to I/O:
//!
//! - [`lb`]: the load-balancing core. Pure decisions — which up-port a northbound packet takes —
//!   for every algorithm (ECMP, RSQ, Simple RR, JSQ, AR, DRILL, Ofan, pOfan). No clock, no I/O;
//!   the AF_XDP workers, the tests and the deterministic model run this same code.
//! - [`wire`]: checked views of the frames the switch reads and rewrites (Ethernet, 802.1Q,
//!   IPv4, IPv6, the L4 ports of TCP and UDP).
//! - [`fib`]: the forwarding table the workers read — longest-prefix match, next-hop groups,
//!   ports, destination keys — built whole on the control side and published by swapping it in.
//! - [`forward`]: parse-and-decide for a batch of frames: lookup, the northbound choice through
//!   [`lb`], TTL and checksum, MAC rewrite; every frame it does not forward gets a named reason.
//! - `afxdp` (cargo feature `afxdp`): the I/O — the XDP steering program's loader, UMEM and
//!   AF_XDP sockets, pipe workers, egress queues with link emulation, telemetry.
//!
//! Everything but `afxdp` is pure and builds anywhere: no root, no eBPF toolchain, no kernel
//! headers.
#![cfg_attr(not(feature = "afxdp"), forbid(unsafe_code))]
#![cfg_attr(feature = "afxdp", deny(unsafe_code))]

pub mod arf;
mod counters;
pub mod egress;
pub mod fib;
pub mod forward;
pub mod lb;
pub mod telemetry;
pub mod wire;

#[cfg(feature = "afxdp")]
pub mod afxdp;
