//! The first frames both ways: version, role, and mutual proof of the token.
//!
//! ```text
//! master → worker  Hello     { version, nonce_m }
//! worker → master  Challenge { version, nonce_w, proof_w }   proof_w = HMAC(token, "worker" ‖ nonce_m ‖ nonce_w)
//! master → worker  Auth      { proof_m, max_frame }          proof_m = HMAC(token, "master" ‖ nonce_w ‖ nonce_m)
//! worker → master  Welcome   { capabilities }
//! ```
//! A worker without a token (only allowed on loopback, or with `--insecure`)
//! sends no proof and accepts any master; a master with a token refuses such
//! a worker. Every step is under one timeout.

use crate::auth::{self, Role, Token};
use crate::conn::Connection;
use crate::error::{Error, Result};
use crate::message::{Capabilities, Cipher, ErrorCode, FromWorker, ToWorker, WorkerStatus, PROTOCOL_VERSION};
use crate::seal;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// Part of the message of a worker that dropped a connection, not yet
/// authenticated, to make room for a newer one: the master may try again.
pub const DROPPED_FOR_NEWER: &str = "dropped for a newer one";

/// Whether `e` says the worker dropped this connection for a newer one.
pub fn dropped_for_newer(e: &Error) -> bool {
    matches!(e, Error::Remote { code: ErrorCode::Busy, message } if message.contains(DROPPED_FOR_NEWER))
}

fn peer_error(code: ErrorCode, message: String) -> Error {
    Error::Remote { code, message }
}

/// The master's side. Returns the worker's capabilities; the connection's
/// frame limit is `max_frame` afterwards.
pub async fn master<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    max_frame: u64,
    timeout: Duration,
) -> Result<Capabilities> {
    master_sealed(conn, token, max_frame, timeout, false).await
}

/// As [`master`]; with `encrypt`, every frame after the welcome is
/// encrypted and authenticated ([`crate::seal`]; needs a token).
pub async fn master_sealed<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    max_frame: u64,
    timeout: Duration,
    encrypt: bool,
) -> Result<Capabilities> {
    master_as(conn, token, max_frame, timeout, encrypt, Joins::Nothing).await
}

/// What a connection after the first joins, on the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joins {
    /// Nothing: it opens a session.
    Nothing,
    /// The session's control line.
    Control(u64),
    /// Another worker passing parts of an exchange on to this session.
    Peer(u64),
}

/// As [`master_sealed`], for the control line of the worker's `session`
/// (its welcome's [`Capabilities::session`]): the connection then carries
/// that session's grants, and the worker's `Received`s back.
pub async fn master_control<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    timeout: Duration,
    encrypt: bool,
    session: u64,
) -> Result<Capabilities> {
    let max_frame = crate::frame::HANDSHAKE_MAX_FRAME;
    master_as(conn, token, max_frame, timeout, encrypt, Joins::Control(session)).await
}

/// A worker's side, opening a connection to another worker of an
/// exchange, to pass parts on to that worker's `session` (its entry in
/// the exchange's `peers`): the same handshake as a master's, with the
/// same token; frames of up to `max_frame` bytes.
pub async fn peer<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    max_frame: u64,
    timeout: Duration,
    encrypt: bool,
    session: u64,
) -> Result<Capabilities> {
    master_as(conn, token, max_frame, timeout, encrypt, Joins::Peer(session)).await
}

async fn master_as<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    max_frame: u64,
    timeout: Duration,
    encrypt: bool,
    joins: Joins,
) -> Result<Capabilities> {
    if encrypt && token.is_none() {
        return Err(Error::Handshake(
            "--encrypt needs a token (the keys are derived from it): give --token-file or DLS_TOKEN".into(),
        ));
    }
    let steps = async {
        let (nm, nw) = hello(conn, token).await?;
        let ciphers = if encrypt { seal::fast_ciphers() } else { Vec::new() };
        conn.send(&ToWorker::Auth {
            proof: token.map(|t| auth::prove(t, Role::Master, &nm, &nw)),
            max_frame,
            encrypt,
            ciphers: ciphers.clone(),
            status: false,
            control: match joins {
                Joins::Control(s) => Some(s),
                _ => None,
            },
            peer: match joins {
                Joins::Peer(s) => Some(s),
                _ => None,
            },
        })
        .await?;
        conn.set_max_frame(max_frame);
        match conn.read_frame().await?.map(|f| f.msg) {
            Some(FromWorker::Welcome(caps)) => {
                if let (true, Some(t)) = (encrypt, token) {
                    let cipher = seal::agree(&ciphers, &caps.ciphers);
                    let (send, recv) = seal::sealers(t, &nm, &nw, seal::Side::Master, cipher);
                    conn.seal_with(send, recv);
                }
                Ok(caps)
            }
            Some(FromWorker::Error { code, message }) => Err(peer_error(code, message)),
            Some(other) => Err(Error::Handshake(format!("expected a welcome, got {other:?}"))),
            None => Err(Error::Handshake(
                "the worker closed the connection during the handshake".into(),
            )),
        }
    };
    tokio::time::timeout(timeout, steps)
        .await
        .map_err(|_| Error::Timeout(timeout, "the handshake"))?
}

/// The master's first two steps: Hello, and the worker's challenge checked
/// against the token. The two nonces.
async fn hello<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
) -> Result<(crate::message::Nonce, crate::message::Nonce)> {
    let nm = auth::nonce();
    conn.send(&ToWorker::Hello {
        version: PROTOCOL_VERSION,
        nonce: nm,
    })
    .await?;
    let (nw, proof) = match conn.read_frame().await?.map(|f| f.msg) {
        Some(FromWorker::Challenge { version, nonce, proof }) => {
            if version != PROTOCOL_VERSION {
                return Err(Error::Handshake(format!(
                    "protocol version mismatch: worker speaks {version}, master {PROTOCOL_VERSION}"
                )));
            }
            (nonce, proof)
        }
        Some(FromWorker::Error { code, message }) => return Err(peer_error(code, message)),
        Some(other) => return Err(Error::Handshake(format!("expected a challenge, got {other:?}"))),
        None => {
            return Err(Error::Handshake(
                "the worker closed the connection during the handshake".into(),
            ))
        }
    };
    if let Some(t) = token {
        match proof {
            Some(p) if auth::verify(t, Role::Worker, &nw, &nm, &p) => {}
            Some(_) => {
                return Err(Error::Handshake(
                    "the worker's token proof is wrong: the worker and the master use different tokens".into(),
                ))
            }
            None => return Err(Error::Handshake(
                "the worker runs without a token (on loopback, or with --insecure) but this master has one; refusing"
                    .into(),
            )),
        }
    }
    Ok((nm, nw))
}

/// Ask a worker what it is doing ([`WorkerStatus`]) without opening a
/// session: it answers even while it serves another master.
pub async fn master_status<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, FromWorker, ToWorker>,
    token: Option<&Token>,
    timeout: Duration,
) -> Result<WorkerStatus> {
    let steps = async {
        let (nm, nw) = hello(conn, token).await?;
        conn.send(&ToWorker::Auth {
            proof: token.map(|t| auth::prove(t, Role::Master, &nm, &nw)),
            max_frame: crate::frame::HANDSHAKE_MAX_FRAME,
            encrypt: false,
            ciphers: Vec::new(),
            status: true,
            control: None,
            peer: None,
        })
        .await?;
        match conn.read_frame().await?.map(|f| f.msg) {
            Some(FromWorker::Status(s)) => Ok(s),
            Some(FromWorker::Error { code, message }) => Err(peer_error(code, message)),
            Some(other) => Err(Error::Handshake(format!("expected a status, got {}", other.name()))),
            None => Err(Error::Handshake(
                "the worker closed the connection before its status".into(),
            )),
        }
    };
    tokio::time::timeout(timeout, steps)
        .await
        .map_err(|_| Error::Timeout(timeout, "the status"))?
}

/// The worker reads the master's `Auth` and checks its proof: the frame
/// limit it asks for, whether it encrypts, whether it wants the status only.
async fn read_auth<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, ToWorker, FromWorker>,
    token: Option<&Token>,
    nm: &crate::message::Nonce,
    nw: &crate::message::Nonce,
) -> Result<Authed> {
    let (proof, max_frame, encrypt, status, control, peer) = match conn.read_frame().await?.map(|f| f.msg) {
        Some(ToWorker::Auth {
            proof,
            max_frame,
            encrypt,
            ciphers,
            status,
            control,
            peer,
        }) => (proof, max_frame, encrypt.then_some(ciphers), status, control, peer),
        Some(other) => {
            return Err(Error::Refused {
                code: ErrorCode::UnexpectedMessage,
                message: format!("expected Auth, got {}", other.name()),
            })
        }
        None => {
            return Err(Error::Handshake(
                "the master hung up after this worker's challenge: it holds a different token, or none while this worker has one, or it expects a token this worker lacks".into(),
            ))
        }
    };
    if let Some(t) = token {
        if !proof.is_some_and(|p| auth::verify(t, Role::Master, nm, nw, &p)) {
            return Err(Error::Refused {
                code: ErrorCode::Unauthorized,
                message:
                    "unauthorized: wrong or missing token (set the same --token-file or DLS_TOKEN on master and worker)"
                        .into(),
            });
        }
    }
    let joins = match (control, peer) {
        (None, None) => Joins::Nothing,
        (Some(s), None) => Joins::Control(s),
        (None, Some(s)) => Joins::Peer(s),
        (Some(_), Some(_)) => {
            return Err(Error::Refused {
                code: ErrorCode::UnexpectedMessage,
                message: "a connection is a control line or a peer's, not both".into(),
            })
        }
    };
    Ok(Authed {
        max_frame,
        encrypt,
        status,
        joins,
    })
}

/// What an authenticated master asked for in its `Auth`.
struct Authed {
    max_frame: u64,
    encrypt: Option<Vec<Cipher>>,
    status: bool,
    joins: Joins,
}

/// What the worker brings to a handshake.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSide<'a> {
    pub token: Option<&'a Token>,
    pub caps: &'a Capabilities,
    /// The largest frame it accepts, whatever the master asks.
    pub frame_cap: u64,
    pub timeout: Duration,
    /// Serve only masters that encrypt (`--encrypt`).
    pub require_encrypt: bool,
    /// What to answer a master that asks only for the status (`None`:
    /// refuse such a request).
    pub status: Option<&'a WorkerStatus>,
}

/// How a worker's handshake ended well.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shaken {
    /// A master is authenticated and admitted: serve it.
    Session,
    /// An authenticated master had the status and leaves.
    Status,
    /// An authenticated master opened the control line of the session it
    /// names: pass its grants to that session.
    Control(u64),
    /// Another worker (holding the token) opened a connection to pass
    /// parts of an exchange on to the session it names.
    Peer(u64),
}

/// The worker's side. On refusal it sends the master an error frame first.
/// `greeted` runs when a well-formed Hello of this version has arrived (the
/// peer speaks the protocol; it has proved nothing yet). `admit` runs once
/// the master is authenticated, before the welcome, and may still refuse it
/// (a busy worker). The connection's frame limit is the
/// master's `max_frame` afterwards, capped at `side.frame_cap`.
pub async fn worker<S: AsyncRead + AsyncWrite + Unpin>(
    conn: &mut Connection<S, ToWorker, FromWorker>,
    side: &WorkerSide<'_>,
    greeted: impl FnOnce(),
    admit: impl FnOnce() -> Result<()>,
) -> Result<Shaken> {
    let WorkerSide {
        token,
        caps,
        frame_cap,
        timeout,
        require_encrypt,
        status,
    } = *side;
    let steps = async {
        let nm = match conn.read_frame().await?.map(|f| f.msg) {
            Some(ToWorker::Hello { version, nonce }) => {
                if version != PROTOCOL_VERSION {
                    let message =
                        format!("protocol version mismatch: worker speaks {PROTOCOL_VERSION}, master {version}");
                    return Err(Error::Refused {
                        code: ErrorCode::VersionMismatch,
                        message,
                    });
                }
                greeted();
                nonce
            }
            Some(other) => {
                return Err(Error::Refused {
                    code: ErrorCode::UnexpectedMessage,
                    message: format!("expected Hello as the first frame, got {}", other.name()),
                })
            }
            None => {
                return Err(Error::Handshake(
                    "the master closed the connection during the handshake".into(),
                ))
            }
        };
        let nw = auth::nonce();
        conn.send(&FromWorker::Challenge {
            version: PROTOCOL_VERSION,
            nonce: nw,
            proof: token.map(|t| auth::prove(t, Role::Worker, &nw, &nm)),
        })
        .await?;
        let Authed {
            max_frame,
            encrypt,
            status: wants_status,
            joins,
        } = read_auth(conn, token, &nm, &nw).await?;
        if wants_status {
            return match status {
                Some(st) => {
                    conn.send(&FromWorker::Status(st.clone())).await?;
                    Ok(Shaken::Status)
                }
                None => Err(Error::Refused {
                    code: ErrorCode::UnexpectedMessage,
                    message: "this worker does not answer status requests".into(),
                }),
            };
        }
        let keys =
            match (encrypt, token) {
                (Some(theirs), Some(t)) => Some((t, seal::agree(&theirs, &caps.ciphers))),
                (Some(_), None) => return Err(Error::Refused {
                    code: ErrorCode::Unauthorized,
                    message:
                        "this worker has no token, so it cannot encrypt (--encrypt needs the same token on both sides)"
                            .into(),
                }),
                (None, _) if require_encrypt => {
                    return Err(Error::Refused {
                        code: ErrorCode::Unauthorized,
                        message: "this worker requires encryption: run the master with --encrypt".into(),
                    })
                }
                (None, _) => None,
            };
        // A control line, or a peer's, joins a session already admitted.
        if joins == Joins::Nothing {
            admit()?;
        }
        conn.set_max_frame(max_frame.min(frame_cap));
        conn.send(&FromWorker::Welcome(caps.clone())).await?;
        if let Some((t, cipher)) = keys {
            let (send, recv) = seal::sealers(t, &nm, &nw, seal::Side::Worker, cipher);
            conn.seal_with(send, recv);
        }
        Ok(match joins {
            Joins::Nothing => Shaken::Session,
            Joins::Control(s) => Shaken::Control(s),
            Joins::Peer(s) => Shaken::Peer(s),
        })
    };
    let res = match tokio::time::timeout(timeout, steps).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout(timeout, "the handshake")),
    };
    if let Err(e) = &res {
        tell_master(conn, e).await;
    }
    res
}

/// Send the master an error frame for `e`, when one is worth sending. Best
/// effort: the peer may already be gone.
pub async fn tell_master<S: AsyncRead + AsyncWrite + Unpin>(conn: &mut Connection<S, ToWorker, FromWorker>, e: &Error) {
    if let Some(code) = e.code() {
        let _ = conn
            .send(&FromWorker::Error {
                code,
                message: e.to_string(),
            })
            .await;
    }
}
