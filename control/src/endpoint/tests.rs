//! The endpoints on real sockets in a temporary directory (no namespace, no root needed; run
//! as root, the unprivileged peer is a forked child that drops to `nobody`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::admin::{Client, MAX_REQUEST_BYTES};

/// A temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ofan-endpoint-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const LIMITS: Limits = Limits {
    max_clients: 8,
    deadline: Duration::from_millis(500),
};

/// An admin server whose `stats` answers `{"ok":true}` (as `reset` does); the stop flag ends
/// it at its next connection.
fn admin_server(dir: &TempDir) -> (PathBuf, Arc<EndpointCounters>, Arc<AtomicBool>) {
    let path = dir.0.join("admin.sock");
    let counters = Arc::new(EndpointCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    serve_admin(
        &path,
        LIMITS,
        Arc::clone(&counters),
        Arc::new(|_| Reply::Done),
        Arc::clone(&stop),
    )
    .unwrap();
    (path, counters, stop)
}

fn stop_admin(path: &Path, stop: &AtomicBool) {
    stop.store(true, Ordering::Relaxed);
    let _ = UnixStream::connect(path);
}

fn exchange(path: &Path, request: &[u8]) -> String {
    let mut stream = UnixStream::connect(path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // A refusal (busy) may come and the socket close before the request is written.
    let _ = stream.write_all(request);
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

#[test]
fn the_admin_socket_is_private_and_answers_its_owner() {
    let dir = TempDir::new("mode");
    let (path, counters, stop) = admin_server(&dir);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    let client = Client::new(&path);
    assert!(client.reset().is_ok(), "the owner may reset");
    assert_eq!(exchange(&path, b"stats\n"), "{\"ok\":true}\n");
    assert_eq!(counters.status().served, 2);
    assert_eq!(counters.status().denied, 0);
    stop_admin(&path, &stop);
}

#[test]
fn peers_are_privileged_by_uid() {
    let peer = |uid| Peer {
        pid: 1,
        uid,
        gid: 1,
    };
    assert_eq!(peer(0).access(1000), Access::Privileged);
    assert_eq!(peer(1000).access(1000), Access::Privileged);
    assert_eq!(peer(65534).access(1000), Access::ReadOnly);
    assert!(Request::Reset.needs_privilege());
    assert!(!Request::Stats.needs_privilege());
    let (a, _b) = UnixStream::pair().unwrap();
    let me = Peer::of(&a).unwrap();
    assert_eq!(me.uid, sys::effective_uid());
    assert_eq!(me.pid, std::process::id() as i32);
}

#[test]
fn a_long_request_is_refused_without_being_read_in_full() {
    let dir = TempDir::new("long");
    let (path, counters, stop) = admin_server(&dir);
    let stream = UnixStream::connect(&path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // 1 MiB without a newline: the server answers after MAX_REQUEST_BYTES + 1 bytes, while the
    // client is still writing (the socket buffer holds far less than the whole).
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let chunk = [b'a'; 4096];
            let mut written = 0usize;
            while written < 1 << 20 {
                match stream.write(&chunk) {
                    Ok(n) => written += n,
                    Err(_) => break,
                }
            }
            written
        })
    };
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    assert_eq!(
        line,
        format!("{{\"error\":\"request longer than {MAX_REQUEST_BYTES} bytes\"}}\n")
    );
    drop(stream);
    let written = writer.join().unwrap();
    assert!(written < 1 << 20, "the server read all {written} bytes");
    assert_eq!(counters.status().oversized, 1);
    stop_admin(&path, &stop);
}

#[test]
fn a_silent_client_does_not_block_others_and_is_cut_at_its_deadline() {
    let dir = TempDir::new("silent");
    let (path, counters, stop) = admin_server(&dir);
    let silent = UnixStream::connect(&path).unwrap();
    // A client that trickles one byte at a time never gets past the deadline either.
    let mut trickle = UnixStream::connect(&path).unwrap();
    let started = Instant::now();
    for _ in 0..3 {
        assert_eq!(exchange(&path, b"stats\n"), "{\"ok\":true}\n");
    }
    assert!(
        started.elapsed() < LIMITS.deadline,
        "stats waited for the silent client: {:?}",
        started.elapsed()
    );
    let mut cut = false;
    for _ in 0..20 {
        if trickle.write_all(b"s").is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(cut, "a trickling client outlived its deadline");
    let mut rest = Vec::new();
    let mut silent = silent;
    silent
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    assert_eq!(
        silent.read_to_end(&mut rest).unwrap(),
        0,
        "closed, no reply"
    );
    assert_eq!(counters.status().timed_out, 2);
    stop_admin(&path, &stop);
}

#[test]
fn clients_beyond_the_limit_are_told_busy() {
    let dir = TempDir::new("busy");
    let (path, counters, stop) = admin_server(&dir);
    let held: Vec<UnixStream> = (0..LIMITS.max_clients)
        .map(|_| UnixStream::connect(&path).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(exchange(&path, b"stats\n"), "{\"error\":\"busy\"}\n");
    assert_eq!(counters.status().busy, 1);
    drop(held);
    // The slots come back as the held clients' threads see them close.
    let deadline = Instant::now() + Duration::from_secs(3);
    while exchange(&path, b"stats\n") != "{\"ok\":true}\n" {
        assert!(Instant::now() < deadline, "slots never came back");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop_admin(&path, &stop);
}

/// As root: a child process that becomes `nobody` may read (`stats`) but not `reset`, once the
/// socket's mode lets it connect at all.
#[test]
fn an_unprivileged_peer_may_only_read() {
    if sys::effective_uid() != 0 {
        eprintln!("skipped: needs root to act as another user");
        return;
    }
    let dir = TempDir::new("nobody");
    let (path, counters, stop) = admin_server(&dir);
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    // With the mode as created, `nobody` cannot even connect.
    let refused = as_nobody(&path, b"stats\n");
    assert_eq!(
        refused, "connect: PermissionDenied",
        "mode 0600 must keep others out"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(as_nobody(&path, b"stats\n"), "{\"ok\":true}\n");
    assert_eq!(
        as_nobody(&path, b"reset\n"),
        "{\"error\":\"`reset` needs root or the switch's user\"}\n"
    );
    assert_eq!(counters.status().denied, 1);
    stop_admin(&path, &stop);
}

/// Sends `request` from a forked child running as uid/gid 65534; returns the reply line or
/// what failed.
fn as_nobody(path: &Path, request: &[u8]) -> String {
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "endpoint::tests::nobody_client",
            "--nocapture",
            "--quiet",
        ])
        .env("OFAN_NOBODY_SOCKET", path)
        .env(
            "OFAN_NOBODY_REQUEST",
            String::from_utf8_lossy(request).as_ref(),
        )
        .output()
        .expect("setpriv (util-linux)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout
        .lines()
        .find_map(|line| line.strip_prefix("reply: "))
        .map_or_else(
            || {
                format!(
                    "no reply: {stdout} {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            },
            |reply| reply.replace("\\n", "\n"),
        )
}

/// The child side of [`as_nobody`]; does nothing when run as a normal test.
#[test]
fn nobody_client() {
    let (Some(path), Some(request)) = (
        std::env::var_os("OFAN_NOBODY_SOCKET"),
        std::env::var("OFAN_NOBODY_REQUEST").ok(),
    ) else {
        return;
    };
    let reply = match UnixStream::connect(&path) {
        Err(e) => format!("connect: {:?}", e.kind()),
        Ok(mut stream) => {
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            stream.write_all(request.as_bytes()).unwrap();
            let mut line = String::new();
            BufReader::new(stream).read_line(&mut line).unwrap();
            line
        }
    };
    println!("reply: {}", reply.replace('\n', "\\n"));
}

fn metrics_server() -> (SocketAddr, Arc<EndpointCounters>, Arc<AtomicBool>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let counters = Arc::new(EndpointCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    serve_http(
        listener,
        LIMITS,
        Arc::clone(&counters),
        Arc::new(|| "ofan_up 1\n".to_owned()),
        Arc::clone(&stop),
    )
    .unwrap();
    (addr, counters, stop)
}

fn get(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
fn metrics_are_served_while_idle_clients_hold_connections() {
    let (addr, counters, stop) = metrics_server();
    let idle: Vec<TcpStream> = (0..LIMITS.max_clients - 1)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    let started = Instant::now();
    let reply = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.0 200 OK\r\n"), "{reply}");
    assert!(reply.ends_with("\r\n\r\nofan_up 1\n"), "{reply}");
    assert!(
        started.elapsed() < LIMITS.deadline,
        "{:?}",
        started.elapsed()
    );
    let reply = get(addr, b"GET / HTTP/1.0\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.0 404"), "{reply}");
    // The idle ones are closed at their deadline.
    for mut stream in idle {
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut rest = Vec::new();
        assert_eq!(stream.read_to_end(&mut rest).unwrap_or(0), 0);
    }
    assert_eq!(counters.status().timed_out, LIMITS.max_clients as u64 - 1);
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn metrics_refuse_long_heads_and_too_many_clients() {
    let (addr, counters, stop) = metrics_server();
    let mut long = b"GET /metrics HTTP/1.0\r\nX: ".to_vec();
    long.extend(std::iter::repeat_n(b'a', MAX_HTTP_HEAD));
    let reply = get(addr, &long);
    assert!(reply.starts_with("HTTP/1.0 431"), "{reply}");
    assert_eq!(counters.status().oversized, 1);
    let held: Vec<TcpStream> = (0..LIMITS.max_clients)
        .map(|_| TcpStream::connect(addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    // Refused at once, before its request is read (sending one could reset the connection
    // before the reply is read: the server closes with the request unread).
    let reply = get(addr, b"");
    assert!(reply.starts_with("HTTP/1.0 503"), "{reply}");
    assert_eq!(counters.status().busy, 1);
    drop(held);
    stop.store(true, Ordering::Relaxed);
}

#[test]
fn http_heads_are_read_to_the_blank_line_and_bounded() {
    let head = read_http_head(&b"GET /metrics HTTP/1.0\r\n\r\nbody"[..]).unwrap();
    assert_eq!(head.as_deref(), Some(&b"GET /metrics HTTP/1.0\r\n\r\n"[..]));
    let long = vec![b'a'; MAX_HTTP_HEAD + 10];
    assert_eq!(read_http_head(&long[..]).unwrap(), None);
    assert_eq!(read_http_head(&b""[..]).unwrap().as_deref(), Some(&b""[..]));
}

#[test]
fn get_paths_lose_their_query_and_other_methods_have_none() {
    assert_eq!(
        get_path(b"GET /events?x=1 HTTP/1.1\r\n\r\n"),
        Some("/events")
    );
    assert_eq!(get_path(b"GET / HTTP/1.0\r\n\r\n"), Some("/"));
    assert_eq!(get_path(b"POST /metrics HTTP/1.0\r\n\r\n"), None);
    assert_eq!(get_path(b"GET metrics HTTP/1.0\r\n\r\n"), None);
    assert_eq!(get_path(b""), None);
}

/// A route server: `/page` is a body, `/events` sends three events and ends.
fn route_server() -> (SocketAddr, Arc<EndpointCounters>, Arc<AtomicBool>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let counters = Arc::new(EndpointCounters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let routes = |path: &str| match path {
        "/page" => HttpReply::ok("text/html; charset=utf-8", "<p>hi</p>"),
        "/events" => HttpReply::Events(Box::new(|sink: &mut EventSink<'_>| {
            for n in 0..3 {
                if sink.stopped() || sink.send("frame", &format!("{{\"n\":{n}}}\nx")).is_err() {
                    return;
                }
            }
        })),
        _ => HttpReply::not_found("no\n"),
    };
    serve_routes(
        listener,
        LIMITS,
        Arc::clone(&counters),
        Arc::new(routes),
        Arc::clone(&stop),
    )
    .unwrap();
    (addr, counters, stop)
}

#[test]
fn routes_serve_bodies_and_event_streams() {
    let (addr, counters, stop) = route_server();
    let page = get(addr, b"GET /page HTTP/1.1\r\n\r\n");
    assert!(page.starts_with("HTTP/1.0 200 OK\r\n"), "{page}");
    assert!(
        page.contains("Content-Type: text/html; charset=utf-8\r\n"),
        "{page}"
    );
    assert!(page.ends_with("\r\n\r\n<p>hi</p>"), "{page}");
    let events = get(
        addr,
        b"GET /events HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n",
    );
    assert!(
        events.contains("Content-Type: text/event-stream\r\n"),
        "{events}"
    );
    let body = events.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(
        body,
        "event: frame\ndata: {\"n\":0}\ndata: x\n\n\
         event: frame\ndata: {\"n\":1}\ndata: x\n\n\
         event: frame\ndata: {\"n\":2}\ndata: x\n\n"
    );
    assert!(get(addr, b"GET /nothing HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
    assert!(get(addr, b"PUT /page HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
    assert_eq!(counters.status().served, 4);
    stop.store(true, Ordering::Relaxed);
}
