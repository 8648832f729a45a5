//! Losing a worker: its unreturned products wait for a recovery round,
//! planned over the survivors as soon as they have room.

use super::{BatchMachine, Command};
use crate::record::{Failure, Replan};
use dls_lp::{Request, Rounding, Worker};

impl BatchMachine {
    /// Give up on `worker`: its unreturned products wait for a recovery
    /// round, planned at once if the survivors have room.
    pub(super) fn lose(&mut self, worker: usize, reason: String, cancel: bool, now: f64) -> Vec<Command> {
        if !self.alive[worker] {
            return Vec::new();
        }
        self.alive[worker] = false;
        self.port.release(worker);
        self.rec.abandon(worker);
        self.committed[worker] = 0;
        let before = self.pending.len();
        for r in &mut self.rounds {
            for ch in r.sched.lose(worker) {
                let products = r.products(&ch);
                self.pending.extend(products.iter().filter(|&&g| !self.stored[g]));
            }
        }
        let lost = self.pending.len() - before;
        self.rec.failures.push(Failure {
            worker,
            at: now,
            reason,
            products_lost: lost,
        });
        self.try_recover(now);
        vec![Command::Release { worker, cancel }]
    }

    /// Plan the pending products over the survivors, as many as they have
    /// room for now.
    pub(super) fn try_recover(&mut self, now: f64) {
        if self.pending.is_empty() || self.failed.is_some() {
            return;
        }
        let survivors: Vec<usize> = (0..self.alive.len()).filter(|&w| self.alive[w]).collect();
        if survivors.is_empty() {
            self.failed = Some(format!(
                "every worker was lost; {} of {} products were not computed (nothing is written as if complete)",
                self.remaining,
                self.stored.len()
            ));
            return;
        }
        let room = |w: usize| {
            self.platform.workers()[w]
                .max_load
                .map(|b| b.saturating_sub(self.committed[w]))
        };
        let open: Vec<usize> = survivors.iter().copied().filter(|&w| room(w) != Some(0)).collect();
        let capacity = open
            .iter()
            .map(|&w| room(w))
            .try_fold(0u64, |a, b| b.map(|b| a.saturating_add(b)));
        let take = capacity.map_or(self.pending.len(), |c| (c as usize).min(self.pending.len()));
        if take == 0 {
            return; // every survivor is full: wait for results
        }
        let workers = self
            .platform
            .workers()
            .iter()
            .enumerate()
            .map(|(w, x)| Worker {
                max_load: room(w).map(|r| r.max(1)),
                ..x.clone()
            })
            .collect();
        let req = Request {
            load: take as u64,
            strategy: self.strategy,
            ports: self.port.ports(),
            rounding: Rounding::Refined,
        };
        let plan = dls_lp::Platform::new(workers).and_then(|free| dls_lp::plan_on(&free, &open, &req));
        let plan = match plan {
            Ok(p) => p,
            Err(e) => {
                self.failed = Some(format!("planning the {take} lost products again: {e}"));
                return;
            }
        };
        self.pending.sort_unstable();
        let products: Vec<usize> = self.pending.drain(..take).collect();
        self.rec.replans.push(Replan {
            at: now,
            products: take,
            workers: open.clone(),
            predicted: plan.makespan(),
        });
        self.add_planned(&plan, &products, now);
    }
}
