//! The platform model: a master and p workers with linear costs.

use crate::error::{Error, Result};
pub use crate::tol::{MAX_COST, MAX_FACTOR};
use crate::uplink::Uplink;
use std::collections::HashSet;

/// One worker of the star, with the paper's linear costs per load unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Worker {
    pub name: String,
    /// Seconds for the master to send this worker one unit of load.
    pub c: f64,
    /// Seconds for this worker to compute one unit.
    pub w: f64,
    /// Seconds for this worker to return one unit's results.
    pub d: f64,
    /// The most units this worker's memory holds, if bounded.
    pub max_load: Option<u64>,
    /// Seconds every message costs whatever its size (the intercepts of
    /// the affine costs). One-round strategies ignore them; `rounds`, which
    /// sends many messages, plans with them.
    pub latency: Latency,
    /// Factors (send, compute, return) that `c`, `w` and `d` include for
    /// a worker receiving, computing and returning at once, as it does
    /// where a send and a return cross (two lanes); measured by `dls
    /// calibrate`. [`Platform::for_ports`] takes them out for one lane.
    pub under_load: Option<[f64; 3]>,
    /// How many times longer this worker's return takes while the master
    /// sends it a chunk than apart (at least 1; none: 1). Only where a
    /// worker's send and return cross (two lanes); a node short of
    /// processor receives and returns on the same small share of it.
    pub return_receiving: Option<f64>,
}

/// Per-message costs: a send, a computation, a return take these many
/// seconds on top of their per-unit costs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    pub send: f64,
    pub compute: f64,
    pub ret: f64,
}

impl Worker {
    pub fn new(name: impl Into<String>, c: f64, w: f64, d: f64) -> Self {
        Worker {
            name: name.into(),
            c,
            w,
            d,
            max_load: None,
            latency: Latency::default(),
            under_load: None,
            return_receiving: None,
        }
    }

    pub fn with_latency(mut self, latency: Latency) -> Self {
        self.latency = latency;
        self
    }

    pub fn with_max_load(mut self, max_load: u64) -> Self {
        self.max_load = Some(max_load);
        self
    }

    /// The part of its link's rate this worker's return runs at while it
    /// receives (1 over [`Worker::return_receiving`]).
    pub fn return_speed_receiving(&self) -> f64 {
        1.0 / self.return_receiving.unwrap_or(1.0).max(1.0)
    }

    /// This worker's costs `[c, w, d]` alone: without the factors they
    /// include for a worker receiving, computing and returning at once
    /// ([`Worker::under_load`]; factors are at least 1, calibration's
    /// floor, so the costs stay positive and finite).
    pub fn alone(&self) -> [f64; 3] {
        let [fc, fw, fd] = self.under_load.unwrap_or([1.0; 3]);
        [self.c / fc.max(1.0), self.w / fw.max(1.0), self.d / fd.max(1.0)]
    }

    /// The bound on this worker's load as a float (infinite when unbounded).
    pub fn bound(&self) -> f64 {
        self.max_load.map_or(f64::INFINITY, |b| b as f64)
    }
}

/// A validated set of workers: finite positive `c` and `w`, finite
/// non-negative `d`, unique non-empty names, `max_load` at least 1; and,
/// when it was measured, the uplink the master's transfers share.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    pub(crate) workers: Vec<Worker>,
    pub(crate) uplink: Option<Uplink>,
}

impl Platform {
    pub fn new(workers: Vec<Worker>) -> Result<Self> {
        if workers.is_empty() {
            return Err(Error::EmptyPlatform);
        }
        let mut names = HashSet::new();
        for (index, wk) in workers.iter().enumerate() {
            if wk.name.trim().is_empty() {
                return Err(Error::BadName {
                    index,
                    name: wk.name.clone(),
                    problem: "empty",
                });
            }
            if !names.insert(wk.name.as_str()) {
                return Err(Error::BadName {
                    index,
                    name: wk.name.clone(),
                    problem: "used by another worker",
                });
            }
            let positive = "> 0 and at most 1e9 s";
            let non_negative = ">= 0 and at most 1e9 s";
            for (field, value, expected) in [
                ("c", wk.c, positive),
                ("w", wk.w, positive),
                ("d", wk.d, non_negative),
                ("send_latency", wk.latency.send, non_negative),
                ("compute_latency", wk.latency.compute, non_negative),
                ("return_latency", wk.latency.ret, non_negative),
            ] {
                // Larger costs (32 years a product) are typing errors, and
                // would overflow the planner's arithmetic.
                let ok = value.is_finite()
                    && value <= MAX_COST
                    && if expected == positive {
                        value > 0.0
                    } else {
                        value >= 0.0
                    };
                if !ok {
                    return Err(Error::BadCost {
                        worker: wk.name.clone(),
                        field,
                        value,
                        expected,
                    });
                }
            }
            if let Some(f) = wk.return_receiving {
                if !(f.is_finite() && (1.0..=MAX_FACTOR).contains(&f)) {
                    return Err(Error::BadCost {
                        worker: wk.name.clone(),
                        field: "return_receiving",
                        value: f,
                        expected: ">= 1 and at most 1e6",
                    });
                }
            }
            if wk.max_load == Some(0) {
                return Err(Error::BadMaxLoad {
                    worker: wk.name.clone(),
                    value: 0,
                });
            }
        }
        Ok(Platform { workers, uplink: None })
    }

    /// The same workers behind `uplink` (a switched network whose master
    /// link was measured), or none.
    pub fn with_uplink(mut self, uplink: Option<Uplink>) -> Platform {
        self.uplink = uplink;
        self
    }

    /// The uplink the master's transfers share, when it was measured.
    pub fn uplink(&self) -> Option<Uplink> {
        self.uplink
    }

    /// The platform of the workers at `indices` only, in that order.
    pub fn subset(&self, indices: &[usize]) -> Result<Platform> {
        let mut out = Vec::with_capacity(indices.len());
        for &i in indices {
            let w = self.workers.get(i).ok_or_else(|| {
                Error::BadScenario(format!("worker index {i} out of range (p = {})", self.workers.len()))
            })?;
            out.push(w.clone());
        }
        Ok(Platform::new(out)?.with_uplink(self.uplink))
    }

    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    pub fn len(&self) -> usize {
        self.workers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Total units the workers can hold, `None` when some worker is unbounded.
    pub fn capacity(&self) -> Option<u64> {
        self.workers
            .iter()
            .map(|w| w.max_load)
            .try_fold(0u64, |acc, b| b.map(|b| acc.saturating_add(b)))
    }

    /// The common ratio z = d/c when every worker has the same one.
    pub fn uniform_z(&self) -> Option<f64> {
        let z0 = self.workers[0].d / self.workers[0].c;
        self.workers
            .iter()
            .all(|w| crate::tol::close(w.d / w.c, z0, crate::tol::Z_REL_EPS))
            .then_some(z0)
    }

    /// Check that `load` units fit under the bounds.
    pub fn check_load(&self, load: u64) -> Result<()> {
        if load == 0 {
            return Err(Error::ZeroLoad);
        }
        match self.capacity() {
            Some(capacity) if capacity < load => Err(Error::InfeasibleBounds { load, capacity }),
            _ => Ok(()),
        }
    }
}
