//! The earliest execution of a port sequence, with its gaps filled.
//!
//! A sequence fixes an order of transfers; taken strictly, the port idles
//! whenever the next transfer is a return whose chunk is still being
//! computed. Such a gap is filled with the first later transfer (in
//! sequence order) that can go now and ends before the awaited chunk is
//! computed: a send, or a return already computed. Each worker's own
//! transfers keep their order (so it never holds more chunks than the
//! sequence lets it), and the awaited return starts exactly when it would
//! have, so no transfer ever starts later than in the strict execution,
//! and every gap-filled transfer starts earlier. The runtime fills gaps by
//! the same rule (`core/src/sequenced.rs`), with its estimate of
//! when the awaited chunk is computed; on the planned costs the two agree.
//!
//! With two lanes (two ports, a full-duplex uplink) sends do not queue
//! behind returns, so a send also waits until its worker's returns that
//! come before it in the sequence are over: a worker never holds more
//! than the sequence lets it (its memory bound), whichever lane runs ahead.

use super::{ChunkTimes, PortOp, RoundChunk};
use crate::platform::{Platform, Worker};
use crate::schedule::{Ports, Transfer};
use crate::tol::GAP_FIT;
use std::collections::BTreeSet;

mod joint;
mod shared;

/// The earliest execution of `ops` (every chunk sent once, then returned
/// once): one transfer at a time (two ports: one send and one return at a
/// time), gaps filled as the module says, each worker computing its
/// chunks in arrival order, a return no earlier than its chunk is
/// computed. Per-message latencies count. Returns each chunk's times and
/// the makespan.
pub fn execute(platform: &Platform, chunks: &[RoundChunk], ops: &[PortOp], ports: Ports) -> (Vec<ChunkTimes>, f64) {
    run(platform, chunks, ops, ports, true)
}

/// As [`execute`] (gaps filled if `fill`, else strictly in order), no
/// chunk sent before its `release` (seconds): a plan whose later chunks
/// were ready to go only then (the rest of a batch planned while its
/// opening went out, [`crate::opening`]).
pub fn execute_released(
    platform: &Platform,
    chunks: &[RoundChunk],
    ops: &[PortOp],
    ports: Ports,
    fill: bool,
    release: &[f64],
) -> (Vec<ChunkTimes>, f64) {
    assert_eq!(release.len(), chunks.len(), "one release per chunk");
    let sim = simulate_from(platform, chunks, ops, ports, fill, release.to_vec());
    let makespan = sim.makespan();
    (sim.times, makespan)
}

/// Each chunk's times and the makespan of `ops`, with the gaps filled if
/// `fill`, else strictly in order.
pub(super) fn run(
    platform: &Platform,
    chunks: &[RoundChunk],
    ops: &[PortOp],
    ports: Ports,
    fill: bool,
) -> (Vec<ChunkTimes>, f64) {
    let sim = simulate(platform, chunks, ops, ports, fill);
    let makespan = sim.makespan();
    (sim.times, makespan)
}

/// The makespan of `ops` taken strictly in order (no gap filled): never
/// earlier than [`execute`]'s, and cheaper to compute.
pub fn strict_makespan(platform: &Platform, chunks: &[RoundChunk], ops: &[PortOp], ports: Ports) -> f64 {
    simulate(platform, chunks, ops, ports, false).makespan()
}

fn simulate<'a>(platform: &'a Platform, chunks: &'a [RoundChunk], ops: &[PortOp], ports: Ports, fill: bool) -> Sim<'a> {
    simulate_from(platform, chunks, ops, ports, fill, vec![0.0; chunks.len()])
}

fn simulate_from<'a>(
    platform: &'a Platform,
    chunks: &'a [RoundChunk],
    ops: &[PortOp],
    ports: Ports,
    fill: bool,
    given: Vec<f64>,
) -> Sim<'a> {
    let mut sim = Sim {
        wk: platform.workers(),
        chunks,
        times: vec![ChunkTimes::default(); chunks.len()],
        busy_until: vec![0.0; platform.len()],
        release: given.clone(),
        given,
        costs: (chunks.iter())
            .map(|c| {
                let (x, n) = (&platform.workers()[c.worker], c.units as f64);
                [ports.transfer(x, true, n), ports.transfer(x, false, n)]
            })
            .collect(),
    };
    if !ports.one_lane() {
        sim.two_lanes(ops, fill);
    } else if ports.uplink().is_some() {
        sim.shared_lane(ops, fill);
    } else {
        sim.lane(ops, fill);
    }
    sim
}

/// For each chunk, the last chunk of its worker returned before it is
/// sent in `ops`, if any.
pub fn returns_before(chunks: &[RoundChunk], ops: &[PortOp]) -> Vec<Option<usize>> {
    let p = chunks.iter().map(|c| c.worker + 1).max().unwrap_or(0);
    let mut last = vec![None; p];
    let mut out = vec![None; chunks.len()];
    for &op in ops {
        match op {
            PortOp::Send(j) => out[j] = last[chunks[j].worker],
            PortOp::Return(j) => last[chunks[j].worker] = Some(j),
        }
    }
    out
}

struct Sim<'a> {
    wk: &'a [Worker],
    chunks: &'a [RoundChunk],
    times: Vec<ChunkTimes>,
    busy_until: Vec<f64>,
    /// When each chunk may be sent at the earliest: its worker's returns
    /// planned before it are over (two lanes).
    release: Vec<f64>,
    /// When each chunk was ready to go at the earliest, whatever its
    /// worker's returns (0 but for [`execute_released`]).
    given: Vec<f64>,
    /// What each chunk's send and return cost the port.
    costs: Vec<[Transfer; 2]>,
}

impl Sim<'_> {
    fn makespan(&self) -> f64 {
        self.times.iter().map(|t| t.return_end).fold(0.0, f64::max)
    }

    /// What `op` costs the port: how long, and what share of it.
    fn cost(&self, op: PortOp) -> Transfer {
        match op {
            PortOp::Send(j) => self.costs[j][0],
            PortOp::Return(j) => self.costs[j][1],
        }
    }

    /// How long `op` holds the port.
    fn duration(&self, op: PortOp) -> f64 {
        self.cost(op).secs
    }

    /// `op` starts at `t` (a return's chunk computed by then); returns when
    /// it ends.
    fn run(&mut self, op: PortOp, t: f64) -> f64 {
        self.run_until(op, t, t + self.duration(op))
    }

    /// As [`Sim::run`], the transfer ending at `end` (later than its own
    /// time when it shares a lane, or is slowed while its worker receives).
    fn run_until(&mut self, op: PortOp, t: f64, end: f64) -> f64 {
        match op {
            PortOp::Send(j) => {
                let (w, n) = (self.chunks[j].worker, self.chunks[j].units as f64);
                let x = &self.wk[w];
                let done = end.max(self.busy_until[w]) + x.latency.compute + x.w * n;
                self.busy_until[w] = done;
                let tm = &mut self.times[j];
                (tm.send_start, tm.send_end, tm.compute_end) = (t, end, done);
            }
            PortOp::Return(j) => {
                let tm = &mut self.times[j];
                (tm.return_start, tm.return_end) = (t, end);
            }
        }
        end
    }

    /// One port's transfers, in `ops` order, with gaps filled if `fill`.
    /// Every chunk returned here was sent earlier in this lane or in one
    /// placed before.
    fn lane(&mut self, ops: &[PortOp], fill: bool) {
        if !fill {
            let mut t = 0.0f64;
            for &op in ops {
                let start = match op {
                    PortOp::Send(j) => t.max(self.release[j]),
                    PortOp::Return(j) => t.max(self.times[j].compute_end),
                };
                t = self.run(op, start);
            }
            return;
        }
        let mut lane = Lane::new(self.wk.len(), ops, |op| self.chunks[op.chunk()].worker);
        let mut t = 0.0f64;
        while let Some(head) = lane.head() {
            let (pos, start) = self.choose(&lane, head, t);
            t = self.run(ops[pos], start);
            lane.make(pos);
        }
    }

    /// The transfer to take when the port is free at `t`, and when it
    /// starts: the head, unless it is a return not yet computed and some
    /// later worker's next transfer fits before it (at `t`, or once a
    /// later return is computed).
    fn choose(&self, lane: &Lane, head: usize, mut t: f64) -> (usize, f64) {
        let h = match lane.ops[head] {
            PortOp::Send(j) => return (head, t.max(self.release[j])),
            PortOp::Return(h) => h,
        };
        let awaited = self.times[h].compute_end;
        loop {
            if awaited <= t {
                return (head, t);
            }
            let mut wake = awaited;
            let mut pick = None;
            lane.scan(head, |pos| {
                let op = lane.ops[pos];
                let ready = match op {
                    PortOp::Send(j) => self.release[j].max(t),
                    PortOp::Return(j) => self.times[j].compute_end.max(t),
                };
                if ready + self.duration(op) > awaited + GAP_FIT {
                    return false;
                }
                if ready == t {
                    pick = Some(pos);
                    return true;
                }
                wake = wake.min(ready);
                false
            });
            if let Some(pos) = pick {
                return (pos, t);
            }
            t = wake;
        }
    }
}

/// The transfers of one port and which are made: the head is the first not
/// made, and a worker's next transfer is its first not made.
struct Lane<'a> {
    ops: &'a [PortOp],
    worker: Vec<usize>,
    /// Each worker's positions, and how many of them are made.
    mine: Vec<Vec<usize>>,
    count: Vec<usize>,
    /// Every worker's next position: the smallest is the head.
    next: BTreeSet<usize>,
}

impl<'a> Lane<'a> {
    fn new(p: usize, ops: &'a [PortOp], worker_of: impl Fn(PortOp) -> usize) -> Lane<'a> {
        let worker: Vec<usize> = ops.iter().map(|&op| worker_of(op)).collect();
        let mut mine = vec![Vec::new(); p];
        for (i, &w) in worker.iter().enumerate() {
            mine[w].push(i);
        }
        let next = mine.iter().filter_map(|m| m.first().copied()).collect();
        Lane {
            ops,
            worker,
            mine,
            count: vec![0; p],
            next,
        }
    }

    fn head(&self) -> Option<usize> {
        self.next.first().copied()
    }

    /// The transfer at `pos`, its worker's next, is made.
    fn make(&mut self, pos: usize) {
        let w = self.worker[pos];
        self.next.remove(&pos);
        self.count[w] += 1;
        if let Some(&q) = self.mine[w].get(self.count[w]) {
            self.next.insert(q);
        }
    }

    /// Visit every other worker's next transfer after `head`, in lane
    /// order, until `visit` says stop (true).
    fn scan(&self, head: usize, mut visit: impl FnMut(usize) -> bool) {
        for &pos in self.next.range(head + 1..) {
            if visit(pos) {
                return;
            }
        }
    }
}
