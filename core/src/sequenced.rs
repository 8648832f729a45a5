//! The schedule of every planned round: one planned sequence of transfers on
//! the master's port (sends and returns interleaved), taken in order; with two
//! ports, the sends in their order and the returns in theirs. The head of a
//! lane goes when the port is free (the machine asks only then) and, for a
//! return, its chunk is computed. A one-round plan of the report's orders is
//! taken strictly so. In a multi-round plan (`Sequence::fill_gaps`), while the
//! head is a return still computing, the port does not idle if it need not:
//! the first later transfer that is its worker's next one in the lane and can
//! go now is taken if it ends before the awaited chunk is expected to be
//! computed (the gap the plan itself fills, `dls_lp::sequence::execute`), or,
//! once that expected instant has passed by some time, if it takes no longer
//! than that time (the awaited worker is late: others are not held up by it,
//! and it waits at most as long again). Each worker's transfers keep their
//! planned order, so none holds more than the plan lets it. Run on the planned
//! costs, this is exactly the earliest execution the planner measured.
//!
//! A planned chunk larger than the largest message goes as several pieces,
//! in order. A planned chunk none of whose pieces has started may be
//! resized ([`Sequenced::resize`]): online correction moves products
//! between the chunks not yet sent.

use crate::chunk::{Chunk, Event, Stage, Unexpected};
use crate::port::Port;
use dls_lp::sequence::{PortOp, Sequence};
use dls_lp::tol::GAP_FIT;
use dls_lp::{Ports, Worker};
use dls_protocol::ChunkId;
use std::collections::{HashMap, VecDeque};

/// One lane of transfers (of planned chunks): `head` is the first not
/// made; `mine[w]` the positions of worker `w`'s transfers, `made[w]` how
/// many of them are made.
struct Lane {
    ops: Vec<PortOp>,
    head: usize,
    mine: Vec<Vec<usize>>,
    made: Vec<usize>,
}

/// A planned chunk: its worker, round, and pieces (indices into `chunks`).
#[derive(Debug, Clone)]
pub struct Planned {
    pub worker: usize,
    pub round: usize,
    pub pieces: Vec<usize>,
}

/// When things happened, for the estimate of when a chunk will be
/// computed.
struct Clock {
    now: f64,
    /// Each piece's send start.
    sent_at: Vec<f64>,
    /// Each piece's arrival at its worker.
    received_at: Vec<f64>,
    /// Pieces each worker has and has not computed, in arrival order.
    queue: Vec<VecDeque<usize>>,
    /// When each worker last said a piece was computed.
    last_ready: Vec<f64>,
    /// Each worker's pace: measured over planned time to send, compute
    /// and return (1 until the machine has seen enough).
    pace: Vec<[f64; 3]>,
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
    /// Whether later transfers may fill the port's idle gaps (multi-round
    /// plans), or the lanes are taken strictly in order (the report's
    /// one-round orders).
    fill: bool,
    /// For each planned chunk, its worker's last chunk returned before it
    /// is sent in the plan: with two lanes, the send waits until that
    /// return is over (the worker's memory holds what the plan lets it).
    returns_before: Vec<Option<usize>>,
    /// The port model and the planned costs of each worker.
    ports: Ports,
    costs: Vec<Worker>,
    clock: Clock,
}

impl Sequenced {
    /// The plan's chunks in pieces of at most `max_piece` products, with
    /// ids from `first_id`, taking products `0..` in send order; workers
    /// with the planned `costs`.
    pub fn new(ports: Ports, costs: &[Worker], plan: &Sequence, max_piece: usize, first_id: u64) -> Sequenced {
        let p = costs.len();
        let (planned, ops) = (&plan.chunks, &plan.ops);
        let lanes = if ports.one_lane() {
            vec![ops.clone()]
        } else {
            let (sends, returns) = ops.iter().partition(|op| matches!(op, PortOp::Send(_)));
            vec![sends, returns]
        };
        let lanes = lanes
            .into_iter()
            .map(|ops: Vec<PortOp>| {
                let mut mine = vec![Vec::new(); p];
                for (i, &op) in ops.iter().enumerate() {
                    mine[planned[op.chunk()].worker].push(i);
                }
                Lane {
                    ops,
                    head: 0,
                    mine,
                    made: vec![0; p],
                }
            })
            .collect();
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
            lanes,
            lost: vec![false; p],
            max_piece: max_piece.max(1),
            next_id: first_id,
            lag: plan.lag,
            fill: plan.fill_gaps,
            returns_before: dls_lp::sequence::returns_before(planned, ops),
            ports,
            costs: costs.to_vec(),
            clock: Clock {
                now: 0.0,
                sent_at: Vec::new(),
                received_at: Vec::new(),
                queue: vec![VecDeque::new(); p],
                last_ready: vec![0.0; p],
                pace: vec![[1.0; 3]; p],
            },
        };
        let mut next = 0usize;
        for op in ops {
            if let PortOp::Send(j) = *op {
                let len = planned[j].units as usize;
                s.planned[j].pieces = s.cut(j, next, len);
                next += len;
            }
        }
        s.settle();
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
            self.clock.sent_at.push(f64::NAN);
            self.clock.received_at.push(f64::NAN);
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

    /// Whether this is a multi-round plan's sequence (its gaps filled).
    pub fn fills_gaps(&self) -> bool {
        self.fill
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
        let sends = lane.ops.get(lane.head..)?.iter().filter_map(|op| match *op {
            PortOp::Send(j) => Some(j),
            PortOp::Return(_) => None,
        });
        let live = |j: usize| self.unsent(j) && !self.planned[j].pieces.is_empty();
        let first = sends.clone().find(|&j| live(j))?;
        let round = self.planned[first].round;
        let slots = sends.filter(|&j| live(j) && self.planned[j].round >= round).collect();
        Some((round, slots))
    }

    /// Products each of `p` workers has been sent (or is being sent) and
    /// has not computed yet.
    pub fn in_hand(&self, p: usize) -> Vec<u64> {
        let mut out = vec![0u64; p];
        for (q, c) in self.chunks.iter().enumerate() {
            if matches!(self.stage[q], Stage::Sending | Stage::Sent | Stage::Granted) && c.worker < p {
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
        self.settle_worker(self.planned[j].worker);
        (withdrawn, made)
    }

    /// Whether `op` is made: every piece through (sent, or returned), or
    /// nothing to move (an emptied chunk, a lost worker).
    fn made(&self, op: PortOp) -> bool {
        let c = &self.planned[op.chunk()];
        self.lost[c.worker]
            || match op {
                PortOp::Send(_) => c
                    .pieces
                    .iter()
                    .all(|&q| !matches!(self.stage[q], Stage::Pending | Stage::Sending)),
                PortOp::Return(_) => c.pieces.iter().all(|&q| self.stage[q] == Stage::Returned),
            }
    }

    /// Whether a piece of `op` is crossing the port now.
    fn crossing(&self, op: PortOp) -> bool {
        let send = matches!(op, PortOp::Send(_));
        self.planned[op.chunk()].pieces.iter().any(|&q| match self.stage[q] {
            Stage::Sending => send,
            Stage::Returning | Stage::Granted => !send,
            _ => false,
        })
    }

    /// Move every lane's head, and every worker's place in it, past the
    /// transfers made.
    fn settle(&mut self) {
        for w in 0..self.lost.len() {
            self.settle_worker(w);
        }
    }

    /// As [`Sequenced::settle`], after a change to `w`'s pieces alone
    /// (whether an op is made depends only on its own worker's pieces).
    fn settle_worker(&mut self, w: usize) {
        for l in 0..self.lanes.len() {
            let mut head = self.lanes[l].head;
            while let Some(&op) = self.lanes[l].ops.get(head) {
                if !self.made(op) {
                    break;
                }
                head += 1;
            }
            self.lanes[l].head = head;
            let mut k = self.lanes[l].made[w];
            while let Some(&pos) = self.lanes[l].mine[w].get(k) {
                if !self.made(self.lanes[l].ops[pos]) {
                    break;
                }
                k += 1;
            }
            self.lanes[l].made[w] = k;
        }
    }

    /// The piece of `op` that can cross the port now, if any: a send's
    /// next piece not sent, once its worker's returns planned before it
    /// are over; a return's next piece not returned, once it is computed.
    fn takeable(&self, op: PortOp) -> Option<usize> {
        let pieces = &self.planned[op.chunk()].pieces;
        match op {
            PortOp::Send(j) => {
                let returned = |r: usize| self.planned[r].pieces.iter().all(|&q| self.stage[q] == Stage::Returned);
                if self.returns_before[j].is_some_and(|r| !returned(r)) {
                    return None;
                }
                pieces.iter().copied().find(|&q| self.stage[q] == Stage::Pending)
            }
            PortOp::Return(_) => pieces
                .iter()
                .copied()
                .find(|&q| self.stage[q] != Stage::Returned)
                .filter(|&q| self.stage[q] == Stage::Ready),
        }
    }

    /// How long piece `q` should hold the port to be sent (or returned):
    /// the planned cost at the pace seen.
    fn duration(&self, send: bool, q: usize) -> f64 {
        let w = self.chunks[q].worker;
        let (c, n, pace) = (&self.costs[w], self.chunks[q].len as f64, self.clock.pace[w]);
        self.ports.transfer(c, send, n).secs * if send { pace[0] } else { pace[2] }
    }

    /// When piece `q` should be computed at the planned costs and the pace
    /// seen, after the ones before; not yet crossing: infinite, or if
    /// `earliest` its send taken now (as the planner reads an awaited chunk).
    fn expected_ready(&self, q: usize, earliest: bool) -> f64 {
        let w = self.chunks[q].worker;
        let (c, pace) = (&self.costs[w], self.clock.pace[w][1]);
        let compute = |x: usize| (c.latency.compute + c.w * self.chunks[x].len as f64) * pace;
        let mut free = self.clock.last_ready[w];
        for &x in &self.clock.queue[w] {
            free = free.max(self.clock.received_at[x]) + compute(x);
            if x == q {
                return free;
            }
        }
        match self.stage[q] {
            Stage::Sending => free.max(self.clock.sent_at[q] + self.duration(true, q)) + compute(q),
            Stage::Pending if earliest => free.max(self.clock.now + self.duration(true, q)) + compute(q),
            _ => f64::INFINITY,
        }
    }

    /// Whether `port` lets piece `q` cross now (a send if `send`).
    fn admitted(&self, port: &Port, send: bool, q: usize) -> bool {
        port.admits(self.chunks[q].worker, send, self.chunks[q].len)
    }

    /// What lane `l` would take now through `port`, and what it awaits
    /// when that is nothing: the transfer and piece, or the awaited
    /// return's expected instant and the shortest transfer that could fill
    /// the wait. A head the port has no room for is waited for.
    fn choose(&self, l: usize, port: &Port) -> Result<(PortOp, usize), Option<(f64, f64)>> {
        let lane = &self.lanes[l];
        // The head: the first transfer neither made nor crossing now (a
        // shared uplink carries several at once; a chunk in pieces is
        // crossing while one of them is).
        let mut at = lane.head;
        while lane.ops.get(at).is_some_and(|&op| self.made(op) || self.crossing(op)) {
            at += 1;
        }
        let Some(&head) = lane.ops.get(at) else {
            return Err(None);
        };
        if let Some(q) = self.takeable(head) {
            return if self.admitted(port, matches!(head, PortOp::Send(_)), q) {
                Ok((head, q))
            } else {
                Err(None)
            };
        }
        let PortOp::Return(h) = head else {
            return Err(None);
        };
        if !self.fill {
            return Err(None);
        }
        let pieces = &self.planned[h].pieces;
        let Some(&hq) = pieces.iter().find(|&&q| self.stage[q] != Stage::Returned) else {
            return Err(None);
        };
        if matches!(self.stage[hq], Stage::Returning | Stage::Granted) {
            return Err(None);
        }
        let awaited = self.expected_ready(hq, true);
        let hshare = port.share(self.chunks[hq].worker, false, self.chunks[hq].len);
        let now = self.clock.now;
        // Before the awaited instant: what ends by then. After it: what
        // takes no longer than the awaited worker is late. Either way, or
        // what the port holds beside the awaited return (a shared uplink
        // with room for both).
        let budget = (awaited - now).abs();
        let mut next: Vec<usize> = (0..self.lost.len())
            .filter_map(|w| lane.mine[w].get(lane.made[w]).copied())
            .filter(|&pos| pos > at)
            .collect();
        next.sort_unstable();
        let mut shortest = f64::INFINITY;
        // Whether a later return, not yet computed, is due to fill the
        // wait before the awaited one is computed.
        let mut due = false;
        for pos in next {
            let op = lane.ops[pos];
            let Some(q) = self.takeable(op) else {
                if let PortOp::Return(j) = op {
                    let q = self.planned[j]
                        .pieces
                        .iter()
                        .copied()
                        .find(|&q| self.stage[q] != Stage::Returned);
                    let ready = |q: usize| self.expected_ready(q, false) + self.duration(false, q);
                    due |= q.is_some_and(|q| ready(q) <= awaited + GAP_FIT);
                }
                continue;
            };
            let send = matches!(op, PortOp::Send(_));
            let d = self.duration(send, q);
            let (worker, len) = (self.chunks[q].worker, self.chunks[q].len);
            // A transfer ahead of the head runs at its full rate (its whole
            // share fits), so that its time is its own.
            let harmless = d <= budget + GAP_FIT || port.admits_beside(worker, send, len, hshare);
            if harmless && port.admits_beside(worker, send, len, 0.0) {
                return Ok((op, q));
            }
            shortest = shortest.min(d);
        }
        // Nothing fills the wait: with two lanes, a chunk received and due
        // within one return's time is granted now, so that the grant is
        // at the worker when it is computed (it travels behind any chunk
        // going out to that worker, on the same connection).
        let d = self.duration(false, hq);
        if !self.ports.one_lane()
            && !due
            && self.stage[hq] == Stage::Sent
            && awaited - now <= d
            && self.admitted(port, false, hq)
        {
            return Ok((head, hq));
        }
        Err(Some((awaited, shortest)))
    }

    /// The lane returns are made on.
    fn return_lane(&self) -> usize {
        self.lanes.len() - 1
    }
}

/// What the batch machine asks of a round's schedule ([`crate::schedule::Schedule`]).
impl Sequenced {
    pub fn at(&mut self, now: f64) {
        self.clock.now = self.clock.now.max(now);
    }

    pub fn pace(&mut self, worker: usize, factors: [f64; 3]) {
        if let Some(p) = self.clock.pace.get_mut(worker) {
            if factors.iter().all(|f| f.is_finite() && *f > 0.0) {
                *p = factors;
            }
        }
    }

    pub fn wake_at(&self, port: &Port) -> Option<f64> {
        (0..self.lanes.len())
            .filter_map(|l| match self.choose(l, port) {
                Err(Some((awaited, shortest))) if (awaited + shortest).is_finite() => Some(awaited + shortest),
                _ => None,
            })
            .filter(|&t| t > self.clock.now)
            .min_by(f64::total_cmp)
    }

    pub fn next_send(&mut self, port: &Port) -> Option<Chunk> {
        let (op, q) = self.choose(0, port).ok()?;
        if !matches!(op, PortOp::Send(_)) {
            return None;
        }
        self.stage[q] = Stage::Sending;
        self.clock.sent_at[q] = self.clock.now;
        Some(self.chunks[q])
    }

    pub fn next_return(&mut self, port: &Port) -> Option<(usize, ChunkId, usize)> {
        let (op, q) = self.choose(self.return_lane(), port).ok()?;
        if !matches!(op, PortOp::Return(_)) {
            return None;
        }
        self.stage[q] = match self.stage[q] {
            Stage::Sent => Stage::Granted,
            _ => Stage::Returning,
        };
        Some((self.chunks[q].worker, self.chunks[q].id, self.chunks[q].len))
    }

    pub fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        let (worker, chunk) = ev.key();
        let q = *self.index.get(&chunk).ok_or(Unexpected(ev))?;
        if self.chunks[q].worker != worker || self.lost.get(worker).copied().unwrap_or(true) {
            return Err(Unexpected(ev));
        }
        let now = self.clock.now;
        match (ev, self.stage[q]) {
            (Event::Received { .. }, Stage::Sending) => {
                self.stage[q] = Stage::Sent;
                self.clock.received_at[q] = now;
                self.clock.queue[worker].push_back(q);
            }
            (Event::Ready { .. }, Stage::Sent | Stage::Granted) => {
                self.stage[q] = match self.stage[q] {
                    Stage::Granted => Stage::Returning,
                    _ => Stage::Ready,
                };
                self.clock.queue[worker].retain(|&x| x != q);
                self.clock.last_ready[worker] = now;
            }
            (Event::Results { .. }, Stage::Returning) => self.stage[q] = Stage::Returned,
            _ => return Err(Unexpected(ev)),
        }
        self.settle_worker(worker);
        Ok(())
    }

    pub fn done(&self) -> bool {
        self.lanes.iter().all(|l| l.head >= l.ops.len())
    }

    pub fn lose(&mut self, worker: usize) -> Vec<Chunk> {
        if worker >= self.lost.len() || self.lost[worker] {
            return Vec::new();
        }
        self.lost[worker] = true;
        self.settle_worker(worker);
        self.chunks
            .iter()
            .zip(&self.stage)
            .filter(|(c, s)| c.worker == worker && **s != Stage::Returned)
            .map(|(c, _)| *c)
            .collect()
    }

    pub fn awaiting_ready(&self, worker: usize) -> bool {
        !self.lost.get(worker).copied().unwrap_or(true)
            && self
                .chunks
                .iter()
                .zip(&self.stage)
                .any(|(c, s)| c.worker == worker && matches!(s, Stage::Sending | Stage::Sent | Stage::Granted))
    }

    pub fn chunk(&self, id: ChunkId) -> Option<Chunk> {
        self.index.get(&id).map(|&q| self.chunks[q])
    }
}

#[cfg(test)]
mod tests;
