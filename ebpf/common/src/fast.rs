//! The XDP fast path (`ofan_fast`): its tables, as the control thread fills them, and its
//! decision, written once for the XDP program and for the tests that hold it equal to the
//! AF_XDP path's (`ofan_dataplane::forward` with `ofan_dataplane::lb`).
//!
//! `ofan_fast` first steers as `ofan_steer` does (the kernel's frames to the kernel, with the
//! same counters). A frame the data path would get is then forwarded in the program itself when
//! [`decide`] can: untagged IPv4 with a valid header, a route whose next-hop group has a usable
//! hop, and for a northbound group a destination key and an algorithm the program runs. The
//! frame is rewritten (MACs, TTL, checksum: [`checksum_update`]) and sent with `XDP_REDIRECT`
//! through [`FAST_TX_MAP`]. Any other frame goes to the AF_XDP socket of its queue as before,
//! and the reason is counted ([`FastMiss`]): the AF_XDP path decides and counts it exactly as
//! without the fast path.
//!
//! # Tables
//!
//! | map | kind | key | value |
//! |---|---|---|---|
//! | [`FAST_CONFIG_MAP`] | array, 1 | 0 | [`FastConfig`]: the balancer, written once before attaching |
//! | [`FAST_ACTIVE_MAP`] | array, 1 | 0 | `u32`: the table in use, [`TABLE_OFF`], [`TABLE_A`] or [`TABLE_B`] |
//! | [`FAST_ROUTES_MAPS`] | LPM trie ×2 | `(prefix_len, IPv4 address)` | [`FastDestination`] |
//! | [`FAST_GROUPS_MAP`] | array | `(table − 1) · MAX_FAST_GROUPS + group` | [`FastGroup`] |
//! | [`FAST_ROWS_MAP`] | array | `(table − 1) · MAX_FAST_ROWS + row` | [`FastRow`]: the valid up-ports in a pointer's order |
//! | [`FAST_POINTERS_MAP`] | per-CPU array | pointer slot `key · 2 + class` | pOfan's pointer of this CPU: a CPU is a pipe |
//! | [`FAST_TX_MAP`] | devmap | switch port | egress ifindex |
//! | [`FAST_COUNTS_MAP`] | per-CPU array | [`FastMiss`], then [`fast_rx_slot`], [`fast_tx_slot`] | `u64` |
//!
//! The control thread publishes a forwarding table *whole*: it writes the table not in use
//! (routes, groups, rows), then switches [`FAST_ACTIVE_MAP`] to it with one aligned 4-byte
//! store, so a frame sees one table or the other, never half of each. The pointers, keyed by
//! destination key and size class, live on across tables, as the AF_XDP path's do.
//!
//! # Rows: the choice precomputed
//!
//! Every balancer the program runs takes, for a northbound frame, the `r`-th valid up-port in
//! some order — pOfan the `(n mod v)`-th in its pointer's port order, ECMP and RSQ the
//! `r`-th in increasing order — where the valid ports depend only on the route's group and the
//! order only on its destination key and the frame's size class. So the control thread writes,
//! for each route and class, the valid ports in that order ([`FastRow`]), and the program's
//! choice is one remainder and one load: no loop, no bit search, nothing the verifier must
//! explore path by path. Likewise each group lists its usable hops ([`FastGroup::usable_hops`])
//! for the ECMP of plain multipath groups.

use crate::FrameView;

/// Kernel name of the fast-path program.
pub const FAST_PROGRAM: &str = "ofan_fast";
/// Name of the one-entry array holding the [`FastConfig`].
pub const FAST_CONFIG_MAP: &str = "FAST_CONFIG";
/// Name of the one-entry array holding the table in use.
pub const FAST_ACTIVE_MAP: &str = "FAST_ACTIVE";
/// Names of the two route tries, [`TABLE_A`]'s and [`TABLE_B`]'s.
pub const FAST_ROUTES_MAPS: [&str; 2] = ["FAST_ROUTES_A", "FAST_ROUTES_B"];
/// Name of the next-hop group array (both tables).
pub const FAST_GROUPS_MAP: &str = "FAST_GROUPS";
/// Name of the array of rows (both tables).
pub const FAST_ROWS_MAP: &str = "FAST_ROWS";
/// Name of the per-CPU pointer array.
pub const FAST_POINTERS_MAP: &str = "FAST_POINTERS";
/// Name of the devmap from switch port to egress interface.
pub const FAST_TX_MAP: &str = "FAST_TX";
/// Name of the per-CPU counters.
pub const FAST_COUNTS_MAP: &str = "FAST_COUNTS";

/// [`FAST_ACTIVE_MAP`]: no table; every frame goes to the AF_XDP path.
pub const TABLE_OFF: u32 = 0;
/// [`FAST_ACTIVE_MAP`]: the first route trie and the first half of the groups.
pub const TABLE_A: u32 = 1;
/// [`FAST_ACTIVE_MAP`]: the second route trie and the second half of the groups.
pub const TABLE_B: u32 = 2;

/// Routes (prefixes of routes, destination keys and local addresses) one table holds.
pub const MAX_FAST_ROUTES: u32 = 16_384;
/// Next-hop groups one table holds.
pub const MAX_FAST_GROUPS: u32 = 1024;
/// Hops of one group (the AF_XDP path's limit too: hop sets are 64-bit masks).
pub const MAX_FAST_HOPS: usize = 64;
/// Up-ports a balancer chooses among.
pub const MAX_FAST_UP_PORTS: usize = 64;
/// Destination keys the fast path balances (a k = 64 fat tree's edge switch has 2048).
pub const MAX_FAST_KEYS: u32 = 4096;
/// Rows one table holds (distinct valid-port orders: about two per destination key).
pub const MAX_FAST_ROWS: u32 = 2 * MAX_FAST_KEYS;
/// Pointer slots: two size classes per key.
pub const FAST_SLOTS: u32 = 2 * MAX_FAST_KEYS;

/// [`FastConfig::algorithm`]: pOfan, the pointers per CPU.
pub const ALGORITHM_POFAN: u32 = 1;
/// [`FastConfig::algorithm`]: ECMP over the valid up-ports by the flow hash.
pub const ALGORITHM_ECMP: u32 = 2;
/// [`FastConfig::algorithm`]: a uniformly random valid up-port per packet.
pub const ALGORITHM_RSQ: u32 = 3;

/// [`FastDestination::route`]: no route.
pub const ROUTE_NONE: u32 = 0;
/// [`FastDestination::route`]: forward through group [`FastDestination::group`].
pub const ROUTE_GROUP: u32 = 1;
/// [`FastDestination::route`]: a local route (to the switch's kernel).
pub const ROUTE_LOCAL: u32 = 2;
/// [`FastDestination::route`]: a blackhole, unreachable or prohibit route.
pub const ROUTE_UNREACHABLE: u32 = 3;

/// [`FastGroup::kind`]: one hop.
pub const GROUP_SINGLE: u32 = 1;
/// [`FastGroup::kind`]: several hops not all up-ports: ECMP on the salted flow hash.
pub const GROUP_ECMP: u32 = 2;
/// [`FastGroup::kind`]: hops on distinct up-ports: the balancer chooses.
pub const GROUP_NORTHBOUND: u32 = 3;

/// [`FastDestination::key`] of a destination without a key.
pub const NO_KEY: u32 = u32::MAX;
/// [`FastDestination::rows`] of a destination the program does not balance.
pub const NO_ROW: u32 = u32::MAX;
/// [`FastGroup::hop_at_up`] of an up-position that is not in the group.
pub const NO_HOP: u8 = u8::MAX;

/// The balancer, as [`decide`] needs it: written once, before the program is attached.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastConfig {
    /// [`ALGORITHM_POFAN`], [`ALGORITHM_ECMP`] or [`ALGORITHM_RSQ`].
    pub algorithm: u32,
    /// The switch's up-ports `w` (1 to 64).
    pub up_ports: u32,
    /// Destination keys the balancer has: a key at or past it is not balanced here.
    pub dest_keys: u32,
    /// Frames up to this length are ACKs (their own pointers).
    pub ack_max_frame: u32,
    /// Longer frames (Ethernet header to the end) are not forwarded here.
    pub max_frame_len: u32,
    /// The balancer's ECMP salt (`lb`'s per-switch `salt`).
    pub lb_salt: u32,
    /// The forwarder's salt for ECMP groups.
    pub forward_salt: u64,
    /// Every up-port: bit `i` for `i < up_ports`.
    pub all_ports: u64,
}

/// What a route prefix leads to: the value of a route trie.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FastDestination {
    /// [`ROUTE_NONE`], [`ROUTE_GROUP`], [`ROUTE_LOCAL`] or [`ROUTE_UNREACHABLE`].
    pub route: u32,
    /// The group of a [`ROUTE_GROUP`].
    pub group: u32,
    /// The destination key, or [`NO_KEY`].
    pub key: u32,
    /// Nonzero when the prefix is one of the switch's own addresses.
    pub local: u32,
    /// For a northbound group with a key the balancer has: the row of each size class (data,
    /// ACK) in this table; [`NO_ROW`] otherwise (the AF_XDP path decides those).
    pub rows: [u32; 2],
}

/// The up-ports a northbound frame may take, in the order its balancer rotates through them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastRow {
    /// Valid up-ports `v` (0 to 64).
    pub count: u32,
    /// The valid up-positions, `ports[..count]`.
    pub ports: [u8; MAX_FAST_UP_PORTS],
}

impl FastRow {
    /// A row with no port.
    pub const EMPTY: FastRow = FastRow {
        count: 0,
        ports: [0; MAX_FAST_UP_PORTS],
    };
}

/// One next hop: where a frame leaves and with which MAC addresses.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FastHop {
    /// The egress switch port (its [`FAST_TX_MAP`] entry).
    pub port: u32,
    /// The neighbour's MAC address.
    pub dst_mac: [u8; 6],
    /// The egress port's own MAC address.
    pub src_mac: [u8; 6],
}

/// A next-hop group, as the AF_XDP path's `fib::Group`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastGroup {
    /// [`GROUP_SINGLE`], [`GROUP_ECMP`] or [`GROUP_NORTHBOUND`].
    pub kind: u32,
    /// Hops in `hops`.
    pub hop_count: u32,
    /// Usable hops (port up, neighbour resolved): `usable_hops[..usable_count]`.
    pub usable_count: u32,
    /// Reserved (alignment).
    pub reserved: u32,
    /// The indices of the usable hops, in increasing order.
    pub usable_hops: [u8; MAX_FAST_HOPS],
    /// Northbound: up-position → hop index ([`NO_HOP`]: not in the group).
    pub hop_at_up: [u8; MAX_FAST_UP_PORTS],
    /// The hops.
    pub hops: [FastHop; MAX_FAST_HOPS],
}

impl FastGroup {
    /// A group with no hops.
    pub const EMPTY: FastGroup = FastGroup {
        kind: 0,
        hop_count: 0,
        usable_count: 0,
        reserved: 0,
        usable_hops: [0; MAX_FAST_HOPS],
        hop_at_up: [NO_HOP; MAX_FAST_UP_PORTS],
        hops: [FastHop {
            port: 0,
            dst_mac: [0; 6],
            src_mac: [0; 6],
        }; MAX_FAST_HOPS],
    };
}

macro_rules! fast_misses {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)+) => {
        /// Why the fast path left a frame to the AF_XDP path (which then decides and counts it
        /// as it always does). One per-CPU counter each.
        #[repr(u32)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum FastMiss {
            $($(#[$doc])* $variant,)+
        }

        impl FastMiss {
            /// Every reason, in index order.
            pub const ALL: &'static [FastMiss] = &[$(FastMiss::$variant,)+];
            /// Number of reasons: the first slots of the [`FAST_COUNTS_MAP`].
            pub const COUNT: u32 = Self::ALL.len() as u32;

            /// The counter's name (`snake_case`, shown as `fast_miss_<name>`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(FastMiss::$variant => $name,)+
                }
            }

            /// Index into the [`FAST_COUNTS_MAP`].
            #[inline(always)]
            pub const fn index(self) -> u32 {
                self as u32
            }
        }
    };
}

fast_misses! {
    /// No table is published yet (or publishing failed).
    Off = "off",
    /// Not untagged IPv4 (IPv6, an 802.1Q tag, ARP and other kernel traffic).
    NotIpv4 = "not_ipv4",
    /// IPv4 that the steering rules give the kernel: options, fragments, TTL ≤ 1, BGP,
    /// multicast or broadcast, the switch's own addresses.
    ForTheKernel = "for_the_kernel",
    /// An IPv4 header the AF_XDP path refuses: total length, checksum.
    BadHeader = "bad_header",
    /// Longer than the egress links carry.
    TooLong = "too_long",
    /// A source or destination a router never forwards.
    Martian = "martian",
    /// No route.
    NoRoute = "no_route",
    /// A local route, or a blackhole or unreachable route.
    NotForwarded = "not_forwarded",
    /// No usable hop in the group (ports down, neighbours unresolved).
    NoUsableHop = "no_usable_hop",
    /// A northbound group whose destination has no key the balancer has, or no valid up-port:
    /// the AF_XDP path falls back to ECMP and counts it.
    NoKey = "no_key",
}

/// The [`FAST_COUNTS_MAP`] slot counting frames the fast path forwarded that came in on
/// `port`.
#[inline(always)]
pub const fn fast_rx_slot(port: u32) -> u32 {
    FastMiss::COUNT + port
}

/// The [`FAST_COUNTS_MAP`] slot counting frames the fast path sent out of `port`.
#[inline(always)]
pub const fn fast_tx_slot(port: u32) -> u32 {
    FastMiss::COUNT + crate::MAX_PORTS + port
}

/// Entries of the [`FAST_COUNTS_MAP`].
pub const FAST_COUNT_SLOTS: u32 = FastMiss::COUNT + 2 * crate::MAX_PORTS;

/// Where a frame the fast path forwards goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FastEgress {
    /// The egress switch port.
    pub port: u32,
    /// The new Ethernet addresses (bytes 0..12 of the frame): the neighbour's MAC, then the
    /// egress port's.
    pub macs: [u8; 12],
    /// The new bytes 22..26 of the frame (IPv4 TTL, protocol, header checksum): the TTL one
    /// less and the checksum updated for it (RFC 1624), as the AF_XDP path's
    /// `wire::forward_rewrite` does.
    pub ttl_checksum: [u8; 4],
}

/// What [`decide`] reads besides the frame: the maps, and this CPU's pointers and randomness.
pub trait FastTables {
    /// The balancer's configuration.
    fn config(&self) -> Option<&FastConfig>;
    /// The table in use ([`TABLE_OFF`], [`TABLE_A`], [`TABLE_B`]).
    fn active(&self) -> u32;
    /// The longest-prefix match of `dst` (network order) in table `table`.
    fn destination(&self, table: u32, dst: [u8; 4]) -> Option<FastDestination>;
    /// Group `group` of table `table`.
    fn group(&self, table: u32, group: u32) -> Option<&FastGroup>;
    /// Row `row` of table `table`.
    fn row(&self, table: u32, row: u32) -> Option<&FastRow>;
    /// This CPU's pointer of `slot`: its value, which it then advances by one.
    fn take_pointer(&self, slot: u32) -> Option<u64>;
    /// A uniformly random 32-bit number.
    fn random(&self) -> u32;
}

const ETH_HEADER: usize = 14;
const IPV4_HEADER: usize = 20;
const ETH_P_IP: u16 = 0x0800;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const BGP_PORT: u16 = 179;

/// Decides a frame: where it leaves, or why the fast path leaves it (to [`crate::classify`] and
/// the AF_XDP path after it). `frame_len` is the frame's length (Ethernet header to the end).
/// It forwards no frame that `classify` gives the kernel, and decides every frame it forwards
/// as the AF_XDP path would.
///
/// # Errors
/// The [`FastMiss`] that sends the frame to the AF_XDP path.
#[inline(always)]
pub fn decide(
    frame: &impl FrameView,
    frame_len: u32,
    tables: &impl FastTables,
) -> Result<FastEgress, FastMiss> {
    let table = tables.active();
    if table != TABLE_A && table != TABLE_B {
        return Err(FastMiss::Off);
    }
    let config = tables.config().ok_or(FastMiss::Off)?;
    let ether_type = frame.bytes::<2>(12).ok_or(FastMiss::NotIpv4)?;
    if u16::from_be_bytes(ether_type) != ETH_P_IP {
        return Err(FastMiss::NotIpv4);
    }
    if frame_len > config.max_frame_len {
        return Err(FastMiss::TooLong);
    }
    let ip = frame
        .bytes::<IPV4_HEADER>(ETH_HEADER)
        .ok_or(FastMiss::BadHeader)?;
    // What `classify` gives the kernel, for IPv4: options, fragments, a TTL of 1 or less, BGP,
    // multicast and broadcast (224/3), the switch's own addresses (below, from the route table,
    // which has them first). Checked here so that the fast path needs no steering verdict of its
    // own; a frame left for any of these reasons then goes through `classify` as ever.
    let fragment = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
    if ip[0] != 0x45 || fragment != 0 || ip[8] <= 1 || ip[16] >= 224 {
        return Err(FastMiss::ForTheKernel);
    }
    if ip[9] == IPPROTO_TCP {
        let ports = frame
            .bytes::<4>(ETH_HEADER + IPV4_HEADER)
            .ok_or(FastMiss::ForTheKernel)?;
        if u16::from_be_bytes([ports[0], ports[1]]) == BGP_PORT
            || u16::from_be_bytes([ports[2], ports[3]]) == BGP_PORT
        {
            return Err(FastMiss::ForTheKernel);
        }
    }
    // What the AF_XDP path checks besides: the lengths and the checksum.
    let total_len = u32::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total_len < IPV4_HEADER as u32
        || total_len > frame_len.saturating_sub(ETH_HEADER as u32)
        || !header_checksum_ok(&ip)
    {
        return Err(FastMiss::BadHeader);
    }
    let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    if is_martian_v4(src, dst) {
        return Err(FastMiss::Martian);
    }
    let destination = tables
        .destination(table, dst.to_be_bytes())
        .ok_or(FastMiss::NoRoute)?;
    if destination.local != 0 {
        return Err(FastMiss::ForTheKernel);
    }
    match destination.route {
        ROUTE_GROUP => {}
        ROUTE_NONE => return Err(FastMiss::NoRoute),
        _ => return Err(FastMiss::NotForwarded),
    }
    let group = tables
        .group(table, destination.group)
        .ok_or(FastMiss::NoRoute)?;
    if group.usable_count == 0 {
        return Err(FastMiss::NoUsableHop);
    }
    let hop = match group.kind {
        GROUP_SINGLE => 0,
        GROUP_ECMP => {
            let hash = flow_hash_v4(frame, &ip, total_len, frame_len);
            let salted = (mix64(u64::from(hash) ^ config.forward_salt) >> 32) as u32;
            let rank = (u64::from(salted) * u64::from(group.usable_count)) >> 32;
            group.usable_hops[bounded_index(rank)]
        }
        GROUP_NORTHBOUND => {
            let class = u32::from(frame_len <= config.ack_max_frame);
            let row_id = destination.rows[(class & 1) as usize];
            let key = destination.key;
            if row_id == NO_ROW || key >= MAX_FAST_KEYS {
                return Err(FastMiss::NoKey);
            }
            let row = tables.row(table, row_id).ok_or(FastMiss::NoKey)?;
            let count = u64::from(row.count);
            if count == 0 || count > MAX_FAST_UP_PORTS as u64 {
                return Err(FastMiss::NoKey);
            }
            let rank = match config.algorithm {
                ALGORITHM_POFAN => tables
                    .take_pointer(key * 2 + class)
                    .ok_or(FastMiss::NoKey)?
                    .checked_rem(count)
                    .ok_or(FastMiss::NoKey)?,
                ALGORITHM_ECMP => {
                    let hash = flow_hash_v4(frame, &ip, total_len, frame_len);
                    mix64(u64::from(hash ^ config.lb_salt))
                        .checked_rem(count)
                        .ok_or(FastMiss::NoKey)?
                }
                ALGORITHM_RSQ => (u64::from(tables.random()) * count) >> 32,
                _ => return Err(FastMiss::NoKey),
            };
            let up = row.ports[bounded_index(rank)];
            let index = group.hop_at_up[bounded_index(u64::from(up))];
            if index == NO_HOP {
                return Err(FastMiss::NoUsableHop);
            }
            index
        }
        _ => return Err(FastMiss::NoRoute),
    };
    let hop = group.hops[bounded_index(u64::from(hop))];
    let mut macs = [0u8; 12];
    macs[..6].copy_from_slice(&hop.dst_mac);
    macs[6..].copy_from_slice(&hop.src_mac);
    let (ttl, protocol) = (ip[8], ip[9]);
    let new_ttl = ttl.wrapping_sub(1);
    let checksum = checksum_update(
        u16::from_be_bytes([ip[10], ip[11]]),
        u16::from_be_bytes([ttl, protocol]),
        u16::from_be_bytes([new_ttl, protocol]),
    )
    .to_be_bytes();
    Ok(FastEgress {
        port: hop.port,
        macs,
        ttl_checksum: [new_ttl, protocol, checksum[0], checksum[1]],
    })
}

/// `value mod 64` as an index into a 64-entry array, computed so that the XDP verifier sees
/// the bound: the compiler knows many such values are below 64 already (a remainder by a count
/// of at most 64) and would drop a plain mask, which leaves the verifier with an unbounded
/// offset into a map value.
#[inline(always)]
fn bounded_index(value: u64) -> usize {
    (core::hint::black_box(value) & 63) as usize
}

/// The row of a northbound destination: the valid up-positions (`valid`, within the balancer's
/// `width`) in the order `order` (a pointer's port order for pOfan; increasing for ECMP and
/// RSQ). What the control thread writes into [`FAST_ROWS_MAP`].
pub fn row_of(order: &[u8], valid: u64) -> FastRow {
    let mut row = FastRow::EMPTY;
    for &port in order {
        if port < 64 && valid >> port & 1 != 0 && (row.count as usize) < MAX_FAST_UP_PORTS {
            row.ports[row.count as usize] = port;
            row.count += 1;
        }
    }
    row
}

/// The data path's flow hash of an IPv4 frame (`wire::flow_hash_v4`): two SplitMix64 rounds
/// over addresses, protocol and ports (0 where the TCP or UDP header is not all there).
#[inline(always)]
fn flow_hash_v4(
    frame: &impl FrameView,
    ip: &[u8; IPV4_HEADER],
    total_len: u32,
    frame_len: u32,
) -> u32 {
    let protocol = ip[9];
    let l4_len = total_len.min(frame_len - ETH_HEADER as u32) - IPV4_HEADER as u32;
    let minimum = match protocol {
        IPPROTO_TCP => 20,
        IPPROTO_UDP => 8,
        _ => u32::MAX,
    };
    let (src_port, dst_port) = match frame.bytes::<4>(ETH_HEADER + IPV4_HEADER) {
        Some(ports) if l4_len >= minimum => (
            u16::from_be_bytes([ports[0], ports[1]]),
            u16::from_be_bytes([ports[2], ports[3]]),
        ),
        _ => (0, 0),
    };
    let ports_word = (u64::from(src_port) << 48 | u64::from(dst_port) << 32 | u64::from(protocol))
        ^ 0x6f66_616e_0000_0100;
    let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
    let addresses = u64::from(src) << 32 | u64::from(dst);
    (mix64(addresses ^ mix64(ports_word)) >> 32) as u32
}

/// The SplitMix64 finalizer (`ofan_topology::mix64`).
#[inline(always)]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Addresses a router never forwards, as the AF_XDP path's `is_martian` tests them for IPv4:
/// multicast 224/4, limited broadcast, loopback 127/8, link-local 169.254/16 and unspecified,
/// as source or destination.
#[inline(always)]
pub const fn is_martian_v4(src: u32, dst: u32) -> bool {
    const fn never(a: u32) -> bool {
        a >> 28 == 0xE || a == u32::MAX || a >> 24 == 127 || a >> 16 == 0xA9FE
    }
    never(src) || never(dst) || src == 0 || dst == 0
}

/// Whether an IPv4 header (20 bytes, checksum included) sums to `0xFFFF`.
#[inline(always)]
pub fn header_checksum_ok(ip: &[u8; IPV4_HEADER]) -> bool {
    let mut sum = 0u32;
    let mut index = 0;
    while index < IPV4_HEADER {
        sum += u32::from(u16::from_be_bytes([ip[index], ip[index + 1]]));
        index += 2;
    }
    fold(u64::from(sum)) == 0xFFFF
}

/// Folds the carries of a ones'-complement sum into 16 bits (end-around carry).
#[inline(always)]
const fn fold(sum: u64) -> u16 {
    let sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    let sum = (sum & 0xFFFF_FFFF) + (sum >> 32);
    let sum = (sum & 0xFFFF) + (sum >> 16);
    let sum = (sum & 0xFFFF) + (sum >> 16);
    sum as u16
}

/// The checksum after one 16-bit word changed from `old` to `new` (RFC 1624, eqn. 3:
/// `~(~HC + ~m + m')`), as the AF_XDP path's `wire::checksum::update` computes it.
#[inline(always)]
pub const fn checksum_update(checksum: u16, old: u16, new: u16) -> u16 {
    let sum = (!checksum) as u64 + (!old) as u64 + new as u64;
    !fold(sum)
}

/// Offset of [`FastEgress::ttl_checksum`] in the frame.
pub const TTL_CHECKSUM_OFFSET: usize = ETH_HEADER + 8;

/// Applies `egress`'s rewrite to a frame held in memory (what the XDP program writes into the
/// packet: the MACs at 0, the TTL and checksum at [`TTL_CHECKSUM_OFFSET`]).
pub fn rewrite(frame: &mut [u8], egress: &FastEgress) {
    frame[..12].copy_from_slice(&egress.macs);
    frame[TTL_CHECKSUM_OFFSET..TTL_CHECKSUM_OFFSET + 4].copy_from_slice(&egress.ttl_checksum);
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::bytes_at;

    struct Bytes<'a>(&'a [u8]);

    impl FrameView for Bytes<'_> {
        fn bytes<const N: usize>(&self, offset: usize) -> Option<[u8; N]> {
            bytes_at(self.0, offset)
        }
        fn is_local_v4(&self, _: &crate::LocalV4) -> bool {
            false
        }
        fn is_local_v6(&self, _: &crate::LocalV6) -> bool {
            false
        }
    }

    #[test]
    fn rows_list_the_valid_ports_in_the_order_given() {
        // Port 0 invalid: 2, 3, 1 in that order.
        let row = row_of(&[2, 0, 3, 1], 0b1110);
        assert_eq!(row.count, 3);
        assert_eq!(&row.ports[..3], &[2, 3, 1]);
        let all = row_of(&[0, 1, 2, 3], 0b1111);
        assert_eq!((all.count, &all.ports[..4]), (4, &[0u8, 1, 2, 3][..]));
        assert_eq!(row_of(&[0, 1], 0).count, 0);
    }

    #[test]
    fn checksums_update_and_verify_as_rfc_1624_and_1071_say() {
        // A header from RFC 1071's example family: compute, verify, update TTL, verify again.
        let mut ip = [
            0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 1, 0, 1,
        ];
        let sum: u32 = ip
            .chunks_exact(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        let checksum = !fold(u64::from(sum));
        ip[10..12].copy_from_slice(&checksum.to_be_bytes());
        assert!(header_checksum_ok(&ip));
        let mut head = [0u8; 34];
        head[14..].copy_from_slice(&ip);
        let updated = checksum_update(
            checksum,
            u16::from_be_bytes([64, 17]),
            u16::from_be_bytes([63, 17]),
        );
        let egress = FastEgress {
            port: 1,
            macs: [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1],
            ttl_checksum: [63, 17, updated.to_be_bytes()[0], updated.to_be_bytes()[1]],
        };
        rewrite(&mut head, &egress);
        assert_eq!(&head[..12], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        assert_eq!(head[22], 63);
        let rewritten: [u8; 20] = head[14..].try_into().unwrap();
        assert!(header_checksum_ok(&rewritten));
        let mut broken = rewritten;
        broken[10] ^= 1;
        assert!(!header_checksum_ok(&broken));
    }

    #[test]
    fn martians_are_the_data_paths() {
        let a = |a: [u8; 4]| u32::from_be_bytes(a);
        let ok = a([10, 0, 0, 1]);
        for bad in [
            a([224, 0, 0, 1]),
            a([255, 255, 255, 255]),
            a([127, 0, 0, 1]),
            a([169, 254, 1, 1]),
            0,
        ] {
            assert!(is_martian_v4(bad, ok) && is_martian_v4(ok, bad));
        }
        assert!(!is_martian_v4(ok, a([10, 1, 0, 1])));
    }

    #[test]
    fn a_frame_with_no_table_or_not_ipv4_is_left_to_the_afxdp_path() {
        struct Off;
        impl FastTables for Off {
            fn config(&self) -> Option<&FastConfig> {
                None
            }
            fn active(&self) -> u32 {
                TABLE_OFF
            }
            fn destination(&self, _: u32, _: [u8; 4]) -> Option<FastDestination> {
                None
            }
            fn group(&self, _: u32, _: u32) -> Option<&FastGroup> {
                None
            }
            fn row(&self, _: u32, _: u32) -> Option<&FastRow> {
                None
            }
            fn take_pointer(&self, _: u32) -> Option<u64> {
                None
            }
            fn random(&self) -> u32 {
                0
            }
        }
        let frame = [0u8; 60];
        assert_eq!(decide(&Bytes(&frame), 60, &Off), Err(FastMiss::Off));
    }

    #[test]
    fn map_values_have_no_padding() {
        use core::mem::size_of;
        assert_eq!(size_of::<FastConfig>(), 6 * 4 + 2 * 8);
        assert_eq!(size_of::<FastDestination>(), 24);
        assert_eq!(size_of::<FastHop>(), 16);
        assert_eq!(size_of::<FastRow>(), 4 + MAX_FAST_UP_PORTS);
        assert_eq!(
            size_of::<FastGroup>(),
            4 * 4 + MAX_FAST_HOPS + MAX_FAST_UP_PORTS + MAX_FAST_HOPS * 16
        );
    }

    /// The counter names reach users (`stats`, Prometheus): a rename or a reorder fails here.
    #[test]
    fn miss_names_are_pinned_in_index_order() {
        let names: Vec<&str> = FastMiss::ALL.iter().map(|miss| miss.name()).collect();
        assert_eq!(
            names,
            [
                "off",
                "not_ipv4",
                "for_the_kernel",
                "bad_header",
                "too_long",
                "martian",
                "no_route",
                "not_forwarded",
                "no_usable_hop",
                "no_key",
            ]
        );
        assert_eq!(fast_tx_slot(0), FastMiss::COUNT + crate::MAX_PORTS);
        assert_eq!(FAST_COUNT_SLOTS, fast_tx_slot(crate::MAX_PORTS));
    }
}
