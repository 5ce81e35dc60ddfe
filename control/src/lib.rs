//! # ofan-control — the switch's control plane
//!
//! The control plane tells the data path where things are, from the state the kernel of the
//! switch's network namespace holds:
//!
//! - [`mirror`]: the FIB mirror. Routes (with ECMP next-hop groups, plain multipath or next-hop
//!   objects as FRR installs them), neighbours and link state are read over rtnetlink and turned
//!   into the data path's immutable [`ofan_dataplane::fib::Fib`], published with one atomic swap
//!   whenever the kernel reports a change. Whatever puts routes into the namespace — the lab,
//!   `ip route`, a BGP daemon — is the data path's routing source.
//! - [`netlink`]: the rtnetlink messages the mirror sends and parses (no external netlink
//!   dependency; parsing never panics on malformed input).
//!
//! BGP state beyond the FIB and the adaptive-routing congestion notifications come with later
//! issues.
#![deny(unsafe_code)]

pub mod mirror;
pub mod netlink;
#[allow(unsafe_code)]
mod sys;

pub use sys::NetlinkSocket;
