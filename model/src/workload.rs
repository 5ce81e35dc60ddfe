//! Traffic matrices and failure samples, drawn deterministically from a seed.

use std::collections::BTreeMap;

use ofan_dataplane::lb::{mix64, LbRng};
use ofan_topology::{FailedLinks, LinkId, Role, Topology};

use crate::config::{FlowSpec, Workload};
use crate::deps::FlowGraph;
use crate::error::ModelError;

/// Salt that separates the workload's random stream from the others of a run.
const WORKLOAD_SALT: u64 = 0x776f_726b_6c6f_6164;
/// Salt of the failure sample stream.
const FAILURE_SALT: u64 = 0x6661_696c_7572_6573;

/// The flows of `workload` on `topology`, each of `message_bytes` unless the matrix says
/// otherwise, in a deterministic order. Self-flows and empty flows are dropped; a pair listed
/// twice in a matrix becomes one flow carrying the sum.
///
/// # Errors
/// [`ModelError::HostOutOfRange`] for a matrix flow naming a missing host,
/// [`ModelError::EmptyWorkload`] when no flow remains.
pub fn flows(
    topology: &Topology,
    workload: &Workload,
    message_bytes: u64,
    seed: u64,
) -> Result<Vec<FlowSpec>, ModelError> {
    let hosts = u32::try_from(topology.hosts().len()).expect("at most 2^32 hosts");
    let mut rng = LbRng::new(mix64(seed ^ WORKLOAD_SALT));
    let pairs: Vec<(u32, u32)> = match workload {
        Workload::Permutation => {
            let perm = derangement(hosts, &mut rng);
            (0..hosts).zip(perm).collect()
        }
        Workload::InterPodPermutation => {
            let group = |host: u32| -> u32 {
                let node = &topology.hosts()[host as usize];
                // A multi-plane fabric's groups are its plane's (the same in every plane).
                match topology.kind().plane_kind() {
                    ofan_topology::TopologyKind::FatTree { .. }
                    | ofan_topology::TopologyKind::Dragonfly { .. } => {
                        u32::from(node.pod.expect("hosts have a pod"))
                    }
                    ofan_topology::TopologyKind::LeafSpine { .. } => topology.host_edge(node.id).0,
                    ofan_topology::TopologyKind::MultiPlane { .. } => {
                        unreachable!("plane_kind is a single plane")
                    }
                }
            };
            let groups: Vec<u32> = (0..hosts).map(group).collect();
            let perm = cross_group_permutation(&groups, &mut rng);
            (0..hosts).zip(perm).collect()
        }
        Workload::AllToAll => (0..hosts)
            .flat_map(|src| {
                (0..hosts)
                    .filter(move |&dst| dst != src)
                    .map(move |dst| (src, dst))
            })
            .collect(),
        Workload::Ring { stride } => (0..hosts)
            .map(|src| {
                (
                    src,
                    ((u64::from(src) + u64::from(*stride)) % u64::from(hosts)) as u32,
                )
            })
            .collect(),
        Workload::Matrix { flows } => {
            let mut merged: BTreeMap<(u32, u32), u64> = BTreeMap::new();
            for flow in flows {
                if flow.src >= hosts || flow.dst >= hosts {
                    return Err(ModelError::HostOutOfRange {
                        src: flow.src,
                        dst: flow.dst,
                        hosts,
                    });
                }
                *merged.entry((flow.src, flow.dst)).or_default() += flow.bytes;
            }
            let specs: Vec<FlowSpec> = merged
                .into_iter()
                .filter(|&((src, dst), bytes)| src != dst && bytes > 0)
                .map(|((src, dst), bytes)| FlowSpec { src, dst, bytes })
                .collect();
            return non_empty(specs);
        }
        Workload::Moe { moe } => return non_empty(moe.flows(hosts, seed)?),
        Workload::Htsim { .. } | Workload::Collective { .. } | Workload::Fsdp { .. } => {
            let graph = graph(topology, workload, message_bytes, seed)?
                .expect("dependent workloads have a graph");
            return non_empty(graph.specs());
        }
    };
    non_empty(
        pairs
            .into_iter()
            .filter(|(src, dst)| src != dst)
            .map(|(src, dst)| FlowSpec {
                src,
                dst,
                bytes: message_bytes,
            })
            .collect(),
    )
}

/// The flows and triggers of a workload with dependencies (`None` for the others, whose
/// flows all start at t = 0): an htsim matrix's graph, checked against the topology, a ring
/// collective's or an FSDP backward pass's over every host.
///
/// # Errors
/// [`ModelError::HostOutOfRange`] for an htsim flow naming a missing host, and the
/// collective's and FSDP's errors ([`crate::collective::Collective::graph`],
/// [`crate::fsdp::Fsdp::graph`]).
pub fn graph(
    topology: &Topology,
    workload: &Workload,
    message_bytes: u64,
    seed: u64,
) -> Result<Option<FlowGraph>, ModelError> {
    let hosts = u32::try_from(topology.hosts().len()).expect("at most 2^32 hosts");
    match workload {
        Workload::Htsim { graph, .. } => {
            if let Some(flow) = graph
                .flows
                .iter()
                .find(|flow| flow.spec.src >= hosts || flow.spec.dst >= hosts)
            {
                return Err(ModelError::HostOutOfRange {
                    src: flow.spec.src,
                    dst: flow.spec.dst,
                    hosts,
                });
            }
            Ok(Some(graph.clone()))
        }
        Workload::Collective { collective } => {
            Ok(Some(collective.graph(hosts, message_bytes, seed)?))
        }
        Workload::Fsdp { fsdp } => Ok(Some(fsdp.graph(hosts, seed)?)),
        _ => Ok(None),
    }
}

fn non_empty(flows: Vec<FlowSpec>) -> Result<Vec<FlowSpec>, ModelError> {
    if flows.is_empty() {
        Err(ModelError::EmptyWorkload)
    } else {
        Ok(flows)
    }
}

/// Parses a traffic-matrix file: one flow per line, `src dst [bytes]` (host indices, bytes
/// defaulting to `default_bytes`); blank lines and `#` comments are ignored.
///
/// # Errors
/// [`ModelError::Matrix`] for a malformed line.
pub fn parse_matrix(text: &str, default_bytes: u64) -> Result<Vec<FlowSpec>, ModelError> {
    let mut flows = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let error = |reason: String| ModelError::Matrix {
            line: number + 1,
            reason,
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !(2..=3).contains(&fields.len()) {
            return Err(error(format!(
                "expected `src dst [bytes]`, found {} fields",
                fields.len()
            )));
        }
        let parse = |field: &str| {
            field
                .parse::<u64>()
                .map_err(|e| error(format!("`{field}`: {e}")))
        };
        let host = |field: &str| {
            u32::try_from(parse(field)?).map_err(|_| error(format!("`{field}`: not a host index")))
        };
        flows.push(FlowSpec {
            src: host(fields[0])?,
            dst: host(fields[1])?,
            bytes: match fields.get(2) {
                Some(field) => parse(field)?,
                None => default_bytes,
            },
        });
    }
    Ok(flows)
}

/// The permutation workload of `seed` over `n` hosts: host i sends to `result[i]`, a uniformly
/// random derangement. The lab's agent plans call this, so a lab run and a model run of the
/// same seed carry the same traffic.
#[must_use]
pub fn permutation_destinations(n: u32, seed: u64) -> Vec<u32> {
    derangement(n, &mut LbRng::new(mix64(seed ^ WORKLOAD_SALT)))
}

/// A uniformly random permutation of `0..n` without fixed points (n ≥ 2), by rejection.
fn derangement(n: u32, rng: &mut LbRng) -> Vec<u32> {
    let mut perm: Vec<u32> = (0..n).collect();
    if n < 2 {
        return perm;
    }
    loop {
        shuffle(&mut perm, rng);
        if perm.iter().enumerate().all(|(i, &p)| i as u32 != p) {
            return perm;
        }
        perm.sort_unstable();
    }
}

/// A random permutation mapping every index to one of another group (groups must leave that
/// possible: no group holds more than half the indices). Shuffles, then repairs conflicts by
/// random swaps that fix both ends.
fn cross_group_permutation(groups: &[u32], rng: &mut LbRng) -> Vec<u32> {
    let n = groups.len();
    let mut perm: Vec<u32> = (0..n as u32).collect();
    shuffle(&mut perm, rng);
    let conflicts = |perm: &[u32], i: usize| groups[i] == groups[perm[i] as usize];
    for _round in 0..1000 {
        let mut clean = true;
        for i in 0..n {
            if !conflicts(&perm, i) {
                continue;
            }
            clean = false;
            for _try in 0..(64 * n) {
                let j = rng.below(n as u32) as usize;
                if groups[perm[j] as usize] != groups[i] && groups[perm[i] as usize] != groups[j] {
                    perm.swap(i, j);
                    break;
                }
            }
        }
        if clean {
            break;
        }
    }
    perm
}

fn shuffle(values: &mut [u32], rng: &mut LbRng) {
    for i in (1..values.len()).rev() {
        let j = rng.below(i as u32 + 1) as usize;
        values.swap(i, j);
    }
}

/// Fails each switch-to-switch link (edge–aggregation, aggregation–core; leaf–spine)
/// independently with `probability`, from the `attempt`-th sample of `seed`'s stream.
#[must_use]
pub fn sample_failures(
    topology: &Topology,
    probability: f64,
    seed: u64,
    attempt: u32,
) -> FailedLinks {
    let mut rng = LbRng::new(mix64(seed ^ FAILURE_SALT) ^ mix64(u64::from(attempt)));
    // 53 random bits against the probability: exact and platform-independent.
    let threshold = (probability * (1u64 << 53) as f64) as u64;
    topology
        .links()
        .iter()
        .filter(|link| topology.role(link.a.0) != Role::Host)
        .filter(|_| rng.next_u64() >> 11 < threshold)
        .map(|link| link.id)
        .collect()
}

/// Checks explicit failed link ids: only switch-to-switch links may fail.
///
/// # Errors
/// [`ModelError::NotASwitchLink`] for a host link or an id past the end.
pub fn explicit_failures(topology: &Topology, links: &[u32]) -> Result<FailedLinks, ModelError> {
    let first = topology.hosts().len() as u32;
    let end = topology.links().len() as u32;
    links
        .iter()
        .map(|&link| {
            if (first..end).contains(&link) {
                Ok(LinkId(link))
            } else {
                Err(ModelError::NotASwitchLink { link, first, end })
            }
        })
        .collect()
}
