//! One master's session on the daemon: the chunk state machine (received
//! → computed → granted → returned), computing on a blocking thread so the
//! connection keeps answering heartbeats and grants, and the idle timeout.

use crate::kernel;
use crate::server::{Config, SpeedChange, WorkerConn, MAX_IN_FLIGHT};
use dls_protocol::{ab_bytes, c_bytes, ChunkId, Error, ErrorCode, Frame, FromWorker, JobId, Result, ToWorker};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tracing::debug;

enum Work {
    Chunk { key: Key, n: u32, k: u32, ab: Vec<f64> },
    Probe { n: u32, k: u32 },
}

enum Done {
    Chunk {
        key: Key,
        n: u32,
        k: u32,
        c: Vec<f64>,
        secs: f64,
    },
    Probe {
        n: u32,
        k: u32,
        secs: f64,
    },
}

type Key = (JobId, ChunkId);

struct Computed {
    n: u32,
    k: u32,
    c: Vec<f64>,
}

// A chunk holds A and B until computed, C until returned.

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
    cancelled: HashSet<JobId>,
    served: Served,
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
    Done(Option<Done>),
    Stop,
    Tick,
}

enum Flow {
    Continue,
    Stop,
}

/// Refuse, before its payload is allocated, what would break the limits.
fn admit(msg: &ToWorker, held: u64, limit: u64, in_flight: usize) -> Result<()> {
    let (n, k, what) = match *msg {
        ToWorker::Assign { n, k, chunk, .. } => (n, k, format!("chunk {}", chunk.0)),
        ToWorker::ComputeProbe { n, k } => (n, k, "compute probe".to_string()),
        ToWorker::Echo { len } | ToWorker::Pull { len } => {
            return match len.checked_mul(8) {
                Some(b) if held.saturating_add(b) <= limit => Ok(()),
                _ => Err(Error::Refused {
                    code: ErrorCode::MemoryLimit,
                    message: format!("a probe of {len} values exceeds this worker's {limit}-byte memory limit"),
                }),
            }
        }
        _ => return Ok(()),
    };
    if in_flight >= MAX_IN_FLIGHT {
        return Err(Error::Refused {
            code: ErrorCode::MemoryLimit,
            message: format!("{what}: {MAX_IN_FLIGHT} chunks are already in flight on this worker"),
        });
    }
    let need = ab_bytes(n, k).checked_add(c_bytes(n, k));
    match need {
        Some(need) if held.saturating_add(need) <= limit => Ok(()),
        _ => Err(Error::Refused {
            code: ErrorCode::MemoryLimit,
            message: format!(
                "{what} of {k} products of size {n} needs {} bytes; this worker holds {held} of its {limit}-byte memory limit",
                need.map_or("too many".to_string(), |b| b.to_string())
            ),
        }),
    }
}

impl Session {
    pub(crate) fn new(cfg: Arc<Config>, kernel: Arc<kernel::Kernel>, reference: Arc<Reference>) -> Self {
        Session {
            cfg,
            kernel,
            reference,
            held: 0,
            in_flight: HashSet::new(),
            ready: HashMap::new(),
            granted: HashSet::new(),
            cancelled: HashSet::new(),
            served: Served::default(),
        }
    }

    /// Serve the master until it leaves, fails or the daemon stops; what it
    /// was served, whatever happened.
    pub(crate) async fn run(mut self, conn: &mut WorkerConn, mut stop: watch::Receiver<bool>) -> (Result<()>, Served) {
        // Unbounded, but never longer than MAX_IN_FLIGHT: `admit` refuses
        // work beyond that, and each work item yields one `Done`.
        let (work_tx, mut work_rx) = mpsc::unbounded_channel::<Work>();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
        let (kernel, reference) = (self.kernel.clone(), self.reference.clone());
        let (slowdown, work_factor, change) = (self.cfg.slowdown, self.cfg.work_factor, self.cfg.speed_change);
        let computer = tokio::task::spawn_blocking(move || {
            // Products of the current job computed so far (speed change).
            let mut job: Option<(JobId, u64)> = None;
            while let Some(work) = work_rx.blocking_recv() {
                let units = match &work {
                    Work::Chunk { key, k, .. } => {
                        let done = match job {
                            Some((j, d)) if j == key.0 => d,
                            _ => 0,
                        };
                        job = Some((key.0, done + *k as u64));
                        SpeedChange::wait_units(change, slowdown, done, *k as u64)
                    }
                    Work::Probe { k, .. } => SpeedChange::wait_units(None, slowdown, 0, *k as u64),
                };
                if done_tx
                    .send(compute(&kernel, &reference, work, units, work_factor))
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
            let (held, limit, in_flight) = (self.held, self.cfg.memory_limit, self.in_flight.len());
            let event = tokio::select! {
                r = conn.read_frame_checked(|m| admit(m, held, limit, in_flight)) => Event::Frame(r),
                d = done_rx.recv() => Event::Done(d),
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
                Event::Frame(Ok(Some(frame))) => self.on_frame(conn, frame, &work_tx).await,
                Event::Frame(Ok(None)) => Ok(Flow::Stop),
                Event::Frame(Err(e)) => Err(e),
                Event::Done(Some(done)) => self.on_done(conn, done).await,
                Event::Done(None) => Err(Error::Refused {
                    code: ErrorCode::Internal,
                    message: "the compute thread stopped".into(),
                }),
                Event::Stop => {
                    let _ = conn.send(&FromWorker::Bye).await;
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
        (result, self.served)
    }

    async fn on_frame(
        &mut self,
        conn: &mut WorkerConn,
        frame: Frame<ToWorker>,
        work: &mpsc::UnboundedSender<Work>,
    ) -> Result<Flow> {
        let unexpected = |what: String| Error::Refused {
            code: ErrorCode::UnexpectedMessage,
            message: what,
        };
        match frame.msg {
            ToWorker::Assign { job, chunk, n, k } => {
                let key = (job, chunk);
                if !self.in_flight.insert(key) {
                    return Err(unexpected(format!("chunk {} of job {} assigned twice", chunk.0, job.0)));
                }
                self.cancelled.remove(&job);
                self.held += ab_bytes(n, k) + c_bytes(n, k);
                conn.send(&FromWorker::Received { job, chunk }).await?;
                debug!(job = job.0, chunk = chunk.0, n, k, "received");
                let _ = work.send(Work::Chunk {
                    key,
                    n,
                    k,
                    ab: frame.payload,
                });
            }
            ToWorker::Grant { job, chunk } => {
                let key = (job, chunk);
                if let Some(done) = self.ready.remove(&key) {
                    self.send_results(conn, key, done).await?;
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
                        self.held = self.held.saturating_sub(c_bytes(done.n, done.k));
                        self.in_flight.remove(&key);
                    }
                }
                self.granted.retain(|k| k.0 != job);
            }
            ToWorker::Heartbeat { seq } => conn.send(&FromWorker::HeartbeatAck { seq }).await?,
            ToWorker::Echo { len } => conn.send(&FromWorker::EchoAck { len }).await?,
            ToWorker::Pull { len } => {
                // `admit` checked len against the memory limit.
                let data = vec![0.0; len as usize];
                conn.write_frame(&FromWorker::PullData { len }, &data).await?;
            }
            ToWorker::ComputeProbe { n, k } => {
                let _ = work.send(Work::Probe { n, k });
            }
            ToWorker::Bye => {
                let _ = conn.send(&FromWorker::Bye).await;
                return Ok(Flow::Stop);
            }
            other @ (ToWorker::Hello { .. } | ToWorker::Auth { .. }) => {
                return Err(unexpected(format!("{} after the handshake", other.name())));
            }
        }
        Ok(Flow::Continue)
    }

    async fn on_done(&mut self, conn: &mut WorkerConn, done: Done) -> Result<Flow> {
        match done {
            Done::Probe { n, k, secs } => conn.send(&FromWorker::ComputeDone { n, k, secs }).await?,
            Done::Chunk { key, n, k, c, secs } => {
                self.held = self.held.saturating_sub(ab_bytes(n, k));
                if self.cancelled.contains(&key.0) {
                    self.held = self.held.saturating_sub(c_bytes(n, k));
                    self.in_flight.remove(&key);
                    return Ok(Flow::Continue);
                }
                conn.send(&FromWorker::Ready {
                    job: key.0,
                    chunk: key.1,
                    compute_secs: secs,
                })
                .await?;
                let computed = Computed { n, k, c };
                if self.granted.remove(&key) {
                    self.send_results(conn, key, computed).await?;
                } else {
                    self.ready.insert(key, computed);
                }
            }
        }
        Ok(Flow::Continue)
    }

    async fn send_results(&mut self, conn: &mut WorkerConn, key: Key, done: Computed) -> Result<()> {
        debug!(job = key.0 .0, chunk = key.1 .0, "sending results");
        conn.write_frame(
            &FromWorker::Results {
                job: key.0,
                chunk: key.1,
                n: done.n,
                k: done.k,
            },
            &done.c,
        )
        .await?;
        self.held = self.held.saturating_sub(c_bytes(done.n, done.k));
        self.in_flight.remove(&key);
        self.served.products += u64::from(done.k);
        self.served.bytes_out += c_bytes(done.n, done.k);
        Ok(())
    }
}

/// Emulation of a slower processor: after computing k products of size n,
/// wait `(slowdown − 1) · k · t(n)` (with a speed change, the products past
/// it count `slowdown · factor − 1`), where t(n) is this machine's time for
/// one product measured once, unloaded (`kernel::seconds_per_product`). Tying the
/// wait to a reference rather than to the time just measured keeps the
/// emulated speed steady when other processes share the cores: on a busy
/// machine a measured time, and a wait proportional to it, would swing
/// `slowdown`-fold.
#[derive(Default)]
pub struct Reference {
    per_product: std::sync::Mutex<HashMap<u32, f64>>,
}

impl Reference {
    fn seconds_per_product(&self, kernel: &kernel::Kernel, n: u32) -> f64 {
        if let Some(&t) = self.per_product.lock().ok().and_then(|m| m.get(&n).copied()).as_ref() {
            return t;
        }
        let t = kernel::seconds_per_product(kernel, n as usize);
        if let Ok(mut m) = self.per_product.lock() {
            m.insert(n, t);
        }
        t
    }
}

/// Compute (`work_factor` times over, emulating a slower processor), then
/// (emulation) wait `wait_units` times one product's reference time
/// (`Reference`). The time reported is the kernel's plus the wait; a
/// probe's random inputs are not counted.
fn compute(kernel: &kernel::Kernel, reference: &Reference, work: Work, wait_units: f64, work_factor: u32) -> Done {
    let n = match work {
        Work::Chunk { n, .. } | Work::Probe { n, .. } => n,
    };
    let wait = if wait_units > 0.0 {
        wait_units * reference.seconds_per_product(kernel, n)
    } else {
        0.0
    };
    let (done, wall) = match work {
        Work::Chunk { key, n, k, ab } => {
            debug!(job = key.0 .0, chunk = key.1 .0, "computing");
            let t0 = Instant::now();
            let mut c = vec![0.0; k as usize * (n as usize).pow(2)];
            kernel.multiply_repeated(&ab, n as usize, k as usize, &mut c, work_factor);
            let wall = t0.elapsed().as_secs_f64();
            drop(ab);
            (
                Done::Chunk {
                    key,
                    n,
                    k,
                    c,
                    secs: 0.0,
                },
                wall,
            )
        }
        Work::Probe { n, k } => (
            Done::Probe { n, k, secs: 0.0 },
            kernel::time_batch(kernel, n as usize, k as usize, work_factor),
        ),
    };
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait));
    }
    let secs = wall + wait;
    match done {
        Done::Chunk { key, n, k, c, .. } => Done::Chunk { key, n, k, c, secs },
        Done::Probe { n, k, .. } => Done::Probe { n, k, secs },
    }
}
