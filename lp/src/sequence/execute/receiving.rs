//! A worker's return while the master sends it a chunk: on a node short
//! of processor it runs at a part of its link's rate
//! ([`crate::Worker::return_receiving`]). With two lanes the sends are
//! placed before the returns in each pass, so when each worker receives
//! is known while its returns are placed.

use super::Sim;
use crate::sequence::PortOp;

/// When one worker receives: its sends' spans, in order, none overlapping
/// (a worker's transfers on a lane never do).
#[derive(Debug, Clone, Default)]
pub(super) struct Spans(Vec<(f64, f64)>);

impl Spans {
    /// Whether the worker receives at `t` (a span's start in, its end out).
    fn at(&self, t: f64) -> Option<(f64, f64)> {
        let k = self.0.partition_point(|s| s.1 <= t);
        self.0.get(k).copied().filter(|s| s.0 <= t)
    }

    /// The first instant after `t` at which the worker starts or stops
    /// receiving.
    pub(super) fn next_change(&self, t: f64) -> f64 {
        let k = self.0.partition_point(|s| s.1 <= t);
        match self.0.get(k) {
            Some(&(start, _)) if start > t => start,
            Some(&(_, end)) => end,
            None => f64::INFINITY,
        }
    }

    /// When a transfer of `secs` at its link's full rate, started at `t`,
    /// ends at `speed` of that rate while the worker receives and at full
    /// rate otherwise.
    pub(super) fn end(&self, mut t: f64, secs: f64, speed: f64) -> f64 {
        let mut left = secs.max(0.0);
        loop {
            let (until, rate) = match self.at(t) {
                Some((_, end)) => (end, speed),
                None => (self.next_change(t), 1.0),
            };
            if left <= rate * (until - t) {
                return t + left / rate;
            }
            left -= rate * (until - t);
            t = until;
        }
    }
}

impl Sim<'_> {
    /// Each worker's sends' spans as placed, for the returns placed next:
    /// only where some worker's return is slowed while it receives (none
    /// otherwise: every return at its link's rate).
    pub(super) fn note_receiving(&mut self, sends: &[PortOp]) {
        if self.wk.iter().all(|w| w.return_speed_receiving() >= 1.0) {
            return;
        }
        let mut spans = vec![Vec::new(); self.wk.len()];
        for op in sends {
            let j = op.chunk();
            let tm = &self.times[j];
            if tm.send_end > tm.send_start {
                spans[self.chunks[j].worker].push((tm.send_start, tm.send_end));
            }
        }
        self.receiving = (spans.into_iter())
            .map(|mut s| {
                s.sort_by(|a, b| a.0.total_cmp(&b.0));
                Spans(s)
            })
            .collect();
    }

    /// The speed of worker `w`'s return at `t`: its speed while receiving
    /// if it receives then, else full.
    pub(super) fn return_speed(&self, w: usize, t: f64) -> f64 {
        match self.receiving.get(w) {
            Some(s) if s.at(t).is_some() => self.wk[w].return_speed_receiving(),
            _ => 1.0,
        }
    }

    /// When worker `w`'s return of `secs`, started at `t` alone on its
    /// lane, ends.
    pub(super) fn return_end(&self, w: usize, t: f64, secs: f64) -> f64 {
        match self.receiving.get(w) {
            Some(s) => s.end(t, secs, self.wk[w].return_speed_receiving()),
            None => t + secs,
        }
    }

    /// The next instant after `t` at which worker `w` starts or stops
    /// receiving (infinite when it never does again, or is never slowed).
    pub(super) fn receiving_changes(&self, w: usize, t: f64) -> f64 {
        match self.receiving.get(w) {
            Some(s) if self.wk[w].return_speed_receiving() < 1.0 => s.next_change(t),
            _ => f64::INFINITY,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequence::{execute, RoundChunk};
    use crate::{Platform, Ports, Worker};

    #[test]
    fn two_ports_slow_a_return_while_its_worker_receives() {
        // c = 1, w = 0.5, d = 1, two chunks of one unit, sent back to back
        // ([0, 1], [1, 2]; computed by 1.5 and 2.5). The first return
        // starts at 1.5 while the second send is under way: at half speed
        // it does 0.25 of its work by 2, the rest by 2.75; the second then
        // runs alone, to 3.75. Without the slowdown: 2.5 and 3.5.
        let chunk = RoundChunk {
            worker: 0,
            units: 1,
            round: 0,
        };
        let ops = [PortOp::Send(0), PortOp::Send(1), PortOp::Return(0), PortOp::Return(1)];
        let plain = Worker::new("a", 1.0, 0.5, 1.0);
        let slowed = Worker {
            return_receiving: Some(2.0),
            ..plain.clone()
        };
        for (w, ends) in [(plain, [2.5, 3.5]), (slowed, [2.75, 3.75])] {
            let platform = Platform::new(vec![w]).expect("valid");
            let (times, makespan) = execute(&platform, &[chunk, chunk], &ops, Ports::Two);
            assert_eq!([times[0].return_start, times[1].return_start], [1.5, ends[0]]);
            assert!((times[0].return_end - ends[0]).abs() < 1e-12, "{times:?}");
            assert!((makespan - ends[1]).abs() < 1e-12, "{makespan}");
            // One lane: a worker's send and return never cross, nothing is
            // slowed (the one-port times are its link's).
            let (one, _) = execute(&platform, &[chunk, chunk], &ops, Ports::One);
            assert!(one.iter().all(|t| (t.return_end - t.return_start - 1.0).abs() < 1e-12));
        }
    }

    #[test]
    fn a_return_goes_slower_only_while_its_worker_receives() {
        let s = Spans(vec![(1.0, 2.0), (3.0, 5.0)]);
        // Apart: its own time.
        assert_eq!(s.end(5.0, 1.0, 0.5), 6.0);
        assert_eq!(s.end(0.0, 0.5, 0.5), 0.5);
        // From 0.5: 0.5 s to 1.0, then half speed over [1, 2] (0.5 s of
        // work), then 0.25 s to 2.25.
        assert!((s.end(0.5, 1.25, 0.5) - 2.25).abs() < 1e-12);
        // Across both spans: 2 s of work from 1.5 is 0.25 by 2, 1.0 over
        // [2, 3], the 0.75 left at half speed from 3: done at 4.5.
        assert!((s.end(1.5, 2.0, 0.5) - 4.5).abs() < 1e-12);
        assert_eq!(
            (s.next_change(0.0), s.next_change(1.0), s.next_change(2.0)),
            (1.0, 2.0, 3.0)
        );
        assert_eq!(s.next_change(5.0), f64::INFINITY);
        assert!(s.at(2.0).is_none() && s.at(1.0).is_some());
    }
}
