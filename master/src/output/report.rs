//! The summary of a run: predicted against measured, worker by worker.

use crate::runtime::shell::Outcome;
use dls_core::record::Measured;
use dls_lp::{Plan, Platform, WorkerTimes};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Times {
    pub send_start: f64,
    pub send_end: f64,
    pub compute_end: f64,
    pub return_start: f64,
    pub return_end: f64,
    pub idle: f64,
}

impl From<&WorkerTimes> for Times {
    fn from(t: &WorkerTimes) -> Self {
        Times {
            send_start: t.send_start,
            send_end: t.send_end,
            compute_end: t.compute_end,
            return_start: t.return_start,
            return_end: t.return_end,
            idle: t.idle,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerReport {
    pub name: String,
    /// Products the plan gave it.
    pub load: u64,
    /// Products it computed and returned (online correction moves
    /// products between workers, and may enrol one the plan left out).
    pub products: u64,
    pub predicted: Times,
    pub measured: Times,
    /// Seconds the worker said it spent computing.
    pub compute_secs: f64,
    /// Seconds its transfers held the port, each way (the sum over its
    /// chunks: multi-round plans spread them over the whole run, so the
    /// span from the first send to the last is not the cost).
    pub send_secs: f64,
    pub return_secs: f64,
    /// Seconds a unit its sends were held to (paced behind a shared
    /// uplink); absent when they ran at its link's speed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paced: Option<f64>,
}

/// The uplink a plan was made for, in a report.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct UplinkJson {
    /// Seconds of the uplink a unit takes, out and back.
    pub send: f64,
    pub ret: f64,
    pub duplex: bool,
}

/// How a report says which port model a plan was made for: `ports` 1
/// when sends and returns share the master's capacity, 2 when they have
/// one each; `uplink` when transfers share an uplink, several at once.
pub fn port_fields(ports: dls_lp::Ports) -> (u8, Option<UplinkJson>) {
    let lanes = if ports.one_lane() { 1 } else { 2 };
    let uplink = ports.uplink().map(|u| UplinkJson {
        send: u.send,
        ret: u.ret,
        duplex: u.duplex,
    });
    (lanes, uplink)
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub strategy: String,
    pub ports: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<UplinkJson>,
    pub load: u64,
    /// The products: n (A's rows), their shape [n, k, m], type and whether
    /// one B was shared.
    pub size: usize,
    pub shape: [u32; 3],
    pub dtype: String,
    pub shared_b: bool,
    pub optimal: bool,
    pub send_order: Vec<String>,
    pub return_order: Vec<String>,
    pub predicted_makespan: f64,
    pub measured_makespan: f64,
    /// measured / predicted.
    pub ratio: f64,
    /// The steady-state lower bound on the makespan (load / ρ*, from the
    /// platform's costs: no schedule of any number of rounds beats it), and
    /// the measured makespan over it.
    pub bound: f64,
    pub measured_over_bound: f64,
    /// The same strategy's rational makespan on the equivalent homogeneous
    /// platform (average speeds), over the predicted and over the measured
    /// makespan.
    pub homogeneous_makespan: f64,
    pub efficiency: f64,
    pub measured_efficiency: f64,
    /// Products recomputed by the master that matched.
    pub verified: usize,
    pub max_abs_error: f64,
    pub workers: Vec<WorkerReport>,
    /// The master's peak resident memory so far (Linux), bytes.
    pub master_peak_rss_bytes: Option<u64>,
    /// Workers left out before the batch (unreachable, refusing, or failing
    /// calibration), and why.
    pub left_out: Vec<crate::runtime::pool::LeftOut>,
    /// Workers given up on, and why.
    pub failures: Vec<FailureReport>,
    /// Recovery rounds: lost products planned again over the survivors.
    pub replans: Vec<ReplanReport>,
    /// Online corrections of a multi-round plan: chunks not yet sent
    /// resized from the speeds measured so far.
    pub adaptations: Vec<AdaptationReport>,
    /// Free workers enrolled by online correction, each with a round of
    /// its own.
    pub enrolments: Vec<ReplanReport>,
    pub notes: Vec<String>,
    /// Products whose C an earlier, interrupted run of this batch had
    /// written (`--output`): not computed again; `load` counts the others.
    pub resumed: usize,
    /// A run given no platform measured its workers on the batch's first
    /// products (computed and kept; `load` counts them too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeReport>,
    /// What the caller waited for (`dls run`, the Python call), from the
    /// start of the run; absent for a plan run on a pool already open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waited: Option<Waited>,
}

/// Where the time went from the start of a run (connecting to the
/// workers) to its report, seconds: what the user waits for, beside the
/// makespan every other figure is about.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Waited {
    /// Until the workers answered.
    pub connect_secs: f64,
    /// Measuring the workers before the plan: the probes of a run that
    /// calibrates inside itself (their products are the batch's), or a
    /// calibration before the run; 0 with costs given or learned.
    pub calibration_secs: f64,
    /// Planning the batch (after the probes, the rest of it).
    pub plan_secs: f64,
    /// Until the first chunk went out (a probe's, if any).
    pub first_send_secs: f64,
    /// Until the report was made: the run, its checks, the report (the
    /// output files excepted).
    pub wall_secs: f64,
}

impl Waited {
    /// The table's line.
    pub(crate) fn line(&self) -> String {
        format!(
            "waited {:.3} s in all: workers answered at {:.3} s, {:.3} s measuring them, {:.3} s planning, first send at {:.3} s",
            self.wall_secs, self.connect_secs, self.calibration_secs, self.plan_secs, self.first_send_secs
        )
    }
}

/// The calibration inside a run: its probes were the batch's first
/// products, computed and kept.
#[derive(Debug, Clone, Serialize)]
pub struct ProbeReport {
    /// Products the probes computed.
    pub products: usize,
    /// Seconds from the first probe to the plan of the rest (the probes,
    /// then the port model's transfers).
    pub seconds: f64,
    /// What the port probes found ("one port", "two ports (full duplex)",
    /// ...), or why they did not run.
    pub ports: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct AdaptationReport {
    pub at: f64,
    /// The first round resized.
    pub round: usize,
    pub products: usize,
    /// Per worker: measured over predicted time of sending, computing and
    /// returning, as used.
    pub factors: std::collections::BTreeMap<String, [f64; 3]>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FailureReport {
    pub worker: String,
    pub at: f64,
    pub reason: String,
    pub products_lost: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReplanReport {
    pub at: f64,
    pub products: usize,
    pub workers: Vec<String>,
    pub predicted: f64,
}

impl RunReport {
    pub fn new(
        platform: &Platform,
        plan: &Plan,
        measured: &Measured,
        form: &dls_protocol::Form,
        verified: (usize, f64),
        efficiency: Option<(f64, f64)>,
    ) -> RunReport {
        let names = |o: Vec<usize>| o.into_iter().map(|i| platform.workers()[i].name.clone()).collect();
        let predicted = plan.makespan();
        let bound = steady_state_bound(platform, plan);
        let (efficiency, homogeneous_makespan) = efficiency.unwrap_or((f64::NAN, f64::NAN));
        let busy = |w: usize, send: bool| -> f64 {
            measured
                .transfers
                .iter()
                .filter(|t| t.worker == w && t.send == send)
                .map(|t| t.end - t.start)
                .sum()
        };
        RunReport {
            strategy: plan.strategy.name().into(),
            ports: port_fields(plan.ports).0,
            uplink: port_fields(plan.ports).1,
            load: plan.load,
            size: form.shape.n as usize,
            shape: [form.shape.n, form.shape.k, form.shape.m],
            dtype: form.dtype.name().into(),
            shared_b: form.shared_b,
            optimal: plan.optimal,
            send_order: names(plan.send_order()),
            return_order: names(plan.return_order()),
            predicted_makespan: predicted,
            measured_makespan: measured.makespan,
            ratio: measured.makespan / predicted,
            bound,
            measured_over_bound: measured.makespan / bound,
            homogeneous_makespan,
            efficiency,
            measured_efficiency: homogeneous_makespan / measured.makespan,
            verified: verified.0,
            max_abs_error: verified.1,
            workers: platform
                .workers()
                .iter()
                .zip(plan.worker_times())
                .enumerate()
                .map(|(i, (w, predicted))| WorkerReport {
                    name: w.name.clone(),
                    load: plan.loads[i],
                    products: measured.products[i],
                    predicted: Times::from(&predicted),
                    measured: Times::from(&measured.workers[i]),
                    compute_secs: measured.compute_secs[i],
                    send_secs: busy(i, true),
                    return_secs: busy(i, false),
                    paced: plan.pace.get(i).copied().flatten().map(|p| p.secs),
                })
                .collect(),
            master_peak_rss_bytes: peak_rss(),
            left_out: Vec::new(),
            failures: measured
                .failures
                .iter()
                .map(|f| FailureReport {
                    worker: platform.workers()[f.worker].name.clone(),
                    at: f.at,
                    reason: f.reason.clone(),
                    products_lost: f.products_lost,
                })
                .collect(),
            replans: measured
                .replans
                .iter()
                .map(|r| round_report(platform, r.at, r.products, &r.workers, r.predicted))
                .collect(),
            enrolments: (measured.enrolments.iter())
                .map(|e| round_report(platform, e.at, e.products, &e.workers, e.predicted))
                .collect(),
            adaptations: measured
                .adaptations
                .iter()
                .map(|a| AdaptationReport {
                    at: a.at,
                    round: a.round,
                    products: a.products,
                    factors: a
                        .factors
                        .iter()
                        .enumerate()
                        .map(|(w, f)| (platform.workers()[w].name.clone(), *f))
                        .collect(),
                })
                .collect(),
            notes: plan.notes.clone(),
            resumed: 0,
            probes: None,
            waited: None,
        }
    }

    pub fn from_outcome(
        platform: &Platform,
        plan: &Plan,
        out: &Outcome,
        form: &dls_protocol::Form,
        verified: (usize, f64),
        efficiency: Option<(f64, f64)>,
    ) -> RunReport {
        RunReport::new(platform, plan, &out.measured, form, verified, efficiency)
    }

    /// Fold in what a run's probes did before this report's plan (the
    /// calibration inside the run, `probes` its own report): `load` and
    /// each worker's load, products and busy seconds count the probes'
    /// too (what a model learns from), as do the products verified; the
    /// predicted and measured times stay the plan's.
    pub fn add_probes(&mut self, probes: &RunReport, seconds: f64, ports: String) {
        self.load += probes.load;
        self.verified += probes.verified;
        self.max_abs_error = self.max_abs_error.max(probes.max_abs_error);
        for w in self.workers.iter_mut() {
            if let Some(p) = probes.workers.iter().find(|p| p.name == w.name) {
                w.load += p.load;
                w.products += p.products;
                w.send_secs += p.send_secs;
                w.compute_secs += p.compute_secs;
                w.return_secs += p.return_secs;
            }
        }
        self.probes = Some(ProbeReport {
            products: probes.load as usize,
            seconds,
            ports,
        });
    }

    /// The products of the run, as a `Form` (what the report says of them).
    pub fn form(&self) -> dls_protocol::Form {
        let [n, k, m] = self.shape;
        dls_protocol::Form {
            shape: dls_protocol::Shape { n, k, m },
            dtype: dls_protocol::DType::parse(&self.dtype).unwrap_or(dls_protocol::DType::F64),
            shared_b: self.shared_b,
        }
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} products of {}, strategy {} ({})",
            self.load,
            self.form(),
            self.strategy,
            match self.uplink {
                Some(u) => format!(
                    "sharing a {} uplink",
                    if u.duplex { "full-duplex" } else { "half-duplex" }
                ),
                None if self.ports == 1 => "1 port".to_string(),
                None => format!("{} ports", self.ports),
            }
        );
        if self.resumed > 0 {
            let _ = writeln!(
                s,
                "resumed: {} products were in from an earlier run, {} computed now",
                self.resumed, self.load
            );
        }
        if let Some(p) = &self.probes {
            let _ = writeln!(
                s,
                "calibrated within the run: {} of the {} products computed by the probes, {:.3} s to the plan of the others ({})",
                p.products, self.load, p.seconds, p.ports
            );
        }
        let _ = writeln!(
            s,
            "makespan predicted {:.4} s, measured {:.4} s; steady-state bound {:.4} s (measured {:.3}× the bound)",
            self.predicted_makespan, self.measured_makespan, self.bound, self.measured_over_bound
        );
        if let Some(w) = &self.waited {
            let _ = writeln!(s, "{}", w.line());
        }
        let _ = writeln!(
            s,
            "{:<14} {:>8}  {:>19}  {:>19}  {:>19}  {:>8}",
            "worker", "products", "send (pred/meas)", "compute (pred/meas)", "return (pred/meas)", "idle"
        );
        for w in &self.workers {
            if w.load == 0 && w.products == 0 {
                let _ = writeln!(s, "{:<14} {:>8}  (not enrolled)", w.name, 0);
                continue;
            }
            // What it computed; a mark when online correction moved
            // products to or from it (the plan's loads follow the table).
            let products = if w.products == w.load {
                w.products.to_string()
            } else {
                format!("{}*", w.products)
            };
            let (p, m) = (&w.predicted, &w.measured);
            let lost = self.failures.iter().any(|f| f.worker == w.name);
            let name = if lost {
                format!("{} (lost)", w.name)
            } else {
                w.name.clone()
            };
            let _ = writeln!(
                s,
                "{:<14} {:>8}  {:>9.4}/{:<9}  {:>9.4}/{:<9}  {:>9.4}/{:<9}  {:>8.4}",
                name,
                products,
                p.send_end - p.send_start,
                span(m.send_start, m.send_end),
                p.compute_end - p.send_end,
                span(m.send_end, m.compute_end),
                p.return_end - p.return_start,
                span(m.return_start, m.return_end),
                m.idle
            );
        }
        let moved: Vec<String> = (self.workers.iter())
            .filter(|w| w.products != w.load)
            .map(|w| format!("{} {}", w.name, w.load))
            .collect();
        if !moved.is_empty() {
            let _ = writeln!(
                s,
                "* products moved by online correction or recovery; the plan gave {}",
                moved.join(", ")
            );
        }
        for f in &self.failures {
            let _ = writeln!(
                s,
                "lost {} at {:.3} s ({}); {} product(s) redone elsewhere",
                f.worker, f.at, f.reason, f.products_lost
            );
        }
        for (k, r) in self.replans.iter().enumerate() {
            let _ = writeln!(
                s,
                "recovery round {}: {} product(s) over {} from {:.3} s (predicted to take {:.3} s)",
                k + 1,
                r.products,
                r.workers.join(", "),
                r.at,
                r.predicted
            );
        }
        let _ = writeln!(
            s,
            "makespan: predicted {:.4} s, measured {:.4} s, measured/predicted {:.3}",
            self.predicted_makespan, self.measured_makespan, self.ratio
        );
        let _ = writeln!(
            s,
            "verified {} product(s), largest |error| {:.3e}",
            self.verified, self.max_abs_error
        );
        s
    }
}

/// A measured phase's length, or "-" for one that did not finish (its
/// worker was lost before): never a negative time.
fn span(start: f64, end: f64) -> String {
    if end > 0.0 && end >= start {
        format!("{:.4}", end - start)
    } else {
        "-".into()
    }
}

/// load / ρ* for the plan's platform and port model (NaN if it cannot be
/// computed).
pub fn steady_state_bound(platform: &Platform, plan: &Plan) -> f64 {
    dls_lp::plan::steady_state_bound(platform, plan)
}

/// Peak resident set size of this process (VmHWM in /proc/self/status).
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

/// Processor seconds this process has used, user and system, all its
/// threads (`/proc/self/stat` counts them in ticks of USER_HZ, 100 a
/// second on Linux); `None` where the system does not say.
pub fn cpu_secs() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's name (which may hold spaces): the
    // state is the line's third, utime its fourteenth, stime fifteenth.
    let fields: Vec<&str> = s[s.rfind(')')? + 1..].split_whitespace().collect();
    let tick = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((tick(11)? + tick(12)?) / 100.0)
}

/// A round planned during a run (recovery or enrolment), its workers named.
fn round_report(platform: &Platform, at: f64, products: usize, workers: &[usize], predicted: f64) -> ReplanReport {
    ReplanReport {
        at,
        products,
        workers: workers.iter().map(|&w| platform.workers()[w].name.clone()).collect(),
        predicted,
    }
}

#[cfg(test)]
mod tests {
    use super::cpu_secs;
    use std::time::{Duration, Instant};

    #[test]
    fn processor_time_grows_with_work_and_never_beyond_the_threads_wall_time() {
        let (c0, t0) = (cpu_secs().expect("Linux says"), Instant::now());
        // Spin until the count moves by 50 ms (ticks of 10 ms), ten seconds at most.
        let mut x = 0u64;
        while cpu_secs().expect("Linux says") - c0 < 0.05 && t0.elapsed() < Duration::from_secs(10) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let (used, wall) = (cpu_secs().expect("Linux says") - c0, t0.elapsed().as_secs_f64());
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(used >= 0.05, "{used} s of processor in {wall} s");
        assert!(
            used <= threads * wall + 0.02,
            "{used} s of processor in {wall} s on {threads} threads"
        );
    }
}
