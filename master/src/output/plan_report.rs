//! How a plan is shown: the JSON document of `dls plan --json` and a table.

use dls_lp::{Plan, Platform};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Serialize)]
pub struct PlanJson {
    pub strategy: String,
    pub ports: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<crate::output::report::UplinkJson>,
    pub load: u64,
    pub optimal: bool,
    /// Makespan of the integer loads, seconds.
    pub makespan: f64,
    /// Makespan of the LP's rational loads, seconds.
    pub makespan_rational: f64,
    /// Units per second of the rational plan.
    pub throughput: f64,
    /// The steady-state lower bound on any schedule's makespan (load / ρ*),
    /// and the makespan over it.
    pub bound: f64,
    pub makespan_over_bound: f64,
    pub send_order: Vec<String>,
    pub return_order: Vec<String>,
    /// Rational makespan of the same strategy on the equivalent homogeneous
    /// platform (average speeds), and that divided by `makespan_rational`.
    pub homogeneous_makespan: f64,
    pub efficiency: f64,
    pub workers: Vec<WorkerJson>,
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct WorkerJson {
    pub name: String,
    pub alpha: f64,
    pub load: u64,
    /// The predicted timeline of the whole-unit loads.
    #[serde(flatten)]
    pub times: crate::output::report::Times,
}

impl PlanJson {
    /// The plan's JSON; `efficiency` as [`dls_lp::plan::efficiency`]
    /// gives it, if known.
    pub fn new(platform: &Platform, plan: &Plan, efficiency: Option<(f64, f64)>) -> Self {
        let (efficiency, homogeneous_makespan) = efficiency.unwrap_or((f64::NAN, f64::NAN));
        let names = |order: Vec<usize>| order.into_iter().map(|i| platform.workers()[i].name.clone()).collect();
        PlanJson {
            strategy: plan.strategy.name().into(),
            ports: crate::output::report::port_fields(plan.ports).0,
            uplink: crate::output::report::port_fields(plan.ports).1,
            load: plan.load,
            optimal: plan.optimal,
            makespan: plan.makespan(),
            makespan_rational: plan.makespan_rational(),
            throughput: plan.throughput(),
            bound: crate::output::report::steady_state_bound(platform, plan),
            makespan_over_bound: plan.makespan() / crate::output::report::steady_state_bound(platform, plan),
            send_order: names(plan.send_order()),
            return_order: names(plan.return_order()),
            homogeneous_makespan,
            efficiency,
            workers: platform
                .workers()
                .iter()
                .zip(plan.worker_times())
                .enumerate()
                .map(|(i, (w, t))| WorkerJson {
                    name: w.name.clone(),
                    alpha: plan.alpha[i],
                    load: plan.loads[i],
                    times: crate::output::report::Times::from(&t),
                })
                .collect(),
            notes: plan.notes.clone(),
        }
    }
}

/// A readable table of the plan, workers in send order, then those without load.
pub fn table(platform: &Platform, plan: &Plan, efficiency: Option<(f64, f64)>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "strategy {} ({}), {} units, {}",
        plan.strategy,
        plan.ports.describe(),
        plan.load,
        if plan.optimal {
            "optimal for its class"
        } else {
            "not proven optimal"
        }
    );
    let _ = writeln!(
        out,
        "makespan {:.6} s (rational {:.6} s, {}), throughput {:.3} units/s",
        plan.makespan(),
        plan.makespan_rational(),
        rounding_cost(plan.makespan(), plan.makespan_rational()),
        plan.throughput()
    );
    let bound = crate::output::report::steady_state_bound(platform, plan);
    let _ = writeln!(
        out,
        "steady-state bound {bound:.6} s (no schedule of any number of rounds is shorter); makespan {:.3}× the bound",
        plan.makespan() / bound
    );
    let _ = writeln!(
        out,
        "{:<16} {:>12} {:>8} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "worker", "alpha", "load", "send_start", "send_end", "compute_end", "return_start", "return_end", "idle"
    );
    let mut rows = plan.scenario.send_order.clone();
    rows.extend((0..platform.len()).filter(|i| !plan.scenario.send_order.contains(i)));
    let times = plan.worker_times();
    for i in rows {
        let t = times[i];
        let _ = writeln!(
            out,
            "{:<16} {:>12.3} {:>8} {:>12.6} {:>12.6} {:>12.6} {:>12.6} {:>12.6} {:>10.6}",
            platform.workers()[i].name,
            plan.alpha[i],
            plan.loads[i],
            t.send_start,
            t.send_end,
            t.compute_end,
            t.return_start,
            t.return_end,
            t.idle
        );
    }
    let order = |o: Vec<usize>| {
        o.iter()
            .map(|&i| platform.workers()[i].name.as_str())
            .collect::<Vec<_>>()
            .join(" → ")
    };
    let _ = writeln!(out, "send order:   {}", order(plan.send_order()));
    let _ = writeln!(out, "return order: {}", order(plan.return_order()));
    if let Some((e, h)) = efficiency {
        let _ = writeln!(
            out,
            "equivalent homogeneous platform (average speeds): {h:.6} s; efficiency {e:.3} = that / this makespan (above 1: heterogeneity helps this plan)"
        );
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// What rounding to whole products cost, in percent of the rational
/// makespan: "+1.234%", "no cost" when it rounds to nothing, never "+-0.000%".
fn rounding_cost(whole: f64, rational: f64) -> String {
    let pct = 100.0 * (whole / rational - 1.0);
    if !pct.is_finite() {
        "rounding cost unknown".into()
    } else if pct.abs() < 0.0005 {
        "whole products cost nothing".into()
    } else {
        format!("{pct:+.3}% for whole products")
    }
}

#[cfg(test)]
mod rounding_cost_tests {
    use super::rounding_cost;

    #[test]
    fn the_cost_of_rounding_reads_plainly() {
        assert_eq!(rounding_cost(1.01234, 1.0), "+1.234% for whole products");
        assert_eq!(rounding_cost(1.0 - 1e-9, 1.0), "whole products cost nothing");
        assert_eq!(rounding_cost(0.99, 1.0), "-1.000% for whole products");
        assert_eq!(rounding_cost(1.0, 0.0), "rounding cost unknown");
    }
}
