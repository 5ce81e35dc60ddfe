//! The small processes `bench forward` runs inside its namespaces.
//!
//! Protocol, the same for each: after setting up, an agent prints one line starting with
//! `ready`. Then, for every line it reads on stdin, it prints `count=<n> ns=<t>` — `n` its
//! running count (frames sent for `gen`, frames received for `sink`, 0 for `redirect`), `t` the
//! `CLOCK_MONOTONIC` time of the reading in nanoseconds (one clock for all processes of the
//! machine). When stdin closes — also when the orchestrator dies — it cleans up (detaching its
//! XDP program), prints a `done` line and exits.

use std::io::{BufRead, Write};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use ofan_dataplane::afxdp::bench::frame::UdpFlows;
use ofan_dataplane::afxdp::bench::gen::{GenConfig, TrafficGen};
use ofan_dataplane::afxdp::bench::live::{LiveConfig, LiveCounter, LiveGen};
use ofan_dataplane::afxdp::bench::pin_to_cpu;
use ofan_dataplane::afxdp::bench::sink::XdpSink;
use ofan_dataplane::afxdp::redirect::XdpRedirect;
use ofan_dataplane::afxdp::{monotonic_ns, BindMode, XdpMode};

/// How `bench gen` puts frames on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenKind {
    /// XDP live-frames mode: `BPF_PROG_RUN` runs `ofan_gen`, which transmits (`XDP_TX`) copies
    /// of the frame in the kernel, without skbs (Linux ≥ 5.18; the peer needs an XDP program).
    Live,
    /// An AF_XDP TX-only socket in copy mode (an skb per frame: slow, but works everywhere).
    Afxdp,
}

impl GenKind {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Afxdp => "afxdp",
        }
    }
}

/// `bench gen`.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// How to send.
    #[arg(long = "gen", value_enum, default_value = "live")]
    pub kind: GenKind,
    /// Interface to send on.
    #[arg(long, value_name = "IF")]
    pub interface: String,
    /// Destination MAC (the next hop's, aa:bb:cc:dd:ee:ff).
    #[arg(long, value_name = "MAC")]
    pub dst_mac: String,
    /// Source IPv4 address.
    #[arg(long, default_value = "10.0.0.2")]
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    #[arg(long, default_value = "10.1.0.1")]
    pub dst_ip: Ipv4Addr,
    /// Frame size on the wire, FCS included (64 = the smallest Ethernet frame).
    #[arg(long, default_value_t = 64)]
    pub frame_size: u32,
    /// Flows (UDP source ports 1024, 1025, …).
    #[arg(long, default_value_t = 256)]
    pub flows: u32,
    /// Pin the sending thread to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// TX ring size (`afxdp`).
    #[arg(long, default_value_t = 2048)]
    pub ring_size: u32,
    /// Frames per batch the kernel runs and transmits at once (`live`, 1 to 256).
    #[arg(long, default_value_t = 64)]
    pub batch_size: u32,
    /// Frames per `BPF_PROG_RUN` call (`live`; each call sets up and tears down a page pool).
    #[arg(long, default_value_t = LiveConfig::new("").chunk)]
    pub chunk: u32,
    /// Send at most this many million frames per second (`live`; default: as fast as the CPU
    /// allows).
    #[arg(long, value_name = "MPPS")]
    pub rate: Option<f64>,
}

/// A generator of either kind, opened on its sending thread (boxed: one per process, and the
/// two differ much in size).
enum Generator {
    Afxdp(Box<TrafficGen>),
    Live(Box<LiveGen>),
}

impl Generator {
    fn open(args: &GenArgs, flows: &UdpFlows) -> anyhow::Result<Self> {
        Ok(match args.kind {
            GenKind::Afxdp => {
                let config = GenConfig {
                    interface: args.interface.clone(),
                    ring_size: args.ring_size,
                    bind_mode: BindMode::Copy,
                };
                Self::Afxdp(Box::new(TrafficGen::open(
                    &config,
                    &flows.frames(args.flows)?,
                )?))
            }
            GenKind::Live => {
                let config = LiveConfig {
                    batch_size: args.batch_size,
                    rate: args.rate.map(|mpps| mpps * 1e6),
                    chunk: args.chunk,
                    ..LiveConfig::new(args.interface.clone())
                };
                Self::Live(Box::new(LiveGen::open(&config, flows, args.flows)?))
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

/// `bench sink`.
#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Interface to count on.
    #[arg(long, value_name = "IF")]
    pub interface: String,
}

/// `bench redirect`.
#[derive(Debug, Args)]
pub struct RedirectArgs {
    /// Ingress interface.
    #[arg(long, value_name = "IF")]
    pub from: String,
    /// Egress interface.
    #[arg(long, value_name = "IF")]
    pub to: String,
}

/// Parses `aa:bb:cc:dd:ee:ff`.
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

fn interface_mac(interface: &str) -> anyhow::Result<[u8; 6]> {
    let path = format!("/sys/class/net/{interface}/address");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_mac(text.trim())
}

/// Answers stdin lines with `count=<counter()> ns=<now>` until stdin closes.
fn serve(mut counter: impl FnMut() -> anyhow::Result<u64>) -> anyhow::Result<()> {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    for line in stdin.lock().lines() {
        line.context("reading stdin")?;
        let count = counter()?;
        writeln!(stdout, "count={count} ns={}", monotonic_ns())?;
        stdout.flush()?;
    }
    Ok(())
}

fn ready(details: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready {details}")?;
    stdout.flush()?;
    Ok(())
}

/// Runs `bench gen`.
pub fn gen(args: &GenArgs) -> anyhow::Result<()> {
    let flows = UdpFlows {
        src_mac: interface_mac(&args.interface)?,
        dst_mac: parse_mac(&args.dst_mac)?,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        first_src_port: 1024,
        dst_port: 9,
        frame_size: args.frame_size,
    };
    flows.frames(args.flows)?; // checked here, before a thread starts
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let cpu = args.cpu;
    // The generator is opened on the sending thread: xdpilone's UMEM is not `Send`.
    let (opened, is_open) = std::sync::mpsc::channel();
    let sender = {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        let args = args.clone();
        std::thread::Builder::new()
            .name("ofan-gen".into())
            .spawn(move || {
                let setup = || -> anyhow::Result<Generator> {
                    if let Some(cpu) = cpu {
                        pin_to_cpu(cpu)
                            .with_context(|| format!("pinning the sender to CPU {cpu}"))?;
                    }
                    Generator::open(&args, &flows)
                };
                match setup().and_then(|generator| Ok((generator.counter()?, generator))) {
                    Ok((counter, mut generator)) => {
                        let _ = opened.send(Ok(counter));
                        Some(generator.run(&stop, &sent))
                    }
                    Err(error) => {
                        let _ = opened.send(Err(error));
                        None
                    }
                }
            })
            .context("starting the sender thread")?
    };
    let counter = is_open
        .recv()
        .context("the sender thread died while opening the socket")??;
    ready(&format!(
        "gen={} interface={} frame_len={} flows={} cpu={}",
        args.kind.name(),
        args.interface,
        flows.len(),
        args.flows,
        cpu.map_or("any".into(), |c| c.to_string())
    ))?;
    let served = serve(|| match &counter {
        Some(counter) => Ok(counter.frames()?),
        None => Ok(sent.load(Ordering::Relaxed)),
    });
    stop.store(true, Ordering::Relaxed);
    let report = sender
        .join()
        .map_err(|_| anyhow::anyhow!("the sender thread panicked"))?
        .context("the sender never started")?;
    served?;
    println!("done {}", report?);
    Ok(())
}

/// Runs `bench sink`.
pub fn sink(args: &SinkArgs) -> anyhow::Result<()> {
    let mut sink = XdpSink::load(XdpMode::Native)?;
    sink.attach(&args.interface)?;
    ready(&format!("interface={}", args.interface))?;
    serve(|| Ok(sink.frames()?))?;
    println!("done frames={}", sink.frames()?);
    Ok(())
}

/// Runs `bench redirect`.
pub fn redirect(args: &RedirectArgs) -> anyhow::Result<()> {
    let mut redirect = XdpRedirect::load(XdpMode::Native)?;
    redirect.forward(&args.from, &args.to)?;
    ready(&format!("from={} to={}", args.from, args.to))?;
    serve(|| Ok(0))?;
    drop(redirect);
    println!("done");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:00:0a:FF:00:01").unwrap(),
            [2, 0, 0x0a, 0xff, 0, 1]
        );
        assert!(parse_mac("02:00:0a:ff:00").is_err());
        assert!(parse_mac("02:00:0a:ff:00:xx").is_err());
    }
}
