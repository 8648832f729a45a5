//! A worker's costs while it receives, computes and returns at once. The
//! model lets a worker's three phases overlap freely, each at its own
//! cost; a node whose networking and computing share one small processor
//! share (a container's or a job's CPU quota) does them more slowly
//! together than one at a time, and a plan that leans on it runs late.
//! With two lanes (a full-duplex uplink) a run sends a worker its next
//! chunk while it computes one and returns the last, so this is measured
//! where the port model found two lanes, the way a run does it: a short
//! pipeline of real chunks (`TUNING.chunks`, zeros, each granted at once) sent
//! back to back but for a window ([`window`]: a few held at once), each
//! computed once it is in and returned once computed.
//! Its steady state is what a run sees: the time between one chunk and
//! the next arriving, computed and back (the slowest of the three, a
//! unit) over the slowest phase's cost alone is the worker's factor, and
//! its c and w are scaled by it: the phases share what slows them.
//! Computing is scaled further where the worker timed its chunks longer
//! than that, and returning by its own time, from when each result could
//! leave until it was back (`model::load::factors`). The pipeline's fill and drain
//! are left out: they would hide a node that falls 10% behind in its
//! steady state, which is what a run of a hundred chunks on it pays.
//!
//! Computing and returning by their own times, not by what the master
//! hears: a worker's `Received` and `Ready` travel behind the results it
//! is writing, so where returns are the slowest phase (results larger
//! than inputs) every spacing the master sees is the return's, fill
//! included, and one factor from it put that on all three phases (the
//! sends keep the steady state's factor). On the switched test bed,
//! products of 512×128 by 128×512 (2 MiB back for 1 MiB out), the
//! balanced star's plan on one factor ran 0.89-0.93× its prediction, with
//! computing and returning by their own times 1.04-1.05× (three runs
//! each).
//!
//! Why real chunks in a pipeline: on the switched test bed with each
//! worker's whole process capped (`DLS_TESTBED_CAP=process`), the
//! fastest link's node on a fifth of a core ran a run's chunks 1.4-1.6×
//! slower per product than its costs alone said, throttled by its quota
//! in 95% of the quota's periods, while probes of raw bytes received,
//! computed and returned at once measured 1.0-1.5× phase by phase; on
//! two fifths, runs paid 1.08-1.1× where those probes found 1.0 and this
//! pipeline 1.08. A pipeline runs what a run runs (a chunk decoded, its
//! results held and written, the messages around them). It still finds
//! less than runs pay on the node at a fifth of a core (1.0-1.23), whose
//! slowdown seems to grow with the other workers' traffic, which the
//! pipeline, alone on the port, does not carry; online correction covers
//! the rest.

use super::model::load::{chunks, units, window, Alone, Pipeline};
#[cfg(test)]
use super::TUNING;
use super::{answer_of, CalibrateOptions};
use crate::runtime::link::Link;
use anyhow::{bail, Result};
use dls_protocol::{ChunkId, FromWorker, JobId, ToWorker, Values};
use std::time::Instant;

/// The job the probes' chunks belong to (no run's job is numbered so).
const JOB: JobId = JobId(u64::MAX);

/// A pipeline through one worker (the port is the caller's: nothing else
/// may cross it meanwhile); none when its memory holds too few chunks for
/// one ([`chunks`]: its factor is then 1).
pub async fn measure(link: &mut Link, alone: &Alone, opts: &CalibrateOptions) -> Result<Option<Pipeline>> {
    let (k, form) = (units(alone), opts.form);
    let Some(n) = chunks(alone, k) else {
        tracing::debug!(worker = %link.name, room = alone.room, "too little memory for a pipeline under load");
        return Ok(None);
    };
    let inputs = Values::zeros(form.dtype, form.in_len(k as u32) as usize);
    let b = form
        .shared_b
        .then(|| Values::zeros(form.dtype, form.shape.b_len() as usize));
    let held = window(alone, k).min(n);
    once(link, (k, n, held), &inputs, b.as_ref(), opts).await.map(Some)
}

/// One pipeline of `n` chunks of `k` products of zeros (`b`: the shared
/// B, when the form has one), each granted as it is sent, at most `held`
/// of them sent and not yet back.
async fn once(
    link: &mut Link,
    (k, n, held): (u64, u64, u64),
    inputs: &Values,
    b: Option<&Values>,
    opts: &CalibrateOptions,
) -> Result<Pipeline> {
    let (name, form, timeout) = (link.name.clone(), opts.form, opts.timeout);
    let t0 = Instant::now();
    let mut lent = link.conn.lend();
    let (reader, writer) = (&mut lent.reading, &mut lent.writing);
    // Where the link has a control line the worker says Received there.
    let mut control = link.control.as_mut();
    // A permit a chunk in flight; each result back returns one.
    let room = tokio::sync::Semaphore::new(held.max(1) as usize);
    let write = async {
        if let Some(b) = b {
            writer.write_frame(&ToWorker::ShareB { job: JOB, form }, b).await?;
        }
        for j in 0..n {
            room.acquire().await?.forget();
            let chunk = ChunkId(j);
            let assign = ToWorker::Assign {
                job: JOB,
                chunk,
                form,
                count: k as u32,
            };
            writer.write_frame(&assign, inputs).await?;
            writer.send(&ToWorker::Grant { job: JOB, chunk }).await?;
        }
        anyhow::Ok(())
    };
    let read = async {
        let n = n as usize;
        let mut t = Pipeline {
            units: k,
            received: vec![f64::NAN; n],
            ready: vec![f64::NAN; n],
            back: vec![f64::NAN; n],
            computed: vec![f64::NAN; n],
        };
        for _ in 0..3 * n {
            let msg = match control.as_deref_mut() {
                Some(line) => tokio::select! {
                    m = answer_of(reader, &name, timeout, "pipeline probe") => m?,
                    m = answer_of(line, &name, timeout, "pipeline probe") => m?,
                },
                None => answer_of(reader, &name, timeout, "pipeline probe").await?,
            };
            let now = t0.elapsed().as_secs_f64();
            let (series, chunk) = match msg {
                FromWorker::Received { job, chunk } if job == JOB => (&mut t.received, chunk),
                FromWorker::Ready {
                    job,
                    chunk,
                    compute_secs,
                } if job == JOB => {
                    if let Some(at) = t.computed.get_mut(chunk.0 as usize) {
                        *at = compute_secs;
                    }
                    (&mut t.ready, chunk)
                }
                FromWorker::Results { job, chunk, count, .. } if job == JOB && u64::from(count) == k => {
                    room.add_permits(1);
                    (&mut t.back, chunk)
                }
                other => bail!("worker {name:?}: unexpected answer during a pipeline probe: {other:?}"),
            };
            match series.get_mut(chunk.0 as usize) {
                Some(at) if at.is_nan() => *at = now,
                _ => bail!(
                    "worker {name:?}: a second or unknown chunk {} in a pipeline probe",
                    chunk.0
                ),
            }
        }
        anyhow::Ok(t)
    };
    let (w, r) = tokio::join!(write, read);
    w?;
    let pipeline = r?;
    drop(lent);
    // The shared B, if any, is dropped; nothing else of the job is held.
    link.conn.send(&ToWorker::Cancel { job: JOB }).await?;
    Ok(pipeline)
}

#[cfg(test)]
mod tests;
