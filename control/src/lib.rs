//! # ofan-control — the switch's control plane
//!
//! This crate will hold everything that talks to the kernel's routing state on the switch's
//! behalf: the rtnetlink mirror of the FIB (routes, next-hop groups, neighbours, link state)
//! that feeds the data path, the BGP state read from what FRR or static configuration puts in
//! the FIB, and the adaptive-routing congestion notifications.
//!
//! It is empty today: the data-path issue fills it. It exists now so that the workspace has the
//! layout every later change lands in.
#![forbid(unsafe_code)]
