//! One load-balancing decision per algorithm, over batches of 64 northbound packets.
//!
//! Each iteration decides one batch of 64 packets (`Throughput::Elements(64)`), so criterion's
//! time per iteration divided by 64 is the cost of one decision. The traffic is what an
//! aggregation-facing edge switch of a k = 16 fat tree sees: w = 8 up-ports, 64 destination
//! keys of which a batch touches 8, one packet in four an ACK, all ports valid.
//!
//! `ofan/2-threads` runs two workers on the two cores, sharing the Ofan pointers; its time is
//! wall-clock per batch *per thread*, i.e. per 64 packets decided by each thread concurrently, and
//! is reported per packet as time / 64.
//!
//! `ofan/port-down` and `pofan/port-down` are the same traffic with one up-port failed for every
//! destination (an uplink down): every decision takes the general path that skips invalid ports.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ofan_dataplane::lb::{
    Algorithm, DestKey, LbConfig, LbRng, Northbound, PipeBalancer, PortLoad, PortMask, SizeClass,
    SwitchBalancer, UpPort,
};

const BATCH: usize = 64;
const UP_PORTS: u8 = 8;
const DEST_KEYS: u32 = 64;

fn config(algorithm: Algorithm, pipes: u16) -> LbConfig {
    LbConfig {
        algorithm,
        up_ports: UP_PORTS,
        dest_keys: DEST_KEYS,
        pipes,
        buffer_bytes: 800_000,
        seed: 1,
    }
}

/// A stream of batches with a realistic destination mix.
fn batches(seed: u64, count: usize) -> Vec<[Northbound; BATCH]> {
    batches_with(seed, count, PortMask::all(UP_PORTS))
}

/// [`batches`] with the given valid up-ports for every packet.
fn batches_with(seed: u64, count: usize, valid: PortMask) -> Vec<[Northbound; BATCH]> {
    let mut rng = LbRng::new(seed);
    (0..count)
        .map(|_| {
            let keys: Vec<u32> = (0..8).map(|_| rng.below(DEST_KEYS)).collect();
            std::array::from_fn(|_| {
                let ack = rng.below(4) == 0;
                Northbound {
                    key: DestKey(keys[rng.below(8) as usize]),
                    class: if ack { SizeClass::Ack } else { SizeClass::Data },
                    valid,
                    flow_hash: rng.next_u64() as u32,
                    frame_len: if ack { 64 } else { 1500 },
                }
            })
        })
        .collect()
}

fn run_batches(pipe: &mut PipeBalancer, stream: &[[Northbound; BATCH]], iters: u64) {
    let mut loads = [PortLoad::default(); UP_PORTS as usize];
    let mut out = [None::<UpPort>; BATCH];
    for i in 0..iters as usize {
        let batch = &stream[i % stream.len()];
        pipe.choose_batch(black_box(batch), &mut loads, &mut out);
        // Drain the queues a little so JSQ-like algorithms keep seeing varied lengths.
        for load in &mut loads {
            load.packets /= 2;
            load.bytes /= 2;
        }
        black_box(&out);
    }
}

fn single_thread(c: &mut Criterion) {
    let stream = batches(7, 256);
    let mut group = c.benchmark_group("lb");
    group.throughput(Throughput::Elements(BATCH as u64));
    // The harness alone: the same loop with a trivial "decision" (key mod w), so the cost of
    // each algorithm is its time minus this one, measured in the same run.
    group.bench_function("baseline", |b| {
        b.iter_custom(|iters| {
            let mut out = [None::<UpPort>; BATCH];
            let mut loads = [PortLoad::default(); UP_PORTS as usize];
            let start = Instant::now();
            for i in 0..iters as usize {
                let batch = black_box(&stream[i % stream.len()]);
                for (packet, choice) in batch.iter().zip(out.iter_mut()) {
                    *choice = Some(UpPort((packet.key.0 % u32::from(UP_PORTS)) as u8));
                }
                for load in &mut loads {
                    load.packets /= 2;
                    load.bytes /= 2;
                }
                black_box((&out, &loads));
            }
            start.elapsed()
        })
    });
    for algorithm in Algorithm::ALL {
        let switch = SwitchBalancer::new(config(algorithm, 2)).expect("valid config");
        let mut pipe = switch.pipe(0).expect("pipe 0");
        group.bench_function(algorithm.name(), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                run_batches(&mut pipe, &stream, iters);
                start.elapsed()
            })
        });
    }
    let port_down = batches_with(7, 256, PortMask::all(UP_PORTS).without(3));
    for algorithm in [Algorithm::Ofan, Algorithm::Pofan] {
        let switch = SwitchBalancer::new(config(algorithm, 2)).expect("valid config");
        let mut pipe = switch.pipe(0).expect("pipe 0");
        group.bench_function(format!("{}/port-down", algorithm.name()), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                run_batches(&mut pipe, &port_down, iters);
                start.elapsed()
            })
        });
    }
    group.finish();
}

fn ofan_two_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("lb");
    group.throughput(Throughput::Elements(BATCH as u64));
    let switch = SwitchBalancer::new(config(Algorithm::Ofan, 2)).expect("valid config");
    group.bench_function("ofan/2-threads", |b| {
        b.iter_custom(|iters| {
            let barrier = Arc::new(Barrier::new(3));
            let workers: Vec<_> = (0..2u16)
                .map(|thread| {
                    let mut pipe = switch.pipe(thread).expect("pipe");
                    let barrier = Arc::clone(&barrier);
                    let stream = batches(u64::from(thread) + 100, 256);
                    std::thread::spawn(move || {
                        barrier.wait();
                        run_batches(&mut pipe, &stream, iters);
                        barrier.wait();
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            barrier.wait();
            let elapsed = start.elapsed();
            for worker in workers {
                worker.join().expect("worker");
            }
            elapsed
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = single_thread, ofan_two_threads
}
criterion_main!(benches);
