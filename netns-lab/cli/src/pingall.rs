//! `ofan-lab pingall`: the reachability matrix (when it fits on a screen) and a summary.

use std::fmt::Write as _;

use ofan_lab::ops::PingMatrix;

/// The matrix (up to 32 hosts), up to 20 failed pairs, and the summary line.
#[must_use]
pub fn render(matrix: &PingMatrix) -> String {
    let hosts = &matrix.hosts;
    let failed = matrix.failed();
    let mut out = String::new();
    if hosts.len() <= 32 {
        let _ = write!(out, "{:<12}", "from \\ to");
        for j in 0..hosts.len() {
            let _ = write!(out, "{j:>3}");
        }
        let _ = writeln!(out);
        for (i, (name, _)) in hosts.iter().enumerate() {
            let short: String = name.chars().take(9).collect();
            let _ = write!(out, "{i:>2} {short:<9}");
            for (j, result) in matrix.results[i].iter().enumerate() {
                let mark = if i == j {
                    "·"
                } else if result.ok {
                    "✓"
                } else {
                    "✗"
                };
                let _ = write!(out, "{mark:>3}");
            }
            let _ = writeln!(out);
        }
    }
    for (i, j) in failed.iter().take(20) {
        let _ = writeln!(
            out,
            "FAIL {} → {} ({})",
            hosts[*i].0, hosts[*j].0, hosts[*j].1
        );
    }
    let rtts: Vec<f64> = matrix
        .results
        .iter()
        .flatten()
        .filter_map(|r| r.rtt)
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    let mean = rtts.iter().sum::<f64>() / rtts.len().max(1) as f64;
    let total = matrix.pairs();
    let _ = writeln!(
        out,
        "pingall: {}/{} ordered pairs reachable, {} failed ({:.2} s, mean RTT {:.2} ms)",
        total - failed.len(),
        total,
        failed.len(),
        matrix.elapsed.as_secs_f64(),
        mean
    );
    out
}
