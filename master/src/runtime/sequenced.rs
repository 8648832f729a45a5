//! The schedule of a multi-round plan: one planned sequence of transfers
//! on the master's port (sends and returns interleaved), taken strictly in
//! order; with two ports, the sends in their order and the returns in
//! theirs. A transfer starts when it is at the head of its lane, the port
//! is free (the machine asks only then), and, for a return, its chunk is
//! computed. Run on the planned costs, this is exactly the earliest
//! execution the planner measured (`dls_lp::rounds::execute`).

use crate::runtime::executor::{Chunk, Event, Schedule, Stage, Unexpected};
use dls_lp::rounds::PortOp;
use dls_lp::Ports;
use dls_protocol::ChunkId;
use std::collections::HashMap;

/// One lane of transfers, taken in order.
struct Lane {
    ops: Vec<PortOp>,
    pos: usize,
}

pub struct Sequenced {
    chunks: Vec<Chunk>,
    stage: Vec<Stage>,
    index: HashMap<ChunkId, usize>,
    lanes: Vec<Lane>,
    lost: Vec<bool>,
}

impl Sequenced {
    /// `chunks` indexed as `ops` refers to them; `p` workers.
    pub fn new(ports: Ports, p: usize, chunks: Vec<Chunk>, ops: Vec<PortOp>) -> Sequenced {
        let lanes = match ports {
            Ports::One => vec![Lane { ops, pos: 0 }],
            Ports::Two => {
                let (sends, returns) = ops.into_iter().partition(|op| matches!(op, PortOp::Send(_)));
                vec![Lane { ops: sends, pos: 0 }, Lane { ops: returns, pos: 0 }]
            }
        };
        Sequenced {
            stage: vec![Stage::Pending; chunks.len()],
            index: chunks.iter().enumerate().map(|(j, c)| (c.id, j)).collect(),
            chunks,
            lanes,
            lost: vec![false; p],
        }
    }

    fn chunk_of(op: PortOp) -> usize {
        match op {
            PortOp::Send(j) | PortOp::Return(j) => j,
        }
    }

    /// Move every lane past transfers of lost workers.
    fn skip_lost(&mut self) {
        for lane in &mut self.lanes {
            while lane
                .ops
                .get(lane.pos)
                .is_some_and(|&op| self.lost[self.chunks[Self::chunk_of(op)].worker])
            {
                lane.pos += 1;
            }
        }
    }

    /// The transfer `op` is over: its lane moves on.
    fn advance(&mut self, op: PortOp) {
        for lane in &mut self.lanes {
            if lane.ops.get(lane.pos) == Some(&op) {
                lane.pos += 1;
            }
        }
        self.skip_lost();
    }

    fn heads(&self) -> impl Iterator<Item = PortOp> + '_ {
        self.lanes.iter().filter_map(|l| l.ops.get(l.pos).copied())
    }
}

impl Schedule for Sequenced {
    fn next_send(&mut self) -> Option<Chunk> {
        let j = self.heads().find_map(|op| match op {
            PortOp::Send(j) if self.stage[j] == Stage::Pending => Some(j),
            _ => None,
        })?;
        self.stage[j] = Stage::Sending;
        Some(self.chunks[j])
    }

    fn next_return(&mut self) -> Option<(usize, ChunkId)> {
        let j = self.heads().find_map(|op| match op {
            PortOp::Return(j) if self.stage[j] == Stage::Ready => Some(j),
            _ => None,
        })?;
        self.stage[j] = Stage::Returning;
        Some((self.chunks[j].worker, self.chunks[j].id))
    }

    fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        let (worker, chunk) = ev.key();
        let j = *self.index.get(&chunk).ok_or(Unexpected(ev))?;
        if self.chunks[j].worker != worker || self.lost.get(worker).copied().unwrap_or(true) {
            return Err(Unexpected(ev));
        }
        match (ev, self.stage[j]) {
            (Event::Received { .. }, Stage::Sending) => {
                self.stage[j] = Stage::Sent;
                self.advance(PortOp::Send(j));
            }
            (Event::Ready { .. }, Stage::Sent) => self.stage[j] = Stage::Ready,
            (Event::Results { .. }, Stage::Returning) => {
                self.stage[j] = Stage::Returned;
                self.advance(PortOp::Return(j));
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
        self.skip_lost();
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
        self.index.get(&id).map(|&j| self.chunks[j])
    }
}
