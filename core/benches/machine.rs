//! What the batch machine costs per batch: a plan run through the machine
//! on the simulated platform (workers exactly as planned), one round and
//! many, for a few sizes of star. The simulation's own work (the codec
//! round trip of every message) is included, so this bounds the machine's
//! cost from above.
//!
//! `cargo bench -p dls-core --bench machine`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use dls_core::machine::Config;
use dls_core::sim::{simulate, Faults};
use dls_lp::{plan, Platform, Request, Strategy, Worker};
use std::hint::black_box;

fn star(p: usize) -> Platform {
    let workers = (0..p)
        .map(|i| {
            let f = 1.0 + (i % 7) as f64 * 0.3;
            Worker::new(format!("w{i}"), 0.001 * f, 0.02 * (2.5 - f / 3.0), 0.0005 * f)
        })
        .collect();
    Platform::new(workers).expect("a valid star")
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("execute");
    g.sample_size(10);
    for p in [4usize, 32] {
        let platform = star(p);
        for strategy in [Strategy::Fifo, Strategy::Rounds] {
            let pl = plan(&platform, &Request::new(20 * p as u64 * 10, strategy)).expect("plans");
            let id = BenchmarkId::new(strategy.name(), p);
            g.bench_with_input(id, &p, |b, _| {
                b.iter(|| {
                    let cfg = Config::simulated();
                    black_box(simulate(&platform, platform.workers(), &pl, cfg, &Faults::default()))
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
