//! Partitioning n equal elements over p processors for the smallest
//! parallel time, beyond constant speeds (no communication):
//!
//! - functional performance models: a processor's speed as a function of
//!   the number of elements it gets, with an optional upper bound on that
//!   number (Lastovetsky & Reddy: Algorithm 1 of *Data partitioning with a
//!   functional performance model*, and section II of *... with task size
//!   limits*);
//! - cost functions: processors with related speeds `k_i` and a cost
//!   `f(n)` (linear, n log n, n², or a table), time `f(n_i) / k_i` (Cérin,
//!   Dubacq and Roch, *Methods for partitioning data to improve parallel
//!   execution time for sorting on heterogeneous clusters*, section 3),
//!   with the closed form for multiplicative costs (their Theorem 1);
//! - unrelated processors, time `f_i(n_i)` for any non-decreasing `f_i`, by
//!   dynamic programming (their section 4), optionally sampled.
//!
//! Every partitioner returns whole numbers of elements that respect the
//! bounds; the tests hold them against exhaustive dynamic programming.

use std::fmt;

/// Why a partitioning problem cannot be solved as given.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionError {
    NoProcessor,
    /// A speed, a point or a bound that makes no sense.
    BadInput(String),
    /// The bounds hold fewer elements than asked for.
    Infeasible {
        elements: u64,
        capacity: u64,
    },
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::NoProcessor => write!(f, "no processor to partition over"),
            PartitionError::BadInput(s) => f.write_str(s),
            PartitionError::Infeasible { elements, capacity } => write!(
                f,
                "infeasible bounds: the processors hold {capacity} elements in all (sum of max_elements), fewer than {elements}"
            ),
        }
    }
}

impl std::error::Error for PartitionError {}

type Result<T> = std::result::Result<T, PartitionError>;

/// A processor's speed (elements per second) as a function of the number of
/// elements it is given: a constant, or a piecewise-linear function through
/// measured points, constant before the first and after the last point.
#[derive(Debug, Clone, PartialEq)]
pub enum Speed {
    Constant(f64),
    Points(Vec<(f64, f64)>),
}

impl Speed {
    /// Check the points (sorted by size, sizes distinct, speeds positive).
    pub fn validate(&self, who: &str) -> Result<()> {
        let bad = |m: String| Err(PartitionError::BadInput(format!("processor {who:?}: {m}")));
        match self {
            Speed::Constant(s) if !(s.is_finite() && *s > 0.0) => bad(format!("speed {s} must be finite and > 0")),
            Speed::Constant(_) => Ok(()),
            Speed::Points(pts) if pts.is_empty() => bad("no points".into()),
            Speed::Points(pts) => {
                for (i, &(x, s)) in pts.iter().enumerate() {
                    if !(x.is_finite() && x > 0.0 && s.is_finite() && s > 0.0) {
                        return bad(format!("point ({x}, {s}) must have a positive size and speed"));
                    }
                    if i > 0 && x <= pts[i - 1].0 {
                        return bad("points must be in increasing order of size".into());
                    }
                }
                Ok(())
            }
        }
    }

    pub fn at(&self, x: f64) -> f64 {
        match self {
            Speed::Constant(s) => *s,
            Speed::Points(pts) => {
                if x <= pts[0].0 {
                    return pts[0].1;
                }
                for w in pts.windows(2) {
                    let ((x0, s0), (x1, s1)) = (w[0], w[1]);
                    if x <= x1 {
                        return s0 + (s1 - s0) * (x - x0) / (x1 - x0);
                    }
                }
                pts[pts.len() - 1].1
            }
        }
    }

    /// Seconds to process `x` elements.
    pub fn time(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            x / self.at(x)
        }
    }
}

/// A processor of the functional model.
#[derive(Debug, Clone, PartialEq)]
pub struct Processor {
    pub name: String,
    pub speed: Speed,
    /// The most elements it can take (memory), if bounded.
    pub max_elements: Option<u64>,
}

/// Whole elements per processor, and the parallel time they take.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    pub elements: Vec<u64>,
    /// The largest per-processor time.
    pub time: f64,
}

/// Bisection on a monotone predicate: `ok(lo)` holds and `ok(hi)` does not.
/// Halves `[lo, hi]` until it cannot shrink in floating point, `enough(lo,
/// hi)` says it is narrow enough, or after `rounds` halvings; returns the
/// final `(lo, hi)`.
fn bisect(
    mut lo: f64,
    mut hi: f64,
    rounds: usize,
    ok: impl Fn(f64) -> bool,
    enough: impl Fn(f64, f64) -> bool,
) -> (f64, f64) {
    for _ in 0..rounds {
        if enough(lo, hi) {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo, hi)
}

/// The largest x in `[0, cap]` with `f(x) ≤ y`, for a non-decreasing `f`.
fn largest_within(cap: f64, y: f64, f: impl Fn(f64) -> f64) -> f64 {
    if f(cap) <= y {
        return cap;
    }
    bisect(0.0, cap, 200, |x| f(x) <= y, |_, _| false).0
}

/// The most elements processor `p` can take within `t` seconds (real
/// valued): the largest x with x / s(x) ≤ t, found by bisection (times are
/// non-decreasing in x under the model's shape assumptions), capped by its
/// bound.
fn reach(p: &Processor, t: f64, cap: f64) -> f64 {
    let hi_cap = p.max_elements.map_or(cap, |b| (b as f64).min(cap));
    largest_within(hi_cap, t, |x| p.speed.time(x))
}

fn check(procs: &[Processor], n: u64) -> Result<()> {
    if procs.is_empty() {
        return Err(PartitionError::NoProcessor);
    }
    for p in procs {
        p.speed.validate(&p.name)?;
        if p.max_elements == Some(0) {
            return Err(PartitionError::BadInput(format!(
                "processor {:?}: max_elements must be at least 1",
                p.name
            )));
        }
    }
    let capacity = procs
        .iter()
        .map(|p| p.max_elements)
        .try_fold(0u64, |a, b| b.map(|b| a.saturating_add(b)));
    if let Some(capacity) = capacity {
        if capacity < n {
            return Err(PartitionError::Infeasible { elements: n, capacity });
        }
    }
    Ok(())
}

fn finish(procs: &[Processor], elements: Vec<u64>) -> Allocation {
    let time = procs
        .iter()
        .zip(&elements)
        .map(|(p, &e)| p.speed.time(e as f64))
        .fold(0.0, f64::max);
    Allocation { elements, time }
}

/// Algorithm 1 of the functional performance model, with upper bounds:
/// bisect the line through the origin (here its inverse slope, the time T)
/// until every processor's real-valued share changes by less than one
/// element, floor the shares (Algorithm 1.1), then hand out the remaining
/// elements one at a time to the processor that would finish the extra
/// element soonest (Algorithm 1.2). Bounds enter as caps on each share,
/// which is what the task-size-limits paper's recursion (give bounded
/// processors their bound, re-partition the rest) computes.
pub fn fpm(procs: &[Processor], n: u64) -> Result<Allocation> {
    check(procs, n)?;
    let nf = n as f64;
    let total = |t: f64| procs.iter().map(|p| reach(p, t, nf)).sum::<f64>();
    // Bracket T: the line through (n/p, max s) and (n/p, min s), widened
    // until it brackets (bounds can push the answer beyond it).
    let share = nf / procs.len() as f64;
    let (smax, smin) = procs.iter().fold((0.0f64, f64::INFINITY), |(a, b), p| {
        let s = p.speed.at(share.max(1.0));
        (a.max(s), b.min(s))
    });
    let (mut t_u, mut t_l) = (share / smax, share / smin);
    while total(t_u) > nf && t_u > f64::MIN_POSITIVE {
        t_u *= 0.5;
    }
    while total(t_l) < nf {
        t_l *= 2.0;
    }
    // Narrow enough once no processor's share changes by a whole element.
    let spread = |lo: f64, hi: f64| {
        procs
            .iter()
            .map(|p| reach(p, hi, nf) - reach(p, lo, nf))
            .fold(0.0, f64::max)
    };
    let (t_u, _) = bisect(t_u, t_l, 300, |t| total(t) <= nf, |lo, hi| spread(lo, hi) < 1.0);
    let mut elements: Vec<u64> = procs.iter().map(|p| reach(p, t_u, nf).floor() as u64).collect();
    let mut assigned: u64 = elements.iter().sum();
    while assigned > n {
        // Float noise only: take back from the slowest finisher.
        let k = (0..procs.len())
            .filter(|&i| elements[i] > 0)
            .max_by(|&a, &b| {
                procs[a]
                    .speed
                    .time(elements[a] as f64)
                    .total_cmp(&procs[b].speed.time(elements[b] as f64))
            })
            .unwrap_or(0);
        elements[k] -= 1;
        assigned -= 1;
    }
    while assigned < n {
        let next = |i: usize| procs[i].speed.time(elements[i] as f64 + 1.0);
        let room = |i: usize| procs[i].max_elements.is_none_or(|b| elements[i] < b);
        let Some(k) = (0..procs.len())
            .filter(|&i| room(i))
            .min_by(|&a, &b| next(a).total_cmp(&next(b)))
        else {
            break; // capacity was checked
        };
        elements[k] += 1;
        assigned += 1;
    }
    Ok(finish(procs, elements))
}

/// The task-size-limits paper's procedure, as written: partition without
/// bounds; give every processor whose share exceeds its bound that bound;
/// partition the remaining elements over the remaining processors; repeat.
/// Kept as a second, independent route to the bounded answer.
pub fn fpm_bounded_recursive(procs: &[Processor], n: u64) -> Result<Allocation> {
    check(procs, n)?;
    let mut fixed: Vec<Option<u64>> = vec![None; procs.len()];
    let mut left = n;
    loop {
        let free: Vec<usize> = (0..procs.len()).filter(|&i| fixed[i].is_none()).collect();
        let sub: Vec<Processor> = free
            .iter()
            .map(|&i| Processor {
                max_elements: None,
                ..procs[i].clone()
            })
            .collect();
        let a = fpm(&sub, left)?;
        let over: Vec<usize> = free
            .iter()
            .enumerate()
            .filter(|(k, &i)| procs[i].max_elements.is_some_and(|b| a.elements[*k] > b))
            .map(|(_, &i)| i)
            .collect();
        if over.is_empty() {
            let mut elements = vec![0; procs.len()];
            for (k, &i) in free.iter().enumerate() {
                elements[i] = a.elements[k];
            }
            for (i, f) in fixed.iter().enumerate() {
                if let Some(b) = f {
                    elements[i] = *b;
                }
            }
            return Ok(finish(procs, elements));
        }
        for i in over {
            let b = procs[i].max_elements.unwrap_or(0);
            fixed[i] = Some(b);
            left -= b;
        }
    }
}

/// The cost of processing n elements at unit speed.
#[derive(Debug, Clone, PartialEq)]
pub enum Cost {
    Linear,
    NLogN,
    Square,
    /// Measured (size, cost) points, interpolated linearly (and linearly
    /// extrapolated from the last two); made non-decreasing first.
    Table(Vec<(f64, f64)>),
}

impl Cost {
    /// The cost of `n` elements.
    pub fn eval(&self, n: f64) -> f64 {
        match self {
            Cost::Table(pts) => Cost::Table(monotone(pts)).eval_prepared(n),
            other => other.eval_prepared(n),
        }
    }

    /// The same cost with a table sorted and made non-decreasing, once:
    /// what [`Cost::eval_prepared`] assumes.
    fn prepared(&self) -> Cost {
        match self {
            Cost::Table(pts) => Cost::Table(monotone(pts)),
            other => other.clone(),
        }
    }

    /// `eval` on a [`Cost::prepared`] cost (a table is not sorted again).
    fn eval_prepared(&self, n: f64) -> f64 {
        match self {
            Cost::Linear => n,
            Cost::NLogN => {
                if n <= 1.0 {
                    // Continuous and increasing through n = 1: n ln n is 0
                    // there; the linear piece keeps f⁻¹ defined below it.
                    n - 1.0
                } else {
                    n * n.ln()
                }
            }
            Cost::Square => n * n,
            Cost::Table(xs) => {
                if xs.len() == 1 {
                    return xs[0].1 * n / xs[0].0;
                }
                let (a, b) = if n <= xs[0].0 {
                    (xs[0], xs[1])
                } else {
                    let k = xs.windows(2).position(|w| n <= w[1].0).unwrap_or(xs.len() - 2);
                    (xs[k], xs[k + 1])
                };
                a.1 + (b.1 - a.1) * (n - a.0) / (b.0 - a.0)
            }
        }
    }

    /// The largest n with f(n) ≤ c, on a prepared cost (f is non-decreasing).
    fn inverse(&self, c: f64, cap: f64) -> f64 {
        largest_within(cap, c, |x| self.eval_prepared(x))
    }
}

/// Sort a table by size and raise costs where they dip, so the cost is
/// non-decreasing (Cérin et al. section 3.3, step (d)).
pub fn monotone(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut v = pts.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best = f64::NEG_INFINITY;
    for p in &mut v {
        best = best.max(p.1);
        p.1 = best;
    }
    v
}

/// Related processors (speeds `k`) and one cost: solve Σ f⁻¹(T k_i) = n by
/// bisection on T, floor, then give each remaining element to the processor
/// whose time after taking it is smallest.
pub fn related(k: &[f64], bounds: &[Option<u64>], cost: &Cost, n: u64) -> Result<Allocation> {
    if k.is_empty() {
        return Err(PartitionError::NoProcessor);
    }
    if let Some(bad) = k.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
        return Err(PartitionError::BadInput(format!("speed {bad} must be finite and > 0")));
    }
    if let Cost::Table(pts) = cost {
        if pts.is_empty()
            || pts
                .iter()
                .any(|&(x, c)| !(x.is_finite() && x > 0.0 && c.is_finite() && c >= 0.0))
        {
            return Err(PartitionError::BadInput(
                "a cost table needs points with positive sizes and non-negative costs".into(),
            ));
        }
    }
    let capacity = bounds.iter().try_fold(0u64, |a, b| b.map(|b| a.saturating_add(b)));
    if let Some(capacity) = capacity {
        if capacity < n {
            return Err(PartitionError::Infeasible { elements: n, capacity });
        }
    }
    let nf = n as f64;
    let cost = cost.prepared();
    let cap = |i: usize| bounds.get(i).copied().flatten().map_or(nf, |b| (b as f64).min(nf));
    let share = |t: f64, i: usize| cost.inverse(t * k[i], cap(i));
    let total = |t: f64| (0..k.len()).map(|i| share(t, i)).sum::<f64>();
    let mut hi = 1.0f64;
    while total(hi) < nf {
        hi *= 2.0;
    }
    let (lo, _) = bisect(0.0, hi, 200, |t| total(t) <= nf, |_, _| false);
    let time = |i: usize, e: u64| cost.eval_prepared(e as f64) / k[i];
    let mut elements: Vec<u64> = (0..k.len()).map(|i| share(lo, i).floor() as u64).collect();
    let mut assigned: u64 = elements.iter().sum();
    while assigned < n {
        let room = |i: usize| bounds.get(i).copied().flatten().is_none_or(|b| elements[i] < b);
        let Some(j) = (0..k.len())
            .filter(|&i| room(i))
            .min_by(|&a, &b| time(a, elements[a] + 1).total_cmp(&time(b, elements[b] + 1)))
        else {
            break;
        };
        elements[j] += 1;
        assigned += 1;
    }
    let t = (0..k.len()).map(|i| time(i, elements[i])).fold(0.0, f64::max);
    Ok(Allocation { elements, time: t })
}

/// Theorem 1 of Cérin et al.: for a multiplicative cost (f(ab) = f(a) f(b),
/// here f(n) = n^a), the real-valued shares are n_i = f⁻¹(k_i) / Σ f⁻¹(k_j) · n.
pub fn multiplicative_shares(k: &[f64], a: f64, n: f64) -> Vec<f64> {
    let inv: Vec<f64> = k.iter().map(|ki| ki.powf(1.0 / a)).collect();
    let s: f64 = inv.iter().sum();
    inv.iter().map(|x| x / s * n).collect()
}

/// Unrelated processors: `time(i, m)` is processor i's time for m elements
/// (non-decreasing in m). Dynamic programming over (elements, processors),
/// T(m, i) = min over x of max(time(i, x), T(m − x, i − 1)): O(n² p) time,
/// O(n p) memory. With `step` > 1 only multiples of `step` (and the
/// remainder) are tried for each processor: cheaper, not always optimal.
pub fn unrelated(p: usize, n: u64, step: u64, time: impl Fn(usize, u64) -> f64) -> Result<Allocation> {
    if p == 0 {
        return Err(PartitionError::NoProcessor);
    }
    if n > 200_000 {
        return Err(PartitionError::BadInput(format!(
            "{n} elements: the O(n² p) dynamic programme is limited to 200000 (use a larger --step or another model)"
        )));
    }
    let n = n as usize;
    let step = step.max(1) as usize;
    // best[i][m]: the best time for m elements over processors 0..=i.
    let mut best = vec![vec![f64::INFINITY; n + 1]; p];
    let mut choice = vec![vec![0usize; n + 1]; p];
    for m in 0..=n {
        best[0][m] = time(0, m as u64);
        choice[0][m] = m;
    }
    for i in 1..p {
        for m in 0..=n {
            let mut x = 0;
            loop {
                let t = time(i, x as u64).max(best[i - 1][m - x]);
                if t < best[i][m] {
                    best[i][m] = t;
                    choice[i][m] = x;
                }
                if x == m {
                    break;
                }
                x = (x + step).min(m);
            }
        }
    }
    let mut elements = vec![0u64; p];
    let mut m = n;
    for i in (0..p).rev() {
        let x = choice[i][m];
        elements[i] = x as u64;
        m -= x;
    }
    let t = (0..p).map(|i| time(i, elements[i])).fold(0.0, f64::max);
    Ok(Allocation { elements, time: t })
}

/// Acceptable disagreement between two speed functions built from
/// successive point sets (the task-size-limits paper, section III).
pub const POINTS_TOLERANCE: f64 = 0.05;

/// Build a piecewise-linear speed function from measurements, the
/// task-size-limits paper's way (section III): `k` equally spaced sizes from
/// `x_min` to `x_max`, starting at 5 points; add a point (re-spacing) until
/// the functions from `k` and `k + 1` points agree within ±5% at every
/// measured size of both, or 8 points are reached. `measure(x)` returns the
/// speed at size x (elements per second). Returns the accepted points.
pub fn build_speed_function(x_min: f64, x_max: f64, mut measure: impl FnMut(f64) -> f64) -> Result<Speed> {
    if !(x_min.is_finite() && x_max.is_finite() && x_min > 0.0 && x_max > x_min) {
        return Err(PartitionError::BadInput(format!(
            "sizes must satisfy 0 < x_min < x_max (got {x_min}, {x_max})"
        )));
    }
    let mut grid = |k: usize| -> Result<Vec<(f64, f64)>> {
        (0..k)
            .map(|j| {
                let x = x_min + (x_max - x_min) * j as f64 / (k - 1) as f64;
                let s = measure(x);
                if s.is_finite() && s > 0.0 {
                    Ok((x, s))
                } else {
                    Err(PartitionError::BadInput(format!(
                        "measured speed {s} at size {x} is not positive"
                    )))
                }
            })
            .collect()
    };
    let mut current = grid(5)?;
    for k in 6..=8 {
        let finer = grid(k)?;
        let (a, b) = (Speed::Points(current.clone()), Speed::Points(finer.clone()));
        let agree = current
            .iter()
            .chain(&finer)
            .all(|&(x, _)| (a.at(x) - b.at(x)).abs() <= POINTS_TOLERANCE * b.at(x));
        if agree {
            return Ok(a);
        }
        current = finer;
    }
    Ok(Speed::Points(current))
}
