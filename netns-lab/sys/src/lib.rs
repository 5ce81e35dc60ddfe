//! Every system call of `ofan-lab` that needs `unsafe`, in one place: namespaces, sessions,
//! signals and socket options of the lab ([`lab`]) and the clocks, real-time scheduling and
//! socket calls of the host agent ([`agent`]), and the CPU affinity, SCHED_IDLE and thread CPU time
//! of the stall probe and watch ([`cpu`]). Everything else in the lab's crates is safe code
//! (they `forbid(unsafe_code)`).
//!
//! Besides, the one kernel interface both the lab and the host agent need and that is not a
//! system call: the lab's netlink socket ([`rtnl`]). This crate is the bottom of the lab's
//! crates, so the agent and the lab, which do not use each other, share it from here.

pub mod agent;
pub mod cpu;
pub mod lab;
pub mod rtnl;
