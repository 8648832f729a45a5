//! From rational loads to whole units.

use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, Timeline};
use crate::tol::{LOAD_EPS, SNAP_EPS, STRICT_GAIN};

/// How rational loads become whole units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// The report's rule (section 5): floor every load, then one more unit to
    /// each of the first K enrolled workers in send order.
    Paper,
    /// The report's rule, then single units moved from one worker to another
    /// while that shortens the integer schedule. Never worse than `Paper`.
    Refined,
}

/// The report's rounding. `alpha` sums to `load` up to float error and
/// respects the bounds; the result sums to `load` exactly and respects them.
pub fn paper(platform: &Platform, send_order: &[usize], alpha: &[f64], load: u64) -> Vec<u64> {
    let wk = platform.workers();
    let mut loads: Vec<u64> = alpha
        .iter()
        .map(|&a| {
            let r = a.round();
            if (a - r).abs() <= SNAP_EPS {
                r.max(0.0) as u64
            } else {
                a.floor().max(0.0) as u64
            }
        })
        .collect();
    for (l, w) in loads.iter_mut().zip(wk) {
        *l = (*l).min(w.max_load.unwrap_or(u64::MAX));
    }
    let mut assigned: u64 = loads.iter().sum();
    // Float error can leave the floors a unit above the load: take it back
    // from the last enrolled workers.
    for &i in send_order.iter().rev() {
        while assigned > load && loads[i] > 0 {
            loads[i] -= 1;
            assigned -= 1;
        }
    }
    // Hand out the remainder one unit at a time, first to the enrolled workers
    // in send order, then (if bounds or float error demand it) to any worker
    // with room, so that the total is always exact.
    let enrolled: Vec<usize> = send_order.iter().copied().filter(|&i| alpha[i] > LOAD_EPS).collect();
    let others: Vec<usize> = send_order.iter().copied().filter(|&i| alpha[i] <= LOAD_EPS).collect();
    while assigned < load {
        let before = assigned;
        for &i in enrolled.iter().chain(&others) {
            if assigned == load {
                break;
            }
            if loads[i] < wk[i].max_load.unwrap_or(u64::MAX) {
                loads[i] += 1;
                assigned += 1;
            }
        }
        if assigned == before {
            break; // no room anywhere: the caller checked capacity, so unreachable
        }
    }
    loads
}

fn makespan(platform: &Platform, scenario: &Scenario, ports: Ports, loads: &[u64], buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend(loads.iter().map(|&l| l as f64));
    Timeline::build(platform, scenario, buf, ports).makespan
}

/// Candidate donors and receivers for single-unit moves: every scenario
/// worker on small platforms; on large ones the workers rounded up or down
/// the most, plus the last to return (it sets the makespan).
fn candidates(scenario: &Scenario, alpha: &[f64], loads: &[u64]) -> (Vec<usize>, Vec<usize>) {
    const ALL_BELOW: usize = 48;
    const KEEP: usize = 8;
    let members = &scenario.send_order;
    if members.len() <= ALL_BELOW {
        return (members.clone(), members.clone());
    }
    let excess = |i: usize| loads[i] as f64 - alpha[i];
    let mut by_excess = members.clone();
    by_excess.sort_by(|&a, &b| excess(b).total_cmp(&excess(a)));
    let mut donors: Vec<usize> = by_excess.iter().copied().take(KEEP).collect();
    if let Some(&last) = scenario.return_order.iter().rev().find(|&&i| loads[i] > 0) {
        if !donors.contains(&last) {
            donors.push(last);
        }
    }
    let receivers = by_excess.iter().rev().copied().take(KEEP).collect();
    (donors, receivers)
}

/// Move single units between workers while the integer makespan shrinks.
pub fn refine(platform: &Platform, scenario: &Scenario, ports: Ports, alpha: &[f64], loads: &mut [u64]) {
    let wk = platform.workers();
    let mut buf = Vec::with_capacity(loads.len());
    let mut current = makespan(platform, scenario, ports, loads, &mut buf);
    // Each round costs (candidates² × p); on large platforms a few rounds fix
    // the few units that matter and keep planning well under a second.
    let max_rounds = if scenario.send_order.len() <= 48 {
        4 * scenario.send_order.len() + 16
    } else {
        32
    };
    for _ in 0..max_rounds {
        let (donors, receivers) = candidates(scenario, alpha, loads);
        let mut best: Option<(usize, usize, f64)> = None;
        for &i in &donors {
            if loads[i] == 0 {
                continue;
            }
            for &j in &receivers {
                if j == i || loads[j] >= wk[j].max_load.unwrap_or(u64::MAX) {
                    continue;
                }
                loads[i] -= 1;
                loads[j] += 1;
                let m = makespan(platform, scenario, ports, loads, &mut buf);
                loads[i] += 1;
                loads[j] -= 1;
                let bar = best.map_or(current, |b| b.2);
                if m < bar * (1.0 - STRICT_GAIN) {
                    best = Some((i, j, m));
                }
            }
        }
        match best {
            Some((i, j, m)) => {
                loads[i] -= 1;
                loads[j] += 1;
                current = m;
            }
            None => break,
        }
    }
}

/// Split `load` units in proportion to `weights` (largest remainders).
pub fn proportional(load: u64, weights: &[f64]) -> Vec<u64> {
    let total: f64 = weights.iter().sum();
    let exact: Vec<f64> = weights.iter().map(|w| load as f64 * w / total).collect();
    let mut loads: Vec<u64> = exact.iter().map(|x| x.floor() as u64).collect();
    let mut rest = load - loads.iter().sum::<u64>();
    let mut by_remainder: Vec<usize> = (0..weights.len()).collect();
    by_remainder.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for i in by_remainder {
        if rest == 0 {
            break;
        }
        loads[i] += 1;
        rest -= 1;
    }
    loads
}

/// `part` units spread over `n` chunks in order, ⌈part·k/n⌉ after k of
/// them: chunks differ by at most one unit, the first is a largest, and they add
/// up to `part` exactly (rounding each chunk on its own would round the
/// same way n times over). Empty for n = 0.
pub fn spread(part: u64, n: usize) -> impl Iterator<Item = u64> {
    let upto = move |k: usize| (u128::from(part) * k as u128).div_ceil(n.max(1) as u128) as u64;
    (0..n).map(move |k| upto(k + 1) - upto(k))
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_against_closed_forms() {
        assert_eq!(spread(10, 4).collect::<Vec<_>>(), [3, 2, 3, 2]);
        assert_eq!(spread(2, 5).collect::<Vec<_>>(), [1, 0, 1, 0, 0]);
        assert_eq!(spread(6, 3).collect::<Vec<_>>(), [2, 2, 2]);
        assert_eq!(spread(0, 3).collect::<Vec<_>>(), [0, 0, 0]);
        assert_eq!(spread(5, 0).count(), 0);
    }
}
