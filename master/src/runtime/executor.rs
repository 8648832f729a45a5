//! The one-port executor: a synchronous state machine that decides, from
//! events, when to send the next chunk and when to grant a worker the port
//! for its results. It knows nothing of sockets or clocks; the runtime feeds
//! it events and carries out its commands, and tests drive it with a
//! simulated platform.
//!
//! Rules (the report's model):
//! - sends go back to back in send order, every chunk of a worker before the
//!   next worker's; a send ends when the worker says it has the whole chunk;
//! - returns go in return order; a worker is granted the port when it is its
//!   turn, every chunk of it is computed, and the port is free (one port:
//!   also every send is over); its chunks then return back to back;
//! - one transfer at a time on the master's port (two ports: one send and
//!   one return at a time).

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

/// What the runtime must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Send this chunk (A and B of its products).
    Assign(Chunk),
    /// Let this worker return this chunk's results.
    Grant { worker: usize, chunk: ChunkId },
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
enum Stage {
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
    sending: bool,
    returning: bool,
    /// Workers lost (dead, stalled, or misbehaving); their chunks are skipped.
    lost: Vec<bool>,
}

impl Executor {
    /// Workers with no chunk are dropped from both orders.
    pub fn new(ports: Ports, send_order: &[usize], return_order: &[usize], chunks: Vec<Vec<Chunk>>) -> Self {
        let p = chunks.len();
        let has = |w: &usize| !chunks[*w].is_empty();
        let stage = chunks.iter().map(|c| vec![Stage::Pending; c.len()]).collect();
        Executor {
            ports,
            send_order: send_order.iter().copied().filter(has).collect(),
            return_order: return_order.iter().copied().filter(has).collect(),
            chunks,
            stage,
            send_pos: (0, 0),
            return_pos: (0, 0),
            sending: false,
            returning: false,
            lost: vec![false; p],
        }
    }

    pub fn chunks(&self) -> &[Vec<Chunk>] {
        &self.chunks
    }

    /// The first commands.
    pub fn start(&mut self) -> Vec<Command> {
        self.advance()
    }

    pub fn done(&self) -> bool {
        self.return_pos.0 >= self.return_order.len()
    }

    fn all_sent(&self) -> bool {
        self.send_pos.0 >= self.send_order.len()
    }

    /// Whether `worker` holds a chunk it has received but not yet computed.
    pub fn awaiting_ready(&self, worker: usize) -> bool {
        self.stage
            .get(worker)
            .is_some_and(|s| s.iter().any(|s| matches!(s, Stage::Sending | Stage::Sent)))
    }

    /// Whether `worker` has been lost.
    pub fn is_lost(&self, worker: usize) -> bool {
        self.lost.get(worker).copied().unwrap_or(false)
    }

    /// Give up on `worker`: every chunk of it not yet returned is handed
    /// back (to be redone elsewhere), the port is freed if it held it, and
    /// the schedule goes on without it. Returns the lost chunks and the
    /// commands that can start now.
    pub fn lose(&mut self, worker: usize) -> (Vec<Chunk>, Vec<Command>) {
        if worker >= self.lost.len() || self.lost[worker] {
            return (Vec::new(), Vec::new());
        }
        self.lost[worker] = true;
        let lost: Vec<Chunk> = self.chunks[worker]
            .iter()
            .zip(&self.stage[worker])
            .filter(|(_, s)| **s != Stage::Returned)
            .map(|(c, _)| *c)
            .collect();
        if self.sending && self.send_order.get(self.send_pos.0) == Some(&worker) {
            self.sending = false;
        }
        if self.returning && self.return_order.get(self.return_pos.0) == Some(&worker) {
            self.returning = false;
        }
        self.skip_lost();
        (lost, self.advance())
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

    pub fn on_event(&mut self, ev: Event) -> Result<Vec<Command>, Unexpected> {
        let bad = || Unexpected(ev);
        let (worker, chunk) = match ev {
            Event::Received { worker, chunk } | Event::Ready { worker, chunk } | Event::Results { worker, chunk } => {
                (worker, chunk)
            }
        };
        let j = self.find(worker, chunk).ok_or_else(bad)?;
        let st = &mut self.stage[worker][j];
        match ev {
            Event::Received { .. } => {
                if *st != Stage::Sending {
                    return Err(bad());
                }
                *st = Stage::Sent;
                self.sending = false;
                let (p, c) = self.send_pos;
                self.send_pos = if c + 1 < self.chunks[self.send_order[p]].len() {
                    (p, c + 1)
                } else {
                    (p + 1, 0)
                };
                self.skip_lost();
            }
            Event::Ready { .. } => {
                if *st != Stage::Sent {
                    return Err(bad());
                }
                *st = Stage::Ready;
            }
            Event::Results { .. } => {
                if *st != Stage::Returning {
                    return Err(bad());
                }
                *st = Stage::Returned;
                self.returning = false;
                let (p, c) = self.return_pos;
                self.return_pos = if c + 1 < self.chunks[self.return_order[p]].len() {
                    (p, c + 1)
                } else {
                    (p + 1, 0)
                };
                self.skip_lost();
            }
        }
        Ok(self.advance())
    }

    fn port_free_for_send(&self) -> bool {
        match self.ports {
            Ports::One => !self.sending && !self.returning,
            Ports::Two => !self.sending,
        }
    }

    fn port_free_for_return(&self) -> bool {
        match self.ports {
            // The report's model: every send precedes every return.
            Ports::One => !self.sending && !self.returning && self.all_sent(),
            Ports::Two => !self.returning,
        }
    }

    fn advance(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        if !self.all_sent() && self.port_free_for_send() {
            let (p, c) = self.send_pos;
            let w = self.send_order[p];
            self.stage[w][c] = Stage::Sending;
            self.sending = true;
            out.push(Command::Assign(self.chunks[w][c]));
        }
        if !self.done() && self.port_free_for_return() {
            let (p, c) = self.return_pos;
            let w = self.return_order[p];
            // A worker's turn starts only when all its chunks are computed;
            // within its turn the chunks follow each other.
            let turn_ok = c > 0 || self.stage[w].iter().all(|s| *s == Stage::Ready);
            if turn_ok && self.stage[w][c] == Stage::Ready {
                self.stage[w][c] = Stage::Returning;
                self.returning = true;
                out.push(Command::Grant {
                    worker: w,
                    chunk: self.chunks[w][c].id,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;

/// What the runtime needs of a schedule: the planned one-port [`Executor`],
/// or the demand-driven [`SelfScheduler`] baseline.
pub trait Schedule: Send {
    fn start(&mut self) -> Vec<Command>;
    fn on_event(&mut self, ev: Event) -> Result<Vec<Command>, Unexpected>;
    fn done(&self) -> bool;
    fn lose(&mut self, worker: usize) -> (Vec<Chunk>, Vec<Command>);
    fn is_lost(&self, worker: usize) -> bool;
    fn awaiting_ready(&self, worker: usize) -> bool;
}

impl Schedule for Executor {
    fn start(&mut self) -> Vec<Command> {
        Executor::start(self)
    }
    fn on_event(&mut self, ev: Event) -> Result<Vec<Command>, Unexpected> {
        Executor::on_event(self, ev)
    }
    fn done(&self) -> bool {
        Executor::done(self)
    }
    fn lose(&mut self, worker: usize) -> (Vec<Chunk>, Vec<Command>) {
        Executor::lose(self, worker)
    }
    fn is_lost(&self, worker: usize) -> bool {
        Executor::is_lost(self, worker)
    }
    fn awaiting_ready(&self, worker: usize) -> bool {
        Executor::awaiting_ready(self, worker)
    }
}

/// Demand-driven self-scheduling, the baseline general task runtimes use:
/// fixed-size chunks handed out one at a time; a worker gets its next chunk
/// once its previous results are in. Still one transfer at a time on the
/// master's port (a pending send goes before a pending return, to keep
/// workers busy). Chunks are listed up front; the worker of each is chosen
/// when it is sent.
pub struct SelfScheduler {
    ports: Ports,
    chunks: Vec<Chunk>,
    stage: Vec<Stage>,
    next: usize,
    want: std::collections::VecDeque<usize>,
    ready: std::collections::VecDeque<usize>,
    sending: Option<usize>,
    returning: Option<usize>,
    lost: Vec<bool>,
    settled: usize,
}

impl SelfScheduler {
    /// `m` products in chunks of `size`, over `workers` (indices < `p`).
    pub fn new(ports: Ports, p: usize, workers: &[usize], m: usize, size: usize, first_id: u64) -> Self {
        let size = size.max(1);
        let chunks: Vec<Chunk> = (0..m.div_ceil(size))
            .map(|k| Chunk {
                worker: usize::MAX,
                id: ChunkId(first_id + k as u64),
                start: k * size,
                len: size.min(m - k * size),
            })
            .collect();
        SelfScheduler {
            ports,
            stage: vec![Stage::Pending; chunks.len()],
            chunks,
            next: 0,
            want: workers.iter().copied().collect(),
            ready: Default::default(),
            sending: None,
            returning: None,
            lost: vec![false; p],
            settled: 0,
        }
    }

    /// Every chunk, with the worker it went to (`usize::MAX` if none yet).
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn find(&self, worker: usize, chunk: ChunkId) -> Option<usize> {
        let k = self.chunks.iter().position(|c| c.id == chunk)?;
        (self.chunks[k].worker == worker && !self.lost[worker]).then_some(k)
    }

    fn advance(&mut self) -> Vec<Command> {
        let mut out = Vec::new();
        let free_send = match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.sending.is_none(),
        };
        if free_send && self.next < self.chunks.len() {
            while let Some(&w) = self.want.front() {
                if !self.lost[w] {
                    break;
                }
                self.want.pop_front();
            }
            if let Some(w) = self.want.pop_front() {
                let k = self.next;
                self.next += 1;
                self.chunks[k].worker = w;
                self.stage[k] = Stage::Sending;
                self.sending = Some(k);
                out.push(Command::Assign(self.chunks[k]));
            }
        }
        let free_return = match self.ports {
            Ports::One => self.sending.is_none() && self.returning.is_none(),
            Ports::Two => self.returning.is_none(),
        };
        if free_return {
            while let Some(&k) = self.ready.front() {
                if !self.lost[self.chunks[k].worker] {
                    break;
                }
                self.ready.pop_front();
            }
            if let Some(k) = self.ready.pop_front() {
                self.stage[k] = Stage::Returning;
                self.returning = Some(k);
                out.push(Command::Grant {
                    worker: self.chunks[k].worker,
                    chunk: self.chunks[k].id,
                });
            }
        }
        out
    }
}

impl Schedule for SelfScheduler {
    fn start(&mut self) -> Vec<Command> {
        self.advance()
    }

    fn on_event(&mut self, ev: Event) -> Result<Vec<Command>, Unexpected> {
        let (worker, chunk) = match ev {
            Event::Received { worker, chunk } | Event::Ready { worker, chunk } | Event::Results { worker, chunk } => {
                (worker, chunk)
            }
        };
        let k = self.find(worker, chunk).ok_or(Unexpected(ev))?;
        match (ev, self.stage[k]) {
            (Event::Received { .. }, Stage::Sending) => {
                self.stage[k] = Stage::Sent;
                self.sending = None;
            }
            (Event::Ready { .. }, Stage::Sent) => {
                self.stage[k] = Stage::Ready;
                self.ready.push_back(k);
            }
            (Event::Results { .. }, Stage::Returning) => {
                self.stage[k] = Stage::Returned;
                self.returning = None;
                self.settled += 1;
                self.want.push_back(worker);
            }
            _ => return Err(Unexpected(ev)),
        }
        Ok(self.advance())
    }

    fn done(&self) -> bool {
        // Every chunk returned, or handed back as lost (with nobody left
        // to take the rest, those count as handed back too).
        self.settled == self.chunks.len()
    }

    fn lose(&mut self, worker: usize) -> (Vec<Chunk>, Vec<Command>) {
        if worker >= self.lost.len() || self.lost[worker] {
            return (Vec::new(), Vec::new());
        }
        self.lost[worker] = true;
        let mut gone = Vec::new();
        for k in 0..self.chunks.len() {
            if self.chunks[k].worker == worker && self.stage[k] != Stage::Returned {
                gone.push(self.chunks[k]);
                self.stage[k] = Stage::Returned;
                self.settled += 1;
            }
        }
        if self.sending.is_some_and(|k| self.chunks[k].worker == worker) {
            self.sending = None;
        }
        if self.returning.is_some_and(|k| self.chunks[k].worker == worker) {
            self.returning = None;
        }
        // With no worker left to ask, the chunks not yet handed out are lost too.
        if self.lost.iter().all(|&l| l) || self.want.iter().all(|&w| self.lost[w]) && self.no_worker_busy() {
            for k in self.next..self.chunks.len() {
                gone.push(self.chunks[k]);
                self.stage[k] = Stage::Returned;
                self.settled += 1;
            }
            self.next = self.chunks.len();
        }
        (gone, self.advance())
    }

    fn is_lost(&self, worker: usize) -> bool {
        self.lost.get(worker).copied().unwrap_or(false)
    }

    fn awaiting_ready(&self, worker: usize) -> bool {
        self.chunks
            .iter()
            .zip(&self.stage)
            .any(|(c, s)| c.worker == worker && matches!(s, Stage::Sending | Stage::Sent))
    }
}

impl SelfScheduler {
    /// Whether any surviving worker holds a chunk not yet returned (it will
    /// ask for more when it is done).
    fn no_worker_busy(&self) -> bool {
        !self
            .chunks
            .iter()
            .zip(&self.stage)
            .any(|(c, s)| c.worker != usize::MAX && !self.lost[c.worker] && *s != Stage::Returned)
    }
}
