//! The `dls` wire protocol: typed messages ([`ToWorker`], [`FromWorker`]),
//! length-delimited framing with raw f64 payloads ([`frame`]), the
//! [`Connection`] that owns a stream's buffers, and the authenticated
//! [`handshake`].
//!
//! This crate parses and produces bytes; it never opens a socket and never
//! spawns a task.
//!
//! ```
//! use bytes::BytesMut;
//! use dls_protocol::{frame, ChunkId, Frame, JobId, ToWorker};
//!
//! let msg = ToWorker::Assign { job: JobId(1), chunk: ChunkId(0), n: 2, k: 1 };
//! let f = Frame::with_payload(msg, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
//! let mut buf = BytesMut::new();
//! frame::encode(&f, &mut buf)?;
//! let back: Frame<ToWorker> = frame::decode(&mut buf, 1 << 20)?.expect("a whole frame");
//! assert_eq!(back, f);
//! # Ok::<(), dls_protocol::Error>(())
//! ```

pub mod auth;
pub mod conn;
pub mod error;
pub mod frame;
pub mod handshake;
pub mod message;

pub use auth::Token;
pub use conn::Connection;
pub use error::{Error, Result};
pub use message::{
    Capabilities, ChunkId, ErrorCode, Frame, FromWorker, JobId, Nonce, Payload, Proof, ToWorker, PROTOCOL_VERSION,
};

/// Bytes a chunk of `k` products of size `n` takes on the wire to the worker
/// (A and B) plus room for its header; the master uses it as `max_frame`.
pub fn assign_frame_bytes(n: u32, k: u32) -> u64 {
    2 * 8 * (n as u64) * (n as u64) * (k as u64) + frame::MAX_HEAD as u64 + 8
}
