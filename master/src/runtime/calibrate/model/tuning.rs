//! Calibration's tuned numbers, in one value ([`TUNING`]): each field says
//! what it sets; what it was measured on is in `docs/tuning.md`
//! ("Calibration"). They act on what calibration measures, not on plans:
//! a run against its prediction shows them, a committed prediction
//! cannot. The gain from which transfers count as sharing an uplink is
//! the planner's own (`dls_lp::TUNING.min_gain`).

/// Calibration's tuned numbers: one value, [`TUNING`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tuning {
    // The port model (`ports.rs`).
    /// Overlap from which sends and returns count as running at once.
    pub duplex: f64,
    /// How far from `duplex`, the uplink's gain or 1 a first measure is clear enough not to repeat.
    pub clear: f64,
    /// Most bytes one probe transfer carries.
    pub max_bytes: u64,
    /// Seconds one probe transfer should take, within `max_bytes`.
    pub probe_seconds: f64,
    /// Most workers (the fastest links) whose transfers run at once when the uplink's rate is measured.
    pub group: usize,
    /// Two repeated probes agree when they differ by at most this fraction (`mod.rs`).
    pub agree: f64,

    // Costs under load: pipelines of real chunks (`coupled.rs`).
    /// Most chunks in one pipeline.
    pub chunks: u64,
    /// Fewest chunks in one pipeline.
    pub min_chunks: u64,
    /// Seconds a pipeline takes, about (its slowest phase's), within `min_chunks` and `chunks`.
    pub pipeline_seconds: f64,
    /// Seconds each chunk takes in its slowest phase, about.
    pub chunk_seconds: f64,
    /// A factor under load this close to 1 counts as none.
    pub noise: f64,
    /// Computing's own factor counts only where it adds at least this share of the slowest phase.
    pub worth: f64,
    /// Fewest chunks held at once (and in a pipeline) that say anything of a steady state.
    pub fewest: u64,
    /// Chunks a pipeline holds at once where the worker's room allows.
    pub window: u64,

    // Calibration inside a run (`session/cold.rs`).
    /// Bytes of inputs a worker's probe chunk carries, about.
    pub probe_bytes: u64,
    /// Bytes of inputs all the probe chunks together carry at most, about.
    pub probes_bytes: u64,
}

/// Calibration's tuned numbers (see [`Tuning`] and `docs/tuning.md`).
pub const TUNING: Tuning = Tuning {
    duplex: 1.5,
    clear: 0.2,
    max_bytes: 16 << 20,
    probe_seconds: 0.1,
    group: 4,
    agree: 0.10,
    chunks: 16,
    min_chunks: 6,
    pipeline_seconds: 2.0,
    chunk_seconds: 0.25,
    noise: 1.04,
    worth: 0.05,
    fewest: 3,
    window: 4,
    probe_bytes: 4 << 20,
    probes_bytes: 16 << 20,
};
