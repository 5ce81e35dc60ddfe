//! The rounds: every candidate measured once per round, in an order that rotates from round to
//! round, and one measurement — candidate up, generator on, forwarding seen at the sink,
//! warm-up, the sink (and generator, and candidate) read before and after the measured seconds.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use super::candidates::{reason_of, Dut};
use super::fabric::{Fabric, DEST_IP, GEN_IP};
use super::{Candidate, Observer, Setup};
use crate::agents::{GenKind, GenOptions};
use crate::process::{self, child, pause, Agent, Reading};
use crate::report::{DutQueues, Outcome, Sample};
use ofan_lab::netns::Namespaces;

/// The sink, counting for the whole run, and everything one measurement needs.
pub(super) struct Rounds<'a> {
    setup: &'a Setup<'a>,
    meter: Meter<'a>,
    /// `--gen auto` fell back to an AF_XDP socket, and the user was told.
    told_fallback: std::cell::Cell<bool>,
}

/// Where a measurement's counts come from.
enum Meter<'a> {
    /// The run's own generator (started per measurement) and sink, in its namespaces.
    Own {
        namespaces: &'a Namespaces,
        fabric: &'a Fabric,
        sink: Agent,
    },
    /// Real ports: frames the input interface received and the output one sent (the traffic is
    /// the user's).
    Ports,
}

impl<'a> Rounds<'a> {
    /// Starts the sink.
    ///
    /// # Errors
    /// When the sink does not become ready.
    pub(super) fn start(setup: &'a Setup<'a>, fabric: &'a Fabric) -> anyhow::Result<Self> {
        let namespaces = setup
            .namespaces
            .context("the run's own traffic needs its namespaces")?;
        let mut command = child(
            namespaces,
            "sink",
            setup.options.nice,
            &setup.options.ofan_lab,
        );
        command.args(["bench", "sink", "--interface", "eth0"]);
        let sink = Agent::start("sink", command, setup.dir)?;
        Ok(Self {
            setup,
            meter: Meter::Own {
                namespaces,
                fabric,
                sink,
            },
            told_fallback: std::cell::Cell::new(false),
        })
    }

    /// Rounds on real ports: the interfaces' counters instead of a generator and a sink.
    pub(super) fn on_ports(setup: &'a Setup<'a>) -> Self {
        Self {
            setup,
            meter: Meter::Ports,
            told_fallback: std::cell::Cell::new(false),
        }
    }

    /// Runs every round over the candidates still [`Outcome::Measured`] in `rows`, adding
    /// their samples. Round r begins with the candidate at r mod n. A testpmd that fails
    /// becomes unavailable; any other failure ends the run.
    ///
    /// # Errors
    /// Interruption, or a candidate other than testpmd that fails.
    pub(super) fn run(
        &mut self,
        rows: &mut [(Candidate, Outcome)],
        observer: &mut impl Observer,
    ) -> anyhow::Result<()> {
        for round in 0..self.setup.options.rounds {
            let count = rows.len();
            for step in 0..count {
                let (candidate, outcome) = &mut rows[(round + step) % count];
                let Outcome::Measured(samples) = outcome else {
                    continue;
                };
                process::interrupted()?;
                match self.measure(*candidate, round) {
                    Ok(sample) => {
                        observer.measured(round, *candidate, &sample);
                        samples.push(sample);
                    }
                    Err(error) if *candidate == Candidate::Testpmd => {
                        observer.unavailable(*candidate, &error);
                        *outcome = Outcome::Unavailable(reason_of(&format!("{error:#}")));
                    }
                    Err(error) => {
                        return Err(error.context(format!("measuring {}", candidate.name())))
                    }
                }
            }
        }
        Ok(())
    }

    /// Stops the sink.
    ///
    /// # Errors
    /// When it does not exit cleanly.
    pub(super) fn finish(self) -> anyhow::Result<()> {
        if let Meter::Own { sink, .. } = self.meter {
            sink.finish()?;
        }
        Ok(())
    }

    /// The run's generator for one measurement; none on real ports.
    fn generator(&self, label: &str) -> anyhow::Result<Option<Agent>> {
        let Meter::Own {
            namespaces, fabric, ..
        } = &self.meter
        else {
            return Ok(None);
        };
        let options = self.setup.options;
        let generator = GenOptions {
            kind: options.generator,
            src_ip: GEN_IP,
            dst_ip: DEST_IP,
            frame_size: options.frame_size,
            flows: options.flows,
            cpu: Some(options.gen_cpu),
            rate_mpps: options.rate_mpps,
            queues: options.queues,
            ..GenOptions::new("eth0", fabric.p0_mac)
        };
        let mut command = child(namespaces, "gen", options.nice, &options.ofan_lab);
        command.args(["bench", "gen"]).args(generator.args());
        let agent = Agent::start(label, command, self.setup.dir)?;
        let sends = agent.ready_field("gen");
        if options.generator == GenKind::Auto
            && sends == Some(GenKind::Afxdp.name())
            && !self.told_fallback.replace(true)
        {
            eprintln!(
                "note: the kernel refuses XDP live frames here (its log: {}): the generator sends \
                 from an AF_XDP socket, which offers fewer frames per second",
                self.setup.dir.join(format!("{label}.log")).display()
            );
        }
        Ok(Some(agent))
    }

    /// Frames offered so far: the generator's count, or what the input port received.
    fn offered(&self, generator: &mut Option<Agent>) -> anyhow::Result<Reading> {
        match generator {
            Some(generator) => generator.read(),
            None => interface_reading(self.setup.dut_ports.0, "rx_packets"),
        }
    }

    /// Frames forwarded so far: the sink's count of IPv4 frames (the forwarder's own ARP
    /// probes do not count), or what the output port sent.
    fn forwarded(&mut self) -> anyhow::Result<Reading> {
        match &mut self.meter {
            Meter::Own { sink, .. } => sink.read(),
            Meter::Ports => interface_reading(self.setup.dut_ports.1, "tx_packets"),
        }
    }

    fn measure(&mut self, candidate: Candidate, round: usize) -> anyhow::Result<Sample> {
        let mut dut = Dut::start(self.setup, candidate, round)?;
        let result = self.measure_running(&mut dut, candidate, round);
        let log = dut.stop();
        match (result, log) {
            (Ok(sample), Ok(_)) => Ok(sample),
            (Ok(_), Err(error)) => Err(error),
            (Err(error), Ok(log)) if !log.is_empty() => Err(error.context(log)),
            (Err(error), _) => Err(error),
        }
    }

    fn measure_running(
        &mut self,
        dut: &mut Dut,
        candidate: Candidate,
        round: usize,
    ) -> anyhow::Result<Sample> {
        let options = self.setup.options;
        let ports = self.setup.dut_ports;
        let dut_first = dut.counters(ports)?.unwrap_or_default();
        let mut generator = self.generator(&format!("gen-{}-{round}", candidate.name()))?;
        // Forwarding has begun once the forwarded count moves.
        let (first, offered_first) = (self.forwarded()?, self.offered(&mut generator)?);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            pause(Duration::from_millis(50))?;
            dut.check_running()?;
            if self.forwarded()?.count > first.count {
                break;
            }
            if Instant::now() > deadline {
                let offered = self.offered(&mut generator)?.count - offered_first.count;
                let diagnosis = dut
                    .counters(ports)?
                    .map(|now| now.diagnosis(&dut_first))
                    .filter(|text| !text.is_empty())
                    .map(|text| format!(": {text}"))
                    .unwrap_or_default();
                let source = match &self.meter {
                    Meter::Own { .. } => format!("generator sent {offered} frames"),
                    Meter::Ports if offered == 0 => format!(
                        "{} received nothing: start the traffic towards it first",
                        ports.0
                    ),
                    Meter::Ports => format!("{} received {offered} frames", ports.0),
                };
                bail!(
                    "{} forwarded nothing within 10 s ({source}){diagnosis}",
                    candidate.name(),
                );
            }
        }
        pause(options.warmup)?;
        let (sink0, gen0, dut0) = (
            self.forwarded()?,
            self.offered(&mut generator)?,
            dut.counters(ports)?,
        );
        pause(options.measurement)?;
        let (sink1, gen1, dut1) = (
            self.forwarded()?,
            self.offered(&mut generator)?,
            dut.counters(ports)?,
        );
        if let Some(generator) = generator {
            generator.finish()?;
        }
        let rate = |a: Reading, b: Reading| {
            (b.count - a.count) as f64 / ((b.ns - a.ns) as f64 / 1e9) / 1e6
        };
        let window_s = (sink1.ns - sink0.ns) as f64 / 1e9;
        let faults = match (&dut0, &dut1) {
            (Some(before), Some(after)) => after.faults_since(before),
            _ => Vec::new(),
        };
        let offered = gen1.count.saturating_sub(gen0.count);
        let forwarded = sink1.count.saturating_sub(sink0.count);
        if let Some(explained) = loss_explained(offered, forwarded, &faults) {
            let diagnosis = dut1
                .as_ref()
                .zip(dut0.as_ref())
                .map(|(after, before)| after.diagnosis(before))
                .unwrap_or_default();
            bail!(
                "{} forwarded {forwarded} of {offered} frames offered, and its drop counters \
                 explain {explained:.0} % of the loss: {diagnosis}",
                candidate.name(),
            );
        }
        Ok(Sample {
            round,
            mpps: rate(sink0, sink1),
            offered_mpps: rate(gen0, gen1),
            dut_mpps: dut0
                .as_ref()
                .zip(dut1.as_ref())
                .map(|(a, b)| b.sent.saturating_sub(a.sent) as f64 / window_s / 1e6),
            queues: per_queue(sink0, sink1),
            dut_queues: match (&dut0, &dut1) {
                (Some(before), Some(after)) => DutQueues {
                    received: grown(&before.received_by_queue, &after.received_by_queue),
                    sent: grown(&before.sent_by_queue, &after.sent_by_queue),
                },
                _ => DutQueues::default(),
            },
            faults,
        })
    }
}

/// The share of the loss (frames offered but not forwarded) that a candidate's fault drop
/// counters account for, in per cent, when they account for at least half of it and the loss is
/// more than 1 % of what was offered: then the measurement shows a fault of the candidate (a
/// neighbour never resolved, frames without a route), not its capacity. `None` otherwise.
pub(super) fn loss_explained(
    offered: u64,
    forwarded: u64,
    faults: &[(String, u64)],
) -> Option<f64> {
    let loss = offered.saturating_sub(forwarded);
    let dropped: u64 = faults.iter().map(|(_, value)| value).sum();
    let material = loss > 0 && loss * 100 > offered;
    (material && dropped * 2 >= loss).then(|| (dropped as f64 * 100.0 / loss as f64).min(100.0))
}

/// A reading of interface `name`'s counter `counter` (`/sys/class/net/NAME/statistics/…`).
fn interface_reading(name: &str, counter: &str) -> anyhow::Result<Reading> {
    let path = format!("/sys/class/net/{name}/statistics/{counter}");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    Ok(Reading {
        count: text
            .trim()
            .parse()
            .with_context(|| format!("{path}: `{}`", text.trim()))?,
        ns: ofan_dataplane::afxdp::monotonic_ns(),
        queues: [0; crate::process::QUEUE_SLOTS],
        other: 0,
    })
}

/// What each counter of `after` grew by since `before`.
fn grown(before: &[u64], after: &[u64]) -> Vec<u64> {
    after
        .iter()
        .enumerate()
        .map(|(i, a)| a.saturating_sub(before.get(i).copied().unwrap_or(0)))
        .collect()
}

/// Frames per RX queue the sink counted between two readings.
fn per_queue(before: Reading, after: Reading) -> Vec<u64> {
    let mut queues: Vec<u64> = after
        .queues
        .iter()
        .zip(before.queues)
        .map(|(after, before)| after.saturating_sub(before))
        .collect();
    while queues.len() > 1 && queues.last() == Some(&0) {
        queues.pop();
    }
    queues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_drops_explain_a_loss_only_when_they_are_most_of_a_material_one() {
        let drops = |n| vec![("drop_neighbor_unresolved".to_owned(), n)];
        // Nothing forwarded, every frame dropped as unresolved: explained.
        assert_eq!(loss_explained(1000, 0, &drops(1000)), Some(100.0));
        assert_eq!(loss_explained(1000, 0, &drops(600)), Some(60.0));
        // Overload: the loss is at the rings, not in the counters.
        assert_eq!(loss_explained(3000, 900, &drops(5)), None);
        assert_eq!(loss_explained(3000, 900, &[]), None);
        // A loss under 1 % of the offer is noise, whatever explains it.
        assert_eq!(loss_explained(100_000, 99_950, &drops(50)), None);
        // Everything forwarded.
        assert_eq!(loss_explained(1000, 1000, &drops(0)), None);
    }
}
