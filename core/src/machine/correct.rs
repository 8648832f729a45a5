//! Online correction inside the batch machine: the decision is
//! `core/src/adapt.rs`'s; this applies it to the running round (resizing its
//! unsent chunks and moving their products).

use super::BatchMachine;
use crate::adapt::{reshare, Slot};
use crate::record::Adaptation;
use crate::schedule::Schedule;
use dls_protocol::ChunkId;
use std::sync::Arc;

impl BatchMachine {
    /// Online correction: when the last send of a round of a multi-round
    /// plan is over and the speeds seen have moved beyond the dead band,
    /// the chunks of the later rounds not yet sent are resized
    /// (`adapt.rs`); their products move between them.
    pub(super) fn maybe_adapt(&mut self, k: usize, sent: ChunkId, now: f64) {
        if !self.cfg.adapt || !self.observed.changed() {
            return;
        }
        let ports = self.port.ports();
        let round = &mut self.rounds[k];
        let Schedule::Planned(seq) = &mut round.sched else {
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
        let corrected = self.observed.corrected(&self.platform);
        // Work each worker holds, at its corrected pace: it takes new
        // products only after that.
        let busy: Vec<f64> = (seq.in_hand(wk.len()).iter().zip(corrected.workers()))
            .map(|(&u, w)| u as f64 * w.w)
            .collect();
        let Some(sizes) = reshare(&corrected, ports, &slots, &busy, cap) else {
            return;
        };
        let mut gathered: Vec<usize> = Vec::new();
        for &j in &ids {
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
        debug_assert_eq!(at, gathered.len(), "every product of the resized chunks placed once");
        tracing::debug!(round = next, products = at, "online correction");
        self.rec.adaptations.push(Adaptation {
            at: now,
            round: next,
            products: at,
            factors: self.observed.used().to_vec(),
        });
    }
}
