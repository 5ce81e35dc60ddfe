//! The switch's BMP station (RFC 7854): the local BGP daemon reports what it receives, and the
//! station turns it into the path table ([`crate::paths`]).
//!
//! FRR's bgpd (`-M bmp`) connects to the station (`bmp connect 127.0.0.1 port 11019`) and
//! mirrors every BGP message it receives (`bmp mirror`); [`rib::Rib`] keeps each peer's paths and
//! [`Station`] — a source of the switch's control loop ([`StationSource`], [`crate::event`]) —
//! publishes the learned table with one atomic swap after every batch of messages,
//! for `stats` and the adaptive-routing policy to read without waiting. One daemon is served at a
//! time: a new connection (the daemon restarted) replaces the old one and starts from an empty
//! table; when the daemon goes away the last table stays, marked disconnected.
//!
//! BIRD 2.0.12 (Debian 12) has no BMP; with it, and with static routing, the switch takes its
//! path information from the topology plan instead ([`crate::paths::LearnedPaths::from_plan`]).

pub mod rib;
#[cfg(test)]
mod tests;

use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::event::{self, Interest, Source};
use crate::paths::LearnedPaths;
use rib::{Rib, RibStatus};

/// The largest BMP message accepted (a BGP message is at most 65 535 bytes, RFC 8654, plus
/// BMP headers and TLVs); a longer length means a corrupt stream.
pub const MAX_MESSAGE: usize = 1 << 20;
/// How often a station on a thread of its own ([`Station::start`]) looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// The byte stream is not BMP: the connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A common header with another version.
    #[error("BMP version {0} in a common header, expected 3")]
    Version(u8),
    /// A length below the header's or above [`MAX_MESSAGE`].
    #[error("BMP message length {0} out of bounds")]
    Length(u32),
}

/// Takes every complete BMP message off the front of `buffer` (a partial one stays).
///
/// # Errors
/// A header that is not BMP version 3 or has an impossible length: the stream cannot be
/// resynchronised.
pub fn split_messages(buffer: &mut Vec<u8>) -> Result<Vec<Bytes>, FrameError> {
    let mut messages = Vec::new();
    let mut at = 0;
    while buffer.len() - at >= 6 {
        let header = &buffer[at..at + 6];
        if header[0] != rib::VERSION {
            return Err(FrameError::Version(header[0]));
        }
        let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]);
        let size = len as usize;
        if !(6..=MAX_MESSAGE).contains(&size) {
            return Err(FrameError::Length(len));
        }
        if buffer.len() - at < size {
            break;
        }
        messages.push(Bytes::copy_from_slice(&buffer[at..at + size]));
        at += size;
    }
    buffer.drain(..at);
    Ok(messages)
}

/// The station's state, for `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StationStatus {
    /// The address it listens on.
    pub listen: String,
    /// A daemon is connected.
    pub connected: bool,
    /// Connections accepted so far.
    pub connections: u64,
    /// Connections closed because the stream was not BMP.
    pub bad_streams: u64,
    /// The current (or last) session.
    pub session: RibStatus,
}

impl StationStatus {
    /// Whether every monitored peer's paths were all seen (see [`rib`]).
    #[must_use]
    pub fn complete(&self) -> bool {
        self.connected && self.session.peers.iter().all(|peer| peer.complete)
    }
}

/// A running BMP station: its status and table (its [`StationSource`] is in a control loop).
#[derive(Debug)]
pub struct Station {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    status: Arc<Mutex<StationStatus>>,
    learned: Arc<ArcSwap<LearnedPaths>>,
}

impl Station {
    /// Listens on `addr` (bound before this returns, so a daemon started next finds it) and
    /// serves daemons on a thread of its own.
    ///
    /// # Errors
    /// The address cannot be bound, or the thread not started.
    pub fn start(addr: SocketAddr) -> io::Result<Self> {
        let (mut station, source) = Self::open(addr)?;
        station.thread = Some(event::spawn(
            "bmp",
            Box::new(source),
            Arc::clone(&station.stop),
            STOP_CHECK,
        )?);
        Ok(station)
    }

    /// Listens on `addr` (in the calling thread's network namespace) and returns the station
    /// with its [`StationSource`], for the caller's control loop to drive; the station stops
    /// when the loop drops the source.
    ///
    /// # Errors
    /// The address cannot be bound.
    pub fn open(addr: SocketAddr) -> io::Result<(Self, StationSource)> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let status = Arc::new(Mutex::new(StationStatus {
            listen: listener.local_addr()?.to_string(),
            ..StationStatus::default()
        }));
        let learned = Arc::new(ArcSwap::from_pointee(LearnedPaths::default()));
        let source = StationSource {
            listener,
            session: None,
            chunk: vec![0_u8; 64 * 1024],
            status: Arc::clone(&status),
            learned: Arc::clone(&learned),
        };
        Ok((
            Self {
                stop: Arc::new(AtomicBool::new(false)),
                thread: None,
                status,
                learned,
            },
            source,
        ))
    }

    /// The learned table, as the station last published it.
    #[must_use]
    pub fn learned(&self) -> Arc<ArcSwap<LearnedPaths>> {
        Arc::clone(&self.learned)
    }

    /// A handle on the station's status.
    #[must_use]
    pub fn status_handle(&self) -> Arc<Mutex<StationStatus>> {
        Arc::clone(&self.status)
    }

    /// Stops its thread, if it has one, which closes the socket ([`Self::start`]).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Station {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The station's control-loop source: the listening socket and the daemon's connection.
pub struct StationSource {
    listener: TcpListener,
    session: Option<Session>,
    chunk: Vec<u8>,
    status: Arc<Mutex<StationStatus>>,
    learned: Arc<ArcSwap<LearnedPaths>>,
}

impl std::fmt::Debug for StationSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StationSource")
            .field("connected", &self.session.is_some())
            .finish_non_exhaustive()
    }
}

impl Source for StationSource {
    fn interests(&self, out: &mut Vec<(RawFd, Interest)>) {
        out.push((self.listener.as_raw_fd(), Interest::Read));
        if let Some(session) = &self.session {
            out.push((session.stream.as_raw_fd(), Interest::Read));
        }
    }

    fn on_ready(&mut self, fd: RawFd, _now: Instant) {
        if fd == self.listener.as_raw_fd() {
            self.accept();
        } else {
            self.read();
        }
    }
}

/// One daemon's connection.
struct Session {
    stream: TcpStream,
    buffer: Vec<u8>,
    rib: Rib,
    /// The session has monitored a peer: its table is the current one from then on.
    current: bool,
}

impl StationSource {
    /// A new connection replaces the session (the daemon restarted).
    fn accept(&mut self) {
        while let Ok((stream, peer)) = self.listener.accept() {
            tracing::info!(%peer, "BMP session from the routing daemon");
            // Opened before the old one closes: a descriptor number is never reused within a
            // call of the loop (see `event::Source`).
            if let Some(new) = Self::open(stream) {
                self.session = Some(new);
                self.update_status(|s| {
                    s.connections += 1;
                    s.connected = true;
                });
                self.publish();
            }
        }
    }

    /// Reads what the daemon sent (one chunk: the loop calls again while more is queued).
    fn read(&mut self) {
        let Some(current) = self.session.as_mut() else {
            return;
        };
        match (&current.stream).read(&mut self.chunk) {
            Ok(0) => {
                tracing::warn!("BMP session closed by the routing daemon");
                self.session = None;
                self.update_status(|s| s.connected = false);
            }
            Ok(n) => {
                current.buffer.extend_from_slice(&self.chunk[..n]);
                match split_messages(&mut current.buffer) {
                    Ok(messages) => {
                        for message in messages {
                            if let Err(error) = current.rib.handle(message) {
                                tracing::debug!(%error, "BMP message ignored");
                            }
                        }
                        self.publish();
                    }
                    Err(error) => {
                        tracing::warn!(%error, "not a BMP stream: connection closed");
                        self.session = None;
                        self.update_status(|s| {
                            s.bad_streams += 1;
                            s.connected = false;
                        });
                    }
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(error) => {
                tracing::warn!(%error, "BMP session failed");
                self.session = None;
                self.update_status(|s| s.connected = false);
            }
        }
    }

    fn open(stream: TcpStream) -> Option<Session> {
        stream.set_nonblocking(true).ok()?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Some(Session {
            stream,
            buffer: Vec::new(),
            rib: Rib::new(now),
            current: false,
        })
    }

    /// Publishes the session's table and status. A new session's table replaces the last one
    /// only once it monitors a peer: a restarted daemon's station keeps showing the paths of
    /// the previous session (which a graceful restart keeps forwarding by) until its sessions
    /// come back.
    fn publish(&mut self) {
        if let Some(session) = self.session.as_mut() {
            let rib = session.rib.status();
            session.current |= !rib.peers.is_empty();
            if session.current {
                self.learned.store(Arc::new(session.rib.learned()));
            }
            self.update_status(|s| s.session = rib);
        }
    }

    fn update_status(&self, change: impl FnOnce(&mut StationStatus)) {
        if let Ok(mut status) = self.status.lock() {
            change(&mut status);
        }
    }
}
