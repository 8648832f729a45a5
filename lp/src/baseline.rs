//! Loads chosen elsewhere than by the planner (the baselines users would
//! try instead: an equal split, a split by computing speed), with the
//! timeline the model predicts for them.

use crate::error::Result;
use crate::plan::{Plan, Strategy};
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario};
use crate::sequence::Sequence;

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
    let sequence = Sequence::one_round(platform, &scenario, &loads, ports);
    let rational = crate::Timeline::build(platform, &scenario, &alpha, ports);
    Ok(Plan {
        strategy: Strategy::Fifo,
        ports,
        load,
        optimal: false,
        scenario,
        rational,
        sequence,
        alpha,
        loads,
        notes: vec!["loads given, not planned".into()],
        pace: Vec::new(),
    })
}
