//! Switches of one fabric running different load-balancing schemes (paper §6.4, incremental
//! deployment): an explicit map from switch to scheme, or a second scheme on half the
//! balancing switches by one of the paper's four placements.
//!
//! Only switch algorithms mix (host-based spray, REPS and DRB steer from every host, and the
//! adaptive-routing framework's `arf-*` modes need every switch to take part in its control
//! plane). A switch not named runs [`ModelConfig::scheme`].

use std::fmt;
use std::str::FromStr;

use ofan_dataplane::lb::{mix64, Algorithm, LbRng};
use ofan_topology::{Role, Topology, TopologyKind};
use serde::{Deserialize, Serialize};

use crate::config::{ModelConfig, Scheme};
use crate::error::ModelError;

/// Salt of the placement stream.
const MIX_SALT: u64 = 0x6d69_7870_6c61_6365;

/// Where the second scheme of a mix runs: always half of the balancing (edge and
/// aggregation) switches of a fat tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// A seeded random half of all edge and aggregation switches.
    RandomSwitches,
    /// Every edge and aggregation switch of a seeded random half of the pods (one aggregation
    /// block at a time, as operators deploy).
    RandomPods,
    /// Every aggregation switch.
    Aggregation,
    /// Every edge switch.
    Edge,
}

impl Placement {
    /// The four placements of paper Fig. 11, in its order.
    pub const ALL: [Placement; 4] = [
        Placement::RandomSwitches,
        Placement::RandomPods,
        Placement::Aggregation,
        Placement::Edge,
    ];

    /// The command-line name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Placement::RandomSwitches => "random-switches",
            Placement::RandomPods => "random-pods",
            Placement::Aggregation => "aggregation",
            Placement::Edge => "edge",
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Placement {
    type Err = ModelError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Placement::ALL
            .into_iter()
            .find(|placement| placement.name() == text)
            .ok_or_else(|| ModelError::InvalidConfig {
                field: "placement",
                value: text.to_owned(),
                reason: "expected random-switches, random-pods, aggregation or edge",
            })
    }
}

/// One switch's scheme in a [`SwitchSchemes::Map`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchScheme {
    /// The switch's name (`e-p0-0`, `a-p1-2`, `leaf-3`, …).
    pub switch: String,
    /// Its scheme (a switch algorithm).
    pub scheme: Scheme,
}

/// Which scheme each balancing switch runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SwitchSchemes {
    /// Every switch runs [`ModelConfig::scheme`].
    #[default]
    Uniform,
    /// These switches run their own scheme, the others [`ModelConfig::scheme`].
    Map {
        /// Switch by name → scheme.
        switches: Vec<SwitchScheme>,
    },
    /// `scheme` on half the balancing switches, chosen by `placement` (and the seed), the
    /// others [`ModelConfig::scheme`].
    Mix {
        /// The second scheme.
        scheme: Scheme,
        /// Where it runs.
        placement: Placement,
    },
}

impl SwitchSchemes {
    /// Whether every switch runs the configuration's scheme.
    #[must_use]
    pub fn is_uniform(&self) -> bool {
        matches!(self, SwitchSchemes::Uniform)
    }
}

/// A mix as the command line writes it: `A:B:PLACEMENT`, A everywhere but B on half the
/// balancing switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// The scheme of the other half.
    pub base: Scheme,
    /// The scheme placed.
    pub placed: Scheme,
    /// Where.
    pub placement: Placement,
}

impl FromStr for Mix {
    type Err = ModelError;

    /// `ar:pofan:edge`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.split(':').collect();
        let [base, placed, placement] = parts[..] else {
            return Err(ModelError::InvalidConfig {
                field: "mix",
                value: text.to_owned(),
                reason: "expected A:B:PLACEMENT, e.g. ar:pofan:edge",
            });
        };
        Ok(Self {
            base: base.parse()?,
            placed: placed.parse()?,
            placement: placement.parse()?,
        })
    }
}

/// Reads a scheme map: one `SWITCH SCHEME` per line (`#` comments, blank lines skipped).
///
/// # Errors
/// [`ModelError::SchemeMap`] naming the line: not two fields, an unknown scheme, a switch
/// named twice. (Whether the switches exist is checked against the topology at run time.)
pub fn parse_scheme_map(text: &str) -> Result<Vec<SwitchScheme>, ModelError> {
    let mut switches: Vec<SwitchScheme> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let error = |reason: String| ModelError::SchemeMap {
            line: number + 1,
            reason,
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [switch, scheme] = fields[..] else {
            return Err(error(format!(
                "expected `SWITCH SCHEME`, found {} fields",
                fields.len()
            )));
        };
        let scheme: Scheme = scheme.parse().map_err(|e| error(format!("{e}")))?;
        if switches.iter().any(|entry| entry.switch == switch) {
            return Err(error(format!("switch `{switch}` is named twice")));
        }
        switches.push(SwitchScheme {
            switch: switch.to_owned(),
            scheme,
        });
    }
    Ok(switches)
}

/// A scheme that can run on some switches only: a switch algorithm outside the
/// adaptive-routing framework (the model's mixes and the lab's `--lb-map` alike).
#[must_use]
pub fn mixable(scheme: Scheme) -> Option<Algorithm> {
    match scheme {
        Scheme::Switch(algorithm) if !algorithm.uses_path_quality() => Some(algorithm),
        _ => None,
    }
}

/// Per node (by id), the algorithm it runs (meaningful for edge and aggregation switches).
///
/// # Errors
/// [`ModelError::InvalidConfig`] for a scheme that cannot mix (host-based, `arf-*`), a
/// placement that needs a fat tree on a leaf-spine; [`ModelError::SchemeMap`] (line 0) for
/// a switch that does not exist or does not balance.
pub fn switch_algorithms(
    topology: &Topology,
    config: &ModelConfig,
) -> Result<Vec<Algorithm>, ModelError> {
    let base = config.scheme.switch_algorithm();
    let mut algorithms = vec![base; topology.nodes().len()];
    if config.switch_schemes.is_uniform() {
        return Ok(algorithms);
    }
    let cannot = |scheme: Scheme| ModelError::InvalidConfig {
        field: "scheme",
        value: scheme.name().to_owned(),
        reason: "only switch algorithms outside arf-* run on some switches only",
    };
    mixable(config.scheme).ok_or_else(|| cannot(config.scheme))?;
    let balancing: Vec<&ofan_topology::Node> = topology
        .nodes()
        .iter()
        .filter(|node| matches!(node.role, Role::Edge | Role::Aggregation))
        .collect();
    match &config.switch_schemes {
        SwitchSchemes::Uniform => {}
        SwitchSchemes::Map { switches } => {
            for entry in switches {
                let algorithm = mixable(entry.scheme).ok_or_else(|| cannot(entry.scheme))?;
                let node = topology
                    .nodes()
                    .iter()
                    .find(|node| node.name == entry.switch)
                    .ok_or_else(|| ModelError::SchemeMap {
                        line: 0,
                        reason: format!("no switch `{}` in this topology", entry.switch),
                    })?;
                if !matches!(node.role, Role::Edge | Role::Aggregation) {
                    return Err(ModelError::SchemeMap {
                        line: 0,
                        reason: format!(
                            "`{}` does not balance (only edge and aggregation switches do)",
                            entry.switch
                        ),
                    });
                }
                algorithms[node.id.index()] = algorithm;
            }
        }
        SwitchSchemes::Mix { scheme, placement } => {
            let algorithm = mixable(*scheme).ok_or_else(|| cannot(*scheme))?;
            let fat_tree = matches!(topology.kind(), TopologyKind::FatTree { .. });
            if !fat_tree && *placement != Placement::RandomSwitches {
                return Err(ModelError::InvalidConfig {
                    field: "placement",
                    value: placement.name().to_owned(),
                    reason: "pods and aggregation switches exist in fat trees only",
                });
            }
            let mut rng = LbRng::new(mix64(config.seed ^ MIX_SALT));
            let chosen: Vec<usize> = match placement {
                Placement::Edge | Placement::Aggregation => {
                    let role = if *placement == Placement::Edge {
                        Role::Edge
                    } else {
                        Role::Aggregation
                    };
                    balancing
                        .iter()
                        .filter(|node| node.role == role)
                        .map(|node| node.id.index())
                        .collect()
                }
                Placement::RandomSwitches => {
                    let mut ids: Vec<usize> =
                        balancing.iter().map(|node| node.id.index()).collect();
                    shuffle(&mut ids, &mut rng);
                    ids.truncate(ids.len() / 2);
                    ids
                }
                Placement::RandomPods => {
                    let pods = topology.k();
                    let mut order: Vec<u16> = (0..pods).collect();
                    shuffle(&mut order, &mut rng);
                    order.truncate(usize::from(pods / 2));
                    balancing
                        .iter()
                        .filter(|node| node.pod.is_some_and(|pod| order.contains(&pod)))
                        .map(|node| node.id.index())
                        .collect()
                }
            };
            for id in chosen {
                algorithms[id] = algorithm;
            }
        }
    }
    Ok(algorithms)
}

fn shuffle<T>(values: &mut [T], rng: &mut LbRng) {
    for i in (1..values.len()).rev() {
        let j = rng.below(i as u32 + 1) as usize;
        values.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(placement: Placement, seed: u64) -> ModelConfig {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 8 };
        config.scheme = "ar".parse().unwrap();
        config.seed = seed;
        config.switch_schemes = SwitchSchemes::Mix {
            scheme: "pofan".parse().unwrap(),
            placement,
        };
        config
    }

    #[test]
    fn every_placement_takes_half_the_balancing_switches() {
        let topology = Topology::new(TopologyKind::FatTree { k: 8 }).unwrap();
        for placement in Placement::ALL {
            for seed in 1..4 {
                let algorithms = switch_algorithms(&topology, &config(placement, seed)).unwrap();
                let placed: Vec<&ofan_topology::Node> = topology
                    .nodes()
                    .iter()
                    .filter(|node| matches!(node.role, Role::Edge | Role::Aggregation))
                    .filter(|node| algorithms[node.id.index()] == Algorithm::Pofan)
                    .collect();
                assert_eq!(placed.len(), 32, "{placement}: half of 64");
                let edges = placed.iter().filter(|n| n.role == Role::Edge).count();
                match placement {
                    Placement::Edge => assert_eq!(edges, 32),
                    Placement::Aggregation => assert_eq!(edges, 0),
                    Placement::RandomPods => {
                        let mut pods: Vec<u16> = placed.iter().filter_map(|n| n.pod).collect();
                        pods.sort_unstable();
                        pods.dedup();
                        assert_eq!(pods.len(), 4, "whole pods");
                    }
                    Placement::RandomSwitches => assert!(edges > 0 && edges < 32),
                }
            }
        }
    }

    #[test]
    fn a_scheme_map_names_switches_and_refuses_bad_lines() {
        let map = parse_scheme_map("# upgraded\ne-p0-0 pofan\na-p1-1 ofan\n").unwrap();
        assert_eq!(map.len(), 2);
        let topology = Topology::new(TopologyKind::FatTree { k: 4 }).unwrap();
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 4 };
        config.scheme = "ar".parse().unwrap();
        config.switch_schemes = SwitchSchemes::Map { switches: map };
        let algorithms = switch_algorithms(&topology, &config).unwrap();
        let of = |name: &str| {
            let node = topology.nodes().iter().find(|n| n.name == name).unwrap();
            algorithms[node.id.index()]
        };
        assert_eq!(of("e-p0-0"), Algorithm::Pofan);
        assert_eq!(of("a-p1-1"), Algorithm::Ofan);
        assert_eq!(of("e-p0-1"), Algorithm::Ar);
        for (text, line, fragment) in [
            ("e-p0-0\n", 1, "found 1 fields"),
            ("\ne-p0-0 fancy\n", 2, "unknown scheme"),
            ("e-p0-0 ofan\ne-p0-0 ar\n", 2, "named twice"),
        ] {
            match parse_scheme_map(text) {
                Err(ModelError::SchemeMap { line: got, reason }) => {
                    assert_eq!(got, line, "{text}");
                    assert!(reason.contains(fragment), "{reason}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        config.switch_schemes = SwitchSchemes::Map {
            switches: parse_scheme_map("c-0 ofan\n").unwrap(),
        };
        assert!(switch_algorithms(&topology, &config)
            .unwrap_err()
            .to_string()
            .contains("does not balance"));
        config.switch_schemes = SwitchSchemes::Map {
            switches: parse_scheme_map("e-p0-0 reps\n").unwrap(),
        };
        assert!(switch_algorithms(&topology, &config).is_err());
    }
}
