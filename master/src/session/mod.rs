//! The library API under the CLI: connect, calibrate, plan, run a batch and
//! get the results and the trace.
//!
//! ```no_run
//! # async fn doc() -> anyhow::Result<()> {
//! use dls_master::config::cluster::Cluster;
//! use dls_master::session::{self, Batch, RunConfig, Workers};
//! let cluster = Cluster::from_list("127.0.0.1:7070,127.0.0.1:7071")?;
//! let workers = Workers::new(cluster, None);
//! let batch = Batch::random(1000, 128, 42);
//! let mut results = batch.memory_sink()?;
//! let done = session::run(&workers, None, None, &batch, &RunConfig::default(), &mut results, |_| {}).await?;
//! println!("{}", done.report.table());
//! # Ok(()) }
//! ```

use crate::output::report::RunReport;
use crate::output::trace::Trace;
use crate::runtime::shell::{self, Results};
use crate::runtime::{batch, log};
use anyhow::{anyhow, bail, Result};
use dls_lp::{Plan, Platform, Ports, Request, Rounding, Strategy, Worker};
use dls_protocol::{Form, JobId};
use std::collections::BTreeMap;
use tokio::task::JoinHandle;

mod cold;
mod product;
mod workers;
pub use product::{calibration_form, product_costs, run_product_on, ProductConfig, ProductRun};
pub use workers::{on_local, run, RunError, Workers};

// The runtime beneath the session is private; these are the parts a
// caller names: the batch and where its data comes from and goes, the
// pool a session holds, calibration, emulated workers on this machine,
// and the master's check of a product (for its benchmark).
pub use crate::runtime::batch::Batch;
pub use crate::runtime::calibrate::{calibrate, calibrate_available, CalibrateOptions, Calibration};
pub use crate::runtime::check;
pub use crate::runtime::data::{Discard, External, InputFile, MemorySink, Sink, Source};
pub use crate::runtime::link::{ConnectOptions, Link};
pub use crate::runtime::local::{self, Emulated, LocalWorkers};
pub use crate::runtime::pool::{LeftOut, Pool};
pub use crate::runtime::product::shell::ProductOptions;
pub use crate::runtime::product::{Blocks, Matrix, MemoryC, ProductJob};
pub use crate::runtime::shell::{Outcome, RunOptions};
pub use cold::probe_loads;

/// How to plan and check a batch.
#[derive(Debug, Clone, Copy)]
pub struct RunConfig {
    pub strategy: Strategy,
    /// The port model to plan for (the run follows the plan's); `None`:
    /// the one measured ([`Platform::measured_ports`]: behind the uplink
    /// the platform records, one port when it records none).
    pub ports: Option<Ports>,
    /// Behind a shared uplink, plans may hold some workers' sends below
    /// their links' rates so that they fit beside others' (`dls_lp::pace`).
    pub pace: bool,
    pub rounding: Rounding,
    /// Products the master recomputes to check the results.
    pub verify: usize,
    /// Seed of the products chosen for verification.
    pub seed: u64,
    /// How long a run with a platform waits for its plan before it opens
    /// the batch ([`run_batch_into`]; [`OPEN_AFTER`] by default).
    pub open_after: std::time::Duration,
    pub options: RunOptions,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            strategy: Strategy::Best,
            ports: None,
            pace: true,
            rounding: Rounding::Refined,
            verify: 3,
            seed: 0,
            open_after: OPEN_AFTER,
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
    /// Seconds spent planning it (0 for a plan made elsewhere).
    pub plan_secs: f64,
    /// When its first chunk went out at the earliest (a probe's, when the
    /// run calibrated inside itself).
    pub first_send: std::time::Instant,
    /// An opened batch's: seconds from its first send to its rest being
    /// planned (nothing but the opening was sent before).
    pub rest_at: Option<f64>,
}

/// The platform in the links' order, each worker's `max_load` capped by
/// what its memory holds of these products.
pub fn align(platform: &Platform, links: &[Link], form: &Form) -> Result<Platform> {
    let workers = links
        .iter()
        .map(|l| {
            // By name, else by address: a platform file may name its
            // workers either way.
            let w = platform
                .workers()
                .iter()
                .find(|w| w.name == l.name)
                .or_else(|| platform.workers().iter().find(|w| w.name == l.address))
                .ok_or_else(|| {
                    anyhow!(
                        "the platform has no worker named {:?} or {:?} (a worker of the cluster)",
                        l.name,
                        l.address
                    )
                })?;
            let mem = l.caps.max_products(form);
            if mem == 0 {
                bail!(
                    "worker {:?}: its memory limit cannot hold one product of {form}",
                    l.name
                );
            }
            Ok(Worker {
                name: l.name.clone(),
                max_load: Some(w.max_load.map_or(mem, |b| b.min(mem))),
                ..w.clone()
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Platform::new(workers)?.with_uplink(platform.uplink()))
}

/// Plan `batch` on `platform` with `cfg`, run it, verify it; C comes
/// back in memory (`outcome.c`).
pub async fn run_batch(
    pool: &mut Pool,
    platform: &Platform,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    on_chunk: impl FnMut(usize) + Send,
) -> Result<BatchRun> {
    let t0 = std::time::Instant::now();
    let (platform, plan) = plan_for(pool, platform, batch, cfg)?;
    let plan_secs = t0.elapsed().as_secs_f64();
    let mut done = run_plan(pool, platform, plan, batch, cfg, job, on_chunk).await?;
    done.plan_secs = plan_secs;
    Ok(done)
}

/// As [`run_batch`], with every product's C given to `sink` as it arrives
/// (an output file, say), so the master never holds the batch's results.
/// A plan that takes longer than [`OPEN_AFTER`] to make has the batch
/// opened meanwhile (`dls_lp::opening`): its first chunk goes out, and the
/// plan of the whole, made beside it, runs the rest.
pub async fn run_batch_into(
    pool: &mut Pool,
    platform: &Platform,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    sink: &mut dyn Sink,
    mut on_chunk: impl FnMut(usize) + Send,
) -> Result<BatchRun> {
    let t0 = std::time::Instant::now();
    let (platform, req) = prepare(pool, platform, batch, cfg)?;
    let (tx, rx) = std::sync::mpsc::channel();
    let mut planning = {
        let (platform, pace, count) = (platform.clone(), cfg.pace, batch.count);
        tokio::task::spawn_blocking(move || {
            let planned = plan_prepared(&platform, &req, pace, count)?;
            let _ = tx.send(planned.clone());
            Ok(planned)
        })
    };
    let into = results(batch, cfg, sink, &mut on_chunk);
    let beside = beside_the_run(batch, &into, rx);
    // Only plans that search open: the others are made in milliseconds.
    let searches = matches!(req.strategy, Strategy::Best | Strategy::Rounds) && cfg.options.self_schedule.is_none();
    let opening = dls_lp::opening::choose(&platform, req.ports, req.load).filter(|_| searches);
    // The plan, if it runs whole: it came within `open_after` (no wait at
    // all with 0), or there is nothing to open with.
    let whole = match opening {
        None => Some((&mut planning).await),
        Some(_) if cfg.open_after.is_zero() => None,
        Some(_) => tokio::time::timeout(cfg.open_after, &mut planning).await.ok(),
    };
    let internal = |e: tokio::task::JoinError| anyhow!("internal error: planning the batch: {e}");
    let Some(opening) = opening.filter(|_| whole.is_none()) else {
        let (platform, plan) = whole.expect("planned whole").map_err(internal)??;
        let plan_secs = t0.elapsed().as_secs_f64();
        let mut done = run_planned(pool, platform, Run::Whole(plan), beside, batch, cfg, job, into).await?;
        done.plan_secs = plan_secs;
        return Ok(done);
    };
    let waited = t0.elapsed().as_secs_f64();
    let o = shell::Opening {
        opening,
        first: opening_plan(&platform, opening, req.ports)?,
        planning,
    };
    let mut done = run_planned(pool, platform, Run::Opened(o), beside, batch, cfg, job, into).await?;
    done.plan_secs = waited + done.rest_at.unwrap_or(0.0);
    Ok(done)
}

/// How long a run waits for its plan before it opens the batch: plans
/// made quicker run whole, as planned.
pub const OPEN_AFTER: std::time::Duration = std::time::Duration::from_millis(20);

/// The plan that carries an opening: its one chunk.
fn opening_plan(platform: &Platform, o: dls_lp::opening::Opening, ports: Ports) -> Result<Plan> {
    let mut loads = vec![0; platform.len()];
    loads[o.worker] = o.units;
    let mut order: Vec<usize> = (0..platform.len()).collect();
    order.swap(0, o.worker);
    dls_lp::baseline::with_loads(platform, order, loads, ports).map_err(|e| anyhow!("planning the opening: {e}"))
}

/// The platform aligned with the pool's links and the request that plans
/// `batch` on it with `cfg`.
fn prepare(pool: &Pool, platform: &Platform, batch: &Batch, cfg: &RunConfig) -> Result<(Platform, Request)> {
    if batch.count == 0 {
        bail!("the batch is empty: give at least one product");
    }
    let platform = align(platform, pool.links(), &batch.form)?;
    let ports = cfg.ports.unwrap_or_else(|| platform.measured_ports());
    // Costs measured under load hold only where a send and a return cross.
    let platform = platform.for_ports(ports);
    let req = Request {
        load: batch.count as u64,
        strategy: cfg.strategy,
        ports,
        rounding: cfg.rounding,
    };
    Ok((platform, req))
}

/// The plan of `req` on `platform` (paced if `pace`), with `platform`:
/// the links' costs, whatever the plan's paces ([`Plan::costs_on`] gives
/// those it was timed on); `count` names the batch in an error.
fn plan_prepared(platform: &Platform, req: &Request, pace: bool, count: usize) -> Result<(Platform, Plan)> {
    let planned = if pace {
        dls_lp::plan_paced(platform, req)
    } else {
        dls_lp::plan(platform, req)
    };
    let plan = planned.map_err(|e| anyhow!("planning {count} products: {e}"))?;
    Ok((platform.clone(), plan))
}

/// The platform aligned with the pool's links and the plan of `batch` on
/// it with `cfg`.
fn plan_for(pool: &Pool, platform: &Platform, batch: &Batch, cfg: &RunConfig) -> Result<(Platform, Plan)> {
    let (platform, req) = prepare(pool, platform, batch, cfg)?;
    plan_prepared(&platform, &req, cfg.pace, batch.count)
}

/// Run a plan made elsewhere (a baseline, say) on `platform` (already
/// aligned with the pool's links, see [`align`]), verify it, report it.
/// The port model is the plan's. C comes back in memory.
pub async fn run_plan(
    pool: &mut Pool,
    platform: Platform,
    plan: Plan,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    mut on_chunk: impl FnMut(usize) + Send,
) -> Result<BatchRun> {
    let mut sink = batch.memory_sink()?;
    let into = results(batch, cfg, &mut sink, &mut on_chunk);
    let mut done = run_plan_into(pool, platform, plan, batch, cfg, job, into).await?;
    done.outcome.c = sink.0; // the memory sink's values are the results
    Ok(done)
}

/// Where a run's results go: `sink`, and the products `cfg` verifies kept.
fn results<'a>(
    batch: &Batch,
    cfg: &RunConfig,
    sink: &'a mut dyn Sink,
    on_chunk: &'a mut (dyn FnMut(usize) + Send),
) -> Results<'a> {
    Results {
        sink,
        keep: batch::picks(batch.count, cfg.verify, cfg.seed).into_iter().collect(),
        on_chunk,
    }
}

/// Run `plan`, verify the products `results` keeps, report.
async fn run_plan_into(
    pool: &mut Pool,
    platform: Platform,
    plan: Plan,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    results: Results<'_>,
) -> Result<BatchRun> {
    let (tx, rx) = std::sync::mpsc::channel();
    let _ = tx.send((platform.clone(), plan.clone()));
    let beside = beside_the_run(batch, &results, rx);
    run_planned(pool, platform, Run::Whole(plan), beside, batch, cfg, job, results).await
}

/// What a run carries out: a plan, or an opening with the plan of the
/// whole batch under way.
enum Run {
    Whole(Plan),
    Opened(shell::Opening),
}

/// Run what `run` says on `platform` (the plan's, or the opening's),
/// verify the products `results` keeps, report on the plan of the whole.
#[allow(clippy::too_many_arguments)]
async fn run_planned(
    pool: &mut Pool,
    platform: Platform,
    run: Run,
    beside: JoinHandle<Beside>,
    batch: &Batch,
    cfg: &RunConfig,
    job: u64,
    results: Results<'_>,
) -> Result<BatchRun> {
    let (id, opts) = (JobId(job), &cfg.options);
    let (platform, plan, outcome, at) = match run {
        Run::Whole(plan) => {
            log::plan(
                &platform,
                &plan,
                crate::output::report::steady_state_bound(&platform, &plan),
            );
            let outcome =
                shell::execute(pool, &platform, shell::Planned::Whole(&plan), batch, id, opts, results).await?;
            (platform, plan, outcome, None)
        }
        Run::Opened(o) => {
            let mut outcome = shell::execute(
                pool,
                &platform,
                shell::Planned::Opening(Box::new(o)),
                batch,
                id,
                opts,
                results,
            )
            .await?;
            let shell::Opened { platform, plan, at } = (outcome.opened.take())
                .ok_or_else(|| anyhow!("internal error: an opened batch ended without the plan of its rest"))?;
            (platform, plan, outcome, Some(at))
        }
    };
    let form = batch.form;
    log::end(&platform, &plan, &outcome.measured, |n| {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        (form.in_bytes(n), form.out_bytes(n))
    });
    let Beside { efficiency, references } = beside
        .await
        .map_err(|e| anyhow!("internal error: the work beside the run: {e}"))?;
    let verified =
        batch::verify_with(batch, &outcome.kept, references).map_err(|e| e.context("verification failed"))?;
    let report = RunReport::from_outcome(&platform, &plan, &outcome, &batch.form, verified, efficiency);
    let names: Vec<String> = platform.workers().iter().map(|w| w.name.clone()).collect();
    let mut trace = Trace::new(&names, &plan, &outcome.measured);
    trace.title = Some(format!("{} products of {}, {}", batch.count, batch.form, plan.strategy));
    let first_send = outcome.started;
    Ok(BatchRun {
        platform,
        plan,
        outcome,
        report,
        trace,
        plan_secs: 0.0,
        first_send,
        rest_at: at,
    })
}

/// What a run's report needs that does not depend on its results, worked
/// out off the async threads while the run goes on rather than after it
/// (after it, they added 0.1-0.2 s to a run of 300 products of 256×256):
/// the naive products the master checks results by, and the plan's
/// efficiency against the equivalent homogeneous platform (a plan of its
/// own) once `plan` brings the plan (none if it never does).
fn beside_the_run(
    batch: &Batch,
    results: &Results<'_>,
    plan: std::sync::mpsc::Receiver<(Platform, Plan)>,
) -> JoinHandle<Beside> {
    let batch = batch.clone();
    let picks: Vec<usize> = results.keep.iter().copied().collect();
    tokio::task::spawn_blocking(move || {
        let references = batch::references(&batch, &picks);
        let efficiency = plan
            .recv()
            .ok()
            .and_then(|(platform, plan)| dls_lp::plan::efficiency(&platform, &plan).ok());
        Beside { efficiency, references }
    })
}

/// What [`beside_the_run`] worked out: the plan's efficiency and the
/// homogeneous platform's makespan (`None` where that cannot be planned),
/// and references of the products checked.
struct Beside {
    efficiency: Option<(f64, f64)>,
    references: BTreeMap<usize, batch::Reference>,
}

/// The shared token: `flag` (a file), else `DLS_TOKEN`, else the cluster
/// file's `token_file`, else none.
pub fn token(
    flag: Option<&std::path::Path>,
    cluster: Option<&crate::config::cluster::Cluster>,
) -> Result<Option<dls_protocol::Token>> {
    let env_set = std::env::var_os("DLS_TOKEN").is_some_and(|v| !v.is_empty());
    match (flag, cluster.and_then(|c| c.token_file.as_deref())) {
        (None, Some(file)) if !env_set => crate::runtime::link::load_token(Some(file)),
        (flag, _) => crate::runtime::link::load_token(flag),
    }
}

/// The host names of this Slurm job's nodes (`scontrol show hostnames
/// $SLURM_JOB_NODELIST`).
pub fn slurm_hosts() -> Result<Vec<String>> {
    use anyhow::Context;
    let Some(list) = std::env::var_os("SLURM_JOB_NODELIST").filter(|v| !v.is_empty()) else {
        bail!("--slurm: SLURM_JOB_NODELIST is not set; run inside a Slurm allocation (sbatch, salloc)");
    };
    let out = std::process::Command::new("scontrol")
        .args(["show", "hostnames"])
        .arg(&list)
        .output()
        .context("--slurm: cannot run scontrol (is Slurm installed here?)")?;
    if !out.status.success() {
        bail!(
            "--slurm: scontrol show hostnames {:?} failed: {}",
            list,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let hosts: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    if hosts.is_empty() {
        bail!("--slurm: scontrol lists no host for {list:?}");
    }
    Ok(hosts)
}
