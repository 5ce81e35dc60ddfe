//! Speed of the packet-level model: one 1 MiB permutation at k = 12 (432 hosts) and k = 16
//! (1,024 hosts) with Ofan, the acceptance configurations of issue 6 (targets: ≤ 0.3 s and
//! ≤ 1 s per run).
//!
//! Each iteration is one complete, deterministic run; `Throughput::Elements` is the run's event
//! count, so criterion reports events per second. Peak memory is printed once per
//! configuration from `/proc/self/status` (VmHWM, the whole benchmark process).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ofan_model::{run_on, ModelConfig};
use ofan_topology::{Topology, TopologyKind};

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmHWM:"))
                .map(|line| line.trim_start_matches("VmHWM:").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn permutation(c: &mut Criterion) {
    let mut group = c.benchmark_group("model/permutation-1MiB-ofan");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for k in [12u16, 16] {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k };
        let topology = Topology::new(config.topology).expect("valid k");
        let report = run_on(&topology, &config).expect("runs");
        let events = report.model().expect("a model report").events;
        eprintln!(
            "k={k}: {events} events per run, peak RSS so far {}",
            peak_rss()
        );
        group.throughput(Throughput::Elements(events));
        group.bench_function(format!("k{k}"), |b| {
            b.iter(|| run_on(&topology, &config).expect("runs"));
        });
    }
    group.finish();
}

criterion_group!(benches, permutation);
criterion_main!(benches);
