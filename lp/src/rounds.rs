//! Multi-round schedules (strategy `rounds`): each enrolled worker gets
//! several chunks, and sends and returns interleave on the master's port in
//! one planned sequence, so workers compute while the port serves others.
//!
//! The shape follows the periodic schedule built from the steady-state
//! solution (Beaumont, Legrand and Robert, *Scheduling divisible workloads
//! on heterogeneous platforms*): the workers and their shares are those of
//! ρ* ([`crate::bound`]); the batch is cut into K rounds of equal size,
//! each split over the workers in proportion to their steady-state share;
//! period k sends round k and then returns round k − L (the lag L lets a
//! chunk be computed while the next ones arrive). K and L are chosen by the
//! predicted makespan, which counts the per-message latencies (so more
//! rounds are not free), and the best one-round plan is a candidate too, so
//! `rounds` never predicts worse than it. Every candidate is measured by
//! [`crate::sequence::execute`], the earliest execution of its sequence with the port's
//! idle gaps filled by later transfers that fit in them.

use crate::bound::preferring_slack;
use crate::error::{Error, Result};
use crate::platform::{Latency, Platform, Worker};
use crate::schedule::Ports;
use crate::sequence::{strict_makespan, PortOp, RoundChunk, Sequence};
use crate::TUNING;
use periodic::Periodic;
use std::collections::HashMap;
use stop::{Lags, Stall};

/// Candidate round counts: from the fewest the memory allows, growing by
/// about a third each time, up to `max_chunks` chunks in all.
fn round_counts(platform: &Platform, enrolled: &[usize], shares: &[f64], load: u64, max_chunks: usize) -> Vec<usize> {
    let total: f64 = shares.iter().sum();
    let wk = platform.workers();
    // Fewest rounds for which three chunks of every worker fit its memory.
    let k_min = enrolled
        .iter()
        .zip(shares)
        .filter_map(|(&w, &s)| {
            wk[w]
                .max_load
                .map(|b| (3.0 * load as f64 * s / total / b as f64).ceil() as usize)
        })
        .max()
        .unwrap_or(1)
        .max(1);
    let k_max = (max_chunks / enrolled.len().max(1)).min(load as usize).max(k_min);
    let mut ks = Vec::new();
    let mut k = 1usize;
    while k <= k_max {
        if k >= k_min {
            ks.push(k);
        }
        k = (k + 1).max(k * 4 / 3);
    }
    if ks.first() != Some(&k_min) {
        ks.insert(0, k_min);
    }
    ks
}

/// A candidate and its makespan taken strictly in order (and without
/// latencies, when there are some): the one-round plan's sequence, or a
/// periodic plan built when it is executed.
struct Candidate<'a> {
    strict: f64,
    without: Option<f64>,
    plan: Shape<'a>,
    count: usize,
    lag: usize,
}

enum Shape<'a> {
    Sequence(Vec<RoundChunk>, Vec<PortOp>),
    Periodic(Periodic<'a>),
}

impl Shape<'_> {
    fn build(&self) -> (Vec<RoundChunk>, Vec<PortOp>) {
        match self {
            Shape::Sequence(chunks, ops) => (chunks.clone(), ops.clone()),
            Shape::Periodic(per) => per.build(),
        }
    }

    fn chunks(&self) -> usize {
        match self {
            Shape::Sequence(chunks, _) => chunks.len(),
            Shape::Periodic(per) => per.chunks(),
        }
    }
}

/// The platform without its per-message latencies, if it has any.
fn hedged(platform: &Platform) -> Option<Platform> {
    let wk = platform.workers();
    if !wk
        .iter()
        .any(|w| w.latency.send + w.latency.compute + w.latency.ret > 0.0)
    {
        return None;
    }
    let bare = wk.iter().map(|w| Worker {
        latency: Latency::default(),
        ..w.clone()
    });
    Platform::new(bare.collect()).ok()
}

/// The slack of `rounds` under `ports`.
pub fn slack(ports: Ports) -> f64 {
    if ports.uplink().is_some() {
        TUNING.shared_slack
    } else {
        TUNING.slack
    }
}

/// The `rounds` plan of `load` units: the best periodic candidate, or
/// `one_round` (the sequence of the best one-round plan, when it fits the
/// workers' memory) if that predicts no later.
pub fn plan_rounds(platform: &Platform, ports: Ports, load: u64, one_round: Option<&Sequence>) -> Result<Sequence> {
    plan_rounds_with(platform, ports, load, one_round, &mut Timings::default())
}

/// [`plan_rounds`], the periodic candidates' timings kept in `timings`
/// for the next call on the same platform, ports and load (with another
/// one-round plan, say): those do not depend on it, and a second search
/// over them chooses exactly what timing them again would.
pub fn plan_rounds_with(
    platform: &Platform,
    ports: Ports,
    load: u64,
    one_round: Option<&Sequence>,
    timings: &mut Timings,
) -> Result<Sequence> {
    let never = |_: f64| false;
    search(platform, ports, load, one_round, true, timings, &never)?.ok_or_else(|| no_plan(load))
}

/// [`plan_rounds_with`], given up (`None`) as soon as the search can tell
/// that its plan would end no earlier than a makespan `hopeless` refuses
/// (a paced candidate that cannot win against the plain plan,
/// [`crate::paced`]): the least any candidate still to be timed can reach
/// is reckoned as [`Lags`] does, less the slack for what filling gaps may
/// still take off. `hopeless(0.0)` asks whether any plan at all is
/// refused (the caller folds in what it knows of the least one can end
/// at, and what refuses it may change while the search runs): asked at
/// every round count.
pub(crate) fn plan_rounds_unless(
    platform: &Platform,
    ports: Ports,
    load: u64,
    one_round: Option<&Sequence>,
    timings: &mut Timings,
    hopeless: &dyn Fn(f64) -> bool,
) -> Result<Option<Sequence>> {
    search(platform, ports, load, one_round, true, timings, hopeless)
}

/// Whether the search may give up: the least strict makespan any
/// candidate still to be timed can reach ([`Lags::reach`]), or the best
/// timed, taken down by `TUNING.shared_slack` and by what filling gaps took
/// off the best timed (it executed so, as it would be at the end), is one
/// `hopeless` refuses; and filling took no more than the margin off. (It
/// takes little off a plan of many rounds, and up to a fifth where a few
/// chunks of a few units wait on each other: on a star of 10 workers and
/// 60 units, a candidate given up on its strict timings alone ended 17%
/// lower filled, and would have been taken.)
fn given_up(
    platform: &Platform,
    ports: Ports,
    weighed: &[Candidate],
    lags: &Lags,
    timings: &mut Timings,
    hopeless: &dyn Fn(f64) -> bool,
) -> bool {
    // Refused however early it ends: given up at once.
    if hopeless(0.0) {
        return true;
    }
    let Some(best) = weighed.iter().min_by(|a, b| a.strict.total_cmp(&b.strict)) else {
        return false;
    };
    let Some(least) = lags.reach().map(|r| r.min(best.strict) * (1.0 - TUNING.shared_slack)) else {
        return false;
    };
    // Filling is worked out only where the strict reckoning alone would
    // give up.
    if !hopeless(least) {
        return false;
    }
    // Where filling takes off more than the margin (a few chunks of a few
    // units waiting on each other), the strict reckoning tells too little.
    let filled = executed(platform, ports, best, timings).makespan;
    filled >= best.strict * (1.0 - TUNING.shared_slack) && hopeless(least * filled / best.strict)
}

/// The error for a search given up where nothing could give it up.
fn no_plan(load: u64) -> Error {
    Error::Solver(format!("the multi-round search of {load} units was given up"))
}

/// The periodic candidates timed so far for one platform, port model and
/// load, by (rounds, lag): strictly in order (with latencies, and without
/// where the platform has some), and with gaps filled.
#[derive(Debug, Default)]
pub struct Timings {
    strict: HashMap<(usize, usize), (f64, Option<f64>)>,
    filled: HashMap<(usize, usize), Sequence>,
}

/// [`plan_rounds`], the search over round counts ending where it stalls
/// ([`Stall`]) if `stop`, else going on up to `TUNING.max_chunks`.
fn search(
    platform: &Platform,
    ports: Ports,
    load: u64,
    one_round: Option<&Sequence>,
    stop: bool,
    timings: &mut Timings,
    hopeless: &dyn Fn(f64) -> bool,
) -> Result<Option<Sequence>> {
    let ss = preferring_slack(platform, ports)?;
    let mut enrolled: Vec<usize> = (0..platform.len()).filter(|&i| ss.alpha[i] > 0.0).collect();
    let wk = platform.workers();
    enrolled.sort_by(|&a, &b| wk[a].c.total_cmp(&wk[b].c).then(a.cmp(&b)));
    let shares: Vec<f64> = enrolled.iter().map(|&i| ss.alpha[i]).collect();
    // Latencies come from fitted intercepts, which calibration may find in
    // noise: a candidate is weighed both with them and without, and the
    // one whose worse relative loss is smallest is taken (minimax
    // regret), never one predicting later than the one-round plan.
    let bare = hedged(platform);
    let mut weighed: Vec<Candidate> = Vec::new();
    if let Some(one) = one_round {
        let (chunks, ops) = (&one.chunks, &one.ops);
        weighed.push(Candidate {
            strict: strict_makespan(platform, chunks, ops, ports),
            without: bare.as_ref().map(|b| strict_makespan(b, chunks, ops, ports)),
            plan: Shape::Sequence(chunks.clone(), ops.clone()),
            count: 1,
            lag: 0,
        });
    }
    let mut stall = Stall::new(slack(ports));
    let mut lags = Lags::new(slack(ports));
    // Seconds of timing spent so far (`TUNING.sim_secs`).
    let mut spent = 0.0;
    let weight = if bare.is_some() { 2.0 } else { 1.0 };
    let per_chunk = TUNING.sim_secs * (1.0 + enrolled.len() as f64 / TUNING.sim_width);
    // Each candidate's chunks and sequence, built into the same vectors.
    let (mut chunks, mut ops) = (Vec::new(), Vec::new());
    for k in round_counts(platform, &enrolled, &shares, load, TUNING.max_chunks) {
        let before = weighed.len();
        // More rounds only while timing them costs at most a small part
        // of the makespan found so far: the user waits for the plan too.
        let next = 3.0 * weight * per_chunk * (enrolled.len() * k) as f64;
        let found = weighed.iter().map(|c| c.strict).fold(f64::INFINITY, f64::min);
        if stop && before > 0 && spent + next > TUNING.exhaustive_worth * found {
            break;
        }
        for lag in (0..TUNING.lags).filter(|&lag| lags.timed(lag)) {
            if let Some(per) = Periodic::new(platform, &enrolled, &shares, load, k, lag) {
                // Counted as timed whether or not it was before, so that
                // the search stops where it would have.
                spent += weight * per_chunk * per.chunks() as f64;
                let (strict, without) = *timings.strict.entry((k, lag)).or_insert_with(|| {
                    per.build_into(&mut chunks, &mut ops);
                    (
                        strict_makespan(platform, &chunks, &ops, ports),
                        bare.as_ref().map(|b| strict_makespan(b, &chunks, &ops, ports)),
                    )
                });
                weighed.push(Candidate {
                    strict,
                    without,
                    plan: Shape::Periodic(per),
                    count: k,
                    lag,
                });
            }
        }
        if stop {
            lags.record(&weighed[before..], &weighed);
            if lags.none() {
                break;
            }
            if given_up(platform, ports, &weighed, &lags, timings, hopeless) {
                return Ok(None);
            }
        }
        if stall.stalled(&weighed[before..]) && stop {
            break;
        }
    }
    let ceiling = one_round.map(|_| weighed[0].strict);
    choose(platform, ports, weighed, ceiling, bare.is_some(), timings)
        .map(Some)
        .ok_or_else(|| {
            Error::Solver(format!(
                "no multi-round schedule of {load} units fits the workers' memory (max_load)"
            ))
        })
}

/// The candidate taken of those `weighed` (the one-round plan's, if any,
/// first, its strict makespan the `ceiling` none may pass), executed with
/// its gaps filled: of the few best by regret, the best filled; where the
/// platform has no latencies (not `hedging`), then the one with the
/// fewest chunks within the slack of it.
fn choose(
    platform: &Platform,
    ports: Ports,
    mut weighed: Vec<Candidate>,
    ceiling: Option<f64>,
    hedging: bool,
    timings: &mut Timings,
) -> Option<Sequence> {
    let ceiling = ceiling.unwrap_or(f64::INFINITY);
    let least = |f: &dyn Fn(&Candidate) -> f64| weighed.iter().map(f).fold(f64::INFINITY, f64::min);
    let best_with = least(&|c| c.strict);
    let best_without = least(&|c| c.without.unwrap_or(f64::INFINITY));
    let regret = |with: f64, c: &Candidate| match c.without {
        Some(w) => (with / best_with).max(w / best_without),
        None => with,
    };
    weighed.retain(|c| c.strict <= ceiling);
    weighed.sort_by(|a, b| regret(a.strict, a).total_cmp(&regret(b.strict, b)));
    // The few best are executed with their gaps filled, which only moves
    // transfers earlier.
    let mut filled = |c: &Candidate| {
        let seq = executed(platform, ports, c, timings);
        (regret(seq.makespan, c), seq)
    };
    // (index in `weighed`, score, sequence) of the choice so far.
    let mut best: Option<(usize, f64, Sequence)> = None;
    for (i, c) in weighed.iter().enumerate().take(TUNING.filled) {
        let (score, seq) = filled(c);
        if best.as_ref().is_none_or(|b| score < b.1) {
            best = Some((i, score, seq));
        }
    }
    // Where the platform knows no cost a message, of the candidates sure
    // to end within the slack of it (taken strictly in order, which
    // filling only shortens), the fewest chunks. (Latencies that are known
    // are weighed, and hedged against, above.)
    if let Some((at, score, _)) = best.as_ref().filter(|_| !hedging) {
        let (limit, most) = (score * (1.0 + slack(ports)), weighed[*at].plan.chunks());
        let fewest = (weighed.iter().enumerate())
            .filter(|(_, c)| regret(c.strict, c) <= limit && c.plan.chunks() < most)
            .min_by_key(|(_, c)| c.plan.chunks());
        if let Some((i, c)) = fewest {
            let (score, seq) = filled(c);
            best = Some((i, score, seq));
        }
    }
    best.map(|b| b.2)
}

/// Candidate `c` executed with its gaps filled, a periodic one taken from
/// `timings` where it was executed before (and kept there).
fn executed(platform: &Platform, ports: Ports, c: &Candidate, timings: &mut Timings) -> Sequence {
    let key = (c.count, c.lag);
    let periodic = matches!(c.plan, Shape::Periodic(_));
    if let Some(seq) = timings.filled.get(&key).filter(|_| periodic) {
        return seq.clone();
    }
    let (chunks, ops) = c.plan.build();
    let (times, makespan) = crate::sequence::execute(platform, &chunks, &ops, ports);
    let seq = Sequence {
        chunks,
        ops,
        times,
        count: c.count,
        lag: c.lag,
        fill_gaps: true,
        makespan,
    };
    if periodic {
        timings.filled.insert(key, seq.clone());
    }
    seq
}

mod periodic;
mod stop;

#[cfg(test)]
mod tests;
