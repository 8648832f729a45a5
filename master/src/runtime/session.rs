//! The library API under the CLI: connect, calibrate, plan, run a batch and
//! get the results and the trace.
//!
//! ```no_run
//! # async fn doc() -> anyhow::Result<()> {
//! use dls_master::config::cluster::Cluster;
//! use dls_master::runtime::{calibrate, link, run::Batch, session};
//! let cluster = Cluster::from_list("127.0.0.1:7070,127.0.0.1:7071")?;
//! let mut links = link::connect_all(&cluster, None, link::Timeouts::default()).await?;
//! let cal = calibrate::calibrate(&mut links, &calibrate::CalibrateOptions::new(128)).await?;
//! let platform = cal.platform()?;
//! let batch = Batch::random(1000, 128, 42);
//! let (links, done) = session::run_batch(links, &platform, &batch, &session::RunConfig::default(), 1, |_| {}).await;
//! let done = done?;
//! println!("{}", done.report.table());
//! # drop(links); Ok(()) }
//! ```

use crate::output::report::RunReport;
use crate::output::trace::Trace;
use crate::runtime::link::Link;
use crate::runtime::run::{self, Batch, Outcome, RunOptions};
use anyhow::{anyhow, bail, Result};
use dls_lp::{Plan, Platform, Ports, Request, Rounding, Strategy, Worker};
use dls_protocol::JobId;

/// How to plan and check a batch.
#[derive(Debug, Clone, Copy)]
pub struct RunConfig {
    pub strategy: Strategy,
    pub ports: Ports,
    pub rounding: Rounding,
    /// Products the master recomputes to check the results.
    pub verify: usize,
    /// Seed of the products chosen for verification.
    pub seed: u64,
    pub options: RunOptions,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            strategy: Strategy::Fifo,
            ports: Ports::One,
            rounding: Rounding::Refined,
            verify: 3,
            seed: 0,
            options: RunOptions::default(),
        }
    }
}

/// Everything a run leaves behind.
pub struct BatchRun {
    pub platform: Platform,
    pub plan: Plan,
    pub outcome: Outcome,
    pub report: RunReport,
    pub trace: Trace,
}

/// The platform in the links' order, each worker's `max_load` capped by
/// what its memory holds at this matrix size.
pub fn align(platform: &Platform, links: &[Link], n: usize) -> Result<Platform> {
    let workers = links
        .iter()
        .map(|l| {
            let w = platform.workers().iter().find(|w| w.name == l.name).ok_or_else(|| {
                anyhow!(
                    "the platform has no worker named {:?} (a worker of the cluster)",
                    l.name
                )
            })?;
            let mem = l.caps.max_products(n as u32);
            if mem == 0 {
                bail!(
                    "worker {:?}: its memory limit cannot hold one product of size {n}",
                    l.name
                );
            }
            Ok(Worker {
                max_load: Some(w.max_load.map_or(mem, |b| b.min(mem))),
                ..w.clone()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Platform::new(workers)?)
}

/// Plan `batch` on `platform` with `cfg`, run it, verify it.
pub async fn run_batch(
    links: Vec<Link>,
    platform: &Platform,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    on_chunk: impl FnMut(usize),
) -> (Vec<Link>, Result<BatchRun>) {
    if batch.m == 0 {
        return (links, Err(anyhow!("the batch is empty: give at least one product")));
    }
    let platform = match align(platform, &links, batch.n) {
        Ok(p) => p,
        Err(e) => return (links, Err(e)),
    };
    let req = Request {
        load: batch.m as u64,
        strategy: cfg.strategy,
        ports: cfg.ports,
        rounding: cfg.rounding,
    };
    let plan = match dls_lp::plan(&platform, &req) {
        Ok(p) => p,
        Err(e) => return (links, Err(anyhow!("planning {} products: {e}", batch.m))),
    };
    run_plan(links, platform, plan, batch, cfg, job, on_chunk).await
}

/// Run a plan made elsewhere (a baseline, say) on `platform` (already
/// aligned with `links`, see [`align`]), verify it, report it.
pub async fn run_plan(
    links: Vec<Link>,
    platform: Platform,
    plan: Plan,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    on_chunk: impl FnMut(usize),
) -> (Vec<Link>, Result<BatchRun>) {
    let opts = RunOptions {
        ports: cfg.ports,
        ..cfg.options
    };
    let (links, outcome) = run::execute(links, &platform, &plan, batch, JobId(job), &opts, on_chunk).await;
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return (links, Err(e)),
    };
    let verified = match run::verify(batch, &outcome.c, cfg.verify, cfg.seed) {
        Ok(v) => v,
        Err(e) => return (links, Err(e.context("verification failed"))),
    };
    let report = RunReport::from_outcome(&platform, &plan, &outcome, batch.n, verified);
    let names: Vec<String> = platform.workers().iter().map(|w| w.name.clone()).collect();
    let trace = Trace::new(&names, &plan, &outcome.measured);
    (
        links,
        Ok(BatchRun {
            platform,
            plan,
            outcome,
            report,
            trace,
        }),
    )
}
