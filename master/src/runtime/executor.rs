//! Schedules of one round: which chunk to send next and which worker to
//! grant the port for its results, from the events of that round. The
//! planned [`Executor`] follows a plan's orders; the on-demand schedulers
//! (`on_demand.rs`) hand chunks out as workers ask. Both are synchronous and know nothing of sockets,
//! clocks or other rounds: the [`Port`] belongs to the batch machine
//! (`machine.rs`), which asks a schedule for a transfer only when the port
//! is free for it (one transfer at a time; two ports: one send and one
//! return at a time).

use dls_lp::Ports;
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
    Returning,
    Returned,
}

/// Split per-worker loads into chunks of at most `max_chunk` products,
/// handing out product ranges in send order.
pub fn chunks(send_order: &[usize], loads: &[u64], max_chunk: usize) -> Vec<Vec<Chunk>> {
    let max_chunk = max_chunk.max(1);
    let mut out = vec![Vec::new(); loads.len()];
    let mut next = 0usize;
    let mut id = 0u64;
    for &w in send_order {
        let mut left = loads[w] as usize;
        while left > 0 {
            let len = left.min(max_chunk);
            out[w].push(Chunk {
                worker: w,
                id: ChunkId(id),
                start: next,
                len,
            });
            id += 1;
            next += len;
            left -= len;
        }
    }
    out
}

/// The master's port(s): which transfer holds them now. The batch machine
/// owns it; every schedule asks it before starting a transfer, so two
/// rounds running at once still share one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    ports: Ports,
    sending: Option<(usize, ChunkId)>,
    returning: Option<(usize, ChunkId)>,
}

impl Port {
    pub fn new(ports: Ports) -> Port {
        Port {
            ports,
            sending: None,
            returning: None,
        }
    }

    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// Whether a send may start now.
    pub fn can_send(&self) -> bool {
        match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.sending.is_none(),
        }
    }

    /// Whether a return may start now.
    pub fn can_return(&self) -> bool {
        match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.returning.is_none(),
        }
    }

    pub fn start_send(&mut self, worker: usize, chunk: ChunkId) {
        debug_assert!(self.can_send());
        self.sending = Some((worker, chunk));
    }

    pub fn start_return(&mut self, worker: usize, chunk: ChunkId) {
        debug_assert!(self.can_return());
        self.returning = Some((worker, chunk));
    }

    /// The send of `chunk` to `worker` is over; false if it was not the one
    /// holding the port.
    pub fn end_send(&mut self, worker: usize, chunk: ChunkId) -> bool {
        let ours = self.sending == Some((worker, chunk));
        if ours {
            self.sending = None;
        }
        ours
    }

    pub fn end_return(&mut self, worker: usize, chunk: ChunkId) -> bool {
        let ours = self.returning == Some((worker, chunk));
        if ours {
            self.returning = None;
        }
        ours
    }

    /// `worker` is gone: whatever transfer it held ends.
    pub fn release(&mut self, worker: usize) {
        if self.sending.is_some_and(|s| s.0 == worker) {
            self.sending = None;
        }
        if self.returning.is_some_and(|r| r.0 == worker) {
            self.returning = None;
        }
    }

    /// Whether no transfer holds the port.
    pub fn idle(&self) -> bool {
        self.sending.is_none() && self.returning.is_none()
    }
}

/// What the batch machine needs of a round's schedule: the planned one-port
/// [`Executor`], the multi-round `Sequenced`, or an on-demand baseline. A schedule
/// tracks its own chunks; the [`Port`] is not its to hold: the machine asks
/// for the next send or return only when the port is free for it, and the
/// schedule marks that transfer as started.
pub trait Schedule: Send + std::any::Any {
    /// The chunk to send now, if any.
    fn next_send(&mut self) -> Option<Chunk>;
    /// The (worker, chunk) to grant the port for its results now, if any.
    fn next_return(&mut self) -> Option<(usize, ChunkId)>;
    fn on_event(&mut self, ev: Event) -> Result<(), Unexpected>;
    /// Every chunk returned or handed back.
    fn done(&self) -> bool;
    /// Give up on `worker`: the chunks it had not returned (and, when no
    /// worker is left to take them, the chunks nobody was given yet).
    fn lose(&mut self, worker: usize) -> Vec<Chunk>;
    /// Whether `worker` holds a chunk of this schedule not yet computed.
    fn awaiting_ready(&self, worker: usize) -> bool;
    /// A chunk by id, with the worker it went to.
    fn chunk(&self, id: ChunkId) -> Option<Chunk>;
    /// The time (seconds from the start of the run) of what the schedule
    /// is told or asked next. Schedules that decide by the clock keep it.
    fn at(&mut self, _now: f64) {}
    /// What the machine has seen of `worker`'s pace: measured over planned
    /// time for sending, computing and returning. Schedules that estimate
    /// when things will happen keep it.
    fn pace(&mut self, _worker: usize, _factors: [f64; 3]) {}
    /// When the schedule would decide differently with no event in
    /// between (so the machine should be asked again then), if ever.
    fn wake_at(&self) -> Option<f64> {
        None
    }
}

/// The planned schedule of one round (the report's model):
/// - sends go back to back in send order, every chunk of a worker before the
///   next worker's; a send ends when the worker says it has the whole chunk;
/// - returns go in return order; a worker's turn comes when every chunk of
///   it is computed (one port: and every send of the round is over); its
///   chunks then return back to back.
pub struct Executor {
    ports: Ports,
    send_order: Vec<usize>,
    return_order: Vec<usize>,
    chunks: Vec<Vec<Chunk>>,
    stage: Vec<Vec<Stage>>,
    /// Position in `send_order` and chunk index of the next send.
    send_pos: (usize, usize),
    /// Position in `return_order` and chunk index of the next return.
    return_pos: (usize, usize),
    /// Workers lost (dead, stalled, or misbehaving); their chunks are skipped.
    lost: Vec<bool>,
}

impl Executor {
    /// Workers with no chunk are dropped from both orders.
    pub fn new(ports: Ports, send_order: &[usize], return_order: &[usize], chunks: Vec<Vec<Chunk>>) -> Self {
        let p = chunks.len();
        let has = |w: &usize| chunks.get(*w).is_some_and(|c| !c.is_empty());
        let stage = chunks.iter().map(|c| vec![Stage::Pending; c.len()]).collect();
        Executor {
            ports,
            send_order: send_order.iter().copied().filter(has).collect(),
            return_order: return_order.iter().copied().filter(has).collect(),
            chunks,
            stage,
            send_pos: (0, 0),
            return_pos: (0, 0),
            lost: vec![false; p],
        }
    }

    pub fn chunks(&self) -> &[Vec<Chunk>] {
        &self.chunks
    }

    fn all_sent(&self) -> bool {
        self.send_pos.0 >= self.send_order.len()
    }

    fn is_lost(&self, worker: usize) -> bool {
        self.lost.get(worker).copied().unwrap_or(false)
    }

    fn skip_lost(&mut self) {
        while self.send_pos.0 < self.send_order.len() && self.lost[self.send_order[self.send_pos.0]] {
            self.send_pos = (self.send_pos.0 + 1, 0);
        }
        while self.return_pos.0 < self.return_order.len() && self.lost[self.return_order[self.return_pos.0]] {
            self.return_pos = (self.return_pos.0 + 1, 0);
        }
    }

    fn find(&self, worker: usize, chunk: ChunkId) -> Option<usize> {
        if self.is_lost(worker) {
            return None;
        }
        self.chunks.get(worker)?.iter().position(|c| c.id == chunk)
    }

    /// The position after chunk `c` of the worker at `p` of `order`.
    fn step(&self, order: &[usize], (p, c): (usize, usize)) -> (usize, usize) {
        if c + 1 < self.chunks[order[p]].len() {
            (p, c + 1)
        } else {
            (p + 1, 0)
        }
    }
}

impl Schedule for Executor {
    fn next_send(&mut self) -> Option<Chunk> {
        if self.all_sent() {
            return None;
        }
        let (p, c) = self.send_pos;
        let w = self.send_order[p];
        if self.stage[w][c] != Stage::Pending {
            return None;
        }
        self.stage[w][c] = Stage::Sending;
        Some(self.chunks[w][c])
    }

    fn next_return(&mut self) -> Option<(usize, ChunkId)> {
        // The report's one-port model: every send of the round precedes
        // every return.
        if self.done() || (self.ports == Ports::One && !self.all_sent()) {
            return None;
        }
        let (p, c) = self.return_pos;
        let w = self.return_order[p];
        // A worker's turn starts only when all its chunks are computed;
        // within its turn the chunks follow each other.
        let turn_ok = c > 0 || self.stage[w].iter().all(|s| *s == Stage::Ready);
        if !turn_ok || self.stage[w][c] != Stage::Ready {
            return None;
        }
        self.stage[w][c] = Stage::Returning;
        Some((w, self.chunks[w][c].id))
    }

    fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        let bad = || Unexpected(ev);
        let (worker, chunk) = ev.key();
        let j = self.find(worker, chunk).ok_or_else(bad)?;
        let st = &mut self.stage[worker][j];
        match (ev, *st) {
            (Event::Received { .. }, Stage::Sending) => {
                *st = Stage::Sent;
                self.send_pos = self.step(&self.send_order, self.send_pos);
                self.skip_lost();
            }
            (Event::Ready { .. }, Stage::Sent) => *st = Stage::Ready,
            (Event::Results { .. }, Stage::Returning) => {
                *st = Stage::Returned;
                self.return_pos = self.step(&self.return_order, self.return_pos);
                self.skip_lost();
            }
            _ => return Err(bad()),
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.return_pos.0 >= self.return_order.len()
    }

    fn lose(&mut self, worker: usize) -> Vec<Chunk> {
        if worker >= self.lost.len() || self.lost[worker] {
            return Vec::new();
        }
        self.lost[worker] = true;
        self.skip_lost();
        self.chunks[worker]
            .iter()
            .zip(&self.stage[worker])
            .filter(|(_, s)| **s != Stage::Returned)
            .map(|(c, _)| *c)
            .collect()
    }

    fn awaiting_ready(&self, worker: usize) -> bool {
        !self.is_lost(worker)
            && self
                .stage
                .get(worker)
                .is_some_and(|s| s.iter().any(|s| matches!(s, Stage::Sending | Stage::Sent)))
    }

    fn chunk(&self, id: ChunkId) -> Option<Chunk> {
        self.chunks.iter().flatten().find(|c| c.id == id).copied()
    }
}

#[cfg(test)]
mod tests;
