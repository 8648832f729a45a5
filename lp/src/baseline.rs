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
