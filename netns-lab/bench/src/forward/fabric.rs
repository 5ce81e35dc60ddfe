//! The run's three namespaces and what joins them: `gen eth0 — p0 dut p1 — eth0 sink`, the
//! addresses, dut's route to the generator's destination and a permanent neighbour for its next
//! hop.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::agents::parse_mac;
use ofan_lab::netns::{self, Namespaces, NetnsError};

/// The generator's source address (gen eth0).
pub(super) const GEN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The generator's destination address: inside [`ROUTED`], so dut forwards it out of p1.
pub(super) const DEST_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const DUT_P0: &str = "10.0.0.1/24";
const DUT_P1: &str = "10.0.1.1/24";
const NEXT_HOP: &str = "10.0.1.2";
const ROUTED: &str = "10.1.0.0/16";

/// What the measurements need to know about the fabric.
#[derive(Debug)]
pub(super) struct Fabric {
    /// MAC of dut p0: the generator's destination MAC.
    pub p0_mac: [u8; 6],
}

/// Builds the fabric in `namespaces` (which deletes it again): the namespaces `gen`, `dut` and
/// `sink` without IPv6, kernel forwarding off in `dut`, the two veth pairs of `queues` queues
/// each, the addresses, the route and the neighbour.
///
/// # Errors
/// The first command that fails.
pub(super) fn build(namespaces: &mut Namespaces, queues: u32) -> anyhow::Result<Fabric> {
    for ns in ["gen", "dut", "sink"] {
        namespaces.add(ns)?;
        // No IPv6: router solicitations and MLD reports would reach the sink and be counted.
        for key in ["all", "default"] {
            namespaces.exec(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
                ],
            )?;
        }
    }
    // The kernel must not forward what the data path passes to it (it would look like
    // forwarding by the candidate).
    namespaces.exec("dut", &["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
    let (gen, dut, sink) = (
        namespaces.name("gen"),
        namespaces.name("dut"),
        namespaces.name("sink"),
    );
    let queues = queues.to_string();
    let q = ["numtxqueues", &queues, "numrxqueues", &queues];
    for (a, a_ns, b, b_ns) in [("eth0", &gen, "p0", &dut), ("p1", &dut, "eth0", &sink)] {
        netns::run(
            Command::new("ip")
                .args(["link", "add", a, "netns", a_ns])
                .args(q)
                .args(["type", "veth", "peer", "name", b, "netns", b_ns])
                .args(q),
        )?;
    }
    for (ns, interface) in [
        ("gen", "eth0"),
        ("dut", "p0"),
        ("dut", "p1"),
        ("sink", "eth0"),
    ] {
        namespaces.exec(ns, &["ip", "link", "set", interface, "up"])?;
    }
    namespaces.exec(
        "gen",
        &["ip", "addr", "add", &format!("{GEN_IP}/24"), "dev", "eth0"],
    )?;
    namespaces.exec("dut", &["ip", "addr", "add", DUT_P0, "dev", "p0"])?;
    namespaces.exec("dut", &["ip", "addr", "add", DUT_P1, "dev", "p1"])?;
    namespaces.exec(
        "sink",
        &[
            "ip",
            "addr",
            "add",
            &format!("{NEXT_HOP}/24"),
            "dev",
            "eth0",
        ],
    )?;
    let sink_mac = mac_text(namespaces, "sink", "eth0")?;
    namespaces.exec(
        "dut",
        &[
            "ip",
            "neigh",
            "replace",
            NEXT_HOP,
            "lladdr",
            &sink_mac,
            "dev",
            "p1",
            "nud",
            "permanent",
        ],
    )?;
    namespaces.exec(
        "dut",
        &["ip", "route", "add", ROUTED, "via", NEXT_HOP, "dev", "p1"],
    )?;
    Ok(Fabric {
        p0_mac: parse_mac(&mac_text(namespaces, "dut", "p0")?)?,
    })
}

/// The MAC address of `interface` in namespace `ns`, as the kernel writes it.
fn mac_text(namespaces: &Namespaces, ns: &str, interface: &str) -> Result<String, NetnsError> {
    let text = namespaces.exec(ns, &["cat", &format!("/sys/class/net/{interface}/address")])?;
    Ok(text.trim().to_owned())
}
