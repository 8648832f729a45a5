//! What a batch measured: every transfer on the master's port, per-worker
//! phase times, losses and recovery rounds. Filled by the batch machine
//! from the timestamps of the events it is given (seconds from the start
//! of the run); no clock of its own.

use dls_lp::WorkerTimes;
use dls_protocol::ChunkId;
use std::collections::HashMap;

/// What crossed the master's port, in seconds from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Transfer {
    pub worker: usize,
    pub send: bool,
    /// Units (products) it carried.
    pub units: usize,
    pub start: f64,
    pub end: f64,
}

/// A chunk computed on a worker: from when it had the chunk and had
/// finished the one before, to when it said it was done.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Compute {
    pub worker: usize,
    pub start: f64,
    pub end: f64,
}

/// A worker given up on during the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    pub worker: usize,
    /// Seconds from the start of the run.
    pub at: f64,
    pub reason: String,
    /// Products it held that had not come back (redone elsewhere).
    pub products_lost: usize,
}

/// A recovery round: lost products planned again over the survivors.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Replan {
    pub at: f64,
    pub products: usize,
    pub workers: Vec<usize>,
    /// The recovery plan's predicted makespan.
    pub predicted: f64,
}

/// An online correction of a multi-round plan: the chunks of `round` and
/// later, not yet sent, resized from the speeds measured so far.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Adaptation {
    pub at: f64,
    pub round: usize,
    /// Products moved between chunks (in the chunks resized).
    pub products: usize,
    /// Per worker: measured over predicted time of sending, computing and
    /// returning, as used.
    pub factors: Vec<[f64; 3]>,
}

/// Free workers enrolled by online correction: when, who, how many
/// products their round took and its predicted makespan.
#[derive(Debug, Clone, PartialEq)]
pub struct Enrolment {
    pub at: f64,
    pub workers: Vec<usize>,
    pub products: usize,
    pub predicted: f64,
}

/// What was measured, in seconds from the start of the run.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Indexed like the platform; zeros for workers without load.
    pub workers: Vec<WorkerTimes>,
    /// Seconds each worker said it computed.
    pub compute_secs: Vec<f64>,
    /// Products each worker computed and returned (what online correction
    /// and enrolment made of the plan's loads).
    pub products: Vec<u64>,
    pub transfers: Vec<Transfer>,
    /// Every chunk's computation, in the order they ended.
    pub computes: Vec<Compute>,
    pub failures: Vec<Failure>,
    pub replans: Vec<Replan>,
    pub adaptations: Vec<Adaptation>,
    /// Free workers enrolled by online correction.
    pub enrolments: Vec<Enrolment>,
    pub makespan: f64,
}

#[derive(Default, Clone, Copy)]
struct Stamps {
    send_start: Option<f64>,
    send_end: Option<f64>,
    compute_end: Option<f64>,
    return_start: Option<f64>,
    return_end: Option<f64>,
}

/// The running record of a batch.
pub(crate) struct Recorder {
    stamps: Vec<Stamps>,
    compute_secs: Vec<f64>,
    pub(crate) products: Vec<u64>,
    /// Transfers under way: (worker, chunk, is a send) → start.
    open: HashMap<(usize, ChunkId, bool), f64>,
    transfers: Vec<Transfer>,
    /// When each chunk arrived, until it is computed.
    arrived: HashMap<ChunkId, f64>,
    /// When each worker last finished a chunk.
    last_ready: Vec<f64>,
    computes: Vec<Compute>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) replans: Vec<Replan>,
    pub(crate) adaptations: Vec<Adaptation>,
    pub(crate) enrolments: Vec<Enrolment>,
}

impl Recorder {
    pub(crate) fn new(p: usize) -> Recorder {
        Recorder {
            stamps: vec![Stamps::default(); p],
            compute_secs: vec![0.0; p],
            products: vec![0; p],
            open: HashMap::new(),
            transfers: Vec::new(),
            arrived: HashMap::new(),
            last_ready: vec![0.0; p],
            computes: Vec::new(),
            failures: Vec::new(),
            replans: Vec::new(),
            adaptations: Vec::new(),
            enrolments: Vec::new(),
        }
    }

    pub(crate) fn start(&mut self, worker: usize, chunk: ChunkId, send: bool, now: f64) {
        let s = &mut self.stamps[worker];
        if send {
            s.send_start.get_or_insert(now);
        } else {
            s.return_start.get_or_insert(now);
        }
        self.open.insert((worker, chunk, send), now);
    }

    /// `chunk` is computed: a return granted before (two lanes) starts
    /// only now.
    pub(crate) fn ready_to_return(&mut self, worker: usize, chunk: ChunkId, now: f64) {
        if let Some(start) = self.open.get_mut(&(worker, chunk, false)) {
            let s = &mut self.stamps[worker];
            if s.return_start == Some(*start) {
                s.return_start = Some(now);
            }
            *start = start.max(now);
        }
    }

    /// The transfer of `units` is over; how long it took, if its start was
    /// seen.
    pub(crate) fn end(&mut self, worker: usize, chunk: ChunkId, send: bool, units: usize, now: f64) -> Option<f64> {
        let s = &mut self.stamps[worker];
        if send {
            s.send_end = Some(now);
            self.arrived.insert(chunk, now);
        } else {
            s.return_end = Some(now);
        }
        let start = self.open.remove(&(worker, chunk, send))?;
        self.transfers.push(Transfer {
            worker,
            send,
            units,
            start,
            end: now,
        });
        Some(now - start)
    }

    /// How long `worker` received (a send of its own under way) between
    /// `from` and `to`.
    pub(crate) fn receiving(&self, worker: usize, from: f64, to: f64) -> f64 {
        let within = |start: f64, end: f64| (end.min(to) - start.max(from)).max(0.0);
        // Transfers are recorded as they end: those that ended after
        // `from` are the last.
        let done: f64 = (self.transfers.iter().rev())
            .take_while(|t| t.end > from)
            .filter(|t| t.send && t.worker == worker)
            .map(|t| within(t.start, t.end))
            .sum();
        let open: f64 = (self.open.iter())
            .filter(|(k, _)| k.0 == worker && k.2)
            .map(|(_, &start)| within(start, to))
            .sum();
        done + open
    }

    /// The worker said it computed `chunk` in `secs`; returns how long it
    /// took as the master saw it, from when the worker had the chunk and had
    /// finished the one before. That span also holds what the worker's own
    /// clock misses (a processor quota that let one chunk run on credit
    /// holds the next one back before it starts), so over consecutive
    /// chunks it adds up to the worker's real pace.
    pub(crate) fn computed(&mut self, worker: usize, chunk: ChunkId, secs: f64, now: f64) -> f64 {
        self.stamps[worker].compute_end = Some(now);
        self.compute_secs[worker] += secs;
        let got = self.arrived.remove(&chunk).unwrap_or(now);
        let start = got.max(self.last_ready[worker]);
        self.computes.push(Compute {
            worker,
            start,
            end: now,
        });
        self.last_ready[worker] = now;
        now - start
    }

    /// A lost worker's open transfers never end.
    pub(crate) fn abandon(&mut self, worker: usize) {
        self.open.retain(|k, _| k.0 != worker);
    }

    pub(crate) fn finish(self) -> Measured {
        let workers = self
            .stamps
            .iter()
            .map(|s| {
                let f = |t: Option<f64>| t.unwrap_or(0.0);
                let (ce, rs) = (f(s.compute_end), f(s.return_start));
                WorkerTimes {
                    send_start: f(s.send_start),
                    send_end: f(s.send_end),
                    compute_end: ce,
                    return_start: rs,
                    return_end: f(s.return_end),
                    idle: (rs - ce).max(0.0),
                }
            })
            .collect();
        let makespan = self.transfers.iter().map(|t| t.end).fold(0.0, f64::max);
        Measured {
            workers,
            compute_secs: self.compute_secs,
            products: self.products,
            transfers: self.transfers,
            computes: self.computes,
            failures: self.failures,
            replans: self.replans,
            adaptations: self.adaptations,
            enrolments: self.enrolments,
            makespan,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiving_counts_a_workers_own_sends_within_the_span() {
        let mut r = Recorder::new(2);
        // Worker 0 receives over [0, 1] and [2, 3], and from 4 on (under
        // way); worker 1 over [0.5, 3.5]; worker 0 returns over [0.8, 2.5].
        r.start(0, ChunkId(0), true, 0.0);
        r.start(1, ChunkId(1), true, 0.5);
        r.start(0, ChunkId(9), false, 0.8);
        r.end(0, ChunkId(0), true, 1, 1.0);
        r.start(0, ChunkId(2), true, 2.0);
        r.end(0, ChunkId(9), false, 1, 2.5);
        r.end(0, ChunkId(2), true, 1, 3.0);
        r.end(1, ChunkId(1), true, 1, 3.5);
        r.start(0, ChunkId(3), true, 4.0);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // [0.8, 2.5]: 0.2 of the first send, 0.5 of the second.
        assert!(close(r.receiving(0, 0.8, 2.5), 0.7));
        // [2.5, 5]: 0.5 of the second, 1 of the one under way.
        assert!(close(r.receiving(0, 2.5, 5.0), 1.5));
        assert!(close(r.receiving(0, 3.0, 4.0), 0.0));
        assert!(close(r.receiving(1, 0.0, 10.0), 3.0));
    }
}
