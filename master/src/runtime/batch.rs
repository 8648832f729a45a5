//! The matrices of a batch and the master's own check of its results.

use anyhow::{bail, Result};
use dls_worker::kernel;
use std::sync::Arc;

/// The matrices of a batch: `m` products of size `n`, A and B row-major.
#[derive(Debug, Clone)]
pub struct Batch {
    pub n: usize,
    pub m: usize,
    pub a: Arc<Vec<f64>>,
    pub b: Arc<Vec<f64>>,
}

impl Batch {
    /// Random matrices in [-1, 1) from a seed.
    pub fn random(m: usize, n: usize, seed: u64) -> Batch {
        let mut a = vec![0.0; m * n * n];
        let mut b = vec![0.0; m * n * n];
        kernel::fill_random(&mut a, seed.wrapping_mul(2).wrapping_add(1));
        kernel::fill_random(&mut b, seed.wrapping_mul(2).wrapping_add(2));
        Batch {
            n,
            m,
            a: Arc::new(a),
            b: Arc::new(b),
        }
    }
}

/// Whether every input of these products is finite.
pub fn inputs_finite(batch: &Batch, products: &[usize]) -> bool {
    let nn = batch.n * batch.n;
    products.iter().all(|&i| {
        batch.a[i * nn..(i + 1) * nn]
            .iter()
            .chain(&batch.b[i * nn..(i + 1) * nn])
            .all(|v| v.is_finite())
    })
}

/// Recompute `count` products chosen at random (from `seed`) and compare.
/// The master recomputes them with the naive
/// kernel. Returns how many were checked and the largest absolute error; fails
/// when an error exceeds what rounding can explain.
pub fn verify(batch: &Batch, c: &[f64], count: usize, seed: u64) -> Result<(usize, f64)> {
    use rand::SeedableRng;
    let count = count.min(batch.m);
    if count == 0 {
        return Ok((0, 0.0));
    }
    let n = batch.n;
    let nn = n * n;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut picks = rand::seq::index::sample(&mut rng, batch.m, count).into_vec();
    picks.sort_unstable();
    let mut worst = 0.0f64;
    for i in picks {
        // The naive triple loop, not the workers' kernel: an independent
        // computation of the same product.
        let want = kernel::naive(&batch.a[i * nn..(i + 1) * nn], &batch.b[i * nn..(i + 1) * nn], n);
        let amax = batch.a[i * nn..(i + 1) * nn].iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let bmax = batch.b[i * nn..(i + 1) * nn].iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // Summation order may differ between kernels: allow n·ε per term.
        let tol = 4.0 * f64::EPSILON * (n as f64) * (n as f64) * amax * bmax + f64::MIN_POSITIVE;
        for (j, (got, want)) in c[i * nn..(i + 1) * nn].iter().zip(&want).enumerate() {
            let err = (got - want).abs();
            if err.is_nan() || err > tol {
                bail!(
                    "product {i} is wrong at ({}, {}): got {got}, expected {want} (|error| {err:.3e} > {tol:.3e})",
                    j / n,
                    j % n
                );
            }
            worst = worst.max(err);
        }
    }
    Ok((count, worst))
}
