//! Applying a lab to the kernel in bulk: namespaces (`ip netns add`, one process each, all in
//! parallel), then everything else over rtnetlink from this process — veth pairs created
//! directly in their two namespaces, addresses, routes, link state — plus sysctls and the
//! ethtool call, with one netlink socket per namespace.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ofan_netlink::{self as netlink, VethEnd};

use super::sys;

// The socket the host agent shares, with the lab's timeout.
pub use ofan_lab_sys::rtnl::{RouteWidth, Rtnl};

/// Where `ip netns` keeps its namespace files.
pub const NETNS_DIR: &str = "/run/netns";

/// A kernel request failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A netlink request was refused.
    #[error("{what}")]
    Netlink {
        /// What was being done.
        what: String,
        /// The kernel's error.
        source: io::Error,
    },
    /// A namespace could not be created, entered or removed.
    #[error("namespace {name}: {message}")]
    Namespace {
        /// Namespace name.
        name: String,
        /// What went wrong.
        message: String,
    },
}

/// What a namespace is for: its sysctls differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsKind {
    /// A host: no forwarding.
    Host,
    /// A switch: IPv4 forwarding on, so the kernel answers expired TTLs (traceroute).
    Switch,
}

/// One open namespace: its file, a netlink socket and a UDP socket (for ioctls) inside it.
#[derive(Debug)]
pub struct Namespace {
    /// Full name (`ofan-<lab>-<node>`).
    pub name: String,
    file: File,
    rtnl: Rtnl,
    udp: UdpSocket,
    ifindex: HashMap<String, u32>,
}

fn netlink_error(what: impl Into<String>) -> impl FnOnce(io::Error) -> NetError {
    let what = what.into();
    move |source| NetError::Netlink { what, source }
}

fn namespace_error(name: &str, message: impl std::fmt::Display) -> NetError {
    NetError::Namespace {
        name: name.to_owned(),
        message: message.to_string(),
    }
}

impl Namespace {
    /// Opens the existing namespace `name`: enters it just long enough to create the sockets.
    ///
    /// # Errors
    /// When it does not exist or cannot be entered.
    pub fn open(name: &str) -> Result<Self, NetError> {
        let path = Path::new(NETNS_DIR).join(name);
        let file = File::open(&path).map_err(|e| namespace_error(name, e))?;
        let (rtnl, udp) = sys::in_netns(&file, || -> io::Result<_> {
            Ok((Rtnl::open()?, UdpSocket::bind("0.0.0.0:0")?))
        })
        .and_then(|inner| inner)
        .map_err(|e| namespace_error(name, e))?;
        Ok(Self {
            name: name.to_owned(),
            file,
            rtnl,
            udp,
            ifindex: HashMap::new(),
        })
    }

    /// The namespace file (for `IFLA_NET_NS_FD` and `setns`).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Sets the namespace's sysctls and brings `lo` up: IPv6 off (no ND or MLD noise in
    /// captures and counters), ICMP rate limits off (pingall, traceroute), and for switches IPv4
    /// forwarding on with ICMP errors sourced from the inbound interface.
    ///
    /// # Errors
    /// When a sysctl cannot be written or `lo` cannot be brought up.
    pub fn configure(&mut self, kind: NsKind) -> Result<(), NetError> {
        let mut sysctls = vec![
            ("ipv6/conf/all/disable_ipv6", "1"),
            ("ipv6/conf/default/disable_ipv6", "1"),
            ("ipv4/icmp_ratelimit", "0"),
            ("ipv4/icmp_msgs_per_sec", "100000"),
        ];
        if kind == NsKind::Switch {
            sysctls.push(("ipv4/ip_forward", "1"));
            sysctls.push(("ipv4/icmp_errors_use_inbound_ifaddr", "1"));
        }
        let written = sys::in_netns(&self.file, || -> io::Result<()> {
            for (key, value) in &sysctls {
                std::fs::write(Path::new("/proc/sys/net").join(key), value)?;
            }
            Ok(())
        });
        written
            .and_then(|inner| inner)
            .map_err(|e| namespace_error(&self.name, format!("sysctl: {e}")))?;
        // lo is always ifindex 1.
        self.rtnl
            .request(|seq| netlink::set_link_up_request(seq, 1, true))
            .map_err(netlink_error(format!("{}: lo up", self.name)))
    }

    /// The forwarding IPv4 routes of the main table with their number of next hops.
    ///
    /// # Errors
    /// The netlink error.
    pub fn routes(&mut self) -> Result<Vec<RouteWidth>, NetError> {
        self.rtnl
            .unicast_routes()
            .map_err(netlink_error(format!("{}: list routes", self.name)))
    }

    /// Reads the interface indexes (after the veths exist).
    ///
    /// # Errors
    /// The netlink error.
    pub fn refresh_links(&mut self) -> Result<(), NetError> {
        let links = self
            .rtnl
            .links()
            .map_err(netlink_error(format!("{}: list links", self.name)))?;
        self.ifindex = links
            .into_iter()
            .map(|link| (link.name, link.index))
            .collect();
        Ok(())
    }

    /// The index of interface `ifname`.
    ///
    /// # Errors
    /// When there is no such interface.
    pub fn ifindex(&self, ifname: &str) -> Result<u32, NetError> {
        self.ifindex
            .get(ifname)
            .copied()
            .ok_or_else(|| namespace_error(&self.name, format!("no interface {ifname}")))
    }

    /// Adds `addr/prefix_len` to `ifname`.
    ///
    /// # Errors
    /// The netlink error.
    pub fn add_address(
        &mut self,
        ifname: &str,
        addr: Ipv4Addr,
        prefix_len: u8,
    ) -> Result<(), NetError> {
        let index = self.ifindex(ifname)?;
        self.rtnl
            .request(|seq| netlink::add_address_request(seq, index, addr, prefix_len))
            .map_err(netlink_error(format!(
                "{}: address {addr}/{prefix_len} on {ifname}",
                self.name
            )))
    }

    /// Sets `ifname` administratively up or down.
    ///
    /// # Errors
    /// The netlink error.
    pub fn set_link(&mut self, ifname: &str, up: bool) -> Result<(), NetError> {
        let index = self.ifindex(ifname)?;
        self.rtnl
            .request(|seq| netlink::set_link_up_request(seq, index, up))
            .map_err(netlink_error(format!(
                "{}: set {ifname} {}",
                self.name,
                if up { "up" } else { "down" }
            )))
    }

    /// Installs or replaces the route to `dst/prefix_len` through `hops` (interface name,
    /// gateway); several hops make an ECMP route.
    ///
    /// # Errors
    /// The netlink error.
    pub fn set_route(
        &mut self,
        dst: Ipv4Addr,
        prefix_len: u8,
        hops: &[(&str, Ipv4Addr)],
    ) -> Result<(), NetError> {
        let hops: Vec<(u32, Ipv4Addr)> = hops
            .iter()
            .map(|(ifname, gateway)| Ok((self.ifindex(ifname)?, *gateway)))
            .collect::<Result<_, NetError>>()?;
        self.rtnl
            .request(|seq| netlink::route_request(seq, dst, prefix_len, &hops))
            .map_err(netlink_error(format!(
                "{}: route {dst}/{prefix_len}",
                self.name
            )))
    }

    /// Makes the neighbour entry of `gateway` on `ifname` a *managed* one: the kernel resolves it
    /// now, re-probes it and leaves it out of its garbage collection, which otherwise deletes
    /// entries it has not used or confirmed lately once the machine's neighbour table (shared by
    /// every namespace) holds more than `gc_thresh1` / `gc_thresh2` (128 / 512) entries — 115
    /// hosts' entries within two minutes of a k = 8 lab, each to be resolved again by its host's
    /// next frame. A kernel without managed entries (before 5.16) refuses; the host then
    /// resolves its gateway on demand, as before.
    ///
    /// # Errors
    /// No interface `ifname`.
    pub fn keep_neighbor(&mut self, ifname: &str, gateway: Ipv4Addr) -> Result<(), NetError> {
        let ifindex = self.ifindex(ifname)?;
        let _refused = self
            .rtnl
            .request(|seq| netlink::managed_neighbor_request(seq, ifindex, gateway.into()));
        Ok(())
    }

    /// Removes the route to `dst/prefix_len` if there is one.
    ///
    /// # Errors
    /// The netlink error, except "no such route".
    pub fn delete_route(&mut self, dst: Ipv4Addr, prefix_len: u8) -> Result<(), NetError> {
        match self
            .rtnl
            .request(|seq| netlink::delete_route_request(seq, dst, prefix_len))
        {
            Err(error)
                if error.raw_os_error() == Some(libc::ESRCH)
                    || error.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            result => result.map_err(netlink_error(format!(
                "{}: delete route {dst}/{prefix_len}",
                self.name
            ))),
        }
    }

    /// Turns generic receive offload on on `ifname` (`ethtool -K IF gro on`): a veth end
    /// without an XDP program then takes frames its peer's XDP program redirects to it.
    ///
    /// # Errors
    /// The ioctl error.
    pub fn gro_on(&self, ifname: &str) -> Result<(), NetError> {
        sys::gro_on(&self.udp, ifname)
            .map_err(|e| namespace_error(&self.name, format!("ethtool -K {ifname} gro on: {e}")))
    }

    /// Turns TX checksum offload off on `ifname`.
    ///
    /// # Errors
    /// The ioctl error.
    pub fn tx_checksum_off(&self, ifname: &str) -> Result<(), NetError> {
        sys::tx_checksum_off(&self.udp, ifname)
            .map_err(|e| namespace_error(&self.name, format!("ethtool -K {ifname} tx off: {e}")))
    }
}

/// Creates namespaces with `ip netns add`, all processes started at once.
///
/// # Errors
/// The first namespace that could not be created.
pub fn create_namespaces(names: &[String]) -> Result<(), NetError> {
    let mut children = Vec::with_capacity(names.len());
    for name in names {
        let child = Command::new("ip")
            .args(["netns", "add", name])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| namespace_error(name, format!("cannot run ip: {e}")))?;
        children.push((name, child));
    }
    let mut first_error = None;
    for (name, child) in children {
        let output = child
            .wait_with_output()
            .map_err(|e| namespace_error(name, e))?;
        if !output.status.success() && first_error.is_none() {
            first_error = Some(namespace_error(
                name,
                String::from_utf8_lossy(&output.stderr).trim(),
            ));
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Creates a veth pair from `a` (namespace, interface) to `b` with `mtu`, both ends down.
///
/// # Errors
/// The netlink error.
pub fn create_veth(
    root: &mut Rtnl,
    a: (&Namespace, &str),
    b: (&Namespace, &str),
    mtu: u32,
) -> Result<(), NetError> {
    use std::os::fd::AsFd;
    root.request(|seq| {
        netlink::veth_pair_request(
            seq,
            VethEnd {
                name: a.1,
                netns: a.0.file().as_fd(),
            },
            VethEnd {
                name: b.1,
                netns: b.0.file().as_fd(),
            },
            mtu,
        )
    })
    .map_err(netlink_error(format!(
        "veth {}/{} — {}/{}",
        a.0.name, a.1, b.0.name, b.1
    )))
}

/// Whether namespace `name` exists.
pub fn namespace_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

// One listing for the lab, the bench and the tests: in `crate::netns`.
pub use crate::netns::namespaces_with_prefix;

/// Removes namespace `name` (as `ip netns del`: lazy unmount, then unlink). Missing is fine.
///
/// # Errors
/// When the file exists but cannot be removed.
pub fn delete_namespace(name: &str) -> Result<(), NetError> {
    let path = Path::new(NETNS_DIR).join(name);
    if !path.exists() {
        return Ok(());
    }
    // EINVAL: not mounted (a half-created namespace); the file is removed anyway.
    let _ = sys::detach_unmount(&path);
    match std::fs::remove_file(&path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => Err(namespace_error(name, error)),
        _ => Ok(()),
    }
}

/// The pids of every process whose network namespace is one of `names`, with that name.
pub fn pids_in_namespaces(names: &[String]) -> Vec<(u32, String)> {
    use std::os::unix::fs::MetadataExt;
    let targets: HashMap<(u64, u64), &String> = names
        .iter()
        .filter_map(|name| {
            let meta = std::fs::metadata(Path::new(NETNS_DIR).join(name)).ok()?;
            Some(((meta.dev(), meta.ino()), name))
        })
        .collect();
    if targets.is_empty() {
        return Vec::new();
    }
    let own = std::process::id();
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
                .filter(|pid| *pid != own)
                .filter_map(|pid| {
                    // Any thread counts, and any open descriptor of the namespace: an
                    // `ofan-switch group` runs in the root namespace and holds its switches'
                    // namespaces open (a thread of it may be in one while it starts a switch).
                    let target_of = |path: &Path| {
                        let meta = std::fs::metadata(path).ok()?;
                        targets.get(&(meta.dev(), meta.ino())).copied()
                    };
                    let process = PathBuf::from(format!("/proc/{pid}"));
                    let name = target_of(&process.join("ns/net"))
                        .or_else(|| {
                            std::fs::read_dir(process.join("task"))
                                .ok()?
                                .filter_map(Result::ok)
                                .find_map(|task| target_of(&task.path().join("ns/net")))
                        })
                        .or_else(|| {
                            std::fs::read_dir(process.join("fd"))
                                .ok()?
                                .filter_map(Result::ok)
                                .find_map(|fd| target_of(&fd.path()))
                        })?;
                    Some((pid, name.clone()))
                })
                .collect()
        })
        .unwrap_or_default()
}
