//! What the master tells its log (`tracing`, target `dls_master`): the
//! decisions of a run and what changed them. The human summary on stdout
//! and the remarks on stderr are apart from this; `--log-format json`
//! turns every event here into one JSON line, fields included.
//!
//! Levels: connections and handshakes at debug; calibration, the plan, a
//! recovery round, a correction and the end at info; a worker lost (or
//! given up on as a straggler) at warn.

use crate::runtime::calibrate::Calibration;
use dls_core::machine::BatchMachine;
use dls_core::record::Measured;
use dls_lp::{Plan, Platform};
use tracing::{info, warn};

/// Per worker, its fitted costs and how well the lines fit.
pub fn calibrated(cal: &Calibration) {
    for w in &cal.workers {
        info!(
            worker = %w.name,
            c = w.send.slope,
            w = w.compute.slope,
            d = w.ret.slope,
            send_latency = w.send.intercept,
            compute_latency = w.compute.intercept,
            return_latency = w.ret.intercept,
            send_r2 = w.send.r2,
            compute_r2 = w.compute.r2,
            return_r2 = w.ret.r2,
            max_load = w.max_load,
            warnings = w.warnings.len(),
            "calibrated"
        );
    }
    if let Some(p) = &cal.ports {
        ports_found(p);
    }
}

fn ports_found(p: &crate::runtime::calibrate::PortFindings) {
    info!(
        model = %p.model,
        overlap = p.overlap,
        send_gain = p.send_gain,
        return_gain = p.return_gain,
        group = p.group,
        "port model measured"
    );
}

/// Per worker, its costs as a run's first products measured them
/// (calibration inside the run), and the port model measured after.
pub fn probed(platform: &Platform, ports: Option<&crate::runtime::calibrate::PortFindings>) {
    for w in platform.workers() {
        info!(worker = %w.name, c = w.c, w = w.w, d = w.d, max_load = w.max_load, "measured on the run's first products");
    }
    if let Some(p) = ports {
        ports_found(p);
    }
}

/// The plan about to run: its family, rounds, who takes part and who not,
/// the predicted makespan against the steady-state bound.
pub fn plan(platform: &Platform, plan: &Plan, bound: f64) {
    let names = |pick: fn(u64) -> bool| -> String {
        let chosen: Vec<&str> = platform
            .workers()
            .iter()
            .zip(&plan.loads)
            .filter(|(_, &l)| pick(l))
            .map(|(w, _)| w.name.as_str())
            .collect();
        chosen.join(",")
    };
    info!(
        strategy = %plan.strategy,
        ports = %plan.ports.describe(),
        load = plan.load,
        rounds = plan.sequence.count,
        chunks = plan.sequence.chunks.len(),
        enrolled = %names(|l| l > 0),
        left_out = %names(|l| l == 0),
        predicted = plan.makespan(),
        bound,
        "plan"
    );
    for (w, &load) in platform.workers().iter().zip(&plan.loads).filter(|(_, &l)| l > 0) {
        tracing::debug!(worker = %w.name, load, "share");
    }
}

/// The plan of an opened batch, once its rest was planned `at` seconds
/// after the opening went out.
pub fn opened(platform: &Platform, whole: &Plan, at: f64) {
    let bound = dls_lp::plan::steady_state_bound(platform, whole);
    plan(platform, whole, bound);
    info!(rest_ready = at, "the batch opened before its plan was made");
}

/// One product's plan: who computes which rectangle, predicted against
/// the bound.
pub fn product_plan(names: &[String], plan: &dls_lp::product::ProductPlan) {
    let enrolled: Vec<&str> = plan.enrolled.iter().map(|&i| names[i].as_str()).collect();
    info!(
        enrolled = %enrolled.join(","),
        pieces = plan.pieces.len(),
        panels = plan.timing.ops.len() - plan.pieces.len(),
        duplex = plan.request.duplex,
        sends_at_once = plan.port.sends,
        predicted = plan.makespan(),
        bound = plan.bound.makespan,
        "product plan"
    );
    for r in &plan.rects {
        tracing::debug!(worker = %names[r.worker], rows = r.height, cols = r.width, "rectangle");
    }
}

/// A worker lost during one product, and what was cut again.
pub fn product_loss(names: &[String], loss: &dls_core::product::Loss) {
    warn!(worker = %names[loss.worker], reason = %loss.reason, elements = loss.elements, "worker lost; its part of C cut again over the survivors");
}

/// How many of the machine's incidents have been logged.
#[derive(Default)]
pub struct Seen {
    failures: usize,
    replans: usize,
    adaptations: usize,
    enrolments: usize,
}

/// Log the machine's incidents not logged yet: losses (and stragglers
/// given up on), recovery rounds, corrections.
pub fn incidents(platform: &Platform, machine: &BatchMachine, seen: &mut Seen) {
    let name = |w: usize| platform.workers().get(w).map_or("?", |x| x.name.as_str());
    let (failures, replans, adaptations) = machine.incidents();
    for f in &failures[seen.failures.min(failures.len())..] {
        warn!(
            worker = name(f.worker),
            at = f.at,
            reason = %f.reason,
            products_lost = f.products_lost,
            "worker lost; its products are redone elsewhere"
        );
    }
    // A round of its own on some workers: a recovery, or an enrolment.
    let round = |at: f64, products: usize, workers: &[usize], predicted: f64, what: &str| {
        let on: Vec<&str> = workers.iter().map(|&w| name(w)).collect();
        info!(at, products, workers = %on.join(","), predicted, "{what}");
    };
    for r in &replans[seen.replans.min(replans.len())..] {
        round(r.at, r.products, &r.workers, r.predicted, "recovery round");
    }
    for a in &adaptations[seen.adaptations.min(adaptations.len())..] {
        // Each worker seen away from its costs: measured over predicted,
        // send/compute/return.
        let seen_as: Vec<String> = (a.factors.iter().enumerate())
            .filter(|(_, f)| f.iter().any(|&x| x != 1.0))
            .map(|(w, [c, m, d])| format!("{}:{c:.2}/{m:.2}/{d:.2}", name(w)))
            .collect();
        info!(
            at = a.at,
            round = a.round,
            products_moved = a.products,
            factors = %seen_as.join(","),
            "plan corrected from the speeds measured"
        );
    }
    let enrolments = machine.enrolments();
    for e in &enrolments[seen.enrolments.min(enrolments.len())..] {
        let what = "free worker enrolled: the enrolled ones fell behind";
        round(e.at, e.products, &e.workers, e.predicted, what);
    }
    *seen = Seen {
        failures: failures.len(),
        replans: replans.len(),
        adaptations: adaptations.len(),
        enrolments: enrolments.len(),
    };
}

/// The end of a run: per worker, its products and bytes, predicted and
/// measured end; then the whole.
pub fn end(platform: &Platform, plan: &Plan, measured: &Measured, bytes: impl Fn(u64) -> (u64, u64)) {
    let predicted = plan.worker_times();
    for (i, w) in platform.workers().iter().enumerate() {
        let load = plan.loads.get(i).copied().unwrap_or(0);
        let done = measured.products.get(i).copied().unwrap_or(0);
        let lost = measured.failures.iter().any(|f| f.worker == i);
        if load == 0 && done == 0 && !lost {
            continue;
        }
        let (sent, returned) = bytes(done);
        info!(
            worker = %w.name,
            products = done,
            planned = load,
            bytes_sent = sent,
            bytes_returned = returned,
            predicted_end = predicted.get(i).map_or(0.0, |t| t.return_end),
            measured_end = measured.workers.get(i).map_or(0.0, |t| t.return_end),
            compute_secs = measured.compute_secs.get(i).copied().unwrap_or(0.0),
            lost,
            "worker done"
        );
    }
    info!(
        predicted = plan.makespan(),
        measured = measured.makespan,
        failures = measured.failures.len(),
        recovery_rounds = measured.replans.len(),
        corrections = measured.adaptations.len(),
        "run done"
    );
}
