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
use crate::runtime::link::Link;
use dls_protocol::{ChunkId, Frame, FromWorker, JobId, ToWorker, Values};
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the shell tells a link task.
pub(crate) enum Cmd {
    /// Send these products as one chunk; the worker may stay silent while
    /// it reads them, for at most the given time after the write completes.
    Assign(ChunkId, Arc<[usize]>, Duration),
    Grant(ChunkId),
    /// Tell the worker to drop the job, then stop.
    Cancel,
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

/// How a link task watches its worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    pub liveness: Duration,
    pub heartbeat: Duration,
}

pub(crate) struct LinkTask {
    pub link: Link,
    pub idx: usize,
    pub batch: Batch,
    pub job: JobId,
    pub watch: Watch,
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

/// Liveness bookkeeping of one link.
struct Pulse {
    in_flight: usize,
    /// Bytes read when last checked, and when they last changed.
    seen: (u64, Instant),
    last_beat: Instant,
    seq: u64,
    /// The worker may be silent until then (it is reading a chunk).
    quiet_until: Option<Instant>,
}

enum Step {
    Cmd(Option<Cmd>),
    Frame(dls_protocol::Result<Option<Frame<FromWorker>>>),
    Tick,
}

impl LinkTask {
    /// Run until the shell drops its sender, cancels, or the link fails
    /// (reported as [`Ev::Failed`]); the link comes back in every case.
    pub async fn run(mut self, mut cmds: mpsc::Receiver<Cmd>, events: mpsc::Sender<(usize, Ev)>) -> Link {
        self.link.conn.set_write_stall_timeout(Some(self.watch.liveness));
        let now = Instant::now();
        let mut pulse = Pulse {
            in_flight: 0,
            seen: (self.link.conn.bytes_read(), now),
            last_beat: now,
            seq: 0,
            quiet_until: None,
        };
        let period = self.watch.heartbeat.min(self.watch.liveness / 2);
        let mut ticker = tokio::time::interval(period.max(Duration::from_millis(10)));
        // The probes of Freivalds' test: never sent anywhere.
        let mut rng = rand::rngs::StdRng::from_os_rng();
        let mut pending: HashMap<ChunkId, Pending> = HashMap::new();
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let step = tokio::select! {
                c = cmds.recv() => Step::Cmd(c),
                f = self.link.conn.read_frame() => Step::Frame(f),
                _ = ticker.tick() => Step::Tick,
            };
            let ev = match step {
                Step::Cmd(None) => return self.link,
                Step::Cmd(Some(Cmd::Cancel)) => {
                    // Best effort: a straggler is told to drop the job, then left alone.
                    let _ = self.link.conn.send(&ToWorker::Cancel { job: self.job }).await;
                    return self.link;
                }
                Step::Cmd(Some(Cmd::Assign(chunk, products, reading))) => {
                    match read_inputs(&self.batch, products.clone()).await {
                        Err(why) => Some(Ev::Fatal(why)),
                        Ok(inputs) => {
                            let ev = self.assign(chunk, &inputs, products.len(), reading, &mut pulse).await;
                            if ev.is_none() {
                                pending.insert(chunk, expect(&self.batch, inputs, products, &mut rng));
                            }
                            ev
                        }
                    }
                }
                Step::Cmd(Some(cmd)) => self.on_cmd(cmd).await,
                Step::Tick => self.on_tick(&mut pulse).await,
                Step::Frame(f) => match self.on_frame(f, &mut pulse) {
                    Some(Ev::Results(chunk, c, at)) => Some(self.checked(pending.remove(&chunk), chunk, c, at).await),
                    ev => ev,
                },
            };
            let Some(ev) = ev else { continue };
            let failed = matches!(ev, Ev::Failed(_) | Ev::Fatal(_));
            if events.send((self.idx, ev)).await.is_err() || failed {
                return self.link;
            }
        }
    }

    /// Results that arrived for `chunk`, checked against what was worked
    /// out when it was sent. Results of a chunk never sent, or of the wrong
    /// size, go on to the shell, which knows what was granted.
    async fn checked(&self, pending: Option<Pending>, chunk: ChunkId, c: Values, at: Instant) -> Ev {
        let form = &self.batch.form;
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
                true => match (self.batch.a_of(g), self.batch.b_of(g)) {
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

    /// Send a chunk of `count` products.
    async fn assign(
        &mut self,
        chunk: ChunkId,
        inputs: &ChunkInputs,
        count: usize,
        reading: Duration,
        pulse: &mut Pulse,
    ) -> Option<Ev> {
        let form = self.batch.form;
        if form.shared_b && !self.has_b {
            let msg = ToWorker::ShareB { job: self.job, form };
            let b = match self.batch.b.read(0..form.shape.b_len() as usize) {
                Ok(b) => b,
                Err(e) => return Some(Ev::Fatal(format!("reading the shared B: {e}"))),
            };
            if let Err(e) = self.link.conn.write_frame_parts(&msg, &[&b.le_bytes()]).await {
                return Some(Ev::Failed(format!("sending the shared B: {e}")));
            }
            self.has_b = true;
        }
        let parts = inputs.parts();
        let parts: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
        let msg = ToWorker::Assign {
            job: self.job,
            chunk,
            form,
            count: count as u32,
        };
        pulse.in_flight += 1;
        pulse.seen = (self.link.conn.bytes_read(), Instant::now());
        match self.link.conn.write_frame_parts(&msg, &parts).await {
            Ok(()) => {
                // The bytes may still sit in socket buffers: the worker
                // reads them at its own pace and cannot answer until it has.
                pulse.quiet_until = Some(Instant::now() + reading);
                None
            }
            Err(e) => Some(Ev::Failed(format!("sending chunk {}: {e}", chunk.0))),
        }
    }

    async fn on_cmd(&mut self, cmd: Cmd) -> Option<Ev> {
        match cmd {
            Cmd::Grant(chunk) => match self.link.conn.send(&ToWorker::Grant { job: self.job, chunk }).await {
                Ok(()) => None,
                Err(e) => Some(Ev::Failed(format!("granting chunk {}: {e}", chunk.0))),
            },
            Cmd::Assign(..) | Cmd::Cancel => None,
        }
    }

    async fn on_tick(&mut self, pulse: &mut Pulse) -> Option<Ev> {
        let now = Instant::now();
        let reading = pulse.quiet_until.is_some_and(|t| now < t);
        let read = self.link.conn.bytes_read();
        if read != pulse.seen.0 || reading {
            pulse.seen = (read, now);
        } else if pulse.in_flight > 0 && now.duration_since(pulse.seen.1) > self.watch.liveness {
            let quiet = now.duration_since(pulse.seen.1).as_secs_f64();
            return Some(Ev::Failed(format!("no sign of life for {quiet:.1} s")));
        }
        // Always, work in flight or not: a worker ends a session whose
        // master stays silent (its idle timeout).
        if now.duration_since(pulse.last_beat) >= self.watch.heartbeat {
            pulse.seq += 1;
            pulse.last_beat = now;
            if let Err(e) = self.link.conn.send(&ToWorker::Heartbeat { seq: pulse.seq }).await {
                return Some(Ev::Failed(format!("heartbeat: {e}")));
            }
        }
        None
    }

    fn on_frame(&mut self, f: dls_protocol::Result<Option<Frame<FromWorker>>>, pulse: &mut Pulse) -> Option<Ev> {
        let job = self.job;
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
            } if j == job && form == self.batch.form => {
                pulse.in_flight = pulse.in_flight.saturating_sub(1);
                Ev::Results(chunk, f.payload, Instant::now())
            }
            FromWorker::Results { form, .. } => {
                Ev::Failed(format!("returned results of {form}, not {}", self.batch.form))
            }
            FromWorker::HeartbeatAck { .. } => return None,
            FromWorker::Error { code, message } => Ev::Failed(format!("reported {code:?}: {message}")),
            FromWorker::Bye => Ev::Failed("is shutting down (the daemon was stopped; it said goodbye)".into()),
            other => Ev::Failed(format!("sent an unexpected {}", other.name())),
        };
        Some(ev)
    }
}
