//! What every round's schedule speaks of: a chunk of products for one
//! worker, the events the runtime sees about it, and where it stands.

use dls_protocol::ChunkId;
use std::fmt;

/// A contiguous range of products `[start, start + len)` for one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub worker: usize,
    pub id: ChunkId,
    pub start: usize,
    pub len: usize,
}

/// What the runtime saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The worker has the whole chunk.
    Received { worker: usize, chunk: ChunkId },
    /// The worker computed the chunk.
    Ready { worker: usize, chunk: ChunkId },
    /// The master has the chunk's whole results.
    Results { worker: usize, chunk: ChunkId },
}

impl Event {
    /// The worker and chunk it is about.
    pub fn key(self) -> (usize, ChunkId) {
        match self {
            Event::Received { worker, chunk } | Event::Ready { worker, chunk } | Event::Results { worker, chunk } => {
                (worker, chunk)
            }
        }
    }
}

/// An event the plan does not allow: the worker broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unexpected(pub Event);

impl fmt::Display for Unexpected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unexpected {:?} at this point of the schedule", self.0)
    }
}

impl std::error::Error for Unexpected {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Pending,
    Sending,
    Sent,
    Ready,
    /// Its return granted before it was computed (two lanes): the worker
    /// returns it as soon as it is.
    Granted,
    Returning,
    Returned,
}
