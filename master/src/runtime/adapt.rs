//! Online correction of a multi-round schedule (in the spirit of RUMR):
//! between rounds, the machine compares what each worker took with what
//! the platform predicted, scales the worker's costs by what it saw, and
//! shares the products of the rounds not yet sent again, in proportion to
//! the steady-state shares of the corrected platform. A worker that slowed
//! down gets less, one that sped up gets more; the planned sequence of
//! transfers stays, only chunk sizes change. Plain functions over plain
//! data: the machine (`machine.rs`) feeds them and applies the result.

use dls_lp::bound::steady_state;
use dls_lp::{Platform, Ports, Worker};
use std::collections::VecDeque;

/// A worker's three costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Send = 0,
    Compute = 1,
    Return = 2,
}

/// Observations kept per worker and phase; the estimate is their median,
/// and there is none until the window is full: one noisy transfer (the
/// first on a cold connection, a chunk that met a busy processor) never
/// moves a worker's share by itself.
const WINDOW: usize = 3;

/// Corrections smaller than this (relative) are noise, not a change.
pub const DEADBAND: f64 = 0.10;

/// What was seen of each worker: measured over predicted time, the last
/// few of each phase.
#[derive(Debug, Clone)]
pub struct Observed {
    seen: Vec<[VecDeque<f64>; 3]>,
    /// The factors the current chunk sizes were computed with.
    used: Vec<[f64; 3]>,
}

impl Observed {
    pub fn new(p: usize) -> Observed {
        Observed {
            seen: vec![Default::default(); p],
            used: vec![[1.0; 3]; p],
        }
    }

    /// `worker` took `measured` seconds for what the platform predicts
    /// takes `predicted`. Ignored unless both are positive and finite.
    pub fn see(&mut self, worker: usize, phase: Phase, measured: f64, predicted: f64) {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(measured) && ok(predicted)) || worker >= self.seen.len() {
            return;
        }
        let q = &mut self.seen[worker][phase as usize];
        if q.len() == WINDOW {
            q.pop_front();
        }
        q.push_back(measured / predicted);
    }

    /// The current estimate of measured / predicted: the median of the
    /// last [`WINDOW`] observations, 1 (the platform as calibrated) until
    /// there are that many.
    pub fn factor(&self, worker: usize, phase: Phase) -> f64 {
        let mut v: Vec<f64> = self.seen[worker][phase as usize].iter().copied().collect();
        if v.len() < WINDOW {
            return 1.0;
        }
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// Whether any worker's estimate moved beyond the dead band since the
    /// sizes were last computed.
    pub fn changed(&self) -> bool {
        (0..self.seen.len()).any(|w| {
            [Phase::Send, Phase::Compute, Phase::Return]
                .iter()
                .any(|&ph| (self.factor(w, ph) / self.used[w][ph as usize] - 1.0).abs() > DEADBAND)
        })
    }

    /// The factors in use, per worker (send, compute, return).
    pub fn used(&self) -> &[[f64; 3]] {
        &self.used
    }

    /// The platform with every worker's costs scaled by its estimates
    /// (latencies as they were); marks the estimates as used.
    pub fn corrected(&mut self, base: &Platform) -> Platform {
        let workers: Vec<Worker> = base
            .workers()
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let f = [Phase::Send, Phase::Compute, Phase::Return].map(|ph| self.factor(i, ph));
                self.used[i] = f;
                Worker {
                    c: w.c * f[0],
                    w: w.w * f[1],
                    d: w.d * f[2],
                    ..w.clone()
                }
            })
            .collect();
        Platform::new(workers).unwrap_or_else(|_| base.clone())
    }
}

/// A planned chunk not yet sent: its worker, round and products now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub worker: usize,
    pub round: usize,
    pub units: u64,
}

/// New sizes for `slots` on the `corrected` platform: each round keeps its
/// total, shared over the round's workers in proportion to their
/// steady-state shares (computed over the workers that have slots), no
/// chunk above `cap(worker)` products. `None` when nothing would change or
/// the caps cannot hold a round.
pub fn reshare(corrected: &Platform, ports: Ports, slots: &[Slot], cap: impl Fn(usize) -> u64) -> Option<Vec<u64>> {
    let wk = corrected.workers();
    let mut enrolled: Vec<usize> = slots.iter().map(|s| s.worker).collect();
    enrolled.sort_unstable();
    enrolled.dedup();
    let sub = Platform::new(enrolled.iter().map(|&w| wk[w].clone()).collect()).ok()?;
    let ss = steady_state(&sub, ports).ok()?;
    let share = |w: usize| enrolled.binary_search(&w).map_or(0.0, |i| ss.alpha[i]);
    let mut out: Vec<u64> = slots.iter().map(|s| s.units).collect();
    let mut rounds: Vec<usize> = slots.iter().map(|s| s.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    for r in rounds {
        let idx: Vec<usize> = (0..slots.len()).filter(|&k| slots[k].round == r).collect();
        let total: u64 = idx.iter().map(|&k| slots[k].units).sum();
        let weights: Vec<f64> = idx.iter().map(|&k| share(slots[k].worker)).collect();
        let caps: Vec<u64> = idx.iter().map(|&k| cap(slots[k].worker)).collect();
        if let Some(split) = capped_split(total, &weights, &caps) {
            for (pos, &k) in idx.iter().enumerate() {
                out[k] = split[pos];
            }
        }
    }
    (out.iter().zip(slots).any(|(&u, s)| u != s.units)).then_some(out)
}

/// `total` split in proportion to `weights` (whole units), none above its
/// cap: capped entries are filled and the rest shared again among the
/// others. `None` if the caps (or the positive weights) cannot hold it.
fn capped_split(total: u64, weights: &[f64], caps: &[u64]) -> Option<Vec<u64>> {
    let mut out = vec![0u64; weights.len()];
    let mut open: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
    let mut left = total;
    while left > 0 {
        if open.is_empty() {
            return None;
        }
        let w: Vec<f64> = open.iter().map(|&i| weights[i]).collect();
        let split = dls_lp::baseline::proportional(left, &w);
        let over: Vec<usize> = (0..open.len())
            .filter(|&k| out[open[k]] + split[k] > caps[open[k]])
            .collect();
        if over.is_empty() {
            for (k, &i) in open.iter().enumerate() {
                out[i] += split[k];
            }
            left = 0;
        } else {
            for &k in &over {
                let i = open[k];
                left -= caps[i] - out[i];
                out[i] = caps[i];
            }
            open = open
                .iter()
                .enumerate()
                .filter(|(k, _)| !over.contains(k))
                .map(|(_, &i)| i)
                .collect();
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn star(ws: &[f64]) -> Platform {
        Platform::new(
            ws.iter()
                .enumerate()
                .map(|(i, &w)| Worker::new(format!("w{i}"), 0.01, w, 0.01))
                .collect(),
        )
        .expect("valid")
    }

    #[test]
    fn estimates_are_medians_and_changes_pass_a_dead_band() {
        let mut o = Observed::new(2);
        assert_eq!(o.factor(0, Phase::Compute), 1.0);
        for x in [1.05, 0.97, 1.02] {
            o.see(0, Phase::Compute, x, 1.0);
        }
        assert!(!o.changed(), "noise within the dead band");
        // A first chunk three times slower (a cold connection, a busy
        // processor): not enough to go on.
        o.see(1, Phase::Compute, 3.0, 1.0);
        assert_eq!(o.factor(1, Phase::Compute), 1.0);
        assert!(!o.changed(), "one observation moves nothing");
        o.see(1, Phase::Compute, 1.0, 1.0);
        assert!(!o.changed(), "nor do two");
        o.see(1, Phase::Compute, 1.3, 1.0);
        assert_eq!(o.factor(1, Phase::Compute), 1.3, "median of 3.0, 1.0, 1.3");
        assert!(o.changed());
        // A lasting slowdown shows after two chunks of it.
        o.see(0, Phase::Return, 1.0, 1.0);
        o.see(0, Phase::Return, 3.0, 1.0);
        o.see(0, Phase::Return, 3.0, 1.0);
        assert_eq!(o.factor(0, Phase::Return), 3.0);
        for _ in 0..3 {
            o.see(1, Phase::Send, 1.2, 1.0);
        }
        o.see(1, Phase::Send, f64::NAN, 1.0);
        o.see(1, Phase::Send, 1.0, 0.0);
        o.see(1, Phase::Send, -1.0, 1.0);
        assert_eq!(o.factor(1, Phase::Send), 1.2, "bad observations are ignored");
        let p = o.corrected(&star(&[1.0, 2.0]));
        assert!((p.workers()[1].w - 2.6).abs() < 1e-12);
        assert!((p.workers()[0].d - 0.03).abs() < 1e-12);
        assert!((p.workers()[1].c - 0.012).abs() < 1e-12);
        assert!(!o.changed(), "the estimates in use");
    }

    #[test]
    fn a_slower_worker_gets_less_and_totals_stay() {
        // Two equal compute-bound workers, round of 20: 10 and 10. Worker 1
        // becomes 3× slower: steady-state shares 1 : 1/3, so 15 and 5.
        let slots = [
            Slot {
                worker: 0,
                round: 4,
                units: 10,
            },
            Slot {
                worker: 1,
                round: 4,
                units: 10,
            },
        ];
        let same = reshare(&star(&[1.0, 1.0]), Ports::One, &slots, |_| u64::MAX);
        assert_eq!(same, None, "nothing to change");
        let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, |_| u64::MAX).expect("changes");
        assert_eq!(got, [15, 5]);
        // With worker 0 capped at 12 products, the rest goes to worker 1.
        let got = reshare(
            &star(&[1.0, 3.0]),
            Ports::One,
            &slots,
            |w| if w == 0 { 12 } else { 100 },
        )
        .expect("changes");
        assert_eq!(got, [12, 8]);
        // Caps that cannot hold the round: keep it as it was.
        assert_eq!(reshare(&star(&[1.0, 3.0]), Ports::One, &slots, |_| 9), None);
    }

    #[test]
    fn capped_split_fills_and_shares_again() {
        assert_eq!(capped_split(10, &[1.0, 1.0, 2.0], &[10, 1, 10]), Some(vec![3, 1, 6]));
        assert_eq!(capped_split(5, &[1.0, 0.0], &[3, 10]), None);
        assert_eq!(capped_split(0, &[1.0], &[0]), Some(vec![0]));
    }
}
