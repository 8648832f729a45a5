//! What the user asks for: a strategy and a request.

use crate::rounding::Rounding;
use crate::schedule::Ports;
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
