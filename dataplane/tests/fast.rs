//! Root differential tests of the XDP fast path (`ofan_fast`): random frames through the
//! program in the kernel (`BPF_PROG_RUN`, with the maps the switch fills) and through the AF_XDP
//! path's pure code (`forward::Forwarder` with `lb`), compared frame by frame — the egress port
//! and every byte of the rewritten frame for what the program forwards, and for what it leaves to
//! the AF_XDP path, that the reason is one it may leave (IPv6 and tagged frames, destinations
//! without a key) or a frame the AF_XDP path does not forward either.
//!
//! The program runs on CPU 0 (the thread is pinned), whose pOfan pointers are pipe 0's: the
//! model is pipe 0's forwarder, fed exactly the frames the program forwarded, so the two walk
//! their pointers in step. A wrong pointer update in the program shows at the first northbound
//! frame after it.
//!
//! Run as root: `cargo test -p ofan-dataplane --features afxdp --test fast`. A root suite
//! (`harness = false`): without root its tests are reported ignored, under `CI=true` they fail.
//! Each test builds a namespace `ofan-t-<pid>-fast-<n>` with five veth pairs, deleted on drop.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use ofan_dataplane::afxdp::fast::{FastCounters, FastPath};
use ofan_dataplane::afxdp::pin_to_cpu;
use ofan_dataplane::afxdp::steer::{StatIndex, Steering, XdpMode};
use ofan_dataplane::afxdp::{enter_network_namespace, ifindex};
use ofan_dataplane::fib::{Fib, IpPrefix, NextHop, Port, PortId, PortRole, RouteTarget};
use ofan_dataplane::forward::{Forwarder, ForwarderConfig, FrameRef, Verdict};
use ofan_dataplane::lb::{mix64, Algorithm, DestKey, LbConfig, SwitchBalancer};

/// XDP actions (`enum xdp_action`).
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

const PORTS: usize = 5;
const UP_PORTS: u8 = 4;
const DEST_KEYS: u32 = 4;
const ACK_MAX_FRAME: u32 = 128;
const MAX_FRAME_LEN: u32 = 1518;
const SEED: u64 = 0x0fa5_7000_0000_0007;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A namespace with veth pairs `p<i>`–`q<i>`, both ends in it, `q<i>` down; deleted on drop.
struct Namespace(String);

impl Namespace {
    fn new() -> Self {
        let name = format!(
            "ofan-t-{}-fast-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run(&["netns", "add", &name]);
        let namespace = Self(name);
        // The peers stay down: no carrier, so no frame of the kernel's own (IPv6 router
        // solicitations, neighbour discovery) ever reaches the program while it is measured.
        for port in 0..PORTS {
            let (p, q) = (format!("p{port}"), format!("q{port}"));
            namespace.ip(&["link", "add", &p, "type", "veth", "peer", "name", &q]);
            namespace.ip(&["link", "set", &p, "up"]);
        }
        namespace
    }

    fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", self.0.as_str()];
        full.extend_from_slice(args);
        run(&full);
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(args: &[&str]) {
    let output = Command::new("ip").args(args).output().expect("ip");
    assert!(
        output.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn mac(last: u8) -> [u8; 6] {
    [2, 0, 0, 0xfa, 0x57, last]
}

fn prefix(text: &str) -> IpPrefix {
    text.parse().expect("prefix")
}

/// The switch of the tests: port 0 to a host, ports 1–4 up; northbound, ECMP, single-hop,
/// unusable, unreachable and local routes; destination keys under some of them.
fn fib(ifindexes: &[u32]) -> Fib {
    let mut builder = Fib::builder();
    for (port, &ifindex) in ifindexes.iter().enumerate() {
        let up = port >= 1;
        builder.port(
            PortId(port as u16),
            Port {
                ifindex,
                mac: mac(port as u8),
                role: if up { PortRole::Up } else { PortRole::Host },
                up_position: up.then(|| port as u8 - 1),
                oper_up: true,
            },
        );
    }
    let hop = |port: u16, last: u8, resolved: bool| NextHop {
        port: PortId(port),
        gateway: IpAddr::V4(Ipv4Addr::new(100, 64, port as u8, last)),
        mac: resolved.then(|| mac(0x80 + last)),
    };
    let all_up = builder.group((1..=4).map(|port| hop(port, port as u8, true)));
    let one_unresolved = builder.group((1..=4).map(|port| hop(port, 10 + port as u8, port != 3)));
    let ecmp = builder.group([hop(0, 20, true), hop(1, 21, true), hop(2, 22, true)]);
    let single = builder.group([hop(0, 30, true)]);
    let none_usable = builder.group((1..=4).map(|port| hop(port, 40 + port as u8, false)));
    for (text, group) in [
        ("10.0.0.0/8", all_up),
        ("10.1.0.0/16", one_unresolved),
        ("10.2.0.0/16", ecmp),
        ("10.3.0.0/24", single),
        ("10.4.0.0/16", none_usable),
        ("10.7.0.0/16", all_up),
    ] {
        builder.route(prefix(text), RouteTarget::Group(group));
    }
    builder.route(prefix("10.5.0.0/16"), RouteTarget::Unreachable);
    builder.route(prefix("10.6.0.0/16"), RouteTarget::Local);
    builder.local_address(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)));
    // Keys: 10.0/16 and 10.0.128/17 (a longer key inside), 10.1/16, 10.4/16; 10.7/16 has none.
    for (text, key) in [
        ("10.0.0.0/16", 0),
        ("10.0.128.0/17", 1),
        ("10.1.0.0/16", 2),
        ("10.4.0.0/16", 3),
        ("10.8.0.0/13", 3),
    ] {
        builder.dest_key(prefix(text), DestKey(key));
    }
    builder.dest_keys(DEST_KEYS);
    builder.build().expect("fib")
}

/// A small deterministic generator for the frames.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A random frame: mostly IPv4 TCP/UDP to the routes above, some to nowhere, some with a TTL
/// the kernel takes, bad checksums, martians, tags, IPv6, and lengths across the ACK limit and
/// past the largest frame.
fn random_frame(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(3) {
        // IPv6 UDP.
        let mut frame = vec![0u8; 78];
        frame[..6].copy_from_slice(&mac(0));
        frame[6..12].copy_from_slice(&mac(0x99));
        frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        frame[14] = 0x60;
        frame[18..20].copy_from_slice(&24u16.to_be_bytes());
        frame[20] = 17;
        frame[21] = 64;
        frame[22] = 0xfd;
        frame[38] = 0xfd;
        frame[53] = 2;
        return frame;
    }
    let len = match rng.below(4) {
        0 => 60 + rng.below(69) as usize,   // ACK class (≤ 128)
        1 => 129 + rng.below(200) as usize, // just above
        2 => 1000 + rng.below(519) as usize,
        _ => 60 + rng.below(1600) as usize, // anything, past 1518 too
    };
    let mut frame = vec![0u8; len.max(60)];
    frame[..6].copy_from_slice(&mac(0));
    frame[6..12].copy_from_slice(&mac(0x99));
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let dst: [u8; 4] = match rng.below(13) {
        0..=3 => [10, 0, rng.below(256) as u8, rng.below(256) as u8],
        12 => [240 + rng.below(16) as u8, 0, 0, 1],
        4 => [10, 1, rng.below(4) as u8, 1],
        5 => [10, 2, rng.below(4) as u8, rng.below(256) as u8],
        6 => [10, 3, 0, rng.below(256) as u8],
        7 => [10, 4 + rng.below(4) as u8, 1, 1],
        8 => [10, 9, 9, 9],
        9 => [10, 8 + rng.below(8) as u8, 0, 1],
        10 => [192, 168, 0, 1],
        _ => [10, rng.below(16) as u8, rng.below(256) as u8, 7],
    };
    let src: [u8; 4] = if rng.chance(3) {
        [127, 0, 0, 1]
    } else {
        [172, 16, rng.below(256) as u8, rng.below(256) as u8]
    };
    let protocol = [6u8, 17, 17, 1][rng.below(4) as usize];
    let total_len = (frame.len() - 14) as u16;
    let ttl = if rng.chance(5) {
        1
    } else {
        2 + rng.below(250) as u8
    };
    let ip = &mut frame[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[8] = ttl;
    ip[9] = protocol;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let checksum = ipv4_checksum(&frame[14..34]);
    frame[24..26].copy_from_slice(&checksum.to_be_bytes());
    if rng.chance(3) {
        frame[25] ^= 0x40; // a bad checksum
    }
    frame[34..36].copy_from_slice(&(1024 + rng.below(8) as u16).to_be_bytes());
    // Some BGP: the kernel's, whatever the route says.
    let dst_port = if rng.chance(4) {
        179
    } else {
        5000 + rng.below(4) as u16
    };
    frame[36..38].copy_from_slice(&dst_port.to_be_bytes());
    if rng.chance(3) {
        // One 802.1Q tag.
        let mut tagged = frame[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&frame[12..]);
        frame = tagged;
    }
    frame
}

/// What one run of the program did with a frame.
#[derive(Debug)]
enum Outcome {
    /// Forwarded out of `port`, as `frame`.
    Forwarded { port: usize, frame: Vec<u8> },
    /// Left to steering, with the reason and steering's verdict.
    Missed(&'static str, StatIndex),
    /// Passed to the kernel (or dropped) before the fast path: steering's decision.
    Steered(&'static str),
}

fn delta(before: &[u64], after: &[u64]) -> Option<usize> {
    let changed: Vec<usize> = before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| b != a)
        .map(|(index, _)| index)
        .collect();
    assert!(
        changed.len() <= 1,
        "more than one counter moved: {changed:?}"
    );
    changed.first().copied()
}

fn run_frame(steering: &mut Steering, fast: &FastPath, ingress: u32, frame: &[u8]) -> Outcome {
    let before: (FastCounters, Vec<u64>) = (
        fast.counters().expect("fast counters"),
        steering_counts(steering),
    );
    let (action, out) = steering.run_once(frame, ingress, 0).expect("BPF_PROG_RUN");
    let after = (
        fast.counters().expect("fast counters"),
        steering_counts(steering),
    );
    let stat = delta(&before.1, &after.1).expect("every frame counts once");
    let stat = StatIndex::ALL[stat];
    if stat == StatIndex::FastForwarded {
        assert_eq!(action, XDP_REDIRECT, "forwarded but action {action}");
        let port = delta(&before.0.tx, &after.0.tx).expect("a port counted");
        return Outcome::Forwarded { port, frame: out };
    }
    let misses = |c: &FastCounters| c.misses.iter().map(|(_, v)| *v).collect::<Vec<_>>();
    match delta(&misses(&before.0), &misses(&after.0)) {
        Some(index) => {
            // Left to steering: the kernel's to the kernel, the rest to the socket of its
            // queue — none here, so the kernel too.
            assert!(stat.name().starts_with("pass_"), "{stat:?}");
            assert_eq!(action, XDP_PASS);
            assert_eq!(out, frame, "a missed frame is left as it came");
            Outcome::Missed(after.0.misses[index].0, stat)
        }
        None => Outcome::Steered(stat.name()),
    }
}

fn steering_counts(steering: &Steering) -> Vec<u64> {
    let counters = steering.counters().expect("steering counters");
    StatIndex::ALL
        .iter()
        .map(|&stat| counters.get(stat))
        .collect()
}

/// Builds the namespace and the switch, and runs `frames` random frames through both paths
/// under `algorithm`. Returns how many the program forwarded.
fn differential(algorithm: Algorithm, frames: usize, seed: u64) -> usize {
    let namespace = Namespace::new();
    let name = namespace.0.clone();
    let forwarded = std::thread::spawn(move || {
        enter_network_namespace(&name).expect("setns");
        pin_to_cpu(0).expect("pin to CPU 0");
        let ifindexes: Vec<u32> = (0..PORTS)
            .map(|port| ifindex(&format!("p{port}")).expect("ifindex"))
            .collect();
        let fib = fib(&ifindexes);
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        let balancer = SwitchBalancer::new(LbConfig {
            algorithm,
            up_ports: UP_PORTS,
            dest_keys: DEST_KEYS,
            pipes: cpus.max(2) as u16,
            buffer_bytes: 1 << 20,
            seed: SEED,
        })
        .expect("balancer");
        let (mut steering, mut fast) = Steering::load_fast(XdpMode::Native).expect("load");
        fast.init(&balancer, ACK_MAX_FRAME, MAX_FRAME_LEN, &ifindexes)
            .expect("init");
        assert!(fast.publish(&fib).expect("publish"), "the table fits");
        for port in 0..PORTS {
            steering
                .attach(&format!("p{port}"), port as u16)
                .expect("attach");
        }
        let config = ForwarderConfig {
            ack_max_frame: ACK_MAX_FRAME,
            max_frame_len: MAX_FRAME_LEN,
        };
        // Pipe 0 is CPU 0's pointers; frames the program leaves go to another pipe's model.
        let mut model = Forwarder::new(balancer.pipe(0).expect("pipe 0"), config);
        let mut rest = Forwarder::new(balancer.pipe(1).expect("pipe 1"), config);
        let mut rng = Rng(seed);
        let mut forwarded = 0;
        let mut misses = std::collections::BTreeMap::<&str, usize>::new();
        for index in 0..frames {
            let frame = random_frame(&mut rng);
            let outcome = run_frame(&mut steering, &fast, ifindexes[0], &frame);
            let decide = |forwarder: &mut Forwarder| {
                let mut data = frame.clone();
                let mut refs = [FrameRef::whole(PortId(0), &mut data)];
                let mut verdicts = [Verdict::Drop(ofan_dataplane::forward::DropReason::ALL[0])];
                forwarder.process_batch(&fib, &mut refs, &mut [], &mut verdicts);
                (verdicts[0], data)
            };
            match outcome {
                Outcome::Forwarded { port, frame: out } => {
                    forwarded += 1;
                    // Never what steering gives the kernel (the AF_XDP path would forward BGP
                    // and 240/4, so check them here).
                    let untagged = frame[12..14] == [0x08, 0x00];
                    assert!(
                        untagged
                            && !(frame[23] == 6 && frame[36..38] == 179u16.to_be_bytes())
                            && frame[30] < 224,
                        "frame {index}: forwarded a frame of the kernel's; headers {:02x?}",
                        &frame[..frame.len().min(42)]
                    );
                    let (verdict, data) = decide(&mut model);
                    assert_eq!(
                        verdict,
                        Verdict::Forward {
                            port: PortId(port as u16)
                        },
                        "frame {index}: the program forwarded out of port {port}, the AF_XDP path \
                         decides {verdict:?}; headers {:02x?}",
                        &frame[..frame.len().min(42)]
                    );
                    assert_eq!(out, data, "frame {index}: rewritten bytes differ");
                }
                Outcome::Missed(reason, stat) => {
                    *misses.entry(reason).or_default() += 1;
                    let (verdict, _) = decide(&mut rest);
                    // What the AF_XDP path would forward the fast path may leave only for a
                    // reason it cannot handle, or to the kernel when steering agrees.
                    let kernels = reason == "for_the_kernel" && stat != StatIndex::PassNoSocket;
                    if let Verdict::Forward { .. } = verdict {
                        assert!(
                            kernels || ["not_ipv4", "no_key"].contains(&reason),
                            "frame {index}: left as `{reason}` ({stat:?}) but the AF_XDP path \
                             forwards it; headers {:02x?}",
                            &frame[..frame.len().min(42)]
                        );
                    }
                }
                Outcome::Steered(stat) => {
                    *misses.entry(stat).or_default() += 1;
                    assert!(
                        stat.starts_with("pass_") && stat != "pass_no_socket",
                        "frame {index}: {stat}"
                    );
                }
            }
        }
        eprintln!(
            "{algorithm}: {forwarded} of {frames} frames forwarded by the program, the rest: {misses:?}"
        );
        drop(steering);
        forwarded
    })
    .join()
    .expect("test thread");
    drop(namespace);
    forwarded
}

fn pofan_decisions_and_bytes_equal_the_afxdp_paths() {
    let frames = 4000;
    let forwarded = differential(Algorithm::Pofan, frames, 1);
    // The test is not vacuous: most frames take the fast path.
    assert!(forwarded > frames / 3, "only {forwarded} forwarded");
}

fn ecmp_decisions_and_bytes_equal_the_afxdp_paths() {
    let frames = 2000;
    let forwarded = differential(Algorithm::Ecmp, frames, 2);
    assert!(forwarded > frames / 3, "only {forwarded} forwarded");
}

ofan_tests::root_tests!(
    pofan_decisions_and_bytes_equal_the_afxdp_paths,
    ecmp_decisions_and_bytes_equal_the_afxdp_paths
);
