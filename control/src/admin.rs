//! The switch's admin protocol: one line in, one JSON line out, over a Unix socket.
//!
//! Both sides live here so they cannot drift apart: [`Request`] is what a client may ask (and
//! what the switch parses), [`Stats`] is the one typed reply to `stats`, and [`Client`] is the
//! one client — `ofan-switch stats`/`reset`, the lab's `status`, its FIB wait and the
//! experiments' snapshots all use it. The switch's server (`ofan-switch`'s `admin` module)
//! answers with [`Reply`].

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use ofan_dataplane::telemetry::SwitchSnapshot;
use serde::{Deserialize, Serialize};

use crate::bmp::StationStatus;
use crate::endpoint::EndpointsReport;
use crate::mirror::MirrorStatus;
use crate::paths::PathReport;

/// What `stats` returns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Stats {
    /// Switch name.
    pub switch: String,
    /// Load-balancing algorithm.
    pub algorithm: String,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Ports and forwarding counters.
    pub data_path: SwitchSnapshot,
    /// The XDP steering program's counters.
    pub steering: Vec<(String, u64)>,
    /// The FIB mirror.
    pub fib: MirrorStatus,
    /// The path table: each FIB next hop with its next-next hops.
    #[serde(default)]
    pub paths: PathReport,
    /// The BMP station, when one is configured.
    #[serde(default)]
    pub bmp: Option<StationStatus>,
    /// What the admin socket and the metrics endpoint served and refused.
    #[serde(default)]
    pub endpoints: EndpointsReport,
    /// Adaptive-routing notifications, when enabled.
    #[serde(default)]
    pub adaptive_routing: Option<crate::notify::report::ArfReport>,
}

/// The longest request line the switch accepts, newline included. A longer one is refused
/// after reading one byte more than this, never read in full.
pub const MAX_REQUEST_BYTES: usize = 4096;

/// Reads one request line from `reader`, at most [`MAX_REQUEST_BYTES`] + 1 bytes of it.
///
/// Returns the line without its newline (`Ok(None)` when the peer closed without sending
/// anything), or the refusal for a line that is too long or not UTF-8 (then the rest is left
/// unread).
///
/// # Errors
/// The reader's I/O errors (a read deadline that passed is one: `WouldBlock`/`TimedOut`).
pub fn read_request(reader: impl BufRead) -> std::io::Result<Option<Result<String, Reply>>> {
    let mut line = Vec::new();
    let limit = MAX_REQUEST_BYTES as u64 + 1;
    reader.take(limit).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.len() > MAX_REQUEST_BYTES {
        return Ok(Some(Err(Reply::Error(format!(
            "request longer than {MAX_REQUEST_BYTES} bytes"
        )))));
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    Ok(Some(String::from_utf8(line).map_err(|_| {
        Reply::Error("request is not UTF-8".to_owned())
    })))
}

/// A request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Everything the switch knows, as [`Stats`].
    Stats,
    /// Clear maxima, histograms and lateness (counters keep counting).
    Reset,
    /// `blackhole PORT on|off`: make port `port` (its interface name) drop every frame it
    /// receives in the XDP program — data, ARP, BGP, BFD alike — while its carrier stays up
    /// (`blackhole: true`), or stop doing so. A silent link failure.
    Blackhole {
        /// The port's interface name.
        port: String,
        /// Drop (`on`) or pass (`off`).
        blackhole: bool,
    },
    /// `rate PORT BPS`: shape port `port` at `bps` bit/s from its next frame on (a degraded
    /// link; `ofan-lab link A B rate R`). Only a shaped port (one with a link rate) can change.
    LinkRate {
        /// The port's interface name.
        port: String,
        /// The new rate, bit/s (> 0).
        bps: u64,
    },
}

impl Request {
    /// The request's command word (what errors name).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Stats => "stats",
            Self::Reset => "reset",
            Self::Blackhole { .. } => "blackhole",
            Self::LinkRate { .. } => "rate",
        }
    }

    /// The line a client sends (without the newline).
    #[must_use]
    pub fn line(&self) -> String {
        match self {
            Self::Blackhole { port, blackhole } => {
                format!("blackhole {port} {}", if *blackhole { "on" } else { "off" })
            }
            Self::LinkRate { port, bps } => format!("rate {port} {bps}"),
            other => other.name().to_owned(),
        }
    }

    /// Whether only a privileged peer (root or the switch's user) may send it: everything but
    /// reading.
    #[must_use]
    pub const fn needs_privilege(&self) -> bool {
        match self {
            Self::Stats => false,
            Self::Reset | Self::Blackhole { .. } | Self::LinkRate { .. } => true,
        }
    }

    /// Parses one request line (surrounding whitespace ignored).
    ///
    /// # Errors
    /// The reply to send for anything else.
    pub fn parse(line: &str) -> Result<Self, Reply> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["stats"] => Ok(Self::Stats),
            ["reset"] => Ok(Self::Reset),
            ["blackhole", port, state @ ("on" | "off")] => Ok(Self::Blackhole {
                port: (*port).to_owned(),
                blackhole: *state == "on",
            }),
            ["blackhole", ..] => Err(Reply::Error("usage: blackhole PORT on|off".to_owned())),
            ["rate", port, bps] => match bps.parse::<u64>() {
                Ok(bps) if bps > 0 => Ok(Self::LinkRate {
                    port: (*port).to_owned(),
                    bps,
                }),
                _ => Err(Reply::Error(format!(
                    "rate: `{}` is not a rate in bit/s above 0",
                    bps.escape_default()
                ))),
            },
            ["rate", ..] => Err(Reply::Error("usage: rate PORT BPS".to_owned())),
            _ => Err(Reply::Error(format!(
                "unknown command `{}`",
                line.trim().escape_default()
            ))),
        }
    }
}

/// Every reply the switch sends, one JSON line each.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The answer to [`Request::Stats`].
    Stats(Box<Stats>),
    /// A request done (`{"ok":true}`).
    Done,
    /// A request refused (`{"error":"…"}`).
    Error(String),
}

impl Reply {
    /// The line on the wire (without the newline).
    #[must_use]
    pub fn to_line(&self) -> String {
        match self {
            Self::Stats(stats) => serde_json::to_string(stats)
                .unwrap_or_else(|e| Self::Error(e.to_string()).to_line()),
            Self::Done => serde_json::json!({ "ok": true }).to_string(),
            Self::Error(message) => serde_json::json!({ "error": message }).to_string(),
        }
    }
}

/// Talking to a switch failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Nothing listens at the socket, or the exchange broke off.
    #[error("no switch answers at {path} ({source})")]
    Unreachable {
        /// The socket.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The switch refused the request.
    #[error("the switch at {path} answered `{request}` with an error: {message}")]
    Refused {
        /// The socket.
        path: PathBuf,
        /// What was asked.
        request: &'static str,
        /// The switch's message.
        message: String,
    },
    /// The reply is not what the protocol says.
    #[error("the switch at {path} sent an unexpected reply to `{request}`: {detail}")]
    Malformed {
        /// The socket.
        path: PathBuf,
        /// What was asked.
        request: &'static str,
        /// Why it did not parse.
        detail: String,
    },
}

/// A client of one switch's admin socket (a connection per request).
#[derive(Debug, Clone)]
pub struct Client {
    path: PathBuf,
    timeout: Duration,
}

impl Client {
    /// A client of the socket at `path`, waiting at most 5 s for each reply.
    #[must_use]
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            timeout: Duration::from_secs(5),
        }
    }

    /// The same client with another reply deadline.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether a switch accepts connections at the socket.
    #[must_use]
    pub fn is_listening(&self) -> bool {
        UnixStream::connect(&self.path).is_ok()
    }

    /// The switch's [`Stats`].
    ///
    /// # Errors
    /// See [`AdminError`].
    pub fn stats(&self) -> Result<Stats, AdminError> {
        let line = self.exchange(Request::Stats)?;
        serde_json::from_str(&line).map_err(|e| self.malformed(Request::Stats, &e.to_string()))
    }

    /// Asks the switch to clear its maxima, histograms and lateness.
    ///
    /// # Errors
    /// See [`AdminError`].
    pub fn reset(&self) -> Result<(), AdminError> {
        self.exchange(Request::Reset).map(drop)
    }

    /// Makes port `port` of the switch drop every frame it receives (`blackhole`), or pass
    /// them again ([`Request::Blackhole`]).
    ///
    /// # Errors
    /// See [`AdminError`]; [`AdminError::Refused`] names an unknown port.
    pub fn blackhole(&self, port: &str, blackhole: bool) -> Result<(), AdminError> {
        self.exchange(Request::Blackhole {
            port: port.to_owned(),
            blackhole,
        })
        .map(drop)
    }

    /// Shapes port `port` of the switch at `bps` bit/s from now on ([`Request::LinkRate`]).
    ///
    /// # Errors
    /// See [`AdminError`]; [`AdminError::Refused`] names an unknown or unshaped port.
    pub fn set_link_rate(&self, port: &str, bps: u64) -> Result<(), AdminError> {
        self.exchange(Request::LinkRate {
            port: port.to_owned(),
            bps,
        })
        .map(drop)
    }

    /// Sends `request` and returns the reply line unless it is an error reply.
    ///
    /// # Errors
    /// See [`AdminError`].
    pub fn exchange(&self, request: Request) -> Result<String, AdminError> {
        let unreachable = |source| AdminError::Unreachable {
            path: self.path.clone(),
            source,
        };
        let mut stream = UnixStream::connect(&self.path).map_err(unreachable)?;
        stream
            .set_read_timeout(Some(self.timeout))
            .map_err(unreachable)?;
        writeln!(stream, "{}", request.line()).map_err(unreachable)?;
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .map_err(unreachable)?;
        if line.is_empty() {
            return Err(unreachable(std::io::ErrorKind::UnexpectedEof.into()));
        }
        #[derive(Deserialize)]
        struct ErrorReply {
            error: String,
        }
        if let Ok(ErrorReply { error }) = serde_json::from_str(&line) {
            return Err(AdminError::Refused {
                path: self.path.clone(),
                request: request.name(),
                message: error,
            });
        }
        Ok(line.trim_end().to_owned())
    }

    fn malformed(&self, request: Request, detail: &str) -> AdminError {
        AdminError::Malformed {
            path: self.path.clone(),
            request: request.name(),
            detail: detail.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_unknown_ones_are_refused() {
        let blackhole = |blackhole| Request::Blackhole {
            port: "p2".to_owned(),
            blackhole,
        };
        for request in [
            Request::Stats,
            Request::Reset,
            blackhole(true),
            blackhole(false),
            Request::LinkRate {
                port: "p1".to_owned(),
                bps: 25_000_000,
            },
        ] {
            assert!(matches!(Request::parse(&request.line()), Ok(r) if r == request));
            let padded = format!(" {}\n", request.line());
            assert!(matches!(Request::parse(&padded), Ok(r) if r == request));
        }
        assert_eq!(blackhole(true).line(), "blackhole p2 on");
        assert_eq!(blackhole(false).name(), "blackhole");
        for bad in ["blackhole p2", "blackhole p2 maybe", "blackhole"] {
            let Err(Reply::Error(message)) = Request::parse(bad) else {
                panic!("`{bad}` must be refused");
            };
            assert_eq!(message, "usage: blackhole PORT on|off");
        }
        for (bad, why) in [
            ("rate p1", "usage: rate PORT BPS"),
            ("rate p1 0", "rate: `0` is not a rate in bit/s above 0"),
            ("rate p1 25M", "rate: `25M` is not a rate in bit/s above 0"),
        ] {
            let Err(Reply::Error(message)) = Request::parse(bad) else {
                panic!("`{bad}` must be refused");
            };
            assert_eq!(message, why);
        }
        let Err(Reply::Error(message)) = Request::parse("reboot\u{7}") else {
            panic!("an unknown request must be refused");
        };
        assert_eq!(message, "unknown command `reboot\\u{7}`");
        assert_eq!(
            Reply::Error(message).to_line(),
            r#"{"error":"unknown command `reboot\\u{7}`"}"#
        );
        assert_eq!(Reply::Done.to_line(), r#"{"ok":true}"#);
    }

    #[test]
    fn request_lines_are_read_within_their_bound() {
        let read = |bytes: &[u8]| read_request(bytes).unwrap();
        assert!(matches!(read(b"stats\nreset\n"), Some(Ok(line)) if line == "stats"));
        assert!(matches!(read(b"reset"), Some(Ok(line)) if line == "reset"));
        assert!(read(b"").is_none());
        assert!(
            matches!(read(b"st\xffats\n"), Some(Err(Reply::Error(m))) if m == "request is not UTF-8")
        );
        let mut at_limit = vec![b' '; MAX_REQUEST_BYTES - 6];
        at_limit.extend_from_slice(b"stats\n");
        assert!(
            matches!(read(&at_limit), Some(Ok(line)) if Request::parse(&line).ok() == Some(Request::Stats))
        );
        let mut long = vec![b' '; MAX_REQUEST_BYTES];
        long.extend_from_slice(b"stats\n");
        let mut reader = std::io::Cursor::new(&long);
        let refused = read_request(&mut reader).unwrap();
        assert!(
            matches!(refused, Some(Err(Reply::Error(m))) if m == "request longer than 4096 bytes")
        );
        assert_eq!(
            reader.position(),
            MAX_REQUEST_BYTES as u64 + 1,
            "read one byte past the bound"
        );
    }

    #[test]
    fn the_client_reads_replies_and_errors_from_a_real_socket() {
        let dir = std::env::temp_dir().join(format!("ofan-admin-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            for _ in 0..2 {
                let (stream, _) = listener.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&stream).read_line(&mut line).unwrap();
                let reply = match Request::parse(&line) {
                    Ok(Request::Reset) => Reply::Done,
                    Ok(Request::Stats | Request::Blackhole { .. } | Request::LinkRate { .. }) => {
                        Reply::Error("busy".to_owned())
                    }
                    Err(reply) => reply,
                };
                writeln!(&stream, "{}", reply.to_line()).unwrap();
            }
        });
        let client = Client::new(&path);
        assert!(client.reset().is_ok());
        match client.stats() {
            Err(AdminError::Refused { message, .. }) => assert_eq!(message, "busy"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        server.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            client.stats(),
            Err(AdminError::Unreachable { .. })
        ));
    }
}
