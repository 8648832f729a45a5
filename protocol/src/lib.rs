//! The `dls` wire protocol: typed messages ([`ToWorker`], [`FromWorker`]),
//! length-delimited framing with raw payloads of f32 or f64 values
//! ([`frame`], [`Values`]), the
//! [`Connection`] that owns a stream's buffers, and the authenticated
//! [`handshake`].
//!
//! This crate parses and produces bytes; it never opens a socket, and the
//! one task it spawns is an `Outbox`'s writer (with the `io` feature),
//! which ends with its owner.
//!
//! ```
//! use bytes::BytesMut;
//! use dls_protocol::{frame, ChunkId, DType, Form, Frame, JobId, Shape, ToWorker};
//!
//! // One product of a 2×3 A and a 3×1 B, in float32: 6 + 3 values.
//! let form = Form { shape: Shape { n: 2, k: 3, m: 1 }, dtype: DType::F32, shared_b: false };
//! let msg = ToWorker::Assign { job: JobId(1), chunk: ChunkId(0), form, count: 1 };
//! let f = Frame::with_payload(msg, vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
//! let mut buf = BytesMut::new();
//! frame::encode(&f, &mut buf)?;
//! let back: Frame<ToWorker> = frame::decode(&mut buf, 1 << 20)?.expect("a whole frame");
//! assert_eq!(back, f);
//! # Ok::<(), dls_protocol::Error>(())
//! ```

pub mod auth;
#[cfg(feature = "io")]
pub mod conn;
pub mod error;
pub mod frame;
#[cfg(feature = "io")]
pub mod handshake;
pub mod message;
#[cfg(feature = "io")]
pub mod outbox;
pub mod seal;
pub mod values;

pub use auth::Token;
#[cfg(feature = "io")]
pub use conn::{Connection, PayloadSource};
pub use error::{Error, Result};
pub use message::{
    Capabilities, ChunkId, Cipher, ErrorCode, Frame, FromWorker, JobId, Nonce, Payload, PeerAddr, Proof, SharePart,
    Span, ToWorker, WorkerStatus, PROTOCOL_VERSION,
};
#[cfg(feature = "io")]
pub use outbox::Outbox;
pub use values::{DType, Form, Shape, Values};
