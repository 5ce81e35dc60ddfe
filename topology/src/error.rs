//! The crate's error type.

use crate::model::{LinkId, NodeId, PortIndex, Role, TopologyKind};

/// Everything that can go wrong when building, reading or evaluating a topology.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TopologyError {
    /// A dragonfly parameter (or an intermediate group) is out of range.
    #[error("dragonfly parameter {name} = {value} refused: {reason}")]
    DragonflyParameter {
        /// The parameter's name (`p`, `a`, `h`, `via`).
        name: &'static str,
        /// The rejected value.
        value: u32,
        /// Why, with the range it must be in.
        reason: String,
    },
    /// The switch radix is odd or outside `4..=64`.
    #[error("switch radix k = {k} must be even and in 4..=64")]
    OddOrOutOfRangeK {
        /// The rejected radix.
        k: u16,
    },
    /// A multi-plane fabric has no plane, too many, or more than its addressing plan holds.
    #[error("{planes} planes refused: a multi-plane fabric has 1..={max} planes (at k = {k}: planes × pods <= 256, the second octet of a host address)")]
    PlanesOutOfRange {
        /// The rejected number of planes.
        planes: u8,
        /// The most this radix allows.
        max: u8,
        /// The radix.
        k: u16,
    },
    /// A node id does not exist in the topology.
    #[error("{node} does not exist (the topology has {count} nodes)")]
    UnknownNode {
        /// The missing id.
        node: NodeId,
        /// Number of nodes in the topology.
        count: usize,
    },
    /// A node has the wrong role for the operation.
    #[error("{node} is a {found:?}, expected a {expected:?}")]
    UnexpectedRole {
        /// The offending node.
        node: NodeId,
        /// The role the operation needs.
        expected: Role,
        /// The node's role.
        found: Role,
    },
    /// A flow's weight is negative, infinite or NaN.
    #[error("flow {src} -> {dst} has invalid weight {weight}")]
    InvalidWeight {
        /// Source host of the flow.
        src: NodeId,
        /// Destination host of the flow.
        dst: NodeId,
        /// The rejected weight.
        weight: f64,
    },
    /// The failed links leave a flow with no valid shortest path.
    #[error("flow {src} -> {dst} has no valid shortest path under the failed links")]
    NoValidPath {
        /// Source host of the flow.
        src: NodeId,
        /// Destination host of the flow.
        dst: NodeId,
    },
    /// The JSON text is not a well-formed topology document.
    #[error("cannot parse topology JSON: {source}")]
    Parse {
        /// The underlying serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The document has the wrong number of nodes or links for its kind.
    #[error("{kind:?} needs {expected} {what}, the document has {found}")]
    CountMismatch {
        /// The document's declared kind.
        kind: TopologyKind,
        /// `"nodes"` or `"links"`.
        what: &'static str,
        /// The count the kind implies.
        expected: usize,
        /// The count in the document.
        found: usize,
    },
    /// A node's `id` field is not its position in the node list.
    #[error("the node at position {position} claims to be {found}")]
    NodeIdMismatch {
        /// Position in the node list.
        position: usize,
        /// The id it carries.
        found: NodeId,
    },
    /// A link's `id` field is not its position in the link list.
    #[error("the link at position {position} claims to be {found}")]
    LinkIdMismatch {
        /// Position in the link list.
        position: usize,
        /// The id it carries.
        found: LinkId,
    },
    /// A port's `index` field is not its position in its node's port list.
    #[error("{node}: the port at position {position} claims to be {found}")]
    PortIndexMismatch {
        /// The node owning the port.
        node: NodeId,
        /// Position in the port list.
        position: usize,
        /// The index it carries.
        found: PortIndex,
    },
    /// A link end names a node or port that does not exist, or a port that does not terminate
    /// this link.
    #[error("{link} references {node} {port}, which does not exist or is not attached to it")]
    DanglingLink {
        /// The offending link.
        link: LinkId,
        /// The node its end names.
        node: NodeId,
        /// The port its end names.
        port: PortIndex,
    },
    /// A port's peer does not point back at it, or the port's link does not join the two.
    #[error("{node} {port}: peer and link do not point back at this port")]
    AsymmetricPeer {
        /// The node owning the port.
        node: NodeId,
        /// The offending port.
        port: PortIndex,
    },
    /// The document is internally consistent but differs from the canonical topology of its
    /// kind (names, roles, port numbering or addressing plan).
    #[error("{kind:?}: {item} differs from the canonical topology")]
    NonCanonical {
        /// The document's declared kind.
        kind: TopologyKind,
        /// The first differing item, e.g. `"node 12 (e-p0-1)"` or `"link 40"`.
        item: String,
    },
}
