//! htsim's connection-matrix files (`.cm`), read into a [`FlowGraph`].
//!
//! The grammar is the one htsim's loader accepts (`ConnectionMatrix::load` in
//! `sim/datacenter/connection_matrix.cpp` of Broadcom/csg-htsim), token by token:
//!
//! ```text
//! Nodes 16                  header: the hosts the file was written for
//! Connections 3             header: the number of connection lines
//! Triggers 2                header: the number of `trigger` lines (default 0)
//! 0->1 id 1 start 0 size 1048576 send_done_trigger 1
//! 1->2 id 2 trigger 1 size 1048576 recv_done_trigger 2
//! 2->3 id 3 trigger 2 size 1048576
//! trigger id 1 oneshot
//! trigger id 2 barrier count 1
//! ```
//!
//! A connection `SRC->DST` takes, in any order: `start T` (picoseconds, as htsim's loader
//! reads it — its own `save` writes microseconds, which it then reads back as picoseconds),
//! `size BYTES`, `id I` (non-zero, unique; needed by a triggered flow), `trigger T` (start
//! when trigger T fires, instead of `start`), `send_done_trigger U` (activate U once every
//! byte is acknowledged), `recv_done_trigger U` (once the receiver has every byte) and
//! `prio P` (accepted, not modelled). A trigger line is `trigger id I` with one of `oneshot`,
//! `multishot`, `barrier` and, for a barrier, `count C`. Blank lines and lines starting with
//! `#` are skipped.
//!
//! Refused, each with its line: a missing or zero `size` (htsim's endless flow: a collective
//! here must end), `addon`, `failure` lines (use `--fail-links`/`--fail-at`), counts that do
//! not match the header, a host index not below `Nodes`, a flow from a host to itself, and
//! every dependency htsim would abort on or that would keep a flow from starting
//! ([`FlowGraph::check`]).

use std::collections::BTreeMap;

use crate::config::FlowSpec;
use crate::deps::{DependentFlow, FlowGraph, FlowStart, GraphError, Trigger, TriggerKind};
use crate::error::ModelError;

/// An htsim connection matrix: the host count of its header and its flows with their
/// dependencies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtsimMatrix {
    /// `Nodes N`.
    pub nodes: u32,
    /// The connections and triggers.
    pub graph: FlowGraph,
}

/// Whether `text` is in htsim's format: its first line that is not blank or a comment starts
/// with one of htsim's header words or a connection.
#[must_use]
pub fn is_htsim(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .is_some_and(|line| {
            let first = line.split_whitespace().next().unwrap_or("");
            matches!(first, "Nodes" | "Connections" | "Triggers" | "Failures")
                || first.contains("->")
        })
}

/// A trigger as the file describes it, while reading.
struct TriggerDraft {
    id: u32,
    kind: Option<TriggerKind>,
    /// Line of its `trigger id` line, or of the first flow naming it.
    line: usize,
}

/// Reads an htsim connection matrix.
///
/// # Errors
/// [`ModelError::Matrix`] naming the line and what is wrong with it.
pub fn parse(text: &str) -> Result<HtsimMatrix, ModelError> {
    let mut nodes = None;
    let mut declared_connections = None;
    let mut declared_triggers = 0u32;
    let mut declared_failures = 0u32;
    let mut in_body = false;
    let mut flows = Vec::new();
    let mut flow_lines = Vec::new();
    let mut flow_ids: BTreeMap<u32, usize> = BTreeMap::new();
    let mut triggers: Vec<TriggerDraft> = Vec::new();
    let mut trigger_index: BTreeMap<u32, u32> = BTreeMap::new();
    let mut trigger_lines = 0u32;
    let mut last_line = 0;

    for (number, line) in text.lines().enumerate() {
        let number = number + 1;
        last_line = number;
        let tokens: Vec<&str> = line.split_whitespace().collect();
        let Some(&first) = tokens.first() else {
            continue;
        };
        if first.starts_with('#') {
            continue;
        }
        let error = |reason: String| ModelError::Matrix {
            line: number,
            reason,
        };
        let number_at = |position: usize, what: &str| -> Result<u64, ModelError> {
            let token = tokens.get(position).ok_or_else(|| {
                error(format!("`{}` needs a value ({what})", tokens[position - 1]))
            })?;
            token
                .parse::<u64>()
                .map_err(|e| error(format!("`{} {token}`: {e} ({what})", tokens[position - 1])))
        };
        let id_at = |position: usize, what: &str| -> Result<u32, ModelError> {
            let value = number_at(position, what)?;
            match u32::try_from(value) {
                Ok(0) => Err(error(format!(
                    "`{} 0`: ids start at 1 (htsim refuses 0)",
                    tokens[position - 1]
                ))),
                Ok(id) => Ok(id),
                Err(_) => Err(error(format!(
                    "`{} {value}`: too large",
                    tokens[position - 1]
                ))),
            }
        };
        match first {
            "Nodes" | "Connections" | "Triggers" | "Failures" => {
                if in_body {
                    return Err(error(format!(
                        "header line `{first}` after the first connection or trigger"
                    )));
                }
                if tokens.len() != 2 {
                    return Err(error(format!("expected `{first} N`")));
                }
                let value = u32::try_from(number_at(1, "a count")?)
                    .map_err(|_| error(format!("`{first}`: too large")))?;
                match first {
                    "Nodes" => nodes = Some(value),
                    "Connections" => declared_connections = Some(value),
                    "Triggers" => declared_triggers = value,
                    _ => declared_failures = value,
                }
            }
            "trigger" => {
                in_body = true;
                trigger_lines += 1;
                let mut id = None;
                let mut kind = None;
                let mut count = None;
                let mut position = 1;
                while position < tokens.len() {
                    match tokens[position] {
                        "id" => {
                            position += 1;
                            id = Some(id_at(position, "the trigger's id")?);
                        }
                        "count" => {
                            position += 1;
                            count = Some(
                                u32::try_from(number_at(position, "activations")?)
                                    .map_err(|_| error("`count`: too large".into()))?,
                            );
                        }
                        word @ ("oneshot" | "multishot" | "barrier") => {
                            if kind.is_some() {
                                return Err(error(format!("`{word}`: the kind is given twice")));
                            }
                            kind = Some(word);
                        }
                        other => {
                            return Err(error(format!(
                                "unknown word `{other}` in a trigger (expected id, oneshot, \
                                 multishot, barrier, count)"
                            )));
                        }
                    }
                    position += 1;
                }
                let id = id.ok_or_else(|| error("a trigger without `id`".into()))?;
                let kind = match (kind, count) {
                    (None, _) => {
                        return Err(error(format!(
                            "trigger {id} has no kind (oneshot, multishot or barrier)"
                        )))
                    }
                    (Some("barrier"), Some(count)) => TriggerKind::Barrier { count },
                    (Some("barrier"), None) => {
                        return Err(error(format!("barrier trigger {id} needs `count C`")))
                    }
                    (Some(word), Some(_)) => {
                        return Err(error(format!("`count` is for barriers, not `{word}`")))
                    }
                    (Some("oneshot"), None) => TriggerKind::OneShot,
                    (Some(_), None) => TriggerKind::MultiShot,
                };
                let index = *trigger_index.entry(id).or_insert_with(|| {
                    triggers.push(TriggerDraft {
                        id,
                        kind: None,
                        line: number,
                    });
                    triggers.len() as u32 - 1
                });
                let draft = &mut triggers[index as usize];
                if draft.kind.is_some() {
                    return Err(error(format!("trigger {id} is defined twice")));
                }
                draft.kind = Some(kind);
                draft.line = number;
            }
            "failure" => {
                return Err(error(
                    "htsim's `failure` lines are not modelled: fail links with --fail-links or \
                     --fail-at"
                        .into(),
                ));
            }
            connection if connection.contains("->") => {
                in_body = true;
                let nodes = nodes
                    .ok_or_else(|| error("a connection before the `Nodes N` header".into()))?;
                let (src, dst) = connection.split_once("->").expect("contains ->");
                let host = |text: &str, end: &str| -> Result<u32, ModelError> {
                    let host: u32 = text
                        .parse()
                        .map_err(|e| error(format!("`{connection}`: {end} `{text}`: {e}")))?;
                    if host >= nodes {
                        return Err(error(format!(
                            "`{connection}`: {end} host {host} is not below Nodes {nodes}"
                        )));
                    }
                    Ok(host)
                };
                let (src, dst) = (host(src, "source")?, host(dst, "destination")?);
                if src == dst {
                    return Err(error(format!(
                        "`{connection}`: a flow from a host to itself"
                    )));
                }
                let mut start = None;
                let mut size = None;
                let mut id = None;
                let mut trigger = None;
                let mut on_sent = None;
                let mut on_received = None;
                let mut position = 1;
                let mut reference = |triggers: &mut Vec<TriggerDraft>, id: u32| -> u32 {
                    *trigger_index.entry(id).or_insert_with(|| {
                        triggers.push(TriggerDraft {
                            id,
                            kind: None,
                            line: number,
                        });
                        triggers.len() as u32 - 1
                    })
                };
                while position < tokens.len() {
                    match tokens[position] {
                        "start" => {
                            position += 1;
                            let token = tokens
                                .get(position)
                                .ok_or_else(|| error("`start` needs a time (ps)".into()))?;
                            let ps: f64 = token
                                .parse()
                                .map_err(|e| error(format!("`start {token}`: {e}")))?;
                            if !(ps >= 0.0 && ps.is_finite()) {
                                return Err(error(format!("`start {token}`: not a time (ps)")));
                            }
                            start = Some(ps.round() as u64);
                        }
                        "size" => {
                            position += 1;
                            size = Some(number_at(position, "bytes")?);
                        }
                        "id" => {
                            position += 1;
                            id = Some(id_at(position, "the flow's id")?);
                        }
                        "trigger" => {
                            position += 1;
                            let id = id_at(position, "the trigger that starts the flow")?;
                            trigger = Some(reference(&mut triggers, id));
                        }
                        "send_done_trigger" => {
                            position += 1;
                            let id = id_at(position, "a trigger")?;
                            on_sent = Some(reference(&mut triggers, id));
                        }
                        "recv_done_trigger" => {
                            position += 1;
                            let id = id_at(position, "a trigger")?;
                            on_received = Some(reference(&mut triggers, id));
                        }
                        "prio" => {
                            // Priorities are not modelled: every flow shares its host's
                            // round robin.
                            position += 1;
                            number_at(position, "a priority")?;
                        }
                        "addon" => {
                            return Err(error("`addon` is not modelled".into()));
                        }
                        other => {
                            return Err(error(format!(
                                "unknown word `{other}` in a connection (expected start, size, \
                                 id, trigger, send_done_trigger, recv_done_trigger, prio)"
                            )));
                        }
                    }
                    position += 1;
                }
                let start = match (start, trigger) {
                    (Some(_), Some(_)) => {
                        return Err(error(
                            "both `start` and `trigger`: a flow starts one way".into(),
                        ))
                    }
                    (None, None) => {
                        return Err(error("no `start T` and no `trigger T`".into()));
                    }
                    (Some(ps), None) => FlowStart::At(ps),
                    (None, Some(trigger)) => FlowStart::Trigger(trigger),
                };
                if trigger.is_some() && id.is_none() {
                    return Err(error("a triggered flow needs an `id` (as in htsim)".into()));
                }
                if let Some(id) = id {
                    if let Some(previous) = flow_ids.insert(id, number) {
                        return Err(error(format!(
                            "flow id {id} is already used on line {previous}"
                        )));
                    }
                }
                let bytes = match size {
                    None | Some(0) => {
                        return Err(error(
                            "no `size` (htsim's endless flow): give every flow its bytes".into(),
                        ))
                    }
                    Some(bytes) => bytes,
                };
                flows.push(DependentFlow {
                    spec: FlowSpec { src, dst, bytes },
                    start,
                    on_sent,
                    on_received,
                    phase: 0,
                });
                flow_lines.push(number);
            }
            other => {
                return Err(error(format!(
                    "unknown line starting with `{other}` (expected Nodes, Connections, \
                     Triggers, a connection `SRC->DST ...` or `trigger id ...`)"
                )));
            }
        }
    }

    let whole = |reason: String| ModelError::Matrix {
        line: last_line,
        reason,
    };
    let nodes = nodes.ok_or_else(|| whole("no `Nodes N` header".into()))?;
    let declared = declared_connections.ok_or_else(|| whole("no `Connections M` header".into()))?;
    if declared as usize != flows.len() {
        return Err(whole(format!(
            "the header says Connections {declared}, the file has {}",
            flows.len()
        )));
    }
    if declared_triggers != trigger_lines {
        return Err(whole(format!(
            "the header says Triggers {declared_triggers}, the file has {trigger_lines}"
        )));
    }
    if declared_failures != 0 {
        return Err(whole(format!(
            "the header says Failures {declared_failures}: htsim's failures are not modelled"
        )));
    }
    let mut defined = Vec::with_capacity(triggers.len());
    for draft in &triggers {
        let kind = draft.kind.ok_or_else(|| ModelError::Matrix {
            line: draft.line,
            reason: format!(
                "trigger {} is used but never defined (`trigger id {} ...`)",
                draft.id, draft.id
            ),
        })?;
        defined.push(Trigger { id: draft.id, kind });
    }
    let graph = FlowGraph {
        flows,
        triggers: defined,
        phases: vec!["all".into()],
    };
    graph.check().map_err(|e| match e {
        GraphError::Flow { flow, reason } => ModelError::Matrix {
            line: flow_lines[flow],
            reason,
        },
        GraphError::Trigger {
            trigger,
            id,
            reason,
        } => ModelError::Matrix {
            line: triggers[trigger].line,
            reason: format!("trigger {id}: {reason}"),
        },
    })?;
    Ok(HtsimMatrix { nodes, graph })
}
