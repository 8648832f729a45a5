//! The state machine of one large product: it follows the plan's port
//! order ([`dls_lp::product::timeline`]) strictly, one lane on one port,
//! a send lane and a return lane when the port is full duplex (the send
//! lane carrying as many sends at once as the plan's port says, each to
//! its own worker, started in order); it lets a
//! worker hold at most the plan's window of panels not yet added and two
//! pieces of C; and when a worker is lost it cuts what it had not returned
//! again over the survivors ([`dls_lp::product::plan_on`]) and appends
//! that plan's order to the lanes. Synchronous: inputs with timestamps in,
//! commands out.

use dls_lp::product::{plan_on, Op, OpTimes, Piece, ProductPlan, ProductRequest, ProductWorker};
use dls_lp::rectangles::Rect;
use dls_protocol::ChunkId;
use std::collections::VecDeque;
use std::ops::Range;

/// What a worker did, as the shell saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The whole panel arrived.
    Received(ChunkId),
    /// A panel was added, in this many seconds of its own.
    Ready(ChunkId, f64),
    /// The master has the piece's C, of the right size.
    Results(ChunkId),
    /// Its connection ended, or it broke the protocol, or its C was wrong.
    Lost(String),
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Send panel `ks` (of k) of `rect`: A's rows and B's columns; the
    /// worker may take `reading` seconds to read it. `then`: the panel the
    /// plan sends this worker next, if any (to be read ahead).
    Panel {
        worker: usize,
        piece: ChunkId,
        rect: Rect,
        ks: Range<usize>,
        last: bool,
        reading: f64,
        then: Option<(Rect, Range<usize>)>,
    },
    Grant {
        worker: usize,
        piece: ChunkId,
    },
    /// Keep the C just received: it is `rect` of the product's C.
    Store {
        worker: usize,
        piece: ChunkId,
        rect: Rect,
    },
    Release {
        worker: usize,
        cancel: bool,
    },
}

/// Where the product stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Running,
    Done,
    Failed(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Live,
    Stored,
    Lost,
}

struct PieceState {
    piece: Piece,
    /// Its rank among its worker's pieces.
    rank: usize,
    sent: usize,
    added: usize,
    stage: Stage,
}

/// One transfer measured, with its prediction when the plan made one
/// (recovery pieces are predicted by their own plan, from the time they
/// were made).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Transfer {
    pub worker: usize,
    pub piece: usize,
    /// The panel, for a send; `None` for a return.
    pub panel: Option<usize>,
    /// Values it carries (of A and B, or of C).
    pub values: u64,
    pub start: f64,
    pub end: f64,
    /// For a send, when the worker said the panel was added.
    pub added: Option<f64>,
    pub predicted: Option<(f64, f64)>,
}

/// A worker given up on, and what was planned again.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Loss {
    pub worker: usize,
    pub at: f64,
    pub reason: String,
    /// Elements of C it had not returned, cut again over the survivors.
    pub elements: usize,
}

/// What the run measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Measured {
    pub transfers: Vec<Transfer>,
    pub losses: Vec<Loss>,
    pub end: f64,
}

pub struct ProductMachine {
    workers: Vec<ProductWorker>,
    request: ProductRequest,
    window: usize,
    pieces: Vec<PieceState>,
    /// Per worker: its pieces in rank order.
    by_worker: Vec<Vec<usize>>,
    /// One lane of op indices (one port), or sends then returns (duplex).
    lanes: Vec<VecDeque<usize>>,
    ops: Vec<(Op, Option<OpTimes>)>,
    /// Op indices on the port, per lane.
    on_port: Vec<Vec<usize>>,
    /// How many ops the send lane carries at once.
    sends: usize,
    /// Panels sent and added, per worker.
    sent: Vec<usize>,
    added: Vec<usize>,
    alive: Vec<bool>,
    measured: Measured,
    /// Per op: its transfer in `measured`.
    transfer_of: Vec<Option<usize>>,
    status: Status,
}

impl ProductMachine {
    /// A machine for `plan`, made for `workers` (indexed as the pool).
    pub fn new(workers: Vec<ProductWorker>, plan: &ProductPlan) -> ProductMachine {
        let p = workers.len();
        let mut m = ProductMachine {
            workers,
            request: plan.request,
            window: plan.window,
            pieces: Vec::new(),
            by_worker: vec![Vec::new(); p],
            lanes: vec![VecDeque::new(); if plan.request.duplex { 2 } else { 1 }],
            ops: Vec::new(),
            on_port: vec![Vec::new(); if plan.request.duplex { 2 } else { 1 }],
            sends: plan.port.at_once(),
            sent: vec![0; p],
            added: vec![0; p],
            alive: vec![true; p],
            measured: Measured::default(),
            transfer_of: Vec::new(),
            status: Status::Running,
        };
        m.append(&plan.pieces, &plan.timing.ops, Some(&plan.timing.times), 0.0);
        m
    }

    /// Add pieces and their port order (op piece indices local to
    /// `pieces`), predicted from `offset` on.
    fn append(&mut self, pieces: &[Piece], ops: &[Op], times: Option<&[OpTimes]>, offset: f64) {
        let base = self.pieces.len();
        for pc in pieces {
            let rank = self.by_worker[pc.worker].len();
            self.by_worker[pc.worker].push(self.pieces.len());
            self.pieces.push(PieceState {
                piece: pc.clone(),
                rank,
                sent: 0,
                added: 0,
                stage: Stage::Live,
            });
        }
        for (i, &op) in ops.iter().enumerate() {
            let op = match op {
                Op::Send { piece, panel } => Op::Send {
                    piece: piece + base,
                    panel,
                },
                Op::Return { piece } => Op::Return { piece: piece + base },
            };
            let predicted = times.map(|t| OpTimes {
                start: t[i].start + offset,
                end: t[i].end + offset,
                added: t[i].added + offset,
            });
            let lane = usize::from(self.lanes.len() == 2 && matches!(op, Op::Return { .. }));
            self.lanes[lane].push_back(self.ops.len());
            self.ops.push((op, predicted));
            self.transfer_of.push(None);
        }
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    pub fn start(&mut self, now: f64) -> Vec<Command> {
        let mut out = Vec::new();
        self.pump(now, &mut out);
        out
    }

    /// The rectangle a piece's C must fill, if its return was granted.
    pub fn expected(&self, worker: usize, piece: ChunkId) -> Option<Rect> {
        let i = self.returning()?;
        let Op::Return { piece: p } = self.ops[i].0 else {
            return None;
        };
        (p == piece.0 as usize && self.pieces[p].piece.worker == worker).then_some(self.pieces[p].piece.rect)
    }

    fn returning(&self) -> Option<usize> {
        let lane = self.lanes.len() - 1;
        self.on_port[lane]
            .iter()
            .copied()
            .find(|&i| matches!(self.ops[i].0, Op::Return { .. }))
    }

    /// The send on the port to `worker`, if any.
    fn sending(&self, worker: usize) -> Option<usize> {
        self.on_port[0]
            .iter()
            .copied()
            .find(|&i| matches!(self.ops[i].0, Op::Send { piece, .. } if self.pieces[piece].piece.worker == worker))
    }

    /// Take op `i` off the port.
    fn off_port(&mut self, i: usize) {
        for lane in &mut self.on_port {
            lane.retain(|&j| j != i);
        }
    }

    pub fn on_event(&mut self, worker: usize, input: Input, now: f64) -> Vec<Command> {
        let mut out = Vec::new();
        if self.status != Status::Running || !self.alive.get(worker).copied().unwrap_or(false) {
            return out;
        }
        if let Err(why) = self.apply(worker, input, now, &mut out) {
            self.lose(worker, why, now, &mut out);
        }
        self.pump(now, &mut out);
        out
    }

    fn apply(&mut self, worker: usize, input: Input, now: f64, out: &mut Vec<Command>) -> Result<(), String> {
        let owned = |m: &Self, piece: ChunkId| {
            let p = piece.0 as usize;
            (p < m.pieces.len() && m.pieces[p].piece.worker == worker && m.pieces[p].stage == Stage::Live).then_some(p)
        };
        match input {
            Input::Lost(why) => return Err(why),
            Input::Received(piece) => {
                let i = self
                    .sending(worker)
                    .filter(|&i| matches!(self.ops[i].0, Op::Send { piece: p, .. } if Some(p) == owned(self, piece)));
                let i = i.ok_or_else(|| format!("said it received piece {} that was not being sent", piece.0))?;
                self.off_port(i);
                self.finish_transfer(i, now);
            }
            Input::Ready(piece, _) => {
                let p =
                    owned(self, piece).ok_or_else(|| format!("added a panel of piece {} it does not have", piece.0))?;
                if self.pieces[p].added >= self.pieces[p].sent {
                    return Err(format!("added more panels of piece {} than it was sent", piece.0));
                }
                let j = self.pieces[p].added;
                self.pieces[p].added += 1;
                self.added[worker] += 1;
                if let Some(t) = self.send_transfer(p, j) {
                    self.measured.transfers[t].added = Some(now);
                }
            }
            Input::Results(piece) => {
                let i = self
                    .returning()
                    .filter(|&i| matches!(self.ops[i].0, Op::Return { piece: p } if Some(p) == owned(self, piece)));
                let i = i.ok_or_else(|| format!("returned piece {} whose return was not granted", piece.0))?;
                self.off_port(i);
                self.finish_transfer(i, now);
                let p = piece.0 as usize;
                self.pieces[p].stage = Stage::Stored;
                out.push(Command::Store {
                    worker,
                    piece,
                    rect: self.pieces[p].piece.rect,
                });
            }
        }
        Ok(())
    }

    fn send_transfer(&self, piece: usize, panel: usize) -> Option<usize> {
        let i = self.ops.iter().position(|(op, _)| *op == Op::Send { piece, panel })?;
        self.transfer_of[i]
    }

    fn finish_transfer(&mut self, op: usize, now: f64) {
        if let Some(t) = self.transfer_of[op] {
            self.measured.transfers[t].end = now;
        }
        self.measured.end = self.measured.end.max(now);
    }

    /// Whether op `i` may start now (its lane's room is checked by the
    /// caller).
    fn can_start(&self, i: usize) -> bool {
        match self.ops[i].0 {
            Op::Send { piece, panel } => {
                let pc = &self.pieces[piece];
                let w = pc.piece.worker;
                let window_ok = self.sent[w] - self.added[w] < self.window;
                let room_ok =
                    panel > 0 || pc.rank < 2 || self.pieces[self.by_worker[w][pc.rank - 2]].stage != Stage::Live;
                window_ok && room_ok && self.sending(w).is_none()
            }
            Op::Return { piece } => {
                let pc = &self.pieces[piece];
                pc.added == pc.piece.panels.len()
            }
        }
    }

    fn live(&self, i: usize) -> bool {
        let piece = match self.ops[i].0 {
            Op::Send { piece, .. } | Op::Return { piece } => piece,
        };
        self.pieces[piece].stage == Stage::Live
    }

    fn pump(&mut self, now: f64, out: &mut Vec<Command>) {
        if self.status != Status::Running {
            return;
        }
        // Lost pieces were cut again into new ones.
        if self.pieces.iter().all(|p| p.stage != Stage::Live) {
            self.status = Status::Done;
            for w in 0..self.alive.len() {
                if std::mem::replace(&mut self.alive[w], false) {
                    out.push(Command::Release {
                        worker: w,
                        cancel: false,
                    });
                }
            }
            return;
        }
        for lane in 0..self.lanes.len() {
            while let Some(&i) = self.lanes[lane].front() {
                if !self.live(i) {
                    self.lanes[lane].pop_front();
                    continue;
                }
                let room = if lane == 0 { self.sends } else { 1 };
                if self.on_port[lane].len() >= room || !self.can_start(i) {
                    break;
                }
                self.lanes[lane].pop_front();
                self.on_port[lane].push(i);
                out.push(self.begin(i, now));
            }
        }
    }

    fn begin(&mut self, i: usize, now: f64) -> Command {
        let (op, predicted) = self.ops[i];
        self.transfer_of[i] = Some(self.measured.transfers.len());
        let (piece, panel) = match op {
            Op::Send { piece, panel } => (piece, Some(panel)),
            Op::Return { piece } => (piece, None),
        };
        let pc = &self.pieces[piece].piece;
        let worker = pc.worker;
        let values = panel.map_or(pc.rect.area() as u64, |j| pc.panel_values(j));
        self.measured.transfers.push(Transfer {
            worker,
            piece,
            panel,
            values,
            start: now,
            end: now,
            added: None,
            predicted: predicted.map(|t| (t.start, t.end)),
        });
        let id = ChunkId(piece as u64);
        match panel {
            Some(j) => {
                let (rect, ks, last) = (pc.rect, pc.panels[j].clone(), j + 1 == pc.panels.len());
                let values = pc.panel_values(j) as f64;
                self.pieces[piece].sent += 1;
                self.sent[worker] += 1;
                Command::Panel {
                    worker,
                    piece: id,
                    rect,
                    ks,
                    last,
                    reading: 4.0 * self.workers[worker].send * values,
                    then: self.next_panel(worker),
                }
            }
            None => Command::Grant { worker, piece: id },
        }
    }

    /// The next panel the send lane holds for `worker`, if any.
    fn next_panel(&self, worker: usize) -> Option<(Rect, Range<usize>)> {
        self.lanes[0].iter().find_map(|&i| match self.ops[i].0 {
            Op::Send { piece, panel } if self.pieces[piece].piece.worker == worker && self.live(i) => {
                let pc = &self.pieces[piece].piece;
                Some((pc.rect, pc.panels[panel].clone()))
            }
            _ => None,
        })
    }

    /// Give up on `worker`: what it had not returned is cut again over
    /// the survivors and appended to the port order.
    fn lose(&mut self, worker: usize, reason: String, now: f64, out: &mut Vec<Command>) {
        self.alive[worker] = false;
        out.push(Command::Release { worker, cancel: true });
        let on_port: Vec<usize> = self.on_port.iter().flatten().copied().collect();
        for i in on_port {
            let piece = match self.ops[i].0 {
                Op::Send { piece, .. } | Op::Return { piece } => piece,
            };
            if self.pieces[piece].piece.worker == worker {
                self.off_port(i);
                self.finish_transfer(i, now);
            }
        }
        let lost: Vec<Rect> = self
            .pieces
            .iter_mut()
            .filter(|p| p.piece.worker == worker && p.stage == Stage::Live)
            .map(|p| {
                p.stage = Stage::Lost;
                p.piece.rect
            })
            .collect();
        let elements = lost.iter().map(|r| r.area()).sum();
        self.measured.losses.push(Loss {
            worker,
            at: now,
            reason,
            elements,
        });
        let survivors: Vec<usize> = (0..self.alive.len()).filter(|&w| self.alive[w]).collect();
        if elements > 0 && survivors.is_empty() {
            self.status = Status::Failed("every worker was lost before the product was done".into());
            return;
        }
        for rect in lost {
            let mut req = self.request;
            (req.n, req.m) = (rect.height, rect.width);
            match plan_on(&self.workers, &req, &survivors) {
                Ok(plan) => {
                    let pieces: Vec<Piece> = plan
                        .pieces
                        .iter()
                        .map(|p| {
                            let mut p = p.clone();
                            p.rect.row += rect.row;
                            p.rect.col += rect.col;
                            p
                        })
                        .collect();
                    self.append(&pieces, &plan.timing.ops, Some(&plan.timing.times), now);
                }
                Err(e) => {
                    self.status = Status::Failed(format!("the survivors cannot take over the lost work: {e}"));
                    return;
                }
            }
        }
    }

    pub fn finish(self) -> Measured {
        self.measured
    }
}

#[cfg(test)]
mod tests;
