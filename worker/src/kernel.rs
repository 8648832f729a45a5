//! The matrix kernel: batches of C = A·B on row-major n×n f64 matrices,
//! with faer's GEMM.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use std::time::Instant;

/// Name advertised in the worker's capabilities.
pub const KERNEL: &str = "faer 0.24 f64 gemm";

/// Below this size a product is too small to split across threads: the
/// batch is split by products instead.
const SPLIT_PRODUCTS_BELOW: usize = 256;

fn gemm(c: &mut [f64], a: &[f64], b: &[f64], n: usize, par: Par) {
    let a = MatRef::from_row_major_slice(a, n, n);
    let b = MatRef::from_row_major_slice(b, n, n);
    let c = MatMut::from_row_major_slice_mut(c, n, n);
    matmul(c, Accum::Replace, a, b, 1.0, par);
}

/// `k` products of size `n`. `ab` holds A_1..A_k then B_1..B_k (2·k·n²
/// values); the result holds C_1..C_k (k·n² values). The caller checks the
/// lengths (the protocol does, from the frame header).
pub fn multiply_batch(ab: &[f64], n: usize, k: usize, threads: usize) -> Vec<f64> {
    let nn = n * n;
    debug_assert_eq!(ab.len(), 2 * k * nn);
    let mut c = vec![0.0; k * nn];
    if k == 0 || n == 0 {
        return c;
    }
    let (a_all, b_all) = ab.split_at(k * nn);
    let threads = threads.max(1);
    if threads > 1 && k >= threads && n < SPLIT_PRODUCTS_BELOW {
        // Many small products: each thread takes a contiguous share.
        let per = k.div_ceil(threads);
        std::thread::scope(|s| {
            for (t, c_part) in c.chunks_mut(per * nn).enumerate() {
                s.spawn(move || {
                    for (j, cj) in c_part.chunks_mut(nn).enumerate() {
                        let i = t * per + j;
                        gemm(
                            cj,
                            &a_all[i * nn..(i + 1) * nn],
                            &b_all[i * nn..(i + 1) * nn],
                            n,
                            Par::Seq,
                        );
                    }
                });
            }
        });
    } else {
        let par = if threads > 1 { Par::rayon(threads) } else { Par::Seq };
        for (i, ci) in c.chunks_mut(nn).enumerate() {
            gemm(ci, &a_all[i * nn..(i + 1) * nn], &b_all[i * nn..(i + 1) * nn], n, par);
        }
    }
    c
}

/// The textbook triple loop, for tests and for the master's `--verify`.
pub fn naive(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for l in 0..n {
            let x = a[i * n + l];
            for j in 0..n {
                c[i * n + j] += x * b[l * n + j];
            }
        }
    }
    c
}

/// Deterministic pseudo-random values in [-1, 1) (xorshift), for probes and
/// benchmarks; not for anything secret.
pub fn fill_random(values: &mut [f64], seed: u64) {
    let mut x = seed | 1;
    for v in values {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *v = (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0;
    }
}

/// Seconds to compute `k` products of size `n` on fresh data.
pub fn time_batch(n: usize, k: usize, threads: usize) -> f64 {
    let mut ab = vec![0.0; 2 * k * n * n];
    fill_random(&mut ab, 0x5eed ^ n as u64);
    let t = Instant::now();
    let c = multiply_batch(&ab, n, k, threads);
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(c);
    secs
}

/// GFLOP/s of the kernel at size `n` (2n³ flops a product): best of a few
/// runs of at least ~0.2 s.
pub fn gflops(n: usize, threads: usize) -> f64 {
    let flops = 2.0 * (n as f64).powi(3);
    let once = time_batch(n, 1, threads).max(1e-6);
    let k = ((0.2 / once).ceil() as usize).clamp(1, 4096);
    let best = (0..3).map(|_| time_batch(n, k, threads)).fold(f64::INFINITY, f64::min);
    flops * k as f64 / best / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: usize, k: usize, threads: usize) {
        let mut ab = vec![0.0; 2 * k * n * n];
        fill_random(&mut ab, (n * 31 + k) as u64);
        let c = multiply_batch(&ab, n, k, threads);
        let nn = n * n;
        for i in 0..k {
            let want = naive(&ab[i * nn..(i + 1) * nn], &ab[(k + i) * nn..(k + i + 1) * nn], n);
            for (x, y) in c[i * nn..(i + 1) * nn].iter().zip(&want) {
                assert!(
                    (x - y).abs() <= 1e-12 * n as f64,
                    "n={n} k={k} threads={threads}: {x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn matches_the_naive_product() {
        for (n, k) in [(1, 1), (2, 3), (7, 5), (16, 4), (33, 3), (64, 2), (300, 1)] {
            for threads in [1, 2, 3] {
                check(n, k, threads);
            }
        }
    }

    #[test]
    fn rectangular_layout_is_row_major() {
        // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
        let c = multiply_batch(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 2, 1, 1);
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn empty_batches() {
        assert!(multiply_batch(&[], 4, 0, 2).is_empty());
        assert!(multiply_batch(&[], 0, 3, 2).is_empty());
    }
}
