//! The configuration reference (`ofan-switch --help`): every key of `switch.toml`.

/// The configuration reference, as shown by `--help`.
pub const REFERENCE: &str = r#"CONFIGURATION FILE (--config switch.toml; every key optional, flags override)

  name = "e-p0-0"                 switch name (logs, stats); default: --node or "ofan-switch"
  seed = 1                        run seed: the lab's, shared by every switch of a run; this
                                  switch seeds its random choices (hash salts, pointer starts,
                                  random streams) with one derived from it and `name`
                                  (ofan_topology::switch_seed), so no two switches share them
  switch_seed = 7                 this switch's own seed, used as is (no derivation; overrides
                                  `seed`): to reproduce one switch's choices exactly
  topology = "topo.json"          topology file (ofan-lab topo --out); with `node`, ports,
  node = "e-p0-0"                 roles and the destination-key table default to the plan

  [[ports]]                       one per interface, in port-id order
  name = "p0"                     interface name in this namespace
  role = "host" | "down" | "up"   where it leads; the balancer chooses among "up" ports
  queues = 1                      as xdp.queues (every port must have the same)
  link_rate = "100mbit"           this port's emulated rate (overrides [queue])
  buffer = "1MB"                  this port's egress buffer (overrides [queue])

  [lb]
  algorithm = "pofan"             ecmp | rsq | rr | jsq | ar | drill | ofan | pofan
                                  | arf-wcmp | arf-flow | arf-packet (docs/adaptive-routing.md)
  pipe_size = 4                   ports per pipe (one worker each), in port order
  pipes = [["p0","p2"],["p1","p3"]]   explicit pipes instead of pipe_size
  ack_max_frame = 128             frames up to this many bytes use the ACK pointers
  dragonfly = "ugal-l"            on a dragonfly router (topology + node): the source's scheme,
                                  min | valiant | ugal-l | rotate | ugal-rotate; the path tag
                                  rides in DSCP (docs/dragonfly.md); `algorithm` then defaults
                                  to ecmp (a dragonfly's minimal routes have one hop each)

  [queue]                         defaults for every port's egress queue
  link_rate = "0"                 emulated link rate; 0 = unshaped (the NIC is the queue)
  buffer = "1MB"                  per-port buffer; tail drop beyond it
  ecn_threshold = "100KB"         mark ECN-capable frames CE above this depth; "off" to disable
  catch_up = false                a late shaper shortens the next gap by its lateness (at most half
                                  a frame time, like sch_fq) so the link keeps its rate; false:
                                  a late shaper restarts from now and loses the lateness

  [xdp]
  attach = "native" | "generic"   XDP attach mode of the steering program
  mode = "auto" | "copy" | "zero-copy"   AF_XDP bind mode (veth: copy only)
  poll = "wakeup" | "busy"        workers sleep when idle (labs) or spin pinned (line rate)
  cpus = [0, 1]                   CPUs for busy workers (worker i on cpus[i % len])
  rt_priority = 0                 wakeup workers run SCHED_FIFO at this priority (1-99; 0 = off):
                                  on a crowded machine their wake-ups preempt other tasks at once
  frame_size = 2048               UMEM frame size, 2048 or 4096: one frame carries an MTU up to
                                  size - 270, larger packets span up to 3 frames (multi-buffer);
                                  unset: the smallest that carries the ports' largest MTU in one
                                  frame, else 4096 (jumbo: up to MTU 11506)
  queues = 1                      queues served per port, 1-8: worker per pipe and queue, each
                                  receiving on RX queue q and sending on TX queue q of its
                                  ports (as a NIC's RSS spreads flows); more than one needs
                                  unshaped ports (the interface's own rate applies)
  frames_per_port = 8192          UMEM frames per port (default 4 x ring_size x queues)
  ring_size = 2048                fill/completion/RX/TX ring size (power of two)
  fast_path = "off" | "xdp"       xdp: the XDP program forwards what it can itself (IPv4 with a
                                  usable route; pofan with one pointer set per CPU, ecmp, rsq),
                                  the rest goes to the AF_XDP workers; no link emulation

  [keys]                          destination prefix -> key (paper 4.1 consolidation)
  count = 8                       number of keys (default: largest key + 1)
  table = [{ prefix = "10.1.0.0/24", key = 2 }, ...]

  [admin]
  socket = "/run/ofan/NAME.sock"  admin socket for `ofan-switch stats`; default /run/ofan/<name>.sock
  metrics = "127.0.0.1:9100"      Prometheus text endpoint (GET /metrics); a bare port ("9100")
                                  is on loopback; "off" (default) to disable

  [bgp]
  bmp = "127.0.0.1:11019"         BMP station (RFC 7854) the local BGP daemon reports to (FRR:
                                  bgpd -M bmp, `bmp connect` + `bmp mirror`): the path table
                                  (next hops and next-next hops) follows BGP; "off" (default):
                                  path information comes from the topology plan, if any
  asn_plan = "unique" | "rfc7938" how the fabric of `topology` numbers its ASNs (flag
                                  --asn-plan): one per switch (default), or RFC 7938's (the
                                  cores share one, each pod's aggregation switches one, every
                                  edge its own); sets the plan's ASNs in notifications

  [adaptive_routing]              congestion notifications (docs/adaptive-routing.md)
  enabled = true                  default: on with an arf-* algorithm, off otherwise
  window_ms = 10                  detection window (1-1000): each fabric port's level is measured
  queue_frames = 8                from the window's largest queue: 15 empty, 0 at this many
                                  full-size frames or more (or any drop)
  refresh_ms = 100                every state is re-sent every T (window_ms-21845); hold is 3T
  port = 7415                     UDP port, sent with TTL 255 and accepted only with TTL 255
                                  from a fabric (up/down) port
  asn = 4200000001                this switch's ASN and router ID in notifications; default:
  router_id = "10.255.0.1"        the topology plan's; without either it receives only
  congested_at = 5                congestion detected at this level (0-15) or below
  cleared_at = 9                  and cleared at this level or above (above congested_at)
  windows_to_change = 2           windows a new level must last before it is reported
  jump = 4                        a change by more than this many levels is reported at once
  combine = "min"                 a path's quality from its local and remote levels: min (the
                                  worse of the two) or sum (the draft's local + remote, halved);
                                  flag --arf-combine (docs/adaptive-routing.md, Combination)
  notify_hosts = false            pass the notifications on to the hosts on the host ports:
                                  every link message accepted from a neighbour, relayed as
                                  is, and this switch's own (an edge of a multi-plane fabric,
                                  the framework's endpoint plane); needs a topology; flag
                                  --arf-notify-hosts
  [[adaptive_routing.neighbours]] a switch neighbour by hand (default: the topology plan's,
  port = "p1"                     else the FIB's next hops named by BGP): its fabric port,
  addr = "10.0.1.1"               address on the link, router ID and ASN. Notifications are
  router_id = "10.255.0.9"        taken only from a known neighbour, and only about a link it
  asn = 4200000009                is an end of (or next to, by the path table)
"#;
