//! The rounds: every candidate measured once per round, in an order that rotates from round to
//! round, and one measurement — candidate up, generator on, forwarding seen at the sink,
//! warm-up, the sink (and generator, and candidate) read before and after the measured seconds.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::candidates::{reason_of, Dut};
use super::fabric::{Fabric, DEST_IP, GEN_IP};
use super::{Candidate, Observer, Setup};
use crate::bench::agents::GenOptions;
use crate::bench::process::{self, child, pause, Agent, Reading};
use crate::bench::report::{DutQueues, Outcome, Sample};

/// The sink, counting for the whole run, and everything one measurement needs.
pub(super) struct Rounds<'a> {
    setup: &'a Setup<'a>,
    fabric: &'a Fabric,
    sink: Agent,
}

impl<'a> Rounds<'a> {
    /// Starts the sink.
    ///
    /// # Errors
    /// When the sink does not become ready.
    pub(super) fn start(setup: &'a Setup<'a>, fabric: &'a Fabric) -> anyhow::Result<Self> {
        let mut command = child(
            setup.namespaces,
            "sink",
            setup.options.nice,
            &setup.options.ofan_lab,
        );
        command.args(["bench", "sink", "--interface", "eth0"]);
        let sink = Agent::start("sink", command, setup.dir)?;
        Ok(Self {
            setup,
            fabric,
            sink,
        })
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
        self.sink.finish()?;
        Ok(())
    }

    fn generator(&self, label: &str) -> anyhow::Result<Agent> {
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
            ..GenOptions::new("eth0", self.fabric.p0_mac)
        };
        let mut command = child(
            self.setup.namespaces,
            "gen",
            options.nice,
            &options.ofan_lab,
        );
        command.args(["bench", "gen"]).args(generator.args());
        Agent::start(label, command, self.setup.dir)
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
        let dut_first = dut.counters()?.unwrap_or_default();
        let mut generator = self.generator(&format!("gen-{}-{round}", candidate.name()))?;
        // Forwarding has begun once the sink's count of IPv4 frames moves (the forwarder's own
        // ARP probes do not count).
        let first = self.sink.read()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            pause(Duration::from_millis(50))?;
            dut.check_running()?;
            if self.sink.read()?.count > first.count {
                break;
            }
            if Instant::now() > deadline {
                let sent = generator.read()?.count;
                let diagnosis = dut
                    .counters()?
                    .map(|now| now.diagnosis(&dut_first))
                    .filter(|text| !text.is_empty())
                    .map(|text| format!(": {text}"))
                    .unwrap_or_default();
                bail!(
                    "{} forwarded nothing within 10 s (generator sent {sent} frames){diagnosis}",
                    candidate.name(),
                );
            }
        }
        pause(options.warmup)?;
        let (sink0, gen0, dut0) = (self.sink.read()?, generator.read()?, dut.counters()?);
        pause(options.measurement)?;
        let (sink1, gen1, dut1) = (self.sink.read()?, generator.read()?, dut.counters()?);
        generator.finish()?;
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
