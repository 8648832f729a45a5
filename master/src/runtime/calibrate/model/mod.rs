//! Calibration's pure decisions, apart from the probes that take the
//! readings (`calibrate/compute.rs`, `ports.rs`, `coupled.rs`): fits and
//! which of them calibration stands behind (`fit`), the port model from
//! overlaps and rates (`ports`), factors under load from a pipeline's
//! steady state (`load`), scaling models over sizes (`sizes`), and the
//! tuned numbers all of them use (`tuning`). No socket, clock or await
//! here: each is tested from numbers alone.

pub mod fit;
pub mod load;
pub mod ports;
pub mod sizes;
pub mod tuning;

use dls_protocol::Form;
use fit::Fit;
use ports::PortFindings;
use tuning::TUNING;

/// One worker's measurements and fits.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkerCalibration {
    pub name: String,
    pub send: Fit,
    pub compute: Fit,
    #[serde(rename = "return")]
    pub ret: Fit,
    /// (units, send s, compute s, return s), medians per size.
    pub samples: Vec<(u64, f64, f64, f64)>,
    /// Products that fit in the worker's memory limit at once.
    pub max_load: u64,
    /// Factors (send, compute, return) of its costs while it receives,
    /// computes and returns at once, over its costs one at a time
    /// (`coupled.rs`); `None` where not measured.
    pub under_load: Option<[f64; 3]>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Calibration {
    /// The products measured: one unit is one of them.
    pub form: Form,
    pub workers: Vec<WorkerCalibration>,
    /// How the master's transfers to several workers get along (`None`:
    /// not measured, with fewer than two workers or when the probes
    /// failed; the report's one port is assumed).
    pub ports: Option<PortFindings>,
}

/// A worker's factors under load for people, as the platform file and
/// `dls calibrate` both say them: "send 1.20x, compute 1.75x, return
/// 1.20x".
pub fn factors_under_load([fc, fw, fd]: [f64; 3]) -> String {
    format!("send {fc:.2}x, compute {fw:.2}x, return {fd:.2}x")
}

/// Whether two repeated probes agree (see `TUNING.agree`).
pub fn agree(v: &[f64]) -> bool {
    v.len() == 2 && (v[0] - v[1]).abs() <= TUNING.agree * v[0].max(v[1])
}

/// The smallest positive cost the planner is given, where a fit says zero
/// or less (a cost too small to measure).
pub const MIN_COST: f64 = 1e-9;

/// The median of repeated probes (the mean of the middle two of an even
/// count, not the larger: that would make every cost a maximum of two).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let h = v.len() / 2;
    if v.len().is_multiple_of(2) && h > 0 {
        (v[h - 1] + v[h]) / 2.0
    } else {
        v[h]
    }
}
