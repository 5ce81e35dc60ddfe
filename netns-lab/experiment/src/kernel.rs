//! What the kernel of each lab namespace counted: frames its interfaces dropped
//! (`/proc/net/dev`) and UDP datagrams its sockets lost (`/proc/net/snmp`). The experiment
//! reads them before and after a repetition so that every loss the kernel saw is counted by
//! name in the report (a frame lost between a switch's AF_XDP socket and a host's agent, or
//! arriving after the agent closed its socket).
//!
//! Parsing is pure and tested on the files' text; [`read`] does the I/O, in the namespace.

use std::collections::BTreeMap;
use std::fs::File;

use ofan_lab_sys::lab::in_netns;

/// Kernel loss counters of one namespace (summed over its interfaces), by report name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelCounters(pub BTreeMap<&'static str, u64>);

/// The counters this module reports, with where they come from.
///
/// `kernel.rx_dropped` / `kernel.tx_dropped`: `/proc/net/dev` drop columns (a veth that could
/// not hand a frame to its peer counts it on the sending side); `kernel.rx_fifo` /
/// `kernel.tx_fifo`: overruns; `host.udp_rcvbuf`: datagrams dropped at a full socket receive
/// buffer (`Udp: RcvbufErrors`); `host.udp_in_errors`: other UDP input errors beyond the
/// receive-buffer ones (`InErrors − RcvbufErrors`); `host.udp_no_socket`: datagrams to a port
/// nobody listened on (`NoPorts`: frames that arrived after an agent finished).
pub const NAMES: [&str; 7] = [
    "kernel.rx_dropped",
    "kernel.tx_dropped",
    "kernel.rx_fifo",
    "kernel.tx_fifo",
    "host.udp_rcvbuf",
    "host.udp_in_errors",
    LATE_DATAGRAMS,
];

/// The counter of datagrams that reached a host after its agent had finished: not a loss the
/// run suffered (every other counter here is one).
pub const LATE_DATAGRAMS: &str = "host.udp_no_socket";

impl KernelCounters {
    /// `after − self`, per counter (counters that went backwards count 0).
    #[must_use]
    pub fn delta(&self, after: &Self) -> Self {
        Self(
            after
                .0
                .iter()
                .map(|(&name, &value)| {
                    (
                        name,
                        value.saturating_sub(self.0.get(name).copied().unwrap_or(0)),
                    )
                })
                .collect(),
        )
    }
}

/// Whose namespace the counters are read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A switch: its interfaces' receive drops are the frames the XDP program redirected to a
    /// full AF_XDP socket, which the switch reports itself (`xsk.*`), so they are left out
    /// here (measured: equal to the sockets' `rx_dropped`, frame for frame).
    Switch,
    /// A host: every counter.
    Host,
}

/// Parses `/proc/net/dev` and `/proc/net/snmp` text into counters (`lo` is left out: nothing
/// of the lab's traffic crosses it).
#[must_use]
pub fn parse(dev: &str, snmp: &str, side: Side) -> KernelCounters {
    let mut counters = BTreeMap::new();
    for name in NAMES {
        counters.insert(name, 0);
    }
    // Header lines end with '|'-separated titles; data lines are "ifname: 16 numbers".
    for line in dev.lines() {
        let Some((ifname, numbers)) = line.split_once(':') else {
            continue;
        };
        if ifname.trim() == "lo" {
            continue;
        }
        let fields: Vec<u64> = numbers
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        if fields.len() < 16 {
            continue;
        }
        // Receive: bytes packets errs drop fifo …; transmit starts at field 8.
        if side == Side::Host {
            *counters.entry("kernel.rx_dropped").or_default() += fields[3];
            *counters.entry("kernel.rx_fifo").or_default() += fields[4];
        }
        *counters.entry("kernel.tx_dropped").or_default() += fields[11];
        *counters.entry("kernel.tx_fifo").or_default() += fields[12];
    }
    // "Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors …" then the values line.
    let mut udp = snmp.lines().filter(|line| line.starts_with("Udp:"));
    if let (Some(titles), Some(values)) = (udp.next(), udp.next()) {
        let row: BTreeMap<&str, u64> = titles
            .split_whitespace()
            .zip(values.split_whitespace())
            .skip(1)
            .filter_map(|(title, value)| Some((title, value.parse().ok()?)))
            .collect();
        let get = |title: &str| row.get(title).copied().unwrap_or(0);
        counters.insert("host.udp_rcvbuf", get("RcvbufErrors"));
        counters.insert(
            "host.udp_in_errors",
            get("InErrors").saturating_sub(get("RcvbufErrors")),
        );
        counters.insert(LATE_DATAGRAMS, get("NoPorts"));
    }
    KernelCounters(counters)
}

/// Reads the counters of the namespace open as `namespace`.
///
/// # Errors
/// When the namespace cannot be entered or the files cannot be read.
pub fn read(namespace: &File, side: Side) -> std::io::Result<KernelCounters> {
    in_netns(namespace, || {
        // `thread-self`: the files of this thread's namespace (`self` is the process's).
        let dev = std::fs::read_to_string("/proc/thread-self/net/dev")?;
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp")?;
        Ok(parse(&dev, &snmp, side))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    9    0     0          0         0      100       2    0    9    0     0       0          0
    p0: 1514000    1000    0    3    1     0          0         0  1514000    1000    0    5    2     0       0          0
    p1:    1514       1    0    4    0     0          0         0     1514       1    0    0    0     0       0          0
";
    const SNMP: &str = "\
Ip: Forwarding DefaultTTL
Ip: 1 64
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 5000 7 12 4000 10 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 0 0 0 0 0
";

    #[test]
    fn parses_interface_drops_without_loopback_and_udp_losses() {
        let counters = parse(DEV, SNMP, Side::Host).0;
        assert_eq!(counters["kernel.rx_dropped"], 7);
        assert_eq!(counters["kernel.tx_dropped"], 5);
        assert_eq!(counters["kernel.rx_fifo"], 1);
        assert_eq!(counters["kernel.tx_fifo"], 2);
        assert_eq!(counters["host.udp_rcvbuf"], 10);
        assert_eq!(counters["host.udp_in_errors"], 2);
        assert_eq!(counters["host.udp_no_socket"], 7);
    }

    #[test]
    fn a_switch_leaves_its_receive_drops_to_its_sockets() {
        let counters = parse(DEV, SNMP, Side::Switch).0;
        assert_eq!(counters["kernel.rx_dropped"], 0);
        assert_eq!(counters["kernel.tx_dropped"], 5);
    }

    #[test]
    fn delta_subtracts_per_name_and_never_goes_negative() {
        let before = parse(DEV, SNMP, Side::Host);
        let mut after = before.clone();
        *after.0.get_mut("host.udp_rcvbuf").unwrap() += 4;
        *after.0.get_mut("kernel.tx_dropped").unwrap() -= 1;
        let delta = before.delta(&after).0;
        assert_eq!(delta["host.udp_rcvbuf"], 4);
        assert_eq!(delta["kernel.tx_dropped"], 0);
        assert_eq!(delta["kernel.rx_dropped"], 0);
    }

    #[test]
    fn empty_or_foreign_text_counts_nothing() {
        let counters = parse("garbage\n", "Udp: only titles\n", Side::Host).0;
        assert!(counters.values().all(|&v| v == 0));
        assert_eq!(counters.len(), NAMES.len());
    }
}
