//! Exact fast paths for FIFO and LIFO scenarios without load bounds.
//!
//! # FIFO
//! Under FIFO with sends back to back and returns back to back, write
//! `g_i` for the time from the start of worker i's send to the end of the
//! previous worker's return (the start of i's own return when i does not
//! idle). Worker i can take at most `g_i / (c_i + w_i)` units, and taking
//! `α_i` leaves `g_{i+1} = g_i − α_i (c_i − d_i)` to the next worker. Every
//! quantity is proportional to `g_1` (the time the first return starts), so
//! set `g_1 = 1` and let worker i take a fraction `f_i ∈ [0, 1]` of what it
//! can: the loads then follow the recurrence of Theorem 1 (no idle time where
//! `f_i = 1`). With `N = Σ α`, `S = Σ c α`, `R = Σ d α`, the makespan is
//! `1 + R` and the one-port constraint is `S ≤ 1` (every send ends before the
//! first return). The best throughput is
//!
//! ```text
//! ρ* = max N / (1 + R)   subject to   S ≤ 1   (one port only)
//! ```
//!
//! * The ratio is handled by Dinkelbach's method: for a trial `λ`, maximise
//!   `N − λ R`; the ratio of the maximiser is the next `λ` (finite, monotone).
//! * The port constraint by Lagrangian relaxation: maximise `N − λR − μS`.
//!   If `S ≤ 1` at `μ = 0` it does not bind; otherwise bisection on `μ` finds
//!   the two maximisers on each side of the breakpoint, and the point of the
//!   segment between them with `S = 1` is optimal (both are optimal for the
//!   relaxation there, and the feasible set is convex in α).
//! * For fixed multipliers the objective is linear in each `f_i` and the
//!   value from worker i on is `g_i φ_i`, so a backward pass
//!   `φ_i = max(φ_{i+1}, (v_i + (w_i + d_i) φ_{i+1}) / (c_i + w_i))` with
//!   `v_i = 1 − λ d_i − μ c_i` picks every `f_i ∈ {0, 1}` in O(p).
//!
//! The result is the optimum of the scenario LP (`crate::lp`) for that order,
//! which the tests check on thousands of random platforms.
//!
//! # LIFO
//! Windows nest: worker i computes while the master serves every worker sent
//! after it, so with `W_1 = 1`, `α_i = W_i / (c_i + d_i + w_i)` and
//! `W_{i+1} = W_i w_i / (c_i + d_i + w_i)`. In non-decreasing order of `c + d`
//! every worker takes all it can (an adjacent exchange shows this order is
//! best); the tests check it against brute force.

use crate::platform::Platform;
use crate::schedule::Ports;
use crate::tol::{RATIO_CONVERGED, STRICT_GAIN};

/// A point of the FIFO chain polytope (with `g_1 = 1`).
#[derive(Debug, Clone)]
struct Point {
    alpha: Vec<f64>,
    n: f64,
    r: f64,
    s: f64,
}

impl Point {
    /// No load on any of `p` workers.
    fn empty(p: usize) -> Point {
        Point {
            alpha: vec![0.0; p],
            n: 0.0,
            r: 0.0,
            s: 0.0,
        }
    }
}

struct Chain {
    c: Vec<f64>,
    w: Vec<f64>,
    d: Vec<f64>,
}

impl Chain {
    fn new(platform: &Platform, order: &[usize]) -> Self {
        let wk = platform.workers();
        Chain {
            c: order.iter().map(|&i| wk[i].c).collect(),
            w: order.iter().map(|&i| wk[i].w).collect(),
            d: order.iter().map(|&i| wk[i].d).collect(),
        }
    }

    fn len(&self) -> usize {
        self.c.len()
    }

    /// Backward pass: which workers take all they can for multipliers λ, μ.
    fn choose(&self, lam: f64, mu: f64, take: &mut [bool]) {
        let mut phi = 0.0;
        for i in (0..self.len()).rev() {
            let v = 1.0 - lam * self.d[i] - mu * self.c[i];
            let enrol = (v + (self.w[i] + self.d[i]) * phi) / (self.c[i] + self.w[i]);
            take[i] = enrol > phi;
            if take[i] {
                phi = enrol;
            }
        }
    }

    /// Forward pass: the loads of a choice.
    fn point(&self, take: &[bool]) -> Point {
        let mut g = 1.0;
        let mut p = Point::empty(self.len());
        for i in 0..self.len() {
            if take[i] {
                let a = g / (self.c[i] + self.w[i]);
                g -= a * (self.c[i] - self.d[i]);
                p.alpha[i] = a;
                p.n += a;
                p.r += a * self.d[i];
                p.s += a * self.c[i];
            }
        }
        p
    }

    /// The workers with load in `support`, in order, each taking all it can
    /// until the sends fill the time before the first return (`S = 1`).
    fn fill(&self, support: &[f64]) -> Point {
        let mut g = 1.0;
        let mut p = Point::empty(self.len());
        for i in 0..self.len() {
            if support[i] <= 0.0 {
                continue;
            }
            let mut a = g / (self.c[i] + self.w[i]);
            let last = p.s + a * self.c[i] >= 1.0;
            if last {
                a = (1.0 - p.s) / self.c[i];
            }
            g -= a * (self.c[i] - self.d[i]);
            p.alpha[i] = a;
            p.n += a;
            p.r += a * self.d[i];
            p.s += a * self.c[i];
            if last {
                break;
            }
        }
        p
    }

    fn solve_at(&self, lam: f64, mu: f64, take: &mut [bool]) -> Point {
        self.choose(lam, mu, take);
        self.point(take)
    }

    /// Maximise N − λR subject to S ≤ 1 (when `one_port`).
    fn inner(&self, lam: f64, one_port: bool, take: &mut [bool]) -> Point {
        let free = self.solve_at(lam, 0.0, take);
        if !one_port || free.s <= 1.0 {
            return free;
        }
        // With μ above 1/min c every unit has negative value: nothing is taken.
        let c_min = self.c.iter().copied().fold(f64::INFINITY, f64::min);
        let (mut lo, mut hi) = (0.0, 2.0 / c_min);
        let mut p_lo = free;
        let mut p_hi = self.solve_at(lam, hi, take);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            let p = self.solve_at(lam, mid, take);
            if p.s > 1.0 {
                lo = mid;
                p_lo = p;
            } else {
                hi = mid;
                p_hi = p;
            }
        }
        let theta = (1.0 - p_hi.s) / (p_lo.s - p_hi.s);
        let mix = |a: f64, b: f64| theta * a + (1.0 - theta) * b;
        Point {
            alpha: p_lo.alpha.iter().zip(&p_hi.alpha).map(|(&a, &b)| mix(a, b)).collect(),
            n: mix(p_lo.n, p_hi.n),
            r: mix(p_lo.r, p_hi.r),
            s: mix(p_lo.s, p_hi.s),
        }
    }
}

/// Optimal loads (indexed like the platform) and makespan for `load` units
/// under the FIFO scenario `order`, ignoring `max_load`.
pub fn fifo(platform: &Platform, order: &[usize], ports: Ports, load: f64) -> (Vec<f64>, f64) {
    let chain = Chain::new(platform, order);
    let mut take = vec![false; chain.len()];
    let one_port = ports.one_lane();
    let mut best = chain.inner(0.0, one_port, &mut take);
    let mut lam = best.n / (1.0 + best.r);
    for _ in 0..100 {
        let p = chain.inner(lam, one_port, &mut take);
        let ratio = p.n / (1.0 + p.r);
        if ratio <= lam * (1.0 + RATIO_CONVERGED) {
            break;
        }
        best = p;
        lam = ratio;
    }
    if one_port {
        // The mix of two choices may leave several workers idle (ties, as on
        // a bus, flip many choices at once). Lemma 2: filling the enrolled
        // workers in order, each taking all it can until the port is full,
        // is as good when d/c is uniform; keep it when it is.
        let filled = chain.fill(&best.alpha);
        if filled.n / (1.0 + filled.r) >= (best.n / (1.0 + best.r)) * (1.0 - STRICT_GAIN) {
            best = filled;
        }
    }
    let scale = load / best.n;
    let mut loads = vec![0.0; platform.len()];
    for (k, &i) in order.iter().enumerate() {
        loads[i] = best.alpha[k] * scale;
    }
    (loads, (1.0 + best.r) * scale)
}

/// Loads and makespan of the LIFO recurrence (every worker takes all it can)
/// under send order `order`, ignoring `max_load`. Optimal when `order` is
/// sorted by non-decreasing `c + d`.
pub fn lifo(platform: &Platform, order: &[usize], load: f64) -> (Vec<f64>, f64) {
    let wk = platform.workers();
    let mut window = 1.0;
    let mut n = 0.0;
    let mut loads = vec![0.0; platform.len()];
    for &i in order {
        let span = wk[i].c + wk[i].d + wk[i].w;
        loads[i] = window / span;
        n += loads[i];
        window *= wk[i].w / span;
    }
    let scale = load / n;
    loads.iter_mut().for_each(|a| *a *= scale);
    (loads, scale)
}

/// Loads and makespan of `load` units under the LIFO send order `order`
/// (sorted by non-decreasing `c + d`) when `max_load` bounds bind: the
/// scenario LP's optimum without a linear program.
///
/// For a makespan `T`, worker k's window is what the workers sent before
/// it leave of `T` (`T − P`, `P` the sends and returns of those before
/// it), and it takes `min(b_k, (T − P) / (c_k + w_k + d_k))`. Taking all
/// it can is best in this order (a unit given up by worker k frees
/// `c_k + d_k` of every later window, where each later unit costs at least
/// that much), so this greedy places the most units any LIFO schedule of
/// makespan `T` can. That number `N(T)` is the optimum of an LP in its
/// right-hand side: concave, piecewise linear, and a worker once at its
/// bound stays there as `T` grows (`T − P` never shrinks). Newton's method
/// from the unbounded optimum (where `N(T) ≤ load`) stays below `load` and
/// reaches it on the last piece: at most one step per worker reaching
/// its bound. `None` if the bounds cannot hold `load` units.
pub fn lifo_bounded(platform: &Platform, order: &[usize], load: f64) -> Option<(Vec<f64>, f64)> {
    let wk = platform.workers();
    // The greedy at `t`: the loads in `order`, their sum, and its slope in t
    // to the right (a worker exactly at its bound counts as held there).
    let greedy = |t: f64| {
        let (mut used, mut used_slope, mut n, mut slope) = (0.0, 0.0, 0.0, 0.0);
        let mut alpha = Vec::with_capacity(order.len());
        for &i in order {
            let w = &wk[i];
            let span = w.c + w.w + w.d;
            let room = ((t - used) / span).max(0.0);
            let (a, da) = if room >= w.bound() {
                (w.bound(), 0.0)
            } else {
                (room, (1.0 - used_slope) / span)
            };
            used += (w.c + w.d) * a;
            used_slope += (w.c + w.d) * da;
            n += a;
            slope += da;
            alpha.push(a);
        }
        (alpha, n, slope)
    };
    let (_, mut t) = lifo(platform, order, load);
    for _ in 0..order.len() + 8 {
        let (alpha, n, slope) = greedy(t);
        if n >= load * (1.0 - BOUNDED_CONVERGED) {
            let mut loads = vec![0.0; platform.len()];
            for (&i, a) in order.iter().zip(alpha) {
                loads[i] = a;
            }
            return Some((loads, t));
        }
        if !(slope > 0.0 && slope.is_finite()) {
            return None;
        }
        t += (load - n) / slope;
    }
    None
}

/// How close to the load the bounded fast paths' units must come.
const BOUNDED_CONVERGED: f64 = 1e-12;

/// Whether `order` lists its workers by non-decreasing `c + d`, the order
/// in which [`lifo`] and [`lifo_bounded`] are optimal.
pub fn sorted_by_cd(platform: &Platform, order: &[usize]) -> bool {
    let wk = platform.workers();
    order
        .windows(2)
        .all(|p| wk[p[0]].c + wk[p[0]].d <= wk[p[1]].c + wk[p[1]].d)
}

/// Theorem 2: the optimal one-port FIFO throughput (units per second) on a
/// bus (`c`, `d` shared) with computation costs `w`.
pub fn bus_throughput(c: f64, d: f64, w: &[f64]) -> f64 {
    let mut prod = 1.0;
    let mut sum_u = 0.0;
    for &wi in w {
        prod *= (d + wi) / (c + wi);
        sum_u += prod / (d + wi);
    }
    (1.0 / (c + d)).min(sum_u / (1.0 + d * sum_u))
}
