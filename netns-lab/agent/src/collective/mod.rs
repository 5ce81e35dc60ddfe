//! Collective plans: which host sends how many bytes to which — pure data, no I/O.
//!
//! A [`Plan`] is written once per run (by the lab, or `ofan-lab agent plan`) and read by every
//! agent, so the agent itself knows nothing about collectives: it sends the flows whose source
//! is its host and acknowledges the flows whose destination is its host.
//!
//! The builders produce flows in the same order, with the same random choices, as the
//! deterministic model (`ofan_model::workload::flows`) when the hosts are a topology's hosts in
//! topology order: host indices of a plan are the model's host indices, and a plan's flow list
//! *is* the model's flow list. So a lab run and a model run of the same seed measure the same
//! traffic matrix.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ofan_model::deps::FlowGraph;
use ofan_topology::Topology;
use serde::{Deserialize, Serialize};

mod matrix;
pub use matrix::parse_matrix;

/// One participant: a host and its address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanHost {
    /// Host name (`h-p0-e0-h0`).
    pub name: String,
    /// The host's address (`10.p.e.(2h+1)` in a lab).
    pub address: Ipv4Addr,
    /// In a multi-plane fabric: the host's address in each plane, plane 0's first (it is
    /// `address`); empty: one plane. A packet sent to plane i's address travels in plane i.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub planes: Vec<Ipv4Addr>,
}

impl PlanHost {
    /// Whether `ip` is one of this host's addresses (in any plane).
    #[must_use]
    pub fn has_address(&self, ip: Ipv4Addr) -> bool {
        ip == self.address || self.planes.contains(&ip)
    }
}

/// One flow: `bytes` from host `src` to host `dst` (indices into [`Plan::hosts`]). Its flow id
/// is its position in [`Plan::flows`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanFlow {
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// Message size in bytes (application bytes, headers not counted).
    pub bytes: u64,
    /// The flow starts once flow `after` — one whose destination is this flow's source — has
    /// arrived in full at its source (a ring step waits for the previous step's chunk);
    /// `None`: at the start. The source's agent keeps the dependency by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u32>,
    /// The flow's phase: an index into [`Plan::phases`] (0 when the plan names none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub phase: u16,
}

impl PlanFlow {
    /// A flow that starts at the start, in phase 0.
    #[must_use]
    pub const fn new(src: u32, dst: u32, bytes: u64) -> Self {
        Self {
            src,
            dst,
            bytes,
            after: None,
            phase: 0,
        }
    }
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
const fn is_zero(phase: &u16) -> bool {
    *phase == 0
}

/// How a plan was made (informational: agents only read the flows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum CollectiveKind {
    /// A seeded random derangement.
    Permutation {
        /// The seed.
        seed: u64,
    },
    /// Every host to every other host.
    AllToAll,
    /// Host i sends to host (i + stride) mod n.
    Ring {
        /// Distance to the next host of the ring.
        stride: u32,
    },
    /// An explicit host-to-host byte matrix.
    Matrix,
    /// A ring collective whose steps wait for the previous step's chunk
    /// ([`ofan_model::collective`]; the seed orders random rings).
    RingCollective {
        /// Which collective, servers, ring order.
        collective: ofan_model::collective::Collective,
        /// The seed.
        seed: u64,
    },
}

impl CollectiveKind {
    /// The name in reports and on the command line (`permutation`, `ring-allreduce`, …).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Permutation { .. } => "permutation",
            Self::AllToAll => "all-to-all",
            Self::Ring { .. } => "ring",
            Self::Matrix => "matrix",
            Self::RingCollective { collective, .. } => collective.kind.name(),
        }
    }
}

/// Which collective to plan: what `agent plan` and the experiments ask for. The permutation's
/// seed is given per plan ([`Collective::plan`]), so repetitions can differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Collective {
    /// Seeded random derangement: every host sends its message to one other host.
    Permutation,
    /// Every host sends its message to every other host, round-robin over its flows.
    AllToAll,
    /// Host i sends its message to host i + stride.
    Ring {
        /// Distance to the next host of the ring.
        stride: u32,
    },
    /// Bytes from a host-to-host matrix (the text of a CSV or JSON file; see [`parse_matrix`]).
    Matrix {
        /// The matrix file's text.
        text: String,
    },
    /// A ring all-reduce, all-gather or reduce-scatter of the model's
    /// ([`ofan_model::collective`]): the message is each host's buffer, and every ring step
    /// waits for the previous step's chunk ([`PlanFlow::after`]).
    RingCollective(ofan_model::collective::Collective),
}

impl Collective {
    /// The name in reports and on the command line.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Permutation => "permutation",
            Self::AllToAll => "all-to-all",
            Self::Ring { .. } => "ring",
            Self::Matrix { .. } => "matrix",
            Self::RingCollective(collective) => collective.kind.name(),
        }
    }

    /// The plan of collective `id` over `hosts`: messages of `bytes` (the matrix's own sizes
    /// for [`Collective::Matrix`]); `seed` chooses the permutation.
    ///
    /// # Errors
    /// See [`PlanError`].
    pub fn plan(
        &self,
        id: u32,
        hosts: Vec<PlanHost>,
        bytes: u64,
        seed: u64,
    ) -> Result<Plan, PlanError> {
        match self {
            Self::Permutation => permutation(id, hosts, bytes, seed),
            Self::AllToAll => all_to_all(id, hosts, bytes),
            Self::Ring { stride } => ring(id, hosts, bytes, *stride),
            Self::Matrix { text } => matrix(id, hosts, text),
            Self::RingCollective(collective) => {
                ring_collective(id, hosts, bytes, *collective, seed)
            }
        }
    }
}

/// Everything the agents of one run share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Collective id, carried in every packet; packets of another id are ignored (stale traffic
    /// of an earlier run). The lab should use a fresh id per run.
    pub collective: u32,
    /// How the flows were made.
    pub kind: CollectiveKind,
    /// The participants, in topology host order.
    pub hosts: Vec<PlanHost>,
    /// The flows; flow id = position.
    pub flows: Vec<PlanFlow>,
    /// The names of the phases the flows belong to ([`PlanFlow::phase`]); empty: one phase,
    /// unnamed (reports give each named phase's completion time).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<String>,
}

/// Why a plan cannot be built or used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A collective needs at least two hosts.
    #[error("a collective needs at least 2 hosts, got {hosts}")]
    TooFewHosts {
        /// Number of hosts given.
        hosts: usize,
    },
    /// Messages must not be empty.
    #[error("message size must be at least 1 byte")]
    EmptyMessage,
    /// A ring stride that maps hosts to themselves.
    #[error("ring stride {stride} is a multiple of the host count {hosts}: every host would send to itself")]
    RingStride {
        /// The stride.
        stride: u32,
        /// Number of hosts.
        hosts: usize,
    },
    /// A malformed matrix.
    #[error("matrix line {line}: {reason}")]
    Matrix {
        /// 1-based line (CSV) or row (JSON) number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A matrix larger than the host list.
    #[error("the matrix is {size}×{size} but there are only {hosts} hosts")]
    MatrixSize {
        /// Rows (= columns) of the matrix.
        size: usize,
        /// Number of hosts.
        hosts: usize,
    },
    /// No flow at all.
    #[error("the collective has no flows")]
    NoFlows,
    /// A flow naming a missing host.
    #[error("flow {flow}: host index {host} out of range (there are {hosts} hosts)")]
    HostOutOfRange {
        /// Flow id.
        flow: usize,
        /// The offending index.
        host: u32,
        /// Number of hosts.
        hosts: usize,
    },
    /// A flow from a host to itself.
    #[error("flow {flow}: source and destination are both host {host}")]
    SelfFlow {
        /// Flow id.
        flow: usize,
        /// The host.
        host: u32,
    },
    /// A flow of zero bytes.
    #[error("flow {flow}: zero bytes")]
    ZeroBytes {
        /// Flow id.
        flow: usize,
    },
    /// Two hosts with one name or one address.
    #[error("host `{name}` ({address}) appears twice (by name or address)")]
    DuplicateHost {
        /// Its name.
        name: String,
        /// Its address.
        address: Ipv4Addr,
    },
    /// More flows than flow ids.
    #[error("{flows} flows: flow ids are 32-bit")]
    TooManyFlows {
        /// Number of flows.
        flows: usize,
    },
    /// A dependency the agents cannot keep: on a missing flow or on itself, on a flow that
    /// does not arrive at this flow's source, or a cycle.
    #[error("flow {flow}: {reason}")]
    Dependency {
        /// Flow id.
        flow: usize,
        /// What is wrong.
        reason: String,
    },
    /// A phase index with no name in [`Plan::phases`].
    #[error("flow {flow}: phase {phase}, but the plan names {phases} phases")]
    Phase {
        /// Flow id.
        flow: usize,
        /// Its phase.
        phase: u16,
        /// Phases named.
        phases: usize,
    },
    /// A model workload that is no plan (its error, as the model gave it).
    #[error("{0}")]
    Model(String),
    /// Not valid plan JSON.
    #[error("plan JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Plan {
    /// Parses and validates a plan.
    ///
    /// # Errors
    /// [`PlanError::Json`] for malformed JSON, or any [`validate`](Self::validate) error.
    pub fn from_json(text: &str) -> Result<Self, PlanError> {
        let plan: Plan = serde_json::from_str(text)?;
        plan.validate()?;
        Ok(plan)
    }

    /// The plan as pretty JSON.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan always serializes")
    }

    /// Checks that hosts are unique and every flow joins two distinct known hosts with at
    /// least one byte.
    ///
    /// # Errors
    /// The first problem found.
    pub fn validate(&self) -> Result<(), PlanError> {
        let hosts = self.hosts.len();
        let mut names = BTreeSet::new();
        let mut addresses = BTreeSet::new();
        for host in &self.hosts {
            if !names.insert(host.name.as_str()) || !addresses.insert(host.address) {
                return Err(PlanError::DuplicateHost {
                    name: host.name.clone(),
                    address: host.address,
                });
            }
        }
        if u32::try_from(self.flows.len()).is_err() {
            return Err(PlanError::TooManyFlows {
                flows: self.flows.len(),
            });
        }
        for (id, flow) in self.flows.iter().enumerate() {
            for host in [flow.src, flow.dst] {
                if host as usize >= hosts {
                    return Err(PlanError::HostOutOfRange {
                        flow: id,
                        host,
                        hosts,
                    });
                }
            }
            if flow.src == flow.dst {
                return Err(PlanError::SelfFlow {
                    flow: id,
                    host: flow.src,
                });
            }
            if flow.bytes == 0 {
                return Err(PlanError::ZeroBytes { flow: id });
            }
            if usize::from(flow.phase) >= self.phases.len().max(1) {
                return Err(PlanError::Phase {
                    flow: id,
                    phase: flow.phase,
                    phases: self.phases.len(),
                });
            }
            if let Some(after) = flow.after {
                let dependency = |reason: &str| PlanError::Dependency {
                    flow: id,
                    reason: format!("starts after flow {after}, {reason}"),
                };
                match self.flows.get(after as usize) {
                    None => return Err(dependency("which does not exist")),
                    Some(_) if after as usize == id => return Err(dependency("itself")),
                    Some(before) if before.dst != flow.src => return Err(dependency(
                        "which does not arrive at this flow's source (its agent could not see it)",
                    )),
                    Some(_) => {}
                }
            }
        }
        self.check_acyclic()
    }

    /// Refuses a cycle of [`PlanFlow::after`] dependencies (its flows would never start).
    fn check_acyclic(&self) -> Result<(), PlanError> {
        // Every flow waits for at most one other: follow each chain once, marking the flows
        // seen on it (1) and the ones known to start (2).
        let mut state = vec![0u8; self.flows.len()];
        let mut chain = Vec::new();
        for id in 0..self.flows.len() {
            let mut at = id;
            while state[at] == 0 {
                state[at] = 1;
                chain.push(at);
                match self.flows[at].after {
                    Some(after) => at = after as usize,
                    None => break,
                }
            }
            // Back on this chain (not at its end, whose flow waits for nothing): a cycle.
            if state[at] == 1 && self.flows[at].after.is_some() {
                return Err(PlanError::Dependency {
                    flow: at,
                    reason: "its dependencies form a cycle: it never starts".to_owned(),
                });
            }
            for &seen in &chain {
                state[seen] = 2;
            }
            chain.clear();
        }
        Ok(())
    }

    /// Whether some flow waits for another ([`PlanFlow::after`]).
    #[must_use]
    pub fn has_dependencies(&self) -> bool {
        self.flows.iter().any(|flow| flow.after.is_some())
    }

    /// Index of the host called `name`.
    #[must_use]
    pub fn host_index(&self, name: &str) -> Option<u32> {
        self.hosts
            .iter()
            .position(|host| host.name == name)
            .map(|index| index as u32)
    }

    /// Total bytes of all flows.
    #[must_use]
    pub fn total_bytes(&self) -> u64 {
        self.flows.iter().map(|flow| flow.bytes).sum()
    }
}

/// The hosts of `topology`, in topology order (so plan host indices are model host indices).
#[must_use]
pub fn topology_hosts(topology: &Topology) -> Vec<PlanHost> {
    topology
        .hosts()
        .iter()
        .map(|node| PlanHost {
            name: node.name.clone(),
            address: node.loopback,
            planes: if node.ports.len() > 1 {
                node.ports.iter().map(|port| port.address).collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

fn check_hosts(hosts: &[PlanHost], bytes: u64) -> Result<u32, PlanError> {
    if hosts.len() < 2 {
        return Err(PlanError::TooFewHosts { hosts: hosts.len() });
    }
    if bytes == 0 {
        return Err(PlanError::EmptyMessage);
    }
    u32::try_from(hosts.len()).map_err(|_| PlanError::TooManyFlows { flows: hosts.len() })
}

fn finish(
    collective: u32,
    kind: CollectiveKind,
    hosts: Vec<PlanHost>,
    flows: Vec<PlanFlow>,
) -> Result<Plan, PlanError> {
    if flows.is_empty() {
        return Err(PlanError::NoFlows);
    }
    let plan = Plan {
        collective,
        kind,
        hosts,
        flows,
        phases: Vec::new(),
    };
    plan.validate()?;
    Ok(plan)
}

/// A random permutation without fixed points: host i sends `bytes` to host π(i), π(i) ≠ i.
/// The same `seed` gives the same derangement, and the same one as the model's.
///
/// # Errors
/// Fewer than two hosts, empty messages, duplicate hosts.
pub fn permutation(
    collective: u32,
    hosts: Vec<PlanHost>,
    bytes: u64,
    seed: u64,
) -> Result<Plan, PlanError> {
    let n = check_hosts(&hosts, bytes)?;
    let flows = ofan_model::workload::permutation_destinations(n, seed)
        .into_iter()
        .enumerate()
        .map(|(src, dst)| PlanFlow::new(src as u32, dst, bytes))
        .collect();
    finish(
        collective,
        CollectiveKind::Permutation { seed },
        hosts,
        flows,
    )
}

/// Every host sends `bytes` to every other host (source-major, destinations ascending).
///
/// # Errors
/// Fewer than two hosts, empty messages, duplicate hosts.
pub fn all_to_all(collective: u32, hosts: Vec<PlanHost>, bytes: u64) -> Result<Plan, PlanError> {
    let n = check_hosts(&hosts, bytes)?;
    let flows = (0..n)
        .flat_map(|src| {
            (0..n)
                .filter(move |&dst| dst != src)
                .map(move |dst| PlanFlow::new(src, dst, bytes))
        })
        .collect();
    finish(collective, CollectiveKind::AllToAll, hosts, flows)
}

/// FSDP-style ring: host i sends `bytes` to host (i + stride) mod n.
///
/// # Errors
/// Fewer than two hosts, empty messages, a stride that is a multiple of n, duplicate hosts.
pub fn ring(
    collective: u32,
    hosts: Vec<PlanHost>,
    bytes: u64,
    stride: u32,
) -> Result<Plan, PlanError> {
    let n = check_hosts(&hosts, bytes)?;
    if stride % n == 0 {
        return Err(PlanError::RingStride {
            stride,
            hosts: hosts.len(),
        });
    }
    let flows = (0..n)
        .map(|src| {
            let dst = (u64::from(src) + u64::from(stride)) % u64::from(n);
            PlanFlow::new(src, dst as u32, bytes)
        })
        .collect();
    finish(collective, CollectiveKind::Ring { stride }, hosts, flows)
}

/// An explicit byte matrix (see [`parse_matrix`]): entry (i, j) is the bytes host i sends to
/// host j. An m×m matrix with m ≤ n uses the first m hosts; the diagonal (traffic a host keeps)
/// and zero entries make no flow. Flows are row-major.
///
/// # Errors
/// A malformed or too large matrix, no non-zero off-diagonal entry, duplicate hosts.
pub fn matrix(collective: u32, hosts: Vec<PlanHost>, text: &str) -> Result<Plan, PlanError> {
    let rows = parse_matrix(text)?;
    if rows.len() > hosts.len() {
        return Err(PlanError::MatrixSize {
            size: rows.len(),
            hosts: hosts.len(),
        });
    }
    let flows = rows
        .iter()
        .enumerate()
        .flat_map(|(src, row)| {
            row.iter()
                .enumerate()
                .filter(move |&(dst, &bytes)| dst != src && bytes > 0)
                .map(move |(dst, &bytes)| PlanFlow::new(src as u32, dst as u32, bytes))
        })
        .collect();
    finish(collective, CollectiveKind::Matrix, hosts, flows)
}

/// A ring collective of the model's over `hosts`, `bytes` per host (its buffer): the model's
/// flows in the model's order ([`ofan_model::collective::Collective::graph`], same `seed`),
/// each ring step after the previous step's chunk has arrived, every flow in its phase.
///
/// # Errors
/// Fewer than two hosts or whole servers, empty messages or chunks, duplicate hosts.
pub fn ring_collective(
    collective_id: u32,
    hosts: Vec<PlanHost>,
    bytes: u64,
    collective: ofan_model::collective::Collective,
    seed: u64,
) -> Result<Plan, PlanError> {
    let n = check_hosts(&hosts, bytes)?;
    let graph = collective
        .graph(n, bytes, seed)
        .map_err(|e| PlanError::Model(e.to_string()))?;
    let plan = Plan {
        collective: collective_id,
        kind: CollectiveKind::RingCollective { collective, seed },
        hosts,
        flows: agent_dependencies(&graph)?,
        phases: graph.phases,
    };
    plan.validate()?;
    Ok(plan)
}

/// The flows of a model flow graph whose dependencies agents can keep by themselves
/// ([`FlowGraph::arrival_predecessors`]: each flow waits for at most one flow's arrival at its
/// source). Other graphs (htsim's barriers, send-done triggers, timed starts) would need the
/// agents to tell each other; they are refused, naming the first obstacle.
fn agent_dependencies(graph: &FlowGraph) -> Result<Vec<PlanFlow>, PlanError> {
    let after = graph
        .arrival_predecessors()
        .map_err(|error| PlanError::Model(error.to_string()))?;
    Ok(graph
        .flows
        .iter()
        .zip(after)
        .map(|(flow, after)| PlanFlow {
            after,
            phase: flow.phase,
            ..PlanFlow::new(flow.spec.src, flow.spec.dst, flow.spec.bytes)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofan_model::{workload, Workload};

    fn hosts(n: u32) -> Vec<PlanHost> {
        (0..n)
            .map(|i| PlanHost {
                name: format!("h{i}"),
                planes: Vec::new(),
                address: Ipv4Addr::new(10, 0, (i / 128) as u8, (2 * (i % 128) + 1) as u8),
            })
            .collect()
    }

    #[test]
    fn permutation_is_a_derangement_and_seeds_reproduce() {
        for n in [2, 3, 5, 16, 128] {
            for seed in 0..20 {
                let plan = permutation(1, hosts(n), 1000, seed).unwrap();
                assert_eq!(plan.flows.len(), n as usize);
                let mut dsts: Vec<u32> = plan.flows.iter().map(|f| f.dst).collect();
                for (src, flow) in plan.flows.iter().enumerate() {
                    assert_eq!(flow.src, src as u32);
                    assert_ne!(flow.src, flow.dst, "fixed point, n={n} seed={seed}");
                }
                dsts.sort_unstable();
                assert_eq!(dsts, (0..n).collect::<Vec<_>>(), "not a permutation");
                assert_eq!(plan.total_bytes(), u64::from(n) * 1000);
                assert_eq!(plan, permutation(1, hosts(n), 1000, seed).unwrap());
            }
        }
        let a = permutation(1, hosts(16), 1, 1).unwrap();
        let b = permutation(1, hosts(16), 1, 2).unwrap();
        assert_ne!(a.flows, b.flows, "different seeds should differ");
    }

    #[test]
    fn a_ring_all_reduce_is_the_models_graph_with_each_step_after_the_previous_chunk() {
        use ofan_model::collective::{Collective as Ring, CollectiveKind as Kind, RingOrder};
        use ofan_model::deps::FlowStart;
        let topology = Topology::fat_tree(4).unwrap();
        let ring = Ring {
            kind: Kind::AllReduce,
            gpus_per_server: 2,
            order: RingOrder::Random,
        };
        let plan = ring_collective(3, topology_hosts(&topology), 16 * 1000, ring, 5).unwrap();
        let graph = ring.graph(16, 16 * 1000, 5).unwrap();
        assert_eq!(plan.phases, ["reduce-scatter", "all-gather"]);
        assert_eq!(plan.flows.len(), graph.flows.len());
        assert!(plan.has_dependencies());
        for (ours, theirs) in plan.flows.iter().zip(&graph.flows) {
            let spec = theirs.spec;
            assert_eq!(
                (ours.src, ours.dst, ours.bytes),
                (spec.src, spec.dst, spec.bytes)
            );
            assert_eq!(ours.phase, theirs.phase);
            match (ours.after, theirs.start) {
                (None, FlowStart::At(0)) => {}
                (Some(after), FlowStart::Trigger(trigger)) => {
                    let before = &graph.flows[after as usize];
                    assert_eq!(before.on_received, Some(trigger));
                    assert_eq!(before.spec.dst, ours.src, "the chunk arrives at the sender");
                }
                other => panic!("{other:?}"),
            }
        }
        // 2 rings × 8 servers start at once; every later step waits.
        assert_eq!(plan.flows.iter().filter(|f| f.after.is_none()).count(), 16);
        assert_eq!(Plan::from_json(&plan.to_json()).unwrap(), plan);
        // Seeds order random rings: the same seed, the same rings.
        assert_eq!(
            plan,
            ring_collective(3, topology_hosts(&topology), 16 * 1000, ring, 5).unwrap()
        );
    }

    #[test]
    fn dependencies_the_agents_cannot_keep_are_refused() {
        let base = permutation(1, hosts(4), 1000, 1).unwrap();
        let with = |edit: &dyn Fn(&mut Plan)| {
            let mut plan = base.clone();
            edit(&mut plan);
            plan.validate()
        };
        // A flow whose chunk arrives at a flow's source may gate it.
        let feeder = |plan: &Plan, id: usize| {
            plan.flows
                .iter()
                .position(|f| f.dst == plan.flows[id].src)
                .unwrap() as u32
        };
        with(&|plan| plan.flows[0].after = Some(feeder(plan, 0))).unwrap();
        let err = with(&|plan| plan.flows[0].after = Some(99)).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let err = with(&|plan| plan.flows[0].after = Some(0)).unwrap_err();
        assert!(err.to_string().contains("itself"), "{err}");
        let err = with(&|plan| {
            let src = plan.flows[0].src;
            let wrong = (1..plan.flows.len()).find(|&id| plan.flows[id].dst != src);
            plan.flows[0].after = wrong.map(|id| id as u32);
        })
        .unwrap_err();
        assert!(err.to_string().contains("does not arrive"), "{err}");
        // Two flows each waiting for the other never start.
        let mut cycle = ring(1, hosts(2), 1000, 1).unwrap();
        cycle.flows[0].after = Some(1);
        cycle.flows[1].after = Some(0);
        let err = cycle.validate().unwrap_err();
        assert!(err.to_string().contains("cycle"), "{err}");
        let err = with(&|plan| plan.flows[1].phase = 1).unwrap_err();
        assert!(matches!(err, PlanError::Phase { flow: 1, .. }), "{err}");
        // Plans written before dependencies existed still read.
        let old = r#"{"collective":1,"kind":{"type":"all-to-all"},
            "hosts":[{"name":"a","address":"10.0.0.1"},{"name":"b","address":"10.0.0.3"}],
            "flows":[{"src":0,"dst":1,"bytes":5}]}"#;
        assert_eq!(
            Plan::from_json(old).unwrap().flows[0],
            PlanFlow::new(0, 1, 5)
        );
    }

    #[test]
    fn builders_match_the_model_flow_for_flow() {
        let topology = Topology::fat_tree(4).unwrap();
        let cases: [(Workload, Plan); 3] = [
            (
                Workload::Permutation,
                permutation(9, topology_hosts(&topology), 4096, 7).unwrap(),
            ),
            (
                Workload::AllToAll,
                all_to_all(9, topology_hosts(&topology), 4096).unwrap(),
            ),
            (
                Workload::Ring { stride: 3 },
                ring(9, topology_hosts(&topology), 4096, 3).unwrap(),
            ),
        ];
        for (workload, plan) in cases {
            let model = workload::flows(&topology, &workload, 4096, 7).unwrap();
            let ours: Vec<(u32, u32, u64)> =
                plan.flows.iter().map(|f| (f.src, f.dst, f.bytes)).collect();
            let theirs: Vec<(u32, u32, u64)> =
                model.iter().map(|f| (f.src, f.dst, f.bytes)).collect();
            assert_eq!(ours, theirs, "{workload:?}");
        }
    }

    #[test]
    fn all_to_all_and_ring_sizes_add_up() {
        let plan = all_to_all(1, hosts(6), 100).unwrap();
        assert_eq!(plan.flows.len(), 30);
        assert_eq!(plan.total_bytes(), 3000);
        for host in 0..6 {
            assert_eq!(plan.flows.iter().filter(|f| f.src == host).count(), 5);
            assert_eq!(plan.flows.iter().filter(|f| f.dst == host).count(), 5);
        }
        let plan = ring(1, hosts(6), 100, 2).unwrap();
        let pairs: Vec<(u32, u32)> = plan.flows.iter().map(|f| (f.src, f.dst)).collect();
        assert_eq!(pairs, [(0, 2), (1, 3), (2, 4), (3, 5), (4, 0), (5, 1)]);
        assert!(matches!(
            ring(1, hosts(6), 100, 12),
            Err(PlanError::RingStride { .. })
        ));
        assert!(matches!(
            permutation(1, hosts(1), 100, 0),
            Err(PlanError::TooFewHosts { .. })
        ));
        assert!(matches!(
            all_to_all(1, hosts(3), 0),
            Err(PlanError::EmptyMessage)
        ));
    }

    #[test]
    fn matrix_from_csv_and_json() {
        let csv = "# MoE dispatch, bytes\nsrc0,src1,src2\n0, 10, 0\n5,0,7.4\n\n1 2 3\n";
        let plan = matrix(3, hosts(4), csv).unwrap();
        let flows: Vec<(u32, u32, u64)> =
            plan.flows.iter().map(|f| (f.src, f.dst, f.bytes)).collect();
        assert_eq!(
            flows,
            [(0, 1, 10), (1, 0, 5), (1, 2, 7), (2, 0, 1), (2, 1, 2)]
        );
        assert_eq!(plan.kind, CollectiveKind::Matrix);

        let json = "[[0, 10, 0], [5, 0, 7.4], [1, 2, 3]]";
        assert_eq!(matrix(3, hosts(4), json).unwrap(), plan);

        for (bad, line) in [
            ("0,1\n1\n", 2),
            ("0,1\n1,x\n", 2),
            ("0,-1\n1,0\n", 1),
            ("[[0, 1], [1]]", 2),
            ("[[0, \"a\"], [1, 0]]", 1),
        ] {
            match matrix(1, hosts(4), bad) {
                Err(PlanError::Matrix { line: got, .. }) => assert_eq!(got, line, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(matches!(
            matrix(1, hosts(2), "0,1,1\n1,0,1\n1,1,0"),
            Err(PlanError::MatrixSize { size: 3, hosts: 2 })
        ));
        assert!(matches!(
            matrix(1, hosts(2), "5,0\n0,5"),
            Err(PlanError::NoFlows)
        ));
    }

    #[test]
    fn json_round_trip_and_validation() {
        let plan = permutation(5, hosts(4), 1 << 20, 3).unwrap();
        assert_eq!(Plan::from_json(&plan.to_json()).unwrap(), plan);

        let mut bad = plan.clone();
        bad.flows[0].dst = 9;
        assert!(matches!(
            Plan::from_json(&bad.to_json()),
            Err(PlanError::HostOutOfRange {
                flow: 0,
                host: 9,
                ..
            })
        ));
        let mut bad = plan.clone();
        bad.flows[1].dst = bad.flows[1].src;
        assert!(matches!(
            bad.validate(),
            Err(PlanError::SelfFlow { flow: 1, .. })
        ));
        let mut bad = plan.clone();
        bad.hosts[1].address = bad.hosts[0].address;
        assert!(matches!(
            bad.validate(),
            Err(PlanError::DuplicateHost { .. })
        ));
        assert_eq!(plan.host_index("h2"), Some(2));
        assert_eq!(plan.host_index("nope"), None);
    }
}
