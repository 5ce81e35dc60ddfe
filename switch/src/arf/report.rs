//! What `stats` shows of the notifier ([`ArfReport`]), written every window, and the recent
//! messages' log lines.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

use ofan_control::notify::report::{
    ArfLink, ArfMessage, ArfNeighbour, ArfPort, ArfReport, COUNTERS,
};
use ofan_control::notify::speaker::Reject;
use ofan_control::notify::wire::{Kind, Notification, Quality};

use super::{State, RECENT};

impl State {
    pub(super) fn write_report(&self, now: u64) {
        let settings = &self.inputs.settings;
        let name = |port: u32| {
            self.inputs
                .ports
                .get(port as usize)
                .map_or_else(|| format!("#{port}"), |p| p.name.clone())
        };
        let report = ArfReport {
            port: settings.port,
            window_ms: settings.timing.window_ns / 1_000_000,
            refresh_ms: settings.timing.refresh_ns / 1_000_000,
            combine: settings.combine,
            asn: settings.identity.map(|id| id.asn),
            router_id: settings.identity.map(|id| id.router_id.to_string()),
            generation: self.generation,
            ports: settings
                .fabric_ports
                .iter()
                .map(|&port| {
                    let (level, congested) = self
                        .speaker
                        .as_ref()
                        .and_then(|s| s.level(port))
                        .unwrap_or((Quality::BEST, false));
                    ArfPort {
                        name: name(port),
                        level: level.level(),
                        congested,
                    }
                })
                .collect(),
            neighbours: self
                .neighbours
                .iter()
                .map(|n| ArfNeighbour {
                    port: name(n.port),
                    addr: n.addr.to_string(),
                    asn: n.id.asn,
                })
                .collect(),
            table: self
                .table
                .links()
                .map(|(link, state)| ArfLink {
                    near: Ipv4Addr::from(link.near),
                    far: Ipv4Addr::from(link.far),
                    quality: state.quality,
                    failed: state.failed,
                    sequence: state.sequence,
                    expires_in_ms: state.expires_ns.saturating_sub(now) / 1_000_000,
                })
                .collect(),
            counters: COUNTERS
                .iter()
                .zip(self.counters)
                .map(|((name, _), value)| ((*name).to_owned(), value))
                .collect(),
            rejected: Reject::ALL
                .iter()
                .zip(self.rejected)
                .map(|(reason, value)| (reason.name().to_owned(), value))
                .collect(),
            latency: self.latency.report(),
            recent_sent: self.recent_sent.iter().cloned().collect(),
            recent_received: self.recent_received.iter().cloned().collect(),
        };
        if let Ok(mut shared) = self.report.lock() {
            *shared = report;
        }
    }
}

pub(super) fn push_recent(recent: &mut VecDeque<ArfMessage>, message: ArfMessage) {
    if recent.len() == RECENT {
        recent.pop_front();
    }
    recent.push_back(message);
}

pub(super) fn log_message(
    peer: String,
    message: &Notification,
    rejected: Option<Reject>,
) -> ArfMessage {
    let what = match rejected {
        Some(reason) => format!("rejected:{}", reason.name()),
        None if message.flow.is_some() => "flow".to_owned(),
        None => match message.kind {
            Kind::CongestionDetected => "detected",
            Kind::CongestionCleared => "cleared",
            Kind::FailureDetected => "failed",
            Kind::FailureCleared => "repaired",
        }
        .to_owned(),
    };
    ArfMessage {
        peer,
        what,
        near: message.link.near,
        far: message.link.far,
        quality: message.quality.level(),
        sequence: message.sequence,
        timestamp_ns: message.timestamp_ns,
    }
}
