//! Where the search for more rounds stops: round counts that stall
//! ([`Stall`]), and lags that can no longer come near the best ([`Lags`]).

use super::Candidate;
use crate::TUNING;

/// Round counts whose candidates have brought no gain worth their chunks
/// end the search for more rounds.
///
/// A periodic plan of K rounds predicts about T∞ + A/K (the first sends
/// and the last returns shrink with the chunks) + B·K (latencies, where
/// the platform knows them). While the A/K part dominates, the gain from K
/// to 2.4K (three steps of a third) is 0.58·A/K and all that any larger K
/// can still gain is 0.42·A/K, less than it. So once three steps have
/// gained less than a tenth of the slack, more rounds can gain less than
/// a tenth of it more, and the choice among candidates within the slack
/// of the best (fewest chunks) moves by no more than that: the search
/// stops there rather than timing every round count up to `TUNING.max_chunks`
/// chunks, which made plans grow with the batch (3,000 products on the
/// committed platform files: a median of 2.3 s to plan, up to 7.6 s; 0.2
/// and 0.8 s with the stop, docs/planner.md). A quarter of the slack
/// stopped sooner, but moved a paced plan's prediction past the gain
/// pacing must show (`paced::pace_verdict`) on one star.
pub(super) struct Stall {
    /// The best makespans (strict; without latencies) after each round count.
    best: Vec<(f64, f64)>,
    gain: f64,
}

/// The lags still worth timing as the round count grows. A lag's
/// candidates follow the same T∞ + A/K curve as [`Stall`] reckons with, so
/// what more rounds can still gain it is less than what its last
/// `TUNING.stall_steps` round counts gained: once even that much more would
/// leave it further than the slack from the best found so far (strictly in
/// order, and without latencies where the platform has some), its larger
/// round counts are not timed. On random stars behind an uplink lag 0
/// trails the others by half the makespan from a few rounds on, and
/// where one of lags 1 and 2 leads by more than the slack the other drops
/// out too: about half of the chunks timed.
pub(super) struct Lags {
    /// Each lag's best makespans (strict; without latencies) after each
    /// round count it was timed at, and whether it is still timed.
    best: [Vec<(f64, f64)>; TUNING.lags],
    alive: [bool; TUNING.lags],
    slack: f64,
}

impl Lags {
    pub(super) fn new(slack: f64) -> Lags {
        Lags {
            best: Default::default(),
            alive: [true; TUNING.lags],
            slack,
        }
    }

    pub(super) fn timed(&self, lag: usize) -> bool {
        self.alive[lag]
    }

    /// Whether no lag is timed any more.
    pub(super) fn none(&self) -> bool {
        !self.alive.contains(&true)
    }

    /// The least strict makespan the lags still timed can reach at more
    /// rounds (what each has, less what its last `TUNING.stall_steps` round
    /// counts gained); `None` while one of them has too few round counts
    /// behind it to tell.
    pub(super) fn reach(&self) -> Option<f64> {
        let mut least = f64::INFINITY;
        for lag in (0..TUNING.lags).filter(|&l| self.alive[l]) {
            let past = &self.best[lag];
            let then = past.len().checked_sub(TUNING.stall_steps + 1).map(|i| past[i].0)?;
            let now = past.last()?.0;
            if !then.is_finite() {
                return None;
            }
            least = least.min(now - (then - now).max(0.0));
        }
        Some(least)
    }

    /// Record one round count's candidates (of the lags still timed) and
    /// drop the lags that can no longer come within the slack of the best
    /// of `all` so far.
    pub(super) fn record(&mut self, these: &[Candidate], all: &[Candidate]) {
        let least = |f: &dyn Fn(&Candidate) -> f64| all.iter().map(f).fold(f64::INFINITY, f64::min);
        let (with, without) = (least(&|c| c.strict), least(&|c| c.without.unwrap_or(0.0)));
        for lag in 0..TUNING.lags {
            let mine = these.iter().filter(|c| c.lag == lag);
            let now = mine.fold((f64::INFINITY, f64::INFINITY), |a, c| {
                (a.0.min(c.strict), a.1.min(c.without.unwrap_or(0.0)))
            });
            let past = &mut self.best[lag];
            let now = past.last().map_or(now, |l| (now.0.min(l.0), now.1.min(l.1)));
            past.push(now);
            // A lag whose chunks did not fit the workers' memory yet may
            // at more rounds (smaller chunks).
            let Some(&then) = (past.len().checked_sub(TUNING.stall_steps + 1))
                .map(|i| &past[i])
                .filter(|then| then.0.is_finite())
            else {
                continue;
            };
            // The least this lag can still reach: what it has, less what
            // its last steps gained.
            let reach = |now: f64, then: f64| now - (then - now).max(0.0);
            let far = |reach: f64, best: f64| reach > best * (1.0 + self.slack);
            if far(reach(now.0, then.0), with) && (without == 0.0 || far(reach(now.1, then.1), without)) {
                self.alive[lag] = false;
            }
        }
    }
}

impl Stall {
    pub(super) fn new(slack: f64) -> Stall {
        Stall {
            best: Vec::new(),
            gain: slack / 10.0,
        }
    }

    /// Record one more round count's candidates; whether the last
    /// `TUNING.stall_steps` round counts gained too little to go on. (Only the
    /// periodic candidates count: the one-round plan may be ahead of the
    /// first round counts, which then gain on each other until they pass
    /// it.)
    pub(super) fn stalled(&mut self, these: &[Candidate]) -> bool {
        let least = |f: &dyn Fn(&Candidate) -> f64| these.iter().map(f).fold(f64::INFINITY, f64::min);
        let mut now = (least(&|c| c.strict), least(&|c| c.without.unwrap_or(0.0)));
        if let Some(last) = self.best.last() {
            now = (now.0.min(last.0), now.1.min(last.1));
        }
        self.best.push(now);
        let Some(&then) = self
            .best
            .len()
            .checked_sub(TUNING.stall_steps + 1)
            .map(|i| &self.best[i])
        else {
            return false;
        };
        let little = |a: f64, b: f64| a.is_finite() && b >= a * (1.0 - self.gain);
        little(then.0, now.0) && (then.1 == 0.0 || little(then.1, now.1))
    }
}
