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
//! - [`kernel`]: the kernel's state as one dump gives it to the mirror ([`kernel::KernelState`]).
//!   The rtnetlink messages and the socket are the one codec of the workspace, [`ofan_netlink`].
//! - [`admin`]: the admin protocol of a running switch — requests, the typed [`admin::Stats`]
//!   reply and the one client every tool uses.
//! - [`endpoint`]: the hardened servers of the admin socket (mode 0600, peer credentials,
//!   bounded requests, a deadline each, concurrent clients) and of the metrics endpoint.
//!
//! - [`paths`]: the path table — per prefix, each FIB next hop with its next-next hops — from
//!   the topology plan or, under BGP, from [`bmp`]: the BMP station (RFC 7854) the local BGP
//!   daemon reports to; [`nnh`]: the next-next-hop tag, the large community by which a BGP
//!   route names its advertiser's next hop by router ID.
//!
//! - [`event`]: the control loop — every component above that waits on a socket or a timer is
//!   an [`event::Source`], driven by one loop per switch, or one per group of switches.
//!
//! - [`notify`]: the adaptive-routing congestion notifications: wire format, the speaker's
//!   state machine (recipients, refresh, rate limit, rejections), the UDP transport (GTSM).
#![deny(unsafe_code)]

pub mod admin;
pub mod bmp;
pub mod endpoint;
pub mod event;
pub mod kernel;
pub mod mirror;
pub mod nnh;
pub mod notify;
pub mod paths;
#[allow(unsafe_code)]
mod sys;
