//! Calibration inside a run. A run given no platform (and no learned
//! costs for every worker) measures its workers on the batch's own first
//! products: each worker gets one chunk of them, sent one at a time (each
//! send alone its way, so its time is its link's; a return crosses
//! beside the next send, alone its own way: [`probe_ports`]), computed
//! and returned like any chunk, checked and stored like any. Its costs a unit
//! are what that chunk took. The port model is measured next (transfers
//! at once, sized from those costs, as `dls calibrate` does), then the
//! rest of the batch is planned on what was measured and run, corrected as
//! it goes. Nothing the probes computed is thrown away, and the batch
//! starts moving at once.

use super::{align, plan_for, run_plan_into, BatchRun, RunConfig, RunError, Workers};
use crate::learn::Model;
use crate::runtime::batch::Batch;
use crate::runtime::calibrate::TUNING;
use crate::runtime::calibrate::{self, CalibrateOptions};
use crate::runtime::data::{Offset, Sink};
use crate::runtime::pool::{LeftOut, Pool};
use crate::runtime::shell::Results;
use anyhow::{anyhow, Result};
use dls_lp::{Platform, Ports, Worker};
use dls_protocol::Form;
use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Instant;

/// The products each worker's probe chunk takes, given how many products
/// each worker's memory holds: about `TUNING.probe_bytes` of inputs (less with
/// many workers: `TUNING.probes_bytes` shared), at least one and at most half
/// what its memory holds; together at most a quarter of the batch (or
/// half of it, one product each, for a small batch). `None` when the batch
/// cannot give every worker one product and keep half for the plan, or a
/// worker cannot hold one.
pub fn probe_loads(memory: &[u64], form: &Form, count: usize) -> Option<Vec<u64>> {
    let p = memory.len() as u64;
    let count = count as u64;
    if p == 0 || 2 * p > count || memory.contains(&0) {
        return None;
    }
    let each = TUNING.probe_bytes.min(TUNING.probes_bytes / p);
    let by_bytes = (each / form.in_bytes(1).max(1)).max(1);
    let mut loads: Vec<u64> = memory.iter().map(|&m| by_bytes.min(m / 2).max(1)).collect();
    let budget = (count / 4).max(p);
    // Shrink the largest probes first until the budget holds (each keeps
    // one product at least; p ≤ budget, so this ends).
    while loads.iter().sum::<u64>() > budget {
        let top = (0..loads.len()).max_by_key(|&i| loads[i]).unwrap_or(0);
        loads[top] -= 1;
    }
    Some(loads)
}

/// What a run measured inside starts from: each worker's probe chunk
/// (products), and the model that learns from the run, if any.
pub(super) struct Probes<'m> {
    pub loads: Vec<u64>,
    pub model: Option<&'m mut Model>,
}

/// Run `batch` on the pool with the calibration inside the run (see the
/// module), each worker's probe chunk `loads[i]` products (`Probes`). The report
/// counts the probes' products with the plan's and says what they did
/// (`probes`). Workers lost while probed are left out of the rest.
pub(super) async fn run(
    workers: &Workers,
    pool: &mut Pool,
    Probes { loads, model }: Probes<'_>,
    batch: &Batch,
    cfg: &RunConfig,
    sink: &mut dyn Sink,
    mut on_chunk: impl FnMut(usize) + Send,
) -> std::result::Result<(BatchRun, Vec<LeftOut>), RunError> {
    let t0 = Instant::now();
    let probed: usize = loads.iter().sum::<u64>() as usize;
    (workers.notes)(&format!(
        "calibrating {} worker(s) on the batch's first {probed} products (no --platform given) ...",
        pool.len()
    ));
    let (platform, probes, left) = probe(pool, loads, batch, cfg, sink, &mut on_chunk)
        .await
        .map_err(RunError::Workers)?;
    let (platform, ports) = port_model(pool, platform, batch.form, cfg).await;
    let platform = learned(workers, platform, model).map_err(RunError::Workers)?;
    let seconds = t0.elapsed().as_secs_f64();
    let rest = batch.subset(std::slice::from_ref(&(probed..batch.count)));
    let planning = Instant::now();
    let (platform, plan) = plan_for(pool, &platform, &rest, cfg).map_err(RunError::Batch)?;
    let plan_secs = planning.elapsed().as_secs_f64();
    let into = Results {
        sink: &mut Offset {
            inner: sink,
            by: probed,
        },
        keep: checked(batch, cfg, probed..batch.count),
        on_chunk: &mut on_chunk,
    };
    let mut done = run_plan_into(pool, platform, plan, &rest, cfg, 2, into)
        .await
        .map_err(RunError::Batch)?;
    done.report.add_probes(&probes.report, seconds, ports);
    (done.plan_secs, done.first_send) = (plan_secs, probes.first_send);
    done.trace = done.trace.after(probes.trace, seconds);
    done.trace.title = Some(format!(
        "{} products of {}, {}",
        batch.count, batch.form, done.plan.strategy
    ));
    Ok((done, left))
}

/// The probes: one chunk each of the batch's first products, in the
/// pool's order, one send at a time and one return at a time, a return
/// beside the next worker's send ([`probe_ports`]); the costs a unit they took, in
/// a platform of the workers that came through (the others are removed
/// from the pool and returned as left out), and the probes' run.
async fn probe(
    pool: &mut Pool,
    loads: Vec<u64>,
    batch: &Batch,
    cfg: &RunConfig,
    sink: &mut dyn Sink,
    on_chunk: &mut (dyn FnMut(usize) + Send),
) -> Result<(Platform, BatchRun, Vec<LeftOut>)> {
    let names = pool.names();
    let unknown = names.iter().map(|n| Worker::new(n.clone(), 1.0, 1.0, 1.0)).collect();
    let guess = align(&Platform::new(unknown)?, pool.links(), &batch.form)?;
    let probed = loads.iter().sum::<u64>() as usize;
    let ports = probe_ports(cfg.ports);
    let plan = dls_lp::baseline::with_loads(&guess, (0..names.len()).collect(), loads, ports)
        .map_err(|e| anyhow!("planning the probes: {e}"))?;
    let head = batch.subset(std::slice::from_ref(&(0..probed)));
    let probing = RunConfig {
        ports: Some(ports),
        ..*cfg
    };
    let into = Results {
        sink,
        keep: checked(batch, cfg, 0..probed),
        on_chunk,
    };
    let done = run_plan_into(pool, guess.clone(), plan, &head, &probing, 1, into).await?;
    let mut seen = Model::new(&batch.form);
    seen.observe(&done.report)?;
    let measured = seen.refine(&guess)?;
    let lost: Vec<usize> = (0..names.len())
        .filter(|&i| done.report.failures.iter().any(|f| f.worker == names[i]))
        .collect();
    let left = (done.report.failures.iter())
        .map(|f| LeftOut {
            worker: f.worker.clone(),
            reason: format!("lost while measured on the batch's first products: {}", f.reason),
        })
        .collect();
    let kept: Vec<usize> = (0..names.len()).filter(|i| !lost.contains(i)).collect();
    if kept.is_empty() {
        anyhow::bail!("every worker was lost while measured on the batch's first products");
    }
    pool.remove(&lost);
    Ok((measured.subset(&kept)?, done, left))
}

/// The port the probes cross: two ports (one send and one return at
/// once, each alone its way, so each still times its own link), unless
/// the run is held to the report's one port (`--ports 1`). With one
/// port every return waited for the last probe's send. On the switched
/// test bed, cold runs of each build in turn: five workers, n = 320
/// (`a:200:25 b:100:50 c:300:15 d:150:30 e:400:20`), the probes and the
/// port probes took 1.64-1.66 s against 1.95-1.99, the runs 9.15-9.40 s
/// against 9.55-10.05; seven workers at n = 192, 1.67-1.73 s against
/// 2.08-2.11; three at n = 1024, 2.75-2.93 s against 3.10-3.15 (their
/// plans' runs scattered more, 7.6-8.9 s against 7.1-8.1: seven runs
/// each, medians 10.60 and 10.87 s whole). On a master whose sends and
/// returns take turns (found next, by the port probes) the returns read
/// slower than alone, and the run's correction sees it.
pub fn probe_ports(asked: Option<Ports>) -> Ports {
    if asked.is_some_and(Ports::is_one_port) {
        Ports::One
    } else {
        Ports::Two
    }
}

/// The products of `part` the master recomputes, numbered within it: of
/// the products `cfg` picks in the whole batch, those in `part`.
fn checked(batch: &Batch, cfg: &RunConfig, part: Range<usize>) -> BTreeSet<usize> {
    let picks = crate::runtime::batch::picks(batch.count, cfg.verify, cfg.seed);
    picks
        .into_iter()
        .filter(|i| part.contains(i))
        .map(|i| i - part.start)
        .collect()
}

/// The port model measured on the pool's links, unless `cfg` forces one:
/// the platform with the uplink found, and what was found, for the report.
async fn port_model(pool: &mut Pool, platform: Platform, form: Form, cfg: &RunConfig) -> (Platform, String) {
    if let Some(ports) = cfg.ports {
        crate::runtime::log::probed(&platform, None);
        return (platform, format!("{}, as asked", ports.describe()));
    }
    let costs: Vec<(f64, f64)> = platform.workers().iter().map(|w| (w.c, w.d)).collect();
    let found = calibrate::ports_of(pool.links_mut(), &costs, &CalibrateOptions::within_run(form)).await;
    crate::runtime::log::probed(&platform, found.as_ref());
    match found {
        Some(f) => (platform.with_uplink(f.uplink), f.model),
        None => (platform, "one port: not measured".to_string()),
    }
}

/// What a model adds: the costs measured are remembered for its workers,
/// and refined by what it learned from earlier batches.
fn learned(workers: &Workers, platform: Platform, model: Option<&mut Model>) -> Result<Platform> {
    let Some(m) = model else {
        return Ok(platform);
    };
    m.remember(&platform);
    if m.batches == 0 {
        return Ok(platform);
    }
    (workers.notes)(&format!(
        "planning with costs learned from {} earlier batch(es)",
        m.batches
    ));
    m.refine(&platform)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probes' loads against what the doc promises, for every small
    /// case: each worker at least one product and at most half its memory
    /// (or one), about `TUNING.probe_bytes` each, within the budget; `None` exactly
    /// when the batch cannot keep half for the plan.
    #[test]
    fn probe_loads_keep_their_bounds() {
        let form = Form::square(256); // 1 MiB of inputs a product: 4 for 4 MiB
        for p in 1..5usize {
            for count in 0..60usize {
                for mem in [1u64, 2, 3, 8, 100] {
                    let memory = vec![mem; p];
                    let got = probe_loads(&memory, &form, count);
                    if 2 * p > count {
                        assert_eq!(got, None, "p {p} count {count}");
                        continue;
                    }
                    let loads = got.expect("a batch of at least 2p products is probed");
                    let sum: u64 = loads.iter().sum();
                    assert!(loads.iter().all(|&l| l >= 1 && l <= (mem / 2).max(1) && l <= 4));
                    assert!(sum <= ((count / 4).max(p)) as u64, "p {p} count {count}: {loads:?}");
                    // Nobody is shrunk while the budget had room for the
                    // bytes' worth.
                    let want = 4u64.min((mem / 2).max(1)) * p as u64;
                    if want <= (count / 4).max(p) as u64 {
                        assert_eq!(sum, want, "p {p} count {count} mem {mem}");
                    }
                }
            }
        }
        assert_eq!(probe_loads(&[4, 0], &form, 100), None);
    }

    /// With many workers the probes share `TUNING.probes_bytes`: 16 MiB over six
    /// workers is 2.67 MiB each, two products of 1 MiB; over 32, one.
    #[test]
    fn many_workers_share_the_probes_bytes() {
        let form = Form::square(256);
        for (p, each) in [(4usize, 4u64), (5, 3), (6, 2), (8, 2), (16, 1), (32, 1)] {
            let loads = probe_loads(&vec![100; p], &form, 10_000).expect("a large batch is probed");
            assert_eq!(loads, vec![each; p], "{p} workers");
        }
    }
}
