//! Online correction inside the batch machine: the decision is
//! `core/src/adapt.rs`'s; this applies it to the running round (resizing its
//! unsent chunks and moving their products), and gives the share of free
//! workers it enrols a round of their own. Free are the workers the plan
//! left out (when the enrolled fall behind), and at the tail of a batch
//! those done with their part (when a round is past its predicted end).

use super::BatchMachine;
use crate::adapt::{enrol, reshare, Phase, Reshared, Slot};
use crate::record::Adaptation;
use crate::schedule::Schedule;
use crate::TUNING;
use dls_protocol::ChunkId;
use std::sync::Arc;

impl BatchMachine {
    /// Online correction: when the last send of a round of a multi-round
    /// plan is over and the speeds seen have moved beyond the dead band,
    /// the chunks of the later rounds not yet sent are resized
    /// (`adapt.rs`); their products move between them, and to free workers
    /// worth enrolling, in a round planned for them.
    pub(super) fn maybe_adapt(&mut self, k: usize, sent: ChunkId, now: f64) {
        if !self.cfg.adapt || !self.observed.changed() {
            return;
        }
        let Schedule::Planned(seq) = &self.rounds[k].sched else {
            return;
        };
        if !seq.fills_gaps() {
            return; // one round: nothing later to reshare
        }
        let (Some(done), Some((next, ids))) = (seq.round_of(sent), seq.resizable()) else {
            return;
        };
        if next <= done || ids.is_empty() {
            return;
        }
        // Only workers the plan left out, once, and only when the enrolled
        // fall behind: on one port, when they compute slower than planned
        // (a slower link is the port's business, which another worker
        // would only take time from); behind a shared uplink, also when
        // their links are slower, which leaves the uplink idle for
        // another. `enrol` then weighs whether the newcomers pay.
        let free: Vec<usize> = (0..self.alive.len())
            .filter(|&w| self.alive[w] && self.left_out[w] && self.committed[w] == 0)
            .collect();
        let phases: &[Phase] = if self.port.ports().uplink().is_some() {
            &[Phase::Send, Phase::Compute, Phase::Return]
        } else {
            &[Phase::Compute]
        };
        // As this correction will see them.
        let behind = (ids.iter()).any(|&j| {
            let w = seq.planned()[j].worker;
            (phases.iter()).any(|&ph| self.observed.factor(w, ph) > 1.0 + TUNING.deadband)
        });
        let free = if behind { free } else { Vec::new() };
        self.reshare_round(k, &ids, &free, false, next, now);
    }

    /// The tail of the batch: workers that did their part are idle while a
    /// round past its predicted end still has chunks unsent (its workers
    /// fell behind, or it was planned for fewer products than it got). Its
    /// unsent products are shared again over its workers and the idle
    /// ones worth enrolling (`enrol`), which take theirs in a round of
    /// their own. A round on its plan never meets this: its chunks are all
    /// sent before its workers' predicted compute ends.
    pub(super) fn share_tail(&mut self, now: f64) {
        if !self.cfg.adapt || self.failed.is_some() {
            return;
        }
        let idle: Vec<usize> = (0..self.alive.len())
            .filter(|&w| self.alive[w] && !self.left_out[w] && self.committed[w] == 0)
            .collect();
        if idle.is_empty() {
            return;
        }
        // The round past its end with the most products unsent.
        let late = (0..self.rounds.len())
            .filter_map(|k| {
                let Schedule::Planned(seq) = &self.rounds[k].sched else {
                    return None;
                };
                let (next, ids) = seq.resizable().filter(|_| seq.fills_gaps())?;
                let workers = ids.iter().map(|&j| seq.planned()[j].worker);
                let due = workers.map(|w| self.due[w]).fold(0.0, f64::max);
                let units: usize = ids.iter().map(|&j| seq.units(j)).sum();
                (now > due && units > 0).then_some((k, next, ids, units))
            })
            .max_by_key(|r| r.3);
        if let Some((k, next, ids, _)) = late {
            self.reshare_round(k, &ids, &idle, true, next, now);
        }
    }

    /// Share the products of round `k`'s unsent planned chunks `ids` (of
    /// its round `next` and later) again on the corrected platform, over
    /// their workers and those of `free` worth enrolling; with `enrolling`,
    /// only if some of those take products.
    fn reshare_round(&mut self, k: usize, ids: &[usize], free: &[usize], enrolling: bool, next: usize, now: f64) {
        let ports = self.port.ports();
        let round = &mut self.rounds[k];
        let Schedule::Planned(seq) = &mut round.sched else {
            return;
        };
        let planned = seq.planned();
        let slots: Vec<Slot> = ids
            .iter()
            .map(|&j| Slot {
                worker: planned[j].worker,
                round: planned[j].round,
                units: seq.units(j) as u64,
            })
            .collect();
        let wk = self.platform.workers();
        let per = seq.lag() as u64 + 1;
        let cap = |w: usize| wk[w].max_load.map_or(u64::MAX, |b| (b / per).max(1));
        let corrected = self.observed.peek(&self.platform);
        // Work each worker holds, at its corrected pace: it takes new
        // products only after that.
        let busy: Vec<f64> = (seq.in_hand(wk.len()).iter().zip(corrected.workers()))
            .map(|(&u, w)| u as f64 * w.w)
            .collect();
        let mut enrolled: Vec<usize> = slots.iter().map(|s| s.worker).collect();
        enrolled.sort_unstable();
        enrolled.dedup();
        let free: Vec<usize> = free.iter().copied().filter(|w| !enrolled.contains(w)).collect();
        let newcomers = if free.is_empty() {
            Vec::new()
        } else {
            enrol(&corrected, ports, &enrolled, &free)
        };
        let reshared = reshare(&corrected, ports, &slots, &busy, cap, &newcomers);
        let enrols = (reshared.as_ref()).is_some_and(|r| r.theirs.iter().any(|&n| n > 0));
        if enrolling && !enrols {
            return; // the tail: nothing changes unless someone joins
        }
        self.observed.mark_used();
        // The uplink's shares follow the links' measured speeds.
        self.port.set_costs(corrected.workers());
        let Some(Reshared { sizes, theirs, grown }) = reshared else {
            return;
        };
        self.observed.watch(&grown);
        let mut gathered: Vec<usize> = Vec::new();
        for &j in ids {
            for &q in &seq.planned()[j].pieces {
                gathered.extend(round.jobs[&seq.pieces()[q].id].iter());
            }
        }
        let mut at = 0usize;
        for (&j, &u) in ids.iter().zip(&sizes) {
            let (withdrawn, made) = seq.resize(j, at, u as usize, self.next_id);
            self.next_id = self.next_id.max(seq.next_id());
            for c in withdrawn {
                round.jobs.remove(&c.id);
                self.owner.remove(&c.id);
                self.committed[c.worker] = self.committed[c.worker].saturating_sub(c.len as u64);
            }
            for c in made {
                round.jobs.insert(c.id, Arc::from(&gathered[c.start..c.start + c.len]));
                self.owner.insert(c.id, k);
                self.committed[c.worker] += c.len as u64;
            }
            at += u as usize;
        }
        if at < gathered.len() {
            self.enrol_round(&newcomers, &theirs, &gathered[at..], now);
        }
        self.rec.adaptations.push(Adaptation {
            at: now,
            round: next,
            products: gathered.len(),
            factors: self.observed.used().to_vec(),
        });
    }

    /// A round for the `newcomers`, planned on the platform for their
    /// parts of `products` (`theirs`, in order): its products are theirs
    /// alone. If it cannot be planned, the products wait for the recovery
    /// of pending products (planned over every worker alive).
    fn enrol_round(&mut self, newcomers: &[usize], theirs: &[u64], products: &[usize], now: f64) {
        let who: Vec<usize> = (newcomers.iter().zip(theirs))
            .filter(|(_, &n)| n > 0)
            .map(|(&w, _)| w)
            .collect();
        for &w in &who {
            self.left_out[w] = false;
        }
        let req = dls_lp::Request {
            load: products.len() as u64,
            strategy: dls_lp::Strategy::Rounds,
            ports: self.port.ports(),
            rounding: dls_lp::Rounding::Refined,
        };
        match dls_lp::plan_on(&self.platform, &who, &req) {
            Ok(plan) => {
                self.rec.enrolments.push(crate::record::Enrolment {
                    at: now,
                    workers: who,
                    products: products.len(),
                    predicted: plan.makespan(),
                });
                self.add_planned(&plan, products, now);
            }
            Err(_) => {
                self.pending.extend_from_slice(products);
                self.try_recover(now);
            }
        }
    }
}
