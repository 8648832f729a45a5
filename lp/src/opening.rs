//! The opening: a batch's first chunk, sent while the rest of its plan is
//! still being made, so that a plan that takes long to make does not hold
//! the first send back.
//!
//! The opening goes to the worker the steady state feeds first: of the
//! workers it gives work, the one whose link takes a product fastest (on
//! one port the steady state takes workers by increasing `c + d` until
//! the port is full, so the fastest link is always among them). It takes
//! what that worker processes in the steady state in `TUNING.opening_secs`:
//! little against its part of any batch whose plan takes that long to make.
//!
//! The plan of the whole batch, made meanwhile, then gives up those
//! products: they come off the chosen worker's earliest chunks ([`split`]).
//! What runs is the opening and then the rest; what is reported is the
//! whole: the opening as its first chunk, the rest after it, timed by the
//! one execution rule with none of the rest sent before it was planned.

use crate::plan::Plan;
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, Timeline};
use crate::sequence::{execute_released, PortOp, RoundChunk, Sequence};
use crate::TUNING;

/// The opening: `units` products to `worker`, sent before the plan exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opening {
    pub worker: usize,
    pub units: u64,
}

/// The opening of a batch of `load` products on `platform` with `ports`
/// (see the module), or `None` when there is none to make: fewer than two
/// products, or no steady state.
pub fn choose(platform: &Platform, ports: Ports, load: u64) -> Option<Opening> {
    if load < 2 {
        return None;
    }
    let ss = crate::bound::steady_state(platform, ports).ok()?;
    let wk = platform.workers();
    let send = |i: usize| ports.transfer(&wk[i], true, 1.0).secs;
    let worker = (0..wk.len())
        .filter(|&i| ss.alpha[i] > 0.0)
        .min_by(|&a, &b| send(a).total_cmp(&send(b)).then(ss.alpha[b].total_cmp(&ss.alpha[a])))?;
    let cap = wk[worker].max_load.map_or(u64::MAX, |m| (m / 2).max(1));
    let want = (ss.alpha[worker] * TUNING.opening_secs).ceil();
    let units = if want.is_finite() { want as u64 } else { 1 };
    Some(Opening {
        worker,
        units: units.clamp(1, cap).min(load / 2),
    })
}

/// `plan` (of the whole batch, on `platform`) once `opening` went out
/// first and the rest could go only `release` seconds later: the whole,
/// to report (the opening its first chunk; its loads those of `plan`),
/// and the rest, to run after the opening (`plan.load - opening.units`
/// products, timed from its own start).
///
/// The opening's products come off its worker's chunks in the order they
/// are sent (chunks left empty go); should its worker have fewer, the rest
/// comes off the last chunks sent. The opening's return takes the place of
/// its worker's first return (its worker computes in arrival order), or,
/// if it had none, comes before the first return.
pub fn split(platform: &Platform, plan: &Plan, opening: Opening, release: f64) -> (Plan, Plan) {
    let seq = &plan.sequence;
    let units = taken(seq, opening);
    let (j, s) = (opening.worker, opening.units);
    // Surviving chunks, renumbered from 1 (0 is the opening).
    let mut index = vec![None; seq.chunks.len()];
    let mut chunks = vec![RoundChunk {
        worker: j,
        units: s,
        round: 0,
    }];
    for (c, ch) in seq.chunks.iter().enumerate() {
        if units[c] > 0 {
            index[c] = Some(chunks.len());
            chunks.push(RoundChunk { units: units[c], ..*ch });
        }
    }
    let own_return = seq.ops.iter().position(|op| match *op {
        PortOp::Return(c) => seq.chunks[c].worker == j,
        PortOp::Send(_) => false,
    });
    let at = own_return.or_else(|| seq.ops.iter().position(|op| matches!(op, PortOp::Return(_))));
    let mut ops = vec![PortOp::Send(0)];
    for (pos, op) in seq.ops.iter().enumerate() {
        if Some(pos) == at {
            ops.push(PortOp::Return(0));
        }
        let moved = |c: usize| index[c];
        match *op {
            PortOp::Send(c) => ops.extend(moved(c).map(PortOp::Send)),
            PortOp::Return(c) => ops.extend(moved(c).map(PortOp::Return)),
        }
    }
    if at.is_none() {
        ops.push(PortOp::Return(0));
    }
    let mut releases = vec![release.max(0.0); chunks.len()];
    releases[0] = 0.0;
    let (times, makespan) = execute_released(platform, &chunks, &ops, plan.ports, seq.fill_gaps, &releases);
    let whole = Sequence {
        chunks: chunks.clone(),
        ops: ops.clone(),
        times,
        makespan,
        ..seq.clone()
    };
    let rest_chunks = chunks[1..].to_vec();
    let rest_ops: Vec<PortOp> = (ops.iter())
        .filter(|op| op.chunk() != 0)
        .map(|op| match *op {
            PortOp::Send(c) => PortOp::Send(c - 1),
            PortOp::Return(c) => PortOp::Return(c - 1),
        })
        .collect();
    let rest = Sequence::timed(
        platform,
        rest_chunks,
        rest_ops,
        plan.ports,
        seq.count,
        seq.lag,
        seq.fill_gaps,
    );
    let name = &platform.workers()[j].name;
    let mut notes = plan.notes.clone();
    notes.push(format!(
        "opening: {s} product(s) to {name} sent at once; the rest planned meanwhile, ready {release:.3} s later"
    ));
    let whole = planned(platform, plan, whole, plan.load, notes.clone(), Some(j));
    let rest = planned(platform, plan, rest, plan.load - s.min(plan.load), notes, None);
    (whole, rest)
}

/// Each chunk's units once the opening's came off (see [`split`]).
fn taken(seq: &Sequence, opening: Opening) -> Vec<u64> {
    let mut units: Vec<u64> = seq.chunks.iter().map(|c| c.units).collect();
    let sends: Vec<usize> = (seq.ops.iter())
        .filter_map(|op| match *op {
            PortOp::Send(c) => Some(c),
            PortOp::Return(_) => None,
        })
        .collect();
    let mut need = opening.units;
    let own = sends.iter().filter(|&&c| seq.chunks[c].worker == opening.worker);
    let others = sends.iter().rev().filter(|&&c| seq.chunks[c].worker != opening.worker);
    for &c in own.chain(others) {
        let take = need.min(units[c]);
        units[c] -= take;
        need -= take;
        if need == 0 {
            break;
        }
    }
    units
}

/// A plan of `load` products running `sequence`, otherwise as `plan`;
/// `first` is put first in its send order.
fn planned(
    platform: &Platform,
    plan: &Plan,
    sequence: Sequence,
    load: u64,
    notes: Vec<String>,
    first: Option<usize>,
) -> Plan {
    let p = platform.len();
    let loads = sequence.loads(p);
    let mut scenario: Scenario = plan.scenario.clone();
    if let Some(j) = first {
        scenario.send_order.retain(|&w| w != j);
        scenario.send_order.insert(0, j);
        if !scenario.return_order.contains(&j) {
            scenario.return_order.insert(0, j);
        }
    }
    Plan {
        strategy: plan.strategy,
        ports: plan.ports,
        load,
        optimal: false,
        scenario,
        alpha: loads.iter().map(|&l| l as f64).collect(),
        loads,
        rational: Timeline {
            workers: sequence.spans(p),
            makespan: sequence.makespan,
        },
        sequence,
        notes,
        pace: plan.pace.clone(),
    }
}

#[cfg(test)]
mod tests;
