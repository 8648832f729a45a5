//! The daemon: accept masters, authenticate them, serve one at a time.
//!
//! Each connection runs in its own task. The handshake happens before the
//! "one master at a time" slot is taken, and connection slots are given by
//! the [`Gate`]: at the cap, the oldest connection that has not
//! authenticated is dropped for the newcomer, so clients without the token
//! can never keep a real master out. An authenticated master's session is
//! [`crate::session`].

use crate::config::WorkerConn;
pub use crate::config::{Config, Reference, SpeedChange, DEFAULT_IDLE_SECS, MAX_IN_FLIGHT};
use crate::gate::{Entry, Gate, LogLimit, Ticket};
use crate::kernel;
use crate::session::{AckSlot, ControlLine, Session};
use crate::throttle::Throttled;
use dls_protocol::handshake;
use dls_protocol::{Connection, Error, ErrorCode, Frame, FromWorker, ToWorker, WorkerStatus};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

/// Serve masters on `listener` until `shutdown` completes; then tell the
/// current master goodbye and return.
pub async fn serve(listener: TcpListener, cfg: Config, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
    // Spare buffers beside the chunks the memory limit counts: an eighth
    // of it at most.
    let mut kernel = kernel::Kernel::new(cfg.threads)
        .map_err(std::io::Error::other)?
        .spare_bytes(cfg.memory_limit / 8);
    if cfg.isolate_compute {
        kernel = kernel.isolated();
    }
    let gate = Gate::new(cfg.max_connections);
    let shared = Arc::new(Shared {
        kernel: Arc::new(kernel),
        reference: cfg.reference.clone(),
        cfg: Arc::new(cfg),
        slot: Arc::new(Semaphore::new(1)),
        logs: Logs::default(),
        activity: Mutex::new(Activity::new()),
        controls: Mutex::new(HashMap::new()),
    });
    let (cfg, logs) = (shared.cfg.clone(), &shared.logs);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let (ticket, evict) = match gate.enter() {
                        Entry::Admitted { ticket, evict, evicted } => {
                            if evicted {
                                logs.limited(&logs.evicted, |held| warn!(%peer, held, "connection slots full: dropped the oldest unauthenticated connection for this one"));
                            }
                            (ticket, evict)
                        }
                        Entry::Full => {
                            logs.limited(&logs.full, |held| warn!(%peer, held, "every connection slot holds an authenticated master; refusing this one"));
                            tasks.spawn(refuse_full(stream, cfg.max_connections));
                            continue;
                        }
                    };
                    let (shared, stop) = (shared.clone(), stop_rx.clone());
                    tasks.spawn(async move {
                        let conn = Conn { stream, peer, ticket, evict };
                        handle(conn, shared, stop).await;
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    info!("shutting down");
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
    Ok(())
}

/// Log lines that a flood of connections could repeat, each let through at
/// most once a second.
struct Logs {
    evicted: Mutex<LogLimit>,
    full: Mutex<LogLimit>,
    refused: Mutex<LogLimit>,
}

impl Default for Logs {
    fn default() -> Self {
        let every = || Mutex::new(LogLimit::new(Duration::from_secs(1)));
        Logs {
            evicted: every(),
            full: every(),
            refused: every(),
        }
    }
}

impl Logs {
    /// Write a line through `limit` (given how many were held back).
    fn limited(&self, limit: &Mutex<LogLimit>, line: impl FnOnce(u64)) {
        let allowed = limit.lock().unwrap_or_else(|e| e.into_inner()).allow(Instant::now());
        if let Some(held) = allowed {
            line(held);
        }
    }
}

/// A connection just accepted, with its slot.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    ticket: Ticket,
    /// Fires if a newcomer takes the slot before this one authenticates.
    evict: tokio::sync::oneshot::Receiver<()>,
}

/// Tell a connection that came when every slot held an authenticated
/// master why it is closed (the master reads this as its handshake's
/// answer).
async fn refuse_full(stream: TcpStream, cap: usize) {
    let mut conn: Connection<TcpStream, ToWorker, FromWorker> = Connection::new(stream);
    let e = Error::Refused {
        code: ErrorCode::Busy,
        message: format!(
            "too many connections: all {cap} of this worker's connection slots hold authenticated masters"
        ),
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), handshake::tell_master(&mut conn, &e)).await;
}

/// What a control line needs of the session it names.
#[derive(Clone)]
struct Line {
    grants: mpsc::UnboundedSender<ToWorker>,
    acks: AckSlot,
    parts: mpsc::UnboundedSender<Frame<ToWorker>>,
}

/// A session's entry among the controls, removed when its connection's
/// task ends however it ends.
struct Registered<'a>(&'a Shared, u64);

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.0.controls().remove(&self.1);
    }
}

/// Acknowledgements back to the session's own connection when its control
/// line ends.
struct AcksBack<'a>(&'a AckSlot);

impl Drop for AcksBack<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A number no other session of this daemon has had, likely, and not 0.
fn session_number() -> u64 {
    let n = dls_protocol::auth::nonce();
    u64::from_le_bytes(n[..8].try_into().unwrap_or([1; 8])).max(1)
}

/// Pass the grants read on a control line to the session it names, and
/// write its acknowledgements there, until either ends or the daemon
/// stops. A session it does not name here, or a frame other than a grant,
/// ends it with the error told.
async fn control_line(
    mut conn: WorkerConn,
    session: u64,
    shared: &Shared,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    let Some(Line { grants: tx, acks, .. }) = shared.controls().get(&session).cloned() else {
        let e = Error::Refused {
            code: ErrorCode::UnexpectedMessage,
            message: format!("no session {session} to take a control line here (it ended)"),
        };
        handshake::tell_master(&mut conn, &e).await;
        return;
    };
    debug!(%peer, session, "control line opened");
    let (ack_tx, mut ack_rx) = mpsc::unbounded_channel();
    *acks.lock().unwrap_or_else(|e| e.into_inner()) = Some(ack_tx);
    // However the line ends, the session's acknowledgements go back to its
    // own connection.
    let _back = AcksBack(&acks);
    loop {
        let frame = tokio::select! {
            f = conn.read_frame() => f,
            Some(ack) = ack_rx.recv() => {
                if let Err(e) = conn.send(&ack).await {
                    debug!(%peer, session, "control line closed: {e}");
                    return;
                }
                continue;
            }
            _ = stop.changed() => return,
        };
        match frame {
            Ok(Some(f)) if matches!(f.msg, ToWorker::Grant { .. }) => {
                if tx.send(f.msg).is_err() {
                    return;
                }
            }
            Ok(Some(f)) => {
                let e = Error::Refused {
                    code: ErrorCode::UnexpectedMessage,
                    message: format!("a control line carries grants only, not {}", f.msg.name()),
                };
                handshake::tell_master(&mut conn, &e).await;
                return;
            }
            Ok(None) => return,
            Err(e) => {
                debug!(%peer, session, "control line closed: {e}");
                return;
            }
        }
    }
}

/// Pass the parts another worker passes on to the session it names,
/// until it closes, the session ends or the daemon stops. Its stream
/// leaves the emulated uplink (workers reach each other beside it). A
/// session it does not name here, or a frame other than a part with
/// nothing more to pass on, ends it with the error told.
async fn peer_line(
    mut conn: WorkerConn,
    session: u64,
    shared: &Shared,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    conn.get_mut().leave_uplink();
    let parts = shared.controls().get(&session).map(|l| l.parts.clone());
    let Some(tx) = parts else {
        let e = Error::Refused {
            code: ErrorCode::UnexpectedMessage,
            message: format!("no session {session} to take parts for here (it ended)"),
        };
        handshake::tell_master(&mut conn, &e).await;
        return;
    };
    debug!(%peer, session, "peer line opened");
    loop {
        let frame = tokio::select! {
            f = conn.read_frame() => f,
            _ = stop.changed() => return,
        };
        match frame {
            Ok(Some(f)) if matches!(&f.msg, ToWorker::Share { forward, .. } if forward.is_empty()) => {
                if tx.send(f).is_err() {
                    return;
                }
            }
            Ok(Some(f)) => {
                let e = Error::Refused {
                    code: ErrorCode::UnexpectedMessage,
                    message: format!("a peer line carries parts passed on only, not {}", f.msg.name()),
                };
                handshake::tell_master(&mut conn, &e).await;
                return;
            }
            Ok(None) => return,
            Err(e) => {
                debug!(%peer, session, "peer line closed: {e}");
                return;
            }
        }
    }
}

/// Resolves only if the slot is taken away (not when it becomes safe).
async fn evicted(evict: tokio::sync::oneshot::Receiver<()>) {
    if evict.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// What every connection's task shares.
struct Shared {
    cfg: Arc<Config>,
    kernel: Arc<kernel::Kernel>,
    reference: Arc<Reference>,
    /// The one-master-at-a-time slot.
    slot: Arc<Semaphore>,
    logs: Logs,
    activity: Mutex<Activity>,
    /// The sessions admitted, by the number their welcome gave the master,
    /// each with the way to pass it grants from its control line and the
    /// slot its acknowledgements go through.
    controls: Mutex<HashMap<u64, Line>>,
}

/// What the daemon has done, for status requests.
struct Activity {
    started: Instant,
    /// The master served now, and since when.
    current: Option<(SocketAddr, Instant)>,
    sessions: u64,
    products: u64,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            started: Instant::now(),
            current: None,
            sessions: 0,
            products: 0,
        }
    }
}

impl Shared {
    fn controls(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Line>> {
        self.controls.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer to a status request, as things stand.
    fn status(&self) -> WorkerStatus {
        let a = self.activity();
        WorkerStatus {
            caps: self.cfg.capabilities(),
            busy_with: a.current.map(|(p, t)| (p.to_string(), t.elapsed().as_secs_f64())),
            uptime_secs: a.started.elapsed().as_secs_f64(),
            sessions: a.sessions,
            products: a.products,
            encrypt_required: self.cfg.encrypt,
        }
    }
}

async fn handle(c: Conn, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let (cfg, logs, slot) = (shared.cfg.clone(), &shared.logs, &shared.slot);
    let Conn {
        stream,
        peer,
        ticket,
        evict,
    } = c;
    let _ = stream.set_nodelay(true);
    dls_common::keepalive(&stream);
    let mut conn: WorkerConn = Connection::new(Throttled::new(stream, cfg.link_rate).behind(cfg.uplink.clone()));
    let mut caps = cfg.capabilities();
    // The number a control line names this connection's session by (never
    // 0: that says there is none to name).
    caps.session = session_number();
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let (parts_tx, parts_rx) = mpsc::unbounded_channel();
    let acks = AckSlot::default();
    let _registered = Registered(&shared, caps.session);
    // The session slot is taken only once the master is authenticated.
    let mut busy = None;
    let admit = || {
        if !ticket.authenticated() {
            return Err(Error::Refused {
                code: ErrorCode::Busy,
                message: format!(
                    "too many connections: this one was {} before it authenticated",
                    handshake::DROPPED_FOR_NEWER
                ),
            });
        }
        busy = slot.clone().try_acquire_owned().ok();
        match busy {
            Some(_) => {
                let line = Line {
                    grants: control_tx,
                    acks: acks.clone(),
                    parts: parts_tx,
                };
                shared.controls().insert(caps.session, line);
                Ok(())
            }
            None => Err(Error::Refused {
                code: ErrorCode::Busy,
                message: "this worker is busy serving another master; try again when that batch is done".into(),
            }),
        }
    };
    let status = shared.status();
    let side = handshake::WorkerSide {
        token: cfg.token.as_ref(),
        caps: &caps,
        frame_cap: cfg.frame_cap(),
        timeout: cfg.handshake_timeout,
        require_encrypt: cfg.encrypt,
        status: Some(&status),
    };
    // The handshake tells the master why it refuses; an eviction is told here.
    let shaken = tokio::select! {
        r = handshake::worker(&mut conn, &side, || ticket.greeted(), admit) => r.map_err(|e| (e, false)),
        () = evicted(evict) => Err((Error::Refused {
            code: ErrorCode::Busy,
            message: format!("too many connections: this worker's {} slots were full and this connection, the oldest not yet authenticated, was {}", cfg.max_connections, handshake::DROPPED_FOR_NEWER),
        }, true)),
    };
    match shaken {
        Err((e, tell)) => {
            if tell {
                let _ = tokio::time::timeout(Duration::from_secs(1), handshake::tell_master(&mut conn, &e)).await;
            }
            logs.limited(&logs.refused, |held| warn!(%peer, held, "refused a connection: {e}"));
            return;
        }
        Ok(handshake::Shaken::Status) => {
            debug!(%peer, "answered a status request");
            return;
        }
        Ok(handshake::Shaken::Control(session)) => {
            if ticket.authenticated() {
                control_line(conn, session, &shared, peer, stop).await;
            }
            return;
        }
        Ok(handshake::Shaken::Peer(session)) => {
            if ticket.authenticated() {
                peer_line(conn, session, &shared, peer, stop).await;
            }
            return;
        }
        Ok(handshake::Shaken::Session) => {}
    }
    info!(%peer, "master connected");
    let start = Instant::now();
    shared.activity().current = Some((peer, start));
    let session = Session::new(cfg, shared.kernel.clone(), shared.reference.clone(), busy);
    let line = ControlLine {
        grants: control_rx,
        acks,
        parts: parts_rx,
    };
    let (res, served, mut conn) = session.run(conn, stop, line).await;
    {
        let mut a = shared.activity();
        a.current = None;
        a.sessions += 1;
        a.products += served.products;
    }
    let (products, bytes_in, bytes_out, secs) = (
        served.products,
        conn.bytes_read(),
        served.bytes_out,
        start.elapsed().as_secs_f64(),
    );
    match res {
        Ok(()) => info!(%peer, products, bytes_in, bytes_out, secs, "master left"),
        Err(e) => {
            warn!(%peer, products, bytes_in, bytes_out, secs, "session ended: {e}");
            handshake::tell_master(&mut conn, &e).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpeedChange;

    #[test]
    fn speed_change_counts_products_past_it() {
        let c = SpeedChange::parse("10:3").expect("parses");
        assert_eq!(c, SpeedChange { after: 10, factor: 3.0 });
        // Slowdown 2: 8 products before the change wait 1 unit each; with
        // 4 done, a chunk of 8 has 6 before (6 units) and 2 after (2·3 − 1 =
        // 5 units each).
        assert_eq!(SpeedChange::wait_units(Some(c), 2.0, 4, 8), 6.0 + 10.0);
        assert_eq!(SpeedChange::wait_units(Some(c), 2.0, 20, 2), 10.0);
        assert_eq!(SpeedChange::wait_units(None, 2.0, 20, 2), 2.0);
        // Speeding up cannot wait less than nothing.
        let up = SpeedChange::parse("0:0.25").expect("parses");
        assert_eq!(SpeedChange::wait_units(Some(up), 2.0, 0, 4), 0.0);
        assert_eq!(SpeedChange::wait_units(Some(up), 8.0, 0, 1), 1.0);
        for bad in ["3", "x:2", "3:0", "3:-1", "3:nan", "-1:2"] {
            assert!(SpeedChange::parse(bad).is_err(), "{bad}");
        }
    }
}
