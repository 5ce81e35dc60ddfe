//! `bench gen`, `bench sink` and `bench redirect`: the flags of the agents `bench forward`
//! runs in its namespaces.

use std::net::Ipv4Addr;

use clap::{Args, ValueEnum};
use ofan_dataplane::afxdp::bench::live::LiveConfig;
use ofan_lab_bench::agents::{parse_mac, GenKind, GenOptions};

/// How the generator sends (`--gen`): a [`GenKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GenName {
    /// XDP live-frames mode: `BPF_PROG_RUN` runs `ofan_gen`, which transmits (`XDP_TX`) copies
    /// of the frame in the kernel, without skbs (Linux ≥ 5.18; the peer needs an XDP program).
    Live,
    /// An AF_XDP TX-only socket in copy mode (an skb per frame: slow, but works everywhere).
    Afxdp,
    /// Live frames where the kernel runs them, else an AF_XDP socket (a kernel before 5.18, or
    /// a sandbox that denies live frames); paced (`--rate`) only live, with `--queues` > 1 an
    /// AF_XDP socket.
    Auto,
}

impl GenName {
    /// The library's kind.
    #[must_use]
    pub const fn kind(self) -> GenKind {
        match self {
            Self::Live => GenKind::Live,
            Self::Afxdp => GenKind::Afxdp,
            Self::Auto => GenKind::Auto,
        }
    }
}

/// `bench gen`.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// How to send.
    #[arg(long = "gen", value_enum, default_value = "auto")]
    pub kind: GenName,
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
    /// TX queues to spread the flows over, flow f on queue f mod N (`afxdp`: one socket and
    /// thread per queue; a veth's peer receives them on the same queue).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub queues: u32,
}

impl GenArgs {
    /// The generator's options.
    ///
    /// # Errors
    /// When `--dst-mac` is not a MAC address.
    pub fn options(&self) -> anyhow::Result<GenOptions> {
        Ok(GenOptions {
            kind: self.kind.kind(),
            interface: self.interface.clone(),
            dst_mac: parse_mac(&self.dst_mac)?,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            frame_size: self.frame_size,
            flows: self.flows,
            cpu: self.cpu,
            ring_size: self.ring_size,
            batch_size: self.batch_size,
            chunk: self.chunk,
            rate_mpps: self.rate,
            queues: self.queues,
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

#[cfg(test)]
mod tests {
    use super::super::{parse, BenchCommand};
    use super::*;

    fn gen_options(args: &[String]) -> GenOptions {
        let args: Vec<&str> = std::iter::once("gen")
            .chain(args.iter().map(String::as_str))
            .collect();
        let BenchCommand::Gen(gen) = parse(&args) else {
            panic!("not gen");
        };
        gen.options().unwrap()
    }

    #[test]
    fn gen_defaults_are_the_librarys() {
        let mac = [2, 0, 0, 0, 0, 1];
        let options = gen_options(&[
            "--interface=eth0".into(),
            "--dst-mac=02:00:00:00:00:01".into(),
        ]);
        assert_eq!(options, GenOptions::new("eth0", mac));
    }

    #[test]
    fn the_generators_command_line_parses_back_to_its_options() {
        // What `bench forward` passes to `ofan-lab bench gen`, every field away from its default.
        let options = GenOptions {
            kind: GenKind::Afxdp,
            src_ip: Ipv4Addr::new(10, 9, 0, 2),
            dst_ip: Ipv4Addr::new(10, 9, 1, 1),
            frame_size: 128,
            flows: 3,
            cpu: Some(1),
            ring_size: 512,
            batch_size: 16,
            chunk: 1000,
            rate_mpps: Some(0.1),
            ..GenOptions::new("p9", [0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])
        };
        assert_eq!(gen_options(&options.args()), options);
        for kind in [GenKind::Auto, GenKind::Live] {
            let options = GenOptions {
                kind,
                ..GenOptions::new("eth0", [2, 0, 0, 0, 0, 1])
            };
            assert_eq!(gen_options(&options.args()), options);
        }
    }
}
