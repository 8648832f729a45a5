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
    simulate_from(platform, chunks, ops, ports, fill, Some(release)).done()
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
    simulate_from(platform, chunks, ops, ports, fill, None).done()
}

/// The makespan of `ops` taken strictly in order (no gap filled): never
/// earlier than [`execute`]'s, and cheaper to compute.
pub fn strict_makespan(platform: &Platform, chunks: &[RoundChunk], ops: &[PortOp], ports: Ports) -> f64 {
    let (times, makespan) = simulate_from(platform, chunks, ops, ports, false, None).done();
    Spare::keep_times(times);
    makespan
}

/// The vectors simulations work in, kept by each thread from one
/// simulation to the next: the planner times hundreds of candidates of
/// thousands of chunks, and allocating their vectors afresh each time cost
/// about as much as timing them (the allocator handing pages back and
/// faulting them in again).
#[derive(Default)]
struct Spare {
    times: Pool<ChunkTimes>,
    reals: Pool<f64>,
    costs: Pool<[Transfer; 2]>,
    ops: Pool<PortOp>,
    at: Pool<usize>,
    maybe: Pool<Option<usize>>,
}

/// Vectors of one type, emptied.
struct Pool<T>(Vec<Vec<T>>);

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool(Vec::new())
    }
}

impl<T: Clone> Pool<T> {
    /// A vector of `n` copies of `x`.
    fn filled(&mut self, n: usize, x: T) -> Vec<T> {
        let mut v = self.empty();
        v.resize(n, x);
        v
    }

    fn empty(&mut self) -> Vec<T> {
        self.0.pop().unwrap_or_default()
    }

    fn put(&mut self, mut v: Vec<T>) {
        v.clear();
        self.0.push(v);
    }
}

thread_local! {
    static SPARE: std::cell::Cell<Spare> = std::cell::Cell::new(Spare::default());
}

impl Spare {
    fn take() -> Spare {
        SPARE.with(std::cell::Cell::take)
    }

    fn keep(self) {
        SPARE.with(|s| s.set(self));
    }

    fn keep_times(times: Vec<ChunkTimes>) {
        let mut spare = Spare::take();
        spare.times.put(times);
        spare.keep();
    }
}

fn simulate_from<'a>(
    platform: &'a Platform,
    chunks: &'a [RoundChunk],
    ops: &[PortOp],
    ports: Ports,
    fill: bool,
    given: Option<&[f64]>,
) -> Sim<'a> {
    let mut spare = Spare::take();
    let n = chunks.len();
    let given = match given {
        Some(g) => {
            let mut v = spare.reals.empty();
            v.extend_from_slice(g);
            v
        }
        None => spare.reals.filled(n, 0.0),
    };
    let mut release = spare.reals.empty();
    release.extend_from_slice(&given);
    let mut costs = spare.costs.empty();
    costs.extend(chunks.iter().map(|c| {
        let (x, n) = (&platform.workers()[c.worker], c.units as f64);
        [ports.transfer(x, true, n), ports.transfer(x, false, n)]
    }));
    let mut sim = Sim {
        wk: platform.workers(),
        chunks,
        times: spare.times.filled(n, ChunkTimes::default()),
        busy_until: spare.reals.filled(platform.len(), 0.0),
        release,
        given,
        costs,
        spare,
        epoch: 0,
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
    let mut out = Vec::new();
    returns_before_into(chunks, ops, &mut Vec::new(), &mut out);
    out
}

/// [`returns_before`] into `out`, with `last` to work in.
fn returns_before_into(
    chunks: &[RoundChunk],
    ops: &[PortOp],
    last: &mut Vec<Option<usize>>,
    out: &mut Vec<Option<usize>>,
) {
    let p = chunks.iter().map(|c| c.worker + 1).max().unwrap_or(0);
    last.clear();
    last.resize(p, None);
    out.clear();
    out.resize(chunks.len(), None);
    for &op in ops {
        match op {
            PortOp::Send(j) => out[j] = last[chunks[j].worker],
            PortOp::Return(j) => last[chunks[j].worker] = Some(j),
        }
    }
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
    /// Vectors to work in ([`Spare`]).
    spare: Spare,
    /// Bumped whenever a transfer ends (its chunk's times, its worker's
    /// link, the sends its return releases change) or a return starts:
    /// what a filler's search reads ([`Sim::filler`]) is as it was while
    /// the epoch is.
    epoch: u64,
}

impl Sim<'_> {
    /// Each chunk's times and the makespan; every other vector kept for
    /// the thread's next simulation.
    fn done(self) -> (Vec<ChunkTimes>, f64) {
        let makespan = self.times.iter().map(|t| t.return_end).fold(0.0, f64::max);
        let mut spare = self.spare;
        for v in [self.busy_until, self.release, self.given] {
            spare.reals.put(v);
        }
        spare.costs.put(self.costs);
        spare.keep();
        (self.times, makespan)
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
        self.epoch += 1;
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
        let mut lane = Lane::new(self.wk.len(), ops, true, |op| self.chunks[op.chunk()].worker);
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
/// made, and a worker's next transfer is its first not made. Taken
/// strictly (no gap filled) transfers are made in lane order, and only the
/// head is asked for: a cursor does.
struct Lane<'a> {
    ops: &'a [PortOp],
    /// Filling gaps: each transfer's worker, each worker's positions and
    /// how many of them are made, and every worker's next position (the
    /// smallest is the head).
    by_worker: Option<ByWorker>,
    /// Strictly: the first transfer not made.
    cursor: usize,
}

struct ByWorker {
    worker: Vec<usize>,
    mine: Vec<Vec<usize>>,
    count: Vec<usize>,
    /// Sorted, one position a worker at most: a few hundred at most,
    /// where a sorted vector beats a tree.
    next: Vec<usize>,
}

impl<'a> Lane<'a> {
    fn new(p: usize, ops: &'a [PortOp], fill: bool, worker_of: impl Fn(PortOp) -> usize) -> Lane<'a> {
        let by_worker = fill.then(|| {
            let worker: Vec<usize> = ops.iter().map(|&op| worker_of(op)).collect();
            let mut mine = vec![Vec::new(); p];
            for (i, &w) in worker.iter().enumerate() {
                mine[w].push(i);
            }
            let mut next: Vec<usize> = mine.iter().filter_map(|m| m.first().copied()).collect();
            next.sort_unstable();
            ByWorker {
                worker,
                mine,
                count: vec![0; p],
                next,
            }
        });
        Lane {
            ops,
            by_worker,
            cursor: 0,
        }
    }

    fn head(&self) -> Option<usize> {
        match &self.by_worker {
            Some(b) => b.next.first().copied(),
            None => (self.cursor < self.ops.len()).then_some(self.cursor),
        }
    }

    /// The transfer at `pos`, its worker's next (the head, strictly), is
    /// made.
    fn make(&mut self, pos: usize) {
        let Some(b) = &mut self.by_worker else {
            debug_assert_eq!(pos, self.cursor, "strictly, only the head is made");
            self.cursor += 1;
            return;
        };
        let w = b.worker[pos];
        if let Ok(at) = b.next.binary_search(&pos) {
            b.next.remove(at);
        }
        b.count[w] += 1;
        if let Some(&q) = b.mine[w].get(b.count[w]) {
            let at = b.next.binary_search(&q).unwrap_or_else(|at| at);
            b.next.insert(at, q);
        }
    }

    /// Visit every other worker's next transfer after `head`, in lane
    /// order, until `visit` says stop (true). Strictly, none.
    fn scan(&self, head: usize, mut visit: impl FnMut(usize) -> bool) {
        let Some(b) = &self.by_worker else { return };
        let from = b.next.partition_point(|&q| q <= head);
        for &pos in &b.next[from..] {
            if visit(pos) {
                return;
            }
        }
    }
}
