use ofan_model::*;
use ofan_topology::TopologyKind;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let k: u16 = args.get(1).map_or(4, |s| s.parse().unwrap());
    let m: u64 = args.get(2).map_or(1 << 20, |s| s.parse().unwrap());
    let schemes: Vec<Scheme> = match args.get(3) {
        Some(s) => s.split(',').map(|x| x.parse().unwrap()).collect(),
        None => Scheme::ALL.to_vec(),
    };
    for scheme in schemes {
        let mut c = ModelConfig::paper();
        c.topology = TopologyKind::FatTree { k };
        c.message_bytes = m;
        c.scheme = scheme;
        let t = std::time::Instant::now();
        let r = run(&c).unwrap();
        let el = t.elapsed().as_secs_f64();
        println!("{:6} cct={:?} lb={} inc={:.4} util={:.4} maxq={}B/{}p edge_up_max={} viol={} stage_max_pk={:?} ev={} {:.3}s {:.1}Mev/s drops={} compl={}/{}",
            scheme.name(), r.cct_ps, r.lower_bound_ps, r.cct_increase.unwrap_or(f64::NAN), r.utilization, r.max_queue_bytes, r.max_queue_packets,
            r.edge_uplink.max_data_packets, r.edge_uplink.violations,
            r.queues.iter().map(|q| q.max_data_packets).collect::<Vec<_>>(), r.events, el, r.events as f64/el/1e6, r.packets.drops_buffer, r.packets.flows_complete, r.packets.flows);
    }
}
