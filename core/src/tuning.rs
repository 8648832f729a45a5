//! Online correction's tuned numbers, in one value ([`TUNING`]): each
//! field says what it sets; what it was measured on is in
//! `docs/tuning.md` ("Online correction"). They act on runs, not on
//! plans: a run against its prediction shows them, a committed
//! prediction cannot.

/// Online correction's tuned numbers: one value, [`TUNING`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    /// Fewest observations an estimate of a worker's phase rests on.
    pub min_count: usize,
    /// Predicted seconds an estimate must cover, as a part of the batch's predicted makespan.
    pub span: f64,
    /// Relative changes of a worker's pace below this are noise, not a change.
    pub deadband: f64,
    /// Free workers are enrolled only when the steady state gains at least this share.
    pub enrol_gain: f64,
    /// One correction grows a worker's part at most this many times (or by one product a slot).
    pub growth: f64,
}

/// Online correction's tuned numbers (see [`Tuning`] and `docs/tuning.md`).
pub const TUNING: Tuning = Tuning {
    min_count: 3,
    span: 0.1,
    deadband: 0.25,
    enrol_gain: 0.10,
    growth: 2.0,
};
