//! Lines through probe times: least squares, when an intercept counts
//! as a latency, and which fits a worker's calibration stands behind.

use super::{WorkerCalibration, MIN_COST};

/// A least-squares line `seconds = intercept + slope · units`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Fit {
    pub slope: f64,
    pub intercept: f64,
    pub r2: f64,
}

/// The two-sided 95% critical value of Student's t with `dof` degrees of
/// freedom (tables; 1.96 beyond 30): how many standard errors an estimate
/// from so few points must stand from zero to count. With three probe
/// sizes (one degree of freedom) that is 12.7, not 2: a CPU-quota'd worker
/// probed at 1, 2 and 4 units once showed a compute "latency" of 87 ms at
/// 2.9 standard errors, and plans made with it chose 4 rounds instead of 17.
pub fn t95(dof: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        d if d <= T.len() => T[d - 1],
        _ => 1.96,
    }
}

/// Ordinary least squares; R² is 1 for a perfect line (and for fewer than
/// three points, where it says nothing).
pub fn fit(points: &[(f64, f64)]) -> Fit {
    let n = points.len() as f64;
    if points.is_empty() {
        return Fit {
            slope: 0.0,
            intercept: 0.0,
            r2: 0.0,
        };
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    if sxx == 0.0 {
        // One size only: a line through the origin.
        return Fit {
            slope: my / mx.max(f64::MIN_POSITIVE),
            intercept: 0.0,
            r2: 1.0,
        };
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let r2 = if syy == 0.0 { 1.0 } else { (sxy * sxy) / (sxx * syy) };
    // An intercept not significantly away from zero (95%, Student's t) is
    // noise, not a latency (under a CPU quota, short probes land anywhere
    // in the scheduler's period): the line then goes through the origin,
    // so that plans do not pay a latency per message that is not there.
    // With two points there is no residual to judge by, and the line stays.
    if points.len() >= 3 {
        let ssr: f64 = points.iter().map(|p| (p.1 - intercept - slope * p.0).powi(2)).sum();
        let se = (ssr / (n - 2.0) * (1.0 / n + mx * mx / sxx)).sqrt();
        if intercept.abs() <= t95(points.len() - 2) * se {
            let sx2: f64 = points.iter().map(|p| p.0 * p.0).sum();
            let sxy0: f64 = points.iter().map(|p| p.0 * p.1).sum();
            return Fit {
                slope: sxy0 / sx2,
                intercept: 0.0,
                r2,
            };
        }
    }
    Fit { slope, intercept, r2 }
}

/// The line `seconds = intercept + slope · units` for probes whose noise
/// is relative (a few percent of each time, whatever its size, as a shared
/// processor's or network's is): least squares on the seconds per unit
/// against 1/units, where that noise is even, so that the large probes do
/// not decide the intercept alone. The intercept is kept as a latency only
/// if significant ([`t95`] standard errors from zero); otherwise the cost
/// per unit is the mean of the probes' costs per unit. R² is that of
/// [`fit`] (the report's linearity measure). Sizes must be positive, else
/// this is [`fit`]. (Calibration judges the scatter too: see
/// [`fit_relative_judged`].)
#[cfg(test)]
pub fn fit_relative(points: &[(f64, f64)]) -> Fit {
    fit_relative_judged(points, Scatter::default())
}

/// How much repeated probes of the same size disagreed: the sum of squared
/// deviations of each probe's seconds per unit from its size's mean, over
/// every size, with its degrees of freedom (probes less sizes), and how
/// many probes each size's median was taken from.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scatter {
    pub sum_sq: f64,
    pub dof: usize,
    pub reps: usize,
}

impl Scatter {
    /// Adds one size's repeated seconds (`times`, of `units` units each).
    pub fn add(&mut self, units: u64, times: &[f64]) {
        if times.len() < 2 || units == 0 {
            return;
        }
        let per: Vec<f64> = times.iter().map(|t| t / units as f64).collect();
        let mean = per.iter().sum::<f64>() / per.len() as f64;
        self.sum_sq += per.iter().map(|y| (y - mean).powi(2)).sum::<f64>();
        self.dof += per.len() - 1;
        self.reps = self.reps.max(times.len());
    }

    /// The variance of one size's median seconds per unit that the
    /// repetitions show (a median of r values varies about π/2 times as
    /// much as their mean), with its degrees of freedom; none without
    /// repetitions.
    fn median_variance(&self) -> Option<(f64, usize)> {
        (self.dof > 0 && self.reps > 1).then(|| {
            (
                self.sum_sq / self.dof as f64 * std::f64::consts::FRAC_PI_2 / self.reps as f64,
                self.dof,
            )
        })
    }
}

/// [`fit_relative`] on the medians of repeated probes, judging the
/// intercept by the larger of two noises: the points' distance from the
/// line, and the repetitions' disagreement (`scatter`). A worker whose
/// probe times jump between repetitions (a CPU quota's periods, a shared
/// node) can put a few medians on a line by chance: with three sizes
/// probed three times on a test bed of CPU quotas, the residuals alone
/// made compute intercepts from −63 to +35 ms "significant" at 95% in 7 of
/// 32 fits, half of them below zero, which no latency can be.
pub fn fit_relative_judged(points: &[(f64, f64)], scatter: Scatter) -> Fit {
    let plain = fit(points);
    if points.len() < 3 || points.iter().any(|p| p.0 <= 0.0) {
        return plain;
    }
    let per_unit: Vec<(f64, f64)> = points.iter().map(|p| (1.0 / p.0, p.1 / p.0)).collect();
    let n = per_unit.len() as f64;
    let mx = per_unit.iter().map(|p| p.0).sum::<f64>() / n;
    let my = per_unit.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = per_unit.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return plain;
    }
    let sxy: f64 = per_unit.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let latency = sxy / sxx;
    let slope = my - latency * mx;
    let ssr: f64 = per_unit.iter().map(|p| (p.1 - slope - latency * p.0).powi(2)).sum();
    let (mut var, mut dof) = (ssr / (n - 2.0), per_unit.len() - 2);
    if let Some((v, d)) = scatter.median_variance() {
        if v > var {
            (var, dof) = (v, d);
        }
    }
    let se = (var / sxx).sqrt();
    if latency.abs() <= t95(dof) * se {
        return Fit {
            slope: my,
            intercept: 0.0,
            r2: plain.r2,
        };
    }
    Fit {
        slope,
        intercept: latency,
        r2: plain.r2,
    }
}

/// The fits and warnings of one worker's samples (units, send s, compute
/// s, return s), with how repeated probes of send, compute and return
/// disagreed.
pub(crate) fn finish(
    name: &str,
    samples: Vec<(u64, f64, f64, f64)>,
    scatter: [Scatter; 3],
    max_load: u64,
) -> WorkerCalibration {
    // A size measured for one phase only says NaN for the others.
    let line = |f: fn(&(u64, f64, f64, f64)) -> f64, scatter: Scatter| {
        let points: Vec<(f64, f64)> = (samples.iter())
            .map(|s| (s.0 as f64, f(s)))
            .filter(|p| p.1.is_finite())
            .collect();
        fit_relative_judged(&points, scatter)
    };
    let mut warnings = Vec::new();
    let mut trusted = |what: &str, f: fn(&(u64, f64, f64, f64)) -> f64, scatter: Scatter| {
        let fitted = line(f, scatter);
        let largest = (samples.iter())
            .filter(|s| f(s).is_finite() && f(s) > 0.0)
            .max_by_key(|s| s.0)
            .map(|s| (s.0.max(1) as f64, f(s)));
        // Measurable: what the units add to the largest probe is more than
        // rounding noise on its time.
        if fitted.slope > 0.0 && largest.is_none_or(|(k, t)| fitted.slope * k > 1e-3 * t) {
            return fitted;
        }
        // The per-message latency took all of the time (the slope is
        // noise around zero or below it): a cost per unit the planner
        // could not stand behind. The largest probe's seconds per unit,
        // latency included, is what a chunk of its size costs: an upper
        // bound on the slope, and never a factor of a million on a cost
        // clamped to nothing.
        match largest.map(|(k, t)| t / k) {
            Some(per_unit) => {
                warnings.push(format!(
                    "{what}: cost per unit not separable from its latency (slope {:.3e} s); using the largest probe's {per_unit:.3e} s a unit, latency included",
                    fitted.slope
                ));
                Fit {
                    slope: per_unit,
                    intercept: 0.0,
                    r2: fitted.r2,
                }
            }
            None => {
                warnings.push(format!(
                    "{what}: cost per unit measured as {:.3e} s; too small to measure, using {MIN_COST:e} s",
                    fitted.slope
                ));
                fitted
            }
        }
    };
    let (send, compute, ret) = (
        trusted("send", |s| s.1, scatter[0]),
        trusted("compute", |s| s.2, scatter[1]),
        trusted("return", |s| s.3, scatter[2]),
    );
    for (what, f) in [("send", &send), ("compute", &compute), ("return", &ret)] {
        if f.slope <= 0.0 {
            continue;
        }
        if samples.len() >= 3 && f.r2 < 0.95 {
            warnings.push(format!("{what}: the linear model fits poorly (R² = {:.3})", f.r2));
        }
        if f.intercept > f.slope {
            warnings.push(format!(
                "{what}: latency {:.3e} s exceeds the cost of one unit ({:.3e} s): plans will be optimistic for small loads",
                f.intercept, f.slope
            ));
        }
    }
    WorkerCalibration {
        name: name.to_string(),
        send,
        compute,
        ret,
        samples,
        max_load,
        under_load: None,
        warnings,
    }
}
