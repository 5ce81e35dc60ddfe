//! Root tests of the XDP steering loader on a veth pair between two network namespaces.
//!
//! Run as root: `cargo test -p ofan-dataplane --features afxdp --test steer`.
//!
//! Each test creates its own namespaces `ofan-t-<pid>-<test>-{sw,h}` through [`Lab`], an RAII
//! guard that deletes exactly what it created (also when the test panics), then runs its body in
//! a child process started with `ip netns exec <switch namespace>` (the same test binary,
//! filtered to the same test), so that the loader works inside the namespace without `setns`.
//!
//! A root suite (`harness = false`, `required-features = ["afxdp"]`, see
//! [`ofan_tests::root_tests!`]): without root its tests are reported ignored, and under
//! `CI=true` they fail.

use std::{
    env,
    net::IpAddr,
    os::fd::{AsFd as _, AsRawFd as _},
    process::{Command, Output},
};

use ofan_dataplane::afxdp::{
    redirect::XdpRedirect,
    steer::{StatIndex, SteerError, SteerStats, Steering, XdpMode},
};

const SWITCH_IF: &str = "sw0";
const HOST_IF: &str = "h0";
const SWITCH_V4: &str = "10.99.0.1";
const HOST_V4: &str = "10.99.0.2";
const SWITCH_V6: &str = "fd00:99::1";
const HOST_V6: &str = "fd00:99::2";
/// Set in the child that runs a test's body inside the switch namespace: the host namespace.
const INNER_ENV: &str = "OFAN_STEER_TEST_HOST_NS";

// ------------------------------------------------------------------------------------------------
// Lab: namespaces and a veth pair, deleted on drop.

/// Two namespaces joined by a veth pair: `sw0` (10.99.0.1, fd00:99::1) in the switch namespace,
/// `h0` (10.99.0.2, fd00:99::2) in the host namespace. Drop deletes the namespaces it created
/// (which deletes the veth pair with them) and nothing else.
struct Lab {
    switch_ns: String,
    host_ns: String,
    created: Vec<String>,
}

impl Lab {
    fn new(test: &str) -> Self {
        let prefix = format!("ofan-t-{}-{test}", std::process::id());
        let mut lab = Lab {
            switch_ns: format!("{prefix}-sw"),
            host_ns: format!("{prefix}-h"),
            created: Vec::new(),
        };
        for namespace in [lab.switch_ns.clone(), lab.host_ns.clone()] {
            run("ip", &["netns", "add", &namespace]);
            lab.created.push(namespace);
        }
        let (switch_ns, host_ns) = (lab.switch_ns.as_str(), lab.host_ns.as_str());
        run(
            "ip",
            &[
                "link", "add", SWITCH_IF, "netns", switch_ns, "type", "veth", "peer", "name",
                HOST_IF, "netns", host_ns,
            ],
        );
        for (namespace, interface, v4, v6) in [
            (switch_ns, SWITCH_IF, SWITCH_V4, SWITCH_V6),
            (host_ns, HOST_IF, HOST_V4, HOST_V6),
        ] {
            let v4 = format!("{v4}/24");
            let v6 = format!("{v6}/64");
            in_ns(namespace, &["ip", "addr", "add", &v4, "dev", interface]);
            in_ns(
                namespace,
                &["ip", "-6", "addr", "add", &v6, "dev", interface, "nodad"],
            );
            in_ns(namespace, &["ip", "link", "set", interface, "up"]);
            in_ns(namespace, &["ip", "link", "set", "lo", "up"]);
        }
        lab
    }

    /// Runs the test `test` of this binary inside the switch namespace; panics if it fails.
    fn run_inside(&self, test: &str) {
        let binary = env::current_exe().expect("test binary path");
        let output = Command::new("ip")
            .args(["netns", "exec", &self.switch_ns])
            .arg(binary)
            .args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env(INNER_ENV, &self.host_ns)
            .output()
            .expect("spawn ip netns exec");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "{test} failed inside {}:\n{stdout}\n{stderr}",
            self.switch_ns
        );
        // The body's own output, without the child harness's lines ("running 1 test",
        // "test <name> ... " before the body's first line, "ok", "test result: …"), which
        // would read as extra suites in the parent's output.
        for line in stdout.lines() {
            let line = line
                .strip_prefix("test ")
                .and_then(|rest| rest.strip_prefix(test))
                .map_or(line, |rest| {
                    rest.trim_start().trim_start_matches("...").trim_start()
                });
            let harness = line.is_empty()
                || line == "ok"
                || line.starts_with("running ")
                || line.starts_with("test result: ");
            if !harness {
                eprintln!("{line}");
            }
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for namespace in self.created.drain(..).rev() {
            let deleted = Command::new("ip")
                .args(["netns", "del", &namespace])
                .status();
            if !deleted.is_ok_and(|status| status.success()) {
                eprintln!("warning: could not delete network namespace {namespace}");
            }
        }
    }
}

fn run(program: &str, args: &[&str]) -> Output {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("spawn {program}: {error}"));
    assert!(
        output.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn in_ns(namespace: &str, command: &[&str]) -> Output {
    let mut args = vec!["netns", "exec", namespace];
    args.extend_from_slice(command);
    run("ip", &args)
}

/// In the parent: sets up a lab and re-runs `test` inside it. In the child: runs `body` with the
/// host namespace's name.
fn lab_test(test: &str, body: impl FnOnce(&str)) {
    if let Ok(host_ns) = env::var(INNER_ENV) {
        body(&host_ns);
        return;
    }
    let tag: String = test
        .split('_')
        .filter_map(|word| word.chars().next())
        .collect();
    let lab = Lab::new(&tag);
    lab.run_inside(test);
}

// ------------------------------------------------------------------------------------------------
// Helpers that run inside the switch namespace.

/// Pings `address` from the host namespace; whether every echo got its reply.
fn ping_from_host(host_ns: &str, address: &str, extra: &[&str]) -> bool {
    let mut args = vec![
        "netns", "exec", host_ns, "ping", "-c", "3", "-i", "0.2", "-W", "1",
    ];
    args.extend_from_slice(extra);
    args.push(address);
    Command::new("ip")
        .args(&args)
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The XDP program ids `ip -d link show` reports for `interface` (in this namespace).
fn xdp_ids(interface: &str) -> Vec<u32> {
    let output = run("ip", &["-d", "link", "show", "dev", interface]);
    let text = String::from_utf8_lossy(&output.stdout);
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(3)
        .filter(|w| w[0].starts_with("prog/xdp") && w[1] == "id")
        .filter_map(|w| w[2].parse().ok())
        .collect()
}

fn no_xdp(interface: &str) -> bool {
    let output = run("ip", &["-d", "link", "show", "dev", interface]);
    !String::from_utf8_lossy(&output.stdout).contains("xdp")
}

fn counters(steering: &Steering) -> SteerStats {
    steering.counters().expect("read counters")
}

fn grew(before: &SteerStats, after: &SteerStats, stat: StatIndex) -> u64 {
    after.get(stat) - before.get(stat)
}

// ------------------------------------------------------------------------------------------------
// Tests.

fn native_fallback_counts_every_decision_and_detaches_cleanly() {
    lab_test(
        "native_fallback_counts_every_decision_and_detaches_cleanly",
        |host_ns| {
            let mut steering = Steering::load(XdpMode::Native).expect("load ofan_steer");
            steering.attach(SWITCH_IF, 0).expect("attach");
            assert_eq!(xdp_ids(SWITCH_IF), [steering.program_id()]);

            // No socket registered: data frames try the XSKMAP, find no socket, fall back to the
            // kernel, which answers. ARP goes to the kernel directly.
            let start = counters(&steering);
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &[]),
                "IPv4 ping with fallback"
            );
            let after_ping = counters(&steering);
            println!("after IPv4 ping: {after_ping}");
            assert!(
                grew(&start, &after_ping, StatIndex::PassArp) >= 1,
                "{after_ping}"
            );
            assert!(
                grew(&start, &after_ping, StatIndex::PassNoSocket) >= 3,
                "{after_ping}"
            );
            assert_eq!(after_ping.get(StatIndex::Redirected), 0, "{after_ping}");

            // TTL 1 goes to the kernel before any redirect attempt.
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &["-t", "1"]),
                "ping -t 1"
            );
            let after_ttl = counters(&steering);
            assert!(
                grew(&after_ping, &after_ttl, StatIndex::PassTtl) >= 3,
                "{after_ttl}"
            );
            assert_eq!(
                grew(&after_ping, &after_ttl, StatIndex::PassNoSocket),
                0,
                "{after_ttl}"
            );

            // IPv6: neighbour discovery to the kernel, echo requests try the XSKMAP.
            assert!(
                ping_from_host(host_ns, SWITCH_V6, &[]),
                "IPv6 ping with fallback"
            );
            let after_v6 = counters(&steering);
            println!("after IPv6 ping: {after_v6}");
            assert!(
                grew(&after_ttl, &after_v6, StatIndex::PassNd) >= 1,
                "{after_v6}"
            );
            assert!(
                grew(&after_ttl, &after_v6, StatIndex::PassNoSocket) >= 3,
                "{after_v6}"
            );

            // The switch's own addresses go to the kernel as local traffic.
            let own: Vec<IpAddr> = [SWITCH_V4, SWITCH_V6].map(|a| a.parse().unwrap()).to_vec();
            steering.set_local_addrs(&own).expect("set local addresses");
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &[]),
                "IPv4 ping to a local address"
            );
            assert!(
                ping_from_host(host_ns, SWITCH_V6, &[]),
                "IPv6 ping to a local address"
            );
            let after_local = counters(&steering);
            println!("after local pings: {after_local}");
            assert!(
                grew(&after_v6, &after_local, StatIndex::PassLocal) >= 6,
                "{after_local}"
            );
            assert_eq!(
                grew(&after_v6, &after_local, StatIndex::PassNoSocket),
                0,
                "{after_local}"
            );

            // A blackholed port drops everything it receives, local traffic and ARP included,
            // until the flag is cleared.
            steering.set_port_drop(0, true).expect("set the drop flag");
            assert_eq!(steering.dropping_ports().expect("read the flags"), [0]);
            assert!(
                !ping_from_host(host_ns, SWITCH_V4, &[]),
                "a ping through a blackholed port"
            );
            let after_blackhole = counters(&steering);
            assert!(
                grew(&after_local, &after_blackhole, StatIndex::DropBlackhole) >= 3,
                "{after_blackhole}"
            );
            assert_eq!(
                grew(&after_local, &after_blackhole, StatIndex::PassLocal),
                0,
                "{after_blackhole}"
            );
            steering
                .set_port_drop(0, false)
                .expect("clear the drop flag");
            assert!(steering
                .dropping_ports()
                .expect("read the flags")
                .is_empty());
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &[]),
                "ping after the blackhole is lifted"
            );
            assert!(matches!(
                steering.set_port_drop(64, true),
                Err(SteerError::PortOutOfRange { port: 64 })
            ));
            steering
                .set_local_addrs(&[])
                .expect("clear local addresses");

            // Wrong uses are refused without touching the attachment.
            assert!(matches!(
                steering.attach(SWITCH_IF, 1),
                Err(SteerError::AlreadyAttached { port: 0, .. })
            ));
            assert!(matches!(
                steering.attach("lo", 0),
                Err(SteerError::PortInUse { port: 0, .. })
            ));
            assert!(matches!(
                steering.attach("no-such-if0", 2),
                Err(SteerError::UnknownInterface { .. })
            ));
            assert!(matches!(
                steering.attach("lo", 64),
                Err(SteerError::PortOutOfRange { port: 64 })
            ));
            assert!(matches!(
                steering.register_socket(0, 8, 0),
                Err(SteerError::QueueOutOfRange { queue: 8 })
            ));
            // fd 0 is not an AF_XDP socket: the kernel says so.
            let refused = steering.register_socket(0, 0, 0).unwrap_err();
            println!("register_socket(fd 0): {refused}");
            assert!(matches!(refused, SteerError::RegisterSocket { .. }));

            let stats = steering.stats();
            assert_eq!(stats.len(), StatIndex::ALL.len());
            assert!(stats
                .iter()
                .any(|&(name, count)| name == "pass_arp" && count >= 1));

            steering.detach_all().expect("detach");
            assert!(no_xdp(SWITCH_IF), "an XDP program is left after detach_all");
            assert!(ping_from_host(host_ns, SWITCH_V4, &[]), "ping after detach");
        },
    );
}

fn registered_socket_receives_the_data_path_frames() {
    lab_test(
        "registered_socket_receives_the_data_path_frames",
        |host_ns| {
            use std::{mem::MaybeUninit, num::NonZeroU32, ptr::NonNull};
            use xdpilone::{IfInfo, Socket, SocketConfig, Umem, UmemConfig};

            const FRAME: u64 = 4096;
            const FRAMES: u32 = 64;
            #[repr(align(4096))]
            struct Area(MaybeUninit<[u8; (FRAME as usize) * FRAMES as usize]>);

            let mut steering = Steering::load(XdpMode::Native).expect("load ofan_steer");
            steering.attach(SWITCH_IF, 0).expect("attach");

            // One copy-mode socket on queue 0 of sw0, the way the data path opens them.
            let area = Box::leak(Box::new(Area(MaybeUninit::uninit())));
            let area = NonNull::new(area.0.as_mut_ptr()).expect("non-null");
            // SAFETY: `area` is page-aligned (4096), FRAMES × FRAME bytes long, and leaked, so it
            // outlives the UMEM; nothing else accesses it.
            let umem = unsafe { Umem::new(UmemConfig::default(), area) }.expect("umem");
            let mut info = IfInfo::invalid();
            info.from_name(c"sw0").expect("if info");
            info.set_queue(0);
            let socket = Socket::with_shared(&info, &umem).expect("socket");
            let mut device = umem.fq_cq(&socket).expect("fill/completion rings");
            let user = umem
                .rx_tx(
                    &socket,
                    &SocketConfig {
                        rx_size: NonZeroU32::new(FRAMES),
                        tx_size: None,
                        bind_flags: SocketConfig::XDP_BIND_COPY,
                    },
                )
                .expect("rx ring");
            let mut rx = user.map_rx().expect("map rx");
            umem.bind(&user).expect("bind (copy mode)");
            let mut fill = device.fill(FRAMES);
            let filled = fill.insert((0..u64::from(FRAMES)).map(|frame| frame * FRAME));
            fill.commit();
            assert!(filled > 8, "fill ring took {filled} frames");

            // The fd to register is the socket's (xdpilone `User::as_raw_fd`).
            steering
                .register_socket(0, 0, user.as_raw_fd())
                .expect("register socket");

            // Echo requests now go to the socket (nobody answers); ARP still reaches the kernel.
            let start = counters(&steering);
            assert!(
                !ping_from_host(host_ns, SWITCH_V4, &[]),
                "the kernel answered a redirected ping"
            );
            let after = counters(&steering);
            println!("with a socket: {after}");
            assert!(grew(&start, &after, StatIndex::Redirected) >= 3, "{after}");
            assert_eq!(grew(&start, &after, StatIndex::PassNoSocket), 0, "{after}");
            let mut received = rx.receive(FRAMES);
            let mut echo_requests: u64 = 0;
            while let Some(descriptor) = received.read() {
                // Ethernet + IPv4 + ICMP echo with ping's 56 data bytes.
                assert!(descriptor.len >= 98, "short frame: {descriptor:?}");
                echo_requests += 1;
            }
            received.release();
            assert_eq!(echo_requests, grew(&start, &after, StatIndex::Redirected));

            // Unregistered: back to the kernel.
            steering.unregister_socket(0, 0).expect("unregister");
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &[]),
                "ping after unregistering"
            );
            let end = counters(&steering);
            assert!(grew(&after, &end, StatIndex::PassNoSocket) >= 3, "{end}");
        },
    );
}

fn generic_mode_attaches_and_drop_detaches() {
    lab_test("generic_mode_attaches_and_drop_detaches", |host_ns| {
        let mut steering = Steering::load(XdpMode::Generic).expect("load ofan_steer");
        steering.attach(SWITCH_IF, 3).expect("attach generic");
        assert_eq!(xdp_ids(SWITCH_IF), [steering.program_id()]);
        assert!(
            ping_from_host(host_ns, SWITCH_V4, &[]),
            "ping through generic XDP"
        );
        let stats = counters(&steering);
        assert!(stats.get(StatIndex::PassNoSocket) >= 3, "{stats}");
        drop(steering);
        assert!(no_xdp(SWITCH_IF), "an XDP program is left after drop");
    });
}

fn stale_program_of_a_crashed_run_is_replaced() {
    lab_test("stale_program_of_a_crashed_run_is_replaced", |host_ns| {
        let mut crashed = Steering::load(XdpMode::Native).expect("load first");
        crashed.attach(SWITCH_IF, 0).expect("attach first");
        let stale_id = crashed.program_id();
        // A run that never cleans up: no Drop, its link stays attached.
        std::mem::forget(crashed);
        assert_eq!(xdp_ids(SWITCH_IF), [stale_id]);

        let mut steering = Steering::load(XdpMode::Native).expect("load second");
        steering
            .attach(SWITCH_IF, 0)
            .expect("attach over the stale program");
        let ids = xdp_ids(SWITCH_IF);
        assert_eq!(ids, [steering.program_id()], "exactly the new program");
        assert_ne!(ids, [stale_id]);
        assert!(
            ping_from_host(host_ns, SWITCH_V4, &[]),
            "ping after takeover"
        );
        assert!(counters(&steering).get(StatIndex::PassNoSocket) >= 3);
        drop(steering);
        assert!(no_xdp(SWITCH_IF), "an XDP program is left after drop");
    });
}

/// A stale `ofan_steer` attached over netlink (no BPF link, as an older kernel, `ip link` or an
/// earlier run's netlink attachment leaves it) is detached over rtnetlink — the codec's
/// `XDP_FLAGS_REPLACE` request naming it by fd — and replaced.
fn stale_netlink_attachment_is_detached_over_netlink() {
    lab_test(
        "stale_netlink_attachment_is_detached_over_netlink",
        |host_ns| {
            let stale = Steering::load(XdpMode::Native).expect("load first");
            let stale_id = stale.program_id();
            attach_over_netlink(SWITCH_IF, stale_id);
            // The attachment holds the program; the loader that made it is gone.
            drop(stale);
            assert_eq!(xdp_ids(SWITCH_IF), [stale_id]);

            let mut steering = Steering::load(XdpMode::Native).expect("load second");
            steering
                .attach(SWITCH_IF, 0)
                .expect("attach over the netlink-attached stale program");
            assert_eq!(xdp_ids(SWITCH_IF), [steering.program_id()]);
            assert!(
                ping_from_host(host_ns, SWITCH_V4, &[]),
                "ping after takeover"
            );
            drop(steering);
            assert!(no_xdp(SWITCH_IF), "an XDP program is left after drop");
        },
    );
}

/// Attaches the loaded program `program_id` to `interface` in native mode over rtnetlink
/// (`IFLA_XDP_FD`), as `ip link set dev … xdpdrv` does: no BPF link.
fn attach_over_netlink(interface: &str, program_id: u32) {
    const IFLA_XDP: u16 = 43;
    const IFLA_XDP_FD: u16 = 1;
    const IFLA_XDP_FLAGS: u16 = 3;
    const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
    let program = aya::programs::loaded_programs()
        .filter_map(Result::ok)
        .find(|info| info.id() == program_id)
        .expect("the loaded program")
        .fd()
        .expect("an fd of the program");
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{interface}/ifindex"))
        .expect("the interface's index")
        .trim()
        .parse()
        .expect("a number");
    let mut ifinfomsg = [0u8; 16];
    ifinfomsg[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    let mut socket = ofan_netlink::RouteSocket::open().expect("netlink socket");
    socket
        .request(
            |seq| {
                ofan_netlink::RequestBuilder::new(ofan_netlink::RTM_SETLINK, 0, seq, &ifinfomsg)
                    .begin_nest(IFLA_XDP)
                    .attr(IFLA_XDP_FD, &program.as_fd().as_raw_fd().to_ne_bytes())
                    .attr_u32(IFLA_XDP_FLAGS, XDP_FLAGS_DRV_MODE)
                    .end_nest()
                    .finish()
            },
            std::time::Duration::from_secs(5),
        )
        .expect("attach over netlink");
}

fn foreign_program_is_refused_and_left_alone() {
    lab_test("foreign_program_is_refused_and_left_alone", |_host_ns| {
        let mut foreign = XdpRedirect::load(XdpMode::Native).expect("load ofan_redirect");
        foreign
            .forward(SWITCH_IF, SWITCH_IF)
            .expect("attach ofan_redirect");
        let foreign_id = foreign.program_id().expect("program id");
        assert_eq!(xdp_ids(SWITCH_IF), [foreign_id]);

        let mut steering = Steering::load(XdpMode::Native).expect("load ofan_steer");
        let error = steering.attach(SWITCH_IF, 0).unwrap_err();
        let message = error.to_string();
        println!("refused: {message}");
        match &error {
            SteerError::ForeignProgram {
                interface,
                program,
                id,
                ..
            } => {
                assert_eq!(interface, SWITCH_IF);
                assert_eq!(program, "ofan_redirect");
                assert_eq!(*id, foreign_id);
            }
            other => panic!("expected ForeignProgram, got {other:?}"),
        }
        assert!(message.contains(SWITCH_IF) && message.contains("ofan_redirect"));
        assert_eq!(
            xdp_ids(SWITCH_IF),
            [foreign_id],
            "the foreign program was touched"
        );
        assert_eq!(steering.attached().count(), 0);

        drop(foreign);
        assert!(no_xdp(SWITCH_IF));
        steering
            .attach(SWITCH_IF, 0)
            .expect("attach once the interface is free");
    });
}

ofan_tests::root_tests!(
    native_fallback_counts_every_decision_and_detaches_cleanly,
    registered_socket_receives_the_data_path_frames,
    generic_mode_attaches_and_drop_detaches,
    stale_program_of_a_crashed_run_is_replaced,
    stale_netlink_attachment_is_detached_over_netlink,
    foreign_program_is_refused_and_left_alone,
);
