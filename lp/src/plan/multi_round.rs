//! `rounds`: a multi-round sequence as a plan.

use super::one_round::{out_of_reach, plan_one_round, rough, Effort};
use super::{Plan, Request, Strategy};
use crate::error::Result;
use crate::platform::Platform;
use crate::rounding::Rounding;
use crate::rounds;
use crate::schedule::{Scenario, Timeline};
use crate::sequence::Sequence;
use crate::TUNING;

/// `rounds`: the best multi-round schedule, against the best one-round
/// FIFO and LIFO plans when they fit the workers' memory.
pub(super) fn plan_multi_round(
    platform: &Platform,
    req: &Request,
    hopeless: &dyn Fn(f64) -> bool,
) -> Result<Option<Plan>> {
    if req.load == 0 {
        return Err(crate::Error::ZeroLoad);
    }
    let one_round = |req: &Request, effort| {
        [Strategy::Fifo, Strategy::Lifo]
            .into_iter()
            .filter_map(|strategy| plan_one_round(platform, &Request { strategy, ..*req }, effort).ok())
            .min_by(|a, b| a.makespan().total_cmp(&b.makespan()))
    };
    // The single rounds by the report's rule first, as `best` does.
    let mut one = one_round(&rough(req), Effort::Orders);
    let mut timings = rounds::Timings::default();
    let mut search = |one: Option<&Plan>| {
        let one = one.map(|p| &p.sequence);
        rounds::plan_rounds_unless(platform, req.ports, req.load, one, &mut timings, hopeless)
    };
    let Some(mut r) = search(one.as_ref())? else {
        return Ok(None);
    };
    // Its units refined where it may come within reach.
    if req.rounding != Rounding::Paper && one.as_ref().is_some_and(|o| !out_of_reach(o, &r)) {
        one = one_round(req, Effort::Orders);
        let Some(again) = search(one.as_ref())? else {
            return Ok(None);
        };
        r = again;
    }
    // The local search only where the single round is within reach.
    if one
        .as_ref()
        .is_some_and(|o| o.makespan() <= r.makespan * TUNING.one_round_reach)
    {
        one = one_round(req, Effort::Local);
        let Some(again) = search(one.as_ref())? else {
            return Ok(None);
        };
        r = again;
    }
    let note = if r.count == 1 && r.lag == 0 {
        "rounds: a single round predicts the earliest end".to_string()
    } else {
        format!("rounds: {} rounds, lag {}, {} chunks", r.count, r.lag, r.chunks.len())
    };
    Ok(Some(from_rounds(platform, req, r, vec![note])))
}

/// A plan from a multi-round sequence: loads are the chunks' totals, the
/// orders those of each worker's first send and return. Never `optimal`:
/// `rounds` heuristically approaches the steady-state bound.
pub(super) fn from_rounds(platform: &Platform, req: &Request, r: Sequence, notes: Vec<String>) -> Plan {
    let p = platform.len();
    let loads = r.loads(p);
    let scenario = Scenario {
        send_order: r.order(p, true),
        return_order: r.order(p, false),
    };
    let timeline = Timeline {
        workers: r.spans(p),
        makespan: r.makespan,
    };
    Plan {
        strategy: req.strategy,
        ports: req.ports,
        load: req.load,
        optimal: false,
        scenario,
        alpha: loads.iter().map(|&l| l as f64).collect(),
        loads,
        rational: timeline,
        sequence: r,
        notes,
        pace: Vec::new(),
    }
}
