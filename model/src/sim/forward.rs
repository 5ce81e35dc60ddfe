//! Where a switch sends a frame: down (or across the core) when the destination says so, else
//! up on the port that the load-balancing core ([`PipeBalancer::choose`]) or the frame's DRB
//! source route picks; and DRB's waypoints, which the hosts put in their frames.
//!
//! [`PipeBalancer::choose`]: ofan_dataplane::lb::PipeBalancer::choose

use ofan_dataplane::lb::{mix64, DestKey, Northbound, PortLoad, PortMask, SizeClass};
use ofan_topology::Role;

use super::failure::PortLink;
use super::packet::{Packet, NO_VIA};
use super::Sim;

#[derive(Debug, Clone, Copy)]
pub(super) struct NodeInfo {
    pub(super) role: Role,
    /// The switch's plane (0 for hosts and single-plane fabrics).
    pub(super) plane: u8,
    pub(super) pod: u16,
    pub(super) port_base: u32,
    /// Port index of the first up-port.
    pub(super) up_first: u16,
    pub(super) up_count: u8,
    /// First pipe balancer of the switch in `Sim::balancers`.
    pub(super) lb_base: u32,
    /// First valid mask of the switch in `Sim::masks`.
    pub(super) mask_base: u32,
}

/// Where a host is attached, as the switches route to it: 16 bytes, kept apart from [`Host`]
/// so that the routing table of all hosts stays in cache.
///
/// [`Host`]: super::host::Host
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) edge: u32,
    pub(super) edge_number: u32,
    pub(super) edge_in_pod: u16,
    pub(super) slot: u16,
    pub(super) pod: u16,
}

impl Sim<'_> {
    /// The size class a balancer sees for `packet`.
    #[inline]
    pub(super) fn size_class(packet: &Packet) -> SizeClass {
        if packet.is_ack() {
            SizeClass::Ack
        } else {
            SizeClass::of_frame(packet.frame, SizeClass::DEFAULT_ACK_MAX_FRAME)
        }
    }

    /// A switch forwards a frame it has fully received on `in_port`.
    pub(super) fn forward(&mut self, node: u32, in_port: u16, packet: Packet) {
        let info = self.nodes[node as usize];
        let dst = self.flow_ends[packet.flow as usize][usize::from(!packet.is_ack())];
        let target = self.place_of(&info, dst);
        let out = match self.down_port(&info, node, target) {
            Some(port) => port,
            None => {
                let key = if info.role == Role::Edge {
                    target.edge_number
                } else {
                    u32::from(target.pod)
                };
                match self.choose_up(info, in_port, key, &packet) {
                    Some(position) => info.up_first + u16::from(position),
                    None => {
                        self.drops_no_route += 1;
                        return;
                    }
                }
            }
        };
        let port_id = (info.port_base + u32::from(out)) as usize;
        if let Some(&state) = self
            .link_failures
            .as_ref()
            .and_then(|f| f.ports.get(port_id))
        {
            if state != PortLink::Up {
                self.send_to_dead_port(state);
                return;
            }
        }
        self.enqueue_inline(port_id, packet);
    }

    /// Where host `dst` is attached in the plane of switch `info`.
    #[inline(always)]
    pub(super) fn place_of(&self, info: &NodeInfo, dst: u32) -> &Place {
        &self.places[(u32::from(info.plane) * self.host_count + dst) as usize]
    }

    /// The port on which switch `node` sends a frame for `target` down (or across the core);
    /// `None` when the frame goes up.
    #[inline]
    pub(super) fn down_port(&self, info: &NodeInfo, node: u32, target: &Place) -> Option<u16> {
        match info.role {
            Role::Edge => (target.edge == node).then_some(target.slot),
            Role::Aggregation => (target.pod == info.pod).then_some(target.edge_in_pod),
            Role::Core => Some(if self.fat_tree {
                target.pod
            } else {
                target.edge_number as u16
            }),
            Role::Host => unreachable!("hosts receive, they do not forward"),
        }
    }

    /// The northbound decision: the DRB source route, or the load-balancing core.
    #[inline]
    fn choose_up(&mut self, info: NodeInfo, in_port: u16, key: u32, packet: &Packet) -> Option<u8> {
        if packet.via != NO_VIA {
            return Some(if info.role == Role::Edge {
                packet.via as u8
            } else {
                (packet.via >> 8) as u8
            });
        }
        let northbound = self.northbound(&info, key, packet);
        let pipe = in_port / self.pipe_ports;
        let balancer = (info.lb_base + u32::from(pipe)) as usize;
        if self.arf_flow {
            self.balancers[balancer].set_clock(self.now / 1000);
        }
        if !self.uses_queues {
            // No loads to gather: the 512-byte array below would be zeroed for nothing.
            return self.balancers[balancer]
                .choose(&northbound, &mut [])
                .map(|port| port.0);
        }
        let mut loads = [PortLoad::default(); 64];
        let (now, propagation) = (self.now, self.propagation);
        let first = (info.port_base + u32::from(info.up_first)) as usize;
        for (load, port) in loads
            .iter_mut()
            .zip(&mut self.ports[first..first + usize::from(info.up_count)])
        {
            port.purge(&self.wires, now, propagation);
            *load = PortLoad {
                packets: port.queued(),
                bytes: u32::try_from(port.bytes).unwrap_or(u32::MAX),
            };
        }
        let loads = &mut loads[..usize::from(info.up_count)];
        self.balancers[balancer]
            .choose(&northbound, loads)
            .map(|port| port.0)
    }

    /// The flow hash the balancers see for `packet`: its flow, direction (data or ACK) and
    /// entropy.
    #[inline(always)]
    pub(super) fn flow_hash(packet: &Packet) -> u32 {
        let kind_bit = u64::from(packet.is_ack());
        mix64(u64::from(packet.flow) << 24 ^ kind_bit << 16 ^ u64::from(packet.entropy)) as u32
    }

    /// What the balancer of switch `info` sees of `packet`, going up towards `key`.
    #[inline(always)]
    pub(super) fn northbound(&self, info: &NodeInfo, key: u32, packet: &Packet) -> Northbound {
        let valid = if self.failed {
            PortMask(self.masks[(info.mask_base + key) as usize])
        } else {
            PortMask::all(info.up_count)
        };
        // Only the algorithms that read it get it: the hash is a tenth of a decision's work.
        let flow_hash = if self.uses_flow_hash {
            Self::flow_hash(packet)
        } else {
            0
        };
        Northbound {
            key: DestKey(key),
            class: Self::size_class(packet),
            valid,
            flow_hash,
            frame_len: packet.frame,
        }
    }

    /// DRB: the `n`-th waypoint of the (src, dst) pointer, in the interleaved order that
    /// visits every aggregation switch once per w packets and every core once per w² packets,
    /// skipping waypoints whose path has a failed link. [`NO_VIA`] when the hosts share an
    /// edge switch (no choice) or no waypoint is alive.
    pub(super) fn drb_waypoint(&self, src: u32, dst: u32, n: u64) -> u16 {
        let (from, to) = (&self.places[src as usize], &self.places[dst as usize]);
        if from.edge == to.edge {
            return NO_VIA;
        }
        let w = u64::from(self.w);
        let inter_pod = self.fat_tree && from.pod != to.pod;
        let count = if inter_pod { w * w } else { w };
        let via_of = |i: u64| -> u16 {
            let agg = (i % w) as u16;
            let core_port = if inter_pod { (i / w) as u16 } else { 0xff };
            agg | core_port << 8
        };
        if !self.failed {
            return via_of(n % count);
        }
        let alive = |i: u64| self.drb_alive(from, to, (i % w) as u8, (i / w) as u8, inter_pod);
        let valid = (0..count).filter(|&i| alive(i)).count() as u64;
        if valid == 0 {
            return NO_VIA;
        }
        let rank = n % valid;
        (0..count)
            .filter(|&i| alive(i))
            .nth(rank as usize)
            .map_or(NO_VIA, via_of)
    }

    fn drb_alive(&self, from: &Place, to: &Place, agg: u8, core_port: u8, inter_pod: bool) -> bool {
        let up_link = |node: u32, position: u8| {
            let info = &self.nodes[node as usize];
            let port = info.port_base + u32::from(info.up_first) + u32::from(position);
            self.dead[self.port_links[port as usize] as usize]
        };
        if up_link(from.edge, agg) || up_link(to.edge, agg) {
            return false;
        }
        if !inter_pod {
            return true;
        }
        let w = u32::from(self.w);
        let first_agg = self.topology.aggregations()[0].id.0;
        let agg_of = |pod: u16| first_agg + u32::from(pod) * w + u32::from(agg);
        !(up_link(agg_of(from.pod), core_port) || up_link(agg_of(to.pod), core_port))
    }
}
