//! Named network namespaces that are always cleaned up, and the one listing of them.
//!
//! [`Namespaces`] is the RAII guard every short-lived user of namespaces shares — the forwarding
//! benchmark (`ofan_lab_bench`) and the root test suites (`tests/`): it creates namespaces
//! `<prefix>-<short>` under a prefix unique to its process, runs commands in them, and deletes
//! exactly the ones it created when it drops, also while a panic unwinds (with them go their
//! veths and any XDP program attached inside). Processes started in them are the caller's to
//! stop first.
//!
//! The lab (this crate) does not use the guard: a lab outlives the process that builds it,
//! so it records every namespace in its state directory before creating it and `down` removes
//! what is recorded, also after a crash. It lists namespaces through [`namespaces_with_prefix`],
//! as the tests do to check that nothing is left behind.

use std::ffi::OsStr;
use std::io;
use std::process::{Command, ExitStatus, Output, Stdio};

use crate::net::NETNS_DIR;

/// A command about namespaces failed.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The command could not be started.
    #[error("cannot run {command}")]
    Spawn {
        /// The command line (`Debug` of the [`Command`]).
        command: String,
        /// Why it could not start.
        source: io::Error,
    },
    /// The command exited unsuccessfully.
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        /// The command line (`Debug` of the [`Command`]).
        command: String,
        /// How it exited.
        status: ExitStatus,
        /// What it wrote to stderr, trimmed.
        stderr: String,
    },
    /// An empty argument vector was given to run.
    #[error("empty command")]
    Empty,
}

/// Runs `command` to completion with stdin closed and returns its stdout.
///
/// # Errors
/// [`NetnsError::Spawn`] when it cannot start, [`NetnsError::Failed`] (with its stderr) when it
/// exits unsuccessfully.
pub fn run(command: &mut Command) -> Result<String, NetnsError> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            command: format!("{command:?}"),
            source,
        })?;
    if !output.status.success() {
        return Err(NetnsError::Failed {
            command: format!("{command:?}"),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Every namespace whose name starts with `prefix`, sorted (for example to check that nothing
/// of a run is left behind).
#[must_use]
pub fn namespaces_with_prefix(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().into_string().ok())
                .filter(|name| name.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A set of namespaces `<prefix>-<short>`: each created by [`add`](Self::add) is deleted when
/// the set drops, in reverse order, also during a panic's unwinding; no other namespace is
/// touched.
///
/// The prefix must be unique to the process (contain its pid) and to the set within it, so
/// that concurrent runs and tests never share a name; [`add`](Self::add) fails rather than
/// adopt a namespace that exists already.
#[derive(Debug)]
pub struct Namespaces {
    prefix: String,
    created: Vec<String>,
}

impl Namespaces {
    /// No namespaces yet; their names will be `<prefix>-<short>`.
    #[must_use]
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            created: Vec::new(),
        }
    }

    /// The prefix of every name.
    #[must_use]
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The full name of namespace `short`.
    #[must_use]
    pub fn name(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    /// The full names of the namespaces created so far, in order.
    #[must_use]
    pub fn names(&self) -> &[String] {
        &self.created
    }

    /// Creates namespace `short` with loopback up and returns its full name.
    ///
    /// # Errors
    /// When `ip netns add` fails (for example because the name exists) or loopback cannot be
    /// set up (the namespace is then still deleted on drop).
    pub fn add(&mut self, short: &str) -> Result<String, NetnsError> {
        let name = self.name(short);
        run(Command::new("ip").args(["netns", "add", &name]))?;
        self.created.push(name.clone());
        self.exec(short, &["ip", "link", "set", "lo", "up"])?;
        Ok(name)
    }

    /// A command that runs `program` inside namespace `short` (`ip netns exec`).
    #[must_use]
    pub fn command(&self, short: &str, program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &self.name(short)])
            .arg(program);
        command
    }

    /// Runs `argv` inside namespace `short` to completion, stdin closed, and returns its
    /// output whatever its exit status.
    ///
    /// # Errors
    /// When `argv` is empty or the command cannot start.
    pub fn output(&self, short: &str, argv: &[&str]) -> Result<Output, NetnsError> {
        let (program, args) = argv.split_first().ok_or(NetnsError::Empty)?;
        let mut command = self.command(short, program);
        command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| NetnsError::Spawn {
                command: format!("{command:?}"),
                source,
            })
    }

    /// Runs `argv` inside namespace `short` and returns its stdout.
    ///
    /// # Errors
    /// When `argv` is empty, or the command cannot start or exits unsuccessfully.
    pub fn exec(&self, short: &str, argv: &[&str]) -> Result<String, NetnsError> {
        let (program, args) = argv.split_first().ok_or(NetnsError::Empty)?;
        run(self.command(short, program).args(args))
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in self.created.drain(..).rev() {
            let deleted = Command::new("ip")
                .args(["netns", "del", &name])
                .stdin(Stdio::null())
                .status();
            if !deleted.is_ok_and(|status| status.success()) {
                eprintln!(
                    "ofan-lab: could not delete namespace {name}; remove it with \
                     `ip netns del {name}`"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_prefix_and_nothing_is_created_up_front() {
        let namespaces = Namespaces::new("ofan-x1-0");
        assert_eq!(namespaces.name("gen"), "ofan-x1-0-gen");
        assert_eq!(namespaces.prefix(), "ofan-x1-0");
        assert!(namespaces.names().is_empty());
        let command = namespaces.command("dut", "true");
        let args: Vec<_> = command.get_args().collect();
        assert_eq!(args, ["netns", "exec", "ofan-x1-0-dut", "true"]);
    }

    #[test]
    fn an_empty_command_is_refused() {
        let namespaces = Namespaces::new("ofan-x2-0");
        assert!(matches!(namespaces.exec("a", &[]), Err(NetnsError::Empty)));
    }

    #[test]
    fn failures_carry_the_command_line_and_stderr() {
        let error = run(Command::new("sh").args(["-c", "echo oops >&2; exit 3"])).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("\"sh\" \"-c\"") && text.ends_with(": oops"),
            "{text}"
        );
    }
}
