//! The messages, named by direction. Matrix data never goes through serde:
//! a message only says how many f64 values follow it as raw payload.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Incremented on any incompatible change of the messages or framing.
pub const PROTOCOL_VERSION: u32 = 2;

/// A random value that makes every handshake's proofs unique.
pub type Nonce = [u8; 32];
/// HMAC-SHA256 of a nonce pair under the shared token.
pub type Proof = [u8; 32];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct JobId(pub u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ChunkId(pub u64);

/// What a worker is doing, for `dls status`: sent instead of `Welcome` to a
/// master that asked only for it (it takes no session slot).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    pub caps: Capabilities,
    /// The master it serves now (its address) and for how many seconds.
    pub busy_with: Option<(String, f64)>,
    pub uptime_secs: f64,
    /// Sessions served since start, and products whose results it sent.
    pub sessions: u64,
    pub products: u64,
    /// Whether it serves only masters that encrypt (`--encrypt`).
    pub encrypt_required: bool,
}

/// What a worker offers, sent once the master is authenticated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Logical cores on the worker's machine.
    pub cores: u32,
    /// Threads its kernel uses.
    pub threads: u32,
    /// Bytes of matrices (A, B and C of every chunk held) it accepts.
    pub memory_limit: u64,
    /// The matrix kernel, e.g. "faer 0.24 f64 gemm".
    pub kernel: String,
    /// Whether results are slowed down or throttled for emulation.
    pub emulated: bool,
}

impl Capabilities {
    /// How many products of size n fit in the memory limit (A, B and C each).
    pub fn max_products(&self, n: u32) -> u64 {
        let per = crate::ab_bytes(n, 1).saturating_add(crate::c_bytes(n, 1));
        self.memory_limit.checked_div(per).unwrap_or(0)
    }
}

/// Master to worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// First frame: protocol version and the master's nonce.
    Hello {
        version: u32,
        nonce: Nonce,
    },
    /// The master's proof of the token (when the worker has one), the
    /// largest frame it will send or accept from now on, whether every
    /// frame after the welcome is encrypted (`--encrypt`; needs a token),
    /// and whether it asks only for the worker's status (answered with
    /// `Status`, then the connection closes; no session is opened).
    Auth {
        proof: Option<Proof>,
        max_frame: u64,
        encrypt: bool,
        status: bool,
    },
    /// `k` products of size `n`: payload A_1..A_k then B_1..B_k, each n×n,
    /// row-major, f64 little-endian (2·k·n² values).
    Assign {
        job: JobId,
        chunk: ChunkId,
        n: u32,
        k: u32,
    },
    /// The master's port is free for this chunk's results.
    Grant {
        job: JobId,
        chunk: ChunkId,
    },
    /// Drop everything of this job.
    Cancel {
        job: JobId,
    },
    Heartbeat {
        seq: u64,
    },
    /// Calibration of sends: `len` values of payload; acknowledged once all are in.
    Echo {
        len: u64,
    },
    /// Calibration of returns: ask for `len` values of payload.
    Pull {
        len: u64,
    },
    /// Calibration of computing: `k` products of size `n` on data the worker makes.
    ComputeProbe {
        n: u32,
        k: u32,
    },
    /// The master is done with this worker.
    Bye,
}

/// Worker to master.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromWorker {
    /// Answer to `Hello`: version, the worker's nonce, and its own proof of
    /// the token (none when it runs without one).
    Challenge {
        version: u32,
        nonce: Nonce,
        proof: Option<Proof>,
    },
    /// The master is authenticated.
    Welcome(Capabilities),
    /// The whole chunk has arrived.
    Received {
        job: JobId,
        chunk: ChunkId,
    },
    /// The chunk is computed; results wait for a `Grant`.
    Ready {
        job: JobId,
        chunk: ChunkId,
        compute_secs: f64,
    },
    /// `k` results of size `n`: payload C_1..C_k (k·n² values).
    Results {
        job: JobId,
        chunk: ChunkId,
        n: u32,
        k: u32,
    },
    EchoAck {
        len: u64,
    },
    /// Answer to `Pull`: `len` values of payload.
    PullData {
        len: u64,
    },
    ComputeDone {
        n: u32,
        k: u32,
        secs: f64,
    },
    HeartbeatAck {
        seq: u64,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    Bye,
    /// Answer to an `Auth` that asked for the status only.
    Status(WorkerStatus),
}

impl ToWorker {
    /// The variant's name, without its contents (which may be large or secret).
    pub fn name(&self) -> &'static str {
        match self {
            ToWorker::Hello { .. } => "Hello",
            ToWorker::Auth { .. } => "Auth",
            ToWorker::Assign { .. } => "Assign",
            ToWorker::Grant { .. } => "Grant",
            ToWorker::Cancel { .. } => "Cancel",
            ToWorker::Heartbeat { .. } => "Heartbeat",
            ToWorker::Echo { .. } => "Echo",
            ToWorker::Pull { .. } => "Pull",
            ToWorker::ComputeProbe { .. } => "ComputeProbe",
            ToWorker::Bye => "Bye",
        }
    }
}

impl FromWorker {
    /// The variant's name, without its contents.
    pub fn name(&self) -> &'static str {
        match self {
            FromWorker::Challenge { .. } => "Challenge",
            FromWorker::Welcome(_) => "Welcome",
            FromWorker::Received { .. } => "Received",
            FromWorker::Ready { .. } => "Ready",
            FromWorker::Results { .. } => "Results",
            FromWorker::EchoAck { .. } => "EchoAck",
            FromWorker::PullData { .. } => "PullData",
            FromWorker::ComputeDone { .. } => "ComputeDone",
            FromWorker::HeartbeatAck { .. } => "HeartbeatAck",
            FromWorker::Error { .. } => "Error",
            FromWorker::Bye => "Bye",
            FromWorker::Status(_) => "Status",
        }
    }
}

/// Why a worker refuses something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    VersionMismatch,
    Unauthorized,
    Busy,
    Malformed,
    FrameTooLarge,
    PayloadMismatch,
    MemoryLimit,
    UnexpectedMessage,
    Internal,
}

fn products(n: u32, k: u32, per: u64) -> Result<u64> {
    (n as u64)
        .checked_mul(n as u64)
        .and_then(|x| x.checked_mul(k as u64))
        .and_then(|x| x.checked_mul(per))
        .ok_or_else(|| Error::Malformed(format!("dimensions n = {n}, k = {k} overflow")))
}

/// A message kind that says how many f64 values follow it.
pub trait Payload {
    fn payload_len(&self) -> Result<u64>;
}

impl Payload for ToWorker {
    fn payload_len(&self) -> Result<u64> {
        match *self {
            ToWorker::Assign { n, k, .. } => products(n, k, 2),
            ToWorker::Echo { len } => Ok(len),
            _ => Ok(0),
        }
    }
}

impl Payload for FromWorker {
    fn payload_len(&self) -> Result<u64> {
        match *self {
            FromWorker::Results { n, k, .. } => products(n, k, 1),
            FromWorker::PullData { len } => Ok(len),
            _ => Ok(0),
        }
    }
}

/// A message and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<M> {
    pub msg: M,
    pub payload: Vec<f64>,
}

impl<M> Frame<M> {
    pub fn new(msg: M) -> Self {
        Frame {
            msg,
            payload: Vec::new(),
        }
    }

    pub fn with_payload(msg: M, payload: Vec<f64>) -> Self {
        Frame { msg, payload }
    }
}
