//! The one-round solvers: a planning [`Problem`], the optimal rational
//! loads of one scenario ([`solve_fifo`], [`solve_lifo`],
//! [`solve_scenario`]), the orders the report studies, and the searches
//! over FIFO orders (local search, exhaustive for a few workers).

use crate::error::Result;
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, Timeline};
use crate::tol::{LOAD_EPS, REL_TOL, STRICT_GAIN};
use crate::TUNING;
use crate::{columns, fast, lp};

/// Seconds one linear program over `p` workers takes, about: `TUNING.lp_secs`
/// at four, growing as p^1.5 (a FIFO scenario under memory bounds over 64
/// workers: 254 of them in 1.67 s, 6.6 ms each, where this says 6.4).
/// Measured with the LP's earlier sparse rows: dense (`lp.rs`), one
/// over 64 workers takes 0.8 ms and over 256 10 ms, so this now
/// overstates what the searches cost and they stop sooner than they
/// could; it is kept until a change to it is weighed on the committed
/// platforms' predictions.
pub fn lp_secs(p: usize) -> f64 {
    TUNING.lp_secs * (p as f64 / 4.0).powf(1.5)
}

/// Linear programs the exhaustive search solves over `p` workers: (p!)²
/// on one lane, Σ C(p, k)·(k!)² over every subset with two.
pub fn exhaustive_programs(p: usize, ports: Ports) -> f64 {
    let fact = |n: usize| (1..=n).map(|x| x as f64).product::<f64>();
    if ports.one_lane() {
        return fact(p).powi(2);
    }
    (1..=p)
        .map(|k| fact(p) / (fact(k) * fact(p - k)) * fact(k).powi(2))
        .sum()
}

/// Whether every pair of orders is worth searching for a batch whose quick
/// plan predicts `makespan` (`TUNING.exhaustive_worth`).
pub fn exhaustive_worth(p: usize, ports: Ports, makespan: f64) -> bool {
    p <= TUNING.exhaustive_max_workers
        && exhaustive_programs(p, ports) * lp_secs(p) <= TUNING.exhaustive_worth * makespan
}

/// One planning problem: `load` units on `platform` under `ports`. Every
/// solver takes it, so the three always travel together.
#[derive(Debug, Clone, Copy)]
pub struct Problem<'a> {
    pub platform: &'a Platform,
    pub ports: Ports,
    pub load: u64,
    /// A makespan no plan of the batch beats (its steady-state bound),
    /// where known: what the searches' cost is weighed against
    /// (`TUNING.exhaustive_worth`).
    pub horizon: f64,
}

impl<'a> Problem<'a> {
    pub fn new(platform: &'a Platform, ports: Ports, load: u64) -> Self {
        Problem {
            platform,
            ports,
            load,
            horizon: f64::INFINITY,
        }
    }

    /// The same problem, its search weighed against `horizon`.
    pub fn with_horizon(self, horizon: f64) -> Self {
        Problem { horizon, ..self }
    }
}

/// Rational solution of one scenario: loads, makespan (measured on its
/// timeline), and whether the max_load bounds forced the LP path.
#[derive(Debug, Clone)]
pub struct Solved {
    pub scenario: Scenario,
    pub alpha: Vec<f64>,
    pub makespan: f64,
    pub bounded: bool,
}

fn fits(platform: &Platform, alpha: &[f64]) -> bool {
    platform
        .workers()
        .iter()
        .zip(alpha)
        .all(|(w, &a)| a <= w.bound() * (1.0 + REL_TOL) + LOAD_EPS)
}

fn finish(pb: &Problem, scenario: Scenario, alpha: Vec<f64>, bounded: bool) -> Solved {
    let makespan = Timeline::build(pb.platform, &scenario, &alpha, pb.ports).makespan;
    Solved {
        scenario,
        alpha,
        makespan,
        bounded,
    }
}

/// Optimal loads for the FIFO scenario `order`: the fast path, or the LP
/// over the workers that take load ([`columns::fifo`]) when the fast
/// path's loads break a `max_load` bound.
pub fn solve_fifo(pb: &Problem, order: Vec<usize>) -> Result<Solved> {
    let (alpha, _) = fast::fifo(pb.platform, &order, pb.ports, pb.load as f64);
    if fits(pb.platform, &alpha) {
        return Ok(finish(pb, Scenario::fifo(order), alpha, false));
    }
    let (alpha, _) = columns::fifo(pb.platform, &order, pb.ports, pb.load as f64, &alpha)?;
    let scenario = Scenario::fifo(order);
    Ok(finish(pb, scenario, alpha, true))
}

/// Optimal loads for the LIFO scenario `order` (sorted by `c + d`): the
/// closed form, the same greedy under `max_load` bounds where they bind
/// ([`fast::lifo_bounded`]), or the LP for any other order.
pub fn solve_lifo(pb: &Problem, order: Vec<usize>) -> Result<Solved> {
    let load = pb.load as f64;
    let (alpha, _) = fast::lifo(pb.platform, &order, load);
    if fits(pb.platform, &alpha) {
        return Ok(finish(pb, Scenario::lifo(order), alpha, false));
    }
    let bounded = fast::sorted_by_cd(pb.platform, &order)
        .then(|| fast::lifo_bounded(pb.platform, &order, load))
        .flatten();
    let scenario = Scenario::lifo(order);
    let alpha = match bounded {
        Some((alpha, _)) => alpha,
        None => lp::solve(pb.platform, &scenario, pb.ports, load)?.0,
    };
    Ok(finish(pb, scenario, alpha, true))
}

/// Optimal loads for any scenario, by the LP.
pub fn solve_scenario(pb: &Problem, scenario: Scenario) -> Result<Solved> {
    let (alpha, _) = lp::solve(pb.platform, &scenario, pb.ports, pb.load as f64)?;
    let bounded = pb.platform.workers().iter().any(|w| w.max_load.is_some());
    Ok(finish(pb, scenario, alpha, bounded))
}

fn sorted_by(platform: &Platform, key: impl Fn(&crate::Worker) -> f64) -> Vec<usize> {
    let wk = platform.workers();
    let mut order: Vec<usize> = (0..wk.len()).collect();
    order.sort_by(|&a, &b| key(&wk[a]).total_cmp(&key(&wk[b])).then(a.cmp(&b)));
    order
}

/// Order by non-decreasing `c`.
pub fn order_inc_c(platform: &Platform) -> Vec<usize> {
    sorted_by(platform, |w| w.c)
}

/// Order by non-increasing `c` (Theorem 1 mirrored, for z > 1).
pub fn order_dec_c(platform: &Platform) -> Vec<usize> {
    sorted_by(platform, |w| -w.c)
}

/// Order by non-decreasing `w`.
pub fn order_inc_w(platform: &Platform) -> Vec<usize> {
    sorted_by(platform, |w| w.w)
}

/// Order by non-decreasing `c + d` (optimal LIFO).
pub fn order_inc_cd(platform: &Platform) -> Vec<usize> {
    sorted_by(platform, |w| w.c + w.d)
}

pub(crate) fn better(a: &Solved, b: &Solved) -> bool {
    a.makespan < b.makespan * (1.0 - STRICT_GAIN)
}

/// FIFO when `d/c` differs between workers: start from the better of inc-c
/// and dec-c, then apply improving adjacent swaps until none improves or the
/// evaluation budget is spent. Never worse than inc-c. Where memory bounds
/// bind, each evaluation is a linear program ([`solve_fifo`]), and the
/// swaps stop once their programs would cost more than
/// `TUNING.local_search_worth` of the makespan found so far, or of the batch's
/// steady-state bound (`Problem::horizon`) if less ([`lp_secs`]: over 64
/// workers, 254 of them took 1.67 s of a plan predicting 4.6 s).
pub(crate) fn fifo_local_search(pb: &Problem) -> Result<Solved> {
    let mut best = solve_fifo(pb, order_inc_c(pb.platform))?;
    let dec = solve_fifo(pb, order_dec_c(pb.platform))?;
    if better(&dec, &best) {
        best = dec;
    }
    let mut evaluations = 2;
    let p = pb.platform.len();
    let mut spent = 0.0;
    let affordable =
        |spent: f64, best: &Solved| spent + lp_secs(p) <= TUNING.local_search_worth * best.makespan.min(pb.horizon);
    let mut improved = true;
    while improved && evaluations < TUNING.local_search_budget {
        improved = false;
        for k in 0..p.saturating_sub(1) {
            if evaluations >= TUNING.local_search_budget || !affordable(spent, &best) {
                break;
            }
            let mut order = best.scenario.send_order.clone();
            order.swap(k, k + 1);
            let cand = solve_fifo(pb, order)?;
            evaluations += 1;
            if cand.bounded {
                spent += lp_secs(p);
            }
            if better(&cand, &best) {
                best = cand;
                improved = true;
            }
        }
    }
    Ok(best)
}

fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for k in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(k);
        for mut tail in permutations(&rest) {
            tail.insert(0, first);
            out.push(tail);
        }
    }
    out
}

/// Every pair of orders (and, with two ports, every subset of workers: there
/// a worker without load still constrains the LP, so it must be left out).
pub fn exhaustive(pb: &Problem) -> Result<Solved> {
    let (platform, load) = (pb.platform, pb.load);
    let p = platform.len();
    let mut subsets: Vec<Vec<usize>> = Vec::new();
    if pb.ports.one_lane() {
        subsets.push((0..p).collect());
    } else {
        for mask in 1u32..(1 << p) {
            subsets.push((0..p).filter(|&i| mask & (1 << i) != 0).collect());
        }
    }
    let mut best: Option<Solved> = None;
    for set in subsets {
        if let Some(cap) = set
            .iter()
            .map(|&i| platform.workers()[i].max_load)
            .try_fold(0u64, |a, b| b.map(|b| a + b))
        {
            if cap < load {
                continue;
            }
        }
        let perms = permutations(&set);
        for s1 in &perms {
            for s2 in &perms {
                let scenario = Scenario {
                    send_order: s1.clone(),
                    return_order: s2.clone(),
                };
                let cand = solve_scenario(pb, scenario)?;
                if best.as_ref().is_none_or(|b| better(&cand, b)) {
                    best = Some(cand);
                }
            }
        }
    }
    best.ok_or_else(|| crate::Error::Solver("no scenario is feasible".into()))
}

/// The best FIFO scenario: by increasing or decreasing `c` when the
/// report's z says which is optimal, else by local search.
pub(crate) fn best_fifo(pb: &Problem, z: Option<f64>) -> Result<Solved> {
    match z {
        Some(z) if z <= 1.0 => solve_fifo(pb, order_inc_c(pb.platform)),
        Some(_) => solve_fifo(pb, order_dec_c(pb.platform)),
        None => fifo_local_search(pb),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Worker;

    /// Eight workers whose `d/c` differ, each holding at most `bound`.
    fn bounded(bound: u64) -> Platform {
        let workers = (0..8)
            .map(|i| {
                let x = i as f64;
                let c = 0.01 + 0.003 * ((3.0 * x) % 8.0);
                Worker::new(format!("w{i}"), c, 0.05 + 0.01 * x, c * (0.3 + 0.1 * ((5.0 * x) % 7.0)))
                    .with_max_load(bound)
            })
            .collect();
        Platform::new(workers).expect("valid")
    }

    #[test]
    fn the_local_search_spends_on_programs_what_the_horizon_allows() {
        let platform = bounded(40);
        let pb = Problem::new(&platform, Ports::One, 200);
        let inc = solve_fifo(&pb, order_inc_c(&platform)).expect("solves");
        assert!(inc.bounded, "the bounds bind: every step is a program");
        // A horizon too short for one program: the better start only.
        let none = fifo_local_search(&pb.with_horizon(lp_secs(8) * 0.5 / TUNING.local_search_worth)).expect("solves");
        let dec = solve_fifo(&pb, order_dec_c(&platform)).expect("solves");
        let start = if better(&dec, &inc) { &dec } else { &inc };
        assert_eq!(none.scenario, start.scenario);
        // Unweighed, the search goes on; never later than where it started.
        let full = fifo_local_search(&pb).expect("solves");
        assert!(
            full.makespan < start.makespan,
            "the search finds better: {} against {}",
            full.makespan,
            start.makespan
        );
        // Room for a few programs: between the two.
        let few = fifo_local_search(&pb.with_horizon(lp_secs(8) * 3.5 / TUNING.local_search_worth)).expect("solves");
        assert!(full.makespan <= few.makespan * (1.0 + 1e-12) && few.makespan <= start.makespan * (1.0 + 1e-12));
    }
}
