//! Strategies: which scenario to use, its loads, and the integer plan.

use crate::choice::{self, Candidate, Kind};
use crate::error::Result;
use crate::pace::Pace;
use crate::platform::Platform;
use crate::rounding::{self, Rounding};
use crate::rounds;
use crate::schedule::{Ports, Scenario, Timeline, WorkerTimes};
use crate::search::{best_fifo, better, fifo_local_search};
pub use crate::search::{
    exhaustive, exhaustive_programs, exhaustive_worth, order_dec_c, order_inc_c, order_inc_cd, order_inc_w, solve_fifo,
    solve_lifo, solve_scenario, Problem, Solved,
};
use crate::sequence::Sequence;
use crate::tol::{REL_TOL, STRICT_GAIN};
use crate::TUNING;
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
    let never = |_: f64| false;
    plan_unless(platform, req, &never)?.ok_or_else(|| crate::Error::Solver("a plan was given up".into()))
}

/// [`plan`], given up (`None`) where its multi-round search finds that it
/// would end no earlier than a makespan `hopeless` refuses
/// ([`rounds::plan_rounds_unless`]).
pub(crate) fn plan_unless(platform: &Platform, req: &Request, hopeless: &dyn Fn(f64) -> bool) -> Result<Option<Plan>> {
    match req.strategy {
        Strategy::Rounds => return plan_multi_round(platform, req, hopeless),
        Strategy::Best => {
            // The single round in whole units by the report's rule first:
            // refined only where it may be within reach of the rounds.
            let one = match plan_one_round(platform, &rough(req), Effort::Orders) {
                Ok(one) => one,
                // A batch larger than the workers' memory runs in rounds
                // (chunks that fit), which `best` weighs too.
                Err(crate::Error::InfeasibleBounds { load, capacity }) => {
                    let Some(mut p) = plan_multi_round(platform, req, hopeless)? else {
                        return Ok(None);
                    };
                    p.notes.insert(
                        0,
                        format!("best: {load} units are more than the workers hold at once ({capacity}): one round cannot run them, rounds can"),
                    );
                    return Ok(Some(p));
                }
                Err(e) => return Err(e),
            };
            let mut timings = rounds::Timings::default();
            let mut search = |one: &Plan| {
                rounds::plan_rounds_unless(
                    platform,
                    req.ports,
                    req.load,
                    Some(&one.sequence),
                    &mut timings,
                    hopeless,
                )
            };
            let Some(mut rounds) = search(&one)? else {
                return Ok(None);
            };
            let settled = req.rounding == Rounding::Paper || out_of_reach(&one, &rounds);
            let one = if settled {
                one
            } else {
                let one = plan_one_round(platform, req, Effort::Orders)?;
                let Some(r) = search(&one)? else {
                    return Ok(None);
                };
                rounds = r;
                one
            };
            // The searches over orders only where they are worth their time.
            let quick = one.makespan().min(rounds.makespan);
            let p = platform.len();
            let effort = if exhaustive_worth(p, req.ports, quick) {
                Effort::Every
            } else if one.makespan() <= rounds.makespan * TUNING.one_round_reach {
                Effort::Local
            } else {
                Effort::Orders
            };
            let mut one = if effort == Effort::Orders {
                one
            } else {
                let one = plan_one_round(platform, req, effort)?;
                let Some(r) = search(&one)? else {
                    return Ok(None);
                };
                rounds = r;
                one
            };
            if effort != Effort::Every && p <= TUNING.exhaustive_max_workers {
                one.notes.push(format!(
                    "best: every pair of orders not searched: {:.0} linear programs for a batch predicted to take {quick:.3} s",
                    exhaustive_programs(p, req.ports)
                ));
            }
            // The one choice between candidates: both plain, the earlier
            // wins, the single round on a tie.
            let weighed =
                [one.makespan(), rounds.makespan].map(|m| Candidate::new(Kind::Plain, m, platform, req.ports));
            if rounds.count == 1 && rounds.lag == 0 || choice::choose(&weighed) == Some(0) {
                return Ok(Some(one));
            }
            let mut notes = one.notes.clone();
            let rule = if req.rounding != Rounding::Paper && settled && effort == Effort::Orders {
                " (whole units by the report's rule: it cannot come within reach however rounded)"
            } else {
                ""
            };
            notes.push(format!(
                "best: rounds ({} rounds) predicts {:.6} s against {:.6} s for the best single round{rule}",
                rounds.count,
                rounds.makespan,
                one.makespan()
            ));
            return Ok(Some(from_rounds(platform, req, rounds, notes)));
        }
        _ => {}
    }
    plan_one_round(platform, req, Effort::Every).map(Some)
}

/// `req` with the report's rounding: a single round's whole units
/// without [`Rounding::Refined`]'s moves, which time the schedule once for
/// every pair of workers a unit may move between (on 48 workers behind an
/// uplink they took half of planning 100,000 products).
fn rough(req: &Request) -> Request {
    Request {
        rounding: Rounding::Paper,
        ..*req
    }
}

/// Whether the single round `one` cannot come within `TUNING.one_round_reach`
/// of `rounds` whatever its whole units: no rounding ends before the
/// rational schedule of its order.
fn out_of_reach(one: &Plan, rounds: &Sequence) -> bool {
    one.makespan_rational() > rounds.makespan * TUNING.one_round_reach
}

/// How hard a one-round plan searches the orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effort {
    /// The orders the report gives (inc-c or dec-c, LIFO by c + d) only.
    Orders,
    /// And the FIFO local search where no theorem gives the order.
    Local,
    /// And, for `best` over a few workers, every pair of orders.
    Every,
}

/// `rounds`: the best multi-round schedule, against the best one-round
/// FIFO and LIFO plans when they fit the workers' memory.
fn plan_multi_round(platform: &Platform, req: &Request, hopeless: &dyn Fn(f64) -> bool) -> Result<Option<Plan>> {
    if req.load == 0 {
        return Err(crate::Error::ZeroLoad);
    }
    let one_round = |req: &Request, effort| {
        [Strategy::Fifo, Strategy::Lifo]
            .into_iter()
            .filter_map(|strategy| plan_one_round(platform, &Request { strategy, ..*req }, effort).ok())
            .min_by(|a, b| a.makespan().total_cmp(&b.makespan()))
    };
    // The single rounds by the report's rule first, as `best` does.
    let mut one = one_round(&rough(req), Effort::Orders);
    let mut timings = rounds::Timings::default();
    let mut search = |one: Option<&Plan>| {
        let one = one.map(|p| &p.sequence);
        rounds::plan_rounds_unless(platform, req.ports, req.load, one, &mut timings, hopeless)
    };
    let Some(mut r) = search(one.as_ref())? else {
        return Ok(None);
    };
    // Its units refined where it may come within reach.
    if req.rounding != Rounding::Paper && one.as_ref().is_some_and(|o| !out_of_reach(o, &r)) {
        one = one_round(req, Effort::Orders);
        let Some(again) = search(one.as_ref())? else {
            return Ok(None);
        };
        r = again;
    }
    // The local search only where the single round is within reach.
    if one
        .as_ref()
        .is_some_and(|o| o.makespan() <= r.makespan * TUNING.one_round_reach)
    {
        one = one_round(req, Effort::Local);
        let Some(again) = search(one.as_ref())? else {
            return Ok(None);
        };
        r = again;
    }
    let note = if r.count == 1 && r.lag == 0 {
        "rounds: a single round predicts the earliest end".to_string()
    } else {
        format!("rounds: {} rounds, lag {}, {} chunks", r.count, r.lag, r.chunks.len())
    };
    Ok(Some(from_rounds(platform, req, r, vec![note])))
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

/// The problem the one-round solvers solve on `platform` (the classical
/// form of `real`, in `ports`), its local search weighed as `effort` says:
/// not at all, or against the batch's steady-state bound.
fn problem<'a>(real: &Platform, platform: &'a Platform, ports: Ports, req: &Request, effort: Effort) -> Problem<'a> {
    let pb = Problem::new(platform, ports, req.load);
    if effort == Effort::Orders {
        // No swap is worth anything: the local search keeps its start.
        return pb.with_horizon(0.0);
    }
    let searched =
        platform.uniform_z().is_none() && matches!(req.strategy, Strategy::Fifo | Strategy::Best | Strategy::Rounds);
    if !searched {
        return pb;
    }
    crate::bound::steady_state(real, req.ports).map_or(pb, |ss| pb.with_horizon(ss.makespan_bound(req.load)))
}

/// The one-round strategies.
/// With `effort`, the FIFO local search and every pair of orders (`best`,
/// up to `TUNING.exhaustive_max_workers` workers) run or not.
fn plan_one_round(real: &Platform, req: &Request, effort: Effort) -> Result<Plan> {
    real.check_load(req.load)?;
    // Behind a shared uplink, the orders and loads are solved in the
    // classical model nearest to it; the sequence is timed on the real one.
    let (classical, solved_in) = req.ports.classical(real);
    let platform = &classical;
    let pb = problem(real, platform, solved_in, req, effort);
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
                    "d/c differs between workers, so Theorem 1 does not apply: the FIFO order comes from a local search (adjacent swaps from inc-c/dec-c, at most {} evaluations)",
                    TUNING.local_search_budget
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
            // A candidate whose solver fails is left out, with a note;
            // only when all fail does `best` fail.
            let mut cands = Vec::new();
            let mut failed = None;
            let mut optimum = None;
            for (name, solved) in [
                ("fifo", best_fifo(&pb, z)),
                ("lifo", solve_lifo(&pb, order_inc_cd(platform))),
            ]
            .into_iter()
            .chain(
                (effort == Effort::Every && platform.len() <= TUNING.exhaustive_max_workers)
                    .then(|| ("every pair of orders", exhaustive(&pb))),
            ) {
                match solved {
                    Ok(c) => {
                        if name == "every pair of orders" {
                            optimum = Some(c.makespan);
                        }
                        cands.push((name, c));
                    }
                    Err(e) => {
                        notes.push(format!("best: {name} left out ({e})"));
                        failed = Some(e);
                    }
                }
            }
            if let (true, Some(e)) = (cands.is_empty(), failed) {
                return Err(e);
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
                return Err(crate::Error::Solver("no one-round candidate could be solved".into()));
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

mod against;
pub use against::{efficiency, equivalent_homogeneous, homogeneous_makespan, steady_state_bound};
