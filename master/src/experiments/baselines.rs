//! What users would do instead of planning, on the same workers and batch.

use super::{nan_if_null, on_calibrated, stats, Family, Options};
use crate::runtime::batch::Batch;
use crate::runtime::pool::Pool;
use crate::session::{self, RunConfig};
use anyhow::{Context, Result};
use dls_core::on_demand::Sizing;
use dls_lp::{Platform, Strategy};
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineRow {
    pub platform: usize,
    pub speeds: Vec<(f64, f64)>,
    /// `plan` (the fifo plan), `lifo`, `rounds`, `equal`, `proportional`,
    /// `self-scheduling`, `factoring`, `weighted-factoring`.
    pub method: String,
    #[serde(deserialize_with = "nan_if_null")]
    pub predicted: f64,
    pub measured: f64,
    /// measured / the plan's measured makespan on the same platform.
    #[serde(deserialize_with = "nan_if_null")]
    pub vs_plan: f64,
    /// measured / the steady-state bound (rows written before it was
    /// reported read back as NaN).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub vs_bound: f64,
    /// The plan's notes (for `rounds`: how many rounds and chunks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// On the `plan` row, the calibrated costs every method ran on, per
    /// worker: c, w, d and the send, compute and return latencies (so a
    /// run's plans can be made again offline).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<[f64; 6]>,
}

fn nan() -> f64 {
    f64::NAN
}

/// What users would do instead, on the same workers and batch: an equal
/// split, a split proportional to compute speed ignoring communication,
/// demand-driven self-scheduling (chunks of about M / 4p products handed
/// out as workers finish), factoring (FAC2) and weighted factoring (by
/// computing speed); beside the one-round plans (fifo, named `plan`, and
/// lifo) and `rounds`. All go through the same one-port runtime.
pub async fn baselines_on(
    pool: &mut Pool,
    platform: &Platform,
    batch: &Batch,
    k: usize,
    speeds: &[(f64, f64)],
) -> Result<Vec<BaselineRow>> {
    let platform = session::align(platform, pool.links(), &batch.form)?;
    let m = batch.count as u64;
    let p = platform.len();
    let order = dls_lp::plan::order_inc_c(&platform);
    let cfg = RunConfig {
        ports: Some(platform.measured_ports()),
        verify: 1,
        rounding: dls_lp::Rounding::Paper,
        ..RunConfig::default()
    };
    let planned = dls_lp::plan(&platform, &dls_lp::Request::new(m, Strategy::Fifo));
    let lifo = dls_lp::plan(&platform, &dls_lp::Request::new(m, Strategy::Lifo));
    let rounds = dls_lp::plan(&platform, &dls_lp::Request::new(m, Strategy::Rounds));
    // What `dls run` does without --strategy: best, refined rounding.
    let default = dls_lp::plan(&platform, &dls_lp::Request::new(m, Strategy::Best));
    let equal = dls_lp::baseline::with_loads(
        &platform,
        order.clone(),
        dls_lp::rounding::proportional(m, &vec![1.0; p]),
        platform.measured_ports(),
    );
    let speeds_w: Vec<f64> = platform.workers().iter().map(|w| 1.0 / w.w).collect();
    let prop = dls_lp::baseline::with_loads(
        &platform,
        order,
        dls_lp::rounding::proportional(m, &speeds_w),
        platform.measured_ports(),
    );
    // On demand: self-scheduling (about four chunks per worker), factoring
    // and weighted factoring (by computing speed) over every worker.
    let chunk = (batch.count / (4 * p)).max(1);
    let self_sched = dls_lp::baseline::with_loads(
        &platform,
        dls_lp::plan::order_inc_c(&platform),
        dls_lp::rounding::proportional(m, &vec![1.0; p]),
        platform.measured_ports(),
    );
    let mut rows: Vec<BaselineRow> = Vec::new();
    let on_demand = [Sizing::Fixed(chunk), Sizing::Factoring, Sizing::WeightedFactoring];
    let methods = [
        ("plan", planned, None),
        ("lifo", lifo, None),
        ("rounds", rounds, None),
        ("default (best)", default, None),
        ("equal", equal, None),
        ("proportional", prop, None),
    ]
    .into_iter()
    .chain(on_demand.map(|s| (s.name(), self_sched.clone(), Some(s))));
    for (method, plan, on_demand) in methods {
        let plan = plan?;
        let run_cfg = RunConfig {
            options: crate::runtime::shell::RunOptions {
                self_schedule: on_demand,
                ..cfg.options
            },
            ..cfg
        };
        let job = rows.len() as u64 + 1;
        let d = session::run_plan(pool, platform.clone(), plan, batch, &run_cfg, job, |_| {})
            .await
            .with_context(|| format!("running the {method} split"))?;
        rows.push(BaselineRow {
            platform: k,
            speeds: speeds.to_vec(),
            method: method.into(),
            // Self-scheduling has no model of its own to predict with.
            predicted: if on_demand.is_some() {
                f64::NAN
            } else {
                d.report.predicted_makespan
            },
            measured: d.report.measured_makespan,
            vs_plan: f64::NAN,
            vs_bound: d.report.measured_over_bound,
            notes: d.plan.notes.to_vec(),
            costs: if rows.is_empty() {
                platform
                    .workers()
                    .iter()
                    .map(|w| [w.c, w.w, w.d, w.latency.send, w.latency.compute, w.latency.ret])
                    .collect()
            } else {
                Vec::new()
            },
        });
    }
    let base = rows[0].measured;
    for r in &mut rows {
        r.vs_plan = r.measured / base;
    }
    Ok(rows)
}

/// Baselines on emulated heterogeneous stars.
pub async fn baselines_local(opts: &Options, mut say: impl FnMut(&str)) -> Result<Vec<BaselineRow>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(opts.seed);
    let batch = Batch::random(opts.batch, opts.size, opts.seed);
    let mut rows = Vec::new();
    for k in 0..opts.platforms {
        let speeds = Family::HeterogeneousStar.speeds(&mut rng, opts.workers);
        let result = on_calibrated(&speeds, opts, async |pool, platform| {
            baselines_on(pool, &platform, &batch, k, &speeds).await
        })
        .await;
        rows.extend(result?);
        say(&format!("platform #{k}: speeds {speeds:?} done"));
    }
    Ok(rows)
}

pub fn baselines_table(rows: &[BaselineRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>8} {:<18} {:>11} {:>11} {:>9} {:>9}",
        "platform", "method", "predicted", "measured", "vs plan", "vs bound"
    );
    for r in rows {
        let predicted = if r.predicted.is_nan() {
            "-".to_string()
        } else {
            format!("{:.4}s", r.predicted)
        };
        let _ = writeln!(
            s,
            "{:>8} {:<18} {:>11} {:>10.4}s {:>9.3} {:>9.3}",
            r.platform, r.method, predicted, r.measured, r.vs_plan, r.vs_bound
        );
    }
    let mut methods: Vec<&str> = Vec::new();
    for r in rows {
        if !methods.contains(&r.method.as_str()) {
            methods.push(&r.method);
        }
    }
    for method in methods {
        let of = |f: fn(&BaselineRow) -> f64| -> Vec<f64> {
            rows.iter()
                .filter(|r| r.method == method)
                .map(f)
                .filter(|x| !x.is_nan())
                .collect()
        };
        let (m, sd) = stats(&of(|r| r.vs_plan));
        let _ = write!(s, "{method}: measured makespan / plan's, mean {m:.3} ± {sd:.3}");
        let mut b = of(|r| r.vs_bound);
        if !b.is_empty() {
            b.sort_by(f64::total_cmp);
            let median = b[b.len() / 2];
            let _ = write!(s, "; / bound, median {median:.3}, max {:.3}", b[b.len() - 1]);
        }
        s.push('\n');
    }
    if let Some((wins, of)) = rounds_wins(rows) {
        let _ = writeln!(
            s,
            "rounds: no slower than every other method (2% counts as a tie) on {wins} of {of} platforms"
        );
    }
    s
}

/// On how many platforms `rounds` finished no later than 1.02× every other
/// method, and on how many it ran.
pub fn rounds_wins(rows: &[BaselineRow]) -> Option<(usize, usize)> {
    let platforms: std::collections::BTreeSet<usize> = rows.iter().map(|r| r.platform).collect();
    let mut n = 0;
    let mut wins = 0;
    for k in platforms {
        let on: Vec<&BaselineRow> = rows.iter().filter(|r| r.platform == k).collect();
        let Some(r) = on.iter().find(|r| r.method == "rounds") else {
            continue;
        };
        n += 1;
        if on.iter().all(|o| r.measured <= 1.02 * o.measured) {
            wins += 1;
        }
    }
    (n > 0).then_some((wins, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_without_a_prediction_survive_json() {
        let row = BaselineRow {
            platform: 2,
            speeds: vec![(1.0, 2.0)],
            method: "self-scheduling".into(),
            predicted: f64::NAN,
            measured: 1.5,
            vs_plan: 1.25,
            vs_bound: 1.5,
            notes: Vec::new(),
            costs: Vec::new(),
        };
        let text = serde_json::to_string(&row).expect("writes");
        let back: BaselineRow = serde_json::from_str(&text).expect("reads");
        assert!(back.predicted.is_nan());
        assert_eq!((back.platform, back.measured, back.vs_plan), (2, 1.5, 1.25));
    }

    #[test]
    fn rounds_wins_counts_ties_within_two_percent() {
        let row = |platform, method: &str, measured| BaselineRow {
            platform,
            speeds: Vec::new(),
            method: method.into(),
            predicted: f64::NAN,
            measured,
            vs_plan: f64::NAN,
            vs_bound: f64::NAN,
            notes: Vec::new(),
            costs: Vec::new(),
        };
        let rows = [
            row(0, "plan", 2.0),
            row(0, "rounds", 2.03), // 1.5% slower: a tie
            row(1, "rounds", 1.0),
            row(1, "factoring", 0.9), // 11% faster than rounds
            row(2, "plan", 1.0),
        ];
        assert_eq!(rounds_wins(&rows), Some((1, 2)));
        assert_eq!(rounds_wins(&rows[4..]), None);
    }
}
