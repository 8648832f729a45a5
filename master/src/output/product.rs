//! What one product's run writes: the summary (table and JSON: each
//! worker's rectangle, predicted against measured, the bound and the
//! communication against its lower bound) and the trace (the same Chrome
//! trace as batches: measured and predicted, the port and each worker).

use crate::output::report::Waited;
use crate::output::table::{Col, Table};
use crate::output::trace::{span, Trace, MEASURED_PID, PREDICTED_PID};
use dls_core::product::{Loss, Measured};
use dls_lp::product::{Distribution, ProductPlan};
use serde::Serialize;
use serde_json::json;

/// One worker's part.
#[derive(Debug, Clone, Serialize)]
pub struct Part {
    pub worker: String,
    /// Its rectangle of C (rows, columns), as planned; none if left out.
    pub rows: usize,
    pub cols: usize,
    /// Its share of C's elements, and of the enrolled workers' speed.
    pub share: f64,
    pub pieces: usize,
    pub panels: usize,
    /// When its last transfer ends, predicted and measured (seconds).
    pub predicted_end: f64,
    pub measured_end: f64,
    /// Seconds it spent adding panels (from when each was in, or the one
    /// before added, to when it said it was added) and its panels spent
    /// on the way, measured and predicted: where the run's time went.
    pub compute_secs: f64,
    pub predicted_compute_secs: f64,
    pub send_secs: f64,
    pub predicted_send_secs: f64,
}

/// The bound any schedule of the partition respects, and the communication.
#[derive(Debug, Clone, Serialize)]
pub struct Bound {
    pub compute: f64,
    pub port: f64,
    pub makespan: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Communication {
    /// Values of A and B the run sent (every panel of every piece).
    pub sent: u64,
    /// `k·Σ(h + w)` over the rectangles, and its lower bound `2·k·Σ√(h·w)`.
    pub partition: u64,
    pub lower: f64,
    pub partition_over_lower: f64,
    /// Values through the master's uplink: A and B out (`sent`) and C
    /// back (returns measured).
    pub uplink: u64,
    /// `n·k + k·m + n·m`: the least any distribution from one master
    /// moves through its uplink (A and B once, C once).
    pub uplink_least: u64,
    pub uplink_over_least: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProductReport {
    pub kind: &'static str,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub dtype: String,
    pub distribution: &'static str,
    pub duplex: bool,
    /// Sends under way at once, each to its own worker (more than one
    /// only behind a shared full-duplex uplink).
    pub sends_at_once: usize,
    pub workers: Vec<Part>,
    pub left_out: Vec<String>,
    pub predicted_makespan: f64,
    pub measured_makespan: f64,
    pub measured_over_predicted: f64,
    pub bound: Bound,
    pub measured_over_bound: f64,
    pub communication: Communication,
    pub losses: Vec<Loss>,
    pub notes: Vec<String>,
    /// What the caller waited for, from connecting on (absent for a plan
    /// run on a pool already open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited: Option<Waited>,
    /// Processor seconds the master used during the run, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_cpu_secs: Option<f64>,
}

/// Per worker, seconds adding panels and sending them, `[compute, send]`,
/// from its sends `(worker, start, end, added)` in order: a panel is
/// added from when it is in, or the one before it added, whichever is
/// later.
fn busy(workers: usize, sends: impl Iterator<Item = (usize, f64, f64, Option<f64>)>) -> Vec<[f64; 2]> {
    let (mut out, mut last) = (vec![[0.0; 2]; workers], vec![0.0; workers]);
    for (w, start, end, added) in sends.filter(|s| s.0 < workers) {
        out[w][1] += end - start;
        if let Some(added) = added {
            out[w][0] += added - end.max(last[w]);
            last[w] = added;
        }
    }
    out
}

/// [`busy`] of the run's panels as measured, and as the plan times them.
fn busy_both(workers: usize, plan: &ProductPlan, measured: &Measured) -> [Vec<[f64; 2]>; 2] {
    let run = (measured.transfers.iter())
        .filter(|t| t.panel.is_some())
        .map(|t| (t.worker, t.start, t.end, t.added));
    let planned = (plan.timing.times.iter().zip(&plan.timing.ops)).filter_map(|(t, op)| match *op {
        dls_lp::product::Op::Send { piece, .. } => Some((plan.pieces[piece].worker, t.start, t.end, Some(t.added))),
        dls_lp::product::Op::Return { .. } => None,
    });
    [busy(workers, run), busy(workers, planned)]
}

impl ProductReport {
    pub fn new(names: &[String], plan: &ProductPlan, measured: &Measured, dtype: dls_protocol::DType) -> ProductReport {
        let req = &plan.request;
        let end_of = |w: usize, predicted: bool| {
            measured
                .transfers
                .iter()
                .filter(|t| t.worker == w)
                .map(|t| match predicted {
                    true => t.predicted.map_or(0.0, |p| p.1),
                    false => t.end,
                })
                .fold(0.0, f64::max)
        };
        let [measured_busy, predicted_busy] = busy_both(names.len(), plan, measured);
        let workers = plan
            .rects
            .iter()
            .map(|r| {
                let pieces: Vec<_> = plan.pieces.iter().filter(|p| p.worker == r.worker).collect();
                Part {
                    worker: names[r.worker].clone(),
                    rows: r.height,
                    cols: r.width,
                    share: r.area() as f64 / (req.n * req.m) as f64,
                    pieces: pieces.len(),
                    panels: pieces.iter().map(|p| p.panels.len()).sum(),
                    predicted_end: end_of(r.worker, true),
                    measured_end: end_of(r.worker, false),
                    compute_secs: measured_busy[r.worker][0],
                    predicted_compute_secs: predicted_busy[r.worker][0],
                    send_secs: measured_busy[r.worker][1],
                    predicted_send_secs: predicted_busy[r.worker][1],
                }
            })
            .collect();
        let b = &plan.bound;
        ProductReport {
            kind: "product",
            n: req.n,
            k: req.k,
            m: req.m,
            dtype: dtype.to_string(),
            distribution: match req.distribution {
                Distribution::Heterogeneous => "heterogeneous",
                Distribution::Homogeneous => "homogeneous",
            },
            duplex: req.duplex,
            sends_at_once: plan.port.sends,
            workers,
            left_out: (0..names.len())
                .filter(|i| !plan.enrolled.contains(i))
                .map(|i| names[i].clone())
                .collect(),
            predicted_makespan: plan.makespan(),
            measured_makespan: measured.end,
            measured_over_predicted: measured.end / plan.makespan(),
            bound: Bound {
                compute: b.compute,
                port: b.port,
                makespan: b.makespan,
            },
            measured_over_bound: measured.end / b.makespan,
            communication: communication(plan, measured),
            losses: measured.losses.clone(),
            notes: plan.notes.clone(),
            waited: None,
            master_cpu_secs: None,
        }
    }

    /// Where the run's time went against the plan, for people: each
    /// worker's adding and sending, measured over predicted (the range
    /// over the workers), and the master's processor time.
    pub fn time_line(&self) -> Option<String> {
        let range = |f: &dyn Fn(&Part) -> Option<f64>| {
            let r: Vec<f64> = self.workers.iter().filter_map(f).filter(|x| x.is_finite()).collect();
            let (lo, hi) = r
                .iter()
                .fold((f64::INFINITY, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
            (!r.is_empty()).then(|| format!("{lo:.2}–{hi:.2}×"))
        };
        let ratio = |m: f64, p: f64| (p > 0.0).then(|| m / p);
        let compute = range(&|p: &Part| ratio(p.compute_secs, p.predicted_compute_secs))?;
        let send = range(&|p: &Part| ratio(p.send_secs, p.predicted_send_secs))?;
        let master = self.master_cpu_secs.map_or(String::new(), |c| {
            format!(
                "; the master's processor {c:.2} s, {:.2} of a core",
                c / self.measured_makespan.max(1e-9)
            )
        });
        Some(format!(
            "time against the plan, worker by worker: adding panels {compute}, sending them {send}{master}"
        ))
    }

    pub fn table(&self) -> String {
        let mut t = Table::new(&[
            ("worker", Col::Left(20)),
            ("rectangle", Col::Right(13)),
            ("share", Col::Right(7)),
            ("pieces", Col::Right(6)),
            ("panels", Col::Right(6)),
            ("predicted", Col::Right(10)),
            ("measured", Col::Right(10)),
        ]);
        for p in &self.workers {
            t.row([
                p.worker.clone(),
                format!("{}×{}", p.rows, p.cols),
                format!("{:.1}%", 100.0 * p.share),
                p.pieces.to_string(),
                p.panels.to_string(),
                format!("{:.3}s", p.predicted_end),
                format!("{:.3}s", p.measured_end),
            ]);
        }
        let mut s = format!(
            "product {}×{} · {}×{} ({}, {} distribution, {})\n",
            self.n,
            self.k,
            self.k,
            self.m,
            self.dtype,
            self.distribution,
            match (self.duplex, self.sends_at_once) {
                (false, _) => "one port".to_string(),
                (true, 1) => "sends and returns cross".to_string(),
                (true, s) => format!("sends and returns cross, up to {s} sends at once behind the shared uplink"),
            }
        );
        s.push_str(&t.text());
        for w in &self.left_out {
            s.push_str(&format!("left out: {w}\n"));
        }
        s.push_str(&format!(
            "makespan: {:.3} s measured, {:.3} s predicted ({:.3}×); bound {:.3} s (compute {:.3} s, port {:.3} s): {:.3}× the bound\n",
            self.measured_makespan,
            self.predicted_makespan,
            self.measured_over_predicted,
            self.bound.makespan,
            self.bound.compute,
            self.bound.port,
            self.measured_over_bound
        ));
        s.push_str(&format!(
            "communication: {} values of A and B sent; the partition needs {}, {:.3}× the least its areas allow ({:.0})\n",
            self.communication.sent,
            self.communication.partition,
            self.communication.partition_over_lower,
            self.communication.lower
        ));
        s.push_str(&format!(
            "master's uplink: {} values (A and B out, C back), {:.2}× the n·k + k·m + n·m = {} any distribution from one master moves\n",
            self.communication.uplink, self.communication.uplink_over_least, self.communication.uplink_least
        ));
        if let Some(line) = self.time_line() {
            s.push_str(&line);
            s.push('\n');
        }
        if let Some(w) = &self.waited {
            s.push_str(&w.line());
            s.push('\n');
        }
        s
    }
}

/// What the run moved against what its partition and any distribution
/// from one master need (a transfer cut short by a loss counts whole).
fn communication(plan: &ProductPlan, measured: &Measured) -> Communication {
    let moved = |panels: bool| -> u64 {
        (measured.transfers.iter())
            .filter(|t| t.panel.is_some() == panels)
            .map(|t| t.values)
            .sum()
    };
    let (sent, returned) = (moved(true), moved(false));
    let r = &plan.request;
    let least = (r.n * r.k + r.k * r.m + r.n * r.m) as u64;
    let b = &plan.bound;
    Communication {
        sent,
        partition: b.partition,
        lower: b.lower,
        partition_over_lower: b.partition as f64 / b.lower,
        uplink: sent + returned,
        uplink_least: least,
        uplink_over_least: (sent + returned) as f64 / least.max(1) as f64,
    }
}

/// The run panel by panel: on each worker's track its sends, additions and
/// returns; predicted ones from the plan, measured ones as they happened.
pub fn trace(names: &[String], plan: &ProductPlan, measured: &Measured) -> Trace {
    use crate::output::trace::PLAN;
    // Every event is the plan's (a product has no probes in its run), and
    // says its piece and panel, measured and predicted alike.
    let mut spans = Vec::new();
    let no = json!({ "predicted": false, "phase": PLAN });
    let mut busy = vec![0.0f64; names.len()];
    for t in &measured.transfers {
        let (w, tid) = (&names[t.worker], t.worker as u32 + 1);
        let cat = if t.panel.is_some() { "send" } else { "return" };
        let x = json!({ "predicted": false, "piece": t.piece, "panel": t.panel, "phase": PLAN });
        spans.push(span(MEASURED_PID, tid, cat, w, t.start, t.end, x.clone()));
        spans.push(span(MEASURED_PID, 0, cat, w, t.start, t.end, no.clone()));
        if let Some(added) = t.added {
            let from = t.end.max(busy[t.worker]);
            busy[t.worker] = added;
            spans.push(span(MEASURED_PID, tid, "compute", w, from, added, x));
        }
    }
    let mut busy = vec![0.0f64; names.len()];
    for (t, op) in plan.timing.times.iter().zip(&plan.timing.ops) {
        let (piece, panel, cat) = match *op {
            dls_lp::product::Op::Send { piece, panel } => (piece, Some(panel), "send"),
            dls_lp::product::Op::Return { piece } => (piece, None, "return"),
        };
        let wk = plan.pieces[piece].worker;
        let (w, tid) = (&names[wk], wk as u32 + 1);
        let yes = json!({ "predicted": true, "piece": piece, "panel": panel, "phase": PLAN });
        spans.push(span(PREDICTED_PID, tid, cat, w, t.start, t.end, yes.clone()));
        spans.push(span(PREDICTED_PID, 0, cat, w, t.start, t.end, yes.clone()));
        if cat == "send" {
            let from = t.end.max(busy[wk]);
            busy[wk] = t.added;
            spans.push(span(PREDICTED_PID, tid, "compute", w, from, t.added, yes));
        }
    }
    let mut marks = Vec::new();
    for l in &measured.losses {
        marks.push(
            json!({"name": format!("lost {}", names[l.worker]), "cat": "failure", "ph": "i", "s": "g",
            "ts": l.at * 1e6, "pid": MEASURED_PID, "tid": l.worker + 1,
            "args": {"worker": names[l.worker], "reason": l.reason, "elements_lost": l.elements, "phase": PLAN}}),
        );
    }
    let mut tracks = vec!["master port".to_string()];
    tracks.extend(names.iter().cloned());
    let (n, k, m) = (plan.request.n, plan.request.k, plan.request.m);
    Trace {
        spans,
        marks,
        tracks,
        title: Some(format!("one product {n}×{k} · {k}×{m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dls_core::product::Transfer;
    use dls_lp::product::{plan_product, ProductRequest, ProductWorker};

    /// A run that is its plan with every time `scale`d.
    fn as_planned(plan: &ProductPlan, scale: f64) -> Measured {
        let transfers = (plan.timing.ops.iter().zip(&plan.timing.times))
            .map(|(op, t)| {
                let (piece, panel) = match *op {
                    dls_lp::product::Op::Send { piece, panel } => (piece, Some(panel)),
                    dls_lp::product::Op::Return { piece } => (piece, None),
                };
                Transfer {
                    worker: plan.pieces[piece].worker,
                    piece,
                    panel,
                    values: 1,
                    start: scale * t.start,
                    end: scale * t.end,
                    added: panel.map(|_| scale * t.added),
                    predicted: Some((t.start, t.end)),
                }
            })
            .collect();
        Measured {
            transfers,
            losses: Vec::new(),
            end: scale * plan.makespan(),
        }
    }

    #[test]
    fn where_the_time_went_is_the_plan_s_for_a_run_as_planned_and_scales_with_it() {
        let w = |send: f64, flop: f64| ProductWorker {
            send,
            ret: send,
            flop,
            memory: None,
        };
        let mut req = ProductRequest::new(96, 64, 80);
        req.panel_values = 2_000;
        let plan = plan_product(&[w(1e-6, 2e-9), w(2e-6, 1e-9), w(1e-6, 4e-9)], &req).expect("plans");
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        for scale in [1.0, 2.0] {
            let mut r = ProductReport::new(&names, &plan, &as_planned(&plan, scale), dls_protocol::DType::F64);
            for p in &r.workers {
                assert!(p.predicted_compute_secs > 0.0 && p.predicted_send_secs > 0.0, "{p:?}");
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.max(1.0);
                assert!(close(p.compute_secs, scale * p.predicted_compute_secs), "{p:?}");
                assert!(close(p.send_secs, scale * p.predicted_send_secs), "{p:?}");
            }
            r.master_cpu_secs = Some(0.5 * r.measured_makespan);
            let line = r.time_line().expect("every worker has panels");
            let x = format!("{scale:.2}–{scale:.2}×");
            assert!(line.contains(&format!("adding panels {x}, sending them {x}")), "{line}");
            assert!(line.ends_with("0.50 of a core"), "{line}");
        }
    }
}
