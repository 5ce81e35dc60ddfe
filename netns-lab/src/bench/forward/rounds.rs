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
use crate::bench::report::{Outcome, Sample};

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
        let mut generator = self.generator(&format!("gen-{}-{round}", candidate.name()))?;
        // Forwarding has begun once the sink's count moves.
        let first = self.sink.read()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            pause(Duration::from_millis(50))?;
            dut.check_running()?;
            if self.sink.read()?.count > first.count {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "{} forwarded nothing within 10 s (generator sent {} frames)",
                    candidate.name(),
                    generator.read()?.count
                );
            }
        }
        pause(options.warmup)?;
        let (sink0, gen0, dut0) = (self.sink.read()?, generator.read()?, dut.sent()?);
        pause(options.measurement)?;
        let (sink1, gen1, dut1) = (self.sink.read()?, generator.read()?, dut.sent()?);
        generator.finish()?;
        let rate = |a: Reading, b: Reading| {
            (b.count - a.count) as f64 / ((b.ns - a.ns) as f64 / 1e9) / 1e6
        };
        let window_s = (sink1.ns - sink0.ns) as f64 / 1e9;
        Ok(Sample {
            round,
            mpps: rate(sink0, sink1),
            offered_mpps: rate(gen0, gen1),
            dut_mpps: dut0
                .zip(dut1)
                .map(|(a, b)| b.saturating_sub(a) as f64 / window_s / 1e6),
        })
    }
}
