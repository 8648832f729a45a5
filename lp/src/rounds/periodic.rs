//! A periodic plan of K rounds with lag L: period k of its sequence sends
//! round k and returns round k − L, every round cut alike (each worker's
//! part spread over the K rounds, chunks differing by one unit at most).
//! A candidate is only its shape until it is timed: the search builds its
//! chunks to time it and drops them, so that no more than one candidate's
//! chunks are held at once.

use crate::platform::Platform;
use crate::rounding::proportional;
use crate::sequence::{PortOp, RoundChunk};

/// K rounds with lag L over the enrolled workers (in send order), each
/// worker's part of the batch spread over the rounds.
#[derive(Debug, Clone)]
pub(super) struct Periodic<'a> {
    enrolled: &'a [usize],
    parts: Vec<u64>,
    pub k: usize,
    pub lag: usize,
}

impl<'a> Periodic<'a> {
    /// `None` when a chunk would not fit in its worker's memory (L + 1
    /// chunks of a worker may be out at once).
    pub fn new(
        platform: &Platform,
        enrolled: &'a [usize],
        shares: &[f64],
        load: u64,
        k: usize,
        lag: usize,
    ) -> Option<Periodic<'a>> {
        let parts = proportional(load, shares);
        let wk = platform.workers();
        let fits = (enrolled.iter().zip(&parts)).all(|(&w, &part)| {
            let largest = part.div_ceil(k.max(1) as u64);
            wk[w]
                .max_load
                .is_none_or(|b| largest.saturating_mul(lag as u64 + 1) <= b)
        });
        fits.then_some(Periodic {
            enrolled,
            parts,
            k,
            lag,
        })
    }

    /// How many chunks the whole plan has.
    pub fn chunks(&self) -> usize {
        (self.parts.iter()).map(|&part| part.min(self.k as u64) as usize).sum()
    }

    /// The chunks and port sequence. A round may have no chunk for a
    /// worker whose part is smaller than K (it starts in the first round
    /// and skips later ones).
    pub fn build(&self) -> (Vec<RoundChunk>, Vec<PortOp>) {
        let (mut chunks, mut ops) = (Vec::new(), Vec::new());
        self.build_into(&mut chunks, &mut ops);
        (chunks, ops)
    }

    /// [`Periodic::build`] into `chunks` and `ops` (emptied first), so
    /// that a search reuses its vectors from one candidate to the next:
    /// each worker's chunk in round r is its part spread over the rounds
    /// ([`crate::rounding::spread`]'s cumulative rounding), and a round's
    /// chunks are consecutive.
    pub fn build_into(&self, chunks: &mut Vec<RoundChunk>, ops: &mut Vec<PortOp>) {
        let rounds = self.k;
        chunks.clear();
        ops.clear();
        // Where each round's chunks start in `chunks` (and where the last
        // ends).
        let mut start = Vec::with_capacity(rounds + 1);
        let upto = |part: u64, r: usize| (u128::from(part) * r as u128).div_ceil(rounds.max(1) as u128) as u64;
        for r in 0..rounds {
            start.push(chunks.len());
            for (&w, &part) in self.enrolled.iter().zip(&self.parts) {
                let units = upto(part, r + 1) - upto(part, r);
                if units > 0 {
                    chunks.push(RoundChunk {
                        worker: w,
                        units,
                        round: r,
                    });
                }
            }
        }
        start.push(chunks.len());
        ops.reserve(2 * chunks.len());
        for period in 0..rounds + self.lag {
            if period < rounds {
                ops.extend((start[period]..start[period + 1]).map(PortOp::Send));
            }
            if let Some(r) = period.checked_sub(self.lag) {
                ops.extend((start[r]..start[r + 1]).map(PortOp::Return));
            }
        }
    }
}
