//! Every numeric tolerance of the planner, in one place.

/// Relative tolerance under which two makespans (or throughputs) are equal.
/// The LP solver works in f64 with its own pivoting tolerances around 1e-9;
/// this is the precision the planner promises between its code paths.
pub const REL_TOL: f64 = 1e-7;

/// A rational load below this many units counts as "not enrolled".
pub const LOAD_EPS: f64 = 1e-9;

/// Idle time below this fraction of the makespan counts as none.
pub const IDLE_REL_EPS: f64 = 1e-7;

/// Two `d/c` ratios closer than this (relatively) count as the same `z`.
pub const Z_REL_EPS: f64 = 1e-9;

/// A rational load within this distance of an integer is that integer when
/// rounding (so that 200.9999999999 is not floored to 200).
pub const SNAP_EPS: f64 = 1e-6;

/// A candidate schedule replaces the incumbent only when it is shorter by
/// more than this fraction, so float noise never flips a choice (strategy
/// picks, local search, rounding moves).
pub const STRICT_GAIN: f64 = 1e-12;

/// Dinkelbach's iteration on the FIFO ratio stops once the ratio grows by
/// less than this fraction: a few ulps, i.e. converged.
pub const RATIO_CONVERGED: f64 = 1e-15;

/// A transfer fits in the gap before an awaited return when it ends no
/// more than this many seconds after the return's chunk is computed: the
/// planner and the runtime compute those instants by different sums, which
/// may differ in the last bits.
pub const GAP_FIT: f64 = 1e-9;

/// Shares of a shared uplink (fractions of its capacity) add up to at
/// most 1 give or take this much: a sum of shares like 1/3 + 2/3 may land
/// a few ulps above 1.
pub const SHARE_EPS: f64 = 1e-9;

/// Below this magnitude a value counts as zero in relative comparisons.
pub const ABS_FLOOR: f64 = 1e-12;

/// Relative equality, with an absolute floor for values near zero.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(ABS_FLOOR)
}

/// The largest cost or latency accepted, in seconds.
pub const MAX_COST: f64 = 1e9;

/// The largest factor on a cost a worker may hold.
pub const MAX_FACTOR: f64 = 1e6;
