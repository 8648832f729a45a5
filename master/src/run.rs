//! Running a batch: the executor's commands carried out over the workers'
//! connections, with every transfer timed.
//!
//! One task per worker owns its connection: it writes the frames the central
//! loop tells it to and turns what the worker says into events. The central
//! loop owns the [`Executor`], so the single-port discipline lives in one
//! place and is checked by its own tests.

use crate::executor::{self, Chunk, Command, Event, Executor};
use crate::link::Link;
use anyhow::{anyhow, bail, Context, Result};
use dls_lp::{Plan, Ports, WorkerTimes};
use dls_protocol::{ChunkId, FromWorker, JobId, ToWorker};
use dls_worker::kernel;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The matrices of a batch: `m` products of size `n`, A and B row-major.
#[derive(Debug, Clone)]
pub struct Batch {
    pub n: usize,
    pub m: usize,
    pub a: Arc<Vec<f64>>,
    pub b: Arc<Vec<f64>>,
}

impl Batch {
    /// Random matrices in [-1, 1) from a seed.
    pub fn random(m: usize, n: usize, seed: u64) -> Batch {
        let mut a = vec![0.0; m * n * n];
        let mut b = vec![0.0; m * n * n];
        kernel::fill_random(&mut a, seed.wrapping_mul(2).wrapping_add(1));
        kernel::fill_random(&mut b, seed.wrapping_mul(2).wrapping_add(2));
        Batch {
            n,
            m,
            a: Arc::new(a),
            b: Arc::new(b),
        }
    }

    /// A and B from `.npy` files of shape (M, n, n), float64.
    pub fn from_npy(a: &std::path::Path, b: &std::path::Path, n: Option<usize>) -> Result<Batch> {
        let ma = crate::npy::read(a, n)?;
        let mb = crate::npy::read(b, Some(ma.n))?;
        if ma.m != mb.m {
            bail!(
                "{} holds {} matrices but {} holds {}: A and B must pair up",
                a.display(),
                ma.m,
                b.display(),
                mb.m
            );
        }
        Ok(Batch {
            n: ma.n,
            m: ma.m,
            a: Arc::new(ma.data),
            b: Arc::new(mb.data),
        })
    }
}

/// How to run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    pub ports: Ports,
    /// Largest chunk, in bytes of A and B (a worker's load is split into
    /// chunks no larger, sent back to back).
    pub max_chunk_bytes: u64,
    /// Give up when no worker has said anything for this long.
    pub stall_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            ports: Ports::One,
            max_chunk_bytes: 256 << 20,
            stall_timeout: Duration::from_secs(120),
        }
    }
}

/// What crossed the master's port, in seconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Transfer {
    pub worker: usize,
    pub send: bool,
    pub start: f64,
    pub end: f64,
}

/// What was measured, in seconds from the start of the run.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Indexed like the platform; zeros for workers without load.
    pub workers: Vec<WorkerTimes>,
    /// Seconds each worker said it computed.
    pub compute_secs: Vec<f64>,
    pub transfers: Vec<Transfer>,
    pub makespan: f64,
}

/// The run's output: C in batch order, and the measurements.
pub struct Outcome {
    pub c: Vec<f64>,
    pub measured: Measured,
}

enum Cmd {
    Assign(Chunk),
    Grant(ChunkId),
}

enum Ev {
    Received(ChunkId, Instant),
    Ready(ChunkId, f64, Instant),
    Results(ChunkId, Vec<f64>, Instant),
    Failed(String),
}

async fn worker_task(
    mut link: Link,
    idx: usize,
    batch: Batch,
    job: JobId,
    mut cmds: mpsc::Receiver<Cmd>,
    events: mpsc::Sender<(usize, Ev)>,
) -> Link {
    let nn = batch.n * batch.n;
    enum Step {
        Cmd(Option<Cmd>),
        Frame(dls_protocol::Result<Option<dls_protocol::Frame<FromWorker>>>),
    }
    loop {
        let step = tokio::select! {
            c = cmds.recv() => Step::Cmd(c),
            f = link.conn.read_frame() => Step::Frame(f),
        };
        let ev = match step {
            Step::Cmd(None) => return link,
            Step::Cmd(Some(Cmd::Assign(ch))) => {
                let range = ch.start * nn..(ch.start + ch.len) * nn;
                let msg = ToWorker::Assign {
                    job,
                    chunk: ch.id,
                    n: batch.n as u32,
                    k: ch.len as u32,
                };
                match link
                    .conn
                    .write_frame_parts(&msg, &[&batch.a[range.clone()], &batch.b[range]])
                    .await
                {
                    Ok(()) => continue,
                    Err(e) => Ev::Failed(format!("sending chunk {}: {e}", ch.id.0)),
                }
            }
            Step::Cmd(Some(Cmd::Grant(chunk))) => match link.conn.send(&ToWorker::Grant { job, chunk }).await {
                Ok(()) => continue,
                Err(e) => Ev::Failed(format!("granting chunk {}: {e}", chunk.0)),
            },
            Step::Frame(Ok(Some(f))) => match f.msg {
                FromWorker::Received { job: j, chunk } if j == job => Ev::Received(chunk, Instant::now()),
                FromWorker::Ready {
                    job: j,
                    chunk,
                    compute_secs,
                } if j == job => Ev::Ready(chunk, compute_secs, Instant::now()),
                FromWorker::Results { job: j, chunk, n, .. } if j == job && n as usize == batch.n => {
                    Ev::Results(chunk, f.payload, Instant::now())
                }
                FromWorker::HeartbeatAck { .. } => continue,
                FromWorker::Error { code, message } => Ev::Failed(format!("reported {code:?}: {message}")),
                other => Ev::Failed(format!(
                    "sent an unexpected {}",
                    dls_protocol::handshake::variant(&other)
                )),
            },
            Step::Frame(Ok(None)) => Ev::Failed("closed the connection".into()),
            Step::Frame(Err(e)) => Ev::Failed(e.to_string()),
        };
        let failed = matches!(ev, Ev::Failed(_));
        if events.send((idx, ev)).await.is_err() || failed {
            return link;
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Stamps {
    send_start: Option<Instant>,
    send_end: Option<Instant>,
    compute_end: Option<Instant>,
    return_start: Option<Instant>,
    return_end: Option<Instant>,
}

/// Run `plan` on `links` (indexed like the plan's platform). The links come
/// back whatever happens, so they can serve the next batch. `on_chunk`
/// hears of every chunk returned (for progress bars).
pub async fn execute(
    links: Vec<Link>,
    plan: &Plan,
    batch: &Batch,
    job: JobId,
    opts: &RunOptions,
    mut on_chunk: impl FnMut(usize),
) -> (Vec<Link>, Result<Outcome>) {
    let p = links.len();
    if plan.loads.len() != p {
        let e = anyhow!("the plan has {} workers but {p} are connected", plan.loads.len());
        return (links, Err(e));
    }
    if plan.load as usize != batch.m {
        let e = anyhow!("the plan is for {} products but the batch has {}", plan.load, batch.m);
        return (links, Err(e));
    }
    let nn = batch.n * batch.n;
    let max_chunk = (opts.max_chunk_bytes / (16 * nn as u64).max(1)).max(1) as usize;
    let names: Vec<String> = links.iter().map(|l| l.name.clone()).collect();
    let chunk_table = executor::chunks(&plan.scenario.send_order, &plan.loads, max_chunk);
    let mut ex = Executor::new(
        opts.ports,
        &plan.scenario.send_order,
        &plan.scenario.return_order,
        chunk_table,
    );

    // Bounded: a worker has at most three events per chunk in flight, and
    // this loop drains the channel until the run ends.
    let (ev_tx, mut ev_rx) = mpsc::channel::<(usize, Ev)>(64);
    let mut cmd_tx = Vec::with_capacity(p);
    let mut tasks = Vec::with_capacity(p);
    for (i, link) in links.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel(16);
        cmd_tx.push(tx);
        tasks.push(tokio::spawn(worker_task(
            link,
            i,
            batch.clone(),
            job,
            rx,
            ev_tx.clone(),
        )));
    }
    drop(ev_tx);

    let t0 = Instant::now();
    let mut stamps = vec![Stamps::default(); p];
    let mut compute_secs = vec![0.0; p];
    let mut open: std::collections::HashMap<(usize, ChunkId, bool), Instant> = Default::default();
    let mut transfers = Vec::new();
    let mut c = vec![0.0f64; batch.m * nn];
    let secs = |t: Instant| t.duration_since(t0).as_secs_f64();

    let result: Result<()> = async {
        let mut pending = ex.start();
        // Results waiting to be copied into C: the copy happens after the
        // next commands are out, so it never holds up the port.
        let mut arrived: Option<(Chunk, Vec<f64>)> = None;
        loop {
            for cmd in pending.drain(..) {
                let now = Instant::now();
                let (w, msg) = match cmd {
                    Command::Assign(ch) => {
                        stamps[ch.worker].send_start.get_or_insert(now);
                        open.insert((ch.worker, ch.id, true), now);
                        (ch.worker, Cmd::Assign(ch))
                    }
                    Command::Grant { worker, chunk } => {
                        stamps[worker].return_start.get_or_insert(now);
                        open.insert((worker, chunk, false), now);
                        (worker, Cmd::Grant(chunk))
                    }
                };
                cmd_tx[w]
                    .send(msg)
                    .await
                    .map_err(|_| anyhow!("worker {:?}: its connection task ended", names[w]))?;
            }
            if let Some((ch, payload)) = arrived.take() {
                c[ch.start * nn..(ch.start + ch.len) * nn].copy_from_slice(&payload);
                on_chunk(ch.len);
            }
            if ex.done() {
                return Ok(());
            }
            let (w, ev) = match tokio::time::timeout(opts.stall_timeout, ev_rx.recv()).await {
                Err(_) => bail!("no worker made progress for {:?}; giving up", opts.stall_timeout),
                Ok(None) => bail!("every worker connection ended before the batch was done"),
                Ok(Some(x)) => x,
            };
            let event = match ev {
                Ev::Failed(why) => bail!("worker {:?}: {why}", names[w]),
                Ev::Received(chunk, at) => {
                    stamps[w].send_end = Some(at);
                    if let Some(start) = open.remove(&(w, chunk, true)) {
                        transfers.push(Transfer {
                            worker: w,
                            send: true,
                            start: secs(start),
                            end: secs(at),
                        });
                    }
                    Event::Received { worker: w, chunk }
                }
                Ev::Ready(chunk, s, at) => {
                    stamps[w].compute_end = Some(at);
                    compute_secs[w] += s;
                    Event::Ready { worker: w, chunk }
                }
                Ev::Results(chunk, payload, at) => {
                    let ch = ex.chunks()[w]
                        .iter()
                        .find(|x| x.id == chunk)
                        .copied()
                        .ok_or_else(|| anyhow!("worker {:?} returned unknown chunk {}", names[w], chunk.0))?;
                    if payload.len() != ch.len * nn {
                        bail!(
                            "worker {:?} returned {} values for chunk {} ({} expected)",
                            names[w],
                            payload.len(),
                            chunk.0,
                            ch.len * nn
                        );
                    }
                    c[ch.start * nn..(ch.start + ch.len) * nn].copy_from_slice(&payload);
                    stamps[w].return_end = Some(at);
                    if let Some(start) = open.remove(&(w, chunk, false)) {
                        transfers.push(Transfer {
                            worker: w,
                            send: false,
                            start: secs(start),
                            end: secs(at),
                        });
                    }
                    on_chunk(ch.len);
                    Event::Results { worker: w, chunk }
                }
            };
            pending = ex
                .on_event(event)
                .with_context(|| format!("worker {:?} broke the protocol", names[w]))?;
        }
    }
    .await;

    drop(cmd_tx);
    let mut links = Vec::with_capacity(p);
    for t in tasks {
        match t.await {
            Ok(l) => links.push(l),
            Err(e) => return (links, Err(anyhow!("a worker connection task failed: {e}"))),
        }
    }
    if let Err(e) = result {
        return (links, Err(e));
    }
    let times = stamps
        .iter()
        .map(|s| {
            let f = |t: Option<Instant>| t.map_or(0.0, secs);
            let (ce, rs) = (f(s.compute_end), f(s.return_start));
            WorkerTimes {
                send_start: f(s.send_start),
                send_end: f(s.send_end),
                compute_end: ce,
                return_start: rs,
                return_end: f(s.return_end),
                idle: (rs - ce).max(0.0),
            }
        })
        .collect::<Vec<_>>();
    let makespan = times.iter().map(|t| t.return_end).fold(0.0, f64::max);
    let measured = Measured {
        workers: times,
        compute_secs,
        transfers,
        makespan,
    };
    (links, Ok(Outcome { c, measured }))
}

/// Recompute `count` products chosen at random (from `seed`) and compare.
/// Returns how many were checked and the largest absolute error; fails
/// when an error exceeds what rounding can explain.
pub fn verify(batch: &Batch, c: &[f64], count: usize, seed: u64) -> Result<(usize, f64)> {
    use rand::SeedableRng;
    let count = count.min(batch.m);
    if count == 0 {
        return Ok((0, 0.0));
    }
    let n = batch.n;
    let nn = n * n;
    let k = kernel::Kernel::new(1).map_err(anyhow::Error::msg)?;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut picks = rand::seq::index::sample(&mut rng, batch.m, count).into_vec();
    picks.sort_unstable();
    let mut worst = 0.0f64;
    for i in picks {
        let mut ab = Vec::with_capacity(2 * nn);
        ab.extend_from_slice(&batch.a[i * nn..(i + 1) * nn]);
        ab.extend_from_slice(&batch.b[i * nn..(i + 1) * nn]);
        let want = k.multiply_batch(&ab, n, 1);
        let amax = batch.a[i * nn..(i + 1) * nn].iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let bmax = batch.b[i * nn..(i + 1) * nn].iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // Summation order may differ between kernels: allow n·ε per term.
        let tol = 4.0 * f64::EPSILON * (n as f64) * (n as f64) * amax * bmax + f64::MIN_POSITIVE;
        for (j, (got, want)) in c[i * nn..(i + 1) * nn].iter().zip(&want).enumerate() {
            let err = (got - want).abs();
            if err.is_nan() || err > tol {
                bail!(
                    "product {i} is wrong at ({}, {}): got {got}, expected {want} (|error| {err:.3e} > {tol:.3e})",
                    j / n,
                    j % n
                );
            }
            worst = worst.max(err);
        }
    }
    Ok((count, worst))
}
