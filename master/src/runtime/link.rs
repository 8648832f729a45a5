//! Connections from the master to its workers.

use crate::config::cluster::Cluster;
use anyhow::{anyhow, Context, Result};
use dls_protocol::{handshake, Capabilities, Connection, FromWorker, ToWorker, Token, WorkerStatus};
use std::time::Duration;
use tokio::net::TcpStream;

pub type WorkerConn = Connection<TcpStream, FromWorker, ToWorker>;

/// An authenticated connection to one worker, and its control line.
pub struct Link {
    pub name: String,
    pub address: String,
    pub caps: Capabilities,
    pub conn: WorkerConn,
    /// A second connection for grants alone, where the worker offers one
    /// and it could be opened: a grant on `conn` waits behind every byte
    /// of a chunk being sent there (in `dls demo`'s multi-round runs the
    /// returns granted so took 1.6-2.0x their prediction;
    /// docs/planner.md).
    pub control: Option<WorkerConn>,
}

/// How the master connects: its network waits, and whether every frame is
/// encrypted (`--encrypt`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    pub connect: Duration,
    pub handshake: Duration,
    pub encrypt: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            connect: Duration::from_secs(5),
            handshake: Duration::from_secs(5),
            encrypt: false,
        }
    }
}

/// Frames the master sends or accepts: large enough for any chunk it makes.
pub const MAX_FRAME: u64 = dls_protocol::frame::ABSOLUTE_MAX_FRAME;

/// The token from `--token-file`, else `DLS_TOKEN`, else none (the same two
/// ways `dls-worker` takes it).
pub use dls_common::load_token;

/// Connect to one worker and authenticate. A connection the worker drops
/// for a newer one before it authenticated (a flood of other clients) is
/// tried again, a few times.
pub async fn connect(name: &str, address: &str, token: Option<&Token>, t: ConnectOptions) -> Result<Link> {
    let mut tries = 0;
    loop {
        match connect_once(name, address, token, t).await {
            Err(Attempt::Dropped(_)) if tries < 4 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50 * tries)).await;
            }
            Err(Attempt::Dropped(e)) | Err(Attempt::Failed(e)) => return Err(e),
            Ok(link) => return Ok(link),
        }
    }
}

enum Attempt {
    /// The worker dropped this connection for a newer one.
    Dropped(anyhow::Error),
    Failed(anyhow::Error),
}

/// How errors name a worker: "worker \"node1\" at 10.0.0.1:7070", or just
/// "worker at 10.0.0.1:7070" when it is named by its address.
fn who(name: &str, address: &str) -> String {
    if name == address {
        format!("worker at {address}")
    } else {
        format!("worker {name:?} at {address}")
    }
}

async fn connect_once(name: &str, address: &str, token: Option<&Token>, t: ConnectOptions) -> Result<Link, Attempt> {
    let stream = tokio::time::timeout(t.connect, TcpStream::connect(address))
        .await
        .map_err(|_| Attempt::Failed(anyhow!("{}: no answer within {:?}", who(name, address), t.connect)))?
        .with_context(|| format!("{}: cannot connect (is dls-worker running there?)", who(name, address)))
        .map_err(Attempt::Failed)?;
    let _ = stream.set_nodelay(true);
    dls_common::keepalive(&stream);
    dls_common::short_send_queue(&stream);
    let mut conn = Connection::new(stream);
    let caps = match handshake::master_sealed(&mut conn, token, MAX_FRAME, t.handshake, t.encrypt).await {
        Ok(caps) => caps,
        Err(e) => {
            let dropped = handshake::dropped_for_newer(&e);
            let e = anyhow::Error::new(e).context(who(name, address));
            return Err(if dropped {
                Attempt::Dropped(e)
            } else {
                Attempt::Failed(e)
            });
        }
    };
    tracing::debug!(
        worker = name,
        address,
        cores = caps.cores,
        threads = caps.threads,
        memory_limit = caps.memory_limit,
        kernel = %caps.kernel,
        emulated = caps.emulated,
        encrypted = t.encrypt,
        "connected"
    );
    let control = match caps.session {
        0 => None,
        session => match control_line(address, token, t, session).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(
                    worker = name,
                    "no control line (grants share the connection with chunks): {e:#}"
                );
                None
            }
        },
    };
    Ok(Link {
        name: name.to_string(),
        address: address.to_string(),
        caps,
        conn,
        control,
    })
}

/// Open the control line of the worker's `session`.
async fn control_line(address: &str, token: Option<&Token>, t: ConnectOptions, session: u64) -> Result<WorkerConn> {
    let stream = tokio::time::timeout(t.connect, TcpStream::connect(address))
        .await
        .map_err(|_| anyhow!("no answer within {:?}", t.connect))??;
    let _ = stream.set_nodelay(true);
    dls_common::keepalive(&stream);
    let mut conn = Connection::new(stream);
    handshake::master_control(&mut conn, token, t.handshake, t.encrypt, session).await?;
    Ok(conn)
}

/// Ask one worker what it is doing, without opening a session (it answers
/// while it serves another master).
pub async fn status(name: &str, address: &str, token: Option<&Token>, t: ConnectOptions) -> Result<WorkerStatus> {
    let stream = tokio::time::timeout(t.connect, TcpStream::connect(address))
        .await
        .map_err(|_| anyhow!("no answer within {:?}", t.connect))?
        .with_context(|| "cannot connect (is dls-worker running there?)".to_string())?;
    let _ = stream.set_nodelay(true);
    let mut conn: WorkerConn = Connection::new(stream);
    let s = handshake::master_status(&mut conn, token, t.handshake)
        .await
        .with_context(|| who(name, address))?;
    Ok(s)
}

/// Show an idle worker that this master is still there (a heartbeat and
/// its answer), before the worker's idle timeout ends the session.
pub async fn keep_alive(link: &mut Link, wait: Duration) -> Result<()> {
    let name = link.name.clone();
    link.conn.send(&ToWorker::Heartbeat { seq: 0 }).await?;
    let answer = async {
        match link.conn.read_frame().await {
            Ok(Some(f)) if matches!(f.msg, FromWorker::HeartbeatAck { .. }) => Ok(()),
            Ok(Some(f)) => Err(anyhow!("worker {name:?}: unexpected {} while idle", f.msg.name())),
            Ok(None) => Err(anyhow!("worker {name:?} closed the connection while idle")),
            Err(e) => Err(anyhow!("worker {name:?}: {e}")),
        }
    };
    tokio::time::timeout(wait, answer)
        .await
        .map_err(|_| anyhow!("worker {:?}: no answer to a heartbeat within {wait:?}", link.name))?
}

/// Connect to every worker of the cluster, all at once; each one's outcome,
/// in cluster order.
pub async fn try_all(cluster: &Cluster, token: Option<&Token>, t: ConnectOptions) -> Result<Vec<Result<Link>>> {
    let mut set = tokio::task::JoinSet::new();
    for (i, w) in cluster.worker.iter().enumerate() {
        let (name, address, token) = (w.name.clone(), w.address.clone(), token.cloned());
        set.spawn(async move { (i, connect(&name, &address, token.as_ref(), t).await) });
    }
    let mut out: Vec<Option<Result<Link>>> = (0..cluster.worker.len()).map(|_| None).collect();
    while let Some(joined) = set.join_next().await {
        let (i, r) = joined.context("a connection task failed")?;
        out[i] = Some(r);
    }
    Ok(out
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(anyhow!("a connection task vanished"))))
        .collect())
}

/// Connect to every worker of the cluster, all at once. The first failure
/// (in cluster order) is the error.
pub async fn connect_all(cluster: &Cluster, token: Option<&Token>, t: ConnectOptions) -> Result<Vec<Link>> {
    try_all(cluster, token, t).await?.into_iter().collect()
}

/// Say goodbye to every worker and wait (up to a second each) for its
/// answer, so that the worker is free for the next master when this returns.
pub async fn close_all(links: &mut [Link]) {
    for l in links.iter_mut() {
        let _ = l.conn.send(&ToWorker::Bye).await;
    }
    for l in links.iter_mut() {
        let wait = async {
            while let Ok(Some(f)) = l.conn.read_frame().await {
                if matches!(f.msg, dls_protocol::FromWorker::Bye) {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), wait).await;
    }
}
