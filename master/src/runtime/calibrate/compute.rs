//! Every worker measured at once, as it goes in a run: for growing sizes
//! k, a worker computes k units while the master sends it k units and
//! takes k units of results back, one transfer at a time on its port (as
//! in a run, where the next chunk arrives and the last results leave while
//! a chunk is computed). The transfers, each alone on the port, are the
//! link probes; the worker's own timing of its k units, the compute
//! probe. A worker measured alone on a quiet machine computes faster than
//! it does in a run wherever workers share something: a node's cores and
//! memory bandwidth, or the processor time that arriving data takes
//! (interrupts, copies). On the test bed (`scripts/testbed.sh`) a worker
//! computed 11% slower while three others ran a batch than alone, and
//! plans made from quiet measurements finished 10–15% after their
//! prediction.
//!
//! Sizes are measured two or three times, or once when the first measure
//! per unit agrees with the size before (the line is confirmed, not
//! repeated). Transfers stop growing once a size's send and return took
//! `max_probe_seconds` together (at `max_units` at most), computing once a
//! size took that long (at [`max_compute_units`] at most, so that small
//! products are probed in numbers whose time dwarfs a chunk's latency),
//! each after three sizes; a size past one of them is measured for the
//! other alone (the samples say NaN for what was not measured).

use super::{agree, answer, median, unit_values, CalibrateOptions, Scatter};
use crate::runtime::link::{self, Link};
use anyhow::{bail, Result};
use dls_protocol::{DType, Form, FromWorker, ToWorker, Values};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;
use tokio::sync::{watch, Mutex};

/// A worker's link as the link probes measured it: seconds a unit to send
/// and to return, and the largest probe in units.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measured {
    pub c: f64,
    pub d: f64,
    pub max_units: u64,
}

/// One worker's probes: per size (units, send s, compute s, return s),
/// medians of repetitions (NaN where not measured), how repetitions of
/// each disagreed, how many products its memory holds, and the largest
/// size a probe may take.
pub(super) struct Probes {
    pub samples: Vec<(u64, f64, f64, f64)>,
    pub scatter: [Scatter; 3],
    pub max_load: u64,
    pub max_units: u64,
}

impl Probes {
    /// Seconds a unit each way at the largest size whose transfers were
    /// probed, for sizing later probes.
    pub fn measured(&self) -> Measured {
        let last = self.samples.iter().rev().find(|s| s.1.is_finite() && s.3.is_finite());
        let &(k, s, _, r) = last.unwrap_or(&(1, 1.0, 1.0, 1.0));
        Measured {
            c: s / k as f64,
            d: r / k as f64,
            max_units: self.max_units,
        }
    }
}

/// Every worker's probes, or why it failed. A worker done with its probes
/// hears a heartbeat every `keep_alive` until the others are done too, so
/// that its idle timeout does not end its session while a slow worker is
/// still measured.
pub(super) async fn under_load(links: Vec<&mut Link>, opts: &CalibrateOptions) -> Vec<Result<Probes>> {
    let (unit_in, _) = unit_values(&opts.form);
    let largest = links.iter().map(|l| max_units(l, opts)).max().unwrap_or(1);
    let buf = Values::zeros(DType::F64, (unit_in * largest) as usize);
    let port = Mutex::new(());
    let (left, waiting) = watch::channel(links.len());
    let probes = links
        .into_iter()
        .map(|link| {
            let (left, mut waiting, port, buf) = (&left, waiting.clone(), &port, &buf);
            async move {
                let r = probe(link, opts, port, buf).await;
                left.send_modify(|n| *n -= 1);
                match r {
                    Ok(found) => stay(link, opts, &mut waiting).await.map(|()| found),
                    Err(e) => Err(e),
                }
            }
        })
        .collect();
    join_all(probes).await
}

/// The largest probe for a worker: 32 units, within `max_probe_bytes`
/// and half of what its memory holds.
pub(super) fn max_units(link: &Link, opts: &CalibrateOptions) -> u64 {
    let form = opts.form;
    let by_bytes = (opts.max_probe_bytes / form.in_bytes(1).max(1)).max(1);
    by_bytes.min(32).min(link.caps.max_products(&form) / 2).max(1)
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

/// Whether the products of `form` can be probed on this worker at all.
fn check(link: &Link, form: &Form) -> Result<u64> {
    let s = form.shape;
    if s.n == 0 || s.k == 0 || s.m == 0 {
        bail!("every matrix dimension must be at least 1 (products of {form})");
    }
    let max_load = link.caps.max_products(form);
    if max_load == 0 {
        bail!(
            "worker {:?}: its memory limit of {} bytes cannot hold one product of {form}",
            link.name,
            link.caps.memory_limit
        );
    }
    Ok(max_load)
}

/// The most products a compute probe takes: `max_probe_bytes` of inputs,
/// at most what half the worker's memory holds. A compute probe's data is
/// made on the worker, so it is not held to the 32 units of a transfer
/// probe: small products need many in a probe for their cost per product
/// to stand out of the per-chunk latency (n = 64 on a worker with every
/// core: about 40 µs a product against 0.1-1.5 ms a chunk).
pub(super) fn max_compute_units(link: &Link, opts: &CalibrateOptions) -> u64 {
    let by_bytes = opts.max_probe_bytes / opts.form.in_bytes(1).max(1);
    by_bytes.min(link.caps.max_products(&opts.form) / 2).max(1)
}

/// One worker's probes, as the module says.
async fn probe(link: &mut Link, opts: &CalibrateOptions, port: &Mutex<()>, buf: &Values) -> Result<Probes> {
    let max_load = check(link, &opts.form)?;
    let max_units = max_units(link, opts);
    let max_compute = max_compute_units(link, opts).max(max_units);
    let mut samples: Vec<(u64, f64, f64, f64)> = Vec::new();
    let mut scatter = [Scatter::default(); 3];
    let (mut moving, mut computing) = (true, true);
    let mut k = 1u64;
    // The largest size whose transfers were probed: the load beside a
    // compute probe past it moves in pieces of that size.
    let mut moved = 1u64;
    while (moving || computing) && k <= max_compute {
        // Transfers stop at `max_units`; computing may go on.
        moving &= k <= max_units;
        if moving {
            moved = k;
        }
        let (mut s, mut c, mut r) = (Vec::new(), Vec::new(), Vec::new());
        // A size whose first measure per unit agrees with the size before
        // (within `TUNING.agree`) is on the line already: it is not repeated.
        let prev = samples.last().copied();
        let on_line = |v: &[f64], pick: fn(&(u64, f64, f64, f64)) -> f64| {
            prev.is_some_and(|p| v.len() == 1 && agree(&[v[0] / k as f64, pick(&p) / p.0 as f64]))
        };
        for rep in 0..opts.reps.max(1) {
            let settled = (!moving || agree(&s) && agree(&r)) && (!computing || agree(&c));
            if rep == 2 && settled {
                break;
            }
            let lined =
                (!moving || on_line(&s, |x| x.1) && on_line(&r, |x| x.3)) && (!computing || on_line(&c, |x| x.2));
            if rep == 1 && lined {
                break;
            }
            let (send, secs, ret) = step(link, opts, port, buf, (k, moved), moving, computing).await?;
            s.extend(send);
            c.extend(secs);
            r.extend(ret);
        }
        for (i, v) in [&s, &c, &r].into_iter().enumerate() {
            scatter[i].add(k, v);
        }
        let m = |v: Vec<f64>| if v.is_empty() { f64::NAN } else { median(v) };
        let (s, c, r) = (m(s), m(c), m(r));
        samples.push((k, s, c, r));
        let count = |f: fn(&(u64, f64, f64, f64)) -> f64| samples.iter().filter(|x| f(x).is_finite()).count();
        if moving && count(|x| x.1) >= 3 && s + r > opts.max_probe_seconds {
            moving = false;
        }
        if computing && count(|x| x.2) >= 3 && c > opts.max_probe_seconds {
            computing = false;
        }
        k *= 2;
    }
    Ok(Probes {
        samples,
        scatter,
        max_load,
        max_units,
    })
}

/// One repetition at size `k`: the worker computes k units (if
/// `computing`) while k units go out and come back on the port (if
/// `moving`; past the transfer probes, in pieces of `pieces` units until
/// the computing is done); the seconds of each measured.
async fn step(
    link: &mut Link,
    opts: &CalibrateOptions,
    port: &Mutex<()>,
    buf: &Values,
    (k, pieces): (u64, u64),
    moving: bool,
    computing: bool,
) -> Result<(Option<f64>, Option<f64>, Option<f64>)> {
    let mut done = None;
    if computing {
        link.conn
            .send(&ToWorker::ComputeProbe {
                form: opts.form,
                count: k as u32,
            })
            .await?;
    }
    let (mut sent, mut returned) = (None, None);
    if moving {
        let (s, r) = exchange(link, opts, port, buf, k, &mut done).await?;
        (sent, returned) = (Some(s), Some(r));
    } else if computing {
        // Past the transfer probes, the run's load all the same: while a
        // worker computes k products, their inputs arrive and results
        // leave (in pieces of the largest transfer probed, not measured),
        // and the processor time that takes is not the kernel's. A worker
        // on one core alone computed 1.5-1.7x faster than in a run at
        // n = 64. Pieces no larger than the transfers probed end soon
        // after the computing: a worker on a link of 30 MB/s computed 32
        // products of 128² in 10 ms beside one piece of all 32 (8 MiB),
        // 0.42 s on the port.
        let mut left = k;
        while left > 0 && done.is_none() {
            let piece = left.min(pieces.max(1));
            exchange(link, opts, port, buf, piece, &mut done).await?;
            left -= piece;
        }
    }
    if computing {
        while done.is_none() {
            next(link, opts, &mut done).await?;
        }
    }
    Ok((sent, done, returned))
}

/// k units out (echoed back as an acknowledgement) and k units of
/// results back, alone on the port: the seconds of each.
async fn exchange(
    link: &mut Link,
    opts: &CalibrateOptions,
    port: &Mutex<()>,
    buf: &Values,
    k: u64,
    done: &mut Option<f64>,
) -> Result<(f64, f64)> {
    let (unit_in, unit_out) = unit_values(&opts.form);
    let _port = port.lock().await;
    let len = unit_in * k;
    let t0 = Instant::now();
    link.conn
        .write_frame(&ToWorker::Echo { len }, &buf.slice(0..len as usize))
        .await?;
    while !matches!(next(link, opts, done).await?, FromWorker::EchoAck { len: l } if l == len) {}
    let sent = t0.elapsed().as_secs_f64();
    let len = unit_out * k;
    let t0 = Instant::now();
    link.conn.send(&ToWorker::Pull { len }).await?;
    while !matches!(next(link, opts, done).await?, FromWorker::PullData { len: l } if l == len) {}
    Ok((sent, t0.elapsed().as_secs_f64()))
}

/// The next answer of a worker during its probes: its seconds go to
/// `done` when it is `ComputeDone`; an echo's or a pull's answer is
/// returned; anything else is an error.
async fn next(link: &mut Link, opts: &CalibrateOptions, done: &mut Option<f64>) -> Result<FromWorker> {
    let msg = answer(link, opts.timeout, "probe").await?.msg;
    match msg {
        FromWorker::ComputeDone { secs, .. } => {
            *done = Some(secs);
            Ok(msg)
        }
        FromWorker::EchoAck { .. } | FromWorker::PullData { .. } => Ok(msg),
        other => bail!("worker {:?}: unexpected answer during a probe: {other:?}", link.name),
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
