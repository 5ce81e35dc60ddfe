//! The XDP fast path's user side (`ofan-switch --fast-path xdp`): fills the tables of
//! `ofan_fast` from the balancer and from every forwarding table the control thread publishes,
//! and reads its counters. What the program does with them is in
//! [`ofan_ebpf_common::fast`].
//!
//! # Why an LPM map filled from the FIB mirror, not `bpf_fib_lookup`
//!
//! The kernel's `bpf_fib_lookup` returns *one* next hop: for a multipath route the kernel's own
//! hash has already chosen it. The balancer needs the whole group — which up-ports reach the
//! destination — and its destination key, which the kernel does not know. So the program looks
//! up the same table the AF_XDP workers use: the mirror's [`Fib`], whose one-walk entries
//! ([`Fib::destinations_v4`]) become an LPM trie, and whose next-hop groups (hops with their
//! neighbours' MACs, usable masks, up-positions) become an array. The two paths then decide from
//! the same table, and the fast path follows every route change as soon as the workers do.
//!
//! # Publishing whole
//!
//! Two tables live in the maps ([`TABLE_A`], [`TABLE_B`]); the one not in use is rewritten —
//! only the entries that differ from what it held — and then made the one in use by a single
//! 4-byte store. A table that does not fit (more than [`MAX_FAST_ROUTES`] entries or
//! [`MAX_FAST_GROUPS`] groups) switches the fast path off ([`TABLE_OFF`]: every frame goes to
//! the AF_XDP path) and says so; it comes back with the next table that fits.
#![deny(unsafe_code)]

use std::collections::BTreeMap;

use aya::maps::lpm_trie::Key;
use aya::maps::{Array, DevMap, LpmTrie, MapData, PerCpuArray, PerCpuValues};
use aya::Ebpf;
use ofan_ebpf_common::fast::{
    fast_rx_slot, fast_tx_slot, row_of, FastConfig, FastDestination, FastGroup, FastHop, FastMiss,
    FastRow, ALGORITHM_ECMP, ALGORITHM_POFAN, ALGORITHM_RSQ, FAST_ACTIVE_MAP, FAST_CONFIG_MAP,
    FAST_COUNTS_MAP, FAST_GROUPS_MAP, FAST_POINTERS_MAP, FAST_ROUTES_MAPS, FAST_ROWS_MAP,
    FAST_TX_MAP, GROUP_ECMP, GROUP_NORTHBOUND, GROUP_SINGLE, MAX_FAST_GROUPS, MAX_FAST_HOPS,
    MAX_FAST_KEYS, MAX_FAST_ROUTES, MAX_FAST_ROWS, MAX_FAST_UP_PORTS, NO_HOP, NO_KEY, NO_ROW,
    ROUTE_GROUP, ROUTE_LOCAL, ROUTE_NONE, ROUTE_UNREACHABLE, TABLE_A, TABLE_B, TABLE_OFF,
};
use ofan_ebpf_common::MAX_PORTS;

use super::steer::{take_map, SteerError};
use crate::fib::{Destination, Fib, GroupKind, RouteTarget};
use crate::forward::ecmp_group_salt;
use crate::lb::{Algorithm, DestKey, SizeClass, SwitchBalancer, UpPort};

/// Whether the switch forwards in its XDP program too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FastPathMode {
    /// Every data-path frame goes to the AF_XDP workers.
    #[default]
    Off,
    /// The XDP program forwards what it can; the rest goes to the AF_XDP workers.
    Xdp,
}

impl FastPathMode {
    /// Its name on the command line and in the configuration file.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Xdp => "xdp",
        }
    }
}

/// The balancer algorithms the fast path runs, and why the others are not.
///
/// # Errors
/// Why `algorithm` cannot run in the XDP program.
pub fn supported(algorithm: Algorithm) -> Result<u32, String> {
    match algorithm {
        Algorithm::Pofan => Ok(ALGORITHM_POFAN),
        Algorithm::Ecmp => Ok(ALGORITHM_ECMP),
        Algorithm::Rsq => Ok(ALGORITHM_RSQ),
        Algorithm::Ofan | Algorithm::Rr => Err(format!(
            "{algorithm} keeps one pointer per destination for the whole switch, which every \
             CPU would have to advance with an atomic fetch-and-add per packet; the XDP fast \
             path runs pofan (a CPU is a pipe), ecmp and rsq"
        )),
        other => Err(format!(
            "{other} reads egress queue lengths or path-quality state that only the AF_XDP \
             workers keep; the XDP fast path runs pofan (a CPU is a pipe), ecmp and rsq"
        )),
    }
}

/// What goes wrong while filling the fast path's maps.
#[derive(Debug, thiserror::Error)]
pub enum FastPathError {
    /// A map could not be written or read.
    #[error("fast path: map `{map}`: {source}")]
    Map {
        /// The map.
        map: &'static str,
        /// aya's error.
        #[source]
        source: aya::maps::MapError,
    },
    /// The balancer's configuration does not fit the program.
    #[error("fast path: {0}")]
    Config(String),
    /// The number of possible CPUs could not be read.
    #[error("fast path: cannot count the possible CPUs: {0}")]
    Cpus(String),
}

/// The fast path's counters, summed over CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FastCounters {
    /// Frames left to the AF_XDP path, by [`FastMiss`] (`fast_miss_<name>`).
    pub misses: Vec<(&'static str, u64)>,
    /// Frames the fast path forwarded, by ingress port.
    pub rx: Vec<u64>,
    /// Frames the fast path forwarded, by egress port.
    pub tx: Vec<u64>,
}

/// One table in the fast path's form: what [`tables_of`] makes of a [`Fib`], and what a table
/// half holds (to write only what changes).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct FastTable {
    /// Route trie entries by (prefix length, address).
    pub routes: BTreeMap<(u8, [u8; 4]), FastDestination>,
    /// Groups by id.
    pub groups: Vec<FastGroup>,
    /// Rows by id.
    pub rows: Vec<FastRow>,
}

/// What the table's rows need of the balancer: its algorithm, width, keys and the port order
/// of each pointer slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FastBalancer {
    /// [`ALGORITHM_POFAN`], [`ALGORITHM_ECMP`] or [`ALGORITHM_RSQ`].
    pub algorithm: u32,
    /// Up-ports `w`.
    pub up_ports: u8,
    /// Destination keys.
    pub dest_keys: u32,
    /// Port order by pointer slot (`key · 2 + class`), pOfan only.
    pub orders: Vec<Vec<u8>>,
}

impl FastBalancer {
    /// The balancer `balancer` as the fast path's rows need it.
    ///
    /// # Errors
    /// [`FastPathError::Config`] for an algorithm the program does not run, or more keys or
    /// up-ports than it holds.
    pub fn of(balancer: &SwitchBalancer) -> Result<Self, FastPathError> {
        let lb = balancer.config();
        let algorithm = supported(lb.algorithm).map_err(FastPathError::Config)?;
        if lb.dest_keys > MAX_FAST_KEYS {
            return Err(FastPathError::Config(format!(
                "{} destination keys, the program holds {MAX_FAST_KEYS}",
                lb.dest_keys
            )));
        }
        if usize::from(lb.up_ports) > MAX_FAST_UP_PORTS || lb.up_ports == 0 {
            return Err(FastPathError::Config(format!(
                "{} up-ports, the program balances 1 to {MAX_FAST_UP_PORTS}",
                lb.up_ports
            )));
        }
        let orders = if algorithm == ALGORITHM_POFAN {
            (0..lb.dest_keys)
                .flat_map(|key| {
                    [SizeClass::Data, SizeClass::Ack].map(|class| {
                        balancer
                            .pointer_order(DestKey(key), class)
                            .map(<[u8]>::to_vec)
                            .unwrap_or_default()
                    })
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(Self {
            algorithm,
            up_ports: lb.up_ports,
            dest_keys: lb.dest_keys,
            orders,
        })
    }

    fn all_ports(&self) -> u64 {
        if self.up_ports >= 64 {
            u64::MAX
        } else {
            (1u64 << self.up_ports) - 1
        }
    }

    /// The order a northbound frame of `class` to `key` rotates through.
    fn order(&self, key: u32, class: SizeClass) -> Vec<u8> {
        match self.orders.get((key * 2 + class as u32) as usize) {
            Some(order) => order.clone(),
            None => (0..self.up_ports).collect(),
        }
    }
}

/// The fast path's maps and what the tables in them hold. `Send`: the FIB mirror's thread
/// publishes into it.
pub struct FastPath {
    config: Array<MapData, FastConfig>,
    active: Array<MapData, u32>,
    routes: [LpmTrie<MapData, [u8; 4], FastDestination>; 2],
    groups: Array<MapData, FastGroup>,
    rows: Array<MapData, FastRow>,
    pointers: PerCpuArray<MapData, u64>,
    tx: DevMap<MapData>,
    counts: PerCpuArray<MapData, u64>,
    /// The balancer, as the rows need it (set by [`Self::init`]).
    balancer: Option<FastBalancer>,
    /// The table in use.
    current: u32,
    /// What each table holds (index: table − [`TABLE_A`]).
    shadows: [FastTable; 2],
    /// Whether the last table did not fit (said once, until one fits again).
    overflowing: bool,
    ports: usize,
}

impl std::fmt::Debug for FastPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastPath")
            .field("current", &self.current)
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl FastPath {
    /// Takes the fast path's maps out of the loaded object (before its program is loaded).
    pub(crate) fn take_maps(ebpf: &mut Ebpf) -> Result<Self, SteerError> {
        Ok(Self {
            config: take_map(ebpf, FAST_CONFIG_MAP)?,
            active: take_map(ebpf, FAST_ACTIVE_MAP)?,
            routes: [
                take_map(ebpf, FAST_ROUTES_MAPS[0])?,
                take_map(ebpf, FAST_ROUTES_MAPS[1])?,
            ],
            groups: take_map(ebpf, FAST_GROUPS_MAP)?,
            rows: take_map(ebpf, FAST_ROWS_MAP)?,
            pointers: take_map(ebpf, FAST_POINTERS_MAP)?,
            tx: take_map(ebpf, FAST_TX_MAP)?,
            counts: take_map(ebpf, FAST_COUNTS_MAP)?,
            balancer: None,
            current: TABLE_OFF,
            shadows: [FastTable::default(), FastTable::default()],
            overflowing: false,
            ports: 0,
        })
    }

    /// Writes what stays for the life of the switch: the balancer (`balancer`, with ACKs up
    /// to `ack_max_frame` and frames up to `max_frame_len`), every CPU's pOfan pointers at their
    /// seeded start (CPU `c` is pipe `c`), and each port's egress interface (`ifindexes`, by
    /// port). The fast path stays off until [`Self::publish`].
    ///
    /// # Errors
    /// [`FastPathError::Config`] for an algorithm the program does not run or more keys or
    /// up-ports than it holds; [`FastPathError::Map`], [`FastPathError::Cpus`].
    pub fn init(
        &mut self,
        balancer: &SwitchBalancer,
        ack_max_frame: u32,
        max_frame_len: u32,
        ifindexes: &[u32],
    ) -> Result<(), FastPathError> {
        let lb = balancer.config();
        let view = FastBalancer::of(balancer)?;
        if ifindexes.len() > MAX_PORTS as usize {
            return Err(FastPathError::Config(format!(
                "{} ports, the program serves {MAX_PORTS}",
                ifindexes.len()
            )));
        }
        set_active(&mut self.active, TABLE_OFF)?;
        self.config
            .set(
                0,
                FastConfig {
                    algorithm: view.algorithm,
                    up_ports: u32::from(lb.up_ports),
                    dest_keys: lb.dest_keys,
                    ack_max_frame,
                    max_frame_len,
                    lb_salt: balancer.ecmp_salt(),
                    forward_salt: ecmp_group_salt(lb.seed),
                    all_ports: view.all_ports(),
                },
                0,
            )
            .map_err(map_error(FAST_CONFIG_MAP))?;
        let cpus =
            aya::util::nr_cpus().map_err(|(_, error)| FastPathError::Cpus(error.to_string()))?;
        for key in 0..lb.dest_keys {
            for class in [SizeClass::Data, SizeClass::Ack] {
                let slot = key * 2 + class as u32;
                let starts: Vec<u64> = (0..cpus)
                    .map(|cpu| balancer.pofan_start(cpu as u16, DestKey(key), class))
                    .collect();
                let values = PerCpuValues::try_from(starts)
                    .map_err(|error| FastPathError::Cpus(error.to_string()))?;
                self.pointers
                    .set(slot, values, 0)
                    .map_err(map_error(FAST_POINTERS_MAP))?;
            }
        }
        for (port, &ifindex) in ifindexes.iter().enumerate() {
            self.tx
                .set(port as u32, ifindex, None, 0)
                .map_err(|error| match error {
                    aya::maps::xdp::XdpMapError::MapError(source) => FastPathError::Map {
                        map: FAST_TX_MAP,
                        source,
                    },
                    other => FastPathError::Config(format!("{FAST_TX_MAP}: {other}")),
                })?;
        }
        self.ports = ifindexes.len();
        self.balancer = Some(view);
        Ok(())
    }

    /// Makes `fib` the fast path's table: writes it into the table not in use and switches to
    /// it. A table that does not fit turns the fast path off (every frame to the AF_XDP path)
    /// and is logged once; returns whether the fast path now forwards.
    ///
    /// # Errors
    /// [`FastPathError::Map`] (the fast path is then off).
    pub fn publish(&mut self, fib: &Fib) -> Result<bool, FastPathError> {
        let Some(balancer) = &self.balancer else {
            return Err(FastPathError::Config("published before init".into()));
        };
        let table = match tables_of(fib, balancer) {
            Ok(tables) => tables,
            Err(reason) => {
                if !self.overflowing {
                    tracing::warn!(%reason, "XDP fast path off: every frame goes to the AF_XDP workers");
                    self.overflowing = true;
                }
                set_active(&mut self.active, TABLE_OFF)?;
                self.current = TABLE_OFF;
                return Ok(false);
            }
        };
        if self.overflowing {
            tracing::info!("XDP fast path on again: the table fits");
            self.overflowing = false;
        }
        let target = if self.current == TABLE_A {
            TABLE_B
        } else {
            TABLE_A
        };
        let half = (target - TABLE_A) as usize;
        let written = self.write_half(half, table);
        if let Err(error) = written {
            // A half-written table must not be used: off until the next publication.
            let _ = set_active(&mut self.active, TABLE_OFF);
            self.current = TABLE_OFF;
            self.shadows[half] = FastTable::default();
            return Err(error);
        }
        set_active(&mut self.active, target)?;
        self.current = target;
        Ok(true)
    }

    /// Brings table half `half` to `table`, writing only what differs: groups and rows first,
    /// then the routes that refer to them.
    fn write_half(&mut self, half: usize, table: FastTable) -> Result<(), FastPathError> {
        let shadow = &mut self.shadows[half];
        let base = half as u32 * MAX_FAST_GROUPS;
        for (index, group) in table.groups.iter().enumerate() {
            if shadow.groups.get(index) != Some(group) {
                self.groups
                    .set(base + index as u32, group, 0)
                    .map_err(map_error(FAST_GROUPS_MAP))?;
            }
        }
        let base = half as u32 * MAX_FAST_ROWS;
        for (index, row) in table.rows.iter().enumerate() {
            if shadow.rows.get(index) != Some(row) {
                self.rows
                    .set(base + index as u32, row, 0)
                    .map_err(map_error(FAST_ROWS_MAP))?;
            }
        }
        let map = FAST_ROUTES_MAPS[half];
        let trie = &mut self.routes[half];
        let gone = shadow
            .routes
            .keys()
            .filter(|key| !table.routes.contains_key(key));
        for &(len, addr) in gone {
            trie.remove(&Key::new(u32::from(len), addr))
                .map_err(map_error(map))?;
        }
        for (&(len, addr), destination) in &table.routes {
            if shadow.routes.get(&(len, addr)) != Some(destination) {
                trie.insert(&Key::new(u32::from(len), addr), destination, 0)
                    .map_err(map_error(map))?;
            }
        }
        *shadow = table;
        Ok(())
    }

    /// The table in use: [`TABLE_OFF`], [`TABLE_A`] or [`TABLE_B`].
    pub fn active_table(&self) -> u32 {
        self.current
    }

    /// The counters, summed over CPUs.
    ///
    /// # Errors
    /// [`FastPathError::Map`].
    pub fn counters(&self) -> Result<FastCounters, FastPathError> {
        let sum = |slot: u32| -> Result<u64, FastPathError> {
            Ok(self
                .counts
                .get(&slot, 0)
                .map_err(map_error(FAST_COUNTS_MAP))?
                .iter()
                .sum())
        };
        let mut counters = FastCounters::default();
        for miss in FastMiss::ALL {
            counters.misses.push((miss.name(), sum(miss.index())?));
        }
        for port in 0..self.ports as u32 {
            counters.rx.push(sum(fast_rx_slot(port))?);
            counters.tx.push(sum(fast_tx_slot(port))?);
        }
        Ok(counters)
    }
}

fn set_active(active: &mut Array<MapData, u32>, table: u32) -> Result<(), FastPathError> {
    active.set(0, table, 0).map_err(map_error(FAST_ACTIVE_MAP))
}

fn map_error(map: &'static str) -> impl Fn(aya::maps::MapError) -> FastPathError {
    move |source| FastPathError::Map { map, source }
}

/// The fast path's form of `fib` for `balancer`: its IPv4 one-walk entries as trie entries
/// (with the row of each size class for a northbound route with a key), its groups in
/// [`FastGroup`] form (by group id), and the rows; why it does not fit, if it does not.
///
/// # Errors
/// Too many entries, groups or rows, or a group with more hops than the program holds.
pub fn tables_of(fib: &Fib, balancer: &FastBalancer) -> Result<FastTable, String> {
    if fib.groups().len() > MAX_FAST_GROUPS as usize {
        return Err(format!(
            "the table has {} next-hop groups, the program holds {MAX_FAST_GROUPS}",
            fib.groups().len()
        ));
    }
    let mut table = FastTable::default();
    for group in fib.groups() {
        table.groups.push(fast_group(fib, group)?);
    }
    // Rows by (order, valid ports), shared by every route that has them.
    let mut row_ids: BTreeMap<(Vec<u8>, u64), u32> = BTreeMap::new();
    let all_ports = balancer.all_ports();
    for (addr, len, destination) in fib.destinations_v4() {
        let mut fast = fast_destination(&destination);
        let group = match destination.route {
            Some(RouteTarget::Group(group)) => fib.group(group),
            _ => None,
        };
        let valid = group.map_or(0, |group| group.up_mask().0 & all_ports);
        let northbound = group.is_some_and(|group| group.kind() == GroupKind::Northbound);
        let balanced = destination.key.filter(|key| key.0 < balancer.dest_keys);
        if let (true, Some(key), true) = (northbound, balanced, valid != 0) {
            for class in [SizeClass::Data, SizeClass::Ack] {
                let order = balancer.order(key.0, class);
                let next = table.rows.len() as u32;
                let id = *row_ids.entry((order.clone(), valid)).or_insert_with(|| {
                    table.rows.push(row_of(&order, valid));
                    next
                });
                fast.rows[class as usize] = id;
            }
        }
        table.routes.insert((len, addr.octets()), fast);
    }
    if table.routes.len() > MAX_FAST_ROUTES as usize {
        return Err(format!(
            "the table has {} IPv4 entries (routes, key prefixes, own addresses), the program holds {MAX_FAST_ROUTES}",
            table.routes.len()
        ));
    }
    if table.rows.len() > MAX_FAST_ROWS as usize {
        return Err(format!(
            "the table needs {} rows, the program holds {MAX_FAST_ROWS}",
            table.rows.len()
        ));
    }
    Ok(table)
}

fn fast_group(fib: &Fib, group: &crate::fib::Group) -> Result<FastGroup, String> {
    let hops = group.hops();
    if hops.len() > MAX_FAST_HOPS {
        return Err(format!(
            "a group has {} next hops, the program holds {MAX_FAST_HOPS}",
            hops.len()
        ));
    }
    let mut fast = FastGroup {
        kind: match group.kind() {
            GroupKind::Single => GROUP_SINGLE,
            GroupKind::Ecmp => GROUP_ECMP,
            GroupKind::Northbound => GROUP_NORTHBOUND,
        },
        hop_count: hops.len() as u32,
        ..FastGroup::EMPTY
    };
    for index in (0..hops.len()).filter(|&index| group.usable_hops() >> index & 1 != 0) {
        fast.usable_hops[fast.usable_count as usize] = index as u8;
        fast.usable_count += 1;
    }
    for (slot, hop) in fast.hops.iter_mut().zip(hops) {
        *slot = FastHop {
            port: u32::from(hop.port.0),
            dst_mac: hop.mac.unwrap_or_default(),
            src_mac: fib.port(hop.port).map(|port| port.mac).unwrap_or_default(),
        };
    }
    for (position, slot) in fast.hop_at_up.iter_mut().enumerate() {
        *slot = group
            .hop_index_at_up(UpPort(position as u8))
            .unwrap_or(NO_HOP);
    }
    Ok(fast)
}

fn fast_destination(destination: &Destination) -> FastDestination {
    let (route, group) = match destination.route {
        None => (ROUTE_NONE, 0),
        Some(RouteTarget::Group(group)) => (ROUTE_GROUP, group.0),
        Some(RouteTarget::Local) => (ROUTE_LOCAL, 0),
        Some(RouteTarget::Unreachable) => (ROUTE_UNREACHABLE, 0),
    };
    FastDestination {
        route,
        group,
        key: destination.key.map_or(NO_KEY, |key| key.0),
        local: u32::from(destination.local),
        rows: [NO_ROW; 2],
    }
}

/// A handle the FIB mirror's thread publishes through (shared with the runtime, which reads the
/// counters).
pub type SharedFastPath = std::sync::Arc<std::sync::Mutex<FastPath>>;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::lb::{LbConfig, Northbound, PortMask};

    fn balancer(algorithm: Algorithm, up_ports: u8, seed: u64) -> std::sync::Arc<SwitchBalancer> {
        SwitchBalancer::new(LbConfig {
            algorithm,
            up_ports,
            dest_keys: 8,
            pipes: 4,
            buffer_bytes: 1 << 20,
            seed,
        })
        .unwrap()
    }

    proptest! {
        /// The program's pOfan — a pointer walking the row of the valid ports in the slot's
        /// order (`row.ports[n mod v]`) — hands out exactly the ports `lb`'s pOfan does, packet
        /// after packet, through changes of the valid set.
        #[test]
        fn pofan_rows_rotate_exactly_as_lb(
            up_ports in 1u8..=64,
            seed in any::<u64>(),
            key in 0u32..8,
            ack in any::<bool>(),
            pipe in 0u16..4,
            masks in proptest::collection::vec(any::<u64>(), 1..5),
            steps in 1usize..150,
        ) {
            let switch = balancer(Algorithm::Pofan, up_ports, seed);
            let view = FastBalancer::of(&switch).unwrap();
            let class = if ack { SizeClass::Ack } else { SizeClass::Data };
            let mut lb = switch.pipe(pipe).unwrap();
            let mut pointer = switch.pofan_start(pipe, DestKey(key), class);
            for mask in masks {
                let valid = mask & view.all_ports();
                if valid == 0 {
                    continue;
                }
                let row = row_of(&view.order(key, class), valid);
                prop_assert_eq!(u64::from(row.count), u64::from(valid.count_ones()));
                for _ in 0..steps {
                    let expected = row.ports[(pointer % u64::from(row.count)) as usize];
                    pointer += 1;
                    let packet = Northbound {
                        key: DestKey(key),
                        class,
                        valid: PortMask(valid),
                        flow_hash: 0,
                        frame_len: 100,
                    };
                    let chosen = lb.choose(&packet, &mut []).unwrap();
                    prop_assert_eq!(chosen.0, expected);
                }
            }
        }

        /// ECMP and RSQ take the `r`-th valid port in increasing order: the row of the identity
        /// order, one for both classes.
        #[test]
        fn ecmp_rows_are_the_valid_ports_in_increasing_order(
            up_ports in 1u8..=64,
            mask in any::<u64>(),
        ) {
            let view = FastBalancer::of(&balancer(Algorithm::Ecmp, up_ports, 1)).unwrap();
            let valid = mask & view.all_ports();
            let row = row_of(&view.order(3, SizeClass::Data), valid);
            let expected: Vec<u8> = PortMask(valid).iter().collect();
            prop_assert_eq!(&row.ports[..row.count as usize], &expected[..]);
            prop_assert_eq!(view.order(3, SizeClass::Ack), view.order(3, SizeClass::Data));
        }
    }

    #[test]
    fn algorithms_the_program_cannot_run_are_refused_with_the_reason() {
        for algorithm in [Algorithm::Pofan, Algorithm::Ecmp, Algorithm::Rsq] {
            assert!(supported(algorithm).is_ok(), "{algorithm}");
        }
        for algorithm in [
            Algorithm::Ofan,
            Algorithm::Jsq,
            Algorithm::Ar,
            Algorithm::Drill,
        ] {
            let reason = supported(algorithm).unwrap_err();
            assert!(reason.contains("pofan"), "{reason}");
        }
    }
}
