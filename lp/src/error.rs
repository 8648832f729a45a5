use thiserror::Error;

/// Everything the planner can refuse. None of these is retryable as is: each
/// names the input that must change.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// The platform has no worker at all.
    #[error("the platform has no worker")]
    EmptyPlatform,
    /// A worker has no name, or a name already used by another worker.
    #[error("worker #{index}: name {name:?} is {problem}")]
    BadName {
        index: usize,
        name: String,
        problem: &'static str,
    },
    /// A cost is negative, zero where it must be positive, NaN or infinite.
    #[error("worker {worker:?}: `{field}` = {value} is invalid: it must be {expected}")]
    BadCost {
        worker: String,
        field: &'static str,
        value: f64,
        expected: &'static str,
    },
    /// An uplink's cost is negative, zero where it must be positive, NaN
    /// or infinite.
    #[error("`{field}` = {value} s a unit is invalid: it must be > 0 (>= 0 for the return) and at most 1e9 s")]
    BadUplink { field: &'static str, value: f64 },
    /// `max_load` is zero.
    #[error("worker {worker:?}: `max_load` must be at least 1 (got {value})")]
    BadMaxLoad { worker: String, value: u64 },
    /// The load to plan is zero.
    #[error("the load must be at least one unit")]
    ZeroLoad,
    /// The load does not fit under the workers' `max_load` bounds.
    #[error("infeasible bounds: the workers can hold {capacity} units in all (sum of max_load), fewer than the load of {load}; strategy rounds sends the batch in chunks that fit")]
    InfeasibleBounds { load: u64, capacity: u64 },
    /// A scenario does not list every worker of the platform exactly once.
    #[error("invalid scenario: {0}")]
    BadScenario(String),
    /// The LP solver failed on an instance that should be feasible.
    #[error("the LP solver failed: {0}")]
    Solver(String),
    /// Rectangles of one product cannot be made of these areas or sizes.
    #[error("cannot partition the product: {0}")]
    BadPartition(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
