//! What the switch shows of adaptive routing (`ofan-switch stats`, `--json`, Prometheus): one
//! type, produced by the switch's notifier and read by every client.

use serde::{Deserialize, Serialize};

/// Counters of the notifier, from one list: name and meaning.
pub const COUNTERS: [(&str, &str); 14] = [
    ("sent", "notifications sent (one per neighbour)"),
    ("send_errors", "notifications the kernel refused to send"),
    ("received", "datagrams received on the notification port"),
    ("applied", "notifications that changed the congestion table"),
    (
        "refreshed",
        "notifications that refreshed an entry unchanged",
    ),
    ("expired", "table entries aged out (hold time passed)"),
    ("published", "path-quality views published to the balancer"),
    (
        "flow_sent",
        "flow messages sent (a congested port's heaviest flows, arf-flow)",
    ),
    ("flow_received", "flow messages received and trusted"),
    (
        "flow_applied",
        "flow messages whose flow this switch routes over the named link (a move requested)",
    ),
    (
        "flow_not_carried",
        "flow messages about a flow this switch does not route over the named link",
    ),
    (
        "flow_local",
        "flows named on this switch's own congested up-ports (moves requested here)",
    ),
    (
        "host_relayed",
        "accepted link messages relayed to the hosts (notify_hosts; one per host)",
    ),
    (
        "host_told",
        "own link messages sent to the hosts (notify_hosts; one per host)",
    ),
];

/// The adaptive-routing section of `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfReport {
    /// UDP port notifications use.
    pub port: u16,
    /// Detection window, ms.
    pub window_ms: u64,
    /// Refresh interval T, ms (hold 3T).
    pub refresh_ms: u64,
    /// How the published views combine a path's local and remote levels.
    #[serde(default)]
    pub combine: ofan_dataplane::arf::Combine,
    /// This switch's ASN, when known (without it the switch receives but does not send).
    pub asn: Option<u32>,
    /// This switch's router ID, when known.
    pub router_id: Option<String>,
    /// Generation of the path-quality view last published.
    pub generation: u64,
    /// Every fabric port's local state.
    pub ports: Vec<ArfPort>,
    /// The switch neighbours notifications go to.
    pub neighbours: Vec<ArfNeighbour>,
    /// The congestion table.
    pub table: Vec<ArfLink>,
    /// Counters ([`COUNTERS`] order), by name.
    pub counters: Vec<(String, u64)>,
    /// Rejected datagrams by reason ([`super::speaker::Reject::name`]).
    pub rejected: Vec<(String, u64)>,
    /// Notification-to-table latency: publish time minus the message's timestamp.
    pub latency: LatencyReport,
    /// The last notifications sent, newest last.
    pub recent_sent: Vec<ArfMessage>,
    /// The last notifications received (accepted or not), newest last.
    pub recent_received: Vec<ArfMessage>,
}

/// One fabric port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfPort {
    /// Interface name.
    pub name: String,
    /// The detector's reported level, 0–15.
    pub level: u8,
    /// Whether the port is congested.
    pub congested: bool,
}

/// One neighbour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfNeighbour {
    /// The port it is behind.
    pub port: String,
    /// Its address.
    pub addr: String,
    /// Its ASN.
    pub asn: u32,
}

/// One congestion-table entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfLink {
    /// Near end's router ID.
    pub near: std::net::Ipv4Addr,
    /// Far end's router ID.
    pub far: std::net::Ipv4Addr,
    /// Level, 0–15.
    pub quality: u8,
    /// Whether the last word was a failure.
    pub failed: bool,
    /// Last sequence number taken.
    pub sequence: u32,
    /// Time left before it ages out, ms.
    pub expires_in_ms: u64,
}

/// One notification, as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArfMessage {
    /// The neighbour it went to or came from.
    pub peer: String,
    /// `detected`, `cleared`, `failed`, `repaired`, `flow` (a flow message), or the reject
    /// reason's name prefixed by `rejected:`.
    pub what: String,
    /// Near end's router ID (unspecified when it did not parse).
    pub near: std::net::Ipv4Addr,
    /// Far end's router ID.
    pub far: std::net::Ipv4Addr,
    /// Level.
    pub quality: u8,
    /// Sequence number.
    pub sequence: u32,
    /// When its originator sent it, ns since the Unix epoch (0 when it did not parse).
    #[serde(default)]
    pub timestamp_ns: u64,
}

/// Latency of notifications that changed the table, ns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Samples taken.
    pub count: u64,
    /// The last one.
    pub last_ns: i64,
    /// The smallest.
    pub min_ns: i64,
    /// The median of the last samples kept (up to [`LATENCY_SAMPLES`]).
    pub median_ns: i64,
    /// The largest.
    pub max_ns: i64,
}

/// Latency samples kept for the median.
pub const LATENCY_SAMPLES: usize = 256;

/// Latency statistics (signed: clocks of two namespaces are one clock, but a message from a
/// host with a clock ahead would show a negative latency, which is kept as evidence).
#[derive(Debug, Clone, Default)]
pub struct Latency {
    report: LatencyReport,
    samples: std::collections::VecDeque<i64>,
}

impl Latency {
    /// Adds one sample.
    pub fn record(&mut self, ns: i64) {
        let report = &mut self.report;
        if report.count == 0 {
            report.min_ns = ns;
            report.max_ns = ns;
        }
        report.count += 1;
        report.last_ns = ns;
        report.min_ns = report.min_ns.min(ns);
        report.max_ns = report.max_ns.max(ns);
        if self.samples.len() == LATENCY_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(ns);
    }

    /// The statistics now.
    #[must_use]
    pub fn report(&self) -> LatencyReport {
        let mut sorted: Vec<i64> = self.samples.iter().copied().collect();
        sorted.sort_unstable();
        LatencyReport {
            median_ns: sorted.get(sorted.len() / 2).copied().unwrap_or(0),
            ..self.report.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_keeps_min_median_max() {
        let mut latency = Latency::default();
        assert_eq!(latency.report(), LatencyReport::default());
        for ns in [30, 10, 20] {
            latency.record(ns);
        }
        let report = latency.report();
        assert_eq!(
            (
                report.count,
                report.last_ns,
                report.min_ns,
                report.median_ns,
                report.max_ns
            ),
            (3, 20, 10, 20, 30)
        );
    }
}
