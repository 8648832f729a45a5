//! One master's session on the daemon: the chunk state machine (received
//! → computed → granted → returned), computing on a blocking thread so the
//! connection keeps answering heartbeats and grants, and the idle timeout.

use crate::config::{Config, Reference, SpeedChange, WorkerConn, MAX_IN_FLIGHT};
use crate::kernel;
use crate::throttle::Throttled;
use dls_protocol::{ChunkId, Error, ErrorCode, Form, Frame, FromWorker, JobId, Result, ToWorker, Values};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::debug;

mod acks;
mod assign;
mod compute;
mod exchange;
mod panel;
use compute::compute;

enum Work {
    Chunk {
        key: Key,
        form: Form,
        count: u32,
        inputs: Values,
        shared_b: Option<Arc<Values>>,
    },
    Probe {
        form: Form,
        count: u32,
    },
    /// An outer-product step of a piece of one large product.
    Panel {
        key: Key,
        form: Form,
        depth: u32,
        first: bool,
        last: bool,
        inputs: Values,
    },
    /// Forget the pieces of this job being added up.
    Drop(JobId),
}

enum Done {
    Chunk {
        key: Key,
        form: Form,
        count: u32,
        c: std::result::Result<Values, String>,
        secs: f64,
    },
    Probe {
        count: u32,
        secs: std::result::Result<f64, String>,
    },
    /// A panel added; after the last, the piece's C.
    Panel {
        key: Key,
        form: Form,
        c: std::result::Result<Option<(Form, Values)>, String>,
        secs: f64,
    },
    Dropped,
}

type Key = (JobId, ChunkId);

struct Computed {
    form: Form,
    count: u32,
    c: Values,
}

// A chunk holds A and B until computed, C until returned.

pub(crate) use acks::{AckSlot, ControlLine};

pub(crate) struct Session {
    cfg: Arc<Config>,
    kernel: Arc<kernel::Kernel>,
    reference: Arc<Reference>,
    /// Bytes of matrices held now.
    held: u64,
    /// Chunks received and not yet returned (or cancelled).
    in_flight: HashSet<Key>,
    /// Computed chunks waiting for their grant.
    ready: HashMap<Key, Computed>,
    /// Grants that came before the chunk was computed.
    granted: HashSet<Key>,
    /// Pieces of one large product being added up, with their depth and
    /// the bytes of their C.
    pieces: HashMap<Key, (u32, u64)>,
    /// Chunks arriving in pieces (`Part`).
    partial: HashMap<Key, assign::Partial>,
    /// Each job's shared B (`ShareB`), held until the job is cancelled or
    /// the session ends.
    shared_b: HashMap<JobId, (Form, Arc<Values>)>,
    cancelled: HashSet<JobId>,
    served: Served,
    /// The daemon's one-master slot, given back before the goodbye is
    /// answered: a master that closes its pool and connects again at once
    /// must find the worker free.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// See [`AckSlot`].
    acks: AckSlot,
    /// Each job's exchange of panels among workers.
    exchanges: HashMap<JobId, exchange::Assembly>,
    /// Passes parts on to peers, once one is to be.
    relay: Option<crate::relay::Relay>,
    /// Where the relay tells of parts it could not pass on, and whether
    /// the master encrypts (the peers' connections do then too).
    relay_failed: mpsc::UnboundedSender<crate::relay::Failed>,
    encrypt: bool,
}

/// What a session did for its master, for the log line at its end.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Served {
    /// Products whose results were sent.
    pub products: u64,
    /// Bytes of results sent.
    pub bytes_out: u64,
}

enum Event {
    Frame(Result<Option<Frame<ToWorker>>>),
    /// A part a peer passed on.
    Peer(Frame<ToWorker>),
    PeerFailed(crate::relay::Failed),
    Done(Option<Done>),
    Wrote(Wrote),
    Stop,
    Tick,
}

type Writing = dls_protocol::conn::WritingHalf<Throttled<TcpStream>, ToWorker, FromWorker>;

/// A frame for the master, waiting for its turn on the connection; for
/// results, the chunk they end.
struct Out {
    msg: FromWorker,
    payload: Values,
    results: Option<(Key, Form, u32)>,
}

impl Out {
    fn msg(msg: FromWorker) -> Out {
        Out {
            msg,
            payload: Values::default(),
            results: None,
        }
    }
}

/// What came of a write: the chunk whose results are out, or the failure.
struct Wrote {
    results: Option<(Key, Form, u32)>,
    /// The payload written, for the kernel's spare buffers.
    payload: Values,
    failed: Option<Error>,
}

/// Frames to the master go out in order while the session keeps reading
/// (the next chunk arrives while results leave).
type Outbox = dls_protocol::Outbox<Writing, Out, Wrote>;

fn write(mut w: Writing, out: Out) -> dls_protocol::outbox::Writing<Writing, Wrote> {
    Box::pin(async move {
        let failed = w.write_frame(&out.msg, &out.payload).await.err();
        let Out { results, payload, .. } = out;
        (
            w,
            Wrote {
                results,
                payload,
                failed,
            },
        )
    })
}

/// The master sent something the protocol does not allow here.
fn unexpected(message: String) -> Error {
    Error::Refused {
        code: ErrorCode::UnexpectedMessage,
        message,
    }
}

enum Flow {
    Continue,
    Stop,
}

/// Refuse, before its payload is allocated, what would break the limits.
fn admit(msg: &ToWorker, held: u64, limit: u64, in_flight: &HashSet<Key>) -> Result<()> {
    let refuse = |message: String| {
        Err(Error::Refused {
            code: ErrorCode::MemoryLimit,
            message,
        })
    };
    let (need, what) = match *msg {
        ToWorker::Assign { form, count, chunk, .. } => (
            Some(form.held_bytes(count)),
            format!("chunk {} of {count} products of {form}", chunk.0),
        ),
        // A chunk's first piece is refused as its `Assign` would be; the
        // others were counted with it.
        ToWorker::Part {
            job,
            chunk,
            form,
            count,
            ..
        } if !in_flight.contains(&(job, chunk)) => (
            Some(form.held_bytes(count)),
            format!("chunk {} of {count} products of {form}", chunk.0),
        ),
        ToWorker::ComputeProbe { form, count } => {
            let b = if form.shared_b { form.b_bytes() } else { 0 };
            (
                form.held_bytes(count).checked_add(b),
                format!("compute probe of {count} products of {form}"),
            )
        }
        ToWorker::ShareB { form, .. } => (Some(form.b_bytes()), format!("the shared B of {form}")),
        ToWorker::Panel { job, piece, form, .. } => {
            // A piece's first panel brings its C.
            let c = match in_flight.contains(&(job, piece)) {
                true => 0,
                false => form.out_bytes(1),
            };
            (
                form.in_bytes(1).checked_add(c),
                format!("panel of piece {} ({form})", piece.0),
            )
        }
        ToWorker::Echo { len } | ToWorker::Pull { len } => {
            return match len.checked_mul(8) {
                Some(b) if held.saturating_add(b) <= limit => Ok(()),
                _ => refuse(format!(
                    "a probe of {len} values exceeds this worker's {limit}-byte memory limit"
                )),
            }
        }
        _ => return Ok(()),
    };
    let new_piece = matches!(*msg, ToWorker::Panel { job, piece, .. } if !in_flight.contains(&(job, piece)));
    if in_flight.len() >= MAX_IN_FLIGHT
        && (new_piece
            || matches!(msg, ToWorker::Assign { .. } | ToWorker::ComputeProbe { .. })
            || matches!(*msg, ToWorker::Part { job, chunk, .. } if !in_flight.contains(&(job, chunk))))
    {
        return refuse(format!(
            "{what}: {MAX_IN_FLIGHT} chunks are already in flight on this worker"
        ));
    }
    // Saturated sizes (u64::MAX) never fit.
    match need {
        Some(need) if need < u64::MAX && held.saturating_add(need) <= limit => Ok(()),
        _ => refuse(format!(
            "{what} needs {} bytes; this worker holds {held} of its {limit}-byte memory limit",
            need.filter(|&b| b < u64::MAX)
                .map_or("too many".to_string(), |b| b.to_string())
        )),
    }
}

impl Session {
    pub(crate) fn new(
        cfg: Arc<Config>,
        kernel: Arc<kernel::Kernel>,
        reference: Arc<Reference>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Self {
        Session {
            cfg,
            kernel,
            reference,
            held: 0,
            in_flight: HashSet::new(),
            ready: HashMap::new(),
            granted: HashSet::new(),
            pieces: HashMap::new(),
            partial: HashMap::new(),
            shared_b: HashMap::new(),
            cancelled: HashSet::new(),
            served: Served::default(),
            slot,
            acks: AckSlot::default(),
            exchanges: HashMap::new(),
            relay: None,
            relay_failed: mpsc::unbounded_channel().0,
            encrypt: false,
        }
    }

    /// Pass a part on to a peer, starting the relay at the first.
    fn relay(&mut self, f: crate::relay::Forward) {
        let (cfg, encrypt, failed) = (self.cfg.clone(), self.encrypt, self.relay_failed.clone());
        let relay = self
            .relay
            .get_or_insert_with(|| crate::relay::Relay::start(cfg, encrypt, failed));
        relay.send(f);
    }
    /// Serve the master until it leaves, fails or the daemon stops; what it
    /// was served, whatever happened. Grants also come from `control`, the
    /// session's control line, if the master opens one (`server.rs`).
    pub(crate) async fn run(
        mut self,
        conn: WorkerConn,
        mut stop: watch::Receiver<bool>,
        control: ControlLine,
    ) -> (Result<()>, Served, WorkerConn) {
        let ControlLine {
            grants: mut control,
            acks,
            mut parts,
        } = control;
        self.acks = acks;
        self.encrypt = conn.is_sealed();
        let (failed_tx, mut failed_rx) = mpsc::unbounded_channel();
        self.relay_failed = failed_tx;
        let (mut conn, writing) = conn.split();
        // Payloads of 128 KiB and more (a panel, a chunk's part) are read
        // into the memory of inputs already computed, where the kernel
        // kept one large enough; smaller ones the allocator serves from
        // memory it holds anyway (`dls_common::return_freed_buffers`).
        let spares = self.kernel.clone();
        conn.set_payload_source(std::sync::Arc::new(move |dtype, len| {
            (len as u64 * dtype.size() >= 128 << 10)
                .then(|| spares.spare(dtype, len))
                .flatten()
        }));
        let mut out = Outbox::new(writing, write);
        // Unbounded, but never longer than MAX_IN_FLIGHT: `admit` refuses
        // work beyond that, and each work item yields one `Done`.
        let (work_tx, mut work_rx) = mpsc::unbounded_channel::<Work>();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
        let (kernel, reference) = (self.kernel.clone(), self.reference.clone());
        let (slowdown, work_factor, change) = (self.cfg.slowdown, self.cfg.work_factor, self.cfg.speed_change);
        let computer = tokio::task::spawn_blocking(move || {
            // Products of the current job computed so far (speed change).
            let mut job: Option<(JobId, u64)> = None;
            // The C of each piece being added up.
            let mut accs: HashMap<Key, Values> = HashMap::new();
            while let Some(work) = work_rx.blocking_recv() {
                let mut units = |key: &Key, count: u32| {
                    let done = match job {
                        Some((j, d)) if j == key.0 => d,
                        _ => 0,
                    };
                    job = Some((key.0, done + count as u64));
                    SpeedChange::wait_units(change, slowdown, done, count as u64)
                };
                let units = match &work {
                    Work::Chunk { key, count, .. } => units(key, *count),
                    Work::Panel { key, .. } => units(key, 1),
                    Work::Probe { count, .. } => SpeedChange::wait_units(None, slowdown, 0, *count as u64),
                    Work::Drop(_) => 0.0,
                };
                if done_tx
                    .send(compute(&kernel, &reference, &mut accs, work, units, work_factor))
                    .is_err()
                {
                    break;
                }
            }
        });
        let idle = self.cfg.idle_timeout;
        let mut tick = tokio::time::interval((idle / 4).max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Bytes read from the master when last counted, and when they changed.
        let mut heard = (conn.bytes_read(), Instant::now());
        let result = loop {
            let (held, limit, in_flight) = (self.held, self.cfg.memory_limit, &self.in_flight);
            let event = tokio::select! {
                r = conn.read_frame_checked(|m| admit(m, held, limit, in_flight)) => Event::Frame(r),
                Some(msg) = control.recv() => Event::Frame(Ok(Some(dls_protocol::Frame::new(msg)))),
                Some(f) = parts.recv() => Event::Peer(f),
                Some(f) = failed_rx.recv() => Event::PeerFailed(f),
                d = done_rx.recv() => Event::Done(d),
                w = out.wrote() => Event::Wrote(w),
                _ = stop.changed() => Event::Stop,
                _ = tick.tick() => Event::Tick,
            };
            let flow = match event {
                Event::Tick => {
                    if conn.bytes_read() != heard.0 {
                        heard = (conn.bytes_read(), Instant::now());
                    }
                    if heard.1.elapsed() >= idle {
                        break Err(Error::Timeout(
                            idle,
                            "any frame from the master (it is stopped, or its host is gone)",
                        ));
                    }
                    continue;
                }
                Event::Frame(Ok(Some(frame))) => self.on_frame(&mut out, frame, &work_tx),
                Event::Peer(frame) => self.on_share(&mut out, frame, &work_tx),
                Event::PeerFailed(f) => {
                    out.push(Out::msg(FromWorker::PeerFailed {
                        job: f.job,
                        peer: f.peer,
                        message: f.message,
                    }));
                    Ok(Flow::Continue)
                }
                Event::Frame(Ok(None)) => Ok(Flow::Stop),
                Event::Frame(Err(e)) => Err(e),
                Event::Done(Some(done)) => self.on_done(&mut out, done),
                Event::Wrote(w) => self.on_wrote(w),
                Event::Done(None) => Err(Error::Refused {
                    code: ErrorCode::Internal,
                    message: "the compute thread stopped".into(),
                }),
                Event::Stop => {
                    out.push(Out::msg(FromWorker::Bye));
                    Ok(Flow::Stop)
                }
            };
            match flow {
                Ok(Flow::Continue) => {}
                Ok(Flow::Stop) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        drop(work_tx);
        // The thread finishes the product it is on, then sees the closed queue.
        drop(computer);
        // A session that ends well says all it has to say (its goodbye).
        let (writing, wrote) = out.finish(result.is_ok()).await;
        for w in wrote {
            let _ = self.on_wrote(w);
        }
        (result, self.served, dls_protocol::Connection::unsplit(conn, writing))
    }

    /// A write is over: results out free their memory and count as served.
    fn on_wrote(&mut self, w: Wrote) -> Result<Flow> {
        if let Some(e) = w.failed {
            return Err(e);
        }
        if let Some((key, form, count)) = w.results {
            self.kernel.recycle(w.payload);
            let bytes = form.out_bytes(count);
            self.held = self.held.saturating_sub(bytes);
            self.in_flight.remove(&key);
            self.served.products += u64::from(count);
            self.served.bytes_out += bytes;
        }
        Ok(Flow::Continue)
    }

    fn on_frame(
        &mut self,
        out: &mut Outbox,
        frame: Frame<ToWorker>,
        work: &mpsc::UnboundedSender<Work>,
    ) -> Result<Flow> {
        match frame.msg {
            ToWorker::Assign {
                job,
                chunk,
                form,
                count,
            } => self.on_assign(out, work, (job, chunk), (form, count), frame.payload)?,
            ToWorker::Part {
                job,
                chunk,
                form,
                count,
                ..
            } => self.on_part(out, work, (job, chunk), (form, count), frame.payload)?,
            ToWorker::Panel { .. } => return self.on_panel(out, frame, work),
            ToWorker::Share { .. } => return self.on_share(out, frame, work),
            msg @ ToWorker::Exchange { .. } => return self.on_exchange(msg),
            ToWorker::ShareB { job, form } => {
                if self.shared_b.contains_key(&job) || !form.shared_b {
                    return Err(unexpected(format!("a second shared B for job {}", job.0)));
                }
                self.cancelled.remove(&job);
                self.held += form.b_bytes();
                self.shared_b.insert(job, (form, Arc::new(frame.payload)));
            }
            ToWorker::Grant { job, chunk } => {
                let key = (job, chunk);
                if let Some(done) = self.ready.remove(&key) {
                    send_results(out, key, done);
                } else if self.in_flight.contains(&key) {
                    self.granted.insert(key);
                } else {
                    return Err(unexpected(format!(
                        "grant for unknown chunk {} of job {}",
                        chunk.0, job.0
                    )));
                }
            }
            ToWorker::Cancel { job } => {
                self.cancelled.insert(job);
                let keys: Vec<Key> = self.ready.keys().filter(|k| k.0 == job).copied().collect();
                for key in keys {
                    if let Some(done) = self.ready.remove(&key) {
                        self.held = self.held.saturating_sub(done.form.out_bytes(done.count));
                        self.in_flight.remove(&key);
                    }
                }
                self.drop_pieces(job, work);
                self.drop_partial(job);
                self.drop_exchange(job);
                if let Some((form, _)) = self.shared_b.remove(&job) {
                    // Chunks still computing hold their own reference to it.
                    self.held = self.held.saturating_sub(form.b_bytes());
                }
                self.granted.retain(|k| k.0 != job);
            }
            ToWorker::Heartbeat { seq } => out.push(Out::msg(FromWorker::HeartbeatAck { seq })),
            ToWorker::Echo { len } => out.push(Out::msg(FromWorker::EchoAck { len })),
            ToWorker::Pull { len } => {
                // `admit` checked len against the memory limit.
                out.push(Out {
                    msg: FromWorker::PullData { len },
                    payload: Values::zeros(dls_protocol::DType::F64, len as usize),
                    results: None,
                });
            }
            ToWorker::ComputeProbe { form, count } => {
                let _ = work.send(Work::Probe { form, count });
            }
            ToWorker::Bye => {
                self.slot = None;
                out.push(Out::msg(FromWorker::Bye));
                return Ok(Flow::Stop);
            }
            other @ (ToWorker::Hello { .. } | ToWorker::Auth { .. }) => {
                return Err(unexpected(format!("{} after the handshake", other.name())));
            }
        }
        Ok(Flow::Continue)
    }

    fn on_done(&mut self, out: &mut Outbox, done: Done) -> Result<Flow> {
        match done {
            Done::Dropped => {}
            Done::Panel { key, form, c, secs } => return self.on_panel_done(out, key, form, c, secs),
            Done::Probe { count, secs } => {
                let secs = secs.map_err(|e| Error::Refused {
                    code: ErrorCode::Internal,
                    message: format!("compute probe: {e}"),
                })?;
                out.push(Out::msg(FromWorker::ComputeDone { count, secs }))
            }
            Done::Chunk {
                key,
                form,
                count,
                c,
                secs,
            } => {
                self.held = self.held.saturating_sub(form.in_bytes(count));
                if self.cancelled.contains(&key.0) {
                    self.held = self.held.saturating_sub(form.out_bytes(count));
                    self.in_flight.remove(&key);
                    return Ok(Flow::Continue);
                }
                let c = ready(out, key, "chunk", c, secs)?;
                self.hold(out, key, Computed { form, count, c });
            }
        }
        Ok(Flow::Continue)
    }

    /// Results computed: out at once if granted already, else kept for
    /// the grant.
    fn hold(&mut self, out: &mut Outbox, key: Key, computed: Computed) {
        if self.granted.remove(&key) {
            send_results(out, key, computed);
        } else {
            self.ready.insert(key, computed);
        }
    }
}

/// A chunk (or a piece's panel) computed: the kernel's failure as the
/// session's error, else the master told it is ready, and what it made.
fn ready<T>(out: &mut Outbox, key: Key, what: &str, made: std::result::Result<T, String>, secs: f64) -> Result<T> {
    let made = made.map_err(|e| Error::Refused {
        code: ErrorCode::Internal,
        message: format!("{what} {}: {e}", key.1 .0),
    })?;
    out.push(Out::msg(FromWorker::Ready {
        job: key.0,
        chunk: key.1,
        compute_secs: secs,
    }));
    Ok(made)
}

/// Queue a computed chunk's results; they count once written.
fn send_results(out: &mut Outbox, key: Key, done: Computed) {
    debug!(job = key.0 .0, chunk = key.1 .0, "sending results");
    out.push(Out {
        msg: FromWorker::Results {
            job: key.0,
            chunk: key.1,
            form: done.form,
            count: done.count,
        },
        payload: done.c,
        results: Some((key, done.form, done.count)),
    });
}
