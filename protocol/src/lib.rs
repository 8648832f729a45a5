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
pub mod seal;

pub use auth::Token;
pub use conn::Connection;
pub use error::{Error, Result};
pub use message::{
    Capabilities, ChunkId, ErrorCode, Frame, FromWorker, JobId, Nonce, Payload, Proof, ToWorker, WorkerStatus,
    PROTOCOL_VERSION,
};

/// Bytes of one n×n matrix of f64 (saturating: never overflows).
pub fn matrix_bytes(n: u32) -> u64 {
    8u64.saturating_mul(n as u64).saturating_mul(n as u64)
}

/// Bytes of the inputs (A and B) of `k` products of size `n`: what a chunk
/// carries to a worker, and what the worker holds until it has computed it.
pub fn ab_bytes(n: u32, k: u32) -> u64 {
    matrix_bytes(n).saturating_mul(2).saturating_mul(k as u64)
}

/// Bytes of the results (C) of `k` products of size `n`.
pub fn c_bytes(n: u32, k: u32) -> u64 {
    matrix_bytes(n).saturating_mul(k as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_are_bytes_of_f64_and_saturate() {
        assert_eq!(super::ab_bytes(4, 3), 2 * 3 * 16 * 8);
        assert_eq!(super::c_bytes(4, 3), 3 * 16 * 8);
        assert_eq!(super::ab_bytes(u32::MAX, u32::MAX), u64::MAX);
    }
}
