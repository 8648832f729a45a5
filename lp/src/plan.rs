//! Strategies: which scenario to use, its loads, and the integer plan.

use crate::error::Result;
use crate::pace::Pace;
use crate::platform::Platform;
use crate::rounding::{self, Rounding};
use crate::rounds;
use crate::schedule::{Ports, Scenario, Timeline, WorkerTimes};
use crate::search::{best_fifo, better, fifo_local_search};
pub use crate::search::{
    exhaustive, order_dec_c, order_inc_c, order_inc_cd, order_inc_w, solve_fifo, solve_lifo, solve_scenario, Problem,
    Solved, EXHAUSTIVE_MAX_WORKERS, LOCAL_SEARCH_BUDGET,
};
use crate::sequence::Sequence;
use crate::tol::{REL_TOL, STRICT_GAIN};
use std::fmt;
use std::str::FromStr;

/// How the planner picks the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Optimal FIFO with resource selection (Theorem 1).
    Fifo,
    /// Optimal LIFO: every worker, by non-decreasing `c + d`.
    Lifo,
    /// The report's FIFO heuristic INC_C: order by non-decreasing `c`.
    IncC,
    /// The report's FIFO heuristic INC_W: order by non-decreasing `w`.
    IncW,
    /// The better of `Fifo` and `Lifo` (for p ≤ 4 every pair of orders),
    /// or `Rounds` when it predicts an earlier end.
    Best,
    /// Several chunks per worker, sends and returns interleaved on the port
    /// in a planned sequence ([`crate::rounds`]).
    Rounds,
}

impl Strategy {
    pub const ALL: [Strategy; 6] = [
        Strategy::Fifo,
        Strategy::Lifo,
        Strategy::IncC,
        Strategy::IncW,
        Strategy::Best,
        Strategy::Rounds,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Fifo => "fifo",
            Strategy::Lifo => "lifo",
            Strategy::IncC => "inc-c",
            Strategy::IncW => "inc-w",
            Strategy::Best => "best",
            Strategy::Rounds => "rounds",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Strategy::ALL
            .into_iter()
            .find(|st| st.name() == s)
            .ok_or_else(|| format!("unknown strategy {s:?}: expected one of fifo, lifo, inc-c, inc-w, best, rounds"))
    }
}

/// What to plan.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub load: u64,
    pub strategy: Strategy,
    pub ports: Ports,
    pub rounding: Rounding,
}

impl Request {
    pub fn new(load: u64, strategy: Strategy) -> Self {
        Request {
            load,
            strategy,
            ports: Ports::One,
            rounding: Rounding::Refined,
        }
    }
}

/// A complete plan: the scenario, rational and whole loads, and the
/// sequence of transfers that carries the whole loads out, with its
/// predicted times.
#[derive(Debug, Clone)]
pub struct Plan {
    pub strategy: Strategy,
    pub ports: Ports,
    pub load: u64,
    /// Proven optimal within its class (FIFO for fifo/inc-c/inc-w, LIFO for
    /// lifo, every pair of orders for best when searched exhaustively).
    pub optimal: bool,
    /// The orders the strategy chose, over every worker it considered
    /// (including those the LP gave no load); for a multi-round plan, the
    /// order of each worker's first send and first return.
    pub scenario: Scenario,
    /// Rational loads, indexed like the platform.
    pub alpha: Vec<f64>,
    /// Whole units, indexed like the platform; they sum to `load`.
    pub loads: Vec<u64>,
    /// Timeline of `alpha` (for a multi-round plan, of its sequence).
    pub rational: Timeline,
    /// What runs: the chunks of `loads`, their transfers on the port in
    /// order, and their predicted times.
    pub sequence: Sequence,
    /// Remarks for the user (bounds that bind, heuristics used, ...).
    pub notes: Vec<String>,
    /// Paced sends, indexed like the platform (empty: none paced): the
    /// plan was made on the platform with these workers' `c` their pace
    /// ([`crate::pace`]), and is run on it.
    pub pace: Vec<Option<Pace>>,
}

impl Plan {
    /// The send order restricted to workers with whole units.
    pub fn send_order(&self) -> Vec<usize> {
        self.scenario
            .send_order
            .iter()
            .copied()
            .filter(|&i| self.loads[i] > 0)
            .collect()
    }

    /// The return order restricted to workers with whole units.
    pub fn return_order(&self) -> Vec<usize> {
        self.scenario
            .return_order
            .iter()
            .copied()
            .filter(|&i| self.loads[i] > 0)
            .collect()
    }

    /// Predicted makespan of what runs (the whole loads' sequence).
    pub fn makespan(&self) -> f64 {
        self.sequence.makespan
    }

    /// Each worker's predicted span over its chunks, indexed like the
    /// platform.
    pub fn worker_times(&self) -> Vec<WorkerTimes> {
        self.sequence.spans(self.loads.len())
    }

    /// Whether the plan has several chunks per worker, interleaved on the
    /// port (strategy `rounds`, or `best` when rounds won).
    pub fn multi_round(&self) -> bool {
        self.sequence.fill_gaps
    }

    /// Makespan of the rational loads.
    pub fn makespan_rational(&self) -> f64 {
        self.rational.makespan
    }

    /// Units per second of the rational plan.
    pub fn throughput(&self) -> f64 {
        self.load as f64 / self.rational.makespan
    }

    /// This plan, made for the workers `subset` of a platform of `p`,
    /// indexed like that whole platform: the others get nothing.
    fn spread(self, subset: &[usize], p: usize) -> Plan {
        let map = |o: &[usize]| o.iter().map(|&i| subset[i]).collect::<Vec<_>>();
        let widen = |t: &Timeline| {
            let mut workers = vec![WorkerTimes::default(); p];
            for (k, &w) in subset.iter().enumerate() {
                workers[w] = t.workers[k];
            }
            Timeline {
                workers,
                makespan: t.makespan,
            }
        };
        let (mut loads, mut alpha) = (vec![0u64; p], vec![0.0; p]);
        let mut pace = if self.pace.is_empty() {
            Vec::new()
        } else {
            vec![None; p]
        };
        for (k, &w) in subset.iter().enumerate() {
            loads[w] = self.loads[k];
            alpha[w] = self.alpha[k];
            if let Some(&x) = self.pace.get(k) {
                pace[w] = x;
            }
        }
        Plan {
            sequence: self.sequence.widened(subset),
            scenario: Scenario {
                send_order: map(&self.scenario.send_order),
                return_order: map(&self.scenario.return_order),
            },
            alpha,
            loads,
            pace,
            rational: widen(&self.rational),
            ..self
        }
    }
}

/// Plan `req.load` units on `platform`.
pub fn plan(platform: &Platform, req: &Request) -> Result<Plan> {
    match req.strategy {
        Strategy::Rounds => return plan_multi_round(platform, req),
        Strategy::Best => {
            let one = plan_one_round(platform, req)?;
            let rounds = rounds::plan_rounds(platform, req.ports, req.load, Some(&one.sequence))?;
            if rounds.count == 1 && rounds.lag == 0 || rounds.makespan >= one.makespan() {
                return Ok(one);
            }
            let mut notes = one.notes.clone();
            notes.push(format!(
                "best: rounds ({} rounds) predicts {:.6} s against {:.6} s for the best single round",
                rounds.count,
                rounds.makespan,
                one.makespan()
            ));
            return Ok(from_rounds(platform, req, rounds, notes));
        }
        _ => {}
    }
    plan_one_round(platform, req)
}

/// A plan shorter by less than this share is not worth pacing for. Both
/// the paced plan and the plain one may have given up to
/// [`crate::rounds::slack`] of their predictions for fewer chunks; the
/// paced one must win by both: it leans on the model harder (sends held
/// to fit beside each other, every worker enrolled, each node receiving
/// while it computes), and where that model is off the paced plan loses
/// more than it promised. On the switched test bed, costs measured by
/// `dls calibrate`, runs in turn: star `a:250:15 b:400:10 c:150:35
/// d:300:25` (n = 512, 120 products), paced predicted 5.3% earlier than
/// plain and ran 12.8-13.4 s (1.21-1.27× predicted) against 11.1-11.7 s
/// (0.99-1.05×); a four-worker plan predicted 1.6% earlier ran 5% later.
/// Where a paced plan won, it won by little: the five-worker star (n =
/// 320), paced predicted 4.2% earlier, ran 8.2 s against 8.3-8.7 s, both
/// within 10% of their predictions. So a paced plan must win by more than
/// those that lost (with the slack, 8% against 5.3% and less). Those
/// measurements were made when a transfer started beside another got only
/// what that one left; since transfers share a lane fairly
/// ([`crate::lane`]) a paced plan predicts at most about 5% earlier than
/// the plain one on random stars (3,000 of two to five workers), but
/// more where equal links land just past the lane's admission rule: six
/// workers of 200 Mbit/s behind 500 (`homog-320`, n = 320, 250
/// products), links of 0.41 of the uplink, two sends under way hold 0.81
/// and a third never starts beside them, a fifth of the uplink idle; the
/// paced plan predicted 8.7% earlier (8.15 s against 8.92 s) and ran
/// 7.95-8.04 s (0.98x its prediction) against 8.81-9.24 s for the plain
/// one (one calibration, runs in turn), where 9% was asked.
pub const PACE_GAIN: f64 = 0.05;

/// What a paced plan must win by, instead of [`PACE_GAIN`], on costs that
/// were not measured under load (no worker's `under_load`: a run's own
/// probes, one transfer at a time, or costs written by hand). A pace holds
/// each worker's sends to fit beside the others', which only holds if
/// every node keeps up while it receives, computes and returns at once;
/// the fastest link's node under a small processor share did not. On the
/// switched test bed (five workers `a:200:25 b:100:50 c:300:15 d:150:30
/// e:400:20`, n = 320, 250 products, cold runs), the paced plans on a
/// run's own costs predicted 4.1-8.5% earlier than the plain ones and took
/// 9.8-10.5 s (makespans, 1.22-1.37× predicted, four runs), where the
/// plain plans took 7.8-9.2 s (0.93-1.11×, nine runs). The gains pacing was
/// kept for are larger (on the sixty star, paced 9.9 s predicted against
/// 14.6 s plain, and ran 10.7-10.9 s against 13.7-14.7 s).
pub const UNMEASURED_PACE_GAIN: f64 = 0.15;

/// The gain a paced plan must show on `platform` (see
/// [`UNMEASURED_PACE_GAIN`]).
pub fn pace_gain(platform: &Platform) -> f64 {
    if platform.workers().iter().any(|w| w.under_load.is_some()) {
        PACE_GAIN
    } else {
        UNMEASURED_PACE_GAIN
    }
}

/// Whether a paced plan is taken over the plain one ([`plan_paced`]),
/// ordered from the verdict wanted most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PaceVerdict {
    /// It wins by the gain asked ([`pace_gain`], or [`PACE_GAIN`] for
    /// fitted paces) or more: paced.
    Paced,
    /// It wins by [`PACE_GAIN`], not by what costs not measured under load
    /// must show: plain, with a note saying so.
    Unmeasured,
    /// Plain.
    Plain,
}

/// The verdict on a paced plan predicting `paced` seconds against `plain`
/// for the plain one, on `platform` under `ports`: it must win by the
/// gain asked ([`pace_gain`]) and the planner's slack
/// ([`crate::rounds::slack`]), which either plan may have given up.
/// `fitted`: the paces are [`crate::pace::fitted`]'s, which must win by
/// [`PACE_GAIN`] whatever the costs: they hold sends to shares that
/// transfers beyond the lane's room then share fairly, which does not
/// lean on a node keeping up under load the way fitting links into the
/// room beside the fullest does. Cold runs (costs from the run's own
/// probes) of five stars, in turn with the build that asked fitted paces
/// 15% there: 0.89-0.98× as long (medians), 0.96-1.09× their predictions
/// when paced (`docs/planner.md`).
pub fn pace_verdict(platform: &Platform, ports: Ports, plain: f64, paced: f64, fitted: bool) -> PaceVerdict {
    let share = |gain: f64| (1.0 - gain - crate::rounds::slack(ports)) * plain;
    let asked = if fitted { PACE_GAIN } else { pace_gain(platform) };
    if paced < share(asked) {
        PaceVerdict::Paced
    } else if paced < share(PACE_GAIN) {
        PaceVerdict::Unmeasured
    } else {
        PaceVerdict::Plain
    }
}

/// [`plan`], and behind a shared full-duplex uplink, for `best` and
/// `rounds`, the same on the platform with paced sends ([`crate::pace`]:
/// [`crate::pace::paces`] and each of [`crate::pace::fitted`]): the
/// earliest of them whose verdict ([`pace_verdict`]) is to pace.
/// Returns the platform the plan was made on, which is the one to run it
/// on (a paced worker's `c` is its pace).
pub fn plan_paced(platform: &Platform, req: &Request) -> Result<(Platform, Plan)> {
    let (Ports::Shared(u), Strategy::Best | Strategy::Rounds) = (req.ports, req.strategy) else {
        return Ok((platform.clone(), plan(platform, req)?));
    };
    let margin = crate::pace::paces(platform, u).map(|p| (p, false));
    let fitted = crate::pace::fitted(platform, u).into_iter().map(|p| (p, true));
    let candidates: Vec<_> = margin.into_iter().chain(fitted).collect();
    // The candidates are planned beside the plain plan, each on a thread
    // of its own: planning is on the path to a run's first send.
    let (plain, planned) = std::thread::scope(|s| {
        let each: Vec<_> = (candidates.into_iter())
            .map(|(pace, fitted)| {
                s.spawn(move || {
                    let slow = crate::pace::paced(platform, &pace);
                    plan(&slow, req).ok().map(|p| (pace, fitted, slow, p))
                })
            })
            .collect();
        let plain = plan(platform, req);
        let planned: Vec<_> = (each.into_iter())
            .filter_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        (plain, planned)
    });
    let mut plain = plain?;
    let verdict = |p: &Plan, fitted: bool| pace_verdict(platform, req.ports, plain.makespan(), p.makespan(), fitted);
    // The earliest paced plan whose verdict is to pace; failing that, the
    // earliest short only of the gain asked of unmeasured costs (a note).
    let taken = (planned.into_iter())
        .map(|(pace, fitted, slow, p)| (verdict(&p, fitted), pace, slow, p))
        .min_by(|a, b| (a.0.cmp(&b.0)).then(a.3.makespan().total_cmp(&b.3.makespan())));
    match taken {
        Some((PaceVerdict::Paced, pace, slow, mut p)) => {
            let names: Vec<&str> = (pace.iter().zip(platform.workers()))
                .filter_map(|(x, w)| x.filter(|x| x.secs > x.link).map(|_| w.name.as_str()))
                .collect();
            p.notes.push(format!(
                "paced: sends to {} held below their links' rates so that more of them fit on the uplink at once ({:.6} s against {:.6} s unpaced)",
                names.join(", "),
                p.makespan(),
                plain.makespan()
            ));
            p.pace = pace;
            Ok((slow, p))
        }
        Some((PaceVerdict::Unmeasured, _, _, p)) => {
            plain.notes.push(format!(
                "not paced: paced sends predict {:.6} s, short of the {:.0}% gain asked of costs not measured under load (dls calibrate measures them)",
                p.makespan(),
                100.0 * UNMEASURED_PACE_GAIN
            ));
            Ok((platform.clone(), plain))
        }
        _ => Ok((platform.clone(), plain)),
    }
}

/// `rounds`: the best multi-round schedule, against the best one-round
/// FIFO and LIFO plans when they fit the workers' memory.
fn plan_multi_round(platform: &Platform, req: &Request) -> Result<Plan> {
    if req.load == 0 {
        return Err(crate::Error::ZeroLoad);
    }
    let one = [Strategy::Fifo, Strategy::Lifo]
        .into_iter()
        .filter_map(|strategy| plan_one_round(platform, &Request { strategy, ..*req }).ok())
        .min_by(|a, b| a.makespan().total_cmp(&b.makespan()));
    let r = rounds::plan_rounds(platform, req.ports, req.load, one.as_ref().map(|p| &p.sequence))?;
    let note = if r.count == 1 && r.lag == 0 {
        "rounds: a single round predicts the earliest end".to_string()
    } else {
        format!("rounds: {} rounds, lag {}, {} chunks", r.count, r.lag, r.chunks.len())
    };
    Ok(from_rounds(platform, req, r, vec![note]))
}

/// A plan from a multi-round sequence: loads are the chunks' totals, the
/// orders those of each worker's first send and return. Never `optimal`:
/// `rounds` heuristically approaches the steady-state bound.
fn from_rounds(platform: &Platform, req: &Request, r: Sequence, notes: Vec<String>) -> Plan {
    let p = platform.len();
    let loads = r.loads(p);
    let scenario = Scenario {
        send_order: r.order(p, true),
        return_order: r.order(p, false),
    };
    let timeline = Timeline {
        workers: r.spans(p),
        makespan: r.makespan,
    };
    Plan {
        strategy: req.strategy,
        ports: req.ports,
        load: req.load,
        optimal: false,
        scenario,
        alpha: loads.iter().map(|&l| l as f64).collect(),
        loads,
        rational: timeline,
        sequence: r,
        notes,
        pace: Vec::new(),
    }
}

/// The one-round strategies.
fn plan_one_round(real: &Platform, req: &Request) -> Result<Plan> {
    real.check_load(req.load)?;
    // Behind a shared uplink, the orders and loads are solved in the
    // classical model nearest to it; the sequence is timed on the real one.
    let (classical, solved_in) = req.ports.classical(real);
    let platform = &classical;
    let pb = Problem::new(platform, solved_in, req.load);
    let (ports, load) = (req.ports, req.load);
    let z = platform.uniform_z();
    let mut notes = Vec::new();
    let (solved, mut optimal) = match req.strategy {
        Strategy::Fifo => match z {
            Some(z) => {
                let order = if z <= 1.0 {
                    order_inc_c(platform)
                } else {
                    order_dec_c(platform)
                };
                (solve_fifo(&pb, order)?, true)
            }
            None => {
                notes.push(format!(
                    "d/c differs between workers, so Theorem 1 does not apply: the FIFO order comes from a local search (adjacent swaps from inc-c/dec-c, at most {LOCAL_SEARCH_BUDGET} evaluations)"
                ));
                (fifo_local_search(&pb)?, false)
            }
        },
        Strategy::IncC => (solve_fifo(&pb, order_inc_c(platform))?, z.is_some_and(|z| z <= 1.0)),
        Strategy::IncW => (solve_fifo(&pb, order_inc_w(platform))?, false),
        Strategy::Lifo => (solve_lifo(&pb, order_inc_cd(platform))?, true),
        Strategy::Best | Strategy::Rounds => {
            // Candidates: the best FIFO, the best LIFO and, for small
            // platforms, the best of every pair of orders. The one that runs
            // fastest in whole units wins (rounding can reorder close ones).
            let mut cands = vec![
                ("fifo", best_fifo(&pb, z)?),
                ("lifo", solve_lifo(&pb, order_inc_cd(platform))?),
            ];
            let mut optimum = None;
            if platform.len() <= EXHAUSTIVE_MAX_WORKERS {
                let ex = exhaustive(&pb)?;
                optimum = Some(ex.makespan);
                cands.push(("every pair of orders", ex));
            }
            let mut best: Option<(&str, Solved, f64)> = None;
            for (name, c) in cands {
                let m = integer_makespan(&pb, &c, req.rounding);
                let wins = match &best {
                    None => true,
                    Some((_, b, bm)) => m < bm * (1.0 - STRICT_GAIN) || (m <= *bm && better(&c, b)),
                };
                if wins {
                    best = Some((name, c, m));
                }
            }
            let Some((name, best, _)) = best else {
                unreachable!("there are always candidates")
            };
            notes.push(format!("best: {name} gives the shortest schedule in whole units"));
            // Proven optimal when it is also the LP optimum over every pair.
            let optimal = optimum.is_some_and(|o| best.makespan <= o * (1.0 + REL_TOL));
            (best, optimal)
        }
    };
    if solved.bounded && req.strategy != Strategy::Best {
        optimal = false;
        notes.push("max_load bounds bind: loads come from the LP for this order; the order itself is not proven optimal under bounds".into());
    }
    let loads = round(&pb, &solved, req.rounding);
    let sequence = Sequence::one_round(real, &solved.scenario, &loads, ports);
    let rational = Timeline::build(platform, &solved.scenario, &solved.alpha, solved_in);
    let left_out = loads.iter().filter(|&&l| l == 0).count();
    if left_out > 0 {
        notes.push(format!(
            "{left_out} worker(s) get no load: enrolling them would not shorten the schedule"
        ));
    }
    Ok(Plan {
        strategy: req.strategy,
        ports,
        load,
        optimal,
        scenario: solved.scenario,
        alpha: solved.alpha,
        loads,
        rational,
        sequence,
        notes,
        pace: Vec::new(),
    })
}

/// Plan `req.load` units over the workers `subset` of `platform` only (the
/// survivors of a run, say). The plan is indexed like the whole platform:
/// the other workers get no load and an empty timeline, and the orders name
/// whole-platform indices.
pub fn plan_on(platform: &Platform, subset: &[usize], req: &Request) -> Result<Plan> {
    let sub = platform.subset(subset)?;
    Ok(plan(&sub, req)?.spread(subset, platform.len()))
}

/// Whole units for a solved scenario.
fn round(pb: &Problem, solved: &Solved, how: Rounding) -> Vec<u64> {
    let mut loads = rounding::paper(pb.platform, &solved.scenario.send_order, &solved.alpha, pb.load);
    if how == Rounding::Refined {
        rounding::refine(pb.platform, &solved.scenario, pb.ports, &solved.alpha, &mut loads);
    }
    loads
}

/// The predicted makespan of a solved scenario in whole units, by the rule
/// that times every plan (latencies included).
fn integer_makespan(pb: &Problem, solved: &Solved, how: Rounding) -> f64 {
    let loads = round(pb, solved, how);
    Sequence::one_round(pb.platform, &solved.scenario, &loads, pb.ports).makespan
}

/// The equivalent homogeneous platform (Lastovetsky and Reddy, *On
/// performance analysis of heterogeneous parallel algorithms*, section 2): as many
/// workers, each computing at the average speed (1/w averaged), with the
/// same aggregate communication (link speeds 1/c and 1/d averaged).
/// `max_load` bounds are dropped.
pub fn equivalent_homogeneous(platform: &Platform) -> Result<Platform> {
    let wk = platform.workers();
    let p = wk.len() as f64;
    let mean_speed = |f: fn(&crate::Worker) -> f64| wk.iter().map(|w| 1.0 / f(w)).sum::<f64>() / p;
    let c = 1.0 / mean_speed(|w| w.c);
    let w = 1.0 / mean_speed(|w| w.w);
    // A zero return cost is an infinite speed: average the costs instead.
    let d = if wk.iter().any(|x| x.d == 0.0) {
        wk.iter().map(|x| x.d).sum::<f64>() / p
    } else {
        1.0 / mean_speed(|w| w.d)
    };
    let workers = (0..wk.len())
        .map(|i| crate::Worker::new(format!("h{i}"), c, w, d))
        .collect();
    Ok(Platform::new(workers)?.with_uplink(platform.uplink()))
}

/// How the plan compares with the same strategy on the equivalent
/// homogeneous platform: that platform's rational makespan divided by the
/// plan's (1: as efficient; above 1: the heterogeneous platform, well
/// scheduled, does better than its homogeneous equivalent).
pub fn efficiency(platform: &Platform, plan: &Plan) -> Result<(f64, f64)> {
    let hom = equivalent_homogeneous(platform)?;
    let req = Request {
        load: plan.load,
        strategy: plan.strategy,
        ports: plan.ports,
        rounding: Rounding::Paper,
    };
    let h = self::plan(&hom, &req)?;
    Ok((h.makespan_rational() / plan.makespan_rational(), h.makespan_rational()))
}
