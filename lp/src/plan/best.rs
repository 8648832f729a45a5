//! `best`: the single round and the rounds as candidates, and the one
//! choice between them ([`crate::choice`]).

use super::multi_round::{from_rounds, plan_multi_round};
use super::one_round::{out_of_reach, plan_one_round, rough, Effort};
use super::{Plan, Request};
use crate::choice::{self, Candidate, Kind};
use crate::error::Result;
use crate::platform::Platform;
use crate::rounding::Rounding;
use crate::rounds;
use crate::search::{exhaustive_programs, exhaustive_worth};
use crate::TUNING;

/// `best` for `req` on `platform`, given up (`None`) where the rounds'
/// search finds it would end no earlier than `hopeless` allows.
pub(super) fn plan_best(platform: &Platform, req: &Request, hopeless: &dyn Fn(f64) -> bool) -> Result<Option<Plan>> {
    // The single round in whole units by the report's rule first:
    // refined only where it may be within reach of the rounds.
    let one = match plan_one_round(platform, &rough(req), Effort::Orders) {
        Ok(one) => one,
        // A batch larger than the workers' memory runs in rounds
        // (chunks that fit), which `best` weighs too.
        Err(crate::Error::InfeasibleBounds { load, capacity }) => {
            let Some(mut p) = plan_multi_round(platform, req, hopeless)? else {
                return Ok(None);
            };
            p.notes.insert(
                0,
                format!("best: {load} units are more than the workers hold at once ({capacity}): one round cannot run them, rounds can"),
            );
            return Ok(Some(p));
        }
        Err(e) => return Err(e),
    };
    let mut timings = rounds::Timings::default();
    let mut search = |one: &Plan| {
        rounds::plan_rounds_unless(
            platform,
            req.ports,
            req.load,
            Some(&one.sequence),
            &mut timings,
            hopeless,
        )
    };
    let Some(mut rounds) = search(&one)? else {
        return Ok(None);
    };
    let settled = req.rounding == Rounding::Paper || out_of_reach(&one, &rounds);
    let one = if settled {
        one
    } else {
        let one = plan_one_round(platform, req, Effort::Orders)?;
        let Some(r) = search(&one)? else {
            return Ok(None);
        };
        rounds = r;
        one
    };
    // The searches over orders only where they are worth their time.
    let quick = one.makespan().min(rounds.makespan);
    let p = platform.len();
    let effort = if exhaustive_worth(p, req.ports, quick) {
        Effort::Every
    } else if one.makespan() <= rounds.makespan * TUNING.one_round_reach {
        Effort::Local
    } else {
        Effort::Orders
    };
    let mut one = if effort == Effort::Orders {
        one
    } else {
        let one = plan_one_round(platform, req, effort)?;
        let Some(r) = search(&one)? else {
            return Ok(None);
        };
        rounds = r;
        one
    };
    if effort != Effort::Every && p <= TUNING.exhaustive_max_workers {
        one.notes.push(format!(
            "best: every pair of orders not searched: {:.0} linear programs for a batch predicted to take {quick:.3} s",
            exhaustive_programs(p, req.ports)
        ));
    }
    // The one choice between candidates: both plain, the earlier
    // wins, the single round on a tie.
    let weighed = [one.makespan(), rounds.makespan].map(|m| Candidate::new(Kind::Plain, m, platform, req.ports));
    if rounds.count == 1 && rounds.lag == 0 || choice::choose(&weighed) == Some(0) {
        return Ok(Some(one));
    }
    let mut notes = one.notes.clone();
    let rule = if req.rounding != Rounding::Paper && settled && effort == Effort::Orders {
        " (whole units by the report's rule: it cannot come within reach however rounded)"
    } else {
        ""
    };
    notes.push(format!(
        "best: rounds ({} rounds) predicts {:.6} s against {:.6} s for the best single round{rule}",
        rounds.count,
        rounds.makespan,
        one.makespan()
    ));
    Ok(Some(from_rounds(platform, req, rounds, notes)))
}
