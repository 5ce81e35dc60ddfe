//! The switch's local endpoints, hardened: the admin socket's server and a bounded HTTP server
//! for the Prometheus text endpoint ([`serve_http`]) — the same server that serves the lab's
//! live view ([`serve_routes`]: several `GET` routes, one of them a stream of server-sent
//! events).
//!
//! The admin socket's server is an [`event::Source`] ([`AdminServer`]): a switch's control loop
//! serves it beside everything else, without a thread per connection. The HTTP server serves
//! each connection on its own thread. Both serve at most [`Limits::max_clients`] at once (one
//! more is told it is busy and closed), and give each request one deadline for reading the
//! request and writing the reply together ([`Limits::deadline`]): a client that connects and
//! sends nothing, or trickles bytes, holds one slot until its deadline and never blocks the
//! others. Requests are read through a bound ([`admin::MAX_REQUEST_BYTES`], [`MAX_HTTP_HEAD`]),
//! never in full when longer.
//!
//! The admin socket is created mode 0600 and checks each peer's credentials (`SO_PEERCRED`):
//! root and the switch's own uid are [`Access::Privileged`] and may send every request; any
//! other peer (possible only when an operator opens the socket's mode or directory) is
//! [`Access::ReadOnly`] and may only read (`stats`, [`Request::needs_privilege`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::admin::{self, Reply, Request};
use crate::event::{self, Interest, Source};
use crate::sys;

/// How many clients an endpoint serves at once, and how long each may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is refused at once.
    pub max_clients: usize,
    /// Reading the request and writing the reply, together.
    pub deadline: Duration,
}

impl Default for Limits {
    /// 8 clients, 2 s each.
    fn default() -> Self {
        Self {
            max_clients: 8,
            deadline: Duration::from_secs(2),
        }
    }
}

/// What a peer may do on the admin socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Root or the switch's own uid: every request.
    Privileged,
    /// Anyone else: only requests that read.
    ReadOnly,
}

/// The credentials of a Unix socket peer (`SO_PEERCRED`: taken when it connected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

impl Peer {
    /// The credentials of the process at the other end of `stream`.
    ///
    /// # Errors
    /// The `getsockopt` error.
    pub fn of(stream: &UnixStream) -> io::Result<Self> {
        sys::peer_credentials(stream)
    }

    /// What this peer may do on a socket owned by `owner` (the switch's effective uid).
    #[must_use]
    pub const fn access(&self, owner: u32) -> Access {
        if self.uid == 0 || self.uid == owner {
            Access::Privileged
        } else {
            Access::ReadOnly
        }
    }
}

/// What an endpoint refused, counted since it started (shown by `stats`).
#[derive(Debug, Default)]
pub struct EndpointCounters {
    served: AtomicU64,
    busy: AtomicU64,
    timed_out: AtomicU64,
    oversized: AtomicU64,
    denied: AtomicU64,
}

/// A snapshot of [`EndpointCounters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointStatus {
    /// Requests answered (refusals included).
    pub served: u64,
    /// Connections refused because [`Limits::max_clients`] were being served.
    pub busy: u64,
    /// Connections closed at their deadline before a whole request arrived.
    pub timed_out: u64,
    /// Requests refused for their length.
    pub oversized: u64,
    /// Requests refused to an unprivileged peer.
    pub denied: u64,
}

/// What `stats` reports of the switch's endpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointsReport {
    /// The admin socket.
    pub admin: EndpointStatus,
    /// The metrics endpoint (zero when it is off).
    pub metrics: EndpointStatus,
}

impl EndpointCounters {
    /// The counters now.
    #[must_use]
    pub fn status(&self) -> EndpointStatus {
        EndpointStatus {
            served: self.served.load(Ordering::Relaxed),
            busy: self.busy.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            oversized: self.oversized.load(Ordering::Relaxed),
            denied: self.denied.load(Ordering::Relaxed),
        }
    }

    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Answers an admin request from a peer allowed to send it.
pub type AdminHandler = dyn Fn(Request) -> Reply + Send + Sync;

/// The admin socket's server as a [`Source`] of a control loop: it accepts, reads each
/// client's request line without blocking (through [`admin::MAX_REQUEST_BYTES`], never
/// further), answers it with the handler, and writes the reply as the socket takes it; each
/// client has [`Limits::deadline`] for all of that, and at most [`Limits::max_clients`] are
/// served at once (one more is told it is busy). A client that sends nothing holds one slot
/// until its deadline and delays no one: the loop never waits on a client.
pub struct AdminServer {
    listener: UnixListener,
    owner: u32,
    limits: Limits,
    counters: Arc<EndpointCounters>,
    handler: Arc<AdminHandler>,
    clients: Vec<AdminClient>,
}

impl std::fmt::Debug for AdminServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminServer")
            .field("clients", &self.clients.len())
            .finish_non_exhaustive()
    }
}

/// One connection of the admin socket.
struct AdminClient {
    stream: UnixStream,
    access: Access,
    deadline: Instant,
    /// The request so far (at most `MAX_REQUEST_BYTES + 1` bytes).
    request: Vec<u8>,
    /// The reply, once answered, and how much of it is written.
    reply: Option<(Vec<u8>, usize)>,
}

/// What became of a client after a read or a write.
enum ClientState {
    Open,
    Done,
}

impl AdminServer {
    /// Binds `path` (mode 0600). `handler` answers what each peer's [`Access`] allows.
    ///
    /// # Errors
    /// When the socket cannot be bound or its mode set.
    pub fn bind(
        path: &Path,
        limits: Limits,
        counters: Arc<EndpointCounters>,
        handler: Arc<AdminHandler>,
    ) -> io::Result<Self> {
        let listener = bind_private(path)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            owner: sys::effective_uid(),
            limits,
            counters,
            handler,
            clients: Vec::new(),
        })
    }

    fn accept(&mut self, now: Instant) {
        while let Ok((stream, _)) = self.listener.accept() {
            if self.clients.len() >= self.limits.max_clients
                || stream.set_nonblocking(true).is_err()
            {
                EndpointCounters::count(&self.counters.busy);
                // Best effort: a short line fits any socket buffer.
                let _ = writeln!(&stream, "{}", Reply::Error("busy".into()).to_line());
                continue;
            }
            let access = Peer::of(&stream).map_or(Access::ReadOnly, |peer| peer.access(self.owner));
            self.clients.push(AdminClient {
                stream,
                access,
                deadline: now + self.limits.deadline,
                request: Vec::new(),
                reply: None,
            });
        }
    }

    /// Reads what client `client` sent; answers once the line is whole (or too long, or the
    /// peer ended it).
    fn read(&self, client: &mut AdminClient) -> ClientState {
        let mut chunk = [0u8; 1024];
        let limit = admin::MAX_REQUEST_BYTES + 1;
        loop {
            let room = (limit - client.request.len()).min(chunk.len());
            match (&client.stream).read(&mut chunk[..room]) {
                Ok(0) => break,
                Ok(n) => {
                    client.request.extend_from_slice(&chunk[..n]);
                    if client.request.contains(&b'\n') || client.request.len() >= limit {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ClientState::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ClientState::Done,
            }
        }
        let reply = match admin::read_request(client.request.as_slice()) {
            Ok(None) | Err(_) => return ClientState::Done,
            Ok(Some(Err(refusal))) => {
                EndpointCounters::count(&self.counters.oversized);
                refusal
            }
            Ok(Some(Ok(line))) => match Request::parse(&line) {
                Ok(request) if request.needs_privilege() && client.access != Access::Privileged => {
                    EndpointCounters::count(&self.counters.denied);
                    Reply::Error(format!(
                        "`{}` needs root or the switch's user",
                        request.name()
                    ))
                }
                Ok(request) => (self.handler)(request),
                Err(refusal) => refusal,
            },
        };
        EndpointCounters::count(&self.counters.served);
        let mut line = reply.to_line().into_bytes();
        line.push(b'\n');
        client.reply = Some((line, 0));
        Self::write(client)
    }

    /// Writes what the socket takes of the reply.
    fn write(client: &mut AdminClient) -> ClientState {
        let Some((reply, written)) = client.reply.as_mut() else {
            return ClientState::Open;
        };
        while *written < reply.len() {
            match (&client.stream).write(&reply[*written..]) {
                Ok(0) => return ClientState::Done,
                Ok(n) => *written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ClientState::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ClientState::Done,
            }
        }
        ClientState::Done
    }
}

impl Source for AdminServer {
    fn interests(&self, out: &mut Vec<(RawFd, Interest)>) {
        out.push((self.listener.as_raw_fd(), Interest::Read));
        for client in &self.clients {
            let interest = if client.reply.is_some() {
                Interest::Write
            } else {
                Interest::Read
            };
            out.push((client.stream.as_raw_fd(), interest));
        }
    }

    fn on_ready(&mut self, fd: RawFd, now: Instant) {
        if fd == self.listener.as_raw_fd() {
            self.accept(now);
            return;
        }
        let Some(at) = self.clients.iter().position(|c| c.stream.as_raw_fd() == fd) else {
            return;
        };
        let mut client = self.clients.swap_remove(at);
        let state = if client.reply.is_some() {
            Self::write(&mut client)
        } else {
            self.read(&mut client)
        };
        if matches!(state, ClientState::Open) {
            self.clients.push(client);
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.clients.iter().map(|c| c.deadline).min()
    }

    fn on_timer(&mut self, now: Instant) {
        let counters = &self.counters;
        self.clients.retain(|client| {
            let late = client.deadline <= now;
            if late && client.reply.is_none() {
                EndpointCounters::count(&counters.timed_out);
            }
            !late
        });
    }
}

/// Binds `path` (mode 0600) and serves admin requests ([`AdminServer`]) on a thread of its own
/// until `stop` is set (looked at after each connection, and every second).
///
/// # Errors
/// When the socket cannot be bound or its mode set, or the thread not started.
pub fn serve_admin(
    path: &Path,
    limits: Limits,
    counters: Arc<EndpointCounters>,
    handler: Arc<AdminHandler>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    let server = AdminServer::bind(path, limits, counters, handler)?;
    event::spawn("ofan-admin", Box::new(server), stop, Duration::from_secs(1)).map(drop)
}

/// Binds a Unix socket at `path` readable and writable by its owner only. The mode is set right
/// after the bind (a umask of 0o177 would be process-wide); in between, the socket has the
/// process's umask mode (0755 under the usual 022), which gives no one else the write
/// permission a connect needs.
fn bind_private(path: &Path) -> io::Result<UnixListener> {
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// The longest HTTP request head the metrics endpoint reads (request line and headers).
pub const MAX_HTTP_HEAD: usize = 8192;

/// Renders the body of `GET /metrics`.
pub type MetricsRender = dyn Fn() -> String + Send + Sync;

/// Serves `GET /metrics` on `listener` on a thread until `stop` is set, each connection on its
/// own thread within `limits`. `HTTP/1.0`: one request per connection. (The switch's endpoint:
/// [`serve_routes`] with one route.)
///
/// # Errors
/// When the listener cannot be set up or the thread not started.
pub fn serve_http(
    listener: TcpListener,
    limits: Limits,
    counters: Arc<EndpointCounters>,
    render: Arc<MetricsRender>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    let route = move |path: &str| match path {
        "/metrics" => HttpReply::ok(PROMETHEUS_TEXT, render()),
        _ => HttpReply::not_found("try GET /metrics\n"),
    };
    serve_routes(listener, limits, counters, Arc::new(route), stop)
}

/// The content type of the Prometheus text exposition format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// What a route answers: a whole body, or a stream of server-sent events.
pub enum HttpReply {
    /// A status line's status, a content type and the whole body.
    Body {
        /// E.g. `200 OK`.
        status: &'static str,
        /// E.g. `text/html; charset=utf-8`.
        content_type: &'static str,
        /// The body.
        body: Vec<u8>,
    },
    /// `text/event-stream`: the function sends events through the [`EventSink`] until it
    /// returns (its client went away, or the server stops).
    Events(Box<dyn FnOnce(&mut EventSink<'_>) + Send>),
}

impl HttpReply {
    /// `200 OK` with `body`.
    #[must_use]
    pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Self::Body {
            status: "200 OK",
            content_type,
            body: body.into(),
        }
    }

    /// `404 Not Found` with a plain-text hint.
    #[must_use]
    pub fn not_found(hint: &str) -> Self {
        Self::Body {
            status: "404 Not Found",
            content_type: "text/plain; charset=utf-8",
            body: hint.as_bytes().to_vec(),
        }
    }
}

impl std::fmt::Debug for HttpReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Body {
                status,
                content_type,
                body,
            } => f
                .debug_struct("Body")
                .field("status", status)
                .field("content_type", content_type)
                .field("len", &body.len())
                .finish(),
            Self::Events(_) => f.write_str("Events"),
        }
    }
}

/// Answers `GET path` (the request target without its query string).
pub type HttpRoutes = dyn Fn(&str) -> HttpReply + Send + Sync;

/// Where a [`HttpReply::Events`] stream writes its events. Each event must be written within
/// the endpoint's deadline (a client that stops reading is cut off there); the stream itself
/// lasts as long as its client reads, holding one of the endpoint's client slots.
#[derive(Debug)]
pub struct EventSink<'a> {
    stream: &'a TcpStream,
    deadline: Duration,
    stop: &'a AtomicBool,
}

impl EventSink<'_> {
    /// Sends one event of type `event` with `data` (split into `data:` lines at newlines).
    ///
    /// # Errors
    /// The client went away or did not read within the deadline.
    pub fn send(&mut self, event: &str, data: &str) -> io::Result<()> {
        let mut text = String::with_capacity(data.len() + event.len() + 16);
        text.push_str("event: ");
        text.push_str(event);
        text.push('\n');
        for line in data.split('\n') {
            text.push_str("data: ");
            text.push_str(line);
            text.push('\n');
        }
        text.push('\n');
        self.stream.set_write_timeout(Some(self.deadline))?;
        let mut stream = self.stream;
        stream.write_all(text.as_bytes())?;
        stream.flush()
    }

    /// Whether the server is stopping: the stream should end.
    #[must_use]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Serves `GET` requests on `listener` on a thread until `stop` is set, each connection on its
/// own thread within `limits`: `routes` answers each request's path. `HTTP/1.0`: one request
/// per connection; an event stream keeps its connection (and its client slot) until its
/// client leaves.
///
/// # Errors
/// When the listener cannot be set up or the thread not started.
pub fn serve_routes(
    listener: TcpListener,
    limits: Limits,
    counters: Arc<EndpointCounters>,
    routes: Arc<HttpRoutes>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    // Non-blocking accept with a short sleep, so that `stop` ends the thread.
    listener.set_nonblocking(true)?;
    let active = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("ofan-http".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                };
                let _ = stream.set_nonblocking(false);
                let Some(slot) = Slot::take(&active, limits.max_clients) else {
                    EndpointCounters::count(&counters.busy);
                    let _ = stream.set_write_timeout(Some(limits.deadline));
                    let _ = respond(&stream, "503 Service Unavailable", "text/plain", b"busy\n");
                    continue;
                };
                let (client_counters, routes, client_stop) = (
                    Arc::clone(&counters),
                    Arc::clone(&routes),
                    Arc::clone(&stop),
                );
                let spawned = std::thread::Builder::new()
                    .name("ofan-http-client".into())
                    .spawn(move || {
                        let _slot = slot;
                        answer_http(&stream, limits, &client_counters, &*routes, &client_stop);
                    });
                if spawned.is_err() {
                    EndpointCounters::count(&counters.busy);
                }
            }
        })?;
    Ok(())
}

/// The path of a `GET` request head (`GET /a?b HTTP/1.1` → `/a`), `None` for another method
/// or a malformed request line.
#[must_use]
pub fn get_path(head: &[u8]) -> Option<&str> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end_matches('\r');
    let mut words = line.split(' ');
    if words.next()? != "GET" {
        return None;
    }
    let target = words.next()?;
    let path = target.split('?').next().unwrap_or(target);
    path.starts_with('/').then_some(path)
}

fn answer_http(
    stream: &TcpStream,
    limits: Limits,
    counters: &EndpointCounters,
    routes: &HttpRoutes,
    stop: &AtomicBool,
) {
    let deadline = Instant::now() + limits.deadline;
    let reader = DeadlineReader {
        stream,
        deadline,
        set: |s: &TcpStream, t| s.set_read_timeout(t),
    };
    let head = match read_http_head(reader) {
        Ok(Some(head)) => head,
        Ok(None) => {
            EndpointCounters::count(&counters.oversized);
            let _ = stream.set_write_timeout(Some(limits.deadline));
            let _ = respond(
                stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"",
            );
            // Closing with unread bytes would reset the connection and could destroy the
            // reply: end the sending side, then discard a bounded amount until the deadline.
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let rest = DeadlineReader {
                stream,
                deadline,
                set: |s: &TcpStream, t| s.set_read_timeout(t),
            };
            let _ = io::copy(&mut rest.take(1 << 16), &mut io::sink());
            return;
        }
        Err(_) => {
            EndpointCounters::count(&counters.timed_out);
            return;
        }
    };
    let reply = match get_path(&head) {
        Some(path) => routes(path),
        None => HttpReply::Body {
            status: "405 Method Not Allowed",
            content_type: "text/plain",
            body: b"only GET\n".to_vec(),
        },
    };
    EndpointCounters::count(&counters.served);
    let remaining = deadline.saturating_duration_since(Instant::now());
    if stream
        .set_write_timeout(Some(remaining.max(Duration::from_millis(1))))
        .is_err()
    {
        return;
    }
    match reply {
        HttpReply::Body {
            status,
            content_type,
            body,
        } => {
            let _ = respond(stream, status, content_type, &body);
        }
        HttpReply::Events(events) => {
            let mut writer = stream;
            let head = "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\
                        Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
            if writer.write_all(head.as_bytes()).is_ok() {
                let mut sink = EventSink {
                    stream,
                    deadline: limits.deadline,
                    stop,
                };
                events(&mut sink);
            }
        }
    }
}

/// Reads an HTTP request head up to its blank line (or the peer's end): `Ok(None)` when it is
/// longer than [`MAX_HTTP_HEAD`].
///
/// # Errors
/// The reader's errors, a deadline among them.
pub fn read_http_head(reader: impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut reader = BufReader::new(reader.take(MAX_HTTP_HEAD as u64 + 1));
    let mut head = Vec::new();
    loop {
        let before = head.len();
        reader.read_until(b'\n', &mut head)?;
        if head.len() > MAX_HTTP_HEAD {
            return Ok(None);
        }
        if matches!(&head[before..], b"" | b"\n" | b"\r\n") {
            return Ok(Some(head));
        }
    }
}

fn respond(
    mut stream: &TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.0 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)
}

/// One of an endpoint's client slots, given back on drop.
#[derive(Debug)]
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(active: &Arc<AtomicUsize>, max: usize) -> Option<Self> {
        active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Self(Arc::clone(active)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A reader that sets the stream's read timeout to what is left of one deadline before each
/// read, so that a request cannot take longer than the deadline however its bytes trickle in.
struct DeadlineReader<'a, S, F> {
    stream: &'a S,
    deadline: Instant,
    set: F,
}

impl<S, F> Read for DeadlineReader<'_, S, F>
where
    for<'s> &'s S: Read,
    F: Fn(&S, Option<Duration>) -> io::Result<()>,
{
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        (self.set)(self.stream, Some(remaining))?;
        let mut stream = self.stream;
        stream.read(buf)
    }
}

#[cfg(test)]
mod tests;
