//! Freivalds' test held against recomputation: a blocked kernel (faer,
//! on which the workers' is built) and the naive triple loop are the
//! oracles for what C must be.

use super::*;
use dls_common::matrix as kernel;
use rand::{rngs::StdRng, Rng, SeedableRng};

fn random(n: usize, seed: u64) -> Vec<f64> {
    let mut v = vec![0.0; n * n];
    kernel::fill_random(&mut v, seed);
    v
}

/// C by a blocked kernel (faer), rounded as a worker's is rather than as
/// the naive loop's.
fn faer(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    use faer::{linalg::matmul::matmul, Accum, MatMut, MatRef, Par};
    let mut c = vec![0.0; n * n];
    let (a, b) = (
        MatRef::from_row_major_slice(a, n, n),
        MatRef::from_row_major_slice(b, n, n),
    );
    matmul(
        MatMut::from_row_major_slice_mut(&mut c, n, n),
        Accum::Replace,
        a,
        b,
        1.0,
        Par::Seq,
    );
    c
}

/// The `--verify` tolerance: an entry further than this from the naive
/// product is wrong.
fn wrong_entries(a: &[f64], b: &[f64], c: &[f64], n: usize) -> usize {
    let want = kernel::naive(a, b, n);
    let amax = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let bmax = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let tol = 4.0 * f64::EPSILON * (n * n) as f64 * amax * bmax;
    c.iter().zip(&want).filter(|(g, w)| !agrees(**g, **w, tol)).count()
}

#[test]
fn correct_products_pass_at_every_size() {
    let mut rng = StdRng::seed_from_u64(1);
    for n in [1, 2, 3, 5, 8, 31, 64, 129] {
        for seed in 0..5 {
            let (a, b) = (random(n, 2 * seed + 1), random(n, 2 * seed + 2));
            let x = probe(n, &mut rng);
            freivalds(&a, &b, &faer(&a, &b, n), n, &x).unwrap_or_else(|e| panic!("n={n}: {e}"));
            freivalds(&a, &b, &kernel::naive(&a, &b, n), n, &x).unwrap_or_else(|e| panic!("n={n}: {e}"));
        }
    }
}

#[test]
fn magnitudes_far_apart_pass() {
    // Rows of A and columns of B scaled over 2⁶⁰: a global tolerance would
    // either fail these or miss errors in the small rows.
    let n = 48;
    let (mut a, mut b) = (random(n, 3), random(n, 4));
    for i in 0..n {
        for j in 0..n {
            a[i * n + j] *= 2f64.powi((i as i32 % 7) * 10 - 30);
            b[i * n + j] *= 2f64.powi((j as i32 % 5) * 8 - 16);
        }
    }
    let x = probe(n, &mut StdRng::seed_from_u64(5));
    freivalds(&a, &b, &faer(&a, &b, n), n, &x).expect("a correct product passes");
    // An error well above rounding in a small row is still seen.
    let mut c = faer(&a, &b, n);
    let i = n * 7; // row 7: scaled by 2⁻³⁰
    c[i] += c[i].abs() * 1e-6 + 1e-12;
    assert!(freivalds(&a, &b, &c, n, &x).is_err());
}

#[test]
fn any_changed_entry_beyond_rounding_is_caught() {
    let mut rng = StdRng::seed_from_u64(7);
    for n in [4, 17, 64] {
        let (a, b) = (random(n, 11), random(n, 12));
        let good = faer(&a, &b, n);
        for _ in 0..200 {
            let mut c = good.clone();
            let idx = rng.random_range(0..n * n);
            let rel: f64 = 10f64.powf(rng.random_range(-9.0..2.0));
            c[idx] += rel * (1.0 + c[idx].abs()) * if rng.random() { 1.0 } else { -1.0 };
            let x = probe(n, &mut rng);
            assert!(
                freivalds(&a, &b, &c, n, &x).is_err(),
                "n={n}: entry {idx} off by {rel:e} passed"
            );
        }
    }
}

/// The most a single entry (i, k) may be off and pass: the test's rounding
/// allowance for row i, 4(n+2)ε·Σⱼ|Aᵢⱼ|·Σₖ|Bⱼₖ|, divided by the smallest
/// |xₖ| (½); computed here from the inputs alone.
fn row_allowance(a: &[f64], b: &[f64], n: usize, i: usize) -> f64 {
    let row: f64 = (0..n)
        .map(|j| a[i * n + j].abs() * b[j * n..(j + 1) * n].iter().map(|v| v.abs()).sum::<f64>())
        .sum();
    2.0 * 4.0 * (n as f64 + 2.0) * f64::EPSILON * row
}

#[test]
fn a_flipped_bit_is_caught_or_harmless() {
    // Every bit of a few entries: either the check fails, or the entry is
    // off by no more than the rounding allowance of its row (n times the
    // per-entry bound --verify allows: the price of checking a row at once).
    let n = 32;
    let (a, b) = (random(n, 21), random(n, 22));
    let good = faer(&a, &b, n);
    let mut rng = StdRng::seed_from_u64(23);
    let mut caught = 0;
    for _ in 0..8 {
        let idx = rng.random_range(0..n * n);
        for bit in 0..64 {
            let mut c = good.clone();
            c[idx] = f64::from_bits(c[idx].to_bits() ^ (1u64 << bit));
            let x = probe(n, &mut rng);
            match freivalds(&a, &b, &c, n, &x) {
                Err(_) => caught += 1,
                Ok(()) => {
                    let off = (c[idx] - good[idx]).abs();
                    let allowed = row_allowance(&a, &b, n, idx / n);
                    assert!(
                        off <= allowed,
                        "bit {bit} of entry {idx}: off by {off:e} (allowed {allowed:e}) passed"
                    );
                }
            }
        }
    }
    // The exponent, the sign and the high mantissa bits are all seen.
    assert!(caught >= 8 * 30, "only {caught} of 512 flips were caught");
}

#[test]
fn whole_wrong_products_are_caught() {
    let n = 40;
    let (a, b) = (random(n, 31), random(n, 32));
    let x = probe(n, &mut StdRng::seed_from_u64(33));
    let good = faer(&a, &b, n);
    let cases: Vec<(&str, Vec<f64>)> = vec![
        ("zeros", vec![0.0; n * n]),
        ("transposed", (0..n * n).map(|i| good[(i % n) * n + i / n]).collect()),
        ("B·A", faer(&b, &a, n)),
        ("scaled", good.iter().map(|v| v * (1.0 + 1e-9)).collect()),
        ("one NaN", {
            let mut c = good.clone();
            c[5] = f64::NAN;
            c
        }),
        ("one infinity", {
            let mut c = good.clone();
            c[n * n - 1] = f64::INFINITY;
            c
        }),
    ];
    for (what, c) in cases {
        assert!(freivalds(&a, &b, &c, n, &x).is_err(), "{what} passed");
    }
}

/// A and B with NaN and infinities in a few rows and columns.
fn with_non_finite(n: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut a, mut b) = (random(n, 41), random(n, 42));
    a[3 * n + 5] = f64::NAN;
    a[7 * n] = f64::INFINITY;
    b[2 * n + 9] = f64::NEG_INFINITY;
    b[11 * n + 4] = f64::NAN;
    b[6 * n + 1] = 0.0;
    a[10 * n + 6] = 0.0; // 0 · ∞ somewhere below
    b[6 * n + 13] = f64::INFINITY;
    (a, b)
}

#[test]
fn non_finite_inputs_pass_when_c_is_right() {
    let n = 20;
    let (a, b) = with_non_finite(n);
    let mut rng = StdRng::seed_from_u64(43);
    for c in [faer(&a, &b, n), kernel::naive(&a, &b, n)] {
        // The oracle agrees: where the inputs say non-finite, C is.
        assert_eq!(wrong_entries(&a, &b, &c, n), 0);
        for _ in 0..20 {
            freivalds(&a, &b, &c, n, &probe(n, &mut rng)).expect("a right product with NaN passes");
        }
    }
}

#[test]
fn non_finite_inputs_do_not_hide_wrong_entries() {
    let n = 20;
    let (a, b) = with_non_finite(n);
    let good = faer(&a, &b, n);
    let x = probe(n, &mut StdRng::seed_from_u64(44));
    // A finite entry (row 0, column 0: A's row 0 and B's column 0 are
    // finite) made wrong.
    let mut c = good.clone();
    c[0] += 1e-6;
    assert!(freivalds(&a, &b, &c, n, &x).is_err());
    // A NaN where the inputs are finite.
    let mut c = good.clone();
    c[n + 2] = f64::NAN;
    assert!(freivalds(&a, &b, &c, n, &x).is_err());
    // A number where row 3 of A holds a NaN.
    let mut c = good.clone();
    c[3 * n + 8] = 1.0;
    assert!(freivalds(&a, &b, &c, n, &x).is_err());
    // A number where column 9 of B holds -∞.
    let mut c = good;
    c[n + 9] = 2.0;
    assert!(freivalds(&a, &b, &c, n, &x).is_err());
}

#[test]
fn overflowing_rows_are_recomputed() {
    let n = 12;
    let (mut a, b) = (random(n, 51), random(n, 52));
    for v in &mut a[2 * n..3 * n] {
        *v *= 1e308; // row 2 of C overflows for some entries
    }
    let c = kernel::naive(&a, &b, n);
    let x = probe(n, &mut StdRng::seed_from_u64(53));
    freivalds(&a, &b, &c, n, &x).expect("the naive product passes");
    let mut bad = c.clone();
    bad[2 * n + 1] = if bad[2 * n + 1].is_finite() { 0.0 } else { 1.0 };
    assert!(freivalds(&a, &b, &bad, n, &x).is_err());
}

/// A's columns and B's rows `ks` of an n×k by k×m product.
fn panel_of(a: &[f64], b: &[f64], d: Dims, ks: std::ops::Range<usize>) -> (Vec<f64>, Vec<f64>) {
    let ap: Vec<f64> = (0..d.n)
        .flat_map(|i| a[i * d.k + ks.start..i * d.k + ks.end].to_vec())
        .collect();
    (ap, b[ks.start * d.m..ks.end * d.m].to_vec())
}

#[test]
fn a_piece_checked_from_its_panels_passes_right_and_fails_wrong() {
    let mut rng = StdRng::seed_from_u64(9);
    let d = Dims { n: 37, k: 90, m: 23 };
    let (mut a, mut b) = (vec![0.0; d.n * d.k], vec![0.0; d.k * d.m]);
    kernel::fill_random(&mut a, 3);
    kernel::fill_random(&mut b, 4);
    let c = kernel::naive_dims(&a, &b, d);
    let x = probe(d.m, &mut rng);
    let parts = [0..40, 40..41, 41..90].map(|ks| {
        let (ap, bp) = panel_of(&a, &b, d, ks.clone());
        Partial::of_panel(&ap, &bp, Dims { k: ks.len(), ..d }, &x)
    });
    let e = Partial::sum(parts, d.n)
        .expected(d, x.clone(), DType::F64)
        .expect("clean inputs");
    e.check(&[], &[], &c).expect("the right C passes");
    // The same z as the whole product's expectation, within rounding.
    let whole = Expected::new(&a, &b, d, x, DType::F64);
    for i in 0..d.n {
        assert!((e.z[i] - whole.z[i]).abs() <= whole.tol[i], "row {i}");
    }
    let mut wrong = c.clone();
    wrong[5 * d.m + 7] += 1e-6;
    assert!(e.check(&[], &[], &wrong).is_err(), "a wrong entry is caught");
    // A NaN in a panel sends the piece the long way.
    a[3] = f64::NAN;
    let (ap, bp) = panel_of(&a, &b, d, 0..40);
    let p = Partial::of_panel(&ap, &bp, Dims { k: 40, ..d }, &probe(d.m, &mut rng));
    assert!(!p.clean);
}
