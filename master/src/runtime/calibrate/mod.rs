//! Calibration: the report's linearity test (section 5.2) for every worker.
//! For several probe sizes the master times sending k units (2·k·n² values),
//! computing k products (the worker's own timing) and returning k units
//! (k·n² values); a line through (k, seconds) gives the cost per unit (its
//! slope), the latency (its intercept, when it stands out of the noise) and
//! R², fitted on the costs per unit ([`fit::fit_relative_judged`]: probe times vary by
//! a few percent whatever their size).
//!
//! Every worker is probed at once, as in a run: it computes k units while
//! the master sends it k units and takes k back, one transfer at a time on
//! the master's port (`compute.rs`); the transfers, each alone on the
//! port, measure the links, the worker's own timing its computing. Then
//! the port model: whether transfers to several workers at once share the
//! master's uplink or take turns (`ports.rs`).

mod compute;
mod coupled;
pub mod model;
pub mod ports;

use crate::config::scaling::Scaling;
use crate::runtime::link::Link;
use crate::runtime::pool::{LeftOut, Pool};
use anyhow::{bail, Context, Result};
use dls_lp::{Latency, Platform, Worker};
use dls_protocol::{Form, FromWorker, ToWorker};
use std::time::{Duration, Instant};

use model::fit::finish;
#[cfg(test)]
pub use model::fit::fit;
pub use model::fit::Scatter;
#[cfg(test)]
pub use model::fit::{fit_relative, fit_relative_judged, t95};
use model::load;
pub use model::ports::PortFindings;
pub use model::sizes::scaling;
pub use model::tuning::TUNING;
pub use model::{agree, factors_under_load, median, Calibration, WorkerCalibration, MIN_COST};

/// What to probe.
#[derive(Debug, Clone, Copy)]
pub struct CalibrateOptions {
    /// What one unit is: its shape, type, and whether B is shared.
    pub form: Form,
    /// Largest probe, in bytes sent.
    pub max_probe_bytes: u64,
    /// Repetitions per size (the median is kept); from three, a size
    /// whose first two agree within `TUNING.agree` is not repeated further.
    pub reps: usize,
    /// Longest wait for any one answer.
    pub timeout: Duration,
    /// Probes stop growing once one size took this many seconds (send and
    /// return together, or computing), after at least three sizes: long
    /// enough that timer and scheduling noise (a fraction of a
    /// millisecond) is small beside it, and slow workers are measured in
    /// seconds, not minutes. A line through three sizes or more gives the
    /// cost a unit; larger probes only confirm it.
    pub max_probe_seconds: f64,
    /// Idle workers hear from the master at least this often while another
    /// is measured (well within the workers' idle timeout).
    pub keep_alive: Duration,
    /// Measure the port model (`ports.rs`); without, one port is assumed.
    pub ports: bool,
    /// Repetitions of each port probe (the shortest is kept).
    pub port_reps: usize,
    /// Behind a full-duplex uplink, measure the fastest workers' costs
    /// while they receive, compute and return at once (`coupled.rs`):
    /// pipelines of about `TUNING.pipeline_seconds` each, seconds in
    /// all.
    pub under_load: bool,
    /// Told each step as it ends, for people waiting (`dls calibrate`
    /// at n = 768 takes 15-20 s); by default nobody.
    pub progress: fn(&str),
}

impl CalibrateOptions {
    /// How often idle workers hear a heartbeat: `keep_alive`, at least
    /// 10 ms apart.
    pub(super) fn keep_alive_period(&self) -> Duration {
        self.keep_alive.max(Duration::from_millis(10))
    }

    /// Square float64 products of size `n`.
    pub fn new(n: usize) -> Self {
        Self::for_form(Form::square(n as u32))
    }

    pub fn for_form(form: Form) -> Self {
        CalibrateOptions {
            form,
            max_probe_bytes: 16 << 20,
            reps: 3,
            timeout: Duration::from_secs(60),
            max_probe_seconds: 0.01,
            keep_alive: Duration::from_secs(5),
            ports: true,
            port_reps: 3,
            under_load: true,
            progress: |_| {},
        }
    }

    /// For a run without a platform, which corrects the costs as it goes
    /// (multi-round plans): each probe size once, each port probe twice
    /// (a port model taken wrong would cost more than the probes), and no
    /// costs under load: their pipelines (about two seconds a worker, up
    /// to `TUNING.group` workers) cost more than most runs they would
    /// correct, and calibration inside a batch (`session/cold.rs`) does
    /// not measure them either. One 2048² product on three loopback
    /// workers (2026-11-29): 4.2 s of its 5.1 s command went to them; its
    /// prediction with them and without was the same (0.48 s, measured
    /// 0.64-0.69 s either way).
    pub fn within_run(form: Form) -> Self {
        CalibrateOptions {
            reps: 1,
            port_reps: 2,
            under_load: false,
            ..Self::for_form(form)
        }
    }
}

/// How long a worker may show no sign of life (no byte, no answer to a
/// heartbeat) while the master waits for a probe's answer or writes one.
const STALL: Duration = Duration::from_secs(10);

pub(super) async fn answer(link: &mut Link, t: Duration, what: &str) -> Result<dls_protocol::Frame<FromWorker>> {
    let name = link.name.clone();
    let start = Instant::now();
    let mut heard = (link.conn.bytes_read(), Instant::now());
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            f = link.conn.read_frame() => f,
            _ = tick.tick() => {
                if link.conn.bytes_read() != heard.0 {
                    heard = (link.conn.bytes_read(), Instant::now());
                }
                if heard.1.elapsed() >= STALL {
                    bail!("worker {name:?}: no sign of life for {STALL:?} during the {what} (stopped, hung or cut off)");
                }
                if start.elapsed() >= t {
                    bail!("worker {name:?}: no answer to the {what} within {t:?}");
                }
                // A computing worker answers heartbeats: silence means stopped.
                link.conn.send(&ToWorker::Heartbeat { seq: 0 }).await.with_context(|| format!("worker {name:?}: {what}"))?;
                continue;
            }
        };
        if let Some(f) = judged(&name, what, frame)? {
            return Ok(f);
        }
    }
}

/// A frame read during a probe: an error if the worker failed, closed,
/// refused or said goodbye; `None` for a heartbeat's answer.
fn judged(
    name: &str,
    what: &str,
    frame: dls_protocol::Result<Option<dls_protocol::Frame<FromWorker>>>,
) -> Result<Option<dls_protocol::Frame<FromWorker>>> {
    match frame {
        Err(e) => bail!("worker {name:?}: {what}: {e}"),
        Ok(None) => bail!("worker {name:?} closed the connection during the {what}"),
        Ok(Some(f)) => match f.msg {
            FromWorker::HeartbeatAck { .. } => Ok(None),
            FromWorker::Bye => bail!("worker {name:?} is shutting down (it said goodbye during the {what})"),
            FromWorker::Error { code, message } => {
                bail!("worker {name:?} refused the {what}: {code:?}: {message}")
            }
            _ => Ok(Some(f)),
        },
    }
}

/// The next answer on the reading half of a worker's connection (while the
/// other half writes), within `t`.
pub(super) async fn answer_of<S: tokio::io::AsyncRead + Unpin>(
    reader: &mut dls_protocol::Connection<S, FromWorker, ToWorker>,
    name: &str,
    t: Duration,
    what: &str,
) -> Result<FromWorker> {
    let start = Instant::now();
    loop {
        let left = t.saturating_sub(start.elapsed());
        let Ok(frame) = tokio::time::timeout(left, reader.read_frame()).await else {
            bail!("worker {name:?}: no answer to the {what} within {t:?}");
        };
        if let Some(f) = judged(name, what, frame)? {
            return Ok(f.msg);
        }
    }
}

/// Probes carry the values of a unit's inputs and results as float64
/// values (a unit of float32 products is rounded up to whole values).
fn unit_values(form: &Form) -> (u64, u64) {
    (form.in_bytes(1).div_ceil(8), form.out_bytes(1).div_ceil(8))
}

/// Probe every worker: links in turn, then computing on all at once.
pub async fn calibrate(links: &mut [Link], opts: &CalibrateOptions) -> Result<Calibration> {
    let (workers, ports, failures) = calibrate_each(links, opts, true).await;
    if let Some((_, e)) = failures.into_iter().next() {
        return Err(e);
    }
    Ok(Calibration {
        form: opts.form,
        workers,
        ports,
    })
}

/// What every worker measured, the port model, and each failure by link
/// index.
type Measured = (
    Vec<WorkerCalibration>,
    Option<PortFindings>,
    Vec<(usize, anyhow::Error)>,
);

/// Measure every worker at once, as in a run: its link (transfers one at a
/// time on the port) while it computes (`compute.rs`); then the port model
/// (`ports.rs`). Returns the calibrations of the workers that never
/// failed, the port model, and each failure by link index; with
/// `stop_at_first`, nothing more is measured after a failure.
async fn calibrate_each(links: &mut [Link], opts: &CalibrateOptions, stop_at_first: bool) -> Measured {
    for l in links.iter_mut() {
        l.conn.set_write_stall_timeout(Some(STALL));
    }
    let t0 = std::time::Instant::now();
    let found = compute::under_load(links.iter_mut().collect(), opts).await;
    let secs = t0.elapsed().as_secs_f64();
    tracing::debug!(secs, "links and computing measured");
    (opts.progress)(&format!("links and computing measured ({secs:.1} s)"));
    let (mut probed, mut failed) = (Vec::new(), Vec::new());
    for (i, r) in found.into_iter().enumerate() {
        match r {
            Ok(p) => probed.push((i, p)),
            Err(e) => failed.push((i, e)),
        }
    }
    if stop_at_first && !failed.is_empty() {
        return (Vec::new(), None, failed);
    }
    let measured: Vec<(usize, compute::Measured)> = probed.iter().map(|(i, p)| (*i, p.measured())).collect();
    let t0 = std::time::Instant::now();
    let mut ports = ports_with(with_measured(links, &measured), opts).await;
    let secs = t0.elapsed().as_secs_f64();
    tracing::debug!(secs, "port model measured");
    if opts.ports && probed.len() > 1 {
        (opts.progress)(&format!("port model measured ({secs:.1} s)"));
    }
    let room: Vec<(usize, u64, u64)> = (probed.iter())
        .map(|(i, p)| (*i, load::room(p.max_units, p.max_load), p.max_units))
        .collect();
    let mut workers: Vec<WorkerCalibration> = (probed.into_iter())
        .map(|(i, p)| finish(&links[i].name, p.samples, p.scatter, p.max_load))
        .collect();
    if let Some(found) = (ports.as_mut())
        .filter(|p| p.uplink.is_some_and(|u| u.duplex))
        .filter(|_| opts.under_load)
    {
        let t0 = std::time::Instant::now();
        under_load(links, &room, &mut workers, opts).await;
        tracing::debug!(secs = t0.elapsed().as_secs_f64(), "costs under load measured");
        if let Err(e) = ports::again(with_measured(links, &measured), found, opts).await {
            // The first reading stands; a worker that failed shows again
            // in the run.
            tracing::warn!("sends at once not timed again: {e:#}");
        }
    }
    (workers, ports, failed)
}

/// With two lanes, the costs of the workers with the fastest links (the
/// ones the uplink's share goes to; as many as the port model's group)
/// while they receive, compute and return at once (`coupled.rs`), one
/// worker at a time on the port. `room` gives each calibrated worker (in
/// `workers`' order) its link's index, the units a pipeline may hold and
/// the units of its largest probe. A probe that fails, or a worker whose
/// memory holds too few chunks for a pipeline, leaves its worker's costs
/// as they were and not measured under load (the failure shows again in
/// the run).
async fn under_load(
    links: &mut [Link],
    room: &[(usize, u64, u64)],
    workers: &mut [WorkerCalibration],
    opts: &CalibrateOptions,
) {
    let mut order: Vec<usize> = (0..workers.len()).collect();
    order.sort_by(|&a, &b| workers[a].send.slope.total_cmp(&workers[b].send.slope));
    for &j in order.iter().take(TUNING.group) {
        let t0 = std::time::Instant::now();
        let (link, holds, largest) = room[j];
        let w = &workers[j];
        let alone = load::Alone {
            c: w.send.slope.max(MIN_COST),
            w: w.compute.slope.max(MIN_COST),
            d: w.ret.slope.max(MIN_COST),
            ret_latency: w.ret.intercept.max(0.0),
            room: holds,
            largest,
        };
        match coupled::measure(&mut links[link], &alone, opts).await {
            Ok(Some(probe)) => {
                tracing::debug!(worker = %workers[j].name, ?alone, ?probe, "pipeline under load");
                workers[j].under_load = Some(load::factors(&alone, std::slice::from_ref(&probe)));
            }
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(worker = %workers[j].name, "costs under load not measured: {e:#}");
                continue;
            }
        }
        (opts.progress)(&format!(
            "{}: costs under load measured ({:.1} s)",
            workers[j].name,
            t0.elapsed().as_secs_f64()
        ));
    }
}

/// The links measured (`measured`, by index), each with its
/// measurements: what the port probes are sized from.
fn with_measured<'a>(
    links: &'a mut [Link],
    measured: &[(usize, compute::Measured)],
) -> Vec<(&'a mut Link, compute::Measured)> {
    (links.iter_mut().enumerate())
        .filter_map(|(i, l)| Some((l, measured.iter().find(|m| m.0 == i)?.1)))
        .collect()
}

/// The port model of `links` whose seconds a unit each way (send, return)
/// were measured elsewhere (a run's first chunks), as [`calibrate`]
/// measures it: `None` with fewer than two workers, or when a probe
/// failed.
pub async fn ports_of(links: &mut [Link], costs: &[(f64, f64)], opts: &CalibrateOptions) -> Option<PortFindings> {
    let jobs = links
        .iter_mut()
        .zip(costs)
        .map(|(l, &(c, d))| {
            let max_units = compute::max_units(l, opts);
            (l, compute::Measured { c, d, max_units })
        })
        .collect();
    ports_with(jobs, opts).await
}

/// The port model of the links in `jobs`, each with its link
/// measurements: `None` with fewer than two, when asked not to measure
/// it, or when a probe failed (its worker's failure shows again in the
/// run).
async fn ports_with(jobs: Vec<(&mut Link, compute::Measured)>, opts: &CalibrateOptions) -> Option<PortFindings> {
    if jobs.len() < 2 || !opts.ports {
        return None;
    }
    match ports::measure(jobs, opts).await {
        Ok(found) => Some(found),
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the port model could not be measured; assuming one port");
            None
        }
    }
}

/// Calibrate every worker of the pool that can be measured; a worker that
/// refuses, dies or stalls during its probes is left out (its link
/// dropped) and returned with the reason. Fails only when none is left.
pub async fn calibrate_available(pool: &mut Pool, opts: &CalibrateOptions) -> Result<(Calibration, Vec<LeftOut>)> {
    let links = pool.links_mut();
    let (workers, ports, failures) = calibrate_each(links, opts, false).await;
    let left: Vec<LeftOut> = failures
        .iter()
        .map(|(i, e)| LeftOut {
            worker: links[*i].name.clone(),
            reason: format!("{e:#}"),
        })
        .collect();
    let failed: Vec<usize> = failures.iter().map(|f| f.0).collect();
    pool.remove(&failed);
    if workers.is_empty() {
        bail!("no worker could be calibrated: {}", LeftOut::list(&left));
    }
    Ok((
        Calibration {
            form: opts.form,
            workers,
            ports,
        },
        left,
    ))
}

impl Calibration {
    /// The platform: per-unit slopes, memory bounds as `max_load`.
    pub fn platform(&self) -> Result<Platform> {
        let workers = self
            .workers
            .iter()
            .map(|w| {
                let [fc, fw, fd] = w.under_load.unwrap_or([1.0; 3]);
                Worker {
                    name: w.name.clone(),
                    c: w.send.slope.max(MIN_COST) * fc,
                    w: w.compute.slope.max(MIN_COST) * fw,
                    d: w.ret.slope.max(MIN_COST) * fd,
                    max_load: Some(w.max_load),
                    // A negative intercept is noise around no latency at all.
                    latency: Latency {
                        send: w.send.intercept.max(0.0),
                        compute: w.compute.intercept.max(0.0),
                        ret: w.ret.intercept.max(0.0),
                    },
                    under_load: w.under_load,
                    return_receiving: None,
                }
            })
            .collect();
        Ok(Platform::new(workers)?.with_uplink(self.ports.as_ref().and_then(|p| p.uplink)))
    }

    /// A platform file, with the fits as comments.
    pub fn to_toml(&self) -> Result<String> {
        self.to_toml_with(None)
    }

    /// A platform file with, for each worker, its scaling model (from
    /// [`scaling`], in the same order).
    pub fn to_toml_with(&self, scaling: Option<&[Scaling]>) -> Result<String> {
        let mut out = format!(
            "# Written by `dls calibrate` for products of {form}: one unit is one product\n\
             # ({sent} sent, C returned). c, w, d are the slopes (seconds per unit) of\n\
             # least-squares lines through the probes; their intercepts are the per-message\n\
             # latencies (send_latency, compute_latency, return_latency), used by `rounds`.\n",
            form = self.form,
            sent = if self.form.shared_b { "A" } else { "A and B" },
        );
        for w in &self.workers {
            out.push_str(&format!(
                "# {}: send {:.3e} s/unit + {:.3e} s (R² {:.4}); compute {:.3e} + {:.3e} (R² {:.4}); return {:.3e} + {:.3e} (R² {:.4})\n",
                w.name,
                w.send.slope,
                w.send.intercept,
                w.send.r2,
                w.compute.slope,
                w.compute.intercept,
                w.compute.r2,
                w.ret.slope,
                w.ret.intercept,
                w.ret.r2
            ));
        }
        for w in &self.workers {
            if let Some(f) = w.under_load {
                out.push_str(&format!(
                    "# {}: receiving, computing and returning at once (the steady state of a pipeline of chunks):\n\
                     #   {} its costs one at a time (c, w, d below include these)\n",
                    w.name,
                    factors_under_load(f)
                ));
            }
        }
        if let Some(p) = &self.ports {
            out.push_str(&format!(
                "# ports: {}. A send and a return at once: overlap {:.2} (1: they take turns, 2: both at full\n\
                 # speed); transfers to {} workers at once carried {:.2}x the fastest link's rate out, {:.2}x back.\n",
                p.model, p.overlap, p.group, p.send_gain, p.return_gain
            ));
        }
        out.push('\n');
        let mut file = crate::config::platform_file::PlatformFile::from_platform(&self.platform()?);
        file.set_form(&self.form);
        if let Some(models) = scaling {
            for (entry, s) in file.worker.iter_mut().zip(models) {
                entry.set_scaling(s);
            }
        }
        out.push_str(&toml::to_string(&file)?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
