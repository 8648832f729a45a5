//! The reference linear program for one scenario (the report's LP (2), in
//! makespan form and for any pair of orders).
//!
//! Variables: the makespan `T` and the loads `α_i ∈ [0, max_load_i]`.
//! With `pos1`, `pos2` the positions in the send and return orders:
//!
//! ```text
//! minimise T  subject to
//!   Σ_{pos1(j) ≤ pos1(i)} c_j α_j + w_i α_i + Σ_{pos2(j) ≥ pos2(i)} d_j α_j ≤ T   for all i
//!       (sends back to back from 0 up to i's, its product, then the returns
//!        back to back from i's up to T)
//!   Σ_j (c_j + d_j) α_j ≤ T    (one port only: no send overlaps a return)
//!   Σ α_i = M
//! ```
//!
//! The rows are dense (O(p²) non-zeros). A sparse form with running sums
//! of the sends and returns as variables (O(p) non-zeros, 3p rows) took
//! microlp 10 to 20 times as long: a FIFO scenario under memory bounds
//! over 64 workers 7.8 ms against 0.8, over 256 180 ms against 10, over
//! 1,024 3.8 s against 0.17 (AMD EPYC, 2026-11-29).

use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario};
use good_lp::{microlp, variable, Expression, ProblemVariables, Solution, SolverModel, Variable};

/// Loads (indexed like the platform) and makespan of the optimal schedule of
/// `load` units under `scenario`, as the LP solver reports them.
///
/// The LP is solved in scaled units (loads as fractions of `load`, times
/// in units of the largest cost times `load`), so that its coefficients
/// lie in (0, 1]. Costs that differ by many orders of magnitude (a cost
/// calibration could barely measure beside one measured under load) can
/// still leave the solver's basis singular; the LP is then solved again
/// with every cost raised to at least [`PERTURB`] times the largest (each
/// such cost grows by at most that much of the largest: the loads are
/// those of a platform slower by that amount, timed afterwards on the
/// real one), and only if that fails too is the error returned.
pub fn solve(platform: &Platform, scenario: &Scenario, ports: Ports, load: f64) -> Result<(Vec<f64>, f64)> {
    scenario.validate(platform)?;
    if scenario.send_order.is_empty() {
        return Err(Error::BadScenario("no worker in the scenario".into()));
    }
    if !(load.is_finite() && load > 0.0) {
        return Err(Error::BadScenario(format!("a load of {load} units")));
    }
    let first = match solve_scaled(platform, scenario, ports, load, 0.0) {
        Ok(x) => return Ok(x),
        Err(e) => e,
    };
    for floor in PERTURB {
        if let Ok(x) = solve_scaled(platform, scenario, ports, load, floor) {
            return Ok(x);
        }
    }
    Err(first)
}

/// The floors, relative to the largest cost, that a failed LP is tried
/// again with ([`solve`]).
pub const PERTURB: [f64; 2] = [1e-7, 1e-4];

/// [`solve`]'s LP with costs divided by the largest cost of the scenario
/// (raised to at least `floor` of it), loads divided by `load`.
fn solve_scaled(
    platform: &Platform,
    scenario: &Scenario,
    ports: Ports,
    load: f64,
    floor: f64,
) -> Result<(Vec<f64>, f64)> {
    let wk = platform.workers();
    let q = scenario.send_order.len();
    let tau = (scenario.send_order.iter())
        .map(|&i| wk[i].c.max(wk[i].w).max(wk[i].d))
        .fold(0.0, f64::max);
    let scaled = |x: f64| {
        let x = x / tau;
        if x > 0.0 || floor > 0.0 {
            x.max(floor)
        } else {
            x
        }
    };
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let mut alpha: Vec<Option<Variable>> = vec![None; wk.len()];
    for &i in &scenario.send_order {
        let mut v = variable().min(0.0);
        if let Some(b) = wk[i].max_load {
            v = v.max(b as f64 / load);
        }
        alpha[i] = Some(vars.add(v));
    }
    let a = |i: usize| alpha[i].ok_or_else(|| Error::BadScenario(format!("worker index {i} not in the send order")));
    let mut pos1 = vec![usize::MAX; wk.len()];
    for (k, &i) in scenario.send_order.iter().enumerate() {
        pos1[i] = k;
    }
    let mut pos2 = vec![usize::MAX; wk.len()];
    for (k, &i) in scenario.return_order.iter().enumerate() {
        pos2[i] = k;
    }
    let mut constraints = Vec::with_capacity(q + 2);
    for &i in &scenario.send_order {
        let mut e = scaled(wk[i].w) * a(i)? - t;
        for &j in &scenario.send_order {
            if pos1[j] <= pos1[i] {
                e += scaled(wk[j].c) * a(j)?;
            }
            if pos2[j] >= pos2[i] {
                e += scaled(wk[j].d) * a(j)?;
            }
        }
        constraints.push(e.leq(0.0));
    }
    if ports.one_lane() {
        let mut e = Expression::from(0.0) - t;
        for &j in &scenario.send_order {
            e += (scaled(wk[j].c) + scaled(wk[j].d)) * a(j)?;
        }
        constraints.push(e.leq(0.0));
    }
    let mut total = Expression::from(0.0);
    for &i in &scenario.send_order {
        total += a(i)?;
    }
    constraints.push(total.eq(1.0));

    let mut model = vars.minimise(t).using(microlp);
    for c in constraints {
        model = model.with(c);
    }
    let sol = model.solve().map_err(|e| Error::Solver(e.to_string()))?;
    let loads = (0..wk.len())
        .map(|i| alpha[i].map_or(0.0, |v| load * sol.value(v).max(0.0)))
        .collect();
    Ok((loads, tau * load * sol.value(t)))
}
