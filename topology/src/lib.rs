//! # ofan-topology — fat trees and leaf-spines as plain data
//!
//! This is ofan's bottom layer. A [`Topology`] is inert, serializable data — nodes, ports,
//! links and addresses — in the spirit of Mininet's `topo.py`: it says what the network *is*
//! and never touches one. The other layers apply it: `netns-lab` turns it into namespaces and
//! veth pairs, the switch (`dataplane`, `control`) reads its own ports, addresses and
//! destination keys from it, and the model evaluates load balancers on it. Everything here is
//! pure and deterministic; the only I/O is JSON (de)serialization of strings
//! ([`Topology::to_json`], [`Topology::from_json`]).
//!
//! Besides the structure, the crate answers the questions the upper layers share, so that they
//! agree on the answers: Ofan's consolidated destination keys ([`Topology::dest_key`], paper
//! §4.1), shortest paths, which up ports stay valid under link failures
//! ([`Topology::valid_up_mask`]), the sustainable rate ρ_max ([`Topology::rho_max`], paper §2.2,
//! §6.2), a lower bound on collective completion time ([`Topology::collective_lower_bound_ps`]:
//! one definition, parameterized by the system — the model's or the lab's —, see [`timing`])
//! and every switch's own seed derived from the run's ([`switch_seed`]).
//!
//! ## Shapes
//!
//! * [`Topology::fat_tree`]`(k)`: k pods, each with k/2 edge and k/2 aggregation switches;
//!   (k/2)² cores; k/2 hosts per edge, k³/4 hosts; k³/4 host links, k³/4 edge–aggregation and
//!   k³/4 aggregation–core links. Every switch has k ports.
//! * [`Topology::leaf_spine`]`(k)`: k leaves ([`Role::Edge`]) with k/2 hosts each, k/2 spines
//!   ([`Role::Core`]), every leaf linked to every spine; all leaves and hosts form pod 0.
//!
//! * [`Topology::new`]`(`[`TopologyKind::MultiPlane`]`)`: P disjoint copies of either that
//!   share the hosts (below).
//!
//! k is even and in `4..=64`.
//!
//! [`Dragonfly`] (module [`dragonfly`]) is the third family, kept apart because it has no tiers:
//! `g = a·h + 1` groups of `a` all-to-all routers with `p` hosts and `h` global links each, one
//! global link between every pair of groups; its own ids, ports, addresses, destination keys,
//! minimal and Valiant paths and collective lower bound are documented there.
//!
//! ## Node ids and names (contract)
//!
//! Ids are dense, tier by tier: hosts, then edge switches, then aggregation switches, then
//! cores, each tier in (pod, index) order; a host's order is (pod, edge, slot). So
//! [`Topology::hosts`], [`Topology::edges`], [`Topology::aggregations`] and
//! [`Topology::cores`] are contiguous slices, and an edge switch's position in
//! [`Topology::edges`] is its global edge number. Names: hosts `h-p{pod}-e{edge}-h{slot}`,
//! edges `e-p{pod}-{index}`, aggregations `a-p{pod}-{index}`, cores `c-{index}`; in leaf-spine
//! hosts `h-l{leaf}-h{slot}`, leaves `leaf-{index}`, spines `spine-{index}`.
//!
//! ## Port numbering (contract)
//!
//! On every switch, down ports come first, then up ports. With w = k/2:
//!
//! | Node | Ports `0..w` | Ports `w..k` |
//! | --- | --- | --- |
//! | edge e of pod p | hosts 0..w of the edge, in slot order | aggregations 0..w of pod p |
//! | aggregation a of pod p | edges 0..w of pod p | cores a·w + 0 … a·w + (w−1) |
//! | core c | pods 0..w (aggregation ⌊c/w⌋ of each) | pods w..k (likewise) |
//! | leaf l | hosts 0..w of the leaf | spines 0..w |
//! | spine s | leaves 0..w | leaves w..k |
//!
//! A host has a single port 0, up to its edge switch. Interfaces are named `p{port}`.
//!
//! Links ([`Link::a`] is the lower end) are numbered: host links in host order (a host's link
//! id equals its node id), then edge up-links in (edge, up port) order, then aggregation
//! up-links in (aggregation, up port) order.
//!
//! ## Addressing plan (contract)
//!
//! | What | Address |
//! | --- | --- |
//! | host `h` under edge `e` of pod `p` | `10.p.e.(2h+1)/31` |
//! | that edge's port towards host `h` | `10.p.e.(2h)/31` |
//! | destination-edge prefix of edge `e` of pod `p` ([`Topology::edge_prefix`]) | `10.p.e.0/24` |
//! | switch-to-switch link number `n`, lower end | `100.64.0.0 + 2n`, `/31` |
//! | switch-to-switch link number `n`, upper end | `100.64.0.0 + 2n + 1`, `/31` |
//! | loopback of switch number `s` | `10.255.⌊s/256⌋.(s mod 256)/32` |
//!
//! In leaf-spine `p = 0` and `e` is the leaf index. Switch-to-switch links are numbered from 0
//! in link order, so they fill `100.64.0.0/10` from its start; switches are numbered in node-id
//! order (the position in [`Topology::switches`]). A host's [`Node::loopback`] is its own
//! address. For k = 64 everything fits: host addresses stay below `10.64.0.0`, the 131 072
//! switch links use a sixteenth of `100.64.0.0/10`, and the 5 120 loopbacks end at
//! `10.255.19.255`. [`Topology::node_by_addr`] inverts the plan.
//!
//! ## Multi-plane fabrics (contract)
//!
//! [`TopologyKind::MultiPlane`] `{ plane, planes: P, k }` is P identical, disjoint copies of a
//! fat tree or leaf-spine of radix k ([`PlaneKind`]) that share the hosts: every host has P
//! ports, port i up to its edge switch in plane i (at the same slot in every plane), and no
//! link joins two planes. This is the multi-plane architecture of the adaptive-routing
//! framework draft (use case 3): a NIC with one port per plane, each plane its own Clos.
//! `1 <= P <= MAX_PLANES` (8), and `P × pods <= 256` (the addressing plan below; a k = 64 fat
//! tree takes at most 4 planes); [`TopologyError::PlanesOutOfRange`] otherwise.
//!
//! * **Ids.** Hosts first, in the plane's host order (so host ids are those of one plane);
//!   then each tier plane by plane: the edges of plane 0, of plane 1, …, then the aggregation
//!   switches likewise, then the cores. [`Topology::edges`], [`Topology::aggregations`] and
//!   [`Topology::cores`] stay contiguous; an edge's position in [`Topology::edges`] is
//!   `plane · E + pod · edges_per_pod + index` (E edges per plane). [`Topology::plane_of`]
//!   names a switch's plane.
//! * **Names.** Hosts keep the plane's names; a switch is named as in its plane with
//!   `@plane` appended: `e-p0-1@1`, `a-p3-0@0`, `c-5@1`, `leaf-2@0`, `spine-1@1`. With one
//!   plane there is no suffix: a one-plane fabric is the plane itself, node for node, link for
//!   link.
//! * **Ports.** A host's ports are `0..P`, port i into plane i; every switch's ports are those
//!   of the same switch of a single plane (its peers in its own plane).
//! * **Links.** Host links plane by plane (host h's link into plane i is `i · hosts + h`), then
//!   the edge up-links of every edge in [`Topology::edges`] order, then the aggregation
//!   up-links in (plane, pod, aggregation, up port) order.
//! * **Addresses.** As a single plane's, with `plane · pods + pod` in place of the pod in the
//!   second octet of host-link addresses and destination-edge prefixes; switch-to-switch links
//!   and loopbacks are numbered on across the planes. A host's [`Node::loopback`] is its
//!   plane-0 address.
//! * **Queries.** [`Topology::host_edge`] is the plane-0 edge, [`Topology::host_edge_in`] any
//!   plane's. Destination keys are per plane: at an edge, the number of the destination's edge
//!   *within the switch's plane* (`0..E`, the same key in every plane), at an aggregation
//!   switch the pod; [`Topology::valid_up_mask`], the routing plan and paths stay in the
//!   switch's plane. [`Topology::shortest_paths`] from a host crosses every plane (P times a
//!   plane's paths). [`Topology::rho_max`] splits a flow evenly over the host's planes first
//!   (weights in line rates of one port, see [`load`]), and the CCT lower bound lets a host
//!   send and receive over its P ports at once ([`timing`]).
//!
//! ## Example
//!
//! ```
//! use ofan_topology::{FailedLinks, Topology, TrafficMatrix};
//!
//! let topology = Topology::fat_tree(4)?;
//! assert_eq!(topology.hosts().len(), 16);
//! let (src, dst) = (topology.hosts()[0].id, topology.hosts()[15].id);
//! assert_eq!(topology.shortest_paths(src, dst).len(), 4);
//!
//! let edge = topology.host_edge(src);
//! let key = topology.dest_key(edge, topology.node(dst).loopback).unwrap();
//! assert_eq!(topology.valid_up_mask(&FailedLinks::new(), edge, key), 0b11);
//!
//! let matrix = TrafficMatrix::permutation(&[(src, dst), (dst, src)]);
//! assert_eq!(topology.rho_max(&FailedLinks::new(), &matrix)?, 1.0);
//!
//! let copy = Topology::from_json(&topology.to_json())?;
//! assert_eq!(copy, topology);
//! # Ok::<(), ofan_topology::TopologyError>(())
//! ```
#![forbid(unsafe_code)]

mod addressing;
mod construct;
pub mod dragonfly;
mod error;
pub mod load;
mod model;
pub mod plan;
mod routing;
pub mod seed;
mod shape;
pub mod timing;
mod topology;
pub mod units;

pub use dragonfly::{Dragonfly, DragonflyShape};
pub use error::TopologyError;
pub use load::{Flow, LinkLoad, TrafficMatrix};
pub use model::{
    Link, LinkId, Node, NodeId, PlaneKind, Port, PortDirection, PortIndex, Role, TopologyKind,
};
pub use routing::{DestKey, FailedLinks};
pub use seed::{mix64, switch_seed};
pub use shape::MAX_PLANES;
pub use timing::{BoundSystem, Forwarding, LinkParams, SendRate};
pub use topology::Topology;

#[cfg(test)]
mod tests;
