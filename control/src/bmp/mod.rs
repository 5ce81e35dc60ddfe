//! The switch's BMP station (RFC 7854): the local BGP daemon reports what it receives, and the
//! station turns it into the path table ([`crate::paths`]).
//!
//! FRR's bgpd (`-M bmp`) connects to the station (`bmp connect 127.0.0.1 port 11019`) and
//! mirrors every BGP message it receives (`bmp mirror`); [`rib::Rib`] keeps each peer's paths and
//! [`Station`] publishes the learned table with one atomic swap after every batch of messages,
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::paths::LearnedPaths;
use rib::{Rib, RibStatus};

/// The largest BMP message accepted (a BGP message is at most 65 535 bytes, RFC 8654, plus
/// BMP headers and TLVs); a longer length means a corrupt stream.
pub const MAX_MESSAGE: usize = 1 << 20;
/// How often the station checks for a stop request, a new connection and new bytes.
const POLL: Duration = Duration::from_millis(20);

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

/// A running BMP station.
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
    /// The address cannot be bound.
    pub fn start(addr: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let status = Arc::new(Mutex::new(StationStatus {
            listen: listener.local_addr()?.to_string(),
            ..StationStatus::default()
        }));
        let learned = Arc::new(ArcSwap::from_pointee(LearnedPaths::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut serving = Serving {
            listener,
            stop: Arc::clone(&stop),
            status: Arc::clone(&status),
            learned: Arc::clone(&learned),
        };
        let thread = std::thread::Builder::new()
            .name("bmp".into())
            .spawn(move || serving.run())?;
        Ok(Self {
            stop,
            thread: Some(thread),
            status,
            learned,
        })
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

    /// Stops the thread and closes the socket.
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

/// The station's thread.
struct Serving {
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    status: Arc<Mutex<StationStatus>>,
    learned: Arc<ArcSwap<LearnedPaths>>,
}

/// One daemon's connection.
struct Session {
    stream: TcpStream,
    buffer: Vec<u8>,
    rib: Rib,
    /// The session has monitored a peer: its table is the current one from then on.
    current: bool,
}

impl Serving {
    fn run(&mut self) {
        let mut session: Option<Session> = None;
        let mut chunk = vec![0_u8; 64 * 1024];
        while !self.stop.load(Ordering::Relaxed) {
            if let Ok((stream, peer)) = self.listener.accept() {
                tracing::info!(%peer, "BMP session from the routing daemon");
                if let Some(new) = Self::open(stream) {
                    session = Some(new);
                    self.update_status(|s| {
                        s.connections += 1;
                        s.connected = true;
                    });
                    self.publish(session.as_mut());
                }
            }
            let Some(current) = session.as_mut() else {
                std::thread::sleep(POLL);
                continue;
            };
            match current.stream.read(&mut chunk) {
                Ok(0) => {
                    tracing::warn!("BMP session closed by the routing daemon");
                    session = None;
                    self.update_status(|s| s.connected = false);
                }
                Ok(n) => {
                    current.buffer.extend_from_slice(&chunk[..n]);
                    match split_messages(&mut current.buffer) {
                        Ok(messages) => {
                            for message in messages {
                                if let Err(error) = current.rib.handle(message) {
                                    tracing::debug!(%error, "BMP message ignored");
                                }
                            }
                            self.publish(Some(current));
                        }
                        Err(error) => {
                            tracing::warn!(%error, "not a BMP stream: connection closed");
                            session = None;
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
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(error) => {
                    tracing::warn!(%error, "BMP session failed");
                    session = None;
                    self.update_status(|s| s.connected = false);
                }
            }
        }
    }

    fn open(stream: TcpStream) -> Option<Session> {
        stream.set_nonblocking(false).ok()?;
        stream.set_read_timeout(Some(POLL)).ok()?;
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
    fn publish(&self, session: Option<&mut Session>) {
        if let Some(session) = session {
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
