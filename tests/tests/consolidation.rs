//! Ofan's consolidation (paper §4.1) and pointer memory, across the `topology` and `lb` crates:
//! the keys the topology assigns are the pointers the balancer keeps.

use ofan_dataplane::lb::{
    id_bits, Algorithm, LbConfig, Northbound, PortMask, SizeClass, SwitchBalancer, UpPort, BASIS,
};
use ofan_topology::{NodeId, Role, Topology};

fn node(topology: &Topology, name: &str) -> NodeId {
    topology.nodes().iter().find(|n| n.name == name).unwrap().id
}

fn balancer(
    topology: &Topology,
    switch: NodeId,
    algorithm: Algorithm,
    pipes: u16,
) -> std::sync::Arc<SwitchBalancer> {
    SwitchBalancer::new(LbConfig {
        algorithm,
        up_ports: topology.up_ports(switch).len() as u8,
        dest_keys: topology.dest_key_count(switch),
        pipes,
        buffer_bytes: 800_000,
        seed: 42,
    })
    .unwrap()
}

/// Sends the packets of several destinations, interleaved, through one switch and returns the
/// chosen up-ports in order.
fn interleave(
    topology: &Topology,
    switch: NodeId,
    destinations: &[NodeId],
    rounds: usize,
) -> Vec<u8> {
    let mut pipe = balancer(topology, switch, Algorithm::Ofan, 1)
        .pipe(0)
        .unwrap();
    let w = topology.up_ports(switch).len() as u8;
    (0..rounds)
        .flat_map(|_| destinations.iter())
        .map(|&dst| {
            let addr = topology.node(dst).loopback;
            let key = topology
                .dest_key(switch, addr)
                .expect("northbound destination");
            let packet = Northbound {
                key,
                class: SizeClass::Data,
                valid: PortMask::all(w),
                flow_hash: dst.0,
                frame_len: 4158,
            };
            let UpPort(port) = pipe.choose(&packet, &mut []).unwrap();
            port
        })
        .collect()
}

fn assert_rotates(ports: &[u8], w: usize) {
    for (round, window) in ports.chunks_exact(w).enumerate() {
        let mut seen = window.to_vec();
        seen.sort_unstable();
        assert_eq!(
            seen,
            (0..w as u8).collect::<Vec<_>>(),
            "round {round} of {ports:?}"
        );
    }
}

#[test]
fn flows_to_one_destination_edge_share_one_pointer_at_the_source_edge() {
    let topology = Topology::fat_tree(8).unwrap();
    let edge = node(&topology, "e-p0-0");
    // Two hosts under the same destination edge (pod 1, edge 2): one key, one pointer.
    let a = node(&topology, "h-p1-e2-h0");
    let b = node(&topology, "h-p1-e2-h3");
    let key = |h: NodeId| topology.dest_key(edge, topology.node(h).loopback);
    assert_eq!(key(a), key(b));
    // Their packets, interleaved, go round the w = 4 uplinks as one sequence: every four
    // consecutive packets of the two flows together use each uplink once.
    assert_rotates(&interleave(&topology, edge, &[a, b], 40), 4);
    // A host under another edge has another key.
    assert_ne!(key(a), key(node(&topology, "h-p1-e1-h0")));
}

#[test]
fn all_destinations_in_one_pod_share_one_pointer_at_an_aggregation_switch() {
    let topology = Topology::fat_tree(8).unwrap();
    let agg = node(&topology, "a-p0-1");
    let pod3: Vec<NodeId> = topology
        .hosts()
        .iter()
        .filter(|h| h.pod == Some(3))
        .map(|h| h.id)
        .collect();
    assert_eq!(pod3.len(), 16);
    let keys: std::collections::BTreeSet<_> = pod3
        .iter()
        .map(|h| topology.dest_key(agg, topology.node(*h).loopback))
        .collect();
    assert_eq!(keys.len(), 1, "one key for the whole pod");
    // 16 hosts × 4 rounds = 64 packets: each of the w = 4 cores exactly once per 4 packets.
    assert_rotates(&interleave(&topology, agg, &pod3, 4), 4);
}

/// Paper §4.1 "Memory needs", k = 64: each edge switch keeps ~4K pointers (2.5 KB), each
/// aggregation switch 126 pointers (79 B), of `log₂ w = 5` bits each, plus 20 B for the basis
/// permutation.
///
/// The bytes are the bits rounded *up* to whole bytes: 126 pointers × 5 bits = 630 bits, which
/// take 79 bytes (78 bytes hold only 624 bits); the paper's 79 B is right. The edge's "4K" is
/// 2,048 destination edges × 2 packet types = 4,096 pointers, 20,480 bits = 2,560 B = 2.5 KiB;
/// the 4,094 an edge switch ever uses (its own key never goes up) take 2,559 B. The basis
/// permutation is `w · ⌈log₂ w⌉` = 160 bits = 20 B.
///
/// These are the paper's hardware figures (registers of ⌈log₂ w⌉ bits). This software switch
/// keeps each pointer as a 64-bit packet counter (an `AtomicU64` whose value mod w is the
/// paper's pointer, so that workers share it with one `fetch_add`), 8 B instead of 5 bits,
/// beside the row of its permutation in the switch's port table.
#[test]
fn pointer_memory_at_k64() {
    let topology = Topology::fat_tree(64).unwrap();
    let edge = topology.edges()[0].id;
    let agg = topology.aggregations()[0].id;
    assert_eq!(topology.role(edge), Role::Edge);
    let w = topology.up_ports(edge).len() as u8;
    assert_eq!(w, 32);
    assert_eq!(topology.up_ports(agg).len(), 32);
    // A pointer holds a value in 0..w: ⌈log₂ w⌉ bits, the paper's log₂ 32 = 5.
    let bits = id_bits(w) as usize;
    assert_eq!(bits, 5);
    let bytes = |pointers: usize| (pointers * bits).div_ceil(8);
    // Edge: one pointer per other edge switch per size class (paper §4.1: "4K pointers").
    let edges = topology.dest_key_count(edge) as usize;
    let edge_pointers_used = (edges - 1) * SizeClass::COUNT as usize;
    let ofan_edge = balancer(&topology, edge, Algorithm::Ofan, 8);
    // Aggregation: one pointer per other pod per size class (paper: 126 for k = 64).
    let pods = topology.dest_key_count(agg) as usize;
    let agg_pointers_used = (pods - 1) * SizeClass::COUNT as usize;
    let ofan_agg = balancer(&topology, agg, Algorithm::Ofan, 8);
    let pofan_edge = balancer(&topology, edge, Algorithm::Pofan, 8);
    println!(
        "k = 64: edge switch {edges} keys → {edge_pointers_used} pointers used ({} allocated, own key unused), \
         {} B at {bits} bits each; aggregation switch {pods} keys → {agg_pointers_used} pointers used ({} allocated), \
         {} B at {bits} bits; pOfan with 8 pipes of 4 ports: {} pointers at an edge switch",
        ofan_edge.pointer_count(),
        bytes(edge_pointers_used),
        ofan_agg.pointer_count(),
        bytes(agg_pointers_used),
        pofan_edge.pointer_count()
    );
    assert_eq!(edges, 2048);
    assert_eq!(edge_pointers_used, 4094);
    assert_eq!(ofan_edge.pointer_count(), 4096);
    assert_eq!(pods, 64);
    assert_eq!(agg_pointers_used, 126);
    assert_eq!(ofan_agg.pointer_count(), 128);
    assert_eq!(pofan_edge.pointer_count(), 8 * 4096);
    // The paper's 2.5 KB (all 4,096 pointers: 2,560 B; the 4,094 used: 2,559 B) and 79 B.
    assert_eq!(bytes(ofan_edge.pointer_count()), 2560);
    assert_eq!(bytes(edge_pointers_used), 2559);
    assert_eq!(bytes(agg_pointers_used), 79);
    // The paper's 20 B for the basis permutation P: w values of ⌈log₂ w⌉ bits.
    assert_eq!(BASIS[usize::from(w)].len(), 32);
    assert_eq!(bytes(BASIS[usize::from(w)].len()), 20);
}
