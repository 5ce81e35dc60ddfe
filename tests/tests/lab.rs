//! Root end-to-end tests of `ofan-lab`: whole fat trees of namespaces with one `ofan-switch` per
//! switch, built and removed by the lab itself.
//!
//! Every test owns its lab through [`LabGuard`], which runs `ofan-lab down --name …` and checks
//! that no namespace of the lab is left, also when the test fails. Lab names carry the test
//! process id, so they never collide with a developer's labs or a concurrent run.
//!
//! A root suite (`harness = false`, see [`ofan_tests::root_tests!`]): without root its tests are
//! reported ignored, and under `CI=true` they fail.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use ofan_lab::rt_throttle;
use ofan_tests::{binary, namespaces_with_prefix, serial, MachineSettings, GC_THRESH};
use ofan_topology::{Role, Topology};
use serde_json::Value;

#[path = "lab/guard.rs"]
mod guard;
use guard::{
    alive, assert_nothing_left, counter, pingall_passes, run_results, traceroute, LabGuard,
    RunOutput,
};

#[path = "lab/arf.rs"]
mod arf;
#[path = "lab/fabric.rs"]
mod fabric;
#[path = "lab/planes.rs"]
mod planes;
#[path = "lab/routing.rs"]
mod routing;
#[path = "lab/runs.rs"]
mod runs;
#[path = "lab/tools.rs"]
mod tools;
use arf::*;
use fabric::*;
use planes::*;
use routing::*;
use runs::*;
use tools::*;

ofan_tests::root_tests!(
    k4_lab_up_pingall_traceroute_down,
    fast_path_lab_forwards_in_xdp_pings_traces_and_runs,
    jumbo_lab_delivers_full_frames_exactly_once,
    link_down_is_routed_around_and_its_counters_stop,
    spliced_links_carry_data_and_stop_at_a_link_down_or_blackhole,
    shared_host_links_carry_every_agent_frame_and_survive_a_switch_kill,
    down_after_kill_9_of_every_switch_and_of_up_itself,
    two_labs_at_once,
    neighbour_table_holds_the_lab_and_is_put_back,
    small_permutation_produces_a_complete_result_file,
    ecmp_lab_lights_every_core_link,
    fan_in_drops_are_recovered_and_every_frame_is_accounted,
    congestion_control_holds_an_incast_back_and_recovers_every_drop,
    bgp_lab_converges_reroutes_and_restores_ecmp,
    bird_lab_converges_reroutes_and_restores_ecmp,
    bfd_routes_around_a_blackholed_link,
    routing_restart_keeps_the_switch_fib,
    chaos_run_accounts_for_every_repetition_or_names_its_fault,
    an_interrupted_run_removes_the_lab_it_built_and_its_agents,
    a_run_whose_routes_flapped_is_not_faithful,
    slowed_core_link_makes_arf_wcmp_move_traffic_off_it,
    multi_plane_lab_sprays_over_both_planes_and_hashes_one_per_flow,
    multi_plane_arf_hosts_hear_their_edges_and_send_less_through_a_slowed_plane,
    view_draws_the_lab_live_in_a_browser,
    bench_lab_measures_a_rate_and_probes_the_machine,
);
