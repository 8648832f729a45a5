//! The master's check of every product it receives: Freivalds' test.
//!
//! For a product C = A·B (A n×k, B k×m) and a random vector x that the
//! worker never sees, C·x must equal A·(B·x). Both sides cost O(nk + km +
//! nm), against O(nkm) to recompute C. A wrong entry δ at (i, k) moves (C·x)ᵢ by δ·xₖ, and
//! |xₖ| ≥ ½, so any error larger than the rounding bound of its row is found
//! (several wrong entries cancel only with probability zero).
//!
//! Floating point: the test allows, per row, `ROUNDING · (k + 2) · ε ·
//! (|A|·|B|·|x|)ᵢ`, a bound on the rounding of C itself and of both sides,
//! with ε the epsilon of the batch's type (float32 results are checked in
//! float64 arithmetic, so their own rounding dominates).
//!
//! Non-finite inputs: C[i][k] is non-finite exactly when row i of A or
//! column k of B holds a NaN or an infinity (a NaN or infinite term makes
//! the sum non-finite, 0·∞ included). Those entries must be non-finite; the
//! others are checked by Freivalds' test over the finite rows and columns.
//! Rows whose bound overflows (the type's largest value) although their
//! inputs are finite are recomputed (O(km) each); there a result past the
//! type's range may be infinite.

/// Factor on n·ε·(|A|·|B|·|x|)ᵢ: the rounding of C's entries (γₙ each,
/// weighted by |x|) and of the three dot products of the test (γₙ each).
const ROUNDING: f64 = 4.0;

/// Why a product failed the check.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// Row of C where it shows.
    pub row: usize,
    pub what: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row {}: {}", self.row, self.what)
    }
}

use dls_common::matrix::Dims;
use dls_protocol::DType;

/// A random vector for the test: entries of magnitude in [½, 1) with random
/// signs, drawn from `rng`.
pub fn probe(n: usize, rng: &mut impl rand::Rng) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let v: f64 = rng.random_range(0.5..1.0);
            if rng.random::<bool>() {
                v
            } else {
                -v
            }
        })
        .collect()
}

/// Σ rowⱼ·vⱼ and Σ |rowⱼ|·absⱼ, four lanes wide so the compiler vectorises.
#[inline(always)]
fn dot2(row: &[f64], v: &[f64], abs: &[f64]) -> (f64, f64) {
    let (mut s, mut t) = ([0.0f64; 4], [0.0f64; 4]);
    let (rc, vc, ac) = (row.chunks_exact(4), v.chunks_exact(4), abs.chunks_exact(4));
    let tail = rc.remainder().iter().zip(vc.remainder()).zip(ac.remainder());
    for ((r, v), a) in rc.zip(vc).zip(ac) {
        for l in 0..4 {
            s[l] += r[l] * v[l];
            t[l] += r[l].abs() * a[l];
        }
    }
    let (mut s1, mut t1) = (s[0] + s[1] + (s[2] + s[3]), t[0] + t[1] + (t[2] + t[3]));
    for ((r, v), a) in tail {
        s1 += r * v;
        t1 += r.abs() * a;
    }
    (s1, t1)
}

/// Σ rowⱼ·vⱼ, four lanes wide.
#[inline(always)]
fn dot(row: &[f64], v: &[f64]) -> f64 {
    let mut s = [0.0f64; 4];
    let (rc, vc) = (row.chunks_exact(4), v.chunks_exact(4));
    let tail: f64 = rc.remainder().iter().zip(vc.remainder()).map(|(r, v)| r * v).sum();
    for (r, v) in rc.zip(vc) {
        for l in 0..4 {
            s[l] += r[l] * v[l];
        }
    }
    s[0] + s[1] + (s[2] + s[3]) + tail
}

/// Check `c` against `a`·`b` (n×n float64, row-major) with the probe `x`
/// (see [`probe`]).
pub fn freivalds(a: &[f64], b: &[f64], c: &[f64], n: usize, x: &[f64]) -> Result<(), Mismatch> {
    Expected::new(a, b, Dims::square(n), x.to_vec(), DType::F64).check(a, b, c)
}

/// What one product must satisfy, worked out from A and B alone (two
/// thirds of the test's work, done while the worker computes), so that
/// checking C when it arrives is one pass over C.
#[derive(Debug, Clone)]
pub struct Expected {
    d: Dims,
    /// The type's epsilon and largest value.
    eps: f64,
    limit: f64,
    /// The probe (m values), 0 on the columns of B that hold a NaN or an
    /// infinity.
    x: Vec<f64>,
    /// A·(B·x) per row, and the row's rounding allowance.
    z: Vec<f64>,
    tol: Vec<f64>,
    /// What each row of C must be.
    rows: Vec<Row>,
    /// Columns of C that must be NaN or infinite.
    bad_cols: Vec<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Row {
    /// Checked with the probe.
    Probed,
    /// A's row holds a NaN or an infinity: the whole row is non-finite.
    NonFinite,
    /// Finite inputs whose bound overflows: recomputed.
    Recompute,
}

impl Expected {
    /// The expectation for the product of `a` (n×k) and `b` (k×m), values
    /// of type `dtype` widened to f64, with the probe `x` (m values).
    pub fn new(a: &[f64], b: &[f64], d: Dims, mut x: Vec<f64>, dtype: DType) -> Expected {
        let Dims { n, k, m } = d;
        debug_assert!(a.len() == n * k && b.len() == k * m && x.len() == m);
        let xabs: Vec<f64> = x.iter().map(|v| v.abs()).collect();
        // y = B·x and |B|·|x|, one pass over B.
        let (mut y, mut yabs) = (vec![0.0; k], vec![0.0; k]);
        for j in 0..k {
            (y[j], yabs[j]) = dot2(&b[j * m..(j + 1) * m], &x, &xabs);
        }
        let bad_cols = if yabs.iter().all(|v| v.is_finite()) {
            Vec::new()
        } else {
            masked_b(b, d, &x, &mut y, &mut yabs)
        };
        for &c in &bad_cols {
            x[c] = 0.0;
        }
        let limit = match dtype {
            DType::F32 => f32::MAX as f64,
            DType::F64 => f64::MAX,
        };
        let mut e = Expected {
            d,
            eps: dtype.epsilon(),
            limit,
            x,
            z: vec![0.0; n],
            tol: vec![0.0; n],
            rows: vec![Row::Probed; n],
            bad_cols,
        };
        if yabs.iter().any(|v| !v.is_finite()) {
            // B is finite but |B|·|x| overflows: nothing cheap is sound.
            e.rows = vec![Row::Recompute; n];
            return e;
        }
        let eps = ROUNDING * (k as f64 + 2.0) * e.eps;
        for i in 0..n {
            let ar = &a[i * k..(i + 1) * k];
            let (z, zabs) = dot2(ar, &y, &yabs);
            e.rows[i] = if zabs.is_finite() && zabs <= limit / 4.0 {
                Row::Probed
            } else if ar.iter().all(|v| v.is_finite()) {
                Row::Recompute
            } else {
                Row::NonFinite
            };
            (e.z[i], e.tol[i]) = (z, eps * zabs + k as f64 * f64::MIN_POSITIVE);
        }
        e
    }

    /// Whether [`Expected::check`] needs A and B again (rows whose bound
    /// overflows are recomputed); when not, it may be given empty slices.
    pub fn needs_inputs(&self) -> bool {
        self.rows.contains(&Row::Recompute)
    }

    /// Check `c` (the same `a` and `b` are needed only for rows that must
    /// be recomputed, see [`Expected::needs_inputs`]).
    pub fn check(&self, a: &[f64], b: &[f64], c: &[f64]) -> Result<(), Mismatch> {
        let Dims { n, m, .. } = self.d;
        if c.len() != n * m {
            return Err(Mismatch {
                row: 0,
                what: format!("{} values for a product with {n}×{m} results", c.len()),
            });
        }
        for i in 0..n {
            let cr = &c[i * m..(i + 1) * m];
            match self.rows[i] {
                Row::Recompute => recompute_rows(a, b, c, self.d, self.eps, self.limit, i..i + 1)?,
                Row::NonFinite => {
                    if let Some(k) = cr.iter().position(|v| v.is_finite()) {
                        return Err(non_finite_expected(i, k, cr[k], "row of A"));
                    }
                }
                Row::Probed => self.probed(i, cr)?,
            }
        }
        Ok(())
    }

    fn probed(&self, i: usize, cr: &[f64]) -> Result<(), Mismatch> {
        for &k in &self.bad_cols {
            if cr[k].is_finite() {
                return Err(non_finite_expected(i, k, cr[k], "column of B"));
            }
        }
        let w = if self.bad_cols.is_empty() {
            dot(cr, &self.x)
        } else {
            // Non-finite entries sit where x is 0; skip them, not 0·∞.
            cr.iter()
                .zip(&self.x)
                .filter(|(_, &xk)| xk != 0.0)
                .map(|(cv, xk)| cv * xk)
                .sum()
        };
        let (z, tol) = (self.z[i], self.tol[i]);
        let diff = (w - z).abs();
        // A NaN where a number belongs fails too.
        if diff.is_nan() || diff > tol {
            return Err(Mismatch {
                row: i,
                what: format!("(C·x) is {w:e} but A·(B·x) is {z:e} (|difference| {diff:.3e} > {tol:.3e})"),
            });
        }
        Ok(())
    }
}

/// What a piece of one large product must satisfy, summed over its
/// panels as they are sent (A·(B·x) = Σ A_p·(B_p·x)), so the master never
/// reads a piece's inputs twice. Panels with NaN or infinite values, or
/// whose bounds overflow, make it `unclean`: the caller then checks the
/// piece the long way ([`Expected::new`] over its whole rows and columns).
#[derive(Debug, Clone)]
pub struct Partial {
    pub z: Vec<f64>,
    pub zabs: Vec<f64>,
    pub clean: bool,
}

impl Partial {
    /// One panel's share: `a` (n×kp) and `b` (kp×m), with the piece's probe.
    pub fn of_panel(a: &[f64], b: &[f64], d: Dims, x: &[f64]) -> Partial {
        let Dims { n, k, m } = d;
        let xabs: Vec<f64> = x.iter().map(|v| v.abs()).collect();
        let (mut y, mut yabs) = (vec![0.0; k], vec![0.0; k]);
        for j in 0..k {
            (y[j], yabs[j]) = dot2(&b[j * m..(j + 1) * m], x, &xabs);
        }
        let mut p = Partial {
            z: vec![0.0; n],
            zabs: vec![0.0; n],
            clean: yabs.iter().all(|v| v.is_finite()),
        };
        for i in 0..n {
            (p.z[i], p.zabs[i]) = dot2(&a[i * k..(i + 1) * k], &y, &yabs);
        }
        p.clean &= p.zabs.iter().all(|v| v.is_finite());
        p
    }

    /// Nothing yet: the sum of no panel's share, for `n` rows.
    pub fn zero(n: usize) -> Partial {
        Partial {
            z: vec![0.0; n],
            zabs: vec![0.0; n],
            clean: true,
        }
    }

    /// Add another panel's share.
    pub fn add(&mut self, p: &Partial) {
        self.clean &= p.clean && p.z.len() == self.z.len();
        for (i, (z, za)) in p.z.iter().zip(&p.zabs).enumerate().take(self.z.len()) {
            self.z[i] += z;
            self.zabs[i] += za;
        }
    }

    /// The sum of the shares of every panel of a piece.
    pub fn sum(parts: impl IntoIterator<Item = Partial>, n: usize) -> Partial {
        let mut total = Partial::zero(n);
        for p in parts {
            total.add(&p);
        }
        total
    }

    /// The expectation for the whole piece (n×m of depth `d.k`), if clean
    /// and no row's bound comes near the type's largest value.
    pub fn expected(self, d: Dims, x: Vec<f64>, dtype: DType) -> Option<Expected> {
        let limit = match dtype {
            DType::F32 => f32::MAX as f64,
            DType::F64 => f64::MAX,
        };
        if !self.clean || self.zabs.len() != d.n || self.zabs.iter().any(|&v| v.is_nan() || v > limit / 4.0) {
            return None;
        }
        let eps = ROUNDING * (d.k as f64 + 2.0) * dtype.epsilon();
        let tol = self
            .zabs
            .iter()
            .map(|v| eps * v + d.k as f64 * f64::MIN_POSITIVE)
            .collect();
        Some(Expected {
            d,
            eps: dtype.epsilon(),
            limit,
            x,
            z: self.z,
            tol,
            rows: vec![Row::Probed; d.n],
            bad_cols: Vec::new(),
        })
    }
}

fn non_finite_expected(i: usize, k: usize, got: f64, because: &str) -> Mismatch {
    Mismatch {
        row: i,
        what: format!("column {k} is {got} but must be NaN or infinite (a {because} holds a NaN or an infinity)"),
    }
}

/// B has non-finite entries: find their columns and recompute B·x and
/// |B|·|x| without them. Returns the columns.
fn masked_b(b: &[f64], d: Dims, x: &[f64], y: &mut [f64], yabs: &mut [f64]) -> Vec<usize> {
    let mut bad = vec![false; d.m];
    for row in b.chunks_exact(d.m.max(1)) {
        for (c, v) in row.iter().enumerate() {
            bad[c] |= !v.is_finite();
        }
    }
    for j in 0..d.k {
        let row = &b[j * d.m..(j + 1) * d.m];
        let (mut s, mut t) = (0.0, 0.0);
        for c in (0..d.m).filter(|&c| !bad[c]) {
            s += row[c] * x[c];
            t += row[c].abs() * x[c].abs();
        }
        (y[j], yabs[j]) = (s, t);
    }
    (0..d.m).filter(|&c| bad[c]).collect()
}

/// Recompute rows of C (O(km) each) and compare entry by entry; an entry
/// whose value may lie past `limit` (the type's largest) may be infinite.
fn recompute_rows(
    a: &[f64],
    b: &[f64],
    c: &[f64],
    d: Dims,
    eps: f64,
    limit: f64,
    rows: std::ops::Range<usize>,
) -> Result<(), Mismatch> {
    let Dims { k, m, .. } = d;
    let eps = ROUNDING * (k as f64 + 2.0) * eps;
    for i in rows {
        // The bound is summed already scaled by ε so that it cannot overflow
        // where the product does not.
        let (mut want, mut tol) = (vec![0.0; m], vec![f64::MIN_POSITIVE; m]);
        for j in 0..k {
            let aij = a[i * k + j];
            for col in 0..m {
                want[col] += aij * b[j * m + col];
                tol[col] += (eps * aij).abs() * b[j * m + col].abs();
            }
        }
        for col in 0..m {
            let got = c[i * m + col];
            if !agrees_within(got, want[col], tol[col], limit) {
                return Err(Mismatch {
                    row: i,
                    what: format!("column {col} is {got:e} but recomputed it is {:e}", want[col]),
                });
            }
        }
    }
    Ok(())
}

/// As [`agrees`], for a result of a type whose largest value is `limit`:
/// where the reference may lie past it, an infinite result agrees too.
pub fn agrees_within(got: f64, want: f64, tol: f64, limit: f64) -> bool {
    let may_overflow = want.abs() + tol > limit;
    agrees(got, want, tol) || (may_overflow && got.is_infinite())
}

/// Whether a computed value agrees with a reference: both non-finite (a NaN
/// or an infinity arises whatever the order of summation), or both finite
/// and within `tol`.
pub fn agrees(got: f64, want: f64, tol: f64) -> bool {
    if want.is_finite() {
        got.is_finite() && (got - want).abs() <= tol
    } else {
        !got.is_finite()
    }
}

#[cfg(test)]
mod tests;
