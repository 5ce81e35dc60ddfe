//! `ofan-lab view`: serves the lab's live view and its Prometheus `/metrics` until Ctrl-C (or
//! until the lab is removed).

use std::net::SocketAddr;

use ofan_lab_view::{self as view, ViewOptions, DEFAULT_LISTEN, MIN_INTERVAL};

use super::lab::LabName;
use super::units::parse_duration;

/// What `view` serves.
#[derive(Debug, Clone, clap::Args)]
#[command(after_long_help = "\
The page draws the fabric in tiers (cores or spines at the top, hosts at the bottom) and
redraws it at every sample, pushed to the browser as server-sent events:
  - each link is two lines, one per direction, as traffic drives on the right: seen from the
    lower end, the right-hand line carries traffic up the tree, the left-hand one down.
    Colour and width are its utilization in the last interval (grey idle, green low, yellow
    50 %, red saturated); grey dashes: down; purple dashes: blackholed;
  - the dots near each end are that end's egress queue, averaged over the interval (size:
    frames queued, log scale; colour: fill of the port's buffer);
  - switches: blue running, grey stopped, red CRASHED, orange not answering;
  - the side panel: the collective running on the lab (`ofan-lab run`: flows done / total),
    queues by stage of the paths (edge up, aggregation up, core down, …), and the counters of
    whatever you click.

It binds loopback by default; from a laptop, tunnel it:
  ssh -L 8080:127.0.0.1:8080 LABHOST   then open http://127.0.0.1:8080/

Routes: / (the page), /events (server-sent events), /metrics (every switch's series for
Prometheus, labelled switch=\"…\"), /api/topology, /api/frame, /api/switch/NAME (JSON).

Examples:
  ofan-lab view --name lab
  ofan-lab view --name big --listen 127.0.0.1:9100 --interval 1s")]
pub struct ViewArgs {
    #[command(flatten)]
    pub lab: LabName,
    /// Address to serve on. Keep it on loopback unless you mean to show the lab's counters to
    /// your network.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// How often every switch is read and a frame pushed (at least 100ms).
    #[arg(long, value_name = "DURATION", default_value = "500ms")]
    pub interval: String,
}

/// Runs `view` until the process is interrupted or the lab is removed.
///
/// # Errors
/// No such lab, a bad interval, the address taken; the lab removed while it ran.
pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    let interval = parse_duration(&args.interval)?;
    anyhow::ensure!(
        interval >= MIN_INTERVAL,
        "--interval {} is too short: every switch is asked at every sample (at least {} ms)",
        args.interval,
        MIN_INTERVAL.as_millis()
    );
    let running = view::serve(
        &args.lab.name,
        ViewOptions {
            listen: args.listen,
            interval,
        },
    )?;
    let addr = running.local_addr();
    eprintln!(
        "lab `{}`: live view on http://{addr}/ (Prometheus: http://{addr}/metrics); Ctrl-C ends it",
        args.lab.name
    );
    running.wait();
    anyhow::bail!(
        "lab `{}` is gone (ofan-lab down?): the view ends",
        args.lab.name
    )
}
