//! Loads chosen elsewhere than by the planner (the baselines users would
//! try instead: an equal split, a split by computing speed), with the
//! timeline the model predicts for them.

use crate::error::Result;
use crate::plan::{Plan, Strategy};
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, Timeline};

/// A plan with loads chosen elsewhere (a baseline such as an equal split),
/// under the FIFO scenario `order`: its timeline is what the model predicts
/// for those loads. `optimal` is false.
pub fn with_loads(platform: &Platform, order: Vec<usize>, loads: Vec<u64>, ports: Ports) -> Result<Plan> {
    let scenario = Scenario::fifo(order);
    scenario.validate(platform)?;
    if loads.len() != platform.len() {
        return Err(crate::Error::BadScenario(format!(
            "{} loads for {} workers",
            loads.len(),
            platform.len()
        )));
    }
    let load: u64 = loads.iter().sum();
    platform.check_load(load)?;
    let alpha: Vec<f64> = loads.iter().map(|&l| l as f64).collect();
    let integer = Timeline::build(platform, &scenario, &alpha, ports);
    Ok(Plan {
        strategy: Strategy::Fifo,
        ports,
        load,
        optimal: false,
        scenario,
        rational: integer.clone(),
        integer,
        alpha,
        loads,
        notes: vec!["loads given, not planned".into()],
        rounds: None,
    })
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
