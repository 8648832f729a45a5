//! One task per worker owns its connection for the length of a run: it
//! writes the frames the shell hands it and turns what the worker says into
//! events. It decides nothing about the schedule; it only watches that the
//! worker stays alive (bytes or heartbeat answers at least every `liveness`)
//! and reports when it does not. It checks every product it receives with
//! Freivalds' test ([`check`]): what A and B imply is worked out on a
//! blocking thread while the worker computes, so that only one pass over C
//! remains when the results arrive.

use crate::runtime::batch::{Batch, ChunkInputs};
use crate::runtime::check::{self, Expected};
use crate::runtime::data::Slab;
use crate::runtime::link::Link;
use crate::runtime::pieces::{bytes_in, pieces, PIECE_BYTES};
use crate::runtime::product::link::{PanelCmd, ProductSide};
use crate::runtime::product::ProductJob;
use dls_protocol::conn::{ReadingHalf, WritingHalf};
use dls_protocol::outbox::{self, Outbox};
use dls_protocol::{ChunkId, Connection, Frame, FromWorker, JobId, ToWorker, Values};
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

mod order;
mod pulse;
use pulse::Pulse;

/// What the shell tells a link task.
pub(crate) enum Cmd {
    /// Send these products as one chunk; the worker may stay silent while
    /// it reads them, for at most the given time after the write completes.
    Assign(ChunkId, Arc<[usize]>, Duration),
    Grant(ChunkId),
    /// Send a panel of one large product.
    Panel(PanelCmd),
    /// Send large chunks in pieces from now on, or whole (a link paced
    /// once the rest of an opened batch is planned).
    Pieces(bool),
    /// Tell the worker to drop the job, then stop.
    Cancel,
}

/// The link tasks of a run: one per worker of the pool, lent for the run.
pub(crate) struct Links {
    /// Per worker, the way to its task (taken once it is released).
    pub senders: Vec<Option<mpsc::Sender<Cmd>>>,
    tasks: Vec<tokio::task::JoinHandle<Link>>,
}

impl Links {
    /// A task for every link of `pool` carrying `work`; their events come
    /// through the receiver. The links whose `pieces` say so send large
    /// chunks in pieces ([`crate::runtime::pieces`]).
    pub fn spawn(
        pool: &mut crate::runtime::pool::Pool,
        work: &Work,
        job: JobId,
        watch: Watch,
        pieces: &[bool],
    ) -> anyhow::Result<(Links, mpsc::Receiver<(usize, Ev)>)> {
        // Bounded: a worker has at most a few events per chunk in flight,
        // and the shell drains the channel until the run ends.
        let (ev_tx, ev_rx) = mpsc::channel::<(usize, Ev)>(64);
        let (mut senders, mut tasks) = (Vec::new(), Vec::new());
        for (idx, link) in pool.lend()?.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel(8);
            senders.push(Some(tx));
            let task = LinkTask {
                link,
                idx,
                work: work.clone(),
                job,
                watch,
                pieces: pieces.get(idx).copied().unwrap_or(false),
                has_b: false,
            };
            tasks.push(tokio::spawn(task.run(rx, ev_tx.clone())));
        }
        Ok((Links { senders, tasks }, ev_rx))
    }

    /// End every task and give the links back to `pool`.
    pub async fn restore(mut self, pool: &mut crate::runtime::pool::Pool) -> anyhow::Result<()> {
        self.senders.clear();
        let mut links = Vec::with_capacity(self.tasks.len());
        let mut lost_task = None;
        for t in self.tasks {
            match t.await {
                Ok(l) => links.push(l),
                Err(e) => lost_task = Some(e),
            }
        }
        pool.restore(links);
        match lost_task {
            Some(e) => anyhow::bail!("a worker connection task failed: {e}"),
            None => Ok(()),
        }
    }

    /// Hand `cmd` to `worker`'s task (a task that has ended is noticed
    /// through its Failed event).
    pub async fn send(&self, worker: usize, cmd: Cmd) {
        if let Some(Some(tx)) = self.senders.get(worker) {
            let _ = tx.send(cmd).await;
        }
    }

    /// Stop talking to `worker`, telling it to drop the job if `cancel`.
    pub async fn release(&mut self, worker: usize, cancel: bool) {
        let tx = self.senders.get_mut(worker).and_then(Option::take);
        if let (Some(tx), true) = (tx, cancel) {
            let _ = tx.send(Cmd::Cancel).await;
        }
    }
}

/// What a link task saw, and when.
pub(crate) enum Ev {
    Received(ChunkId, Instant),
    Ready(ChunkId, f64, Instant),
    Results(ChunkId, Values, Instant),
    /// The task has ended: why.
    Failed(String),
    /// The batch cannot go on, whoever computes it (its inputs cannot be
    /// read): why.
    Fatal(String),
}

/// How a link task watches its worker, and how it sends chunks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    pub liveness: Duration,
    pub heartbeat: Duration,
}

/// What the link carries: a batch's chunks, or one product's panels.
#[derive(Clone)]
pub(crate) enum Work {
    Batch(Batch),
    Product(Arc<ProductJob>),
}

pub(crate) struct LinkTask {
    pub link: Link,
    pub idx: usize,
    pub work: Work,
    pub job: JobId,
    pub watch: Watch,
    /// Large chunks go out in pieces ([`crate::runtime::pieces`]), so that
    /// a grant for this worker's return need not wait behind the chunk
    /// being sent to it: for a link whose sends are paced, where a chunk
    /// takes longer than its link needs. At the link's own rate a whole
    /// frame is faster: on the switched test bed (balanced star, n = 384),
    /// runs took 0.88-0.91× as long in whole frames as in pieces of 256
    /// KiB with the workers' whole processes capped, 0.96-1.0× without
    /// (docs/worker.md); on loopback pieces carry 0.86 of raw TCP.
    pub pieces: bool,
    /// Whether this worker has the job's shared B (sent before its first chunk).
    pub has_b: bool,
}

/// What the results of a chunk sent must satisfy, being worked out.
struct Pending {
    products: Arc<[usize]>,
    expected: tokio::task::JoinHandle<Vec<Expected>>,
}

/// Work out, off the async threads, what each product of a chunk must be
/// (from its inputs, read once for sending; they are dropped once this is
/// done, so the master holds a chunk's inputs only while it is in flight).
fn expect(batch: &Batch, inputs: Arc<ChunkInputs>, products: Arc<[usize]>, rng: &mut rand::rngs::StdRng) -> Pending {
    let x = check::probe(batch.dims().m, rng);
    let (d, dtype, count) = (batch.dims(), batch.form.dtype, products.len());
    let expected = tokio::task::spawn_blocking(move || {
        (0..count)
            .map(|j| Expected::new(&inputs.a_of(j), &inputs.b_of(j), d, x.clone(), dtype))
            .collect()
    });
    Pending { products, expected }
}

/// The inputs of a chunk: views of arrays in memory, or read from the
/// files off the async threads.
async fn read_inputs(batch: &Batch, products: Arc<[usize]>) -> Result<Arc<ChunkInputs>, String> {
    use crate::runtime::data::Source;
    let read = match (&batch.a, &batch.b) {
        (Source::Memory(_), Source::Memory(_)) => batch.read_chunk(&products),
        _ => {
            let b = batch.clone();
            match tokio::task::spawn_blocking(move || b.read_chunk(&products)).await {
                Ok(r) => r,
                Err(e) => return Err(format!("internal error: reading inputs: {e}")),
            }
        }
    };
    read.map(Arc::new)
        .map_err(|e| format!("reading the batch's inputs: {e}"))
}

type Reading = ReadingHalf<TcpStream, FromWorker, ToWorker>;
type Writing = WritingHalf<TcpStream, FromWorker, ToWorker>;

/// A frame for the worker, waiting for its turn on the connection.
enum Out {
    /// A message without payload (a grant, a heartbeat, a cancel).
    Msg(ToWorker),
    /// The job's shared B.
    ShareB(ToWorker, Slab),
    /// A chunk's inputs, or the bytes `range` of them (a `Part`); the
    /// worker may then stay silent for the duration while it reads them.
    Chunk(ChunkId, ToWorker, Arc<ChunkInputs>, std::ops::Range<usize>, Duration),
    /// A panel of one product, likewise.
    Panel(ChunkId, ToWorker, Arc<Values>, Duration),
}

/// What came of a write: the chunk's reading time once it is out, or the
/// failure, named.
struct Wrote {
    reading: Option<Duration>,
    failed: Option<String>,
}

/// The worker's connection split in two, so that results keep arriving
/// while a chunk goes out (a full-duplex link carries both at once; the
/// planner counts on it).
type Wire = Outbox<Writing, Out, Wrote>;

fn write(mut w: Writing, out: Out) -> outbox::Writing<Writing, Wrote> {
    Box::pin(async move {
        let (result, reading, what) = match &out {
            Out::Msg(msg) => (w.send(msg).await, None, msg.name().to_string()),
            Out::ShareB(msg, b) => (
                w.write_frame_parts(msg, &[&b.le_bytes()]).await,
                None,
                "sending the shared B".to_string(),
            ),
            Out::Chunk(chunk, msg, inputs, range, reading) => {
                let parts = inputs.parts();
                let parts = bytes_in(&parts, range.clone());
                let r = w.write_frame_parts(msg, &parts).await;
                (r, Some(*reading), format!("sending chunk {}", chunk.0))
            }
            Out::Panel(piece, msg, values, reading) => (
                w.write_frame(msg, values).await,
                Some(*reading),
                format!("sending a panel of piece {}", piece.0),
            ),
        };
        let failed = result.err().map(|e| format!("{what}: {e}"));
        (w, Wrote { reading, failed })
    })
}

enum Step {
    Cmd(Option<Cmd>),
    Frame(dls_protocol::Result<Option<Frame<FromWorker>>>),
    Wrote(Wrote),
    Tick,
}

impl LinkTask {
    /// Run until the shell drops its sender, cancels, or the link fails
    /// (reported as [`Ev::Failed`]); the link comes back in every case.
    pub async fn run(self, mut cmds: mpsc::Receiver<Cmd>, events: mpsc::Sender<(usize, Ev)>) -> Link {
        let LinkTask {
            link,
            idx,
            work,
            job,
            watch,
            pieces,
            mut has_b,
        } = self;
        let Link {
            name,
            address,
            caps,
            mut conn,
            mut control,
        } = link;
        conn.set_write_stall_timeout(Some(watch.liveness));
        let (mut reader, writer) = conn.split();
        let mut wire: Wire = Outbox::new(writer, write);
        let mut pulse = Pulse::new(reader.bytes_read());
        let period = watch.heartbeat.min(watch.liveness / 2);
        let mut ticker = tokio::time::interval(period.max(Duration::from_millis(10)));
        // The probes of Freivalds' test: never sent anywhere.
        let mut rng = rand::rngs::StdRng::from_os_rng();
        let mut pending: HashMap<ChunkId, Pending> = HashMap::new();
        let mut side = ProductSide::default();
        let mut order = order::Order::default();
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ctx = Ctx {
            work: &work,
            job,
            watch,
            pieces,
        };
        loop {
            let step = tokio::select! {
                c = cmds.recv() => Step::Cmd(c),
                f = reader.read_frame() => Step::Frame(f),
                f = read_control(&mut control) => Step::Frame(f),
                wrote = wire.wrote() => Step::Wrote(wrote),
                _ = ticker.tick() => Step::Tick,
            };
            let ev = match step {
                Step::Cmd(None) => break,
                Step::Cmd(Some(Cmd::Cancel)) => {
                    // Best effort: a straggler is told to drop the job, then left alone.
                    wire.push(Out::Msg(ToWorker::Cancel { job }));
                    let (writer, _) = wire.finish(true).await;
                    return Link {
                        name,
                        address,
                        caps,
                        conn: Connection::unsplit(reader, writer),
                        control,
                    };
                }
                Step::Cmd(Some(Cmd::Assign(chunk, products, reading))) => {
                    match ctx.assign(chunk, &products, reading, &mut has_b, &mut pulse).await {
                        Err(why) => Some(Ev::Fatal(why)),
                        Ok((outs, inputs, batch)) => {
                            pending.insert(chunk, expect(batch, inputs, products, &mut rng));
                            outs.into_iter().for_each(|o| wire.push(o));
                            None
                        }
                    }
                }
                Step::Cmd(Some(Cmd::Panel(cmd))) => match &ctx.work {
                    Work::Product(p) => {
                        let (piece, reading) = (cmd.piece, cmd.reading);
                        match side.panel(p, job, cmd, &mut rng).await {
                            Err(why) => Some(Ev::Fatal(why)),
                            Ok((msg, values, new_piece)) => {
                                pulse.in_flight += usize::from(new_piece);
                                pulse.seen.1 = Instant::now();
                                wire.push(Out::Panel(piece, msg, values, reading));
                                None
                            }
                        }
                    }
                    Work::Batch(_) => Some(Ev::Fatal("internal error: a panel to send on a batch's link".into())),
                },
                Step::Cmd(Some(Cmd::Pieces(on))) => {
                    ctx.pieces = on;
                    None
                }
                Step::Cmd(Some(Cmd::Grant(chunk))) => grant(&mut control, &mut wire, job, chunk).await,
                Step::Wrote(wrote) => pulse.wrote(wrote),
                Step::Tick => ctx.on_tick(&reader, &mut wire, &mut pulse),
                Step::Frame(f) => match on_frame(&ctx, f, &mut pulse) {
                    Some(Ev::Received(chunk, at)) => order.received(chunk).then_some(Ev::Received(chunk, at)),
                    Some(Ev::Ready(chunk, secs, at)) => {
                        if order.ready(chunk) && events.send((idx, Ev::Received(chunk, at))).await.is_err() {
                            break;
                        }
                        Some(Ev::Ready(chunk, secs, at))
                    }
                    Some(Ev::Results(chunk, c, at)) => match ctx.work {
                        Work::Batch(batch) => Some(checked(batch, pending.remove(&chunk), chunk, c, at).await),
                        Work::Product(job) => Some(piece_checked(job, side.pieces.remove(&chunk), chunk, c, at).await),
                    },
                    ev => ev,
                },
            };
            let Some(ev) = ev else { continue };
            let failed = matches!(ev, Ev::Failed(_) | Ev::Fatal(_));
            if events.send((idx, ev)).await.is_err() || failed {
                break;
            }
        }
        let (writer, _) = wire.finish(false).await;
        Link {
            name,
            address,
            caps,
            conn: Connection::unsplit(reader, writer),
            control,
        }
    }
}

/// Grant `chunk`'s return: on the control line, beside whatever goes out
/// on the connection; without one, on the connection before the pieces of
/// chunks not yet on the wire. A failed write ends the link.
async fn grant(
    control: &mut Option<crate::runtime::link::WorkerConn>,
    wire: &mut Wire,
    job: JobId,
    chunk: ChunkId,
) -> Option<Ev> {
    let grant = ToWorker::Grant { job, chunk };
    match control {
        Some(line) => (line.send(&grant).await.err())
            .map(|e| Ev::Failed(format!("granting chunk {} on the control line: {e}", chunk.0))),
        None => {
            wire.push_urgent(Out::Msg(grant));
            None
        }
    }
}

/// The next frame on the control line, if there is one (else never).
async fn read_control(
    control: &mut Option<crate::runtime::link::WorkerConn>,
) -> dls_protocol::Result<Option<Frame<FromWorker>>> {
    match control {
        Some(line) => line.read_frame().await,
        None => std::future::pending().await,
    }
}

/// What a link task's steps read of it.
struct Ctx<'a> {
    work: &'a Work,
    job: JobId,
    watch: Watch,
    pieces: bool,
}

/// Results that arrived for `chunk`, checked against what was worked out
/// when it was sent. Results of a chunk never sent, or of the wrong size,
/// go on to the shell, which knows what was granted.
async fn checked(batch: &Batch, pending: Option<Pending>, chunk: ChunkId, c: Values, at: Instant) -> Ev {
    {
        let form = &batch.form;
        let c_len = form.shape.c_len() as usize;
        let Some(Pending { products, expected }) = pending.filter(|p| p.products.len() * c_len == c.len()) else {
            return Ev::Results(chunk, c, at);
        };
        let expected = match expected.await {
            Ok(e) => e,
            Err(e) => return Ev::Failed(format!("internal error: checking chunk {}: {e}", chunk.0)),
        };
        for (j, (&g, e)) in products.iter().zip(&expected).enumerate() {
            // A and B again only for rows that must be recomputed (rare).
            let (a, b) = match e.needs_inputs() {
                false => (Vec::new(), Vec::new()),
                true => match (batch.a_of(g), batch.b_of(g)) {
                    (Ok(a), Ok(b)) => (a, b),
                    (Err(e), _) | (_, Err(e)) => return Ev::Fatal(format!("reading the batch's inputs: {e}")),
                },
            };
            if let Err(m) = e.check(&a, &b, &crate::runtime::batch::c_of(&c, form, j)) {
                return Ev::Failed(format!(
                    "returned a wrong result for product {g} (chunk {}): {m}",
                    chunk.0
                ));
            }
        }
        Ev::Results(chunk, c, at)
    }
}

/// A piece of one product that arrived, checked against what its panels
/// imply. A piece never sent, or of the wrong size, goes on to the shell.
async fn piece_checked(
    job: &ProductJob,
    check: Option<crate::runtime::product::check::PieceCheck>,
    piece: ChunkId,
    c: Values,
    at: Instant,
) -> Ev {
    let Some(check) = check.filter(|k| k.len() == c.len()) else {
        return Ev::Results(piece, c, at);
    };
    match check.check(job, c).await {
        (c, Ok(Ok(()))) => Ev::Results(piece, c, at),
        (_, Ok(Err(m))) => Ev::Failed(format!("returned a wrong result for piece {}: {m}", piece.0)),
        (_, Err(why)) => Ev::Fatal(why),
    }
}

impl Ctx<'_> {
    /// What to write to send a chunk of `products` (the shared B first,
    /// if the worker has not had it), and the chunk's inputs; or why the
    /// batch cannot go on.
    async fn assign(
        &self,
        chunk: ChunkId,
        products: &Arc<[usize]>,
        reading: Duration,
        has_b: &mut bool,
        pulse: &mut Pulse,
    ) -> Result<(Vec<Out>, Arc<ChunkInputs>, &Batch), String> {
        let Work::Batch(batch) = self.work else {
            return Err("internal error: a chunk of a batch to send on a product's link".into());
        };
        let inputs = read_inputs(batch, products.clone()).await?;
        let form = batch.form;
        let mut outs = Vec::with_capacity(2);
        if form.shared_b && !*has_b {
            let b = (batch.b.read(0..form.shape.b_len() as usize)).map_err(|e| format!("reading the shared B: {e}"))?;
            outs.push(Out::ShareB(ToWorker::ShareB { job: self.job, form }, b));
            *has_b = true;
        }
        let bytes = form.in_bytes(products.len() as u32) as usize;
        let piece = if self.pieces { PIECE_BYTES } else { usize::MAX };
        for (msg, range, reading) in pieces(self.job, chunk, form, products.len() as u32, bytes, piece, reading) {
            outs.push(Out::Chunk(chunk, msg, inputs.clone(), range, reading));
        }
        pulse.in_flight += 1;
        pulse.seen.1 = Instant::now();
        Ok((outs, inputs, batch))
    }

    /// Whether results of `form` may belong to this job: a batch's form,
    /// or any form of a product's type (the shell checks the piece's size).
    fn takes(&self, form: &dls_protocol::Form) -> bool {
        match self.work {
            Work::Batch(b) => *form == b.form,
            Work::Product(p) => form.dtype == p.dtype() && !form.shared_b,
        }
    }

    fn on_tick(&self, reader: &Reading, wire: &mut Wire, pulse: &mut Pulse) -> Option<Ev> {
        let now = Instant::now();
        // A worker being written to is alive while the write goes on (a
        // write that stalls fails by itself).
        let reading = pulse.quiet_until.is_some_and(|t| now < t) || !wire.is_empty();
        let read = reader.bytes_read();
        if read != pulse.seen.0 || reading {
            pulse.seen = (read, now);
        } else if pulse.in_flight > 0 && now.duration_since(pulse.seen.1) > self.watch.liveness {
            let quiet = now.duration_since(pulse.seen.1).as_secs_f64();
            return Some(Ev::Failed(format!("no sign of life for {quiet:.1} s")));
        }
        // Always, work in flight or not: a worker ends a session whose
        // master stays silent (its idle timeout). A heartbeat waits behind
        // a chunk going out, whose bytes are signs of life enough.
        if now.duration_since(pulse.last_beat) >= self.watch.heartbeat {
            pulse.seq += 1;
            pulse.last_beat = now;
            if wire.is_empty() {
                wire.push(Out::Msg(ToWorker::Heartbeat { seq: pulse.seq }));
            }
        }
        None
    }
}

fn on_frame(ctx: &Ctx, f: dls_protocol::Result<Option<Frame<FromWorker>>>, pulse: &mut Pulse) -> Option<Ev> {
    let job = ctx.job;
    let f = match f {
        Ok(Some(f)) => f,
        Ok(None) => return Some(Ev::Failed("closed the connection".into())),
        Err(e) => return Some(Ev::Failed(e.to_string())),
    };
    let ev = match f.msg {
        FromWorker::Received { job: j, chunk } if j == job => {
            pulse.quiet_until = None;
            Ev::Received(chunk, Instant::now())
        }
        FromWorker::Ready {
            job: j,
            chunk,
            compute_secs,
        } if j == job => Ev::Ready(chunk, compute_secs, Instant::now()),
        FromWorker::Results {
            job: j, chunk, form, ..
        } if j == job && ctx.takes(&form) => {
            pulse.in_flight = pulse.in_flight.saturating_sub(1);
            Ev::Results(chunk, f.payload, Instant::now())
        }
        FromWorker::Results { form, .. } => Ev::Failed(format!("returned results of {form}, not of this job")),
        FromWorker::HeartbeatAck { .. } => return None,
        FromWorker::Error { code, message } => Ev::Failed(format!("reported {code:?}: {message}")),
        FromWorker::Bye => Ev::Failed("is shutting down (the daemon was stopped; it said goodbye)".into()),
        other => Ev::Failed(format!("sent an unexpected {}", other.name())),
    };
    Some(ev)
}
