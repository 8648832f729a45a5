//! Random platforms of three families; LIFO, INC_C, INC_W and `best`,
//! measured and predicted, normalised by INC_C's prediction (the report's
//! Figures 10–12).

use super::{calibrated, nan_if_null, on_calibrated, run_all, stats, Family, Options};
use crate::output::table::{Col, Table};
use crate::runtime::batch::Batch;
use crate::runtime::pool::Pool;
use anyhow::Result;
use dls_lp::Strategy;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeuristicsRow {
    pub family: Family,
    pub platform: usize,
    pub speeds: Vec<(f64, f64)>,
    pub strategy: String,
    pub predicted: f64,
    pub measured: f64,
    /// INC_C's predicted makespan on the same platform (the normaliser).
    #[serde(deserialize_with = "nan_if_null")]
    pub inc_c_predicted: f64,
}

pub const HEURISTICS: [Strategy; 4] = [Strategy::Lifo, Strategy::IncC, Strategy::IncW, Strategy::Best];

fn heuristics_rows(
    family: Family,
    k: usize,
    speeds: &[(f64, f64)],
    reports: &[crate::output::report::RunReport],
) -> Vec<HeuristicsRow> {
    let inc_c = reports
        .iter()
        .find(|r| r.strategy == "inc-c")
        .map_or(f64::NAN, |r| r.predicted_makespan);
    reports
        .iter()
        .map(|r| HeuristicsRow {
            family,
            platform: k,
            speeds: speeds.to_vec(),
            strategy: r.strategy.clone(),
            predicted: r.predicted_makespan,
            measured: r.measured_makespan,
            inc_c_predicted: inc_c,
        })
        .collect()
}

/// Emulated platforms of every family, `opts.platforms` of each.
pub async fn heuristics_local(opts: &Options, mut say: impl FnMut(&str)) -> Result<Vec<HeuristicsRow>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(opts.seed);
    let batch = Batch::random(opts.batch, opts.size, opts.seed);
    let mut rows = Vec::new();
    for family in [
        Family::HomogeneousBus,
        Family::HeterogeneousBus,
        Family::HeterogeneousStar,
    ] {
        for k in 0..opts.platforms {
            let speeds = family.speeds(&mut rng, opts.workers);
            let reports = on_calibrated(&speeds, opts, async |pool, platform| {
                run_all(pool, &platform, &batch, &HEURISTICS).await
            })
            .await?;
            say(&format!("{} #{k}: speeds {speeds:?} done", family.name()));
            rows.extend(heuristics_rows(family, k, &speeds, &reports));
        }
    }
    Ok(rows)
}

/// The same strategies, `opts.platforms` times, on a real cluster. The rows
/// are labelled `family` and `speeds` (a test bed built from drawn speeds
/// says which), and numbered from `first`.
pub async fn heuristics_cluster(
    pool: &mut Pool,
    opts: &Options,
    family: Family,
    speeds: &[(f64, f64)],
    first: usize,
) -> Result<Vec<HeuristicsRow>> {
    let platform = calibrated(pool, opts.size).await?;
    let mut rows = Vec::new();
    for k in 0..opts.platforms {
        let batch = Batch::random(opts.batch, opts.size, opts.seed + k as u64);
        let reports = run_all(pool, &platform, &batch, &HEURISTICS).await?;
        rows.extend(heuristics_rows(family, first + k, speeds, &reports));
    }
    Ok(rows)
}

/// Per family and strategy: mean (and spread) of predicted and measured
/// makespans normalised by INC_C's prediction.
#[derive(Debug, Clone, Serialize)]
pub struct HeuristicsSummary {
    pub family: String,
    pub strategy: String,
    pub predicted_mean: f64,
    pub measured_mean: f64,
    pub measured_std: f64,
    pub measured_over_predicted_mean: f64,
    /// The largest |measured / predicted − 1| of any one run.
    pub measured_over_predicted_worst: f64,
}

pub fn summarise(rows: &[HeuristicsRow]) -> Vec<HeuristicsSummary> {
    let mut out = Vec::new();
    // Each family once, in order of first appearance (rows gathered with
    // --append may come in any order).
    let mut families: Vec<Family> = Vec::new();
    for r in rows {
        if !families.contains(&r.family) {
            families.push(r.family);
        }
    }
    for f in families {
        for s in HEURISTICS {
            let sel: Vec<&HeuristicsRow> = rows
                .iter()
                .filter(|r| r.family == f && r.strategy == s.name())
                .collect();
            if sel.is_empty() {
                continue;
            }
            let pred: Vec<f64> = sel.iter().map(|r| r.predicted / r.inc_c_predicted).collect();
            let meas: Vec<f64> = sel.iter().map(|r| r.measured / r.inc_c_predicted).collect();
            let ratio: Vec<f64> = sel.iter().map(|r| r.measured / r.predicted).collect();
            let (mm, ms) = stats(&meas);
            out.push(HeuristicsSummary {
                family: f.name().into(),
                strategy: s.name().into(),
                predicted_mean: stats(&pred).0,
                measured_mean: mm,
                measured_std: ms,
                measured_over_predicted_mean: stats(&ratio).0,
                measured_over_predicted_worst: ratio.iter().map(|r| (r - 1.0).abs()).fold(0.0, f64::max),
            });
        }
    }
    out
}

pub fn heuristics_table(summary: &[HeuristicsSummary]) -> String {
    let mut t = Table::new(&[
        ("family", Col::Left(20)),
        ("strategy", Col::Left(6)),
        ("pred/inc-c", Col::Right(12)),
        ("meas/inc-c", Col::Right(12)),
        ("± std", Col::Right(10)),
        ("meas/pred", Col::Right(12)),
        ("worst run", Col::Right(12)),
    ]);
    for r in summary {
        t.row([
            r.family.clone(),
            r.strategy.clone(),
            format!("{:.3}", r.predicted_mean),
            format!("{:.3}", r.measured_mean),
            format!("{:.3}", r.measured_std),
            format!("{:.3}", r.measured_over_predicted_mean),
            format!("{:.1}%", 100.0 * r.measured_over_predicted_worst),
        ]);
    }
    t.text()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(family: Family, strategy: Strategy, measured: f64) -> HeuristicsRow {
        HeuristicsRow {
            family,
            platform: 0,
            speeds: vec![(1.0, 1.0)],
            strategy: strategy.name().into(),
            predicted: 1.0,
            measured,
            inc_c_predicted: 1.0,
        }
    }

    #[test]
    fn summaries_group_families_in_any_order() {
        // Appended runs: star, bus, star again.
        let rows = [
            row(Family::HeterogeneousStar, Strategy::Lifo, 1.0),
            row(Family::HeterogeneousBus, Strategy::Lifo, 5.0),
            row(Family::HeterogeneousStar, Strategy::Lifo, 3.0),
        ];
        let s = summarise(&rows);
        assert_eq!(s.len(), 2, "one summary per family and strategy");
        let star = s.iter().find(|x| x.family == "heterogeneous-star").expect("star");
        assert_eq!(star.measured_mean, 2.0);
        let bus = s.iter().find(|x| x.family == "heterogeneous-bus").expect("bus");
        assert_eq!(bus.measured_mean, 5.0);
    }
}
