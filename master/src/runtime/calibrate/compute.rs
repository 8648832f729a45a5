//! Computing, measured as it goes in a run: every worker computes its
//! probes at the same time, and while a worker computes k units the master
//! sends it k units and takes k units of results back, one transfer at a
//! time on its port (as in a run, where the next chunk arrives and the
//! last results leave while a chunk is computed). A worker measured alone
//! on a quiet machine computes faster than it does in a run wherever
//! workers share something: a node's cores and memory bandwidth, or the
//! processor time that arriving data takes (interrupts, copies). On the
//! test bed (`scripts/testbed.sh`) a worker computed 11% slower while three
//! others ran a batch than alone, and plans made from quiet measurements
//! finished 10–15% after their prediction.

use super::{agree, answer, median, unit_values, CalibrateOptions, Scatter};
use crate::runtime::link::{self, Link};
use anyhow::{bail, Result};
use dls_protocol::{DType, FromWorker, ToWorker, Values};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tokio::sync::{watch, Mutex};

/// For each `(link, sizes)`: the median seconds the worker took to compute
/// each size (in order; it stops early, after three sizes, once a size
/// took longer than `max_probe_seconds`), or why it failed. A worker done
/// with its probes hears a heartbeat every `keep_alive` until the others
/// are done too, so that its idle timeout does not end its session while a
/// slow worker is still measured.
pub(super) async fn under_load(
    jobs: Vec<(&mut Link, Vec<u64>)>,
    opts: &CalibrateOptions,
) -> Vec<Result<(Vec<(u64, f64)>, Scatter)>> {
    let (unit_in, _) = unit_values(&opts.form);
    let largest = jobs.iter().flat_map(|j| j.1.iter().copied()).max().unwrap_or(0);
    let buf = Values::zeros(DType::F64, (unit_in * largest) as usize);
    let port = Mutex::new(());
    let (left, waiting) = watch::channel(jobs.len());
    let probes = jobs
        .into_iter()
        .map(|(link, sizes)| {
            let (left, mut waiting, port, buf) = (&left, waiting.clone(), &port, &buf);
            async move {
                let r = probe(link, sizes, opts, port, buf).await;
                left.send_modify(|n| *n -= 1);
                match r {
                    Ok(times) => stay(link, opts, &mut waiting).await.map(|()| times),
                    Err(e) => Err(e),
                }
            }
        })
        .collect();
    join_all(probes).await
}

/// Heartbeats to an idle worker until no probe is left.
async fn stay(link: &mut Link, opts: &CalibrateOptions, left: &mut watch::Receiver<usize>) -> Result<()> {
    loop {
        // The guard `wait_for` returns must not live across an await.
        let all_done = tokio::time::timeout(opts.keep_alive_period(), left.wait_for(|&n| n == 0))
            .await
            .is_ok();
        if all_done {
            return Ok(());
        }
        link::keep_alive(link, opts.timeout).await?;
    }
}

/// One worker's compute probes, each with a send and a return of its size
/// on the shared port while it computes.
async fn probe(
    link: &mut Link,
    sizes: Vec<u64>,
    opts: &CalibrateOptions,
    port: &Mutex<()>,
    buf: &Values,
) -> Result<(Vec<(u64, f64)>, Scatter)> {
    let (unit_in, unit_out) = unit_values(&opts.form);
    let mut out = Vec::new();
    let mut scatter = Scatter::default();
    for k in sizes {
        let mut took = Vec::new();
        for rep in 0..opts.reps.max(1) {
            if rep == 2 && agree(&took) {
                break;
            }
            link.conn
                .send(&ToWorker::ComputeProbe {
                    form: opts.form,
                    count: k as u32,
                })
                .await?;
            let mut done = None;
            {
                let _port = port.lock().await;
                let len = unit_in * k;
                link.conn
                    .write_frame(&ToWorker::Echo { len }, &buf.slice(0..len as usize))
                    .await?;
                while !matches!(next(link, opts, &mut done).await?, FromWorker::EchoAck { len: l } if l == len) {}
                let len = unit_out * k;
                link.conn.send(&ToWorker::Pull { len }).await?;
                while !matches!(next(link, opts, &mut done).await?, FromWorker::PullData { len: l } if l == len) {}
            }
            let secs = loop {
                if let Some(secs) = done {
                    break secs;
                }
                next(link, opts, &mut done).await?;
            };
            took.push(secs);
        }
        scatter.add(k, &took);
        let c = median(took);
        out.push((k, c));
        if out.len() >= 3 && c > opts.max_probe_seconds {
            break;
        }
    }
    Ok((out, scatter))
}

/// The next answer of a worker computing a probe: its seconds go to
/// `done` when it is `ComputeDone`; an echo's or a pull's answer is
/// returned; anything else is an error.
async fn next(link: &mut Link, opts: &CalibrateOptions, done: &mut Option<f64>) -> Result<FromWorker> {
    let msg = answer(link, opts.timeout, "compute probe").await?.msg;
    match msg {
        FromWorker::ComputeDone { secs, .. } => {
            *done = Some(secs);
            Ok(msg)
        }
        FromWorker::EchoAck { .. } | FromWorker::PullData { .. } => Ok(msg),
        other => bail!(
            "worker {:?}: unexpected answer during a compute probe: {other:?}",
            link.name
        ),
    }
}

/// Run `futures` together on this task; their outputs in order.
pub(super) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::join_all;

    #[tokio::test]
    async fn join_all_runs_them_together_and_keeps_the_order() {
        // Each waits for all three: one after the other would never end.
        let barrier = tokio::sync::Barrier::new(3);
        let futures: Vec<_> = [30u64, 10, 20]
            .into_iter()
            .map(|x| {
                let barrier = &barrier;
                async move {
                    barrier.wait().await;
                    x
                }
            })
            .collect();
        let joined = tokio::time::timeout(std::time::Duration::from_secs(10), join_all(futures)).await;
        assert_eq!(joined.expect("all three ran at once"), [30, 10, 20]);
    }
}
