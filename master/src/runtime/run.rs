//! Running a batch: the executor's commands carried out over the workers'
//! connections, with every transfer timed.
//!
//! One task per worker owns its connection: it writes the frames the central
//! loop tells it to and turns what the worker says into events. The central
//! loop owns the [`Executor`], so the single-port discipline lives in one
//! place and is checked by its own tests.

use crate::runtime::executor::{self, Command, Event, Executor, Schedule, SelfScheduler};
use crate::runtime::link::Link;
use anyhow::{anyhow, bail, Context, Result};
use dls_lp::{Plan, Platform, Ports, Request, WorkerTimes};
use dls_protocol::{ChunkId, FromWorker, JobId, ToWorker};
use dls_worker::kernel;
use std::collections::HashMap;
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
        let ma = crate::output::npy::read(a, n)?;
        let mb = crate::output::npy::read(b, Some(ma.n))?;
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
    /// A worker with work in flight must show a sign of life (a byte, a
    /// heartbeat answer) at least this often, and a send must make progress
    /// this often; otherwise the worker is lost.
    pub liveness: Duration,
    /// How often an otherwise silent worker is sent a heartbeat.
    pub heartbeat: Duration,
    /// Treat a worker as lost when it is this many times later than its
    /// predicted compute end (plus a second), if set.
    pub straggler: Option<f64>,
    /// Give up when nothing at all happens for this long.
    pub stall_timeout: Duration,
    /// Instead of the plan's loads, hand out chunks of this many products
    /// on demand (the self-scheduling baseline; the plan only names the
    /// workers and the predictions). Recovery rounds are planned as usual.
    pub self_schedule: Option<usize>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            ports: Ports::One,
            max_chunk_bytes: 256 << 20,
            liveness: Duration::from_millis(1500),
            heartbeat: Duration::from_millis(250),
            straggler: None,
            stall_timeout: Duration::from_secs(120),
            self_schedule: None,
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

/// A worker given up on during the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    pub worker: usize,
    /// Seconds from the start of the run.
    pub at: f64,
    pub reason: String,
    /// Products it held that had not come back (redone elsewhere).
    pub products_lost: usize,
}

/// A recovery round: the lost products planned again over the survivors.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Replan {
    pub at: f64,
    pub products: usize,
    pub workers: Vec<usize>,
    /// The recovery plan's predicted makespan.
    pub predicted: f64,
}

/// What was measured, in seconds from the start of the run.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Indexed like the platform; zeros for workers without load.
    pub workers: Vec<WorkerTimes>,
    /// Seconds each worker said it computed.
    pub compute_secs: Vec<f64>,
    pub transfers: Vec<Transfer>,
    pub failures: Vec<Failure>,
    pub replans: Vec<Replan>,
    pub makespan: f64,
}

/// The run's output: C in batch order, and the measurements.
pub struct Outcome {
    pub c: Vec<f64>,
    pub measured: Measured,
}

/// A chunk as a worker task sees it: global product indices.
struct Job {
    id: ChunkId,
    products: Vec<usize>,
}

enum Cmd {
    /// Send a chunk; the worker may stay silent while it reads it, for at
    /// most the given time after the write completes.
    Assign(Arc<Job>, Duration),
    Grant(ChunkId),
    Cancel,
}

enum Ev {
    Received(ChunkId, Instant),
    Ready(ChunkId, f64, Instant),
    Results(ChunkId, Vec<f64>, Instant),
    Failed(String),
}

/// Merge sorted product indices into contiguous ranges of values.
fn ranges(products: &[usize], nn: usize) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for &i in products {
        match out.last_mut() {
            Some(r) if r.end == i * nn => r.end += nn,
            _ => out.push(i * nn..(i + 1) * nn),
        }
    }
    out
}

async fn worker_task(
    mut link: Link,
    idx: usize,
    batch: Batch,
    job: JobId,
    opts: RunOptions,
    mut cmds: mpsc::Receiver<Cmd>,
    events: mpsc::Sender<(usize, Ev)>,
) -> Link {
    let nn = batch.n * batch.n;
    enum Step {
        Cmd(Option<Cmd>),
        Frame(dls_protocol::Result<Option<dls_protocol::Frame<FromWorker>>>),
        Tick,
    }
    link.conn.set_write_stall_timeout(Some(opts.liveness));
    let mut in_flight = 0usize;
    let mut seen = (link.conn.bytes_read(), Instant::now());
    let mut last_beat = Instant::now();
    let mut ticker = tokio::time::interval(opts.heartbeat.min(opts.liveness / 2).max(Duration::from_millis(10)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seq = 0u64;
    let mut quiet_until: Option<Instant> = None;
    loop {
        let step = tokio::select! {
            c = cmds.recv() => Step::Cmd(c),
            f = link.conn.read_frame() => Step::Frame(f),
            _ = ticker.tick() => Step::Tick,
        };
        let ev = match step {
            Step::Cmd(None) => return link,
            Step::Cmd(Some(Cmd::Assign(ch, reading))) => {
                let rs = ranges(&ch.products, nn);
                let mut parts: Vec<&[f64]> = rs.iter().map(|r| &batch.a[r.clone()]).collect();
                parts.extend(rs.iter().map(|r| &batch.b[r.clone()]));
                let msg = ToWorker::Assign {
                    job,
                    chunk: ch.id,
                    n: batch.n as u32,
                    k: ch.products.len() as u32,
                };
                in_flight += 1;
                seen = (link.conn.bytes_read(), Instant::now());
                match link.conn.write_frame_parts(&msg, &parts).await {
                    Ok(()) => {
                        // The bytes may still sit in socket buffers: the worker
                        // reads them at its own pace and cannot answer until it has.
                        quiet_until = Some(Instant::now() + reading);
                        continue;
                    }
                    Err(e) => Ev::Failed(format!("sending chunk {}: {e}", ch.id.0)),
                }
            }
            Step::Cmd(Some(Cmd::Grant(chunk))) => match link.conn.send(&ToWorker::Grant { job, chunk }).await {
                Ok(()) => continue,
                Err(e) => Ev::Failed(format!("granting chunk {}: {e}", chunk.0)),
            },
            Step::Cmd(Some(Cmd::Cancel)) => {
                // Best effort: a straggler is told to drop the job, then left alone.
                let _ = link.conn.send(&ToWorker::Cancel { job }).await;
                return link;
            }
            Step::Tick => {
                let now = Instant::now();
                let reading = quiet_until.is_some_and(|t| now < t);
                if link.conn.bytes_read() != seen.0 || reading {
                    seen = (link.conn.bytes_read(), now);
                } else if in_flight > 0 && now.duration_since(seen.1) > opts.liveness {
                    Ev::Failed(format!(
                        "no sign of life for {:.1} s",
                        now.duration_since(seen.1).as_secs_f64()
                    ))
                    .into_event(&events, idx)
                    .await;
                    return link;
                }
                if in_flight > 0 && now.duration_since(last_beat) >= opts.heartbeat {
                    seq += 1;
                    last_beat = now;
                    if let Err(e) = link.conn.send(&ToWorker::Heartbeat { seq }).await {
                        Ev::Failed(format!("heartbeat: {e}")).into_event(&events, idx).await;
                        return link;
                    }
                }
                continue;
            }
            Step::Frame(Ok(Some(f))) => match f.msg {
                FromWorker::Received { job: j, chunk } if j == job => {
                    quiet_until = None;
                    Ev::Received(chunk, Instant::now())
                }
                FromWorker::Ready {
                    job: j,
                    chunk,
                    compute_secs,
                } if j == job => Ev::Ready(chunk, compute_secs, Instant::now()),
                FromWorker::Results { job: j, chunk, n, .. } if j == job && n as usize == batch.n => {
                    in_flight = in_flight.saturating_sub(1);
                    Ev::Results(chunk, f.payload, Instant::now())
                }
                FromWorker::Results { n, .. } => Ev::Failed(format!("returned results of size {n}, not {}", batch.n)),
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

impl Ev {
    async fn into_event(self, events: &mpsc::Sender<(usize, Ev)>, idx: usize) {
        let _ = events.send((idx, self)).await;
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

/// One round: an executor over a plan, products mapped to global indices.
struct Round {
    ex: Box<dyn Schedule>,
    /// Round-local product index → global product index.
    index: Vec<usize>,
    /// Chunk id → the chunk's global products.
    jobs: HashMap<ChunkId, Arc<Job>>,
    /// Predicted compute end of each worker, seconds from the round start.
    predicted_compute_end: Vec<f64>,
    start: Instant,
}

impl Round {
    fn new(plan: &Plan, index: Vec<usize>, max_chunk: usize, first_id: u64, ports: Ports) -> Round {
        let mut table = executor::chunks(&plan.scenario.send_order, &plan.loads, max_chunk);
        let mut jobs = HashMap::new();
        for c in table.iter_mut().flatten() {
            c.id = ChunkId(c.id.0 + first_id);
            let products = index[c.start..c.start + c.len].to_vec();
            jobs.insert(c.id, Arc::new(Job { id: c.id, products }));
        }
        Round {
            ex: Box::new(Executor::new(
                ports,
                &plan.scenario.send_order,
                &plan.scenario.return_order,
                table,
            )),
            index,
            jobs,
            predicted_compute_end: plan.integer.workers.iter().map(|t| t.compute_end).collect(),
            start: Instant::now(),
        }
    }

    /// Self-scheduling over `workers`: chunks of `size` handed out on demand.
    fn self_scheduled(
        p: usize,
        workers: &[usize],
        index: Vec<usize>,
        size: usize,
        first_id: u64,
        ports: Ports,
    ) -> Round {
        let ex = SelfScheduler::new(ports, p, workers, index.len(), size, first_id);
        let jobs = ex
            .chunks()
            .iter()
            .map(|c| {
                let products = index[c.start..c.start + c.len].to_vec();
                (c.id, Arc::new(Job { id: c.id, products }))
            })
            .collect();
        Round {
            ex: Box::new(ex),
            index,
            jobs,
            predicted_compute_end: vec![0.0; p],
            start: Instant::now(),
        }
    }

    fn chunk_count(&self) -> u64 {
        self.jobs.len() as u64
    }
}

/// Run `plan` on `links` (indexed like `platform`, for which the plan was
/// made). Workers that fail are given up on; the products they had not
/// returned are planned again over the survivors and run in a recovery
/// round, until every product is in or no worker is left. The links come
/// back whatever happens. `on_chunk` hears of every product returned.
pub async fn execute(
    links: Vec<Link>,
    platform: &Platform,
    plan: &Plan,
    batch: &Batch,
    job: JobId,
    opts: &RunOptions,
    mut on_chunk: impl FnMut(usize),
) -> (Vec<Link>, Result<Outcome>) {
    let p = links.len();
    if plan.loads.len() != p || platform.len() != p {
        let e = anyhow!("the plan has {} workers but {p} are connected", plan.loads.len());
        return (links, Err(e));
    }
    if plan.load as usize != batch.m {
        let e = anyhow!("the plan is for {} products but the batch has {}", plan.load, batch.m);
        return (links, Err(e));
    }
    let nn = batch.n * batch.n;
    let max_chunk = (opts.max_chunk_bytes / (16 * nn as u64).max(1)).max(1) as usize;
    // Bounded: a worker has at most a few events per chunk in flight, and
    // this loop drains the channel until the run ends.
    let (ev_tx, mut ev_rx) = mpsc::channel::<(usize, Ev)>(64);
    let mut cmd_tx: Vec<Option<mpsc::Sender<Cmd>>> = Vec::with_capacity(p);
    let mut tasks = Vec::with_capacity(p);
    for (i, link) in links.into_iter().enumerate() {
        let (tx, rx) = mpsc::channel(16);
        cmd_tx.push(Some(tx));
        tasks.push(tokio::spawn(worker_task(
            link,
            i,
            batch.clone(),
            job,
            *opts,
            rx,
            ev_tx.clone(),
        )));
    }
    drop(ev_tx);

    let t0 = Instant::now();
    let secs = |t: Instant| t.duration_since(t0).as_secs_f64();
    let mut stamps = vec![Stamps::default(); p];
    let mut compute_secs = vec![0.0; p];
    let mut open: HashMap<(usize, ChunkId, bool), Instant> = HashMap::new();
    let mut transfers = Vec::new();
    let mut failures: Vec<Failure> = Vec::new();
    let mut replans: Vec<Replan> = Vec::new();
    let mut alive = vec![true; p];
    let mut c = vec![0.0f64; batch.m * nn];
    let mut got = vec![false; batch.m];

    let result: Result<()> = async {
        let mut round = match opts.self_schedule {
            Some(size) => {
                let workers: Vec<usize> = (0..p).filter(|&w| plan.loads[w] > 0 || plan.load == 0).collect();
                let workers = if workers.is_empty() { (0..p).collect() } else { workers };
                Round::self_scheduled(p, &workers, (0..batch.m).collect(), size, 0, opts.ports)
            }
            None => Round::new(plan, (0..batch.m).collect(), max_chunk, 0, opts.ports),
        };
        let mut next_id = round.chunk_count();
        let mut lost_products: Vec<usize> = Vec::new();
        let mut pending = round.ex.start();
        let mut arrived: Option<(Arc<Job>, Vec<f64>)> = None;
        let mut check = tokio::time::interval(Duration::from_millis(100));
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_event = Instant::now();
        loop {
            for cmd in pending.drain(..) {
                let now = Instant::now();
                let (w, msg) = match cmd {
                    Command::Assign(ch) => {
                        stamps[ch.worker].send_start.get_or_insert(now);
                        open.insert((ch.worker, ch.id, true), now);
                        let job = round.jobs.get(&ch.id).cloned().ok_or_else(|| anyhow!("chunk {} vanished", ch.id.0))?;
                        // Three times the predicted transfer, plus the liveness window.
                        let predicted = platform.workers()[ch.worker].c * ch.len as f64;
                        let reading = opts.liveness + Duration::from_secs_f64((3.0 * predicted).min(3600.0));
                        (ch.worker, Cmd::Assign(job, reading))
                    }
                    Command::Grant { worker, chunk } => {
                        stamps[worker].return_start.get_or_insert(now);
                        open.insert((worker, chunk, false), now);
                        (worker, Cmd::Grant(chunk))
                    }
                };
                // A worker whose task has ended is noticed through its Failed event.
                if let Some(tx) = &cmd_tx[w] {
                    let _ = tx.send(msg).await;
                }
            }
            if let Some((job, payload)) = arrived.take() {
                for (j, &g) in job.products.iter().enumerate() {
                    c[g * nn..(g + 1) * nn].copy_from_slice(&payload[j * nn..(j + 1) * nn]);
                    got[g] = true;
                }
                on_chunk(job.products.len());
            }
            if round.ex.done() {
                if lost_products.is_empty() {
                    return Ok(());
                }
                // A recovery round over the survivors.
                let survivors: Vec<usize> = (0..p).filter(|&w| alive[w]).collect();
                if survivors.is_empty() {
                    bail!(
                        "every worker was lost; {} of {} products were not computed (nothing is written as if complete)",
                        lost_products.len(),
                        batch.m
                    );
                }
                lost_products.sort_unstable();
                let sub = Platform::new(survivors.iter().map(|&w| platform.workers()[w].clone()).collect())?;
                let req = Request {
                    load: lost_products.len() as u64,
                    strategy: plan.strategy,
                    ports: opts.ports,
                    rounding: dls_lp::Rounding::Refined,
                };
                let sub_plan = dls_lp::plan(&sub, &req).context("planning the lost products again")?;
                let full = widen(&sub_plan, &survivors, p);
                replans.push(Replan {
                    at: secs(Instant::now()),
                    products: lost_products.len(),
                    workers: survivors.clone(),
                    predicted: sub_plan.makespan(),
                });
                round = Round::new(&full, std::mem::take(&mut lost_products), max_chunk, next_id, opts.ports);
                next_id += round.chunk_count();
                for (w, a) in alive.iter().enumerate() {
                    if !a {
                        let (_, cmds) = round.ex.lose(w);
                        pending.extend(cmds);
                    }
                }
                pending.extend(round.ex.start());
                continue;
            }
            let event = tokio::select! {
                e = ev_rx.recv() => e,
                _ = check.tick() => {
                    // Stragglers: far behind their predicted compute end.
                    if let Some(f) = opts.straggler {
                        let now = Instant::now();
                        for w in 0..p {
                            let pending_ready = alive[w] && !round.ex.is_lost(w) && round.ex.awaiting_ready(w);
                            let due = round.predicted_compute_end[w] * f + 1.0;
                            if pending_ready && now.duration_since(round.start).as_secs_f64() > due {
                                let why = format!("straggling: not done {:.2} s after its round started (predicted compute end {:.2} s)", now.duration_since(round.start).as_secs_f64(), round.predicted_compute_end[w]);
                                if let Some(tx) = cmd_tx[w].take() {
                                    let _ = tx.send(Cmd::Cancel).await;
                                }
                                pending.extend(give_up(&mut round, w, why, &mut alive, &mut failures, &mut lost_products, secs(now)));
                            }
                        }
                    }
                    if last_event.elapsed() > opts.stall_timeout {
                        bail!("no worker made progress for {:?}; giving up", opts.stall_timeout);
                    }
                    continue;
                }
            };
            last_event = Instant::now();
            let Some((w, ev)) = event else {
                bail!("every worker connection ended before the batch was done");
            };
            if !alive[w] {
                continue;
            }
            let event = match ev {
                Ev::Failed(why) => {
                    cmd_tx[w] = None;
                    let now = secs(Instant::now());
                    pending.extend(give_up(&mut round, w, why, &mut alive, &mut failures, &mut lost_products, now));
                    continue;
                }
                Ev::Received(chunk, at) => {
                    stamps[w].send_end = Some(at);
                    if let Some(start) = open.remove(&(w, chunk, true)) {
                        transfers.push(Transfer { worker: w, send: true, start: secs(start), end: secs(at) });
                    }
                    Event::Received { worker: w, chunk }
                }
                Ev::Ready(chunk, s, at) => {
                    stamps[w].compute_end = Some(at);
                    compute_secs[w] += s;
                    Event::Ready { worker: w, chunk }
                }
                Ev::Results(chunk, payload, at) => {
                    let job = round.jobs.get(&chunk).cloned();
                    let problem = match &job {
                        None => Some(format!("returned unknown chunk {}", chunk.0)),
                        Some(j) if payload.len() != j.products.len() * nn => Some(format!(
                            "returned {} values for chunk {} ({} expected)",
                            payload.len(),
                            chunk.0,
                            j.products.len() * nn
                        )),
                        Some(j) if !payload.iter().all(|v| v.is_finite()) && inputs_finite(batch, &j.products) => {
                            Some(format!("returned non-finite values for chunk {} of finite inputs", chunk.0))
                        }
                        Some(_) => None,
                    };
                    if let Some(why) = problem {
                        cmd_tx[w] = None;
                        let now = secs(Instant::now());
                        pending.extend(give_up(&mut round, w, why, &mut alive, &mut failures, &mut lost_products, now));
                        continue;
                    }
                    stamps[w].return_end = Some(at);
                    if let Some(start) = open.remove(&(w, chunk, false)) {
                        transfers.push(Transfer { worker: w, send: false, start: secs(start), end: secs(at) });
                    }
                    if let Some(j) = job {
                        arrived = Some((j, payload));
                    }
                    Event::Results { worker: w, chunk }
                }
            };
            match round.ex.on_event(event) {
                Ok(cmds) => pending = cmds,
                Err(e) => {
                    cmd_tx[w] = None;
                    let why = format!("broke the protocol: {e}");
                    let now = secs(Instant::now());
                    pending.extend(give_up(&mut round, w, why, &mut alive, &mut failures, &mut lost_products, now));
                }
            }
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
    if let Some(missing) = got.iter().position(|g| !g) {
        return (links, Err(anyhow!("product {missing} never came back")));
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
    let makespan = transfers.iter().map(|t| t.end).fold(0.0, f64::max);
    let measured = Measured {
        workers: times,
        compute_secs,
        transfers,
        failures,
        replans,
        makespan,
    };
    (links, Ok(Outcome { c, measured }))
}

/// Lose `w` in this round: record why, and collect its unreturned products.
fn give_up(
    round: &mut Round,
    w: usize,
    reason: String,
    alive: &mut [bool],
    failures: &mut Vec<Failure>,
    lost_products: &mut Vec<usize>,
    at: f64,
) -> Vec<Command> {
    alive[w] = false;
    let (lost, cmds) = round.ex.lose(w);
    let before = lost_products.len();
    for ch in &lost {
        lost_products.extend_from_slice(&round.index[ch.start..ch.start + ch.len]);
    }
    tracing::warn!(worker = w, %reason, products = lost_products.len() - before, "worker lost");
    failures.push(Failure {
        worker: w,
        at,
        reason,
        products_lost: lost_products.len() - before,
    });
    cmds
}

/// Whether every input of these products is finite.
fn inputs_finite(batch: &Batch, products: &[usize]) -> bool {
    let nn = batch.n * batch.n;
    products.iter().all(|&i| {
        batch.a[i * nn..(i + 1) * nn]
            .iter()
            .chain(&batch.b[i * nn..(i + 1) * nn])
            .all(|v| v.is_finite())
    })
}

/// A plan over a subset of workers, spread back to full worker indices.
fn widen(sub: &Plan, survivors: &[usize], p: usize) -> Plan {
    let map = |o: &[usize]| o.iter().map(|&i| survivors[i]).collect::<Vec<_>>();
    let mut loads = vec![0u64; p];
    let mut alpha = vec![0.0; p];
    let mut workers = vec![WorkerTimes::default(); p];
    let mut rworkers = vec![WorkerTimes::default(); p];
    for (k, &w) in survivors.iter().enumerate() {
        loads[w] = sub.loads[k];
        alpha[w] = sub.alpha[k];
        workers[w] = sub.integer.workers[k];
        rworkers[w] = sub.rational.workers[k];
    }
    Plan {
        scenario: dls_lp::Scenario {
            send_order: map(&sub.scenario.send_order),
            return_order: map(&sub.scenario.return_order),
        },
        alpha,
        loads,
        integer: dls_lp::Timeline {
            workers,
            makespan: sub.integer.makespan,
        },
        rational: dls_lp::Timeline {
            workers: rworkers,
            makespan: sub.rational.makespan,
        },
        ..sub.clone()
    }
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
