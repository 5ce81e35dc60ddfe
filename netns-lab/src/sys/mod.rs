//! Every system call of `ofan-lab` that needs `unsafe`, in one place: namespaces, sessions,
//! signals and socket options of the lab ([`lab`]) and the clocks, real-time scheduling and
//! socket calls of the host agent ([`agent`]), and the CPU affinity, SCHED_IDLE and thread CPU time
//! of the stall probe and watch ([`cpu`]). Everything else in the crate is safe code.

pub mod agent;
pub mod cpu;
pub mod lab;
