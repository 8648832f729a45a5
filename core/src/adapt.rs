//! Online correction of a multi-round schedule (in the spirit of RUMR):
//! between rounds, the machine compares what each worker took with what
//! the platform predicted ([`Observed`]), scales the worker's costs by what it saw, and
//! shares the products of the rounds not yet sent again, in proportion to
//! the steady-state shares of the corrected platform. A worker that slowed
//! down gets less, one that sped up gets more; the planned sequence of
//! transfers stays, only chunk sizes change. When the workers enrolled
//! fall behind so far that a free worker (one the plan left out, or done
//! with its part) would add at least `TUNING.enrol_gain` to their steady-state
//! throughput, it is enrolled ([`enrol`]): it takes its share of those
//! products in a round of its own. Plain functions over plain data: the
//! machine (`machine.rs`) feeds them and applies the result.

use crate::TUNING;
use dls_lp::admitted::steady_state_admitted;
use dls_lp::bound::{steady_state, SteadyState};
use dls_lp::rounding::spread;
use dls_lp::{Platform, Ports, Worker};
use std::collections::VecDeque;

/// A worker's three costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Send = 0,
    Compute = 1,
    Return = 2,
}

/// One worker's observations of one phase: (measured, predicted) seconds,
/// the newest last, as few as cover the span.
#[derive(Debug, Clone, Default)]
struct Window {
    warmed: bool,
    obs: VecDeque<(f64, f64)>,
    measured: f64,
    predicted: f64,
}

/// What was seen of each worker: measured against predicted time per
/// phase. The estimate of a phase is the ratio of the sums over the
/// latest observations that cover `TUNING.span` of the predicted makespan, at
/// least `TUNING.min_count` of them; there is none (the platform as calibrated)
/// until there are that many. A worker's first transfer each way and its
/// first chunk are not used: they meet a cold connection and cold caches.
#[derive(Debug, Clone)]
pub struct Observed {
    seen: Vec<[Window; 3]>,
    /// The factors the current chunk sizes were computed with.
    used: Vec<[f64; 3]>,
    span: f64,
    /// Workers whose parts the last correction grew only as far as
    /// `TUNING.growth` allows, and the predicted seconds of each worker's
    /// observations since then: once those cover the span for all of them,
    /// the products are shared again on what their larger parts showed.
    watch: Vec<usize>,
    since: Vec<f64>,
}

impl Observed {
    /// `p` workers, a batch predicted to take `makespan` seconds.
    pub fn new(p: usize, makespan: f64) -> Observed {
        Observed {
            seen: vec![Default::default(); p],
            used: vec![[1.0; 3]; p],
            watch: Vec::new(),
            since: vec![0.0; p],
            span: if makespan.is_finite() {
                TUNING.span * makespan.max(0.0)
            } else {
                0.0
            },
        }
    }

    /// `worker` took `measured` seconds for what the platform predicts
    /// takes `predicted`. Ignored unless both are positive and finite.
    pub fn see(&mut self, worker: usize, phase: Phase, measured: f64, predicted: f64) {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(measured) && ok(predicted)) || worker >= self.seen.len() {
            return;
        }
        self.since[worker] += predicted;
        let q = &mut self.seen[worker][phase as usize];
        if !q.warmed {
            q.warmed = true;
            return;
        }
        q.obs.push_back((measured, predicted));
        q.measured += measured;
        q.predicted += predicted;
        while q.obs.len() > TUNING.min_count {
            let (m, p) = q.obs[0];
            if q.predicted - p < self.span {
                break;
            }
            q.obs.pop_front();
            q.measured -= m;
            q.predicted -= p;
        }
    }

    /// The current estimate of measured / predicted: 1 (the platform as
    /// calibrated) until the observations cover the span.
    pub fn factor(&self, worker: usize, phase: Phase) -> f64 {
        let q = &self.seen[worker][phase as usize];
        if q.obs.len() < TUNING.min_count || q.predicted < self.span || q.predicted <= 0.0 {
            return 1.0;
        }
        q.measured / q.predicted
    }

    /// Whether any worker's estimate moved beyond the dead band since the
    /// sizes were last computed, or the workers a capped correction grew
    /// have since been seen for the span ([`Observed::watch`]).
    pub fn changed(&self) -> bool {
        let grown = !self.watch.is_empty() && self.watch.iter().all(|&w| self.since[w] >= self.span);
        grown
            || (0..self.seen.len()).any(|w| {
                [Phase::Send, Phase::Compute, Phase::Return]
                    .iter()
                    .any(|&ph| (self.factor(w, ph) / self.used[w][ph as usize] - 1.0).abs() > TUNING.deadband)
            })
    }

    /// The last correction grew `workers`' parts only as far as
    /// `TUNING.growth` allows: share again once they have been seen for the
    /// span with their larger parts, whether or not their estimates move.
    pub fn watch(&mut self, workers: &[usize]) {
        self.watch = workers.iter().copied().filter(|&w| w < self.since.len()).collect();
    }

    /// The factors in use, per worker (send, compute, return).
    pub fn used(&self) -> &[[f64; 3]] {
        &self.used
    }

    /// The platform with every worker's costs scaled by its estimates
    /// (latencies as they were); marks the estimates as used.
    pub fn corrected(&mut self, base: &Platform) -> Platform {
        self.mark_used();
        self.peek(base)
    }

    /// Marks the current estimates as those the chunk sizes are computed
    /// with (what [`Observed::corrected`] does besides the platform).
    pub fn mark_used(&mut self) {
        self.watch.clear();
        self.since.fill(0.0);
        self.used = (0..self.used.len())
            .map(|i| [Phase::Send, Phase::Compute, Phase::Return].map(|ph| self.factor(i, ph)))
            .collect();
    }

    /// The platform [`Observed::corrected`] gives, the estimates left as
    /// they were.
    pub fn peek(&self, base: &Platform) -> Platform {
        let workers: Vec<Worker> = base
            .workers()
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let f = [Phase::Send, Phase::Compute, Phase::Return].map(|ph| self.factor(i, ph));
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

/// The free workers worth enrolling beside `enrolled` on the `corrected`
/// platform: those the steady state of all of them together gives a
/// share, when together they process at least `TUNING.enrol_gain` more a
/// second than `enrolled` alone. Empty otherwise.
pub fn enrol(corrected: &Platform, ports: Ports, enrolled: &[usize], free: &[usize]) -> Vec<usize> {
    let wk = corrected.workers();
    let rate = |ws: &[usize]| {
        let sub = Platform::new(ws.iter().map(|&w| wk[w].clone()).collect()).ok()?;
        rates(&sub, ports)
    };
    let all: Vec<usize> = enrolled.iter().chain(free).copied().collect();
    let (Some(alone), Some(together)) = (rate(enrolled), rate(&all)) else {
        return Vec::new();
    };
    if together.throughput < alone.throughput * (1.0 + TUNING.enrol_gain) {
        return Vec::new();
    }
    (free.iter().zip(&together.alpha[enrolled.len()..]))
        .filter(|(_, &a)| a > 0.0)
        .map(|(&w, _)| w)
        .collect()
}

/// The workers' steady-state rates as the port will carry them: behind a
/// shared uplink, as it admits transfers (`dls_lp::admitted`: a worker
/// whose transfers do not fit beside another's gets the time it leaves
/// and the room beside it), elsewhere the bound's.
fn rates(platform: &Platform, ports: Ports) -> Option<SteadyState> {
    match ports.uplink() {
        Some(u) => Some(steady_state_admitted(platform, u)),
        None => steady_state(platform, ports).ok(),
    }
}

/// A planned chunk not yet sent: its worker, round and products now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub worker: usize,
    pub round: usize,
    pub units: u64,
}

/// What [`reshare`] decided: the slots' new sizes, each newcomer's part,
/// and the workers held at `TUNING.growth` (they would have taken more).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reshared {
    pub sizes: Vec<u64>,
    pub theirs: Vec<u64>,
    pub grown: Vec<usize>,
}

/// New sizes for `slots` on the `corrected` platform: their products are
/// shared over the workers that have slots and the `newcomers` so that they
/// all finish together, each taking them at its steady-state rate
/// (computed over those workers) once it is through `busy[worker]`
/// seconds of work it already holds ([`level`]); no chunk above
/// `cap(worker)` products. Each worker's part is spread over its slots in
/// round order (`dls_lp::rounding::spread`), so its chunks differ by at
/// most one product and no worker loses or gains a product to rounding in
/// every round. A worker that slowed down still holds chunks sized for its
/// old pace: without `busy` the products it cannot reach in time would be
/// shared as if it were free. No enrolled worker's part grows beyond
/// `TUNING.growth`; what the others cannot take either stays in proportion to
/// their parts. Returns the slots' sizes, each newcomer's part (taken
/// from the slots, for a round of its own) and the workers held back;
/// `None` when nothing would change or the caps cannot hold the products.
pub fn reshare(
    corrected: &Platform,
    ports: Ports,
    slots: &[Slot],
    busy: &[f64],
    cap: impl Fn(usize) -> u64,
    newcomers: &[usize],
) -> Option<Reshared> {
    let wk = corrected.workers();
    let mut enrolled: Vec<usize> = slots.iter().map(|s| s.worker).collect();
    enrolled.sort_unstable();
    enrolled.dedup();
    let fresh: Vec<usize> = newcomers.iter().copied().filter(|w| !enrolled.contains(w)).collect();
    let everyone: Vec<usize> = enrolled.iter().chain(&fresh).copied().collect();
    let sub = Platform::new(everyone.iter().map(|&w| wk[w].clone()).collect()).ok()?;
    let ss = rates(&sub, ports)?;
    // Each worker's slots, in round order.
    let mut of: Vec<Vec<usize>> = vec![Vec::new(); enrolled.len()];
    let mut order: Vec<usize> = (0..slots.len()).collect();
    order.sort_by_key(|&k| slots[k].round);
    for k in order {
        if let Ok(i) = enrolled.binary_search(&slots[k].worker) {
            of[i].push(k);
        }
    }
    let total: u64 = slots.iter().map(|s| s.units).sum();
    // A newcomer takes at most its steady-state share of the products
    // (its costs are the platform's, not yet seen: water filling against
    // the enrolled workers' backlog would give it everything); its round
    // is planned for its memory.
    let sum: f64 = ss.alpha.iter().sum();
    let old: Vec<u64> = (of.iter())
        .map(|mine| mine.iter().map(|&k| slots[k].units).sum())
        .chain(fresh.iter().map(|_| 0))
        .collect();
    let grow = |part: u64, n: usize| ((part as f64 * TUNING.growth) as u64).max(part.saturating_add(n as u64));
    let caps: Vec<u64> = (enrolled.iter().zip(&of).zip(&old))
        .map(|((&w, mine), &part)| cap(w).saturating_mul(mine.len() as u64).min(grow(part, mine.len())))
        .chain((0..fresh.len()).map(|i| (total as f64 * ss.alpha[enrolled.len() + i] / sum).floor() as u64))
        .collect();
    let held: Vec<f64> = everyone.iter().map(|&w| busy.get(w).copied().unwrap_or(0.0)).collect();
    let wanted = level(total as f64, &ss.alpha, &held);
    let kept: Vec<f64> = old.iter().map(|&u| u as f64).collect();
    let parts = capped_split(total, &wanted, &kept, &caps)?;
    // Held back by the growth cap: given all it could take, short of its
    // share of the products.
    let grown: Vec<usize> = (0..enrolled.len())
        .filter(|&i| parts[i] > old[i] && parts[i] == caps[i] && parts[i] as f64 + 0.5 < wanted[i])
        .map(|i| enrolled[i])
        .collect();
    let mut out = vec![0u64; slots.len()];
    for (mine, &part) in of.iter().zip(&parts) {
        for (&slot, units) in mine.iter().zip(spread(part, mine.len())) {
            out[slot] = units;
        }
    }
    let theirs: Vec<u64> = newcomers
        .iter()
        .map(|w| {
            fresh
                .iter()
                .position(|f| f == w)
                .map_or(0, |i| parts[enrolled.len() + i])
        })
        .collect();
    let moved = out.iter().zip(slots).any(|(&u, s)| u != s.units);
    moved.then_some(Reshared {
        sizes: out,
        theirs,
        grown,
    })
}

/// Parts of `total` for workers taking `rate[i]` units a second once free
/// after `busy[i]` seconds, such that all that get a part finish together:
/// `rate[i] · max(0, T − busy[i])` for the one `T` where they add up to
/// `total` (water filling: the least busy start first).
pub fn level(total: f64, rate: &[f64], busy: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..rate.len()).filter(|&i| rate[i] > 0.0).collect();
    order.sort_by(|&a, &b| busy[a].total_cmp(&busy[b]));
    let (mut sum_r, mut sum_rb, mut t) = (0.0, 0.0, 0.0);
    for (k, &i) in order.iter().enumerate() {
        sum_r += rate[i];
        sum_rb += rate[i] * busy[i];
        t = (total + sum_rb) / sum_r;
        if order.get(k + 1).is_none_or(|&j| t <= busy[j]) {
            break;
        }
    }
    rate.iter()
        .zip(busy)
        .map(|(&r, &b)| if r > 0.0 { r * (t - b).max(0.0) } else { 0.0 })
        .collect()
}

/// `total` split in proportion to `weights` (whole units), none above its
/// cap: capped entries are filled and the rest shared again among the
/// others; what those with positive weights cannot hold goes to the
/// others in proportion to `then`. `None` if the caps (or the positive
/// weights) cannot hold it.
fn capped_split(total: u64, weights: &[f64], then: &[f64], caps: &[u64]) -> Option<Vec<u64>> {
    let mut out = vec![0u64; weights.len()];
    let (mut by, mut fell_back) = (weights, false);
    let mut open: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
    let mut left = total;
    while left > 0 {
        if open.is_empty() && !fell_back {
            (by, fell_back) = (then, true);
            open = (0..weights.len())
                .filter(|&i| then[i] > 0.0 && out[i] < caps[i])
                .collect();
        }
        if open.is_empty() {
            return None;
        }
        let w: Vec<f64> = open.iter().map(|&i| by[i]).collect();
        let split = dls_lp::rounding::proportional(left, &w);
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
mod tests;
