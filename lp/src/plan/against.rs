//! What a plan is weighed against: the steady-state bound, and the same
//! strategy on the equivalent homogeneous platform.

use super::{plan, Plan, Request, Strategy};
use crate::error::Result;
use crate::platform::Platform;
use crate::rounding::Rounding;
use crate::schedule::Ports;

/// The equivalent homogeneous platform (Lastovetsky and Reddy, *On
/// performance analysis of heterogeneous parallel algorithms*, section 2): as many
/// workers, each computing at the average speed (1/w averaged), with the
/// same aggregate communication (link speeds 1/c and 1/d averaged).
/// `max_load` bounds are dropped.
pub fn equivalent_homogeneous(platform: &Platform) -> Result<Platform> {
    let wk = platform.workers();
    let p = wk.len() as f64;
    let mean_speed = |f: fn(&crate::Worker) -> f64| wk.iter().map(|w| 1.0 / f(w)).sum::<f64>() / p;
    let c = 1.0 / mean_speed(|w| w.c);
    let w = 1.0 / mean_speed(|w| w.w);
    // A zero return cost is an infinite speed: average the costs instead.
    let d = if wk.iter().any(|x| x.d == 0.0) {
        wk.iter().map(|x| x.d).sum::<f64>() / p
    } else {
        1.0 / mean_speed(|w| w.d)
    };
    let workers = (0..wk.len())
        .map(|i| crate::Worker::new(format!("h{i}"), c, w, d))
        .collect();
    Ok(Platform::new(workers)?.with_uplink(platform.uplink()))
}

/// How the plan compares with the same strategy on the equivalent
/// homogeneous platform: that platform's rational makespan divided by the
/// plan's (1: as efficient; above 1: the heterogeneous platform, well
/// scheduled, does better than its homogeneous equivalent). The
/// equivalent is that of the links themselves, as the bound is
/// ([`steady_state_bound`]): a paced plan's paces are its choice, not
/// the platform's.
pub fn efficiency(platform: &Platform, plan: &Plan) -> Result<(f64, f64)> {
    let h = homogeneous_makespan(platform, plan.load, plan.strategy, plan.ports)?;
    Ok((h / plan.makespan_rational(), h))
}

/// The rational makespan of `load` units by `strategy` under `ports` on
/// `platform`'s equivalent homogeneous platform: what [`efficiency`]
/// weighs a plan against, known before the plan is (a caller may work it
/// out beside it).
pub fn homogeneous_makespan(platform: &Platform, load: u64, strategy: Strategy, ports: Ports) -> Result<f64> {
    let hom = equivalent_homogeneous(platform)?;
    let req = Request {
        load,
        strategy,
        ports,
        rounding: Rounding::Paper,
    };
    Ok(plan(&hom, &req)?.makespan_rational())
}

/// The steady-state bound on `plan`'s makespan (NaN where there is
/// none): on the links' own costs (`platform`), whatever the plan's paces.
pub fn steady_state_bound(platform: &Platform, plan: &Plan) -> f64 {
    crate::bound::steady_state(platform, plan.ports).map_or(f64::NAN, |s| s.makespan_bound(plan.load))
}
