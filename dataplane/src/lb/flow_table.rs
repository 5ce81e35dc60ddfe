//! `arf-flow`'s flow table: which port each flow is pinned to, and when a flow a neighbour
//! named moves ([`crate::arf::flows`], [`crate::arf::Redirect`]).

use super::{weighted, Northbound, PortMask};
use crate::arf::PathQuality;

/// `arf-flow`'s flow table: direct-mapped by flow hash, one entry per slot (a collision
/// replaces the older flow, which is then placed afresh, as an aged-out one is).
#[derive(Debug, Default)]
pub(super) struct FlowTable {
    entries: Box<[FlowEntry]>,
    pub(super) now_ns: u64,
    pub(super) moved: u64,
}

/// One pinned flow.
#[derive(Debug, Clone, Copy, Default)]
struct FlowEntry {
    flow_hash: u32,
    port: u8,
    live: bool,
    last_ns: u64,
    /// When it was last moved (`None`: never).
    moved_ns: Option<u64>,
}

/// Slots of a pipe's flow table.
const FLOW_SLOTS: usize = 4096;

/// A flow idle this long is forgotten (ns).
pub const FLOW_IDLE_NS: u64 = 100_000_000;

impl FlowTable {
    pub(super) fn new() -> Self {
        Self {
            entries: vec![FlowEntry::default(); FLOW_SLOTS].into_boxed_slice(),
            now_ns: 0,
            moved: 0,
        }
    }

    /// The slot of a flow by its point (the high half: the low one picks the port).
    #[inline]
    pub(super) fn slot(point: u64) -> usize {
        (point >> 32) as usize % FLOW_SLOTS
    }

    #[inline]
    pub(super) fn choose(&mut self, packet: &Northbound, quality: &PathQuality, point: u64) -> u8 {
        let now = self.now_ns;
        let entry = &mut self.entries[Self::slot(point)];
        let pinned = entry.live
            && entry.flow_hash == packet.flow_hash
            && now.saturating_sub(entry.last_ns) < FLOW_IDLE_NS
            && packet.valid.contains(entry.port);
        let rule = quality.redirect;
        let mut moved_ns = if pinned { entry.moved_ns } else { None };
        let port = if pinned {
            // A pinned flow moves only when a neighbour named it (link-level quality only
            // weighs where new flows go: moving every flow of a congested path at once would
            // herd them onto the next one).
            let request = quality.redirects.iter().find(|request| {
                request.flow_hash == entry.flow_hash
                    && request.key == packet.key
                    && request.avoid.contains(entry.port)
            });
            let held = moved_ns.is_some_and(|at| now.saturating_sub(at) < rule.hold_down_ns);
            let targets = match request {
                Some(request) if !held => {
                    packet.valid.iter().fold(PortMask::EMPTY, |mask, port| {
                        if !request.avoid.contains(port) && quality.path(packet.key, port) > rule.at
                        {
                            mask.with(port)
                        } else {
                            mask
                        }
                    })
                }
                _ => PortMask::EMPTY,
            };
            if targets.is_empty() {
                entry.port
            } else {
                self.moved += 1;
                moved_ns = Some(now);
                weighted(targets, packet.key, quality, point)
            }
        } else {
            // A flow a neighbour named is placed off the named ports too, where it can be.
            let named = quality
                .redirects
                .iter()
                .find(|request| request.flow_hash == packet.flow_hash && request.key == packet.key);
            let valid = match named {
                Some(request) => {
                    let rest = packet.valid.iter().fold(PortMask::EMPTY, |mask, port| {
                        if request.avoid.contains(port) {
                            mask
                        } else {
                            mask.with(port)
                        }
                    });
                    if rest.is_empty() {
                        packet.valid
                    } else {
                        rest
                    }
                }
                None => packet.valid,
            };
            weighted(valid, packet.key, quality, point)
        };
        *entry = FlowEntry {
            flow_hash: packet.flow_hash,
            port,
            live: true,
            last_ns: now,
            moved_ns,
        };
        port
    }
}
