//! Arbitrary bytes as a traffic-matrix file (`--matrix`, CSV or JSON;
//! `ofan_lab_agent::collective::parse_matrix`) and, when it parses, the plan built from it
//! over as many hosts. Checked: no panic, a parsed matrix is square, and a plan's flows are
//! exactly the matrix's non-zero off-diagonal entries, each a valid flow.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use ofan_lab_agent::collective::{matrix, parse_matrix, PlanError, PlanHost};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(rows) = parse_matrix(text) else {
        return;
    };
    let size = rows.len();
    assert!(size > 0);
    assert!(rows.iter().all(|row| row.len() == size));
    if size > 4096 {
        return;
    }
    let hosts: Vec<PlanHost> = (0..size as u32)
        .map(|i| PlanHost {
            name: format!("h{i}"),
            address: Ipv4Addr::from(0x0a00_0000 + i),
            planes: Vec::new(),
        })
        .collect();
    let entries = rows
        .iter()
        .enumerate()
        .flat_map(|(src, row)| row.iter().enumerate().map(move |(dst, &b)| (src, dst, b)))
        .filter(|&(src, dst, bytes)| src != dst && bytes > 0)
        .count();
    match matrix(1, hosts, text) {
        Ok(plan) => {
            assert_eq!(plan.flows.len(), entries);
            plan.validate().expect("a built plan is valid");
        }
        Err(PlanError::NoFlows) => assert_eq!(entries, 0),
        Err(other) => panic!("a parsed matrix over enough hosts failed: {other}"),
    }
});
