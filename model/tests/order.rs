//! The receivers' reordering measure in the model's reports (`ofan_transport::order`).

use ofan_dataplane::lb::Algorithm;
use ofan_model::{run, ModelConfig, Scheme};
use ofan_topology::TopologyKind;

fn config(scheme: Scheme) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.message_bytes = 256 * 1024;
    config.scheme = scheme;
    config.buffer_bytes = 1 << 30;
    config
}

/// The receivers' reordering measure: a flow pinned to one path (ECMP) arrives in order;
/// per-packet spraying over queues of different lengths does not, and every first arrival is
/// looked at once.
#[test]
fn reordering_is_measured_at_the_receivers() {
    let measure = |scheme| run(&config(scheme)).unwrap();
    let ecmp = measure(Scheme::Switch(Algorithm::Ecmp));
    assert_eq!(ecmp.reordering.arrivals, ecmp.packets.data_delivered);
    assert_eq!(
        (ecmp.reordering.out_of_order, ecmp.reordering.max_distance),
        (0, 0)
    );
    let spray = measure(Scheme::Spray);
    let order = spray.reordering;
    assert_eq!(order.arrivals, spray.packets.data_delivered);
    assert!(
        order.out_of_order > 0 && order.max_distance > 0,
        "{order:?}"
    );
    assert!(order.out_of_order < order.arrivals);
    assert!(order.distance_sum >= order.out_of_order);
    assert!(u64::from(order.max_distance) < 64, "{order:?}");
}

/// A packet whose first copy was lost arrives late because of the loss, not of reordering: the
/// measure looks at first transmissions only.
#[test]
fn retransmissions_are_left_out_of_the_reordering_measure() {
    let mut config = config(Scheme::Switch(Algorithm::Ecmp));
    config.buffer_bytes = 16 * 1024;
    config.buffer_limit = ofan_model::BufferLimit::Enforced;
    config.workload = ofan_model::Workload::AllToAll;
    config.message_bytes = 64 * 1024;
    let report = run(&config).unwrap();
    assert!(report.drops.total > 0, "the test needs losses");
    assert_eq!(report.packets.flows_complete, u64::from(report.flows));
    let order = report.reordering;
    assert!(order.arrivals < report.packets.data_delivered, "{order:?}");
    assert!(order.arrivals + report.packets.retransmissions >= report.packets.data_delivered);
}
