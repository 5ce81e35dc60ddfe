//! `ofan-lab model`: the deterministic packet-level model (crate `ofan-model`).
//!
//! * `model run`: one experiment (one or several seeds, in parallel); prints a table, writes
//!   the reports as JSON (schema `ofan.run/2`, the type the lab writes too).
//! * `model fig1 | fig3 | fig4 | fig6 | failures | fig10 | fig11 | fig12 | fig13 | fig14`: reproduce a paper figure; prints the tables
//!   (and fits), writes `<out>/<name>.json` and one `<out>/<name>-<metric>.svg` per panel.
//! * `model bench`: wall time, events per second and peak memory of one configuration, or of
//!   the permutation at several network sizes (`--sizes`).
//! * `--shard I/N` (figures and `run --seeds`) makes one shard's runs and writes them as a
//!   part; `model merge` joins the parts of all shards into the unsharded output.

mod bench;
mod figure;
mod output;
mod run;

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_model::collective::{Collective, CollectiveKind};
use ofan_model::dragonfly::{
    DragonflyConfig, DragonflyWorkload, DRAGONFLY_ARF_DELAY_PS, DRAGONFLY_ARF_WINDOW_PS,
};
use ofan_model::figures::{self, Figure, FigureSpec, Sweep};
use ofan_model::fsdp::{Llama, WindowGate};
use ofan_model::mix::{Mix, SwitchSchemes};
use ofan_model::shard::{merge_runs, Part};
use ofan_model::{
    default_threads, workload, AckAirtime, BufferLimit, CcKind, DegradedLink, EcnAt, Failures,
    LinkFailure, ModelConfig, Pacing, RunReport, Scheme, Shard, Stage, StartPhase, Workload,
};
use ofan_topology::{DragonflyShape, PlaneKind, TopologyKind};

use super::{RingOrderArg, Shape};
use bench::{bench, BenchArgs};
use figure::*;
use output::*;
use run::run_one;

/// Arguments of `ofan-lab model`.
#[derive(Debug, Args)]
pub struct ModelArgs {
    // Boxed: the figure arguments are large and `main`'s command enum holds this by value.
    #[command(subcommand)]
    command: Box<ModelCommand>,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Run one experiment (one or several seeds).
    Run(RunArgs),
    /// Fig. 1: utilization, max queue and CCT vs offered load (0.5 → 1.0).
    Fig1(FigArgs),
    /// Fig. 3: worst link overload per stage (E→A, A→C, C→A, A→E) for each scheme.
    Fig3(FigArgs),
    /// Fig. 4: max queue and CCT increase vs message size, with fitted growth exponents.
    ///
    /// The default hosts pace like the lab's agents (ACK airtime charged by count, all
    /// starting at t = 0), which keeps Simple RR and JSQ between the paper's classes (≈ 0.64,
    /// 0.85); the paper's strictly periodic sources, Thm. 2's premise, are
    /// `--ack-airtime reserved --start-phase random` (rr ≈ 1.0, jsq ≈ 0.96). See docs/model.md.
    Fig4(FigArgs),
    /// Fig. 6 / 17: pOfan pipe sizes vs DRB, and the DRB/Ofan max-queue ratio, vs network size.
    Fig6(FigArgs),
    /// §6.2: CCT increase vs link-failure probability, hosts paced at ρ_max.
    Failures(FigArgs),
    /// Fig. 10 (§6.3): the permutation on leaf-spine fabrics (`--leaf-spine-ks`, default 64:
    /// 2,048 hosts) for REPS, AR, Ofan and 4Ofan (pOfan, `--pipe-size`): CCT, increase, max
    /// queue, utilization, and Ofan's CCT reduction against REPS and AR (quick:
    /// `--leaf-spine-ks 16 --seeds 1`).
    Fig10(FigArgs),
    /// Fig. 11 (§6.4): incremental deployment — the permutation with every balancing switch
    /// on AR, with 4Ofan (pOfan, `--pipe-size`) on half of them by each placement (random
    /// switches, random pods, all aggregation, all edge), and all on 4Ofan (`--schemes
    /// BASE,PLACED`).
    Fig11(FigArgs),
    /// Fig. 13 (§6.6): MoE dispatch on a k = 8 fat tree (128 GPUs, 8-GPU servers, 64 KB
    /// packets) for REPS, AR, Ofan, 4Ofan, per CCA (`--ccs`, default none,nscc; none runs
    /// with unlimited buffers) and skew (`--skews`, default 1.48,1.13); `--scale 0.01` for
    /// quick runs (`--moe-trace FILE` for a real token matrix).
    Fig13(FigArgs),
    /// Fig. 14 (§6.7): training Llama-3 (`--llamas`, default 8b,70b,405b) with FSDP2 and
    /// HSDP — the backward pass's all-gather and reduce-scatter per layer, 8-GPU servers in
    /// random order, GPU i to i + 8 — under NSCC and MSwift (`--ccs`) for REPS, AR, Ofan and
    /// 4Ofan, on k = 16 (1,024 GPUs) unless `--k`; `--layers N` simulates N layers of each.
    /// `--quick`: k = 8, 2 layers, 8B and 70B, one seed (seconds).
    Fig14(FigArgs),
    /// Fig. 12 (§6.5): a permutation of 4 MiB messages under each congestion control
    /// (`--ccs`) and scheme: CCT increase, utilization, max queue, retransmissions.
    Fig12(FigArgs),
    /// Time one configuration (median wall time, events/s, peak memory), or the permutation
    /// at several network sizes (`--sizes`: a table).
    Bench(BenchArgs),
    /// Join the parts that `--shard I/N` wrote (all N shards of one figure or one `run
    /// --seeds`) into exactly the output of the unsharded command.
    Merge(MergeArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WorkloadKind {
    Permutation,
    InterPod,
    AllToAll,
    Ring,
    Matrix,
    /// Dragonfly: every packet to a uniformly random other host.
    Uniform,
    /// Dragonfly: every host of group G to the same position in group G + 1.
    Adversarial,
    /// Ring all-reduce: reduce-scatter then all-gather, each step waiting for the previous
    /// step's chunk; `--size` is each host's buffer.
    RingAllreduce,
    /// Ring all-gather (one phase).
    RingAllgather,
    /// Ring reduce-scatter (one phase).
    RingReducescatter,
    /// The backward pass of FSDP2 with HSDP (paper §6.7): per layer, an all-gather and a
    /// reduce-scatter flow from every GPU to the same-rank GPU of the next server
    /// (`--llama`, `--layers`, `--gpus-per-server`, default 8 here, `--ring-order`).
    Fsdp,
    /// Mixture-of-experts dispatch (paper §6.6): GPU-to-expert tokens from a seeded skew
    /// model (`--moe-skew`) or a trace (`--moe-trace`), sent to the same-rank GPU of each
    /// remote server (`--gpus-per-server`, default 8 here).
    Moe,
}

/// The families `model` runs: the lab's shapes, and the dragonfly (model only so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModelShape {
    FatTree,
    LeafSpine,
    /// g = a·h + 1 groups of a routers with p hosts and h global links each (--p, --a, --h).
    Dragonfly,
    /// --planes disjoint copies of a --plane-topology of radix --k that share the hosts: every
    /// host has one NIC port per plane and spreads its packets by --host-planes.
    MultiPlane,
}

impl ModelShape {
    /// The tiered family, or an error for the dragonfly (which `model run` alone knows).
    fn tiered(self, what: &str) -> anyhow::Result<Shape> {
        match self {
            Self::FatTree => Ok(Shape::FatTree),
            Self::LeafSpine => Ok(Shape::LeafSpine),
            Self::Dragonfly => bail!("{what} runs on fat trees and leaf-spines; a dragonfly runs with `model run --topology dragonfly`"),
            Self::MultiPlane => bail!("{what} runs on fat trees and leaf-spines; a multi-plane fabric runs with `model run --topology multi-plane`"),
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FsdpGateArg {
    Received,
    Sent,
}

impl FsdpGateArg {
    const fn gate(self) -> WindowGate {
        match self {
            Self::Received => WindowGate::Received,
            Self::Sent => WindowGate::ReceivedAndSent,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BufferLimitArg {
    Enforced,
    Unlimited,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PacingArg {
    Offered,
    RhoMax,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum EcnAtArg {
    Enqueue,
    Dequeue,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AckAirtimeArg {
    Charged,
    Reserved,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StartPhaseArg {
    Synchronous,
    Random,
}

/// Everything that shapes one run.
#[derive(Debug, Clone, Args)]
struct Common {
    /// Topology family.
    #[arg(long, value_enum, default_value = "fat-tree")]
    topology: ModelShape,
    /// Switch radix k (even, 4..=64; default 12, fig14: 16, fig14 --quick: 8).
    #[arg(long)]
    k: Option<u16>,
    /// Multi-plane: number of planes, each host's NIC ports (1..=8; planes × pods <= 256).
    #[arg(long, default_value_t = 2)]
    planes: u8,
    /// Multi-plane: what each plane is.
    #[arg(long, value_enum, default_value = "fat-tree")]
    plane_topology: Shape,
    /// Multi-plane: how a host spreads its packets over its planes — plane-hash (one plane
    /// per flow), plane-spray (per packet, round robin), plane-arf (per packet, weighted by
    /// the path quality its edge switches pass on, CE-marked ACKs and losses per plane),
    /// entropy (per packet, a set of entropy values per plane: a loss retires one, a CE mark
    /// skips its next turn). See docs/model.md, "Multi-plane fabrics".
    #[arg(long, default_value = "plane-spray")]
    host_planes: String,
    /// Dragonfly: hosts per router (default 2).
    #[arg(long)]
    p: Option<u16>,
    /// Dragonfly: routers per group, all-to-all inside the group (default 2p, balanced).
    #[arg(long)]
    a: Option<u16>,
    /// Dragonfly: global links per router; g = a·h + 1 groups (default p, balanced).
    #[arg(long)]
    h: Option<u16>,
    /// Traffic matrix. Fat tree and leaf-spine: permutation, inter-pod, all-to-all, ring,
    /// matrix. Dragonfly: uniform, permutation, adversarial.
    #[arg(long, value_enum, default_value = "permutation")]
    workload: WorkloadKind,
    /// Traffic-matrix file for `--workload matrix`: lines `src dst [bytes]` (host indices),
    /// or htsim's connection-matrix format (a file starting with `Nodes N`): `Connections M`,
    /// `Triggers K`, lines `SRC->DST id I start PS size BYTES [send_done_trigger U]
    /// [recv_done_trigger U]`, `SRC->DST id I trigger T size BYTES ...` (starts when trigger T
    /// fires) and `trigger id T oneshot|multishot|barrier [count C]`; start times in ps, as
    /// htsim reads them. See docs/model.md, "Workloads with dependencies".
    #[arg(long)]
    matrix: Option<PathBuf>,
    /// Ring collectives and MoE: hosts per server (default 1 for rings, 8 for MoE). Rings: 1
    /// is one flat ring over every host; G > 1: G rings over the servers (G consecutive hosts
    /// each), rank r to rank r of the next server, each step carrying 1/n of the buffer;
    /// intra-server traffic is skipped (not modelled), for MoE too.
    #[arg(long)]
    gpus_per_server: Option<u32>,
    /// MoE: the busiest expert's load over the mean (the paper: 1.48; with EPLB 1.13).
    #[arg(long, default_value_t = 1.48)]
    moe_skew: f64,
    /// MoE: tokens each GPU routes, each to 8 experts.
    #[arg(long, default_value_t = 8192)]
    moe_tokens: u64,
    /// MoE: a real token matrix instead of the skew model — hosts rows of hosts
    /// whitespace-separated counts (row = source GPU, column = expert, `#` comments).
    #[arg(long)]
    moe_trace: Option<PathBuf>,
    /// MoE: scale every token's 8,192 bytes by this factor (quick runs: 0.01).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// FSDP: the Llama-3 model (8b, 70b, 405b): its layers and packets per flow per layer.
    #[arg(long, default_value = "8b")]
    llama: String,
    /// FSDP (and fig14): simulate this many layers instead of the model's own count.
    #[arg(long)]
    layers: Option<u32>,
    /// FSDP (and fig14): a GPU's next window waits for its predecessor's data (received), or
    /// for that and its own sends' ACKs too (sent).
    #[arg(long, value_enum, default_value = "received")]
    fsdp_gate: FsdpGateArg,
    /// Ring collectives and FSDP: the servers' order on the ring (random: seeded, as random server
    /// placement).
    #[arg(long, value_enum, default_value = "random")]
    ring_order: RingOrderArg,
    /// Ring stride for `--workload ring`.
    #[arg(long, default_value_t = 1)]
    ring_stride: u32,
    /// Load-balancing scheme. Fat tree and leaf-spine: ecmp, rsq, rr, jsq, ar, drill, ofan,
    /// pofan, arf-wcmp, arf-flow, arf-packet, spray, reps, drb (default ofan). Dragonfly: min,
    /// valiant, ugal-l, ugal-g (global queue knowledge, a reference only the model has),
    /// arf-ugal (UGAL plus the framework's notified global-link queues), rotate (Ofan's
    /// per-destination-group rotation over the group's global links), ugal-rotate (default
    /// min).
    #[arg(long)]
    scheme: Option<String>,
    /// Switches that run another scheme: a file of `SWITCH SCHEME` lines (`e-p0-0 pofan`,
    /// `#` comments); the others run --scheme. Switch algorithms only (not spray, reps, drb,
    /// arf-*), on edge and aggregation switches.
    #[arg(long, conflicts_with = "mix")]
    scheme_map: Option<PathBuf>,
    /// Incremental deployment: A:B:PLACEMENT runs A everywhere but B on half the edge and
    /// aggregation switches, placed on random-switches, random-pods (whole pods),
    /// aggregation (all of them) or edge (all of them), e.g. ar:pofan:edge; random
    /// placements follow the seed. Replaces --scheme.
    #[arg(long)]
    mix: Option<String>,
    /// The hosts' congestion control: none (the pacer alone), dctcp, nscc, mswift.
    #[arg(long, default_value = "none")]
    cc: String,
    /// With --cc: the reordering window of loss detection, per mille of the smoothed RTT
    /// (default 1000 ‰, see docs/model.md).
    #[arg(long)]
    reorder_window_permille: Option<u32>,
    /// Message size per flow (bytes; K/M/G suffixes are binary: 1M = 1 MiB).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    size: u64,
    /// Link rate, Gb/s.
    #[arg(long, default_value_t = 800)]
    rate_gbps: u64,
    /// Link propagation latency, ns.
    #[arg(long, default_value_t = 500)]
    latency_ns: u64,
    /// Data payload bytes per packet.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    payload: u64,
    /// Data header bytes.
    #[arg(long, default_value_t = 62)]
    header: u32,
    /// ACK frame bytes.
    #[arg(long, default_value_t = 64)]
    ack: u32,
    /// Data frames a receiver acknowledges with one ACK (1 to 64). Above 1, as htsim's UEC
    /// sink with `-sack_threshold` (16 KB by default: 4 frames of 4 KB): an ACK at once for a
    /// CE-marked frame, a duplicate, a flow's first and last frame and a frame its sender asked
    /// for (a retransmission, the last new frame, one that fills the window), otherwise one per
    /// this many frames, telling everything received since the sender last heard.
    #[arg(long, default_value_t = 1)]
    ack_every: u32,
    /// UEC's packet trimming, as htsim's switches do by default: a DATA frame that finds its
    /// switch buffer full goes on as its header (`--header` bytes) instead of being dropped;
    /// its receiver answers with a NACK at once and the sender sends it again without waiting
    /// for a timer (NSCC also shrinks its window by the packet). Headers and ACKs may exceed
    /// the buffer up to three times its size. No effect with unlimited buffers.
    #[arg(long)]
    trim: bool,
    /// Receiver credits beside the CCA (needs `--cc`), as htsim's UEC source runs by default: a
    /// sender sends a new packet only with credit and window; each receiver grants one data
    /// frame of credit per PULL, round robin over its senders, at most one per data frame time
    /// of its link; a flow starts with one window of credit.
    #[arg(long)]
    receiver_credit: bool,
    /// Inter-frame gap + preamble bytes.
    #[arg(long, default_value_t = 20)]
    gap: u32,
    /// Per-port buffer (bytes; suffixes allowed; decimal `800000` is the paper's 800 KB).
    #[arg(long, default_value = "800000", value_parser = parse_size)]
    buffer: u64,
    /// Whether full buffers drop (figures 3, 4 and 6 always run unlimited).
    #[arg(long, value_enum, default_value = "enforced")]
    buffer_limit: BufferLimitArg,
    /// ECN marking threshold (bytes); default 10 % of the buffer (fig13: 10 packets of
    /// 64 KB, the paper's).
    #[arg(long, value_parser = parse_size)]
    ecn: Option<u64>,
    /// Offered load, fraction of the pacing reference.
    #[arg(long, default_value_t = 1.0)]
    load: f64,
    /// Pacing reference: line rate, or ρ_max under the failures.
    #[arg(long, value_enum, default_value = "offered")]
    pacing: PacingArg,
    /// When a switch decides a DATA frame's CE mark: as it joins the queue (if the queue holds
    /// `--ecn` bytes then), or as it leaves (if the queue behind it still does), as htsim's
    /// queues do — a queue that grew is signalled a drain time earlier.
    #[arg(long, value_enum, default_value = "enqueue")]
    ecn_at: EcnAtArg,
    /// Room for the host's own ACKs on its link: charged by count after each data departure
    /// (as the lab agent), or reserved on a fixed schedule (strictly periodic data).
    #[arg(long, value_enum, default_value = "charged")]
    ack_airtime: AckAirtimeArg,
    /// Hosts start at t = 0, or each at a seeded random time within one frame time of it.
    #[arg(long, value_enum, default_value = "synchronous")]
    start_phase: StartPhaseArg,
    /// Ports per pipe (pOfan's pipe size).
    #[arg(long, default_value_t = 4)]
    pipe_size: u16,
    /// Probability that each switch-to-switch link fails.
    #[arg(long)]
    fail_prob: Option<f64>,
    /// Failed link ids, comma-separated.
    #[arg(long, value_delimiter = ',')]
    fail_links: Vec<u32>,
    /// Slow links: `FROM/TO:RATE` (both directions) or `FROM>TO:RATE` (one direction), by
    /// switch name, RATE a fraction of line rate, e.g. `a-p0-0/c-0:0.25`; repeatable.
    #[arg(long)]
    degrade: Vec<String>,
    /// A link that fails (both directions) during the run: `FROM/TO@TIME_US`, by switch name,
    /// TIME in µs since the collective started, e.g. `a-p0-0/c-0@45`; repeatable. Frames
    /// queued or on its wire are lost, and so is what a switch sends to it before it knows.
    #[arg(long)]
    fail_at: Vec<String>,
    /// Failing links: from the failure to the two adjacent switches detecting it, µs (default
    /// 4000: the lab's BIRD + BFD; `arf-*` switches then send "failure detected").
    #[arg(long)]
    detect_us: Option<f64>,
    /// Failing links: from the failure to every switch routing around it (BGP reconverged),
    /// µs (default 64000: the lab's BIRD + BFD at a remote switch; FRR took 124000).
    #[arg(long)]
    reroute_delay_us: Option<f64>,
    /// Adaptive-routing framework (`arf-*`): detection window, µs (default 4; on a dragonfly,
    /// `arf-ugal`'s reporting period, default 1).
    #[arg(long)]
    arf_window_us: Option<f64>,
    /// Adaptive-routing framework: control-plane delay of a notification, µs (default 100; on
    /// a dragonfly, in-band across the group, default 2).
    #[arg(long)]
    arf_delay_us: Option<f64>,
    /// Adaptive-routing framework: refresh every this many windows (default 10; hold = 3×).
    #[arg(long)]
    arf_refresh_windows: Option<u32>,
    /// Adaptive-routing framework: how a path's quality combines its local and remote levels,
    /// min (the worse of the two, default) or sum (the draft's local + remote, halved): what
    /// `arf-wcmp` weights and `arf-flow` targets read (docs/adaptive-routing.md).
    #[arg(long, value_name = "RULE")]
    arf_combine: Option<ofan_dataplane::arf::Combine>,
    /// Worker threads (default: available cores).
    #[arg(long)]
    threads: Option<usize>,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of seeds (seed, seed+1, …), run in parallel.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Write the report(s) as JSON to this file (`-` for stdout); with `--shard`, the part.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only shard I of N of the seeds (seed + i for i = I − 1, I − 1 + N, …) and write
    /// them as a part to `--json` (default `run.part-I-of-N.json`), for `model merge`.
    #[arg(long)]
    shard: Option<Shard>,
}

#[derive(Debug, Args)]
struct FigArgs {
    #[command(flatten)]
    common: Common,
    /// Seeds per point (1..=N).
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// Output directory for JSON and SVG.
    #[arg(long, default_value = "model-out")]
    out: PathBuf,
    /// Schemes to compare (comma-separated; default depends on the figure).
    #[arg(long, value_delimiter = ',')]
    schemes: Vec<String>,
    /// Fig. 4: message sizes.
    #[arg(long, value_delimiter = ',', value_parser = parse_size,
          default_value = "64K,256K,1M,4M,16M")]
    sizes: Vec<u64>,
    /// Fig. 1: offered loads.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.5,0.6,0.7,0.8,0.9,0.95,1.0"
    )]
    loads: Vec<f64>,
    /// Fig. 6: radices k.
    #[arg(long, value_delimiter = ',', default_value = "4,6,8,10,12,14,16")]
    ks: Vec<u16>,
    /// Fig. 6: pOfan pipe sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pipe_sizes: Vec<u16>,
    /// Failures: link-failure probabilities.
    #[arg(long, value_delimiter = ',', default_value = "0,0.01,0.02,0.05,0.1")]
    probs: Vec<f64>,
    /// Fig. 10: leaf-spine radices k (k²/2 hosts each; the paper's 64: 2,048 hosts).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    leaf_spine_ks: Vec<u16>,
    /// Fig. 12: congestion-control algorithms (none, dctcp, nscc, mswift).
    #[arg(long, value_delimiter = ',', default_value = "dctcp,nscc,mswift")]
    ccs: Vec<String>,
    /// Fig. 13: MoE skews, busiest expert over the mean (1.13: EPLB).
    #[arg(long, value_delimiter = ',', default_value = "1.48,1.13")]
    skews: Vec<f64>,
    /// Fig. 14: Llama-3 models (8b, 70b, 405b; default all three, --quick 8b,70b).
    #[arg(long, value_delimiter = ',')]
    llamas: Vec<String>,
    /// Fig. 14: k = 8, 2 layers, 8B and 70B, one seed (what is given explicitly still wins,
    /// but for the seeds).
    #[arg(long)]
    quick: bool,
    /// Fig. 12: message size (the paper's 4 MB, 6.8 base RTTs at 800 Gb/s).
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    message_size: u64,
    /// Run only shard I of N of the figure's runs (run i, in the order of the points and
    /// their seeds, when i mod N = I − 1) and write them as `<out>/<name>.part-I-of-N.json`,
    /// for `model merge`.
    #[arg(long)]
    shard: Option<Shard>,
}

#[derive(Debug, Args)]
struct MergeArgs {
    /// The part files (`*.part-I-of-N.json`) of every shard.
    #[arg(required = true)]
    parts: Vec<PathBuf>,
    /// Output directory: `<name>.json` and the plots of a figure, `run.json` for a run.
    #[arg(long, default_value = "model-out")]
    out: PathBuf,
}

/// Runs `ofan-lab model`.
pub fn run(args: ModelArgs) -> anyhow::Result<()> {
    match *args.command {
        ModelCommand::Run(args) => run_one(args),
        ModelCommand::Fig1(args) => figure(args, FigureKind::Fig1),
        ModelCommand::Fig3(args) => figure(args, FigureKind::Fig3),
        ModelCommand::Fig4(args) => figure(args, FigureKind::Fig4),
        ModelCommand::Fig6(args) => figure(args, FigureKind::Fig6),
        ModelCommand::Failures(args) => figure(args, FigureKind::Failures),
        ModelCommand::Fig10(args) => figure(args, FigureKind::Fig10),
        ModelCommand::Fig11(args) => figure(args, FigureKind::Fig11),
        ModelCommand::Fig12(args) => figure(args, FigureKind::Fig12),
        ModelCommand::Fig13(mut args) => {
            if args.ccs == ["dctcp", "nscc", "mswift"] {
                // Fig. 12's default; Fig. 13 compares no CCA with NSCC.
                args.ccs = vec!["none".into(), "nscc".into()];
            }
            figure(args, FigureKind::Fig13)
        }
        ModelCommand::Fig14(mut args) => {
            if args.ccs == ["dctcp", "nscc", "mswift"] {
                // Fig. 12's default; Fig. 14 runs NSCC and MSwift.
                args.ccs = vec!["nscc".into(), "mswift".into()];
            }
            let common = &mut args.common;
            if args.quick {
                common.k.get_or_insert(8);
                common.layers.get_or_insert(2);
                if args.llamas.is_empty() {
                    args.llamas = vec!["8b".into(), "70b".into()];
                }
                args.seeds = 1;
            } else {
                common.k.get_or_insert(16);
            }
            figure(args, FigureKind::Fig14)
        }
        ModelCommand::Bench(args) => bench(args),
        ModelCommand::Merge(args) => merge(args),
    }
}

/// A size in bytes, binary prefixes (`1M` = 2^20), as everywhere in ofan ([`ofan_topology::units`]).
fn parse_size(text: &str) -> Result<u64, String> {
    ofan_topology::units::parse_size(text).map_err(|e| e.to_string())
}

impl Common {
    fn config(&self) -> anyhow::Result<ModelConfig> {
        let mut config = ModelConfig::paper();
        let k = self.k.unwrap_or(12);
        config.topology = if self.topology == ModelShape::MultiPlane {
            let plane = match self.plane_topology {
                Shape::FatTree => PlaneKind::FatTree,
                Shape::LeafSpine => PlaneKind::LeafSpine,
            };
            let kind = TopologyKind::MultiPlane {
                plane,
                planes: self.planes,
                k,
            };
            ofan_topology::Topology::new(kind).context("--planes")?;
            kind
        } else {
            self.topology.tiered("this command")?.kind(k)
        };
        config.host_planes = self.host_planes.parse().context("--host-planes")?;
        if self.p.is_some() || self.a.is_some() || self.h.is_some() {
            bail!(
                "--p, --a and --h shape a dragonfly (--topology dragonfly); a fat tree takes --k"
            );
        }
        config.link.rate_bps = self
            .rate_gbps
            .checked_mul(1_000_000_000)
            .context("--rate-gbps is too large")?;
        config.link.propagation_ps = self.latency_ns.saturating_mul(1000);
        config.link.payload_bytes =
            u32::try_from(self.payload).context("--payload must fit in 32 bits")?;
        config.link.header_bytes = self.header;
        config.link.ack_bytes = self.ack;
        config.ack_every = self.ack_every;
        config.trim = self.trim;
        config.receiver_credit = self.receiver_credit;
        config.link.gap_bytes = self.gap;
        config.buffer_bytes = self.buffer;
        config.buffer_limit = match self.buffer_limit {
            BufferLimitArg::Enforced => BufferLimit::Enforced,
            BufferLimitArg::Unlimited => BufferLimit::Unlimited,
        };
        config.ecn_threshold_bytes = self.ecn.unwrap_or(self.buffer / 10);
        config.ecn_at = match self.ecn_at {
            EcnAtArg::Enqueue => EcnAt::Enqueue,
            EcnAtArg::Dequeue => EcnAt::Dequeue,
        };
        config.load = self.load;
        config.pacing = match self.pacing {
            PacingArg::Offered => Pacing::Offered,
            PacingArg::RhoMax => Pacing::RhoMax,
        };
        config.ack_airtime = match self.ack_airtime {
            AckAirtimeArg::Charged => AckAirtime::Charged,
            AckAirtimeArg::Reserved => AckAirtime::Reserved,
        };
        config.start_phase = match self.start_phase {
            StartPhaseArg::Synchronous => StartPhase::Synchronous,
            StartPhaseArg::Random => StartPhase::Random,
        };
        config.message_bytes = self.size;
        config.scheme = self.scheme.as_deref().unwrap_or("ofan").parse()?;
        if let Some(path) = &self.scheme_map {
            let text =
                fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            config.switch_schemes = SwitchSchemes::Map {
                switches: ofan_model::mix::parse_scheme_map(&text)
                    .with_context(|| format!("parsing {}", path.display()))?,
            };
        }
        if let Some(mix) = &self.mix {
            let mix: Mix = mix.parse().context("--mix")?;
            config.scheme = mix.base;
            config.switch_schemes = SwitchSchemes::Mix {
                scheme: mix.placed,
                placement: mix.placement,
            };
        }
        config.cc = self.cc.parse::<CcKind>().context("--cc")?;
        config.reorder_window_permille = self.reorder_window_permille;
        config.pipe_ports = self.pipe_size;
        config.workload = match self.workload {
            WorkloadKind::Permutation => Workload::Permutation,
            WorkloadKind::InterPod => Workload::InterPodPermutation,
            WorkloadKind::AllToAll => Workload::AllToAll,
            WorkloadKind::Ring => Workload::Ring {
                stride: self.ring_stride,
            },
            WorkloadKind::Uniform | WorkloadKind::Adversarial => {
                bail!("--workload uniform and adversarial are dragonfly patterns (--topology dragonfly)")
            }
            WorkloadKind::Matrix => {
                let path = self
                    .matrix
                    .as_ref()
                    .context("--workload matrix needs --matrix FILE")?;
                let text = fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                if ofan_model::htsim::is_htsim(&text) {
                    let matrix = ofan_model::htsim::parse(&text)
                        .with_context(|| format!("parsing {} (htsim format)", path.display()))?;
                    Workload::Htsim {
                        nodes: matrix.nodes,
                        graph: matrix.graph,
                    }
                } else {
                    Workload::Matrix {
                        flows: workload::parse_matrix(&text, self.size)
                            .with_context(|| format!("parsing {}", path.display()))?,
                    }
                }
            }
            WorkloadKind::Moe => {
                if !(self.scale > 0.0 && self.scale.is_finite()) {
                    bail!("--scale must be positive");
                }
                let trace = match &self.moe_trace {
                    Some(path) => {
                        let text = fs::read_to_string(path)
                            .with_context(|| format!("reading {}", path.display()))?;
                        Some(
                            ofan_model::moe::parse_trace(&text)
                                .with_context(|| format!("parsing {}", path.display()))?,
                        )
                    }
                    None => None,
                };
                Workload::Moe {
                    moe: ofan_model::moe::Moe {
                        skew_permille: (self.moe_skew * 1000.0).round() as u32,
                        tokens_per_gpu: self.moe_tokens,
                        token_bytes: ((8192.0 * self.scale).round() as u64).max(1),
                        gpus_per_server: self.gpus_per_server.unwrap_or(8),
                        trace,
                        ..ofan_model::moe::Moe::paper()
                    },
                }
            }
            WorkloadKind::Fsdp => {
                let model: Llama = self.llama.parse().map_err(anyhow::Error::msg)?;
                let mut fsdp = model.fsdp();
                fsdp.layers = self.layers.unwrap_or(fsdp.layers);
                fsdp.gpus_per_server = self.gpus_per_server.unwrap_or(8);
                fsdp.gate = self.fsdp_gate.gate();
                fsdp.order = self.ring_order.into();
                Workload::Fsdp { fsdp }
            }
            WorkloadKind::RingAllreduce
            | WorkloadKind::RingAllgather
            | WorkloadKind::RingReducescatter => Workload::Collective {
                collective: Collective {
                    kind: match self.workload {
                        WorkloadKind::RingAllreduce => CollectiveKind::AllReduce,
                        WorkloadKind::RingAllgather => CollectiveKind::AllGather,
                        _ => CollectiveKind::ReduceScatter,
                    },
                    gpus_per_server: self.gpus_per_server.unwrap_or(1),
                    order: self.ring_order.into(),
                },
            },
        };
        config.failures = match (self.fail_prob, self.fail_links.is_empty()) {
            (Some(_), false) => bail!("--fail-prob and --fail-links exclude each other"),
            (Some(probability), true) => Failures::Random { probability },
            (None, false) => Failures::Links {
                links: self.fail_links.clone(),
            },
            (None, true) => Failures::None,
        };
        config.degraded = self
            .degrade
            .iter()
            .map(|text| text.parse::<DegradedLink>())
            .collect::<Result<_, _>>()?;
        config.fail_at = self
            .fail_at
            .iter()
            .map(|text| text.parse::<LinkFailure>())
            .collect::<Result<_, _>>()?;
        let picoseconds = |us: f64| (us * 1e6).round() as u64;
        for (flag, value) in [
            ("--detect-us", self.detect_us),
            ("--reroute-delay-us", self.reroute_delay_us),
        ] {
            if value.is_some_and(|us| !(us >= 0.0 && us.is_finite())) {
                bail!("{flag} must be 0 or more µs");
            }
        }
        if let Some(us) = self.detect_us {
            config.failure_timing.detect_ps = picoseconds(us);
        }
        if let Some(us) = self.reroute_delay_us {
            config.failure_timing.reroute_ps = picoseconds(us);
        }
        if let Some(us) = self.arf_window_us {
            config.arf.window_ps = picoseconds(us);
        }
        if let Some(us) = self.arf_delay_us {
            config.arf.delay_ps = picoseconds(us);
        }
        if let Some(windows) = self.arf_refresh_windows {
            config.arf.refresh_windows = windows;
        }
        if let Some(combine) = self.arf_combine {
            config.arf.combine = combine;
        }
        config.validate()?;
        Ok(config)
    }

    fn link_params(&self) -> anyhow::Result<ofan_topology::LinkParams> {
        Ok(ofan_topology::LinkParams {
            rate_bps: self
                .rate_gbps
                .checked_mul(1_000_000_000)
                .context("--rate-gbps is too large")?,
            propagation_ps: self.latency_ns.saturating_mul(1000),
            payload_bytes: u32::try_from(self.payload).context("--payload must fit in 32 bits")?,
            header_bytes: self.header,
            ack_bytes: self.ack,
            gap_bytes: self.gap,
        })
    }

    /// The dragonfly run these options describe (seed left at 1); refuses the options a
    /// dragonfly run does not model.
    fn dragonfly(&self) -> anyhow::Result<DragonflyConfig> {
        let unsupported = [
            ("--fail-prob", self.fail_prob.is_some()),
            ("--fail-links", !self.fail_links.is_empty()),
            ("--degrade", !self.degrade.is_empty()),
            ("--fail-at", !self.fail_at.is_empty()),
            ("--cc", self.cc != "none"),
            ("--matrix", self.matrix.is_some()),
            ("--scheme-map", self.scheme_map.is_some()),
            ("--mix", self.mix.is_some()),
            // Its queues are unlimited: the report's max queues are what a buffer would hold.
            ("--buffer", self.buffer != 800_000),
            ("--ecn", self.ecn.is_some()),
            ("--ecn-at", matches!(self.ecn_at, EcnAtArg::Dequeue)),
            ("--ack-every", self.ack_every != 1),
            ("--trim", self.trim),
            ("--receiver-credit", self.receiver_credit),
        ];
        if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
            bail!("{flag} is not modelled on a dragonfly (unlimited router queues, hosts at line rate, no failures)");
        }
        let p = self.p.unwrap_or(2);
        let shape = DragonflyShape::new(
            p,
            self.a.unwrap_or(p.saturating_mul(2)),
            self.h.unwrap_or(p),
        )?;
        let workload = match self.workload {
            WorkloadKind::Uniform => DragonflyWorkload::Uniform,
            WorkloadKind::Permutation => DragonflyWorkload::Permutation,
            WorkloadKind::Adversarial => DragonflyWorkload::Adversarial,
            other => bail!(
                "--workload {} is a fat-tree pattern; a dragonfly runs uniform, permutation or adversarial",
                other.to_possible_value().expect("no skipped variants").get_name()
            ),
        };
        let scheme: DragonflyScheme = self
            .scheme
            .as_deref()
            .unwrap_or("min")
            .parse()
            .context("--scheme")?;
        let picoseconds = |us: f64| (us * 1e6).round() as u64;
        let config = DragonflyConfig {
            shape,
            link: self.link_params()?,
            scheme,
            workload,
            message_bytes: self.size,
            arf_window_ps: self
                .arf_window_us
                .map_or(DRAGONFLY_ARF_WINDOW_PS, picoseconds),
            arf_delay_ps: self
                .arf_delay_us
                .map_or(DRAGONFLY_ARF_DELAY_PS, picoseconds),
            seed: 1,
        };
        config.validate()?;
        Ok(config)
    }

    fn threads(&self) -> usize {
        self.threads.unwrap_or_else(default_threads)
    }
}
