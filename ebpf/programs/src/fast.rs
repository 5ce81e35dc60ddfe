//! `ofan_fast`: the steering program with the switch's forwarding in it (`ofan-switch
//! --fast-path xdp`). It forwards what it can itself — the decision of
//! [`ofan_ebpf_common::fast::decide`] over the tables below (see that module for what they hold
//! and how the control thread publishes them), the rewrite, and `XDP_REDIRECT` through
//! [`FAST_TX`] — and steers the rest exactly as `ofan_steer` does: the kernel's frames to the
//! kernel, the others to the AF_XDP socket of their queue, with the reason counted. `decide`
//! forwards no frame that steering would give the kernel.

use aya_ebpf::{
    bindings::xdp_action::XDP_DROP,
    macros::{map, xdp},
    maps::{lpm_trie::Key, Array, DevMap, LpmTrie, PerCpuArray},
    programs::XdpContext,
};
use ofan_ebpf_common::{
    fast::{
        decide, fast_rx_slot, fast_tx_slot, FastConfig, FastDestination, FastGroup,
        FastRow, FastTables, FAST_COUNT_SLOTS, FAST_SLOTS, MAX_FAST_GROUPS, MAX_FAST_ROUTES,
        MAX_FAST_ROWS, TABLE_A, TABLE_B, TTL_CHECKSUM_OFFSET,
    },
    StatIndex, MAX_PORTS,
};

use crate::{port_of, raw, steer_from, Frame, STATS};

/// The balancer's configuration (one entry, written before the program is attached).
#[map]
static FAST_CONFIG: Array<FastConfig> = Array::with_max_entries(1, 0);
/// The table in use: `TABLE_OFF`, `TABLE_A` or `TABLE_B` (one entry).
#[map]
static FAST_ACTIVE: Array<u32> = Array::with_max_entries(1, 0);
/// Table A's routes.
#[map]
static FAST_ROUTES_A: LpmTrie<[u8; 4], FastDestination> =
    LpmTrie::with_max_entries(MAX_FAST_ROUTES, 0);
/// Table B's routes.
#[map]
static FAST_ROUTES_B: LpmTrie<[u8; 4], FastDestination> =
    LpmTrie::with_max_entries(MAX_FAST_ROUTES, 0);
/// Both tables' groups: table A's first, then table B's.
#[map]
static FAST_GROUPS: Array<FastGroup> = Array::with_max_entries(2 * MAX_FAST_GROUPS, 0);
/// Both tables' rows: table A's first, then table B's.
#[map]
static FAST_ROWS: Array<FastRow> = Array::with_max_entries(2 * MAX_FAST_ROWS, 0);
/// pOfan's pointers, per CPU.
#[map]
static FAST_POINTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(FAST_SLOTS, 0);
/// Switch port → egress interface.
#[map]
static FAST_TX: DevMap = DevMap::with_max_entries(MAX_PORTS, 0);
/// Misses by reason, then frames forwarded by ingress and by egress port, per CPU.
#[map]
static FAST_COUNTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(FAST_COUNT_SLOTS, 0);

/// The fast path's tables, as [`decide`] reads them.
struct Tables;

impl FastTables for Tables {
    #[inline(always)]
    fn config(&self) -> Option<&FastConfig> {
        FAST_CONFIG.get(0)
    }

    #[inline(always)]
    fn active(&self) -> u32 {
        FAST_ACTIVE.get(0).copied().unwrap_or_default()
    }

    #[inline(always)]
    fn destination(&self, table: u32, dst: [u8; 4]) -> Option<FastDestination> {
        let key = Key::new(32, dst);
        match table {
            TABLE_A => FAST_ROUTES_A.get(&key).copied(),
            TABLE_B => FAST_ROUTES_B.get(&key).copied(),
            _ => None,
        }
    }

    #[inline(always)]
    fn group(&self, table: u32, group: u32) -> Option<&FastGroup> {
        if group >= MAX_FAST_GROUPS || (table != TABLE_A && table != TABLE_B) {
            return None;
        }
        FAST_GROUPS.get((table - TABLE_A) * MAX_FAST_GROUPS + group)
    }

    #[inline(always)]
    fn row(&self, table: u32, row: u32) -> Option<&FastRow> {
        if row >= MAX_FAST_ROWS || (table != TABLE_A && table != TABLE_B) {
            return None;
        }
        FAST_ROWS.get((table - TABLE_A) * MAX_FAST_ROWS + row)
    }

    #[inline(always)]
    fn take_pointer(&self, slot: u32) -> Option<u64> {
        raw::update(&FAST_POINTERS, slot, |pointer| pointer.wrapping_add(1))
    }

    #[inline(always)]
    fn random(&self) -> u32 {
        raw::random()
    }
}

/// The fast-path program: see the module documentation.
#[xdp]
pub fn ofan_fast(ctx: XdpContext) -> u32 {
    let (action, stat) = fast(&ctx);
    raw::count(&STATS, stat.index());
    action
}

#[inline(always)]
fn fast(ctx: &XdpContext) -> (u32, StatIndex) {
    // The fast path's own checks cover what steering gives the kernel (see `decide`), so a
    // forwarded frame pays for one lookup of its port and none of the steering rules.
    let port = match port_of(ctx) {
        Ok(port) => port,
        Err(decided) => return decided,
    };
    let frame_len = (ctx.data_end() - ctx.data()) as u32;
    match decide(&Frame(ctx), frame_len, &Tables) {
        Ok(egress) => {
            raw::write(ctx, 0, egress.macs);
            raw::write(ctx, TTL_CHECKSUM_OFFSET, egress.ttl_checksum);
            raw::count(&FAST_COUNTS, fast_rx_slot(port));
            raw::count(&FAST_COUNTS, fast_tx_slot(egress.port));
            match FAST_TX.redirect(egress.port, 0) {
                Ok(action) => (action, StatIndex::FastForwarded),
                Err(_) => (XDP_DROP, StatIndex::DropFastNoEgress),
            }
        }
        Err(miss) => {
            raw::count(&FAST_COUNTS, miss.index());
            steer_from(ctx, port)
        }
    }
}
