use super::*;
use ofan_dataplane::fib::PortRole;
use ofan_topology::Topology;

fn parse(text: &str) -> Result<SwitchConfig, ConfigError> {
    let file: FileConfig = toml::from_str(text).map_err(|e| error("file", e.to_string()))?;
    resolve(file, &Overrides::default())
}

#[test]
fn a_full_file_resolves() {
    let config = parse(
        r#"
        name = "e1"
        seed = 7
        [[ports]]
        name = "p0"
        role = "host"
        [[ports]]
        name = "p1"
        role = "host"
        [[ports]]
        name = "p2"
        role = "up"
        link_rate = "10mbit"
        [[ports]]
        name = "p3"
        role = "up"
        [lb]
        algorithm = "ofan"
        pipe_size = 2
        [queue]
        link_rate = "100mbit"
        buffer = "64KB"
        ecn_threshold = "16KB"
        [keys]
        table = [{ prefix = "10.1.0.0/24", key = 3 }]
        "#,
    )
    .unwrap();
    assert_eq!(config.name, "e1");
    assert_eq!(config.runtime.lb.algorithm, Algorithm::Ofan);
    assert_eq!(config.runtime.lb.up_ports, 2);
    assert_eq!(config.runtime.lb.dest_keys, 4);
    assert_eq!(
        config.runtime.pipes,
        vec![vec![PortId(0), PortId(1)], vec![PortId(2), PortId(3)]]
    );
    assert_eq!(config.runtime.up_ports, vec![PortId(2), PortId(3)]);
    assert_eq!(config.runtime.ports[2].egress.link_rate_bps, 10_000_000);
    assert_eq!(config.runtime.ports[3].egress.link_rate_bps, 100_000_000);
    assert_eq!(config.runtime.ports[0].egress.buffer_bytes, 65_536);
    assert_eq!(
        config.runtime.ports[0].egress.ecn_threshold_bytes,
        Some(16_384)
    );
    assert_eq!(config.admin_socket, PathBuf::from("/run/ofan/e1.sock"));
}

#[test]
fn each_switch_derives_its_own_seed_from_the_run_seed_and_its_name() {
    let ports = "[[ports]]\nname = \"p0\"\nrole = \"up\"\n";
    let seed_of = |head: &str| parse(&format!("{head}\n{ports}")).unwrap().runtime.lb.seed;
    let edge = seed_of("name = \"e-p0-0\"\nseed = 7");
    let agg = seed_of("name = \"a-p0-0\"\nseed = 7");
    // Two switches of one run: different seeds, neither the run seed.
    assert_ne!(edge, agg);
    assert_ne!(edge, 7);
    assert_ne!(agg, 7);
    // The same switch in the same run: the same seed, from the file or the flags.
    assert_eq!(edge, seed_of("name = \"e-p0-0\"\nseed = 7"));
    let file: FileConfig = toml::from_str(&format!("name = \"e-p0-0\"\n{ports}")).unwrap();
    let flags = Overrides {
        seed: Some(7),
        ..Overrides::default()
    };
    assert_eq!(resolve(file, &flags).unwrap().runtime.lb.seed, edge);
    // Another run seed moves it; an exact switch seed is taken as is.
    assert_ne!(edge, seed_of("name = \"e-p0-0\"\nseed = 8"));
    assert_eq!(seed_of("name = \"e-p0-0\"\nseed = 7\nswitch_seed = 7"), 7);
}

/// `queue.catch_up`, `--catch-up` and `--bare` are what users type: they keep meaning what
/// they meant when they were booleans.
#[test]
fn catch_up_and_bare_map_to_their_modes() {
    let ports =
        "[[ports]]\nname = \"p0\"\nrole = \"up\"\n[[ports]]\nname = \"p1\"\nrole = \"up\"\n";
    let resolved = |file: &str, flags: &Overrides| {
        let file: FileConfig = toml::from_str(&format!("{file}\n{ports}")).unwrap();
        let config = resolve(file, flags).unwrap();
        let shaping: Vec<Shaping> = config
            .runtime
            .ports
            .iter()
            .map(|port| port.egress.shaping)
            .collect();
        (shaping, config.runtime.forwarding)
    };
    let defaults = Overrides::default();
    let strict = vec![Shaping::Strict; 2];
    let catch_up = vec![Shaping::CatchUp; 2];
    assert_eq!(
        resolved("", &defaults),
        (strict.clone(), Forwarding::Lookup)
    );
    assert_eq!(
        resolved("[queue]\ncatch_up = false", &defaults),
        (strict, Forwarding::Lookup)
    );
    assert_eq!(
        resolved("[queue]\ncatch_up = true", &defaults),
        (catch_up.clone(), Forwarding::Lookup)
    );
    let flags = Overrides {
        catch_up: true,
        bare: true,
        ..Overrides::default()
    };
    assert_eq!(
        resolved("[queue]\ncatch_up = false", &flags),
        (catch_up, Forwarding::Bare)
    );
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[lb]\npipe_size = 0\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "lb.pipe_size"),
        ("[queue]\nlink_rate = \"fast\"\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "queue.link_rate"),
        ("[xdp]\nframe_size = 1000\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "xdp.frame_size"),
        ("[xdp]\nring_size = 1000\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "xdp.ring_size"),
        ("[[ports]]\nname=\"p0\"\nrole=\"up\"\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "ports[1].name"),
        ("[lb]\npipes = [[\"p9\"]]\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "lb.pipes[0]"),
        ("[keys]\ntable = [{ prefix = \"10.0.0.1/24\", key = 0 }]\n[[ports]]\nname=\"p0\"\nrole=\"up\"", "keys.table[0].prefix"),
        ("", "ports"),
    ];
    for (text, key) in cases {
        let err = parse(text).unwrap_err();
        assert_eq!(err.key, key, "{text}: {err}");
    }
}

#[test]
fn unknown_keys_and_values_are_refused_by_the_parser() {
    assert!(toml::from_str::<FileConfig>("[lb]\nalgorithm = \"magic\"")
        .unwrap_err()
        .to_string()
        .contains("magic"));
    assert!(toml::from_str::<FileConfig>("[lb]\npipesize = 4")
        .unwrap_err()
        .to_string()
        .contains("pipesize"));
}

#[test]
fn a_topology_node_gives_ports_roles_and_keys() {
    let dir = std::env::temp_dir().join(format!("ofan-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("topo.json");
    std::fs::write(&path, Topology::fat_tree(4).unwrap().to_json()).unwrap();
    let flags = Overrides {
        topology: Some(path.clone()),
        node: Some("e-p0-0".into()),
        ..Overrides::default()
    };
    let config = resolve(FileConfig::default(), &flags).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let roles: Vec<PortRole> = config.mirror.ports.iter().map(|p| p.role).collect();
    assert_eq!(
        roles,
        vec![PortRole::Host, PortRole::Host, PortRole::Up, PortRole::Up]
    );
    // Edge switches: one key per edge switch (8 in k = 4), every other edge's /24 mapped.
    assert_eq!(config.runtime.lb.dest_keys, 8);
    assert_eq!(config.mirror.keys.len(), 7);
    assert_eq!(config.runtime.pipes.len(), 1);
}

#[test]
fn a_bare_metrics_port_is_on_loopback() {
    let base = "[[ports]]\nname = \"p0\"\nrole = \"host\"\n";
    let metrics = |line: &str| parse(&format!("{base}[admin]\n{line}\n")).map(|c| c.metrics);
    assert_eq!(
        metrics("metrics = \"9100\"").unwrap(),
        Some("127.0.0.1:9100".parse().unwrap())
    );
    assert_eq!(
        metrics("metrics = \"0.0.0.0:9100\"").unwrap(),
        Some("0.0.0.0:9100".parse().unwrap())
    );
    assert_eq!(metrics("metrics = \"off\"").unwrap(), None);
    assert_eq!(parse(base).unwrap().metrics, None, "off by default");
    assert!(metrics("metrics = \"localhost\"").is_err());
}

const TWO_PORTS: &str = r#"
[[ports]]
name = "p0"
role = "host"
[[ports]]
name = "p1"
role = "up"
"#;

#[test]
fn adaptive_routing_is_on_with_an_arf_algorithm_and_checked_by_key() {
    let off = parse(TWO_PORTS).unwrap();
    assert!(
        off.adaptive_routing.is_none(),
        "pofan reads no notification"
    );
    let on = parse(&format!("{TWO_PORTS}[lb]\nalgorithm = \"arf-wcmp\"\n")).unwrap();
    let arf = on.adaptive_routing.unwrap();
    assert_eq!(arf.port, ofan_control::notify::DEFAULT_PORT);
    assert_eq!(arf.timing.window_ns, 10_000_000);
    assert_eq!(arf.timing.refresh_ns, 100_000_000);
    assert_eq!(arf.fabric_ports, vec![1]);
    assert_eq!(arf.identity, None, "no plan, no asn: receive only");
    let forced = parse(&format!(
        "{TWO_PORTS}[adaptive_routing]\nenabled = true\nasn = 65001\nrouter_id = \"10.255.0.1\"\nport = 9999\n"
    ))
    .unwrap()
    .adaptive_routing
    .unwrap();
    assert_eq!(forced.port, 9999);
    assert_eq!(forced.identity.map(|id| id.asn), Some(65001));
    // The combination rule: min by default, the file's, and the flag over the file.
    use ofan_dataplane::arf::Combine;
    assert_eq!(arf.combine, Combine::Min);
    let text = format!(
        "{TWO_PORTS}[lb]\nalgorithm = \"arf-wcmp\"\n[adaptive_routing]\ncombine = \"sum\"\n"
    );
    let combine = |flag| {
        let file: FileConfig = toml::from_str(&text).unwrap();
        let flags = Overrides {
            arf_combine: flag,
            ..Overrides::default()
        };
        resolve(file, &flags)
            .unwrap()
            .adaptive_routing
            .unwrap()
            .combine
    };
    assert_eq!(combine(None), Combine::Sum);
    assert_eq!(combine(Some(Combine::Min)), Combine::Min);
    assert!(toml::from_str::<FileConfig>("[adaptive_routing]\ncombine = \"max\"").is_err());
    for (line, key) in [
        ("window_ms = 0", "adaptive_routing.window_ms"),
        ("refresh_ms = 5", "adaptive_routing.refresh_ms"),
        ("refresh_ms = 30000", "adaptive_routing.refresh_ms"),
        ("port = 0", "adaptive_routing.port"),
        ("congested_at = 16", "adaptive_routing.congested_at"),
        ("cleared_at = 4", "adaptive_routing.cleared_at"),
        (
            "windows_to_change = 0",
            "adaptive_routing.windows_to_change",
        ),
        ("queue_frames = 0", "adaptive_routing.queue_frames"),
        ("asn = 1", "adaptive_routing.router_id"),
    ] {
        let text = format!("{TWO_PORTS}[adaptive_routing]\nenabled = true\n{line}\n");
        let error = parse(&text).unwrap_err();
        assert_eq!(error.key, key, "{line}: {error}");
    }
}

#[test]
fn frames_per_port_come_from_the_flag_the_file_or_four_rings() {
    let base = "[[ports]]\nname = \"p0\"\nrole = \"host\"\n";
    let frames = |file: &str, flag: Option<u32>| {
        let file: FileConfig = toml::from_str(&format!("{base}{file}")).unwrap();
        let flags = Overrides {
            ring_size: Some(256),
            frames_per_port: flag,
            ..Overrides::default()
        };
        resolve(file, &flags).map(|config| config.runtime.frames_per_port)
    };
    assert_eq!(frames("", None).unwrap(), 1024);
    assert_eq!(frames("[xdp]\nframes_per_port = 700", None).unwrap(), 700);
    assert_eq!(
        frames("[xdp]\nframes_per_port = 700", Some(600)).unwrap(),
        600
    );
    // Fewer than twice the ring: refused, naming the key.
    assert_eq!(
        frames("", Some(511)).unwrap_err().key,
        "xdp.frames_per_port"
    );
}

#[test]
fn the_fast_path_is_refused_with_what_it_cannot_do() {
    let ports = r#"
        [[ports]]
        name = "p0"
        role = "host"
        [[ports]]
        name = "p1"
        role = "host"
    "#;
    let with = |extra: &str| parse(&format!("{ports}\n{extra}"));
    let on = with("[xdp]\nfast_path = \"xdp\"").unwrap();
    assert_eq!(on.runtime.fast_path, FastPathMode::Xdp);
    assert_eq!(with("").unwrap().runtime.fast_path, FastPathMode::Off);

    let shaped = with("[queue]\nlink_rate = \"10mbit\"\n[xdp]\nfast_path = \"xdp\"").unwrap_err();
    assert_eq!(shaped.key, "xdp.fast_path");
    assert!(shaped.message.contains("no shaper"), "{}", shaped.message);

    let ofan = with("[lb]\nalgorithm = \"ofan\"\n[xdp]\nfast_path = \"xdp\"").unwrap_err();
    assert_eq!(ofan.key, "xdp.fast_path");
    assert!(ofan.message.contains("pofan"), "{}", ofan.message);

    // The flag overrides the file.
    let file: FileConfig = toml::from_str(&format!("{ports}\n[xdp]\nfast_path = \"xdp\"")).unwrap();
    let flags = Overrides {
        fast_path: Some(FastPathArg::Off),
        ..Overrides::default()
    };
    assert_eq!(
        resolve(file, &flags).unwrap().runtime.fast_path,
        FastPathMode::Off
    );
    assert!(with("[xdp]\nfast_path = \"bpf\"").is_err());
}

#[test]
fn the_asn_plan_numbers_the_identities_and_the_router_id_directory() {
    let dir = std::env::temp_dir().join(format!("ofan-asn-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("topo.json");
    let topology = Topology::fat_tree(4).unwrap();
    std::fs::write(&path, topology.to_json()).unwrap();
    let resolve_with = |file: &str, asn_plan| {
        let flags = Overrides {
            topology: Some(path.clone()),
            node: Some("a-p0-1".into()),
            algorithm: Some(ofan_dataplane::lb::Algorithm::ArfWcmp),
            asn_plan,
            ..Overrides::default()
        };
        resolve(toml::from_str(file).unwrap(), &flags)
    };
    let unique = resolve_with("", None).unwrap().adaptive_routing.unwrap();
    let shared = resolve_with("[bgp]\nasn_plan = \"rfc7938\"\n", None)
        .unwrap()
        .adaptive_routing
        .unwrap();
    let flag = resolve_with("", Some(ofan_topology::plan::AsnPlan::Rfc7938))
        .unwrap()
        .adaptive_routing
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let base = ofan_topology::plan::ASN_BASE;
    let a_p0_0 = topology.aggregations()[0].id.0;
    assert_eq!(unique.identity.unwrap().asn, base + a_p0_0 + 1);
    // a-p0-1 shares pod 0's ASN, its first aggregation switch's.
    assert_eq!(shared.identity.unwrap().asn, base + a_p0_0);
    assert_eq!(flag.identity, shared.identity);
    // The router ID directory keeps only ASNs that name one switch: every switch, or the edges.
    assert_eq!(unique.router_ids.len(), 20);
    assert_eq!(shared.router_ids.len(), 8);
    assert!(topology
        .edges()
        .iter()
        .all(|edge| shared.router_ids[&(base + edge.id.0)] == edge.loopback));
    // Without a topology there is nothing to number.
    let error = parse("[bgp]\nasn_plan = \"rfc7938\"\n").unwrap_err();
    assert_eq!(error.key, "bgp.asn_plan");
    assert!(toml::from_str::<FileConfig>("[bgp]\nasn_plan = \"rfc-7938\"").is_err());
}

#[test]
fn notify_hosts_names_the_hosts_on_the_host_ports_and_needs_a_topology() {
    let dir = std::env::temp_dir().join(format!("ofan-notify-hosts-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("topo.json");
    let topology = Topology::new(ofan_topology::TopologyKind::MultiPlane {
        plane: ofan_topology::PlaneKind::FatTree,
        planes: 2,
        k: 4,
    })
    .unwrap();
    std::fs::write(&path, topology.to_json()).unwrap();
    let resolve_with = |file: &str, node: &str, flag: bool| {
        let flags = Overrides {
            topology: Some(path.clone()),
            node: Some(node.into()),
            algorithm: Some(ofan_dataplane::lb::Algorithm::ArfWcmp),
            arf_notify_hosts: flag,
            ..Overrides::default()
        };
        resolve(toml::from_str(file).unwrap(), &flags)
            .unwrap()
            .adaptive_routing
            .unwrap()
            .hosts
    };
    let hosts = resolve_with("", "e-p0-0@1", true);
    // The two hosts of e-p0-0, by their plane-1 addresses (their port 1).
    let expected: Vec<_> = topology.hosts()[..2]
        .iter()
        .map(|host| host.ports[1].address)
        .collect();
    assert_eq!(hosts, expected);
    assert!(
        resolve_with("", "e-p0-0@1", false).is_empty(),
        "off by default"
    );
    assert_eq!(
        resolve_with(
            "[adaptive_routing]\nnotify_hosts = true\n",
            "e-p0-0@1",
            false
        ),
        expected
    );
    assert!(
        resolve_with("", "a-p0-0@1", true).is_empty(),
        "no host port, no host"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let error = parse(&format!(
        "{TWO_PORTS}[adaptive_routing]\nenabled = true\nnotify_hosts = true\n"
    ))
    .unwrap_err();
    assert_eq!(error.key, "adaptive_routing.notify_hosts");
}
