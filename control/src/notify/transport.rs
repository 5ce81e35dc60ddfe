//! The notifications' UDP socket: sends with IP TTL 255, receives with the TTL and the arrival
//! interface of each datagram (`IP_RECVTTL`, `IP_PKTINFO`), so that [`super::speaker::check`]
//! can refuse what did not come from a one-hop neighbour on a fabric port.
//!
//! One socket on `0.0.0.0:port` for every port: the steering program passes frames to the
//! switch's own addresses to the kernel, which delivers them here with the interface they
//! arrived on. Sending goes out through the kernel's routes (the neighbour is on a connected
//! subnet of the port).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use super::speaker::GTSM_TTL;
use crate::sys;

pub use crate::sys::Received;

/// The notification socket.
#[derive(Debug)]
pub struct NotifySocket {
    socket: UdpSocket,
    port: u16,
}

impl NotifySocket {
    /// Binds `0.0.0.0:port`, sending with TTL 255 and reporting each datagram's TTL and
    /// interface.
    ///
    /// # Errors
    /// The bind or socket-option error.
    pub fn bind(port: u16) -> io::Result<Self> {
        Self::bind_to(Ipv4Addr::UNSPECIFIED, port)
    }

    /// Binds `addr:port` (a multi-plane host: one socket on each plane's address, so the
    /// socket names the plane a notification came through), sending with TTL 255 and
    /// reporting each datagram's TTL and interface.
    ///
    /// # Errors
    /// The bind or socket-option error.
    pub fn bind_to(addr: Ipv4Addr, port: u16) -> io::Result<Self> {
        let socket = UdpSocket::bind(SocketAddrV4::new(addr, port))?;
        socket.set_ttl(u32::from(GTSM_TTL))?;
        sys::enable_ttl_and_pktinfo(&socket)?;
        // Port 0 (tests): the one the kernel chose.
        let port = socket.local_addr()?.port();
        Ok(Self { socket, port })
    }

    /// The port it is bound to.
    #[must_use]
    pub const fn port(&self) -> u16 {
        self.port
    }

    /// Waits up to `timeout` for one datagram; `None` when none came.
    ///
    /// # Errors
    /// A receive error other than the timeout.
    pub fn receive(&self, buffer: &mut [u8], timeout: Duration) -> io::Result<Option<Received>> {
        self.socket
            .set_read_timeout(Some(timeout.max(Duration::from_micros(1))))?;
        match sys::recv_with_ttl(&self.socket, buffer, false) {
            Ok(received) => Ok(Some(received)),
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// One datagram if one is queued, without waiting; `None` when none is.
    ///
    /// # Errors
    /// A receive error.
    pub fn try_receive(&self, buffer: &mut [u8]) -> io::Result<Option<Received>> {
        match sys::recv_with_ttl(&self.socket, buffer, true) {
            Ok(received) => Ok(Some(received)),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Sends one message to `to` on the notification port.
    ///
    /// # Errors
    /// The send error.
    pub fn send(&self, to: Ipv4Addr, bytes: &[u8]) -> io::Result<()> {
        self.socket
            .send_to(bytes, SocketAddrV4::new(to, self.port))
            .map(drop)
    }
}

/// The socket's descriptor (for a control loop to wait on).
impl std::os::fd::AsRawFd for NotifySocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.socket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_datagram_comes_with_its_ttl_and_interface() {
        let receiver = NotifySocket::bind(0).unwrap();
        let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, receiver.port());
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let lo: u32 = std::fs::read_to_string("/sys/class/net/lo/ifindex")
            .map_or(1, |text| text.trim().parse().unwrap_or(1));
        let mut buffer = [0u8; 64];
        for ttl in [255u8, 64] {
            sender.set_ttl(u32::from(ttl)).unwrap();
            sender.send_to(b"hello", to).unwrap();
            let got = receiver
                .receive(&mut buffer, Duration::from_secs(2))
                .unwrap()
                .expect("a datagram");
            assert_eq!(&buffer[..got.len], b"hello");
            assert!(!got.truncated);
            assert_eq!(got.ttl, Some(ttl));
            assert_eq!(got.ifindex, Some(lo));
            assert_eq!(*got.from.ip(), Ipv4Addr::LOCALHOST);
        }
        // Nothing more: a timeout is `None`, not an error.
        assert_eq!(
            receiver
                .receive(&mut buffer, Duration::from_millis(10))
                .unwrap(),
            None
        );
        // A datagram longer than the buffer is marked truncated.
        sender.send_to(&[0u8; 100], to).unwrap();
        let got = receiver
            .receive(&mut buffer, Duration::from_secs(2))
            .unwrap()
            .unwrap();
        assert!(got.truncated);
        assert_eq!(got.len, 64);
    }
}
