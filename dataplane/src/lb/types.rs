//! The load-balancing core's vocabulary: algorithms, size classes, port masks and loads, the
//! packet a decision is about, and the configuration.

use std::fmt;
use std::str::FromStr;

use super::MAX_PORTS;
use ofan_topology::DestKey;

/// The load-balancing algorithms of the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// 5-tuple hash with a per-switch salt: every packet of a flow takes the same port.
    Ecmp,
    /// Randomized switch queueing: a uniformly random valid port per packet (equivalent to
    /// host random packet spraying).
    Rsq,
    /// Simple RR: destination-oblivious round robin, one pointer for the whole switch per size
    /// class (data, ACK), so that ACKs do not shift the rotation of the data packets.
    Rr,
    /// Join the shortest queue (bytes), random tie-break.
    Jsq,
    /// Adaptive routing: JSQ on the queue quantized to 4 levels (<5 %, <10 %, <20 %, ≥20 % of
    /// the buffer), random tie-break.
    Ar,
    /// DRILL(d = 2, m = 1): the shortest of two random samples and the port chosen last time.
    Drill,
    /// Ofan: one rotation pointer per (destination key, size class), shared by the switch.
    Ofan,
    /// pOfan: Ofan's pointers kept independently by each pipe.
    Pofan,
    /// Adaptive-routing framework, weight-based dynamic ECMP: flows hashed over the valid ports
    /// with weights `1 + path quality` (local and remote, [`crate::arf::PathQuality`]).
    #[serde(rename = "arf-wcmp")]
    ArfWcmp,
    /// Adaptive-routing framework, flow redirection: a flow keeps its port (a per-pipe flow
    /// table, idle entries age out) until its path's quality falls to the congested level and
    /// a clearly better one exists; new and moved flows are placed as `arf-wcmp` places them.
    #[serde(rename = "arf-flow")]
    ArfFlow,
    /// Adaptive-routing framework, per packet: the least of local queue plus a remote penalty
    /// (a quarter buffer at remote quality 0, nothing at 15), random tie-break.
    #[serde(rename = "arf-packet")]
    ArfPacket,
}

impl Algorithm {
    /// Every algorithm, in the order of the paper's tables.
    pub const ALL: [Algorithm; 11] = [
        Algorithm::Ecmp,
        Algorithm::Rsq,
        Algorithm::Rr,
        Algorithm::Jsq,
        Algorithm::Ar,
        Algorithm::Drill,
        Algorithm::Ofan,
        Algorithm::Pofan,
        Algorithm::ArfWcmp,
        Algorithm::ArfFlow,
        Algorithm::ArfPacket,
    ];

    /// The name used on command lines and in configuration files.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Ecmp => "ecmp",
            Algorithm::Rsq => "rsq",
            Algorithm::Rr => "rr",
            Algorithm::Jsq => "jsq",
            Algorithm::Ar => "ar",
            Algorithm::Drill => "drill",
            Algorithm::Ofan => "ofan",
            Algorithm::Pofan => "pofan",
            Algorithm::ArfWcmp => "arf-wcmp",
            Algorithm::ArfFlow => "arf-flow",
            Algorithm::ArfPacket => "arf-packet",
        }
    }

    /// Whether the algorithm reads the local egress queue lengths.
    pub const fn uses_queues(self) -> bool {
        matches!(
            self,
            Algorithm::Jsq | Algorithm::Ar | Algorithm::Drill | Algorithm::ArfPacket
        )
    }

    /// Whether the algorithm reads the clock [`crate::lb::PipeBalancer::set_clock`] sets
    /// (`arf-flow` ages its flow table by it); the others read no clock.
    pub const fn uses_clock(self) -> bool {
        matches!(self, Algorithm::ArfFlow)
    }

    /// Whether the algorithm reads [`Northbound::flow_hash`] (callers may leave it 0 otherwise).
    pub const fn uses_flow_hash(self) -> bool {
        matches!(
            self,
            Algorithm::Ecmp | Algorithm::ArfWcmp | Algorithm::ArfFlow
        )
    }

    /// Whether the algorithm reads the path quality of the adaptive-routing framework.
    pub const fn uses_path_quality(self) -> bool {
        matches!(
            self,
            Algorithm::ArfWcmp | Algorithm::ArfFlow | Algorithm::ArfPacket
        )
    }

    /// Whether the algorithm keeps per-destination pointers (it is destination-based).
    pub const fn is_destination_based(self) -> bool {
        matches!(self, Algorithm::Ofan | Algorithm::Pofan)
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = LbError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| LbError::UnknownAlgorithm { name: s.to_owned() })
    }
}

/// Errors in a load-balancer configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LbError {
    /// The name is not one of [`Algorithm::ALL`].
    #[error("unknown load-balancing algorithm `{name}` (expected one of: ecmp, rsq, rr, jsq, ar, drill, ofan, pofan, arf-wcmp, arf-flow, arf-packet)")]
    UnknownAlgorithm {
        /// What was asked for.
        name: String,
    },
    /// The number of up-ports is outside `1..=64`.
    #[error("a switch balances over 1 to {max} up-ports, not {up_ports}")]
    UpPorts {
        /// What was asked for.
        up_ports: usize,
        /// [`MAX_PORTS`].
        max: usize,
    },
    /// The name is not one of [`super::planes::PlanePolicy::ALL`].
    #[error("unknown host plane policy `{name}` (expected one of: plane-hash, plane-spray, plane-arf, entropy)")]
    UnknownPlanePolicy {
        /// What was asked for.
        name: String,
    },
    /// A switch needs at least one pipe.
    #[error("a switch needs at least one pipe")]
    NoPipes,
    /// A pipe index past the configured number of pipes.
    #[error("pipe {pipe} does not exist (the switch has {pipes} pipes)")]
    NoSuchPipe {
        /// What was asked for.
        pipe: u16,
        /// Configured number of pipes.
        pipes: u16,
    },
}

/// The packet size classes that get separate pointers (paper §4.1 "ACKs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum SizeClass {
    /// Full-size data frames.
    Data = 0,
    /// Small frames: acknowledgements.
    Ack = 1,
}

impl SizeClass {
    /// Number of size classes.
    pub const COUNT: u32 = 2;

    /// Frames of at most this many bytes (Ethernet header to end of payload) are ACKs by default.
    pub const DEFAULT_ACK_MAX_FRAME: u32 = 128;

    /// Quantizes a frame length into its class: `frame_len ≤ ack_max_frame` is an ACK.
    #[inline]
    pub const fn of_frame(frame_len: u32, ack_max_frame: u32) -> Self {
        if frame_len <= ack_max_frame {
            SizeClass::Ack
        } else {
            SizeClass::Data
        }
    }
}

/// A set of up-port positions `0..w` (bit `i` = the `i`-th up-port of the switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortMask(pub u64);

impl PortMask {
    /// No port.
    pub const EMPTY: PortMask = PortMask(0);

    /// All of the first `width` ports.
    pub const fn all(width: u8) -> Self {
        if width as usize >= MAX_PORTS {
            PortMask(u64::MAX)
        } else {
            PortMask((1u64 << width) - 1)
        }
    }

    /// Whether `port` is in the set.
    #[inline]
    pub const fn contains(self, port: u8) -> bool {
        port < 64 && self.0 & (1u64 << port) != 0
    }

    /// The set with `port` added.
    pub const fn with(self, port: u8) -> Self {
        PortMask(self.0 | (1u64 << port))
    }

    /// The set with `port` removed.
    pub const fn without(self, port: u8) -> Self {
        PortMask(self.0 & !(1u64 << port))
    }

    /// Number of ports in the set.
    #[inline]
    pub const fn count(self) -> u32 {
        self.0.count_ones()
    }

    /// Whether the set is empty.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The `rank`-th port of the set in increasing order (`rank` < count).
    #[inline]
    pub fn nth(self, rank: u32) -> u8 {
        debug_assert!(rank < self.count());
        let mut bits = self.0;
        for _ in 0..rank {
            bits &= bits - 1;
        }
        bits.trailing_zeros() as u8
    }

    /// The ports of the set in increasing order.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let port = bits.trailing_zeros() as u8;
                bits &= bits - 1;
                port
            })
        })
    }
}

/// The position of an up-port among the switch's up-ports (`0..w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UpPort(pub u8);

/// The local egress queue of one up-port, as the algorithm sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortLoad {
    /// Frames queued.
    pub packets: u32,
    /// Bytes queued.
    pub bytes: u32,
}

/// What the core needs to know about one northbound packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Northbound {
    /// Destination key (paper §4.1 consolidation), `< dest_keys` of the switch.
    pub key: DestKey,
    /// Size class of the frame.
    pub class: SizeClass,
    /// Up-ports that still reach the destination.
    pub valid: PortMask,
    /// Hash of the flow's 5-tuple, read by ECMP only ([`Algorithm::uses_flow_hash`]).
    pub flow_hash: u32,
    /// Frame length in bytes (added to the chosen port's queue for queue-aware algorithms).
    pub frame_len: u32,
}

/// The configuration of one switch's load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbConfig {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Number of up-ports `w` (1..=64).
    pub up_ports: u8,
    /// Number of destination keys (edge switches at an edge switch, pods at an aggregation
    /// switch). Keys are `0..dest_keys`.
    pub dest_keys: u32,
    /// Number of pipes; each pipe's worker owns a [`PipeBalancer`].
    pub pipes: u16,
    /// Per-port buffer in bytes (AR quantizes queues against it).
    pub buffer_bytes: u32,
    /// Seed of every random choice of this switch (pointer starts, hash salt, pipe generators).
    pub seed: u64,
}

impl LbConfig {
    pub(super) fn validate(&self) -> Result<(), LbError> {
        if self.up_ports == 0 || usize::from(self.up_ports) > MAX_PORTS {
            return Err(LbError::UpPorts {
                up_ports: usize::from(self.up_ports),
                max: MAX_PORTS,
            });
        }
        if self.pipes == 0 {
            return Err(LbError::NoPipes);
        }
        Ok(())
    }
}
