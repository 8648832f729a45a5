//! A periodic plan of K rounds with lag L: period k of its sequence sends
//! round k and returns round k − L, every round cut alike (each worker's
//! part spread over the K rounds, chunks differing by one unit at most).
//! A candidate is only its shape until it is timed: the search builds its
//! chunks to time it and drops them, so that no more than one candidate's
//! chunks are held at once.

use crate::platform::Platform;
use crate::rounding::{proportional, spread};
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
        let rounds = self.k;
        let per_round: Vec<Vec<u64>> = (self.parts.iter())
            .map(|&part| spread(part, self.k).take(rounds).collect())
            .collect();
        let mut chunks = Vec::new();
        let mut by_round: Vec<Vec<usize>> = Vec::with_capacity(rounds);
        for r in 0..rounds {
            let mut these = Vec::new();
            for (pos, &w) in self.enrolled.iter().enumerate() {
                let units = per_round[pos][r];
                if units > 0 {
                    these.push(chunks.len());
                    chunks.push(RoundChunk {
                        worker: w,
                        units,
                        round: r,
                    });
                }
            }
            by_round.push(these);
        }
        let mut ops = Vec::with_capacity(2 * chunks.len());
        for period in 0..rounds + self.lag {
            if let Some(sends) = by_round.get(period) {
                ops.extend(sends.iter().map(|&j| PortOp::Send(j)));
            }
            if period >= self.lag {
                ops.extend(by_round[period - self.lag].iter().map(|&j| PortOp::Return(j)));
            }
        }
        (chunks, ops)
    }
}
