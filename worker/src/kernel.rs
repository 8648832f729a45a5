//! The matrix kernel: batches of C = A·B on row-major n×n f64 matrices,
//! with faer's GEMM.

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;
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

/// The kernel with its own thread pool of `threads` threads (the pool is
/// made once; spawning threads per batch costs more than small products).
pub struct Kernel {
    pool: rayon::ThreadPool,
    threads: usize,
    isolated: bool,
}

impl Kernel {
    pub fn new(threads: usize) -> Result<Kernel, String> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("dls-kernel-{i}"))
            .build()
            .map_err(|e| format!("cannot start {threads} kernel threads: {e}"))?;
        Ok(Kernel {
            pool,
            threads,
            isolated: false,
        })
    }

    /// Compute only on the pool's threads (named `dls-kernel-N`), also with
    /// one thread, so that a CPU quota on them caps computing alone and not
    /// the daemon's networking (`scripts/testbed.sh`). Off by default: with
    /// one thread the hand-off to the pool makes batches of 64×64 products
    /// 35–60% slower, of 256×256 10% (`cargo bench -p dls-worker --bench
    /// kernel`, `1-thread-isolated`).
    pub fn isolated(mut self) -> Kernel {
        self.isolated = true;
        self
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// `k` products of size `n`. `ab` holds A_1..A_k then B_1..B_k (2·k·n²
    /// values); the result holds C_1..C_k (k·n² values). The caller checks
    /// the lengths (the protocol does, from the frame header).
    pub fn multiply_batch(&self, ab: &[f64], n: usize, k: usize) -> Vec<f64> {
        let mut c = vec![0.0; k * n * n];
        self.multiply_into(ab, n, k, &mut c);
        c
    }

    /// As `multiply_batch`, into `c` (k·n² values).
    pub fn multiply_into(&self, ab: &[f64], n: usize, k: usize, c: &mut [f64]) {
        self.multiply_repeated(ab, n, k, c, 1);
    }

    /// As `multiply_into`, computing every product `repeat` times over, one
    /// product at a time (so the work per product grows `repeat`-fold while
    /// the data in cache stays one product's): a slower processor for test
    /// beds (`dls-worker --work-factor`).
    pub fn multiply_repeated(&self, ab: &[f64], n: usize, k: usize, c: &mut [f64], repeat: u32) {
        let nn = n * n;
        debug_assert_eq!(ab.len(), 2 * k * nn);
        debug_assert_eq!(c.len(), k * nn);
        if k == 0 || n == 0 {
            return;
        }
        let repeat = repeat.max(1);
        let (a_all, b_all) = ab.split_at(k * nn);
        let pair = |i: usize| (&a_all[i * nn..(i + 1) * nn], &b_all[i * nn..(i + 1) * nn]);
        let one_thread = |c: &mut [f64]| {
            for (i, ci) in c.chunks_mut(nn).enumerate() {
                let (a, b) = pair(i);
                for _ in 0..repeat {
                    gemm(ci, a, b, n, Par::Seq);
                }
            }
        };
        if self.threads == 1 && !self.isolated {
            // No hand-off to the pool: the caller's thread is the one thread.
            one_thread(c);
            return;
        }
        self.pool.install(|| {
            if self.threads == 1 {
                one_thread(c);
            } else if k >= self.threads && n < SPLIT_PRODUCTS_BELOW {
                // Many small products: one product per task.
                c.par_chunks_mut(nn).enumerate().for_each(|(i, ci)| {
                    let (a, b) = pair(i);
                    for _ in 0..repeat {
                        gemm(ci, a, b, n, Par::Seq);
                    }
                });
            } else {
                let par = Par::rayon(self.threads);
                for (i, ci) in c.chunks_mut(nn).enumerate() {
                    let (a, b) = pair(i);
                    for _ in 0..repeat {
                        gemm(ci, a, b, n, par);
                    }
                }
            }
        });
    }
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

/// Seconds to compute `k` products of size `n` on fresh data, each `repeat` times over.
pub fn time_batch(kernel: &Kernel, n: usize, k: usize, repeat: u32) -> f64 {
    let mut ab = vec![0.0; 2 * k * n * n];
    fill_random(&mut ab, 0x5eed ^ n as u64);
    let t = Instant::now();
    let mut c = vec![0.0; k * n * n];
    kernel.multiply_repeated(&ab, n, k, &mut c, repeat);
    let secs = t.elapsed().as_secs_f64();
    std::hint::black_box(c);
    secs
}

/// This machine's time for one product of size `n`, unloaded: after a
/// warm-up (the first products of a process pay for one-time set-up), the
/// best of three batches of about 2 ms at 20 GFLOP/s.
pub fn seconds_per_product(kernel: &Kernel, n: usize) -> f64 {
    // Buffers made and touched once: page faults and allocation are not the
    // kernel's speed (and would make the reference depend on the process's
    // allocation history).
    let k = (2e-3 / (2.0 * (n as f64).powi(3) / 20e9)).ceil().clamp(1.0, 256.0) as usize;
    let mut ab = vec![0.0; 2 * k * n * n];
    fill_random(&mut ab, 0x5eed ^ n as u64);
    let mut c = vec![1.0; k * n * n];
    let run = |c: &mut [f64]| {
        let t = Instant::now();
        kernel.multiply_into(&ab, n, k, c);
        t.elapsed().as_secs_f64()
    };
    run(&mut c);
    (0..3).map(|_| run(&mut c)).fold(f64::INFINITY, f64::min) / k as f64
}

/// GFLOP/s of the kernel at size `n` (2n³ flops a product): a batch of at
/// most ~4 Mflop-sized products (so small sizes stay in cache, as a worker's
/// chunk of them would be streamed), repeated for at least ~0.2 s; best of 3.
pub fn gflops(kernel: &Kernel, n: usize) -> f64 {
    let flops = 2.0 * (n as f64).powi(3);
    let k = (4 * 1024 * 1024 / (n * n * n).max(1)).clamp(1, 64);
    let mut ab = vec![0.0; 2 * k * n * n];
    fill_random(&mut ab, 0x5eed ^ n as u64);
    let run = |reps: usize| {
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(kernel.multiply_batch(&ab, n, k));
        }
        t.elapsed().as_secs_f64()
    };
    let once = run(1).max(1e-6);
    let reps = ((0.2 / once).ceil() as usize).clamp(1, 100_000);
    let best = (0..3).map(|_| run(reps)).fold(f64::INFINITY, f64::min);
    flops * (k * reps) as f64 / best / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: usize, k: usize, threads: usize, isolated: bool) {
        let mut ab = vec![0.0; 2 * k * n * n];
        fill_random(&mut ab, (n * 31 + k) as u64);
        let mut kernel = Kernel::new(threads).expect("pool");
        if isolated {
            kernel = kernel.isolated();
        }
        let c = kernel.multiply_batch(&ab, n, k);
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
                check(n, k, threads, false);
            }
            check(n, k, 1, true);
        }
    }

    #[test]
    fn rectangular_layout_is_row_major() {
        // [[1, 2], [3, 4]] · [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
        let c = Kernel::new(1)
            .expect("pool")
            .multiply_batch(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], 2, 1);
        assert_eq!(c, vec![19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn empty_batches() {
        let kernel = Kernel::new(2).expect("pool");
        assert!(kernel.multiply_batch(&[], 4, 0).is_empty());
        assert!(kernel.multiply_batch(&[], 0, 3).is_empty());
    }
}
