//! The child processes of one benchmark run, always stopped, and the run's interruption.
//!
//! [`Agent`] and [`Daemon`] stop exactly the process they started, by pid, when they drop.
//! [`child`] starts children in a session of their own inside one of the run's namespaces
//! ([`ofan_lab::netns::Namespaces`], deleted after its children are stopped), so a Ctrl-C at the
//! terminal reaches only `ofan-lab`, which then unwinds through these guards in order (see
//! [`interrupted`]).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use ofan_lab::netns::Namespaces;

static INTERRUPT: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, so the guards run.
///
/// # Errors
/// When the handlers cannot be installed.
pub fn catch_interrupts() -> anyhow::Result<()> {
    let flag = INTERRUPT.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(flag))
            .context("cannot install signal handlers")?;
    }
    Ok(())
}

/// Fails once SIGINT or SIGTERM arrived.
///
/// # Errors
/// "interrupted".
pub fn interrupted() -> anyhow::Result<()> {
    if INTERRUPT
        .get()
        .is_some_and(|flag| flag.load(Ordering::Relaxed))
    {
        bail!("interrupted");
    }
    Ok(())
}

/// Sleeps for `duration`, failing early when interrupted.
///
/// # Errors
/// "interrupted".
pub fn pause(duration: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + duration;
    loop {
        interrupted()?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// `program` inside namespace `ns` as a child of the benchmark: in a session of its own (so a
/// Ctrl-C at the terminal reaches only `ofan-lab`, which then stops it), at the benchmark's
/// nice value. With autogroup scheduling (`kernel.sched_autogroup_enabled`) a nice value only
/// ranks threads within their session's group, so the new session's group gets it too.
pub fn child(
    namespaces: &Namespaces,
    ns: &str,
    nice: i32,
    program: impl AsRef<std::ffi::OsStr>,
) -> Command {
    niced(namespaces.command(ns, "setsid"), nice, program)
}

/// [`child`] in this process's own network namespace (a run on real ports).
pub fn child_here(nice: i32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    niced(Command::new("setsid"), nice, program)
}

/// `setsid` (the command given) running `program` at `nice`, its session's autogroup too.
fn niced(mut command: Command, nice: i32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    command
        .arg("sh")
        .arg("-c")
        .arg(format!(
            "echo {nice} > /proc/self/autogroup 2>/dev/null; exec nice -n {nice} \"$0\" \"$@\""
        ))
        .arg(program);
    command
}

/// Opens `<dir>/<label>.log` for a child's output.
fn log_file(dir: &Path, label: &str) -> anyhow::Result<(std::fs::File, PathBuf)> {
    let path = dir.join(format!("{label}.log"));
    let file =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok((file, path))
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Stops a child: SIGTERM, up to `grace` to exit, then SIGKILL. Always reaps it.
fn stop_child(child: &mut Child, grace: Duration) -> Option<std::process::ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let _ = Command::new("kill")
        .args(["-s", "TERM", &child.id().to_string()])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// A long-running process whose output goes to a log file (`ofan-switch`, `dpdk-testpmd`);
/// stopped with SIGTERM (then SIGKILL) on drop.
#[derive(Debug)]
pub struct Daemon {
    label: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `command`, output to `<dir>/<label>.log`.
    ///
    /// # Errors
    /// When it cannot start.
    pub fn spawn(label: &str, mut command: Command, dir: &Path) -> anyhow::Result<Self> {
        let (log, path) = log_file(dir, label)?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {label}: {command:?}"))?;
        Ok(Self {
            label: label.to_owned(),
            child,
            log: path,
        })
    }

    /// Fails with the end of the log if the process has exited.
    ///
    /// # Errors
    /// When it is no longer running.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited ({status}):\n{}", self.label, tail(&self.log));
        }
        Ok(())
    }

    /// The log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The end of the log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }

    /// Stops it (SIGTERM, then SIGKILL after 5 s) and returns the end of its log.
    pub fn stop(mut self) -> String {
        stop_child(&mut self.child, Duration::from_secs(5));
        tail(&self.log)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}

/// A reading of an agent: its count and the monotonic time of the reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The agent's count.
    pub count: u64,
    /// `CLOCK_MONOTONIC` in ns.
    pub ns: u64,
    /// The sink's count by RX queue (zeros for the other agents).
    pub queues: [u64; QUEUE_SLOTS],
    /// The sink's count of frames that are not the benchmark's (0 for the other agents).
    pub other: u64,
}

/// RX queues a sink reading tells apart.
pub const QUEUE_SLOTS: usize = ofan_dataplane::afxdp::MAX_QUEUES as usize;

/// An `ofan-lab bench gen|sink|redirect` process (protocol in [`super::agents`]).
#[derive(Debug)]
pub struct Agent {
    label: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    log: PathBuf,
    /// The `ready …` line it answered with.
    ready: String,
}

impl Agent {
    /// Starts the agent and waits (up to 10 s) for its `ready` line.
    ///
    /// # Errors
    /// When it cannot start or does not become ready.
    pub fn start(label: &str, mut command: Command, dir: &Path) -> anyhow::Result<Self> {
        let (log, path) = log_file(dir, label)?;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {label}: {command:?}"))?;
        let stdout = child.stdout.take().context("agent stdout")?;
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut agent = Self {
            label: label.to_owned(),
            stdin: child.stdin.take(),
            child,
            lines,
            log: path,
            ready: String::new(),
        };
        let line = agent.line(Duration::from_secs(10))?;
        if !line.starts_with("ready") {
            bail!("{label} said `{line}` instead of ready");
        }
        agent.ready = line;
        Ok(agent)
    }

    /// The value of `key=` in its `ready` line (`gen` of a generator: how it sends).
    #[must_use]
    pub fn ready_field(&self, key: &str) -> Option<&str> {
        self.ready
            .split_whitespace()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
    }

    fn line(&mut self, timeout: Duration) -> anyhow::Result<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                bail!("{} did not answer within {timeout:?}", self.label)
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().ok();
                bail!("{} exited ({status:?}):\n{}", self.label, tail(&self.log))
            }
        }
    }

    /// Asks for the agent's count.
    ///
    /// # Errors
    /// When the agent does not answer within 10 s or answers nonsense.
    pub fn read(&mut self) -> anyhow::Result<Reading> {
        let stdin = self.stdin.as_mut().context("agent already stopped")?;
        stdin
            .write_all(b"?\n")
            .and_then(|()| stdin.flush())
            .with_context(|| format!("asking {}", self.label))?;
        let line = self.line(Duration::from_secs(10))?;
        let value = |key: &str| {
            line.split_whitespace()
                .find_map(|word| word.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .with_context(|| format!("{} said `{line}`", self.label))
        };
        let mut queues = [0; QUEUE_SLOTS];
        if let Some(list) = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("queues="))
        {
            for (slot, text) in queues.iter_mut().zip(list.split(',')) {
                *slot = text
                    .parse()
                    .with_context(|| format!("{} said `{line}`", self.label))?;
            }
        }
        Ok(Reading {
            count: value("count=")?,
            ns: value("ns=")?,
            queues,
            other: line
                .split_whitespace()
                .find_map(|word| word.strip_prefix("other="))
                .map_or(Ok(0), str::parse)
                .with_context(|| format!("{} said `{line}`", self.label))?,
        })
    }

    /// Closes its stdin and waits (up to 5 s) for it to clean up and exit; returns its `done`
    /// line.
    ///
    /// # Errors
    /// When it fails or does not exit in time (it is then killed).
    pub fn finish(mut self) -> anyhow::Result<String> {
        drop(self.stdin.take());
        let mut done = String::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) if line.starts_with("done") => done = line,
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = stop_child(&mut self.child, Duration::from_secs(1));
        if !status.is_some_and(|s| s.success()) {
            bail!(
                "{} did not exit cleanly ({status:?}):\n{}",
                self.label,
                tail(&self.log)
            );
        }
        Ok(done)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        stop_child(&mut self.child, Duration::from_secs(1));
    }
}
