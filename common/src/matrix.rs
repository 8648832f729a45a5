//! Matrices as both sides see them: a product's dimensions, the
//! textbook product (the oracle of tests and of the master's `--verify`)
//! and deterministic random values for probes, benchmarks and generated
//! inputs. The worker's kernel computes; this only describes and checks.

use dls_protocol::{Form, Values};

/// Dimensions of one product, as `usize`: A n×k, B k×m.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims {
    pub n: usize,
    pub k: usize,
    pub m: usize,
}

impl Dims {
    pub fn square(n: usize) -> Dims {
        Dims { n, k: n, m: n }
    }

    pub fn of(form: &Form) -> Dims {
        Dims {
            n: form.shape.n as usize,
            k: form.shape.k as usize,
            m: form.shape.m as usize,
        }
    }
}

/// The textbook triple loop on square float64 matrices, for tests and for
/// the master's `--verify`.
pub fn naive(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    naive_dims(a, b, Dims::square(n))
}

/// The textbook triple loop for any shape, accumulated in float64 whatever
/// the inputs' type (a reference for float32 results too).
pub fn naive_dims<T: Copy + Into<f64>>(a: &[T], b: &[T], d: Dims) -> Vec<f64> {
    let mut c = vec![0.0; d.n * d.m];
    for i in 0..d.n {
        for l in 0..d.k {
            let x: f64 = a[i * d.k + l].into();
            for j in 0..d.m {
                c[i * d.m + j] += x * b[l * d.m + j].into();
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

/// `values` filled by [`fill_random`] (float32 ones rounded from it).
pub fn fill_random_values(values: &mut Values, seed: u64) {
    match values {
        Values::F64(v) => fill_random(v, seed),
        Values::F32(v) => {
            let mut w = vec![0.0; v.len()];
            fill_random(&mut w, seed);
            v.iter_mut().zip(&w).for_each(|(x, y)| *x = *y as f32);
        }
    }
}
