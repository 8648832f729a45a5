//! The one-round strategies: orders, rational loads, whole units.

use super::{Plan, Request, Strategy};
use crate::error::Result;
use crate::platform::Platform;
use crate::rounding::{self, Rounding};
use crate::schedule::{Ports, Timeline};
use crate::search::{
    best_fifo, better, exhaustive, fifo_local_search, order_dec_c, order_inc_c, order_inc_cd, order_inc_w, solve_fifo,
    solve_lifo, Problem, Solved,
};
use crate::sequence::Sequence;
use crate::tol::{REL_TOL, STRICT_GAIN};
use crate::TUNING;

/// How hard a one-round plan searches the orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Effort {
    /// The orders the report gives (inc-c or dec-c, LIFO by c + d) only.
    Orders,
    /// And the FIFO local search where no theorem gives the order.
    Local,
    /// And, for `best` over a few workers, every pair of orders.
    Every,
}

/// The problem the one-round solvers solve on `platform` (the classical
/// form of `real`, in `ports`), its local search weighed as `effort` says:
/// not at all, or against the batch's steady-state bound.
fn problem<'a>(real: &Platform, platform: &'a Platform, ports: Ports, req: &Request, effort: Effort) -> Problem<'a> {
    let pb = Problem::new(platform, ports, req.load);
    if effort == Effort::Orders {
        // No swap is worth anything: the local search keeps its start.
        return pb.with_horizon(0.0);
    }
    let searched =
        platform.uniform_z().is_none() && matches!(req.strategy, Strategy::Fifo | Strategy::Best | Strategy::Rounds);
    if !searched {
        return pb;
    }
    crate::bound::steady_state(real, req.ports).map_or(pb, |ss| pb.with_horizon(ss.makespan_bound(req.load)))
}

/// The one-round strategies.
/// With `effort`, the FIFO local search and every pair of orders (`best`,
/// up to `TUNING.exhaustive_max_workers` workers) run or not.
pub(super) fn plan_one_round(real: &Platform, req: &Request, effort: Effort) -> Result<Plan> {
    real.check_load(req.load)?;
    // Behind a shared uplink, the orders and loads are solved in the
    // classical model nearest to it; the sequence is timed on the real one.
    let (classical, solved_in) = req.ports.classical(real);
    let platform = &classical;
    let pb = problem(real, platform, solved_in, req, effort);
    let (ports, load) = (req.ports, req.load);
    let z = platform.uniform_z();
    let mut notes = Vec::new();
    let (solved, mut optimal) = match req.strategy {
        Strategy::Fifo => match z {
            Some(z) => {
                let order = if z <= 1.0 {
                    order_inc_c(platform)
                } else {
                    order_dec_c(platform)
                };
                (solve_fifo(&pb, order)?, true)
            }
            None => {
                notes.push(format!(
                    "d/c differs between workers, so Theorem 1 does not apply: the FIFO order comes from a local search (adjacent swaps from inc-c/dec-c, at most {} evaluations)",
                    TUNING.local_search_budget
                ));
                (fifo_local_search(&pb)?, false)
            }
        },
        Strategy::IncC => (solve_fifo(&pb, order_inc_c(platform))?, z.is_some_and(|z| z <= 1.0)),
        Strategy::IncW => (solve_fifo(&pb, order_inc_w(platform))?, false),
        Strategy::Lifo => (solve_lifo(&pb, order_inc_cd(platform))?, true),
        Strategy::Best | Strategy::Rounds => {
            // Candidates: the best FIFO, the best LIFO and, for small
            // platforms, the best of every pair of orders. The one that runs
            // fastest in whole units wins (rounding can reorder close ones).
            // A candidate whose solver fails is left out, with a note;
            // only when all fail does `best` fail.
            let mut cands = Vec::new();
            let mut failed = None;
            let mut optimum = None;
            for (name, solved) in [
                ("fifo", best_fifo(&pb, z)),
                ("lifo", solve_lifo(&pb, order_inc_cd(platform))),
            ]
            .into_iter()
            .chain(
                (effort == Effort::Every && platform.len() <= TUNING.exhaustive_max_workers)
                    .then(|| ("every pair of orders", exhaustive(&pb))),
            ) {
                match solved {
                    Ok(c) => {
                        if name == "every pair of orders" {
                            optimum = Some(c.makespan);
                        }
                        cands.push((name, c));
                    }
                    Err(e) => {
                        notes.push(format!("best: {name} left out ({e})"));
                        failed = Some(e);
                    }
                }
            }
            if let (true, Some(e)) = (cands.is_empty(), failed) {
                return Err(e);
            }
            let mut best: Option<(&str, Solved, f64)> = None;
            for (name, c) in cands {
                let m = integer_makespan(&pb, &c, req.rounding);
                let wins = match &best {
                    None => true,
                    Some((_, b, bm)) => m < bm * (1.0 - STRICT_GAIN) || (m <= *bm && better(&c, b)),
                };
                if wins {
                    best = Some((name, c, m));
                }
            }
            let Some((name, best, _)) = best else {
                return Err(crate::Error::Solver("no one-round candidate could be solved".into()));
            };
            notes.push(format!("best: {name} gives the shortest schedule in whole units"));
            // Proven optimal when it is also the LP optimum over every pair.
            let optimal = optimum.is_some_and(|o| best.makespan <= o * (1.0 + REL_TOL));
            (best, optimal)
        }
    };
    if solved.bounded && req.strategy != Strategy::Best {
        optimal = false;
        notes.push("max_load bounds bind: loads come from the LP for this order; the order itself is not proven optimal under bounds".into());
    }
    let loads = round(&pb, &solved, req.rounding);
    let sequence = Sequence::one_round(real, &solved.scenario, &loads, ports);
    let rational = Timeline::build(platform, &solved.scenario, &solved.alpha, solved_in);
    let left_out = loads.iter().filter(|&&l| l == 0).count();
    if left_out > 0 {
        notes.push(format!(
            "{left_out} worker(s) get no load: enrolling them would not shorten the schedule"
        ));
    }
    Ok(Plan {
        strategy: req.strategy,
        ports,
        load,
        optimal,
        scenario: solved.scenario,
        alpha: solved.alpha,
        loads,
        rational,
        sequence,
        notes,
        pace: Vec::new(),
    })
}

/// Whole units for a solved scenario.
fn round(pb: &Problem, solved: &Solved, how: Rounding) -> Vec<u64> {
    let mut loads = rounding::paper(pb.platform, &solved.scenario.send_order, &solved.alpha, pb.load);
    if how == Rounding::Refined {
        rounding::refine(pb.platform, &solved.scenario, pb.ports, &solved.alpha, &mut loads);
    }
    loads
}

/// The predicted makespan of a solved scenario in whole units, by the rule
/// that times every plan (latencies included).
fn integer_makespan(pb: &Problem, solved: &Solved, how: Rounding) -> f64 {
    let loads = round(pb, solved, how);
    Sequence::one_round(pb.platform, &solved.scenario, &loads, pb.ports).makespan
}

/// `req` with the report's rounding: a single round's whole units
/// without [`Rounding::Refined`]'s moves, which time the schedule once for
/// every pair of workers a unit may move between (on 48 workers behind an
/// uplink they took half of planning 100,000 products).
pub(super) fn rough(req: &Request) -> Request {
    Request {
        rounding: Rounding::Paper,
        ..*req
    }
}

/// Whether the single round `one` cannot come within `TUNING.one_round_reach`
/// of `rounds` whatever its whole units: no rounding ends before the
/// rational schedule of its order.
pub(super) fn out_of_reach(one: &Plan, rounds: &Sequence) -> bool {
    one.makespan_rational() > rounds.makespan * TUNING.one_round_reach
}
