//! Switches that run another algorithm than the lab's (`up --lb-map FILE`, `node S lb ALGO`):
//! a fabric in which some switches are upgraded, as in the paper's incremental deployment
//! (§6.4, Fig. 11; the model's `--scheme-map`, whose file format and parser this is).

use std::collections::BTreeMap;

use anyhow::bail;
use ofan_dataplane::lb::Algorithm;
use ofan_model::config::Scheme;
use ofan_topology::{Role, Topology};

/// Switch name → the algorithm it runs instead of the lab's.
pub type LbMap = BTreeMap<String, Algorithm>;

/// Reads an lb map: one `SWITCH ALGO` per line, `#` comments and blank lines skipped — the
/// model's scheme-map format ([`ofan_model::mix::parse_scheme_map`]).
///
/// # Errors
/// A malformed line (named), a switch named twice, a scheme that is not a switch algorithm
/// or belongs to the adaptive-routing framework (its switches exchange notifications that a
/// switch of another algorithm would not send).
pub fn parse(text: &str) -> anyhow::Result<LbMap> {
    let entries = ofan_model::mix::parse_scheme_map(text)?;
    let mut map = LbMap::new();
    for entry in entries {
        map.insert(entry.switch.clone(), mixable(&entry.switch, entry.scheme)?);
    }
    Ok(map)
}

/// `scheme` as an algorithm that can run on some switches only.
///
/// # Errors
/// A host scheme or an `arf-*` algorithm.
pub fn mixable(switch: &str, scheme: Scheme) -> anyhow::Result<Algorithm> {
    if let Some(algorithm) = ofan_model::mix::mixable(scheme) {
        return Ok(algorithm);
    }
    match scheme {
        Scheme::Switch(algorithm) => bail!(
            "{switch}: {} belongs to the adaptive-routing framework, whose switches exchange \
             notifications: it runs on every switch or none",
            algorithm.name()
        ),
        other => bail!(
            "{switch}: {} is host-side load balancing (run --host-lb), not a switch algorithm",
            other.name()
        ),
    }
}

/// Checks `map` against the lab's topology: every name a balancing switch (edge or
/// aggregation: a core has one way down).
///
/// # Errors
/// The first name that is not.
pub fn check(map: &LbMap, topology: &Topology) -> anyhow::Result<()> {
    for switch in map.keys() {
        match topology.nodes().iter().find(|node| &node.name == switch) {
            None => bail!("--lb-map: no switch `{switch}` in this lab's topology"),
            Some(node) if !matches!(node.role, Role::Edge | Role::Aggregation) => bail!(
                "--lb-map: `{switch}` does not balance (only edge and aggregation switches choose \
                 among ports)"
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// The lab's algorithms as reports name them: `ofan`, or `ofan+rsq×8` when 8 switches run
/// rsq (several: `ofan+jsq×2+rsq×8`).
#[must_use]
pub fn label(lb: &str, map: &BTreeMap<String, String>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for algorithm in map.values().filter(|algorithm| *algorithm != lb) {
        *counts.entry(algorithm).or_default() += 1;
    }
    counts
        .into_iter()
        .fold(lb.to_owned(), |label, (algorithm, n)| {
            format!("{label}+{algorithm}×{n}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_names_balancing_switches_and_switch_algorithms() {
        let map = parse("# upgraded\ne-p0-0 rsq\na-p1-1 ofan\n").unwrap();
        assert_eq!(map["e-p0-0"], Algorithm::Rsq);
        let topology = Topology::fat_tree(4).unwrap();
        check(&map, &topology).unwrap();
        for (text, says) in [
            ("e-p0-0\n", "fields"),
            ("e-p0-0 rsq\ne-p0-0 jsq\n", "twice"),
            ("e-p0-0 reps\n", "host-side"),
            ("e-p0-0 arf-wcmp\n", "adaptive-routing"),
        ] {
            let error = format!("{:#}", parse(text).unwrap_err());
            assert!(error.contains(says), "{text}: {error}");
        }
        for (text, says) in [
            ("c-0 rsq\n", "does not balance"),
            ("e-p9-0 rsq\n", "no switch"),
        ] {
            let error = check(&parse(text).unwrap(), &topology)
                .unwrap_err()
                .to_string();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn the_label_counts_the_switches_of_each_other_algorithm() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(s, a)| ((*s).to_owned(), (*a).to_owned()))
                .collect()
        };
        assert_eq!(label("ofan", &map(&[])), "ofan");
        assert_eq!(
            label(
                "ofan",
                &map(&[("a", "rsq"), ("b", "rsq"), ("c", "jsq"), ("d", "ofan")])
            ),
            "ofan+jsq×1+rsq×2"
        );
    }
}
