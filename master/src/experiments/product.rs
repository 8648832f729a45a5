//! The assessment of `lastovetsky-performance-analysis` for one large
//! product: the heterogeneous distribution against its homogeneous
//! prototype on the same heterogeneous star (the paper's speedup, its
//! Figs. 6–7), and the heterogeneous distribution on the heterogeneous
//! star against the homogeneous one on the *equivalent* homogeneous star
//! (as many workers, each of the average speed, the same links: the
//! paper's criterion of optimality, its Fig. 8). Emulated workers; by
//! default the paper's nine relative speeds, 26, 20, 14 (five), 9 and 1,
//! on equal links.

use super::Emulation;
use crate::output::table::{Col, Table};
use crate::runtime::data::Discard;
use crate::runtime::local::{self, Emulated};
use crate::runtime::product::ProductJob;
use crate::session::{self, ProductConfig};
use anyhow::{Context, Result};
use dls_lp::product::Distribution;
use dls_protocol::{DType, Form};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The paper's workstations (its section 6): relative speeds 26, 20, 14,
/// 14, 14, 14, 14, 9 and 1 on one switched segment, as (link, compute)
/// speeds.
pub fn paper_speeds() -> Vec<(f64, f64)> {
    [26.0, 20.0, 14.0, 14.0, 14.0, 14.0, 14.0, 9.0, 1.0]
        .iter()
        .map(|&w| (10.0, w))
        .collect()
}

/// The equivalent homogeneous star: as many workers, each with the
/// average compute speed and the average link.
pub fn equivalent(speeds: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let p = speeds.len().max(1) as f64;
    let c = speeds.iter().map(|s| s.0).sum::<f64>() / p;
    let w = speeds.iter().map(|s| s.1).sum::<f64>() / p;
    vec![(c, w); speeds.len()]
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProductRow {
    pub n: usize,
    /// `heterogeneous` or `equivalent homogeneous`.
    pub star: String,
    /// `heterogeneous` or `homogeneous`.
    pub distribution: String,
    pub speeds: String,
    pub enrolled: usize,
    pub measured: f64,
    pub predicted: f64,
    pub bound: f64,
    /// The partition's communication over `2·k·Σ√a`.
    pub partition_over_lower: f64,
}

/// Side of the square products calibration and the emulated speeds are
/// measured with.
const CALIBRATION_SIDE: usize = 384;

/// Run the assessment for an n×n product: on the heterogeneous star both
/// distributions, on the equivalent homogeneous star the homogeneous one.
pub async fn product_local(
    n: usize,
    speeds: &[(f64, f64)],
    emulation: Emulation,
    seed: u64,
    mut say: impl FnMut(&str),
) -> Result<Vec<ProductRow>> {
    let form = Form::square(CALIBRATION_SIDE as u32);
    let job = Arc::new(ProductJob::random(n, n, n, DType::F64, seed)?);
    let mut rows = Vec::new();
    // (distribution, whether workers whose links do not pay off are left out)
    let het = [
        (Distribution::Heterogeneous, true),
        (Distribution::Heterogeneous, false),
        (Distribution::Homogeneous, false),
    ];
    let stars = [
        ("heterogeneous", speeds.to_vec(), &het[..]),
        ("equivalent homogeneous", equivalent(speeds), &het[2..]),
    ];
    for (star, sp, distributions) in stars {
        let specs: Vec<Emulated> = sp
            .iter()
            .enumerate()
            .map(|(i, &(c, w))| emulation.worker(format!("w{i}"), c, w))
            .collect();
        let workers = local::start_measured(&specs, CALIBRATION_SIDE).await?;
        let got = session::on_local(workers, async |pool| {
            let platform = super::calibrated(pool, CALIBRATION_SIDE).await?;
            let mut out = Vec::new();
            for &(d, select) in distributions {
                let label = match (d, select) {
                    (Distribution::Heterogeneous, false) => "heterogeneous (every worker)",
                    _ => name(d),
                };
                say(&format!("n = {n}: {star} star, {label} distribution"));
                let cfg = ProductConfig {
                    distribution: d,
                    ports: Some(1),
                    select,
                    ..ProductConfig::default()
                };
                let done = session::run_product_on(pool, &platform, &form, job.clone(), &cfg, &mut Discard, |_| {})
                    .await
                    .with_context(|| format!("{star} star, {label} distribution"))?;
                out.push(ProductRow {
                    n,
                    star: star.to_string(),
                    distribution: label.to_string(),
                    speeds: super::speeds_label(&sp),
                    enrolled: done.plan.enrolled.len(),
                    measured: done.measured.end,
                    predicted: done.plan.makespan(),
                    bound: done.plan.bound.makespan,
                    partition_over_lower: done.plan.bound.partition as f64 / done.plan.bound.lower,
                });
            }
            Ok(out)
        })
        .await?;
        rows.extend(got);
    }
    Ok(rows)
}

fn name(d: Distribution) -> &'static str {
    match d {
        Distribution::Heterogeneous => "heterogeneous",
        Distribution::Homogeneous => "homogeneous",
    }
}

/// The rows, then per size the paper's two ratios: the speedup of the
/// heterogeneous distribution over the homogeneous one on the
/// heterogeneous star, and the heterogeneous star's time over the
/// equivalent homogeneous star's (1 is the paper's optimum).
pub fn product_table(rows: &[ProductRow]) -> String {
    let mut t = Table::new(&[
        ("n", Col::Right(6)),
        ("star", Col::Left(23)),
        ("distribution", Col::Left(28)),
        ("enrolled", Col::Right(8)),
        ("measured", Col::Right(9)),
        ("predicted", Col::Right(9)),
        ("bound", Col::Right(8)),
        ("meas/bound", Col::Right(10)),
        ("comm/lower", Col::Right(10)),
    ]);
    for r in rows {
        t.row([
            r.n.to_string(),
            r.star.clone(),
            r.distribution.clone(),
            r.enrolled.to_string(),
            format!("{:.3}s", r.measured),
            format!("{:.3}s", r.predicted),
            format!("{:.3}s", r.bound),
            format!("{:.3}", r.measured / r.bound),
            format!("{:.3}", r.partition_over_lower),
        ]);
    }
    let mut s = t.text();
    let mut sizes: Vec<usize> = rows.iter().map(|r| r.n).collect();
    sizes.dedup();
    for n in sizes {
        let find = |star: &str, d: &str| {
            rows.iter()
                .find(|r| r.n == n && r.star == star && r.distribution == d)
                .map(|r| r.measured)
        };
        let het = find("heterogeneous", "heterogeneous");
        if let (Some(het), Some(hom)) = (het, find("heterogeneous", "homogeneous")) {
            s.push_str(&format!(
                "n = {n}: heterogeneous distribution {:.2}× faster than the homogeneous one on the same star ({:.3} of its time)\n",
                hom / het,
                het / hom
            ));
        }
        let every = find("heterogeneous", "heterogeneous (every worker)");
        for (what, t) in [("heterogeneous", het), ("heterogeneous on every worker", every)] {
            if let (Some(t), Some(eq)) = (t, find("equivalent homogeneous", "homogeneous")) {
                s.push_str(&format!(
                    "n = {n}: {what}, {:.3}× the time of the homogeneous prototype on the equivalent homogeneous star (1 is the paper's optimum)\n",
                    t / eq
                ));
            }
        }
    }
    s
}
