//! The errors of the model.

use ofan_dataplane::lb::LbError;
use ofan_topology::TopologyError;

/// Why a model run could not be set up, or shard parts not joined.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The topology could not be built or queried.
    #[error("topology: {0}")]
    Topology(#[from] TopologyError),
    /// A switch's load balancer rejected its configuration.
    #[error("load balancer: {0}")]
    Lb(#[from] LbError),
    /// A configuration value is out of range.
    #[error("invalid configuration: {field} = {value} ({reason})")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Its value, printed.
        value: String,
        /// What is expected instead.
        reason: &'static str,
    },
    /// A scheme name that is none of the known ones.
    #[error("unknown scheme `{name}` (expected one of: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan, arf-wcmp, arf-flow, arf-packet, spray, reps, drb)")]
    UnknownScheme {
        /// What was asked for.
        name: String,
    },
    /// A flow names a host that does not exist.
    #[error("flow {src} -> {dst}: host index out of range (the topology has {hosts} hosts)")]
    HostOutOfRange {
        /// Source host index.
        src: u32,
        /// Destination host index.
        dst: u32,
        /// Number of hosts.
        hosts: u32,
    },
    /// A line of a traffic-matrix file could not be parsed.
    #[error("traffic matrix line {line}: {reason}")]
    Matrix {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A line of a scheme map (switch → scheme) is wrong, or (line 0) a switch it names.
    #[error("scheme map{}: {reason}", if *line > 0 { format!(" line {line}") } else { String::new() })]
    SchemeMap {
        /// 1-based line number (0: found checking the switches against the topology).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The workload has no flow between distinct hosts.
    #[error("the workload has no flow between distinct hosts")]
    EmptyWorkload,
    /// Random link failures kept disconnecting some flow.
    #[error("link failures with probability {probability} disconnected a flow in all {attempts} samples")]
    Disconnected {
        /// Failure probability per link.
        probability: f64,
        /// Samples drawn.
        attempts: u32,
    },
    /// An explicit failed link id is not a switch-to-switch link.
    #[error("link {link} cannot fail: only edge-aggregation and aggregation-core links (ids {first}..{end}) can")]
    NotASwitchLink {
        /// The link id given.
        link: u32,
        /// First switch-to-switch link id.
        first: u32,
        /// One past the last link id.
        end: u32,
    },
    /// A degraded link names switches that are not linked.
    #[error("degraded link {from} - {to}: no such switch-to-switch link")]
    NoSuchLink {
        /// One end's name.
        from: String,
        /// The other end's name.
        to: String,
    },
    /// A link to fail during the run that cannot.
    #[error("link {from} - {to} cannot fail during the run: {reason}")]
    CannotFail {
        /// One end's name.
        from: String,
        /// The other end's name.
        to: String,
        /// Why.
        reason: &'static str,
    },
    /// Shard parts that do not join into one sweep.
    #[error("shard parts: {reason}")]
    Parts {
        /// What is wrong with them.
        reason: String,
    },
}
