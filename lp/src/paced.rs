//! Paced plans behind a shared uplink: the plain plan beside the same
//! plan on the platform with paced sends ([`crate::pace`]), and the verdict
//! on which to run.

use crate::choice::{self, Kind};
use crate::error::Result;
use crate::pace::Pace;
use crate::plan::{plan, Plan, Request, Strategy};
use crate::platform::Platform;
use crate::schedule::Ports;
use crate::TUNING;

pub use crate::choice::pace_gain;

/// Whether a paced plan is taken over the plain one ([`plan_paced`]),
/// ordered from the verdict wanted most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PaceVerdict {
    /// It wins by the margin asked of it ([`choice::Candidate::new`]): paced.
    Paced,
    /// It wins by `TUNING.pace_gain`, not by what costs not measured under load
    /// must show: plain, with a note saying so.
    Unmeasured,
    /// Plain.
    Plain,
}

/// The verdict on a paced plan predicting `paced` seconds against `plain`
/// for the plain one, on `platform` under `ports`, by the one choice
/// between candidates ([`crate::choice`]). `fitted`: the paces are
/// [`crate::pace::fitted`]'s, which must win by `TUNING.pace_gain`
/// whatever the costs. Cold runs (costs from the run's own probes) of
/// five stars, in turn with the build that asked fitted paces 15% there:
/// 0.89-0.98× as long (medians), 0.96-1.09× their predictions when paced
/// (`docs/planner.md`).
pub fn pace_verdict(platform: &Platform, ports: Ports, plain: f64, paced: f64, fitted: bool) -> PaceVerdict {
    let kind = if fitted { Kind::Fitted } else { Kind::Paced };
    let plain = choice::Candidate::new(Kind::Plain, plain, platform, ports);
    if choice::Candidate::new(kind, paced, platform, ports).beats(&plain) {
        PaceVerdict::Paced
    } else if choice::Candidate::new(Kind::Fitted, paced, platform, ports).beats(&plain) {
        PaceVerdict::Unmeasured
    } else {
        PaceVerdict::Plain
    }
}

/// [`plan`], and behind a shared full-duplex uplink, for `best` and
/// `rounds`, the same on the platform with paced sends ([`crate::pace`]:
/// [`crate::pace::paces`] and each of [`crate::pace::fitted`]): the
/// earliest of them whose verdict ([`pace_verdict`]) is to pace.
/// The paces are part of the plan ([`Plan::pace`]); `platform` stays the
/// links' own, and [`Plan::costs_on`] gives the costs it was timed on.
///
/// A paced candidate is planned only if it could be taken: no plan ends
/// before its platform's steady-state bound, so a candidate whose bound
/// is already past what the verdict asks against the plain plan, or past
/// a paced plan that the verdict takes, is not planned (`Screen`). The
/// plain plan and the candidates (most promising bound first) share the
/// machine's threads: planning is on the path to a run's first send.
pub fn plan_paced(platform: &Platform, req: &Request) -> Result<Plan> {
    plan_paced_beside(platform, req, || ()).0
}

/// [`plan_paced`], and `beside` (work the caller needs beside the plan,
/// such as the equivalent homogeneous plan `dls plan` reports) run on the
/// machine's threads first: a paced candidate planned before the plain
/// plan is known may be thrown away once it is, so it only takes a thread
/// that nothing needed is left for. (On two cores, `dls plan` of 100,000
/// products behind an uplink on 96 stars of `scripts/plan-time.sh` took
/// 28% less time in all than with the candidates beside the plain plan
/// from the start, the slowest 45 ms against 57.)
pub fn plan_paced_beside<T: Send>(
    platform: &Platform,
    req: &Request,
    beside: impl FnOnce() -> T + Send,
) -> (Result<Plan>, T) {
    let (planned, beside) = screened(platform, req, beside);
    (planned.map(|(p, _)| p), beside)
}

/// What `dls plan` and `dls.plan` report: the plan ([`plan_paced`], or
/// [`plan`] where not `pace`) and its
/// efficiency against the equivalent homogeneous platform of its links
/// ([`crate::plan::efficiency`]), whose plan is made beside it.
#[allow(clippy::type_complexity)]
pub fn plan_weighed(platform: &Platform, req: &Request, pace: bool) -> Result<(Plan, Option<(f64, f64)>)> {
    let homogeneous = || crate::plan::homogeneous_makespan(platform, req.load, req.strategy, req.ports).ok();
    let (planned, beside) = if pace {
        plan_paced_beside(platform, req, homogeneous)
    } else {
        plain_beside(platform, req, homogeneous)
    };
    let plan = planned?;
    let efficiency = match beside {
        Some(h) if plan.strategy == req.strategy && plan.ports == req.ports => Some((h / plan.makespan_rational(), h)),
        _ => crate::plan::efficiency(platform, &plan).ok(),
    };
    Ok((plan, efficiency))
}

/// The plain plan on `platform` (no paced candidate), `beside` on a
/// thread of its own meanwhile.
fn plain_beside<T: Send>(platform: &Platform, req: &Request, beside: impl FnOnce() -> T + Send) -> (Result<Plan>, T) {
    std::thread::scope(|s| {
        let other = s.spawn(beside);
        let planned = plan(platform, req);
        (planned, other.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    })
}

/// [`plan_paced_beside`], and how many candidates it did not plan:
/// skipped before planning, and given up part way.
#[allow(clippy::type_complexity)]
fn screened<T: Send>(
    platform: &Platform,
    req: &Request,
    beside: impl FnOnce() -> T + Send,
) -> (Result<(Plan, [usize; 2])>, T) {
    let (Some(u), Strategy::Best | Strategy::Rounds) = (req.ports.uplink(), req.strategy) else {
        let (planned, beside) = plain_beside(platform, req, beside);
        return (planned.map(|p| (p, [0, 0])), beside);
    };
    let mut candidates: Vec<Candidate> = (paces(platform, u).into_iter().enumerate())
        .filter_map(|(at, (pace, fitted))| {
            let slow = crate::pace::paced(platform, &pace);
            // Paces that hold no send below its link plan as the plain
            // plan does, and the verdict keeps the plain plan.
            if slow == *platform {
                return None;
            }
            Some(Candidate::new(at, pace, fitted, slow, req))
        })
        .collect();
    candidates.sort_by(|a, b| a.bound.total_cmp(&b.bound).then(a.at.cmp(&b.at)));
    let screen = Screen {
        platform,
        ports: req.ports,
        queue: std::sync::Mutex::new(candidates.into()),
        plain: std::sync::OnceLock::new(),
        planned: std::sync::Mutex::new(Vec::new()),
        skipped: std::sync::atomic::AtomicUsize::new(0),
        given_up: std::sync::Mutex::new(Vec::new()),
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).max(2) - 1;
    let (plain, beside) = std::thread::scope(|s| {
        let first = s.spawn(|| {
            let beside = beside();
            screen.drain(req);
            beside
        });
        for _ in 1..threads {
            s.spawn(|| screen.drain(req));
        }
        let plain = plan(platform, req);
        if let Ok(p) = &plain {
            let _ = screen.plain.set(p.makespan());
        }
        screen.drain(req);
        (plain, first.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    let given_up = screen.plan_given_up(req);
    let mut planned = screen.planned.into_inner().unwrap_or_else(|e| e.into_inner());
    // In the candidates' own order, as they were weighed before any was
    // screened out.
    planned.sort_by_key(|(c, _)| c.at);
    let planned = planned.into_iter().map(|(c, p)| (c.pace, c.fitted, p));
    let skipped = [screen.skipped.into_inner(), given_up];
    let chosen = plain.and_then(|plain| choose(platform, req, plain, planned));
    (chosen.map(|c| (c, skipped)), beside)
}

/// Of the plain plan and the paced plans `planned` (each with its paces,
/// whether fitted, and its platform, in the candidates' order), the one
/// chosen ([`crate::choice::choose`]); where that is the plain plan and a
/// paced plan was short only of the margin asked of costs not measured
/// under load, a note says so.
fn choose(
    platform: &Platform,
    req: &Request,
    mut plain: Plan,
    planned: impl Iterator<Item = (Vec<Option<Pace>>, bool, Plan)>,
) -> Result<Plan> {
    let planned: Vec<_> = planned.collect();
    let candidate = |fitted: bool, p: &Plan| {
        let kind = if fitted { Kind::Fitted } else { Kind::Paced };
        choice::Candidate::new(kind, p.makespan(), platform, req.ports)
    };
    let weighed: Vec<choice::Candidate> = std::iter::once(choice::Candidate::new(
        Kind::Plain,
        plain.makespan(),
        platform,
        req.ports,
    ))
    .chain(planned.iter().map(|(_, fitted, p)| candidate(*fitted, p)))
    .collect();
    match choice::choose(&weighed) {
        Some(i) if i > 0 => {
            let Some((pace, _, mut p)) = planned.into_iter().nth(i - 1) else {
                unreachable!("a candidate chosen is one of those planned")
            };
            let names: Vec<&str> = (pace.iter().zip(platform.workers()))
                .filter_map(|(x, w)| x.filter(|x| x.secs > x.link).map(|_| w.name.as_str()))
                .collect();
            p.notes.push(format!(
                "paced: sends to {} held below their links' rates so that more of them fit on the uplink at once ({:.6} s against {:.6} s unpaced)",
                listed(&names),
                p.makespan(),
                plain.makespan()
            ));
            p.pace = pace;
            Ok(p)
        }
        _ => {
            let verdict =
                |p: &Plan, fitted: bool| pace_verdict(platform, req.ports, plain.makespan(), p.makespan(), fitted);
            let short = (planned.iter())
                .filter(|(_, fitted, p)| verdict(p, *fitted) == PaceVerdict::Unmeasured)
                .map(|(_, _, p)| p.makespan())
                .min_by(f64::total_cmp);
            if let Some(m) = short {
                plain.notes.push(format!(
                    "not paced: paced sends predict {m:.6} s, short of the {:.0}% gain asked of costs not measured under load (dls calibrate measures them)",
                    100.0 * TUNING.unmeasured_pace_gain
                ));
            }
            Ok(plain)
        }
    }
}

/// The pace candidates behind uplink `u`, each with whether it is
/// [`crate::pace::fitted`]'s: the margin paces ([`crate::pace::paces`]),
/// then the fitted ones.
fn paces(platform: &Platform, u: crate::uplink::Uplink) -> Vec<(Vec<Option<Pace>>, bool)> {
    let margin = crate::pace::paces(platform, u).map(|p| (p, false));
    let fitted = crate::pace::fitted(platform, u).into_iter().map(|p| (p, true));
    margin.into_iter().chain(fitted).collect()
}

/// Names for a note: all of them up to [`LISTED`], else the first
/// [`LISTED`] and how many more.
fn listed(names: &[&str]) -> String {
    match names.len() {
        n if n <= LISTED => names.join(", "),
        n => format!("{} workers ({} and {} more)", n, names[..LISTED].join(", "), n - LISTED),
    }
}

/// Names a note lists in full.
const LISTED: usize = 8;

/// A paced candidate: its place among the candidates, its paces, whether
/// they are [`crate::pace::fitted`]'s, the platform with them, and that
/// platform's steady-state bound on the load.
struct Candidate {
    at: usize,
    pace: Vec<Option<Pace>>,
    fitted: bool,
    slow: Platform,
    bound: f64,
}

impl Candidate {
    /// Candidate `at` of paces `pace` (`fitted` or not), planned on `slow`,
    /// with that platform's steady-state bound on the request's load.
    fn new(at: usize, pace: Vec<Option<Pace>>, fitted: bool, slow: Platform, req: &Request) -> Candidate {
        let bound = crate::bound::steady_state(&slow, req.ports).map_or(0.0, |s| s.makespan_bound(req.load));
        Candidate {
            at,
            pace,
            fitted,
            slow,
            bound,
        }
    }
}

/// The paced candidates still to plan, and what decides whether one may
/// be skipped: the plain plan's makespan once known, and the candidates
/// planned so far.
struct Screen<'a> {
    platform: &'a Platform,
    ports: Ports,
    queue: std::sync::Mutex<std::collections::VecDeque<Candidate>>,
    plain: std::sync::OnceLock<f64>,
    planned: std::sync::Mutex<Vec<(Candidate, Plan)>>,
    skipped: std::sync::atomic::AtomicUsize,
    /// Candidates whose planning was given up part way.
    given_up: std::sync::Mutex<Vec<Candidate>>,
}

impl Screen<'_> {
    /// Plan the candidates left, one at a time, skipping those that
    /// cannot be taken ([`Screen::hopeless`]).
    fn drain(&self, req: &Request) {
        loop {
            let next = self.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some(c) = next else { return };
            if self.hopeless(c.bound, c.fitted) {
                self.skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            // Given up as soon as its search can tell it cannot be taken:
            // no plan of its ends before its bound, and a paced plan taken
            // meanwhile may end before that.
            let bound = c.bound;
            match crate::plan::plan_unless(&c.slow, req, &|reach| self.hopeless(reach.max(bound), c.fitted)) {
                Ok(Some(p)) => self.planned.lock().unwrap_or_else(|e| e.into_inner()).push((c, p)),
                Ok(None) => self.given_up.lock().unwrap_or_else(|e| e.into_inner()).push(c),
                Err(_) => {}
            }
        }
    }

    /// Plan in full, once every thread is done, each candidate given up
    /// part way that its bound does not rule out against all that was
    /// planned: a search gives up on a reckoning of what it may still
    /// reach, which is not a bound, and on what other threads had planned
    /// by then. What is chosen is then what planning every candidate
    /// chooses, however the threads ran (on a random star, a paced plan
    /// 10% earlier than the plain one was taken in some runs of `dls plan`
    /// and given up in others). Returns how many were given up.
    fn plan_given_up(&self, req: &Request) -> usize {
        let mut left = std::mem::take(&mut *self.given_up.lock().unwrap_or_else(|e| e.into_inner()));
        let count = left.len();
        if count == 0 {
            return 0;
        }
        left.sort_by(|a, b| a.bound.total_cmp(&b.bound).then(a.at.cmp(&b.at)));
        *self.queue.lock().unwrap_or_else(|e| e.into_inner()) = left.into();
        // On the machine's threads: which of them are planned may depend
        // on how the threads run, what is chosen does not (a candidate is
        // left out only where its bound rules it out).
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::thread::scope(|s| {
            for _ in 1..threads {
                s.spawn(|| self.drain_in_full(req));
            }
            self.drain_in_full(req);
        });
        count
    }

    /// Plan in full the candidates left, skipping those their bound rules out.
    fn drain_in_full(&self, req: &Request) {
        loop {
            let next = self.queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
            let Some(c) = next else { return };
            if self.hopeless(c.bound, c.fitted) {
                continue;
            }
            if let Ok(p) = plan(&c.slow, req) {
                self.planned.lock().unwrap_or_else(|e| e.into_inner()).push((c, p));
            }
        }
    }

    /// Whether a candidate (`fitted` or not) whose plan can end no earlier
    /// than `bound` cannot be taken: the plain plan is known and beats it
    /// even at its bound, weighed with the least margin asked of any
    /// paced plan (`TUNING.pace_gain`), or a paced plan planned already
    /// beats the plain plan and it at its bound ([`crate::choice`]).
    fn hopeless(&self, bound: f64, fitted: bool) -> bool {
        let Some(&plain) = self.plain.get() else {
            return false;
        };
        // A plan's prediction never falls below its bound; a hair of room
        // for rounding in the bound's own sum.
        let least = bound * (1.0 - 1e-9);
        if pace_verdict(self.platform, self.ports, plain, least, true) == PaceVerdict::Plain {
            return true;
        }
        let weigh = |fitted: bool, m: f64| {
            let kind = if fitted { Kind::Fitted } else { Kind::Paced };
            choice::Candidate::new(kind, m, self.platform, self.ports)
        };
        let (plain, at_bound) = (
            choice::Candidate::new(Kind::Plain, plain, self.platform, self.ports),
            weigh(fitted, least),
        );
        let planned = self.planned.lock().unwrap_or_else(|e| e.into_inner());
        (planned.iter())
            .map(|(c, p)| weigh(c.fitted, p.makespan()))
            .any(|p| p.beats(&plain) && p.beats(&at_bound))
    }
}

/// Every paced candidate planned, none screened out: what [`plan_paced`]
/// must agree with.
#[cfg(test)]
fn plan_paced_every(platform: &Platform, req: &Request) -> Result<Plan> {
    let Some(u) = req.ports.uplink() else {
        unreachable!("only behind an uplink")
    };
    let planned: Vec<_> = (paces(platform, u).into_iter())
        .filter_map(|(pace, fitted)| {
            let slow = crate::pace::paced(platform, &pace);
            plan(&slow, req).ok().map(|p| (pace, fitted, p))
        })
        .collect();
    choose(platform, req, plan(platform, req)?, planned.into_iter())
}

#[cfg(test)]
mod tests;
