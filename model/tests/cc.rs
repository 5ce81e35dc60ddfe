//! The hosts' congestion control in the model: `none` is today's model bit for bit, every CCA
//! recovers an incast into a shallow buffer, with coalesced ACKs too, and UEC's packet trimming
//! (`ModelConfig::trim`) turns that incast's losses into NACKs.

use ofan_model::moe::Moe;
use ofan_model::report::PacketCounts;
use ofan_model::{run, BufferLimit, CcKind, FlowSpec, ModelConfig, RunReport, Workload};
use ofan_topology::TopologyKind;

/// Reports the model wrote before congestion control existed (`scripts/model-identity`
/// configurations 1 and 3, two seeds each, build 19afabc): a run with `cc: none` must
/// reproduce them byte for byte — the same events, drops, retransmissions and timers. The
/// second, whose hosts retransmit after waiting, was written again on 2026-12-06 when the
/// ACKs a host sends while it waits stopped delaying its next frame (CCT 260.98 → 264.07 µs).
/// On 2026-12-07 both gained the `reordering` section (ECMP: nothing out of order); every
/// other field was checked unchanged.
const FIXTURES: [&str; 2] = [
    include_str!("fixtures/none-k4-ecmp-256k.json"),
    include_str!("fixtures/none-k8-ecmp-1m-60k-drops.json"),
];

#[test]
fn none_reproduces_the_reports_written_before_congestion_control() {
    for fixture in FIXTURES {
        let reports: Vec<RunReport> = serde_json::from_str(fixture).expect("fixture parses");
        let mut again = Vec::new();
        for report in &reports {
            let config = report.model().expect("a model report").config.clone();
            assert_eq!(config.cc, CcKind::None);
            again.push(run(&config).expect("runs"));
        }
        let text = serde_json::to_string_pretty(&again).expect("serializes");
        assert!(
            text == fixture.trim_end(),
            "the report of {:?} changed",
            reports[0].model().map(|model| &model.config)
        );
    }
}

/// Eight hosts of other edges send 1 MiB each to one host, through 64 KB switch buffers.
fn incast(cc: CcKind) -> ModelConfig {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 4 };
    config.buffer_bytes = 64 * 1024;
    config.ecn_threshold_bytes = config.buffer_bytes / 10;
    config.buffer_limit = BufferLimit::Enforced;
    config.cc = cc;
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

/// Every flow of [`incast`] completed and every packet arrived.
fn assert_delivered(cc: CcKind, packets: &PacketCounts) {
    assert_eq!(packets.flows_complete, 8, "{cc}: every flow completes");
    assert_eq!(
        packets.data_delivered,
        8 * 256,
        "{cc}: every packet arrives"
    );
}

#[test]
fn an_incast_into_a_shallow_buffer_completes_under_every_cca() {
    for cc in [CcKind::Dctcp, CcKind::Nscc, CcKind::Mswift] {
        let report = run(&incast(cc)).expect("runs");
        let packets = &report.packets;
        assert!(
            report.drops.total > 0,
            "{cc}: the incast must overflow the buffer"
        );
        assert_delivered(cc, packets);
        assert!(
            packets.retransmissions >= report.drops.total.min(packets.data_sent),
            "{cc}: every dropped packet was sent again"
        );
        // Recovery costs round trips and RTOs of a few unloaded round trips: the collective
        // takes at most six times its bound (one receiver link carrying 8 MiB; measured 2.5 to
        // 5.4 times, see docs/model.md).
        let increase = report.cct_increase.expect("completes");
        assert!(increase < 5.0, "{cc}: CCT increase {increase}");
        let cc_run = report
            .model()
            .and_then(|model| model.cc.as_ref())
            .expect("cc section");
        assert_eq!(cc_run.config.kind, cc);
    }
}

/// `ack_every` 4 (htsim's UEC sink, one ACK per 16 KB): a receiver sends about a quarter of
/// the ACKs, every packet is acknowledged exactly once with nothing lost, and without a CCA,
/// where only the airtime differs, the permutation ends sooner than with one ACK per frame.
#[test]
fn coalesced_acks_acknowledge_every_frame_with_a_quarter_of_the_acks() {
    for cc in [CcKind::None, CcKind::Nscc, CcKind::Mswift] {
        let mut config = ModelConfig::paper();
        config.topology = TopologyKind::FatTree { k: 4 };
        config.cc = cc;
        let every_frame = run(&config).expect("runs");
        config.ack_every = 4;
        let coalesced = run(&config).expect("runs");
        let packets = &coalesced.packets;
        assert_eq!(packets.flows_complete, 16, "{cc}: every flow completes");
        assert_eq!(packets.retransmissions, 0, "{cc}: nothing lost, no timer");
        assert_eq!(packets.timeouts, 0, "{cc}");
        assert_eq!(packets.duplicate_acks, 0, "{cc}: each frame told once");
        let frames = packets.data_delivered;
        // One per 4 frames, plus the urgent ones: each flow's first and last frame, marked
        // frames, frames that filled their window.
        assert!(
            packets.acks_sent >= frames / 4 && packets.acks_sent < frames / 3,
            "{cc}: {} ACKs for {frames} frames",
            packets.acks_sent
        );
        assert_eq!(every_frame.packets.acks_sent, frames, "{cc}");
        if cc == CcKind::None {
            // Without a CCA only the airtime differs (a CCA also hears later of each frame).
            let (one, four) = (
                every_frame.cct_ps.expect("ends"),
                coalesced.cct_ps.expect("ends"),
            );
            assert!(
                four < one,
                "CCT {four} ps with coalesced ACKs, {one} without"
            );
        }
    }
}

/// Coalesced ACKs under losses: an ACK tells everything received since the sender last heard,
/// so the incast into a shallow buffer completes under every CCA with every packet delivered,
/// and its senders time out about as often as with an ACK per frame.
#[test]
fn an_incast_completes_with_coalesced_acks_under_every_cca() {
    for cc in [CcKind::Dctcp, CcKind::Nscc, CcKind::Mswift] {
        let mut config = incast(cc);
        let timeouts = run(&config).expect("runs").packets.timeouts;
        config.ack_every = 4;
        let report = run(&config).expect("runs");
        let packets = &report.packets;
        // A sender whose window is full asks for an ACK at once: without that it would wait
        // for its timer whenever fewer than four of its frames were left in flight.
        eprintln!("{cc}: timeouts {timeouts} → {}", packets.timeouts);
        assert!(
            packets.timeouts <= 2 * timeouts + 2,
            "{cc}: {} timeouts with coalesced ACKs, {timeouts} without",
            packets.timeouts
        );
        assert!(report.drops.total > 0, "{cc}: the incast must overflow");
        assert_delivered(cc, packets);
        assert!(
            packets.acks_sent < packets.data_delivered + packets.duplicate_data,
            "{cc}: fewer ACKs than frames"
        );
    }
}

/// With trimming the incast loses no frame: what overflowed arrives as a header, every header
/// is NACKed, every packet is delivered, and the senders recover by NACKs instead of timers.
#[test]
fn trimming_turns_an_incasts_losses_into_nacks_under_every_cca() {
    for cc in [CcKind::None, CcKind::Dctcp, CcKind::Nscc, CcKind::Mswift] {
        let mut config = incast(cc);
        let dropping = run(&config).expect("runs");
        config.trim = true;
        let trimming = run(&config).expect("runs");
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
        assert_delivered(cc, packets);
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

/// Receiver credits (`ModelConfig::receiver_credit`): Fig. 13's MoE dispatch at a tenth of its
/// bytes (k = 8, 64 KB frames, 800 KB buffers, the paper's ECN threshold of 10 frames) under
/// NSCC loses frames all along at the receivers' ports, where 15 senders meet; with credits a
/// receiver takes new data only as fast as it pulls it after the first windows, and the losses
/// fall to those of the first windows (measured: 3,414 → 325).
#[test]
fn receiver_credits_keep_the_moe_incasts_from_overflowing_the_receivers_ports() {
    let mut config = ModelConfig::paper();
    config.topology = TopologyKind::FatTree { k: 8 };
    config.cc = CcKind::Nscc;
    config.link.payload_bytes = 65_536;
    config.ecn_threshold_bytes =
        10 * u64::from(config.link.payload_bytes + config.link.header_bytes);
    config.workload = Workload::Moe {
        moe: Moe {
            token_bytes: 819,
            ..Moe::paper()
        },
    };
    let alone = run(&config).expect("runs");
    config.receiver_credit = true;
    let credited = run(&config).expect("runs");
    let packets = &credited.packets;
    assert_eq!(packets.flows_complete, alone.packets.flows_complete);
    assert_eq!(
        u64::from(credited.flows),
        packets.flows_complete,
        "every flow completes"
    );
    assert_eq!(packets.data_delivered, alone.packets.data_delivered);
    assert_eq!(alone.packets.pulls, 0, "no credits asked");
    assert!(packets.pulls > 0);
    assert!(
        credited.drops.total * 4 <= alone.drops.total,
        "{} drops with credits, {} without",
        credited.drops.total,
        alone.drops.total
    );
}
