//! Kernel speed: GFLOP/s of the faer GEMM at n = 64, 256, 1024 (1 and 2
//! threads, and 1 thread of the pool as `--isolate-compute` uses it); and
//! one large product's panels (`panel`): a piece's first panel into fresh
//! memory (`Values::try_zeros`, then set by the panel) against a later one
//! added into the piece.
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

/// A 2373×44 by 44×1397 float64 panel (a piece of the 4096² star's fastest
/// worker, `docs/one-product.md`) on every core: set into a fresh piece,
/// as a piece's first panel is (freed pieces given back to the system, as
/// the daemon does), and added into a piece already there.
fn panel(c: &mut Criterion) {
    use dls_protocol::{DType, Form, Shape, Values};
    // As the daemon does first thing: a freed piece goes back to the
    // system, so the next piece's memory is fresh, as in a run.
    dls_common::return_freed_buffers();
    let mut g = c.benchmark_group("panel");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    let form = Form {
        shape: Shape {
            n: 2373,
            k: 44,
            m: 1397,
        },
        dtype: DType::F64,
        shared_b: false,
    };
    g.throughput(Throughput::Elements(form.shape.flops() as u64));
    let (inputs, _) = kernel::random_inputs(&form, 1, 7).expect("memory");
    let kern = kernel::Kernel::new(std::thread::available_parallelism().map_or(1, |n| n.get())).expect("pool");
    let len = form.shape.c_len() as usize;
    g.bench_function("first-into-fresh-piece", |b| {
        b.iter(|| {
            let mut acc = Values::try_zeros(DType::F64, len).expect("memory");
            kern.add_panel(&form, &inputs, &mut acc, true, 1)
                .expect("lengths agree");
            black_box(acc)
        })
    });
    let mut acc = Values::try_zeros(DType::F64, len).expect("memory");
    g.bench_function("added-into-piece", |b| {
        b.iter(|| {
            kern.add_panel(&form, &inputs, black_box(&mut acc), false, 1)
                .expect("lengths agree")
        })
    });
    g.finish();
}

criterion_group!(benches, bench, panel);
criterion_main!(benches);
