//! Mixture-of-experts dispatch (paper §6.6): a GPU-to-expert token matrix, one expert per GPU
//! (mapped at random per seed), dispatched hierarchically over servers.
//!
//! **Token matrix.** No routing trace of a real model can be fetched here, so by default the
//! matrix comes from a seeded skew model: expert `e` is chosen with probability
//! `p_e ∝ exp(σ z_e)`, `z_e` seeded standard normals, and σ is found (by bisection) such that
//! the most popular expert gets exactly `skew` × the mean — the paper's statistic, the busiest
//! GPU receiving 1.48 × the mean (1.13 × with EPLB's replication, which this models as the
//! lower skew, not as replicated experts). Every GPU routes `tokens_per_gpu` tokens to `top_k`
//! experts each; GPU `g` sends `round(tokens × top_k × p_e)` token copies to expert `e`.
//! [`MoeTrace`] replaces the model with a real matrix: a text file of `n` rows of `n`
//! whitespace-separated token counts (row = source GPU, column = expert; `#` comments).
//!
//! **Dispatch.** Servers are `gpus_per_server` consecutive hosts. As in DeepEP, GPU `g` of
//! rank `r` sends the tokens for every GPU of a remote server to that server's rank-`r` GPU,
//! which forwards them over NVLink: one fabric flow per (GPU, remote server), of
//! `token_bytes` × the tokens for that server; intra-server traffic is skipped.

use ofan_dataplane::lb::{mix64, LbRng};
use serde::{Deserialize, Serialize};

use crate::collective::whole_servers;
use crate::config::FlowSpec;
use crate::error::ModelError;

/// Salt of the expert-popularity stream.
const POPULARITY_SALT: u64 = 0x706f_7075_6c61_7269;
/// Salt of the expert-to-GPU placement stream.
const PLACEMENT_SALT: u64 = 0x6578_7065_7274_7370;

/// A real GPU-to-expert token matrix (`n × n`, row = source GPU, column = expert).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeTrace {
    /// Token counts.
    pub tokens: Vec<Vec<u64>>,
}

/// An MoE dispatch workload over every host of the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Moe {
    /// Busiest expert's load over the mean, per mille (the paper: 1480; with EPLB 1130).
    pub skew_permille: u32,
    /// Tokens each GPU routes.
    pub tokens_per_gpu: u64,
    /// Experts per token (the paper: 8).
    pub top_k: u32,
    /// Bytes per token copy (the paper: 8,192 — hidden size 4,096 in BF16), after `--scale`.
    pub token_bytes: u64,
    /// GPUs per server (the paper: 8).
    pub gpus_per_server: u32,
    /// A real token matrix instead of the skew model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<MoeTrace>,
}

impl Moe {
    /// The paper's §6.6 setting: skew 1.48, 8,192 tokens per GPU (≈ 500 MB over the fabric
    /// per GPU, the paper's 492 MB), top-8, 8,192 B per copy, 8-GPU servers.
    #[must_use]
    pub fn paper() -> Self {
        Self {
            skew_permille: 1480,
            tokens_per_gpu: 8192,
            top_k: 8,
            token_bytes: 8192,
            gpus_per_server: 8,
            trace: None,
        }
    }

    /// Per source GPU, per expert: token copies.
    fn token_matrix(&self, gpus: usize, seed: u64) -> Result<Vec<Vec<u64>>, ModelError> {
        if let Some(trace) = &self.trace {
            if trace.tokens.len() != gpus || trace.tokens.iter().any(|row| row.len() != gpus) {
                return Err(ModelError::InvalidConfig {
                    field: "moe trace",
                    value: format!("{} rows", trace.tokens.len()),
                    reason: "the trace must be hosts × hosts (one expert per GPU)",
                });
            }
            return Ok(trace.tokens.clone());
        }
        let popularity = popularity(gpus, f64::from(self.skew_permille) / 1000.0, seed)?;
        let copies = self.tokens_per_gpu * u64::from(self.top_k);
        let row: Vec<u64> = popularity
            .iter()
            .map(|p| (copies as f64 * p).round() as u64)
            .collect();
        Ok(vec![row; gpus])
    }

    /// The fabric flows of the dispatch over `hosts` GPUs.
    ///
    /// # Errors
    /// [`ModelError::InvalidConfig`] when the hosts do not form at least two whole servers,
    /// the skew cannot be met, or a trace has the wrong shape.
    pub fn flows(&self, hosts: u32, seed: u64) -> Result<Vec<FlowSpec>, ModelError> {
        let servers = whole_servers(hosts, self.gpus_per_server)?;
        let group = self.gpus_per_server;
        let gpus = hosts as usize;
        let tokens = self.token_matrix(gpus, seed)?;
        // Expert e runs on GPU placement[e].
        let mut placement: Vec<u32> = (0..hosts).collect();
        let mut rng = LbRng::new(mix64(seed ^ PLACEMENT_SALT));
        for i in (1..placement.len()).rev() {
            let j = rng.below(i as u32 + 1) as usize;
            placement.swap(i, j);
        }
        let mut flows = Vec::new();
        for src in 0..hosts {
            let (home, rank) = (src / group, src % group);
            let mut per_server = vec![0u64; servers as usize];
            for (expert, &count) in tokens[src as usize].iter().enumerate() {
                per_server[(placement[expert] / group) as usize] += count;
            }
            for (server, &count) in per_server.iter().enumerate() {
                let server = server as u32;
                if server != home && count > 0 {
                    flows.push(FlowSpec {
                        src,
                        dst: server * group + rank,
                        bytes: count * self.token_bytes,
                    });
                }
            }
        }
        Ok(flows)
    }
}

/// Expert popularities over `experts`, summing to 1, whose largest is `skew` × the mean.
fn popularity(experts: usize, skew: f64, seed: u64) -> Result<Vec<f64>, ModelError> {
    let mean = 1.0 / experts as f64;
    if !(1.0..(experts as f64)).contains(&skew) {
        return Err(ModelError::InvalidConfig {
            field: "moe skew",
            value: skew.to_string(),
            reason: "the busiest expert's share over the mean is in [1, experts)",
        });
    }
    let mut rng = LbRng::new(mix64(seed ^ POPULARITY_SALT));
    let uniform = |rng: &mut LbRng| ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let normals: Vec<f64> = (0..experts)
        .map(|_| {
            let (u, v) = (uniform(&mut rng), uniform(&mut rng));
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        })
        .collect();
    let shares = |sigma: f64| {
        let weights: Vec<f64> = normals.iter().map(|z| (sigma * z).exp()).collect();
        let total: f64 = weights.iter().sum();
        weights.into_iter().map(|w| w / total).collect::<Vec<f64>>()
    };
    let ratio = |sigma: f64| shares(sigma).into_iter().fold(0.0, f64::max) / mean;
    let (mut low, mut high) = (0.0, 1.0);
    while ratio(high) < skew {
        high *= 2.0;
    }
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if ratio(middle) < skew {
            low = middle;
        } else {
            high = middle;
        }
    }
    Ok(shares(high))
}

/// Reads a token-count trace: rows of whitespace-separated counts, `#` comments.
///
/// # Errors
/// [`ModelError::Matrix`] naming the line of a count that is not a number or a row whose
/// length differs from the first's.
pub fn parse_trace(text: &str) -> Result<MoeTrace, ModelError> {
    let mut tokens: Vec<Vec<u64>> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let row = line
            .split_whitespace()
            .map(|field| {
                field.parse::<u64>().map_err(|e| ModelError::Matrix {
                    line: number + 1,
                    reason: format!("`{field}`: {e} (token counts are whole numbers)"),
                })
            })
            .collect::<Result<Vec<u64>, ModelError>>()?;
        if let Some(first) = tokens.first() {
            if first.len() != row.len() {
                return Err(ModelError::Matrix {
                    line: number + 1,
                    reason: format!("{} counts, the first row has {}", row.len(), first.len()),
                });
            }
        }
        tokens.push(row);
    }
    Ok(MoeTrace { tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_expert_gets_the_skew() {
        for skew in [1.13, 1.48, 2.0] {
            for seed in 1..4 {
                let shares = popularity(128, skew, seed).unwrap();
                let sum: f64 = shares.iter().sum();
                assert!((sum - 1.0).abs() < 1e-9);
                let max = shares.iter().copied().fold(0.0, f64::max);
                assert!((max * 128.0 - skew).abs() < 1e-6, "{skew}: {}", max * 128.0);
            }
        }
        assert!(popularity(128, 0.9, 1).is_err());
    }

    #[test]
    fn dispatch_crosses_servers_between_same_rank_peers() {
        let moe = Moe::paper();
        let flows = moe.flows(128, 1).unwrap();
        // Every GPU sends to the same-rank GPU of the 15 other servers.
        assert_eq!(flows.len(), 128 * 15);
        for flow in &flows {
            assert_eq!(flow.src % 8, flow.dst % 8);
            assert_ne!(flow.src / 8, flow.dst / 8);
        }
        let sent: u64 = flows.iter().map(|flow| flow.bytes).sum();
        let per_gpu = sent as f64 / 128.0 / 1e6;
        // About 15/16 of 8,192 × 8 copies of 8,192 B: the paper's 492 MB.
        assert!((480.0..520.0).contains(&per_gpu), "{per_gpu} MB");
    }

    #[test]
    fn a_trace_replaces_the_model() {
        let trace = parse_trace("# 4 GPUs\n0 1 2 3\n1 0 0 0\n0 0 0 5\n2 2 2 2\n").unwrap();
        let moe = Moe {
            gpus_per_server: 2,
            token_bytes: 10,
            trace: Some(trace),
            ..Moe::paper()
        };
        let flows = moe.flows(4, 1).unwrap();
        let total: u64 = flows.iter().map(|flow| flow.bytes).sum();
        // 21 token copies in all, of which those to the sender's own server stay off the
        // fabric: at most 210 bytes.
        assert!(total <= 210 && total > 0);
        assert!(moe.flows(8, 1).is_err(), "a 4 × 4 trace on 8 GPUs");
        let error = parse_trace("1 2\n3\n").unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
    }
}
