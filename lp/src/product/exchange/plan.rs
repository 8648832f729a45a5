//! Plans with the exchange: the areas a step's pace allows each worker,
//! the depth of the steps and the bands of each rectangle within its
//! worker's memory, the port, and the bound.

use super::timing::{self, banded};
use crate::product::{
    bound as panels_bound, even, more_sends, Piece, Port, ProductBound, ProductPlan, ProductRequest, ProductWorker,
    WINDOW,
};
use crate::rectangles::Rect;

/// Bands tried for each rectangle's columns: more let C go back sooner
/// behind the last, and make more messages.
const BANDS: [usize; 6] = [1, 2, 3, 4, 6, 8];

/// How an exchange is laid out beyond its rectangles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub bands: usize,
    pub port: Port,
}

/// Areas for the exchange, where a step goes at the pace of its slowest
/// worker (its groups wait for it, and their members for them): the
/// least time `t` a unit of depth takes such that the areas each worker
/// receives (`2·√(a·n·m)` values on its link, as a square) and computes
/// (`2·a·n·m` flops) within `t` cover C. Speeds alone would give a fast
/// processor behind a slow link an area whose parts hold back its row and
/// column peers.
pub fn areas(workers: &[ProductWorker], req: &ProductRequest, subset: &[usize]) -> Vec<f64> {
    let nm = (req.n * req.m) as f64;
    let area = |i: usize, t: f64| {
        let w = &workers[i];
        let by_link = (t / (2.0 * w.send)).powi(2) / nm;
        let by_flops = t / (2.0 * w.flop * nm);
        by_link.min(by_flops)
    };
    let covered = |t: f64| subset.iter().map(|&i| area(i, t)).sum::<f64>();
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while covered(hi) < 1.0 && hi < 1e300 {
        (lo, hi) = (hi, hi * 2.0);
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if covered(mid) < 1.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let areas: Vec<f64> = subset.iter().map(|&i| area(i, hi)).collect();
    let total: f64 = areas.iter().sum();
    areas.iter().map(|a| a / total).collect()
}

/// The depth of the steps for `rects` in `bands`: each panel within
/// `req.panel_values`, and each worker's memory holding its band's C and
/// the one before, A's rows of its rectangle (kept for the later bands),
/// and `WINDOW` panels. `None` if some worker cannot hold that at a depth
/// of one.
fn depth(workers: &[ProductWorker], req: &ProductRequest, rects: &[Rect], bands: usize) -> Option<usize> {
    let mut kp = req.k as u64;
    for r in rects {
        let (h, wb) = (r.height as u64, r.width.div_ceil(bands) as u64);
        let mem = workers[r.worker].memory.unwrap_or(u64::MAX);
        let kept = if bands > 1 { req.k as u64 * h } else { 0 };
        let c = if bands > 1 { 2 * h * wb } else { h * wb };
        let room = mem.checked_sub(kept + c)?;
        let by_memory = room / (WINDOW as u64 * (h + wb));
        if by_memory == 0 {
            return None;
        }
        kp = kp.min(by_memory).min((req.panel_values / (h + wb)).max(1));
    }
    Some(kp.max(1) as usize)
}

/// The plan of `rects` with the exchange, in `shape` or the best of the
/// bands that fit and the ports the request allows; `None` if no band
/// count fits every worker.
pub fn plan(
    workers: &[ProductWorker],
    req: &ProductRequest,
    rects: Vec<Rect>,
    shape: Option<Shape>,
) -> Option<ProductPlan> {
    let slowest = rects.iter().map(|r| workers[r.worker].send).fold(0.0, f64::max);
    let ports: Vec<Port> = match shape {
        Some(s) => vec![s.port],
        None => std::iter::once(Port::single(req.duplex))
            .chain(more_sends(req, rects.len(), slowest))
            .collect(),
    };
    let bands: Vec<usize> = match shape {
        Some(s) => vec![s.bands],
        None => BANDS.to_vec(),
    };
    let mut best: Option<(Port, timing::ExchangeTiming)> = None;
    for &b in bands.iter().filter(|&&b| banded(&rects, b)) {
        let Some(kp) = depth(workers, req, &rects, b) else {
            continue;
        };
        let steps = even(0, req.k, req.k.div_ceil(kp));
        for &port in &ports {
            let t = timing::time(workers, &rects, &steps, b, port, WINDOW);
            if best.as_ref().is_none_or(|(_, x)| t.makespan < x.makespan) {
                best = Some((port, t));
            }
        }
    }
    let (port, timing) = best?;
    let pieces = (rects.iter())
        .flat_map(|r| {
            even(r.col, r.width, timing.bands).into_iter().map(|cols| Piece {
                worker: r.worker,
                rect: Rect {
                    col: cols.start,
                    width: cols.len(),
                    ..*r
                },
                panels: timing.steps.clone(),
            })
        })
        .collect();
    let direct = panels_bound(workers, req, &rects, &[]);
    Some(ProductPlan {
        request: *req,
        enrolled: rects.iter().map(|r| r.worker).collect(),
        bound: bound(workers, req, &rects, direct),
        rects,
        pieces,
        window: WINDOW,
        port,
        timing: crate::product::Timing {
            ops: Vec::new(),
            times: Vec::new(),
            makespan: timing.makespan,
        },
        exchange: Some(timing),
        notes: Vec::new(),
    })
}

/// The bound with the exchange: the master sends A and B once (`k·(n +
/// m)` values, at the fastest link's cost, or through the uplink when
/// sends cross behind it, whichever is less), C comes back (one return at
/// a time at each worker's cost, or through the uplink when returns
/// cross, whichever is less), and each worker's own link carries what a
/// square of its area needs, `2·k·√a` values.
fn bound(workers: &[ProductWorker], req: &ProductRequest, rects: &[Rect], direct: ProductBound) -> ProductBound {
    let k = req.k as f64;
    let once = k * (req.n + req.m) as f64;
    let fastest = rects
        .iter()
        .map(|r| workers[r.worker].send)
        .fold(f64::INFINITY, f64::min);
    let one_at_a_time: f64 = rects.iter().map(|r| workers[r.worker].ret * r.area() as f64).sum();
    let c: f64 = rects.iter().map(|r| r.area() as f64).sum();
    let (sends, returns) = match req.duplex && req.uplink > 0.0 {
        true => (once * fastest.min(req.uplink), one_at_a_time.min(c * req.uplink)),
        false => (once * fastest, one_at_a_time),
    };
    let port = if req.duplex {
        sends.max(returns)
    } else {
        sends + returns
    };
    let links = (rects.iter())
        .map(|r| workers[r.worker].send * 2.0 * k * (r.area() as f64).sqrt())
        .fold(0.0, f64::max);
    ProductBound {
        port,
        links,
        makespan: direct.compute.max(port).max(links),
        sent: once as u64,
        ..direct
    }
}
