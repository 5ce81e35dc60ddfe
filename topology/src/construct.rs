//! Building the canonical node and link lists of a topology kind.
//!
//! Links are created in link-id order and each creation appends one port to each end, so the
//! order of link creation *is* the port numbering contract: host links first (every edge gets
//! its hosts as ports `0..k/2`), then edge up-links in (edge, up) order (edges get ports
//! `k/2..k`, aggregations get their edges as ports `0..k/2` in edge order), then aggregation
//! up-links in (pod, aggregation, up) order (aggregations get ports `k/2..k`, and every core gets
//! one port per pod in pod order). A multi-plane fabric repeats each of the three steps plane
//! by plane, so a host gets its port i in plane i's pass, and every plane's switches get their
//! ports exactly as in a single plane.

use std::net::Ipv4Addr;

use crate::addressing::{self, LINK_PREFIX_LEN};
use crate::dragonfly::{LinkEnd, RouterId};
use crate::model::{Link, LinkId, Node, NodeId, Port, PortDirection, PortIndex, Role};
use crate::shape::Shape;
use crate::Dragonfly;

/// Builds the canonical nodes and links of `shape`.
pub(crate) fn build(shape: &Shape) -> (Vec<Node>, Vec<Link>) {
    if let Some(dragonfly) = shape.dragonfly {
        return build_dragonfly(shape, &Dragonfly::new(dragonfly));
    }
    let mut builder = Builder {
        nodes: Vec::with_capacity(shape.num_nodes() as usize),
        links: Vec::with_capacity(shape.num_links() as usize),
    };
    add_nodes(shape, &mut builder.nodes);

    // Host links, plane by plane: a host's port i is its link into plane i.
    let plane_edges = shape.plane_edges();
    for plane in 0..shape.planes {
        for local in 0..plane_edges {
            let (pod, edge) = (local / shape.edges_per_pod, local % shape.edges_per_pod);
            let pod_octet = plane * shape.pods + pod;
            for slot in 0..shape.hosts_per_edge() {
                builder.connect(
                    shape.host(pod, edge, slot),
                    shape.edge(plane * plane_edges + local),
                    addressing::host_link_address(pod_octet, edge, slot, false),
                    addressing::host_link_address(pod_octet, edge, slot, true),
                );
            }
        }
    }
    // Switch-to-switch links, numbered for addressing from 0.
    let mut number = 0;
    let mut connect_switches = |builder: &mut Builder, lower: NodeId, upper: NodeId| {
        builder.connect(
            lower,
            upper,
            addressing::switch_link_address(number, false),
            addressing::switch_link_address(number, true),
        );
        number += 1;
    };
    for edge_number in 0..shape.num_edges() {
        let (plane, local) = (edge_number / plane_edges, edge_number % plane_edges);
        let pod = local / shape.edges_per_pod;
        for up in 0..shape.half {
            let upper = if shape.is_fat_tree() {
                shape.agg(plane, pod, up)
            } else {
                shape.core(plane, up)
            };
            connect_switches(&mut builder, shape.edge(edge_number), upper);
        }
    }
    for plane in 0..shape.planes {
        for pod in 0..shape.pods {
            for agg in 0..shape.aggs_per_pod {
                for up in 0..shape.half {
                    connect_switches(
                        &mut builder,
                        shape.agg(plane, pod, agg),
                        shape.core(plane, agg * shape.half + up),
                    );
                }
            }
        }
    }
    (builder.nodes, builder.links)
}

/// Builds a dragonfly: hosts as in a Clos (each router is an edge with `p` hosts on ports
/// `0..p`), then the router-to-router links in [`Dragonfly::links`] order, each port placed at
/// the index the dragonfly's port contract gives it (so link creation order is not port order
/// here). Both ends of a router-to-router link are up ports; `a` is the lower router.
fn build_dragonfly(shape: &Shape, dragonfly: &Dragonfly) -> (Vec<Node>, Vec<Link>) {
    let mut nodes = Vec::with_capacity(shape.num_nodes() as usize);
    add_nodes(shape, &mut nodes);
    let mut links = Vec::with_capacity(shape.num_links() as usize);
    let radix = usize::from(dragonfly.shape().radix());
    let router_node = |router: RouterId| shape.edge(router.0);
    let mut router_ports: Vec<Vec<Option<Port>>> =
        vec![vec![None; radix]; shape.num_edges() as usize];
    for edge_number in 0..shape.num_edges() {
        let (pod, edge) = (
            edge_number / shape.edges_per_pod,
            edge_number % shape.edges_per_pod,
        );
        for slot in 0..shape.hosts_per_edge() {
            let host = shape.host(pod, edge, slot);
            let link = LinkId(narrow_link(links.len()));
            let (host_port, edge_port) = (PortIndex(0), PortIndex(narrow(slot)));
            let upper = (shape.edge(edge_number), edge_port);
            nodes[host.index()].ports.push(port(
                host_port,
                PortDirection::Up,
                link,
                upper,
                addressing::host_link_address(pod, edge, slot, false),
            ));
            router_ports[edge_number as usize][slot as usize] = Some(port(
                edge_port,
                PortDirection::Down,
                link,
                (host, host_port),
                addressing::host_link_address(pod, edge, slot, true),
            ));
            links.push(Link {
                id: link,
                a: (host, host_port),
                b: upper,
            });
        }
    }
    for (number, router_link) in dragonfly.links().iter().enumerate() {
        let number = narrow_link(number);
        let link = LinkId(narrow_link(links.len()));
        let (lower, upper) = (router_link.a, router_link.b);
        let end = |end: LinkEnd| (router_node(end.router), PortIndex(end.port.0));
        for (here, there, upper_end) in [(lower, upper, false), (upper, lower, true)] {
            router_ports[here.router.index()][usize::from(here.port.0)] = Some(port(
                PortIndex(here.port.0),
                PortDirection::Up,
                link,
                end(there),
                addressing::switch_link_address(number, upper_end),
            ));
        }
        links.push(Link {
            id: link,
            a: end(lower),
            b: end(upper),
        });
    }
    for (edge_number, ports) in router_ports.into_iter().enumerate() {
        let node = &mut nodes[shape.edge(narrow_link(edge_number)).index()];
        node.ports = ports
            .into_iter()
            .map(|port| port.expect("the dragonfly's port contract fills every port"))
            .collect();
    }
    (nodes, links)
}

/// Creates every node, without ports, in id order.
fn add_nodes(shape: &Shape, nodes: &mut Vec<Node>) {
    let fat_tree = shape.is_fat_tree();
    let dragonfly = shape.dragonfly.is_some();
    let mut push = |role, name, pod: Option<u32>, index: u32, loopback| {
        nodes.push(Node {
            id: NodeId(u32::try_from(nodes.len()).expect("at most 70 656 nodes")),
            role,
            name,
            pod: pod.map(narrow),
            index: narrow(index),
            loopback,
            ports: Vec::new(),
        });
    };
    for pod in 0..shape.pods {
        for edge in 0..shape.edges_per_pod {
            for slot in 0..shape.hosts_per_edge() {
                let name = if fat_tree {
                    format!("h-p{pod}-e{edge}-h{slot}")
                } else if dragonfly {
                    format!("h-g{pod}-r{edge}-h{slot}")
                } else {
                    format!("h-l{edge}-h{slot}")
                };
                let address = addressing::host_link_address(pod, edge, slot, false);
                let index = edge * shape.hosts_per_edge() + slot;
                push(Role::Host, name, Some(pod), index, address);
            }
        }
    }
    let mut switch_number = 0;
    let mut next_loopback = || {
        let address = addressing::loopback(switch_number);
        switch_number += 1;
        address
    };
    // A switch of a fabric of several planes names its plane: `e-p0-1@1`.
    let plane_suffix = |plane: u32| {
        if shape.planes > 1 {
            format!("@{plane}")
        } else {
            String::new()
        }
    };
    for plane in 0..shape.planes {
        let at = plane_suffix(plane);
        for pod in 0..shape.pods {
            for edge in 0..shape.edges_per_pod {
                let name = if fat_tree {
                    format!("e-p{pod}-{edge}{at}")
                } else if dragonfly {
                    format!("r-g{pod}-{edge}")
                } else {
                    format!("leaf-{edge}{at}")
                };
                push(Role::Edge, name, Some(pod), edge, next_loopback());
            }
        }
    }
    for plane in 0..shape.planes {
        let at = plane_suffix(plane);
        for pod in 0..shape.pods {
            for agg in 0..shape.aggs_per_pod {
                let name = format!("a-p{pod}-{agg}{at}");
                push(Role::Aggregation, name, Some(pod), agg, next_loopback());
            }
        }
    }
    for plane in 0..shape.planes {
        let at = plane_suffix(plane);
        for core in 0..shape.cores {
            let name = if fat_tree {
                format!("c-{core}{at}")
            } else {
                format!("spine-{core}{at}")
            };
            push(Role::Core, name, None, core, next_loopback());
        }
    }
}

struct Builder {
    nodes: Vec<Node>,
    links: Vec<Link>,
}

impl Builder {
    /// Appends a link between the next free ports of `lower` (an up port) and `upper` (a down
    /// port).
    fn connect(
        &mut self,
        lower: NodeId,
        upper: NodeId,
        lower_addr: Ipv4Addr,
        upper_addr: Ipv4Addr,
    ) {
        let link = LinkId(u32::try_from(self.links.len()).expect("at most 327 680 links"));
        let lower_port = self.next_port(lower);
        let upper_port = self.next_port(upper);
        self.nodes[lower.index()].ports.push(port(
            lower_port,
            PortDirection::Up,
            link,
            (upper, upper_port),
            lower_addr,
        ));
        self.nodes[upper.index()].ports.push(port(
            upper_port,
            PortDirection::Down,
            link,
            (lower, lower_port),
            upper_addr,
        ));
        self.links.push(Link {
            id: link,
            a: (lower, lower_port),
            b: (upper, upper_port),
        });
    }

    fn next_port(&self, node: NodeId) -> PortIndex {
        PortIndex(narrow(
            u32::try_from(self.nodes[node.index()].ports.len()).expect("at most 64 ports"),
        ))
    }
}

fn port(
    index: PortIndex,
    direction: PortDirection,
    link: LinkId,
    (peer, peer_port): (NodeId, PortIndex),
    address: Ipv4Addr,
) -> Port {
    Port {
        index,
        direction,
        link,
        peer,
        peer_port,
        address,
        prefix_len: LINK_PREFIX_LEN,
        ifname: format!("p{}", index.0),
    }
}

/// Narrows a link or node count, below 2³² in every topology the crate builds.
fn narrow_link(value: usize) -> u32 {
    u32::try_from(value).expect("at most 2³² links")
}

/// Narrows a pod, index or port number, all of which are below 2¹⁶ for k <= 64.
fn narrow(value: u32) -> u16 {
    u16::try_from(value).expect("pods, indices and ports fit in u16 for k <= 64")
}
