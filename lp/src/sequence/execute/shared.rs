//! One lane of transfers behind a shared uplink ([`Ports::Shared`]):
//! several transfers cross at once, as many as the uplink's capacity
//! holds.
//!
//! Transfers start in lane order, each as soon as its worker's link is
//! free (a worker's transfers on a lane never overlap), its chunk is
//! computed (a return), and the uplink has room for it
//! ([`lane::admits`]: all of its share, or [`lane::ROOM`] below
//! [`lane::FILL`], at the rate that leaves until more frees,
//! [`lane::end`]); taken strictly, no transfer starts before the one
//! ahead of it. With gaps filled, while the head is a return whose chunk
//! is still being computed, a later transfer (its worker's next) that can
//! go now and whose whole share fits now may go ahead if it cannot delay
//! the head: it ends before the head's chunk is computed, or the uplink
//! holds all of its share and the head's at once.
//! A head held back only by the uplink's room, or by its own link, is
//! waited for. With every share 1 this is the one-port rule of the parent
//! module. The runtime follows the same rule (`core/src/sequenced.rs`).
//!
//! [`Ports::Shared`]: crate::schedule::Ports::Shared

use super::{Lane, Sim};
use crate::lane;
use crate::sequence::PortOp;
use crate::tol::{GAP_FIT, SHARE_EPS};

/// The transfers in flight on a lane: when each ends and its whole share.
struct Flights(Vec<(f64, f64)>);

impl Flights {
    /// The whole shares held just after `t` (a transfer ending at `t`
    /// holds none).
    fn used(&self, t: f64) -> f64 {
        self.0.iter().filter(|f| f.0 > t).map(|f| f.1).sum()
    }

    /// The earliest instant from `from` on at which a transfer of `share`
    /// may start ([`lane::admits`]).
    fn admit(&self, from: f64, share: f64) -> f64 {
        if lane::admits(self.used(from), share) {
            return from;
        }
        let mut ends: Vec<f64> = self.0.iter().map(|f| f.0).filter(|&e| e > from).collect();
        ends.sort_by(f64::total_cmp);
        ends.iter()
            .copied()
            .find(|&e| lane::admits(self.used(e), share))
            .unwrap_or_else(|| ends.last().copied().unwrap_or(from))
    }

    /// Forget the transfers over by `t`.
    fn prune(&mut self, t: f64) {
        self.0.retain(|f| f.0 > t);
    }
}

impl Sim<'_> {
    /// When `op` could start for its worker and chunk (not counting the
    /// uplink): its worker's link free on this lane, its chunk computed (a
    /// return) or its worker's earlier returns over (a send).
    fn ready(&self, op: PortOp, link_free: &[f64]) -> f64 {
        let w = self.chunks[op.chunk()].worker;
        match op {
            PortOp::Send(j) => link_free[w].max(self.release[j]),
            PortOp::Return(j) => link_free[w].max(self.times[j].compute_end),
        }
    }

    /// One lane's transfers, in `ops` order, several at once as the module
    /// says, with gaps filled if `fill`.
    pub(super) fn shared_lane(&mut self, ops: &[PortOp], fill: bool) {
        let mut lane = Lane::new(self.wk.len(), ops, |op| self.chunks[op.chunk()].worker);
        let mut flights = Flights(Vec::new());
        let mut link_free = vec![0.0f64; self.wk.len()];
        let mut t = 0.0f64;
        while let Some(head) = lane.head() {
            flights.prune(t);
            let hop = ops[head];
            let hshare = self.cost(hop).share;
            let start = flights.admit(t.max(self.ready(hop, &link_free)), hshare);
            let awaited = match hop {
                PortOp::Return(j) if fill && self.times[j].compute_end > t => Some(self.times[j].compute_end),
                _ => None,
            };
            let (pos, at) = match awaited {
                None => (head, start),
                Some(awaited) => match self.filler(&lane, head, t, awaited, hshare, &flights, &link_free) {
                    Ok(pos) => (pos, t),
                    Err(wake) => {
                        t = wake;
                        continue;
                    }
                },
            };
            let op = ops[pos];
            let cost = self.cost(op);
            let end = self.run_until(op, at, lane::end(at, cost.secs, cost.share, &flights.0));
            flights.0.push((end, cost.share));
            link_free[self.chunks[op.chunk()].worker] = end;
            lane.make(pos);
            t = at;
        }
    }

    /// The later transfer that may go at `t` while the head (share
    /// `hshare`) awaits its chunk, computed at `awaited`; else the next
    /// instant something may change (a transfer ends, a chunk is
    /// computed, a link frees), at the latest `awaited`.
    #[allow(clippy::too_many_arguments)]
    fn filler(
        &self,
        lane: &Lane,
        head: usize,
        t: f64,
        awaited: f64,
        hshare: f64,
        flights: &Flights,
        link_free: &[f64],
    ) -> Result<usize, f64> {
        let used = flights.used(t);
        let mut wake = awaited;
        for f in &flights.0 {
            if f.0 > t {
                wake = wake.min(f.0);
            }
        }
        let mut pick = None;
        lane.scan(head, |pos| {
            let op = lane.ops[pos];
            let ready = self.ready(op, link_free);
            if ready > t {
                wake = wake.min(ready);
                return false;
            }
            let cost = self.cost(op);
            // Ahead of the head only at its full rate: its whole share fits.
            let fits = used + cost.share <= 1.0 + SHARE_EPS;
            let harmless = t + cost.secs <= awaited + GAP_FIT || used + cost.share + hshare <= 1.0 + SHARE_EPS;
            if fits && harmless {
                pick = Some(pos);
                return true;
            }
            false
        });
        pick.ok_or(wake)
    }
}
