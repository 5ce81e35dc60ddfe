//! Chaos during collectives (`ofan-lab run … --chaos SEED`): one fault injected into each
//! running repetition, and a verdict on what it did.
//!
//! Each repetition draws one [`Fault`] from the chaos seed and the repetition's permutation seed
//! ([`schedule`], pure: the same seeds give the same fault, so every algorithm of a `compare`
//! meets the same one): a fabric link flapped (down, then up after 0.5–2 s), a switch killed
//! with SIGKILL and started again after 0.5–2 s, or (under BGP) a switch's routing daemons
//! crashed and restarted. It strikes 20–50 % into the traffic's lower bound. [`apply`] carries
//! it out through the lab's own operations while the agents run; [`judge`] (pure) then says
//! whether the repetition is **accounted** — every packet delivered exactly once (a lost one
//! recovered by retransmission) and every lost frame counted by name — or **voided**, and by
//! what. A killed switch always voids the census: the frames in its queues and the counters
//! that would name them die with it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ofan_model::report::{ChaosRecord, RunReport};
use ofan_topology::seed::mix64;
use ofan_topology::{FailedLinks, Topology};

use ofan_lab::{ops, LinkState};

/// What kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// A switch-to-switch link down, then up again.
    LinkFlap,
    /// A switch process killed (SIGKILL), then started again.
    SwitchKill,
    /// A switch's routing daemons crashed and restarted (BGP labs).
    RoutingRestart,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::LinkFlap, Self::SwitchKill, Self::RoutingRestart];

    /// The kind's name (`--chaos-faults`, reports).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::LinkFlap => "link-flap",
            Self::SwitchKill => "switch-kill",
            Self::RoutingRestart => "routing-restart",
        }
    }
}

/// Which faults a run injects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chaos {
    /// The chaos seed.
    pub seed: u64,
    /// The kinds to draw from; none named: every kind the lab supports.
    pub kinds: Vec<FaultKind>,
}

/// One fault, its time counted from the start of the traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// Link `a`–`b` down at `at`, up again `down_for` later.
    LinkFlap {
        /// One end.
        a: String,
        /// The other end.
        b: String,
        /// When.
        at: Duration,
        /// How long it stays down.
        down_for: Duration,
    },
    /// Switch `switch` killed at `at`, started again `dead_for` later.
    SwitchKill {
        /// The switch.
        switch: String,
        /// When.
        at: Duration,
        /// How long it stays dead.
        dead_for: Duration,
    },
    /// The routing daemons of `switch` crashed and restarted at `at`.
    RoutingRestart {
        /// The switch.
        switch: String,
        /// When.
        at: Duration,
    },
}

impl Fault {
    /// Its kind.
    #[must_use]
    pub const fn kind(&self) -> FaultKind {
        match self {
            Self::LinkFlap { .. } => FaultKind::LinkFlap,
            Self::SwitchKill { .. } => FaultKind::SwitchKill,
            Self::RoutingRestart { .. } => FaultKind::RoutingRestart,
        }
    }

    /// When it strikes, from the start of the traffic.
    #[must_use]
    pub const fn at(&self) -> Duration {
        match self {
            Self::LinkFlap { at, .. }
            | Self::SwitchKill { at, .. }
            | Self::RoutingRestart { at, .. } => *at,
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::LinkFlap { a, b, down_for, .. } => {
                write!(f, "link {a} {b} down for {:.2} s", down_for.as_secs_f64())
            }
            Self::SwitchKill {
                switch, dead_for, ..
            } => write!(
                f,
                "kill -9 of {switch}, started again {:.2} s later",
                dead_for.as_secs_f64()
            ),
            Self::RoutingRestart { switch, .. } => {
                write!(f, "routing daemons of {switch} crashed and restarted")
            }
        }
    }
}

/// The fault of the repetition with permutation seed `repetition_seed`, on `topology` with
/// `failures` (dead links are never flapped, switches of dead links still killed) and
/// `stopped` switches left alone, for traffic whose lower bound is `traffic`. `None` when
/// nothing of a drawn kind is left to strike.
#[must_use]
pub fn schedule(
    chaos: &Chaos,
    repetition_seed: u64,
    topology: &Topology,
    failures: &FailedLinks,
    stopped: &[String],
    traffic: Duration,
) -> Option<Fault> {
    let mut state = mix64(chaos.seed ^ mix64(repetition_seed.wrapping_add(1)));
    let mut draw = |n: usize| -> usize {
        state = mix64(state);
        (state % n.max(1) as u64) as usize
    };
    let fraction = |n: usize| n as f64 / 1000.0;
    let kind = *chaos.kinds.get(draw(chaos.kinds.len()))?;
    let at = traffic.mul_f64(0.2 + 0.3 * fraction(draw(1000)));
    let hold = Duration::from_millis(500 + draw(1500) as u64);
    let running: Vec<&str> = topology
        .switches()
        .iter()
        .map(|s| s.name.as_str())
        .filter(|name| !stopped.iter().any(|s| s == name))
        .collect();
    match kind {
        FaultKind::LinkFlap => {
            let links: Vec<(&str, &str)> = topology
                .links()
                .iter()
                .filter(|link| failures.is_alive(link.id))
                .map(|link| (topology.node(link.a.0), topology.node(link.b.0)))
                .filter(|(a, b)| a.role.is_switch() && b.role.is_switch())
                .map(|(a, b)| (a.name.as_str(), b.name.as_str()))
                .collect();
            let (a, b) = *links.get(draw(links.len()))?;
            Some(Fault::LinkFlap {
                a: a.to_owned(),
                b: b.to_owned(),
                at,
                down_for: hold,
            })
        }
        FaultKind::SwitchKill => Some(Fault::SwitchKill {
            switch: (*running.get(draw(running.len()))?).to_owned(),
            at,
            dead_for: hold,
        }),
        FaultKind::RoutingRestart => Some(Fault::RoutingRestart {
            switch: (*running.get(draw(running.len()))?).to_owned(),
            at,
        }),
    }
}

/// What [`apply`] did, in seconds from the start of the traffic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// When the fault struck (`None`: the collective ended first, or it failed).
    pub applied_s: Option<f64>,
    /// When the fabric was whole again.
    pub restored_s: Option<f64>,
    /// The lab operation that failed.
    pub error: Option<String>,
}

/// Waits until `fault.at()` after `traffic_start` — or returns at once when `cancel` is set
/// first (the collective ended) — then carries the fault out on lab `lab` and undoes it.
pub fn apply(lab: &str, fault: &Fault, traffic_start: Instant, cancel: &AtomicBool) -> Applied {
    let strike = traffic_start + fault.at();
    while Instant::now() < strike {
        if cancel.load(Ordering::Relaxed) {
            return Applied::default();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let since = |t: Instant| t.saturating_duration_since(traffic_start).as_secs_f64();
    let applied_s = Some(since(Instant::now()));
    // The fabric is restored even when the fault's first step failed (a reconvergence that
    // timed out must not leave the link down for the next repetitions).
    let (strike, restore) = match fault {
        Fault::LinkFlap { a, b, down_for, .. } => {
            let struck = ops::link(lab, a, b, LinkState::Down).map(drop);
            std::thread::sleep(*down_for);
            (struck, ops::link(lab, a, b, LinkState::Up).map(drop))
        }
        Fault::SwitchKill {
            switch, dead_for, ..
        } => {
            let struck = ops::kill_switch(lab, switch).map(drop);
            std::thread::sleep(*dead_for);
            (struck, ops::node(lab, switch, true).map(drop))
        }
        Fault::RoutingRestart { switch, .. } => {
            (ops::routing_restart(lab, switch).map(drop), Ok(()))
        }
    };
    let restored_s = restore.is_ok().then(|| since(Instant::now()));
    let errors: Vec<String> = [strike, restore]
        .into_iter()
        .filter_map(Result::err)
        .map(|error| format!("{error:#}"))
        .collect();
    Applied {
        applied_s,
        restored_s,
        error: (!errors.is_empty()).then(|| errors.join("; ")),
    }
}

/// The verdict on a repetition `report` into which `fault` was injected as `applied` says.
#[must_use]
pub fn judge(seed: u64, fault: &Fault, applied: &Applied, report: &RunReport) -> ChaosRecord {
    let mut reasons = Vec::new();
    if let Some(error) = &applied.error {
        reasons.push(format!("the fault could not be carried out: {error}"));
    }
    if let Some(lab) = report.lab() {
        let delivery = &lab.delivery;
        if !delivery.complete || delivery.missing > 0 {
            reasons.push(format!(
                "{} packets never delivered (the collective did not complete)",
                delivery.missing
            ));
        } else if !delivery.exactly_once {
            reasons.push(format!(
                "{} duplicates that no retransmission explains",
                report.packets.duplicate_data
            ));
        }
        if lab.census.unaccounted > 0 {
            reasons.push(format!(
                "{} frames lost that no counter names",
                lab.census.unaccounted
            ));
        }
    }
    if let (Fault::SwitchKill { switch, .. }, Some(_)) = (fault, applied.applied_s) {
        reasons.push(format!(
            "{switch} was killed: the frames in its queues and the counters that would name \
             their loss died with it"
        ));
    }
    ChaosRecord {
        seed,
        kind: fault.kind().name().to_owned(),
        fault: if applied.applied_s.is_none() && applied.error.is_none() {
            format!("{fault} (not applied: the collective ended first)")
        } else {
            fault.to_string()
        },
        applied_s: applied.applied_s,
        restored_s: applied.restored_s,
        outcome: if reasons.is_empty() {
            "accounted"
        } else {
            "voided"
        }
        .to_owned(),
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chaos(kinds: &[FaultKind]) -> Chaos {
        Chaos {
            seed: 7,
            kinds: kinds.to_vec(),
        }
    }

    #[test]
    fn the_same_seeds_draw_the_same_fault_and_others_differ() {
        let topology = Topology::fat_tree(4).unwrap();
        let none = FailedLinks::default();
        let traffic = Duration::from_secs(10);
        let draw = |seed| {
            schedule(
                &chaos(&FaultKind::ALL),
                seed,
                &topology,
                &none,
                &[],
                traffic,
            )
            .unwrap()
        };
        assert_eq!(draw(1), draw(1));
        let faults: Vec<Fault> = (0..40).map(draw).collect();
        for kind in FaultKind::ALL {
            assert!(
                faults.iter().any(|f| f.kind() == kind),
                "{} never drawn in 40",
                kind.name()
            );
        }
        for fault in &faults {
            assert!((2.0..=5.0).contains(&fault.at().as_secs_f64()), "{fault:?}");
        }
    }

    #[test]
    fn only_live_fabric_links_and_running_switches_are_struck() {
        let topology = Topology::fat_tree(4).unwrap();
        let live: Vec<_> = topology
            .links()
            .iter()
            .filter(|link| {
                topology.node(link.a.0).role.is_switch() && topology.node(link.b.0).role.is_switch()
            })
            .collect();
        // Every fabric link but one dead: the flap always takes that one.
        let failures: FailedLinks = live[1..].iter().map(|link| link.id).collect();
        let (a, b) = (
            topology.node(live[0].a.0).name.clone(),
            topology.node(live[0].b.0).name.clone(),
        );
        let stopped: Vec<String> = topology
            .switches()
            .iter()
            .skip(1)
            .map(|s| s.name.clone())
            .collect();
        let first = topology.switches()[0].name.clone();
        for seed in 0..20 {
            let fault = schedule(
                &chaos(&[FaultKind::LinkFlap]),
                seed,
                &topology,
                &failures,
                &[],
                Duration::from_secs(1),
            );
            assert!(
                matches!(&fault, Some(Fault::LinkFlap { a: x, b: y, .. }) if *x == a && *y == b),
                "{fault:?}"
            );
            let fault = schedule(
                &chaos(&[FaultKind::SwitchKill]),
                seed,
                &topology,
                &FailedLinks::default(),
                &stopped,
                Duration::from_secs(1),
            );
            assert!(
                matches!(&fault, Some(Fault::SwitchKill { switch, .. }) if *switch == first),
                "{fault:?}"
            );
        }
        let all: FailedLinks = live.iter().map(|link| link.id).collect();
        let fault = schedule(
            &chaos(&[FaultKind::LinkFlap]),
            1,
            &topology,
            &all,
            &[],
            Duration::from_secs(1),
        );
        assert_eq!(fault, None);
    }
}
