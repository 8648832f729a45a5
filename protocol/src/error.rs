use thiserror::Error;

/// What can go wrong on a connection.
#[derive(Debug, Error)]
pub enum Error {
    /// The peer closed the connection in the middle of a frame. Not retryable
    /// on this connection.
    #[error("connection closed in the middle of a frame ({got} of {expected} bytes)")]
    Truncated { got: usize, expected: usize },
    /// A length prefix above the negotiated limit. Rejected before any
    /// allocation; the connection must close.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: u64, max: u64 },
    /// Bytes that are not a frame of this protocol (bad header, bad lengths,
    /// undecodable message). The connection must close.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// Matrix dimensions in a header disagree with the payload length.
    #[error("payload of {got} values where the header implies {expected}")]
    PayloadMismatch { got: u64, expected: u64 },
    /// The handshake failed: version, role, token. Retryable only after the
    /// configuration is fixed.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The peer sent an error frame.
    #[error("the peer refused: {message} ({code:?})")]
    Remote { code: crate::ErrorCode, message: String },
    /// This side refuses what the peer asked (memory limit, busy, bad token).
    /// Not retryable as is.
    #[error("{message}")]
    Refused { code: crate::ErrorCode, message: String },
    /// A wait ran out. Retryable.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(std::time::Duration, &'static str),
    /// The socket failed. Retryable with a new connection.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The code to put in an error frame for the peer, if one is worth sending.
    pub fn code(&self) -> Option<crate::ErrorCode> {
        use crate::ErrorCode as C;
        match self {
            Error::FrameTooLarge { .. } => Some(C::FrameTooLarge),
            Error::Malformed(_) => Some(C::Malformed),
            Error::PayloadMismatch { .. } => Some(C::PayloadMismatch),
            Error::Refused { code, .. } => Some(*code),
            Error::Handshake(_) => Some(C::Unauthorized),
            Error::Truncated { .. } | Error::Remote { .. } | Error::Timeout(..) | Error::Io(_) => None,
        }
    }
}
