//! The state machine of one large product whose workers pass panels among
//! themselves ([`dls_lp::product::exchange`]): it tells each worker its
//! part, sends the parts to their roots in the plan's order (each naming
//! the members the root passes it on to), as many at once as the plan's
//! port carries, each to a worker not being sent to, and only once every
//! member of its group is within its window and holds at most two bands
//! of C; it grants the bands' returns in the plan's order once added.
//! Workers pass parts on by themselves: the master sees only its own
//! sends end (`Sent`), the panels whole (`Received`), added (`Ready`) and
//! returned (`Results`). Synchronous: inputs with timestamps in, commands
//! out.
//!
//! A worker lost ends the exchange ([`Status::Failed`], naming it); the
//! bands stored stay stored. Passing the lost worker's part to the
//! survivors is not done yet.

use crate::product::{Loss, Measured, Status, Transfer};
use dls_lp::product::exchange::Part;
use dls_lp::product::{ExchangeTiming, ProductPlan};
use dls_lp::rectangles::Rect;
use dls_protocol::ChunkId;
use std::collections::VecDeque;
use std::ops::Range;

/// What a worker did, as the shell saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The master's send `send` (an index into the plan's transfers) is
    /// written out.
    Sent(usize),
    /// A panel of the piece is whole on the worker.
    Received(ChunkId),
    /// A panel of the piece was added, in this many seconds of its own.
    Ready(ChunkId, f64),
    /// The master has the band's C, of the right size.
    Results(ChunkId),
    /// Its connection ended, it broke the protocol, its C was wrong, or
    /// parts it was to pass on did not reach a peer.
    Lost(String),
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Tell `worker` its part: its rectangle of C, its bands (piece and
    /// columns, left to right), the steps along k, and the workers it may
    /// pass parts on to (its peers, by their index here).
    Setup {
        worker: usize,
        rect: Rect,
        bands: Vec<(ChunkId, Range<usize>)>,
        steps: Vec<Range<usize>>,
        peers: Vec<usize>,
    },
    /// Send the master's transfer `send`: `part` (A's rows or B's
    /// columns) over `ks` of k, for stage `stage`, to `worker`, which
    /// passes it on to `forward` (indices into its peers).
    Share {
        send: usize,
        worker: usize,
        stage: usize,
        part: Part,
        ks: Range<usize>,
        forward: Vec<usize>,
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

pub struct ExchangeMachine {
    timing: ExchangeTiming,
    window: usize,
    /// Sends at once (returns likewise with `duplex`; without, one
    /// transfer at a time in all).
    lanes: usize,
    duplex: bool,
    enrolled: Vec<usize>,
    /// Per piece (the plan's): its worker, band and rectangle.
    pieces: Vec<(usize, usize, Rect)>,
    /// Master sends (indices into the plan's transfers) and returns
    /// (indices into its returns) not yet started, in order.
    sends: VecDeque<usize>,
    returns: VecDeque<usize>,
    /// Sends and returns on the port.
    sending: Vec<usize>,
    returning: Vec<usize>,
    /// Per worker: panels added, and bands returned.
    added: Vec<usize>,
    returned: Vec<Vec<bool>>,
    alive: Vec<bool>,
    stored: usize,
    measured: Measured,
    /// Per plan transfer (master sends) and per return: its measured one.
    transfer_of: Vec<Option<usize>>,
    return_of: Vec<Option<usize>>,
    status: Status,
}

impl ExchangeMachine {
    /// A machine for `plan` (with an exchange) over `workers` workers
    /// (indexed as the pool); `None` if the plan has no exchange.
    pub fn new(workers: usize, plan: &ProductPlan) -> Option<ExchangeMachine> {
        let timing = plan.exchange.clone()?;
        let bands = timing.bands;
        let pieces = (plan.pieces.iter().enumerate())
            .map(|(i, p)| (p.worker, i % bands, p.rect))
            .collect();
        let sends = (0..timing.transfers.len())
            .filter(|&i| timing.transfers[i].from.is_none())
            .collect();
        let returns = (0..timing.returns.len()).collect();
        Some(ExchangeMachine {
            window: plan.window,
            lanes: plan.port.at_once(),
            duplex: plan.request.duplex,
            enrolled: plan.enrolled.clone(),
            pieces,
            sends,
            returns,
            sending: Vec::new(),
            returning: Vec::new(),
            added: vec![0; workers],
            returned: vec![vec![false; bands]; workers],
            alive: vec![true; workers],
            stored: 0,
            measured: Measured::default(),
            transfer_of: vec![None; timing.transfers.len()],
            return_of: vec![None; timing.returns.len()],
            status: Status::Running,
            timing,
        })
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The piece of `worker`'s band `band`.
    fn piece(&self, worker: usize, band: usize) -> Option<usize> {
        (self.pieces.iter()).position(|&(w, b, _)| w == worker && b == band)
    }

    /// The rectangle a piece's C must fill, if its return was granted.
    pub fn expected(&self, worker: usize, piece: ChunkId) -> Option<Rect> {
        let p = piece.0 as usize;
        let (w, band, rect) = *self.pieces.get(p)?;
        let granted = (self.returning.iter()).any(|&r| {
            let x = &self.timing.returns[r];
            (x.worker, x.band) == (w, band)
        });
        (w == worker && granted).then_some(rect)
    }

    /// Every worker's setup, then what may start.
    pub fn start(&mut self, now: f64) -> Vec<Command> {
        let steps = self.timing.steps.clone();
        let mut out = Vec::new();
        for &w in &self.enrolled {
            let mine: Vec<(usize, usize, Rect)> = (self.pieces.iter().enumerate())
                .filter(|(_, p)| p.0 == w)
                .map(|(i, p)| (i, p.1, p.2))
                .collect();
            let Some(&(_, _, first)) = mine.first() else { continue };
            let width = mine.iter().map(|p| p.2.width).sum();
            let bands = (mine.iter())
                .map(|&(i, _, r)| (ChunkId(i as u64), r.col..r.col + r.width))
                .collect();
            out.push(Command::Setup {
                worker: w,
                rect: Rect { width, ..first },
                bands,
                steps: steps.clone(),
                peers: self.enrolled.clone(),
            });
        }
        self.pump(now, &mut out);
        out
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
            m.pieces.get(p).filter(|x| x.0 == worker).map(|x| (p, x.1))
        };
        let stages = self.timing.stages();
        match input {
            Input::Lost(why) => return Err(why),
            Input::Sent(send) => {
                let at = self.sending.iter().position(|&s| s == send);
                let at = at.filter(|_| self.timing.transfers[send].to == worker);
                let at = at.ok_or_else(|| format!("internal error: send {send} not on the port"))?;
                self.sending.remove(at);
                if let Some(t) = self.transfer_of[send] {
                    self.measured.transfers[t].end = now;
                }
            }
            Input::Received(piece) => {
                owned(self, piece)
                    .ok_or_else(|| format!("said a panel of piece {} it does not have is in", piece.0))?;
            }
            Input::Ready(piece, _) => {
                let (_, band) =
                    owned(self, piece).ok_or_else(|| format!("added a panel of piece {} it does not have", piece.0))?;
                let stage = self.added[worker];
                if stage >= stages || stage / self.timing.steps.len() != band {
                    return Err(format!("added a panel of piece {} out of turn", piece.0));
                }
                self.added[worker] += 1;
                if let Some(t) = self.adds_transfer(worker, stage) {
                    self.measured.transfers[t].added = Some(now);
                }
            }
            Input::Results(piece) => {
                let (p, band) =
                    owned(self, piece).ok_or_else(|| format!("returned piece {} it does not have", piece.0))?;
                let at = (self.returning.iter()).position(|&r| {
                    let x = &self.timing.returns[r];
                    (x.worker, x.band) == (worker, band)
                });
                let at = at.ok_or_else(|| format!("returned piece {} whose return was not granted", piece.0))?;
                let r = self.returning.remove(at);
                if let Some(t) = self.return_of[r] {
                    self.measured.transfers[t].end = now;
                }
                self.measured.end = self.measured.end.max(now);
                self.returned[worker][band] = true;
                self.stored += 1;
                out.push(Command::Store {
                    worker,
                    piece,
                    rect: self.pieces[p].2,
                });
            }
        }
        Ok(())
    }

    /// The measured send whose panel `stage` of `worker` is: the master's
    /// last send to it at that stage, if any.
    fn adds_transfer(&self, worker: usize, stage: usize) -> Option<usize> {
        (0..self.timing.transfers.len())
            .rev()
            .find(|&i| {
                let x = &self.timing.transfers[i];
                x.from.is_none() && x.to == worker && x.stage == stage
            })
            .and_then(|i| self.transfer_of[i])
    }

    /// Whether every member of the send's group may take its part now.
    fn members_ready(&self, send: usize) -> bool {
        let x = &self.timing.transfers[send];
        let s = self.timing.steps.len();
        let (band, step) = (x.stage / s, x.stage % s);
        self.timing.groups[x.group].members.iter().all(|&m| {
            let window = x.stage < self.window || self.added[m] > x.stage - self.window;
            let bands = step > 0 || band < 2 || self.returned[m][band - 2];
            window && bands
        })
    }

    fn pump(&mut self, now: f64, out: &mut Vec<Command>) {
        if self.status != Status::Running {
            return;
        }
        if self.stored == self.pieces.len() {
            self.status = Status::Done;
            for &w in &self.enrolled {
                if std::mem::replace(&mut self.alive[w], false) {
                    out.push(Command::Release {
                        worker: w,
                        cancel: false,
                    });
                }
            }
            return;
        }
        // Returns first: a return ready goes before a send starting now.
        while let Some(&r) = self.returns.front() {
            let x = self.timing.returns[r];
            let stage_done = self.added[x.worker] >= (x.band + 1) * self.timing.steps.len();
            let busy = self.returning.len() + if self.duplex { 0 } else { self.sending.len() };
            if !stage_done || busy >= if self.duplex { self.lanes } else { 1 } {
                break;
            }
            self.returns.pop_front();
            self.returning.push(r);
            self.return_of[r] = Some(self.measured.transfers.len());
            let piece = self.piece(x.worker, x.band).unwrap_or(0);
            self.measured.transfers.push(Transfer {
                worker: x.worker,
                piece,
                panel: None,
                values: x.values,
                start: now,
                end: now,
                added: None,
                predicted: Some((x.start, x.end)),
            });
            out.push(Command::Grant {
                worker: x.worker,
                piece: ChunkId(piece as u64),
            });
        }
        while let Some(&i) = self.sends.front() {
            let x = self.timing.transfers[i];
            let busy = self.sending.len() + if self.duplex { 0 } else { self.returning.len() };
            let to_busy = self.sending.iter().any(|&s| self.timing.transfers[s].to == x.to);
            if busy >= self.lanes || to_busy || !self.members_ready(i) {
                break;
            }
            self.sends.pop_front();
            self.sending.push(i);
            out.push(self.begin(i, now));
        }
    }

    fn begin(&mut self, i: usize, now: f64) -> Command {
        let x = self.timing.transfers[i];
        let s = self.timing.steps.len();
        let (band, step) = (x.stage / s, x.stage % s);
        self.transfer_of[i] = Some(self.measured.transfers.len());
        self.measured.transfers.push(Transfer {
            worker: x.to,
            piece: self.piece(x.to, band).unwrap_or(0),
            panel: Some(step),
            values: x.values,
            start: now,
            end: now,
            added: None,
            predicted: Some((x.start, x.end)),
        });
        // The root passes it on to the others, in the plan's order.
        let forward = (self.timing.transfers.iter())
            .filter(|y| (y.stage, y.group, y.from) == (x.stage, x.group, Some(x.to)))
            .filter_map(|y| self.enrolled.iter().position(|&w| w == y.to))
            .collect();
        Command::Share {
            send: i,
            worker: x.to,
            stage: x.stage,
            part: self.timing.part(x.group, x.stage),
            ks: self.timing.steps[step].clone(),
            forward,
        }
    }

    /// Give up: the exchange cannot go on without the worker (its parts
    /// and the parts it was to pass on would have to come from others).
    fn lose(&mut self, worker: usize, reason: String, now: f64, out: &mut Vec<Command>) {
        self.alive[worker] = false;
        let elements = (self.pieces.iter().filter(|p| p.0 == worker))
            .filter(|p| !self.returned[worker][p.1])
            .map(|p| p.2.area())
            .sum();
        self.measured.losses.push(Loss {
            worker,
            at: now,
            reason: reason.clone(),
            elements,
        });
        for &w in &self.enrolled {
            if std::mem::replace(&mut self.alive[w], false) || w == worker {
                out.push(Command::Release {
                    worker: w,
                    cancel: true,
                });
            }
        }
        self.status = Status::Failed(format!(
            "worker {worker} was lost during the exchange of panels ({reason}); the exchange does not go on without it"
        ));
    }

    pub fn finish(self) -> Measured {
        self.measured
    }
}

#[cfg(test)]
mod tests;
