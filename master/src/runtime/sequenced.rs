//! The schedule of a multi-round plan: one planned sequence of transfers
//! on the master's port (sends and returns interleaved), taken strictly in
//! order; with two ports, the sends in their order and the returns in
//! theirs. A transfer starts when it is at the head of its lane, the port
//! is free (the machine asks only then), and, for a return, its chunk is
//! computed. Run on the planned costs, this is exactly the earliest
//! execution the planner measured (`dls_lp::rounds::execute`).
//!
//! A planned chunk larger than the largest message goes as several pieces,
//! sent (and returned) back to back. A planned chunk none of whose pieces
//! has started may be resized ([`Sequenced::resize`]): online correction
//! moves products between the chunks not yet sent.

use crate::runtime::executor::{Chunk, Event, Schedule, Stage, Unexpected};
use dls_lp::rounds::{PortOp, Rounds};
use dls_lp::Ports;
use dls_protocol::ChunkId;
use std::collections::HashMap;

/// One lane of transfers (of planned chunks), taken in order; `piece` is
/// the next piece of the chunk at `pos`.
struct Lane {
    ops: Vec<PortOp>,
    pos: usize,
    piece: usize,
}

/// A planned chunk: its worker, round, and pieces (indices into `chunks`).
#[derive(Debug, Clone)]
pub struct Planned {
    pub worker: usize,
    pub round: usize,
    pub pieces: Vec<usize>,
}

pub struct Sequenced {
    planned: Vec<Planned>,
    /// Every piece ever made (pieces replaced by a resize stay, withdrawn).
    chunks: Vec<Chunk>,
    /// The planned chunk each piece belongs to.
    of: Vec<usize>,
    stage: Vec<Stage>,
    index: HashMap<ChunkId, usize>,
    lanes: Vec<Lane>,
    lost: Vec<bool>,
    max_piece: usize,
    next_id: u64,
    /// The plan's lag: a worker may hold this many chunks plus one.
    lag: usize,
}

impl Sequenced {
    /// The plan's chunks in pieces of at most `max_piece` products, with
    /// ids from `first_id`, taking products `0..` in send order; `p`
    /// workers.
    pub fn new(ports: Ports, p: usize, plan: &Rounds, max_piece: usize, first_id: u64) -> Sequenced {
        let (planned, ops) = (&plan.chunks, &plan.ops);
        let lanes = match ports {
            Ports::One => vec![ops.clone()],
            Ports::Two => {
                let (sends, returns) = ops.iter().partition(|op| matches!(op, PortOp::Send(_)));
                vec![sends, returns]
            }
        };
        let mut s = Sequenced {
            planned: planned
                .iter()
                .map(|c| Planned {
                    worker: c.worker,
                    round: c.round,
                    pieces: Vec::new(),
                })
                .collect(),
            chunks: Vec::new(),
            of: Vec::new(),
            stage: Vec::new(),
            index: HashMap::new(),
            lanes: lanes.into_iter().map(|ops| Lane { ops, pos: 0, piece: 0 }).collect(),
            lost: vec![false; p],
            max_piece: max_piece.max(1),
            next_id: first_id,
            lag: plan.lag,
        };
        let mut next = 0usize;
        for op in ops {
            if let PortOp::Send(j) = *op {
                let len = planned[j].units as usize;
                s.planned[j].pieces = s.cut(j, next, len);
                next += len;
            }
        }
        s.skip();
        s
    }

    /// New pieces of planned chunk `j`: `len` products from `start`.
    fn cut(&mut self, j: usize, start: usize, len: usize) -> Vec<usize> {
        let worker = self.planned[j].worker;
        let mut out = Vec::new();
        let mut at = 0;
        while at < len {
            let n = (len - at).min(self.max_piece);
            out.push(self.chunks.len());
            let id = ChunkId(self.next_id);
            self.next_id += 1;
            self.index.insert(id, self.chunks.len());
            self.chunks.push(Chunk {
                worker,
                id,
                start: start + at,
                len: n,
            });
            self.stage.push(Stage::Pending);
            self.of.push(j);
            at += n;
        }
        out
    }

    /// Every piece made so far (the machine maps them to batch products
    /// through `start`).
    pub fn pieces(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The planned chunks, in plan order.
    pub fn planned(&self) -> &[Planned] {
        &self.planned
    }

    /// One past the largest chunk id used.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// The plan's lag (a worker holds up to lag + 1 chunks at once).
    pub fn lag(&self) -> usize {
        self.lag
    }

    /// The round of the planned chunk a piece belongs to.
    pub fn round_of(&self, id: ChunkId) -> Option<usize> {
        self.index.get(&id).map(|&q| self.planned[self.of[q]].round)
    }

    /// The round of the next planned send, and the planned chunks of that
    /// round and later still ahead in the send order, unsent and not
    /// empty: what online correction may resize. (An emptied chunk stays
    /// empty: its transfers may already have been skipped.)
    pub fn resizable(&self) -> Option<(usize, Vec<usize>)> {
        let lane = &self.lanes[0];
        let sends = lane.ops.get(lane.pos..)?.iter().filter_map(|op| match *op {
            PortOp::Send(j) => Some(j),
            PortOp::Return(_) => None,
        });
        let live = |j: usize| !self.planned[j].pieces.is_empty() && !self.lost[self.planned[j].worker];
        let first = sends.clone().find(|&j| live(j))?;
        let round = self.planned[first].round;
        let slots = sends
            .filter(|&j| live(j) && self.planned[j].round >= round && self.unsent(j))
            .collect();
        Some((round, slots))
    }

    /// Products each of `p` workers has been sent (or is being sent) and
    /// has not computed yet.
    pub fn in_hand(&self, p: usize) -> Vec<u64> {
        let mut out = vec![0u64; p];
        for (q, c) in self.chunks.iter().enumerate() {
            if matches!(self.stage[q], Stage::Sending | Stage::Sent) && c.worker < p {
                out[c.worker] += c.len as u64;
            }
        }
        out
    }

    /// Products planned for chunk `j` now.
    pub fn units(&self, j: usize) -> usize {
        self.planned[j].pieces.iter().map(|&q| self.chunks[q].len).sum()
    }

    /// Whether no piece of planned chunk `j` has been sent, nor started.
    pub fn unsent(&self, j: usize) -> bool {
        !self.lost[self.planned[j].worker] && self.planned[j].pieces.iter().all(|&q| self.stage[q] == Stage::Pending)
    }

    /// Give planned chunk `j` (unsent) `len` products from `start` instead
    /// (0 drops it), in new pieces with ids from `first_id`: returns the
    /// withdrawn pieces and the new ones (the machine maps them to
    /// products).
    pub fn resize(&mut self, j: usize, start: usize, len: usize, first_id: u64) -> (Vec<Chunk>, Vec<Chunk>) {
        debug_assert!(self.unsent(j));
        self.next_id = self.next_id.max(first_id);
        let old = std::mem::take(&mut self.planned[j].pieces);
        let withdrawn = old
            .iter()
            .map(|&q| {
                self.stage[q] = Stage::Returned;
                self.index.remove(&self.chunks[q].id);
                self.chunks[q]
            })
            .collect();
        let pieces = self.cut(j, start, len);
        let made = pieces.iter().map(|&q| self.chunks[q]).collect();
        self.planned[j].pieces = pieces;
        self.skip();
        (withdrawn, made)
    }

    fn chunk_of(op: PortOp) -> usize {
        match op {
            PortOp::Send(j) | PortOp::Return(j) => j,
        }
    }

    /// Move every lane past planned chunks with no pieces or of lost
    /// workers.
    fn skip(&mut self) {
        for lane in &mut self.lanes {
            while let Some(&op) = lane.ops.get(lane.pos) {
                let c = &self.planned[Self::chunk_of(op)];
                if !(self.lost[c.worker] || c.pieces.is_empty()) {
                    break;
                }
                lane.pos += 1;
                lane.piece = 0;
            }
        }
    }

    /// Piece `q` went through as part of `op`: its lane moves on.
    fn advance(&mut self, op: PortOp, q: usize) {
        for lane in &mut self.lanes {
            if lane.ops.get(lane.pos) == Some(&op)
                && self.planned[Self::chunk_of(op)].pieces.get(lane.piece) == Some(&q)
            {
                lane.piece += 1;
                if lane.piece == self.planned[Self::chunk_of(op)].pieces.len() {
                    lane.pos += 1;
                    lane.piece = 0;
                }
            }
        }
        self.skip();
    }

    /// The head of each lane: the transfer, and the piece it concerns.
    fn heads(&self) -> impl Iterator<Item = (PortOp, usize)> + '_ {
        self.lanes.iter().filter_map(|l| {
            let op = *l.ops.get(l.pos)?;
            Some((op, *self.planned[Self::chunk_of(op)].pieces.get(l.piece)?))
        })
    }
}

impl Schedule for Sequenced {
    fn next_send(&mut self) -> Option<Chunk> {
        let q = self.heads().find_map(|(op, q)| match op {
            PortOp::Send(_) if self.stage[q] == Stage::Pending => Some(q),
            _ => None,
        })?;
        self.stage[q] = Stage::Sending;
        Some(self.chunks[q])
    }

    fn next_return(&mut self) -> Option<(usize, ChunkId)> {
        let q = self.heads().find_map(|(op, q)| match op {
            PortOp::Return(_) if self.stage[q] == Stage::Ready => Some(q),
            _ => None,
        })?;
        self.stage[q] = Stage::Returning;
        Some((self.chunks[q].worker, self.chunks[q].id))
    }

    fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        let (worker, chunk) = ev.key();
        let q = *self.index.get(&chunk).ok_or(Unexpected(ev))?;
        if self.chunks[q].worker != worker || self.lost.get(worker).copied().unwrap_or(true) {
            return Err(Unexpected(ev));
        }
        let j = self.of[q];
        match (ev, self.stage[q]) {
            (Event::Received { .. }, Stage::Sending) => {
                self.stage[q] = Stage::Sent;
                self.advance(PortOp::Send(j), q);
            }
            (Event::Ready { .. }, Stage::Sent) => self.stage[q] = Stage::Ready,
            (Event::Results { .. }, Stage::Returning) => {
                self.stage[q] = Stage::Returned;
                self.advance(PortOp::Return(j), q);
            }
            _ => return Err(Unexpected(ev)),
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.lanes.iter().all(|l| l.pos >= l.ops.len())
    }

    fn lose(&mut self, worker: usize) -> Vec<Chunk> {
        if worker >= self.lost.len() || self.lost[worker] {
            return Vec::new();
        }
        self.lost[worker] = true;
        self.skip();
        self.chunks
            .iter()
            .zip(&self.stage)
            .filter(|(c, s)| c.worker == worker && **s != Stage::Returned)
            .map(|(c, _)| *c)
            .collect()
    }

    fn awaiting_ready(&self, worker: usize) -> bool {
        !self.lost.get(worker).copied().unwrap_or(true)
            && self
                .chunks
                .iter()
                .zip(&self.stage)
                .any(|(c, s)| c.worker == worker && matches!(s, Stage::Sending | Stage::Sent))
    }

    fn chunk(&self, id: ChunkId) -> Option<Chunk> {
        self.index.get(&id).map(|&q| self.chunks[q])
    }
}
