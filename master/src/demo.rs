//! `dls demo`: the whole runtime on one machine. Four worker daemons start
//! in this process on loopback, made unequal by emulated link rates and
//! slowdowns (`configs/demo.toml`); the master calibrates them, runs the
//! same batch under several strategies, and compares what each plan
//! predicted with what happened.

use crate::output::table::{Col, Table};
use crate::runtime::batch::Batch;
use crate::runtime::calibrate::{self, CalibrateOptions};
use crate::runtime::pool::Pool;
use crate::session::{self, RunConfig};
use anyhow::{bail, Context, Result};
use dls_lp::Strategy;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;

/// The default platform, built in.
pub const DEFAULT_CONFIG: &str = include_str!("../../configs/demo.toml");

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoWorker {
    pub name: String,
    /// MB/s each way.
    pub link_rate: f64,
    pub slowdown: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoConfig {
    pub size: usize,
    pub batch: usize,
    #[serde(default)]
    pub seed: u64,
    pub strategies: Vec<String>,
    pub worker: Vec<DemoWorker>,
}

impl DemoConfig {
    pub fn parse(text: &str, origin: &str) -> Result<DemoConfig> {
        let c: DemoConfig = toml::from_str(text).with_context(|| format!("{origin}: not a valid demo file"))?;
        if c.worker.is_empty() {
            bail!("{origin}: no [[worker]]");
        }
        if c.size == 0 || c.batch == 0 {
            bail!("{origin}: size and batch must be at least 1");
        }
        for w in &c.worker {
            if !(w.link_rate.is_finite() && w.link_rate > 0.0) {
                bail!(
                    "{origin}: worker {:?}: link_rate must be a positive number of MB/s",
                    w.name
                );
            }
            if !(w.slowdown.is_finite() && w.slowdown >= 1.0) {
                bail!("{origin}: worker {:?}: slowdown must be at least 1", w.name);
            }
        }
        for s in &c.strategies {
            s.parse::<Strategy>()
                .map_err(anyhow::Error::msg)
                .with_context(|| origin.to_string())?;
        }
        Ok(c)
    }
}

/// One line of the comparison.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoRow {
    pub strategy: String,
    pub enrolled: Vec<String>,
    pub predicted: f64,
    pub measured: f64,
    pub ratio: f64,
    /// The steady-state lower bound on the makespan.
    pub bound: f64,
    pub verified: usize,
}

/// Run the demo; write `demo-trace.json` and `demo-gantt.svg` (of the first
/// strategy) into `out_dir`. Returns the comparison rows and the printed text.
pub async fn run(cfg: &DemoConfig, out_dir: &Path, mut say: impl FnMut(&str)) -> Result<Vec<DemoRow>> {
    let specs: Vec<crate::runtime::local::Emulated> = cfg
        .worker
        .iter()
        .map(|w| crate::runtime::local::Emulated {
            name: w.name.clone(),
            link_rate: Some(w.link_rate),
            slowdown: w.slowdown,
            speed_change: None,
            memory: None,
        })
        .collect();
    let local = crate::runtime::local::start_measured(&specs, cfg.size).await?;
    for (w, spec) in cfg.worker.iter().zip(&local.cluster.worker) {
        say(&format!(
            "started worker {} on {} (link {} MB/s, slowdown {}×)",
            w.name, spec.address, w.link_rate, w.slowdown
        ));
    }
    crate::session::on_local(local, async |pool| demo_runs(pool, cfg, out_dir, &mut say).await).await
}

/// Calibrate the demo's workers, then run the batch under every strategy.
async fn demo_runs(
    pool: &mut Pool,
    cfg: &DemoConfig,
    out_dir: &Path,
    say: &mut impl FnMut(&str),
) -> Result<Vec<DemoRow>> {
    {
        say(&format!(
            "calibrating {} workers with {}×{} matrices ...",
            pool.len(),
            cfg.size,
            cfg.size
        ));
        let cal = calibrate::calibrate(pool.links_mut(), &CalibrateOptions::new(cfg.size)).await?;
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<6} {:>12} {:>12} {:>12}   (seconds per product; R² send/compute/return)",
            "worker", "c", "w", "d"
        );
        for w in &cal.workers {
            let _ = writeln!(
                t,
                "{:<6} {:>12.3e} {:>12.3e} {:>12.3e}   ({:.3}/{:.3}/{:.3})",
                w.name, w.send.slope, w.compute.slope, w.ret.slope, w.send.r2, w.compute.r2, w.ret.r2
            );
            for warn in &w.warnings {
                let _ = writeln!(t, "  warning: {}: {warn}", w.name);
            }
        }
        say(t.trim_end());
        let platform = cal.platform()?;
        let batch = Batch::random(cfg.batch, cfg.size, cfg.seed);
        let mut rows = Vec::new();
        for (k, s) in cfg.strategies.iter().enumerate() {
            let strategy: Strategy = s.parse().map_err(anyhow::Error::msg)?;
            let rc = RunConfig {
                strategy,
                verify: 3,
                seed: cfg.seed,
                ..RunConfig::default()
            };
            let done = session::run_batch(pool, &platform, &batch, &rc, k as u64 + 1, |_| {})
                .await
                .with_context(|| format!("running the batch under {strategy}"))?;
            let r = &done.report;
            say(&format!(
                "{strategy:<6} predicted {:.4} s, measured {:.4} s (×{:.3}), workers {}",
                r.predicted_makespan,
                r.measured_makespan,
                r.ratio,
                r.send_order.join(" ")
            ));
            // The first strategy's trace and chart, and the chart of the
            // multi-round plan (its rounds are what it is about).
            let (trace, gantt) = match (k, strategy) {
                (0, _) => (Some("demo-trace.json"), Some("demo-gantt.svg")),
                (_, Strategy::Rounds) => (Some("demo-trace-rounds.json"), Some("demo-gantt-rounds.svg")),
                _ => (None, None),
            };
            if let (Some(trace), Some(gantt)) = (trace, gantt) {
                let (trace, gantt) = (out_dir.join(trace), out_dir.join(gantt));
                done.trace.write(&trace)?;
                let title = format!(
                    "dls demo: {} products of {}×{}, {strategy}",
                    cfg.batch, cfg.size, cfg.size
                );
                std::fs::write(&gantt, crate::output::gantt::svg(&done.trace, &title))
                    .with_context(|| format!("writing {}", gantt.display()))?;
            }
            rows.push(DemoRow {
                strategy: strategy.name().into(),
                enrolled: r.send_order.clone(),
                predicted: r.predicted_makespan,
                measured: r.measured_makespan,
                ratio: r.ratio,
                bound: r.bound,
                verified: r.verified,
            });
        }
        Ok(rows)
    }
}

/// The comparison table, normalised as the report's figures are (by the
/// first strategy's prediction).
pub fn table(rows: &[DemoRow]) -> String {
    let base = rows.first().map_or(1.0, |r| r.predicted);
    let mut t = Table::new(&[
        ("strategy", Col::Left(8)),
        ("predicted", Col::Right(11)),
        ("measured", Col::Right(11)),
        ("meas/pred", Col::Right(10)),
        ("pred/fifo", Col::Right(12)),
        ("meas/fifo", Col::Right(12)),
        ("meas/bound", Col::Right(11)),
        ("workers", Col::Tail),
    ]);
    for r in rows {
        t.row([
            r.strategy.clone(),
            format!("{:.4}s", r.predicted),
            format!("{:.4}s", r.measured),
            format!("{:.3}", r.ratio),
            format!("{:.3}", r.predicted / base),
            format!("{:.3}", r.measured / base),
            format!("{:.3}", r.measured / r.bound),
            r.enrolled.join(" "),
        ]);
    }
    t.text()
}
