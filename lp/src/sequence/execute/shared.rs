//! One lane of transfers behind a shared uplink ([`Ports::Shared`]):
//! several transfers cross at once, sharing the uplink as [`lane`] says.
//!
//! Transfers start in lane order, each as soon as its worker's link is
//! free (a worker's transfers on a lane never overlap), its chunk is
//! computed (a return), and the uplink has room for it
//! ([`lane::admits`]: all of its share, or `TUNING.room` below
//! `TUNING.fill`); those under way then run at the rates
//! [`lane::Fluid`] gives them, so a transfer's end is known only as the
//! lane runs: the lane is followed instant by instant. Taken strictly, no
//! transfer starts before the one ahead of it. With gaps filled, while
//! the head is a return whose chunk is still being computed, a later
//! transfer (its worker's next) that can go now and whose whole share
//! fits now may go ahead if it cannot delay the head: it ends before the
//! head's chunk is expected to be computed (its send's end at the rates
//! of the moment, as the runtime expects it), or the uplink holds all of
//! its share and the head's at once. A head held back only by the
//! uplink's room, or by its own link, is waited for. With every share 1
//! this is the one-port rule of the parent module. The runtime follows
//! the same rule (`core/src/sequenced.rs`).
//!
//! [`Ports::Shared`]: crate::schedule::Ports::Shared

use super::{Lane, Sim};
use crate::lane::{self, Fluid};
use crate::sequence::PortOp;
use crate::tol::{GAP_FIT, SHARE_EPS};

impl Sim<'_> {
    /// When `op` could start for its worker and chunk (not counting the
    /// uplink): its worker's link free on this lane (never while a
    /// transfer of its is under way), its chunk computed (a return) or its
    /// worker's earlier returns over (a send).
    pub(super) fn ready(&self, op: PortOp, link_free: &[f64]) -> f64 {
        let w = self.chunks[op.chunk()].worker;
        match op {
            PortOp::Send(j) => link_free[w].max(self.release[j]),
            PortOp::Return(j) => link_free[w].max(self.times[j].compute_end),
        }
    }

    /// One lane's transfers, in `ops` order, several at once as the module
    /// says, with gaps filled if `fill`: instant by instant, those under
    /// way end, then the next may start, else time moves to the next
    /// instant something may change.
    pub(super) fn shared_lane(&mut self, ops: &[PortOp], fill: bool) {
        let mut lane = Lane::new(self.wk.len(), ops, fill, |op| self.chunks[op.chunk()].worker);
        let mut flights: Fluid<usize> = Fluid::default();
        let mut began = vec![0.0f64; ops.len()];
        let mut link_free = vec![0.0f64; self.wk.len()];
        let mut send_pos = vec![None; self.chunks.len()];
        for (pos, op) in ops.iter().enumerate() {
            if let PortOp::Send(j) = *op {
                send_pos[j] = Some(pos);
            }
        }
        let mut t = 0.0f64;
        loop {
            while let Some((end, pos)) = flights.next_end().filter(|e| e.0 <= t) {
                flights.finish(end, pos);
                self.run_until(ops[pos], began[pos], end);
                link_free[self.chunks[ops[pos].chunk()].worker] = end;
            }
            let next_end = flights.next_end().map_or(f64::INFINITY, |e| e.0);
            let Some(head) = lane.head() else {
                if next_end.is_finite() {
                    t = next_end;
                    continue;
                }
                return;
            };
            let hop = ops[head];
            let hshare = self.cost(hop).share;
            let ready = self.ready(hop, &link_free);
            let used = flights.used();
            let pick = if ready <= t && lane::admits(used, hshare) {
                Ok(head)
            } else {
                let awaited = match hop {
                    PortOp::Return(j) if fill => self.awaited(j, send_pos[j].and_then(|s| flights.end_of(s))),
                    _ => t,
                };
                if awaited > t {
                    // A return whose chunk is still being computed: a later
                    // transfer may go meanwhile.
                    self.filler(&lane, head, t, awaited, hshare, used, &link_free)
                } else {
                    Err(if ready > t { ready } else { f64::INFINITY })
                }
            };
            match pick {
                Ok(pos) => {
                    let op = ops[pos];
                    let cost = self.cost(op);
                    let w = self.chunks[op.chunk()].worker;
                    flights.start(t, pos, cost.secs, cost.share);
                    began[pos] = t;
                    link_free[w] = f64::INFINITY;
                    lane.make(pos);
                }
                Err(wake) => {
                    let wake = wake.min(next_end);
                    if !wake.is_finite() {
                        debug_assert!(false, "a shared lane waits for nothing");
                        return;
                    }
                    t = wake.max(t);
                }
            }
        }
    }

    /// When chunk `j` is computed: known once it is sent, else expected
    /// from the end its send under way (ending at `sending`) has at the
    /// present rates, as the runtime expects it.
    fn awaited(&self, j: usize, sending: Option<f64>) -> f64 {
        match sending {
            None => self.times[j].compute_end,
            Some(end) => {
                let w = self.chunks[j].worker;
                let x = &self.wk[w];
                end.max(self.busy_until[w]) + x.latency.compute + x.w * self.chunks[j].units as f64
            }
        }
    }

    /// The later transfer that may go at `t` while the head (share
    /// `hshare`) awaits its chunk, computed at `awaited`, beside transfers
    /// holding `used`; else the next instant something may change (a
    /// chunk is computed, a link frees), at the latest `awaited`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn filler(
        &self,
        lane: &Lane,
        head: usize,
        t: f64,
        awaited: f64,
        hshare: f64,
        used: f64,
        link_free: &[f64],
    ) -> Result<usize, f64> {
        let mut wake = awaited;
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
