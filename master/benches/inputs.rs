//! What a random batch's inputs cost a run: made before it starts (the
//! whole batch in memory, then each chunk a view of it) against made as
//! each chunk is read (`runtime/random.rs`), in the same process, in turn.
//! Prints the median time before the first chunk can go out (building
//! the batch) and the median time to read one chunk's inputs.
//!
//! `cargo bench -p dls-master --bench inputs [-- PRODUCTS SIZE CHUNK [ROUNDS]]`
//! (default 300 products of 256×256 float64, chunks of 3, 5 rounds).

use dls_master::session::Batch;
use dls_protocol::{DType, Values};
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The batch made up front, as `dls run` made it before inputs were made
/// when read: every value drawn into memory first.
fn in_memory(count: usize, n: usize, seed: u64) -> Batch {
    let len = count * n * n;
    let make = |seed: u64| {
        let mut v = Values::try_zeros(DType::F64, len).expect("memory");
        dls_worker::kernel::fill_random_values(&mut v, seed);
        v
    };
    Batch::new(
        dls_protocol::Form::square(n as u32),
        count,
        make(2 * seed + 1),
        make(2 * seed + 2),
    )
    .expect("batch")
}

/// Seconds to read every chunk of `chunk` products of `batch`, one each.
fn reads(batch: &Batch, chunk: usize) -> Vec<f64> {
    (0..batch.count / chunk)
        .map(|c| {
            let products: Vec<usize> = (c * chunk..(c + 1) * chunk).collect();
            let t0 = Instant::now();
            let inputs = batch.read_chunk(&products).expect("reads");
            std::hint::black_box(&inputs);
            t0.elapsed().as_secs_f64()
        })
        .collect()
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let arg = |i: usize, default: usize| args.get(i).copied().unwrap_or(default);
    let (count, n, chunk, rounds) = (arg(0, 300), arg(1, 256), arg(2, 3), arg(3, 5));
    let (mut build, mut read) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    for r in 0..rounds {
        for k in [r % 2, 1 - r % 2] {
            let t0 = Instant::now();
            let batch = match k {
                0 => in_memory(count, n, r as u64),
                _ => Batch::random(count, n, r as u64),
            };
            build[k].push(t0.elapsed().as_secs_f64());
            read[k].push(median(reads(&batch, chunk)));
        }
    }
    let names = ["made up front", "made when read"];
    println!("{count} products of {n}×{n} float64, chunks of {chunk}, {rounds} rounds (medians)");
    for k in 0..2 {
        println!(
            "{:>15}: before the first chunk {:9.3} ms, a chunk's inputs {:7.3} ms",
            names[k],
            median(build[k].clone()) * 1e3,
            median(read[k].clone()) * 1e3
        );
    }
}
