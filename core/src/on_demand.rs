//! Demand-driven schedules, the baselines general task runtimes and
//! dynamic-loop-scheduling libraries use: a worker gets its next chunk once
//! its previous results are in, and the chunk's size is decided when it is
//! handed out ([`Sizing`]). Still one transfer at a time on the master's
//! port (the machine offers the port to a send before a return, to keep
//! workers busy).

use crate::chunk::{Chunk, Event, Stage, Unexpected};
use crate::port::Port;
use dls_protocol::ChunkId;
use std::collections::VecDeque;

/// How big the next chunk is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizing {
    /// Always this many products (plain self-scheduling).
    Fixed(usize),
    /// Factoring (FAC2): batches of one chunk per worker, each of
    /// ⌈R / (2n)⌉ products, R the products not yet handed out when the
    /// batch starts and n the workers still taking part.
    Factoring,
    /// Weighted factoring: as [`Sizing::Factoring`], each worker's chunk
    /// scaled by its weight (computing speed relative to the mean).
    WeightedFactoring,
}

impl Sizing {
    /// The method's name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Sizing::Fixed(_) => "self-scheduling",
            Sizing::Factoring => "factoring",
            Sizing::WeightedFactoring => "weighted-factoring",
        }
    }
}

/// A schedule that sizes and places chunks as workers ask for them.
pub struct OnDemand {
    m: usize,
    sizing: Sizing,
    /// Per worker (indexed like the platform): weight (mean 1 over those
    /// taking part) and the largest chunk it may be given.
    weights: Vec<f64>,
    caps: Vec<usize>,
    first_id: u64,
    chunks: Vec<Chunk>,
    stage: Vec<Stage>,
    /// Products handed out so far (they are handed out in order).
    handed: usize,
    /// The current factoring batch: products left when it began, chunks
    /// still to hand out in it.
    batch: (usize, usize),
    want: VecDeque<usize>,
    ready: VecDeque<usize>,
    lost: Vec<bool>,
    taking_part: Vec<bool>,
    settled: usize,
}

impl OnDemand {
    /// `m` products over `workers` (indices < `speeds.len()`); `speeds`
    /// (any positive scale) weigh weighted factoring; `caps` bound each
    /// worker's chunk (message size, memory).
    pub fn new(workers: &[usize], m: usize, sizing: Sizing, speeds: &[f64], caps: &[usize], first_id: u64) -> Self {
        let p = speeds.len();
        let mut taking_part = vec![false; p];
        for &w in workers {
            taking_part[w] = true;
        }
        let mean = workers.iter().map(|&w| speeds[w]).sum::<f64>() / workers.len().max(1) as f64;
        let weights = (0..p)
            .map(|w| match sizing {
                Sizing::WeightedFactoring if mean > 0.0 && speeds[w].is_finite() => speeds[w] / mean,
                _ => 1.0,
            })
            .collect();
        OnDemand {
            m,
            sizing,
            weights,
            caps: caps.iter().map(|&c| c.max(1)).collect(),
            first_id,
            chunks: Vec::new(),
            stage: Vec::new(),
            handed: 0,
            batch: (0, 0),
            want: workers.iter().copied().collect(),
            ready: VecDeque::new(),
            lost: vec![false; p],
            taking_part,
            settled: 0,
        }
    }

    /// Chunk ids this schedule may use, from its first: one per product at
    /// most.
    pub fn id_span(&self) -> u64 {
        self.m as u64
    }

    /// Every chunk handed out so far.
    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    fn left(&self) -> usize {
        self.m - self.handed
    }

    /// The size of the chunk `worker` would get now, and the factoring
    /// batch once it has (taken only if the chunk goes).
    fn size_for(&self, worker: usize) -> (usize, (usize, usize)) {
        let mut batch = self.batch;
        let want = match self.sizing {
            Sizing::Fixed(s) => s,
            Sizing::Factoring | Sizing::WeightedFactoring => {
                if batch.1 == 0 {
                    batch = (self.left(), self.batch_width());
                }
                batch.1 -= 1;
                let share = self.weights[worker] * batch.0 as f64 / (2.0 * self.batch_width() as f64);
                share.ceil() as usize
            }
        };
        (want.clamp(1, self.caps[worker]).min(self.left()), batch)
    }

    /// Workers in a factoring batch (those taking part and not lost).
    fn batch_width(&self) -> usize {
        (0..self.lost.len())
            .filter(|&w| self.taking_part[w] && !self.lost[w])
            .count()
            .max(1)
    }

    fn find(&self, worker: usize, chunk: ChunkId) -> Option<usize> {
        let k = chunk.0.checked_sub(self.first_id)? as usize;
        let c = self.chunks.get(k)?;
        (c.worker == worker && !self.lost.get(worker).copied().unwrap_or(true)).then_some(k)
    }

    /// Whether any surviving worker holds a chunk not yet returned (it will
    /// ask for more when it is done).
    fn any_worker_busy(&self) -> bool {
        self.chunks
            .iter()
            .zip(&self.stage)
            .any(|(c, s)| c.worker != usize::MAX && !self.lost[c.worker] && *s != Stage::Returned)
    }
}

/// What the batch machine asks of a round's schedule ([`crate::schedule::Schedule`]).
impl OnDemand {
    pub fn next_send(&mut self, port: &Port) -> Option<Chunk> {
        if self.left() == 0 {
            return None;
        }
        while self.want.front().is_some_and(|&w| self.lost[w]) {
            self.want.pop_front();
        }
        let w = *self.want.front()?;
        let (len, batch) = self.size_for(w);
        if !port.admits(w, true, len) {
            return None;
        }
        self.batch = batch;
        self.want.pop_front();
        let chunk = Chunk {
            worker: w,
            id: ChunkId(self.first_id + self.chunks.len() as u64),
            start: self.handed,
            len,
        };
        self.handed += len;
        self.chunks.push(chunk);
        self.stage.push(Stage::Sending);
        Some(chunk)
    }

    pub fn next_return(&mut self, port: &Port) -> Option<(usize, ChunkId, usize)> {
        while self.ready.front().is_some_and(|&k| self.lost[self.chunks[k].worker]) {
            self.ready.pop_front();
        }
        let k = *self.ready.front()?;
        let c = self.chunks[k];
        if !port.admits(c.worker, false, c.len) {
            return None;
        }
        self.ready.pop_front();
        self.stage[k] = Stage::Returning;
        Some((c.worker, c.id, c.len))
    }

    pub fn on_event(&mut self, ev: Event) -> Result<(), Unexpected> {
        let (worker, chunk) = ev.key();
        let k = self.find(worker, chunk).ok_or(Unexpected(ev))?;
        match (ev, self.stage[k]) {
            (Event::Received { .. }, Stage::Sending) => self.stage[k] = Stage::Sent,
            (Event::Ready { .. }, Stage::Sent) => {
                self.stage[k] = Stage::Ready;
                self.ready.push_back(k);
            }
            (Event::Results { .. }, Stage::Returning) => {
                self.stage[k] = Stage::Returned;
                self.settled += 1;
                self.want.push_back(worker);
            }
            _ => return Err(Unexpected(ev)),
        }
        Ok(())
    }

    pub fn done(&self) -> bool {
        // Every product handed out, and every chunk returned or handed back
        // as lost.
        self.left() == 0 && self.settled == self.chunks.len()
    }

    pub fn lose(&mut self, worker: usize) -> Vec<Chunk> {
        if worker >= self.lost.len() || self.lost[worker] {
            return Vec::new();
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
        // With no worker left to ask, the products not yet handed out are
        // handed back too, as one chunk nobody holds.
        if self.left() > 0 && self.want.iter().all(|&w| self.lost[w]) && !self.any_worker_busy() {
            let rest = Chunk {
                worker: usize::MAX,
                id: ChunkId(self.first_id + self.chunks.len() as u64),
                start: self.handed,
                len: self.left(),
            };
            self.handed = self.m;
            self.chunks.push(rest);
            self.stage.push(Stage::Returned);
            self.settled += 1;
            gone.push(rest);
        }
        gone
    }

    pub fn awaiting_ready(&self, worker: usize) -> bool {
        self.chunks
            .iter()
            .zip(&self.stage)
            .any(|(c, s)| c.worker == worker && matches!(s, Stage::Sending | Stage::Sent))
    }

    pub fn chunk(&self, id: ChunkId) -> Option<Chunk> {
        let k = id.0.checked_sub(self.first_id)? as usize;
        self.chunks.get(k).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand out every product to workers that ask in turn and return at
    /// once; the sizes handed out, in order.
    fn sizes(p: usize, m: usize, sizing: Sizing, speeds: &[f64]) -> Vec<(usize, usize)> {
        let workers: Vec<usize> = (0..p).collect();
        let mut s = OnDemand::new(&workers, m, sizing, speeds, &vec![usize::MAX; p], 0);
        let costs: Vec<_> = (0..p)
            .map(|i| dls_lp::Worker::new(format!("w{i}"), 1.0, 1.0, 1.0))
            .collect();
        let port = Port::new(dls_lp::Ports::One, &costs);
        let mut out = Vec::new();
        while let Some(c) = s.next_send(&port) {
            out.push((c.worker, c.len));
            for ev in [
                Event::Received {
                    worker: c.worker,
                    chunk: c.id,
                },
                Event::Ready {
                    worker: c.worker,
                    chunk: c.id,
                },
            ] {
                s.on_event(ev).expect("in order");
            }
            let (w, id, _) = s.next_return(&port).expect("ready");
            s.on_event(Event::Results { worker: w, chunk: id }).expect("granted");
        }
        assert!(s.done());
        assert_eq!(out.iter().map(|x| x.1).sum::<usize>(), m, "every product once");
        out
    }

    #[test]
    fn factoring_halves_what_is_left_batch_by_batch() {
        // FAC2 by hand: 100 products, 4 workers: batches of 4 chunks of
        // ⌈100/8⌉ = 13, then ⌈48/8⌉ = 6, ⌈24/8⌉ = 3, ⌈12/8⌉ = 2, then 1s.
        let got: Vec<usize> = sizes(4, 100, Sizing::Factoring, &[1.0; 4])
            .iter()
            .map(|x| x.1)
            .collect();
        let mut want = vec![13; 4];
        want.extend([6; 4]);
        want.extend([3; 4]);
        want.extend([2; 4]);
        want.extend([1; 4]);
        assert_eq!(got, want);
    }

    #[test]
    fn weighted_factoring_follows_the_weights() {
        // Speeds 3:1 over two workers: weights 1.5 and 0.5; first batch of
        // 80 products gives ⌈1.5·80/4⌉ = 30 and ⌈0.5·80/4⌉ = 10.
        let got = sizes(2, 80, Sizing::WeightedFactoring, &[3.0, 1.0]);
        assert_eq!(&got[..2], &[(0, 30), (1, 10)]);
        // Then 40 left: 15 and 5.
        assert_eq!(&got[2..4], &[(0, 15), (1, 5)]);
    }

    #[test]
    fn fixed_chunks_and_caps() {
        let got: Vec<usize> = sizes(3, 10, Sizing::Fixed(4), &[1.0; 3]).iter().map(|x| x.1).collect();
        assert_eq!(got, [4, 4, 2]);
        let mut s = OnDemand::new(&[0, 1], 50, Sizing::Factoring, &[1.0; 2], &[5, 100], 7);
        let costs = [
            dls_lp::Worker::new("a", 1.0, 1.0, 1.0),
            dls_lp::Worker::new("b", 1.0, 1.0, 1.0),
        ];
        let c = s.next_send(&Port::new(dls_lp::Ports::One, &costs)).expect("a chunk");
        assert_eq!((c.len, c.id), (5, ChunkId(7)), "capped, ids from the first");
    }
}
