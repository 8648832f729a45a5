//! A FIFO scenario under binding `max_load` bounds, solved over the
//! workers that can take load only, and proven optimal over all of them.
//!
//! A worker of the scenario without load constrains nothing (its row,
//! with `α = 0`, follows from the row of the worker before it), so the
//! scenario LP over a subset `S` of the order is the full LP with the
//! others held at zero: its optimum `T_S` is feasible for the full LP.
//! It is the full optimum when the dual of the subset's LP, extended with
//! zero prices on the rows of the workers left out, is feasible for the
//! full dual: for each worker `i` left out, the price of a unit `ν` is at
//! most what a unit on `i` would cost on the rows of `S`,
//!
//! ```text
//! cost_i = c_i · Σ_{rows after i} y + d_i · Σ_{rows before i} y + y_0 (c_i + d_i)
//! ```
//!
//! (`y` the rows' prices, `y_0` the one-port row's). Workers that break it
//! join `S` and the subset is solved again (column generation). Behind a
//! star of 256 workers with memory bounds, 21 take load in the single
//! round: two programs over a few dozen workers replace one over 256,
//! whose cost grows as p^1.5 ([`crate::search::lp_secs`]).

use crate::error::{Error, Result};
use crate::lp;
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario};
use crate::TUNING;
use good_lp::{microlp, variable, Expression, ProblemVariables, Solution, SolverModel, Variable};

/// What the left-out workers may still gain, as a part of the makespan,
/// for the subset's plan to be taken (the LP solver's own tolerance).
const GAP: f64 = 1e-9;

/// How much more than a unit's cost on the subset a left-out worker's
/// price may be before it joins (the solver's own tolerance).
const PRICE_TOL: f64 = 1e-9;

/// Optimal loads (indexed like the platform) and makespan of `load` units
/// under the FIFO `order`, the LP solved over the workers that take load
/// (seeded by `start`: loads that break the bounds, from the fast path).
pub fn fifo(platform: &Platform, order: &[usize], ports: Ports, load: f64, start: &[f64]) -> Result<(Vec<f64>, f64)> {
    if order.len() <= TUNING.column_small {
        return lp::solve(platform, &Scenario::fifo(order.to_vec()), ports, load);
    }
    match generate(platform, order, ports, load, start)? {
        Some(solved) => Ok(solved),
        None => lp::solve(platform, &Scenario::fifo(order.to_vec()), ports, load),
    }
}

/// [`fifo`] by column generation only: `None` where it gives up (the
/// subset grew past `TUNING.column_most` of the order, the two programs disagreed, or
/// `TUNING.column_rounds` went by).
fn generate(
    platform: &Platform,
    order: &[usize],
    ports: Ports,
    load: f64,
    start: &[f64],
) -> Result<Option<(Vec<f64>, f64)>> {
    let wk = platform.workers();
    let mut inside: Vec<bool> = order.iter().map(|&i| start[i] > 0.0).collect();
    // Room for the batch: the fastest chains join first.
    let mut by_span: Vec<usize> = (0..order.len()).collect();
    by_span.sort_by(|&a, &b| {
        let span = |k: usize| wk[order[k]].c + wk[order[k]].w + wk[order[k]].d;
        span(a).total_cmp(&span(b)).then(a.cmp(&b))
    });
    let room = |inside: &[bool]| -> f64 {
        (0..order.len())
            .filter(|&k| inside[k])
            .map(|k| wk[order[k]].bound())
            .sum()
    };
    for &k in &by_span {
        if room(&inside) >= load {
            break;
        }
        inside[k] = true;
    }
    for _ in 0..TUNING.column_rounds {
        let count = inside.iter().filter(|&&x| x).count();
        if count as f64 > TUNING.column_most * order.len() as f64 || room(&inside) < load {
            break;
        }
        let sub: Vec<usize> = (0..order.len()).filter(|&k| inside[k]).map(|k| order[k]).collect();
        let scenario = Scenario::fifo(sub.clone());
        let (loads, makespan) = lp::solve(platform, &scenario, ports, load)?;
        let Ok(prices) = dual(platform, &sub, ports, load) else {
            break;
        };
        // The two programs must agree on the optimum, else trust neither.
        if (prices.value - makespan).abs() > 1e-6 * makespan.max(f64::MIN_POSITIVE) {
            break;
        }
        let (joining, gap) = left_out_below_price(platform, order, &inside, &prices, load);
        if joining.is_empty() || gap * prices.tau * load <= GAP * makespan {
            return Ok(Some((loads, makespan)));
        }
        // The workers that can gain most join, as many as are inside.
        for &k in joining.iter().take(count.max(TUNING.column_join)) {
            inside[k] = true;
        }
    }
    Ok(None)
}

/// The dual of the subset's LP: the rows' prices (by position), the
/// one-port row's, a unit's price, and the optimum, in the LP's units.
struct Prices {
    rows: Vec<f64>,
    port: f64,
    unit: f64,
    /// The dual optimum in seconds (the makespan).
    value: f64,
    /// Seconds per cost unit and per load unit of the scaled program.
    tau: f64,
}

/// The positions (in `order`) of workers left out whose unit costs less
/// on the subset's rows than a unit's price, most gain first, and how much
/// they could shorten the makespan at most (in the program's units).
///
/// Pricing each left-out worker `i` at `z_i = ν − cost_i` (when positive)
/// and bounding its load by `b_i = min(max_load, T / (c + w + d), load)`
/// (its own row, the batch) makes the extended dual feasible: its value
/// `T_S − Σ b_i z_i` is a lower bound on the full optimum, so `Σ b_i z_i`
/// is all that the left-out workers can still gain.
fn left_out_below_price(
    platform: &Platform,
    order: &[usize],
    inside: &[bool],
    prices: &Prices,
    load: f64,
) -> (Vec<usize>, f64) {
    let wk = platform.workers();
    let total: f64 = prices.rows.iter().sum();
    let (mut before, mut row) = (0.0, 0);
    let mut joining = Vec::new();
    let mut gap = 0.0;
    let makespan = prices.value / (prices.tau * load);
    for (k, &i) in order.iter().enumerate() {
        if inside[k] {
            before += prices.rows[row];
            row += 1;
            continue;
        }
        let (c, w, d) = (wk[i].c / prices.tau, wk[i].w / prices.tau, wk[i].d / prices.tau);
        let cost = c * (total - before) + d * before + prices.port * (c + d);
        let short = prices.unit - cost * (1.0 + PRICE_TOL) - PRICE_TOL;
        if short > 0.0 {
            let most = (wk[i].bound() / load).min(makespan / (c + w + d)).min(1.0);
            gap += short * most;
            joining.push((k, short * most));
        }
    }
    joining.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    (joining.into_iter().map(|(k, _)| k).collect(), gap)
}

/// Solves the dual of the FIFO LP over `sub` (in order), scaled as
/// [`lp::solve`] scales it: costs over the largest, loads over `load`.
///
/// ```text
/// maximise ν − Σ b_i z_i / load  subject to
///   Σ y_k + y_0 ≤ 1
///   ν − z_j ≤ c_j Σ_{k>j} y_k + (c_j + w_j + d_j) y_j + d_j Σ_{k<j} y_k + y_0 (c_j + d_j)
///   y, y_0, z ≥ 0
/// ```
fn dual(platform: &Platform, sub: &[usize], ports: Ports, load: f64) -> Result<Prices> {
    let wk = platform.workers();
    let q = sub.len();
    let tau = sub
        .iter()
        .map(|&i| wk[i].c.max(wk[i].w).max(wk[i].d))
        .fold(0.0, f64::max);
    let mut vars = ProblemVariables::new();
    let y: Vec<Variable> = (0..q).map(|_| vars.add(variable().min(0.0))).collect();
    let y0 = vars.add(variable().min(0.0).max(if ports.one_lane() { 1.0 } else { 0.0 }));
    let nu = vars.add(variable());
    let mut objective = Expression::from(nu);
    let mut rows = Vec::with_capacity(q + 1);
    let mut all = Expression::from(y0);
    for (j, &i) in sub.iter().enumerate() {
        let w = &wk[i];
        let (c, s, d) = (w.c / tau, (w.c + w.w + w.d) / tau, w.d / tau);
        // Dense, as the primal (`lp.rs`): running sums as variables
        // made microlp several times slower.
        let mut cost = s * y[j] + (c + d) * y0;
        for (k, &yk) in y.iter().enumerate() {
            if k > j {
                cost += c * yk;
            } else if k < j {
                cost += d * yk;
            }
        }
        if let Some(b) = w.max_load {
            let z = vars.add(variable().min(0.0));
            objective -= (b as f64 / load) * z;
            cost += z;
        }
        rows.push((Expression::from(nu) - cost).leq(0.0));
        all += y[j];
    }
    rows.push(all.leq(1.0));
    let mut model = vars.maximise(objective.clone()).using(microlp);
    for r in rows {
        model = model.with(r);
    }
    let sol = model.solve().map_err(|e| Error::Solver(e.to_string()))?;
    Ok(Prices {
        rows: y.iter().map(|&v| sol.value(v).max(0.0)).collect(),
        port: sol.value(y0).max(0.0),
        unit: sol.value(nu),
        value: tau * load * sol.eval(&objective),
        tau,
    })
}

#[cfg(test)]
mod tests;
