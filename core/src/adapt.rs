//! Online correction of a multi-round schedule (in the spirit of RUMR):
//! between rounds, the machine compares what each worker took with what
//! the platform predicted ([`Observed`]), scales the worker's costs by what it saw, and
//! shares the products of the rounds not yet sent again, in proportion to
//! the steady-state shares of the corrected platform. A worker that slowed
//! down gets less, one that sped up gets more; the planned sequence of
//! transfers stays, only chunk sizes change. When the workers enrolled
//! fall behind so far that a free worker (one the plan left out, or done
//! with its part) would add at least [`ENROL_GAIN`] to their steady-state
//! throughput, it is enrolled ([`enrol`]): it takes its share of those
//! products in a round of its own. Plain functions over plain data: the
//! machine (`machine.rs`) feeds them and applies the result.

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

/// Fewest observations an estimate rests on.
const MIN_COUNT: usize = 3;

/// The predicted time an estimate must cover, as a part of the batch's
/// predicted makespan: small chunks are timed with the noise of the
/// processor's and the network's scheduling (a worker under a CPU quota
/// computes in slices of milliseconds), which only a longer span averages
/// out.
pub const SPAN: f64 = 0.1;

/// Corrections smaller than this (relative) are noise, not a change. On a
/// machine shared by several workers under CPU quotas, their paces measured
/// over a tenth of a batch still varied by ±20% from one tenth to the next
/// without any real change, and resharing on that noise cost more than it
/// won (the test bed's star #1: 1.19–1.21× the bound corrected, 1.02×
/// not); a worker that really changes pace (a 3× slowdown) crosses 25%
/// after a few of its chunks.
pub const DEADBAND: f64 = 0.25;

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
/// latest observations that cover [`SPAN`] of the predicted makespan, at
/// least [`MIN_COUNT`] of them; there is none (the platform as calibrated)
/// until there are that many. A worker's first transfer each way and its
/// first chunk are not used: they meet a cold connection and cold caches.
#[derive(Debug, Clone)]
pub struct Observed {
    seen: Vec<[Window; 3]>,
    /// The factors the current chunk sizes were computed with.
    used: Vec<[f64; 3]>,
    span: f64,
}

impl Observed {
    /// `p` workers, a batch predicted to take `makespan` seconds.
    pub fn new(p: usize, makespan: f64) -> Observed {
        Observed {
            seen: vec![Default::default(); p],
            used: vec![[1.0; 3]; p],
            span: if makespan.is_finite() {
                SPAN * makespan.max(0.0)
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
        let q = &mut self.seen[worker][phase as usize];
        if !q.warmed {
            q.warmed = true;
            return;
        }
        q.obs.push_back((measured, predicted));
        q.measured += measured;
        q.predicted += predicted;
        while q.obs.len() > MIN_COUNT {
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
        if q.obs.len() < MIN_COUNT || q.predicted < self.span || q.predicted <= 0.0 {
            return 1.0;
        }
        q.measured / q.predicted
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

/// Steady-state throughput gain (relative) from which free workers are
/// enrolled: below it, a new round's latencies and the noise of the
/// estimates would eat what it wins.
pub const ENROL_GAIN: f64 = 0.10;

/// The free workers worth enrolling beside `enrolled` on the `corrected`
/// platform: those the steady state of all of them together gives a
/// share, when together they process at least [`ENROL_GAIN`] more a
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
    if together.throughput < alone.throughput * (1.0 + ENROL_GAIN) {
        return Vec::new();
    }
    (free.iter().zip(&together.alpha[enrolled.len()..]))
        .filter(|(_, &a)| a > 0.0)
        .map(|(&w, _)| w)
        .collect()
}

/// The workers' steady-state rates as the port will carry them: behind a
/// shared uplink, as it admits transfers (`dls_lp::admitted`: a worker
/// whose transfers do not fit beside another's gets only the time it
/// leaves), elsewhere the bound's.
fn rates(platform: &Platform, ports: Ports) -> Option<SteadyState> {
    match ports {
        Ports::Shared(u) => Some(steady_state_admitted(platform, u)),
        _ => steady_state(platform, ports).ok(),
    }
}

/// A planned chunk not yet sent: its worker, round and products now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub worker: usize,
    pub round: usize,
    pub units: u64,
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
/// shared as if it were free. Returns the slots' sizes and each
/// newcomer's part (taken from the slots, for a round of its own); `None`
/// when nothing would change or the caps cannot hold the products.
pub fn reshare(
    corrected: &Platform,
    ports: Ports,
    slots: &[Slot],
    busy: &[f64],
    cap: impl Fn(usize) -> u64,
    newcomers: &[usize],
) -> Option<(Vec<u64>, Vec<u64>)> {
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
    let caps: Vec<u64> = (enrolled.iter().zip(&of))
        .map(|(&w, mine)| cap(w).saturating_mul(mine.len() as u64))
        .chain((0..fresh.len()).map(|i| (total as f64 * ss.alpha[enrolled.len() + i] / sum).floor() as u64))
        .collect();
    let held: Vec<f64> = everyone.iter().map(|&w| busy.get(w).copied().unwrap_or(0.0)).collect();
    let parts = capped_split(total, &level(total as f64, &ss.alpha, &held), &caps)?;
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
    moved.then_some((out, theirs))
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
    fn estimates_cover_a_span_skip_the_warm_up_and_pass_a_dead_band() {
        // A batch of 10 s: estimates cover at least 1 s predicted.
        let mut o = Observed::new(2, 10.0);
        assert_eq!(o.factor(0, Phase::Compute), 1.0);
        // The first chunk, three times slower (cold caches): not used.
        o.see(0, Phase::Compute, 1.5, 0.5);
        for x in [1.05, 0.97, 1.02] {
            o.see(0, Phase::Compute, x * 0.5, 0.5);
        }
        assert!(
            (o.factor(0, Phase::Compute) - 3.04 / 3.0).abs() < 1e-12,
            "ratio of the sums"
        );
        assert!(!o.changed(), "noise within the dead band");
        // Fewer than three observations: no estimate yet.
        o.see(1, Phase::Compute, 1.0, 1.0);
        o.see(1, Phase::Compute, 1.3, 1.0);
        o.see(1, Phase::Compute, 1.3, 1.0);
        assert_eq!(o.factor(1, Phase::Compute), 1.0);
        assert!(!o.changed(), "two observations move nothing");
        o.see(1, Phase::Compute, 1.3, 1.0);
        assert!((o.factor(1, Phase::Compute) - 1.3).abs() < 1e-12);
        assert!(o.changed());
        // Short transfers: no estimate until they cover the span.
        o.see(1, Phase::Send, 0.125, 0.125);
        for _ in 0..7 {
            o.see(1, Phase::Send, 0.25, 0.125);
        }
        assert_eq!(o.factor(1, Phase::Send), 1.0, "0.875 s of 1 s covered");
        o.see(1, Phase::Send, 0.25, 0.125);
        assert!((o.factor(1, Phase::Send) - 2.0).abs() < 1e-12);
        // A lasting slowdown: the oldest observations leave the window.
        o.see(0, Phase::Return, 1.0, 1.0);
        for _ in 0..5 {
            o.see(0, Phase::Return, 1.0, 1.0);
        }
        for _ in 0..3 {
            o.see(0, Phase::Return, 3.0, 1.0);
        }
        assert!((o.factor(0, Phase::Return) - 3.0).abs() < 1e-12);
        // Bad observations are ignored (they do not even warm up).
        for bad in [(f64::NAN, 1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, f64::INFINITY)] {
            o.see(1, Phase::Return, bad.0, bad.1);
        }
        for _ in 0..3 {
            o.see(1, Phase::Return, 1.0, 1.0);
        }
        assert_eq!(o.factor(1, Phase::Return), 1.0, "the first good one warms up");
        let p = o.corrected(&star(&[1.0, 2.0]));
        assert!((p.workers()[1].w - 2.6).abs() < 1e-12);
        assert!((p.workers()[0].d - 0.03).abs() < 1e-12);
        assert!((p.workers()[1].c - 0.02).abs() < 1e-12);
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
        let same = reshare(&star(&[1.0, 1.0]), Ports::One, &slots, &[], |_| u64::MAX, &[]);
        assert_eq!(same, None, "nothing to change");
        let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[], |_| u64::MAX, &[])
            .expect("changes")
            .0;
        assert_eq!(got, [15, 5]);
        // With worker 0 capped at 12 products, the rest goes to worker 1.
        let got = reshare(
            &star(&[1.0, 3.0]),
            Ports::One,
            &slots,
            &[],
            |w| if w == 0 { 12 } else { 100 },
            &[],
        )
        .expect("changes")
        .0;
        assert_eq!(got, [12, 8]);
        // Caps that cannot hold the round: keep it as it was.
        assert_eq!(reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[], |_| 9, &[]), None);
    }

    #[test]
    fn behind_a_shared_uplink_products_go_only_where_the_port_can_carry_them() {
        // The fastest link (d), slowed to 0.065 s a unit, takes 0.76 of the
        // uplink (0.0496 s a unit), the next (c, 0.0816) 0.61: the port never
        // sends to both at once, and d's sends fill the time. The bound's
        // rates would give c the uplink's rest (1/0.0496 − 1/0.065 = 4.8 of
        // 20.2 units a second, a quarter); the port can carry none of it.
        let p = Platform::new(vec![
            Worker::new("d", 0.065, 0.02, 0.03),
            Worker::new("c", 0.0816, 0.02, 0.04),
        ])
        .expect("valid");
        let u = dls_lp::Uplink {
            send: 0.0496,
            ret: 0.02,
            duplex: true,
        };
        let slots = [(0, 100), (1, 7)].map(|(worker, units)| Slot {
            worker,
            round: 3,
            units,
        });
        let got = reshare(&p, Ports::Shared(u), &slots, &[], |_| u64::MAX, &[]).expect("changes");
        assert_eq!(got.0, [107, 0]);
        // A processor that holds d to 10 units a second leaves the lane 35%
        // of the time: c's link fills it (4.3 units a second). d comes
        // first although c could take more alone (12.3): d uses the lane's
        // time better.
        let slow = Platform::new(vec![Worker::new("d", 0.065, 0.1, 0.03), p.workers()[1].clone()]).expect("valid");
        let got = reshare(&slow, Ports::Shared(u), &slots, &[], |_| u64::MAX, &[]).expect("changes");
        let c_rate: f64 = (1.0 - 10.0 * 0.065) / 0.0816;
        assert_eq!(got.0[1], (107.0 * c_rate / (10.0 + c_rate)).round() as u64, "{got:?}");
    }

    #[test]
    fn work_already_held_counts_before_the_share() {
        let slots = [0, 1].map(|worker| Slot {
            worker,
            round: 4,
            units: 10,
        });
        // Rates 1 and 1/3 a second; worker 1 still holds 8 s of work. All
        // finish together at T = 17: worker 0 takes 17, worker 1
        // (17 − 8)/3 = 3 (were it free: 15 and 5).
        let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[0.0, 8.0], |_| u64::MAX, &[]);
        assert_eq!(got.expect("changes").0, [17, 3]);
        // Holding more than all the rest takes: nothing more.
        let got = reshare(&star(&[1.0, 3.0]), Ports::One, &slots, &[0.0, 100.0], |_| u64::MAX, &[]);
        assert_eq!(got.expect("changes").0, [20, 0]);
    }

    #[test]
    fn levels_finish_together() {
        // Closed forms: equal rates, busy 0 and 2, 4 units: T = 3.
        assert_eq!(level(4.0, &[1.0, 1.0], &[0.0, 2.0]), [3.0, 1.0]);
        // Nobody busy: in proportion to the rates.
        assert_eq!(level(6.0, &[2.0, 1.0], &[0.0, 0.0]), [4.0, 2.0]);
        // A worker of rate 0 gets nothing; the third is too busy to start.
        assert_eq!(level(3.0, &[1.0, 0.0, 1.0], &[1.0, 0.0, 9.0]), [3.0, 0.0, 0.0]);
        // Against brute force: T found by bisection, on random cases.
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 1000) as f64 / 100.0
        };
        for _ in 0..200 {
            let n = 1 + (rnd() as usize % 5);
            let rate: Vec<f64> = (0..n).map(|_| rnd() + 0.01).collect();
            let busy: Vec<f64> = (0..n).map(|_| rnd()).collect();
            let total = rnd() * 10.0;
            let sum = |t: f64| -> f64 { rate.iter().zip(&busy).map(|(r, b)| r * (t - b).max(0.0)).sum() };
            let (mut lo, mut hi) = (0.0, 1e6);
            for _ in 0..200 {
                let mid = (lo + hi) / 2.0;
                if sum(mid) < total {
                    lo = mid
                } else {
                    hi = mid
                }
            }
            let got = level(total, &rate, &busy);
            for (i, g) in got.iter().enumerate() {
                let want = rate[i] * (lo - busy[i]).max(0.0);
                assert!(
                    (g - want).abs() < 1e-6 * (1.0 + want),
                    "{rate:?} {busy:?} {total}: {got:?}"
                );
            }
        }
    }

    #[test]
    fn many_small_rounds_share_without_a_rounding_bias() {
        // 40 rounds of 3 products over 4 compute-bound workers whose
        // speeds are 6 : 3 : 2 : 1: 120 products, so 60, 30, 20 and 10.
        // Shared round by round, 3 products would go 2 : 1 : 0 : 0 (or
        // similar) every time, and the two slowest would get nothing.
        let p = star(&[1.0, 2.0, 3.0, 6.0]);
        let slots: Vec<Slot> = (0..40)
            .flat_map(|round| {
                (0..4).map(move |worker| Slot {
                    worker,
                    round,
                    units: u64::from(worker != 3),
                })
            })
            .collect();
        let got = reshare(&p, Ports::One, &slots, &[], |_| u64::MAX, &[])
            .expect("changes")
            .0;
        assert_eq!(got.iter().sum::<u64>(), 120, "every product kept");
        for (w, want) in [60u64, 30, 20, 10].into_iter().enumerate() {
            let mine: Vec<u64> = (0..slots.len())
                .filter(|&k| slots[k].worker == w)
                .map(|k| got[k])
                .collect();
            assert_eq!(mine.iter().sum::<u64>(), want, "worker {w}: {mine:?}");
            let (lo, hi) = (mine.iter().min().copied(), mine.iter().max().copied());
            assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "worker {w}: {mine:?}");
            assert!(mine[0] >= mine[mine.len() - 1], "the larger chunks first: {mine:?}");
        }
    }

    #[test]
    fn capped_split_fills_and_shares_again() {
        assert_eq!(capped_split(10, &[1.0, 1.0, 2.0], &[10, 1, 10]), Some(vec![3, 1, 6]));
        assert_eq!(capped_split(5, &[1.0, 0.0], &[3, 10]), None);
        assert_eq!(capped_split(0, &[1.0], &[0]), Some(vec![0]));
    }
}
