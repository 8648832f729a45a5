//! Reaching the workers and a whole run, start to end: the one place the
//! master connects pools and closes them. `dls run`, `dls calibrate`, the
//! demo, the experiments and Python all come through here.

use super::{run_batch_into, BatchRun, RunConfig};
use crate::config::cluster::Cluster;
use crate::learn::Model;
use crate::output::report::Waited;
use crate::runtime::batch::Batch;
use crate::runtime::calibrate::{self, CalibrateOptions, Calibration};
use crate::runtime::data::Sink;
use crate::runtime::link::ConnectOptions;
use crate::runtime::local::LocalWorkers;
use crate::runtime::pool::{LeftOut, Pool};
use anyhow::{anyhow, bail, Result};
use dls_lp::Platform;
use dls_protocol::{Form, Token};
use std::time::Instant;

/// Where the workers are and how to reach them.
#[derive(Debug, Clone)]
pub struct Workers {
    pub cluster: Cluster,
    pub token: Option<Token>,
    /// Fail unless every worker answers and can be measured; otherwise
    /// those that do not are left out (and said so).
    pub require_all: bool,
    /// Encrypt every frame (needs a token: the keys come from it).
    pub encrypt: bool,
    /// Where remarks for the user go (workers left out, calibration, costs
    /// learned): nowhere by default; the CLI prints them on stderr.
    pub notes: fn(&str),
}

impl Workers {
    pub fn new(cluster: Cluster, token: Option<Token>) -> Workers {
        Workers {
            cluster,
            token,
            require_all: false,
            encrypt: false,
            notes: |_| {},
        }
    }

    /// Every worker of `cluster`, or an error (as the experiments need).
    pub fn all(cluster: Cluster, token: Option<Token>) -> Workers {
        Workers {
            require_all: true,
            ..Workers::new(cluster, token)
        }
    }

    /// Connect to the cluster's workers: all of them (`require_all`), or
    /// those that answer.
    pub async fn connect(&self) -> Result<(Pool, Vec<LeftOut>)> {
        if self.encrypt && self.token.is_none() {
            bail!("--encrypt needs a token (the keys are derived from it): give --token-file or set DLS_TOKEN");
        }
        let t = ConnectOptions {
            encrypt: self.encrypt,
            ..ConnectOptions::default()
        };
        if self.require_all {
            return Ok((Pool::connect(&self.cluster, self.token.as_ref(), t).await?, Vec::new()));
        }
        let (pool, left) = Pool::connect_available(&self.cluster, self.token.as_ref(), t).await?;
        self.left_out(&left);
        Ok((pool, left))
    }

    /// Connect, do `work` with the pool (and the workers left out), and
    /// close the pool whatever `work` returned.
    pub async fn with_pool<T>(&self, work: impl AsyncFnOnce(&mut Pool, Vec<LeftOut>) -> Result<T>) -> Result<T> {
        let (mut pool, left) = self.connect().await?;
        let done = work(&mut pool, left).await;
        pool.close().await;
        done
    }

    /// Calibrate the pool's workers for products of `form`: all of them
    /// (`require_all`), or those that can be measured, dropping the others;
    /// `within_run`: quickly, for a run that corrects as it goes.
    pub async fn calibrate(
        &self,
        pool: &mut Pool,
        form: Form,
        within_run: bool,
    ) -> Result<(Calibration, Vec<LeftOut>)> {
        let opts = match within_run {
            true => CalibrateOptions::within_run(form),
            false => CalibrateOptions {
                progress: self.notes,
                ..CalibrateOptions::for_form(form)
            },
        };
        let (cal, left) = if self.require_all {
            (calibrate::calibrate(pool.links_mut(), &opts).await?, Vec::new())
        } else {
            calibrate::calibrate_available(pool, &opts).await?
        };
        self.left_out(&left);
        crate::runtime::log::calibrated(&cal);
        Ok((cal, left))
    }

    fn left_out(&self, left: &[LeftOut]) {
        for l in left {
            tracing::warn!(worker = %l.worker, reason = %l.reason, "worker left out");
            (self.notes)(&format!(
                "warning: worker {} left out: {} (--require-all makes this an error)",
                l.worker, l.reason
            ));
        }
    }
}

/// Connect to every one of the emulated workers `local`, do `work` with
/// the pool, close it and stop the workers, whatever `work` returned.
pub async fn on_local<T>(local: LocalWorkers, work: impl AsyncFnOnce(&mut Pool) -> Result<T>) -> Result<T> {
    let done = Workers::all(local.cluster.clone(), None)
        .with_pool(async |pool, _| work(pool).await)
        .await;
    local.stop().await;
    done
}

/// Why [`run`] failed: the workers could not be reached or measured, or
/// the batch itself failed.
#[derive(Debug)]
pub enum RunError {
    Workers(anyhow::Error),
    Batch(anyhow::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Workers(e) | RunError::Batch(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for RunError {}

/// A batch run start to end: connect to `workers`, find the costs (given
/// in `platform`, learned for every worker in `model`, or calibrated now
/// for the batch's products, then refined by what `model` learned), plan
/// and run with `cfg`, every product's C going to `sink`, verify, and
/// close the connections whatever happens. The report lists the workers
/// left out. The model, if any, is not updated: see `Model::observe`.
pub async fn run(
    workers: &Workers,
    platform: Option<Platform>,
    mut model: Option<&mut Model>,
    batch: &Batch,
    cfg: &RunConfig,
    sink: &mut dyn Sink,
    on_chunk: impl FnMut(usize) + Send,
) -> std::result::Result<BatchRun, RunError> {
    let t0 = Instant::now();
    let (mut pool, mut left) = workers.connect().await.map_err(RunError::Workers)?;
    let connect_secs = t0.elapsed().as_secs_f64();
    let mut calibration_secs = 0.0;
    if let Some(m) = model.as_deref_mut() {
        let pairs: Vec<(String, String)> = pool
            .links()
            .iter()
            .map(|l| (l.name.clone(), l.address.clone()))
            .collect();
        m.alias(&pairs);
    }
    let done = async {
        if let Some(loads) = within_run(&pool, platform.as_ref(), model.as_deref(), batch) {
            let probes = super::cold::Probes { loads, model };
            let (done, l) = super::cold::run(workers, &mut pool, probes, batch, cfg, sink, on_chunk).await?;
            left.extend(l);
            return Ok(done);
        }
        let measuring = Instant::now();
        let measures = platform.is_none() && !model.as_deref().is_some_and(|m| m.covers(&pool.names()));
        let (platform, l) = costs(workers, &mut pool, platform, model, batch.form)
            .await
            .map_err(RunError::Workers)?;
        if measures {
            calibration_secs = measuring.elapsed().as_secs_f64();
        }
        left.extend(l);
        run_batch_into(&mut pool, &platform, batch, cfg, 1, sink, on_chunk)
            .await
            .map_err(RunError::Batch)
    }
    .await;
    pool.close().await;
    let mut done = done?;
    done.report.left_out = left;
    let since = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    done.report.waited = Some(Waited {
        connect_secs,
        calibration_secs: done.report.probes.as_ref().map_or(calibration_secs, |p| p.seconds),
        plan_secs: done.plan_secs,
        first_send_secs: since(done.first_send),
        wall_secs: t0.elapsed().as_secs_f64(),
    });
    Ok(done)
}

/// The probes' loads when the run measures its workers on its own first
/// products: no costs given or learned for every worker, and a batch large
/// enough (`cold::probe_loads`).
fn within_run(pool: &Pool, given: Option<&Platform>, model: Option<&Model>, batch: &Batch) -> Option<Vec<u64>> {
    if given.is_some() || model.is_some_and(|m| m.covers(&pool.names())) {
        return None;
    }
    let memory: Vec<u64> = pool.links().iter().map(|l| l.caps.max_products(&batch.form)).collect();
    super::cold::probe_loads(&memory, &batch.form, batch.count)
}

/// The costs to plan with: given, learned for every worker, or calibrated
/// now (a batch too small to be measured on); refined by what earlier runs
/// taught.
async fn costs(
    workers: &Workers,
    pool: &mut Pool,
    given: Option<Platform>,
    mut model: Option<&mut Model>,
    form: Form,
) -> Result<(Platform, Vec<LeftOut>)> {
    let names = pool.names();
    let mut left = Vec::new();
    let platform = match (given, model.as_deref()) {
        (Some(p), _) => only_connected(p, &names)?,
        (None, Some(m)) if m.covers(&names) => m.base(&names)?,
        (None, _) => {
            (workers.notes)(&format!(
                "calibrating {} worker(s) (no --platform given) ...",
                pool.len()
            ));
            let (cal, l) = workers.calibrate(pool, form, true).await?;
            left = l;
            for w in &cal.workers {
                for warn in &w.warnings {
                    (workers.notes)(&format!("warning: {}: {warn}", w.name));
                }
            }
            let platform = cal.platform()?;
            if let Some(m) = model.as_deref_mut() {
                m.remember(&platform);
            }
            platform
        }
    };
    let platform = match model {
        Some(m) if m.batches > 0 => {
            (workers.notes)(&format!(
                "planning with costs learned from {} earlier batch(es)",
                m.batches
            ));
            m.refine(&platform)?
        }
        _ => platform,
    };
    Ok((platform, left))
}

/// The platform's workers that are connected, in the pool's order.
fn only_connected(p: Platform, names: &[String]) -> Result<Platform> {
    if p.workers().iter().map(|w| &w.name).eq(names.iter()) {
        return Ok(p);
    }
    let idx = names
        .iter()
        .map(|n| {
            p.workers()
                .iter()
                .position(|w| &w.name == n)
                .ok_or_else(|| anyhow!("the platform has no worker named {n:?}"))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(p.subset(&idx)?)
}
