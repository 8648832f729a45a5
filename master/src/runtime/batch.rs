//! The matrices of a batch and the master's own check of its results.

use crate::runtime::check;
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

/// Memory this machine can still give a process (MemAvailable in
/// /proc/meminfo), when it says.
pub fn available_memory() -> Option<u64> {
    dls_worker::meminfo_bytes("MemAvailable")
}

/// Bytes the master holds for `m` products of size `n` (A, B and C), or
/// `None` when that overflows.
pub fn master_bytes(m: usize, n: usize) -> Option<u64> {
    (m as u64)
        .checked_mul(n as u64)?
        .checked_mul(n as u64)?
        .checked_mul(3 * 8)
}

/// Refuse, naming `what`, a batch the master could not hold: sizes that
/// overflow, matrices larger than the wire protocol carries, or more
/// memory than `available` (bytes; unknown means no limit).
pub fn check_fits(m: usize, n: usize, available: Option<u64>, what: &str) -> Result<()> {
    if u32::try_from(n).is_err() {
        bail!(
            "{what}: matrices of size {n} are larger than the protocol carries (at most {})",
            u32::MAX
        );
    }
    let Some(bytes) = master_bytes(m, n) else {
        bail!("{what}: {m} products of size {n} are more values than can be counted");
    };
    if let Some(avail) = available {
        if bytes > avail {
            bail!(
                "{what}: {m} products of size {n} need {} in the master (A, B and C), more than the {} this machine has available",
                human_bytes(bytes),
                human_bytes(avail)
            );
        }
    }
    Ok(())
}

/// Bytes for people: "2.4 MB", "1.3 GB".
pub fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1_000_000_000 => format!("{:.1} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.1} kB", b as f64 / 1e3),
    }
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
        let amax = finite_max(&batch.a[i * nn..(i + 1) * nn]);
        let bmax = finite_max(&batch.b[i * nn..(i + 1) * nn]);
        // Summation order may differ between kernels: allow n·ε per term.
        let tol = 4.0 * f64::EPSILON * (n as f64) * (n as f64) * amax * bmax + f64::MIN_POSITIVE;
        for (j, (&got, &want)) in c[i * nn..(i + 1) * nn].iter().zip(&want).enumerate() {
            // NaN and infinities must be where the inputs put them.
            if !check::agrees(got, want, tol) {
                let why = match want.is_finite() {
                    true => format!("|error| {:.3e} > {tol:.3e}", (got - want).abs()),
                    false => "its inputs make it non-finite".into(),
                };
                bail!(
                    "product {i} is wrong at ({}, {}): got {got}, expected {want} ({why})",
                    j / n,
                    j % n
                );
            }
            if want.is_finite() {
                worst = worst.max((got - want).abs());
            }
        }
    }
    Ok((count, worst))
}

/// The largest finite magnitude (0 if none).
fn finite_max(v: &[f64]) -> f64 {
    v.iter().filter(|x| x.is_finite()).fold(0.0f64, |m, x| m.max(x.abs()))
}

#[cfg(test)]
mod size_tests {
    use super::*;

    #[test]
    fn verify_passes_right_results_with_nan_and_infinities_and_fails_wrong_ones() {
        let (m, n) = (4, 6);
        let mut batch = Batch::random(m, n, 9);
        let (mut a, mut b) = ((*batch.a).clone(), (*batch.b).clone());
        a[2] = f64::NAN; // product 0, row 0
        b[n * n + 7] = f64::INFINITY; // product 1, column 1
        a[2 * n * n + 3] = f64::NEG_INFINITY;
        b[2 * n * n + 3 * n] = 0.0; // 0 · ∞ in product 2
        batch.a = Arc::new(a);
        batch.b = Arc::new(b);
        let mut c = Vec::new();
        for i in 0..m {
            let nn = n * n;
            c.extend(kernel::naive(
                &batch.a[i * nn..(i + 1) * nn],
                &batch.b[i * nn..(i + 1) * nn],
                n,
            ));
        }
        assert!(c.iter().any(|v| v.is_nan()) && c.iter().any(|v| v.is_infinite()));
        for seed in 0..4 {
            verify(&batch, &c, m, seed).expect("right results with NaN pass");
        }
        let mut wrong = c.clone();
        wrong[n * n + 2] = 1.0; // product 1, column 2: finite and must stay so
        wrong[n * n + 1 + n] = 5.0; // product 1, column 1: must be non-finite
        let e = format!("{:#}", verify(&batch, &wrong, m, 0).expect_err("wrong"));
        assert!(e.contains("product 1"), "{e}");
    }

    #[test]
    fn batches_the_master_cannot_hold_are_refused_by_name() {
        // 10 products of 100×100: 3 · 10 · 10⁴ · 8 = 2.4 MB.
        assert_eq!(master_bytes(10, 100), Some(2_400_000));
        check_fits(10, 100, Some(2_400_000), "x").expect("fits exactly");
        let e = check_fits(10, 100, Some(2_399_999), "--batch 10 --size 100")
            .expect_err("too big")
            .to_string();
        assert!(
            e.starts_with("--batch 10 --size 100:") && e.contains("need 2.4 MB") && e.contains("the 2.4 MB"),
            "{e}"
        );
        let e = check_fits(usize::MAX, 1, None, "--batch")
            .expect_err("overflows")
            .to_string();
        assert!(e.contains("more values than can be counted"), "{e}");
        let e = check_fits(4, 4_294_967_297, None, "--size")
            .expect_err("too wide")
            .to_string();
        assert!(e.contains("larger than the protocol carries"), "{e}");
        check_fits(usize::MAX / 2, 0, None, "empty matrices overflow nothing").expect("fits");
    }
}
