//! Passing parts of an exchange on to other workers: one task per session
//! writes them in the order the session hands them over (the worker's
//! link up carries one at a time), on a connection to each peer opened at
//! its first part (the handshake a master makes, with this worker's token,
//! naming the peer's session: `Auth::peer`). A peer that cannot be reached
//! or written to is reported once per job, and skipped for that job after.

use crate::config::Config;
use crate::throttle::Throttled;
use dls_protocol::{handshake, Connection, FromWorker, JobId, PeerAddr, ToWorker, Values};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// A part to pass on: `msg` (a `Share`) and its payload, to `to` (index
/// `peer` of the job's exchange).
pub(crate) struct Forward {
    pub job: JobId,
    pub peer: u32,
    pub to: PeerAddr,
    pub msg: ToWorker,
    pub payload: Values,
}

/// Parts of `job` that could not reach peer `peer`.
pub(crate) struct Failed {
    pub job: JobId,
    pub peer: u32,
    pub message: String,
}

type PeerConn = Connection<Throttled<TcpStream>, FromWorker, ToWorker>;

/// The session's relay: hand it parts, in order.
pub(crate) struct Relay {
    tx: mpsc::UnboundedSender<Forward>,
}

impl Relay {
    /// Start the relay of a session (`encrypt`: its master encrypts, so
    /// its peers' connections do too); failures go to `failed`.
    pub(crate) fn start(cfg: Arc<Config>, encrypt: bool, failed: mpsc::UnboundedSender<Failed>) -> Relay {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(cfg, encrypt, rx, failed));
        Relay { tx }
    }

    pub(crate) fn send(&self, f: Forward) {
        // The task ends only with the session, which stops handing parts.
        let _ = self.tx.send(f);
    }
}

async fn run(
    cfg: Arc<Config>,
    encrypt: bool,
    mut rx: mpsc::UnboundedReceiver<Forward>,
    failed: mpsc::UnboundedSender<Failed>,
) {
    let mut conns: HashMap<(String, u64), PeerConn> = HashMap::new();
    let mut dead: HashSet<(JobId, u32)> = HashSet::new();
    while let Some(f) = rx.recv().await {
        if dead.contains(&(f.job, f.peer)) {
            continue;
        }
        let key = (f.to.addr.clone(), f.to.session);
        let res = async {
            if !conns.contains_key(&key) {
                let conn = connect(&cfg, &f.to, encrypt).await?;
                conns.insert(key.clone(), conn);
            }
            let conn = conns.get_mut(&key).ok_or_else(|| "no connection".to_string())?;
            conn.write_frame(&f.msg, &f.payload).await.map_err(|e| e.to_string())
        }
        .await;
        if let Err(message) = res {
            warn!(peer = %f.to.addr, job = f.job.0, "parts not passed on: {message}");
            conns.remove(&key);
            dead.insert((f.job, f.peer));
            let _ = failed.send(Failed {
                job: f.job,
                peer: f.peer,
                message,
            });
        }
    }
    debug!(peers = conns.len(), "relay done");
}

/// A connection to `to`, its handshake made.
async fn connect(cfg: &Config, to: &PeerAddr, encrypt: bool) -> Result<PeerConn, String> {
    let t = cfg.handshake_timeout;
    let stream = tokio::time::timeout(t, TcpStream::connect(&to.addr))
        .await
        .map_err(|_| format!("no connection to {} within {t:?}", to.addr))?
        .map_err(|e| format!("connecting to {}: {e}", to.addr))?;
    let _ = stream.set_nodelay(true);
    // Its own link's rate, and no master's uplink: workers reach each
    // other beside it.
    let mut conn: PeerConn = Connection::new(Throttled::new(stream, cfg.link_rate));
    handshake::peer(&mut conn, cfg.token.as_ref(), cfg.frame_cap(), t, encrypt, to.session)
        .await
        .map_err(|e| format!("handshake with {}: {e}", to.addr))?;
    Ok(conn)
}
