//! When each panel and return of one product crosses the port, and when
//! each panel is added: one timing rule ([`time`]) for any port order,
//! which the runtime follows, and a greedy order ([`greedy`]) built with
//! that same rule.
//!
//! The rule: transfers cross in the given order, one at a time on one
//! port; with `duplex`, sends in their order and returns in theirs, a send
//! and a return at once. Behind a shared uplink ([`Port::sends`] above
//! one) up to that many sends cross at once, to distinct workers, each
//! started in order and holding an equal share of the uplink: a send of
//! `v` values to worker i takes `v · max(send_i, sends · uplink)`. A
//! worker adds its panels in the order they
//! arrive, one at a time. It holds at most `window` panels not yet added
//! (panel j of a worker waits for the end of its panel j − window) and at
//! most two pieces of C (the first panel of its piece q waits for the end
//! of the return of its piece q − 2). A piece returns once its last panel
//! is added.

use super::{Piece, ProductWorker};

/// How the master's port carries a product's transfers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Port {
    /// A send and a return may cross.
    pub duplex: bool,
    /// Sends under way at once, each to its own worker (1: one at a time;
    /// more only with `duplex`).
    pub sends: usize,
    /// Seconds per value of A and B through the master's uplink when it is
    /// full (0: no uplink beyond the links).
    pub uplink: f64,
}

impl Port {
    /// One transfer at a time, or one each way with `duplex`.
    pub fn single(duplex: bool) -> Port {
        Port {
            duplex,
            sends: 1,
            uplink: 0.0,
        }
    }

    /// Sends the port carries at once: `sends` on a full-duplex port, one
    /// otherwise.
    pub fn at_once(&self) -> usize {
        if self.duplex {
            self.sends.max(1)
        } else {
            1
        }
    }

    /// Seconds a value of A and B takes to a worker whose link takes
    /// `link`, its send holding one of `sends` equal shares of the uplink.
    pub fn per_value(&self, link: f64) -> f64 {
        link.max(self.sends as f64 * self.uplink)
    }
}

/// A transfer on the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Panel `panel` of piece `piece`.
    Send { piece: usize, panel: usize },
    /// Piece `piece`'s C.
    Return { piece: usize },
}

/// An op's predicted times: its transfer, and for a send, when the panel
/// has been added into the piece's C.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpTimes {
    pub start: f64,
    pub end: f64,
    pub added: f64,
}

/// A port order and its times.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    pub ops: Vec<Op>,
    pub times: Vec<OpTimes>,
    pub makespan: f64,
}

/// What the rule tracks while ops are placed one after another.
struct State<'a> {
    workers: &'a [ProductWorker],
    pieces: &'a [Piece],
    port: Port,
    window: usize,
    /// When each send lane is free (one lane unless the uplink is shared).
    send_free: Vec<f64>,
    /// When the last send started: sends start in their order.
    send_started: f64,
    ret_free: f64,
    /// Per worker: when its last send ends (one send to it at a time).
    link_free: Vec<f64>,
    /// Per worker: when it is done adding what it has.
    busy_until: Vec<f64>,
    /// Per worker: when each panel it received was added, in order.
    added: Vec<Vec<f64>>,
    /// Per piece: its rank among its worker's pieces.
    rank: Vec<usize>,
    /// Per worker: when each of its pieces' returns ended, by rank.
    returned: Vec<Vec<f64>>,
    /// Per piece: when its last panel was added (once sent).
    done: Vec<Option<f64>>,
    panels_sent: Vec<usize>,
}

impl<'a> State<'a> {
    fn new(workers: &'a [ProductWorker], pieces: &'a [Piece], port: Port, window: usize) -> State<'a> {
        let sends = port.at_once();
        let port = Port { sends, ..port };
        let p = workers.len();
        let mut count = vec![0usize; p];
        let rank = pieces
            .iter()
            .map(|pc| {
                count[pc.worker] += 1;
                count[pc.worker] - 1
            })
            .collect();
        State {
            workers,
            pieces,
            port,
            window: window.max(1),
            send_free: vec![0.0; sends],
            send_started: 0.0,
            ret_free: 0.0,
            link_free: vec![0.0; p],
            busy_until: vec![0.0; p],
            added: vec![Vec::new(); p],
            rank,
            returned: vec![Vec::new(); p],
            done: vec![None; pieces.len()],
            panels_sent: vec![0; pieces.len()],
        }
    }

    /// When `op` would start if placed next, and its length; `None` if it
    /// cannot be placed yet (a return of a piece not wholly sent, or a
    /// piece whose worker has not returned its piece q − 2).
    fn start_of(&self, op: Op) -> Option<(f64, f64)> {
        match op {
            Op::Send { piece, panel } => {
                let pc = &self.pieces[piece];
                let w = pc.worker;
                let mut gate = 0.0f64;
                let seen = self.added[w].len();
                if seen >= self.window {
                    gate = self.added[w][seen - self.window];
                }
                if panel == 0 && self.rank[piece] >= 2 {
                    gate = gate.max(*self.returned[w].get(self.rank[piece] - 2)?);
                }
                let len = self.port.per_value(self.workers[w].send) * pc.panel_values(panel) as f64;
                let lane = self.send_free.iter().copied().fold(f64::INFINITY, f64::min);
                Some((lane.max(gate).max(self.link_free[w]).max(self.send_started), len))
            }
            Op::Return { piece } => {
                let pc = &self.pieces[piece];
                let ready = self.done[piece]?;
                let lane = if self.port.duplex {
                    self.ret_free
                } else {
                    self.send_free[0]
                };
                let len = self.workers[pc.worker].ret * pc.rect.area() as f64;
                Some((lane.max(ready), len))
            }
        }
    }

    /// Place `op` at its start; its times.
    fn place(&mut self, op: Op, start: f64, len: f64) -> OpTimes {
        let end = start + len;
        match op {
            Op::Send { piece, panel } => {
                let pc = &self.pieces[piece];
                let w = pc.worker;
                let (h, wd) = (pc.rect.height as f64, pc.rect.width as f64);
                let flops = 2.0 * h * wd * pc.panels[panel].len() as f64;
                let added = end.max(self.busy_until[w]) + self.workers[w].flop * flops;
                self.busy_until[w] = added;
                self.added[w].push(added);
                // The lane free the longest takes it (it is free by `start`).
                let lane = (0..self.send_free.len())
                    .min_by(|&a, &b| self.send_free[a].total_cmp(&self.send_free[b]))
                    .unwrap_or(0);
                self.send_free[lane] = end;
                self.send_started = start;
                self.link_free[w] = end;
                if !self.port.duplex {
                    self.ret_free = end;
                }
                self.panels_sent[piece] += 1;
                if self.panels_sent[piece] == pc.panels.len() {
                    self.done[piece] = Some(added);
                }
                OpTimes { start, end, added }
            }
            Op::Return { piece } => {
                let w = self.pieces[piece].worker;
                let r = self.rank[piece];
                if self.returned[w].len() <= r {
                    self.returned[w].resize(r + 1, f64::INFINITY);
                }
                self.returned[w][r] = end;
                self.ret_free = end;
                if !self.port.duplex {
                    self.send_free[0] = end;
                }
                OpTimes { start, end, added: end }
            }
        }
    }
}

fn finish(ops: Vec<Op>, times: Vec<OpTimes>) -> Timing {
    let makespan = times.iter().map(|t| t.end).fold(0.0, f64::max);
    Timing { ops, times, makespan }
}

/// The times of `ops`, taken in order under the rule; `None` if the order
/// is not one the rule can follow (a return before its piece is wholly
/// sent, a piece before its worker returned the piece two before it, or
/// panels of a worker's pieces out of order).
pub fn time(workers: &[ProductWorker], pieces: &[Piece], ops: &[Op], port: Port, window: usize) -> Option<Timing> {
    let mut st = State::new(workers, pieces, port, window);
    let mut times = Vec::with_capacity(ops.len());
    for &op in ops {
        if let Op::Send { piece, panel } = op {
            if st.panels_sent[piece] != panel {
                return None;
            }
        }
        let (start, len) = st.start_of(op)?;
        times.push(st.place(op, start, len));
    }
    Some(finish(ops.to_vec(), times))
}

/// A port order built one transfer at a time: of the transfers that can go
/// next (each worker's next panel, returns of pieces whose panels are all
/// sent), the one that starts first; on a tie a return, then the send to
/// the worker that runs out of work first. Pieces of a worker go in the
/// order listed.
pub fn greedy(workers: &[ProductWorker], pieces: &[Piece], port: Port, window: usize) -> Timing {
    let p = workers.len();
    let mut queues: Vec<Vec<(usize, usize)>> = vec![Vec::new(); p];
    for (i, pc) in pieces.iter().enumerate() {
        queues[pc.worker].extend((0..pc.panels.len()).map(|j| (i, j)));
    }
    let mut next = vec![0usize; p];
    let mut returns: Vec<usize> = Vec::new();
    let mut st = State::new(workers, pieces, port, window);
    let (mut ops, mut times) = (Vec::new(), Vec::new());
    loop {
        let mut best: Option<(f64, f64, Op, f64)> = None;
        let mut consider = |op: Op, urgency: f64, st: &State| {
            if let Some((start, len)) = st.start_of(op) {
                let better = match best {
                    None => true,
                    Some((s, u, _, _)) => start < s || (start == s && urgency < u),
                };
                if better {
                    best = Some((start, urgency, op, len));
                }
            }
        };
        for &piece in &returns {
            consider(Op::Return { piece }, f64::NEG_INFINITY, &st);
        }
        for w in 0..p {
            if let Some(&(piece, panel)) = queues[w].get(next[w]) {
                consider(Op::Send { piece, panel }, st.busy_until[w], &st);
            }
        }
        let Some((start, _, op, len)) = best else { break };
        times.push(st.place(op, start, len));
        ops.push(op);
        match op {
            Op::Send { piece, .. } => {
                let w = pieces[piece].worker;
                next[w] += 1;
                if st.done[piece].is_some() {
                    returns.push(piece);
                }
            }
            Op::Return { piece } => returns.retain(|&r| r != piece),
        }
    }
    finish(ops, times)
}
