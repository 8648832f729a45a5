//! Strategies: which scenario to use, its loads, and the integer plan.
//!
//! `plan/strategy.rs` is what is asked; `plan/one_round.rs` and
//! `plan/multi_round.rs` make the candidates; `plan/best.rs` weighs them
//! by the one choice ([`crate::choice`]); `plan/against.rs` is what a
//! plan is weighed against.

use crate::error::Result;
use crate::pace::Pace;
use crate::platform::Platform;
use crate::schedule::{Ports, Scenario, Timeline, WorkerTimes};
pub use crate::search::{
    exhaustive, exhaustive_programs, exhaustive_worth, order_dec_c, order_inc_c, order_inc_cd, order_inc_w, solve_fifo,
    solve_lifo, solve_scenario, Problem, Solved,
};
use crate::sequence::Sequence;

mod against;
mod best;
mod multi_round;
mod one_round;
mod strategy;

pub use against::{efficiency, equivalent_homogeneous, homogeneous_makespan, steady_state_bound};
pub use strategy::{Request, Strategy};

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
    /// Paced sends, indexed like the platform (empty: none paced): what
    /// the master holds each of these workers' sockets to
    /// ([`crate::pace`]). The plan was timed with their `c` their pace
    /// ([`Plan::costs_on`]).
    pub pace: Vec<Option<Pace>>,
}

impl Plan {
    /// The costs this plan was timed on: `links` (the platform it was
    /// planned for) with each paced worker's `c` its pace; `links` itself
    /// when nothing is paced. What a run predicts and corrects with.
    pub fn costs_on(&self, links: &Platform) -> Platform {
        if self.pace.iter().all(Option::is_none) {
            return links.clone();
        }
        crate::pace::paced(links, &self.pace)
    }

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
/// ([`crate::rounds::plan_rounds_unless`]).
pub(crate) fn plan_unless(platform: &Platform, req: &Request, hopeless: &dyn Fn(f64) -> bool) -> Result<Option<Plan>> {
    match req.strategy {
        Strategy::Rounds => multi_round::plan_multi_round(platform, req, hopeless),
        Strategy::Best => best::plan_best(platform, req, hopeless),
        _ => one_round::plan_one_round(platform, req, one_round::Effort::Every).map(Some),
    }
}

/// Plan `req.load` units over the workers `subset` of `platform` only (the
/// survivors of a run, say). The plan is indexed like the whole platform:
/// the other workers get no load and an empty timeline, and the orders name
/// whole-platform indices.
pub fn plan_on(platform: &Platform, subset: &[usize], req: &Request) -> Result<Plan> {
    let sub = platform.subset(subset)?;
    Ok(plan(&sub, req)?.spread(subset, platform.len()))
}
