//! Each worker's scaling model from calibrations at several sizes
//! (`dls calibrate --sizes`): transfers by the byte, speed by size.

use super::fit::fit;
use super::{Calibration, MIN_COST};
use crate::config::scaling::Scaling;
use anyhow::{bail, Result};

/// Each worker's scaling model (in the order of the last calibration's
/// workers) from calibrations at several sizes of one type: transfers by
/// the byte (a least-squares line through every probe of every size, its
/// intercept the latency), computing speed at each size (flops of a product
/// over its measured cost). See [`crate::config::scaling`].
pub fn scaling(cals: &[Calibration]) -> Result<Vec<Scaling>> {
    let Some(last) = cals.last() else {
        bail!("no calibration to fit a scaling model to");
    };
    let mut out = Vec::new();
    for w in &last.workers {
        let (mut send, mut ret, mut speed) = (Vec::new(), Vec::new(), Vec::new());
        for cal in cals {
            let Some(at) = cal.workers.iter().find(|x| x.name == w.name) else {
                continue;
            };
            let (bytes_in, bytes_out) = (cal.form.in_bytes(1) as f64, cal.form.out_bytes(1) as f64);
            // A size probed for computing alone says NaN for its transfers.
            for &(units, s, _, r) in &at.samples {
                send.extend(s.is_finite().then_some((units as f64 * bytes_in, s)));
                ret.extend(r.is_finite().then_some((units as f64 * bytes_out, r)));
            }
            let n = crate::config::scaling::equivalent_size(&cal.form);
            speed.push((n, cal.form.shape.flops() / at.compute.slope.max(MIN_COST)));
        }
        speed.sort_by(|a, b| a.0.total_cmp(&b.0));
        speed.dedup_by(|a, b| a.0 == b.0);
        let s = Scaling {
            send_per_byte: per_byte(&send),
            return_per_byte: per_byte(&ret),
            speed,
        };
        s.validate(&w.name)?;
        out.push(s);
    }
    Ok(out)
}

/// Seconds a byte from probes (bytes, seconds): the least-squares slope,
/// or where the latency hides it (a slope at or below zero) the largest
/// probe's seconds a byte, latency included: an upper bound, never a cost
/// of nothing. No probe at all: the smallest cost.
pub(crate) fn per_byte(points: &[(f64, f64)]) -> f64 {
    let slope = fit(points).slope;
    if slope.is_finite() && slope > 0.0 {
        return slope;
    }
    (points.iter())
        .filter(|p| p.0 > 0.0 && p.1 > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(MIN_COST / 1e9, |p| p.1 / p.0)
}
