//! Sharded sweeps: the parts of `N` shards, each written to and read back from JSON as the
//! command line does, join into exactly the unsharded result.

use ofan_model::figures::{self, FigureSpec, Sweep};
use ofan_model::shard::{merge_runs, Part, RunPart};
use ofan_model::{run_many, ModelConfig, Scheme, Shard};
use ofan_topology::TopologyKind;

fn base() -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.message_bytes = 64 * 1024;
    config
}

fn through_json(part: &impl serde::Serialize) -> Part {
    Part::from_json(&serde_json::to_string_pretty(part).expect("serializes")).expect("reads")
}

/// A 3-shard Fig. 4 merged equals the unsharded Fig. 4 in every point and number (and its JSON
/// is the same text), whatever order the parts come in; a missing or repeated shard is refused.
#[test]
fn three_shards_of_fig4_merge_into_the_unsharded_figure() {
    let settings = Sweep {
        base: base(),
        seeds: 2,
        threads: 2,
    };
    let spec = FigureSpec::MessageSizes {
        sizes: vec![32 * 1024, 128 * 1024, 512 * 1024],
        schemes: ["rsq", "ofan", "spray"]
            .iter()
            .map(|name| name.parse::<Scheme>().expect("scheme"))
            .collect(),
    };
    let whole = figures::build(&spec, &settings).expect("runs");
    assert_eq!(whole.points.len(), 9);
    let parts: Vec<_> = (1..=3)
        .rev()
        .map(|index| {
            let part =
                figures::run_shard(&spec, &settings, Shard { index, count: 3 }).expect("runs");
            assert_eq!(part.runs.len(), 6, "18 runs, 6 per shard");
            match through_json(&part) {
                Part::Figure(part) => part,
                Part::Run(_) => panic!("a figure part"),
            }
        })
        .collect();
    let merged = figures::merge(parts.clone()).expect("joins");
    assert_eq!(merged, whole);
    assert_eq!(
        serde_json::to_string_pretty(&merged).unwrap(),
        serde_json::to_string_pretty(&whole).unwrap()
    );
    assert_eq!(merged.text(), whole.text());
    assert_eq!(merged.plots(), whole.plots());
    assert!(
        figures::merge(parts[..2].to_vec()).is_err(),
        "shard 1/3 missing"
    );
    let twice = vec![parts[0].clone(), parts[0].clone(), parts[1].clone()];
    assert!(figures::merge(twice).is_err(), "shard 3/3 twice");
    let mut other = parts.clone();
    other[0].seeds = 3;
    assert!(figures::merge(other).is_err(), "another seed count");
}

/// `run --seeds 5` in 2 shards: the reports, by seed, are those of the unsharded run.
#[test]
fn shards_of_a_run_merge_into_its_reports() {
    let mut config = base();
    config.seed = 7;
    let seeds = 5;
    let whole: Vec<_> = run_many(&RunPart::configs(&config, seeds, Shard::ALL), 2)
        .into_iter()
        .map(|report| report.expect("runs"))
        .collect();
    let parts: Vec<RunPart> = (1..=2)
        .map(|index| {
            let shard = Shard { index, count: 2 };
            let reports = run_many(&RunPart::configs(&config, seeds, shard), 1)
                .into_iter()
                .map(|report| report.expect("runs"))
                .collect();
            let part = RunPart {
                schema: RunPart::SCHEMA.into(),
                base: config.clone(),
                seeds,
                shard,
                reports,
            };
            match through_json(&part) {
                Part::Run(part) => part,
                Part::Figure(_) => panic!("a run part"),
            }
        })
        .collect();
    let merged = merge_runs(parts.clone()).expect("joins");
    assert_eq!(
        serde_json::to_string_pretty(&merged).unwrap(),
        serde_json::to_string_pretty(&whole).unwrap()
    );
    assert!(
        merge_runs(parts[1..].to_vec()).is_err(),
        "shard 1/2 missing"
    );
}
