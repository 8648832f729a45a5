//! What every plan is: a sequence of transfers on the master's port, one
//! round or many, and the predicted times of each chunk's send,
//! computation and return.
//!
//! A one-round plan of the report sends every chunk in its send order and
//! then returns them in its return order, strictly. A multi-round plan
//! ([`crate::rounds`]) interleaves sends and returns and lets later
//! transfers fill the port's idle gaps. Both are timed by one rule,
//! [`execute`], which the runtime follows (`core/src/sequenced.rs`): the
//! runtime and the plan never disagree on what a schedule means.
//!
//! The rational loads of the LP keep their own timeline
//! ([`crate::Timeline`]), since a fraction of a product cannot be sent.

use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, WorkerTimes};

mod execute;
pub use execute::{execute, execute_released, returns_before, strict_makespan};

/// A transfer on the master's port: the index of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortOp {
    Send(usize),
    Return(usize),
}

impl PortOp {
    /// The chunk it moves.
    pub fn chunk(self) -> usize {
        match self {
            PortOp::Send(j) | PortOp::Return(j) => j,
        }
    }
}

/// One chunk of a plan: `units` of work for one worker, sent, computed and
/// returned as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundChunk {
    pub worker: usize,
    pub units: u64,
    /// The round it belongs to (0 for a one-round plan).
    pub round: usize,
}

/// When a chunk crosses the port and is computed, seconds from the start.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ChunkTimes {
    pub send_start: f64,
    pub send_end: f64,
    pub compute_end: f64,
    pub return_start: f64,
    pub return_end: f64,
}

/// A plan's chunks, the order of every transfer on the port, and the
/// predicted times of each chunk (from [`execute`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Sequence {
    pub chunks: Vec<RoundChunk>,
    pub ops: Vec<PortOp>,
    pub times: Vec<ChunkTimes>,
    /// Rounds (1 for a one-round plan) and the lag L (a worker holds up to
    /// L + 1 chunks at once).
    pub count: usize,
    pub lag: usize,
    /// Whether later transfers may fill the port's idle gaps (multi-round
    /// plans), or the sequence is taken strictly in order (the report's
    /// one-round orders).
    pub fill_gaps: bool,
    pub makespan: f64,
}

impl Sequence {
    /// The chunks and transfers of a one-round plan: one chunk per worker
    /// with a load, every send in send order, then every return in return
    /// order. Workers with no load are left out.
    fn one_round_ops(scenario: &Scenario, loads: &[u64]) -> (Vec<RoundChunk>, Vec<PortOp>) {
        let loaded = |w: &usize| loads.get(*w).is_some_and(|&l| l > 0);
        let order: Vec<usize> = scenario.send_order.iter().copied().filter(loaded).collect();
        let chunks: Vec<RoundChunk> = order
            .iter()
            .map(|&w| RoundChunk {
                worker: w,
                units: loads[w],
                round: 0,
            })
            .collect();
        let mut ops: Vec<PortOp> = (0..chunks.len()).map(PortOp::Send).collect();
        for w in scenario.return_order.iter().copied().filter(loaded) {
            if let Some(j) = order.iter().position(|&x| x == w) {
                ops.push(PortOp::Return(j));
            }
        }
        (chunks, ops)
    }

    /// A one-round plan's sequence, timed strictly in its orders.
    pub fn one_round(platform: &Platform, scenario: &Scenario, loads: &[u64], ports: Ports) -> Sequence {
        let (chunks, ops) = Self::one_round_ops(scenario, loads);
        Sequence::timed(platform, chunks, ops, ports, 1, 0, false)
    }

    /// `chunks` and `ops` timed by [`execute`] on `platform`.
    pub fn timed(
        platform: &Platform,
        chunks: Vec<RoundChunk>,
        ops: Vec<PortOp>,
        ports: Ports,
        count: usize,
        lag: usize,
        fill_gaps: bool,
    ) -> Sequence {
        let (times, makespan) = execute::run(platform, &chunks, &ops, ports, fill_gaps);
        Sequence {
            chunks,
            ops,
            times,
            count,
            lag,
            fill_gaps,
            makespan,
        }
    }

    /// Units each of `p` workers gets in all.
    pub fn loads(&self, p: usize) -> Vec<u64> {
        let mut loads = vec![0u64; p];
        for c in &self.chunks {
            loads[c.worker] += c.units;
        }
        loads
    }

    /// Each of `p` workers' span over its chunks: its first send's start,
    /// last send's end, last compute end, first return's start and last
    /// return's end; `idle` adds up the waits between a chunk's compute
    /// end and its return. Workers with no chunk keep all zeros. For a
    /// one-round plan, exactly its workers' phases.
    pub fn spans(&self, p: usize) -> Vec<WorkerTimes> {
        let mut workers = vec![WorkerTimes::default(); p];
        let mut seen = vec![false; p];
        for (c, t) in self.chunks.iter().zip(&self.times) {
            let w = &mut workers[c.worker];
            if !seen[c.worker] {
                *w = WorkerTimes {
                    send_start: t.send_start,
                    send_end: t.send_end,
                    compute_end: t.compute_end,
                    return_start: t.return_start,
                    return_end: t.return_end,
                    idle: 0.0,
                };
                seen[c.worker] = true;
            }
            w.send_start = w.send_start.min(t.send_start);
            w.send_end = w.send_end.max(t.send_end);
            w.compute_end = w.compute_end.max(t.compute_end);
            w.return_start = w.return_start.min(t.return_start);
            w.return_end = w.return_end.max(t.return_end);
            w.idle += (t.return_start - t.compute_end).max(0.0);
        }
        workers
    }

    /// The workers of `p` with a chunk, by when their first send (or
    /// return, if not `sends`) starts.
    pub fn order(&self, p: usize, sends: bool) -> Vec<usize> {
        let mut first = vec![f64::INFINITY; p];
        for (c, t) in self.chunks.iter().zip(&self.times) {
            let at = if sends { t.send_start } else { t.return_start };
            first[c.worker] = first[c.worker].min(at);
        }
        let mut order: Vec<usize> = (0..p).filter(|&i| first[i].is_finite()).collect();
        order.sort_by(|&a, &b| first[a].total_cmp(&first[b]).then(a.cmp(&b)));
        order
    }

    /// The same sequence with worker `i` renamed `subset[i]` (a plan made
    /// for part of a platform, indexed like the whole).
    pub fn widened(mut self, subset: &[usize]) -> Sequence {
        for c in &mut self.chunks {
            c.worker = subset[c.worker];
        }
        self
    }
}
