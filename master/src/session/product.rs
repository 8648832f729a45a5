//! One large product start to end: costs per value and per flop from a
//! platform measured for some products, the plan
//! ([`dls_lp::product::plan_product`]), the run, and what it measured.

use super::align;
use super::workers::{RunError, Workers};
use crate::output::report::Waited;
use crate::runtime::calibrate::Calibration;
use crate::runtime::link::Link;
use crate::runtime::log;
use crate::runtime::pool::{LeftOut, Pool};
use crate::runtime::product::shell::{self, ProductOptions};
use crate::runtime::product::{Blocks, ProductJob};
use anyhow::{anyhow, Result};
use dls_core::product::Measured;
use dls_lp::product::{plan_product, Distribution, ProductPlan, ProductRequest, ProductWorker};
use dls_lp::{Platform, Ports};
use dls_protocol::{DType, Form, JobId, Shape};
use std::sync::Arc;
use std::time::Instant;

/// How to plan and run one product.
#[derive(Debug, Clone, Copy)]
pub struct ProductConfig {
    pub distribution: Distribution,
    /// The port model: `Some(1)` one port, `Some(2)` a send and a return
    /// at once; `None`, what calibration measured.
    pub ports: Option<u8>,
    /// The most bytes of A and B in one panel.
    pub panel_bytes: u64,
    /// The most of A + B + C the master holds of a returned piece, as a
    /// fraction of the three.
    pub piece_share: f64,
    /// The most of A + B + C the panels in flight hold, all links together,
    /// unless that makes panels smaller than `panel_floor_bytes`.
    pub panel_share: f64,
    /// The fewest bytes of A and B in one panel (of a product large enough
    /// to fill it): each panel is a message on the port, with its own
    /// costs on both sides that the plan does not count. A 2048² product
    /// on three workers (5% of A + B + C makes panels of 420 KB there) ran
    /// 0.95-0.97 s in panels of 420 KB and 0.74-0.82 s in panels of 1 MiB
    /// (links of 500 MB/s), 1.12-1.19 s against 0.95-1.11 s (300 MB/s).
    /// The master then holds at most 4 × workers × this in panels.
    pub panel_floor_bytes: u64,
    /// Leave out workers whose links do not pay off.
    pub select: bool,
    pub options: ProductOptions,
}

impl Default for ProductConfig {
    fn default() -> Self {
        ProductConfig {
            distribution: Distribution::Heterogeneous,
            ports: None,
            panel_bytes: 2 << 20,
            piece_share: 0.08,
            panel_share: 0.05,
            panel_floor_bytes: 1 << 20,
            select: true,
            options: ProductOptions::default(),
        }
    }
}

/// Everything a product's run leaves behind.
pub struct ProductRun {
    /// The workers, in the pool's order (the plan's indices).
    pub names: Vec<String>,
    pub costs: Vec<ProductWorker>,
    pub plan: ProductPlan,
    pub measured: Measured,
    /// Workers left out when connecting or calibrating.
    pub left_out: Vec<LeftOut>,
    /// Seconds spent planning.
    pub plan_secs: f64,
    /// When the run's clock started (its first send went out at once).
    pub started: Instant,
    /// What the caller waited for, from connecting on ([`Workers::run_product`]).
    pub waited: Option<Waited>,
    /// Processor seconds the master used during the run (all its threads:
    /// reading panels, checking pieces, the port), if the system says.
    pub master_cpu_secs: Option<f64>,
    /// The calibration made for this product when no platform was given
    /// ([`Workers::run_product`]): what a later product of the same kind
    /// on the same workers can be planned with (`Calibration::to_toml`).
    pub calibrated: Option<Calibration>,
}

/// The products calibration measures for one product of n×k by k×m on
/// workers the smallest of whose memory limits is `memory` bytes: square,
/// of its type, a sixteenth of its smallest side within 128 to 384 (never
/// more than that side), and small enough that a probe of two products
/// fits that memory (a product needs three side² matrices; a worker may
/// hold a tenth of its share and less).
///
/// The probes' data grows with the side's square and is sent before the
/// product starts: at 384 they carried three times the inputs of a 1024²
/// product on three workers. Smaller probes also predicted better, their
/// cost per flop nearer what adding panels into a piece costs: three
/// loopback workers (300 MB/s, slowdowns 2, 4, 6), measured/predicted of
/// 2048² products 1.03-1.05 calibrated at 128, 1.21 at 256, 1.23-1.30 at
/// 384; of 1024² products 1.29-1.30, 1.29-1.43, 1.48-1.53 (2026-11-29,
/// `docs/one-product.md`).
pub fn calibration_form(n: usize, k: usize, m: usize, dtype: DType, memory: u64) -> Form {
    let fits = ((memory / (6 * dtype.size())) as f64).sqrt() as usize;
    let smallest = n.min(k).min(m);
    let side = (smallest / 16).clamp(128, 384).min(smallest).max(16).min(fits).max(1) as u32;
    Form {
        shape: Shape::square(side),
        dtype,
        shared_b: false,
    }
}

/// The costs of `platform` (measured for products of `form`) per value
/// sent and returned and per flop, in the links' order, with what each
/// worker's memory holds of values of `dtype`.
pub fn product_costs(platform: &Platform, links: &[Link], form: &Form, dtype: DType) -> Result<Vec<ProductWorker>> {
    let aligned = align(platform, links, form)?;
    // A piece of one element and its panels one deep (two values each).
    let least = (1 + 2 * dls_lp::product::WINDOW as u64) * dtype.size();
    if let Some(l) = links.iter().find(|l| l.caps.memory_limit < least) {
        anyhow::bail!(
            "worker {:?}: its memory limit ({} bytes) cannot hold one element of C and its panels",
            l.name,
            l.caps.memory_limit
        );
    }
    let (ins, outs, flops) = (form.in_len(1) as f64, form.shape.c_len() as f64, form.shape.flops());
    Ok(aligned
        .workers()
        .iter()
        .zip(links)
        .map(|(w, l)| ProductWorker {
            send: w.c / ins,
            ret: w.d / outs,
            flop: w.w / flops,
            memory: Some(l.caps.memory_limit / dtype.size()),
        })
        .collect())
}

/// The request for `job` under `cfg` on a platform whose measured port
/// model is `measured` (its costs measured for products of `form`).
pub fn request(job: &ProductJob, cfg: &ProductConfig, measured: Ports, form: &Form, workers: usize) -> ProductRequest {
    let (n, k, m) = job.dims();
    let size = job.dtype().size();
    let mut req = ProductRequest::new(n, k, m);
    req.distribution = cfg.distribution;
    req.duplex = match cfg.ports {
        Some(1) => false,
        Some(_) => true,
        None => !measured.is_one_port(),
    };
    // Behind a shared full-duplex uplink sends to several workers may
    // cross, unless one port was asked for.
    req.uplink = match (cfg.ports, measured.uplink()) {
        (None, Some(u)) if u.duplex => u.send / form.in_len(1) as f64,
        _ => 0.0,
    };
    let all = (n * k + k * m + n * m) as f64;
    // Each worker's link holds a panel going out, the next read ahead and
    // two being checked: all of them together at most `panel_share` of
    // A + B + C, unless panels would then be smaller than
    // `panel_floor_bytes`.
    let held = (cfg.panel_share * all / (4 * workers.max(1)) as f64) as u64;
    let floor = cfg.panel_floor_bytes / size;
    req.panel_values = (cfg.panel_bytes / size).min(held.max(floor)).max(1);
    // A piece's C comes back in one frame: at most 1 GiB of it.
    req.piece_values = ((cfg.piece_share * all) as u64).clamp(1, (1 << 30) / size);
    req.select = cfg.select && cfg.distribution == Distribution::Heterogeneous;
    req
}

/// Plan `job` on `platform` (measured for products of `form`) and run it
/// on the pool, every piece of C to `sink`.
pub async fn run_product_on(
    pool: &mut Pool,
    platform: &Platform,
    form: &Form,
    job: Arc<ProductJob>,
    cfg: &ProductConfig,
    sink: &mut dyn Blocks,
    mut on_piece: impl FnMut(usize) + Send,
) -> Result<ProductRun> {
    let costs = product_costs(platform, pool.links(), form, job.dtype())?;
    let req = request(&job, cfg, platform.measured_ports(), form, pool.len());
    let (n, k, m) = job.dims();
    let planning = Instant::now();
    let plan = plan_product(&costs, &req).map_err(|e| anyhow!("planning the product {n}×{k} by {k}×{m}: {e}"))?;
    let plan_secs = planning.elapsed().as_secs_f64();
    let names = pool.names();
    log::product_plan(&names, &plan);
    let started = Instant::now();
    let cpu = crate::output::report::cpu_secs();
    let measured = shell::execute(pool, &costs, &plan, job, JobId(1), &cfg.options, sink, &mut on_piece).await?;
    let master_cpu_secs = cpu.zip(crate::output::report::cpu_secs()).map(|(a, b)| b - a);
    for loss in &measured.losses {
        log::product_loss(&names, loss);
    }
    Ok(ProductRun {
        names,
        costs,
        plan,
        measured,
        left_out: Vec::new(),
        plan_secs,
        started,
        waited: None,
        master_cpu_secs,
        calibrated: None,
    })
}

impl Workers {
    /// One product start to end: connect, take the costs from `platform`
    /// (with the products it was measured for) or calibrate now, plan, run
    /// with every piece of C to `sink`, and close the connections whatever
    /// happens.
    pub async fn run_product(
        &self,
        platform: Option<(Platform, Form)>,
        job: Arc<ProductJob>,
        cfg: &ProductConfig,
        sink: &mut dyn Blocks,
        on_piece: impl FnMut(usize) + Send,
    ) -> std::result::Result<ProductRun, RunError> {
        let t0 = Instant::now();
        let (mut pool, mut left) = self.connect().await.map_err(RunError::Workers)?;
        let connect_secs = t0.elapsed().as_secs_f64();
        let mut calibration_secs = 0.0;
        let mut calibrated = None;
        let done = async {
            let (platform, form) = match platform {
                Some(p) => p,
                None => {
                    let (n, k, m) = job.dims();
                    let memory = pool
                        .links()
                        .iter()
                        .map(|l| l.caps.memory_limit)
                        .min()
                        .unwrap_or(u64::MAX);
                    let form = calibration_form(n, k, m, job.dtype(), memory);
                    (self.notes)(&format!(
                        "calibrating {} worker(s) (no --platform given) ...",
                        pool.len()
                    ));
                    let measuring = Instant::now();
                    let (cal, l) = self.calibrate(&mut pool, form, true).await.map_err(RunError::Workers)?;
                    calibration_secs = measuring.elapsed().as_secs_f64();
                    left.extend(l);
                    let platform = cal.platform().map_err(RunError::Workers)?;
                    calibrated = Some(cal);
                    (platform, form)
                }
            };
            run_product_on(&mut pool, &platform, &form, job, cfg, sink, on_piece)
                .await
                .map_err(RunError::Batch)
        }
        .await;
        pool.close().await;
        let mut done = done?;
        done.left_out = left;
        done.calibrated = calibrated;
        let first = done
            .measured
            .transfers
            .iter()
            .map(|t| t.start)
            .fold(f64::INFINITY, f64::min);
        let started = done.started.saturating_duration_since(t0).as_secs_f64();
        done.waited = Some(Waited {
            connect_secs,
            calibration_secs,
            plan_secs: done.plan_secs,
            first_send_secs: started + if first.is_finite() { first } else { 0.0 },
            wall_secs: t0.elapsed().as_secs_f64(),
        });
        Ok(done)
    }
}
