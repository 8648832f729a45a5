//! Online correction against a speed change: on an emulated heterogeneous
//! star, the worker with the largest share of the `rounds` plan computes
//! `FACTOR` times more slowly from half its planned products on (in every
//! batch: `dls-worker --speed-change`). The same plan runs with correction
//! and with `--no-adapt`, alternately, `reps` times each; the medians are
//! compared.

use super::{on_calibrated, Family, Options};
use crate::runtime::batch::Batch;
use crate::runtime::local::{self, Emulated};
use crate::runtime::pool::Pool;
use crate::session::{self, RunConfig};
use anyhow::{Context, Result};
use dls_lp::{Platform, Request, Strategy};
use dls_worker::server::SpeedChange;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The slowdown the experiment applies, as in the issue of record: 3×.
pub const FACTOR: f64 = 3.0;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdaptRow {
    pub platform: usize,
    pub speeds: Vec<(f64, f64)>,
    /// The worker slowed, and after how many of its products.
    pub slowed: String,
    pub after: u64,
    pub factor: f64,
    /// `adapt` or `no-adapt`.
    pub method: String,
    pub rep: usize,
    pub predicted: f64,
    pub measured: f64,
    pub corrections: usize,
}

/// Runs on `opts.platforms` random stars, `reps` of each method.
pub async fn adapt_local(opts: &Options, reps: usize, mut say: impl FnMut(&str)) -> Result<Vec<AdaptRow>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(opts.seed);
    let batch = Batch::random(opts.batch, opts.size, opts.seed);
    let mut rows = Vec::new();
    for k in 0..opts.platforms {
        let speeds = Family::HeterogeneousStar.speeds(&mut rng, opts.workers);
        // Calibrate on unchanged workers (the change is per batch, and
        // calibration must see the first speed), then plan.
        let platform = on_calibrated(&speeds, opts, async |_, platform| Ok(platform)).await?;
        let plan = dls_lp::plan(&platform, &Request::new(batch.count as u64, Strategy::Rounds))?;
        let victim = (0..platform.len()).max_by_key(|&w| plan.loads[w]).unwrap_or(0);
        let change = SpeedChange {
            after: plan.loads[victim] / 2,
            factor: FACTOR,
        };
        let specs: Vec<Emulated> = speeds
            .iter()
            .enumerate()
            .map(|(i, &(c, w))| Emulated {
                speed_change: (i == victim).then_some(change),
                memory: None,
                ..opts.emulation.worker(format!("w{i}"), c, w)
            })
            .collect();
        let workers = local::start_measured(&specs, opts.size).await?;
        let result = session::on_local(workers, async |pool| runs(pool, &platform, &batch, reps).await).await;
        for (rep, adapt, predicted, measured, corrections) in result? {
            rows.push(AdaptRow {
                platform: k,
                speeds: speeds.clone(),
                slowed: platform.workers()[victim].name.clone(),
                after: change.after,
                factor: FACTOR,
                method: if adapt { "adapt" } else { "no-adapt" }.into(),
                rep,
                predicted,
                measured,
                corrections,
            });
        }
        say(&format!(
            "platform #{k}: speeds {speeds:?}, {} slowed {FACTOR}× after {} products: done",
            platform.workers()[victim].name,
            change.after
        ));
    }
    Ok(rows)
}

/// (rep, adapt, predicted, measured, corrections) of every run.
async fn runs(
    pool: &mut Pool,
    platform: &Platform,
    batch: &Batch,
    reps: usize,
) -> Result<Vec<(usize, bool, f64, f64, usize)>> {
    let mut out = Vec::new();
    for rep in 0..reps {
        for adapt in [rep % 2 == 0, rep % 2 != 0] {
            let mut cfg = RunConfig {
                strategy: Strategy::Rounds,
                verify: 1,
                ..RunConfig::default()
            };
            cfg.options.adapt = adapt;
            let job = out.len() as u64 + 1;
            let d = session::run_batch(pool, platform, batch, &cfg, job, |_| {})
                .await
                .with_context(|| format!("running rounds (adapt: {adapt})"))?;
            out.push((
                rep,
                adapt,
                d.report.predicted_makespan,
                d.report.measured_makespan,
                d.report.adaptations.len(),
            ));
        }
    }
    Ok(out)
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per platform: the median of each method and their ratio.
pub fn adapt_summary(rows: &[AdaptRow]) -> Vec<(usize, f64, f64)> {
    let mut platforms: Vec<usize> = rows.iter().map(|r| r.platform).collect();
    platforms.dedup();
    platforms
        .into_iter()
        .map(|k| {
            let of = |m: &str| {
                median(
                    rows.iter()
                        .filter(|r| r.platform == k && r.method == m)
                        .map(|r| r.measured)
                        .collect(),
                )
            };
            (k, of("adapt"), of("no-adapt"))
        })
        .collect()
}

pub fn adapt_table(rows: &[AdaptRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>8} {:<9} {:>4} {:>11} {:>11} {:>6}",
        "platform", "method", "rep", "predicted", "measured", "corr."
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{:>8} {:<9} {:>4} {:>10.4}s {:>10.4}s {:>6}",
            r.platform, r.method, r.rep, r.predicted, r.measured, r.corrections
        );
    }
    for (k, a, n) in adapt_summary(rows) {
        let slowed = rows.iter().find(|r| r.platform == k).map_or("", |r| r.slowed.as_str());
        let _ = writeln!(
            s,
            "platform {k} ({slowed} slowed): median with correction {a:.4} s, without {n:.4} s: {:.1}% earlier",
            100.0 * (1.0 - a / n)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_per_platform_and_method() {
        let row = |platform, method: &str, measured| AdaptRow {
            platform,
            speeds: Vec::new(),
            slowed: "w1".into(),
            after: 10,
            factor: 3.0,
            method: method.into(),
            rep: 0,
            predicted: 1.0,
            measured,
            corrections: 0,
        };
        let rows = [
            row(0, "adapt", 1.0),
            row(0, "no-adapt", 2.0),
            row(0, "adapt", 3.0),
            row(0, "no-adapt", 1.5),
            row(0, "adapt", 1.2),
            row(0, "no-adapt", 1.6),
            row(1, "adapt", 4.0),
        ];
        let s = adapt_summary(&rows);
        assert_eq!(s[0], (0, 1.2, 1.6));
        assert_eq!(s[1].1, 4.0);
        assert!(s[1].2.is_nan());
        assert!(adapt_table(&rows).contains("25.0% earlier"), "{}", adapt_table(&rows));
    }
}
