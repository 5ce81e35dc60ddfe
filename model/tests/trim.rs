//! UEC's packet trimming in the model (`ModelConfig::trim`): a switch cuts a DATA frame that
//! finds its buffer full to its header, the receiver NACKs the header, and the sender sends the
//! packet again without waiting for a timer.

use ofan_model::{run, BufferLimit, CcKind, FlowSpec, ModelConfig, Workload};
use ofan_topology::TopologyKind;

/// Eight hosts of other edges send 1 MiB each to one host, through 64 KB switch buffers (the
/// incast of `tests/cc.rs`).
fn incast(cc: CcKind, trim: bool) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.buffer_bytes = 64 * 1024;
    config.ecn_threshold_bytes = config.buffer_bytes / 10;
    config.buffer_limit = BufferLimit::Enforced;
    config.cc = cc;
    config.trim = trim;
    config.workload = Workload::Matrix {
        flows: (8..16)
            .map(|src| FlowSpec {
                src,
                dst: 0,
                bytes: 1 << 20,
            })
            .collect(),
    };
    config
}

/// With trimming the incast loses no frame: what overflowed arrives as a header, every header
/// is NACKed, every packet is delivered, and the senders recover by NACKs instead of timers.
#[test]
fn trimming_turns_an_incasts_losses_into_nacks_under_every_cca() {
    for cc in [CcKind::None, CcKind::Dctcp, CcKind::Nscc, CcKind::Mswift] {
        let dropping = run(&incast(cc, false)).expect("runs");
        let trimming = run(&incast(cc, true)).expect("runs");
        let (before, packets) = (&dropping.packets, &trimming.packets);
        eprintln!(
            "{cc}: drops {} timeouts {} retx {} CCT +{:.2} | trimmed {} nacks {} timeouts {} \
             retx {} CCT +{:.2}",
            dropping.drops.total,
            before.timeouts,
            before.retransmissions,
            dropping.cct_increase.unwrap_or(f64::NAN),
            packets.trimmed,
            packets.nacks,
            packets.timeouts,
            packets.retransmissions,
            trimming.cct_increase.unwrap_or(f64::NAN),
        );
        assert!(dropping.drops.total > 0, "{cc}: the incast must overflow");
        assert_eq!(before.trimmed + before.nacks, 0, "{cc}: no trimming asked");
        assert_eq!(
            trimming.drops.total, 0,
            "{cc}: a full buffer trims, drops nothing"
        );
        assert!(packets.trimmed > 0, "{cc}: the incast must overflow");
        assert_eq!(
            packets.nacks, packets.trimmed,
            "{cc}: every header reaches its receiver and is NACKed"
        );
        assert_eq!(packets.flows_complete, 8, "{cc}: every flow completes");
        assert_eq!(
            packets.data_delivered,
            8 * 256,
            "{cc}: every packet arrives"
        );
        assert!(
            packets.retransmissions >= packets.trimmed.min(packets.data_sent) / 2,
            "{cc}: trimmed packets are sent again"
        );
        assert!(
            packets.timeouts * 4 <= before.timeouts,
            "{cc}: NACKs instead of timers ({} timeouts trimming, {} dropping)",
            packets.timeouts,
            before.timeouts
        );
    }
}

/// Trimming changes nothing where no buffer fills: the permutation's report is the same run.
#[test]
fn trimming_changes_nothing_without_a_full_buffer() {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.scheme = "ofan".parse().expect("a scheme");
    let plain = run(&config).expect("runs");
    config.trim = true;
    let trimmed = run(&config).expect("runs");
    assert_eq!(trimmed.packets, plain.packets);
    assert_eq!(trimmed.cct_ps, plain.cct_ps);
    assert_eq!(trimmed.drops, plain.drops);
}
