//! Two lanes (two ports, a full-duplex uplink) followed together, in one
//! pass: sends on one lane, returns on the other, instant by instant.
//!
//! Each lane runs as the one lane of the parent module does (several
//! transfers at once behind a shared uplink, [`super::shared`]; one at a
//! time on a port of its own, where every share is 1), and the lanes meet
//! at three points, each known at the instant it matters:
//! - a send waits until its worker's returns planned before it are over
//!   (its memory bound), known once that return ends;
//! - a return waits until its chunk is computed, known once its send ends;
//! - a worker short of processor returns more slowly while it receives
//!   ([`crate::Worker::return_receiving`]): a return's speed changes as
//!   its worker's sends start and end.
//!
//! With gaps filled, a return lane waiting for a chunk still to be
//! computed lets a later return go first if it ends by the instant the
//! awaited chunk can be computed at the earliest: known once it is sent,
//! expected at the present rates while its send crosses, and, before
//! that, its send taken at its link's full rate from now. Such a filler
//! never delays the awaited return, so no transfer starts later than in
//! the strict execution. The runtime reads the same instants
//! (`core/src/sequenced.rs`).
//!
//! Following both lanes together costs one pass over the transfers;
//! placing one lane after the other and again until the times between
//! them settle took a pass for about every round of a multi-round plan.

use super::{Lane, Sim};
use crate::lane::{self, Fluid};
use crate::sequence::PortOp;

/// One lane's transfers and those under way on it.
struct Side<'o> {
    ops: &'o [PortOp],
    lane: Lane<'o>,
    flights: Fluid<usize>,
    began: Vec<f64>,
    /// When each worker's link on this lane is free (infinite while one
    /// of its transfers crosses).
    link_free: Vec<f64>,
    /// The last filler looked for on this lane ([`Sim::filler`]): at which
    /// [`Sim::epoch`], instant and awaited end, and what it found. Asked
    /// again after every send that starts at the same instant, it finds
    /// the same until a transfer ends or a return starts.
    memo: std::cell::Cell<Option<Memo>>,
}

/// A filler's search: at which epoch, instant and awaited end, and what
/// it found.
type Memo = (u64, f64, f64, Result<usize, f64>);

impl<'o> Side<'o> {
    fn new(sim: &mut Sim<'_>, ops: &'o [PortOp], fill: bool) -> Side<'o> {
        let p = sim.wk.len();
        Side {
            ops,
            lane: Lane::new(p, ops, fill, |op| sim.chunks[op.chunk()].worker),
            flights: Fluid::default(),
            began: sim.spare.reals.filled(ops.len(), 0.0),
            link_free: sim.spare.reals.filled(p, 0.0),
            memo: std::cell::Cell::new(None),
        }
    }

    /// Its vectors back to `sim`'s spares.
    fn close(self, sim: &mut Sim<'_>) {
        sim.spare.reals.put(self.began);
        sim.spare.reals.put(self.link_free);
    }

    fn next_end(&self) -> f64 {
        self.flights.next_end().map_or(f64::INFINITY, |e| e.0)
    }
}

impl Sim<'_> {
    /// Sends and returns of `ops` on two lanes, in one pass as the module
    /// says, with the return lane's gaps filled if `fill`.
    pub(super) fn two_lanes(&mut self, ops: &[PortOp], fill: bool) {
        let (mut sends, mut returns) = (self.spare.ops.empty(), self.spare.ops.empty());
        for &op in ops {
            match op {
                PortOp::Send(_) => sends.push(op),
                PortOp::Return(_) => returns.push(op),
            }
        }
        let n = self.chunks.len();
        // Unknown until their send ends, or their release's return.
        let (mut before, mut last) = (self.spare.maybe.empty(), self.spare.maybe.empty());
        super::returns_before_into(self.chunks, ops, &mut last, &mut before);
        // The sends each return releases, as lists threaded through two
        // arrays: the first, and each one's next (NONE ends a list).
        const NONE: usize = usize::MAX;
        let (mut first, mut then) = (self.spare.at.filled(n, NONE), self.spare.at.filled(n, NONE));
        for (j, b) in before.iter().enumerate() {
            self.release[j] = match *b {
                Some(r) => {
                    then[j] = first[r];
                    first[r] = j;
                    f64::INFINITY
                }
                None => self.given[j],
            };
            self.times[j].compute_end = f64::INFINITY;
        }
        let mut send_pos = self.spare.maybe.filled(n, None);
        for (pos, op) in sends.iter().enumerate() {
            send_pos[op.chunk()] = Some(pos);
        }
        let slowed = self.wk.iter().any(|w| w.return_speed_receiving() < 1.0);
        let mut receiving = vec![false; self.wk.len()];
        // Returns under way of workers slowed while they receive.
        let mut returning: Vec<(usize, usize)> = Vec::new();
        let (mut tx, mut rx) = (Side::new(self, &sends, fill), Side::new(self, &returns, fill));
        let mut t = 0.0f64;
        loop {
            // What ends by now, in time order across the lanes.
            loop {
                let (s, r) = (tx.next_end(), rx.next_end());
                if s.min(r) > t {
                    break;
                }
                let (side, end) = if s <= r { (&mut tx, s) } else { (&mut rx, r) };
                let (_, pos) = side.flights.next_end().expect("a transfer under way");
                side.flights.finish(end, pos);
                let op = side.ops[pos];
                let j = op.chunk();
                let w = self.chunks[j].worker;
                self.run_until(op, side.began[pos], end);
                side.link_free[w] = end;
                match op {
                    PortOp::Send(_) => receiving[w] = false,
                    PortOp::Return(_) => {
                        returning.retain(|x| x.0 != pos);
                        let mut s = first[j];
                        while s != NONE {
                            self.release[s] = end.max(self.given[s]);
                            s = then[s];
                        }
                    }
                }
            }
            // Then what may start now, on either lane, until nothing does.
            let wake = loop {
                let s = self.next_send(&tx, t);
                if let Ok(pos) = s {
                    let w = self.start(&mut tx, pos, t, 1.0);
                    receiving[w] = true;
                }
                let r = self.next_return(&rx, &tx, &send_pos, t, fill);
                if let Ok(pos) = r {
                    let w = self.chunks[returns[pos].chunk()].worker;
                    let speed = if receiving[w] {
                        self.wk[w].return_speed_receiving()
                    } else {
                        1.0
                    };
                    self.start(&mut rx, pos, t, speed);
                    if slowed {
                        returning.push((pos, w));
                    }
                }
                if let (Err(a), Err(b)) = (s, r) {
                    break a.min(b);
                }
            };
            for &(pos, w) in &returning {
                let speed = if receiving[w] {
                    self.wk[w].return_speed_receiving()
                } else {
                    1.0
                };
                rx.flights.set_speed(t, pos, speed);
            }
            let next = wake.min(tx.next_end()).min(rx.next_end());
            if !next.is_finite() {
                debug_assert!(
                    tx.lane.head().is_none() && rx.lane.head().is_none(),
                    "two lanes wait for nothing"
                );
                break;
            }
            t = next.max(t);
        }
        tx.close(self);
        rx.close(self);
        for v in [first, then] {
            self.spare.at.put(v);
        }
        for v in [before, last, send_pos] {
            self.spare.maybe.put(v);
        }
        for v in [sends, returns] {
            self.spare.ops.put(v);
        }
    }

    /// `side`'s transfer at `pos` starts at `t` at `speed` of its link's
    /// rate; returns its worker.
    fn start(&mut self, side: &mut Side<'_>, pos: usize, t: f64, speed: f64) -> usize {
        let op = side.ops[pos];
        let cost = self.cost(op);
        let w = self.chunks[op.chunk()].worker;
        side.flights.start_at(t, pos, cost.secs, cost.share, speed);
        side.began[pos] = t;
        side.link_free[w] = f64::INFINITY;
        side.lane.make(pos);
        if matches!(op, PortOp::Return(_)) {
            self.epoch += 1;
        }
        w
    }

    /// The send lane's head if it may start at `t` (sends keep their
    /// order), else the next instant it may (infinite: when something ends).
    fn next_send(&self, tx: &Side<'_>, t: f64) -> Result<usize, f64> {
        let head = tx.lane.head().ok_or(f64::INFINITY)?;
        let ready = self.ready(tx.ops[head], &tx.link_free);
        if ready <= t && lane::admits(tx.flights.used(), self.cost(tx.ops[head]).share) {
            return Ok(head);
        }
        Err(if ready > t { ready } else { f64::INFINITY })
    }

    /// The return to start at `t`: the head, once its chunk is computed,
    /// or (if `fill`) a later one that fits while it is awaited; else the
    /// next instant one may start (infinite: when something ends).
    fn next_return(
        &self,
        rx: &Side<'_>,
        tx: &Side<'_>,
        send_pos: &[Option<usize>],
        t: f64,
        fill: bool,
    ) -> Result<usize, f64> {
        let head = rx.lane.head().ok_or(f64::INFINITY)?;
        let hop = rx.ops[head];
        let hshare = self.cost(hop).share;
        let ready = self.ready(hop, &rx.link_free);
        let used = rx.flights.used();
        if ready <= t && lane::admits(used, hshare) {
            return Ok(head);
        }
        let awaited = if fill {
            self.earliest_computed(hop.chunk(), tx, send_pos, t)
        } else {
            t
        };
        if awaited > t {
            let key = (self.epoch, t, awaited);
            if let Some((e, at, aw, found)) = rx.memo.get() {
                if (e, at, aw) == key {
                    return found;
                }
            }
            let found = self.filler(&rx.lane, head, t, awaited, hshare, used, &rx.link_free);
            rx.memo.set(Some((key.0, key.1, key.2, found)));
            found
        } else {
            Err(if ready > t { ready } else { f64::INFINITY })
        }
    }

    /// The earliest chunk `j` can be computed, seen at `t`: its end once
    /// sent; while it crosses, from its send's end at the present rates;
    /// before that, from its send taken now at its link's full rate.
    fn earliest_computed(&self, j: usize, tx: &Side<'_>, send_pos: &[Option<usize>], t: f64) -> f64 {
        let done = self.times[j].compute_end;
        if done.is_finite() {
            return done;
        }
        let sending = send_pos[j].and_then(|s| tx.flights.end_of(s));
        let end = sending.unwrap_or_else(|| t + self.cost(PortOp::Send(j)).secs);
        let w = self.chunks[j].worker;
        let x = &self.wk[w];
        end.max(self.busy_until[w]) + x.latency.compute + x.w * self.chunks[j].units as f64
    }
}

#[cfg(test)]
mod tests {
    use crate::sequence::{execute, strict_makespan, PortOp, RoundChunk};
    use crate::{Platform, Ports, Worker};

    fn chunk(worker: usize) -> RoundChunk {
        RoundChunk {
            worker,
            units: 1,
            round: 0,
        }
    }

    #[test]
    fn two_ports_slow_a_return_while_its_worker_receives() {
        // c = 1, w = 0.5, d = 1, two chunks of one unit, sent back to back
        // ([0, 1], [1, 2]; computed by 1.5 and 2.5). The first return
        // starts at 1.5 while the second send is under way: at half speed
        // it does 0.25 of its work by 2, the rest by 2.75; the second then
        // runs alone, to 3.75. Without the slowdown: 2.5 and 3.5.
        let ops = [PortOp::Send(0), PortOp::Send(1), PortOp::Return(0), PortOp::Return(1)];
        let plain = Worker::new("a", 1.0, 0.5, 1.0);
        let slowed = Worker {
            return_receiving: Some(2.0),
            ..plain.clone()
        };
        for (w, ends) in [(plain, [2.5, 3.5]), (slowed, [2.75, 3.75])] {
            let platform = Platform::new(vec![w]).expect("valid");
            let (times, makespan) = execute(&platform, &[chunk(0), chunk(0)], &ops, Ports::Two);
            assert_eq!([times[0].return_start, times[1].return_start], [1.5, ends[0]]);
            assert!((times[0].return_end - ends[0]).abs() < 1e-12, "{times:?}");
            assert!((makespan - ends[1]).abs() < 1e-12, "{makespan}");
            // One lane: a worker's send and return never cross, nothing is
            // slowed (the one-port times are its link's).
            let (one, _) = execute(&platform, &[chunk(0), chunk(0)], &ops, Ports::One);
            assert!(one.iter().all(|t| (t.return_end - t.return_start - 1.0).abs() < 1e-12));
        }
    }

    #[test]
    fn a_send_waits_for_the_return_planned_before_it() {
        // One worker, c = 1, w = 1, d = 2: chunk 0 is sent [0, 1],
        // computed by 2, returned [2, 4]; chunk 1 is planned after that
        // return, so it is sent [4, 5] although the send lane is free at 1,
        // computed by 6, returned [6, 8].
        let ops = [PortOp::Send(0), PortOp::Return(0), PortOp::Send(1), PortOp::Return(1)];
        let platform = Platform::new(vec![Worker::new("a", 1.0, 1.0, 2.0)]).expect("valid");
        let (times, makespan) = execute(&platform, &[chunk(0), chunk(0)], &ops, Ports::Two);
        assert_eq!((times[1].send_start, times[1].return_start), (4.0, 6.0));
        assert_eq!(makespan, 8.0);
    }

    #[test]
    fn a_later_return_fills_only_what_the_awaited_chunk_leaves() {
        // Worker a (c = 1, w = 4, d = 1) is sent first and returns first;
        // b (c = 1, w = 0.5, d = d_b) is sent second, computed by 2.5.
        // a's chunk is computed by 5: b's return fills the wait when it
        // ends by then (d_b = 2: [2.5, 4.5]), else it waits for a's
        // ([5, 6], then b's from 6).
        let ops = [PortOp::Send(0), PortOp::Send(1), PortOp::Return(0), PortOp::Return(1)];
        for (d_b, b_start, makespan) in [(2.0, 2.5, 6.0), (3.0, 6.0, 9.0)] {
            let platform =
                Platform::new(vec![Worker::new("a", 1.0, 4.0, 1.0), Worker::new("b", 1.0, 0.5, d_b)]).expect("valid");
            let (times, m) = execute(&platform, &[chunk(0), chunk(1)], &ops, Ports::Two);
            assert_eq!(
                (times[1].return_start, times[0].return_start, m),
                (b_start, 5.0, makespan)
            );
            assert!(m <= strict_makespan(&platform, &[chunk(0), chunk(1)], &ops, Ports::Two));
        }
    }
}
