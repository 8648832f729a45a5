//! The steady-state bound: under the linear model no schedule, with any
//! number of rounds, processes more than ρ* units per second, where ρ*
//! maximises Σ α_i subject to α_i w_i ≤ 1 for every worker (its processor)
//! and Σ α_i (c_i + d_i) ≤ 1 (one port: sends and returns share it; two
//! ports: Σ α_i c_i ≤ 1 and Σ α_i d_i ≤ 1). So `load / ρ*` is a lower bound
//! on the makespan of `load` units.

use crate::error::{Error, Result};
use crate::platform::Platform;
use crate::schedule::{Ports, Uplink};
use crate::TUNING;
use good_lp::{microlp, variable, Expression, ProblemVariables, Solution, SolverModel};

/// The steady state: its throughput and each worker's share of it (units
/// per second).
#[derive(Debug, Clone, PartialEq)]
pub struct SteadyState {
    pub throughput: f64,
    pub alpha: Vec<f64>,
}

impl SteadyState {
    /// The steady state of these shares.
    pub(crate) fn of(alpha: Vec<f64>) -> SteadyState {
        SteadyState {
            throughput: alpha.iter().sum(),
            alpha,
        }
    }

    /// The lower bound on the makespan of `load` units.
    pub fn makespan_bound(&self, load: u64) -> f64 {
        load as f64 / self.throughput
    }
}

/// ρ* and the shares that reach it. One port: a fractional knapsack
/// (workers by increasing `c + d`, each up to `1/w`, until the port is
/// full). Two ports: the LP. A shared uplink: [`steady_state_uplink`].
pub fn steady_state(platform: &Platform, ports: Ports) -> Result<SteadyState> {
    match ports {
        Ports::One => Ok(knapsack(platform)),
        Ports::Two => Ok(two_ports(platform)),
        Ports::Shared(u) => Ok(steady_state_uplink(platform, u)),
    }
}

/// Shares for planning: ρ*'s, except that where workers are alike within
/// `TUNING.slack_tie` in what fills the port first (one port: `c + d`; a shared
/// uplink: the rate its link and processor allow), the faster processor
/// comes first. A plan on a worker that computes well under its port time
/// survives a slower processor than calibrated; on one that computes just
/// under it, any slowdown shows. Throughput within 1% of ρ*'s; two
/// ports: ρ*'s own shares (the LP).
pub fn preferring_slack(platform: &Platform, ports: Ports) -> Result<SteadyState> {
    let wk = platform.workers();
    match ports {
        Ports::One => {
            let key: Vec<f64> = wk.iter().map(|w| w.c + w.d).collect();
            Ok(knapsack_in(platform, slack_order(&key, platform)))
        }
        Ports::Two => Ok(two_ports(platform)),
        Ports::Shared(u) => {
            let key: Vec<f64> = wk.iter().map(|w| w.w.max(w.c).max(w.d)).collect();
            Ok(uplink_in(platform, u, slack_order(&key, platform)))
        }
    }
}

/// Workers by increasing `key`, those within `TUNING.slack_tie` of the first of
/// their group by increasing compute cost.
fn slack_order(key: &[f64], platform: &Platform) -> Vec<usize> {
    let wk = platform.workers();
    let mut order: Vec<usize> = (0..key.len()).collect();
    order.sort_by(|&a, &b| key[a].total_cmp(&key[b]).then(a.cmp(&b)));
    let mut start = 0;
    while start < order.len() {
        let first = key[order[start]];
        let end = (start..order.len())
            .find(|&i| key[order[i]] > first * (1.0 + TUNING.slack_tie))
            .unwrap_or(order.len());
        order[start..end].sort_by(|&a, &b| wk[a].w.total_cmp(&wk[b].w).then(a.cmp(&b)));
        start = end;
    }
    order
}

fn knapsack(platform: &Platform) -> SteadyState {
    let wk = platform.workers();
    let mut order: Vec<usize> = (0..wk.len()).collect();
    order.sort_by(|&a, &b| (wk[a].c + wk[a].d).total_cmp(&(wk[b].c + wk[b].d)).then(a.cmp(&b)));
    knapsack_in(platform, order)
}

/// The one-port knapsack filling the port in `order`.
fn knapsack_in(platform: &Platform, order: Vec<usize>) -> SteadyState {
    let wk = platform.workers();
    let mut alpha = vec![0.0; wk.len()];
    let mut port = 1.0f64;
    for i in order {
        if port <= 0.0 {
            break;
        }
        let per = wk[i].c + wk[i].d;
        let a = (1.0 / wk[i].w).min(port / per);
        alpha[i] = a;
        port -= a * per;
    }
    SteadyState::of(alpha)
}

/// ρ* with two ports, exactly and without a solver: maximise Σ α_i with
/// 0 ≤ α_i ≤ 1/w_i, Σ α_i c_i ≤ 1 and Σ α_i d_i ≤ 1. Every surrogate
/// constraint Σ α_i (θ c_i + (1 − θ) d_i) ≤ 1 (θ in [0, 1]) is implied by
/// the two, and its fractional knapsack (workers by increasing key, each up
/// to 1/w_i) bounds ρ* from above; the θ that splits the knapsacks which
/// overfill the send port from those which overfill the return port is the
/// optimal multiplier, and the knapsacks on either side of it, mixed so
/// that neither port overfills, reach ρ*. Found by bisection on θ (the
/// send port's load of the knapsack falls as θ grows). An LP solver on the
/// same problem failed ("singular matrix") on platforms with costs many
/// orders of magnitude apart; this never fails. Held against [`lp`] in
/// tests.
pub fn two_ports(platform: &Platform) -> SteadyState {
    let wk = platform.workers();
    let sums =
        |a: &[f64]| -> (f64, f64) { (a.iter().zip(wk)).fold((0.0, 0.0), |(c, d), (a, w)| (c + a * w.c, d + a * w.d)) };
    let knapsack = |theta: f64| -> Vec<f64> {
        let key: Vec<f64> = wk.iter().map(|w| theta * w.c + (1.0 - theta) * w.d).collect();
        let mut order: Vec<usize> = (0..wk.len()).collect();
        order.sort_by(|&a, &b| key[a].total_cmp(&key[b]).then(a.cmp(&b)));
        let (mut alpha, mut port) = (vec![0.0; wk.len()], 1.0f64);
        for i in order {
            let most = 1.0 / wk[i].w;
            alpha[i] = if key[i] <= 0.0 {
                most
            } else {
                most.min(port.max(0.0) / key[i])
            };
            port -= alpha[i] * key[i];
        }
        alpha
    };
    const FULL: f64 = 1.0 + 1e-12;
    // θ = 1 fills the send port alone, θ = 0 the return port alone.
    let (mut lo, mut hi) = (knapsack(0.0), knapsack(1.0));
    if sums(&hi).1 <= FULL {
        return SteadyState::of(hi);
    }
    if sums(&lo).0 <= FULL {
        return SteadyState::of(lo);
    }
    let (mut a, mut b) = (0.0f64, 1.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (a + b);
        if mid <= a || mid >= b {
            break;
        }
        let k = knapsack(mid);
        let (c, d) = sums(&k);
        if c > FULL {
            (a, lo) = (mid, k);
        } else if d > FULL {
            (b, hi) = (mid, k);
        } else {
            return SteadyState::of(k);
        }
    }
    // `lo` overfills the send port, `hi` the return port: the mix t·lo +
    // (1 − t)·hi that fills neither.
    let ((c_lo, d_lo), (c_hi, d_hi)) = (sums(&lo), sums(&hi));
    let t_most = ((1.0 - c_hi) / (c_lo - c_hi)).clamp(0.0, 1.0);
    let t_least = ((d_hi - 1.0) / (d_hi - d_lo)).clamp(0.0, 1.0);
    let t = t_least.min(t_most);
    let mut alpha: Vec<f64> = lo.iter().zip(&hi).map(|(l, h)| t * l + (1.0 - t) * h).collect();
    let (c, d) = sums(&alpha);
    let over = c.max(d).max(1.0);
    alpha.iter_mut().for_each(|a| *a /= over);
    SteadyState::of(alpha)
}

/// The bound's LP, for either port model (the reference the knapsack is
/// held against in tests).
pub fn lp(platform: &Platform, ports: Ports) -> Result<SteadyState> {
    let wk = platform.workers();
    let mut vars = ProblemVariables::new();
    let a: Vec<_> = wk
        .iter()
        .map(|w| vars.add(variable().min(0.0).max(1.0 / w.w)))
        .collect();
    let total: Expression = a.iter().sum();
    let mut model = vars.maximise(total).using(microlp);
    let weighted = |f: &dyn Fn(usize) -> f64| -> Expression { a.iter().enumerate().map(|(i, &x)| f(i) * x).sum() };
    match ports {
        Ports::One => {
            model = model.with(weighted(&|i| wk[i].c + wk[i].d).leq(1.0));
        }
        Ports::Two => {
            model = model.with(weighted(&|i| wk[i].c).leq(1.0));
            model = model.with(weighted(&|i| wk[i].d).leq(1.0));
        }
        Ports::Shared(u) => return lp_uplink(platform, u),
    }
    let sol = model.solve().map_err(|e| Error::Solver(e.to_string()))?;
    Ok(SteadyState::of(a.iter().map(|&x| sol.value(x).max(0.0)).collect()))
}

/// ρ* for a master behind a shared uplink. Every unit costs the uplink the
/// same, so the uplink bounds the total, Σ α_i ≤ 1/max(send, ret) (full
/// duplex) or 1/(send + ret), and each worker its own share, α_i ≤
/// 1/max(w_i, c_i, d_i) (its processor and its own link each way run at
/// once); ρ* is the smaller of the uplink's bound and the sum of the
/// workers'. Shares go to the workers with the largest first.
pub fn steady_state_uplink(platform: &Platform, uplink: Uplink) -> SteadyState {
    let wk = platform.workers();
    let cap: Vec<f64> = wk.iter().map(|w| 1.0 / w.w.max(w.c).max(w.d)).collect();
    let mut order: Vec<usize> = (0..wk.len()).collect();
    order.sort_by(|&a, &b| cap[b].total_cmp(&cap[a]).then(a.cmp(&b)));
    uplink_in(platform, uplink, order)
}

/// The uplink's shares given to the workers in `order`.
fn uplink_in(platform: &Platform, uplink: Uplink, order: Vec<usize>) -> SteadyState {
    let wk = platform.workers();
    let cap: Vec<f64> = wk.iter().map(|w| 1.0 / w.w.max(w.c).max(w.d)).collect();
    let mut left = if uplink.duplex {
        1.0 / uplink.send.max(uplink.ret)
    } else {
        1.0 / (uplink.send + uplink.ret)
    };
    let mut alpha = vec![0.0; wk.len()];
    for i in order {
        alpha[i] = cap[i].min(left);
        left -= alpha[i];
    }
    SteadyState::of(alpha)
}

/// The LP of [`steady_state_uplink`], constraint by constraint (the
/// reference it is held against in tests).
pub fn lp_uplink(platform: &Platform, uplink: Uplink) -> Result<SteadyState> {
    let wk = platform.workers();
    let mut vars = ProblemVariables::new();
    let a: Vec<_> = wk.iter().map(|_| vars.add(variable().min(0.0))).collect();
    let total: Expression = a.iter().sum();
    let mut model = vars.maximise(total.clone()).using(microlp);
    for (w, &x) in wk.iter().zip(&a) {
        model = model.with((w.w * x).leq(1.0));
        model = model.with((w.c * x).leq(1.0));
        model = model.with((w.d * x).leq(1.0));
    }
    let sent: Expression = a.iter().map(|&x| uplink.send * x).sum();
    let returned: Expression = a.iter().map(|&x| uplink.ret * x).sum();
    if uplink.duplex {
        model = model.with(sent.leq(1.0));
        model = model.with(returned.leq(1.0));
    } else {
        model = model.with((sent + returned).leq(1.0));
    }
    let sol = model.solve().map_err(|e| Error::Solver(e.to_string()))?;
    Ok(SteadyState::of(a.iter().map(|&x| sol.value(x).max(0.0)).collect()))
}
