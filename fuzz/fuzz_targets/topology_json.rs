//! Arbitrary bytes as a topology file (`ofan_topology::Topology::from_json`, what
//! `ofan-switch --topology`, the lab and the model read). Checked: no panic, and a topology
//! that validates is canonical: it writes back to JSON that reads back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ofan_topology::Topology;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(topology) = Topology::from_json(text) else {
        return;
    };
    let again = Topology::from_json(&topology.to_json()).expect("a valid topology round-trips");
    assert_eq!(again, topology);
});
