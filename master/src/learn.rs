//! Models learned from runs. After every batch the master records, for each
//! worker that took part and was not lost, how long its send, its computing
//! and its return took for the load it had; the next plan uses costs fitted
//! to everything seen so far, so predictions improve from batch to batch.
//!
//! Each phase is kept as a table of (load, seconds), made non-decreasing in
//! the load as Cérin et al. describe for unknown cost functions (section
//! 3.3: a larger load never takes less time); the planner's linear cost is
//! the least-squares slope through the origin of that table. The model is
//! stored as JSON, next to the cluster file by default.

use crate::output::report::RunReport;
use anyhow::{bail, Context, Result};
use dls_lp::partition::monotone;
use dls_lp::{Platform, Worker};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The most observations kept per worker and phase (the newest win).
pub const KEEP: usize = 32;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// (products, seconds) of each phase.
    pub send: Vec<(f64, f64)>,
    pub compute: Vec<(f64, f64)>,
    #[serde(rename = "return")]
    pub ret: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The products the costs are for: n, and the whole form as
    /// [`form_key`] writes it (absent in files of square float64 products).
    pub size: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub products: Option<String>,
    /// Batches observed.
    pub batches: u32,
    pub workers: BTreeMap<String, Observed>,
    /// The costs last calibrated for each worker (c, w, d per product): a
    /// worker a plan leaves out is never observed, and without these every
    /// later run would calibrate again to learn what it already knew.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub calibrated: BTreeMap<String, [f64; 3]>,
}

fn push(v: &mut Vec<(f64, f64)>, x: f64, t: f64) {
    if x > 0.0 && t.is_finite() && t > 0.0 {
        v.push((x, t));
        if v.len() > KEEP {
            v.remove(0);
        }
    }
}

/// Least-squares slope through the origin of a made-monotone table.
pub fn per_unit(points: &[(f64, f64)]) -> Option<f64> {
    if points.is_empty() {
        return None;
    }
    let m = monotone(points);
    let sxx: f64 = m.iter().map(|p| p.0 * p.0).sum();
    let sxy: f64 = m.iter().map(|p| p.0 * p.1).sum();
    (sxx > 0.0 && sxy > 0.0).then(|| sxy / sxx)
}

/// A short name for products of `form`: `256` for square float64 ones
/// (as model files were named before shapes), else like
/// `64x48x32-float32-shared-b`.
/// The model file a run learns into, and what it holds: `model` if given,
/// else with `learn` the cluster file's `CLUSTER.model-KEY.json` (one model
/// per kind of product); none without either. A file that holds costs for
/// other products is refused.
pub fn model_file(
    model: Option<&Path>,
    cluster_file: Option<&Path>,
    learn: bool,
    form: &dls_protocol::Form,
) -> Result<Option<(std::path::PathBuf, Model)>> {
    let key = form_key(form);
    let path = match (model, cluster_file) {
        (Some(m), _) => m.to_path_buf(),
        (None, Some(c)) if learn => std::path::PathBuf::from(format!("{}.model-{key}.json", c.display())),
        (None, None) if learn => bail!(
            "with workers given by address, name the model file to learn into (--model FILE, or model= in Python)"
        ),
        _ => return Ok(None),
    };
    let model = match Model::load(&path)? {
        Some(m) if m.key() != key => {
            bail!(
                "{} holds costs for products {}, not {key} ({form})",
                path.display(),
                m.key()
            )
        }
        Some(m) => m,
        None => Model::new(form),
    };
    Ok(Some((path, model)))
}

pub fn form_key(form: &dls_protocol::Form) -> String {
    let s = form.shape;
    let plain = form.dtype == dls_protocol::DType::F64 && !form.shared_b;
    if s.is_square() && plain {
        return s.n.to_string();
    }
    let mut key = format!("{}x{}x{}-{}", s.n, s.k, s.m, form.dtype);
    if form.shared_b {
        key.push_str("-shared-b");
    }
    key
}

impl Model {
    pub fn new(form: &dls_protocol::Form) -> Model {
        let key = form_key(form);
        Model {
            size: form.shape.n as usize,
            products: (key != form.shape.n.to_string()).then_some(key),
            batches: 0,
            workers: BTreeMap::new(),
            calibrated: BTreeMap::new(),
        }
    }

    pub fn load(path: &Path) -> Result<Option<Model>> {
        if !path.exists() {
            return Ok(None);
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("reading model {}", path.display()))?;
        let m: Model =
            serde_json::from_str(&text).with_context(|| format!("{}: not a dls model file", path.display()))?;
        Ok(Some(m))
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }

    /// The products the model is for, as [`form_key`] names them.
    pub fn key(&self) -> String {
        self.products.clone().unwrap_or_else(|| self.size.to_string())
    }

    /// Record what a batch measured.
    pub fn observe(&mut self, report: &RunReport) -> Result<()> {
        let run = form_key(&report.form());
        if run != self.key() {
            bail!("the model is for products {}, the run's are {run}", self.key());
        }
        for w in &report.workers {
            if w.products == 0 || report.failures.iter().any(|f| f.worker == w.name) {
                continue;
            }
            let o = self.workers.entry(w.name.clone()).or_default();
            // Time each phase actually took, summed over the worker's
            // chunks (one chunk in a one-round plan, many in `rounds`),
            // for the products it computed (the plan's load, unless online
            // correction moved some, or enrolled it).
            let x = w.products as f64;
            // Paced sends say what the pace was, not what the link does.
            if w.paced.is_none() {
                push(&mut o.send, x, w.send_secs);
            }
            push(&mut o.compute, x, w.compute_secs);
            push(&mut o.ret, x, w.return_secs);
        }
        self.batches += 1;
        Ok(())
    }

    /// Keep what a calibration measured, for workers never observed.
    pub fn remember(&mut self, calibrated: &Platform) {
        for w in calibrated.workers() {
            self.calibrated.insert(w.name.clone(), [w.c, w.w, w.d]);
        }
    }

    /// A platform of `names` from the model alone: each worker's calibrated
    /// costs where known (1 s otherwise), to [`Model::refine`] next. Meant
    /// for names the model [`Model::covers`].
    pub fn base(&self, names: &[String]) -> Result<Platform> {
        let workers = names
            .iter()
            .map(|n| {
                let [c, w, d] = self.calibrated.get(n).copied().unwrap_or([1.0; 3]);
                Worker::new(n.clone(), c, w, d)
            })
            .collect();
        Ok(Platform::new(workers)?)
    }

    /// `base` with each worker's costs replaced by what was learned of it.
    pub fn refine(&self, base: &Platform) -> Result<Platform> {
        let workers = base
            .workers()
            .iter()
            .map(|w| match self.workers.get(&w.name) {
                None => w.clone(),
                Some(o) => Worker {
                    c: per_unit(&o.send).unwrap_or(w.c),
                    w: per_unit(&o.compute).unwrap_or(w.w),
                    d: per_unit(&o.ret).unwrap_or(w.d),
                    // Observed in runs: the costs as they were, whatever
                    // was measured under load (a return's time while its
                    // worker received included).
                    under_load: None,
                    return_receiving: None,
                    ..w.clone()
                },
            })
            .collect();
        Ok(Platform::new(workers)?.with_uplink(base.uplink()))
    }

    /// Let each worker be found by its name or by its address: a worker
    /// observed under one (a run with `--workers`, named by address) and
    /// now named by the other (a cluster file) keeps what was learned.
    pub fn alias(&mut self, pairs: &[(String, String)]) {
        for (name, address) in pairs {
            match (self.workers.contains_key(name), self.workers.get(address).cloned()) {
                (false, Some(o)) => {
                    self.workers.insert(name.clone(), o);
                }
                _ => {
                    if let (Some(o), false) = (self.workers.get(name).cloned(), self.workers.contains_key(address)) {
                        self.workers.insert(address.clone(), o);
                    }
                }
            }
            for (from, to) in [(address, name), (name, address)] {
                if let (Some(&c), false) = (self.calibrated.get(from), self.calibrated.contains_key(to)) {
                    self.calibrated.insert(to.clone(), c);
                }
            }
        }
    }

    /// Whether the model knows every worker of `names`: observed in every
    /// phase, or calibrated (a worker plans left out).
    pub fn covers(&self, names: &[String]) -> bool {
        names.iter().all(|n| {
            self.calibrated.contains_key(n)
                || self
                    .workers
                    .get(n)
                    .is_some_and(|o| !o.send.is_empty() && !o.compute.is_empty() && !o.ret.is_empty())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_found_by_name_or_by_address() {
        let mut m = Model::new(&dls_protocol::Form::square(64));
        let o = Observed {
            send: vec![(1.0, 0.1)],
            compute: vec![(1.0, 0.2)],
            ret: vec![(1.0, 0.05)],
        };
        m.workers.insert("10.0.0.1:7070".into(), o.clone());
        m.workers.insert("node2".into(), o);
        let pairs = [
            ("node1".to_string(), "10.0.0.1:7070".to_string()),
            ("node2".to_string(), "10.0.0.2:7070".to_string()),
        ];
        assert!(!m.covers(&["node1".into(), "node2".into()]));
        m.alias(&pairs);
        assert!(
            m.covers(&["node1".into(), "node2".into()]),
            "learned under the address, asked by name"
        );
        assert!(
            m.covers(&["10.0.0.2:7070".into()]),
            "learned under the name, asked by address"
        );
    }

    /// A worker every plan leaves out is never observed; what calibration
    /// measured of it stands in, so a model of one observed and one
    /// calibrated worker covers both and plans from the right costs.
    #[test]
    fn a_worker_left_out_keeps_its_calibrated_costs() {
        let mut m = Model::new(&dls_protocol::Form::square(8));
        m.workers.insert(
            "a".into(),
            Observed {
                send: vec![(2.0, 0.2)],
                compute: vec![(2.0, 0.8)],
                ret: vec![(2.0, 0.1)],
            },
        );
        m.batches = 1;
        let names = ["a".to_string(), "b".to_string()];
        assert!(!m.covers(&names), "b was neither observed nor calibrated");
        let cal =
            Platform::new(vec![Worker::new("a", 9.0, 9.0, 9.0), Worker::new("b", 0.5, 3.0, 0.25)]).expect("valid");
        m.remember(&cal);
        assert!(m.covers(&names));
        let p = m.refine(&m.base(&names).expect("valid")).expect("valid");
        let costs: Vec<[f64; 3]> = p.workers().iter().map(|w| [w.c, w.w, w.d]).collect();
        // a: slopes through the origin of one point each; b: as calibrated.
        assert_eq!(costs, vec![[0.1, 0.4, 0.05], [0.5, 3.0, 0.25]]);
        // Known by address, asked by name.
        m.alias(&[("node-b".to_string(), "b".to_string())]);
        assert!(m.covers(&["node-b".to_string()]));
        // Round trip through the file format.
        let back: Model = serde_json::from_str(&serde_json::to_string(&m).expect("valid")).expect("valid");
        assert_eq!(back, m);
    }

    #[test]
    fn models_are_named_by_their_products() {
        use dls_protocol::{DType, Form, Shape};
        assert_eq!(form_key(&Form::square(256)), "256");
        let f = Form {
            shape: Shape { n: 64, k: 48, m: 32 },
            dtype: DType::F32,
            shared_b: true,
        };
        assert_eq!(form_key(&f), "64x48x32-float32-shared-b");
        let sq32 = Form {
            dtype: DType::F32,
            ..Form::square(8)
        };
        assert_eq!(form_key(&sq32), "8x8x8-float32");
        assert_eq!(Model::new(&f).key(), "64x48x32-float32-shared-b");
        // A model file of square float64 products keeps its old form.
        let m = Model::new(&Form::square(128));
        assert_eq!((m.products.as_deref(), m.key().as_str()), (None, "128"));
    }

    #[test]
    fn slope_through_the_origin_of_a_monotone_table() {
        // t = 2x exactly.
        assert_eq!(per_unit(&[(1.0, 2.0), (3.0, 6.0)]), Some(2.0));
        // A dip (3 units faster than 2) is raised first: (2, 5), (3, 5):
        // slope (2·5 + 3·5) / (4 + 9) = 25/13.
        let s = per_unit(&[(2.0, 5.0), (3.0, 4.0)]).expect("slope");
        assert!((s - 25.0 / 13.0).abs() < 1e-12);
        assert_eq!(per_unit(&[]), None);
    }
}
