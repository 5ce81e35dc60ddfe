//! The lab's netlink socket, shared by the lab (which builds and reads namespaces with it) and the
//! host agent (which reads its interface's MAC with it).

use std::io;
use std::net::Ipv4Addr;
use std::time::Duration;

use ofan_netlink::{self as netlink, Dump, RouteSocket, RTM_NEWLINK};

/// How long the lab waits for each answer of the kernel.
const NETLINK_TIMEOUT: Duration = Duration::from_secs(5);

/// The lab's netlink socket: the codec's [`RouteSocket`] with the lab's timeout.
#[derive(Debug)]
pub struct Rtnl {
    socket: RouteSocket,
}

impl Rtnl {
    /// Opens a socket in the calling thread's current network namespace.
    ///
    /// # Errors
    /// The socket error.
    pub fn open() -> io::Result<Self> {
        Ok(Self {
            socket: RouteSocket::open()?,
        })
    }

    /// Sends the request built by `make(seq)` and waits for its acknowledgement.
    ///
    /// # Errors
    /// The kernel's error (e.g. EEXIST, ENOENT), or a timeout after 5 s.
    pub fn request(&mut self, make: impl FnOnce(u32) -> Vec<u8>) -> io::Result<()> {
        self.socket.request(make, NETLINK_TIMEOUT)
    }

    /// Dumps the interfaces of the socket's namespace.
    ///
    /// # Errors
    /// The socket error.
    pub fn links(&mut self) -> io::Result<Vec<netlink::Link>> {
        self.dump(Dump::Links, RTM_NEWLINK, netlink::parse_link)
    }

    /// Dumps the addresses of the socket's namespace.
    ///
    /// # Errors
    /// The socket error.
    pub fn addresses(&mut self) -> io::Result<Vec<netlink::Address>> {
        self.dump(
            Dump::Addresses,
            netlink::RTM_NEWADDR,
            netlink::parse_address,
        )
    }

    /// Dumps `what`: every message of `kind` that `parse` reads.
    fn dump<T>(
        &mut self,
        what: Dump,
        kind: u16,
        parse: fn(&[u8]) -> Option<T>,
    ) -> io::Result<Vec<T>> {
        let mut found = Vec::new();
        self.socket.query(
            |seq| netlink::dump_request(what, seq),
            NETLINK_TIMEOUT,
            |message| {
                if message.kind == kind {
                    found.extend(parse(message.payload));
                }
            },
        )?;
        Ok(found)
    }

    /// The MAC of the interface that has `address`, in the socket's namespace.
    ///
    /// # Errors
    /// The socket error, or no interface with that address.
    pub fn mac_of_address(&mut self, address: std::net::IpAddr) -> io::Result<[u8; 6]> {
        let index = self
            .addresses()?
            .into_iter()
            .find(|found| found.addr == address)
            .map(|found| found.index)
            .ok_or_else(|| io::Error::other(format!("no interface here has {address}")))?;
        self.links()?
            .into_iter()
            .find(|link| link.index == index)
            .map(|link| link.mac)
            .ok_or_else(|| io::Error::other(format!("interface {index} vanished")))
    }

    /// The IPv4 routes of the main table that forward (unicast), as
    /// `((destination, prefix length), next hops)`.
    ///
    /// # Errors
    /// The socket error.
    pub fn unicast_routes(&mut self) -> io::Result<Vec<RouteWidth>> {
        let mut routes = Vec::new();
        self.socket.query(
            |seq| netlink::dump_request(Dump::Routes(netlink::IpFamily::V4), seq),
            NETLINK_TIMEOUT,
            |message| {
                if message.kind != netlink::RTM_NEWROUTE {
                    return;
                }
                let Some(route) = netlink::parse_route(message.payload) else {
                    return;
                };
                if let (std::net::IpAddr::V4(dst), netlink::RouteKind::Unicast { hops, .. }) =
                    (route.dst, &route.kind)
                {
                    if route.table == MAIN_TABLE {
                        routes.push(((dst, route.prefix_len), hops.len()));
                    }
                }
            },
        )?;
        Ok(routes)
    }
}

/// A route's destination `(address, prefix length)` and its number of next hops.
pub type RouteWidth = ((Ipv4Addr, u8), usize);

/// The kernel's main routing table.
const MAIN_TABLE: u32 = 254;
