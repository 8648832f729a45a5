//! `dls experiment`: the report's experiments (section 5), on emulated
//! workers on this machine or on a real cluster.
//!
//! - `linearity`: time against message size for every worker (Figure 8);
//! - `heuristics`: random platforms (speeds 1 to 10, 1 the base) of three
//!   families, homogeneous bus, heterogeneous bus and heterogeneous star;
//!   LIFO, INC_C, INC_W and `best`, measured and predicted, normalised by
//!   INC_C's prediction (Figures 10–12);
//! - `participation`: the 4-worker platform of section 5.3.4 with x = 1 and
//!   x = 3, allowing 1 to 4 workers (Figure 14);
//! - `baselines`: one-round plans, `rounds`, and what users would do
//!   instead (equal and proportional splits, self-scheduling, factoring);
//! - `adapt`: `rounds` with and without online correction when a worker
//!   slows down partway through the batch;
//! - `product`: one large product, the heterogeneous 2-D distribution
//!   against its homogeneous prototype (`lastovetsky-performance-analysis`).
//!
//! Emulation maps a speed s to a link of `s × base_link` MB/s and a compute
//! slowdown of `base_slowdown / s` (so speed 1 is the slowest, as in the
//! report's set-up).

mod adapt;
mod baselines;
mod heuristics;
mod linearity;
mod participation;
mod product;

pub use crate::output::svg::bars;
pub use adapt::{adapt_local, adapt_summary, adapt_table, AdaptRow};
pub use baselines::{baselines_local, baselines_on, baselines_table, BaselineRow};
pub use heuristics::{
    heuristics_cluster, heuristics_local, heuristics_table, summarise, HeuristicsRow, HeuristicsSummary, HEURISTICS,
};
pub use linearity::{linearity, linearity_table, LinearityRow};
pub use participation::{
    participation, participation_on, participation_speeds, participation_table, ParticipationRow,
    PARTICIPATION_COMM_RATIO,
};
pub use product::{equivalent, paper_speeds, product_local, product_table, ProductRow};

use crate::runtime::batch::Batch;
use crate::runtime::calibrate::{self, CalibrateOptions};
use crate::runtime::local::{self, Emulated};
use crate::runtime::pool::Pool;
use crate::session::{self, RunConfig};
use anyhow::{Context, Result};
use dls_lp::{Platform, Strategy};
use rand::Rng;
use serde::{Deserialize, Deserializer, Serialize};

/// JSON has no NaN (serde_json writes it as null): read null back as NaN.
pub(crate) fn nan_if_null<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Parse `c:w,c:w,...` (communication and computation speeds per worker).
pub fn parse_speeds(s: &str) -> Result<Vec<(f64, f64)>> {
    s.split(',')
        .map(|pair| {
            let (c, w) = pair
                .split_once(':')
                .ok_or_else(|| anyhow::anyhow!("speeds: {pair:?} is not COMM:COMP (e.g. 3:7)"))?;
            let num = |v: &str| match v.trim().parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
                _ => Err(anyhow::anyhow!("speeds: {v:?} in {pair:?} is not a positive number")),
            };
            Ok((num(c)?, num(w)?))
        })
        .collect()
}

/// `c:w c:w ...` (space-separated, to sit in one CSV field; empty for none).
pub fn speeds_label(speeds: &[(f64, f64)]) -> String {
    speeds
        .iter()
        .map(|(c, w)| format!("{c}:{w}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How speeds become emulated workers.
#[derive(Debug, Clone, Copy)]
pub struct Emulation {
    /// MB/s of a speed-1 link.
    pub base_link: f64,
    /// Compute slowdown of a speed-1 processor.
    pub base_slowdown: f64,
}

impl Default for Emulation {
    fn default() -> Self {
        Emulation {
            base_link: 32.0,
            base_slowdown: 2000.0,
        }
    }
}

impl Emulation {
    pub fn worker(&self, name: String, comm: f64, comp: f64) -> Emulated {
        Emulated {
            name,
            link_rate: Some(self.base_link * comm),
            slowdown: (self.base_slowdown / comp).max(1.0),
            speed_change: None,
            memory: None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub size: usize,
    pub batch: usize,
    pub seed: u64,
    /// Random platforms per family (heuristics).
    pub platforms: usize,
    pub workers: usize,
    pub emulation: Emulation,
}

/// As `dls calibrate` measures: three probes of each size, their median.
/// The report's experiments weigh plans against costs measured with
/// probes of up to two seconds and 32 MiB (the calibration of `dls
/// calibrate` stops at 10 ms and 16 MiB, which is fast but leaves small
/// products' costs noisier), under the report's one port (the port model
/// is not measured): their results reproduce as before.
pub(crate) fn calibrate_opts(size: usize) -> CalibrateOptions {
    CalibrateOptions {
        max_probe_seconds: 2.0,
        max_probe_bytes: 32 << 20,
        ports: false,
        ..CalibrateOptions::new(size)
    }
}

/// Calibrate the pool's workers into a platform.
pub async fn calibrated(pool: &mut Pool, size: usize) -> Result<Platform> {
    calibrate::calibrate(pool.links_mut(), &calibrate_opts(size))
        .await?
        .platform()
}

/// Run `strategies` on `links`, one batch each; (strategy, report).
pub(crate) async fn run_all(
    pool: &mut Pool,
    platform: &Platform,
    batch: &Batch,
    strategies: &[Strategy],
) -> Result<Vec<crate::output::report::RunReport>> {
    let mut out = Vec::new();
    for (k, &strategy) in strategies.iter().enumerate() {
        // The report's rounding: extra units only to enrolled workers, so
        // who takes part is the LP's decision.
        let cfg = RunConfig {
            strategy,
            verify: 1,
            rounding: dls_lp::Rounding::Paper,
            ..RunConfig::default()
        };
        let done = session::run_batch(pool, platform, batch, &cfg, k as u64 + 1, |_| {}).await;
        out.push(done.with_context(|| format!("running {strategy}"))?.report);
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    HomogeneousBus,
    HeterogeneousBus,
    HeterogeneousStar,
    /// A real cluster, as it is.
    Cluster,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::HomogeneousBus => "homogeneous-bus",
            Family::HeterogeneousBus => "heterogeneous-bus",
            Family::HeterogeneousStar => "heterogeneous-star",
            Family::Cluster => "cluster",
        }
    }

    /// (communication, computation) speeds, from 1 to 10.
    pub(crate) fn speeds(self, r: &mut impl Rng, p: usize) -> Vec<(f64, f64)> {
        let mut s = || r.random_range(1.0..=10.0f64).round();
        match self {
            Family::HomogeneousBus | Family::Cluster => {
                let (c, w) = (s(), s());
                vec![(c, w); p]
            }
            Family::HeterogeneousBus => {
                let c = s();
                (0..p).map(|_| (c, s())).collect()
            }
            Family::HeterogeneousStar => (0..p).map(|_| (s(), s())).collect(),
        }
    }
}

/// Start emulated workers with these (communication, computation) speeds,
/// connect to them, calibrate them and do `work` with the pool and the
/// platform; the pool is closed and the workers stopped whatever happens.
pub(crate) async fn on_calibrated<T>(
    speeds: &[(f64, f64)],
    opts: &Options,
    work: impl AsyncFnOnce(&mut Pool, Platform) -> Result<T>,
) -> Result<T> {
    let specs: Vec<Emulated> = speeds
        .iter()
        .enumerate()
        .map(|(i, &(c, w))| opts.emulation.worker(format!("w{i}"), c, w))
        .collect();
    let workers = local::start_measured(&specs, opts.size).await?;
    session::on_local(workers, async |pool| {
        let platform = calibrated(pool, opts.size).await?;
        work(pool, platform).await
    })
    .await
}

/// Mean and standard deviation.
pub(crate) fn stats(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
    (m, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_parse_and_label() {
        let s = parse_speeds("10:9, 8:9,3:1").expect("parses");
        assert_eq!(s, vec![(10.0, 9.0), (8.0, 9.0), (3.0, 1.0)]);
        assert_eq!(speeds_label(&s), "10:9 8:9 3:1");
        for bad in ["", "3", "3:x", "0:1", "1:-2", "1:2,,3:4", "inf:1"] {
            let e = parse_speeds(bad).expect_err(bad).to_string();
            assert!(e.starts_with("speeds:"), "{bad}: {e}");
        }
    }
}
