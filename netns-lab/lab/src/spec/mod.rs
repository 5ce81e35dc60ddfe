//! What a lab is built from: [`LabSpec`], typed and validated once — by the command line, the
//! experiments, the demo and tests alike.

use std::path::PathBuf;

use anyhow::bail;
use ofan_dataplane::afxdp::FastPathMode;
use ofan_dataplane::arf::Combine;
use ofan_dataplane::lb::dragonfly::DragonflyScheme;
use ofan_dataplane::lb::Algorithm;
use ofan_topology::plan::AsnPlan;
use ofan_topology::units::{format_rate, format_size};
use ofan_topology::{Topology, TopologyKind};

use super::plan;
use super::state::Params;

mod options;

pub use options::{
    Bfd, BgpDaemon, EcnThreshold, HostLinks, Routing, Shaping, Switches, TopologySource,
    DEFAULT_DRAGONFLY,
};

/// The default emulated link rate of a lab of up to [`DEFAULT_RATE_HOSTS`] hosts, bits per
/// second: with a margin of 2.5, the largest rate at which a k=4 lab on a quiet 2-core machine
/// (switches in a group, links spliced, pool threads sending due departures first) stayed
/// faithful under a full-load permutation in every run with its CCT within a point of the
/// lowest rate's — 20 Mbit/s, `bench lab` 5/5 at 1 MB (+1.7 % against +1.0 at 1 Mbit/s) and
/// 3/3 at 4 MB (+1.4 against +0.6 at 4 Mbit/s) on 2026-12-04; the default itself 40/40 that
/// night (CCT median +1.12 %). It was 4 Mbit/s from 2026-12-03 (10 Mbit/s, divided by the same
/// margin; see docs/lab.md). Larger labs get less: [`default_link_rate_bps`].
pub const DEFAULT_LINK_RATE_BPS: u64 = 8_000_000;
/// The hosts of the lab [`DEFAULT_LINK_RATE_BPS`] was measured on (k = 4).
pub const DEFAULT_RATE_HOSTS: usize = 16;

/// The default link rate of a lab with `hosts` hosts, bits per second: [`DEFAULT_LINK_RATE_BPS`]
/// up to [`DEFAULT_RATE_HOSTS`] hosts; beyond, the same traffic in total — the rate scaled down
/// by the hosts, rounded down to 10 kbit/s — because what a lab costs is the frames its hosts
/// send and its switches forward, and two cores forward about as many for k = 8 as for k = 4
/// (`bench lab`: 19.5 µs of CPU per forwarded frame at k = 8 and 1 Mbit/s, 15.5–20.7 at k = 4
/// and 5–10 Mbit/s, about as many frames a second). k = 8 (128 hosts):
/// 1 Mbit/s, a fifth of 5 Mbit/s, which was faithful in all 33 runs of k = 8 on 2026-12-04
/// (`bench lab --k 8` 3/3 with the CCT kept, and 30 on labs of their own; 8 Mbit/s 2/3).
#[must_use]
pub fn default_link_rate_bps(hosts: usize) -> u64 {
    if hosts <= DEFAULT_RATE_HOSTS {
        return DEFAULT_LINK_RATE_BPS;
    }
    let scaled = DEFAULT_LINK_RATE_BPS * DEFAULT_RATE_HOSTS as u64 / hosts as u64;
    (scaled / 10_000 * 10_000).max(10_000)
}
/// Default SCHED_FIFO priority of the switches' workers (below the experiments' agents, whose
/// departures must be exact; above everything else on the machine).
pub const DEFAULT_SWITCH_RT_PRIORITY: u8 = 20;
/// Egress buffer per port of labs built for experiments (and the demo), bytes: large enough
/// that no algorithm drops a 1 MB permutation on k=4, so that queues show their growth (with
/// smaller buffers the agents recover every drop, and the drops cost time).
pub const EXPERIMENT_BUFFER_BYTES: u64 = 2 << 20;
/// Default egress buffer per port, bytes.
pub const DEFAULT_BUFFER_BYTES: u64 = 64 << 10;
/// The MTUs a lab accepts: up to jumbo Ethernet's 9216. The switches' UMEM frames follow the
/// MTU (2048 bytes up to MTU 1778, 4096 above, and from MTU 3827 a packet spans up to three of
/// them: multi-buffer AF_XDP; see `ofan_dataplane::afxdp::FrameSize`); above 3506 their
/// steering program is the multi-buffer one, the only kind veth takes at such MTUs.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=9216;

/// Whether a lab can have links of this MTU ([`MTU_RANGE`]); the error says why not.
///
/// # Errors
/// `--mtu` outside the range.
pub fn check_mtu(mtu: u32) -> anyhow::Result<()> {
    if !MTU_RANGE.contains(&mtu) {
        bail!(
            "--mtu {mtu}: must be in {}..={} (IPv4's minimum to jumbo Ethernet's largest)",
            MTU_RANGE.start(),
            MTU_RANGE.end(),
        );
    }
    Ok(())
}

/// Whether a multi-plane fabric can be built with this routing and these host links; the
/// error says why not. Each plane is an ordinary fabric of ordinary switches; what is
/// particular is the hosts, which have one veth per plane (see [`super::plan::host_routes`]).
///
/// # Errors
/// `--routing bgp` (not built: the hosts' per-plane routes are the lab's, BGP would have to
/// carry each plane's prefixes to its own hosts' NICs) and `--host-links shared` (an agent
/// has one shared-memory link, to one edge switch).
pub fn check_multi_plane(routing: Routing, host_links: HostLinks) -> anyhow::Result<()> {
    if routing == Routing::Bgp {
        bail!(
            "--routing bgp on a multi-plane lab: not built (the planes' routes are the lab's \
             static plan); use --routing static"
        );
    }
    if host_links == HostLinks::Shared {
        bail!(
            "--host-links shared on a multi-plane lab: an agent has one shared-memory link, to \
             one edge switch; a multi-plane host sends through its P veths (--host-links veth)"
        );
    }
    Ok(())
}

/// Fill/completion/RX/TX ring size of a lab's switches (`ofan-switch --ring-size`; a real box's
/// default is 2048). A lab link carries a frame every 0.6 ms or more (1500 bytes at 20 Mbit/s),
/// so 256 frames ride out a stall of 150 ms.
pub const SWITCH_RING_SIZE: u32 = 256;

/// UMEM frames per port of a lab's switches (`ofan-switch --frames-per-port`) with links of
/// `mtu` bytes and egress buffers of `buffer_bytes`: twice the ring (the fill ring, and what
/// transmission holds: the switch's minimum) plus a full egress queue of data packets with an
/// ACK after each, every data packet in as many UMEM frames as it spans; at most the switch's
/// default of four rings. Every frame is memory the switch zeroes at start and pins, and the
/// kernel keeps a descriptor per frame of the switch's shared UMEM *for each socket* bound to
/// it (`xp_create_and_assign_umem`): at k = 8 the default of four rings made `up` spend most of
/// its time zeroing pages (`perf`: 57 % in `clear_page_erms`, 1.9 GB handed back to the host at
/// `down`). With 1500-byte MTU and 64 KB buffers this is 600 frames instead of 1024. Pure.
#[must_use]
pub fn switch_frames_per_port(mtu: u32, buffer_bytes: u64) -> u32 {
    use ofan_dataplane::afxdp::FrameSize;
    let frames_per_packet = FrameSize::Auto
        .resolve([("lab", mtu)])
        .map_or(ofan_dataplane::afxdp::MAX_FRAMES_PER_PACKET, |layout| {
            layout.frames_per_packet
        });
    let packets = buffer_bytes.div_ceil(u64::from(mtu) + 14);
    let queue = packets.saturating_mul(u64::from(frames_per_packet) + 1);
    let most = 4 * SWITCH_RING_SIZE;
    u32::try_from(queue).map_or(most, |queue| {
        (2 * SWITCH_RING_SIZE).saturating_add(queue).min(most)
    })
}

/// SCHED_FIFO priority of a group's shared worker threads. The order while a lab runs:
/// `ksoftirqd` 45 ([`super::softirq`]: the kernel's network processing, on which every frame
/// depends) > host agents 42 (`experiment::AGENT_RT_PRIORITY`: the hosts' NICs, whose
/// departures must be on time) > the pool 40 > a switch process's own workers 20. With the
/// agents at 30, below the pool, they were late by up to 1.1 ms p99 at 5 Mbit/s; with
/// `ksoftirqd` an ordinary task below them all, frames were dropped in bursts.
pub const GROUP_RT_PRIORITY: u8 = 40;

/// How long a group keeps the CPUs awake after the last frame moved (`ofan-switch group
/// --keep-awake-us`; `ofan-switch`'s `group::awake::KeepAwake` explains why a VM needs it): longer
/// than the gaps between frames while a lab carries traffic at 1 Mbit/s per link or more (a
/// pool thread of a k = 4 lab at 1 Mbit/s moves one every ≈ 0.17 ms, estimated from the
/// traffic: 16 hosts × 166 DATA and ACK frames/s × ≈ 4.5 hops over 2 threads), short enough
/// that an idle lab's CPUs sleep. Measured (k = 4 permutation at load 1, 3 runs per rate):
/// faithful 3/3 at 1, 2 and 5 Mbit/s (without: 1/3, 0/3, 1/3 in the same session).
pub const GROUP_KEEP_AWAKE_US: u64 = 2_000;

/// How long a group's real-time pool thread that ran 1 ms without sleeping rests, so that the
/// machine's ordinary tasks run in short slices and not in the kernel's fair-server blocks
/// (`ofan-switch group --fair-share-us`; `dataplane::afxdp::pool::FairShare` explains), µs; a
/// rest never exceeds a twentieth of a frame time at the lab's fastest link. Measured on
/// 2026-12-04 (alternating labs with and without, 1 MB permutations at load 1): k = 8 at
/// 5 Mbit/s faithful in 25 of 30 runs against 13 of 30 (CCT median +2.55 % against +2.87, the
/// slowest agent behind its schedule by at most 6.6 ms against 16.8); k = 4 at 8 Mbit/s 17/18 against 18/18; k = 4 at 20 Mbit/s
/// (4 MB) 6/6 against 6/6.
pub const GROUP_FAIR_SHARE_US: u64 = 75;

/// The largest MTU a shared host link carries: a packet in one 4096-byte UMEM frame (above
/// it the switches take several frames per packet, `docs/switch.md`, jumbo frames).
pub const MAX_HOST_LINK_MTU: u32 = 3506;

/// Everything `up` needs, in units: what a lab is.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    /// Lab name (1 to 16 lowercase letters and digits); namespaces are `ofan-<name>-<node>`.
    pub name: String,
    /// The topology.
    pub topology: TopologySource,
    /// Load-balancing algorithm of every switch (but those of `lb_map`).
    pub algorithm: Algorithm,
    /// Switches that run another algorithm ([`super::lb_map`]).
    pub lb_map: super::lb_map::LbMap,
    /// On a dragonfly: every router's routing scheme (`ofan-switch --dragonfly`); `algorithm`
    /// is then ECMP (the minimal routes have one hop each).
    pub dragonfly: Option<DragonflyScheme>,
    /// Ports per pipe (one worker thread each); `None`: all ports in one pipe.
    pub pipe_size: Option<u16>,
    /// Emulated rate of every link, bits per second (0 = unshaped).
    pub link_rate_bps: u64,
    /// Egress buffer of every switch port, bytes.
    pub buffer_bytes: u64,
    /// MTU of every link ([`MTU_RANGE`]).
    pub mtu: u32,
    /// The lab's seed; every switch derives its own from it and its node name.
    pub seed: u64,
    /// SCHED_FIFO priority of the switches' workers (1..=99; 0 = ordinary scheduling).
    pub rt_priority: u8,
    /// How shapers treat late departures.
    pub shaping: Shaping,
    /// Route source.
    pub routing: Routing,
    /// The routing daemon under [`Routing::Bgp`].
    pub bgp_daemon: BgpDaemon,
    /// BFD on every BGP session (only under [`Routing::Bgp`]); `None`: failures are detected
    /// by carrier loss or the BGP hold time.
    pub bfd: Option<Bfd>,
    /// How the BGP fabric numbers its ASNs (only under [`Routing::Bgp`]: unique otherwise).
    pub asn_plan: AsnPlan,
    /// The `ofan-switch` binary (`None`: `$OFAN_SWITCH`, next to `ofan-lab`, or on `PATH`).
    pub switch_bin: Option<PathBuf>,
    /// One process for all switches, or one each.
    pub switches: Switches,
    /// In a group, carry frames between switches in the process instead of over the veths
    /// (`ofan-switch group --splice`): the kernel's cost per hop gone. Ignored for processes.
    pub splice: bool,
    /// What carries the agents' frames between the hosts and their edge switches.
    pub host_links: HostLinks,
    /// The switches' log filter (`ofan-switch --log`, tracing's `EnvFilter` syntax); `None`:
    /// theirs (`info`).
    pub switch_log: Option<String>,
    /// Whether the switches forward in their XDP programs too (`ofan-switch --fast-path xdp`):
    /// an unshaped fabric over its veths (no link emulation, no splices, host links on veths).
    pub fast_path: FastPathMode,
    /// Whether the lab may change machine-wide settings for its fidelity (`up --tune-machine`,
    /// [`super::machine`]): off, it changes none.
    pub tune_machine: bool,
    /// Queue depth above which the switches mark ECN-capable frames CE (the signal of the
    /// hosts' congestion control).
    pub ecn_threshold: EcnThreshold,
    /// How the `arf-*` switches combine a path's local and remote levels
    /// (`ofan-switch --arf-combine`).
    pub arf_combine: Combine,
}

impl LabSpec {
    /// Lab `name` with every default: a k=4 fat tree of pofan switches at
    /// [`DEFAULT_LINK_RATE_BPS`], [`DEFAULT_BUFFER_BYTES`] per port, MTU 1500, seed 1,
    /// catch-up shapers, static routes, one group, spliced links, shared host links.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            topology: TopologySource::Kind(TopologyKind::FatTree { k: 4 }),
            algorithm: Algorithm::Pofan,
            lb_map: super::lb_map::LbMap::new(),
            dragonfly: None,
            pipe_size: None,
            link_rate_bps: DEFAULT_LINK_RATE_BPS,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            mtu: 1500,
            seed: 1,
            rt_priority: DEFAULT_SWITCH_RT_PRIORITY,
            shaping: Shaping::CatchUp,
            routing: Routing::Static,
            bgp_daemon: BgpDaemon::Frr,
            bfd: None,
            asn_plan: AsnPlan::Unique,
            switch_bin: None,
            switches: Switches::Group,
            splice: true,
            host_links: HostLinks::for_lab(Switches::Group, 1500),
            switch_log: None,
            fast_path: FastPathMode::Off,
            tune_machine: false,
            ecn_threshold: EcnThreshold::Auto,
            arf_combine: Combine::Min,
        }
    }

    /// Checks what the types do not: the name, the MTU, the priority, BFD only with BGP.
    ///
    /// # Errors
    /// The first value out of range, named by its flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        check_name(&self.name)?;
        if self.rt_priority > 99 {
            bail!(
                "--rt-priority {}: SCHED_FIFO priorities are 1..=99 (0 = off)",
                self.rt_priority
            );
        }
        check_mtu(self.mtu)?;
        if let Some(filter) = &self.switch_log {
            tracing_subscriber::EnvFilter::try_new(filter).map_err(|error| {
                anyhow::anyhow!(
                    "--switch-log {filter:?}: {error} (a tracing filter: info, debug, \
                     ofan_dataplane=debug,info …)"
                )
            })?;
        }
        if self.host_links == HostLinks::Shared {
            if self.switches != Switches::Group {
                bail!(
                    "--host-links shared needs --switches group: the agents share memory with \
                     the group's process"
                );
            }
            if self.mtu > MAX_HOST_LINK_MTU {
                bail!(
                    "--host-links shared carries packets of one UMEM frame: --mtu {} is above \
                     {MAX_HOST_LINK_MTU}",
                    self.mtu
                );
            }
        }
        if self.fast_path == FastPathMode::Xdp {
            if self.link_rate_bps != 0 {
                bail!(
                    "--fast-path xdp forwards in the switches' XDP programs, which have no \
                     shaper: use --link-rate 0 (the veths' own rate), or --fast-path off to \
                     emulate links"
                );
            }
            if self.splice && self.switches == Switches::Group {
                bail!(
                    "--fast-path xdp forwards over the veths between the switches: use --splice false"
                );
            }
            if self.host_links == HostLinks::Shared {
                bail!("--fast-path xdp forwards over the hosts' veths: use --host-links veth");
            }
            for algorithm in std::iter::once(&self.algorithm).chain(self.lb_map.values()) {
                if let Err(reason) = ofan_dataplane::afxdp::fast::supported(*algorithm) {
                    bail!("--fast-path xdp with {}: {reason}", algorithm.name());
                }
            }
        }
        if self.algorithm.uses_path_quality() && !self.lb_map.is_empty() {
            bail!(
                "--lb-map with --lb {}: the adaptive-routing framework's switches exchange \
                 notifications, so it runs on every switch or none",
                self.algorithm.name()
            );
        }
        if self.dragonfly.is_some() && !self.lb_map.is_empty() {
            bail!("--lb-map on a dragonfly lab: its routers run one routing scheme (--lb)");
        }
        if let Some(scheme) = self.dragonfly {
            if matches!(scheme, DragonflyScheme::UgalG | DragonflyScheme::ArfUgal) {
                bail!(
                    "--lb {scheme} on a dragonfly lab: {}",
                    match scheme {
                        DragonflyScheme::UgalG =>
                            "UGAL-G reads every router's queues, which no switch can; it is the \
                             model's upper reference (ofan-lab model run --topology dragonfly)",
                        _ =>
                            "the switches do not yet send the framework's notifications of \
                              their global links' queues to their group; the model runs it",
                    }
                );
            }
            if self.routing == Routing::Bgp {
                bail!(
                    "--routing bgp on a dragonfly lab: not built — BGP would carry the minimal \
                     routes (one per group prefix); use --routing static (docs/dragonfly.md)"
                );
            }
            if self.fast_path == FastPathMode::Xdp {
                bail!(
                    "--fast-path xdp on a dragonfly lab: the XDP program does not run the \
                     dragonfly routing stage; use --fast-path off"
                );
            }
        }
        if self.asn_plan != AsnPlan::Unique {
            if self.dragonfly.is_some() {
                bail!(
                    "--asn-plan {} on a dragonfly lab: a dragonfly has no tiers to share an ASN \
                     (and no BGP)",
                    self.asn_plan
                );
            }
            if self.routing != Routing::Bgp {
                bail!(
                    "--asn-plan {} needs --routing bgp (ASNs number BGP speakers; --routing {} \
                     has none)",
                    self.asn_plan,
                    self.routing.name()
                );
            }
        }
        if self.topology.is_multi_plane() {
            check_multi_plane(self.routing, self.host_links)?;
        }
        if self.bfd.is_some() && self.routing != Routing::Bgp {
            bail!(
                "--bfd needs --routing bgp (BFD runs in the BGP daemons; --routing {} has none)",
                self.routing.name()
            );
        }
        Ok(())
    }

    /// What `state.json` records of this spec for `topology`.
    pub(crate) fn params(&self, topology: &Topology, switch_bin: PathBuf) -> Params {
        Params {
            topo: match topology.kind() {
                TopologyKind::FatTree { k } => format!("fat-tree k={k}"),
                TopologyKind::LeafSpine { k } => format!("leaf-spine k={k}"),
                TopologyKind::Dragonfly { p, a, h } => format!("dragonfly p={p} a={a} h={h}"),
                // One plane is its plane.
                TopologyKind::MultiPlane { planes, .. } => {
                    let plane = match topology.kind().plane_kind() {
                        TopologyKind::LeafSpine { k } => format!("leaf-spine k={k}"),
                        _ => format!("fat-tree k={}", topology.k()),
                    };
                    if planes > 1 {
                        format!("multi-plane {planes} × {plane}")
                    } else {
                        plane
                    }
                }
            },
            lb: match self.dragonfly {
                Some(scheme) => scheme.name().to_owned(),
                None => self.algorithm.name().to_owned(),
            },
            lb_map: self
                .lb_map
                .iter()
                .map(|(switch, algorithm)| (switch.clone(), algorithm.name().to_owned()))
                .collect(),
            dragonfly: self.dragonfly.is_some(),
            pipe_size: self.pipe_size.unwrap_or(topology.k()),
            link_rate: if self.link_rate_bps == 0 {
                "0".to_owned()
            } else {
                format_rate(self.link_rate_bps)
            },
            link_rate_bps: self.link_rate_bps,
            buffer: format_size(self.buffer_bytes),
            mtu: self.mtu,
            seed: self.seed,
            rt_priority: self.rt_priority,
            catch_up: self.shaping.catches_up(),
            routing: self.routing.name().to_owned(),
            bgp_daemon: (self.routing == Routing::Bgp).then(|| self.bgp_daemon.name().to_owned()),
            bfd: self.bfd.filter(|_| self.routing == Routing::Bgp),
            asn_plan: (self.routing == Routing::Bgp).then_some(self.asn_plan),
            switch_bin,
            switches: self.switches,
            splice: self.splice && self.switches == Switches::Group,
            host_links: self.host_links,
            switch_log: self.switch_log.clone(),
            fast_path: self.fast_path,
            tune_machine: self.tune_machine,
            ecn_threshold: self
                .ecn_threshold
                .for_buffer(self.buffer_bytes)
                .map(format_size),
            arf_combine: self.arf_combine,
        }
    }
}

/// Checks a lab name.
///
/// # Errors
/// Anything but 1 to 16 lowercase letters and digits.
pub fn check_name(name: &str) -> anyhow::Result<()> {
    if !plan::valid_lab_name(name) {
        bail!("lab name `{name}`: use 1 to 16 lowercase letters and digits");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fast_path_lab_is_unshaped_over_veths_with_an_algorithm_the_program_runs() {
        let fast = LabSpec {
            link_rate_bps: 0,
            splice: false,
            host_links: HostLinks::Veth,
            fast_path: FastPathMode::Xdp,
            ..LabSpec::new("fp")
        };
        fast.validate().unwrap();
        for (spec, says) in [
            (
                LabSpec {
                    link_rate_bps: 8_000_000,
                    ..fast.clone()
                },
                "no shaper",
            ),
            (
                LabSpec {
                    splice: true,
                    ..fast.clone()
                },
                "--splice false",
            ),
            (
                LabSpec {
                    host_links: HostLinks::Shared,
                    ..fast.clone()
                },
                "--host-links veth",
            ),
            (
                LabSpec {
                    algorithm: Algorithm::Jsq,
                    ..fast.clone()
                },
                "pofan",
            ),
        ] {
            let error = spec.validate().unwrap_err().to_string();
            assert!(error.contains(says), "{error}");
        }
    }

    #[test]
    fn a_lab_switch_holds_its_rings_and_a_full_queue_in_its_umem_at_most_four_rings() {
        // 1500 bytes, 64 KB: 44 packets and an ACK after each, beside two rings.
        assert_eq!(switch_frames_per_port(1500, 64 << 10), 512 + 88);
        // A jumbo packet spans three 4 KB frames: 8 packets of 64 KB, four frames each.
        assert_eq!(switch_frames_per_port(9000, 64 << 10), 512 + 32);
        // Large buffers: never more than the switch's own default of four rings.
        assert_eq!(switch_frames_per_port(9000, 2 << 20), 4 * SWITCH_RING_SIZE);
        assert_eq!(switch_frames_per_port(1500, u64::MAX), 4 * SWITCH_RING_SIZE);
        // No buffer at all: the switch's minimum, twice the ring.
        assert_eq!(switch_frames_per_port(1500, 0), 2 * SWITCH_RING_SIZE);
    }

    #[test]
    fn a_lab_shares_host_links_by_default_only_where_a_spec_may() {
        for (switches, mtu, expected) in [
            (Switches::Group, 1500, HostLinks::Shared),
            (Switches::Group, 3506, HostLinks::Shared),
            (Switches::Group, 3507, HostLinks::Veth),
            (Switches::Group, 9000, HostLinks::Veth),
            (Switches::Process, 1500, HostLinks::Veth),
        ] {
            let host_links = HostLinks::for_lab(switches, mtu);
            assert_eq!(host_links, expected, "{switches:?} at MTU {mtu}");
            // The default is one the lab accepts.
            let spec = LabSpec {
                switches,
                mtu,
                host_links,
                ..LabSpec::new("lab")
            };
            assert!(spec.validate().is_ok(), "{switches:?} at MTU {mtu}");
        }
        assert_eq!(LabSpec::new("lab").host_links, HostLinks::Shared);
    }

    /// A multi-plane lab: built with static routes over veths, refused with BGP or shared host
    /// links, and recorded as what it is.
    #[test]
    fn multi_plane_labs_are_static_over_veths() {
        let mut spec = LabSpec::new("lab1");
        spec.topology = TopologySource::Kind(TopologyKind::MultiPlane {
            plane: ofan_topology::PlaneKind::FatTree,
            planes: 2,
            k: 4,
        });
        assert!(spec.topology.is_multi_plane());
        spec.host_links = HostLinks::Veth;
        assert!(spec.validate().is_ok());
        let topology = spec.topology.load().unwrap();
        assert_eq!(topology.planes(), 2);
        let params = spec.params(&topology, PathBuf::from("ofan-switch"));
        assert_eq!(params.topo, "multi-plane 2 × fat-tree k=4");
        spec.host_links = HostLinks::Shared;
        let error = spec.validate().unwrap_err().to_string();
        assert!(error.contains("--host-links shared"), "{error}");
        spec.host_links = HostLinks::Veth;
        spec.routing = Routing::Bgp;
        let error = spec.validate().unwrap_err().to_string();
        assert!(error.contains("--routing bgp"), "{error}");
        // One plane is an ordinary lab.
        assert!(!TopologySource::parse("fat-tree", 4).is_multi_plane());
    }

    #[test]
    fn topology_sources_and_validation() {
        assert_eq!(
            TopologySource::parse("fat-tree", 6),
            TopologySource::Kind(TopologyKind::FatTree { k: 6 })
        );
        assert_eq!(
            TopologySource::parse("leafspine", 4),
            TopologySource::Kind(TopologyKind::LeafSpine { k: 4 })
        );
        assert_eq!(
            TopologySource::parse("my.json", 4),
            TopologySource::File("my.json".into())
        );
        assert!(TopologySource::parse("fat-tree", 5).load().is_err());
        assert!(TopologySource::parse("/nonexistent.json", 4)
            .load()
            .is_err());

        let mut spec = LabSpec::new("lab1");
        assert!(spec.validate().is_ok());
        spec.mtu = 9216;
        // Shared host links carry one UMEM frame per packet; the veths take any MTU.
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--mtu 9216"));
        spec.host_links = HostLinks::Veth;
        assert!(spec.validate().is_ok());
        spec.mtu = 9217;
        assert!(spec
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--mtu 9217"));
        spec.mtu = 67;
        assert!(spec.validate().is_err());
        spec.mtu = 1500;
        spec.rt_priority = 100;
        assert!(spec.validate().is_err());
        spec.rt_priority = 0;
        spec.name = "Lab_1".to_owned();
        assert!(spec.validate().is_err());
    }

    #[test]
    fn bfd_needs_bgp_and_is_recorded() {
        let mut spec = LabSpec::new("lab");
        spec.bfd = Some(Bfd::FAST);
        let error = spec.validate().unwrap_err().to_string();
        assert!(error.contains("--bfd needs --routing bgp"), "{error}");
        spec.routing = Routing::Bgp;
        assert!(spec.validate().is_ok());
        let topology = spec.topology.load().unwrap();
        let params = spec.params(&topology, PathBuf::from("/bin/ofan-switch"));
        assert_eq!(params.bfd, Some(Bfd::FAST));
        assert_eq!(Bfd::FAST.to_string(), "bfd 100 ms x 3");
        assert_eq!(Bfd::FAST.detection_time().as_millis(), 300);
        // state.json keeps it as plain numbers; labs from before BFD load without it.
        let json = serde_json::to_value(&params).unwrap();
        assert_eq!(
            json["bfd"],
            serde_json::json!({"interval_ms": 100, "multiplier": 3})
        );
        let mut old = json.clone();
        old.as_object_mut().unwrap().remove("bfd");
        let old: Params = serde_json::from_value(old).unwrap();
        assert_eq!(old.bfd, None);
    }

    #[test]
    fn the_ecn_threshold_is_a_tenth_of_the_buffer_unless_given_and_reaches_the_switches() {
        let topology = Topology::new(TopologyKind::FatTree { k: 4 }).unwrap();
        let bin = || PathBuf::from("/bin/ofan-switch");
        let mut spec = LabSpec::new("lab");
        spec.buffer_bytes = 2 << 20;
        let params = spec.params(&topology, bin());
        let auto = params.ecn_threshold.clone().expect("marking by default");
        assert_eq!(
            ofan_topology::units::parse_size(&auto).unwrap(),
            (2 << 20) / 10
        );
        spec.ecn_threshold = "16KB".parse().unwrap();
        assert_eq!(
            spec.params(&topology, bin()).ecn_threshold.as_deref(),
            Some("16KB")
        );
        spec.ecn_threshold = "off".parse().unwrap();
        assert_eq!(spec.params(&topology, bin()).ecn_threshold, None);
        let error = "lots".parse::<EcnThreshold>().unwrap_err();
        assert!(error.contains("neither auto, off nor a size"), "{error}");
        // Labs recorded before ECN marking load without it: no marking.
        let mut json = serde_json::to_value(&params).unwrap();
        json.as_object_mut().unwrap().remove("ecn_threshold");
        let old: Params = serde_json::from_value(json).unwrap();
        assert_eq!(old.ecn_threshold, None);
    }

    #[test]
    fn a_switch_log_filter_is_checked_and_recorded() {
        let mut spec = LabSpec::new("lab");
        spec.switch_log = Some("ofan_dataplane=debug,info".into());
        assert!(spec.validate().is_ok());
        let topology = spec.topology.load().unwrap();
        let params = spec.params(&topology, PathBuf::from("/bin/ofan-switch"));
        assert_eq!(
            params.switch_log.as_deref(),
            Some("ofan_dataplane=debug,info")
        );
        // Labs from before the flag load without it and write nothing for it.
        let mut json = serde_json::to_value(&params).unwrap();
        json.as_object_mut().unwrap().remove("switch_log");
        let old: Params = serde_json::from_value(json).unwrap();
        assert_eq!(old.switch_log, None);
        assert!(serde_json::to_value(&old)
            .unwrap()
            .get("switch_log")
            .is_none());

        spec.switch_log = Some("ofan_dataplane=lots".into());
        let error = spec.validate().unwrap_err().to_string();
        assert!(
            error.starts_with("--switch-log \"ofan_dataplane=lots\""),
            "{error}"
        );
    }

    #[test]
    fn params_record_the_spec_as_status_shows_it() {
        let spec = LabSpec::new("lab");
        let topology = spec.topology.load().unwrap();
        let params = spec.params(&topology, PathBuf::from("/bin/ofan-switch"));
        assert_eq!(params.topo, "fat-tree k=4");
        assert_eq!(params.lb, "pofan");
        assert_eq!(params.link_rate, "8mbit");
        assert!(params.splice, "a group splices its links by default");
        assert_eq!(params.buffer, "64KB");
        assert_eq!(params.routing, "static");
        assert!(params.catch_up);
        assert_eq!(params.pipe_size, 4);
    }

    #[test]
    fn larger_labs_default_to_the_same_traffic_in_total() {
        let rate = |k| {
            TopologySource::Kind(TopologyKind::FatTree { k })
                .default_link_rate_bps()
                .unwrap()
        };
        // Up to k = 4: the measured default; k = 6 (54 hosts) and 8 (128): 128 Mbit/s shared.
        assert_eq!(default_link_rate_bps(2), DEFAULT_LINK_RATE_BPS);
        assert_eq!(rate(4), 8_000_000);
        assert_eq!(rate(6), 2_370_000);
        assert_eq!(rate(8), 1_000_000);
        // Never below 10 kbit/s, however large.
        assert_eq!(default_link_rate_bps(1_000_000), 10_000);
    }
}
