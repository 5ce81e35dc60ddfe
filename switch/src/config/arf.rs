//! `[adaptive_routing]`: the validated section, from the file, the algorithm and the plan.

use ofan_control::notify::detect::Thresholds;
use ofan_control::notify::speaker::{Identity, Neighbour, Timing};
use ofan_control::notify::wire::Quality;
use ofan_dataplane::arf::Combine;
use ofan_dataplane::lb::Algorithm;

use super::file::{self, PortEntry, RoleName};
use super::plan::Plan;
use super::{error, ConfigError};

/// The validated `[adaptive_routing]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdaptiveRouting {
    /// Window and refresh interval.
    pub timing: Timing,
    /// UDP port.
    pub port: u16,
    /// Detector settings.
    pub thresholds: Thresholds,
    /// How a path's local and remote levels combine (`combine`, flag `--arf-combine`).
    pub combine: Combine,
    /// This switch's ASN and router ID: the key, else the plan; without it the switch receives
    /// but does not send.
    pub identity: Option<Identity>,
    /// Fabric ports (role up or down), by port id.
    pub fabric_ports: Vec<u32>,
    /// The neighbours named behind the fabric ports by `[[adaptive_routing.neighbours]]`, else
    /// by the plan (empty without either: then they are the FIB's next hops on fabric ports,
    /// named by the path table).
    pub plan_neighbours: Vec<Neighbour>,
    /// The plan's switches by ASN → router ID, for paths BGP names only by ASN (an ASN that
    /// several switches share names none of them and is left out; empty without a plan).
    pub router_ids: std::collections::BTreeMap<u32, std::net::Ipv4Addr>,
    /// `notify_hosts` (flag `--arf-notify-hosts`): the hosts on the host ports, by their
    /// address on the link, that this switch passes its notifications on to (the endpoint
    /// plane of a multi-plane fabric); empty: none.
    pub hosts: Vec<std::net::Ipv4Addr>,
}

/// `[adaptive_routing]`: on by default exactly when the algorithm is an `arf-*` mode (the only
/// ones that read what notifications say).
pub(super) fn adaptive_routing(
    section: &file::AdaptiveRoutingSection,
    algorithm: Algorithm,
    ports: &[PortEntry],
    plan: Option<&Plan>,
    combine: Option<Combine>,
    notify_hosts: bool,
) -> Result<Option<AdaptiveRouting>, ConfigError> {
    let arf = matches!(
        algorithm,
        Algorithm::ArfWcmp | Algorithm::ArfFlow | Algorithm::ArfPacket
    );
    if !section.enabled.unwrap_or(arf) {
        return Ok(None);
    }
    let window_ms = section.window_ms.unwrap_or(10);
    if !(1..=1000).contains(&window_ms) {
        return Err(error(
            "adaptive_routing.window_ms",
            format!("{window_ms} must be from 1 to 1000"),
        ));
    }
    let refresh_ms = section.refresh_ms.unwrap_or(100);
    // The hold time (3T) travels as 16-bit milliseconds.
    if refresh_ms < window_ms || refresh_ms > u64::from(u16::MAX) / 3 {
        return Err(error(
            "adaptive_routing.refresh_ms",
            format!(
                "{refresh_ms} must be from window_ms ({window_ms}) to {}",
                u16::MAX / 3
            ),
        ));
    }
    let port = section.port.unwrap_or(ofan_control::notify::DEFAULT_PORT);
    if port == 0 {
        return Err(error("adaptive_routing.port", "must not be 0"));
    }
    let level = |key: &str, value: Option<u8>, default: Quality| match value {
        None => Ok(default),
        Some(level) => Quality::new(level).ok_or_else(|| {
            error(
                format!("adaptive_routing.{key}"),
                format!("{level} is not a level (0 to 15)"),
            )
        }),
    };
    let defaults = Thresholds::default();
    let thresholds = Thresholds {
        congested_at: level("congested_at", section.congested_at, defaults.congested_at)?,
        cleared_at: level("cleared_at", section.cleared_at, defaults.cleared_at)?,
        windows_to_change: section
            .windows_to_change
            .unwrap_or(defaults.windows_to_change),
        jump: section.jump.unwrap_or(defaults.jump),
        queue_frames: section.queue_frames.unwrap_or(defaults.queue_frames),
    }
    .validate()
    .map_err(|e| {
        let key = match e {
            ofan_control::notify::detect::ThresholdError::Band { .. } => "cleared_at",
            ofan_control::notify::detect::ThresholdError::Windows => "windows_to_change",
            ofan_control::notify::detect::ThresholdError::QueueFrames => "queue_frames",
        };
        error(format!("adaptive_routing.{key}"), e.to_string())
    })?;
    let identity = match (section.asn, section.router_id, plan) {
        (Some(asn), Some(router_id), _) => Some(Identity { asn, router_id }),
        (None, None, Some(plan)) => Some(plan.identity(plan.node)),
        (None, None, None) => None,
        (Some(asn), None, Some(plan)) => Some(Identity {
            asn,
            router_id: plan.identity(plan.node).router_id,
        }),
        (None, Some(router_id), Some(plan)) => Some(Identity {
            asn: plan.identity(plan.node).asn,
            router_id,
        }),
        (Some(_), None, None) => {
            return Err(error(
                "adaptive_routing.router_id",
                "an asn needs a router_id (or a topology)",
            ))
        }
        (None, Some(_), None) => {
            return Err(error(
                "adaptive_routing.asn",
                "a router_id needs an asn (or a topology)",
            ))
        }
    };
    let fabric_ports: Vec<u32> = ports
        .iter()
        .enumerate()
        .filter(|(_, p)| p.role != RoleName::Host)
        .map(|(i, _)| i as u32)
        .collect();
    let configured = section
        .neighbours
        .iter()
        .map(|entry| {
            let port = ports
                .iter()
                .position(|p| p.name == entry.port)
                .map(|i| i as u32)
                .filter(|i| fabric_ports.contains(i))
                .ok_or_else(|| {
                    error(
                        "adaptive_routing.neighbours.port",
                        format!("{:?} is not a fabric (up or down) port", entry.port),
                    )
                })?;
            Ok(Neighbour {
                port,
                addr: entry.addr,
                id: Identity {
                    asn: entry.asn,
                    router_id: entry.router_id,
                },
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    let hosts = if notify_hosts || section.notify_hosts.unwrap_or(false) {
        plan.ok_or_else(|| {
            error(
                "adaptive_routing.notify_hosts",
                "needs a topology (the hosts' addresses on the host ports)",
            )
        })?
        .host_addresses(ports)
    } else {
        Vec::new()
    };
    Ok(Some(AdaptiveRouting {
        timing: Timing {
            window_ns: window_ms * 1_000_000,
            refresh_ns: refresh_ms * 1_000_000,
        },
        port,
        thresholds,
        combine: combine.or(section.combine).unwrap_or_default(),
        identity,
        fabric_ports,
        plan_neighbours: if configured.is_empty() {
            plan.map(|plan| plan.neighbours(ports)).unwrap_or_default()
        } else {
            configured
        },
        router_ids: plan.map(Plan::router_ids).unwrap_or_default(),
        hosts,
    }))
}
