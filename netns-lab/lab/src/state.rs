//! The per-lab state directory `/run/ofan/labs/<name>/`: `state.json` (every namespace, veth,
//! process and file the lab created, written as soon as each is created), `topo.json`, `logs/` and
//! `sock/`.

use std::path::{Path, PathBuf};

use ofan_dataplane::arf::Combine;
use serde::{Deserialize, Serialize};

/// Root of all lab state directories.
pub const LABS_DIR: &str = "/run/ofan/labs";

/// How far a lab got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// `up` is (or was, if it crashed) building it.
    Building,
    /// `up` finished.
    Up,
}

/// How a lab was built (what `up` was asked for, resolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Params {
    /// What `--topo` said (fat-tree, leaf-spine or a file) and k.
    pub topo: String,
    /// Load-balancing algorithm (on a dragonfly: the routing scheme).
    pub lb: String,
    /// Switches that run another algorithm than `lb` (`up --lb-map`, `node S lb ALGO`):
    /// switch name → algorithm.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub lb_map: std::collections::BTreeMap<String, String>,
    /// Whether the lab is a dragonfly: `lb` names the routers' scheme
    /// (`ofan-switch --dragonfly`), and their balancer is ECMP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dragonfly: bool,
    /// Ports per pipe.
    pub pipe_size: u16,
    /// Link rate as given to the switches.
    pub link_rate: String,
    /// The same in bits per second.
    pub link_rate_bps: u64,
    /// Egress buffer per port.
    pub buffer: String,
    /// MTU of every link.
    pub mtu: u32,
    /// Seed of the switches.
    pub seed: u64,
    /// SCHED_FIFO priority of the switches' workers (0 = ordinary scheduling).
    #[serde(default)]
    pub rt_priority: u8,
    /// Whether the switches' shapers catch up on late departures (`--catch-up`).
    #[serde(default)]
    pub catch_up: bool,
    /// Where routes come from.
    pub routing: String,
    /// The routing daemon under `--routing bgp` (`frr` or `bird`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bgp_daemon: Option<String>,
    /// BFD on the BGP sessions (`--bfd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<super::spec::Bfd>,
    /// The ASNs under `--routing bgp` (`up --asn-plan`; labs recorded before: unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asn_plan: Option<ofan_topology::plan::AsnPlan>,
    /// The `ofan-switch` binary.
    pub switch_bin: PathBuf,
    /// One `ofan-switch group` for all switches, or a process each (labs recorded before
    /// groups existed: processes).
    #[serde(default)]
    pub switches: super::spec::Switches,
    /// Whether the group carries frames between its switches in the process
    /// (`ofan-switch group --splice`; labs recorded before: no).
    #[serde(default)]
    pub splice: bool,
    /// What carries the agents' frames between hosts and edge switches (labs recorded
    /// before: the veths).
    #[serde(default)]
    pub host_links: super::spec::HostLinks,
    /// The switches' log filter (`up --switch-log`; absent: the switches' default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch_log: Option<String>,
    /// Whether the switches forward in their XDP programs too (`up --fast-path`; labs recorded
    /// before: off).
    #[serde(default)]
    pub fast_path: ofan_dataplane::afxdp::FastPathMode,
    /// Whether the lab changed machine-wide settings for its fidelity (`up --tune-machine`;
    /// labs recorded before: they all did).
    #[serde(default)]
    pub tune_machine: bool,
    /// Queue depth above which the switches mark ECN-capable frames CE, as given to them
    /// (`up --ecn-threshold`; absent: no marking, as labs recorded before did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_threshold: Option<String>,
    /// How the `arf-*` switches combine a path's local and remote levels (`up
    /// --arf-combine`, `set --arf-combine`; labs recorded before: min).
    #[serde(default, skip_serializing_if = "Combine::is_min")]
    pub arf_combine: Combine,
}

impl Params {
    /// Whether the switches pass their notifications on to the hosts (`ofan-switch
    /// --arf-notify-hosts`): a multi-plane lab (its hosts choose the plane, the framework's
    /// endpoint plane) whose switches run the adaptive-routing framework (`arf-*`, the
    /// algorithms that send notifications).
    #[must_use]
    pub fn notifies_hosts(&self) -> bool {
        self.topo.starts_with("multi-plane")
            && self
                .lb
                .parse::<ofan_dataplane::lb::Algorithm>()
                .is_ok_and(|algorithm| algorithm.uses_path_quality())
    }

    /// How the lab's BGP fabric numbers its ASNs (unique when it has no BGP).
    #[must_use]
    pub fn asns(&self) -> ofan_topology::plan::AsnPlan {
        self.asn_plan.unwrap_or_default()
    }
}

/// What a link is, or what `link A B up|down|blackhole` makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LinkState {
    /// Carrier up, frames pass.
    Up,
    /// Carrier down at both ends (`link A B down`, or an end switch stopped).
    Down,
    /// Carrier up, every frame dropped where it is received, at both ends: a silent failure
    /// only a protocol's timers (BGP hold time, BFD) can notice.
    Blackholed,
}

impl LinkState {
    /// The word `link` and `status` print.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "DOWN",
            Self::Blackholed => "BLACKHOLE",
        }
    }
}

/// A process the lab started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Node it serves.
    pub node: String,
    /// Process id.
    pub pid: u32,
    /// Start time (`/proc/PID/stat` field 22, clock ticks since boot): with the pid, identifies
    /// the process even after the pid is reused.
    pub start_time: u64,
}

/// Everything a lab created, in creation order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    /// Lab name.
    pub name: String,
    /// How far `up` got.
    pub phase: Phase,
    /// What was asked for.
    pub params: Params,
    /// Namespaces (recorded before each is created).
    pub namespaces: Vec<String>,
    /// Veth ends as `namespace/ifname` (recorded before each pair is created).
    pub veths: Vec<String>,
    /// Switch processes, one per running switch.
    pub processes: Vec<Process>,
    /// Routing daemons (`--routing bgp`: zebra and bgpd per running switch).
    #[serde(default)]
    pub daemons: Vec<Process>,
    /// Links taken down with `link A B down` (link ids).
    pub failed_links: Vec<u32>,
    /// Links blackholed with `link A B blackhole` (link ids): carrier up, every frame dropped
    /// at both receiving ends. Recorded before the drops are set up.
    #[serde(default)]
    pub blackholed_links: Vec<u32>,
    /// Links slowed with `link A B rate R`: (link id, bit/s). Recorded before the switches are
    /// told.
    #[serde(default)]
    pub link_rates: Vec<(u32, u64)>,
    /// Switches stopped with `node SWITCH stop`.
    pub stopped: Vec<String>,
    /// Files outside the state directory's fixed layout (captures).
    pub files: Vec<PathBuf>,
    /// Seconds `up` took.
    pub up_seconds: Option<f64>,
}

impl LabState {
    /// A fresh state for lab `name`.
    pub fn new(name: &str, params: Params) -> Self {
        Self {
            name: name.to_owned(),
            phase: Phase::Building,
            params,
            namespaces: Vec::new(),
            veths: Vec::new(),
            processes: Vec::new(),
            daemons: Vec::new(),
            failed_links: Vec::new(),
            blackholed_links: Vec::new(),
            link_rates: Vec::new(),
            stopped: Vec::new(),
            files: Vec::new(),
            up_seconds: None,
        }
    }
}

/// The state directory of one lab.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

/// Reading or writing a state directory failed.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `state.json` is not a lab state.
    #[error("{path}: not a lab state file: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The error.
        source: serde_json::Error,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_owned(),
        source,
    }
}

impl StateDir {
    /// The state directory of lab `name` (it need not exist).
    pub fn of(name: &str) -> Self {
        Self {
            root: Path::new(LABS_DIR).join(name),
        }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the lab has a state directory.
    pub fn exists(&self) -> bool {
        self.root.join("state.json").exists()
    }

    /// Creates the directory and its subdirectories.
    ///
    /// # Errors
    /// When a directory cannot be created.
    pub fn create(&self) -> Result<(), StateError> {
        for sub in ["logs", "sock"] {
            let dir = self.root.join(sub);
            std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
        }
        Ok(())
    }

    /// `topo.json`.
    pub fn topology_file(&self) -> PathBuf {
        self.root.join("topo.json")
    }

    /// The log of node `node`.
    pub fn log(&self, node: &str) -> PathBuf {
        self.root.join("logs").join(format!("{node}.log"))
    }

    /// The routing daemons' directory of switch `node` (configuration, pid files, BIRD's
    /// control socket).
    pub fn routing_dir(&self, node: &str) -> PathBuf {
        self.root.join("routing").join(node)
    }

    /// The admin socket of switch `node`.
    pub fn socket(&self, node: &str) -> PathBuf {
        self.root.join("sock").join(format!("{node}.sock"))
    }

    /// The directory of the hosts' shared-memory links (`ofan-switch group --host-links`).
    pub fn host_links(&self) -> PathBuf {
        self.root.join("hostlinks")
    }

    /// The control socket of the lab's `ofan-switch group`.
    #[must_use]
    pub fn group_control(&self) -> PathBuf {
        self.root.join("sock").join("group.ctl")
    }

    /// Reads `state.json`.
    ///
    /// # Errors
    /// When it is missing or unreadable.
    pub fn load(&self) -> Result<LabState, StateError> {
        let path = self.root.join("state.json");
        let text = std::fs::read_to_string(&path).map_err(io_error(&path))?;
        serde_json::from_str(&text).map_err(|source| StateError::Parse { path, source })
    }

    /// Writes `state.json` atomically (temporary file, then rename), so a crash leaves either
    /// the old or the new state.
    ///
    /// # Errors
    /// When it cannot be written.
    pub fn save(&self, state: &LabState) -> Result<(), StateError> {
        let path = self.root.join("state.json");
        let temporary = self.root.join("state.json.tmp");
        let text = serde_json::to_string_pretty(state).expect("the lab state always serializes");
        std::fs::write(&temporary, text).map_err(io_error(&temporary))?;
        std::fs::rename(&temporary, &path).map_err(io_error(&path))
    }

    /// Removes the whole directory (logs included).
    ///
    /// # Errors
    /// When it cannot be removed.
    pub fn remove(&self) -> Result<(), StateError> {
        match std::fs::remove_dir_all(&self.root) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(io_error(&self.root)(error))
            }
            _ => Ok(()),
        }
    }

    /// The names of every lab with a state directory.
    pub fn all_labs() -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(LABS_DIR)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|entry| entry.path().is_dir())
                    .filter_map(|entry| entry.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_states_and_states_from_before_blackholes() {
        assert_eq!(
            serde_json::to_string(&LinkState::Blackholed).unwrap(),
            "\"blackholed\""
        );
        assert_eq!(LinkState::Blackholed.label(), "BLACKHOLE");
        assert_eq!(LinkState::Down.label(), "DOWN");
        let params: Params = serde_json::from_value(serde_json::json!({
            "topo": "fat-tree k=4", "lb": "pofan", "pipe_size": 4, "link_rate": "1mbit",
            "link_rate_bps": 1_000_000, "buffer": "64KB", "mtu": 1500, "seed": 1,
            "routing": "static", "switch_bin": "/bin/ofan-switch"
        }))
        .unwrap();
        let mut state = serde_json::to_value(LabState::new("lab", params)).unwrap();
        assert_eq!(state["blackholed_links"], serde_json::json!([]));
        // A lab built before `link A B blackhole` existed loads with none.
        state.as_object_mut().unwrap().remove("blackholed_links");
        let state: LabState = serde_json::from_value(state).unwrap();
        assert!(state.blackholed_links.is_empty());
    }
}
