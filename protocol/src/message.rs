//! The messages, named by direction. Matrix data never goes through serde:
//! a message only says how many values of which type follow it as raw
//! payload.

use crate::error::{Error, Result};
use crate::values::{DType, Form, Values};
use serde::{Deserialize, Serialize};

/// Incremented on any incompatible change of the messages or framing.
pub const PROTOCOL_VERSION: u32 = 8;

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
    /// The ciphers it runs at speed, best first (see `seal::agree`).
    pub ciphers: Vec<Cipher>,
    /// The session this welcome opens, for a second connection to name as
    /// its control line (`Auth::control`): grants that must not queue
    /// behind the chunks on the first. 0: none can be opened.
    pub session: u64,
}

/// An AEAD for encrypted connections (`--encrypt`), agreed in the
/// handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cipher {
    /// Where both ends have AES instructions.
    Aes256Gcm,
    /// Anywhere else (fast in software).
    ChaCha20Poly1305,
}

impl Cipher {
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes256Gcm => "AES-256-GCM",
            Cipher::ChaCha20Poly1305 => "ChaCha20-Poly1305",
        }
    }
}

impl Capabilities {
    /// How many products of this form fit in the memory limit at once (A,
    /// B and C each; a shared B once, beside them).
    pub fn max_products(&self, form: &Form) -> u64 {
        let room = match form.shared_b {
            true => self.memory_limit.saturating_sub(form.b_bytes()),
            false => self.memory_limit,
        };
        room.checked_div(form.held_bytes(1)).unwrap_or(0)
    }
}

/// Consecutive rows or columns: `start`, `start + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    pub fn end(&self) -> u32 {
        self.start.saturating_add(self.len)
    }
}

/// What a `Share` carries: A's rows or B's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SharePart {
    Rows(Span),
    Cols(Span),
}

/// Another worker of the exchange: where it listens, and the session of
/// its own with the master that a connection to it names (`Auth::peer`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerAddr {
    pub addr: String,
    pub session: u64,
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
    /// frame after the welcome is encrypted (`--encrypt`; needs a token)
    /// and with which ciphers the master is fast, best first, and whether
    /// it asks only for the worker's status (answered with `Status`, then
    /// the connection closes; no session is opened), or whether this
    /// connection is the control line of the session it names (from that
    /// session's welcome): it then carries that session's grants, and the
    /// worker's `Received`s back, which then wait behind no chunk or
    /// results on the session's own connection.
    Auth {
        proof: Option<Proof>,
        max_frame: u64,
        encrypt: bool,
        ciphers: Vec<Cipher>,
        status: bool,
        control: Option<u64>,
        /// This connection comes from another worker of the session it
        /// names (the `peers` of an `Exchange`): it carries that worker's
        /// `Share`s passed on, nothing else.
        peer: Option<u64>,
    },
    /// `count` products of `form`: payload A_1..A_count then, unless B is
    /// shared, B_1..B_count; row-major, little-endian values of the form's
    /// type.
    Assign {
        job: JobId,
        chunk: ChunkId,
        form: Form,
        count: u32,
    },
    /// One outer-product step of a piece of one large product: payload A's
    /// rows (n×k of `form`) then B's columns (k×m), row-major; the worker
    /// adds their product into the piece's C (n×m, zero before its first
    /// panel), answers `Received` when the panel is in and `Ready` when it
    /// is added, and after the `last` one holds C for a `Grant`, then
    /// returns it as `Results` of one product of `form` with k the
    /// product's whole depth (`depth`).
    Panel {
        job: JobId,
        piece: ChunkId,
        form: Form,
        depth: u32,
        last: bool,
    },
    /// The B every product of this job shares (`form.shared_b`): payload
    /// one k×m matrix. Sent once, before the job's first chunk; held until
    /// the job is cancelled or the session ends.
    ShareB {
        job: JobId,
        form: Form,
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
    /// Calibration of computing: `count` products of `form` on data the
    /// worker makes.
    ComputeProbe {
        form: Form,
        count: u32,
    },
    /// The master is done with this worker.
    Bye,
    /// This worker's part in the exchange of one large product's panels
    /// (job `job`): its rectangle of C (A's rows `rows`, B's columns
    /// `cols`), its columns cut into `bands` (piece ids and widths, left
    /// to right), each band computed over `steps` (depths along k, the
    /// same for every band) and returned after its last; A's rows of the
    /// first band's panels are kept for the others. Its panel of stage t
    /// (band t / steps, step t % steps) arrives as `Share`s: row parts
    /// (first band only) and the band's columns. `peers`: the workers it
    /// may be asked to pass parts on to.
    Exchange {
        job: JobId,
        dtype: DType,
        rows: Span,
        cols: Span,
        bands: Vec<(ChunkId, u32)>,
        steps: Vec<u32>,
        peers: Vec<PeerAddr>,
    },
    /// A part of a stage's panels: payload `len` values, A's rows `span`
    /// (row-major, the step's depth wide) or B's columns `span` (the
    /// step's depth rows of the span's width), for this worker and then,
    /// in order, for the `forward` peers (indices into the exchange's
    /// `peers`), to whom it passes the same part on with no `forward`.
    Share {
        job: JobId,
        stage: u32,
        part: SharePart,
        dtype: DType,
        len: u64,
        forward: Vec<u32>,
    },
    /// A piece of the inputs of a chunk of `count` products of `form`
    /// (what one `Assign` would carry): payload the next `len` values of
    /// them, in `Assign`'s order. The first piece of a chunk opens it (and
    /// is refused as `Assign` would be); the one that completes it is
    /// answered `Received`, and the chunk goes on as if assigned. The
    /// master sends a large chunk in pieces so that a `Grant` (or any
    /// short message) waits for one piece rather than the whole chunk.
    Part {
        job: JobId,
        chunk: ChunkId,
        form: Form,
        count: u32,
        len: u64,
    },
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
    /// `count` results of `form`: payload C_1..C_count (n×m each).
    Results {
        job: JobId,
        chunk: ChunkId,
        form: Form,
        count: u32,
    },
    EchoAck {
        len: u64,
    },
    /// Answer to `Pull`: `len` values of payload.
    PullData {
        len: u64,
    },
    ComputeDone {
        count: u32,
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
    /// Parts of job `job` could not be passed on to peer `peer` (an index
    /// into its exchange's `peers`): the master must send them itself.
    PeerFailed {
        job: JobId,
        peer: u32,
        message: String,
    },
}

impl ToWorker {
    /// The variant's name, without its contents (which may be large or secret).
    pub fn name(&self) -> &'static str {
        match self {
            ToWorker::Hello { .. } => "Hello",
            ToWorker::Auth { .. } => "Auth",
            ToWorker::Assign { .. } => "Assign",
            ToWorker::Panel { .. } => "Panel",
            ToWorker::ShareB { .. } => "ShareB",
            ToWorker::Grant { .. } => "Grant",
            ToWorker::Cancel { .. } => "Cancel",
            ToWorker::Heartbeat { .. } => "Heartbeat",
            ToWorker::Echo { .. } => "Echo",
            ToWorker::Pull { .. } => "Pull",
            ToWorker::ComputeProbe { .. } => "ComputeProbe",
            ToWorker::Bye => "Bye",
            ToWorker::Part { .. } => "Part",
            ToWorker::Exchange { .. } => "Exchange",
            ToWorker::Share { .. } => "Share",
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
            FromWorker::PeerFailed { .. } => "PeerFailed",
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

fn checked(values: u64, count: u32, what: &str) -> Result<u64> {
    if values == u64::MAX {
        return Err(Error::Malformed(format!("{what}: its dimensions overflow")));
    }
    values
        .checked_mul(count as u64)
        .ok_or_else(|| Error::Malformed(format!("{what}: {count} products overflow")))
}

/// A message kind that says how many values, of which type, follow it.
pub trait Payload {
    fn payload(&self) -> Result<(DType, u64)>;
}

impl Payload for ToWorker {
    fn payload(&self) -> Result<(DType, u64)> {
        match *self {
            ToWorker::Assign { form, count, .. } => Ok((form.dtype, checked(form.in_len(1), count, "a chunk")?)),
            ToWorker::ShareB { form, .. } => Ok((form.dtype, checked(form.shape.b_len(), 1, "a shared B")?)),
            ToWorker::Panel { form, .. } => Ok((form.dtype, checked(form.in_len(1), 1, "a panel")?)),
            ToWorker::Echo { len } => Ok((DType::F64, len)),
            ToWorker::Share { dtype, len, .. } => Ok((dtype, len)),
            ToWorker::Part { form, count, len, .. } => {
                // A piece never holds more than its chunk.
                if len > checked(form.in_len(1), count, "a chunk")? {
                    return Err(Error::Malformed(format!(
                        "a piece of {len} values of a chunk of {count} products of {form}"
                    )));
                }
                Ok((form.dtype, len))
            }
            _ => Ok((DType::F64, 0)),
        }
    }
}

impl Payload for FromWorker {
    fn payload(&self) -> Result<(DType, u64)> {
        match *self {
            FromWorker::Results { form, count, .. } => Ok((form.dtype, checked(form.shape.c_len(), count, "results")?)),
            FromWorker::PullData { len } => Ok((DType::F64, len)),
            _ => Ok((DType::F64, 0)),
        }
    }
}

/// A message and its payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame<M> {
    pub msg: M,
    pub payload: Values,
}

impl<M> Frame<M> {
    pub fn new(msg: M) -> Self {
        Frame {
            msg,
            payload: Values::default(),
        }
    }

    pub fn with_payload(msg: M, payload: impl Into<Values>) -> Self {
        Frame {
            msg,
            payload: payload.into(),
        }
    }
}
