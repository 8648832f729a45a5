//! The planner's tuned numbers, in one value ([`TUNING`]): each field says
//! what it sets; what it was measured on, the command that repeats the
//! measurement, and how many committed predictions move when it is halved
//! are in `docs/tuning.md` (`scripts/constant-sensitivity.sh` halves a
//! field here as it does a constant). Tolerances of floating-point
//! comparisons are not tuned numbers: they are in `tol.rs`.

/// The planner's tuned numbers: one value, [`TUNING`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    // The shared uplink's lanes (`lane.rs`).
    /// Share of a lane that transfers whose shares do not fit together carry at once.
    pub cap: f64,
    /// Share of a lane below which a transfer that does not fit beside those under way may start.
    pub fill: f64,
    /// Least share of a lane, below `fill`, that must be free for such a transfer to start.
    pub room: f64,

    // Pacing sends behind a shared uplink (`pace.rs`, `paced.rs`).
    /// Share of the uplink's rest that the workers fitted beside the full ones may take.
    pub margin: f64,
    /// Share of their links' rates the full workers' sends are held to when others are fitted beside them.
    pub headroom: f64,
    /// A worker whose steady-state rate is at least this share of its own limit counts as full.
    pub full: f64,
    /// Sends are paced only behind an uplink at least this many times as fast as the fastest link alone.
    pub min_gain: f64,
    /// The master's socket to a paced worker is held to this many times its pace.
    pub catch_up: f64,
    /// Most sends a `fitted` candidate makes room for, less one.
    pub fit_max: usize,
    /// A `fitted` share is this much below the admission rule's edge.
    pub fit_below: f64,
    /// A paced plan is taken when it predicts at least this share earlier than the plain one.
    pub pace_gain: f64,
    /// The same, on costs that were not measured under load.
    pub unmeasured_pace_gain: f64,

    // The multi-round search (`rounds.rs`, `rounds/stop.rs`).
    /// Candidates predicted within this share of the earliest are as good as it (fewest chunks taken).
    pub slack: f64,
    /// `slack` behind a shared uplink; also what the search's give-up test leaves in hand.
    pub shared_slack: f64,
    /// Seconds it takes to time one chunk of a candidate strictly in order, about.
    pub sim_secs: f64,
    /// Enrolled workers over which a chunk's timing costs `sim_secs` more again.
    pub sim_width: f64,
    /// Chunks a candidate of the search may have.
    pub max_chunks: usize,
    /// Candidates (the best strictly in order) executed with their gaps filled.
    pub filled: usize,
    /// Round counts over which a gain is weighed before the search stops.
    pub stall_steps: usize,
    /// Lags tried at every round count.
    pub lags: usize,

    // The one-round searches (`search.rs`, `plan.rs`, `opening.rs`) and the bound (`bound.rs`).
    /// The exhaustive search runs only where it costs at most this part of the quick plan's makespan.
    pub exhaustive_worth: f64,
    /// The part of the makespan the FIFO local search may spend on linear programs.
    pub local_search_worth: f64,
    /// Seconds one linear program over four workers takes, about.
    pub lp_secs: f64,
    /// The one-round plan is searched further only when its quick form ends within this factor of the multi-round plan's.
    pub one_round_reach: f64,
    /// Workers whose key differs by at most this fraction are alike (the one with the most slack is preferred).
    pub slack_tie: f64,
    /// The exhaustive search over every pair of orders is tried for at most this many workers.
    pub exhaustive_max_workers: usize,
    /// The FIFO local search stops after this many scenario evaluations.
    pub local_search_budget: usize,
    /// Seconds of the chosen worker's steady-state throughput a batch's opening chunk carries.
    pub opening_secs: f64,

    // Column generation for a FIFO scenario under memory bounds (`columns.rs`).
    /// Rounds of column generation before the full LP is solved instead.
    pub column_rounds: usize,
    /// Orders this short are solved in full.
    pub column_small: usize,
    /// A subset this large (as a part of the order) is solved in full instead.
    pub column_most: f64,
    /// Workers that join at least, in a round of column generation.
    pub column_join: usize,

    // One large product (`product.rs`).
    /// Rounds of evening out the workers' predicted finish times.
    pub balance_rounds: usize,
}

/// The planner's tuned numbers (see [`Tuning`] and `docs/tuning.md`).
pub const TUNING: Tuning = Tuning {
    cap: 0.95,
    fill: 0.85,
    room: 0.05,
    margin: 0.70,
    headroom: 0.85,
    full: 0.98,
    min_gain: 1.2,
    catch_up: 1.3,
    fit_max: 4,
    fit_below: 0.99,
    pace_gain: 0.05,
    unmeasured_pace_gain: 0.15,
    slack: 0.01,
    shared_slack: 0.03,
    sim_secs: 0.8e-6,
    sim_width: 128.0,
    max_chunks: 6_000,
    filled: 3,
    stall_steps: 3,
    lags: 3,
    exhaustive_worth: 0.05,
    local_search_worth: 0.01,
    lp_secs: 1e-4,
    one_round_reach: 1.1,
    slack_tie: 0.01,
    exhaustive_max_workers: 4,
    local_search_budget: 2_000,
    opening_secs: 0.05,
    column_rounds: 8,
    column_small: 128,
    column_most: 0.5,
    column_join: 4,
    balance_rounds: 12,
};
