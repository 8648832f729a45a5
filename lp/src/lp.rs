//! The reference linear program for one scenario (the report's LP (2), in
//! makespan form and for any pair of orders).
//!
//! Variables: the makespan `T`, the loads `α_i ∈ [0, max_load_i]`, and
//! running sums that keep the matrix sparse (O(p) non-zeros instead of the
//! O(p²) of the report's form): `S_k`, the end of the k-th send, and `R_k`,
//! the time the returns from position k of the return order onwards take.
//!
//! ```text
//! minimise T  subject to
//!   S_k = S_{k-1} + c_{σ1(k)} α_{σ1(k)}                 (sends back to back from 0)
//!   R_k = R_{k+1} + d_{σ2(k)} α_{σ2(k)}                 (returns back to back up to T)
//!   S_{pos1(i)} + w_i α_i + R_{pos2(i)} ≤ T   for all i (receive, compute, then return)
//!   S_q + R_1 ≤ T                             (one port only: no send overlaps a return)
//!   Σ α_i = M
//! ```

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
    let s: Vec<Variable> = (0..q).map(|_| vars.add(variable().min(0.0))).collect();
    let r: Vec<Variable> = (0..q).map(|_| vars.add(variable().min(0.0))).collect();
    let a = |i: usize| alpha[i].ok_or_else(|| Error::BadScenario(format!("worker index {i} not in the send order")));

    let mut pos2 = vec![usize::MAX; wk.len()];
    for (k, &i) in scenario.return_order.iter().enumerate() {
        pos2[i] = k;
    }

    let mut constraints = Vec::with_capacity(3 * q + 2);
    for (k, &i) in scenario.send_order.iter().enumerate() {
        let mut e = Expression::from(s[k]) - scaled(wk[i].c) * a(i)?;
        if k > 0 {
            e -= s[k - 1];
        }
        constraints.push(e.eq(0.0));
    }
    for (k, &i) in scenario.return_order.iter().enumerate() {
        let mut e = Expression::from(r[k]) - scaled(wk[i].d) * a(i)?;
        if k + 1 < q {
            e -= r[k + 1];
        }
        constraints.push(e.eq(0.0));
    }
    for (k, &i) in scenario.send_order.iter().enumerate() {
        let e = Expression::from(s[k]) + scaled(wk[i].w) * a(i)? + r[pos2[i]] - t;
        constraints.push(e.leq(0.0));
    }
    if ports.one_lane() {
        constraints.push((Expression::from(s[q - 1]) + r[0] - t).leq(0.0));
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
