//! Kernel speed: GFLOP/s of the faer GEMM at n = 64, 256, 1024 (1 and 2
//! threads, and 1 thread of the pool as `--isolate-compute` uses it).
//!
//! `cargo bench -p dls-worker --bench kernel` — criterion reports the
//! throughput in "elements" per second, one element being one flop
//! (2n³ per product): divide by 1e9 for GFLOP/s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use dls_worker::kernel;
use std::hint::black_box;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    for n in [64usize, 256, 1024] {
        // Enough products per iteration for small sizes to be measurable.
        let k = (4 * 1024 * 1024 / (n * n * n)).clamp(1, 64);
        let mut ab = vec![0.0; 2 * k * n * n];
        kernel::fill_random(&mut ab, n as u64);
        g.throughput(Throughput::Elements((2 * n * n * n * k) as u64));
        for threads in [1usize, 2] {
            let kern = kernel::Kernel::new(threads).expect("pool");
            g.bench_with_input(BenchmarkId::new(format!("{threads}-thread"), n), &n, |b, &n| {
                b.iter(|| kern.multiply_batch(black_box(&ab), n, k))
            });
        }
        // One thread of the pool instead of the caller's (--isolate-compute):
        // what the hand-off costs.
        let kern = kernel::Kernel::new(1).expect("pool").isolated();
        g.bench_with_input(BenchmarkId::new("1-thread-isolated", n), &n, |b, &n| {
            b.iter(|| kern.multiply_batch(black_box(&ab), n, k))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
