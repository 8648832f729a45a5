//! A link's liveness bookkeeping: what the link task checks on every tick
//! to tell a worker that is busy reading or computing from one that is gone.

use super::{Ev, Wrote};
use std::time::Instant;

/// Liveness bookkeeping of one link.
pub(super) struct Pulse {
    pub(super) in_flight: usize,
    /// Bytes read when last checked, and when they last changed.
    pub(super) seen: (u64, Instant),
    pub(super) last_beat: Instant,
    pub(super) seq: u64,
    /// The worker may be silent until then (it is reading a chunk).
    pub(super) quiet_until: Option<Instant>,
}

impl Pulse {
    /// A worker just connected: `bytes` read from it so far.
    pub(super) fn new(bytes: u64) -> Pulse {
        let now = Instant::now();
        Pulse {
            in_flight: 0,
            seen: (bytes, now),
            last_beat: now,
            seq: 0,
            quiet_until: None,
        }
    }

    /// A write is over: the worker may stay silent while it reads what
    /// went out; a failed write ends the link.
    pub(super) fn wrote(&mut self, wrote: Wrote) -> Option<Ev> {
        if let Some(reading) = wrote.reading {
            // The bytes may still sit in socket buffers: the worker reads
            // them at its own pace and cannot answer until it has.
            self.quiet_until = Some(Instant::now() + reading);
        }
        wrote.failed.map(Ev::Failed)
    }
}
