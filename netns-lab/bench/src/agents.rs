//! The small processes `bench forward` runs inside its namespaces.
//!
//! Protocol, the same for each: after setting up, an agent prints one line starting with
//! `ready`. Then, for every line it reads on stdin, it prints `count=<n> ns=<t>` — `n` its
//! running count (frames sent for `gen`, IPv4 frames received for `sink`, 0 for `redirect`),
//! `t` the `CLOCK_MONOTONIC` time of the reading in nanoseconds (one clock for all processes of
//! the machine); the sink adds `queues=<q0>,<q1>,…` (its IPv4 frames by RX queue) and
//! `other=<n>` (frames that are not IPv4: the forwarder's ARP probes). When stdin closes — also when the orchestrator dies — it cleans up (detaching its
//! XDP program), prints a `done` line and exits.
//!
//! Each agent is a function over its typed options and its input and output lines; the
//! `ofan-lab bench gen|sink|redirect` commands pass stdin and stdout, and
//! [`GenOptions::args`] gives `bench forward` the generator's command line.

use std::io::{BufRead, Write};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use ofan_dataplane::afxdp::bench::frame::UdpFlows;
use ofan_dataplane::afxdp::bench::gen::{GenConfig, TrafficGen};
use ofan_dataplane::afxdp::bench::live::{LiveConfig, LiveCounter, LiveError, LiveGen};
use ofan_dataplane::afxdp::bench::sink::{SinkCount, XdpSink};
use ofan_dataplane::afxdp::pin_to_cpu;
use ofan_dataplane::afxdp::redirect::XdpRedirect;
use ofan_dataplane::afxdp::{monotonic_ns, BindMode, XdpMode};

/// How `bench gen` puts frames on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenKind {
    /// XDP live-frames mode: `BPF_PROG_RUN` runs `ofan_gen`, which transmits (`XDP_TX`) copies
    /// of the frame in the kernel, without skbs (Linux ≥ 5.18; the peer needs an XDP program).
    Live,
    /// An AF_XDP TX-only socket in copy mode (an skb per frame: slow, but works everywhere).
    Afxdp,
    /// Live frames where the kernel runs them, else (refused: an old kernel, a sandbox) an
    /// AF_XDP socket — unless paced (`rate_mpps`, live frames only), which then fails; with
    /// several queues an AF_XDP socket.
    Auto,
}

impl GenKind {
    /// The name on the command line.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Afxdp => "afxdp",
            Self::Auto => "auto",
        }
    }
}

/// What `bench gen` sends, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct GenOptions {
    /// How to send.
    pub kind: GenKind,
    /// Interface to send on.
    pub interface: String,
    /// Destination MAC (the next hop's).
    pub dst_mac: [u8; 6],
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// Frame size on the wire, FCS included.
    pub frame_size: u32,
    /// Flows (UDP source ports 1024, 1025, …).
    pub flows: u32,
    /// The CPU to pin the sending thread to, if any.
    pub cpu: Option<usize>,
    /// TX ring size ([`GenKind::Afxdp`]).
    pub ring_size: u32,
    /// Frames per batch the kernel runs and transmits at once ([`GenKind::Live`], 1 to 256).
    pub batch_size: u32,
    /// Frames per `BPF_PROG_RUN` call ([`GenKind::Live`]).
    pub chunk: u32,
    /// At most this many million frames per second ([`GenKind::Live`]); `None`: as fast as the
    /// CPU allows.
    pub rate_mpps: Option<f64>,
    /// TX queues to spread the flows over (flow `f` on queue `f mod queues`; [`GenKind::Afxdp`]
    /// only: a veth puts a live frame on the RX queue of the CPU that sends it).
    pub queues: u32,
}

impl GenOptions {
    /// Live frames where the kernel runs them ([`GenKind::Auto`]) out of `interface` to
    /// `dst_mac`: 64-byte frames of 256 flows from 10.0.0.2 to 10.1.0.1, unpinned and unpaced,
    /// with the generators' default batches and rings (the defaults of `ofan-lab bench gen`).
    #[must_use]
    pub fn new(interface: impl Into<String>, dst_mac: [u8; 6]) -> Self {
        Self {
            kind: GenKind::Auto,
            interface: interface.into(),
            dst_mac,
            src_ip: Ipv4Addr::new(10, 0, 0, 2),
            dst_ip: Ipv4Addr::new(10, 1, 0, 1),
            frame_size: 64,
            flows: 256,
            cpu: None,
            ring_size: 2048,
            batch_size: LiveConfig::new("").batch_size,
            chunk: LiveConfig::new("").chunk,
            rate_mpps: None,
            queues: 1,
        }
    }

    /// The flags of `ofan-lab bench gen` that ask for exactly these options (how `bench
    /// forward` starts its generator).
    #[must_use]
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("--gen={}", self.kind.name()),
            format!("--interface={}", self.interface),
            format!("--dst-mac={}", format_mac(self.dst_mac)),
            format!("--src-ip={}", self.src_ip),
            format!("--dst-ip={}", self.dst_ip),
            format!("--frame-size={}", self.frame_size),
            format!("--flows={}", self.flows),
            format!("--ring-size={}", self.ring_size),
            format!("--batch-size={}", self.batch_size),
            format!("--chunk={}", self.chunk),
        ];
        if let Some(cpu) = self.cpu {
            args.push(format!("--cpu={cpu}"));
        }
        if let Some(rate) = self.rate_mpps {
            args.push(format!("--rate={rate}"));
        }
        if self.queues > 1 {
            args.push(format!("--queues={}", self.queues));
        }
        args
    }
}

/// A generator of either kind, opened on its sending thread (boxed: one per process, and the
/// two differ much in size).
enum Generator {
    Afxdp(Box<TrafficGen>),
    Live(Box<LiveGen>),
}

impl Generator {
    /// The generator of TX queue `queue`: its share of the flows (`f mod queues == queue`).
    /// [`GenKind::Auto`] falls back from live frames the kernel refuses to an AF_XDP socket.
    fn open(options: &GenOptions, flows: &UdpFlows, queue: u32) -> anyhow::Result<Self> {
        if options.kind != GenKind::Auto {
            return Self::open_kind(options.kind, options, flows, queue);
        }
        match Self::open_kind(GenKind::Live, options, flows, queue) {
            Err(error)
                if options.rate_mpps.is_none()
                    && matches!(
                        error.downcast_ref::<LiveError>(),
                        Some(LiveError::Refused { .. })
                    ) =>
            {
                eprintln!("ofan-lab bench gen: {error}: sending from an AF_XDP socket");
                Self::open_kind(GenKind::Afxdp, options, flows, queue)
            }
            opened => opened,
        }
    }

    /// How it sends.
    const fn kind(&self) -> GenKind {
        match self {
            Self::Afxdp(_) => GenKind::Afxdp,
            Self::Live(_) => GenKind::Live,
        }
    }

    fn open_kind(
        kind: GenKind,
        options: &GenOptions,
        flows: &UdpFlows,
        queue: u32,
    ) -> anyhow::Result<Self> {
        Ok(match kind {
            GenKind::Afxdp | GenKind::Auto => {
                let config = GenConfig {
                    interface: options.interface.clone(),
                    queue,
                    ring_size: options.ring_size,
                    bind_mode: BindMode::Copy,
                };
                let share: Vec<Vec<u8>> = flows
                    .frames(options.flows)?
                    .into_iter()
                    .enumerate()
                    .filter(|(flow, _)| *flow as u32 % options.queues == queue)
                    .map(|(_, frame)| frame)
                    .collect();
                Self::Afxdp(Box::new(TrafficGen::open(&config, &share)?))
            }
            GenKind::Live => {
                let config = LiveConfig {
                    batch_size: options.batch_size,
                    rate: options.rate_mpps.map(|mpps| mpps * 1e6),
                    chunk: options.chunk,
                    ..LiveConfig::new(options.interface.clone())
                };
                Self::Live(Box::new(LiveGen::open(&config, flows, options.flows)?))
            }
        })
    }

    /// An exact running count another thread can read (live frames), if the kind has one;
    /// otherwise the count `run` stores after each batch is the one to read.
    fn counter(&self) -> anyhow::Result<Option<LiveCounter>> {
        Ok(match self {
            Self::Afxdp(_) => None,
            Self::Live(generator) => Some(generator.counter()?),
        })
    }

    /// Sends until `stop` is set; returns the `done` line's details.
    fn run(&mut self, stop: &AtomicBool, sent: &AtomicU64) -> anyhow::Result<String> {
        Ok(match self {
            Self::Afxdp(generator) => {
                let report = generator.run(stop, sent);
                format!("sent={} kicks={}", report.completed, report.kicks)
            }
            Self::Live(generator) => {
                let report = generator.run(stop, sent)?;
                format!("sent={} calls={}", report.frames, report.calls)
            }
        })
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
///
/// # Errors
/// When `text` is not six hexadecimal bytes separated by colons.
pub fn parse_mac(text: &str) -> anyhow::Result<[u8; 6]> {
    let bytes: Vec<u8> = text
        .split(':')
        .map(|part| u8::from_str_radix(part, 16))
        .collect::<Result<_, _>>()
        .with_context(|| format!("`{text}` is not a MAC address"))?;
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("`{text}` is not a MAC address (six bytes)"))
}

/// `aa:bb:cc:dd:ee:ff`.
#[must_use]
pub fn format_mac(mac: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

fn interface_mac(interface: &str) -> anyhow::Result<[u8; 6]> {
    let path = format!("/sys/class/net/{interface}/address");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_mac(text.trim())
}

/// Writes one protocol line and flushes it (the orchestrator waits for it).
fn say(output: &mut impl Write, line: std::fmt::Arguments<'_>) -> anyhow::Result<()> {
    output.write_fmt(line)?;
    output.write_all(b"\n")?;
    output.flush()?;
    Ok(())
}

/// Answers `input` lines with `<fields()> ns=<now>` until `input` closes (`fields`: `count=<n>`
/// and what else the agent reports).
fn serve(
    input: impl BufRead,
    output: &mut impl Write,
    mut fields: impl FnMut() -> anyhow::Result<String>,
) -> anyhow::Result<()> {
    for line in input.lines() {
        line.context("reading stdin")?;
        let fields = fields()?;
        say(output, format_args!("{fields} ns={}", monotonic_ns()))?;
    }
    Ok(())
}

/// The sink's reading: `count=<IPv4 frames> queues=<per RX queue> other=<other frames>`.
fn sink_fields(count: &SinkCount) -> String {
    let queues: Vec<String> = count.per_queue.iter().map(u64::to_string).collect();
    format!(
        "count={} queues={} other={}",
        count.ipv4(),
        queues.join(","),
        count.other
    )
}

/// Runs `bench gen`: sends as `options` say, answering the orchestrator's `input` lines on
/// `output` (the protocol above: stdin and stdout of the agent process).
///
/// # Errors
/// When the generator cannot be set up, fails while sending, or `input`/`output` fail.
pub fn gen(
    options: &GenOptions,
    input: impl BufRead,
    mut output: impl Write,
) -> anyhow::Result<()> {
    let flows = UdpFlows {
        src_mac: interface_mac(&options.interface)?,
        dst_mac: options.dst_mac,
        src_ip: options.src_ip,
        dst_ip: options.dst_ip,
        first_src_port: 1024,
        dst_port: 9,
        frame_size: options.frame_size,
    };
    flows.frames(options.flows)?; // checked here, before a thread starts
    let mut options = options.clone();
    if options.kind == GenKind::Auto && options.queues > 1 {
        options.kind = GenKind::Afxdp;
    }
    let options = &options;
    if options.queues == 0 || (options.queues > 1 && options.kind != GenKind::Afxdp) {
        anyhow::bail!(
            "--queues {}: the live generator sends on one queue (a veth puts a live frame on the \
             RX queue of the CPU that sends it); use --gen afxdp to spread flows over queues",
            options.queues
        );
    }
    if options.queues > options.flows {
        anyhow::bail!(
            "--queues {} is more than the {} flows: some queue would have none",
            options.queues,
            options.flows
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut kind = options.kind;
    let cpu = options.cpu;
    // One sender thread per queue, each opening its generator (xdpilone's UMEM is not `Send`).
    let mut senders = Vec::new();
    let mut counters = Vec::new();
    for queue in 0..options.queues {
        let sent = Arc::new(AtomicU64::new(0));
        let (opened, is_open) = std::sync::mpsc::channel();
        let sender = {
            let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
            let (options, flows) = (options.clone(), flows);
            std::thread::Builder::new()
                .name(format!("ofan-gen-{queue}"))
                .spawn(move || {
                    let setup = || -> anyhow::Result<Generator> {
                        if let Some(cpu) = cpu {
                            pin_to_cpu(cpu)
                                .with_context(|| format!("pinning the sender to CPU {cpu}"))?;
                        }
                        Generator::open(&options, &flows, queue)
                    };
                    match setup().and_then(|generator| Ok((generator.counter()?, generator))) {
                        Ok((counter, mut generator)) => {
                            let _ = opened.send(Ok((counter, generator.kind())));
                            Some(generator.run(&stop, &sent))
                        }
                        Err(error) => {
                            let _ = opened.send(Err(error));
                            None
                        }
                    }
                })
                .context("starting a sender thread")?
        };
        let counter = is_open
            .recv()
            .context("a sender thread died while opening its socket")?;
        let (counter, opened_kind) = match counter {
            Ok(opened) => opened,
            Err(error) => {
                stop.store(true, Ordering::Relaxed);
                return Err(error);
            }
        };
        senders.push(sender);
        counters.push((counter, sent));
        kind = opened_kind;
    }
    say(
        &mut output,
        format_args!(
            "ready gen={} interface={} frame_len={} flows={} queues={} cpu={}",
            kind.name(),
            options.interface,
            flows.len(),
            options.flows,
            options.queues,
            cpu.map_or("any".into(), |c| c.to_string())
        ),
    )?;
    let served = serve(input, &mut output, || {
        let mut count = 0;
        for (counter, sent) in &counters {
            count += match counter {
                Some(counter) => counter.frames()?,
                None => sent.load(Ordering::Relaxed),
            };
        }
        Ok(format!("count={count}"))
    });
    stop.store(true, Ordering::Relaxed);
    let mut reports = Vec::new();
    for sender in senders {
        let report = sender
            .join()
            .map_err(|_| anyhow::anyhow!("a sender thread panicked"))?
            .context("a sender never started")?;
        reports.push(report?);
    }
    served?;
    say(&mut output, format_args!("done {}", reports.join("; ")))
}

/// Runs `bench sink`: counts and drops every frame arriving on `interface`, answering `input`
/// lines on `output`.
///
/// # Errors
/// When the XDP program cannot be loaded or attached, or `input`/`output` fail.
pub fn sink(interface: &str, input: impl BufRead, mut output: impl Write) -> anyhow::Result<()> {
    let mut sink = XdpSink::load(XdpMode::Native)?;
    sink.attach(interface)?;
    say(&mut output, format_args!("ready interface={interface}"))?;
    serve(input, &mut output, || Ok(sink_fields(&sink.count()?)))?;
    say(
        &mut output,
        format_args!("done {}", sink_fields(&sink.count()?)),
    )
}

/// Runs `bench redirect`: XDP_REDIRECT from `from` to `to` until `input` closes.
///
/// # Errors
/// When the XDP program cannot be loaded or attached, or `input`/`output` fail.
pub fn redirect(
    from: &str,
    to: &str,
    input: impl BufRead,
    mut output: impl Write,
) -> anyhow::Result<()> {
    let mut redirect = XdpRedirect::load(XdpMode::Native)?;
    redirect.forward(from, to)?;
    say(&mut output, format_args!("ready from={from} to={to}"))?;
    serve(input, &mut output, || Ok("count=0".to_owned()))?;
    drop(redirect);
    say(&mut output, format_args!("done"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_and_print() {
        assert_eq!(
            parse_mac("02:00:0a:FF:00:01").unwrap(),
            [2, 0, 0x0a, 0xff, 0, 1]
        );
        assert!(parse_mac("02:00:0a:ff:00").is_err());
        assert!(parse_mac("02:00:0a:ff:00:xx").is_err());
        assert_eq!(format_mac([2, 0, 0x0a, 0xff, 0, 1]), "02:00:0a:ff:00:01");
    }

    #[test]
    fn serve_answers_every_line_until_input_closes() {
        let mut output = Vec::new();
        let mut count = 0;
        serve(&b"?\n?\n"[..], &mut output, || {
            count += 5;
            Ok(format!("count={count}"))
        })
        .unwrap();
        let text = String::from_utf8(output).unwrap();
        let counts: Vec<&str> = text
            .lines()
            .map(|line| line.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(counts, ["count=5", "count=10"], "{text}");
        assert!(text.lines().all(|line| line.contains(" ns=")), "{text}");
    }

    #[test]
    fn the_sink_reports_ipv4_per_queue_and_the_rest_apart() {
        let mut count = SinkCount {
            other: 3,
            ..SinkCount::default()
        };
        count.per_queue[0] = 10;
        count.per_queue[2] = 5;
        assert_eq!(
            sink_fields(&count),
            "count=15 queues=10,0,5,0,0,0,0,0 other=3"
        );
    }
}
